"""The narrow fine-tuner adapter protocol (finetuner spec §4.1) as a base class.

An adapter translates between the suite and one fine-tuning implementation; it never fixes a defect of the
code it wraps. Shims (data written as tree files, model paths pointed at local copies, weight-file format
conversion) are declared in ``capabilities()["shims"]``. Whatever the implementation cannot express raises
``Unsupported(name)``; a check that needs an undeclared feature is skipped with the reason.

Data: splits are ``datasets.sst5.Examples``; models are ``reference.finetuner.ModelSpec`` (a local directory);
configs are mappings of ``reference.finetuner.FinetuneConfig`` field names (an adapter honours the names it can
and raises ``Unsupported`` for a given name it cannot express).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

try:  # the shared harness's exception, once its branch is merged
    from implementations.base import Unsupported  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - exercised only before the harness lands
    class Unsupported(Exception):
        """The implementation cannot express ``name`` (a parameter, hook or model family)."""

        def __init__(self, name: str, reason: str = "") -> None:
            super().__init__(f"{name}: {reason}" if reason else name)
            self.name = name
            self.reason = reason

#: Closed vocabulary of optional features a fine-tuner adapter may declare (capabilities()["features"]).
FEATURES = frozenset({
    "encode_max_length",   # encode(texts, max_length=L) honours L
    "collate",             # collate(features) exposes the batching/padding logic
    "stopping_rule",       # stopping_rule(values, patience, min_delta) runs the early-stopping rule on numbers
    "early_stopping",      # fit honours patience/min_delta/restore_best
    "split_log",           # split_log() lists every pass over a data split (checks FT-11, FT-24)
    "torch_module",        # torch_module() returns the trained torch.nn.Module and how it is called
    "save_pretrained",     # run artifacts reload with from_pretrained
    "binary_view",         # binary_view(examples) applies the implementation's own binary mapping
    "run_repeats",         # run_repeats(...) runs N seeds and aggregates
    "lr_trace",            # fit's record has lr_by_step
    "manifest",            # fit's record has a manifest
    "seed",                # build(seed) controls the run
    "configurable_optimizer",  # optimizer / lr / schedule / warmup / clip from the config
})

#: Model families the suite's tiny models come in.
MODEL_FAMILIES = ("bert", "albert", "distilbert", "roberta")


class FinetunerAdapter:
    """Base class of every fine-tuner adapter (family ``finetuner``).

    Required: ``capabilities``, ``encode``, ``build``, ``fit``, ``predict``, ``evaluate``.
    ``run`` (the whole pipeline on train/val/test) defaults to ``fit`` then one ``evaluate`` of test; an
    implementation whose own code evaluates test differently overrides it. Optional hooks raise
    ``Unsupported`` here.
    """

    family = "finetuner"
    name = "base"

    # ---------------------------------------------------------------- required
    def capabilities(self) -> dict:
        """{'features': set of FEATURES, 'model_families': tuple, 'hyperparameters': tuple of config names
        honoured, 'shims': list of str, 'framework': dict, 'notes': str}."""
        raise NotImplementedError

    def encode(self, texts: Sequence[str], max_length: int | None = None) -> dict:
        """The ids the implementation feeds its model for ``texts``.

        Returns {'input_ids': list of int lists (as fed: padded when the implementation pads at encode time),
        'attention_mask': list of int lists or None when the implementation passes no mask,
        'special_ids': {'cls','sep','pad','bos','eos'}, 'n_truncated': int or None, 'max_length': int or None}.
        """
        raise NotImplementedError

    def build(self, model_spec, num_labels: int, seed: int) -> None:
        """Prepare a fresh classifier from the local ``model_spec`` with ``num_labels`` outputs and run seed."""
        raise NotImplementedError

    def fit(self, train, val, config: Mapping[str, Any] | None = None) -> dict:
        """Train with ``train``, validate on ``val``; returns the run record (see ``ReferenceFineTuner.fit``:
        epochs rows, selected_epoch, stopped_epoch, stop_reason, selected_checkpoint, manifest, ...)."""
        raise NotImplementedError

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Eval-mode logits, float array (N, num_labels), in input order."""
        raise NotImplementedError

    def evaluate(self, examples) -> dict:
        """accuracy, macro_f1, confusion_matrix, mean_ce, n, predictions, ids of ``examples`` (called by the
        suite, once, for test)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- pipeline
    def run(self, train, val, test, config: Mapping[str, Any] | None = None, *, seed: int = 0, model_spec=None,
            num_labels: int | None = None, out_dir=None) -> dict:
        """The whole pipeline as the implementation runs it: build, fit on train/val, test once. Returns the
        run record plus ``test`` (metrics) and, with ``out_dir``, ``artifact_dir``/``artifacts``."""
        if model_spec is not None:
            self.build(model_spec, num_labels or train.num_labels, seed)
        rec = dict(self.fit(train, val, config))
        rec["test"] = self.evaluate(test)
        return rec

    # ---------------------------------------------------------------- optional hooks
    def collate(self, features: list[dict]) -> dict:
        """Batch a list of {'input_ids': [...]} dicts the way training does; returns tensors."""
        raise Unsupported("collate", "the implementation's batching is not reachable")

    def stopping_rule(self, values: Sequence[float], patience: int, min_delta: float = 0.0,
                      mode: str = "min") -> tuple[int, int]:
        """(stopped_epoch, restored_epoch) of the implementation's early-stopping rule fed ``values``."""
        raise Unsupported("stopping_rule", "no early-stopping rule to drive")

    def split_log(self) -> list[dict]:
        """Every pass over a split since build: dicts with split, purpose, epoch."""
        raise Unsupported("split_log", "split accesses are not observable")

    def torch_module(self):
        """The trained ``torch.nn.Module`` (eval mode), called as ``module(input_ids=..., attention_mask=...)``."""
        raise Unsupported("torch_module", "the model object is not reachable")

    def binary_view(self, examples):
        """The implementation's own binary mapping applied to 5-class ``examples``."""
        raise Unsupported("binary_view", "the implementation has no binary mode")

    def run_repeats(self, train, val, test, config: Mapping[str, Any] | None = None, *, seeds: Sequence[int],
                    model_spec=None, out_dir=None) -> dict:
        """N runs and their aggregate: {'runs': [...], 'aggregate': {...}}."""
        raise Unsupported("run_repeats", "the implementation has no repeated-run protocol")

    # ---------------------------------------------------------------- helpers
    def require(self, feature: str) -> None:
        """Raise ``Unsupported(feature)`` unless the adapter declares it."""
        if feature not in self.capabilities().get("features", ()):
            raise Unsupported(feature, f"not declared by {self.name}")


_REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: record a fine-tuner adapter under ``cls.name`` (and in the shared registry when the
    harness provides one)."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"fine-tuner adapter name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    try:
        from implementations import base as shared  # type: ignore

        if hasattr(shared, "register"):
            shared.register(cls)
    except ImportError:
        pass
    return cls


def registered() -> dict[str, type]:
    """Name -> adapter class of every imported fine-tuner adapter."""
    return dict(_REGISTRY)
