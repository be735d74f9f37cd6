"""Unit tests of the pipeline's building blocks against independent formulations (pandas, plain Python)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.datasets.sessions import readers
from gru4rec_conformance.datasets.sessions.pipeline import (
    _first_appearance_codes,
    dedup_consecutive,
    stable_lexsort,
    stats_table,
    support_filter,
    time_split,
)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stable_lexsort_matches_pandas_multicolumn_sort(seed):
    rng = np.random.default_rng(seed)
    n = 5000
    # wide ranges force more than one 64-bit pass; few distinct values force full ties
    a = rng.integers(0, 50, n) * 10**12
    b = rng.integers(-5, 5, n) * 10**9
    c = rng.integers(0, 3, n) * 2**40
    df = pd.DataFrame({"a": a, "b": b, "c": c, "pos": np.arange(n)})
    want = df.sort_values(["a", "b", "c"], kind="stable")["pos"].to_numpy()
    np.testing.assert_array_equal(stable_lexsort([a, b, c]), want)


def test_first_appearance_codes_place_missing_values_where_they_first_occur():
    vals = np.array(["x", None, "y", "x", None, "z"], dtype=object)
    # Series.unique() order: x, None, y, z
    np.testing.assert_array_equal(_first_appearance_codes(vals), [0, 1, 2, 0, 1, 3])
    np.testing.assert_array_equal(_first_appearance_codes(np.array([None, "b", "a"], dtype=object)), [0, 1, 2])
    np.testing.assert_array_equal(_first_appearance_codes(np.array([30, 10, 30, 20])), [0, 1, 0, 2])


def test_dedup_consecutive_only_adjacent_rows():
    s = np.array([1, 1, 1, 1, 2, 2])
    i = np.array([5, 5, 6, 5, 5, 5])
    np.testing.assert_array_equal(dedup_consecutive(s, i), [False, True, False, False, False, True])


def test_support_filter_threshold_and_rounds():
    # items 8 and 6 have exactly 5 events (kept), item 9 exactly 4 (dropped): one changing round + the final one
    sess = np.array([1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5])
    item = np.array([8, 6, 9, 8, 6, 9, 8, 6, 9, 8, 6, 9, 8, 6])
    keep, rounds = support_filter(sess, item)
    assert item[keep].tolist() == [8, 6] * 5 and rounds == 2
    # a cascade: session 8 is a singleton; dropping it leaves item 1 with 3 events; dropping items 9 and 1 leaves
    # sessions 1-5 as singletons; round 2 removes them all; round 3 changes nothing
    sess = np.array([1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 7, 7, 8])
    item = np.array([8, 9, 8, 9, 8, 9, 8, 1, 8, 1, 9, 1, 1])
    keep, rounds = support_filter(sess, item)
    assert len(keep) == 0 and rounds == 3
    keep2, rounds2 = support_filter(np.repeat(np.arange(5), 2), np.tile([8, 1], 5))
    assert len(keep2) == 10 and rounds2 == 1


def test_time_split_boundaries():
    full = pd.DataFrame(
        {
            "SessionId": [1, 1, 2, 2, 3, 3, 4, 4],
            "ItemId": [1, 2, 1, 2, 1, 2, 1, 2],
            "Time": [10, 15, 18, 22, 20, 21, 29, 30],
        }
    )
    out = time_split(full, tday=10, tsplit=None)  # tsplit 30 -> test from 20, valid from 10
    assert out["test"]["SessionId"].unique().tolist() == [3, 4]  # session 3 starts exactly at 20
    assert out["train_full"]["SessionId"].unique().tolist() == [1]  # session 2 truncated to 1 event: dropped
    assert out["train_valid"]["SessionId"].unique().tolist() == [1]
    assert out["train_tr"].empty  # session 1 truncated at 10 keeps nothing


def test_stats_table_columns_and_units():
    df = pd.DataFrame(
        {
            "SessionId": [1, 1, 2, 2, 2],
            "ItemId": [5, 6, 5, 5, 7],
            "Time": [0, 60_000, 86_400_000, 86_430_000, 86_460_000],
        }
    )
    st = stats_table({"full": df, "test": df.iloc[:0]}, "retailrocket").set_index("Dataset")
    row = st.loc["retailrocket_processed_view_full.tsv"]
    assert row["NumEvents"] == 5 and row["NumSessions"] == 2 and row["NumItems"] == 3
    assert row["NumDays"] == pytest.approx(86_460_000 / 86_400_000)
    assert row["StartTime"] == "1970-01-01 00:00:00.000000"
    assert row["MaxSessionTime (sec)"] == 60.0 and row["AvgItemViews"] == pytest.approx(5 / 3)
    assert st.loc["retailrocket_processed_view_test.tsv", "NumEvents"] == 0


def test_yoochoose_seconds_are_explicit_floor(tmp_path):
    """pandas 3 parses these strings to datetime64[us]: the study's `.view('int') // 10**9` idiom would give
    values 1000x too small. The reader must give the floor of the true epoch seconds."""
    p = tmp_path / "y.dat"
    p.write_text("1,2014-04-07T10:51:09.999Z,214536502,0\n1,1970-01-01T00:00:00.001Z,2,0\n")
    df = readers.read_yoochoose(p)
    assert df["Time"].tolist() == [1396867869, 0]
    ts = pd.to_datetime(pd.Series(["2014-04-07T10:51:09.999Z"]))
    assert int((ts - pd.Timestamp("1970-01-01", tz="UTC")).dt.total_seconds().iloc[0] // 1) == 1396867869


def test_rees46_and_diginetica_time_units(tmp_path):
    p = tmp_path / "2019-Oct.csv"
    p.write_text(
        "event_time,event_type,product_id,category_id,category_code,brand,price,user_id,user_session\n"
        "2019-10-01 00:00:07 UTC,view,44600062,1,,b,1.0,541312140,u\n"
    )
    assert readers.read_rees46(p)["Time"].tolist() == [1569888007]
    d = tmp_path / "train-item-views.csv"
    d.write_text("sessionId;userId;itemId;timeframe;eventdate\n1;NA;5;123;2016-05-09\n")
    df = readers.read_diginetica(d)
    assert df["eventdate_days"].tolist() == [16930] and np.isnan(df["userId"].iloc[0])


def test_readers_transparent_compression(tmp_path):
    import bz2
    import gzip
    import zipfile

    text = b"1,2014-04-07T10:51:09.277Z,214536502,0\n2,2014-04-07T10:54:09.868Z,214536500,0\n"
    (tmp_path / "a.dat.gz").write_bytes(gzip.compress(text))
    (tmp_path / "a.dat.bz2").write_bytes(bz2.compress(text))
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as zf:
        zf.writestr("yoochoose-clicks.dat", text)
    plain = tmp_path / "a.dat"
    plain.write_bytes(text)
    want = readers.read_yoochoose(plain)
    for name in ("a.dat.gz", "a.dat.bz2", "a.zip"):
        pd.testing.assert_frame_equal(readers.read_yoochoose(tmp_path / name), want)


def test_small_blocks_give_the_same_result(tmp_path, monkeypatch):
    """Block boundaries (chunked reading) must not change the rows."""
    from gru4rec_conformance.datasets import _suite_io

    lines = "".join(f"{k},2014-04-07T10:{k % 60:02d}:09.{k % 1000:03d}Z,{214536502 + k % 7},0\n" for k in range(3000))
    p = tmp_path / "y.dat"
    p.write_text(lines)
    want = readers.read_yoochoose(p)
    monkeypatch.setattr(_suite_io, "BLOCK_BYTES", 777)
    orig = _suite_io.read_csv_table

    def small(path, spec, **kw):
        kw["block_bytes"] = 777
        return orig(path, spec, **kw)

    monkeypatch.setattr(readers, "read_csv_table", small)
    got = readers.read_yoochoose(p)
    assert len(got) == 3000
    pd.testing.assert_frame_equal(got, want)


def test_crlf_line_ends(tmp_path):
    p = tmp_path / "events.csv"
    p.write_bytes(
        b"timestamp,visitorid,event,itemid,transactionid\r\n1433221332117,257597,view,355908,\r\n"
        b"1433224214164,992329,transaction,248676,77\r\n"
    )
    df = readers.read_retailrocket(p)
    assert df["event"].tolist() == ["view", "transaction"] and df["itemid"].tolist() == [355908, 248676]
