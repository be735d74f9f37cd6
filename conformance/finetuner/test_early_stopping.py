"""Early-stopping and epoch-loop checks (FT-10 and FT-13, docs/checks.md)."""

from __future__ import annotations

import math

import pytest

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.conformance.finetuner.support import (
    CHANGED_ROW,
    NOT_RESTORED_ROW,
    OFF_TRAIN_ROW,
    fresh,
    restore_causes,
)
from gru4rec_conformance.reference.finetuner import simulate

KIND = "early_stopping"

#: FT-13's causes of a final model that does not reproduce the best epoch's val loss.
RESTORE_TABLE = (NOT_RESTORED_ROW, OFF_TRAIN_ROW, CHANGED_ROW)


@pytest.mark.check("FT-13", kind=KIND)
@pytest.mark.feature("hook:stopping_rule")
def test_stub_sequence(impl):
    """Val losses 1.00, 0.90, 0.95, 0.94, 0.96 with patience 2: stop after epoch 4, restore epoch 2."""
    a = fresh(impl)
    got = a.stopping_rule([1.00, 0.90, 0.95, 0.94, 0.96], patience=2, min_delta=0.0)
    assert tuple(got) == (4, 2), f"(stopped, restored) = {tuple(got)}, expected (4, 2)"


@pytest.mark.check("FT-13", kind=KIND)
@pytest.mark.feature("early_stopping")
@diagnosis.causes(*RESTORE_TABLE)
def test_stops_on_patience_and_restores_best(impl, tiny_bert, slices):
    """On a run whose val loss rises (val = train sentences with wrong labels), training stops when the rule
    says so and the final model reproduces the best epoch's val loss."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    train = slices.train.head(32)
    val = train.with_labels([(y + 2) % 5 for y in train.labels])
    rec = a.fit(train, val, dict(max_epochs=12, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0, patience=2))
    losses = [e["val_loss"] for e in rec["epochs"]]
    stopped, best = simulate(losses, 2)
    assert rec["stop_reason"] == "patience", f"did not stop on patience (val losses {losses})"
    assert rec["stopped_epoch"] == stopped == len(losses), (
        f"stopped after epoch {rec['stopped_epoch']}; the best-so-far rule stops after {stopped} ({losses})"
    )
    assert rec["selected_epoch"] == best, f"selected epoch {rec['selected_epoch']}, best val loss at {best}"
    now = a.evaluate(val)["mean_ce"]
    if math.isclose(now, losses[best - 1], abs_tol=1e-5):
        return
    diagnosis.fail(
        f"final model's val loss {now:.6f} is not the best epoch's ({best}) {losses[best - 1]:.6f}",
        restore_causes(impl, a, train.split, now, losses, "val", lambda x, y: math.isclose(x, y, abs_tol=1e-5)),
    )


@pytest.mark.check("FT-10", kind=KIND)
def test_epoch_count_and_steps(impl, tiny_bert, slices):
    """With max_epochs=3 and early stopping off: exactly 3 epoch records and 3 x ceil(50/8) optimizer steps."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    train = slices.train.head(50)
    rec = a.fit(train, slices.val, dict(max_epochs=3, batch_size=8, patience=None))
    assert len(rec["epochs"]) == 3, f"{len(rec['epochs'])} epoch records for max_epochs=3"
    steps = [e["steps"] for e in rec["epochs"]]
    assert steps == [7, 7, 7], f"optimizer steps per epoch {steps}, expected ceil(50/8)=7 each"
