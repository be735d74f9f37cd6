"""Reference SST-5 fine-tuner (docs/finetuner.md, 'Reference behaviour'): the oracle the fine-tuner conformance checks compare with."""

from .config import FinetuneConfig
from .early_stopping import EarlyStopping, simulate
from .metrics import (
    aggregate_runs,
    classification_report,
    collapse_reasons,
    count_mismatch,
    describe,
    expected_max,
    majority_rate,
    mean_cross_entropy,
)
from .models import ModelSpec, build_model, load_tokenizer, minilm_dir, model_identity, tokenizer_fingerprint
from .protocol import plot, run_dir_name, run_once, run_repeats, summarize, write_json
from .trainer import Encoded, ReferenceFineTuner, encode, load_saved, resolve_max_length, set_seed, special_ids

__all__ = [
    "FinetuneConfig",
    "EarlyStopping",
    "simulate",
    "aggregate_runs",
    "classification_report",
    "collapse_reasons",
    "count_mismatch",
    "describe",
    "expected_max",
    "majority_rate",
    "mean_cross_entropy",
    "ModelSpec",
    "build_model",
    "load_tokenizer",
    "minilm_dir",
    "model_identity",
    "tokenizer_fingerprint",
    "plot",
    "run_dir_name",
    "run_once",
    "run_repeats",
    "summarize",
    "write_json",
    "Encoded",
    "ReferenceFineTuner",
    "encode",
    "load_saved",
    "resolve_max_length",
    "set_seed",
    "special_ids",
]
