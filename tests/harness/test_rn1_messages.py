"""RN-1 (option smoke) tells a fit that trained no epoch apart from one whose loss is not finite.

Upstream KerasGRU4Rec trains ``range(1, epochs)``: asked for one epoch it trains none, which RN-1 reported as a
"non-finite training loss" (2026-11-30)."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.conformance.gru4rec.test_k10_runnability import test_rn1_option_smoke as rn1
from gru4rec_conformance.implementations.base import FitReport


class _Caps:
    hyperparameters = {"n_epochs": 1, "layers": [16], "batch_size": 32, "learning_rate": 0.05, "loss": "cross-entropy"}

    def features(self):
        return {}


class FakeImpl:
    """The parts of the ``impl`` fixture RN-1 uses; ``fit`` reports the given per-epoch losses."""

    def __init__(self, losses):
        self.capabilities, self.losses = _Caps(), list(losses)

    def note(self, *a, **k):
        pass

    def build(self, seed=None, **hp):
        impl = self

        class Model:
            def fit(self, train):
                n = len(impl.losses)
                return FitReport(
                    epoch_losses=impl.losses, n_steps=[10] * n, n_events_trained=[40] * n, epoch_seconds=[0.1] * n
                )

            def score_prefixes(self, prefixes):
                return np.zeros((len(prefixes), 3), dtype=np.float32)

        return Model()


D_LAG1 = types.SimpleNamespace(
    train=None, test=pd.DataFrame({"SessionId": [1] * 12, "ItemId": list(range(12)), "Time": np.arange(12.0)})
)


def _rn1(losses):
    rn1(FakeImpl(losses), D_LAG1, {"loss": "cross-entropy"}, lambda *a, **k: None)


def test_finite_epoch_passes():
    _rn1([1.5])


def test_no_epoch_is_reported_as_such():
    with pytest.raises(AssertionError, match="no training epoch"):
        _rn1([])


def test_nan_loss_is_reported_as_such():
    with pytest.raises(AssertionError, match="non-finite training loss"):
        _rn1([float("nan")])
