"""Data integrity checks (FT-6, FT-8, FT-22 and FT-26, docs/checks.md): nothing dropped, truncation reported,
model outputs read correctly, binary mapping and split sizes, predictions in input order."""

from __future__ import annotations

import math

import numpy as np
import pytest
from transformers import AutoTokenizer

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.conformance.finetuner.support import fresh
from gru4rec_conformance.datasets.sst5 import EXPECTED_COUNTS, Examples
from gru4rec_conformance.reference.finetuner.metrics import count_mismatch

KIND = "data_integrity"


@pytest.mark.check("FT-6", kind=KIND)
def test_no_example_dropped_and_truncation_reported(impl, tiny_bert, slices):
    """Train/val/test sizes are kept through a run; test predictions have one row per test id; the number of
    truncated test examples is reported and equals the tokenizer's count."""
    a = fresh(impl)
    cfg = dict(max_epochs=1, batch_size=8)
    L = 48 if impl.supports("encode_max_length") else None
    if L is not None:
        cfg["max_length"] = L
    rec = a.run(slices.train, slices.val, slices.test, cfg, seed=0, model_spec=tiny_bert, num_labels=5)
    test = rec["test"]
    counts = _count_problems(test, len(slices.test), "test examples")
    assert not counts, "; ".join(counts)
    assert test["n"] == len(slices.test), f"test evaluated on {test['n']} of {len(slices.test)} examples"
    assert list(test["ids"]) == list(slices.test.ids), "prediction rows do not match the test ids one to one"
    assert len(test["predictions"]) == len(slices.test)
    n_ex = rec.get("n_examples", {})
    assert n_ex.get("train") == len(slices.train) and n_ex.get("val") == len(slices.val), (
        f"examples used {n_ex}, expected train {len(slices.train)} and val {len(slices.val)}"
    )
    L = L or a.encode(["movie"])["max_length"]
    tok = AutoTokenizer.from_pretrained(tiny_bert.path, local_files_only=True)
    expected = sum(len(ids) > L for ids in tok(list(slices.test.texts))["input_ids"])
    assert expected > 0, "the test slice should contain sentences longer than the max length"
    assert test.get("n_truncated") == expected, (
        f"reported truncated test examples {test.get('n_truncated')}, tokenizer count {expected}"
    )


@pytest.mark.check("FT-6", kind=KIND)
def test_full_splits_evaluated_whole(impl, tiny_bert, sst5_real):
    """Evaluating the full dev and test splits covers 1101 and 2210 examples, one prediction per id (real SST-5
    only: skipped on the synthetic stand-in)."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    for split in ("dev", "test"):
        ex = sst5_real[split]
        res = a.evaluate(ex)
        counts = _count_problems(res, len(ex), f"{split} examples")
        assert not counts, "; ".join(counts)
        assert res["n"] == EXPECTED_COUNTS["fine"][split] == len(ex), (
            f"{split}: evaluated {res['n']} examples, expected {EXPECTED_COUNTS['fine'][split]}"
        )
        assert list(res["ids"]) == list(ex.ids), f"{split}: prediction ids differ from the split's ids"


#: What a fine-tuner's model call must give (docs/finetuner.md, 'Defect rows' row 8 and 'Reference behaviour' item 4).
OUTPUT_CONTRACT = (
    "the model call returns a ModelOutput whose .logits (B, C) and .loss are read by attribute; tuple-unpacking or "
    "iterating it yields its key strings ('loss', 'logits'), not tensors"
)


#: FT-8's cause of a model call that raises: the output read by position (its key strings stand in for tensors).
UNPACKED = diagnosis.Candidate(
    "the model output is unpacked by position, not read by attribute",
    "the exception's text: confirmed when it names a str where a tensor was used (a ModelOutput unpacks to its "
    "key strings), not decided otherwise",
)
CONTRACT_TABLE = (UNPACKED,)


def _under_output_contract(what: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; an exception fails the check as a broken output contract naming the call and the
    exception, with :data:`UNPACKED` isolated when a key string stood in for a tensor (the contract follows)."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (any failure of the call is reported against the contract)
        text, kind = str(e), type(e).__name__
    str_for_tensor = "'str'" in text

    def unpacked() -> diagnosis.Finding:
        if str_for_tensor:
            return diagnosis.confirmed("a str stood in for a tensor")
        return diagnosis.undecided("the exception names no str used as a tensor")

    diagnosis.fail(
        f"output contract broken: {what} raised {kind}: {text}",
        [UNPACKED.cause(unpacked)],
        f"the contract is that {OUTPUT_CONTRACT}",
    )


@pytest.mark.check("FT-8", kind=KIND)
@diagnosis.causes(*CONTRACT_TABLE)
def test_logits_shape_and_one_step(impl, tiny_bert, slices):
    """predict returns finite (B, 5) logits; one optimizer step gives a finite training loss. A failing model call
    is reported as a broken output contract (ModelOutput read by attribute), naming the call that broke it."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    raw = _under_output_contract("predict", a.predict, list(slices.val.texts[:8]))
    z = np.asarray(raw)
    assert z.shape == (8, 5) and np.issubdtype(z.dtype, np.floating), (
        f"output contract broken: predict returned {type(raw).__name__} of shape {z.shape}, dtype {z.dtype}; "
        f"expected float logits (8, 5): {OUTPUT_CONTRACT}"
    )
    assert np.isfinite(z).all()
    small = slices.train.head(8)
    rec = _under_output_contract(
        "one training step (fit)", a.fit, small, slices.val.head(8), dict(max_epochs=1, batch_size=8)
    )
    loss = rec["epochs"][0]["train_loss"]
    assert isinstance(loss, float) and math.isfinite(loss), (
        f"output contract broken: train loss after one step is {loss!r}; expected a finite float: {OUTPUT_CONTRACT}"
    )
    assert rec["epochs"][0]["steps"] == 1


@pytest.mark.check("FT-8", kind=KIND)
def test_overfits_32_examples(impl, tiny_bert, slices):
    """Fine-tuning on 32 examples reaches train accuracy >= 0.9 within 40 epochs (160 steps at batch 8)."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    train = slices.train.head(32)
    a.fit(
        train,
        train,
        dict(max_epochs=40, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0, patience=None, schedule="constant"),
    )
    acc = a.evaluate(train)["accuracy"]
    assert acc >= 0.9, f"train accuracy {acc:.3f} < 0.9 after 40 epochs on 32 examples"


@pytest.mark.check("FT-22", kind=KIND)
@pytest.mark.feature("hook:binary_view")
def test_binary_mapping(impl):
    """Binary view: neutral removed, {0,1} -> 0, {3,4} -> 1, 2 classes, ids kept."""
    a = fresh(impl)
    ex = Examples.from_lists([f"sentence {i}" for i in range(10)], [0, 1, 2, 3, 4, 4, 3, 2, 1, 0], split="dev")
    b = a.binary_view(ex)
    want = {0: 0, 1: 0, 3: 1, 4: 1}
    kept = [(i, y) for i, y in zip(ex.ids, ex.labels) if y != 2]
    assert list(b.ids) == [i for i, _ in kept], f"binary ids {b.ids} (neutral must be dropped, order kept)"
    assert list(b.labels) == [want[y] for _, y in kept], f"binary labels {b.labels}"
    assert b.num_labels == 2


@pytest.mark.check("FT-22", kind=KIND)
@pytest.mark.feature("hook:binary_view")
def test_binary_root_counts(impl, sst5_real):
    """The binary view of the full SST-5 root splits has 6920/872/1821 examples and never label 2 (real SST-5
    only: skipped on the synthetic stand-in)."""
    a = fresh(impl)
    for split, ex in sst5_real.items():
        b = a.binary_view(ex)
        assert len(b) == EXPECTED_COUNTS["binary"][split], f"binary {split}: {len(b)} examples"
        assert set(b.labels) <= {0, 1}


def _count_problems(res: dict, n_examples: int, what: str) -> list[str]:
    """What an ``evaluate`` result says of its size when it is not one prediction (and one id) per example: one
    line naming the counts, e.g. ``the implementation returned 105 predictions for 35 test examples (3× as
    many)``; empty when ``predictions`` and ``ids`` (where given) have ``n_examples`` entries."""
    problems = []
    for key, noun in (("predictions", "predictions"), ("ids", "ids")):
        got = res.get(key)
        if got is None:
            continue
        problem = count_mismatch(len(got), n_examples, what)
        if problem:
            problems.append(problem.replace(" predictions ", f" {noun} ", 1))
    return problems


def _order_problems(got: np.ndarray, want: np.ndarray, what: str, atol: float = 1e-5) -> list[str]:
    """Rows of ``got`` that differ from ``want`` by more than ``atol`` (one line naming the first rows)."""
    d = np.abs(np.asarray(got, dtype=np.float64) - np.asarray(want, dtype=np.float64)).max(axis=1)
    bad = np.flatnonzero(d > atol)
    return (
        [f"{what}: {len(bad)} of {len(d)} rows differ (first rows {bad[:5].tolist()}, max |diff| {d.max():.2e})"]
        if len(bad)
        else []
    )


@pytest.mark.check("FT-26", kind=KIND)
def test_predictions_in_input_order(impl, tiny_bert, slices):
    """The logits of 32 dev sentences predicted together equal those predicted one at a time and those of the
    same sentences in a permuted order (matched back by position) within 1e-5; ``evaluate`` of the permuted split
    returns its ids in the given order and, matched by example id, the argmax of the one-at-a-time logits."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    ex = slices.val
    alone = np.stack([np.asarray(a.predict([t]))[0] for t in ex.texts])
    together = np.asarray(a.predict(list(ex.texts)))
    perm = np.random.default_rng(0).permutation(len(ex)).tolist()
    permuted = ex.subset(perm)
    in_perm = np.asarray(a.predict(list(permuted.texts)))
    problems = _order_problems(together, alone, "predict(split) vs one at a time")
    problems += _order_problems(in_perm, alone[perm], "predict(permuted split) vs one at a time")
    res = a.evaluate(permuted)
    counts = _count_problems(res, len(permuted), "examples")
    if counts:
        pass  # not one row per example: the order of evaluate's rows cannot be judged
    elif list(res["ids"]) != list(permuted.ids):
        problems.append("evaluate returns the ids in another order than the split's")
    else:
        top2 = np.sort(alone, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-4  # argmax not decided by float noise
        want = dict(zip(ex.ids, alone.argmax(axis=1).tolist()))
        wrong = [i for i, p, k in zip(res["ids"], res["predictions"], perm) if clear[k] and int(p) != want[i]]
        if wrong:
            problems.append(f"evaluate: {len(wrong)} predictions differ, matched by example id (first {wrong[:3]})")
    said = ["evaluate does not give one row per example: " + "; ".join(counts)] if counts else []
    said += ["predictions are not in input order: " + "; ".join(problems)] if problems else []
    assert not said, "; ".join(said)
