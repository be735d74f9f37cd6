"""Classification metrics, collapse detection and aggregation over runs (FT-9, FT-19..FT-21 in docs/checks.md;
docs/finetuner.md, 'Reference behaviour' items 10 and 12, 'Literature': Dodge et al. 2019)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def count_mismatch(n_predictions: int, n_examples: int, what: str = "examples") -> str | None:
    """One sentence saying that ``n_predictions`` predictions came for ``n_examples`` ``what`` (with the ratio when
    it is a whole multiple, e.g. ``3× as many``), or None when the counts agree."""
    if n_predictions == n_examples:
        return None
    ratio = ""
    if n_examples and n_predictions % n_examples == 0:
        ratio = f" ({n_predictions // n_examples}× as many)"
    return f"the implementation returned {n_predictions} predictions for {n_examples} {what}{ratio}"


def _require_counts(n_predictions: int, n_examples: int) -> None:
    """Raise ``ValueError`` naming both counts when they differ (before numpy or scikit-learn would fail on the
    shapes with a message that names neither)."""
    problem = count_mismatch(n_predictions, n_examples)
    if problem:
        raise ValueError(problem)


def mean_cross_entropy(logits: np.ndarray, labels: Sequence[int] | np.ndarray) -> float:
    """Mean per-example cross-entropy (natural log) of ``logits`` (N, C) against int ``labels`` (N,), computed in
    float64 with a stable log-softmax. Independent of any batch size (FT-9, docs/checks.md).

    Raises ``ValueError`` on shape mismatch or an empty input.
    """
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    if z.ndim == 2 and y.ndim == 1:
        _require_counts(z.shape[0], y.shape[0])
    if z.ndim != 2 or z.shape[0] != y.shape[0] or z.shape[0] == 0:
        raise ValueError(f"logits {z.shape} and labels {y.shape} must be (N, C) and (N,), N > 0")
    m = z.max(axis=1, keepdims=True)
    logsumexp = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
    return float(np.mean(logsumexp - z[np.arange(len(y)), y]))


def classification_report(logits: np.ndarray, labels: Sequence[int], num_labels: int) -> dict:
    """Accuracy, macro-F1 (over all ``num_labels`` classes, zero_division=0), per-class F1, the confusion matrix
    (rows = true label, columns = predicted, no margins), mean CE, n and the predictions, via scikit-learn.

    Returns a dict with keys accuracy, macro_f1, per_class_f1 (list), confusion_matrix (list of lists),
    mean_ce, n, predictions (list of int).

    Raises ``ValueError`` naming both counts when ``logits`` has another number of rows than ``labels``.
    """
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    z = np.asarray(logits)
    y = np.asarray(labels, dtype=np.int64)
    if z.ndim >= 1:
        _require_counts(z.shape[0], len(y))
    pred = z.argmax(axis=1)
    classes = list(range(num_labels))
    return {
        "accuracy": float(accuracy_score(y, pred)),
        "macro_f1": float(f1_score(y, pred, labels=classes, average="macro", zero_division=0)),
        "per_class_f1": [float(v) for v in f1_score(y, pred, labels=classes, average=None, zero_division=0)],
        "confusion_matrix": confusion_matrix(y, pred, labels=classes).tolist(),
        "mean_ce": mean_cross_entropy(z, y),
        "n": int(len(y)),
        "predictions": [int(p) for p in pred],
    }


def majority_rate(labels: Sequence[int] | np.ndarray) -> float:
    """Share of the most frequent label (the accuracy of always predicting it)."""
    y = np.asarray(labels, dtype=np.int64)
    return float(np.bincount(y).max() / len(y)) if len(y) else 0.0


def collapse_reasons(
    predictions: Sequence[int], labels: Sequence[int], mean_ce: float, num_labels: int, *, margin: float = 0.01
) -> list[str]:
    """Why a run counts as collapsed (FT-19, docs/checks.md), empty if it does not.

    Flags: at most one distinct predicted class; accuracy <= majority rate + margin; mean CE >= ln(C) - margin.
    Raises ``ValueError`` naming both counts when there are not as many predictions as labels.
    """
    pred = np.asarray(predictions)
    y = np.asarray(labels)
    _require_counts(len(pred), len(y))
    reasons = []
    if len(np.unique(pred)) <= 1:
        reasons.append(f"{len(np.unique(pred))} distinct predicted class")
    acc = float((pred == y).mean()) if len(y) else 0.0
    maj = majority_rate(y)
    if acc <= maj + margin:
        reasons.append(f"accuracy {acc:.4f} <= majority rate {maj:.4f} + {margin}")
    if mean_ce >= math.log(num_labels) - margin:
        reasons.append(f"mean CE {mean_ce:.4f} >= ln({num_labels}) - {margin}")
    return reasons


def describe(values: Sequence[float]) -> dict:
    """n, mean, std (ddof=1; NaN for n < 2), median, min, max of ``values`` (FT-20, docs/checks.md)."""
    v = np.asarray(list(values), dtype=np.float64)
    n = int(v.size)
    if n == 0:
        return {"n": 0, "mean": math.nan, "std": math.nan, "median": math.nan, "min": math.nan, "max": math.nan}
    return {
        "n": n,
        "mean": float(v.mean()),
        "std": float(v.std(ddof=1)) if n > 1 else math.nan,
        "median": float(np.median(v)),
        "min": float(v.min()),
        "max": float(v.max()),
    }


def expected_max(values: Sequence[float], k_max: int | None = None) -> list[float]:
    """Expected maximum of k i.i.d. draws (with replacement) from the empirical distribution of ``values``,
    for k = 1..k_max (default len(values)): E[max_k] = sum_i v_(i) ((i/N)^k - ((i-1)/N)^k), v sorted ascending
    (Dodge et al. 2019, "Show Your Work", expected validation performance)."""
    v = np.sort(np.asarray(list(values), dtype=np.float64))
    n = v.size
    if n == 0:
        return []
    k_max = n if k_max is None else k_max
    i = np.arange(1, n + 1, dtype=np.float64)
    return [float(np.sum(v * ((i / n) ** k - ((i - 1) / n) ** k))) for k in range(1, k_max + 1)]


def aggregate_runs(runs: Sequence[dict]) -> dict:
    """Aggregate per-run records (dicts with test_accuracy, test_macro_f1, selected_val_metric, collapsed,
    selected_val_accuracy, selected_epoch, epochs_run). Every run counts, collapsed or not; runs may differ in length.

    Returns test_accuracy / test_macro_f1 / val_metric summaries (``describe``), n_runs, n_collapsed,
    expected_max_val_accuracy (list over k = 1..n, of each run's val accuracy at its selected epoch), selected_epochs and epochs_run.
    """
    return {
        "n_runs": len(runs),
        "n_collapsed": int(sum(bool(r["collapsed"]) for r in runs)),
        "test_accuracy": describe([r["test_accuracy"] for r in runs]),
        "test_macro_f1": describe([r["test_macro_f1"] for r in runs]),
        "val_metric": describe([r["selected_val_metric"] for r in runs]),
        "expected_max_val_accuracy": expected_max([r["selected_val_accuracy"] for r in runs]),
        "selected_epochs": [int(r["selected_epoch"]) for r in runs],
        "epochs_run": [int(r["epochs_run"]) for r in runs],
    }
