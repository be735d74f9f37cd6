"""The narrow fine-tuner adapter protocol (implementations/finetuner/README.md) as a base class.

An adapter translates between the suite and one fine-tuning implementation; it never fixes a defect of the
code it wraps. Shims (data written as tree files, model paths pointed at local copies, weight-file format
conversion) are declared in ``capabilities()["shims"]``. Whatever the implementation cannot express raises
``Unsupported(name)``; a check that needs an undeclared feature is skipped with the reason.

Data: splits are ``datasets.sst5.Examples``; models are ``reference.finetuner.ModelSpec`` (a local directory);
configs are mappings of ``reference.finetuner.FinetuneConfig`` field names (an adapter honours the names it can
and raises ``Unsupported`` for a given name it cannot express).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from gru4rec_conformance.implementations.base import (
    AdapterBase,
    BaseCapabilities,
    FamilySpec,
    ImplementationUnavailable,
    Unsupported,
    flag_field,
    register_family,
    set_field,
)

if TYPE_CHECKING:
    from gru4rec_conformance.reference.finetuner import ModelSpec

#: Model families the suite's tiny models come in (capability set ``models``, features ``model:<family>``).
MODEL_FAMILIES = ("bert", "albert", "distilbert", "roberta")

#: Check kinds of the family (``@pytest.mark.check(id, kind=...)``).
FINETUNER_KINDS = {
    "tokenization": "tokenization",
    "padding_masking": "padding and masking",
    "data_integrity": "data integrity",
    "selection_leakage": "selection and leakage",
    "early_stopping": "early stopping and epoch loop",
    "seeding": "seeding",
    "reporting": "reporting",
    "offline": "offline operation",
}


@dataclasses.dataclass(frozen=True)
class FinetunerCapabilities(BaseCapabilities):
    """Closed feature vocabulary of the fine-tuner family (implementations/finetuner/README.md). Optional methods
    (hooks) are declared by overriding them (features ``hook:<name>``)."""

    models: frozenset = set_field(MODEL_FAMILIES, "model", "model families the implementation can fine-tune")
    encode_max_length: bool = flag_field("encode(texts, max_length=L) honours L")
    early_stopping: bool = flag_field("fit honours patience (stops on validation)")
    save_pretrained: bool = flag_field("run(out_dir=...) saves checkpoints that reload with from_pretrained")
    lr_trace: bool = flag_field("the fit record has lr_by_step")
    manifest: bool = flag_field("the fit record has a manifest (versions, hyperparameters, model identity)")
    seed: bool = flag_field("build(seed) controls initialisation and data order")
    configurable_optimizer: bool = flag_field("optimizer, learning rate, schedule, warmup, clipping from the config")

    HYPERPARAMETERS: ClassVar[frozenset[str] | None] = frozenset(
        {
            "optimizer",
            "learning_rate",
            "betas",
            "eps",
            "weight_decay",
            "schedule",
            "warmup_ratio",
            "clip_norm",
            "batch_size",
            "eval_batch_size",
            "drop_last",
            "max_epochs",
            "patience",
            "min_delta",
            "monitor",
            "restore_best",
            "stop_on_collapse",
            "max_length",
            "seed",
            "init_seed",
            "data_seed",
            "deterministic",
        }
    )


class FinetunerAdapter(AdapterBase):
    """Base class of every fine-tuner adapter (family ``finetuner``).

    Required: ``capabilities``, ``encode``, ``build``, ``fit``, ``predict``, ``evaluate``.
    ``run`` (the whole pipeline on train/val/test) defaults to ``fit`` then one ``evaluate`` of test; an
    implementation whose own code evaluates test differently overrides it. Optional hooks raise
    ``Unsupported`` here.
    """

    family = "finetuner"
    REQUIRED = ("capabilities", "encode", "build", "fit", "predict", "evaluate", "run")
    HOOKS = (
        "collate",
        "stopping_rule",
        "split_log",
        "torch_module",
        "binary_view",
        "run_repeats",
        "network_attempts",
        "environment_changes",
    )

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.spec: ModelSpec | None = None  # the model of the last build
        self.num_labels = 5
        self.seed = 0

    # ---------------------------------------------------------------- required
    def capabilities(self) -> dict:
        """A mapping validated by ``FinetunerCapabilities``: ``models`` (model families), the flags,
        ``hyperparameters`` {config name honoured: default}, ``shims``, ``framework`` {name, version}."""
        raise NotImplementedError

    def encode(self, texts: Sequence[str], max_length: int | None = None) -> dict:
        """The ids the implementation feeds its model for ``texts``.

        Returns {'input_ids': list of int lists (as fed: padded when the implementation pads at encode time),
        'attention_mask': list of int lists or None when the implementation passes no mask,
        'special_ids': {'cls','sep','pad','bos','eos'}, 'n_truncated': int or None, 'max_length': int or None}.
        """
        raise NotImplementedError

    def build(self, seed: int = 0, *, model_spec=None, num_labels: int = 5) -> None:
        """Prepare a fresh classifier from the local ``model_spec`` (a ``reference.finetuner.ModelSpec``) with
        ``num_labels`` outputs and run ``seed``."""
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
    def run(
        self,
        train,
        val,
        test,
        config: Mapping[str, Any] | None = None,
        *,
        seed: int = 0,
        model_spec=None,
        num_labels: int | None = None,
        out_dir=None,
    ) -> dict:
        """The whole pipeline as the implementation runs it: build, fit on train/val, test once. Returns the
        run record plus ``test`` (metrics) and, with ``out_dir``, ``artifact_dir``/``artifacts``."""
        if model_spec is not None:
            self.build(seed, model_spec=model_spec, num_labels=num_labels or train.num_labels)
        rec = dict(self.fit(train, val, config))
        rec["test"] = self.evaluate(test)
        return rec

    # ---------------------------------------------------------------- optional hooks
    def collate(self, features: list[dict]) -> dict:
        """Batch a list of {'input_ids': [...]} dicts the way training does; returns tensors."""
        raise Unsupported("collate", "the implementation's batching is not reachable")

    def stopping_rule(
        self, values: Sequence[float], patience: int, min_delta: float = 0.0, mode: str = "min"
    ) -> tuple[int, int]:
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

    def run_repeats(
        self,
        train,
        val,
        test,
        config: Mapping[str, Any] | None = None,
        *,
        seeds: Sequence[int],
        model_spec=None,
        out_dir=None,
    ) -> dict:
        """N runs and their aggregate: {'runs': [...], 'aggregate': {...}}."""
        raise Unsupported("run_repeats", "the implementation has no repeated-run protocol")

    def network_attempts(self) -> list:
        """Outgoing connections the implementation attempted in its own worker processes."""
        raise Unsupported("network_attempts", "the implementation runs in this process")

    def environment_changes(self) -> dict:
        """Environment variables the implementation changed in its own worker processes."""
        raise Unsupported("environment_changes", "the implementation runs in this process")


def every_feature() -> dict[str, Any]:
    """The ``capabilities()`` entries of an implementation that offers every model family and every flag of
    :class:`FinetunerCapabilities` (the caller adds ``hyperparameters``, ``shims`` and ``framework``)."""
    return {
        "models": set(MODEL_FAMILIES),
        "encode_max_length": True,
        "early_stopping": True,
        "save_pretrained": True,
        "lr_trace": True,
        "manifest": True,
        "seed": True,
        "configurable_optimizer": True,
    }


register_family(
    FamilySpec(
        name="finetuner",
        adapter_base=FinetunerAdapter,
        capabilities_cls=FinetunerCapabilities,
        kinds=FINETUNER_KINDS,
        marker_prefixes={"model": "model"},
        description="SST-5 fine-tuning of BERT-family models (docs/finetuner.md)",
        requires=("transformers", "sklearn"),
        extra="finetuner",
    )
)

__all__ = [
    "FINETUNER_KINDS",
    "MODEL_FAMILIES",
    "FinetunerAdapter",
    "FinetunerCapabilities",
    "ImplementationUnavailable",
    "Unsupported",
    "every_feature",
]
