"""benchmarks/ci.py: the ratios to the reference in pytest-benchmark's format, their comparison with a baseline
(pytest-benchmark's compare table and regression check; only a ratio growth above 2x fails), the committed
baseline. The timed run itself is .ci/run's (about 2 minutes), not repeated here."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gru4rec_conformance.benchmarks import ci

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLE = FIXTURES / "benchmark_sample.json"


@pytest.fixture()
def ratios(tmp_path) -> Path:
    path = tmp_path / "ratios.json"
    assert ci.main(["ratios", str(SAMPLE), str(path)]) == 0
    return path


def test_ratios_are_per_round_times_over_the_references_best(ratios):
    data = json.loads(SAMPLE.read_text())
    doc = json.loads(ratios.read_text())
    benches = {(b["group"], b["extra_info"]["case"]): b for b in doc["benchmarks"]}
    official = [b for b in data["benchmarks"] if b["extra_info"]["impl"] == "official"]
    # one ratio entry per non-reference benchmark, named as it, in group ratio/<group>
    assert len(doc["benchmarks"]) == len(official) and {b["extra_info"]["impl"] for b in doc["benchmarks"]} == {
        "official"
    }
    for b in official:
        r = benches[(f"ratio/{b['group']}", b["extra_info"]["case"])]
        assert r["fullname"] == b["fullname"]
        if "epoch_seconds_over_reference" in b["extra_info"]:  # min = the headline ratio (best round / best round)
            assert r["stats"]["min"] == pytest.approx(b["extra_info"]["epoch_seconds_over_reference"], rel=1e-9)
        assert r["stats"]["rounds"] == len(r["stats"]["data"]) and r["stats"]["max"] >= r["stats"]["min"] > 0
    assert set(doc) >= {"machine_info", "commit_info", "benchmarks", "datetime", "version"}


def _scaled(path: Path, tmp_path: Path, factor: float, impl_case: str | None = None) -> Path:
    """A copy of the ratio JSON at ``path`` with every ratio (or only those of fullname ``impl_case``) x factor."""
    doc = json.loads(path.read_text())
    for b in doc["benchmarks"]:
        if impl_case is None or b["fullname"] == impl_case:
            b["stats"] = {
                k: (v * factor if k in ("min", "max", "mean", "median") else v) for k, v in b["stats"].items()
            }
    out = tmp_path / f"scaled-{factor}.json"
    out.write_text(json.dumps(doc))
    return out


def test_only_a_ratio_growth_above_2x_fails(ratios, tmp_path):
    text, status = ci.compare(ratios, _scaled(ratios, tmp_path, 1.0))
    assert status == 0 and "OK: no ratio regressed by more than 2x" in text
    # pytest-benchmark's own compare table (--between) is part of the output
    assert "ΔMin" in text and "ratio/epoch/retailrocket/cross-entropy" in text
    assert ci.compare(ratios, _scaled(ratios, tmp_path, 1.9))[1] == 0  # slower, within 2x
    assert ci.compare(ratios, _scaled(ratios, tmp_path, 0.1))[1] == 0  # faster never fails
    one = json.loads(ratios.read_text())["benchmarks"][0]["fullname"]
    text, status = ci.compare(ratios, _scaled(ratios, tmp_path, 2.2, one))
    assert status == 1 and f"FAILED: 1 ratio regression(s) larger than 2x:\n  {one}" in text
    assert "PercentageRegressionCheck" in text
    assert ci.compare(ratios, _scaled(ratios, tmp_path, 2.2, one), factor=3)[1] == 0


def test_missing_and_new_cases_are_reported_not_failed(ratios, tmp_path):
    doc = json.loads(ratios.read_text())
    fewer, more = copy.deepcopy(doc), copy.deepcopy(doc)
    gone = fewer["benchmarks"].pop(0)
    new = copy.deepcopy(doc["benchmarks"][0])
    new["fullname"] += "-new"
    more["benchmarks"].append(new)
    (tmp_path / "fewer.json").write_text(json.dumps(fewer))
    (tmp_path / "more.json").write_text(json.dumps(more))
    text, status = ci.compare(ratios, tmp_path / "fewer.json")
    assert status == 0 and "not measured in this run" in text and gone["fullname"] not in text.split("Ratio check")[0]
    text, status = ci.compare(ratios, tmp_path / "more.json")
    assert status == 0 and "new (no baseline)" in text
    text, status = ci.compare(tmp_path / "absent.json", ratios)
    assert status == 0 and "no baseline at" in text


def test_bad_inputs_exit_2_naming_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"no": "benchmarks"}')
    with pytest.raises(SystemExit) as exc:
        ci.main(["ratios", str(bad), str(tmp_path / "r.json")])
    assert exc.value.code == 2 and "bad.json: not a pytest-benchmark JSON" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--factor must be > 1"):
        ci.check_ratios({}, {}, factor=1.0)


def test_committed_baseline_covers_the_ci_run():
    """The baseline is a ratio JSON of a run with the CI settings: the official port and cornac, epoch and
    evaluation, every ratio positive."""
    doc = json.loads(ci.BASELINE.read_text())
    cases = {(b["group"], b["extra_info"]["impl"]) for b in doc["benchmarks"]}
    assert cases == {
        (f"ratio/{g}", impl)
        for g in ("epoch/diginetica/cross-entropy", "eval/diginetica")
        for impl in ("official", "cornac")
    }
    assert all(b["stats"]["min"] > 0 for b in doc["benchmarks"])
    env = doc["gru4rec_ratios"]["env"]
    assert {k: env.get(k) for k in ci.SETTINGS} == ci.SETTINGS


def test_baseline_is_the_largest_or_the_median_ratio_per_case(ratios, tmp_path):
    docs = [json.loads(_scaled(ratios, tmp_path, f).read_text()) for f in (3.0, 1.0, 0.5)]
    base = {b["fullname"]: b["stats"]["min"] for b in json.loads(ratios.read_text())["benchmarks"]}
    med = ci.baseline_ratios(docs, pick="median")
    assert {b["fullname"]: b["stats"]["min"] for b in med["benchmarks"]} == pytest.approx(base)
    worst = ci.baseline_ratios(docs)
    assert {b["fullname"]: b["stats"]["min"] for b in worst["benchmarks"]} == pytest.approx(
        {k: 3 * v for k, v in base.items()}
    )
    assert all(len(b["runs"]) == 3 for b in worst["benchmarks"]) and worst["gru4rec_ratios"]["runs"] == 3
    out = tmp_path / "baseline.json"
    assert ci.main(["baseline", str(SAMPLE), str(SAMPLE), "--to", str(out)]) == 0
    info = json.loads(out.read_text())["gru4rec_ratios"]
    assert (info["runs"], info["pick"]) == (2, "max")
    with pytest.raises(ValueError, match="no ratio JSON"):
        ci.baseline_ratios([])
