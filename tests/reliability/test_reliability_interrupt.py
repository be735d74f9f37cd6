"""Interrupted runs of the real suite (``--impl reference``, 13 cheap K2 checks): killed with SIGKILL half-way, or
interrupted with SIGINT, a run leaves a readable partial report marked incomplete / interrupted, and
``--resume RUN_DIR`` completes it without re-running the checks that have a verdict.

The run is held before its 7th check by ``reliability_pause_plugin`` (test-only), so the signal lands exactly
half-way whatever the machine's load.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from reliability_support import (
    REPO,
    SUITE,
    describe,
    jsonl_records,
    results_json,
    run_suite,
    suite_command,
    suite_env,
    the_run_dir,
)  # fmt: skip

SELECTION = ("--impl", "reference", "-k", "lf1_fixed_score_matrix or lf2_row_separability")
N_CHECKS = 13  # LF-1: 8 loss variants, LF-2: 5 losses
PAUSE_AFTER = 6


def _run_until_paused(report_dir, marker):
    """Start the suite held after PAUSE_AFTER checks; return the process once it is held there."""
    proc = subprocess.Popen(
        suite_command(report_dir, SUITE, *SELECTION, "-p", "reliability_pause_plugin"),
        cwd=REPO,
        env=suite_env(RELIABILITY_PAUSE_AFTER=str(PAUSE_AFTER), RELIABILITY_PAUSE_FILE=str(marker)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # SIGINT must reach the child even when this run inherited it ignored (a shell's background job)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 240
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended before the pause (exit {proc.returncode}):\n{proc.stdout.read()[-4000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the run did not reach the pause within 240 s")
        time.sleep(0.1)
    return proc


def _resume_and_check(report_dir, run_dir, partial_nodeids):
    """--resume completes the run: only the missing checks run, each check has exactly one verdict."""
    proc = run_suite(report_dir, SUITE, *SELECTION, "--resume", str(run_dir))
    assert proc.returncode == 0, describe(proc)
    assert f" {N_CHECKS - PAUSE_AFTER} passed" in proc.stdout, describe(proc)
    assert f"--resume: {PAUSE_AFTER} reference check(s) already have a verdict in {run_dir}" in proc.stdout
    assert the_run_dir(report_dir, "reference") == run_dir  # completed in place, no new run directory
    records = jsonl_records(run_dir)
    results = [r for r in records if r["type"] == "result"]
    assert len(results) == N_CHECKS and set(Counter(r["nodeid"] for r in results).values()) == {1}, (
        "a check was re-run or lost: " + str(Counter(r["nodeid"] for r in results))
    )
    assert {r["nodeid"] for r in results[:PAUSE_AFTER]} == partial_nodeids  # the early verdicts are the kept ones
    assert [r["type"] for r in records].count("resume") == 1
    data = results_json(run_dir)
    assert [r["reused"] for r in data["resumes"]] == [PAUSE_AFTER], data["resumes"]
    assert data["status"] == "complete" and data["counts"]["passed"] == N_CHECKS == data["counts"]["total"]
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    # every selected check passed; the status is INCOMPLETE because -k selected a subset
    assert "**Conformance: INCOMPLETE** — " in summary and f"{N_CHECKS} checks: {N_CHECKS} passed" in summary
    assert "not selected or not reached" in summary and "This report is" not in summary
    assert "INTERRUPTED" not in summary
    assert f"(skipped {PAUSE_AFTER} checks with verdicts)" in summary
    return data


def test_sigkill_half_way_leaves_a_partial_report_that_resume_completes(tmp_path):
    report_dir = tmp_path / "reports"
    proc = _run_until_paused(report_dir, tmp_path / "paused")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    run_dir = the_run_dir(report_dir, "reference")
    # what a killed run leaves: the header and one line per finished check, no end record, no summaries
    records = jsonl_records(run_dir)
    assert [r["type"] for r in records] == ["run"] + ["result"] * PAUSE_AFTER, [r["type"] for r in records]
    assert all(r["outcome"] == "passed" for r in records[1:])
    assert not (run_dir / "results.json").exists() and not (run_dir / "summary.md").exists()
    # python -m gru4rec_conformance.reports render turns it into a report marked incomplete
    render = subprocess.run(
        [sys.executable, "-m", "gru4rec_conformance.reports", "render", str(run_dir)],
        cwd=REPO,
        env=suite_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert render.returncode == 0, describe(render)
    assert f"{run_dir}: incomplete, {PAUSE_AFTER} checks" in render.stdout
    data = results_json(run_dir)
    assert data["status"] == "incomplete" and data["end"] is None
    assert data["counts"]["passed"] == PAUSE_AFTER == data["counts"]["total"]
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "**Conformance: INCOMPLETE**" in summary and "This report is INCOMPLETE" in summary
    assert "--resume <this folder>" in summary
    _resume_and_check(report_dir, run_dir, {r["nodeid"] for r in records[1:]})


def test_sigint_half_way_writes_an_interrupted_report_that_resume_completes(tmp_path):
    """SIGINT (Ctrl-C); SIGTERM takes the same path (tests/harness/test_reports.py covers it with dummies)."""
    report_dir = tmp_path / "reports"
    proc = _run_until_paused(report_dir, tmp_path / "paused")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-4000:]
    run_dir = the_run_dir(report_dir, "reference")
    records = jsonl_records(run_dir)
    assert [r["type"] for r in records] == ["run"] + ["result"] * PAUSE_AFTER + ["end"], [r["type"] for r in records]
    assert records[-1]["status"] == "interrupted"
    data = results_json(run_dir)  # written at the end of the interrupted session, no render needed
    assert data["status"] == "interrupted" and data["counts"]["total"] == PAUSE_AFTER
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "**Conformance: INCOMPLETE**" in summary and "This report is INTERRUPTED" in summary
    assert f"report of reference: {run_dir}/summary.html" in out
    _resume_and_check(report_dir, run_dir, {r["nodeid"] for r in records[1:-1]})
