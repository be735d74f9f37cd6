"""Losses of the reference GRU4Rec against independent NumPy transcriptions of docs/algorithm.md, 'Losses'."""

import numpy as np
import pytest
import torch

from gru4rec_conformance.reference.gru4rec import losses
from gru4rec_conformance.reference.gru4rec.losses import loss_on_scores


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _elu(x, a):
    return np.where(x >= 0, x, a * (np.exp(x) - 1))


def np_xe(R, q=None, logq=0.0):
    if logq > 0:
        R = R - logq * np.log(q)[None, :]
    X = np.exp(R - R.max(1, keepdims=True))
    P = X / X.sum(1, keepdims=True)
    return -np.log(np.diag(P) + 1e-24).sum()


def np_softmax_neg(O):
    b, K = O.shape
    M = 1.0 - np.eye(b, K)
    X = O * M
    e = np.exp(X - X.max(1, keepdims=True)) * M
    return e / e.sum(1, keepdims=True)


def np_bprmax(R, bpreg, elu):
    O = _elu(R, elu) if elu > 0 else R
    s = np_softmax_neg(O)
    d = np.diag(O)[:, None]
    return np.sum(-np.log((_sig(d - O) * s).sum(1) + 1e-24) + bpreg * (O**2 * s).sum(1))


def np_top1(R):
    K = R.shape[1]
    d = np.diag(R)[:, None]
    return np.sum(np.mean(_sig(R - d) + _sig(R**2), 1) - _sig(np.diag(R) ** 2) / K)


def np_top1max(R):
    s = np_softmax_neg(R)
    d = np.diag(R)[:, None]
    return np.sum(s * (_sig(R - d) + _sig(R**2)))


def np_bpr(R):
    d = np.diag(R)[:, None]
    return np.sum(-np.log(_sig(d - R)))


@pytest.fixture
def R():
    return np.random.default_rng(3).normal(0, 2, size=(5, 8))


CASES = [
    ("cross-entropy", {}, lambda R: np_xe(R)),
    ("bpr-max", {"bpreg": 0.0, "elu_param": 0.0}, lambda R: np_bprmax(R, 0.0, 0.0)),
    ("bpr-max", {"bpreg": 0.5, "elu_param": 0.0}, lambda R: np_bprmax(R, 0.5, 0.0)),
    ("bpr-max", {"bpreg": 1.3, "elu_param": 0.5}, lambda R: np_bprmax(R, 1.3, 0.5)),
    ("bpr-max", {"bpreg": 1.0, "elu_param": 1.0}, lambda R: np_bprmax(R, 1.0, 1.0)),
    ("top1", {"final_act": "linear"}, np_top1),
    ("top1-max", {"final_act": "linear"}, np_top1max),
    ("bpr", {"final_act": "linear"}, np_bpr),
    ("bpr", {"final_act": "tanh"}, lambda R: np_bpr(np.tanh(R))),
    ("top1", {"final_act": "relu"}, lambda R: np_top1(np.maximum(R, 0))),
    ("bpr-max", {"final_act": "leaky-0.1", "bpreg": 0.3}, lambda R: np_bprmax(np.where(R >= 0, R, 0.1 * R), 0.3, 0)),
    ("bpr-max", {"final_act": "elu-0.7", "bpreg": 0.3}, lambda R: np_bprmax(_elu(R, 0.7), 0.3, 0)),
    (
        "top1-max",
        {"final_act": "selu-1.05-1.67"},
        lambda R: np_top1max(1.05 * np.where(R >= 0, R, 1.67 * (np.exp(R) - 1))),
    ),
]


@pytest.mark.parametrize("loss,kw,ref", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_value_and_gradient_match_spec_formulas(R, loss, kw, ref):
    value, grad = loss_on_scores(R, loss, **kw)
    assert value == pytest.approx(ref(R) / R.shape[0], rel=1e-10)
    # central finite differences of the NumPy formula
    eps = 1e-6
    num = np.zeros_like(R)
    for i in range(R.shape[0]):
        for j in range(R.shape[1]):
            Rp, Rm = R.copy(), R.copy()
            Rp[i, j] += eps
            Rm[i, j] -= eps
            num[i, j] = (ref(Rp) - ref(Rm)) / (2 * eps) / R.shape[0]
    np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-8)


def test_xe_logq_correction_uses_given_column_q(R):
    q = np.random.default_rng(0).uniform(1, 50, size=R.shape[1])
    value, _ = loss_on_scores(R, "cross-entropy", logq=1.0, column_q=q)
    assert value == pytest.approx(np_xe(R, q, 1.0) / 5, rel=1e-10)
    half, _ = loss_on_scores(R, "cross-entropy", logq=0.5, column_q=q)
    assert half == pytest.approx(np_xe(R, q, 0.5) / 5, rel=1e-10)
    assert value != pytest.approx(loss_on_scores(R, "cross-entropy")[0])


def test_xe_column_q_splits_in_batch_and_samples_by_actual_lanes():
    """In-batch columns use the support, sample columns support**alpha; the split is at the actual b."""
    supports = torch.tensor([2.0, 3.0, 5.0, 7.0, 11.0], dtype=torch.float64)
    obj = losses.CrossEntropyLoss(logq=1.0, sample_alpha=0.5, supports=supports)
    y = torch.tensor([0, 1, 2, 3, 4])
    q = obj.column_q(y, 2)
    np.testing.assert_allclose(q.numpy(), [2.0, 3.0, 5**0.5, 7**0.5, 11**0.5])


def test_normalisation_by_nominal_batch_size(R):
    v_mean, g_mean = loss_on_scores(R, "cross-entropy")
    v_B, g_B = loss_on_scores(R, "cross-entropy", batch_size=8)
    assert v_B == pytest.approx(v_mean * 5 / 8)
    np.testing.assert_allclose(g_B, g_mean * 5 / 8)


@pytest.mark.parametrize("loss", ["cross-entropy", "bpr-max", "top1", "top1-max", "bpr"])
def test_rows_are_independent(R, loss):
    _, g = loss_on_scores(R, loss)
    R2 = R.copy()
    R2[3] += np.random.default_rng(1).normal(size=R.shape[1])
    _, g2 = loss_on_scores(R2, loss)
    np.testing.assert_array_equal(np.delete(g, 3, 0), np.delete(g2, 3, 0))


def test_bprmax_weights_ignore_target_score():
    """The negative softmax masks the target: with equal negatives its weights do not depend on R_ii."""
    R = np.zeros((3, 6))
    R[0, 0] = 5.0
    w1 = losses.softmax_neg(torch.tensor(R)).numpy()
    R[0, 0] = -5.0
    w2 = losses.softmax_neg(torch.tensor(R)).numpy()
    np.testing.assert_allclose(w1, w2)
    assert np.all(np.diag(w1) == 0)


@pytest.mark.parametrize("loss", ["cross-entropy", "bpr-max", "top1", "top1-max"])
def test_finite_under_extreme_scores(loss):
    for sign in (1.0, -1.0):
        R = np.full((4, 7), sign * 1e3, dtype=np.float32)
        np.fill_diagonal(R, -sign * 1e3)
        v, g = loss_on_scores(R, loss)
        assert np.isfinite(v) and np.all(np.isfinite(g))
    v, g = loss_on_scores(np.ones((4, 7), dtype=np.float32), loss)
    assert np.isfinite(v) and np.all(np.isfinite(g))


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="K >= b"):
        loss_on_scores(np.zeros((4, 3)), "cross-entropy")
    with pytest.raises(ValueError, match="column_q"):
        loss_on_scores(np.zeros((2, 3)), "cross-entropy", logq=1.0)
    with pytest.raises(ValueError, match="loss"):
        loss_on_scores(np.zeros((2, 3)), "hinge")
    with pytest.raises(ValueError, match="final_act"):
        loss_on_scores(np.zeros((2, 3)), "bpr-max", final_act="swish")
