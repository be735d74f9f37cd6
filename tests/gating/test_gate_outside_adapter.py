"""The gating path for outside maintainers, end to end on the real suite (conformance/README.md, "CI gate").

A maintainer's adapter is loaded by import path (``--impl some.module:Class``, no registry entry) and gated with
``--gate``: the exit status must fail on a check failure their xfail file does not declare, and pass once the
failure is declared in an xfail file kept outside the suite (``--xfails FILE``). The "outside adapter" is the
mutant ``implementations.mutants.k1_state_reset:NoEvalReset`` (the reference with GP-1 switched on: no hidden-
state reset between sessions in its own evaluation loop), which SR-2 catches; SR-5 passes on it and shows that
passing checks do not trip the gate. The runs are subprocesses of pytest on ``conformance/gru4rec`` restricted
to those two checks (a few seconds each).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = "gru4rec_conformance.implementations.mutants.k1_state_reset:NoEvalReset"
SELECT = "test_sr2_first_event_after_switch or test_sr5_state_is_used"


def _gate(pytester: pytest.Pytester, tmp_path: Path, *extra: str) -> tuple[pytest.RunResult, dict]:
    report_dir = tmp_path / "reports"
    result = pytester.runpytest_subprocess(
        str(REPO / "conformance" / "gru4rec"), "--rootdir", str(REPO), "-p", "no:cacheprovider",
        "--impl", OUTSIDE, "--gate", "-k", SELECT, "--report-dir", str(report_dir), "--no-report-plots", *extra,
        timeout=600,
    )  # fmt: skip
    runs = sorted(p for p in (report_dir / "mutant.no_eval_reset").iterdir() if p.is_dir())
    assert runs, f"no run directory under {report_dir}:\n{result.stdout.str()[-2000:]}"
    data = json.loads((runs[-1] / "results.json").read_text())
    outcomes = {r["check"]["id"]: r["outcome"] for r in data["results"]}
    return result, {"outcomes": outcomes, "gate": data["end"]["gate"]}


def test_gate_fails_on_undeclared_failure_and_passes_once_declared_outside(pytester, tmp_path):
    """Exit status ≠ 0 and GATE FAILED for the undeclared SR-2 failure; 0 and GATE PASSED with the outside xfail."""
    pytester.chdir()
    result, run = _gate(pytester, tmp_path / "undeclared")
    assert run["outcomes"] == {"SR-2": "failed", "SR-5": "passed"}, run["outcomes"]
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["GATE FAILED: 1 failed (not covered by declared xfails)*"])
    assert run["gate"]["passed"] is False

    xfails = tmp_path / "maintainer_xfails.toml"  # kept in the maintainer's repository, not in the suite
    xfails.write_text(
        'implementation = "mutant:no_eval_reset"\n\n'
        "[[xfail]]\n"
        'id = "conformance/gru4rec/test_k1_state_reset.py::test_sr2_first_event_after_switch"\n'
        'reason = "our evaluation loop keeps the hidden state across sessions (known, fix scheduled)"\n'
        'kind = "bug"\nlink = "none"\ndefect = "GP-1"\nfix_level = "INF"\n',
        encoding="utf-8",
    )
    result, run = _gate(pytester, tmp_path / "declared", "--xfails", str(xfails))
    assert run["outcomes"] == {"SR-2": "xfail", "SR-5": "passed"}, run["outcomes"]
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["GATE PASSED*"])
    assert run["gate"] == {"passed": True, "problems": []}
