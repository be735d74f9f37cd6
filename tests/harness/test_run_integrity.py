"""Integrity of a run's inputs and records: the xfail files a run uses are hashed and checked against
git (``--gate`` trusts only tracked, unmodified files or files named with ``--xfails``), ``--resume`` cuts a torn
last line of results.jsonl instead of appending to it, a summary that cannot be written makes the run exit
non-zero, and a failed determinism check makes the report say which verdicts may flap."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gru4rec_conformance.conformance._records import xfails
from gru4rec_conformance.conformance._records.records import nondeterminism
from gru4rec_conformance.conformance._records.xfails import file_provenance, git_state, provenance_problem
from gru4rec_conformance.reports.writer import repair_torn_tail

CHECKS = '''
@pytest.mark.check("I-1", kind="K1")
def test_known(impl):
    """fails, declared in the xfail file"""
    assert False, "known deviation"

@pytest.mark.check("I-2", kind="K1")
def test_fine(impl):
    """passes"""
'''

XFAILS = """
implementation = "good"

[[xfail]]
id = "conformance/gru4rec/test_checks.py::test_known"
reason = "declared"
kind = "bug"
link = "none"
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)  # fmt: skip


def _git_project(project) -> Path:
    """The project as a git repository with everything in it committed except the registry folder."""
    project.checks(CHECKS)
    _git(project.path, "init", "-q")
    _git(project.path, "add", "-A")
    _git(project.path, "commit", "-q", "-m", "project")
    return project.path


def _header(project, impl: str = "good") -> dict:
    return json.loads((project.run_dirs(impl)[-1] / "results.jsonl").read_text().splitlines()[0])


# -- registry integrity -----------------------------------------------------------------------------------
def test_provenance_of_a_file_in_and_out_of_git(tmp_path):
    outside = tmp_path / "outside.toml"
    outside.write_text("x = 1\n")
    assert git_state(outside) == "no git"
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    f = repo / "a.toml"
    f.write_text("x = 1\n")
    assert git_state(f) == "untracked"
    _git(repo, "add", "a.toml")
    assert git_state(f) == "modified"  # staged, not committed: not what HEAD says
    _git(repo, "commit", "-q", "-m", "a")
    assert git_state(f) == "tracked"
    info = file_provenance(f, explicit=False)
    assert info["sha256"] == hashlib.sha256(b"x = 1\n").hexdigest() and provenance_problem(info) is None
    f.write_text("x = 2\n")
    info = file_provenance(f, explicit=False)
    assert info["git"] == "modified" and "has changes git has not committed" in str(provenance_problem(info))
    assert provenance_problem(file_provenance(f, explicit=True)) is None  # named with --xfails: trusted as given
    assert "cannot be verified" in str(provenance_problem({**file_provenance(outside, False), "package": None}))


def test_an_installed_suite_vouches_for_its_files_with_the_wheel_record(monkeypatch):
    """Outside a checkout the wheel's RECORD (sha256 of every installed file) stands in for git; checked here on
    an installed distribution that has a RECORD (the suite itself runs from a checkout in these tests)."""
    import importlib.metadata

    monkeypatch.setattr(xfails, "DISTRIBUTION", "packaging")
    (entry,) = [f for f in importlib.metadata.files("packaging") or [] if str(f).endswith("packaging/version.py")]
    installed = Path(str(entry.locate()))
    assert xfails.package_state(installed, installed.read_bytes()) == "pristine"
    assert xfails.package_state(installed, b"forged") == "modified"
    assert xfails.package_state(Path(__file__), b"") == "unlisted"
    info = {"path": str(installed), "sha256": "0" * 64, "git": "untracked", "explicit": False}
    assert provenance_problem({**info, "package": "pristine"}) is None  # a venv inside some git work tree
    assert "differs from the installed suite's RECORD" in str(provenance_problem({**info, "package": "modified"}))


def test_header_records_the_registry_file_and_the_gate_trusts_a_tracked_one(project):
    root = _git_project(project)
    path = project.xfails("good", XFAILS)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "registry")
    result = project.run("conformance", "--impl", "good", "--gate")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"xfail file of good: {path.resolve()} (sha256 *, git tracked)", "GATE PASSED"])
    (info,) = _header(project)["xfail_files"]
    assert info == {"path": str(path.resolve()), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                    "git": "tracked", "explicit": False, "package": None}  # fmt: skip


def test_gate_fails_on_an_untracked_registry_file_dropped_into_the_folder(project):
    _git_project(project)
    path = project.xfails("good", XFAILS)  # not committed: anyone who could write the folder may have put it there
    result = project.run("conformance", "--impl", "good", "--gate")
    result.assert_outcomes(passed=1, xfailed=1)  # applied, as before: only the gate refuses to trust it
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"GATE FAILED: good: xfail file {path.resolve()} is not tracked by git; commit it, "
                                 "or name it with --xfails to use it deliberately"])  # fmt: skip
    data = project.results("good")
    assert data["end"]["gate"]["passed"] is False and data["run"]["xfail_files"][0]["git"] == "untracked"
    assert "Not a gate-worthy registry" in (project.run_dirs("good")[-1] / "summary.md").read_text()


def test_gate_fails_on_a_modified_tracked_file_unless_it_is_named_with_xfails(project):
    root = _git_project(project)
    path = project.xfails("good", XFAILS)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "registry")
    path.write_text(path.read_text().replace('reason = "declared"', 'reason = "changed after the commit"'))
    result = project.run("conformance", "--impl", "good", "--gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"GATE FAILED: good: xfail file {path.resolve()} has changes git has not committed*"])
    result = project.run("conformance", "--impl", "good", "--gate", "--xfails", str(path))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["xfail file of good: * (sha256 *, git modified, named with --xfails)", "GATE PASSED"])
    (info,) = _header(project)["xfail_files"]
    assert info["explicit"] is True and info["git"] == "modified"


def test_gate_refuses_a_registry_file_outside_git_and_outside_the_installed_suite(project):
    project.checks(CHECKS)
    path = project.xfails("good", XFAILS)  # the pytester folder is no git checkout
    result = project.run("conformance", "--impl", "good", "--gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"GATE FAILED: good: xfail file {path.resolve()} *; commit it, or name it with "
                                 "--xfails to use it deliberately"])  # fmt: skip
    assert _header(project)["xfail_files"][0]["git"] == "no git"


# -- crash-safe resume ------------------------------------------------------------------------------------
def _tear(run_dir: Path) -> bytes:
    """What a SIGKILL during an append leaves: no end record, no summaries, half of a result line."""
    path = run_dir / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[-1])["type"] == "end"
    torn = lines[-2][: len(lines[-2]) // 2]
    path.write_bytes(b"".join(lines[:-2]) + torn)
    for name in ("results.json", "summary.md", "summary.html"):
        (run_dir / name).unlink()
    return torn


def test_repair_torn_tail_cuts_a_torn_line_and_keeps_a_whole_record(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"type": "run"}\n{"type": "res')
    assert repair_torn_tail(path) == {"line": 2, "bytes": 13}
    assert path.read_bytes() == b'{"type": "run"}\n'
    assert repair_torn_tail(path) is None
    path.write_bytes(b'{"type": "run"}\n{"type": "end"}')  # only the newline was lost: the record stays
    assert repair_torn_tail(path) is None and path.read_bytes() == b'{"type": "run"}\n{"type": "end"}\n'


def test_resume_truncates_a_torn_last_line_and_the_folder_stays_renderable(project):
    project.checks(CHECKS)
    project.run("conformance", "--impl", "good")
    (run_dir,) = project.run_dirs("good")
    torn = _tear(run_dir)
    n_lines = len((run_dir / "results.jsonl").read_bytes().splitlines())
    render = subprocess.run([sys.executable, "-m", "gru4rec_conformance.reports", "render", str(run_dir)],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert render.returncode == 0, render.stderr
    assert f"torn line {n_lines} ({len(torn)} bytes" in (run_dir / "summary.md").read_text()
    result = project.run("conformance", "--impl", "good", "--resume", str(run_dir))
    assert result.ret == pytest.ExitCode.OK  # test_fine, whose record was torn, ran again and passed
    result.stdout.fnmatch_lines([f"--resume: {run_dir}/results.jsonl ended with a torn line {n_lines} "
                                 f"({len(torn)} bytes, *): removed before appending"])  # fmt: skip
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_bytes().splitlines()]  # all whole
    assert [r["type"] for r in records] == ["run", "result", "resume", "result", "end"]
    assert records[2]["truncated"] == {"line": n_lines, "bytes": len(torn)}
    data = project.results("good")
    assert data["status"] == "complete" and data["counts"]["total"] == 2
    assert data["resumes"][0]["truncated"] == {"line": n_lines, "bytes": len(torn)}
    assert "cut off a torn line" in (run_dir / "summary.md").read_text()


def test_render_of_a_damaged_run_folder_names_the_file_and_line(project):
    project.checks(CHECKS)
    project.run("conformance", "--impl", "good")
    (run_dir,) = project.run_dirs("good")
    path = run_dir / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b'{"type": "resu' + b"".join(lines[1:]))  # what appending to a torn line made
    render = subprocess.run([sys.executable, "-m", "gru4rec_conformance.reports", "render", str(run_dir)],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert render.returncode == 2
    assert f"error: {path}: line 2 is not valid JSON (the run folder is damaged)" in render.stderr
    result = project.run("conformance", "--impl", "good", "--resume", str(run_dir))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "line 2 is not valid JSON" in result.stderr.str()


def test_a_summary_that_cannot_be_written_makes_the_run_exit_non_zero(project):
    project.checks(CHECKS)
    project.xfails("good", XFAILS)
    assert project.run("conformance", "--impl", "good").ret == pytest.ExitCode.OK
    (run_dir,) = project.run_dirs("good")
    _tear(run_dir)  # so that the resumed session has a check to run
    (run_dir / "summary.md").mkdir()  # a folder in the way: os.replace cannot put the file there
    result = project.run("conformance", "--impl", "good", "--resume", str(run_dir))
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines([f"report of good: summaries not written (SummaryWriteError: {run_dir}/summary.md: "
                                 "not written (*)); run: python -m gru4rec_conformance.reports render *"])  # fmt: skip
    assert json.loads((run_dir / "results.json").read_text())["status"] == "complete"  # the others are written


# -- non-determinism --------------------------------------------------------------------------------------
RANDOM_CHECKS = '''
import numpy as np

def _scores(impl, seed):
    model = impl.build(seed=seed)
    model.fit(TRAIN)
    return model.score_prefixes([[5], [6]])

@pytest.mark.check("D-1", kind="K4")
@pytest.mark.determinism
def test_same_seed(impl):
    """two fits with one seed agree"""
    assert np.array_equal(_scores(impl, 1), _scores(impl, 1)), "same-seed fits differ"

@pytest.mark.check("D-2", kind="K2")
def test_threshold(impl):
    """declared as failing; passes or fails by chance on a random implementation"""
    assert _scores(impl, 2).mean() > 0.5

@pytest.mark.check("D-3", kind="K1")
def test_declaration_only(impl):
    """skipped: needs a feature nobody declares"""
    impl.require("logq")
'''

RANDOM_ADAPTER = '''
import numpy as np
from dummies import Good


class Random(Good):
    """Ignores its seed: every fit gives other scores."""

    name = "random"

    def score_prefixes(self, prefixes):
        return np.random.default_rng().random((len(prefixes), len(self.items))).astype(np.float32)
'''


def test_a_failed_determinism_check_says_which_verdicts_may_flap(project):
    project.checks(RANDOM_CHECKS)
    project.pytester.makepyfile(randomized=RANDOM_ADAPTER)
    xfails = project.path / "random_xfails.toml"
    xfails.write_text('implementation = "random"\n[[xfail]]\nid = "conformance/gru4rec/test_checks.py::test_threshold"'
                      '\nreason = "flaps"\nkind = "numerical"\nlink = "none"\n')  # fmt: skip
    result = project.run("conformance", "--impl", "randomized:Random", "--xfails", str(xfails))
    data = project.results("random")
    outcomes = {r["test"]: r["outcome"] for r in data["results"]}
    assert outcomes["test_same_seed[random]"] == "failed" and outcomes["test_declaration_only[random]"].startswith(
        "skipped"
    )
    threshold = "conformance/gru4rec/test_checks.py::test_threshold[random]"
    nd = data["end"]["nondeterminism"]
    assert nd == {"detected": True, "check": "conformance/gru4rec/test_checks.py::test_same_seed[random]",
                  "may_flap": [threshold], "xfails_may_flap": [threshold]}  # fmt: skip
    result.stdout.fnmatch_lines([f"NON-DETERMINISTIC random: determinism check {nd['check']} failed, so its strict "
                                 f"xfails cannot be trusted; 1 check verdict(s) may flap between runs, among them "
                                 f"the xfail/xpass verdicts of {threshold}"])  # fmt: skip
    run_dir = project.run_dirs("random")[-1]
    md = (run_dir / "summary.md").read_text()
    assert "> **Warning:** Non-deterministic: the determinism check" in md and threshold in md
    assert "strict xfails of this implementation cannot be trusted" in (run_dir / "summary.html").read_text()


def test_no_warning_when_the_determinism_check_passes(project):
    project.checks(RANDOM_CHECKS)
    project.run("conformance", "--impl", "good", "-k", "same_seed").assert_outcomes(passed=1)
    data = project.results("good")
    assert data["end"]["nondeterminism"] is None
    assert "Non-deterministic" not in (project.run_dirs("good")[-1] / "summary.md").read_text()
    assert nondeterminism(data["results"]) is None


# -- the worker never learns where the registry is --------------------------------------------------------
SNOOPER = '''
import os
import sys

from dummies import Good


class Snooper(Good):
    """An isolated adapter that reports everything its process was started with."""

    name = "snooper"
    isolated = True

    def optimizer_info(self):
        return {"type": "sgd", "argv": list(sys.argv), "environ": dict(os.environ), "cwd": os.getcwd()}
'''

SNOOP_CHECK = '''
import json, os

@pytest.mark.check("W-1", kind="K5")
def test_snoop(impl):
    """the worker's start-up, as the adapter sees it"""
    with open(os.environ["SNOOP_OUT"], "w") as fh:
        json.dump(impl.build(seed=1).optimizer_info(), fh)
'''


def test_the_worker_is_given_no_path_of_the_xfail_registry(project, monkeypatch):
    """The controller alone reads the registry: neither the worker's command line, nor its environment, nor its
    working directory names an xfail file or the registry folder."""
    project.checks(SNOOP_CHECK)
    project.pytester.makepyfile(snooping=SNOOPER)
    registry = project.xfails("snooper", 'implementation = "snooper"\n')
    explicit = project.path / "elsewhere.toml"
    explicit.write_text('implementation = "snooper"\n')
    out = project.path / "snoop.json"
    monkeypatch.setenv("SNOOP_OUT", str(out))
    project.run("conformance", "--impl", "snooping:Snooper", "--xfails", str(explicit)).assert_outcomes(passed=1)
    seen = json.loads(out.read_text())
    start = json.dumps([seen["argv"], seen["environ"], seen["cwd"]])
    for secret in (str(registry.resolve()), str(registry.parent.resolve()), str(explicit), "conformance/xfails"):
        assert secret not in start, f"the worker was told {secret!r}"
