"""Cross-implementation scoreboard: ``python -m gru4rec_conformance.reports scoreboard``.

Reads the latest run of every implementation under ``reports/out/<impl>/`` and every committed verdict
under ``reports/verdicts/<impl>/<...>/`` (results.json or results.jsonl), and writes
``reports/out/scoreboard.md`` and ``scoreboard.html`` (atomically): one row per implementation with its
version, run status, outcome counts, a verdict per check kind, and the metric deltas against the reference.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

from gru4rec_conformance.fileio import atomic_write_text
from gru4rec_conformance.reports.results import OUTCOMES, RunData, RunDirError, iter_run_dirs, load_run
from gru4rec_conformance.reports.summary import cell_symbol, unavailable_reason, verdict

REPORTS_DIR = Path(__file__).resolve().parent


def latest_runs(root: Path) -> list[RunData]:
    """The latest run directory (by timestamp name) of each implementation folder under ``root``."""
    latest: dict[tuple[str, str], Path] = {}
    for run_dir in iter_run_dirs(root):
        key = (run_dir.parent.name, _family_of(run_dir))  # two families may share a name ("reference")
        if key not in latest or run_dir.name > latest[key].name:
            latest[key] = run_dir
    runs = []
    for path in latest.values():
        try:
            runs.append(load_run(path))
        except RunDirError:
            continue
    return runs


def _family_of(run_dir: Path) -> str:
    """The family in a run directory's header (first line of results.jsonl), "?" when unreadable."""
    try:
        with open(run_dir / "results.jsonl", encoding="utf-8") as fh:
            return str(json.loads(fh.readline()).get("impl", {}).get("family", "?"))
    except (OSError, ValueError, AttributeError):
        return "?"


def verdict_runs(root: Path, unreadable: list[str] | None = None) -> list[RunData]:
    """Committed verdicts: every run directory below ``root`` (any depth), newest per implementation.

    A directory whose results cannot be read (invalid JSON, e.g. a merge-conflict marker) is left out and, when
    ``unreadable`` is given, appended to it as ``"<path>: <error>"`` so the scoreboard can say so."""
    root = Path(root)
    if not root.is_dir():
        return []
    found: dict[tuple[str, str], RunData] = {}  # (family, name) -> run
    for folder in iter_run_dirs(root):
        marker = folder / "results"
        try:
            run = load_run(folder)
        except (RunDirError, ValueError) as exc:
            if unreadable is not None:
                unreadable.append(f"{marker}: {type(exc).__name__}: {exc}")
            continue
        if not run.header or not run.impl:
            continue  # another kind of record kept beside verdicts (e.g. a fine-tuning protocol run)
        key = (run.impl.get("family", "?"), run.impl.get("name", marker.parent.parent.name))
        if key not in found or str(marker.parent) > str(found[key].directory):
            found[key] = run
    return list(found.values())


def _row(run: RunData, source: str, base: Path) -> dict[str, Any]:
    impl = run.impl
    kinds_order = list((run.header.get("kinds") or {}).keys())
    per_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in run.results:
        per_kind[(r.get("check") or {}).get("kind") or "(no kind)"][r["outcome"]] += 1
    deltas = []
    for r in run.results:
        for m in r.get("metrics", []):
            v, ref = m.get("value"), m.get("reference")
            if isinstance(v, (int, float)) and isinstance(ref, (int, float)) and ref:
                deltas.append((m.get("name"), (v - ref) / abs(ref)))
    # headline metrics first (recall@20, MRR@20: the study's headline numbers), then in recorded order
    deltas.sort(key=lambda nd: (not str(nd[0]).endswith("@20"), not str(nd[0]).startswith("recall")))
    try:
        where = str(run.directory.relative_to(base))
    except ValueError:
        where = str(run.directory)
    return {
        "name": impl.get("name", run.directory.parent.name),
        "family": impl.get("family", "?"),
        "role": impl.get("role", "?"),
        "version": impl.get("version", "unknown"),
        "suite": (run.header.get("suite") or {}).get("string", "?"),
        "status": run.status,
        "verdict": verdict(run),
        "counts": run.counts(),
        "kinds": {k: cell_symbol(per_kind[k]) if k in per_kind else "–" for k in kinds_order},
        "kinds_order": kinds_order,
        "metrics": deltas,
        "source": source,
        "where": where,
        "started": run.header.get("started", "?"),
        "unavailable": unavailable_reason(run),
    }


def build_scoreboard(out_root: Path, verdicts_root: Path | None = None) -> dict[str, Any]:
    """Rows for every implementation (latest runs + committed verdicts), reference first."""
    base = Path(out_root).resolve().parent.parent if Path(out_root).name == "out" else Path(out_root).resolve()
    rows = [_row(r, "run", base) for r in latest_runs(out_root)]
    unreadable: list[str] = []
    if verdicts_root is not None:
        rows += [_row(r, "committed verdict", base) for r in verdict_runs(verdicts_root, unreadable)]
    rows.sort(key=lambda r: (r["family"], r["role"] != "reference", r["role"] == "mutant", r["name"], r["source"]))
    families: dict[str, list[str]] = {}
    for r in rows:
        order = families.setdefault(r["family"], [])
        for k in r["kinds_order"]:
            if k not in order:
                order.append(k)
    return {"rows": rows, "families": families, "outcomes": list(OUTCOMES), "unreadable": unreadable}


def render_markdown(board: dict[str, Any]) -> str:
    lines = ["# Conformance scoreboard", ""]
    if not board["rows"]:
        return "\n".join(lines + ["No runs found.", ""])
    for family, kinds in board["families"].items():
        rows = [r for r in board["rows"] if r["family"] == family]
        lines += [f"## {family}", ""]
        head = ["implementation", "version", "verdict", "status", "passed", "failed", "error", "xfail", "xpass",
                "n/a", "skipped"] + kinds + ["metric Δ vs reference", "source"]  # fmt: skip
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join("---" for _ in head) + "|")
        for r in rows:
            c = r["counts"]
            metric = "; ".join(f"{n} {d * 100:+.1f}%" for n, d in r["metrics"][:2]) or "–"
            cells = [
                r["name"] + (" (reference)" if r["role"] == "reference" else ""),
                r["version"],
                r["verdict"],
                r["status"],
                c["passed"],
                c["failed"],
                c["error"],
                c["xfail"],
                c["xpass"],
                c["skipped-unsupported"],
                c["skipped"],
            ]
            cells += [r["kinds"].get(k, "–") for k in kinds]
            cells += [metric, f"{r['source']}: {r['where']}"]
            lines.append("| " + " | ".join(str(x).replace("|", "\\|") for x in cells) + " |")
        lines.append("")
    notes = [r for r in board["rows"] if r.get("unavailable")]
    if notes:
        lines += ["Unavailable implementations (every check skipped):", ""]
        lines += [f"- {r['name']} {r['version']}: {r['unavailable']}" for r in notes]
        lines.append("")
    if board.get("unreadable"):
        lines += ["Unreadable committed verdicts (left out of the table):", ""]
        lines += [f"- {u}" for u in board["unreadable"]]
        lines.append("")
    lines.append("Cells per kind: ✓ all checks passed, ✗ a check failed, xfail only declared failures, n/a the "
                 "capabilities the kind needs are not declared, – no check ran.")  # fmt: skip
    return "\n".join(lines) + "\n"


def render_html(board: dict[str, Any]) -> str:
    from gru4rec_conformance.reports.render import render_html as _render

    return _render(board, template="scoreboard.html.j2")


def write_scoreboard(out_root: Path, verdicts_root: Path | None = None) -> tuple[Path, Path]:
    """Write scoreboard.md and scoreboard.html into ``out_root``; returns their paths."""
    out_root = Path(out_root)
    out_root.mkdir(parents=True, exist_ok=True)
    board = build_scoreboard(out_root, verdicts_root)
    md, html = out_root / "scoreboard.md", out_root / "scoreboard.html"
    atomic_write_text(md, render_markdown(board))
    atomic_write_text(html, render_html(board))
    return md, html
