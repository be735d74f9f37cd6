"""Padding and masking checks (FT-4 and FT-7, docs/checks.md): predictions independent of padding, attention
mask passed, dynamic padding to the longest sequence of each batch with the tokenizer's pad id. Every check runs
for every model family (``model:<family>``): RoBERTa's pad id is 1, so padding with 0 or padding the mask with the
pad id, correct by accident where the pad id is 0 (BERT, ALBERT, DistilBERT), shows there."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gru4rec_conformance.conformance.finetuner.support import fresh, unpadded_length
from gru4rec_conformance.conformance.finetuner.tiny_models import FAMILIES

KIND = "padding_masking"
ATOL = 1e-5


def _built(impl, family, tiny_models):
    """A fresh adapter built on the tiny model of ``family`` (skipped unless the family is declared)."""
    impl.require(f"model:{family}")
    a = fresh(impl)
    a.build(0, model_spec=tiny_models[family], num_labels=5)
    return a


@pytest.mark.check("FT-4", kind=KIND)
@pytest.mark.parametrize("family", FAMILIES)
def test_pad_invariance(impl, family, tiny_models, slices):
    """A sentence's eval logits alone and inside batches with longer sentences agree within 1e-5."""
    a = _built(impl, family, tiny_models)
    by_len = sorted(slices.val.texts, key=lambda t: len(t.split()))
    short, longer, longest = by_len[0], by_len[len(by_len) // 2], by_len[-1]
    alone = a.predict([short])[0]
    with_longer = a.predict([short, longer])[0]
    with_longest = a.predict([longest, short, longer])[1]
    d1 = float(np.abs(alone - with_longer).max())
    d2 = float(np.abs(alone - with_longest).max())
    assert d1 <= ATOL and d2 <= ATOL, f"{family}: logits depend on padding: max |diff| {d1:.2e} / {d2:.2e} > {ATOL}"


@pytest.mark.check("FT-4", kind=KIND)
@pytest.mark.feature("hook:torch_module")
@pytest.mark.parametrize("family", FAMILIES)
def test_logits_equal_unpadded_forward(impl, family, tiny_models, slices):
    """The implementation's logits equal its own model run on the unpadded ids (so padding is masked out)."""
    a = _built(impl, family, tiny_models)
    texts = list(slices.val.texts[:6])
    got = a.predict(texts)
    enc = a.encode(texts)
    module = a.torch_module()
    pad = enc["special_ids"]["pad"]
    for i, ids in enumerate(enc["input_ids"]):
        mask = enc["attention_mask"][i] if enc["attention_mask"] is not None else None
        n = unpadded_length(ids, mask, pad)
        x = torch.tensor([ids[:n]])
        with torch.no_grad():
            ref = module(input_ids=x, attention_mask=torch.ones_like(x)).logits[0].float().numpy()
        d = float(np.abs(ref - got[i]).max())
        assert d <= ATOL, (
            f"{family}, sentence {i}: logits differ from the unpadded forward by {d:.2e} (padding attended?)"
        )


@pytest.mark.check("FT-7", kind=KIND)
@pytest.mark.feature("hook:collate")
@pytest.mark.parametrize("family", FAMILIES)
def test_dynamic_padding_width(impl, family, tiny_models):
    """Collating inputs of 6 and 3 ids gives shape (2, 6), pad id in the padded slots and a 0/1 mask."""
    a = _built(impl, family, tiny_models)
    sp = a.encode(["movie"])["special_ids"]
    six = [sp["cls"], 10, 11, 12, 13, sp["sep"]]
    three = [sp["cls"], 10, sp["sep"]]
    batch = a.collate([{"input_ids": six, "attention_mask": [1] * 6}, {"input_ids": three, "attention_mask": [1] * 3}])
    ids = np.asarray(batch["input_ids"])
    assert ids.shape == (2, 6), f"{family}: batch of lengths 6 and 3 has shape {ids.shape}, expected (2, 6)"
    assert (ids[1, 3:] == sp["pad"]).all(), (
        f"{family}: padded slots hold {ids[1, 3:].tolist()}, not the tokenizer's pad id {sp['pad']}"
    )
    assert "attention_mask" in batch, f"{family}: no attention mask in the batch"
    mask = np.asarray(batch["attention_mask"]).tolist()
    assert mask == [[1] * 6, [1, 1, 1, 0, 0, 0]], f"{family}: attention mask {mask}, expected [[1]*6, [1,1,1,0,0,0]]"


@pytest.mark.check("FT-7", kind=KIND)
@pytest.mark.feature("hook:collate")
@pytest.mark.parametrize("family", FAMILIES)
def test_mask_marks_exactly_the_padding(impl, family, tiny_models, slices):
    """Collating 8 encoded sentences of different lengths pads on the right with the tokenizer's pad id (1 for
    RoBERTa) and gives ``attention_mask == (input_ids != pad_id)``, each row starting with its sentence's ids."""
    a = _built(impl, family, tiny_models)
    texts = sorted(slices.val.texts[:8], key=len)
    enc = a.encode(texts)
    pad = enc["special_ids"]["pad"]
    feats = []
    for i, ids in enumerate(enc["input_ids"]):
        n = unpadded_length(ids, None if enc["attention_mask"] is None else enc["attention_mask"][i], pad)
        feats.append({"input_ids": list(ids[:n]), "attention_mask": [1] * n})
    assert len({len(f["input_ids"]) for f in feats}) > 1, "the probe sentences should differ in length"
    batch = a.collate(feats)
    assert "attention_mask" in batch, f"{family}: no attention mask in the batch"
    ids, mask = np.asarray(batch["input_ids"]), np.asarray(batch["attention_mask"])
    assert ids.shape == mask.shape, f"{family}: input_ids {ids.shape} and attention_mask {mask.shape} differ"
    for i, f in enumerate(feats):
        n = len(f["input_ids"])
        assert ids[i, :n].tolist() == f["input_ids"], f"{family}, row {i}: does not start with its ids (left-padded?)"
        assert (ids[i, n:] == pad).all(), (
            f"{family}, row {i}: padded slots hold {sorted(set(ids[i, n:].tolist()))}, not the pad id {pad}"
        )
    want = (ids != pad).astype(int)
    bad = np.argwhere(mask.astype(int) != want)
    assert not len(bad), (
        f"{family}: attention_mask != (input_ids != pad_id {pad}) at {len(bad)} position(s), first (row, col) "
        f"{tuple(bad[0].tolist())}: mask {int(mask[tuple(bad[0])])}, id {int(ids[tuple(bad[0])])}"
    )


@pytest.mark.check("FT-7", kind=KIND)
@pytest.mark.parametrize("family", FAMILIES)
def test_encoded_width_not_fixed(impl, family, tiny_models):
    """Encoding two short texts never pads beyond the longer one (no fixed length such as 66)."""
    a = _built(impl, family, tiny_models)
    enc = a.encode(["a movie", "a funny movie"])
    tok_lens = [
        unpadded_length(
            ids, None if enc["attention_mask"] is None else enc["attention_mask"][i], enc["special_ids"]["pad"]
        )
        for i, ids in enumerate(enc["input_ids"])
    ]
    widths = [len(ids) for ids in enc["input_ids"]]
    assert max(widths) <= max(tok_lens), (
        f"{family}: encoded widths {widths} exceed the longest sequence {max(tok_lens)}"
    )
