"""Attacks on a run's records by the code under test, each contained with a clear message.

The attackers are in-process adapters of a temporary project (a git repository: checks, adapters and conftest
committed), loaded by import path and run in a pytest subprocess:

- ``Forger`` writes an xfail file into ``conformance/xfails/`` declaring the check it fails. The run that forges
  it fails its gate ("changed during the run"); the next ``--gate`` run applies the forged entry (the check is an
  xfail) but fails the gate, naming the untracked file.
- ``Tearer`` appends half a record to its run's results.jsonl and SIGKILLs the suite, as a kill in the middle of
  an append would. ``--resume`` cuts the torn line (the resume record says where and how much), never appends
  to it, completes the run and exits 0; the folder renders.

A sandboxed worker cannot write there at all (the sandbox's half of the defence); these tests show the second line of
defence, which also holds for adapters that run in the suite's process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:xdist")

ATTACKERS = '''
"""Adversarial in-process adapters: they write where only the suite should."""
import json
import os
import signal
from pathlib import Path

import numpy as np

from gru4rec_conformance.implementations.base import Adapter, FitReport

CAPS = {"losses": ["cross-entropy"], "embedding_modes": ["none"], "session_parallel": True,
        "in_batch_negatives": True, "full_ranking": True, "devices": ["cpu"],
        "framework": {"name": "numpy", "version": np.__version__},
        "hyperparameters": {"n_epochs": 1, "layers": [4], "learning_rate": 0.1}}


class Plain(Adapter):
    name = "plain"

    def capabilities(self):
        return CAPS

    def version(self):
        return "1.0"

    def build(self, seed, **hparams):
        self.hparams = self.resolve_hparams(hparams)

    def fit(self, train_df, n_epochs=None):
        self.items = np.unique(train_df["ItemId"].to_numpy())
        return FitReport([1.0], [1], [len(train_df)], [0.0])

    def item_ids(self):
        return self.items

    def score_prefixes(self, prefixes):
        return np.zeros((len(prefixes), len(self.items)), dtype=np.float32)


FORGED = """implementation = "forger"
[[xfail]]
id = "conformance/gru4rec/test_attack.py::test_caught"
reason = "forged by the implementation under test"
kind = "bug"
link = "none"
"""


class Forger(Plain):
    """Declares its own failure as expected by writing into the registry folder."""

    name = "forger"

    def fit(self, train_df, n_epochs=None):
        target = Path.cwd() / "conformance" / "xfails" / "forger.toml"
        if target.parent.parent.is_dir():  # in the suite's process; a worker's folder has no registry to aim at
            target.parent.mkdir(exist_ok=True)
            target.write_text(FORGED)
        return super().fit(train_df, n_epochs)


class Tearer(Plain):
    """With TEAR=1, tears the last line of its run's results.jsonl and kills the suite at its second check."""

    name = "tearer"

    def fit(self, train_df, n_epochs=None):
        paths = list(Path.cwd().glob("reports/out/tearer/*/results.jsonl"))
        if os.environ.get("TEAR") == "1" and paths and len((path := paths[0]).read_bytes().splitlines()) >= 2:
            record = json.dumps({"type": "result", "nodeid": "conformance/gru4rec/test_attack.py::test_torn"})
            with open(path, "a") as fh:
                fh.write(record[: len(record) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        return super().fit(train_df, n_epochs)
'''

CHECKS = '''
import pandas as pd
import pytest

TRAIN = pd.DataFrame({"SessionId": [1, 1, 2, 2], "ItemId": [5, 6, 5, 6], "Time": [1, 2, 3, 4]})


@pytest.mark.check("A-1", kind="K1")
def test_caught(impl):
    """a deviation the implementation has"""
    impl.build(seed=1).fit(TRAIN)
    assert False, "deviation found"


@pytest.mark.check("A-2", kind="K1")
def test_fine(impl):
    """passes"""
    impl.build(seed=1).fit(TRAIN)


@pytest.mark.check("A-3", kind="K1")
def test_also_fine(impl):
    """passes"""
    impl.build(seed=1).fit(TRAIN)
'''


@pytest.fixture
def attack_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makeini("[pytest]\n")
    pytester.makeconftest('pytest_plugins = ["gru4rec_conformance.conformance._harness.plugin"]\n')
    pytester.makepyfile(attackers=ATTACKERS)
    checks = Path(pytester.path) / "conformance" / "gru4rec"
    checks.mkdir(parents=True)
    (checks / "test_attack.py").write_text(CHECKS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "src"), str(pytester.path)]))
    for var in ("GRU4REC_CONFORMANCE_IMPL", "GRU4REC_REPORT_DIR", "GRU4REC_ISOLATION", "GRU4REC_XFAIL_MARK", "TEAR"):
        monkeypatch.delenv(var, raising=False)
    git = ["git", "-C", str(pytester.path), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "project"]):
        subprocess.run(git + args, check=True, capture_output=True)
    return Path(pytester.path)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*QUIET, "--no-report-plots", "conformance", *args, timeout=180)


def _results(root: Path, impl: str) -> dict:
    (run_dir,) = sorted((root / "reports" / "out" / impl).iterdir())[-1:]
    return json.loads((run_dir / "results.json").read_text())


def test_a_registry_file_forged_by_the_implementation_fails_the_gate(pytester, attack_project):
    forged = attack_project / "conformance" / "xfails" / "forger.toml"
    # Under --gate an outside adapter never runs in the suite's process: refused before anything runs.
    result = _run(pytester, "--impl", "attackers:Forger", "--gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    assert "under --gate only the suite's own adapters run in the suite's process" in result.stderr.str()
    assert not forged.exists(), "a refused adapter still ran"

    result = _run(pytester, "--impl", "attackers:Forger")  # ungated, in-process: the forgery happens
    assert forged.is_file(), "the attack did not happen: nothing was written into the registry folder"

    result = _run(pytester, "--impl", "attackers:Forger", "--gate", "--isolation", "always")  # finds the file
    result.assert_outcomes(passed=2, xfailed=1)  # the forged entry is applied to the check...
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ...but the gate does not trust it
    result.stdout.fnmatch_lines([f"GATE FAILED: forger: xfail file {forged} is not tracked by git; commit it, or "
                                 "name it with --xfails to use it deliberately"])  # fmt: skip
    data = _results(attack_project, "forger")
    assert data["run"]["xfail_files"][0]["git"] == "untracked" and data["end"]["gate"]["passed"] is False


def test_resume_after_a_torn_last_line_truncates_it_and_completes_the_run(pytester, attack_project, monkeypatch):
    monkeypatch.setenv("TEAR", "1")
    result = _run(pytester, "--impl", "attackers:Tearer")
    assert result.ret == -9, result.stdout.str()[-2000:]  # SIGKILL
    (run_dir,) = (attack_project / "reports" / "out" / "tearer").iterdir()
    path = run_dir / "results.jsonl"
    before = path.read_bytes()
    assert not before.endswith(b"\n"), "the attack did not happen: the last line is whole"
    torn_bytes = len(before) - before.rfind(b"\n") - 1
    monkeypatch.delenv("TEAR")
    result = _run(pytester, "--impl", "attackers:Tearer", "--resume", str(run_dir))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]  # test_caught kept its verdict, the rest pass
    result.stdout.fnmatch_lines([f"--resume: {path} ended with a torn line 3 ({torn_bytes} bytes, a record cut off "
                                 "when the run was killed): removed before appending"])  # fmt: skip
    records = [json.loads(line) for line in path.read_bytes().splitlines()]  # every line is a whole record
    assert [r["type"] for r in records] == ["run", "result", "resume", "result", "result", "end"]
    assert records[2]["truncated"] == {"line": 3, "bytes": torn_bytes}
    assert path.read_bytes().startswith(before[: before.rfind(b"\n") + 1])  # the whole records are kept as they were
    data = _results(attack_project, "tearer")
    assert data["status"] == "complete" and data["counts"]["total"] == 3
    render = subprocess.run([sys.executable, "-m", "gru4rec_conformance.reports", "render", str(run_dir)],
                            capture_output=True, text=True, timeout=120, env=os.environ.copy())  # fmt: skip
    assert render.returncode == 0, render.stderr
    assert "cut off a torn line 3" in (run_dir / "summary.md").read_text()
