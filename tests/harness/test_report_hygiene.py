"""Report hygiene and progress lines: report files 0644 whatever the umask, JUnit XML
properties as JSON, ``GRU4REC_*`` values redacted outside an allow-list; long checks print progress."""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gru4rec_conformance.conformance._records.runinfo import REDACTED, env_value_shown, gru4rec_env, redact_env
from gru4rec_conformance.fileio import atomic_write_text
from gru4rec_conformance.reports.results import RunData
from gru4rec_conformance.reports.summary import build_summary

CHECKS = '''
@pytest.mark.check("H-1", kind="K1")
def test_pass(impl, record_metric):
    """passes"""
    record_metric("recall@20", 0.5, reference=0.5, tolerance=0.01)


@pytest.mark.check("H-2", kind="K2")
def test_fail(impl):
    """fails"""
    assert False, "off"
'''


@pytest.fixture
def umask_077():
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_write_mode_ignores_the_umask(tmp_path, umask_077):
    assert _mode(atomic_write_text(tmp_path / "a.txt", "x", mode=0o644)) == 0o644
    assert _mode(atomic_write_text(tmp_path / "b.txt", "x")) == 0o600  # without mode=: as open() under the umask


def test_report_files_are_0644_and_folders_0755_under_umask_077(project, umask_077):
    project.checks(CHECKS)
    project.run("conformance", "--impl", "good", plots=True)
    (run_dir,) = project.run_dirs("good")
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"results.jsonl", "results.json", "summary.md", "summary.html", "kinds.png"}
    assert {p.relative_to(run_dir).as_posix(): _mode(p) for p in files} == {
        p.relative_to(run_dir).as_posix(): 0o644 for p in files
    }
    assert _mode(run_dir) == 0o755 and _mode(run_dir / "plots") == 0o755


def test_junit_properties_are_json_with_the_conformance_status(project):
    project.checks(CHECKS)
    project.run("conformance", "--impl", "good", "--junitxml", "junit.xml")
    root = ET.parse(project.path / "junit.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.findall("./properties/property")}
    status = json.loads(props["conformance:gru4rec:good"])
    assert status["status"] == "NOT CONFORMANT" and status["coverage"]["ran"] == 2
    assert status["line"].startswith("good: NOT CONFORMANT — 1 undeclared; coverage 2/2 (100%); features 5/26 (")
    case_props = [p for case in suite.iter("testcase") for p in case.findall("./properties/property")]
    harness = [p for p in case_props if p.get("name", "").startswith(("conformance", "gru4rec_conformance."))]
    assert harness, "the checks' harness properties are in the XML"
    for p in harness:
        json.loads(p.get("value", ""))  # JSON text, not a Python repr
    info = next(json.loads(p.get("value", "")) for p in harness if p.get("name") == "conformance")
    assert info["impl"] == "good" and info["check"]["id"] in ("H-1", "H-2")


def test_env_values_are_shown_only_for_the_allow_list(monkeypatch):
    assert env_value_shown("GRU4REC_ISOLATION", "never") and env_value_shown("GRU4REC_WORKER_THREADS", "4")
    assert env_value_shown("GRU4REC_PATH", "/src/gru4rec") and env_value_shown("GRU4REC_MIRROR_DIR", "/m")
    assert env_value_shown("GRU4REC_PYTORCH_FORK_PATH", "/f") and env_value_shown("GRU4REC_BENCH_SCALE", "2")
    assert not env_value_shown("GRU4REC_TEST_POSTGRES_URL", "postgresql://u:pw@db/x")
    assert not env_value_shown("GRU4REC_API_TOKEN", "abc") and not env_value_shown("GRU4REC_SECRET", "abc")
    assert not env_value_shown("GRU4REC_CACHE_DIR", "https://user:pw@host/cache")  # credentials in a shown name
    for var in [v for v in os.environ if v.startswith("GRU4REC_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("GRU4REC_TOKEN", "s3cr3t")
    monkeypatch.setenv("GRU4REC_DATASET", "yoochoose_100k")
    assert gru4rec_env() == {"GRU4REC_DATASET": "yoochoose_100k", "GRU4REC_TOKEN": REDACTED}


def test_summaries_of_older_runs_redact_their_recorded_values():
    """Runs recorded before the allow-list kept every value in the header: the summaries redact them on render."""
    run = RunData(Path("."), {"impl": {"name": "x"}, "env": {"GRU4REC_TOKEN": "s3cr3t", "GRU4REC_PATH": "/p"}},
                  [], [], {"type": "end", "status": "complete"})  # fmt: skip
    meta = dict(build_summary(run)["meta"])
    assert meta["GRU4REC_* variables"] == f"GRU4REC_TOKEN={REDACTED}, GRU4REC_PATH=/p"
    assert redact_env({"GRU4REC_X": 1}) == {"GRU4REC_X": REDACTED}


PROGRESS_CHECK = '''
@pytest.mark.check("P-1", kind="K1")
def test_long(impl, progress):
    """trains for a while"""
    for seed in (1, 2):
        with progress.task(f"seed {seed}: fit"):
            pass
    progress.note("all seeds done")
'''


def test_progress_lines_reach_the_terminal_unless_quiet(project):
    project.checks(PROGRESS_CHECK)
    result = project.run("conformance", "--impl", "good")
    result.stdout.fnmatch_lines(
        [
            "  [[]P-1 good[]] seed 1: fit …",
            "  [[]P-1 good[]] seed 1: fit: done in *.* s",
            "  [[]P-1 good[]] seed 2: fit …",
            "  [[]P-1 good[]] seed 2: fit: done in *.* s",
            "  [[]P-1 good[]] all seeds done",
        ]
    )
    result = project.run("conformance", "--impl", "good", "-q")
    assert "[P-1 good]" not in result.stdout.str()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("{not json\n", "results.jsonl: line 2 is not valid JSON"),
        ("[1, 2]\n", "results.jsonl: line 2 is not a record"),
        ('{"type": "result", "outcome": "passed"}\n', "results.jsonl: line 2: a result record without a 'nodeid'"),
    ],
)
def test_render_of_a_damaged_run_names_the_file_and_line_and_fails(tmp_path, capsys, damage, message):
    from gru4rec_conformance.reports.__main__ import main

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    header = json.dumps({"type": "run", "schema": 1, "impl": {"name": "x"}})
    end = json.dumps({"type": "end", "status": "complete", "exitstatus": 0})
    (run_dir / "results.jsonl").write_text(header + "\n" + damage + end + "\n")
    assert main(["render", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(run_dir) in err
