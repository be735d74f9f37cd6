"""The extension points listed in reference/gru4rec/README.md really select the behaviour they name.

Each test subclasses exactly one component the way a mutant in implementations/mutants/ would, and checks that
the override takes effect (and that the unmodified reference does not show the effect). The mutants themselves
live elsewhere; these tests keep the contract they rely on from breaking silently.
"""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from ref_testdata import lag1_sessions

from gru4rec_conformance.reference.gru4rec import (
    GRU4Rec,
    GRU4RecModel,
    IndexedAdagradM,
    SampleCache,
    SessionParallelEvaluator,
    SessionParallelIterator,
)
from gru4rec_conformance.reference.gru4rec.evaluation import hits
from gru4rec_conformance.reference.gru4rec.losses import LOSS_CLASSES, CrossEntropyLoss, loss_on_scores

KW = dict(layers=[16], batch_size=8, n_sample=6, learning_rate=0.1, n_epochs=1, seed=3)


@pytest.fixture(scope="module")
def data():
    return lag1_sessions(n_sessions=80)


@pytest.fixture(scope="module")
def test_data():
    return lag1_sessions(seed=1, n_sessions=12, first_session=10_000, t0=1e6)


def _sub(**attrs):
    return type("Variant", (GRU4Rec,), attrs)


def test_evaluator_reset_lanes(data, test_data):
    class NoReset(SessionParallelEvaluator):
        def reset_lanes(self, H, mask):
            return H

    ref, var = GRU4Rec(**KW), _sub(evaluator_class=NoReset)(**KW)
    ref.fit(data), var.fit(data)
    a = np.stack([r[3] for r in ref.score_stream(test_data, batch_size=3)])
    b = np.stack([r[3] for r in var.score_stream(test_data, batch_size=3)])
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(ref.score_prefixes([[1000]]), var.score_prefixes([[1000]]))


def test_iterator_reset_mask(data):
    class Stale(SessionParallelIterator):
        def reset_mask(self, run, step):
            return run.reset

    traces = []
    _sub(iterator_class=Stale)(**KW).fit(data, trace=traces.append)
    assert any(np.any((t.h_in_norms == 0) & (t.positions > 0)) for t in traces)


def test_iterator_should_stop(data):
    class EarlyEnd(SessionParallelIterator):
        def should_stop(self, n_valid, n_lanes_before):
            return n_valid < n_lanes_before

    ref = GRU4Rec(**KW).fit(data)
    var = _sub(iterator_class=EarlyEnd)(**KW).fit(data)
    assert var.n_events_trained[0] < ref.n_events_trained[0]


def test_loss_softmax(data):
    class TwiceXE(CrossEntropyLoss):
        def softmax(self, R):
            return super().softmax(super().softmax(R))

    R = np.random.default_rng(0).normal(0, 2, (4, 9))
    R[np.arange(4), np.arange(4)] += 8.0  # targets score best: XE is near 0, a double softmax cannot be
    classes = {**LOSS_CLASSES, "cross-entropy": TwiceXE}
    assert loss_on_scores(R, classes=classes)[0] > loss_on_scores(R)[0]
    rep = _sub(loss_classes=classes)(**{**KW, "n_epochs": 3}).fit(data)
    assert min(rep.epoch_losses) > math.log(1 + 13 / math.e) - 1e-6  # bounded below: inputs in [0, 1]


def test_model_score_train(data):
    class FullThenPick(GRU4RecModel):
        def score_train(self, h, y, O, Bo):
            return torch.softmax(self.score_all(h), dim=1)[:, y]

    traces = []
    _sub(model_class=type("M", (FullThenPick,), {}))(**KW).fit(data, trace=traces.append)
    n_items = 20
    assert traces[5].output_rows_touched == n_items
    traces_ref = []
    GRU4Rec(**KW).fit(data, trace=traces_ref.append)
    assert traces_ref[5].output_rows_touched < n_items


def test_model_dropout_mask(data):
    class KeepProb(GRU4RecModel):
        def dropout_mask(self, shape, p, generator):
            m = torch.empty(shape, device=self.device).bernoulli_(p, generator=generator)
            return m.div_(p)

    g = _sub(model_class=KeepProb)(**{**KW, "dropout_p_embed": 0.2})
    g.fit(data, n_epochs=0)
    emb = g.train_forward(list(g.item_ids()) * 10)["embedding_out"]
    assert np.mean(emb == 0) > 0.6


def test_dropout_rates(data):
    class Shared(GRU4Rec):
        def _dropout_rates(self):
            return self.dropout_p_hidden, self.dropout_p_hidden

    g = Shared(**{**KW, "dropout_p_embed": 0.0, "dropout_p_hidden": 0.5})
    g.fit(data, n_epochs=0)
    emb = g.train_forward(list(g.item_ids()) * 10)["embedding_out"]
    assert abs(np.mean(emb == 0) - 0.5) < 0.1


def test_optimizer_initial_accumulator_lr_and_momentum(data):
    ids = None

    def first_update(opt_cls, **kw):
        nonlocal ids
        g = _sub(optimizer_class=opt_cls)(**{**KW, **kw})
        g.fit(data, n_epochs=0)
        ids = g.item_ids()
        w0 = g.get_weights()["G.0.weight_ih"]
        for _ in range(3):
            g.train_step(ids[:4], ids[4:8], ids[8:12], dropout_masks={})
        return g.get_weights()["G.0.weight_ih"] - w0, g

    class Acc01(IndexedAdagradM):
        initial_accumulator_value = 0.1

    class Decay(IndexedAdagradM):
        def current_lr(self):
            return self.learning_rate * 0.5**self.n_updates

    class NoMomentum(IndexedAdagradM):
        def __init__(self, params, learning_rate, momentum=0.0):
            super().__init__(params, learning_rate, 0.0)

    ref, _ = first_update(IndexedAdagradM)
    assert np.abs(first_update(Acc01)[0]).max() < 0.5 * np.abs(ref).max()
    dec, g = first_update(Decay)
    assert g.optimizer_info()["learning_rate"] < KW["learning_rate"] and not np.allclose(dec, ref)
    mom_ref, _ = first_update(IndexedAdagradM, momentum=0.5)
    mom_var, _ = first_update(NoMomentum, momentum=0.5)
    np.testing.assert_allclose(mom_var, ref, rtol=1e-6)
    assert not np.allclose(mom_ref, ref)


def test_model_layers(data):
    class Hardcoded(GRU4RecModel):
        def __init__(self, n_items, layers, *a, **k):
            super().__init__(n_items, [10], *a, **k)

    g = _sub(model_class=Hardcoded)(**{**KW, "layers": [32]})
    g.fit(data, n_epochs=1)
    assert g.get_weights()["G.0.weight_hh"].shape == (30, 10)
    assert g.score_prefixes([[1000, 1001]]).shape == (1, 20)


def test_model_init_block_and_bias(data):
    class Small(GRU4RecModel):
        def init_block(self, rows, cols, generator):
            return (torch.rand((rows, cols), generator=generator) * 2 - 1) * 0.01

        def init_bias(self, n, generator):
            return torch.full((n,), 0.1)

    g = _sub(model_class=Small)(**KW)
    g.fit(data, n_epochs=0)
    w = g.get_weights()
    assert np.abs(w["Wy"]).max() <= 0.01 and np.all(w["G.0.bias_ih"] == 0.1)


def test_per_row_negatives(data):
    class PerRowModel(GRU4RecModel):
        def score_train(self, h, y, O, Bo):
            if O.ndim == 3:
                return torch.einsum("bd,bkd->bk", h, O) + Bo[..., 0]
            return super().score_train(h, y, O, Bo)

    class PerRow(GRU4Rec):
        model_class = PerRowModel

        def _sample_block(self, n_steps, n_lanes):
            return self.sampler.draw((n_steps, n_lanes, self.n_sample))

        def _columns(self, targets, samples):
            b = targets.shape[0]
            return torch.cat([targets.expand(b, b), samples], dim=1)

    traces = []
    g = PerRow(**{**KW, "loss": "bpr-max"})
    g.fit(data, trace=traces.append)
    t = traces[3]
    assert t.negative_ids.shape == (t.n_active, 6)
    assert len({tuple(r) for r in t.negative_ids}) > 1


def test_sampler_weights():
    class Uniform(SampleCache):
        @staticmethod
        def weights(supports, sample_alpha):
            return np.ones_like(supports)

    supp = np.array([1000.0, 1, 1, 1])
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    ref = SampleCache(supp, 256, 1.0, 256 * 10, gen(), torch.device("cpu")).take(10).numpy()
    var = Uniform(supp, 256, 1.0, 256 * 10, gen(), torch.device("cpu")).take(10).numpy()
    assert np.mean(ref == 0) > 0.9 and np.mean(var == 0) < 0.4


def test_evaluator_prepare_and_hits(data, test_data):
    class Crash(SessionParallelEvaluator):
        def prepare(self, test_df, item_key, session_key, time_key):
            unknown = ~test_df[item_key].isin(self.gru.item_ids())
            if unknown.any():
                raise KeyError(test_df[item_key][unknown].iloc[0])
            return super().prepare(test_df, item_key, session_key, time_key)

    class OffByOne(SessionParallelEvaluator):
        def hits(self, ranks, cutoff):
            return ranks < cutoff

    noisy = pd.concat([test_data, pd.DataFrame({"SessionId": [10_000], "ItemId": [424242], "Time": [2e6]})])
    g = _sub(evaluator_class=Crash)(**KW)
    g.fit(data)
    with pytest.raises(KeyError):
        g.evaluate(noisy)
    h = _sub(evaluator_class=OffByOne)(**KW)
    h.fit(data)
    ref = GRU4Rec(**KW)
    ref.fit(data)
    assert h.evaluate(test_data)["recall@1"] == 0.0 < ref.evaluate(test_data)["recall@1"]
    assert hits(np.array([5.0]), 5)[0]
