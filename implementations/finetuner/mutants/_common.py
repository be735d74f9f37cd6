"""Base of the mutants: the reference adapter with a different fine-tuner class or one method replaced."""

from __future__ import annotations

from ..reference import ReferenceAdapter


class MutantAdapter(ReferenceAdapter):
    """A reference adapter with one defect. Subclasses set ``name``, ``defect_row``, ``kind``, ``defect`` and, where
    the catching check must say what is broken in words, ``message`` (a substring of its failure message, asserted
    by the meta-test)."""

    name = "mutant_base"
    role = "mutant"
    defect_row = 0
    kind = ""
    defect = ""
    message: str | None = None

    def version(self) -> str:
        return f"reference with the defect of row {self.defect_row} (docs/finetuner.md): {self.defect}"
