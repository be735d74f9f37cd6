"""The trace checks read a model that is not session-parallel as implementations/README.md says ("Hooks of a model
that is not session-parallel"): its trace lanes are the rows of its mini-batches, never refilled.

:class:`PaddedRows` below traces such a model without training anything (numpy only): groups of B whole sessions
in session-id order, each stepped to its longest, rows whose session ended inactive (-1). EB-4 and EB-6 must fail
it describing its batching, not lost lanes; SR-4 must name padding, not a reset between lanes, when a row's state is
non-zero at its first event; HP-3's batch-size range must pass (the first step of a group fills all B rows)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from gru4rec_conformance.conformance._harness.fixtures import Expect
from gru4rec_conformance.conformance.gru4rec import _data
from gru4rec_conformance.conformance.gru4rec.test_k1_state_reset import test_sr4_hidden_state_trace as sr4
from gru4rec_conformance.conformance.gru4rec.test_k6_hyperparameters import test_hp3_batch_size_range as hp3_range
from gru4rec_conformance.conformance.gru4rec.test_k7_epoch_batching import test_eb4_lane_refilling as eb4
from gru4rec_conformance.conformance.gru4rec.test_k7_epoch_batching import test_eb6_lane_order_by_start_time as eb6
from gru4rec_conformance.implementations.base import Adapter, Capabilities, FitReport, StepTrace

CAPS = {
    "losses": ["cross-entropy"],
    "embedding_modes": ["separate"],
    "session_parallel": False,
    "per_example_negatives": True,
    "hyperparameters": {"layers": [32], "batch_size": 32, "n_epochs": 1, "learning_rate": 0.05, "loss": "cross-entropy"},
}  # fmt: skip
NOT_LANES = "for a model that is not session-parallel this means"


class PaddedRows(Adapter):
    """Trace-only stand-in of a padded whole-session model (``leaky_start``: a row's state is non-zero at its
    first event, as when padding reaches the GRU)."""

    name = "test:padded_rows"
    role = "example"
    leaky_start = False

    def capabilities(self):
        return CAPS

    def build(self, seed, **hparams):
        self.hp = self.resolve_hparams(hparams)

    def trace(self, enable=True):
        self.tracing = enable

    def fit(self, train_df, n_epochs=None):
        groups = [g["ItemId"].to_numpy() for _, g in train_df.sort_values(["SessionId", "Time"]).groupby("SessionId")]
        sids = np.array(sorted(train_df["SessionId"].unique()), dtype=np.int64)
        self.items = np.unique(train_df["ItemId"].to_numpy())
        B, trace = int(self.hp["batch_size"]), []
        for start in range(0, len(groups), B):
            lengths = np.array([len(s) for s in groups[start : start + B]])
            for t in range(int(lengths.max()) - 1):
                active = lengths - 1 > t
                norms = np.where(active, 0.0 if t == 0 and not self.leaky_start else 1.0, 0.0)
                trace.append(StepTrace(session_ids=np.where(active, sids[start : start + B], -1),
                                       positions=np.where(active, t, -1), h_in_norms=norms,
                                       n_active=int(active.sum()), negative_ids=None))  # fmt: skip
        events = int(sum(len(s) - 1 for s in groups))
        return FitReport([1.0], [len(trace)], [events], [0.0], trace=trace)

    def item_ids(self):
        return self.items

    def score_prefixes(self, prefixes):
        return np.zeros((len(prefixes), len(self.items)), dtype=np.float32)


class LeakyStart(PaddedRows):
    leaky_start = True


class FakeImpl:
    """The parts of the harness's ``impl`` fixture these checks use."""

    def __init__(self, adapter_cls):
        self.cls = adapter_cls
        self.capabilities = Capabilities.from_mapping(CAPS)

    def supports(self, *features):
        return all(self.capabilities.declares(f) for f in features)

    def note(self, name, **context):
        pass

    def build(self, seed=None, **hparams):
        adapter = self.cls()
        adapter.build(seed, **hparams)
        return adapter


def _run(check, adapter_cls, *datasets):
    """Run a check function as the suite does; returns its failure message, or None when it passes."""

    def record(name, value, **context):
        return {"name": name, "value": None if value is None else float(value)}

    extra = {"expect": Expect(record)} if "expect" in inspect.signature(check).parameters else {}
    if "record_metric" in inspect.signature(check).parameters:
        extra["record_metric"] = record
    try:
        check(FakeImpl(adapter_cls), *datasets, **extra)
    except (pytest.fail.Exception, AssertionError) as exc:
        return str(exc)
    return None


def test_eb4_reads_unrefilled_rows_as_the_batching():
    message = _run(eb4, PaddedRows, _data.d_var(0)) or ""
    assert NOT_LANES in message and "rows whose sequence ended" in message, message
    assert "finished lanes are not refilled" not in message, message


def test_eb6_reads_another_order_as_the_batching():
    message = _run(eb6, PaddedRows, _data.d_var(0)) or ""
    assert NOT_LANES in message and "a deviation of the batching" in message, message


def test_sr4_names_padding_not_a_lane_reset():
    assert _run(sr4, PaddedRows, _data.d_long(0)) is None
    message = _run(sr4, LeakyStart, _data.d_long(0)) or ""
    assert NOT_LANES in message and "padding or another row" in message, message
    assert "(leak)" not in message, message


def test_hp3_range_counts_rows_as_lanes():
    assert _run(hp3_range, PaddedRows, _data.zipf_sessions(0)) is None
