"""The verdict card of one implementation and judged version, generated from its run (card.md, card.html).

A card says, from the records alone: the conformance status (``conformance._records.verdict``) and the gate; the
defects found (catalogue id, kind, fix level, the measured figure); the features the implementation lacks and
refuses loudly (declared absent, or an ``Unsupported`` at build time); the metric Δ against the reference band
(dataset and loss named) beside the study's published Δ; the study's expected outcome per check (docs/study.md) beside ours,
with agreement computed; coverage; what was judged (version / commit), the suite version and the environment.
Interpretation that data cannot carry stays in the hand-written ``README.md`` of the implementation's verdict
folder, which the card links.

:func:`build_card` computes the content once; :func:`render_markdown` and :func:`render_html` print it.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Any

from gru4rec_conformance.conformance._records.verdict import PREREQUISITES
from gru4rec_conformance.datasets import study
from gru4rec_conformance.reports.agreement import agreement_text, cells
from gru4rec_conformance.reports.agreement import tally as agreement_tally
from gru4rec_conformance.reports.compact import dataset_matrix, judged_version
from gru4rec_conformance.reports.facts import headline_metrics, negative_control, refreshed_text, suite_currency
from gru4rec_conformance.reports.render import md_table as _table
from gru4rec_conformance.reports.render import render_html as _render
from gru4rec_conformance.reports.results import RunData

__all__ = ["build_card", "render_markdown", "render_html", "study_rows"]

_HEADLINE = ("recall@20", "mrr@20")
#: Declared properties whose absence is no missing feature (the reference declares them false too).
_NOT_A_LACK = ("needs_categories", "fixed_batch_shape")


def study_rows(run: RunData, conformance: Any) -> list[dict[str, str]]:
    """The study's expected outcomes (docs/study.md) for this implementation beside our outcome of the same checks, with agreement
    (:func:`gru4rec_conformance.reports.agreement.cells`; ``ours_note`` repeats its ``our_note``)."""
    return [{**cell, "ours_note": cell["our_note"]} for cell in cells(run, conformance)]


def _missing_features(run: RunData) -> list[dict[str, Any]]:
    """Features declared absent (with the number of checks they made n/a) and hyperparameters the adapter refused
    at build time (``Unsupported``)."""
    declared = run.impl.get("features") or {}
    absent = [f for f, v in declared.items()
              if not v and not f.startswith(("hook:", "device:")) and f not in _NOT_A_LACK]  # fmt: skip
    n_checks: collections.Counter[str] = collections.Counter()
    refused: dict[str, str] = {}
    for r in run.results:
        if r.get("outcome") != "skipped-unsupported":
            continue
        reason = str(r.get("reason") or "")
        m = re.search(r": needs (.+?) \(not declared\)", reason)
        if m:
            for need in (s.strip() for s in m.group(1).split(",")):
                n_checks[need] += 1
        elif reason.startswith("unsupported by"):
            what = reason.removeprefix(f"unsupported by {run.impl.get('name', '')}:").strip()
            refused.setdefault(what.split(" ")[0], what[:200])
    out = sorted(({"feature": f, "how": "declared absent", "checks": n_checks.get(f, 0)} for f in absent),
                 key=lambda m: -m["checks"])  # fmt: skip
    out += [{"feature": f, "how": f"refused at build time: {why}", "checks": None} for f, why in refused.items()]
    return out


def _environment(run: RunData) -> list[tuple[str, str]]:
    h = run.header
    impl = run.impl
    fw = ", ".join(f"{k} {v}" for k, v in (h.get("frameworks") or {}).items())
    return [
        ("Device", str(h.get("device") or "cpu")),
        ("Isolation", str(impl.get("isolation") or "in-process")),
        ("Frameworks", fw or "–"),
        ("Platform", str((h.get("platform") or {}).get("platform") or "?")),
        ("Command", " ".join(str(a) for a in h.get("command") or ())),
        ("Started / finished", f"{h.get('started', '?')} / {(run.end or {}).get('finished', '– (no end record)')}"),
        *([("Refreshed from", refreshed_text(run))] if h.get("refresh") else []),
    ]


def build_card(run: RunData, readme: Path | None = None, readme_link: str | None = None) -> dict[str, Any]:
    """The card's content as plain data.

    Args:
        run: the run (committed verdict or report folder).
        readme: the hand-written README of the implementation's verdict folder, if any (linked, not copied).
        readme_link: how the card links it (a relative path); defaults to ``str(readme)``.
    """
    impl = run.impl
    conf = run.conformance()
    gate = (run.end or {}).get("gate")
    current, suite_note = suite_currency(run)
    cov = conf.coverage
    by_kind = [{"kind": k, "ran": ran, "applicable": app} for k, (ran, app) in cov.by_kind.items()]
    defects = [{"check_id": d.check_id or "–", "check": d.check, "kind": d.kind, "ids": ", ".join(d.defect_ids) or "–",
                "fix_level": d.fix_level or "–", "figure": d.figure or "–", "outcome": d.outcome,
                "follows": ", ".join(d.may_follow_from) or "–"}
               for d in conf.defects]  # fmt: skip
    # failures of other groups under the failed prerequisite they may follow from (verdict.attribute_root_causes)
    root_causes = [{"cause": cause, "what": PREREQUISITES.get(cause, "prerequisite"),
                    "checks": list(dict.fromkeys(d.check_id or d.check for d in ds)), "n": len(ds)}
                   for cause, ds in conf.root_causes().items()]  # fmt: skip
    brows = study_rows(run, conf)
    tag = dataset_matrix(run)
    matrix = (None if tag is None else
              f"Metric checks on the datasets '{run.header.get('dataset')}' (--dataset): a metric matrix, not a "
              "verdict; the checks it did not select count as not tested here. The implementation's verdict is "
              "its run on the default dataset.")  # fmt: skip
    return {
        "title": f"{impl.get('name', '?')} @ {judged_version(run)}" + ("" if tag is None else f" · datasets {tag}"),
        "matrix_note": matrix,
        "name": str(impl.get("name") or "?"),
        "family": impl.get("family", "?"),
        "role": impl.get("role", "?"),
        "description": impl.get("description") or "",
        "homepage": impl.get("homepage") or "",
        "negative_control": negative_control(impl),
        "version": str(impl.get("version") or "unknown"),
        "judged": judged_version(run),
        "suite": str((run.header.get("suite") or {}).get("string") or "?"),
        "suite_current": current,
        "suite_note": suite_note,
        "run_status": run.status,
        "status": conf.status,
        "status_label": conf.status_label(),
        "features": None if conf.features is None else conf.features.report_text(),
        "status_line": conf.line(str(impl.get("name") or "?")),
        "reasons": list(conf.reasons),
        "counts_by_kind": dict(conf.counts_by_kind),
        "gate": None if gate is None else ("PASSED" if gate.get("passed") else "FAILED"),
        "gate_problems": list((gate or {}).get("problems") or []),
        "coverage": {
            "figure": cov.figure(),
            "percent": cov.percent,
            "ran": cov.ran,
            "applicable": cov.applicable,
            "feature_absent": cov.feature_absent,
            "why": cov.why_not_tested(),
            "not_applicable": dict(cov.not_applicable),
            "unknown": cov.unknown_not_run,
        },  # fmt: skip
        "by_kind": by_kind,
        "defects": defects,
        "root_causes": root_causes,
        "missing": _missing_features(run),
        "metrics": headline_metrics(run, _HEADLINE),
        "study_decl": " / ".join(str(v) for v in (impl.get("study") or {}).values()) or None,
        "study_level": study.fix_level(impl.get("study")),
        "study_rows": brows,
        "study_tally": agreement_tally(brows),
        "environment": _environment(run),
        "readme": readme_link or (str(readme) if readme else None),
        "source": str(run.directory),
    }


def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x * 100:+.{digits}f}%"


def render_markdown(c: dict[str, Any]) -> str:
    """card.md: the card as GitHub-flavoured Markdown."""
    lines = [f"# {c['title']}", ""]
    if c["description"]:
        lines += [c["description"], ""]
    if c["negative_control"]:
        lines += [f"> **Negative control** — {c['negative_control']}.", ""]
    if c.get("matrix_note"):
        lines += [f"> **{c['matrix_note']}**", ""]
    gate = f" · gate **{c['gate']}**" if c["gate"] else ""
    lines += [f"**{c['status_label']}**{gate} · coverage {c['coverage']['figure']}", ""]
    if c["features"]:
        lines += [f"Feature coverage: {c['features']}.", ""]
    lines += [f"- {r}" for r in c["reasons"]]
    if c["suite_current"] is False:
        lines += ["", f"> **{c['suite_note']}**: rerun it to judge it with the current checks."]
    lines += ["", "## Judged", ""]
    lines += _table(["", ""], [["Implementation version", c["version"]], ["Judged (commit / version)", c["judged"]],
                               ["Suite version", f"{c['suite']} ({c['suite_note']})"], ["Run", c["run_status"]],
                               ["Homepage", c["homepage"] or "–"]])  # fmt: skip
    lines += ["", "## Defects found", ""]
    if c["defects"]:
        lines += _table(["check", "kind", "defect ids", "fix level", "measured", "outcome", "may follow from", "node"],
                        [[d["check_id"], d["kind"], d["ids"], d["fix_level"], d["figure"], d["outcome"],
                          d.get("follows", "–"), d["check"]] for d in c["defects"]])  # fmt: skip
    else:
        lines.append("None.")
    if c.get("root_causes"):
        lines += ["", "### Failures that may follow from a failed prerequisite", ""]
        lines += [f"- **{g['cause']}** ({g['what']}) failed; {g['n']} failure(s) of other kinds may follow from it: "
                  + ", ".join(g["checks"]) for g in c["root_causes"]]  # fmt: skip
    lines += ["", "## Missing features (refused loudly)", ""]
    if c["missing"]:
        lines += _table(
            ["feature", "how", "checks n/a"],
            [[m["feature"], m["how"], "–" if m["checks"] is None else m["checks"]] for m in c["missing"]],
        )
    else:
        lines.append("None declared or refused.")
    lines += ["", "## Metrics against the reference band", ""]
    if c["metrics"]:
        lines += _table(["check", "metric", "dataset", "loss", "compared with", "ours", "reference ± band", "Δ",
                         "study Δ (published)", "outcome"],
                        [[m["check"], m["name"], m["dataset"], m["loss"], m["comparison"], f"{m['value']:.4f}",
                          f"{m['reference']:.4f} ± {m['tolerance']:.4f}" if m["tolerance"] is not None
                          else f"{m['reference']:.4f}", _pct(m["delta_rel"]), _pct(m["study_delta_rel"]),
                          m["outcome"]] for m in c["metrics"]])  # fmt: skip
        lines += [
            "",
            "Study Δ: the published change of the same implementation and fix level against the official "
            "code on the study's full dataset (matching features for MC-1/MC-3, best parameters for MC-2).",
        ]
    else:
        lines.append("No ranking metric was recorded against the reference.")
    lines += ["", "## The study's expected outcome per check (docs/study.md)", ""]
    if c["study_rows"]:
        t = c["study_tally"]
        lines.append(f"Study row: {c['study_decl'] or 'official'} (fix level {c['study_level'] or '–'}). "
                     f"{t['agree']} agree, {t['disagree']} disagree, {t['not tested']} not tested "
                     "(how outcomes map: `gru4rec_conformance.reports.agreement`).")  # fmt: skip
        lines += [""] + _table(["checks", "study expects", "study note", "ours", "our note", "agreement"],
                               [[r["checks"], r["expected"], r["study_note"] or "–", r["ours"], r["ours_note"],
                                 agreement_text(r)] for r in c["study_rows"]])  # fmt: skip
    else:
        lines.append("The study's table has no row for this implementation and level.")
    lines += ["", "## Coverage", ""]
    cov = c["coverage"]
    lines.append(f"{cov['figure']} applicable checks ran; {cov['feature_absent']} n/a (feature declared absent).")
    if cov["why"]:
        lines.append("Not tested: " + "; ".join(cov["why"]) + ".")
    if cov["unknown"]:
        lines.append(f"Also: {cov['unknown']}.")
    lines += [""] + _table(
        ["kind", "ran", "applicable"], [[k["kind"], k["ran"], k["applicable"]] for k in c["by_kind"]]
    )
    lines += ["", "## Environment", ""] + _table(["", ""], [[k, v] for k, v in c["environment"]])
    if c["readme"]:
        lines += ["", f"Interpretation (hand-written): [{c['readme']}]({c['readme']})"]
    return "\n".join(lines).rstrip() + "\n"


def render_html(c: dict[str, Any]) -> str:
    """card.html from reports/templates/card.html.j2 (self-contained)."""
    return _render({**c, "pct": _pct}, template="card.html.j2")
