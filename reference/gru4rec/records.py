"""Result records shared by the reference GRU4Rec and the adapter protocol: one vocabulary for both.

``GRU4Rec.fit`` returns a :class:`FitReport` and passes a :class:`StepTrace` per step to ``fit(trace=...)``;
every adapter's ``fit`` returns the same :class:`FitReport` (``implementations.base`` re-exports these classes), so
a reference report and an implementation's report have the same fields with the same meaning. Fields that only the
reference fills (an adapter may too) default to ``None``.

This module imports nothing but the standard library at run time: ``implementations.base`` imports it in every
adapter process (a TensorFlow worker has no torch), and the package ``__init__`` imports its components lazily.
The protocol layer may depend on the reference, never the reverse.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["ExchangeRecord", "FitReport", "StepResult", "StepTrace"]


class ExchangeRecord:
    """Base of dataclasses that may cross the worker boundary (rebuilt field by field, never unpickled).

    :class:`FitReport`, :class:`StepTrace` and a family's own result records (e.g. the fine-tuner's run record)
    subclass it and are decorated with ``@dataclasses.dataclass``; fields must be values the codec accepts
    (conformance/_harness/codec.py), and the codec rebuilds only classes of the modules it allows.
    """

    __exchange__: ClassVar[bool] = True


@dataclasses.dataclass
class StepTrace(ExchangeRecord):
    """One training step (optimizer update), as ``GRU4Rec.fit(trace=...)`` and the adapters' ``trace`` hook report
    it (checks SR-4, EB-4, SO-2, SO-3, OP-3).

    "Lanes" below is the length of the per-lane arrays: either ``n_active`` (only the active lanes, in lane order:
    the reference) or the batch size B (inactive lanes then hold ``-1`` in ``session_ids`` and ``positions``).

    Attributes:
        session_ids: (lanes,) int64, original session id held by each lane (-1: inactive lane).
        positions: (lanes,) int64, 0-based position of the lane's *input* event within its session (0 = the first
            event, so the lane's hidden state must be zero); -1 for an inactive lane.
        h_in_norms: (lanes,) float64, L2 norm (unitless) of the lane's hidden state entering the step, after the
            reset of new sessions. The reference concatenates all GRU layers; an adapter that sees only the first
            layer's state reports that one (for one layer the two agree; SR-4 only asks which lanes are zero).
        n_active: int, number of active lanes b (≤ B) at this step.
        negative_ids: (S,) item ids of the extra negatives shared by all lanes (empty when n_sample = 0; the
            reference gives the training ids' dtype, int64 for the suite's data), or None when the implementation
            does not sample.
        learning_rate: float, effective learning rate applied by this update (None: unknown).
        epoch: int, 0-based epoch (None: not reported; the reference fills it).
        step: int, 0-based step index within the epoch (None: not reported; the reference fills it).
        score_shape: tuple[int, int], shape of the training score matrix fed to the loss, (b, b + S) for shared
            negatives (None: not reported; the reference fills it).
        output_rows_touched: int, rows of the output weights ``Wy`` with a non-zero gradient at this step (None:
            not reported; the reference fills it).
    """

    session_ids: np.ndarray
    positions: np.ndarray
    h_in_norms: np.ndarray
    n_active: int
    negative_ids: np.ndarray | None = None
    learning_rate: float | None = None
    epoch: int | None = None
    step: int | None = None
    score_shape: tuple[int, ...] | None = None
    output_rows_touched: int | None = None

    @property
    def h_in_norm(self) -> np.ndarray:
        """Deprecated name of :attr:`h_in_norms` (the reference's old ``StepTrace`` field); warns."""
        warnings.warn("StepTrace.h_in_norm is deprecated; use StepTrace.h_in_norms", DeprecationWarning, stacklevel=2)
        return self.h_in_norms


@dataclasses.dataclass
class FitReport(ExchangeRecord):
    """What one ``fit`` did, one entry per epoch in each list (docs/implementations.md, 'Adapter
    rules').

    Attributes:
        epoch_losses: list[float], mean training loss per trained example in each epoch (unitless; nats for
            cross-entropy): Σ over steps and lanes of the per-lane loss / ``n_events_trained``. (The official port
            prints the mean of the per-step losses Σ_lanes/B, which differs only through the shrinking tail of an
            epoch.) Adapters report what the implementation computes, per example where they can.
        n_steps: list[int], optimizer updates in each epoch.
        n_events_trained: list[int], input → target pairs trained in each epoch (Σ over steps of the active lanes).
        epoch_seconds: list[float], wall-clock seconds of each epoch (informational, never asserted on).
        trace: list[StepTrace] of every step when tracing was enabled (an adapter's ``trace(True)``), else None
            (the reference's ``fit(trace=...)`` passes its records to the callable instead).

    Raises:
        ValueError: naming the fields when the per-epoch lists given to the constructor differ in length.
    """

    epoch_losses: list[float] = dataclasses.field(default_factory=list)
    n_steps: list[int] = dataclasses.field(default_factory=list)
    n_events_trained: list[int] = dataclasses.field(default_factory=list)
    epoch_seconds: list[float] = dataclasses.field(default_factory=list)
    trace: list[StepTrace] | None = None

    def __post_init__(self) -> None:
        lengths = {
            "epoch_losses": len(self.epoch_losses),
            "n_steps": len(self.n_steps),
            "n_events_trained": len(self.n_events_trained),
            "epoch_seconds": len(self.epoch_seconds),
        }
        if len(set(lengths.values())) > 1:
            raise ValueError(f"FitReport: per-epoch lists differ in length: {lengths}")

    @property
    def n_epochs(self) -> int:
        """Number of epochs reported (length of the per-epoch lists)."""
        return len(self.epoch_losses)

    def to_dict(self) -> dict[str, list[Any]]:
        """The per-epoch lists as a JSON-able dict (copies; the trace is left out)."""
        return {
            "epoch_losses": list(self.epoch_losses),
            "n_steps": list(self.n_steps),
            "n_events_trained": list(self.n_events_trained),
            "epoch_seconds": list(self.epoch_seconds),
        }


@dataclasses.dataclass
class StepResult:
    """Result of the reference's ``GRU4Rec.train_step`` (white-box; not part of the adapter protocol).

    Attributes:
        loss: float, Σ over lanes of the per-lane loss / ``batch_size`` (the value the gradient is taken of).
        hidden: list of (b, d_l) float32 arrays, the new hidden state per GRU layer.
        grads: name → dense float32 array shaped like that parameter in ``GRU4Rec.get_weights`` (duplicate rows
            summed), or None unless ``return_grads`` was asked for.
    """

    loss: float
    hidden: list[np.ndarray]
    grads: dict[str, np.ndarray] | None = None
