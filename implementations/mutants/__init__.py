"""Mutants: the reference GRU4Rec with exactly one defect switched on (role "mutant").

Each mutant is a small :class:`MutantAdapter` subclass whose ``gru_class`` is a ``reference.gru4rec.GRU4Rec``
subclass overriding one extension point (reference/gru4rec/README.md, "Extension points"). It is modelled on a
real defect of the catalogue (its id in ``defect``; docs/checks.md) and declares the checks that must catch it, in
one line, with the class decorator :func:`mutant` (which also registers it); the class's docstring says what is
wrong::

    @mutant("mutant:adam", defect="TF-4, KG-2", kind="K5", caught_by=("OP-2",))
    class AdamOptimizer(MutantAdapter):
        @classmethod
        def gru_overrides(cls):
            ...

The meta-tests (tests/meta/) run the conformance suite on every mutant and assert that

- every check in ``caught_by`` fails (the check bites),
- no check outside ``caught_by`` and ``also_fails`` fails (the checks of other kinds stay quiet).

Select one with ``pytest conformance/gru4rec --impl mutant:<name>``; ``--impl all`` never selects mutants.
Modules: one per kind (``k1_state_reset.py`` ...); the torch-level pieces are built lazily inside
``gru_class`` properties so that listing the registry does not import torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast

from gru4rec_conformance.implementations.reference import ReferenceAdapter
from gru4rec_conformance.implementations.registry import declare

__all__ = ["MutantAdapter", "batch_evaluator", "mutant", "mutant_classes"]


class MutantAdapter(ReferenceAdapter):
    """Base of the mutants: the reference adapter with a one-defect ``GRU4Rec`` subclass.

    Class attributes (read by the meta-tests and printed in reports; a mutant declares them with :func:`mutant`):
        defect: catalogue id(s) of the defect the mutant models (listed in docs/checks.md), e.g. ``"GP-1"``.
        kind: the defect kind (``"K1"`` .. ``"K11"``).
        caught_by: check ids that must fail on this mutant.
        also_fails: check ids of other kinds that may fail as a consequence (each justified in ``collateral``).
        collateral: one line saying why ``also_fails`` fail.
        needs_device: ``"cuda"`` when the defect only shows on a GPU (the meta-tests skip it elsewhere).
    """

    role = "mutant"
    # No published numbers for a mutant. Ignore: ReferenceAdapter's unannotated dict narrows the base's Mapping | None.
    study = None  # type: ignore[assignment]
    defect: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    caught_by: ClassVar[tuple[str, ...]] = ()
    also_fails: ClassVar[tuple[str, ...]] = ()
    collateral: ClassVar[str] = ""
    needs_device: ClassVar[str | None] = None
    # Annotation only: each mutant class gets its own entry in its __dict__ (see make_gru_class).
    _gru_cls_cache: ClassVar[type]

    def _gru_cls(self) -> Any:
        return self.make_gru_class()

    @classmethod
    def make_gru_class(cls) -> Any:
        """The ``GRU4Rec`` subclass with the defect (built on first use; cached per mutant class)."""
        cached = cls.__dict__.get("_gru_cls_cache")
        if cached is None:
            from gru4rec_conformance.reference.gru4rec import GRU4Rec

            attrs = cls.gru_overrides()
            cached = type(f"{cls.__name__}GRU4Rec", (GRU4Rec,), {"__module__": cls.__module__, **attrs})
            cls._gru_cls_cache = cached
        return cached

    @classmethod
    def gru_overrides(cls) -> dict[str, Any]:
        """Class attributes of the defective ``GRU4Rec`` subclass (component classes or methods)."""
        raise NotImplementedError(f"{cls.__name__} must define gru_overrides()")


_M = TypeVar("_M", bound=type[MutantAdapter])


def mutant(
    name: str,
    *,
    defect: str | None = None,
    kind: str | None = None,
    caught_by: tuple[str, ...] | None = None,
    also_fails: tuple[str, ...] | None = None,
    collateral: str | None = None,
    needs_device: str | None = None,
    description: str | None = None,
) -> Callable[[_M], _M]:
    """Class decorator declaring a mutant in one line: sets ``name`` and the :class:`MutantAdapter` attributes
    given (those left out keep the base class's value, e.g. a mutant derived from another), then registers the
    class (:func:`~gru4rec_conformance.implementations.registry.declare`); returns the class itself."""
    return declare(name, defect=defect, kind=kind, caught_by=caught_by, also_fails=also_fails,
                   collateral=collateral, needs_device=needs_device, description=description)  # fmt: skip


def batch_evaluator(metrics: Any) -> Any:
    """A ``SessionParallelEvaluator`` subclass whose ``evaluate`` (the reference's signature and argument checks)
    returns ``metrics(evaluator, batches, cutoffs, mode)``: ``batches`` the evaluator's own
    ``(sessions, positions, targets, scores)`` minibatches of the test frame, ``cutoffs`` the checked list. For
    the mutants whose defect sits in how the minibatches' ranks become metrics (imports torch)."""
    from gru4rec_conformance.reference.gru4rec import SessionParallelEvaluator
    from gru4rec_conformance.reference.gru4rec.evaluation import check_cutoffs, check_mode

    class Evaluator(SessionParallelEvaluator):
        def evaluate(
            self,
            test_df,
            cutoffs=(1, 5, 10, 20),
            batch_size=512,
            mode="conservative",
            item_key="ItemId",
            session_key="SessionId",
            time_key="Time",
        ):
            check_mode(mode)
            cutoffs = check_cutoffs(cutoffs)
            return metrics(self, self.batches(test_df, batch_size, item_key, session_key, time_key), cutoffs, mode)

    return Evaluator


def mutant_classes() -> list[type[MutantAdapter]]:
    """Every registered mutant class, ordered by kind then name (imports the mutant modules).

    The reliability mutants (``kind = "reliability"``: ``mutant:crash``, ``mutant:hang``, ``mutant:leak`` in
    ``reliability.py``) are left out: they test the harness's worker isolation (tests/reliability), not the checks.
    """
    from gru4rec_conformance.implementations.registry import default_registry

    specs = [
        s
        for s in default_registry().specs("gru4rec")
        if s.role == "mutant" and getattr(s.cls, "kind", "") != "reliability"
    ]
    classes = [cast(type[MutantAdapter], s.cls) for s in specs]  # every gru4rec "mutant" is a MutantAdapter
    return sorted(classes, key=lambda c: (int(c.kind[1:]) if c.kind[1:].isdigit() else 99, c.name))
