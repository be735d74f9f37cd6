"""Selection and leakage checks (FT-11, FT-12 and FT-24, docs/checks.md): selection and artifacts never depend on
test labels; the test split is evaluated once, after selection."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gru4rec_conformance.conformance.finetuner.support import fresh, stable_json_hash

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
