"""Cross-implementation scoreboard: ``python -m gru4rec_conformance.reports scoreboard [ROOT ...] [--out DIR]``.

Reads every run directory under the roots (report folders ``<impl>/<UTC timestamp>/`` of any number of machines,
e.g. the artifacts of a CI matrix, and committed verdicts ``reports/verdicts/<impl>/[<level>/]<version>/``) and
writes ``<out>/scoreboard.md`` and ``scoreboard.html`` (atomically).

One row per implementation (level included): the newest *complete* run whose checks are this checkout's and that
ran every selected check (no ``-k`` / ``-m`` / ``--deselect`` subset). Its columns: conformance status
(``conformance._records.verdict``), defects by kind, coverage, recall@20 and MRR@20 Δ against the reference (dataset
and loss named) beside the study's published Δ, the tally of the study's expected outcomes per check (docs/study.md) against
ours (:mod:`reports.agreement`), gate, judged version, suite version. Runs that do not qualify — a
subset, an interrupted or killed run, a run older than the current checks (stale) — are listed apart, greyed, with
the reason, when no qualifying run of that implementation is newer. Negative controls (not a GRU4Rec) are marked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gru4rec_conformance.conformance._records.verdict import _subset_args
from gru4rec_conformance.fileio import atomic_write_text
from gru4rec_conformance.reports.agreement import cells, tally
from gru4rec_conformance.reports.compact import judged_version, verdict_key
from gru4rec_conformance.reports.facts import headline_metrics, negative_control, suite_currency
from gru4rec_conformance.reports.files import REPORT_FILE_MODE
from gru4rec_conformance.reports.matrix import matrix_rows, standing_matrix_runs
from gru4rec_conformance.reports.matrix import render_markdown as matrix_markdown
from gru4rec_conformance.reports.render import render_html as _render
from gru4rec_conformance.reports.results import RunData
from gru4rec_conformance.reports.selection import collect_runs, is_matrix
from gru4rec_conformance.reports.study_compare import GAP_PP, comparison_rows
from gru4rec_conformance.reports.study_compare import render_markdown as comparison_markdown
from gru4rec_conformance.reports.study_compare import summary as study_summary

REPORTS_DIR = Path(__file__).resolve().parent
__all__ = ["REPORTS_DIR", "apart_reasons", "board_row", "build_scoreboard", "render_markdown",
           "render_html", "write_scoreboard"]  # fmt: skip


def apart_reasons(run: RunData, conformance: Any | None = None) -> list[str]:
    """Why a run cannot stand as its implementation's row: not complete, a subset, stale; empty when it can."""
    conf = conformance if conformance is not None else run.conformance()
    reasons = []
    if run.status == "interrupted":
        reasons.append("interrupted")
    elif run.status != "complete":
        reasons.append("killed (no end record)")
    cov = conf.coverage
    # an unavailable implementation ran no check: which ones the command selected says nothing about it
    subset = cov.not_selected or (cov.unknown_not_run and "subset" in cov.unknown_not_run)
    if subset and conf.status != "UNAVAILABLE":
        what = cov.unknown_not_run if cov.unknown_not_run and "subset" in cov.unknown_not_run else None
        # the selection the run's command made (-k / -m / --deselect / node ids), so the reader sees which checks
        selection = " ".join(_subset_args([str(a) for a in run.header.get("command") or ()]))
        reasons.append(
            what.split(":")[0]
            if what
            else f"a subset run ({selection + ': ' if selection else ''}{cov.not_selected} applicable checks not "
            "selected)"
        )
    current, note = suite_currency(run)
    if current is False:
        reasons.append(note)
    return reasons


def _headline(run: RunData) -> dict[str, Any]:
    """recall@20 and MRR@20 Δ of the all-features metric check (MC-2), else of the first one recorded."""
    rows = headline_metrics(run, ("recall@20", "mrr@20"))
    preferred = [r for r in rows if r["comparison"] == "all features"] or rows
    out: dict[str, Any] = {}
    for r in preferred:
        out.setdefault(r["name"], r)
    return out


def board_row(run: RunData, link_base: Path | None = None, cards: dict[str, str] | None = None) -> dict[str, Any]:
    """One scoreboard row of a run (plain data; see the module docstring for the columns)."""
    conf = run.conformance()
    counts = dict(conf.counts_by_kind)
    gate = (run.end or {}).get("gate")
    head = _headline(run)
    where = str(run.directory)
    if link_base is not None:
        try:
            where = os.path.relpath(run.directory, link_base)
        except ValueError:
            pass
    key = str(verdict_key(run))
    return {
        "name": str(run.impl.get("name") or run.directory.parent.name),
        "family": str(run.impl.get("family") or "?"),
        "role": str(run.impl.get("role") or "?"),
        "negative_control": negative_control(run.impl),
        "status": conf.status,
        "status_label": conf.status_label(),
        "features": None if conf.features is None else conf.features.figure(),
        "lacks": None if conf.features is None or not conf.features.lacks else conf.features.lacks_text(),
        "defects": {
            "bug": counts.get("bug", 0),
            "design": counts.get("design-difference", 0),
            "numerical": counts.get("numerical", 0),
            "undeclared": counts.get("undeclared", 0),
        },  # fmt: skip
        "defect_ids": list(conf.defect_ids),
        "coverage": conf.coverage.figure(),
        "coverage_pct": conf.coverage.percent,
        "metrics": [
            {
                "name": n,
                "delta": head[n]["delta_rel"],
                "study": head[n]["study_delta_rel"],
                "dataset": head[n]["dataset"],
                "loss": head[n]["loss"],
                "check": head[n]["check"],
            }
            for n in ("recall@20", "mrr@20")
            if n in head
        ],  # fmt: skip
        "gate": None if gate is None else ("PASSED" if gate.get("passed") else "FAILED"),
        "judged": judged_version(run),
        "version": str(run.impl.get("version") or "unknown"),
        "suite": str((run.header.get("suite") or {}).get("string") or "?"),
        "started": str(run.header.get("started") or "?"),
        "run_status": run.status,
        "where": where,
        "key": key,
        "study_b3": _b3_cell(run, conf),
        "card": (cards or {}).get(key),
        "apart": apart_reasons(run, conf),
        "unavailable": "; ".join(r.removeprefix("not available here: ") for r in conf.reasons)
        if conf.status == "UNAVAILABLE"
        else None,
    }


def _b3_cell(run: RunData, conformance: Any) -> str | None:
    """``"7 agree / 1 disagree / 5 not tested"`` against the study's expected-outcome row (docs/study.md;
    :mod:`reports.agreement`), or None when the study has no such row for the implementation."""
    rows = cells(run, conformance)
    if not rows:
        return None
    t = tally(rows)
    return f"{t['agree']} agree / {t['disagree']} disagree / {t['not tested']} not tested"


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["family"], row["role"] != "reference", bool(row["negative_control"]), row["role"] == "mutant",
            row["name"])  # fmt: skip


def build_scoreboard(
    roots: Sequence[Path] | Path,
    verdicts_root: Path | None = None,
    *,
    link_base: Path | None = None,
    cards: dict[str, str] | None = None,
    runs: list[RunData] | None = None,
) -> dict[str, Any]:
    """The scoreboard of every run under ``roots`` (and ``verdicts_root``, kept for the older call form).

    Returns ``{"rows": [...], "apart": [...], "families": [...], "unreadable": [...], "roots": [...]}``: ``rows``
    the qualifying row per implementation, reference first, negative controls last; ``apart`` the newer runs that
    do not qualify (each row's ``apart`` says why). ``cards`` maps a verdict key to the link of its card;
    ``runs`` skips reading the roots. ``matrix``: the rows of the runs on several metric datasets
    (:func:`reports.matrix.matrix_rows`), which are never verdict rows; ``study_comparison``: the same runs'
    Δ beside the study's, with its summary (:func:`reports.study_compare.comparison_rows`).
    """
    root_list = [Path(roots)] if isinstance(roots, (str, Path)) else [Path(r) for r in roots]
    if verdicts_root is not None:
        root_list.append(Path(verdicts_root))
    unreadable: list[str] = []
    if runs is None:
        runs = collect_runs(root_list, unreadable)
    by_impl: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        if is_matrix(run):  # a metric run on other datasets: its own section, never a verdict row
            continue
        row = board_row(run, link_base, cards)
        by_impl.setdefault((row["family"], row["name"]), []).append(row)
    rows, apart = [], []
    for group in by_impl.values():
        group.sort(key=lambda r: r["started"], reverse=True)
        good = next((r for r in group if not r["apart"]), None)
        if good is not None:
            rows.append(good)
        newer = [r for r in group if r["apart"] and (good is None or r["started"] > good["started"])]
        if newer:
            apart.append(newer[0])
    rows.sort(key=_order)
    apart.sort(key=_order)
    order = ["gru4rec", "finetuner"]  # the catalogue's family order, then any other
    families = sorted(dict.fromkeys(r["family"] for r in rows + apart),
                      key=lambda f: (order.index(f) if f in order else len(order), f))  # fmt: skip
    standing = standing_matrix_runs(runs)
    return {"rows": rows, "apart": apart, "families": families, "unreadable": unreadable,
            "roots": [str(r) for r in root_list],
            "matrix": matrix_rows(standing), "study_comparison": comparison_rows(standing)}  # fmt: skip


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.1f}%"


def metric_cell(row: dict[str, Any]) -> str:
    """``recall@20 −60.7% (study −51.2%); mrr@20 ... — MC-2 on yoochoose_100k, cross-entropy``."""
    if not row["metrics"]:
        return "–"
    parts = [f"{m['name']} {_pct(m['delta'])} (study {_pct(m['study'])})" for m in row["metrics"]]
    m0 = row["metrics"][0]
    return "; ".join(parts) + f" — {m0['check']} on {m0['dataset']}, {m0['loss']}"


def _defect_cell(row: dict[str, Any]) -> str:
    d = row["defects"]
    text = f"{d['bug']} / {d['design']} / {d['numerical']}"
    return text + (f" + {d['undeclared']} undeclared" if d["undeclared"] else "")


def _coverage_cell(row: dict[str, Any]) -> str:
    """``61/88 (69%); features 9/26 (lacks loss:bpr, ..., +11 more)``: checks ran / applicable, and which of the
    reference's features the implementation has (its other checks are n/a, never counted above)."""
    text = row["coverage"]
    if row.get("features"):
        text += f"; features {row['features']}" + (f" (lacks {row['lacks']})" if row.get("lacks") else "")
    return text


def _name_cell(row: dict[str, Any]) -> str:
    name = row["name"]
    if row["role"] == "reference":
        name += " (reference)"
    if row["negative_control"]:
        name += " (negative control: not a GRU4Rec)"
    return name


HEAD = ["implementation", "conformance", "defects bug / design / numerical", "coverage",
        "Δ vs reference (study Δ)", "study expected", "gate", "judged", "suite"]  # fmt: skip


def _cells(row: dict[str, Any]) -> list[str]:
    name = _name_cell(row)
    if row.get("card"):
        name = f"[{name}]({row['card']})"
    return [name, row.get("status_label") or row["status"], _defect_cell(row), _coverage_cell(row), metric_cell(row),
            row.get("study_b3") or "–",
            row["gate"] or "–",
            row["judged"], row["suite"]]  # fmt: skip


def render_markdown(board: dict[str, Any]) -> str:
    """scoreboard.md: per family, the qualifying rows, then the runs shown apart with their reasons."""
    lines = ["# Conformance scoreboard", ""]
    if not board["rows"] and not board["apart"]:
        return "\n".join(lines + ["No runs found.", ""])
    for family in board["families"]:
        lines += [f"## {family}", ""]
        rows = [r for r in board["rows"] if r["family"] == family]
        if rows:
            lines.append("| " + " | ".join(HEAD) + " |")
            lines.append("|" + "|".join("---" for _ in HEAD) + "|")
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |" for r in rows]
        else:
            lines.append("No complete, current, full run yet.")
        apart = [r for r in board["apart"] if r["family"] == family]
        if apart:
            lines += ["", "Shown apart (not a verdict of the current checks):", ""]
            lines.append("| " + " | ".join(HEAD + ["why apart"]) + " |")
            lines.append("|" + "|".join("---" for _ in range(len(HEAD) + 1)) + "|")
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r) + ["; ".join(r["apart"])]) + " |"
                      for r in apart]  # fmt: skip
        lines.append("")
    unavailable = [r for r in board["rows"] + board["apart"] if r.get("unavailable")]
    if unavailable:
        lines += ["Unavailable implementations (not runnable here):", ""]
        lines += [f"- {r['name']} {r['version']}: {r['unavailable']}" for r in unavailable] + [""]
    if board.get("study_figure"):
        lines += [f"![study figure]({board['study_figure']})", ""]
    if board.get("matrix"):
        lines += matrix_markdown(board["matrix"])
        if board.get("matrix_figure"):
            lines += [f"![Δ per dataset]({board['matrix_figure']})", ""]
    if board.get("study_comparison"):
        lines += comparison_markdown(board["study_comparison"])
    if board.get("unreadable"):
        lines += ["Unreadable run folders (left out):", ""] + [f"- {u}" for u in board["unreadable"]] + [""]
    lines.append("Conformance: CONFORMANT only when every applicable check ran and passed without an xfail; "
                 "NOT CONFORMANT when a check found a defect (declared or not); INCOMPLETE when applicable checks did "
                 "not run. Gate: measured vs declared xfails. Defects by the xfail registry's kind. Δ: ours against "
                 "the reference (relative); study Δ: the published change of the same row against the official "
                 "code on the study's full dataset. Study expected: the study's expected outcome per check (docs/study.md) against ours "
                 "(`python -m gru4rec_conformance.reports study-agreement` writes the cells).")  # fmt: skip
    return "\n".join(lines) + "\n"


def render_html(board: dict[str, Any]) -> str:
    comparison = None
    if board.get("study_comparison"):
        rows = board["study_comparison"]
        s = study_summary(rows)
        groups = [("all", s["overall"])] + [(f"dataset {k}", g) for k, g in s["by_dataset"].items()]
        groups += [(f"data {k}", g) for k, g in s["by_source"].items()]
        comparison = {"rows": rows, "groups": groups, "gap_pp": f"{GAP_PP:g}",
                      "pp": lambda x: "–" if x is None else f"{x:.1f}"}  # fmt: skip
    return _render({**board, "metric_cell": metric_cell, "defect_cell": _defect_cell, "pct": _pct,
                    "study_comparison": comparison}, template="scoreboard.html.j2")  # fmt: skip


def write_scoreboard(
    out_root: Path, verdicts_root: Path | None = None, roots: Sequence[Path] | None = None, **kwargs: Any
) -> tuple[Path, Path]:
    """Write scoreboard.md and scoreboard.html into ``out_root`` from the runs under ``roots`` (default:
    ``out_root`` itself), plus ``verdicts_root``; returns their paths. ``kwargs`` go to :func:`build_scoreboard`."""
    out_root = Path(out_root)
    out_root.mkdir(parents=True, exist_ok=True)
    board = build_scoreboard(list(roots) if roots is not None else [out_root], verdicts_root,
                             link_base=out_root, **kwargs)  # fmt: skip
    if (out_root / "study.png").is_file():
        board["study_figure"] = "study.png"
    if (out_root / "study_datasets.png").is_file():
        board["matrix_figure"] = "study_datasets.png"
    md, html = out_root / "scoreboard.md", out_root / "scoreboard.html"
    atomic_write_text(md, render_markdown(board), mode=REPORT_FILE_MODE)
    atomic_write_text(html, render_html(board), mode=REPORT_FILE_MODE)
    return md, html
