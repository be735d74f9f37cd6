"""Reports: files written per run and never overwritten, outcome records, crash-safety (SIGKILL, SIGINT,
SIGTERM), --resume, xdist merging, the scoreboard, and the --gate exit status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gru4rec_conformance.reports.results import load_run
from gru4rec_conformance.reports.scoreboard import build_scoreboard

MIXED = '''
@pytest.mark.check("R-1", kind="K1")
@pytest.mark.feature("session_parallel")
def test_pass(impl, record_metric):
    """Resets the hidden state at session starts."""
    record_metric("recall@20", 0.61, reference=0.62, tolerance=0.02, rule="2 sd of reference seeds",
                  dataset="yoochoose_100k", loss="cross-entropy")

@pytest.mark.check("R-2", kind="K2")
@pytest.mark.loss("cross-entropy")
def test_fail(impl, record_metric):
    """The loss matches the reference formula."""
    record_metric("loss", 2.5, reference=0.1, tolerance=1e-5, rule="relative 1e-5")
    assert 2.5 == pytest.approx(0.1), "loss differs from the reference"

@pytest.mark.check("R-3", kind="K3")
@pytest.mark.feature("logq")
def test_unsupported(impl):
    """Needs logq."""

@pytest.mark.check("R-4", kind="K8", card="deterministic")
def test_skip_other(impl):
    """Skips for another reason."""
    pytest.skip("dataset not available at /nowhere")

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

@pytest.mark.check("R-5", kind="K10")
def test_error(impl, broken):
    """Errors in setup."""
'''


def test_report_files_outcomes_and_no_overwrite(project):
    project.checks(MIXED)
    project.run("conformance", "--impl", "good", plots=True).assert_outcomes(passed=1, failed=1, skipped=2, errors=1)
    first = project.run_dirs("good")
    assert len(first) == 1
    run_dir = first[0]
    assert {p.name for p in run_dir.iterdir()} >= {
        "results.jsonl",
        "results.json",
        "summary.md",
        "summary.html",
        "plots",
    }
    assert {p.name for p in (run_dir / "plots").iterdir()} == {"kinds.png", "features.png", "metrics.png"}
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "complete" and data["run"]["impl"]["name"] == "good"
    by_test = {r["test"]: r for r in data["results"]}
    assert {k: v["outcome"] for k, v in by_test.items()} == {
        "test_pass[good]": "passed",
        "test_fail[good]": "failed",
        "test_unsupported[good]": "skipped-unsupported",
        "test_skip_other[good]": "skipped",
        "test_error[good]": "error",
    }
    assert by_test["test_fail[good]"]["reason"].startswith("AssertionError: loss differs from the reference")
    assert by_test["test_error[good]"]["reason"] == "RuntimeError: fixture broke"
    assert by_test["test_skip_other[good]"]["reason"] == "dataset not available at /nowhere"
    assert by_test["test_pass[good]"]["check"] == {
        "id": "R-1",
        "kind": "K1",
        "card": None,
        "timeout": None,
        "title": "Resets the hidden state at session starts.",
    }
    metric = by_test["test_pass[good]"]["metrics"][0]
    assert metric["within"] is True and metric["context"]["dataset"] == "yoochoose_100k"
    assert by_test["test_fail[good]"]["metrics"][0]["within"] is False
    assert by_test["test_pass[good]"]["features"] == ["session_parallel"]
    md = (run_dir / "summary.md").read_text()
    assert "**Conformance: NOT CONFORMANT** — 1 undeclared; coverage 2/4 (50%)" in md
    assert "| K1 | state reset | ✓ |" in md and "| K3 | sampling order | n/a |" in md
    assert "Resets the hidden state at session starts." in md and "2 sd of reference seeds" in md
    assert "| Deterministic under a seed | not tested | checks R-4 |" in md
    html = (run_dir / "summary.html").read_text()
    assert '<img src="plots/kinds.png"' in html and "loss differs from the reference" in html
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    project.run("conformance", "--impl", "good")
    assert len(project.run_dirs("good")) == 2  # a new run directory ...
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before  # ... the old one untouched


def test_scoreboard_and_render_cli(project):
    project.checks(MIXED)
    project.run("conformance", "--impl", "good,reference")
    out = project.path / "reports" / "out"
    board = build_scoreboard(out)
    assert [r["name"] for r in board["rows"]] == ["reference", "good"]
    env = {**os.environ, "PYTHONPATH": os.environ["PYTHONPATH"]}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gru4rec_conformance.reports",
            "scoreboard",
            "--out",
            str(out),
            "--verdicts",
            str(project.path / "reports" / "verdicts"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=project.path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    md = (out / "scoreboard.md").read_text()
    assert "| reference (reference) | NOT CONFORMANT | 0 / 0 / 0 + 1 undeclared |" in md
    assert "| good | NOT CONFORMANT |" in md and "recall@20 -1.6% (study –)" in md
    assert (out / "scoreboard.html").read_text().count("<tr class=") == 2
    done = subprocess.run(
        [sys.executable, "-m", "gru4rec_conformance.reports", "render", str(out / "nope")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2 and "not a run directory" in done.stderr
    # a committed verdict keeps only results.json: the same run found under two roots counts once
    (good_run,) = project.run_dirs("good")
    verdict = project.path / "reports" / "verdicts" / "good" / "commit-abc1234"
    verdict.mkdir(parents=True)
    (verdict / "results.json").write_bytes((good_run / "results.json").read_bytes())
    board = build_scoreboard(out, project.path / "reports" / "verdicts")
    assert [r["name"] for r in board["rows"]] == ["reference", "good"]
    # an unreadable committed verdict (a merge-conflict marker in its JSON) is named with file and line
    broken = project.path / "reports" / "verdicts" / "good" / "commit-def5678"
    broken.mkdir(parents=True)
    (broken / "results.json").write_text('{\n<<<<<<<< HEAD\n "schema": 1\n}\n')
    board = build_scoreboard(out, project.path / "reports" / "verdicts")
    assert len(board["unreadable"]) == 1 and "commit-def5678/results.json: line 2" in board["unreadable"][0]
    from gru4rec_conformance.reports.scoreboard import render_markdown

    assert "Unreadable run folders" in render_markdown(board)


SLOW = '''
import os, time

@pytest.mark.check("S-1", kind="K1")
def test_a(impl):
    """fast"""

@pytest.mark.check("S-2", kind="K1")
def test_b(impl):
    """fast"""

@pytest.mark.check("S-3", kind="K2")
def test_c(impl):
    """blocks when told to, so the run can be killed here"""
    if os.environ.get("BLOCK_IN_C"):
        open("blocked", "w").close()
        time.sleep(120)

@pytest.mark.check("S-4", kind="K2")
def test_d(impl):
    """fast"""
'''


def _start(project, *args: str, env: dict | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "pytest", *project.QUIET, "--no-report-plots", "conformance", "--impl", "good", *args]
    return subprocess.Popen(
        cmd,
        cwd=project.path,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # SIGINT must reach the child even when this run inherited it ignored (a shell's background job)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"pytest ended early:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the run never reached the blocking check")
        time.sleep(0.05)


def test_sigkill_leaves_a_readable_partial_report_that_resume_completes(project):
    project.checks(SLOW)
    proc = _start(project, env={"BLOCK_IN_C": "1"})
    _wait_for(project.path / "blocked", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    (run_dir,) = project.run_dirs("good")
    assert not (run_dir / "results.json").exists()
    partial = load_run(run_dir)
    assert partial.status == "incomplete" and sorted(r["test"] for r in partial.results) == [
        "test_a[good]",
        "test_b[good]",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "gru4rec_conformance.reports", "render", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "incomplete, 2 checks" in done.stdout
    assert "This report is INCOMPLETE" in (run_dir / "summary.md").read_text()
    result = project.run("conformance", "--impl", "good", "--resume", str(run_dir), "-v")
    result.assert_outcomes(passed=2, deselected=2)
    result.stdout.fnmatch_lines(["*--resume: 2 good check(s) already have a verdict in*"])
    assert project.run_dirs("good") == [run_dir]  # completed in place, no new run
    final = json.loads((run_dir / "results.json").read_text())
    assert final["status"] == "complete" and len(final["results"]) == 4 and len(final["resumes"]) == 1
    assert [r["test"] for r in final["results"]] == ["test_a[good]", "test_b[good]", "test_c[good]", "test_d[good]"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_writes_a_partial_report(project, signum):
    project.checks(SLOW)
    proc = _start(project, env={"BLOCK_IN_C": "1"})
    _wait_for(project.path / "blocked", proc)
    proc.send_signal(signum)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output
    (run_dir,) = project.run_dirs("good")
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "interrupted" and len(data["results"]) == 2
    assert "This report is INTERRUPTED" in (run_dir / "summary.md").read_text()
    project.run("conformance", "--impl", "good", "--resume", str(run_dir)).assert_outcomes(passed=2, deselected=2)
    assert json.loads((run_dir / "results.json").read_text())["status"] == "complete"


def test_resume_reruns_checks_of_another_implementation_version(project, monkeypatch):
    project.checks(SLOW)
    project.run("conformance", "--impl", "good").assert_outcomes(passed=4)
    (run_dir,) = project.run_dirs("good")
    monkeypatch.setenv("DUMMY_VERSION", "2.0")
    project.run("conformance", "--impl", "good", "--resume", str(run_dir)).assert_outcomes(passed=4)
    assert {r["impl_version"] for r in json.loads((run_dir / "results.json").read_text())["results"]} == {"2.0"}
    result = project.run("conformance", "--impl", "isolated", "--resume", str(run_dir))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "that run is of implementation 'good'" in result.stderr.str()


def test_xdist_workers_merge_into_one_report(project):
    project.checks(SLOW)
    project.checks(MIXED, name="test_mixed")
    result = project.run_subprocess("conformance", "--impl", "good", "-n", "2")
    result.assert_outcomes(passed=5, failed=1, skipped=2, errors=1)
    (run_dir,) = project.run_dirs("good")
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "complete" and len(data["results"]) == 9
    assert {r["node"] for r in data["results"]} == {"gw0", "gw1"}
    assert data["run"]["xdist_workers"] == 2


GATED = '''
@pytest.mark.check("G-1", kind="K1")
def test_ok(impl):
    """passes"""

@pytest.mark.check("G-2", kind="K2")
def test_known_bug(impl):
    """fails, declared in the outside adapter's xfail file"""
    assert False
'''


def test_gate_exit_status(project, tmp_path):
    project.checks(GATED)
    xfails = tmp_path / "outside_xfails.toml"
    xfails.write_text(
        'implementation = "outside"\n[[xfail]]\nid = "conformance/gru4rec/test_checks.py::test_known_bug"\n'
        'reason = "known"\nkind = "bug"\nlink = "none"\n'
    )
    gate = ("--gate", "--isolation", "always")  # an outside adapter runs in a worker under --gate
    result = project.run("conformance", "--impl", "dummies:Outside", "--xfails", str(xfails), *gate)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["GATE PASSED"])
    result = project.run("conformance", "--impl", "dummies:Outside", *gate)  # without the declaration
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["GATE FAILED: 1 failed (not covered by declared xfails)"])
    result = project.run("conformance", "--impl", "dummies:Outside", *gate, "-k", "nothing_matches")
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["GATE FAILED: no check ran for outside [[]gru4rec[]]*"])
    data = project.results("outside", index=0)
    assert data["end"]["gate"] == {"passed": True, "problems": []}


def test_study_numbers_are_looked_up_by_dataset_loss_and_declared_row():
    from gru4rec_conformance.datasets import study

    pub = study.published("recall@20", "yoochoose_100k", "bpr-max", {"implementation": "Recpack", "variant": "OOB"})
    assert pub["value"] == 0.643 and pub["official_best"] == 0.6799
    assert pub["delta_rel"] == pytest.approx(0.643 / 0.6799 - 1) and pub["row"] == "Recpack / OOB"
    assert study.published("recall@20", "diginetica", "top1", {"implementation": "Recpack", "variant": "OOB"}) is None
    assert study.published("recall@20", "yoochoose", "bpr-max", None) is None
    assert len(study.rows()) == 155 and {r["fix_level"] for r in study.rows()} == {"", "OOB", "INF", "MIN", "MAJ"}


def test_summary_dataset_row_names_the_datasets_checks_recorded():
    """Without --dataset, the summary's Dataset row lists the ``dataset`` contexts the checks recorded (e.g. the
    fine-tuner's synthetic SST-5 stand-in), in first-seen order."""
    from gru4rec_conformance.reports.summary import _datasets_used

    note = {"name": "SST-5 data", "value": None, "context": {"dataset": "sst5_standin"}}
    results = [{"metrics": [note]}, {"metrics": []}, {"metrics": [{"name": "x", "context": {"dataset": "d2"}}, note]}]
    assert _datasets_used(results) == "(checks' defaults: sst5_standin, d2)"
    assert _datasets_used([{"metrics": [{"name": "x", "context": {}}]}]) == "(checks' defaults)"


def test_what_a_check_proves_is_cut_at_a_sentence_end_or_not_at_all():
    """A report's "what it proves" is the docstring's first sentence, its lines joined, never a first line cut
    mid-sentence."""
    from gru4rec_conformance.conformance._harness.collection import first_sentence

    doc = """Rows of the score matrix are independent examples (the loss does not
    couple lanes), e.g. a perturbed row. More detail.

    Second paragraph."""
    assert first_sentence(doc) == (
        "Rows of the score matrix are independent examples (the loss does not couple lanes), e.g. a perturbed row."
    )
    assert first_sentence("No full stop here but\n    a wrapped line") == "No full stop here but a wrapped line"
    assert first_sentence("Resets the hidden state at session starts.") == "Resets the hidden state at session starts."
    assert first_sentence("") == ""
