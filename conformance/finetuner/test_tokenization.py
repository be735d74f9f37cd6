"""Tokenization checks (FT-1, FT-2 and FT-5, docs/checks.md): special tokens exactly once and added by the
tokenizer, no marker text, truncation that keeps the final SEP and the word pieces the model's tokenizer keeps."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from gru4rec_conformance.conformance._harness import diagnosis
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


def _encode_long(impl, a, slices):
    """Encode a 200-word sentence from the train split: (text, encoding, max length L). L is 32 when the
    implementation takes ``max_length``, else the fixed length it reports (the check fails when it reports none)."""
    long_text = " ".join(" ".join(slices.train.texts).split()[:200])
    if impl.supports("encode_max_length"):
        return long_text, a.encode([long_text], max_length=32), 32
    enc = a.encode([long_text])
    L = enc["max_length"]
    assert L, f"{a.name} neither honours max_length nor reports its fixed length"
    return long_text, enc, L


@pytest.mark.check("FT-5", kind=KIND)
def test_truncation_keeps_sep(impl, tiny_bert, slices):
    """A 200-word sentence encoded with max length L is exactly L ids long and ends with the SEP id."""
    a = _built(impl, tiny_bert)
    _, enc, L = _encode_long(impl, a, slices)
    sp = enc["special_ids"]
    ids = enc["input_ids"][0]
    mask = enc["attention_mask"][0] if enc["attention_mask"] is not None else None
    n = unpadded_length(ids, mask, sp["pad"])
    assert n == L, f"truncated length {n}, expected max length {L}"
    assert ids[n - 1] == sp["sep"], f"truncated sequence ends with id {ids[n - 1]}, not SEP {sp['sep']}"


def _kept_side(kept: list[int], pieces: list[int]) -> str | None:
    """'first' when ``kept`` is a prefix of ``pieces``, 'last' when a suffix (the first that holds when both do),
    None when neither."""
    n = len(kept)
    if kept == pieces[:n]:
        return "first"
    if n and kept == pieces[-n:]:
        return "last"
    return None


#: FT-5's causes of truncated ids that are not the model's tokenizer's own truncation.
WRONG_SIDE = diagnosis.Candidate(
    "truncated on the wrong side",
    "the tokenizer's own truncation with the other truncation side: confirmed when the ids equal it",
)
CUT_AFTER_SPECIALS = diagnosis.Candidate(
    "cut after the special tokens were added, so the final special token is lost",
    "the untruncated encoding with special tokens: confirmed when the ids are its first ones, ruled out when they "
    "are not or are the other side's truncation (which keeps the final special token)",
)
OTHER_PIECES = diagnosis.Candidate(
    "another number of pieces, pieces without the special tokens, or other pieces, the length and the final SEP "
    "being judged by FT-5 test_truncation_keeps_sep",
    "the ids without special ids against the text's word pieces: stays not decided; the evidence says whether "
    "they are its first or last pieces, their number and the last id",
)
TRUNCATION_TABLE = (WRONG_SIDE, CUT_AFTER_SPECIALS, OTHER_PIECES)


@pytest.mark.check("FT-5", kind=KIND)
@pytest.mark.parametrize("family", FAMILIES)
@diagnosis.causes(*TRUNCATION_TABLE)
def test_truncation_keeps_first_pieces(impl, family, tiny_models, slices):
    """A 200-word sentence encoded with max length L is the model's tokenizer's own truncation: its special
    tokens around the first L - 2 word pieces of the text (the last ones when that tokenizer truncates on the
    left), not only L ids ending with SEP."""
    impl.require(f"model:{family}")
    spec = tiny_models[family]
    a = _built(impl, spec)
    tok = AutoTokenizer.from_pretrained(spec.path, local_files_only=True)
    long_text, enc, L = _encode_long(impl, a, slices)
    ids = enc["input_ids"][0]
    mask = enc["attention_mask"][0] if enc["attention_mask"] is not None else None
    real = list(ids[: unpadded_length(ids, mask, enc["special_ids"]["pad"])])
    pieces = tok(long_text, add_special_tokens=False)["input_ids"]
    side = tok.truncation_side
    want = list(tok(long_text, add_special_tokens=True, truncation=True, max_length=L)["input_ids"])
    keep = L - (len(tok("a")["input_ids"]) - len(tok("a", add_special_tokens=False)["input_ids"]))
    assert len(pieces) > keep, f"setup: the text has {len(pieces)} word pieces, not more than {keep}"
    if real == want:
        return
    tok.truncation_side = "left" if side == "right" else "right"  # this check's own copy of the tokenizer
    other = list(tok(long_text, add_special_tokens=True, truncation=True, max_length=L)["input_ids"])
    full = list(tok(long_text, add_special_tokens=True)["input_ids"])
    wanted = "first" if side == "right" else "last"

    def wrong_side() -> diagnosis.Finding:
        kept = "last" if wanted == "first" else "first"
        if real == other:
            return diagnosis.confirmed(f"the ids keep the {kept} {keep} pieces")
        return diagnosis.ruled_out(f"the ids are not the {kept} {keep} pieces with the special tokens either")

    def cut_after() -> diagnosis.Finding:
        if real == other:
            return diagnosis.ruled_out("the ids are the other side's truncation, which keeps the final special token")
        if real == full[: len(real)]:
            return diagnosis.confirmed(f"the ids are the first {len(real)} of the untruncated encoding")
        return diagnosis.ruled_out(f"the ids are not the first {len(real)} of the untruncated encoding")

    def other_pieces() -> diagnosis.Finding:
        specials = {v for v in enc["special_ids"].values() if v is not None}
        kept_ids = [t for t in real if t not in specials]
        found = _kept_side(kept_ids, pieces)
        what = (
            f"the {found} {len(kept_ids)} pieces"
            if found
            else f"{len(kept_ids)} pieces that are neither the first nor the last"
        )
        return diagnosis.undecided(f"the ids keep {what}, length {len(real)}, ending with id {real[-1]}")

    diagnosis.fail(
        f"{family}: the truncated ids are not the tokenizer's own truncation to L={L} (it truncates on the {side} "
        f"and keeps the {wanted} {keep} word pieces): got {real[:4]}...{real[-4:]}, expected {want[:4]}...{want[-4:]}",
        [WRONG_SIDE.cause(wrong_side), CUT_AFTER_SPECIALS.cause(cut_after), OTHER_PIECES.cause(other_pieces)],
    )
