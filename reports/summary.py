"""The content of a run summary, computed once for summary.md and summary.html.

Sections: verdict and counts; run metadata; capabilities (declared features, hooks, hyperparameters,
shims); feature × outcome matrix; checks grouped by kind (K1..K11, metric, ...) with the one-line
docstring of each check; metric table against the reference (Δ, tolerance and rule) and against the
study's published numbers; xfail entries applied; reproducibility card; failure details (with worker stderr
tails).
"""

from __future__ import annotations

import collections
from typing import Any

from gru4rec_conformance.conformance._records.records import record_unavailable
from gru4rec_conformance.conformance._records.runinfo import redact_env
from gru4rec_conformance.conformance._records.verdict import Conformance, assess, rerun_command
from gru4rec_conformance.datasets import study
from gru4rec_conformance.reports.facts import refreshed_text
from gru4rec_conformance.reports.notices import notices
from gru4rec_conformance.reports.results import BAD_OUTCOMES, OUTCOMES, RunData

SYMBOLS = {
    "passed": "✓",
    "failed": "✗",
    "error": "error",
    "xpass": "XPASS",
    "xfail": "xfail",
    "skipped-unsupported": "n/a",
    "skipped": "skip",
}
CARD_FIELDS = {
    "installs": "Installs on a current stack",
    "offline": "Runs offline",
    "deterministic": "Deterministic under a seed",
    "shims": "Shims needed",
    "hyperparameters": "Hyperparameters settable (not hard-coded)",
    "pinned": "Dependencies pinned",
}
SHORT = {
    "passed": "pass",
    "failed": "fail",
    "error": "error",
    "xpass": "xpass",
    "xfail": "xfail",
    "skipped-unsupported": "n/a",
    "skipped": "skip",
}
NO_KIND = "(no kind)"


def cell_symbol(counts: dict[str, int]) -> str:
    """One symbol for a group of outcomes: ✗ if anything went wrong, else xfail, ✓, n/a, skip or –."""
    if any(counts.get(o, 0) for o in BAD_OUTCOMES):
        return "✗"
    if counts.get("xfail"):
        return "xfail"
    if counts.get("passed"):
        return "✓"
    if counts.get("skipped-unsupported"):
        return "n/a"
    if counts.get("skipped"):
        return "skip"
    return "–"


def verdict(run: RunData) -> str:
    """LEGACY outcome word (the scoreboard's old column): ``PASS`` (no failed/error/xpass check), ``FAIL``, or
    ``INCOMPLETE``/``INTERRUPTED`` runs. It is not the conformance status: :func:`conformance_block` is."""
    counts = run.counts()
    if run.status == "incomplete":
        return "INCOMPLETE"
    if run.status == "interrupted":
        return "INTERRUPTED"
    if counts["total"] == 0:
        return "NO CHECKS"
    if unavailable_reason(run) is not None:
        return "UNAVAILABLE"
    return "FAIL" if any(counts[o] for o in BAD_OUTCOMES) else "PASS"


def unavailable_reason(run: RunData) -> str | None:
    """The one-line reason when every check was skipped because the implementation is unavailable
    (``ImplementationUnavailable``), else None."""
    whys = {record_unavailable(r) for r in run.results}
    if run.results and all(r["outcome"] == "skipped" for r in run.results) and len(whys) == 1:
        (why,) = whys
        return why
    return None


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.{digits}g}" if abs(x) < 1e-3 and x != 0 else f"{x:.{digits}f}"
    return str(x)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.2f}%"


def _datasets_used(results: list[dict[str, Any]]) -> str:
    """The header's dataset when ``--dataset`` was not given: the ``dataset`` values the checks recorded in their
    metric contexts (e.g. ``sst5_standin`` when the fine-tuner checks ran on the synthetic stand-in)."""
    used = dict.fromkeys(
        str(m["context"]["dataset"])
        for r in results
        for m in r.get("metrics", [])
        if (m.get("context") or {}).get("dataset")
    )
    return f"(checks' defaults: {', '.join(used)})" if used else "(checks' defaults)"


def standin_line(run: RunData) -> str:
    """The header's warning when checks ran on seeded synthetic stand-ins instead of real data: ``"synthetic
    stand-ins: yoochoose_100k_standin, sst5_standin (...)"``, from the datasets the checks recorded in their metric
    contexts and ``--dataset``; "" when every dataset was real."""
    names = [str(run.header.get("dataset") or "")] + [
        str((m.get("context") or {}).get("dataset") or "") for r in run.results for m in r.get("metrics", [])
    ]
    standins = [n for n in dict.fromkeys(names) if "standin" in n]
    if not standins:
        return ""
    return (f"synthetic stand-ins: {', '.join(standins)} (seeded synthetic data in place of the real data, which "
            "were not found; its metrics are not comparable with the study's)")  # fmt: skip


def conformance_block(run: RunData, conformance: Conformance | None = None) -> dict[str, Any]:
    """The status and coverage header of a summary, as plain data.

    Keys: ``status`` (the conformance status), ``status_label`` (``CONFORMANT on 9/26 features`` when the
    implementation lacks some of the reference's features, else the status), ``headline`` (the terminal line without the implementation name),
    ``reasons``, ``coverage`` (``"61/88 (69%)"``), ``coverage_lines`` (how much was examined: ran / applicable,
    not tested by cause, n/a by cause, per kind), ``defect_ids``, ``gate`` (None unless the run evaluated it:
    ``--gate``, or xfail entries applied; else ``{"passed", "problems", "text"}``).
    """
    c = conformance or assess(run.header, run.results, run.end)
    cov = c.coverage
    name = str(run.impl.get("name", "?"))
    headline = c.line(name).split(": ", 1)[1]
    pct = cov.percent
    lines = [
        f"{cov.ran} of {cov.applicable}{'+' if cov.unknown_not_run else ''} applicable checks ran"
        + (f" ({pct:.0f}%)" if pct is not None else "")
        + " — applicable: the implementation declares what the check needs, hooks aside"
    ]
    not_tested = cov.why_not_tested()
    if not_tested:
        lines.append("not tested: " + ", ".join(not_tested))
    if cov.unknown_not_run:
        lines.append(cov.unknown_not_run)
    na = ([f"{cov.feature_absent} feature absent (declared)"] if cov.feature_absent else []) + [
        f"{n} {why}" for why, n in cov.not_applicable.items()
    ]
    if na:
        lines.append("n/a (not counted): " + ", ".join(na))
    if cov.by_kind:
        lines.append("by kind: " + ", ".join(f"{k} {r}/{a}" for k, (r, a) in cov.by_kind.items()))
    if c.features is not None:
        lines.append(c.features.report_text())
    g = (run.end or {}).get("gate")
    gate = None
    if isinstance(g, dict) and "passed" in g:
        problems = [str(p) for p in g.get("problems") or []]
        gate = {"passed": bool(g["passed"]), "problems": problems,
                "text": "PASSED" if g["passed"] else "FAILED: " + "; ".join(problems)}  # fmt: skip
    return {"status": c.status, "status_label": c.status_label(), "headline": headline, "reasons": list(c.reasons), "coverage": cov.figure(),
            "coverage_lines": lines, "defect_ids": list(c.defect_ids), "gate": gate, "data": c.to_json()}  # fmt: skip


def build_summary(
    run: RunData,
    plots: dict[str, str] | None = None,
    plot_error: str | None = None,
    conformance: Conformance | None = None,
) -> dict[str, Any]:
    """Everything the renderers print, as plain data (strings, numbers, lists, dicts); ``conformance``: the run's
    status when the caller has it (else it is assessed here)."""
    h = run.header
    impl = h.get("impl", {})
    caps = impl.get("capabilities") or {}
    declared = impl.get("features") or {}
    results = run.results
    conformance = conformance or assess(h, results, run.end)
    # a skipped-unsupported record is one of three things, counted apart as the status line counts them: a feature
    # declared absent (n/a), a hook the adapter lacks (not tested) or a value refused at run time (not tested)
    cov = conformance.coverage
    counts = run.counts()
    counts["refused"] = sum(cov.refused.values())
    counts["missing_hook"] = sum(cov.missing_hook.values())
    counts["not_applicable"] = cov.feature_absent

    # -- run metadata -----------------------------------------------------------------------------------
    suite = h.get("suite", {})
    meta = [
        ("Implementation", f"{impl.get('name', '?')} ({impl.get('family', '?')}, {impl.get('role', '?')})"),
        ("Implementation version", impl.get("version", "unknown")),
        ("Adapter", f"{impl.get('ref', '?')} (from {impl.get('source', '?')})"),
        ("Isolation", impl.get("isolation", "in-process")),
        ("Framework", " ".join(str(v) for v in (caps.get("framework") or {}).values()) or "unknown"),
        ("Suite version", suite.get("string", "unknown")),
        ("Device", h.get("device", "cpu")),
        ("Dataset", h.get("dataset") or _datasets_used(results)),
        ("Seeds", ", ".join(str(s) for s in h.get("seeds", [])) or "–"),
        ("Started", h.get("started", "?")),
        ("Finished", (run.end or {}).get("finished", "– (no end record)")),
        ("Status", run.status),
        ("Gate mode", "yes" if h.get("gate") else "no"),
        ("xdist workers", str(h.get("xdist_workers") or "none")),
        ("Frameworks", ", ".join(f"{k} {v}" for k, v in (h.get("frameworks") or {}).items())),
        ("Platform", (h.get("platform") or {}).get("platform", "?")),
        ("Command", " ".join(h.get("command", []))),
        ("GRU4REC_* variables", ", ".join(f"{k}={v}" for k, v in redact_env(h.get("env") or {}).items()) or "none"),
    ]
    if impl.get("description"):
        meta.insert(1, ("Description", impl["description"]))
    if impl.get("homepage"):
        meta.insert(2, ("Homepage", impl["homepage"]))
    for r in run.resumes:
        reused = r.get("reused")
        kept = f"skipped {reused} checks with verdicts" if reused is not None else "did not end; count unknown"
        meta.append(("Resumed", f"{r.get('started', '?')} ({kept})"))
    if h.get("refresh"):
        meta.append(("Refreshed from", refreshed_text(run)))
    if impl.get("error"):
        meta.append(("Adapter error", impl["error"]))
    if impl.get("unavailable"):
        meta.append(("Not available", impl["unavailable"]))

    # -- feature × outcome matrix -------------------------------------------------------------------
    by_feature: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        for f in r.get("features", []):
            by_feature[f][r["outcome"]] += 1
    feature_rows = []
    for f in list(declared) + sorted(set(by_feature) - set(declared)):
        c = by_feature.get(f, collections.Counter())
        if not declared.get(f) and not c:
            continue
        feature_rows.append({
            "feature": f,
            "declared": bool(declared.get(f)) if f in declared else None,
            "counts": {o: c.get(o, 0) for o in OUTCOMES},
            "symbol": cell_symbol(c) if c else "untested",
        })  # fmt: skip

    # -- checks grouped by kind -------------------------------------------------------------------------
    kinds_order = list((h.get("kinds") or {}).keys())
    titles = dict(h.get("kinds") or {})
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in results:
        check = r.get("check") or {}
        kind = check.get("kind") or NO_KIND
        xf = r.get("xfail")
        reason = r.get("reason") or ""
        if r["outcome"] in ("xfail", "xpass") and xf:
            entry = (xf.get("reason") or "").splitlines()[0] if xf.get("reason") else ""
            measured = reason.splitlines()[0] if reason and r["outcome"] == "xfail" else ""
            reason = f"{entry} — measured: {measured}" if measured and measured != entry else entry
        groups[kind].append({
            "id": check.get("id") or "–",
            "nodeid": r["nodeid"],
            "test": r.get("test", r["nodeid"]),
            "title": check.get("title") or "",
            "outcome": r["outcome"],
            "symbol": SYMBOLS.get(r["outcome"], r["outcome"]),
            "reason": reason.splitlines()[0] if reason else "",
            "duration": r.get("duration", 0.0),
            "xfail": r.get("xfail"),
        })  # fmt: skip
    extra = sorted(k for k in groups if k not in kinds_order and k != NO_KIND)
    kinds = []
    for k in kinds_order + extra + ([NO_KIND] if NO_KIND in groups else []):
        checks = sorted(groups.get(k, []), key=lambda c: c["id"])  # stable: run order within a check
        kc = collections.Counter(c["outcome"] for c in checks)
        kinds.append({"kind": k, "title": titles.get(k, ""), "checks": checks, "counts": dict(kc),
                      "symbol": cell_symbol(kc) if checks else "–"})  # fmt: skip

    # -- metrics ----------------------------------------------------------------------------------------
    metrics = []
    for r in results:
        for m in r.get("metrics", []):
            value, ref = m.get("value"), m.get("reference")
            delta = value - ref if isinstance(value, (int, float)) and isinstance(ref, (int, float)) else None
            rel = delta / abs(ref) if delta is not None and ref else None
            ctx = m.get("context") or {}
            pub = study.published(
                m.get("name", ""), ctx.get("dataset") or h.get("dataset"), ctx.get("loss"), impl.get("study")
            )
            metrics.append({
                "check": (r.get("check") or {}).get("id") or "–",
                "nodeid": r["nodeid"],
                "name": m.get("name"),
                "value": _fmt(value),
                "reference": _fmt(ref),
                "delta": _fmt(delta),
                "delta_rel": _pct(rel),
                "tolerance": _fmt(m.get("tolerance")),
                "rule": m.get("rule") or "",
                "within": m.get("within"),
                "context": ", ".join(f"{k}={v}" for k, v in ctx.items()),
                "study_value": _fmt(pub["value"]) if pub else "–",
                "study_delta_rel": _pct(pub["delta_rel"]) if pub else "–",
                "study_row": pub["row"] if pub else "",
                "outcome": r["outcome"],
                "raw": {"value": value, "reference": ref, "tolerance": m.get("tolerance")},
            })  # fmt: skip

    # -- xfails, card, failures ---------------------------------------------------------------------------
    xfail_info = h.get("xfail") or {}
    xfail_rows = []
    for e in xfail_info.get("entries", []):
        matched = [r for r in results if (r.get("xfail") or {}).get("index") == e.get("index")]
        xfail_rows.append({**e, "matched": len(matched),
                           "outcomes": ", ".join(sorted({r['outcome'] for r in matched})) or "–"})  # fmt: skip

    card_checks: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in results:
        field = (r.get("check") or {}).get("card")
        if field:
            card_checks[field].append(r)
    repro = impl.get("reproducibility") or {}
    card = []
    for field, label in CARD_FIELDS.items():
        if field in card_checks:
            rs = card_checks[field]
            c = collections.Counter(r["outcome"] for r in rs)
            ids = ", ".join(sorted({(r.get("check") or {}).get("id", "?") for r in rs}))
            value = {"✓": "yes", "✗": "no", "xfail": "no (declared)", "n/a": "not testable", "skip": "not tested",
                     "–": "not tested"}[cell_symbol(c)]  # fmt: skip
            card.append({"field": label, "value": value, "source": f"checks {ids}"})
        elif field == "shims":
            shims = caps.get("shims") or []
            card.append({"field": label, "value": "; ".join(shims) if shims else "none", "source": "capabilities"})
        elif field in repro:
            card.append({"field": label, "value": str(repro[field]), "source": "adapter declaration"})
        else:
            card.append({"field": label, "value": "not stated", "source": "–"})

    command = [str(a) for a in h.get("command") or ["pytest"]]
    failures = [
        {"nodeid": r["nodeid"], "outcome": r["outcome"], "reason": r.get("reason") or "",
         "details": r.get("details") or "", "worker": r.get("worker"),
         "rerun": rerun_command(command, str(r["nodeid"]), str(r.get("impl") or impl.get("name") or "?"))}
        for r in results if r["outcome"] in BAD_OUTCOMES
    ]  # fmt: skip

    choices = [(k, caps.get(k)) for k in ("score_semantics", "eval_tie_mode", "gate_layout") if k in caps]
    return {
        "title": f"{impl.get('name', '?')} — conformance report",
        "impl": impl,
        "status": run.status,
        "verdict": verdict(run),
        "conformance": conformance_block(run, conformance),
        "counts": counts,
        "outcomes": list(OUTCOMES),
        "symbols": SYMBOLS,
        "short": SHORT,
        "meta": meta,
        "features": feature_rows,
        "hooks": impl.get("hooks") or [],
        "hyperparameters": sorted((caps.get("hyperparameters") or {}).items()),
        "shims": caps.get("shims") or [],
        "choices": choices,
        "kinds": kinds,
        "metrics": metrics,
        "xfails": xfail_rows,
        "xfail_file": xfail_info.get("file"),
        "card": card,
        "failures": failures,
        "plots": plots or {},
        "plot_error": plot_error,
        "fmt": _fmt,
        "notices": notices(run),
        "standin": standin_line(run),
    }
