"""Training losses on a sampled score matrix (docs/algorithm.md, 'Final activations' and 'Losses').

R is the b × K training score matrix, K = b + S: column i of row i is row i's target, the other in-batch targets
and the S shared samples are the negatives (nothing is masked, accidental hits included). Every loss object returns
the loss **summed over the b rows**; the trainer divides by the nominal batch size B (the port's normalisation,
also in the shrinking tail of an epoch). The formulas and the order of operations are those of the port
(``xe_loss_with_softmax``, ``softmax_neg``, ``bpr_max_loss_with_elu``) and of the original Theano code (top1,
top1-max, bpr and the final activations).

:func:`loss_on_scores` evaluates any of them on a given matrix and returns the value and dL/dR.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

EPS_LOG = 1e-24


# ----------------------------------------------------------------------------------------------------------
# final activations (Theano names; the port's bpr-max uses ELU(elu_param), or linear when elu_param = 0)


def make_activation(final_act: str | None, elu_param: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """Score activation applied before a ranking loss.

    ``final_act`` None → the port's rule: ELU with α = elu_param when elu_param > 0, else linear. Otherwise a
    Theano name: linear, relu, tanh, leaky-X (x if x ≥ 0 else X·x), elu-X, selu-X-Y (X·(x if x ≥ 0 else
    Y(eˣ−1))). Raises ValueError for an unknown name.
    """
    if final_act is None:
        if elu_param > 0:
            return lambda x: torch.nn.functional.elu(x, elu_param)
        return lambda x: x
    if final_act == "linear":
        return lambda x: x
    if final_act == "relu":
        return torch.relu
    if final_act == "tanh":
        return torch.tanh
    if final_act.startswith("leaky-"):
        leak = float(final_act.split("-", 1)[1])
        return lambda x: torch.where(x >= 0, x, leak * x)
    if final_act.startswith("elu-"):
        alpha = float(final_act.split("-", 1)[1])
        return lambda x: torch.nn.functional.elu(x, alpha)
    if final_act.startswith("selu-"):
        lmbd, alpha = (float(v) for v in final_act.split("-")[1:3])
        return lambda x: lmbd * torch.where(x >= 0, x, alpha * (torch.exp(x) - 1))
    raise ValueError(f"parameter 'final_act': unknown final activation {final_act!r}")


def _diag(R: torch.Tensor) -> torch.Tensor:
    return torch.diagonal(R)


# ----------------------------------------------------------------------------------------------------------
# losses


class CrossEntropyLoss:
    """Cross-entropy over a softmax of the sampled columns, with optional logQ correction (docs/algorithm.md, 'Cross-entropy and
    logQ').

    R'_ij = R_ij − logq·log q_j, q_j = support(Y_j) for the b in-batch columns and support(Y_j)^α for the S
    sample columns (applied to every column, target included); p = max-shifted softmax(R');
    loss = −Σ_i log(p_ii + 1e-24).

    Difference from the port: the in-batch/sample split uses the actual number of lanes b (Theano behaviour);
    the port passes the nominal B, which mislabels B−b sample columns in the shrinking tail of an epoch.

    Args:
        logq: correction strength λ (0 disables it).
        sample_alpha: α of the sample distribution (exponent of the sample columns' q).
        supports: (n_items,) float32 tensor of training supports (needed when logq > 0).

    Extension points: :meth:`softmax`, :meth:`logq_correction`.
    """

    def __init__(self, logq: float = 0.0, sample_alpha: float = 0.0, supports: torch.Tensor | None = None):
        if logq > 0 and supports is None:
            raise ValueError("parameter 'logq': logq > 0 needs the item supports")
        self.logq = float(logq)
        self.sample_alpha = float(sample_alpha)
        self.supports = supports

    def column_q(self, y: torch.Tensor, n_targets: int) -> torch.Tensor:
        """q_j of every column: support for the first n_targets (in-batch) columns, support^α for the rest."""
        assert self.supports is not None  # only logq > 0 asks, and __init__ refuses logq > 0 without supports
        return torch.cat([self.supports[y[:n_targets]], self.supports[y[n_targets:]] ** self.sample_alpha])

    def logq_correction(self, R: torch.Tensor, y: torch.Tensor, n_targets: int) -> torch.Tensor:
        if self.logq > 0:
            return R - self.logq * torch.log(self.column_q(y, n_targets))
        return R

    def softmax(self, R: torch.Tensor) -> torch.Tensor:
        """Explicit max-shifted softmax over each row (as the port; not log-softmax)."""
        X = torch.exp(R - R.max(dim=1, keepdim=True)[0])
        return X / X.sum(dim=1, keepdim=True)

    def __call__(self, R: torch.Tensor, y: torch.Tensor, n_targets: int) -> torch.Tensor:
        """Summed loss (0-d tensor). R: (b, K) float; y: (K,) int64 item columns; n_targets = b."""
        P = self.softmax(self.logq_correction(R, y, n_targets))
        return -torch.sum(torch.log(_diag(P) + EPS_LOG))


def softmax_neg(X: torch.Tensor) -> torch.Tensor:
    """Softmax over the negatives of each row: the target entry (i, i) is masked out and gets weight 0.

    Difference from the port: the shift is the row max over the *negatives*. The port shifts by the max of the
    matrix with the target entry zeroed, which equals 0 whenever every negative is below 0, so exp underflows to
    0 for all negatives once they are all below about −745 (float64) or −87 (float32) and the weights become
    0/0 = NaN (check LF-4). The weights are identical otherwise (a softmax is shift-invariant).
    """
    target = torch.eye(*X.shape, dtype=torch.bool, device=X.device)
    Xn = X.masked_fill(target, float("-inf"))
    e_x = torch.exp(Xn - Xn.max(dim=1, keepdim=True)[0])
    return e_x / e_x.sum(dim=1, keepdim=True)


class BPRMaxLoss:
    """BPR-max (docs/algorithm.md, 'BPR-max'): Ô = act(R); s = softmax_neg(Ô);
    loss = Σ_i [ −log(Σ_j s_ij σ(Ô_ii − Ô_ij) + 1e-24) + bpreg·Σ_j s_ij Ô_ij² ].

    Args:
        bpreg: weight of the score regulariser.
        activation: the final activation (see :func:`make_activation`).
    """

    def __init__(self, bpreg: float, activation: Callable[[torch.Tensor], torch.Tensor]):
        self.bpreg = float(bpreg)
        self.activation = activation

    def softmax_neg(self, X: torch.Tensor) -> torch.Tensor:
        return softmax_neg(X)

    def __call__(self, R: torch.Tensor, y: torch.Tensor, n_targets: int) -> torch.Tensor:
        O = self.activation(R)
        softmax_scores = self.softmax_neg(O)
        target_scores = _diag(O).reshape(-1, 1)
        return torch.sum(
            -torch.log(torch.sum(torch.sigmoid(target_scores - O) * softmax_scores, dim=1) + EPS_LOG)
            + self.bpreg * torch.sum((O**2) * softmax_scores, dim=1)
        )


class TOP1Loss:
    """TOP1 (Theano): Σ_i [ mean_j(σ(Ô_ij − Ô_ii) + σ(Ô_ij²)) − σ(Ô_ii²)/K ], K = number of columns."""

    def __init__(self, activation: Callable[[torch.Tensor], torch.Tensor]):
        self.activation = activation

    def __call__(self, R: torch.Tensor, y: torch.Tensor, n_targets: int) -> torch.Tensor:
        O = self.activation(R)
        d = _diag(O).reshape(-1, 1)
        return torch.sum(
            torch.mean(torch.sigmoid(-d + O) + torch.sigmoid(O**2), dim=1)
            - torch.sigmoid(d.reshape(-1) ** 2) / O.shape[1]
        )


class TOP1MaxLoss:
    """TOP1-max (Theano): Σ_i Σ_j s_ij (σ(Ô_ij − Ô_ii) + σ(Ô_ij²)), s = softmax_neg(Ô)."""

    def __init__(self, activation: Callable[[torch.Tensor], torch.Tensor]):
        self.activation = activation

    def __call__(self, R: torch.Tensor, y: torch.Tensor, n_targets: int) -> torch.Tensor:
        O = self.activation(R)
        s = softmax_neg(O)
        d = _diag(O).reshape(-1, 1)
        return torch.sum(s * (torch.sigmoid(-d + O) + torch.sigmoid(O**2)))


class BPRLoss:
    """BPR (Theano): Σ_i Σ_j −log σ(Ô_ii − Ô_ij) (the j = i term, log 2, included; no epsilon, as Theano).

    Computed as −logsigmoid(·): Theano's graph optimiser rewrites log(sigmoid(x)) to −softplus(−x), so the
    original is finite for any scores; a literal log(sigmoid(x)) is −inf once σ underflows (check LF-4)."""

    def __init__(self, activation: Callable[[torch.Tensor], torch.Tensor]):
        self.activation = activation

    def __call__(self, R: torch.Tensor, y: torch.Tensor, n_targets: int) -> torch.Tensor:
        O = self.activation(R)
        d = _diag(O).reshape(-1, 1)
        return torch.sum(-torch.nn.functional.logsigmoid(d - O))


def make_loss(
    loss: str,
    *,
    logq: float = 0.0,
    sample_alpha: float = 0.0,
    supports: torch.Tensor | None = None,
    bpreg: float = 1.0,
    elu_param: float = 0.5,
    final_act: str | None = None,
    classes=None,
):
    """Build the loss object for the official loss name (``classes`` maps names to classes, for overrides)."""
    classes = LOSS_CLASSES if classes is None else classes
    if loss not in classes:
        raise ValueError(f"parameter 'loss': unknown loss {loss!r}; one of {', '.join(classes)}")
    cls = classes[loss]
    if loss == "cross-entropy":
        return cls(logq=logq, sample_alpha=sample_alpha, supports=supports)
    act = make_activation(final_act, elu_param)
    if loss == "bpr-max":
        return cls(bpreg=bpreg, activation=act)
    return cls(activation=act)


LOSS_CLASSES = {
    "cross-entropy": CrossEntropyLoss,
    "bpr-max": BPRMaxLoss,
    "top1": TOP1Loss,
    "top1-max": TOP1MaxLoss,
    "bpr": BPRLoss,
}


def loss_on_scores(
    R,
    loss: str = "cross-entropy",
    *,
    batch_size: int | None = None,
    n_targets: int | None = None,
    logq: float = 0.0,
    column_q=None,
    bpreg: float = 1.0,
    elu_param: float = 0.5,
    final_act: str | None = None,
    classes=None,
) -> tuple[float, np.ndarray]:
    """Loss value and gradient dL/dR of the reference loss on a given score matrix.

    Args:
        R: (b, K) array-like of raw scores (before the final activation), K ≥ b; column i of row i is the
            target. Computed in R's floating dtype (float32 or float64; other dtypes → float64).
        loss: 'cross-entropy', 'bpr-max', 'top1', 'top1-max' or 'bpr'.
        batch_size: nominal B the summed loss is divided by (default b, i.e. the mean over rows).
        n_targets: number of in-batch columns (default b).
        logq, column_q: logQ strength and the (K,) q_j of every column (already support or support^α);
            ignored unless loss='cross-entropy' and logq > 0.
        bpreg, elu_param, final_act: as the hyperparameters of the same names.

    Returns:
        (value, grad): value a Python float (Σ_rows loss / batch_size), grad an ndarray shaped like R.

    Raises ValueError for a non-2-D R, K < b, or logq > 0 without column_q.
    """
    arr = np.asarray(R)
    dtype = torch.float32 if arr.dtype == np.float32 else torch.float64
    Rt = torch.tensor(arr, dtype=dtype, requires_grad=True)
    if Rt.ndim != 2 or Rt.shape[1] < Rt.shape[0]:
        raise ValueError(f"R: expected a (b, K) matrix with K >= b, got shape {tuple(Rt.shape)}")
    b, K = Rt.shape
    n_targets = b if n_targets is None else int(n_targets)
    batch_size = b if batch_size is None else int(batch_size)
    y = torch.arange(K, dtype=torch.int64)
    supports = None
    if loss == "cross-entropy" and logq > 0:
        if column_q is None:
            raise ValueError("column_q: needed when logq > 0")
        q = torch.as_tensor(np.asarray(column_q), dtype=dtype)
        if q.shape != (K,):
            raise ValueError(f"column_q: expected shape ({K},), got {tuple(q.shape)}")
        obj = make_loss(loss, logq=logq, sample_alpha=1.0, supports=q, classes=classes)
        # q is given per column already: no exponent on the sample columns.
        obj.column_q = lambda yy, nt: q[yy]
    else:
        obj = make_loss(
            loss, logq=0.0, supports=supports, bpreg=bpreg, elu_param=elu_param, final_act=final_act, classes=classes
        )
    value = obj(Rt, y, n_targets) / batch_size
    (grad,) = torch.autograd.grad(value, Rt)
    return float(value.detach()), grad.numpy()
