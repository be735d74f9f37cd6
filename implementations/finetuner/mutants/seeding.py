"""Seeding mutant (caught by FT-14, docs/checks.md)."""

from __future__ import annotations

import os

import torch

from gru4rec_conformance.reference.finetuner import ReferenceFineTuner

from ._common import tuned_mutant


class _NoSeed(ReferenceFineTuner):
    def _seed_build(self, seed):
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))  # set_seed commented out: any state

    def _data_generator(self, seed):
        return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


MutantNoSeed = tuned_mutant(_NoSeed, "mutant_ft14_no_seed",
                            defect="no seed set: initialisation and data order vary from run to run")  # fmt: skip


MUTANTS = [MutantNoSeed]
