"""Reference GRU4Rec: the oracle of the conformance suite.

A PyTorch GRU4Rec that behaves like the official implementation (hidasib/GRU4Rec_PyTorch_Official d1fc311;
the original Theano code where the port has known quirks), specified in ``../shared/spec/gru4rec_reference.md``.
Deliberate differences and extension points: reference/gru4rec/README.md.

Public API::

    from gru4rec_conformance.reference.gru4rec import GRU4Rec
    gru = GRU4Rec(layers=[100], loss='cross-entropy', batch_size=32, n_sample=2048, logq=1.0, seed=7)
    report = gru.fit(train_df)                      # FitReport
    scores = gru.score_prefixes([[1, 2], [3]])      # (2, n_items) float32, columns = gru.item_ids()
    metrics = gru.evaluate(test_df, cutoffs=(1, 5, 10, 20), mode='conservative')
"""
from . import evaluation, losses
from .core import FitReport, GRU4Rec, StepResult, StepTrace, TrainingDivergedError
from .data import SessionData, SessionParallelIterator, Run
from .evaluation import SessionParallelEvaluator, evaluate_prefix_scorer, evaluate_scores, metrics_from_ranks, rank
from .losses import loss_on_scores
from .model import GRU4RecModel
from .optim import IndexedAdagradM
from .sampling import SampleCache

__all__ = [
    "GRU4Rec", "FitReport", "StepTrace", "StepResult", "TrainingDivergedError",
    "SessionData", "SessionParallelIterator", "Run", "SampleCache", "GRU4RecModel", "IndexedAdagradM",
    "SessionParallelEvaluator", "evaluate_prefix_scorer", "evaluate_scores", "metrics_from_ranks", "rank",
    "loss_on_scores", "evaluation", "losses",
]
