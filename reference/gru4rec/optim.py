"""Adagrad with heavy-ball momentum on the scaled step, lazy row-sparse updates (docs/algorithm.md, 'Optimizer').

As the port's ``IndexedAdagradM``: A ← A + g²; V ← μ·V − η·g/√(A + 1e-6); θ ← θ + V (θ ← θ − η·g/√(A + 1e-6)
without momentum); state starts at zero and persists over epochs; constant learning rate. Row-sparse gradients
(embedding tables) are coalesced — duplicate rows **summed** — and only the touched rows of A, V and θ change
(untouched rows' momentum neither decays nor acts). The arithmetic is the port's with fused in-place operations
(agreement with the port to float32 rounding).

Speed (CPU): the dense update writes √(A + ε) into a persistent buffer per parameter instead of a fresh tensor
per step; the row update gathers rows with ``index_select`` (several times faster than advanced indexing) and
divides into its own scratch rows. The floating-point operations and their order are unchanged, so the weights
are bit for bit those of the plain formulation.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class RowGrad(NamedTuple):
    """Row-sparse gradient of a table: ``values[k]`` is the summed gradient of row ``indices[k]``.

    indices: (U,) int64, unique and ascending; values: (U, d) float32."""

    indices: torch.Tensor
    values: torch.Tensor

    @classmethod
    def from_rows(cls, idx: torch.Tensor, rows: torch.Tensor) -> RowGrad:
        """Sum the gradient rows of duplicate indices (the port's ``coalesce``); idx (n,), rows (n, d)."""
        return cls.from_parts([(idx, rows)])

    @classmethod
    def from_parts(cls, parts: list) -> RowGrad:
        """As :meth:`from_rows` for several (idx, rows) lookups of one table, without concatenating the rows."""
        idx = torch.cat([i for i, _ in parts]) if len(parts) > 1 else parts[0][0]
        uniq, inv = torch.unique(idx, sorted=True, return_inverse=True)
        r0 = parts[0][1]
        vals = torch.zeros((uniq.shape[0],) + tuple(r0.shape[1:]), dtype=r0.dtype, device=r0.device)
        start = 0
        for i, rows in parts:
            vals.index_add_(0, inv[start : start + i.shape[0]], rows)
            start += i.shape[0]
        return cls(uniq, vals)

    def to_dense(self, like: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(like).index_add_(0, self.indices, self.values)


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
        self._scratch: dict[str, torch.Tensor] = {}  # √(A + ε) of the dense updates, reused every step

    def _dense_scratch(self, name: str, like: torch.Tensor) -> torch.Tensor:
        """A persistent buffer shaped like ``like`` for parameter ``name`` (reallocated if the shape, dtype or
        device changed, e.g. after ``to``)."""
        scratch = self.__dict__.setdefault("_scratch", {})  # also for a subclass that skips __init__
        buf = scratch.get(name)
        if buf is None or buf.shape != like.shape or buf.dtype != like.dtype or buf.device != like.device:
            buf = scratch[name] = torch.empty_like(like)
        return buf

    def _row_scratch(self, key: str, like: torch.Tensor, n: int) -> torch.Tensor:
        """The first ``n`` rows of a persistent buffer with ``like``'s row shape (grown by half again when too
        small), so that a row update does not allocate (and page-fault) fresh megabytes every step."""
        scratch = self.__dict__.setdefault("_scratch", {})
        buf = scratch.get(key)
        if (
            buf is None
            or buf.shape[0] < n
            or buf.shape[1:] != like.shape[1:]
            or buf.dtype != like.dtype
            or buf.device != like.device
        ):
            rows = max(n, buf.shape[0] + buf.shape[0] // 2) if buf is not None else n
            buf = scratch[key] = torch.empty((rows,) + tuple(like.shape[1:]), dtype=like.dtype, device=like.device)
        return buf[:n]

    def current_lr(self) -> float:
        """Learning rate of the next update (constant: the configured η)."""
        return self.learning_rate

    @torch.no_grad()
    def step(self, grads: dict[str, torch.Tensor | None]) -> None:
        """Apply one update. ``grads`` maps names to dense gradients, :class:`RowGrad` or sparse COO
        (row-indexed) tensors; None = no gradient (the parameter and its state are left alone)."""
        clr = self.current_lr()
        for name, grad in grads.items():
            if grad is None:
                continue
            if isinstance(grad, RowGrad) or grad.is_sparse:
                if isinstance(grad, RowGrad):
                    idx, val = grad.indices, grad.values
                else:
                    grad = grad.coalesce()
                    idx, val = grad._indices()[0], grad._values()
                self.update_rows(name, idx, val, clr)
            else:
                self.update_dense(name, grad, clr)
        self.n_updates += 1

    @torch.no_grad()
    def update_dense(self, name: str, grad: torch.Tensor, clr: float) -> None:
        """The update of one parameter from its dense gradient (shaped like the parameter), learning rate clr.
        Does not count an update (``step`` does)."""
        p = self.params[name]
        acc = self.acc[name]
        acc.addcmul_(grad, grad)
        accs = torch.add(acc, self.eps, out=self._dense_scratch(name, acc)).sqrt_()
        if self.momentum > 0:
            assert self.mom is not None  # allocated in __init__ when momentum > 0
            mom = self.mom[name]
            mom.mul_(self.momentum).addcdiv_(grad, accs, value=-clr)
            p.add_(mom)
        else:
            p.addcdiv_(grad, accs, value=-clr)

    @torch.no_grad()
    def update_rows(self, name: str, idx: torch.Tensor, val: torch.Tensor, clr: float) -> None:
        """Lazy update of rows ``idx`` (unique) of a table with their summed gradients ``val`` (U, d): only these
        rows of the parameter, its accumulator and its momentum change. Does not count an update."""
        p = self.params[name]
        acc = self.acc[name]
        n = idx.shape[0]
        accs = torch.index_select(acc, 0, idx, out=self._row_scratch(name + ".acc", acc, n)).addcmul_(val, val)
        acc.index_copy_(0, idx, accs)
        accs.add_(self.eps).sqrt_()
        if self.momentum > 0:
            assert self.mom is not None  # allocated in __init__ when momentum > 0
            mom = self.mom[name]
            moma = torch.index_select(mom, 0, idx, out=self._row_scratch(name + ".mom", mom, n))
            moma.mul_(self.momentum).addcdiv_(val, accs, value=-clr)
            mom.index_copy_(0, idx, moma)
            p.index_add_(0, idx, moma)
        else:
            # val / √(A + ε) · (−η), written over the scratch rows accs (no longer needed)
            p.index_add_(0, idx, torch.div(val, accs, out=accs).mul_(-clr))

    @torch.no_grad()
    def update_rows_dup(self, name: str, idx: torch.Tensor, g: torch.Tensor, clr: float) -> None:
        """:meth:`update_rows` for an index list that may repeat rows, without ``torch.unique`` (fixed shapes,
        no host synchronisation: the static training step).

        idx: (n,) int64 row indices, duplicates allowed; g: (n, d) with ``g[k]`` the *summed* gradient of row
        ``idx[k]`` (so duplicate entries carry equal values). Every entry computes its row's new parameter,
        accumulator and momentum from the same inputs, so duplicates write equal values and the result is that
        of one update per distinct row (the arithmetic is that of :meth:`update_rows`).
        """
        p = self.params[name]
        acc = self.acc[name]
        accs = acc.index_select(0, idx).addcmul_(g, g)
        acc.index_copy_(0, idx, accs)
        accs.add_(self.eps).sqrt_()
        if self.momentum > 0:
            assert self.mom is not None  # allocated in __init__ when momentum > 0
            mom = self.mom[name]
            moma = mom.index_select(0, idx).mul_(self.momentum).addcdiv_(g, accs, value=-clr)
            mom.index_copy_(0, idx, moma)
            p.index_copy_(0, idx, p.index_select(0, idx).add_(moma))
        else:
            p.index_copy_(0, idx, p.index_select(0, idx).add_(g.div(accs).mul_(-clr)))

    def to(self, device) -> None:
        self._scratch = {}
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
