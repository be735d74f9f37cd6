"""Mutants: the reference fine-tuner with exactly one defect switched on (defect row N is caught by check FT-N,
docs/checks.md), one class per defect row, grouped in one module per check kind. The meta-test
(tests/finetuner/test_meta_mutants.py) proves that a check of each mutant's defect row catches it and passes on the
reference (default run, slow checks left out), and, in its slow variant, the same over every check of the mutant's
kind.

``MUTANTS`` maps adapter name -> class; every class has ``defect_row`` (N of check FT-N) and ``kind``, which the
declaring decorator (``_common.mutant``) takes from the name ``mutant_ft<N>_<what>`` and from the module's name.
"""

from __future__ import annotations

from . import (
    data_integrity,
    early_stopping,
    offline,
    padding_masking,
    reporting,
    seeding,
    selection_leakage,
    tokenization,
)

MUTANTS: dict[str, type] = {}
for _module in (
    tokenization,
    padding_masking,
    data_integrity,
    selection_leakage,
    early_stopping,
    seeding,
    reporting,
    offline,
):
    for _cls in _module.MUTANTS:
        MUTANTS[_cls.name] = _cls

__all__ = ["MUTANTS"]
