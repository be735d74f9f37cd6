"""``pytest benchmarks/ --impl X`` measures an adapter beside the reference in the same run (the conformance plugin's
selection reused; the adapter runs in its worker process), with --benchmark-disable at a tiny scale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gru4rec_conformance.benchmarks.report import build_markdown, load

REPO = Path(__file__).resolve().parents[2]

HERE = Path(__file__).resolve().parent


def test_benchmarks_with_an_impl_selected(subprocess_env, tmp_path):
    results = tmp_path / "results.jsonl"
    env = {
        **subprocess_env,
        "GRU4REC_BENCH_SCALE": "ci*0.3",
        "GRU4REC_BENCH_DATASETS": "diginetica",
        "GRU4REC_BENCH_LOSSES": "cross-entropy",
        "GRU4REC_BENCH_RESULTS_JSONL": str(results),
    }
    env.pop("OFFICIAL_GRU4REC_PATH", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(HERE)])
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "benchmarks/test_epoch.py",
        "--impl",
        "bench_adapters:LenientMarkov,gru4rec_conformance.implementations.template:TemplateAdapter",
        "--benchmark-disable",
        "-p",
        "no:cacheprovider",
        "-rs",
        "--no-report",
        "-q",
    ]
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "4 passed, 2 skipped" in out, out[-3000:]
    # the template (a Markov chain) takes no GRU4Rec hyperparameter: skipped with the reason, not failed
    assert "unsupported by template: loss" in out
    summary = out.split("GRU4Rec benchmarks", 1)[1]
    rows = {(l.split()[0], l.split()[2]) for l in summary.splitlines() if l.startswith(("epoch/", "eval/"))}
    assert rows == {
        (g, i) for g in ("epoch/diginetica/cross-entropy", "eval/diginetica") for i in ("reference", "lenient-mar")
    }  # impl names are cut to 11 characters
    for line in summary.splitlines():
        if line.startswith(("epoch/", "eval/")) and "lenient-mar" in line:
            assert float(line.split()[-2]) > 0  # ratio to the reference of the same run
    # the results JSONL: the 4 measured cases, and the 2 skipped ones with their group, case and reason
    lines = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    assert sorted((r["group"], r["extra_info"]["impl"][:11]) for r in lines if "extra_info" in r) == sorted(rows)
    skips = {r["group"]: r for r in lines if r.get("skipped") is True}
    assert set(skips) == {"epoch/diginetica/cross-entropy", "eval/diginetica"} and len(lines) == 6
    epoch = skips["epoch/diginetica/cross-entropy"]
    assert epoch["name"] == "diginetica/cross-entropy" and epoch["reason"].startswith("unsupported by template: loss")
    assert epoch["skip_info"]["impl"] == "template" and epoch["skip_info"]["variant"] == "best"
    assert epoch["when"] == "call" and "impl=template" in epoch["nodeid"]
    # the report: the template's row reads "skipped: loss ..." where it read "–" before
    md = build_markdown(load(results))
    row = next(l for l in md.splitlines() if l.startswith("| **template** |"))
    assert "| skipped: loss " in row, row
