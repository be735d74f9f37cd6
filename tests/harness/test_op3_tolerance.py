"""OP-3 (constant learning rate) reads a learning rate held in float32 as constant and still fails a schedule.

TensorFlow/Keras keep η in a float32 variable: Keras' Adagrad at η = 0.05 reports 0.05000000074505806 through
``optimizer_info`` (keras_gru4rec:minor_fix, 2026-11-30), which a 1e-9 relative tolerance failed as a schedule."""

from __future__ import annotations

import types

import numpy as np
import pytest

from gru4rec_conformance.conformance._harness.fixtures import Expect
from gru4rec_conformance.conformance.gru4rec.test_k5_optimizer import LR_REL_TOL, _constant_lr, lr_deviation
from gru4rec_conformance.implementations.base import FitReport


class _Caps:
    hyperparameters = {"learning_rate": 0.05, "batch_size": 4, "n_epochs": 1, "layers": [8], "loss": "cross-entropy"}

    def features(self):
        return {}


class FakeImpl:
    """The parts of the ``impl`` fixture that OP-3 uses: ``optimizer_info`` reports ``lr_after(η)``."""

    def __init__(self, lr_after, schedule="constant", trace=None):
        self.capabilities = _Caps()
        self.lr_after, self.schedule, self.trace_lrs = lr_after, schedule, trace

    def supports(self, what):
        return what == "hook:optimizer_info" or (what == "hook:trace" and self.trace_lrs is not None)

    def note(self, *a, **k):
        pass

    def build(self, seed=None, **hp):
        impl, eta = self, float(hp["learning_rate"])

        class Model:
            def trace(self, on):
                pass

            def fit(self, train):
                rep = FitReport(epoch_losses=[1.0], n_steps=[100], n_events_trained=[400], epoch_seconds=[0.1])
                if impl.trace_lrs is not None:
                    rep.trace = [types.SimpleNamespace(learning_rate=lr) for lr in impl.trace_lrs]
                return rep

            def optimizer_info(self):
                return {"learning_rate": impl.lr_after(eta), "lr_schedule": impl.schedule}

        return Model()


D_LAG1 = types.SimpleNamespace(train=None)


def _run(impl):
    records = []

    def record(name, value, **k):
        records.append(((name, value), k))
        return {"value": float(value)}

    _constant_lr(impl, D_LAG1, 1, Expect(record))
    return records


def test_float32_learning_rate_is_constant():
    as_float32 = float(np.float32(0.05))
    assert as_float32 != 0.05 and lr_deviation(as_float32, 0.05) <= LR_REL_TOL
    records = _run(FakeImpl(lambda eta: float(np.float32(eta))))
    assert records and records[0][1]["tolerance"] == pytest.approx(LR_REL_TOL * 0.05)


def test_float32_trace_is_constant():
    _run(FakeImpl(lambda eta: eta, trace=[float(np.float32(0.05))] * 5))


@pytest.mark.parametrize("factor", [0.96, 1 - 1e-5, 1 + 1e-6, 0.02])
def test_changed_learning_rate_fails(factor):
    """A staircase decay (×0.96), a drift of 1e-5 or 1e-6 relative, a hard-coded 0.001 (Adam at η = 0.05)."""
    with pytest.raises(AssertionError, match="learning rate is"):
        _run(FakeImpl(lambda eta: eta * factor))


def test_decayed_trace_fails():
    with pytest.raises(AssertionError, match="traced learning rate changes"):
        _run(FakeImpl(lambda eta: eta, trace=[0.05] * 3 + [0.05 * 0.96] * 2))
