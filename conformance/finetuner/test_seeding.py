"""Seeding checks (FT-14, docs/checks.md): the run seed makes runs repeatable and different seeds differ."""

from __future__ import annotations

import numpy as np
import pytest

from gru4rec_conformance.conformance.finetuner.support import fresh

KIND = "seeding"
CFG = dict(max_epochs=1, batch_size=8, learning_rate=1e-3, warmup_ratio=0.0, patience=None)


def _run(impl, spec, slices, seed):
    a = fresh(impl)
    a.build(seed, model_spec=spec, num_labels=5)
    rec = a.fit(slices.train, slices.val, dict(CFG, seed=seed))
    return a.predict(list(slices.val.texts)), rec


@pytest.mark.check("FT-14", kind=KIND)
@pytest.mark.feature("seed")
@pytest.mark.determinism
def test_same_seed_bitwise_identical(impl, tiny_bert, slices):
    """Two runs with the same seed give bitwise-identical logits and metrics after one epoch on CPU."""
    z1, r1 = _run(impl, tiny_bert, slices, 7)
    z2, r2 = _run(impl, tiny_bert, slices, 7)
    assert np.array_equal(z1, z2), f"same seed, logits differ by up to {np.abs(z1 - z2).max():.3e}"
    assert r1["epochs"][0]["val_loss"] == r2["epochs"][0]["val_loss"]
    assert r1["epochs"][0]["train_loss"] == r2["epochs"][0]["train_loss"]


@pytest.mark.check("FT-14", kind=KIND)
@pytest.mark.feature("seed")
def test_different_seed_differs(impl, tiny_bert, slices):
    """Different seeds give a different classifier-head initialisation and a different training run."""
    a0, a1 = fresh(impl), fresh(impl)
    a0.build(0, model_spec=tiny_bert, num_labels=5)
    a1.build(1, model_spec=tiny_bert, num_labels=5)
    texts = list(slices.val.texts[:4])
    assert not np.array_equal(a0.predict(texts), a1.predict(texts)), "seeds 0 and 1 build identical heads"
    _, r0 = _run(impl, tiny_bert, slices, 0)
    _, r1 = _run(impl, tiny_bert, slices, 1)
    assert r0["epochs"][0]["train_loss"] != r1["epochs"][0]["train_loss"]
