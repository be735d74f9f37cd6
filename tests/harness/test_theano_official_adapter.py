"""The Theano adapter's white-box hooks: declared, and their pure translations (gate blocks, final_act names).

The hooks themselves run only where Theano 1.0.5 imports (a Python 3.9 worker: ``tox -e
theano_official_py39,theano_official``); the conformance checks exercise them there. The last test runs them when
this interpreter has Theano and a checkout of the original, and skips otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from gru4rec_conformance.implementations.base import Adapter, Unsupported
from gru4rec_conformance.implementations.theano_official import (
    _FROM_LAYOUT,
    _TO_LAYOUT,
    TheanoOfficialAdapter,
    _permute_blocks,
    _translate_final_act,
)


def test_every_hook_is_implemented():
    assert TheanoOfficialAdapter.implemented_hooks() == frozenset(Adapter.HOOKS)


def test_gate_blocks_round_trip():
    d = 4
    wx = np.concatenate([np.full((3, d), v) for v in (0.0, 1.0, 2.0)], axis=1)  # [candidate | reset | update]
    shown = _permute_blocks(wx, _TO_LAYOUT, axis=1)
    assert [float(b[0, 0]) for b in np.split(shown, 3, axis=1)] == [1.0, 2.0, 0.0]  # reset, update, candidate
    np.testing.assert_array_equal(_permute_blocks(shown, _FROM_LAYOUT, axis=1), wx)


@pytest.mark.parametrize(
    "loss,final_act,elu_param,want",
    [
        ("cross-entropy", None, None, "softmax"),
        ("bpr-max", None, None, "elu-0.5"),
        ("bpr-max", None, 0.0, "linear"),
        ("bpr-max", None, 1.0, "elu-1.0"),
        ("bpr-max", "elu", 0.0, "linear"),
        ("top1", "linear", None, "linear"),
        ("bpr", "leaky", None, "leaky-0.01"),
    ],
)
def test_final_act_translation(loss, final_act, elu_param, want):
    assert _translate_final_act(loss, final_act, elu_param) == want


def test_unknown_final_act_is_refused():
    with pytest.raises(Unsupported, match="final_act:swish"):
        _translate_final_act("bpr-max", "swish", None)


def test_undeclared_selu_is_refused():
    """gru4rec.py has selu-X-Y, but the adapter does not declare final_act:selu: build must refuse it (HP-4)."""
    with pytest.raises(Unsupported, match="final_act:selu"):
        _translate_final_act("top1", "selu-1.05-1.67", None)


def test_hooks_on_the_original():
    pytest.importorskip("theano")
    import pandas as pd

    from gru4rec_conformance.implementations.base import ImplementationUnavailable

    adapter = TheanoOfficialAdapter()
    try:
        adapter.build(seed=1, layers=[8], batch_size=4, n_sample=2, loss="cross-entropy")
    except ImplementationUnavailable as exc:
        pytest.skip(str(exc))
    rows = [(s, 100 + (3 * s + j) % 12, 10 * s + j) for s in range(20) for j in range(3)]
    adapter.fit(pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"]), n_epochs=0)
    w = adapter.get_weights()
    assert {"GE.Wx0", "GE.Wrz0", "GE.Wh0", "GE.Bh0", "Wy", "By"} == set(w)
    adapter.set_weights(w)
    ids = adapter.item_ids()
    adapter.train_step(ids[:4], ids[4:8])
    assert any(not np.array_equal(w[k], v) for k, v in adapter.get_weights().items())
    value, grad = adapter.loss_on_scores(np.zeros((3, 5)), "cross-entropy")
    assert np.isclose(value, np.log(5), rtol=1e-5) and grad.shape == (3, 5)
    out = adapter.train_forward([[ids[0], ids[1]], [ids[2], ids[3]]], seed=0)
    assert np.shape(out["scores"]) == (2, 4) and out["embedding_out"] is None
