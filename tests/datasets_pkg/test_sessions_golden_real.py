"""Golden counts on the real slices in <shared>/sessions (docs/datasets.md, 'Real slices'). Skipped, with the path
that was looked at, when the shared data are absent."""

from __future__ import annotations

import shutil
import warnings

import pytest

from gru4rec_conformance.datasets._suite_io import TruncatedLastLineWarning
from gru4rec_conformance.datasets.sessions.pipeline import prepare, process
from gru4rec_conformance.datasets.sessions.readers import (
    read_diginetica,
    read_rees46,
    read_retailrocket,
    read_yoochoose,
)


def counts(df):
    return len(df), df["SessionId"].nunique(), df["ItemId"].nunique()


def test_diginetica_sample_end_to_end(shared_sessions, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    # the sample has the SR-GNN snake_case header; prepare() finds the file by its original name
    shutil.copy(shared_sessions / "diginetica" / "sample_train-item-views.csv", raw / "train-item-views.csv")
    res = prepare("diginetica", raw, tmp_path / "out")
    f = res.frames()
    assert counts(f["full"]) == (779, 235, 121)
    assert counts(f["train_full"]) == (707, 214, 120)
    assert counts(f["test"]) == (69, 20, 35)
    assert counts(f["train_tr"]) == (644, 200, 116)
    assert counts(f["train_valid"]) == (63, 14, 25)
    m = res.manifest
    assert m["filter_rounds"] == 10
    dedup = next(s for s in m["steps"] if s["step"] == "dedup")
    assert dedup["removed"] == 841
    # 5 test events have items unseen in train_full (removed only at evaluation time)
    assert (~f["test"]["ItemId"].isin(f["train_full"]["ItemId"])).sum() == 5
    assert res.stats.set_index("Dataset").loc["diginetica_processed_view_full.tsv", "NumDays"] == pytest.approx(
        148.0, abs=0.05
    )


def test_rees46_oct_head(shared_sessions):
    path = shared_sessions / "rees46" / "2019-Oct_head17434.csv"
    with pytest.warns(TruncatedLastLineWarning, match=r"2019-Oct_head17434\.csv:17436: .*truncated"):
        df = read_rees46(path)
    assert len(df) == 17_434
    assert int((df["EventType"] == "view").sum()) == 17_055  # + the truncated 17,436th line = the spec's 17,056
    res = process("rees46", {"2019-Oct.csv": df})
    assert counts(res.frames["full"]) == (2_516, 721, 214)
    assert res.filter_rounds == 7
    dedup = next(s for s in res.steps if s["step"] == "dedup")
    assert dedup["removed"] == 3_907
    sess = next(s for s in res.steps if s["step"].startswith("sessions"))
    assert sess["sessions"] == 4_517  # the spec's 4,518 counts the truncated line's user as one more session
    # everything is before the fixed split anchor: all train, no test
    assert len(res.frames["test"]) == 0 and counts(res.frames["train_full"]) == (2_516, 721, 214)


def test_yoochoose_head_parses_exactly(shared_sessions):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = read_yoochoose(shared_sessions / "yoochoose" / "raw_head" / "yoochoose-clicks.dat")
    assert len(df) == 1000 and df["SessionId"].nunique() == 272 and df["ItemId"].nunique() == 570
    assert df["SessionId"].min() == 1 and df["SessionId"].max() == 351
    assert df["Time"].iloc[0] == 1396867869  # 2014-04-07T10:51:09.277Z floored
    res = process("yoochoose", {"yoochoose-clicks.dat": df})
    assert next(s for s in res.steps if s["step"] == "dedup")["removed"] == 174
    assert len(res.frames["full"]) == 0  # nothing reaches item support 5


def test_retailrocket_head_parses_exactly(shared_sessions):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = read_retailrocket(shared_sessions / "retailrocket" / "retailrocket-sample.csv")
    assert len(df) == 100
    assert df["event"].value_counts().to_dict() == {"view": 96, "addtocart": 3, "transaction": 1}
    assert df["visitorid"].nunique() == 93 and df["itemid"].nunique() == 97
    assert df["timestamp"].min() == 1433220899221 and df["timestamp"].max() == 1433224754197
    assert not df["timestamp"].is_monotonic_increasing


def test_diginetica_sample_parses_all_rows(shared_sessions):
    df = read_diginetica(shared_sessions / "diginetica" / "sample_train-item-views.csv")
    # 12,391 data rows: the README's 12,390 misses the last line, which has no line end but is complete
    assert len(df) == 12_391
    assert df["sessionId"].nunique() == 2_986 and df["itemId"].nunique() == 7_139
    assert int(df["userId"].notna().sum()) == 4_710
