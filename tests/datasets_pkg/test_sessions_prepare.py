"""prepare(): Parquet outputs with documented dtypes, the stats table, the manifest, the content-hash cache, atomic
writes, compressed raw inputs and the command line."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from gru4rec_conformance import child_pythonpath
from gru4rec_conformance.datasets.sessions import pipeline
from gru4rec_conformance.datasets.sessions.pipeline import PARTS, load_prepared, prepare

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rr_raw(tmp_path_factory):
    from gru4rec_conformance.datasets.sessions.synthetic import generate_raw

    d = tmp_path_factory.mktemp("rr")
    generate_raw("retailrocket", d, 3e-3, seed=5)
    return d


def mtimes(folder: Path) -> dict:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def test_outputs_dtypes_stats_manifest(rr_raw, tmp_path):
    out = tmp_path / "out"
    res = prepare("retailrocket", rr_raw, out, tsv=True)
    assert not res.cached
    for part in PARTS:
        table = pq.read_table(out / f"{part}.parquet")
        assert [str(t) for t in table.schema.types] == ["int64"] * 3
        assert table.schema.names == ["SessionId", "ItemId", "Time"]
        meta = json.loads(table.schema.metadata[b"gru4rec_conformance"])
        assert meta == {
            "dataset": "retailrocket",
            "time_unit": "ms",
            "pipeline_version": pipeline.PIPELINE_VERSION,
            "part": part,
        }
        tsv = pd.read_csv(out / f"retailrocket_processed_view_{part}.tsv", sep="\t")
        pd.testing.assert_frame_equal(tsv, table.to_pandas(), check_dtype=False)
    stats = pd.read_csv(out / "stats.tsv", sep="\t")
    assert list(stats.columns) == [
        "Dataset",
        "NumEvents",
        "NumSessions",
        "NumItems",
        "NumDays",
        "StartTime",
        "EndTime",
        "AvgItemViews",
        "MinSessionLength",
        "MaxSessionLength",
        "AvgSessionLength",
        "MinSessionTime (sec)",
        "MaxSessionTime (sec)",
    ]
    m = json.loads((out / "manifest.json").read_text())
    assert m["inputs"][0]["sha256"] == hashlib.sha256((rr_raw / "events.csv").read_bytes()).hexdigest()
    assert m["filter_rounds"] >= 3 and len(m["filter_log"]) == m["filter_rounds"]
    assert set(m["library_versions"]) == {"python", "numpy", "pandas", "pyarrow"}
    assert [s["step"] for s in m["steps"]][:3] == ["read events.csv", "sessions (1 h gap, all events)", "views"]
    for part in PARTS:
        info = m["outputs"][part]
        assert info["rows"] == len(res.load(part))
        assert info["sha256"] == hashlib.sha256((out / info["file"]).read_bytes()).hexdigest()
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]
    assert load_prepared(out).manifest == m


def test_cache_rerun_does_nothing_until_inputs_change(rr_raw, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(rr_raw, raw)
    out = tmp_path / "out"
    first = prepare("retailrocket", raw, out)
    before = mtimes(out)
    again = prepare("retailrocket", raw, out)
    assert again.cached and mtimes(out) == before and again.manifest == first.manifest
    forced = prepare("retailrocket", raw, out, force=True)
    assert not forced.cached
    # same bytes under a new mtime: still cached (content hash); changed bytes: recomputed
    os.utime(raw / "events.csv", (1, 1))
    assert prepare("retailrocket", raw, out).cached
    with open(raw / "events.csv", "a") as f:
        f.write(f"{1442000000000},77,view,123,\n")
    changed = prepare("retailrocket", raw, out)
    assert not changed.cached and changed.manifest["cache_key"] != first.manifest["cache_key"]
    # a damaged output invalidates the cache
    (out / "test.parquet").write_bytes(b"garbage")
    assert not prepare("retailrocket", raw, out).cached


def test_compressed_and_zipped_inputs_give_the_same_outputs(rr_raw, tmp_path):
    plain = prepare("retailrocket", rr_raw, tmp_path / "plain")
    data = (rr_raw / "events.csv").read_bytes()
    variants = {
        "gz": lambda d: (d / "events.csv.gz").write_bytes(gzip.compress(data)),
        "bz2": lambda d: (d / "events.csv.bz2").write_bytes(bz2.compress(data)),
        "zip": lambda d: zipfile.ZipFile(d / "events.csv.zip", "w").writestr("events.csv", data),
        "kaggle_zip": lambda d: _kaggle_zip(d / "ecommerce-dataset.zip", data),
    }
    for name, make in variants.items():
        raw = tmp_path / f"raw_{name}"
        raw.mkdir()
        make(raw)
        res = prepare("retailrocket", raw, tmp_path / f"out_{name}")
        for part in PARTS:
            pd.testing.assert_frame_equal(res.load(part), plain.load(part), obj=f"{name}/{part}")


def _kaggle_zip(path: Path, data: bytes) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("category_tree.csv", "categoryid,parentid\n1,\n")
        zf.writestr("events.csv", data)


def test_interrupted_write_leaves_no_temporaries_and_no_manifest(rr_raw, tmp_path, monkeypatch):
    out = tmp_path / "out"
    prepare("retailrocket", rr_raw, out)
    calls = {"n": 0}
    real = pq.write_table

    def failing(table, where, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full (simulated)")
        return real(table, where, *a, **kw)

    monkeypatch.setattr(pipeline.pq, "write_table", failing)
    with pytest.raises(OSError, match="simulated"):
        prepare("retailrocket", rr_raw, out, force=True)
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]
    assert not (out / "manifest.json").exists()  # the folder is visibly incomplete
    with pytest.raises(FileNotFoundError, match="no manifest"):
        load_prepared(out)
    monkeypatch.setattr(pipeline.pq, "write_table", real)
    assert not prepare("retailrocket", rr_raw, out).cached


def _cli(*args, env_extra=None):
    env = {**os.environ, "PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH")), **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "gru4rec_conformance.datasets", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_prepare_info_and_errors(rr_raw, tmp_path):
    out = tmp_path / "out"
    r = _cli("prepare", "retailrocket", "--raw", str(rr_raw), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "filter rounds:" in r.stdout and "write" in r.stderr  # tqdm bar on stderr names the steps
    r2 = _cli("prepare", "retailrocket", "--raw", str(rr_raw), "--out", str(out), "--quiet")
    assert r2.returncode == 0 and "up to date" in r2.stdout
    info = _cli("info", "diginetica")
    assert info.returncode == 0
    assert "833,113" in info.stdout and "70,164" in info.stdout and "40,351" in info.stdout
    assert "competitions.codalab.org/competitions/11161" in info.stdout
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "events.csv").write_text("timestamp;visitorid;event;itemid;transactionid\n1;2;view;3;\n")
    r3 = _cli("prepare", "retailrocket", "--raw", str(bad), "--out", str(tmp_path / "o3"), "--quiet")
    assert r3.returncode == 2 and "events.csv:1:" in r3.stderr and "wrong separator" in r3.stderr
    assert "Traceback" not in r3.stderr


def test_info_all_matches_the_published_table():
    stats = json.loads((ROOT / "datasets" / "sessions" / "study_stats.json").read_text())
    assert "2307.14956" in stats["source"]
    pub = stats["published"]
    assert pub["yoochoose"]["train"]["events"] == 29_107_309 and pub["rees46"]["test"]["sessions"] == 166_841
    assert pub["coveo"]["items"] == 10_868 and pub["retailrocket"]["train"]["days"] == 131
    for d in pub.values():  # events/session is consistent with the counts (transcription check)
        for part in ("train", "test"):
            p = d[part]
            assert p["events"] / p["sessions"] == pytest.approx(p["events_per_session"], abs=0.006)
