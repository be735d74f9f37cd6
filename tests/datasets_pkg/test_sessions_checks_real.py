"""The check datasets of the GRU4Rec checks (docs/checks.md) and the real-slice loaders."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.datasets.sessions import checks, real

COLS = ["SessionId", "ItemId", "Time"]


def assert_session_frame(df: pd.DataFrame) -> None:
    assert list(df.columns) == COLS and df.dtypes.tolist() == ["int64"] * 3
    starts = df.groupby("SessionId", sort=False)["Time"].min()
    assert starts.is_monotonic_increasing  # Time increases with the session index
    assert (df.groupby("SessionId")["Time"].diff().dropna() > 0).all()


def sessions(df):
    return [g["ItemId"].tolist() for _, g in df.groupby("SessionId", sort=False)]


def test_d_lag1():
    d = checks.d_lag1(seed=3)
    assert_session_frame(d.train)
    assert_session_frame(d.test)
    tr = sessions(d.train)
    assert len(tr) == 400 and {len(s) for s in tr} == {4, 5, 6, 7, 8}
    assert len(sessions(d.test)) == 30
    succ = d.meta["successor"]
    assert len(succ) == 20 and sorted(succ) == sorted(d.meta["items"])
    for s in tr + sessions(d.test):
        assert all(succ[a] == b for a, b in zip(s, s[1:]))
    assert len({s[0] for s in tr}) == 20  # random start items cover the cycle
    assert set(d.test["SessionId"]).isdisjoint(d.train["SessionId"])
    assert d.test["Time"].min() > d.train["Time"].max()
    assert not checks.d_lag1(seed=4).train.equals(d.train)
    pd.testing.assert_frame_equal(checks.d_lag1(seed=3).train, d.train)


def test_d_long():
    d = checks.d_long(seed=1)
    assert_session_frame(d.train)
    tr = sessions(d.train)
    m = d.meta
    assert len(tr) == 400 and all(len(s) == 5 for s in tr)
    key_to_answer = dict(zip(m["key_items"], m["answer_items"]))
    for s in tr:
        assert s[1:4] == m["filler_items"] and key_to_answer[s[0]] == s[4]
    assert pd.Series([s[0] for s in tr]).value_counts().tolist() == [50] * 8
    # shuffled: not grouped by key
    assert len({tuple(x[0] for x in tr[k : k + 50]) for k in range(0, 400, 50)}) > 1
    assert [p + [a] for p, a in zip(m["prefixes"], m["answers"])] == [
        [k] + m["filler_items"] + [key_to_answer[k]] for k in m["key_items"]
    ]
    assert len(set(m["key_items"] + m["answer_items"] + m["filler_items"])) == 19
    assert len(sessions(d.test)) == 16


def test_d_tail():
    d = checks.d_tail(seed=0)
    assert_session_frame(d.train)
    z = d.meta["z_items"]
    last = d.train[d.train["SessionId"] == d.train["SessionId"].max()]
    assert last["ItemId"].tolist() == z and len(z) == 40
    assert last["Time"].min() > d.train[d.train["SessionId"] != last["SessionId"].iloc[0]]["Time"].max()
    assert not d.train[d.train["SessionId"] != last["SessionId"].iloc[0]]["ItemId"].isin(z).any()
    assert d.test["ItemId"].tolist() == z
    assert d.meta["z_prefixes"][0] == [z[0]] and d.meta["z_prefixes"][-1] == z[:-1] and d.meta["z_targets"] == z[1:]


def test_d_var():
    d = checks.d_var(seed=0)
    assert_session_frame(d.train)
    lengths = [len(s) for s in sessions(d.train)]
    assert lengths == [2, 40] * 80 == d.meta["lengths"]
    e, ns = sum(lengths), len(lengths)
    assert d.meta["expected_steps_per_epoch"] == (e - ns) / 8
    assert d.meta["padded_steps_estimate"] == 20 * 39  # every batch of 8 holds a 40-long session


def test_zipf_sessions_support_follows_zipf():
    d = checks.zipf_sessions(seed=0, n_items=500, n_sessions=3000, exponent=1.0)
    assert_session_frame(d.train)
    sup = d.meta["support"]
    assert set(sup) == set(d.meta["items"]) == set(d.train["ItemId"])
    ranked = np.array([sup[i] for i in d.meta["items"]], dtype=float)
    # log-log slope of support vs rank over the head is close to -exponent
    r = np.arange(1, 51)
    slope = np.polyfit(np.log(r), np.log(ranked[:50]), 1)[0]
    assert -1.25 < slope < -0.75


def test_yoochoose_100k_real(shared_sessions):
    frames = real.yoochoose_100k(fallback=False)
    for split, (events, sess, items) in real.YOOCHOOSE_100K_SHAPE.items():
        df = frames[split]
        assert list(df.columns) == COLS
        assert df.dtypes.tolist() == [np.dtype("int64"), np.dtype("int64"), np.dtype("float64")]
        assert (len(df), df["SessionId"].nunique(), df["ItemId"].nunique()) == (events, sess, items), split


def test_yoochoose_100k_fallback_notice(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GRU4REC_SHARED_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(real.SharedDataMissing, match="nowhere"):
        real.yoochoose_100k(fallback=False)
    frames = real.yoochoose_100k()
    assert "notice:" in capsys.readouterr().err
    for split, (events, sess, _items) in real.YOOCHOOSE_100K_SHAPE.items():
        df = frames[split]
        assert list(df.columns) == COLS
        assert abs(len(df) / events - 1) < 0.15 and abs(df["SessionId"].nunique() / sess - 1) < 0.15, split
    assert frames["test"]["ItemId"].isin(frames["train_full"]["ItemId"]).all()  # RSC15: unknown items removed
    assert (frames["test"].groupby("SessionId").size() >= 2).all()
    span = (frames["train_full"]["Time"].max() - frames["train_full"]["Time"].min()) / 86400
    assert 5.5 < span < 6.5


def test_slice_path_errors(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="name: unknown slice"):
        real.slice_path("nope")
    monkeypatch.setenv("GRU4REC_SHARED_DATA", str(tmp_path))
    with pytest.raises(real.SharedDataMissing, match="diginetica"):
        real.slice_path("diginetica_sample")
