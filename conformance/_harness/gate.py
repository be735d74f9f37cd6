"""``--gate``: whether a run may pass a CI gate, and its effect on the exit status.

The gate fails on any failed/error/xpass check (xfails declared in the registry are fine), on an implementation
for which no check ran (nor was reused by ``--resume``), on an adapter that cannot be described or is not
available, on an xfail file it cannot trust (untracked or modified in git, unverifiable outside git, unless named
with ``--xfails``: ``xfails.provenance_problem``) or that changed during the run, on an interrupted run and on
any exit status other than 0 or 1. It is evaluated for every run (the end record keeps it when ``--gate`` is
given) and changes the exit status only with ``--gate``.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Sequence

import pytest

from gru4rec_conformance.conformance._harness.collection import xfail_file_for
from gru4rec_conformance.conformance._harness.state import State
from gru4rec_conformance.conformance._records.records import GateResult, ResultRecord
from gru4rec_conformance.conformance._records.xfails import provenance_problem


def evaluate(state: State, records: Sequence[ResultRecord], exitstatus: int, interrupted: bool) -> GateResult:
    """The gate's verdict on this session's ``records`` (``problems`` in a stable, readable order)."""
    problems = []
    per_impl = collections.Counter(r["impl"] for r in records)
    for (family, name), handle in state.handles.items():
        if per_impl.get(name, 0) + state.reused.get(name, 0) == 0:
            problems.append(f"no check ran for {name} [{family}]")
        if handle.describe().error:
            problems.append(f"{name}: adapter cannot be described")
        if handle.describe().unavailable:
            problems.append(f"{name}: implementation not available ({handle.describe().unavailable})")
        problems += registry_problems(state, family, name)
    bad = [r for r in records if r["outcome"] in ("failed", "error", "xpass")]
    if bad:
        c = collections.Counter(r["outcome"] for r in bad)
        problems.append("; ".join(f"{n} {o}" for o, n in sorted(c.items())) + " (not covered by declared xfails)")
    env = [r for r in records if r.get("outcome_detail") == "environment"]
    if env:
        problems.append(f"{len(env)} environment error(s), e.g. {env[0]['reason']}")
    if interrupted:
        problems.append("the run was interrupted")
    if exitstatus not in (0, 1) and not interrupted:
        problems.append(f"pytest exit status {exitstatus}")
    return {"passed": not problems, "problems": problems}


def registry_problems(state: State, family: str, name: str) -> list[str]:
    """Why the xfail file of one implementation cannot back a gate verdict: its provenance when the session
    started (``state.xfail_infos``), and whether it is still the same file with the same hash now."""
    if (family, name) not in state.xfail_infos:
        return []
    before = state.xfail_infos[(family, name)]
    path = xfail_file_for(state, state.handles[(family, name)].spec)
    try:  # the hash only: git was asked at the start
        after = (str(path.resolve()), hashlib.sha256(path.read_bytes()).hexdigest()) if path.is_file() else None
    except OSError:
        after = None
    out = []
    if before is not None and (problem := provenance_problem(before)):
        out.append(f"{name}: {problem}")
    if (before and (before["path"], before["sha256"])) != after:
        was = f"{before['path']} (sha256 {before['sha256'][:12]})" if before else "no file"
        now = f"{after[0]} (sha256 {after[1][:12]})" if after else "no file"
        out.append(f"{name}: xfail file changed during the run: {was} at the start, {now} at the end")
    return out


def apply(session: pytest.Session, state: State, records: Sequence[ResultRecord], exitstatus: int,
          interrupted: bool) -> GateResult:  # fmt: skip
    """Evaluate the gate into ``state.gate_result``; with ``--gate``, a failed gate turns exit status 0 into 1."""
    result = evaluate(state, records, exitstatus, interrupted)
    state.gate_result = result
    if state.options.gate and not result["passed"] and exitstatus == int(pytest.ExitCode.OK):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return result


def summary_line(result: GateResult) -> str:
    """The terminal summary's line: ``GATE PASSED`` or ``GATE FAILED: <problems>``."""
    return "GATE PASSED" if result["passed"] else "GATE FAILED: " + "; ".join(result["problems"])
