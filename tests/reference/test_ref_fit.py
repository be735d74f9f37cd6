"""Training behaviour of the reference GRU4Rec: learning, determinism, FitReport, trace, NaN abort."""

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.reference.gru4rec import GRU4Rec, TrainingDivergedError
from gru4rec_conformance.reference.gru4rec.steps import StandardStep

SMALL = dict(layers=[32], batch_size=16, n_sample=8, learning_rate=0.1, n_epochs=3)


def _recall1(g, test):
    return g.evaluate(test, cutoffs=(1,))["recall@1"]


@pytest.mark.parametrize(
    "kw",
    [
        dict(loss="cross-entropy"),
        dict(loss="cross-entropy", logq=1.0, sample_alpha=0.5),
        dict(loss="bpr-max", elu_param=0.5, bpreg=0.5, momentum=0.3),
        dict(loss="bpr-max", elu_param=0.0, constrained_embedding=False, embedding=16),
        dict(loss="cross-entropy", constrained_embedding=False, embedding=0),
        dict(loss="top1-max", final_act="linear"),
        dict(loss="bpr", final_act="elu-1"),
        dict(loss="top1", final_act="tanh"),
        dict(loss="cross-entropy", layers=[24, 16], constrained_embedding=False, embedding=0),
    ],
    ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()),
)
def test_learns_the_lag1_cycle(kw, lag1, lag1_test):
    g = GRU4Rec(**{**SMALL, **kw})
    rep = g.fit(lag1)
    assert rep.epoch_losses[-1] < rep.epoch_losses[0]
    assert _recall1(g, lag1_test) >= 0.9


def test_report_counts_every_transition_once_per_epoch(lag1):
    g = GRU4Rec(**SMALL)
    rep = g.fit(lag1, n_epochs=2)
    E, Ns = len(lag1), lag1.SessionId.nunique()
    assert rep.n_events_trained == [E - Ns, E - Ns]
    assert len(rep.epoch_losses) == len(rep.n_steps) == len(rep.epoch_seconds) == 2
    assert (E - Ns) / 16 <= rep.n_steps[0] <= (E - Ns) / 16 + 16
    assert all(np.isfinite(rep.epoch_losses)) and all(s > 0 for s in rep.epoch_seconds)


def test_without_samples_the_last_lone_lane_is_not_trained(lag1):
    """n_sample = 0: the epoch stops when fewer than two lanes remain (the port's rule), so the tail of a long
    last session is not trained; with samples every transition is."""
    tail = pd.DataFrame(
        {"SessionId": 10_000, "ItemId": [1000 + i % 20 for i in range(30)], "Time": 1e6 + np.arange(30)}
    )
    data = pd.concat([lag1, tail], ignore_index=True)
    E, Ns = len(data), data.SessionId.nunique()
    rep0 = GRU4Rec(**{**SMALL, "n_sample": 0}).fit(data, n_epochs=1)
    rep8 = GRU4Rec(**SMALL).fit(data, n_epochs=1)
    assert rep8.n_events_trained[0] == E - Ns
    assert E - Ns - 29 <= rep0.n_events_trained[0] <= E - Ns - 20


def test_n_epochs_zero_builds_without_training(lag1, lag1_test):
    g = GRU4Rec(**SMALL)
    rep = g.fit(lag1, n_epochs=0)
    assert rep.epoch_losses == [] and rep.n_steps == []
    w0 = g.get_weights()
    g2 = GRU4Rec(**SMALL)
    g2.fit(lag1, n_epochs=1)
    assert not np.allclose(w0["Wy"], g2.get_weights()["Wy"])
    assert g.score_prefixes([[1000]]).shape == (1, 20)


@pytest.mark.parametrize("kw", [dict(), dict(dropout_p_embed=0.3, dropout_p_hidden=0.2, momentum=0.2)])
def test_same_seed_gives_identical_scores(kw, lag1):
    prefixes = [[1000, 1001], [1005], [], [1019, 1000, 1001]]
    runs = []
    for seed in (7, 7, 8):
        g = GRU4Rec(**{**SMALL, **kw, "seed": seed, "n_epochs": 1})
        g.fit(lag1)
        runs.append(g.score_prefixes(prefixes))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.allclose(runs[0], runs[2])


def test_trace_hidden_state_is_zero_exactly_at_session_starts(lag1):
    traces = []
    g = GRU4Rec(**{**SMALL, "layers": [8, 6]})
    g.fit(lag1, n_epochs=1, trace=traces.append)
    assert len(traces) == g.fit(lag1, n_epochs=1).n_steps[0]
    for t in traces:
        assert t.h_in_norms.shape == (t.n_active,)
        np.testing.assert_array_equal(t.h_in_norms == 0, t.positions == 0)
        assert len(t.negative_ids) == 8 and set(t.negative_ids) <= set(g.item_ids())
        assert t.learning_rate == 0.1
    assert traces[0].n_active == 16 and traces[-1].n_active < 16
    assert any(not np.array_equal(a.negative_ids, b.negative_ids) for a, b in zip(traces, traces[1:]))


def test_nan_loss_aborts_training_and_blocks_evaluation(lag1, lag1_test):
    g = GRU4Rec(**SMALL)
    g.fit(lag1, n_epochs=0)
    w = g.get_weights()
    w["Wy"][:] = np.nan
    g.set_weights(w)
    with pytest.raises(TrainingDivergedError, match="NaN loss"):
        StandardStep(g).train_epoch(0)
    assert g.error_during_train
    with pytest.raises(RuntimeError, match="NaN"):
        g.evaluate(lag1_test)


def test_train_step_is_the_fit_step(lag1):
    """train_step on a fresh model applies exactly one optimizer update and reports the loss / B."""
    g = GRU4Rec(**SMALL)
    g.fit(lag1, n_epochs=0)
    ids = g.item_ids()
    w0 = g.get_weights()
    res = g.train_step(ids[:4], ids[1:5], ids[5:13], dropout_masks={}, return_grads=True)
    w1 = g.get_weights()
    assert g.optimizer_info()["n_updates"] == 1
    # first Adagrad step: Δθ = -η g / sqrt(g² + eps)
    for k in w0:
        gk = res.grads[k]
        np.testing.assert_allclose(
            w1[k] - w0[k], -0.1 * gk / np.sqrt(gk.astype(np.float64) ** 2 + 1e-6), rtol=1e-4, atol=1e-7
        )
    assert res.loss > 0 and len(res.hidden) == 1 and res.hidden[0].shape == (4, 32)
    untouched = np.setdiff1d(np.arange(20), np.concatenate([np.arange(0, 13)]))
    np.testing.assert_array_equal(w1["Wy"][untouched], w0["Wy"][untouched])


def test_set_params_string_semantics():
    g = GRU4Rec()
    g.set_params(
        layers="64/32",
        constrained_embedding="False",
        embedding="layersize",
        learning_rate="0.07",
        n_sample="128",
        momentum="0.2",
        loss="bpr-max",
        elu_param="1",
        final_act="elu-0.5",
    )
    p = g.get_params()
    assert p["layers"] == [64, 32] and p["constrained_embedding"] is False and p["embedding"] == 64
    assert p["learning_rate"] == 0.07 and p["n_sample"] == 128 and p["momentum"] == 0.2
    assert p["loss"] == "bpr-max" and p["elu_param"] == 1.0 and p["final_act"] == "elu-0.5"
    assert g.layers == [64, 32]  # official attribute access
    assert GRU4Rec(constrained_embedding="1").constrained_embedding is True
    d = GRU4Rec().get_params()
    assert (
        d["layers"],
        d["loss"],
        d["batch_size"],
        d["learning_rate"],
        d["n_sample"],
        d["sample_alpha"],
        d["constrained_embedding"],
        d["elu_param"],
        d["bpreg"],
        d["logq"],
        d["n_epochs"],
    ) == ([100], "cross-entropy", 64, 0.05, 2048, 0.5, True, 0.5, 1.0, 0.0, 10)


@pytest.mark.parametrize(
    "kw,name",
    [
        (dict(hidden_size=10), "hidden_size"),
        (dict(layers="a/b"), "layers"),
        (dict(layers=[]), "layers"),
        (dict(batch_size=0), "batch_size"),
        (dict(dropout_p_embed=1.0), "dropout_p_embed"),
        (dict(dropout_p_hidden=-0.1), "dropout_p_hidden"),
        (dict(learning_rate=0), "learning_rate"),
        (dict(momentum=-1), "momentum"),
        (dict(loss="hinge"), "loss"),
        (dict(constrained_embedding="yes"), "constrained_embedding"),
        (dict(final_act="swish", loss="bpr-max"), "final_act"),
        (dict(final_act="tanh"), "final_act"),
        (dict(n_sample=-1), "n_sample"),
        (dict(embedding=-3), "embedding"),
        (dict(n_sample="many"), "n_sample"),
    ],
)
def test_bad_hyperparameters_name_the_parameter(kw, name):
    with pytest.raises(ValueError, match=name):
        GRU4Rec(**kw)
