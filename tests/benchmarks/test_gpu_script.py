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


def test_default_stage_limits_fit_the_budget():
    text = SCRIPT.read_text()
    limits = [int(x) for x in re.search(r"GPU_STAGE_LIMITS:-([0-9 ]+)\}", text).group(1).split()]
    budget = int(re.search(r"GPU_BUDGET:-(\d+)", text).group(1))
    grace = int(re.search(r"GPU_KILL_GRACE:-(\d+)", text).group(1))
    assert len(limits) == 8 and budget <= 480
    assert re.search(r"GPU_ROUNDS:-3\}", text)  # >= 3 timed rounds per case on the GPU
    assert sum(limits) + len(limits) * grace <= budget


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


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")
def test_cpu_dry_run_of_the_gpu_script(tmp_path):
    """The exact script on the CPU at scale 0.001 (all five catalogues, both losses, the golden steps on the CPU,
    the ci sweep grid; 1 warm-up + 1 timed round instead of 3, for time): every stage passes, within 3 minutes
    of CPU time;
    each case is measured once per implementation; the output fits the device tool's 8 files; the report has
    the side-by-side table with the headline case first."""
    official = _official()
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRU4REC_BENCH_", "GPU_"))}
    env.update(
        GPU_DEVICE="cpu",
        GPU_SCALE=str(DRY_SCALE),
        GPU_SWEEP_GRID="ci",
        PYTHON=sys.executable,
        OFFICIAL_GRU4REC_PATH=str(official),
        OUT=str(out),
        GPU_SUITE_COMMIT="dry-run",
        GPU_ROUNDS="1",
        # wall-clock limits with room for a heavily loaded shared machine (the logic is the same; the defaults
        # are checked against the 480 s budget above; the work is bounded by the CPU-time check below)
        GPU_BUDGET="2400",
        GPU_STAGE_LIMITS="120 300 300 300 600 300 300 120",
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=2500)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    log = (out / "log.txt").read_text() if (out / "log.txt").is_file() else r.stdout + r.stderr
    assert r.returncode == 0, log[-6000:]
    # CPU time, not wall time: on a shared machine the wall time grows with other people's load
    assert cpu < 180, f"the dry run used {cpu:.0f} CPU s (wall {wall:.0f} s; budget: 3 minutes)"
    check_dry_run_output(out)
    print(f"dry run: {wall:.0f} s wall, {cpu:.0f} s CPU")


def check_dry_run_output(out: Path) -> None:
    """What a passing dry run leaves in ``out`` (see the test above)."""

    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert len(files) <= MAX_FILES, files
    assert {"env.txt", "log.txt", "static_step.json", "golden_steps.xml", "results.jsonl", "report.md"} <= set(files)

    rows = read_jsonl(out / "results.jsonl")
    keys = [(r["group"], r["name"], r["extra_info"]["impl"]) for r in rows]
    assert len(keys) == len(set(keys)), "a case was measured twice"
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

    static = json.loads((out / "static_step.json").read_text())
    assert static["agree"] is True and static["cuda_graph_fallbacks"] == []
    golden = (out / "golden_steps.xml").read_text()
    assert 'failures="0"' in golden and 'errors="0"' in golden
    env_txt = (out / "env.txt").read_text()
    assert "official pinned: d1fc31105577665d2f105de1c8d9a38d223a9a22" in env_txt
    assert re.search(r"^pytest-benchmark: \S+", env_txt, re.M) and "stages failed or skipped: 0" in env_txt

    report = (out / "report.md").read_text()
    table = report.split("## Minibatches per second, side by side", 1)[1]
    first = [line for line in table.splitlines() if line.startswith("|")][2]  # after the header and the rule
    assert first.startswith("| coveo | cross-entropy |"), "the headline case is not first"
    for dataset in DATASETS:
        assert f"| {dataset} | cross-entropy |" in table and f"| {dataset} | bpr-max |" in table
    assert "pinned commit d1fc31105577665d2f105de1c8d9a38d223a9a22" in report
