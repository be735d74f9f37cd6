"""Synthetic stand-ins: exact raw formats, determinism, and output statistics inside the ranges of datasets.md
Part 3 (measured after the pipeline, as the spec asks)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.datasets._suite_io import open_raw
from gru4rec_conformance.datasets.sessions import synthetic
from gru4rec_conformance.datasets.sessions.pipeline import DATASETS, process
from gru4rec_conformance.datasets.sessions.readers import RAW_FILES, read_raw

FIRST_LINE = {
    "yoochoose": r"^\d+,\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z,\d+,(0|S|\d{1,2}|\d{10})$",
    "rees46": r"^event_time,event_type,product_id,category_id,category_code,brand,price,user_id,user_session$",
    "coveo": r"^session_id_hash,event_type,product_action,product_skus_hash,server_timestamp_epoch_ms,hashed_url$",
    "retailrocket": r"^timestamp,visitorid,event,itemid,transactionid$",
    "diginetica": r"^sessionId;userId;itemId;timeframe;eventdate$",
}
DATA_LINE = {
    "rees46": r"^2019-1[01]-\d\d \d\d:\d\d:\d\d UTC,(view|cart|purchase),\d+,\d{19},[a-z._]*,[a-z]*,\d+\.\d+,\d+,"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
    "coveo": r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12},(pageview|event),"
    r"(detail|click|add|remove|purchase|),([0-9a-f]{64}(\|[0-9a-f]{64})?|),\d{13},[0-9a-f]{64}$",
    "retailrocket": r"^\d{13},\d+,(view|addtocart|transaction),\d+,\d*$",
    "diginetica": r"^\d+;(NA|\d+);\d+;\d+;2016-\d\d-\d\d$",
}


def lines(path, n=200):
    with open_raw(path) as (f, _, _):
        return [f.readline().decode().rstrip("\n") for _ in range(n)]


@pytest.fixture(scope="module")
def processed(synthetic_raw):
    cache = {}

    def get(name):
        if name not in cache:
            d = synthetic_raw(name)
            frames = {f: read_raw(name, d / f) for f in RAW_FILES[name]}
            cache[name] = (frames, process(name, frames))
        return cache[name]

    return get


@pytest.mark.parametrize("name", DATASETS)
def test_raw_format(synthetic_raw, name):
    d = synthetic_raw(name)
    assert sorted(p.name for p in d.iterdir()) == sorted(RAW_FILES[name])
    first = lines(d / RAW_FILES[name][0])
    assert re.match(FIRST_LINE[name], first[0]), first[0]
    if name in DATA_LINE:
        for ln in first[1:]:
            assert re.match(DATA_LINE[name], ln), ln


@pytest.mark.parametrize("name", DATASETS)
def test_statistics_in_part3_ranges(processed, name):
    frames, res = processed(name)
    raw_rows = sum(len(f) for f in frames.values())
    assert 2.5e4 <= raw_rows <= 6e4, raw_rows  # CI size: 10^4-10^5 raw events
    full, train, test = res.frames["full"], res.frames["train_full"], res.frames["test"]
    lengths = full.groupby("SessionId").size()
    if name == "coveo":
        # Coveo's sessions are long (8.52 events/session in the published train set, docs/datasets.md 'Published statistics'); the stand-ins' length
        # ranges were measured on Yoochoose, Rees46 and Diginetica slices
        assert 4 <= lengths.median() <= 7 and 10 <= lengths.quantile(0.9) <= 20 and 6 <= lengths.mean() <= 9.5
    else:
        assert 2 <= lengths.median() <= 3
        assert 5 <= lengths.quantile(0.9) <= 9
        assert 3.0 <= lengths.mean() <= 4.5
    assert res.filter_rounds >= 3
    views = next(s for s in res.steps if s["step"].startswith("views"))["rows"]
    dedup = next(s for s in res.steps if s["step"] == "dedup")
    repeat_rate = dedup["removed"] / views
    target = {
        "yoochoose": (0.15, 0.22),
        "rees46": (0.19, 0.27),
        "diginetica": (0.05, 0.09),
        "coveo": (0.05, 0.2),
        "retailrocket": (0.05, 0.2),
    }[name]
    assert target[0] <= repeat_rate <= target[1], repeat_rate
    assert (~test["ItemId"].isin(train["ItemId"])).sum() > 0
    # Zipf: top-1% of (output) items carry 4-17% of raw-item events... measured on the pipeline output
    counts = full["ItemId"].value_counts().to_numpy()
    top = counts[: max(1, len(counts) // 100)].sum() / counts.sum()
    assert 0.03 <= top <= 0.2, top
    # many raw items never survive (the support filter bites)
    raw_items = _raw_item_count(name, frames)
    assert raw_items >= 2 * full["ItemId"].nunique()
    # non-consecutive re-visits (i ... j ... i) exist and are enriched by filtering
    assert 0.03 <= _revisit_share(full) <= 0.5
    days = res.stats.set_index("Dataset")["NumDays"].iloc[0]
    assert days >= (21 if res.tday > 86_400_000 else 10)


def _raw_item_count(name, frames):
    col = {
        "yoochoose": "ItemId",
        "rees46": "ProductId",
        "coveo": "product_skus_hash",
        "retailrocket": "itemid",
        "diginetica": "itemId",
    }[name]
    return pd.concat([f[col] for f in frames.values()]).nunique()


def _revisit_share(df):
    """Share of events whose item occurred earlier in the session, but not immediately before."""
    seen = df.groupby(["SessionId", "ItemId"]).cumcount() > 0
    prev_same = (df["SessionId"].shift() == df["SessionId"]) & (df["ItemId"].shift() == df["ItemId"])
    return float((seen & ~prev_same).mean())


@pytest.mark.parametrize("name", DATASETS)
def test_traps_present(processed, name):
    frames, res = processed(name)
    full, test = res.frames["full"], res.frames["test"]
    # sessions straddling the test boundary: in train (truncated) and not in test
    b = res.tsplit - res.tday
    sb = full.groupby("SessionId")["Time"].agg(["min", "max"])
    straddle = sb[(sb["min"] < b) & (sb["max"] >= b)].index
    assert len(straddle) > 0 and not test["SessionId"].isin(straddle).any()
    assert (sb["min"] == b).any()  # a session starting exactly on the boundary
    assert test["SessionId"].isin(sb.index[sb["min"] == b]).any()
    # identical timestamps inside sessions (ties ordered by item)
    assert full.duplicated(["SessionId", "Time"]).any()
    # (i, i) left by a filtered j: consecutive equal items in the output
    same = (full["SessionId"].shift() == full["SessionId"]) & (full["ItemId"].shift() == full["ItemId"])
    assert same.any()


@pytest.mark.parametrize("name", ["rees46", "retailrocket", "coveo"])
def test_owner_gap_traps_survive_sessionisation(processed, name):
    """The hand-placed owner histories: bursts 3599 s and 3600 s apart merge, 3601 s apart split."""
    frames, res = processed(name)
    full = res.frames["full"]
    g = full.groupby("SessionId")["Time"]
    span = (g.max() - g.min()) / (1 if res.time_unit == "ms" else 0.001)
    # merged histories: one session spanning a bit more than an hour with 4 events
    long4 = span[(span > 3_600_000) & (span < 3_700_000) & (full.groupby("SessionId").size() == 4)]
    assert len(long4) >= 2


def test_deterministic_and_seed_sensitive(tmp_path):
    a = synthetic.generate_raw("diginetica", tmp_path / "a", 5e-3, seed=7)
    b = synthetic.generate_raw("diginetica", tmp_path / "b", 5e-3, seed=7)
    c = synthetic.generate_raw("diginetica", tmp_path / "c", 5e-3, seed=8)
    f = "train-item-views.csv"
    assert a[f].read_bytes() == b[f].read_bytes() != c[f].read_bytes()


def test_streaming_chunks_and_compression(tmp_path):
    """Small chunks (the path full-scale generation takes) and gzip output still give valid raw files."""
    paths = synthetic.generate_raw("yoochoose", tmp_path, 5e-4, seed=2, chunk_events=4000, compression="gzip")
    assert all(str(p).endswith(".gz") for p in paths.values())
    frames = {f: read_raw("yoochoose", p) for f, p in paths.items()}
    assert 1.5e4 <= sum(len(x) for x in frames.values()) <= 3e4
    res = process("yoochoose", frames)
    assert len(res.frames["test"]) > 0 and res.filter_rounds >= 3


def test_diginetica_header_spellings(tmp_path):
    for spelling, first in (("snake", "session_id;user_id;item_id;timeframe;eventdate"), ("none", None)):
        p = synthetic.generate_raw("diginetica", tmp_path / spelling, 2e-3, seed=1, diginetica_header=spelling)[
            "train-item-views.csv"
        ]
        head = lines(p, 1)[0]
        assert head == first if first else re.match(DATA_LINE["diginetica"], head)
        assert len(read_raw("diginetica", p)) > 1000


def test_full_scale_sizes_are_reachable():
    """scale=1 targets the full raw sizes (docs/datasets.md, 'Published statistics') without generating them here."""
    for _name, prof in synthetic.PROFILES.items():
        world = synthetic._world(prof, 1.0, np.random.default_rng(0))
        assert world.n_events == prof.full_events
        assert world.n_items <= prof.items_full


def test_bad_parameters(tmp_path):
    with pytest.raises(ValueError, match="scale"):
        synthetic.generate_raw("coveo", tmp_path, 0)
    with pytest.raises(ValueError, match="name"):
        synthetic.generate_raw("rsc15", tmp_path, 0.1)


def test_iso_timestamps_formatting():
    ms = np.array([0, 1396867869277, 951782400000 + 86_399_999])  # 2000-02-29 23:59:59.999 (leap day)
    assert synthetic.iso_timestamps(ms, "yoochoose").to_pylist() == [
        "1970-01-01T00:00:00.000Z",
        "2014-04-07T10:51:09.277Z",
        "2000-02-29T23:59:59.999Z",
    ]
    assert synthetic.iso_timestamps(ms[1:2], "rees46").to_pylist() == ["2014-04-07 10:51:09 UTC"]
    assert synthetic.iso_timestamps(ms[2:], "date").to_pylist() == ["2000-02-29"]
