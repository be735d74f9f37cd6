"""The generated status block of the implementation READMEs (``reports/verdicts/<impl>/README.md``).

A README keeps by hand only what the records cannot say; what they can say (status, coverage, the study agreement,
which checks were not tested and why, which five-dataset cells measured nothing) sits between two markers and is
written from the records by ``python -m gru4rec_conformance.reports render ROOT --out DIR --readmes``
(:func:`update_readmes`), so it cannot go stale unnoticed: a test compares the committed block with
:func:`status_block` of the committed records.

Per verdict of the implementation (every level and judged version; the newest run per verdict key): its
conformance status, coverage, the tally of the study's expected outcomes (:mod:`reports.agreement`) and the checks
that did not run, grouped by why (``missing hook (...)``, ``refused (...)``, ``could not run (...)``; declared-absent
features are counted apart as n/a). Per five-dataset run: on how many dataset × loss cells MC-2 measured a Δ, and
why the others did not.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from pathlib import Path

from gru4rec_conformance.fileio import atomic_write_text
from gru4rec_conformance.reports.agreement import NA, NOT_RUN, cells, classify, not_run_category, tally
from gru4rec_conformance.reports.matrix import matrix_rows
from gru4rec_conformance.reports.render import md_table
from gru4rec_conformance.reports.results import RunData
from gru4rec_conformance.reports.selection import is_matrix, newest_per_key
from gru4rec_conformance.reports.study_compare import mc2_not_measured

__all__ = ["BEGIN", "END", "COMMAND", "status_block", "replace_block", "update_readmes"]

COMMAND = "python -m gru4rec_conformance.reports render reports/verdicts --out DIR --readmes"
BEGIN = f"<!-- BEGIN GENERATED STATUS: written from the records by `{COMMAND}`; do not edit by hand -->"
END = "<!-- END GENERATED STATUS -->"


def _not_tested(run: RunData) -> tuple[str, int]:
    """``("missing hook (hook:trace): OP-3, SO-2; could not run (needs a GPU): SC-3", n/a count)``."""
    groups: dict[str, set[str]] = collections.defaultdict(set)
    na: set[str] = set()
    for r in run.results:
        check = str((r.get("check") or {}).get("id") or "")
        outcome, why = classify(r)
        if outcome == NOT_RUN:
            groups[not_run_category(outcome, why)].add(check)
        elif outcome == NA:
            na.add(check)
    text = "; ".join(f"{cat}: {', '.join(sorted(ids))}" for cat, ids in sorted(groups.items()))
    return text or "–", len(na)


def _verdict_row(key: Path, run: RunData) -> list[str]:
    conf = run.conformance()
    rows = cells(run, conf)
    t = tally(rows) if rows else None
    b3 = f"{t['agree']} agree / {t['disagree']} disagree / {t['not tested']} not tested" if t else "–"
    untested, na = _not_tested(run)
    if conf.status == "UNAVAILABLE":  # nothing ran: the reason, not every check id
        untested = "every check: " + ("; ".join(conf.reasons) or "not available here")
    return [f"`{key.as_posix()}`", conf.status_label() or conf.status, conf.coverage.figure(), str(na), b3, untested]


def _matrix_row(key: Path, run: RunData) -> list[str]:
    rows = matrix_rows([run])
    measured = [r for r in rows if r["recall@20"]["ours"] is not None or r["mrr@20"]["ours"] is not None]
    why: dict[str, list[str]] = collections.defaultdict(list)
    for r in rows:
        if r in measured:
            continue
        reason = mc2_not_measured(run, r["dataset"], r["loss"]) or "MC-2 not in the run"
        why[reason].append(f"{r['dataset']} {r['loss']}")
    text = "; ".join(f"{w}: {', '.join(cells_)}" for w, cells_ in sorted(why.items())) or "–"
    return [f"`{key.as_posix()}`", f"{len(measured)}/{len(rows)}", text]


def status_block(impl: str, runs: Iterable[RunData]) -> str:
    """The block (markers included) of the implementation whose verdict folders start with ``impl``
    (``gru4rec_pytorch``), from the newest run per verdict key among ``runs``."""
    chosen = {k: r for k, r in newest_per_key(list(runs)).items() if k.parts and k.parts[0] == impl}
    verdicts = [(k, r) for k, r in sorted(chosen.items()) if not is_matrix(r)]
    matrices = [(k, r) for k, r in sorted(chosen.items()) if is_matrix(r)]
    lines = [BEGIN, "", "## Status from the records", ""]
    if verdicts:
        lines += md_table(["verdict", "conformance", "coverage", "n/a", "study's expected outcomes", "not tested"],
                          [_verdict_row(k, r) for k, r in verdicts])  # fmt: skip
    else:
        lines.append("No committed verdict.")
    if matrices:
        lines += ["", "Five-dataset runs (MC-2 Δ measured on dataset × loss cells):", ""]
        lines += md_table(["run", "measured", "not measured"], [_matrix_row(k, r) for k, r in matrices])
    return "\n".join([*lines, "", END])


def replace_block(text: str, block: str) -> str | None:
    """``text`` with the part from :data:`BEGIN` to :data:`END` replaced by ``block``; None when ``text`` has no
    such pair of markers (a README without a generated block is left alone)."""
    start = text.find(BEGIN)
    end = text.find(END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    return text[:start] + block + text[end + len(END) :]


def update_readmes(roots: Sequence[Path], runs: Sequence[RunData]) -> tuple[list[Path], list[Path]]:
    """Rewrite the generated block of every ``<root>/<impl>/README.md`` that has the markers, from ``runs``
    (atomically; a file whose block is already current is not touched).

    Returns:
        ``(updated, current)``: the READMEs rewritten and those already current.
    """
    updated, current = [], []
    for root in roots:
        for readme in sorted(Path(root).glob("*/README.md")):
            text = readme.read_text(encoding="utf-8")
            new = replace_block(text, status_block(readme.parent.name, runs))
            if new is None:
                continue
            if new == text:
                current.append(readme)
                continue
            atomic_write_text(readme, new, mode=0o644)
            updated.append(readme)
    return updated, current
