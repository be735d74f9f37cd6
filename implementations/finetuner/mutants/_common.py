"""Base of the mutants: the reference adapter with a different fine-tuner class or one method replaced."""

from __future__ import annotations

from ..reference import ReferenceAdapter


class MutantAdapter(ReferenceAdapter):
    """A reference adapter with one defect. Subclasses set ``name``, ``defect_row``, ``kind``, ``defect``."""

    name = "mutant_base"
    defect_row = 0
    kind = ""
    defect = ""

    def capabilities(self) -> dict:
        caps = super().capabilities()
        caps["notes"] = f"mutant of spec §3 row {self.defect_row}: {self.defect}"
        return caps
