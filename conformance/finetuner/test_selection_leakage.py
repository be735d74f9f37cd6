"""Selection and leakage checks (FT-11, FT-12 and FT-24, docs/checks.md): selection and artifacts never depend on
test labels; the test split is evaluated once, after selection; training passes are on the train split only and
every reported score is the final model's on the split it names, judged by what the run did (its split log, the
final model's own logits), not by what its record says."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.conformance.finetuner.support import (
    CHANGED_ROW,
    NOT_RESTORED_ELSEWHERE_ROW,
    OFF_TRAIN_ROW,
    TRAINED_OFF_TRAIN,
    fresh,
    leakage_evidence,
    off_train_passes,
    restore_causes,
    stable_json_hash,
)
from gru4rec_conformance.datasets.sst5 import Examples
from gru4rec_conformance.reference.finetuner import mean_cross_entropy

KIND = "selection_leakage"
CFG = dict(max_epochs=5, batch_size=8, learning_rate=2e-3, warmup_ratio=0.0, patience=None)


def _variants(test):
    """The true test labels, a rotation by one class, and the mirrored labels (4 - y)."""
    c = test.num_labels
    return [
        test,
        test.with_labels([(y + 1) % c for y in test.labels]),
        test.with_labels([c - 1 - y for y in test.labels]),
    ]


def _val_view(rec):
    return (
        rec["selected_epoch"],
        [(round(e["val_loss"], 10), e["val_accuracy"]) for e in rec["epochs"]],
        rec.get("stopped_epoch"),
    )


@pytest.mark.check("FT-11", kind=KIND)
def test_selection_independent_of_test_labels(impl, tiny_bert, slices):
    """With the test labels replaced (rotated, mirrored), the selected epoch, every val-derived field and the
    selected model's val logits stay identical."""
    views, logits = [], []
    for variant in _variants(slices.test):
        a = fresh(impl)
        rec = a.run(slices.train, slices.val, variant, CFG, seed=0, model_spec=tiny_bert, num_labels=5)
        views.append(_val_view(rec))
        logits.append(a.predict(list(slices.val.texts)).round(5).tobytes())
    assert views[0] == views[1] == views[2], (
        f"selection depends on test labels: selected epochs {[v[0] for v in views]}"
    )
    assert logits[0] == logits[1] == logits[2], "the selected model differs when only test labels differ"


#: Constant learning rate without warmup, so the first epoch is the same whatever max_epochs says; no patience and
#: restore-best, so the selected epoch is the best validation epoch.
DECISIVE_CFG = dict(
    batch_size=8,
    learning_rate=3e-3,
    warmup_ratio=0.0,
    schedule="constant",
    patience=None,
    restore_best=True,
    monitor="val_loss",
)


@pytest.mark.check("FT-11", kind=KIND)
def test_selection_on_test_differs_by_construction(impl, tiny_bert, slices):
    """Black-box, no hook. Validation = the 32 training sentences (true labels), so the validation loss falls over
    6 epochs; the test split = the same sentences labelled with the implementation's own predictions after a
    1-epoch run of the same seed, so test accuracy is 100% at epoch 1 and selecting on test keeps epoch 1. The
    selected epoch must be the epoch of the lowest validation loss, and stay the same when those test labels are
    moved to another class (test accuracy 0 at epoch 1)."""
    train = slices.train.head(32)
    val = Examples("dev", tuple(f"dev-{i}" for i in train.ids), train.texts, train.labels, 5, "train sentences")
    test = Examples("test", tuple(f"test-{i}" for i in train.ids), train.texts, train.labels, 5, "train sentences")
    first = fresh(impl).run(train, val, test, dict(DECISIVE_CFG, max_epochs=1), seed=0, model_spec=tiny_bert)
    p1 = [int(p) for p in first["test"]["predictions"]]
    variants = {
        "test labels = the epoch-1 predictions": test.with_labels(p1),
        "test labels = the epoch-1 predictions moved to another class": test.with_labels([(p + 1) % 5 for p in p1]),
    }
    picked = {}
    for name, variant in variants.items():
        rec = fresh(impl).run(train, val, variant, dict(DECISIVE_CFG, max_epochs=6), seed=0, model_spec=tiny_bert)
        losses = [e["val_loss"] for e in rec["epochs"]]
        best = int(np.argmin(losses)) + 1
        if best == 1:
            pytest.skip(f"indecisive: the validation loss is lowest at epoch 1 ({[round(v, 4) for v in losses]})")
        picked[name] = rec["selected_epoch"]
        assert rec["selected_epoch"] == best, (
            f"selected on test, not on validation: with {name} the run kept epoch {rec['selected_epoch']}, the "
            f"lowest validation loss is at epoch {best} (val losses {[round(v, 4) for v in losses]})"
        )
    assert len(set(picked.values())) == 1, f"the selected epoch depends on the test labels: {picked}"


@pytest.mark.check("FT-11", kind=KIND)
@pytest.mark.feature("hook:split_log")
def test_test_evaluated_after_selection(impl, tiny_bert, slices):
    """The test split is touched only after the last training and validation pass."""
    a = fresh(impl)
    a.run(
        slices.train,
        slices.val,
        slices.test.head(32),
        dict(max_epochs=2, batch_size=8),
        seed=0,
        model_spec=tiny_bert,
        num_labels=5,
    )
    log = a.split_log()
    test_pos = [i for i, e in enumerate(log) if e["split"] == slices.test.split]
    other = [i for i, e in enumerate(log) if e["split"] != slices.test.split]
    assert test_pos, "the test split was never evaluated"
    assert min(test_pos) > max(other), f"test evaluated during training: access log {log}"


#: Two epochs at a learning rate that moves a tiny model, no early stopping: the selected epoch is the best on dev.
LEAK_CFG = dict(max_epochs=2, batch_size=8, learning_rate=2e-3, warmup_ratio=0.0, patience=None)

#: One cause, the finding itself: a training pass the split log names on another split.
LEAK_TABLE = (diagnosis.Candidate(TRAINED_OFF_TRAIN),)


@pytest.mark.check("FT-11", kind=KIND)
@pytest.mark.feature("hook:split_log")
@diagnosis.causes(*LEAK_TABLE)
def test_training_passes_only_on_train(impl, tiny_bert, slices, expect):
    """Every training pass of a run, as its split log records it, is on the train split: none on dev, on test or
    on a union such as train+dev (a final model retrained on train+dev after selection), whatever the reported
    figures and the early-stopping record say."""
    train = slices.train
    a = fresh(impl)
    a.run(train, slices.val, slices.test.head(32), LEAK_CFG, seed=0, model_spec=tiny_bert, num_labels=5)
    passes = off_train_passes(impl, a, train.split)
    assert passes is not None  # the hook is declared (feature marker)
    on_train = [e for e in a.split_log() if e.get("purpose") == "train" and e.get("split") == train.split]
    assert on_train, f"split_log records no training pass on {train.split!r}: {a.split_log()}"
    n = sum(len(v) for v in passes.values())
    if not expect.holds("training passes on other splits", n, le=0, train_split=train.split):
        _, evidence = leakage_evidence(impl, a, train.split)
        # the finding is the cause: the log's own record is its evidence
        diagnosis.fail(
            "leakage: the run trains on a split other than train; the selection on dev and the reported dev and "
            "test scores then describe a model fitted on data they treat as held out",
            [LEAK_TABLE[0].cause(lambda: diagnosis.confirmed(evidence))],
        )


def _final_figures(adapter, split) -> tuple[float, float]:
    """(accuracy, mean CE) of the adapter's final model on ``split``, recomputed from its own logits."""
    z = np.asarray(adapter.predict(list(split.texts)), dtype=np.float64)
    return float(np.mean(z.argmax(axis=1) == np.asarray(split.labels))), float(mean_cross_entropy(z, split.labels))


#: FT-11's causes of a reported score that is not the final model's on its split: the first for the test score,
#: the others for the selected epoch's dev loss (restoring is FT-13's, training off train the leakage check's).
TEST_ON_DEV = diagnosis.Candidate(
    "a test score computed on dev",
    "the final model's accuracy and mean CE on dev, from its own logits: confirmed when the reported test figures "
    "equal them (mean CE within 1e-5)",
)
SCORES_TABLE = (TEST_ON_DEV, NOT_RESTORED_ELSEWHERE_ROW, OFF_TRAIN_ROW, CHANGED_ROW)


@pytest.mark.check("FT-11", kind=KIND)
@diagnosis.causes(*SCORES_TABLE)
def test_reported_scores_computed_on_their_splits(impl, tiny_bert, slices, expect):
    """The run's reported test accuracy and mean CE are those of its final model on the test split, and its
    reported validation loss of the selected epoch is that of the final model on dev (both recomputed from the
    final model's own logits), so that no reported score comes from another split or another model."""
    train, val, test = slices.train, slices.val, slices.test.head(32)
    a = fresh(impl)
    rec = a.run(train, val, test, dict(DECISIVE_CFG, max_epochs=3), seed=0, model_spec=tiny_bert, num_labels=5)
    acc, ce = _final_figures(a, test)
    got = rec["test"]
    dev_acc, dev_ce = _final_figures(a, val)
    if abs(got["mean_ce"] - ce) > 1e-5 or got["accuracy"] != acc:
        on_dev = abs(got["mean_ce"] - dev_ce) <= 1e-5 and got["accuracy"] == dev_acc
        diagnosis.fail(
            f"the reported test score (accuracy {got['accuracy']:.4f}, mean CE {got['mean_ce']:.6f}) is not the "
            f"final model's on the test split (accuracy {acc:.4f}, mean CE {ce:.6f})",
            [TEST_ON_DEV.cause(lambda: diagnosis.decide(
                on_dev, f"the final model on dev: accuracy {dev_acc:.4f}, mean CE {dev_ce:.6f}"))],
        )  # fmt: skip
    losses = [e["val_loss"] for e in rec["epochs"]]
    selected = rec["selected_epoch"]
    reported = losses[selected - 1]
    if not expect.holds("final model's dev loss", dev_ce, reference=reported, tolerance=1e-5, selected_epoch=selected):
        diagnosis.fail(
            f"the reported dev loss of the selected epoch {selected} ({reported:.6f}) is not the final model's on "
            f"dev ({dev_ce:.6f}): the tested model is not the selected one",
            restore_causes(impl, a, train.split, dev_ce, losses, "dev", lambda x, y: abs(x - y) <= 1e-5,
                           NOT_RESTORED_ELSEWHERE_ROW),
        )  # fmt: skip


@pytest.mark.check("FT-24", kind=KIND)
@pytest.mark.feature("hook:split_log")
def test_test_split_touched_once(impl, tiny_bert, slices):
    """One run evaluates the test split exactly once."""
    a = fresh(impl)
    a.run(
        slices.train,
        slices.val,
        slices.test.head(32),
        dict(max_epochs=3, batch_size=8),
        seed=0,
        model_spec=tiny_bert,
        num_labels=5,
    )
    n = sum(e["split"] == slices.test.split for e in a.split_log())
    assert n == 1, f"test split evaluated {n} times in one run"


def _artifact_fingerprint(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            rel = str(p.relative_to(root))
            out[rel] = (
                stable_json_hash(p)
                if p.suffix == ".json" and p.name == "run.json"
                else hashlib.sha256(p.read_bytes()).hexdigest()
            )
    return out


@pytest.mark.check("FT-12", kind=KIND)
def test_artifacts_independent_of_test_labels(impl, tiny_bert, slices, tmp_path):
    """The saved artifacts (names and content) are the same when only the test labels differ. Files that
    differ between two runs with the same labels (run-specific content such as scratch paths) are compared by
    name only."""
    prints = []
    variants = _variants(slices.test)
    for k, variant in enumerate((variants[0], variants[0], variants[1])):
        out = tmp_path / f"v{k}"
        out.mkdir()
        a = fresh(impl)
        a.run(
            slices.train,
            slices.val,
            variant,
            dict(CFG, max_epochs=3),
            seed=0,
            model_spec=tiny_bert,
            num_labels=5,
            out_dir=out,
        )
        prints.append(_artifact_fingerprint(out))
    same, again, shuffled = prints
    assert same, "the run saved no artifact"
    assert set(same) == set(shuffled), f"artifact names depend on test labels: {sorted(set(same) ^ set(shuffled))}"
    volatile = {k for k in same if same[k] != again.get(k)}
    diff = [k for k in same if k not in volatile and same[k] != shuffled[k]]
    assert not diff, f"artifact content depends on test labels: {diff} (run-specific files: {sorted(volatile)})"
