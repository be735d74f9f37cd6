"""Adagrad with heavy-ball momentum on the scaled step, lazy row-sparse updates (gru4rec_reference.md §5.1).

As the port's ``IndexedAdagradM``: A ← A + g²; V ← μ·V − η·g/√(A + 1e-6); θ ← θ + V (θ ← θ − η·g/√(A + 1e-6)
without momentum); state starts at zero and persists over epochs; constant learning rate. Row-sparse gradients
(embedding tables) are coalesced — duplicate rows **summed** — and only the touched rows of A, V and θ change
(untouched rows' momentum neither decays nor acts). The order of floating-point operations is the port's.
"""
from __future__ import annotations

import torch


class IndexedAdagradM:
    """Adagrad-momentum over named parameters.

    Args:
        params: name → parameter tensor (updated in place).
        learning_rate: η > 0.
        momentum: μ ≥ 0 (0 = no momentum buffer).

    Extension points (override in a subclass): :attr:`initial_accumulator_value`, :attr:`eps`,
    :meth:`current_lr` (the learning-rate schedule; constant here).
    """

    initial_accumulator_value = 0.0
    eps = 1e-6

    def __init__(self, params: dict[str, torch.Tensor], learning_rate: float, momentum: float = 0.0):
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        if momentum < 0:
            raise ValueError(f"momentum must be >= 0, got {momentum}")
        self.params = params
        self.learning_rate = float(learning_rate)
        self.momentum = float(momentum)
        self.n_updates = 0
        with torch.no_grad():
            self.acc = {k: torch.full_like(p, self.initial_accumulator_value) for k, p in params.items()}
            self.mom = {k: torch.zeros_like(p) for k, p in params.items()} if self.momentum > 0 else None

    def current_lr(self) -> float:
        """Learning rate of the next update (constant: the configured η)."""
        return self.learning_rate

    @torch.no_grad()
    def step(self, grads: dict[str, torch.Tensor | None]) -> None:
        """Apply one update. ``grads`` maps names to dense or sparse (COO, row-indexed) gradients; None = no
        gradient (the parameter and its state are left alone)."""
        clr = self.current_lr()
        mu = self.momentum
        for name, grad in grads.items():
            if grad is None:
                continue
            p = self.params[name]
            acc = self.acc[name]
            if grad.is_sparse:
                grad = grad.coalesce()
                idx = grad._indices()[0]
                val = grad._values()
                accs = acc[idx] + val.pow(2)
                acc.index_copy_(0, idx, accs)
                accs.add_(self.eps).sqrt_().mul_(-1 / clr)
                if mu > 0:
                    mom = self.mom[name]
                    moma = mom[idx]
                    moma.mul_(mu).add_(val / accs)
                    mom.index_copy_(0, idx, moma)
                    p.index_add_(0, idx, moma)
                else:
                    p.index_add_(0, idx, val / accs)
            else:
                acc.add_(grad.pow(2))
                accs = acc.add(self.eps).sqrt_()
                if mu > 0:
                    mom = self.mom[name]
                    mom.mul_(mu).addcdiv_(grad, accs, value=-clr)
                    p.add_(mom)
                else:
                    p.addcdiv_(grad, accs, value=-clr)
        self.n_updates += 1

    def to(self, device) -> None:
        self.acc = {k: v.to(device) for k, v in self.acc.items()}
        if self.mom is not None:
            self.mom = {k: v.to(device) for k, v in self.mom.items()}

    def info(self) -> dict:
        """Configuration as reported by ``GRU4Rec.optimizer_info()``."""
        return {
            "type": "adagrad-momentum",
            "learning_rate": self.current_lr(),
            "lr_schedule": "constant",
            "initial_accumulator": self.initial_accumulator_value,
            "eps": self.eps,
            "eps_inside_sqrt": True,
            "momentum": self.momentum,
            "nesterov": False,
            "grad_clip": None,
            "weight_decay": 0.0,
            "sparse_updates": "lazy rows, duplicate rows summed",
            "n_updates": self.n_updates,
        }
