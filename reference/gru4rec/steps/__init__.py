"""Training steps of the reference GRU4Rec behind one interface (:class:`TrainingStep`), and their selection.

- :class:`StandardStep` (``standard.py``): shapes follow the shrinking batch; built from ``GRU4Rec``'s seams.
- :class:`StaticStep` (``static.py``): fixed shapes, captured as a CUDA graph on CUDA; identical results (bit for
  bit on CPU while all lanes are active).

``GRU4Rec.fit`` asks :func:`select_step` for the step of its ``step_impl``. The steps read the model only through
:class:`StepHost`; nothing here imports ``core``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..records import StepTrace
from .base import EpochTotals, StepHost, TrainingStep
from .standard import StandardStep
from .static import StaticStep, unsupported_reason

__all__ = [
    "STEP_IMPLS",
    "EpochTotals",
    "StandardStep",
    "StaticStep",
    "StepHost",
    "TrainingStep",
    "select_step",
    "unsupported_reason",
]

#: values of ``GRU4Rec(step_impl=...)``
STEP_IMPLS = ("auto", "standard", "static")


def select_step(
    host: StepHost, step_impl: str, trace: Callable[[StepTrace], None] | None = None, use_cuda_graph: bool | None = None
) -> TrainingStep:
    """The training step for one ``fit`` of the built ``host``.

    Args:
        host: a built ``GRU4Rec``.
        step_impl: ``'standard'``; ``'static'`` (the fixed-shape step, required); ``'auto'`` (static on CUDA when
            :func:`unsupported_reason` has no objection, standard otherwise).
        trace: per-step callable; a trace always uses the standard step.
        use_cuda_graph: passed to :class:`StaticStep` (None = capture on CUDA).

    Returns the step; its ``info`` says which step runs and why.

    Raises ValueError for an unknown ``step_impl``, or when ``step_impl='static'`` cannot run this model (naming
    the reason) or ``use_cuda_graph`` is requested off CUDA.
    """
    if step_impl not in STEP_IMPLS:
        raise ValueError(f"parameter 'step_impl': one of {', '.join(STEP_IMPLS)}, got {step_impl!r}")
    if step_impl == "standard":
        return StandardStep(host, trace, reason="step_impl='standard'")
    if trace is not None:
        return StandardStep(host, trace, reason="a per-step trace needs the standard step")
    if step_impl == "auto":
        if host.device.type != "cuda":
            return StandardStep(host, reason="step_impl='auto' on a non-CUDA device")
        why = unsupported_reason(host)
        if why is not None:
            return StandardStep(host, reason=why)
    return StaticStep(host, use_cuda_graph=use_cuda_graph)
