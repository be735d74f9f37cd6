"""The training-step interface of the reference GRU4Rec: what ``GRU4Rec.fit`` runs each epoch.

A *training step* (:class:`TrainingStep`) trains one epoch of a built model at a time and says how
(:attr:`TrainingStep.info`, copied to ``GRU4Rec.step_info``). Two exist: :class:`~.standard.StandardStep` (the
shapes follow the shrinking batch; built from the model's overridable seams) and :class:`~.static.StaticStep` (fixed
shapes, CUDA-graph capturable). A step reads the model only through :class:`StepHost`, which ``GRU4Rec`` implements;
no step imports ``core`` (``core`` imports the steps).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch


__all__ = ["EpochTotals", "StepHost", "TrainingStep"]


class EpochTotals(NamedTuple):
    """What one epoch of a training step did (a tuple: ``(loss_sum, n_steps, n_events)``).

    Attributes:
        loss_sum: float, Σ over steps and active lanes of the per-lane loss (divide by ``n_events`` for
            ``FitReport.epoch_losses``).
        n_steps: int, optimizer updates.
        n_events: int, input → target pairs trained (Σ over steps of the active lanes).
    """

    loss_sum: float
    n_steps: int
    n_events: int


class StepHost(Protocol):
    """What a training step may use of a built model (``GRU4Rec`` after ``fit`` built it).

    Public state: ``device`` (torch.device), ``model`` (``GRU4RecModel``), ``optimizer`` (``IndexedAdagradM``),
    ``loss_function`` (the built loss: ``(R, y, b) -> summed loss``), ``iterator`` (the training
    ``SessionParallelIterator``), ``data`` (the training ``SessionData``), ``dropout_generator`` (the
    ``torch.Generator`` of the training dropout masks), ``nan_check_interval`` (int, steps between NaN checks),
    ``get_params()`` (hyperparameters, a dict) and the component classes (``iterator_class``, ``sampler_class``,
    ``model_class``, ``optimizer_class``, ``loss_classes``).

    Documented protected seams (extension points of ``GRU4Rec`` that mutants override, reference/gru4rec/README.md):

    - ``_step(x, targets, samples, H, masks=None, want_info=False, want_grads=False)``: one optimizer update on
      item columns, x/targets (b,) int64, samples (S,) int64 or None, H per-layer (b, d_l) states; returns (summed
      loss over lanes as a 0-d tensor, new detached states[, info dict with 'score_shape', 'output_rows_touched']);
    - ``_apply_keep(H, keep)`` / ``_reset_lanes(H, mask)``: lane bookkeeping between runs / at session starts;
    - ``_sample_block(n_steps, n_lanes)``: the shared extra samples of the next steps, (n_steps, S) int64 or None;
    - ``_dropout_rates()``: (dropout_p_embed, dropout_p_hidden) of the training forward pass;
    - ``_check_nan(acc, epoch, n_steps)``: raises ``TrainingDivergedError`` (and marks the model) when the
      accumulated loss ``acc`` (0-d tensor) is NaN.

    ``overridden_methods(names)`` lists which of these a subclass overrides (a step that re-implements a seam
    refuses such a model).
    """

    # State (typed Any here; the real types are in the docstring above).
    nan_check_interval: int
    iterator_class: Any
    sampler_class: Any
    model_class: Any
    optimizer_class: Any
    loss_classes: Any

    @property
    def device(self) -> torch.device: ...
    @property
    def model(self) -> Any: ...
    @property
    def optimizer(self) -> Any: ...
    @property
    def loss_function(self) -> Any: ...
    @property
    def iterator(self) -> Any: ...
    @property
    def data(self) -> Any: ...
    @property
    def dropout_generator(self) -> torch.Generator: ...

    def get_params(self) -> dict[str, Any]: ...
    @classmethod
    def overridden_methods(cls, names: Iterable[str]) -> list[str]: ...
    def _step(
        self,
        x: torch.Tensor,
        targets: torch.Tensor,
        samples: torch.Tensor | None,
        H: list[torch.Tensor],
        masks: dict[str, Any] | None = None,
        want_info: bool = False,
        want_grads: bool = False,
    ) -> Any: ...
    def _apply_keep(self, H: list[torch.Tensor], keep: np.ndarray | None) -> list[torch.Tensor]: ...
    def _reset_lanes(self, H: list[torch.Tensor], mask: np.ndarray) -> list[torch.Tensor]: ...
    def _sample_block(self, n_steps: int, n_lanes: int) -> torch.Tensor | None: ...
    def _dropout_rates(self) -> tuple[float, float]: ...
    def _check_nan(self, acc: torch.Tensor, epoch: int, n_steps: int) -> None: ...


class TrainingStep(abc.ABC):
    """One way of running the training epochs of a built model.

    Attributes:
        name: ``'standard'`` or ``'static'`` (the value of ``GRU4Rec(step_impl=...)`` that selects it).
        info: what ``GRU4Rec.step_info`` reports after a ``fit`` with this step: at least ``{'step_impl': name}``
            (the standard step adds ``'reason'``, the static step its CUDA-graph state).
    """

    name: ClassVar[str] = ""
    info: dict[str, Any]

    @abc.abstractmethod
    def train_epoch(self, epoch: int) -> EpochTotals:
        """Train one epoch (``epoch`` 0-based, for messages and traces) and return its :class:`EpochTotals`.

        Raises ``TrainingDivergedError`` (through the host's NaN check) when the loss becomes NaN."""
