"""Tokenization checks (FT-1, FT-2 and FT-5, docs/checks.md): special tokens exactly once and added by the
tokenizer, no marker text, truncation that keeps the final SEP."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from gru4rec_conformance.conformance.finetuner.support import fresh, unpadded_length
from gru4rec_conformance.conformance.finetuner.tiny_models import FAMILIES

KIND = "tokenization"


def _built(impl, spec):
    a = fresh(impl)
    a.build(0, model_spec=spec, num_labels=5)
    return a


@pytest.mark.check("FT-1", kind=KIND)
@pytest.mark.parametrize("family", FAMILIES)
def test_special_tokens_exactly_once(impl, family, tiny_models, slices):
    """Each of 20 sentences has one CLS/<s> id at position 0, one SEP/</s> at the last real position, and no
    special id in between."""
    impl.require(f"model:{family}")
    a = fresh(impl)
    a.build(0, model_spec=tiny_models[family], num_labels=5)
    texts = list(slices.val.texts[:20])
    enc = a.encode(texts)
    sp = enc["special_ids"]
    specials = {v for v in (sp["cls"], sp["sep"], sp["pad"], sp.get("bos"), sp.get("eos")) if v is not None}
    for i, ids in enumerate(enc["input_ids"]):
        mask = enc["attention_mask"][i] if enc["attention_mask"] is not None else None
        n = unpadded_length(ids, mask, sp["pad"])
        real = list(ids[:n])
        assert real[0] == sp["cls"], f"sentence {i}: first id {real[0]} is not the CLS id {sp['cls']}: {real[:4]}"
        assert real[-1] == sp["sep"], f"sentence {i}: last real id {real[-1]} is not the SEP id {sp['sep']}"
        inner = [t for t in real[1:-1] if t in specials]
        assert not inner, f"sentence {i}: special ids {inner} inside the sequence {real[:6]}...{real[-4:]}"


@pytest.mark.check("FT-2", kind=KIND)
@pytest.mark.parametrize("family", FAMILIES)
def test_no_marker_text(impl, family, tiny_models, slices):
    """Decoding without special tokens gives back the text as the model's tokenizer reads it (whitespace
    aside), never '[CLS]'/'[SEP]' text, and a one-word input is 1 + its word pieces + 1 ids long."""
    impl.require(f"model:{family}")
    a = fresh(impl)
    spec = tiny_models[family]
    a.build(0, model_spec=spec, num_labels=5)
    tok = AutoTokenizer.from_pretrained(spec.path, local_files_only=True)
    texts = list(slices.val.texts[:10])
    enc = a.encode(texts)
    sp = enc["special_ids"]
    for i, ids in enumerate(enc["input_ids"]):
        mask = enc["attention_mask"][i] if enc["attention_mask"] is not None else None
        real = ids[: unpadded_length(ids, mask, sp["pad"])]
        decoded = tok.decode(real, skip_special_tokens=True)
        assert "[CLS]" not in decoded and "[SEP]" not in decoded, f"marker text in input {i}: {decoded!r}"
        want = tok.decode(tok(texts[i], add_special_tokens=False)["input_ids"], skip_special_tokens=True)
        assert "".join(decoded.split()) == "".join(want.split()), (
            f"sentence {i} does not round-trip:\n  in:  {want!r}\n  out: {decoded!r}"
        )
    word = "movie"
    one = a.encode([word])
    mask = one["attention_mask"][0] if one["attention_mask"] is not None else None
    n = unpadded_length(one["input_ids"][0], mask, sp["pad"])
    pieces = tok.tokenize(word)
    assert n == len(pieces) + 2, f"one-word input {word!r}: {n} ids, expected 1 + {len(pieces)} pieces + 1"


@pytest.mark.check("FT-5", kind=KIND)
def test_truncation_keeps_sep(impl, tiny_bert, slices):
    """A 200-word sentence encoded with max length L is exactly L ids long and ends with the SEP id."""
    a = _built(impl, tiny_bert)
    words = " ".join(slices.train.texts).split()
    long_text = " ".join(words[:200])
    if impl.supports("encode_max_length"):
        enc = a.encode([long_text], max_length=32)
        L = 32
    else:
        enc = a.encode([long_text])
        L = enc["max_length"]
        assert L, f"{a.name} neither honours max_length nor reports its fixed length"
    sp = enc["special_ids"]
    ids = enc["input_ids"][0]
    mask = enc["attention_mask"][0] if enc["attention_mask"] is not None else None
    n = unpadded_length(ids, mask, sp["pad"])
    assert n == L, f"truncated length {n}, expected max length {L}"
    assert ids[n - 1] == sp["sep"], f"truncated sequence ends with id {ids[n - 1]}, not SEP {sp['sep']}"
