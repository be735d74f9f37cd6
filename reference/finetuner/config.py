"""Hyperparameters of the reference fine-tuner (docs/finetuner.md, 'Reference behaviour', items 3-8)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OPTIMIZERS = ("adamw", "adam")
SCHEDULES = ("linear", "constant")
MONITORS = {"val_loss": "min", "val_accuracy": "max", "val_macro_f1": "max"}


@dataclass(frozen=True)
class FinetuneConfig:
    """All knobs of one fine-tuning run; every field goes into the run manifest.

    Defaults are the reference's (docs/finetuner.md, 'Reference behaviour'): AdamW lr 2e-5, betas (0.9, 0.999), eps 1e-8, decoupled weight decay
    0.01 on non-bias, non-LayerNorm weights, grad-norm clip 1.0, linear warmup over 6% of the steps then linear
    decay, early stopping on validation loss with patience 3 and restore-best. ``replication()`` gives the
    studied code's setting (plain Adam, lr 1e-5, no warmup/decay/clipping, batch 8).

    Fields:
        optimizer: 'adamw' (decoupled decay) or 'adam' (torch.optim.Adam, no decay).
        learning_rate, betas, eps, weight_decay: optimizer settings (weight_decay ignored by 'adam' unless > 0,
            where it is torch's L2 penalty).
        schedule: 'linear' (warmup then linear decay to 0 at the last planned step) or 'constant' (warmup then
            constant).
        warmup_ratio: fraction of the planned optimizer steps (max_epochs x steps per epoch) used for warmup;
            warmup steps = ceil(ratio x total), as in HF ``get_warmup_steps``.
        clip_norm: max global gradient L2 norm, ``None`` = no clipping.
        batch_size, eval_batch_size: examples per optimizer step / per evaluation forward pass.
        drop_last: drop the last incomplete training batch (steps per epoch = floor instead of ceil).
        max_epochs: upper bound on training epochs.
        patience: evaluations without improvement before stopping; ``None`` disables early stopping.
        min_delta: an improvement must beat the best value so far by more than this.
        monitor: 'val_loss' (default), 'val_accuracy' or 'val_macro_f1'.
        restore_best: at the end, load the weights of the best epoch by ``monitor`` (selection on validation).
        stop_on_collapse: stop with stop_reason 'collapse' when validation predictions have collapsed at
            epoch >= 2.
        max_length: truncation length in tokens including special tokens; ``None`` = min(model max, 128).
        seed: the run seed (initialisation and data order); init_seed / data_seed override either part.
        deterministic: ``torch.use_deterministic_algorithms(True)`` during the run.
    """

    optimizer: str = "adamw"
    learning_rate: float = 2e-5
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01
    schedule: str = "linear"
    warmup_ratio: float = 0.06
    clip_norm: float | None = 1.0
    batch_size: int = 16
    eval_batch_size: int = 64
    drop_last: bool = False
    max_epochs: int = 10
    patience: int | None = 3
    min_delta: float = 0.0
    monitor: str = "val_loss"
    restore_best: bool = True
    stop_on_collapse: bool = False
    max_length: int | None = None
    seed: int = 0
    init_seed: int | None = None
    data_seed: int | None = None
    deterministic: bool = False

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"FinetuneConfig.{name}={getattr(self, name)!r}: {why}")

        if self.optimizer not in OPTIMIZERS:
            raise bad("optimizer", f"must be one of {OPTIMIZERS}")
        if self.schedule not in SCHEDULES:
            raise bad("schedule", f"must be one of {SCHEDULES}")
        if self.monitor not in MONITORS:
            raise bad("monitor", f"must be one of {tuple(MONITORS)}")
        if not (self.learning_rate >= 0 and math.isfinite(self.learning_rate)):
            raise bad("learning_rate", "must be a finite number >= 0")
        if not 0 <= self.warmup_ratio < 1:
            raise bad("warmup_ratio", "must be in [0, 1)")
        for name in ("batch_size", "eval_batch_size", "max_epochs"):
            if int(getattr(self, name)) < 1:
                raise bad(name, "must be >= 1")
        if self.patience is not None and self.patience < 1:
            raise bad("patience", "must be >= 1 or None")
        if self.max_length is not None and self.max_length < 3:
            raise bad("max_length", "must be >= 3 (room for the special tokens)")
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise bad("clip_norm", "must be > 0 or None")
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None = None, **overrides: Any) -> FinetuneConfig:
        """Build from a mapping of field names. Raises ``ValueError`` naming any unknown parameter."""
        merged = dict(values or {}, **overrides)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(merged) - names)
        if unknown:
            raise ValueError(f"unknown fine-tuner parameter(s): {', '.join(unknown)}; known: {sorted(names)}")
        return cls(**merged)

    @classmethod
    def replication(cls, **overrides: Any) -> FinetuneConfig:
        """The studied code's optimisation (docs/finetuner.md, 'The studied pipeline', Optimizer): Adam lr 1e-5, no decay, warmup, schedule or
        clipping, batch size 8; selection and stopping stay on validation."""
        base = dict(
            optimizer="adam",
            learning_rate=1e-5,
            weight_decay=0.0,
            schedule="constant",
            warmup_ratio=0.0,
            clip_norm=None,
            batch_size=8,
        )
        base.update(overrides)
        return cls.from_mapping(base)

    def replace(self, **changes: Any) -> FinetuneConfig:
        """A copy with some fields changed (validated)."""
        return self.from_mapping(self.to_dict(), **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of every field."""
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d

    @property
    def run_init_seed(self) -> int:
        """Seed of model initialisation (classifier head, dropout RNG at build)."""
        return self.seed if self.init_seed is None else self.init_seed

    @property
    def run_data_seed(self) -> int:
        """Seed of the training sampler's generator and of dropout during training."""
        return self.seed if self.data_seed is None else self.data_seed

    def steps_per_epoch(self, n_train: int) -> int:
        """Optimizer steps in one epoch over ``n_train`` examples (ceil, or floor with drop_last)."""
        return n_train // self.batch_size if self.drop_last else -(-n_train // self.batch_size)

    def warmup_steps(self, total_steps: int) -> int:
        """ceil(warmup_ratio x total_steps)."""
        return math.ceil(self.warmup_ratio * total_steps)

    def lr_at(self, step: int, total_steps: int) -> float:
        """Learning rate used by optimizer step ``step`` (0-based) of a run planned for ``total_steps`` steps.

        Same formula as transformers' ``get_linear_schedule_with_warmup`` / ``get_constant_schedule_with_warmup``:
        lr x step / warmup during warmup, then lr x (total - step) / (total - warmup) (linear) or lr (constant).
        """
        w = self.warmup_steps(total_steps)
        if step < w:
            return self.learning_rate * step / max(1, w)
        if self.schedule == "constant":
            return self.learning_rate
        return self.learning_rate * max(0.0, (total_steps - step) / max(1, total_steps - w))
