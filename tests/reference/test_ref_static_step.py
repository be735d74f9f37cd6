"""The fixed-shape (static) training step gives the standard step's results (reference/gru4rec/steps/static.py).

- while all B lanes are active the two are identical bit for bit (weights, optimizer state, epoch losses), with
  lane refills and resets included, for every embedding mode, both losses, dropout on/off, momentum on/off and
  n_sample 0/>0;
- over whole epochs including the shrinking tail (padded, masked lanes) they agree within the golden tolerance
  (1e-5 relative; measured ≤ 1e-6), which also proves that padded lanes touch no extra embedding row (a touched row
  with momentum would move by about the learning rate);
- selection: ``step_impl='auto'`` keeps the standard step on CPU, a model with an overridden component cannot be
  forced onto the static step, a per-step trace uses the standard step, a NaN loss still aborts training.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ref_testdata import lag1_sessions

from gru4rec_conformance.reference.gru4rec import GRU4Rec, TrainingDivergedError
from gru4rec_conformance.reference.gru4rec.model import GRU4RecModel
from gru4rec_conformance.reference.gru4rec.steps import StandardStep, StaticStep, unsupported_reason

MODES = {
    "shared": dict(constrained_embedding=True),
    "separate": dict(constrained_embedding=False, embedding=12),
    "none": dict(constrained_embedding=False, embedding=0),
}
LOSSES = {
    "cross-entropy": dict(loss="cross-entropy", logq=1.0, sample_alpha=0.5),
    "bpr-max": dict(loss="bpr-max", elu_param=0.5, bpreg=1.0, sample_alpha=0.3),
}
SETTINGS = {
    "plain": dict(dropout_p_embed=0.0, dropout_p_hidden=0.0, momentum=0.0),
    "dropout+momentum": dict(dropout_p_embed=0.3, dropout_p_hidden=0.2, momentum=0.4),
}


def hparams(mode, loss, setting, n_sample=8):
    layers = [16, 8] if mode == "none" else [16]
    return dict(
        layers=layers,
        batch_size=7,
        n_sample=n_sample,
        learning_rate=0.1,
        seed=5,
        **MODES[mode],
        **LOSSES[loss],
        **SETTINGS[setting],
    )


def equal_length_sessions(n_sessions=70, length=5, n_items=30, seed=0) -> pd.DataFrame:
    """Every session has the same length and n_sessions is a multiple of the batch size: no step has fewer
    than B lanes (no tail)."""
    rng = np.random.default_rng(seed)
    n = n_sessions * length
    return pd.DataFrame(
        {
            "SessionId": np.repeat(np.arange(n_sessions), length),
            "ItemId": 100 + rng.integers(0, n_items, n),
            "Time": np.arange(n, dtype=float),
        }
    )


@pytest.fixture(scope="module")
def varied():
    return lag1_sessions(seed=3, n_sessions=120, n_items=30, min_len=2, max_len=9)


def state(g: GRU4Rec) -> dict:
    out = {f"w.{k}": v for k, v in g.get_weights().items()}
    opt = g.optimizer
    for k, v in opt.acc.items():
        out[f"acc.{k}"] = v.numpy().copy()
    for k, v in (opt.mom or {}).items():
        out[f"mom.{k}"] = v.numpy().copy()
    return out


def fitted(df, impl, n_epochs=2, **hp):
    g = GRU4Rec(step_impl=impl, **hp)
    rep = g.fit(df, n_epochs=n_epochs)
    return g, rep


CASES = [(m, l, s, 8) for m in MODES for l in LOSSES for s in SETTINGS] + [
    ("shared", "cross-entropy", "dropout+momentum", 0),
    ("none", "bpr-max", "dropout+momentum", 0),
]


@pytest.mark.parametrize("mode,loss,setting,n_sample", CASES)
def test_bitwise_identical_without_tail(mode, loss, setting, n_sample):
    df = equal_length_sessions()
    hp = hparams(mode, loss, setting, n_sample)
    a, ra = fitted(df, "standard", **hp)
    b, rb = fitted(df, "static", **hp)
    assert b.step_info["step_impl"] == "static" and a.step_info["step_impl"] == "standard"
    assert ra.epoch_losses == rb.epoch_losses and ra.n_steps == rb.n_steps
    sa, sb = state(a), state(b)
    assert sa.keys() == sb.keys()
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)
    assert a.optimizer.n_updates == b.optimizer.n_updates == sum(ra.n_steps)


class _NoTail:
    """The stock iterator, stopped before the first run with fewer than B lanes (the shrinking tail)."""

    def __init__(self, it):
        self.it, self.n_lanes = it, it.n_lanes

    def reset_mask(self, run, step):
        return self.it.reset_mask(run, step)

    def __iter__(self):
        for run in self.it:
            if run.n_lanes < self.n_lanes:
                return
            yield run


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("loss", list(LOSSES))
def test_bitwise_identical_with_lane_refills_before_the_tail(varied, mode, loss):
    hp = hparams(mode, loss, "dropout+momentum")
    a = GRU4Rec(step_impl="standard", **hp)
    a.fit(varied, n_epochs=0)
    a.iterator = _NoTail(a.iterator)
    b = GRU4Rec(step_impl="static", **hp)
    b.fit(varied, n_epochs=0)
    b.iterator = _NoTail(b.iterator)
    standard = StandardStep(a)
    trainer = StaticStep(b, block_steps=5)  # several blocks, runs split across block boundaries
    for epoch in range(2):
        la, na, ea = standard.train_epoch(epoch)
        lb, nb, eb = trainer.train_epoch(epoch)
        assert (la, na, ea) == (lb, nb, eb)
    assert na > 20
    sa, sb = state(a), state(b)
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)


def _close(sa, sb, rtol=1e-5):
    worst = 0.0
    for k in sa:
        scale = float(np.max(np.abs(sa[k]))) or 1.0
        diff = float(np.max(np.abs(sa[k] - sb[k]))) / scale
        worst = max(worst, diff)
        assert diff <= rtol, f"{k}: max |standard - static| = {diff:.2e} of the largest entry"
    return worst


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("loss", list(LOSSES))
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_whole_epochs_with_tail_within_golden_tolerance(varied, mode, loss, setting):
    hp = hparams(mode, loss, setting)
    a, ra = fitted(varied, "standard", **hp)
    b, rb = fitted(varied, "static", **hp)
    assert ra.n_steps == rb.n_steps and ra.n_events_trained == rb.n_events_trained
    np.testing.assert_allclose(rb.epoch_losses, ra.epoch_losses, rtol=1e-5)
    _close(state(a), state(b))
    sa = a.score_prefixes([[1000, 1001], [1005]])
    np.testing.assert_allclose(b.score_prefixes([[1000, 1001], [1005]]), sa, rtol=1e-4, atol=1e-5)


def test_tail_with_n_sample_zero_stops_below_two_lanes(varied):
    hp = hparams("shared", "bpr-max", "dropout+momentum", n_sample=0)
    a, ra = fitted(varied, "standard", **hp)
    b, rb = fitted(varied, "static", **hp)
    assert ra.n_events_trained == rb.n_events_trained
    _close(state(a), state(b))


def test_auto_keeps_the_standard_step_on_cpu(varied):
    g, _ = fitted(varied, "auto", n_epochs=1, **hparams("shared", "cross-entropy", "plain"))
    assert g.step_info == {"step_impl": "standard", "reason": "step_impl='auto' on a non-CUDA device"}


def test_trace_uses_the_standard_step(varied):
    traces = []
    g = GRU4Rec(step_impl="static", **hparams("shared", "cross-entropy", "plain"))
    g.fit(varied, n_epochs=1, trace=traces.append)
    assert g.step_info["step_impl"] == "standard" and len(traces) > 0


def test_invalid_step_impl_names_the_parameter():
    with pytest.raises(ValueError, match="step_impl"):
        GRU4Rec(step_impl="graph")


class _KeepProbDropout(GRU4RecModel):
    def dropout_mask(self, shape, p, generator):
        return super().dropout_mask(shape, 1.0 - p, generator)


class _Mutant(GRU4Rec):
    model_class = _KeepProbDropout


def test_overridden_components_keep_the_standard_step(varied):
    hp = hparams("shared", "cross-entropy", "plain")
    assert "model_class" in unsupported_reason(_Mutant(**hp))
    with pytest.raises(ValueError, match="step_impl.*model_class"):
        _Mutant(step_impl="static", **hp).fit(varied, n_epochs=1)
    theano = GRU4Rec(step_impl="static", **{**hparams("shared", "bpr-max", "plain"), "loss": "top1"})
    with pytest.raises(ValueError, match="step_impl.*top1"):
        theano.fit(varied, n_epochs=1)


def test_nan_loss_aborts_the_static_step(varied):
    g = GRU4Rec(step_impl="static", **hparams("shared", "cross-entropy", "plain"))
    g.fit(varied, n_epochs=0)
    w = g.get_weights()
    w["Wy"][:] = np.nan
    g.set_weights(w)
    with pytest.raises(TrainingDivergedError, match="NaN loss"):
        StaticStep(g).train_epoch(0)
    assert g.error_during_train


def test_cuda_graph_needs_cuda(varied):
    g = GRU4Rec(step_impl="static", **hparams("shared", "cross-entropy", "plain"))
    g.static_cuda_graph = True
    with pytest.raises(ValueError, match="CUDA graphs need device='cuda'"):
        g.fit(varied, n_epochs=1)
