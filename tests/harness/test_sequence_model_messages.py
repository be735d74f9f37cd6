"""Checks whose diagnosis assumes session-parallel training say what a failure means for a model that is not.

A user's adapter for a per-user sequence model with per-example negatives (2026-12-01) got SR-3's "state reset in
part of the training steps" and EB-2's epoch-tail diagnosis, while the real cause was its negative sampler, which
excludes the session's own items. :class:`SequenceModel` below is such a model (GRU over whole padded sequences,
every position's negatives = every item outside its own session); SR-3 and EB-2 run on it through the same
functions the suite runs, and must fail naming the sampler (isolated by EB-2's probes, a candidate in SR-3, which has
none) instead of resets, lanes or the epoch tail."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from gru4rec_conformance.conformance._harness.fixtures import Expect
from gru4rec_conformance.conformance.gru4rec import _data
from gru4rec_conformance.conformance.gru4rec.test_k1_state_reset import test_sr3_long_range_dependency as sr3
from gru4rec_conformance.conformance.gru4rec.test_k7_epoch_batching import test_eb2_tail_learnability as eb2
from gru4rec_conformance.implementations.base import Adapter, Capabilities, FitReport, Unsupported

torch = pytest.importorskip("torch")

CAPS = {
    "losses": ["cross-entropy"],
    "embedding_modes": ["separate"],
    "session_parallel": False,
    "per_example_negatives": True,
    "negatives_exclude_own_items": True,
    "full_ranking": True,
    "hyperparameters": {"layers": [32], "batch_size": 32, "n_epochs": 10, "learning_rate": 0.05, "loss": "cross-entropy"},
}  # fmt: skip


class SequenceModel(Adapter):
    """A GRU over whole right-padded sessions; each position's softmax runs over its target and every item that is
    not in the position's own session (a negative sampler that excludes the session's own items, taken whole)."""

    name = "test:sequence_model"
    role = "example"

    def capabilities(self):
        return CAPS

    def build(self, seed, **hparams):
        hp = self.resolve_hparams(hparams)
        if hp["loss"] != "cross-entropy":
            raise Unsupported(f"loss:{hp['loss']}", "cross-entropy only")
        self.hp, self.seed = hp, 0 if seed is None else int(seed)

    def fit(self, train_df, n_epochs=None):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # tiny matrices: threads only add overhead on a shared machine
        try:
            return self._fit(train_df, n_epochs)
        finally:
            torch.set_num_threads(threads)

    def _fit(self, train_df, n_epochs):
        torch.manual_seed(self.seed)
        df = train_df.sort_values(["SessionId", "Time"], kind="stable")
        self.items = np.unique(df["ItemId"].to_numpy())
        col = {int(i): c for c, i in enumerate(self.items)}
        seqs = [[col[int(i)] for i in g["ItemId"]] for _, g in df.groupby("SessionId", sort=False)]
        n, d = len(self.items), int(self.hp["layers"][0])
        self.emb, self.out = torch.nn.Embedding(n, d), torch.nn.Linear(d, n)
        self.gru = torch.nn.GRU(d, d, batch_first=True)
        params = [*self.emb.parameters(), *self.gru.parameters(), *self.out.parameters()]
        opt = torch.optim.Adam(params, lr=float(self.hp["learning_rate"]))
        B = int(self.hp["batch_size"])
        rep = FitReport([], [], [], [])
        for _ in range(int(self.hp["n_epochs"] if n_epochs is None else n_epochs)):
            order = np.random.default_rng(self.seed + len(rep.n_steps)).permutation(len(seqs))
            total, steps, events = 0.0, 0, 0
            for start in range(0, len(seqs), B):
                batch = [seqs[k] for k in order[start : start + B]]
                L = max(len(s) for s in batch)
                x = torch.zeros((len(batch), L), dtype=torch.long)
                own = torch.zeros((len(batch), n), dtype=torch.bool)
                for r, s in enumerate(batch):
                    x[r, : len(s)] = torch.tensor(s)
                    own[r, s] = True
                h, _ = self.gru(self.emb(x[:, :-1]))
                logits = self.out(h)  # (b, L-1, n)
                target = x[:, 1:]
                valid = torch.arange(L - 1)[None, :] < torch.tensor([len(s) - 1 for s in batch])[:, None]
                logits, label = self._masked_logits(logits, own, target)
                loss = torch.nn.functional.cross_entropy(logits[valid], label[valid])
                opt.zero_grad()
                loss.backward()
                opt.step()
                m = int(valid.sum())
                total, steps, events = total + float(loss.detach()) * m, steps + 1, events + m
            rep.epoch_losses.append(total / max(events, 1))
            rep.n_steps.append(steps)
            rep.n_events_trained.append(events)
            rep.epoch_seconds.append(0.0)
        return rep

    def _masked_logits(self, logits, own, target):
        """The training logits (b, L-1, K) and their labels (b, L-1): the softmax over the target and every item
        outside the position's own session."""
        n = logits.shape[-1]
        keep = ~own[:, None, :] | torch.nn.functional.one_hot(target, n).bool()  # own items out, target in
        return logits.masked_fill(~keep, float("-inf")), target

    def item_ids(self):
        return self.items

    def score_prefixes(self, prefixes):
        col = {int(i): c for c, i in enumerate(self.items)}
        out = np.zeros((len(prefixes), len(self.items)), dtype=np.float32)
        with torch.no_grad():
            for r, p in enumerate(prefixes):
                known = [col[int(i)] for i in p if int(i) in col]
                h = torch.zeros(1, 1, self.gru.hidden_size)
                if known:
                    _, h = self.gru(self.emb(torch.tensor([known])), h)
                out[r] = self.out(h[-1, 0]).numpy()
        return out


class OneNegativeModel(SequenceModel):
    """:class:`SequenceModel` with one sampled negative per position (uniform over the items outside the position's
    own session) instead of all of them: a cross-entropy over (target, negative)."""

    name = "test:one_negative_model"

    def _masked_logits(self, logits, own, target):
        gen = torch.Generator().manual_seed(self.seed)
        noise = torch.rand(logits.shape, generator=gen).masked_fill(own[:, None, :], -1.0)
        neg = noise.argmax(dim=-1, keepdim=True)  # one uniform draw among the items outside the session
        pair = torch.cat([logits.gather(-1, target[..., None]), logits.gather(-1, neg)], dim=-1)
        return pair, torch.zeros_like(target)


class FakeImpl:
    """The parts of the harness's ``impl`` fixture that SR-3 and EB-2 use."""

    def __init__(self, adapter_cls):
        self.cls = adapter_cls
        self.capabilities = Capabilities.from_mapping(CAPS)
        self.notes = []

    def supports(self, *features):
        return all(self.capabilities.declares(f) for f in features)

    def note(self, name, **context):
        self.notes.append(name)

    def build(self, seed=None, **hparams):
        adapter = self.cls()
        adapter.build(seed, **hparams)
        return adapter


def _failure(check, *datasets, impl=None) -> str:
    """Run a check function as the suite does, with a recorder that keeps nothing; return its failure message
    (``impl``: a :class:`FakeImpl`, by default of :class:`SequenceModel`)."""

    def record(name, value, **context):
        return {"name": name, "value": None if value is None else float(value)}

    extra = {"expect": Expect(record)}
    if "record_metric" in inspect.signature(check).parameters:
        extra["record_metric"] = record
    with pytest.raises((pytest.fail.Exception, AssertionError)) as info:
        check(impl or FakeImpl(SequenceModel), *datasets, **extra)
    return str(info.value)


def test_sr3_names_the_sampler_not_resets():
    """SR-3 has no probe that tells the sampler from the other causes: the sampler is a candidate, resets are not."""
    message = _failure(sr3, _data.d_long(), _data.d_lag1())
    assert "for a model that is not session-parallel this means" in message, message
    assert "cause not isolated" in message and "isolated:" not in message, message
    assert "exclude the session's own items" in message and "fillers" in message, message
    assert "SR-4" not in message and "reset in training" not in message, message


def test_eb2_names_the_sampler_not_the_epoch_tail():
    from gru4rec_conformance.conformance.gru4rec.test_k7_epoch_batching import (
        EB2_FEW_NEGATIVES,
        EB2_HISTORY_CUT,
        EB2_OWN_ITEMS,
    )

    message = _failure(eb2, _data.d_tail())
    assert "for a model that is not session-parallel this means" in message, message
    assert "isolated: " + EB2_OWN_ITEMS in message, message
    assert "isolated: " + EB2_HISTORY_CUT not in message and "ruled out: " + EB2_HISTORY_CUT in message, message
    assert "isolated: " + EB2_FEW_NEGATIVES not in message and EB2_FEW_NEGATIVES in message, message
    assert "compare EB-1 and EB-4" not in message and "stale or reset state" not in message, message


def test_session_parallel_declaration_keeps_the_lane_diagnosis():
    from gru4rec_conformance.conformance.gru4rec._common import declared_negatives, session_parallel

    impl = FakeImpl(SequenceModel)
    assert not session_parallel(impl)
    assert declared_negatives(impl) == "declared: per-example negatives that exclude the session's own items"
    impl.capabilities = Capabilities.from_mapping({**CAPS, "negatives_per_example": 1})
    assert declared_negatives(impl) == (
        "declared: per-example negatives (1 per example) that exclude the session's own items"
    )
    impl.capabilities = Capabilities.from_mapping({**CAPS, "session_parallel": True})
    assert session_parallel(impl)


def test_mc1_says_no_matching_reference_exists_for_per_example_negatives():
    """MC-1's "same features" reference draws in-batch and shared extra negatives only: for a declared
    per-example sampler the check is not tested (a skip naming the declared sampler), not failed as a bug."""
    from gru4rec_conformance.conformance.gru4rec.test_metric_conformance import _require_matching_reference

    impl = FakeImpl(SequenceModel)
    impl.capabilities = Capabilities.from_mapping({**CAPS, "negatives_per_example": 1})
    with pytest.raises(pytest.skip.Exception) as info:
        _require_matching_reference(impl)
    assert "no matching reference exists for the declared per-example negatives (1 per example) that exclude the " \
           "session's own items" in str(info.value), info.value  # fmt: skip
    impl.capabilities = Capabilities.from_mapping({**CAPS, "per_example_negatives": False,
                                                   "negatives_exclude_own_items": False})  # fmt: skip
    _require_matching_reference(impl)  # in-batch negatives only: the matching reference exists


def test_eb2_lists_the_negatives_count_and_never_a_history_cut():
    """One negative per example that excludes the session's own items: EB-2 names the count among its candidates
    (with the declared negatives_per_example) and never isolates a history cut (every transition is trained)."""
    from gru4rec_conformance.conformance.gru4rec.test_k7_epoch_batching import EB2_FEW_NEGATIVES, EB2_HISTORY_CUT

    impl = FakeImpl(OneNegativeModel)
    impl.capabilities = Capabilities.from_mapping({**CAPS, "negatives_per_example": 1})
    message = _failure(eb2, _data.d_tail(), impl=impl)
    assert EB2_FEW_NEGATIVES + " (declared 1 per example" in message, message
    assert "ruled out: " + EB2_HISTORY_CUT in message and "isolated: " + EB2_HISTORY_CUT not in message, message
