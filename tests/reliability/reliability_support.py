"""Helpers of the end-to-end reliability tests: run the real suite (``pytest conformance/gru4rec``) in a
subprocess and read back the run directories it writes.

Inner runs pin torch to one thread (``OMP_NUM_THREADS=1``, which worker processes inherit): on a loaded
2-core machine a multi-threaded fit in a worker is ~10x slower, which would make the timeout of the hang mutant
race with an honest fit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# Plugins of the environment that inner runs do not need (they cost seconds per start).
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:xdist")


def suite_env(**extra: str) -> dict[str, str]:
    """Environment of an inner run: this one, one torch thread, no implementation preselected by env."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "GRU4REC_CONFORMANCE_IMPL",
            "GRU4REC_REPORT_DIR",
            "GRU4REC_ISOLATION",
            "GRU4REC_XFAIL_MARK",
            "PYTEST_ADDOPTS",
            "PYTEST_PLUGINS",
        )
    }
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(HERE)]),
        }
    )
    env.update(extra)
    return env


SUITE = "conformance/gru4rec"


def suite_command(report_dir: Path, *args: str) -> list[str]:
    """``python -m pytest <args>`` (args name the checks: ``SUITE`` or node ids) writing run directories under
    ``report_dir``."""
    return [sys.executable, "-m", "pytest", *QUIET, "--no-report-plots", "--report-dir", str(report_dir), *args]


def run_suite(report_dir: Path, *args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """Run the suite to its end; returns the completed process (stdout and stderr as text)."""
    return subprocess.run(
        suite_command(report_dir, *args),
        cwd=REPO,
        env=suite_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_dirs(report_dir: Path, impl_folder: str) -> list[Path]:
    """Run directories of one implementation (folder name: ``mutant:crash`` → ``mutant.crash``), oldest first."""
    root = Path(report_dir) / impl_folder
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def the_run_dir(report_dir: Path, impl_folder: str) -> Path:
    dirs = run_dirs(report_dir, impl_folder)
    assert len(dirs) == 1, f"expected one run directory of {impl_folder} under {report_dir}, found {dirs}"
    return dirs[0]


def jsonl_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of results.jsonl, parsed (the file must be readable line by line)."""
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def results_json(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "results.json").read_text(encoding="utf-8"))


def describe(proc: subprocess.CompletedProcess) -> str:
    """The tail of an inner run's output, for assertion messages."""
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-2000:]}"
