"""Bad input to the reference GRU4Rec gets a clear ValueError naming the column or parameter."""

import numpy as np
import pandas as pd
import pytest
import torch
from ref_testdata import lag1_sessions

from gru4rec_conformance.reference.gru4rec import GRU4Rec


@pytest.fixture
def data():
    return lag1_sessions(n_sessions=40)


def _fit(df, **kw):
    GRU4Rec(layers=[8], batch_size=kw.pop("batch_size", 4), n_sample=4, **kw).fit(df, n_epochs=kw.pop("n_epochs", 0))


@pytest.mark.parametrize("col", ["SessionId", "ItemId", "Time"])
def test_missing_column(data, col):
    with pytest.raises(ValueError, match=f"column '{col}'.*missing"):
        _fit(data.drop(columns=[col]))


def test_renamed_column_and_custom_keys(data):
    renamed = data.rename(columns={"ItemId": "item_id"})
    with pytest.raises(ValueError, match="'ItemId' \\(item_key\\) is missing; columns present: SessionId, item_id"):
        _fit(renamed)
    g = GRU4Rec(layers=[8], batch_size=4, n_sample=4)
    g.fit(renamed, item_key="item_id", n_epochs=1)
    assert g.evaluate(renamed.iloc[:40], cutoffs=(1,))["n_events"] > 0  # keys of fit are the default


@pytest.mark.parametrize("col", ["SessionId", "ItemId"])
def test_nan_ids(data, col):
    bad = data.astype({col: float})
    bad.loc[7, col] = np.nan
    with pytest.raises(ValueError, match=f"column '{col}' has 1 missing .* row position 7"):
        _fit(bad)


def test_non_numeric_or_missing_time(data):
    bad = data.astype({"Time": str})
    with pytest.raises(ValueError, match="column 'Time' must be numeric"):
        _fit(bad)
    bad = data.copy()
    bad.loc[3, "Time"] = np.nan
    with pytest.raises(ValueError, match="column 'Time' has 1 missing or non-finite"):
        _fit(bad)


def test_fewer_sessions_than_batch_size(data):
    with pytest.raises(ValueError, match="batch_size=64 exceeds the number of training sessions \\(40\\)"):
        _fit(data, batch_size=64)


def test_single_item():
    df = pd.DataFrame({"SessionId": [1, 1, 2, 2], "ItemId": [5, 5, 5, 5], "Time": [0, 1, 2, 3]})
    with pytest.raises(ValueError, match="column 'ItemId' has a single distinct item"):
        _fit(df, batch_size=2)


def test_no_session_with_two_events():
    df = pd.DataFrame({"SessionId": [1, 2, 3], "ItemId": [5, 6, 7], "Time": [0, 1, 2]})
    with pytest.raises(ValueError, match="no session .* two or more events"):
        _fit(df, batch_size=2)


def test_not_a_dataframe_and_empty():
    with pytest.raises(ValueError, match="pandas DataFrame"):
        _fit(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="no rows"):
        _fit(pd.DataFrame({"SessionId": [], "ItemId": [], "Time": []}))


def test_negative_epochs_and_unbuilt_model(data):
    g = GRU4Rec(layers=[8], batch_size=4, n_sample=4)
    with pytest.raises(ValueError, match="n_epochs"):
        g.fit(data, n_epochs=-1)
    with pytest.raises(RuntimeError, match="fit"):
        GRU4Rec().score_prefixes([[1]])


def test_white_box_argument_errors(data):
    g = GRU4Rec(layers=[8], batch_size=4, n_sample=4)
    g.fit(data, n_epochs=0)
    ids = g.item_ids()
    with pytest.raises(ValueError, match="in_items.*unknown"):
        g.train_step([123456], [ids[0]])
    with pytest.raises(ValueError, match="targets"):
        g.train_step(ids[:2], ids[:3])
    with pytest.raises(ValueError, match="hidden\\[0\\]"):
        g.train_step(ids[:2], ids[2:4], hidden=[np.zeros((3, 8))])
    with pytest.raises(ValueError, match="unknown parameter 'W'"):
        g.set_weights({"W": np.zeros(3)})
    with pytest.raises(ValueError, match="weights\\['Wy'\\]: expected shape"):
        g.set_weights({"Wy": np.zeros((3, 3))})


def test_input_frame_is_not_modified(data):
    shuffled = data.sample(frac=1.0, random_state=0)
    before = shuffled.copy()
    g = GRU4Rec(layers=[8], batch_size=4, n_sample=4)
    g.fit(shuffled, n_epochs=1)
    g.evaluate(shuffled)
    pd.testing.assert_frame_equal(shuffled, before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_device_without_cuda(data):
    with pytest.raises(ValueError, match="parameter 'device'"):
        GRU4Rec(layers=[8], batch_size=4, n_sample=4, device="cuda").fit(data, n_epochs=0)
