"""benchmarks/report.py: the Markdown + PNG report from a pytest-benchmark JSON (a trimmed real run, fixture)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gru4rec_conformance.benchmarks.report import build_markdown, load, main, write_report

FIXTURES = Path(__file__).parent / "fixtures"

SAMPLE = FIXTURES / "benchmark_sample.json"


def test_report_tables_ratios_and_study_numbers(tmp_path):
    folder = write_report(SAMPLE, tmp_path)
    md = (folder / "report.md").read_text()
    data = json.loads(SAMPLE.read_text())
    # one row per measured (group, impl), the reference first within a group
    epoch_rows = [l for l in md.splitlines() if l.startswith("| retailrocket | cross-entropy | **")]
    assert [re.search(r"\*\*(\w+)\*\*", l).group(1) for l in epoch_rows] == ["reference", "official"]
    off = next(
        b["extra_info"]
        for b in data["benchmarks"]
        if b["group"] == "epoch/retailrocket/cross-entropy" and b["extra_info"]["impl"] == "official"
    )
    ratio = off["epoch_seconds_over_reference"]
    assert f"| {ratio:.2f} |" in epoch_rows[1]
    # the study's official best-params run for RetailRocket / cross-entropy (datasets/study/study_results.csv): 2.77 s, 199935 e/s, 881 mb/s
    assert "| 2.77 | 881 | 199935 |" in epoch_rows[0]
    # published third-party ratios (same file): KerasGRU4Rec out of the box 99.74× on RetailRocket cross-entropy
    assert "KerasGRU4Rec 99.74×" in md and "Recpack 44.14×" in md
    # sweep table + plot, evaluation table + plot, epoch plot; every referenced PNG exists and is a PNG
    assert "### n_items" in md and "## Evaluation throughput" in md
    pngs = re.findall(r"\]\((plots/[^)]+\.png)\)", md)
    assert {"plots/sweep_n_items.png", "plots/eval_events_per_s.png", "plots/epoch_minibatches_per_s.png"} <= set(pngs)
    for p in pngs:
        assert (folder / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((folder / "benchmark.json").read_text()) == data
    # the CPU-time note and the device/settings header
    assert "CPU columns" in md.replace("*", "") and "device: **cpu**" in md and "`ci*0.3`" in md


def test_reports_never_overwrite_earlier_ones(tmp_path):
    a = write_report(SAMPLE, tmp_path, plots=False)
    b = write_report(SAMPLE, tmp_path, plots=False)
    assert a != b and (a / "report.md").is_file() and (b / "report.md").is_file()
    assert not any(p.name.startswith(".") for p in a.iterdir())  # no temporary left behind


def test_compact_copy_drops_the_timing_arrays(tmp_path):
    data = json.loads(SAMPLE.read_text())
    data["benchmarks"][0]["stats"]["data"] = [0.5, 0.6, 0.7]
    src = tmp_path / "with_data.json"
    src.write_text(json.dumps(data))
    folder = write_report(src, tmp_path / "out", plots=False, compact=True)
    copied = json.loads((folder / "benchmark.json").read_text())
    assert "data" not in copied["benchmarks"][0]["stats"] and copied["benchmarks"][0]["stats"]["min"]


def test_markdown_without_epoch_rows_still_has_sweeps():
    data = load(SAMPLE)
    data["benchmarks"] = [b for b in data["benchmarks"] if b["group"].startswith("sweep/")]
    md = build_markdown(data)
    assert "## Scalability sweeps" in md and "## One epoch" not in md and "## Evaluation" not in md


def test_bad_input_names_the_file(tmp_path):
    bad = tmp_path / "not_bench.json"
    bad.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="not_bench.json.*benchmarks"):
        load(bad)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ValueError, match="broken.json: not JSON"):
        load(broken)
    with pytest.raises(SystemExit):
        main([str(bad), "--out-root", str(tmp_path)])


def test_cli_prints_the_report_path(tmp_path, capsys):
    assert main([str(SAMPLE), "--out-root", str(tmp_path), "--no-plots", "--title", "CPU run"]) == 0
    path = capsys.readouterr().out.strip()
    assert path.endswith("report.md") and open(path).read().startswith("# CPU run")
