"""The GPU check (benchmarks/gpu/run_gpu_benchmarks.sh) as a CPU dry run of the exact script at a tiny scale, and its
parts: the stage budget, the sweep's node ids, the preflight, the CUDA-graph fallback check, the report's reader.

The dry run needs the official port's checkout (the script compares against it): it is skipped, with the line
saying how to provide it, where ``implementations._checkout.locate`` finds none (a fresh clone in CI).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from gru4rec_conformance.benchmarks.gpu import timebox
from gru4rec_conformance.benchmarks.gpu.check_static_step import graph_fallbacks
from gru4rec_conformance.benchmarks.gpu.gpu_report import read_jsonl
from gru4rec_conformance.benchmarks.test_scalability import GRIDS
from gru4rec_conformance.benchmarks.workload import DATASETS, LOSSES, catalogue_items

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "run_gpu_benchmarks.sh"
DRY_SCALE = 0.001
#: the device tool brings back at most 8 files from $OUT
MAX_FILES = 8


def _official() -> Path:
    from gru4rec_conformance.implementations._checkout import locate
    from gru4rec_conformance.implementations.base import ImplementationUnavailable

    try:
        return locate("gru4rec_pytorch_official")
    except ImplementationUnavailable as exc:
        pytest.skip(f"the GPU script's dry run compares against the official port: {exc}")


@pytest.mark.parametrize("pass_, budget", [("validate", 150), ("measure", 300)])
def test_default_stage_limits_fit_the_budget(pass_, budget):
    """Each pass's default stage limits plus one kill grace per stage fit its budget: validate 150 s, measure
    300 s (with a 4-minute machine start, a 15-minute loan then has room to rerun a failed validating pass)."""
    text = SCRIPT.read_text()
    m = re.search(rf'{pass_}\) DEFAULT_LIMITS="([0-9 ]+)" DEFAULT_BUDGET=(\d+)', text)
    limits, default_budget = [int(x) for x in m.group(1).split()], int(m.group(2))
    grace = int(re.search(r"GPU_KILL_GRACE:-(\d+)", text).group(1))
    assert default_budget == budget
    assert re.search(r"GPU_ROUNDS:-3\}", text)  # >= 3 timed rounds per case on the GPU
    assert sum(limits) + len(limits) * grace <= budget


def test_a_pass_must_be_named(tmp_path):
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "validate|measure" in r.stderr


def test_sweep_node_ids_are_the_grids():
    text = SCRIPT.read_text()
    for grid in ("gpu", "ci"):
        items = re.search(rf'{grid}\) SWEEP_ITEMS="([0-9 ]+)"', text).group(1).split()
        assert sorted(map(int, items)) == sorted(GRIDS[grid]["n_items"])


def test_graph_fallbacks_names_every_run_without_a_graph():
    res = {
        "agreement": {
            "a": {"static_step_info": {"cuda_graph": True}},
            "b": {"static_step_info": {"cuda_graph": False, "graph_error": "RuntimeError: capture"}},
        },
        "speed": {
            "xe/static-graph": {"step_info": {"cuda_graph": False, "graph_error": None}},
            "xe/static-eager": {"step_info": {"cuda_graph": False}},
            "sessions": 10,
        },
    }
    assert graph_fallbacks(res) == ["agreement b: RuntimeError: capture", "speed xe/static-graph: no graph"]


def test_report_reader_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"group": "epoch/x/y", "name": "x/y", "extra_info": {"impl": "reference"}}) + '\n{"gro')
    assert [r["group"] for r in read_jsonl(path)] == ["epoch/x/y"]


def _wheel(folder: Path, dist: str, module: str) -> Path:
    """A minimal pure-Python wheel of ``dist`` holding ``module`` (no network, no build tools)."""
    path = folder / f"{dist}-1.0-py3-none-any.whl"
    info = f"{dist}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{module}/__init__.py", "VALUE = 1\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def test_preflight_installs_a_missing_package_from_a_carried_wheel(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "gpucheck_fake", "gpucheck_fake_mod")
    env_txt, site = tmp_path / "env.txt", tmp_path / "site"
    cmd = [sys.executable, str(REPO / "benchmarks" / "gpu" / "preflight.py"), "--env-out", str(env_txt)]
    cmd += ["--wheels", str(wheels), "--site", str(site), "--also", "gpucheck_fake=gpucheck_fake_mod", "nope=nope_mod"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    text = env_txt.read_text()
    assert r.returncode == 3, r.stdout + r.stderr  # nope has no wheel
    assert "installed from" in text and "gpucheck-fake: 1.0" in text
    assert (site / "gpucheck_fake_mod" / "__init__.py").is_file()
    assert "PREFLIGHT FAILED: nope: missing; carry its wheel" in r.stderr
    assert re.search(r"^torch: \S+ \(pyproject ==", text, re.M)  # versions against pyproject's ranges


#: the dry run's wall-clock limits: room for a heavily loaded shared machine (the logic is the same; the defaults
#: are checked against the budgets above; the work is bounded by the CPU-time check)
DRY_LIMITS = {"validate": ("120 300 300 300 120", 1200), "measure": ("120 300 300 600 300 300 120", 2400)}


def dry_run_env(official: Path, out: Path, pass_: str) -> dict:
    """The environment of the script's CPU dry run of ``pass_`` into ``out``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRU4REC_BENCH_", "GPU_"))}
    limits, budget = DRY_LIMITS[pass_]
    env.update(
        GPU_DEVICE="cpu",
        GPU_SCALE=str(DRY_SCALE),
        GPU_SWEEP_GRID="ci",
        PYTHON=sys.executable,
        OFFICIAL_GRU4REC_PATH=str(official),
        OUT=str(out),
        GPU_SUITE_COMMIT="dry-run",
        GPU_ROUNDS="1",
        GPU_BUDGET=str(budget),
        GPU_STAGE_LIMITS=limits,
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    return env


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")
def test_cpu_dry_run_of_the_gpu_script(tmp_path):
    """The exact script, both passes, on the CPU at scale 0.001 (all five catalogues, both losses, the golden
    steps on the CPU, the ci sweep grid; 1 warm-up + 1 timed round instead of 3, for time): every stage passes,
    within 3 minutes of CPU time for both; each case is measured once per implementation; each pass's output fits
    the device tool's 8 files; the measuring report has the side-by-side table with the headline case first."""
    official = _official()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    for pass_ in ("validate", "measure"):
        out = tmp_path / pass_
        env = dry_run_env(official, out, pass_)
        r = subprocess.run(
            ["bash", str(SCRIPT), pass_], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=2500
        )
        log = (out / "log.txt").read_text() if (out / "log.txt").is_file() else r.stdout + r.stderr
        assert r.returncode == 0, f"{pass_}: " + log[-6000:]
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # CPU time, not wall time: on a shared machine the wall time grows with other people's load
    assert cpu < 180, f"the dry run used {cpu:.0f} CPU s (wall {wall:.0f} s; budget: 3 minutes)"
    check_validate_output(tmp_path / "validate")
    check_measure_output(tmp_path / "measure")
    print(f"dry run: {wall:.0f} s wall, {cpu:.0f} s CPU")


def _common_output(out: Path, required: set[str]) -> list[dict]:
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert len(files) <= MAX_FILES, files
    assert {"env.txt", "log.txt", "golden_steps.xml", "results.jsonl", "report.md"} | required <= set(files)
    env_txt = (out / "env.txt").read_text()
    assert "official pinned: d1fc31105577665d2f105de1c8d9a38d223a9a22" in env_txt
    assert re.search(r"^pytest-benchmark: \S+", env_txt, re.M) and "stages failed or skipped: 0" in env_txt
    golden = (out / "golden_steps.xml").read_text()
    assert 'failures="0"' in golden and 'errors="0"' in golden
    report = (out / "report.md").read_text()
    assert "golden training steps (tests/reference) on the device: PASS" in report
    assert "No case was dropped for time." in report
    rows = read_jsonl(out / "results.jsonl")
    keys = [(r["group"], r["name"], r["extra_info"]["impl"]) for r in rows]
    assert len(keys) == len(set(keys)), "a case was measured twice"
    return rows


def check_validate_output(out: Path) -> None:
    """What a passing validating dry run leaves in ``out``: the static-step check, one golden step, the tiny
    case of both implementations."""
    rows = _common_output(out, {"static_step.json"})
    static = json.loads((out / "static_step.json").read_text())
    assert static["agree"] is True and static["cuda_graph_fallbacks"] == []
    golden = (out / "golden_steps.xml").read_text()
    assert 'tests="1"' in golden
    assert sorted((r["group"], r["extra_info"]["impl"], r["extra_info"]["settings"]["minibatches"]) for r in rows) == [
        ("epoch/coveo/cross-entropy", "official", 50),
        ("epoch/coveo/cross-entropy", "reference", 50),
    ]


def check_measure_output(out: Path) -> None:
    """What a passing measuring dry run leaves in ``out`` (see the test above)."""
    rows = _common_output(out, set())
    keys = [(r["group"], r["name"], r["extra_info"]["impl"]) for r in rows]
    epoch = {
        (r["extra_info"]["dataset"], r["extra_info"]["loss"], r["extra_info"]["impl"]): r
        for r in rows
        if r["group"].startswith("epoch/")
    }
    for dataset in DATASETS:
        for loss in LOSSES:
            for impl in ("reference", "official"):
                e = epoch[(dataset, loss, impl)]["extra_info"]
                assert len(e["rounds_epoch_seconds"]) == 1 and e["settings"]["warmup"] == 1
                assert e["shape"]["n_items"] == catalogue_items(dataset, DRY_SCALE)
    evals = [k for k in keys if k[0].startswith("eval/")]
    sweeps = [k for k in keys if k[0] == "sweep/n_items"]
    assert len(evals) == 2 * len(DATASETS) and len(sweeps) == 2 * len(GRIDS["ci"]["n_items"])
    settings = {
        (r["group"] == "epoch/coveo/cross-entropy", r["extra_info"]["settings"]["minibatches"])
        for r in rows
        if r["group"].startswith(("epoch/", "eval/"))
    }  # each stage's own setting reached it
    assert {m for head, m in settings if head} == {1500} and {m for head, m in settings if not head} == {400}
    golden = (out / "golden_steps.xml").read_text()
    assert re.search(r'tests="(\d+)"', golden) and int(re.search(r'tests="(\d+)"', golden).group(1)) > 1

    report = (out / "report.md").read_text()
    table = report.split("## Minibatches per second, side by side", 1)[1]
    first = [line for line in table.splitlines() if line.startswith("|")][2]  # after the header and the rule
    assert first.startswith("| coveo | cross-entropy |"), "the headline case is not first"
    for dataset in DATASETS:
        assert f"| {dataset} | cross-entropy |" in table and f"| {dataset} | bpr-max |" in table
    assert "pinned commit d1fc31105577665d2f105de1c8d9a38d223a9a22" in report


class _Spec:
    def __init__(self, params: dict):
        self.params, self.id = params, "-".join(map(str, params.values()))


class _Item:
    """What timebox reads of a pytest item: its path, test name, parametrization and node id."""

    def __init__(self, name: str, **params):
        self.path, self.originalname, self.name = Path("benchmarks/test_epoch.py"), name, name
        self.callspec = _Spec(params)
        self.nodeid = f"{name}[{self.callspec.id}]"


def test_timebox_drops_a_case_that_would_pass_the_deadline_with_both_implementations():
    case_a = [_Item("test_x", bench_impl=i, n=1) for i in ("reference", "official")]
    case_b = [_Item("test_x", bench_impl=i, n=2) for i in ("reference", "official")]
    items = case_a + case_b
    box = timebox.Timebox(deadline=time.time() + 5)
    assert box.decide(case_a[0], items) is None  # nothing measured yet: the first case runs
    box.finished(case_a[0], 3.0)
    box.finished(case_a[1], 4.0)
    reason = box.decide(case_b[0], items)  # 3 + 4 s estimated, 5 s left
    assert reason is not None and reason.startswith(timebox.DROPPED) and "estimated 7 s" in reason
    assert box.decide(case_b[1], items) == reason  # the case's other implementation goes with it
    roomy = timebox.Timebox(deadline=time.time() + 60, rates=dict(box.rates))
    assert roomy.decide(case_b[0], items) is None


def test_timebox_weights_follow_the_epoch_size(monkeypatch):
    monkeypatch.setenv("GRU4REC_BENCH_SCALE", "1")
    monkeypatch.setenv("GRU4REC_BENCH_MINIBATCHES", "400")
    small = timebox.weight(
        _Item("test_epoch", bench_impl="reference", bench_dataset="diginetica", bench_loss="cross-entropy")
    )
    rees = timebox.weight(_Item("test_epoch", bench_impl="reference", bench_dataset="rees46", bench_loss="bpr-max"))
    assert small >= 400 and rees > 10 * small  # Rees46 / BPR-max (B=32): every one of 172,756 items must occur
    assert timebox.weight(_Item("test_sweep", bench_impl="reference", sweep_point=("n_items", 30000))) == 30000


def test_timebox_plugin_records_what_it_dropped(tmp_path):
    """In a pytest run past its deadline the first case runs and every later one is skipped with the reason; a
    non-benchmark test's drop is appended to the results file (benchmark tests get theirs from conftest.py)."""
    (tmp_path / "test_cases.py").write_text(
        "import pytest, time\n@pytest.mark.parametrize('n', [1, 2, 3])\ndef test_case(n):\n    time.sleep(0.2)\n"
    )
    results = tmp_path / "results.jsonl"
    env = dict(os.environ, GPU_STAGE_DEADLINE=str(time.time() - 1), GRU4REC_BENCH_RESULTS_JSONL=str(results))
    env["PYTHONPATH"] = str(REPO / "src")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "gru4rec_conformance.benchmarks.gpu.timebox"]
    cmd += ["-q", "-rs", "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_cases.py")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed, 2 skipped" in r.stdout and "timebox: dropped 2 test(s) of 3 case(s)" in r.stdout
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    assert [x["nodeid"].split("::")[-1] for x in lines] == ["test_case[2]", "test_case[3]"]
    assert all(x["skipped"] and x["reason"].startswith(timebox.DROPPED) for x in lines)
