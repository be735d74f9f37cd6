"""Base of the mutants: the reference adapter with a different fine-tuner class or one method replaced."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from gru4rec_conformance.implementations.registry import declare
from gru4rec_conformance.reference.finetuner import ReferenceFineTuner

from ..reference import ReferenceAdapter


class MutantAdapter(ReferenceAdapter):
    """A reference adapter with one defect. A subclass declares ``name`` (which gives ``defect_row``; its module gives
    ``kind``), ``defect`` and, where the catching check must say what is broken in words, ``message`` (a substring
    of its failure message, asserted by the meta-test) with the class decorator :func:`mutant`; its body holds the
    defect (``tuner_cls``, or the adapter method it replaces). A mutant whose whole defect is its fine-tuner class
    is declared in one statement with :func:`tuned_mutant`."""

    name = "mutant_base"
    role = "mutant"
    defect_row = 0
    kind = ""
    defect = ""
    message: str | None = None

    def version(self) -> str:
        return f"reference with the defect of row {self.defect_row} (docs/finetuner.md): {self.defect}"


_M = TypeVar("_M", bound=type[MutantAdapter])


_NAME = re.compile(r"^mutant_ft(\d+)_([a-z0-9_]+)$")


def mutant(name: str, *, defect: str | None = None, message: str | None = None) -> Callable[[_M], _M]:
    """Class decorator declaring a fine-tuner mutant in one line and registering it
    (:func:`~gru4rec_conformance.implementations.registry.declare`); returns the class itself.

    ``name`` is ``mutant_ft<N>_<what>``: N is its ``defect_row`` (the check FT-N must catch it); its ``kind`` is
    the name of its module (one module per kind); ``defect`` says what is broken in words, ``message`` (optional)
    is a substring of the catching check's failure message. ``defect``/``message`` left out keep the base class's
    value (a mutant derived from another).

    Raises:
        ValueError: a name that does not follow ``mutant_ft<N>_<what>``.
    """
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f"fine-tuner mutant name {name!r}: expected mutant_ft<defect row>_<what>")
    row = int(match.group(1))

    def deco(cls: _M) -> _M:
        kind = cls.__module__.rsplit(".", 1)[-1]
        return declare(name, defect_row=row, kind=kind, defect=defect, message=message)(cls)

    return deco


def tuned_mutant(
    tuner_cls: type[ReferenceFineTuner],
    name: str,
    *,
    base: type[MutantAdapter] = MutantAdapter,
    defect: str | None = None,
    message: str | None = None,
) -> type[MutantAdapter]:
    """A mutant whose whole defect is its fine-tuner class, declared in one statement: a subclass of ``base``
    with ``tuner_cls`` set, named ``Mutant<What>`` after ``mutant_ft<N>_<what>`` (``mutant_ft6_drop_long_examples``
    → ``MutantDropLongExamples``), placed in ``tuner_cls``'s module (which gives its ``kind``) and declared with
    :func:`mutant` (``name``, ``defect``, ``message`` as there). Returns the registered class.

    Raises:
        ValueError: a name that does not follow ``mutant_ft<N>_<what>``.
    """
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f"fine-tuner mutant name {name!r}: expected mutant_ft<defect row>_<what>")
    cls_name = "Mutant" + "".join(word.capitalize() for word in match.group(2).split("_"))
    body = {"tuner_cls": tuner_cls, "__module__": tuner_cls.__module__, "__qualname__": cls_name}
    return mutant(name, defect=defect, message=message)(type(cls_name, (base,), body))
