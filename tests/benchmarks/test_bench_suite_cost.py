"""benchmarks/suite_cost.py: the main job measured cold and warm in child pytest runs (CPU from os.wait4), each
check's CPU time recorded by the module as a plugin, the Markdown from the JSON, and the benchmark report's
``--suite-cost`` section."""

from __future__ import annotations

import json

import pytest

from gru4rec_conformance.benchmarks import report, suite_cost

JOB = """
import time


def test_busy():
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass


def test_quick():
    pass
"""


def test_measure_runs_the_job_cold_then_warm_and_records_each_check(tmp_path):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "test_job.py").write_text(JOB)
    args = ["test_job.py", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    data = suite_cost.measure(tmp_path / "out", args, cwd=tmp_path / "job")
    assert [r["label"] for r in data["runs"]] == ["cold", "warm"]
    for run in data["runs"]:
        assert run["returncode"] == 0 and run["cpu_s"] >= 0.3
        by = {c["nodeid"].split("::")[1]: c for c in run["checks"]}
        assert set(by) == {"test_busy", "test_quick"} and by["test_busy"]["cpu_s"] >= 0.29
        assert by["test_busy"]["outcome"] == "passed"
    assert json.loads((tmp_path / "out" / "suite_cost.json").read_text()) == data
    md = suite_cost.render(data, top=1)
    assert "| cold |" in md and "warm / cold CPU" in md and "test_busy" in md and "test_quick" not in md
    with pytest.raises(FileExistsError, match="not empty"):
        (tmp_path / "out" / "oracle-cache" / "x.json").write_text("{}")
        suite_cost.measure(tmp_path / "out", args, cwd=tmp_path / "job")


def test_the_benchmark_report_ends_with_the_suites_cost(tmp_path):
    cost = {"command": ["pytest", "conformance/gru4rec"], "runs": [
        {"label": "cold", "cpu_s": 200.0, "wall_s": 800.0, "returncode": 0,
         "checks": [{"nodeid": "a.py::test_mc1", "cpu_s": 100.0, "wall_s": 1.0, "outcome": "passed"}]},
        {"label": "warm", "cpu_s": 80.0, "wall_s": 100.0, "returncode": 0,
         "checks": [{"nodeid": "a.py::test_mc1", "cpu_s": 20.0, "wall_s": 1.0, "outcome": "passed"}]}]}  # fmt: skip
    md = report.build_markdown({"benchmarks": []}, suite_cost=cost)
    assert md.rstrip().endswith(suite_cost.render(cost).rstrip())
    assert "warm / cold CPU: **0.40**" in md and "| `a.py::test_mc1` | 100.0 | 100% | 20.0 | passed |" in md
    (tmp_path / "bad.json").write_text("[]")
    src = tmp_path / "b.json"
    src.write_text(json.dumps({"benchmarks": []}))
    with pytest.raises(SystemExit):
        report.main([str(src), "--suite-cost", str(tmp_path / "bad.json"), "--out-root", str(tmp_path / "o")])
