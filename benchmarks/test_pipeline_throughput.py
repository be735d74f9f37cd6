"""Throughput (raw events/s, end to end) and peak memory of the study's preprocessing on synthetic
Yoochoose-format raw files (target: >= 1M raw events/s on 2 cores).

Sizes and places (environment):
- ``GRU4REC_BENCH_ROWS``: raw rows to generate (default 5,000,000; CI runs a small size with
  ``--benchmark-disable``);
- ``GRU4REC_BENCH_CACHE``: folder for the generated raw files (default ``<repo>/.cache/benchmarks``); they are
  generated once per (rows, seed) and reused.

``prepare(..., force=True)`` is timed with pytest-benchmark (the cache would otherwise skip the work); events/s
and the peak resident memory of a separate run in a fresh interpreter are put in ``extra_info`` and printed.
Nothing here asserts a time: speed is reported, not gated.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the root conftest.py does this for the whole tree; keep the file runnable alone
    sys.path.insert(0, str(ROOT))

from gru4rec_conformance.datasets.sessions.pipeline import prepare  # noqa: E402
from gru4rec_conformance.datasets.sessions.synthetic import PROFILES, generate_raw  # noqa: E402

ROWS = int(os.environ.get("GRU4REC_BENCH_ROWS", "5000000"))
CACHE = Path(os.environ.get("GRU4REC_BENCH_CACHE", str(ROOT / ".cache" / "benchmarks")))
SEED = 0


@pytest.fixture(scope="module")
def yoochoose_raw() -> tuple[Path, int]:
    """Folder with yoochoose-clicks.dat + yoochoose-test.dat of about ROWS rows together, and the exact count."""
    folder = CACHE / f"yoochoose_raw_{ROWS}_seed{SEED}"
    marker = folder / "COMPLETE.json"
    if not marker.is_file():
        tmp = folder.with_name(folder.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        paths = generate_raw("yoochoose", tmp, ROWS / PROFILES["yoochoose"].full_events, seed=SEED)
        rows = sum(sum(1 for _ in open(p, "rb")) for p in paths.values())
        (tmp / "COMPLETE.json").write_text(json.dumps({"rows": rows}))
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    return folder, json.loads(marker.read_text())["rows"]


def test_pipeline_throughput(benchmark, yoochoose_raw, tmp_path):
    raw, rows = yoochoose_raw
    out = tmp_path / "out"
    result = benchmark.pedantic(
        lambda: prepare("yoochoose", raw, out, force=True), rounds=1, iterations=1, warmup_rounds=0
    )
    assert result.manifest["steps"][0]["rows"] + result.manifest["steps"][1]["rows"] == rows
    benchmark.extra_info["raw_events"] = rows
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        seconds = stats.stats.median
        benchmark.extra_info["raw_events_per_s"] = round(rows / seconds)
        print(f"\npipeline throughput: {rows:,} raw events in {seconds:.2f} s = {rows / seconds:,.0f} events/s")


def test_pipeline_peak_memory(yoochoose_raw, tmp_path, record_property):
    """Peak resident memory of one end-to-end run in a fresh interpreter (ru_maxrss), per raw row."""
    raw, rows = yoochoose_raw
    code = textwrap.dedent(f"""
        import json, re, resource, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from gru4rec_conformance.datasets.sessions.pipeline import prepare

        def peak_kb():
            # VmHWM belongs to this process image; ru_maxrss on Linux can carry the forking parent's peak
            try:
                return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
            except (OSError, AttributeError):
                return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

        base = peak_kb()
        t, c = time.time(), time.process_time()
        prepare("yoochoose", {str(raw)!r}, {str(tmp_path / "out")!r}, force=True)
        print(json.dumps({{"peak_mb": peak_kb() / 1024, "base_mb": base / 1024, "wall_s": time.time() - t,
                          "cpu_s": time.process_time() - c}}))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads(r.stdout.strip().splitlines()[-1])
    per_row = (m["peak_mb"] - m["base_mb"]) * 2**20 / rows
    for k, v in {**m, "bytes_per_raw_row": per_row, "raw_events": rows}.items():
        record_property(k, v)
    print(
        f"\npeak RSS {m['peak_mb']:.0f} MB ({per_row:.0f} bytes per raw row above the interpreter's "
        f"{m['base_mb']:.0f} MB); wall {m['wall_s']:.2f} s, CPU {m['cpu_s']:.2f} s, "
        f"{rows / m['wall_s']:,.0f} raw events/s"
    )
    # bounded memory: the pipeline keeps a few compact int64 columns per row, not text or Python objects
    assert per_row < 400 or m["peak_mb"] < 600
