"""Padding and masking mutants (caught by FT-4 and FT-7, docs/checks.md; the pad-id mutants only on a family
whose pad id is not 0, RoBERTa)."""

from __future__ import annotations

from gru4rec_conformance.reference.finetuner import ReferenceFineTuner

from ._common import tuned_mutant


class _NoMask(ReferenceFineTuner):
    def collate(self, features):
        batch = super().collate(features)
        batch.pop("attention_mask", None)  # the model attends to the padding
        return batch


MutantNoAttentionMask = tuned_mutant(_NoMask, "mutant_ft4_no_attention_mask",
                                     defect="no attention mask passed to the model")  # fmt: skip


class _FixedLength(ReferenceFineTuner):
    fixed_length = 66

    def collate(self, features):
        from transformers import DataCollatorWithPadding

        collator = DataCollatorWithPadding(
            self.tokenizer, padding="max_length", max_length=self.fixed_length, return_tensors="pt"
        )
        return dict(collator(features))


MutantFixedLengthPadding = tuned_mutant(_FixedLength, "mutant_ft7_fixed_length_padding",
                                        defect="every batch padded to a fixed length of 66 instead of the batch's longest sequence")  # fmt: skip


class _PadWithZero(ReferenceFineTuner):
    def collate(self, features):
        batch = super().collate(features)
        batch["input_ids"][batch["attention_mask"] == 0] = 0  # 0 is [PAD] for BERT but <s> for RoBERTa
        return batch


MutantPadWithZero = tuned_mutant(_PadWithZero, "mutant_ft7_pad_with_zero",
                                 defect="batches padded with id 0 whatever the tokenizer's pad id (RoBERTa's is 1)")  # fmt: skip


class _MaskPaddedWithPadId(ReferenceFineTuner):
    def collate(self, features):
        batch = super().collate(features)
        mask = batch["attention_mask"]
        mask[mask == 0] = self.tokenizer.pad_token_id  # the mask padded like the ids: 1 (attend) for RoBERTa
        return batch


MutantMaskPaddedWithPadId = tuned_mutant(_MaskPaddedWithPadId, "mutant_ft4_mask_padded_with_pad_id",
                                         defect="attention mask padded with the pad id instead of 0 (RoBERTa attends to its padding)")  # fmt: skip


MUTANTS = [MutantNoAttentionMask, MutantFixedLengthPadding, MutantPadWithZero, MutantMaskPaddedWithPadId]
