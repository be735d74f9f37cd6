"""Reference network: shapes per embedding mode, per-gate Glorot init, dropout placement and rates."""

import math

import numpy as np
import pandas as pd
import pytest
from ref_testdata import lag1_sessions

from gru4rec_conformance.reference.gru4rec import GRU4Rec

MODES = {
    "shared": dict(constrained_embedding=True),
    "separate": dict(constrained_embedding=False, embedding=24),
    "none": dict(constrained_embedding=False, embedding=0),
}


def _many_items(n_items=300, n_sessions=120, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    t = 0
    for s in range(n_sessions):
        for it in rng.integers(0, n_items, size=5):
            rows.append((s, int(it), t))
            t += 1
    # make sure every item appears
    for it in range(n_items):
        rows.append((n_sessions + it // 3, it, t))
        t += 1
    return pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"])


@pytest.mark.parametrize("mode", list(MODES))
def test_shapes_echo_hyperparameters(mode):
    g = GRU4Rec(layers=[32, 16], batch_size=8, n_sample=4, **MODES[mode])
    data = _many_items()
    g.fit(data, n_epochs=0)
    N = data.ItemId.nunique()
    W = g.get_weights()
    assert W["Wy"].shape == (N, 16) and W["By"].shape == (N,)
    if mode == "shared":
        assert "E" not in W and W["G.0.weight_ih"].shape == (3 * 32, 16)
    if mode == "separate":
        assert W["E"].shape == (N, 24) and W["G.0.weight_ih"].shape == (3 * 32, 24)
    if mode == "none":
        assert W["GE.Wx0"].shape == (N, 96) and W["GE.Wrz0"].shape == (32, 64) and W["GE.Wh0"].shape == (32, 32)
        assert "G.0.weight_ih" not in W
    assert W["G.1.weight_ih"].shape == (3 * 16, 32) and W["G.1.weight_hh"].shape == (48, 16)


def _blocks(W, mode):
    """(name, block, fan_in + fan_out) for every weight block."""
    out = []
    for k, v in W.items():
        if k in ("Wy", "E"):
            out.append((k, v, sum(v.shape)))
        elif k == "GE.Wx0":
            d = v.shape[1] // 3
            out += [(f"{k}[{i}]", v[:, i * d : (i + 1) * d], v.shape[0] + d) for i in range(3)]
        elif k == "GE.Wrz0":
            d = v.shape[0]
            out += [(f"{k}[{i}]", v[:, i * d : (i + 1) * d], 2 * d) for i in range(2)]
        elif k == "GE.Wh0":
            out.append((k, v, sum(v.shape)))
        elif k.endswith(("weight_ih", "weight_hh")):
            d = v.shape[0] // 3
            out += [(f"{k}[{i}]", v[i * d : (i + 1) * d], d + v.shape[1]) for i in range(3)]
    return out


@pytest.mark.parametrize("mode", list(MODES))
def test_init_is_glorot_uniform_per_gate_with_zero_biases(mode):
    g = GRU4Rec(layers=[40, 24], batch_size=8, n_sample=4, seed=5, **MODES[mode])
    g.fit(_many_items(), n_epochs=0)
    W = g.get_weights()
    for name, block, fans in _blocks(W, mode):
        s = math.sqrt(6.0 / fans)
        assert np.abs(block).max() <= s * (1 + 1e-6), name
        assert np.abs(block).max() >= 0.9 * s, name
        assert abs(block.mean()) < s / 10, name
    for k, v in W.items():
        if "bias" in k or k in ("By", "GE.Bh0"):
            assert np.all(v == 0), k


def test_same_seed_same_init_different_seed_different():
    data = _many_items()
    a, b, c = (GRU4Rec(layers=[16], batch_size=8, n_sample=4, seed=s) for s in (1, 1, 2))
    for g in (a, b, c):
        g.fit(data, n_epochs=0)
    for k in a.get_weights():
        np.testing.assert_array_equal(a.get_weights()[k], b.get_weights()[k])
    assert not np.array_equal(a.get_weights()["Wy"], c.get_weights()["Wy"])


@pytest.mark.parametrize("mode", ["shared", "separate"])
@pytest.mark.parametrize("p_embed,p_hidden", [(0.0, 0.0), (0.25, 0.0), (0.0, 0.5), (0.5, 0.25)])
def test_dropout_rates_and_sites(mode, p_embed, p_hidden):
    """DO-3/DO-4: measured fraction of exact zeros ≈ p at each site; kept units scaled by 1/(1-p)."""
    g = GRU4Rec(
        layers=[64, 48], batch_size=8, n_sample=4, dropout_p_embed=p_embed, dropout_p_hidden=p_hidden, **MODES[mode]
    )
    data = _many_items()
    g.fit(data, n_epochs=0)
    items = list(g.item_ids()[:256])
    out = g.train_forward(items)
    emb = out["embedding_out"]
    n = emb.size
    frac = np.mean(emb == 0)
    assert abs(frac - p_embed) <= 4 * math.sqrt(max(p_embed * (1 - p_embed), 1e-12) / n) + 1e-12
    for lo in out["layer_outputs"]:
        frac = np.mean(lo == 0)
        assert abs(frac - p_hidden) <= 4 * math.sqrt(max(p_hidden * (1 - p_hidden), 1e-12) / lo.size) + 1e-12
    # kept units are scaled: compare with an explicit all-ones mask (no dropout)
    if p_embed > 0:
        ones = {"embed": np.ones_like(emb)}
        plain = g.train_forward(items, dropout_masks=ones)["embedding_out"]
        kept = emb != 0
        np.testing.assert_allclose(emb[kept], plain[kept] / (1 - p_embed), rtol=1e-6)
    # eval mode has no dropout: score_prefixes of one-item prefixes equals an all-ones-mask forward
    sp = g.score_prefixes([[i] for i in items[:16]])
    masks = {"embed": None, "hidden.0": None, "hidden.1": None}
    tf = g.train_forward(items[:16], dropout_masks=masks)["scores"]
    np.testing.assert_allclose(sp, tf, rtol=1e-5, atol=1e-6)


def test_dropped_out_output_is_the_next_hidden_state():
    g = GRU4Rec(layers=[16], batch_size=4, n_sample=3, dropout_p_hidden=0.5, seed=3)
    g.fit(lag1_sessions(n_sessions=20), n_epochs=0)
    ids = g.item_ids()
    mask = (np.arange(4 * 16).reshape(4, 16) % 2).astype(np.float32) * 2.0
    res = g.train_step(ids[:4], ids[4:8], ids[8:11], dropout_masks={"hidden.0": mask})
    assert np.all(res.hidden[0][mask == 0] == 0)
    assert np.count_nonzero(res.hidden[0][mask != 0]) == np.count_nonzero(mask)


def test_no_embedding_mode_puts_embed_dropout_on_first_layer():
    """The port applies dropout_p_embed to the first (one-hot) layer's output in no-embedding mode."""
    g = GRU4Rec(layers=[64, 32], batch_size=8, n_sample=4, dropout_p_embed=0.5, dropout_p_hidden=0.0, **MODES["none"])
    g.fit(_many_items(), n_epochs=0)
    out = g.train_forward(list(g.item_ids()[:200]))
    assert out["embedding_out"] is None
    assert abs(np.mean(out["layer_outputs"][0] == 0) - 0.5) < 0.03
    assert np.mean(out["layer_outputs"][1] == 0) == 0


def test_training_scores_only_sampled_columns():
    """SC-2 / SO-1: a step scores b × (b+S) columns and touches only those output rows."""
    g = GRU4Rec(layers=[16], batch_size=4, n_sample=5)
    data = _many_items()
    traces = []
    g.fit(data, n_epochs=1, trace=traces.append)
    for t in traces[:50]:
        assert t.score_shape == (t.n_active, t.n_active + 5)
        assert t.output_rows_touched <= t.n_active * 2 + 5
    # a bias change of an item outside the step's columns does not change the step loss
    ids = g.item_ids()
    x, y, s = ids[:4], ids[4:8], ids[8:13]
    W = g.get_weights()
    before = g.train_step(x, y, s, dropout_masks={}).loss
    g.set_weights(W, reset_optimizer=True)
    W2 = dict(W)
    W2["By"] = W["By"].copy()
    W2["By"][50] += 10.0
    g.set_weights(W2, reset_optimizer=True)
    after = g.train_step(x, y, s, dropout_masks={}).loss
    assert after == pytest.approx(before, rel=1e-6)
