"""Warnings a reader must see before trusting a run's verdict, one sentence each.

:func:`notices` reads them from the run itself: a failed determinism check (the implementation's strict xfails
cannot be trusted, and which verdicts may flap: ``records.nondeterminism``), a torn last line of results.jsonl
(ignored on reading) or one that ``--resume`` cut off, and xfail files that ``--gate`` would not trust
(``xfails.provenance_problem``). The summaries show them in a block of their own under the verdict.
"""

from __future__ import annotations

from gru4rec_conformance.conformance._records.records import XfailFileInfo, nondeterminism
from gru4rec_conformance.conformance._records.xfails import provenance_problem
from gru4rec_conformance.reports.results import RunData

__all__ = ["notices"]

_LISTED = 12  # node ids named in one sentence; the full list is in results.json (end.nondeterminism)


def _names(ids: list[str]) -> str:
    shown = ", ".join(ids[:_LISTED])
    return shown + (f" and {len(ids) - _LISTED} more" if len(ids) > _LISTED else "")


def notices(run: RunData) -> list[str]:
    """The warnings of ``run`` (plain text, in a stable order; empty when there is nothing to say)."""
    out = []
    nd = nondeterminism(run.results)
    if nd is not None:
        text = (f"Non-deterministic: the determinism check {nd['check']} failed (same-seed runs differ), so the "
                f"strict xfails of this implementation cannot be trusted and {len(nd['may_flap'])} verdict(s) may "
                "flap from run to run (every check that ran the implementation to a verdict).")  # fmt: skip
        if nd["xfails_may_flap"]:
            text += f" xfail/xpass verdicts that may flip: {_names(nd['xfails_may_flap'])}."
        elif nd["may_flap"]:
            text += f" They are: {_names(nd['may_flap'])}."
        out.append(text)
    if run.torn:
        out.append(f"results.jsonl ends with a torn line {run.torn['line']} ({run.torn['bytes']} bytes: the run was "
                   "killed while writing it); it is ignored.")  # fmt: skip
    for r in run.resumes:
        t = r.get("truncated")
        if t:
            out.append(f"The resume of {r.get('started', '?')} cut off a torn line {t['line']} ({t['bytes']} bytes) "
                       "of results.jsonl before appending.")  # fmt: skip
    seen = set()
    for info in [*(run.header.get("xfail_files") or []), *(f for r in run.resumes for f in r.get("xfail_files") or [])]:
        problem = provenance_problem(_as_info(info))
        if problem and problem not in seen:
            seen.add(problem)
            out.append(f"Not a gate-worthy registry: {problem}.")
    return out


def _as_info(raw: dict[str, object]) -> XfailFileInfo:
    return {"path": str(raw.get("path")), "sha256": str(raw.get("sha256")), "git": str(raw.get("git")),
            "explicit": bool(raw.get("explicit")), "package": raw.get("package")}  # type: ignore[typeddict-item]  # fmt: skip
