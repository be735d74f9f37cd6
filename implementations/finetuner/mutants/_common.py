"""Base of the mutants: the reference adapter with a different fine-tuner class or one method replaced."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gru4rec_conformance.implementations.registry import declare

from ..reference import ReferenceAdapter


class MutantAdapter(ReferenceAdapter):
    """A reference adapter with one defect. A subclass declares ``name``, ``defect_row``, ``kind``, ``defect`` and,
    where the catching check must say what is broken in words, ``message`` (a substring of its failure message,
    asserted by the meta-test) with the class decorator :func:`mutant`; its body holds the defect (``tuner_cls``, or
    the adapter method it replaces)."""

    name = "mutant_base"
    role = "mutant"
    defect_row = 0
    kind = ""
    defect = ""
    message: str | None = None

    def version(self) -> str:
        return f"reference with the defect of row {self.defect_row} (docs/finetuner.md): {self.defect}"


_M = TypeVar("_M", bound=type[MutantAdapter])


def mutant(
    name: str,
    *,
    defect_row: int | None = None,
    kind: str | None = None,
    defect: str | None = None,
    message: str | None = None,
) -> Callable[[_M], _M]:
    """Class decorator declaring a fine-tuner mutant in one line (``name``, the defect row N of the check FT-N that
    catches it, its ``kind``, the ``defect`` in words, the optional ``message``; those left out keep the base class's
    value, e.g. a mutant derived from another) and registering it
    (:func:`~gru4rec_conformance.implementations.registry.declare`); returns the class itself."""
    return declare(name, defect_row=defect_row, kind=kind, defect=defect, message=message)
