"""The loss checks LF-2 and LF-4 need only the loss they test: they pass no bpreg, so an implementation without
the BPR-max regulariser (feature ``bpreg`` absent) still gets its two BPR-max loss checks."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from test_optional_hparams import FakeImpl

from gru4rec_conformance.implementations.base import Unsupported
from gru4rec_conformance.reference.gru4rec.losses import loss_on_scores

K2 = importlib.import_module("gru4rec_conformance.conformance.gru4rec.test_k2_loss_formula")


class NoBpregModel:
    """BPR-max without the score regulariser: refuses every bpreg, as an adapter of such an implementation does."""

    def loss_on_scores(self, scores, loss, **hparams):
        if "bpreg" in hparams:
            raise Unsupported("bpreg", "no score regularisation term")
        value, grad = loss_on_scores(np.asarray(scores, dtype=np.float64), loss, bpreg=0.0, **hparams)
        return float(value), np.asarray(grad)


class _Impl(FakeImpl):
    def build(self, seed=None, **hp):
        super().build(seed, **hp)
        return NoBpregModel()


@pytest.mark.parametrize("check", [K2.test_lf2_row_separability, K2.test_lf4_finite_under_extreme_scores])
def test_bpr_max_loss_checks_run_without_bpreg(check):
    check(_Impl(lambda hp: None), "bpr-max")  # raised Unsupported("bpreg") when the checks passed bpreg=1.0
