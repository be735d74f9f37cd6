"""Early stopping against the best value so far (FT-13 in docs/checks.md; docs/finetuner.md, 'Reference behaviour', item 8)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class EarlyStopping:
    """Patience counter on a monitored value, compared with the **best value so far**.

    Args:
        patience: evaluations without improvement that trigger a stop (``None``: never stop, still track best).
        min_delta: an improvement must beat the best by more than this (>= 0).
        mode: 'min' (losses) or 'max' (accuracy, F1).

    After each ``step(value)`` (1-based epochs): ``best_epoch``, ``best_value``, ``counter``, ``stopped``.
    Raises ``ValueError`` for a bad mode, negative min_delta or patience < 1.
    """

    patience: int | None = 3
    min_delta: float = 0.0
    mode: str = "min"
    #: the weights of ``best_epoch`` are restored at the end (class attribute, read by adapters)
    restores_best = True

    def __post_init__(self) -> None:
        if self.mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping.mode must be 'min' or 'max', got {self.mode!r}")
        if self.min_delta < 0:
            raise ValueError(f"EarlyStopping.min_delta must be >= 0, got {self.min_delta}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"EarlyStopping.patience must be >= 1 or None, got {self.patience}")
        self.best_value = math.inf if self.mode == "min" else -math.inf
        self.best_epoch = 0
        self.epoch = 0
        self.counter = 0
        self.stopped = False

    def improves(self, value: float) -> bool:
        """Whether ``value`` beats the best so far by more than min_delta (NaN never improves)."""
        if math.isnan(value):
            return False
        if self.mode == "min":
            return value < self.best_value - self.min_delta
        return value > self.best_value + self.min_delta

    def step(self, value: float) -> bool:
        """Record one evaluation; returns True when this epoch is the new best."""
        self.epoch += 1
        improved = self.improves(float(value))
        if improved:
            self.best_value = float(value)
            self.best_epoch = self.epoch
            self.counter = 0
        else:
            self.counter += 1
            if self.patience is not None and self.counter >= self.patience:
                self.stopped = True
        return improved


def simulate(
    values: Sequence[float], patience: int | None, min_delta: float = 0.0, mode: str = "min"
) -> tuple[int, int]:
    """Run the rule over a given sequence of monitored values (the stub-driven FT-13 check, docs/checks.md).

    Returns ``(stopped_epoch, restored_epoch)``: the 1-based epoch after which training stops (the length of
    the sequence if it never stops) and the epoch whose weights are restored (the best so far).
    """
    es = EarlyStopping(patience, min_delta, mode)
    for v in values:
        es.step(v)
        if es.stopped:
            break
    return es.epoch, es.best_epoch
