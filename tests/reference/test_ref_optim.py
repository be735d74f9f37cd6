"""Adagrad-momentum of the reference (docs/algorithm.md, 'Optimizer') against the written formulas."""

import numpy as np
import pytest
import torch

from gru4rec_conformance.reference.gru4rec import IndexedAdagradM


def _sparse(idx, rows, n):
    i = torch.tensor([idx], dtype=torch.int64)
    return torch.sparse_coo_tensor(i, torch.tensor(rows, dtype=torch.float32), (n, len(rows[0])), check_invariants=True)


@pytest.mark.parametrize("mu", [0.0, 0.4])
def test_dense_updates_follow_the_formula(mu):
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(3, 4)).astype(np.float32)
    p = {"W": torch.tensor(theta)}
    opt = IndexedAdagradM(p, learning_rate=0.05, momentum=mu)
    A = np.zeros_like(theta, dtype=np.float64)
    V = np.zeros_like(A)
    th = theta.astype(np.float64)
    for _ in range(3):
        g = rng.normal(size=theta.shape).astype(np.float32)
        opt.step({"W": torch.tensor(g)})
        A += g.astype(np.float64) ** 2
        step = g / np.sqrt(A + 1e-6)
        if mu > 0:
            V = mu * V - 0.05 * step
            th = th + V
        else:
            th = th - 0.05 * step
    np.testing.assert_allclose(p["W"].numpy(), th, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mu", [0.0, 0.4])
def test_sparse_rows_are_lazy_and_duplicates_summed(mu):
    n, d = 6, 3
    theta = np.arange(n * d, dtype=np.float32).reshape(n, d) / 10
    p = {"E": torch.tensor(theta)}
    opt = IndexedAdagradM(p, learning_rate=0.1, momentum=mu)
    g1 = [[1.0, 2.0, 3.0], [0.5, 0.5, 0.5], [-1.0, 0.0, 2.0]]
    opt.step({"E": _sparse([1, 4, 1], g1, n)})
    A = np.zeros((n, d))
    V = np.zeros((n, d))
    th = theta.astype(np.float64)
    gsum = {1: np.array(g1[0]) + np.array(g1[2]), 4: np.array(g1[1])}
    for r, g in gsum.items():
        A[r] += g**2
        V[r] = mu * V[r] - 0.1 * g / np.sqrt(A[r] + 1e-6)
        th[r] += V[r]
    np.testing.assert_allclose(p["E"].numpy(), th, rtol=1e-6)
    # a second step touching row 4 only: row 1 keeps its momentum untouched (lazy), row 4 uses it
    opt.step({"E": _sparse([4], [[1.0, 1.0, 1.0]], n)})
    g = np.ones(3)
    A[4] += g**2
    V[4] = mu * V[4] - 0.1 * g / np.sqrt(A[4] + 1e-6)
    th[4] += V[4]
    np.testing.assert_allclose(p["E"].numpy(), th, rtol=1e-6)
    np.testing.assert_allclose(opt.acc["E"].numpy(), A, rtol=1e-6)
    untouched = [0, 2, 3, 5]
    np.testing.assert_array_equal(p["E"].numpy()[untouched], theta[untouched])


def test_first_step_magnitude_is_learning_rate():
    """OP-1: with a zero initial accumulator the first step is η·g/√(g²+ε) ≈ η for |g| ≫ √ε."""
    g = torch.tensor([[0.5, -2.0, 0.02, -0.03]])
    p = {"W": torch.zeros(1, 4)}
    IndexedAdagradM(p, 0.05).step({"W": g})
    np.testing.assert_allclose(np.abs(p["W"].numpy()) / 0.05, 1.0, rtol=2e-3)


@pytest.mark.parametrize("mu", [0.0, 0.5])
def test_second_step_ratio(mu):
    """OP-2: same gradient twice → second step / first step = 1/√2 (+ μ with momentum)."""
    g = torch.tensor([[0.7, -1.3]])
    p = {"W": torch.zeros(1, 2)}
    opt = IndexedAdagradM(p, 1e-3, momentum=mu)
    opt.step({"W": g})
    s1 = p["W"].clone()
    opt.step({"W": g})
    s2 = p["W"] - s1
    np.testing.assert_allclose((s2 / s1).numpy(), 2**-0.5 + mu, rtol=1e-4)


def test_info_and_validation():
    opt = IndexedAdagradM({"W": torch.zeros(1)}, 0.05, 0.3)
    info = opt.info()
    assert info["lr_schedule"] == "constant" and info["initial_accumulator"] == 0.0 and info["eps"] == 1e-6
    assert info["momentum"] == 0.3 and info["learning_rate"] == 0.05 and info["nesterov"] is False
    with pytest.raises(ValueError, match="learning_rate"):
        IndexedAdagradM({"W": torch.zeros(1)}, 0.0)
    with pytest.raises(ValueError, match="momentum"):
        IndexedAdagradM({"W": torch.zeros(1)}, 0.1, -0.1)
