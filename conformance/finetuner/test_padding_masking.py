"""Padding and masking checks (FT-4 and FT-7, docs/checks.md): predictions independent of padding,
attention mask passed, dynamic padding to the longest sequence of each batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gru4rec_conformance.conformance.finetuner.support import fresh, unpadded_length

KIND = "padding_masking"
ATOL = 1e-5


@pytest.mark.check("FT-4", kind=KIND)
def test_pad_invariance(impl, tiny_bert, slices):
    """A sentence's eval logits alone and inside batches with longer sentences agree within 1e-5."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    by_len = sorted(slices.val.texts, key=lambda t: len(t.split()))
    short, longer, longest = by_len[0], by_len[len(by_len) // 2], by_len[-1]
    alone = a.predict([short])[0]
    with_longer = a.predict([short, longer])[0]
    with_longest = a.predict([longest, short, longer])[1]
    d1 = float(np.abs(alone - with_longer).max())
    d2 = float(np.abs(alone - with_longest).max())
    assert d1 <= ATOL and d2 <= ATOL, f"logits depend on padding: max |diff| {d1:.2e} / {d2:.2e} > {ATOL}"


@pytest.mark.check("FT-4", kind=KIND)
@pytest.mark.feature("hook:torch_module")
def test_logits_equal_unpadded_forward(impl, tiny_bert, slices):
    """The implementation's logits equal its own model run on the unpadded ids (so padding is masked out)."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
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
        assert d <= ATOL, f"sentence {i}: logits differ from the unpadded forward by {d:.2e} (padding attended?)"


@pytest.mark.check("FT-7", kind=KIND)
@pytest.mark.feature("hook:collate")
def test_dynamic_padding_width(impl, tiny_bert):
    """Collating inputs of 6 and 3 ids gives shape (2, 6), pad id in the padded slots and a 0/1 mask."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    sp = a.encode(["movie"])["special_ids"]
    six = [sp["cls"], 10, 11, 12, 13, sp["sep"]]
    three = [sp["cls"], 10, sp["sep"]]
    batch = a.collate([{"input_ids": six, "attention_mask": [1] * 6}, {"input_ids": three, "attention_mask": [1] * 3}])
    ids = np.asarray(batch["input_ids"])
    assert ids.shape == (2, 6), f"batch of lengths 6 and 3 has shape {ids.shape}, expected (2, 6)"
    assert (ids[1, 3:] == sp["pad"]).all(), f"padded slots hold {ids[1, 3:].tolist()}, not pad id {sp['pad']}"
    assert "attention_mask" in batch, "no attention mask in the batch"
    assert np.asarray(batch["attention_mask"]).tolist() == [[1] * 6, [1, 1, 1, 0, 0, 0]]


@pytest.mark.check("FT-7", kind=KIND)
def test_encoded_width_not_fixed(impl, tiny_bert):
    """Encoding two short texts never pads beyond the longer one (no fixed length such as 66)."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    enc = a.encode(["a movie", "a funny movie"])
    tok_lens = [
        unpadded_length(
            ids, None if enc["attention_mask"] is None else enc["attention_mask"][i], enc["special_ids"]["pad"]
        )
        for i, ids in enumerate(enc["input_ids"])
    ]
    widths = [len(ids) for ids in enc["input_ids"]]
    assert max(widths) <= max(tok_lens), f"encoded widths {widths} exceed the longest sequence {max(tok_lens)}"
