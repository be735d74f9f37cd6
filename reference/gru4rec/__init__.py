"""Reference GRU4Rec: the oracle of the conformance suite.

A PyTorch GRU4Rec that behaves like the official implementation (hidasib/GRU4Rec_PyTorch_Official d1fc311;
the original Theano code where the port has known quirks), described in ``docs/algorithm.md``.
Deliberate differences and extension points: reference/gru4rec/README.md.

Public API::

    from gru4rec_conformance.reference.gru4rec import GRU4Rec
    gru = GRU4Rec(layers=[100], loss='cross-entropy', batch_size=32, n_sample=2048, logq=1.0, seed=7)
    report = gru.fit(train_df)                      # FitReport
    scores = gru.score_prefixes([[1, 2], [3]])      # (2, n_items) float32, columns = gru.item_ids()
    metrics = gru.evaluate(test_df, cutoffs=(1, 5, 10, 20), mode='conservative')

The names below are imported on first use (PEP 562), so that importing ``reference.gru4rec.records`` (the result
records the adapter protocol shares, imported by every adapter worker) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from . import evaluation, losses
    from .core import GRU4Rec, TrainingDivergedError
    from .data import Run, SessionData, SessionParallelIterator
    from .evaluation import SessionParallelEvaluator, evaluate_prefix_scorer, evaluate_scores, metrics_from_ranks, rank
    from .losses import loss_on_scores
    from .model import GRU4RecModel
    from .optim import IndexedAdagradM
    from .records import FitReport, StepResult, StepTrace
    from .sampling import SampleCache

#: public name → submodule that defines it
_EXPORTS = {
    "GRU4Rec": "core",
    "TrainingDivergedError": "core",
    "FitReport": "records",
    "StepTrace": "records",
    "StepResult": "records",
    "SessionData": "data",
    "SessionParallelIterator": "data",
    "Run": "data",
    "SampleCache": "sampling",
    "GRU4RecModel": "model",
    "IndexedAdagradM": "optim",
    "SessionParallelEvaluator": "evaluation",
    "evaluate_prefix_scorer": "evaluation",
    "evaluate_scores": "evaluation",
    "metrics_from_ranks": "evaluation",
    "rank": "evaluation",
    "loss_on_scores": "losses",
}
_SUBMODULES = ("evaluation", "losses")

__all__ = [
    "GRU4Rec",
    "FitReport",
    "StepTrace",
    "StepResult",
    "TrainingDivergedError",
    "SessionData",
    "SessionParallelIterator",
    "Run",
    "SampleCache",
    "GRU4RecModel",
    "IndexedAdagradM",
    "SessionParallelEvaluator",
    "evaluate_prefix_scorer",
    "evaluate_scores",
    "metrics_from_ranks",
    "rank",
    "loss_on_scores",
    "evaluation",
    "losses",
]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
