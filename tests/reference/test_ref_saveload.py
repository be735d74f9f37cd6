"""save/load of the reference GRU4Rec: one directory, no pickles, scores reproduced exactly."""

import json
import os

import numpy as np
import pytest
from ref_testdata import lag1_sessions

from gru4rec_conformance.reference.gru4rec import GRU4Rec


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(constrained_embedding=False, embedding=12, loss="bpr-max", final_act="elu-0.5"),
        dict(constrained_embedding=False, embedding=0, layers=[16, 8], logq=1.0),
    ],
)
def test_roundtrip_reproduces_scores_exactly(tmp_path, kw, lag1_test):
    g = GRU4Rec(layers=kw.pop("layers", [16]), batch_size=8, n_sample=6, n_epochs=1, seed=11, **kw)
    g.fit(lag1_sessions(n_sessions=60))
    g.save(tmp_path / "m")
    assert sorted(os.listdir(tmp_path / "m")) == ["hparams.json", "items.json", "weights.safetensors"]
    h = GRU4Rec.load(tmp_path / "m")
    prefixes = [[1000, 1001, 1002], [1007], []]
    np.testing.assert_array_equal(g.score_prefixes(prefixes), h.score_prefixes(prefixes))
    assert g.evaluate(lag1_test) == h.evaluate(lag1_test)
    np.testing.assert_array_equal(g.item_ids(), h.item_ids())
    assert h.get_params() == g.get_params()
    for k, v in g.get_weights().items():
        np.testing.assert_array_equal(v, h.get_weights()[k])


def test_string_item_ids_and_overwrite(tmp_path):
    df = lag1_sessions(n_sessions=30)
    df["ItemId"] = "item-" + df.ItemId.astype(str)
    g = GRU4Rec(layers=[8], batch_size=4, n_sample=4, n_epochs=1)
    g.fit(df)
    g.save(tmp_path / "m")
    g.save(tmp_path / "m")  # overwriting an earlier save is atomic per file
    h = GRU4Rec.load(tmp_path / "m")
    assert list(h.item_ids()) == list(g.item_ids())
    np.testing.assert_array_equal(h.score_prefixes([["item-1003"]]), g.score_prefixes([["item-1003"]]))
    with open(tmp_path / "m" / "items.json") as f:
        assert json.load(f)["dtype"] == "str"
    assert not [n for n in os.listdir(tmp_path / "m") if n.startswith(".")]


def test_load_errors(tmp_path):
    with pytest.raises(ValueError, match="weights.safetensors is missing"):
        GRU4Rec.load(tmp_path)
    g = GRU4Rec(layers=[8], batch_size=4, n_sample=4)
    g.fit(lag1_sessions(n_sessions=20), n_epochs=0)
    g.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "hparams.json").read_text())
    meta["format_version"] = 99
    (tmp_path / "m" / "hparams.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="format_version"):
        GRU4Rec.load(tmp_path / "m")
