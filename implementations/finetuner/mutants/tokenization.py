"""Tokenization mutants (caught by FT-1, FT-2 and FT-5, docs/checks.md)."""

from __future__ import annotations

from gru4rec_conformance.reference.finetuner import ReferenceFineTuner
from gru4rec_conformance.reference.finetuner.trainer import Encoded, encode, resolve_max_length, special_ids

from ._common import MutantAdapter, mutant, tuned_mutant


def _length(tuner: ReferenceFineTuner, max_length: int | None) -> int:
    """The encode length L of ``tuner``: ``max_length``, else its run's configured one, resolved for its tokenizer."""
    return resolve_max_length(tuner.tokenizer, max_length if max_length is not None else tuner.config.max_length)


def _encoded(tok, ids: list, mask: list, full: list, L: int) -> Encoded:
    """``ids``/``mask`` as the tuner feeds them, the texts' untruncated ids ``full`` (counted when longer than L)."""
    return Encoded(ids, mask, None, sum(len(x) > L for x in full), L, special_ids(tok))


class _HandMarkers(ReferenceFineTuner):
    def encode(self, texts, max_length=None):
        tok = self.tokenizer
        marked = [f"{tok.cls_token or tok.bos_token} {t} {tok.sep_token or tok.eos_token}" for t in texts]
        return encode(tok, marked, max_length if max_length is not None else self.config.max_length)


MutantHandMarkers = tuned_mutant(_HandMarkers, "mutant_ft1_hand_markers",
                                 defect="special tokens written into the text and added again by the tokenizer ([CLS] [CLS] ... [SEP] [SEP])")  # fmt: skip


class _LiteralBertMarkers(ReferenceFineTuner):
    def encode(self, texts, max_length=None):
        tok, L = self.tokenizer, _length(self, max_length)
        marked = [f"[CLS] {t} [SEP]" for t in texts]
        full = tok(marked, add_special_tokens=False)["input_ids"]
        enc = tok(marked, add_special_tokens=False, truncation=True, max_length=L)
        return _encoded(tok, [list(x) for x in enc["input_ids"]], [list(x) for x in enc["attention_mask"]], full, L)


MutantLiteralBertMarkers = tuned_mutant(_LiteralBertMarkers, "mutant_ft2_literal_bert_markers",
                                        defect="BERT-style '[CLS] ... [SEP]' text for every model, tokenizer specials off (junk for RoBERTa)")  # fmt: skip


class _RpadTruncation(ReferenceFineTuner):
    def encode(self, texts, max_length=None):
        tok, L = self.tokenizer, _length(self, max_length)
        full = tok(list(texts), add_special_tokens=True)["input_ids"]
        ids = [list(x) if len(x) <= L else list(x[: L - 1]) for x in full]  # rpad: cut to n - 1, SEP lost
        return _encoded(tok, ids, [[1] * len(x) for x in ids], full, L)


MutantRpadTruncation = tuned_mutant(_RpadTruncation, "mutant_ft5_rpad_truncation",
                                    defect="sequences longer than L cut to their first L - 1 ids, dropping the final SEP")  # fmt: skip


class _LeftTruncation(ReferenceFineTuner):
    def __init__(self, spec, num_labels=5, *, device="cpu"):
        super().__init__(spec, num_labels, device=device)
        import copy

        self.tokenizer = copy.deepcopy(self.tokenizer)  # an own copy: the spec's tokenizer may be shared
        self.tokenizer.truncation_side = "left"


@mutant("mutant_ft5_left_truncation",
        defect="sequences longer than L keep their last L - 2 word pieces instead of the first (truncated from the "
               "left)",
        message="isolated: truncated on the wrong side")  # fmt: skip
class MutantLeftTruncation(MutantAdapter):
    """Long inputs are truncated from the left (``truncation_side="left"``): the encoded sequence is L ids long,
    starts with CLS and ends with SEP, as the model's tokenizer would give it, but keeps the last word pieces of
    the text instead of the first ones. Resembles a correct truncation in every length and special-token check."""

    tuner_cls = _LeftTruncation


MUTANTS = [MutantHandMarkers, MutantLiteralBertMarkers, MutantRpadTruncation, MutantLeftTruncation]
