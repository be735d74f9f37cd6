"""Adapter ``reference``: the reference fine-tuner (``reference.finetuner``) behind the narrow protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gru4rec_conformance.implementations.registry import register
from gru4rec_conformance.reference.finetuner import FinetuneConfig, ReferenceFineTuner, aggregate_runs, run_once
from gru4rec_conformance.reference.finetuner import simulate as _simulate

from .base import FinetunerAdapter, Unsupported, every_feature


@register
class ReferenceAdapter(FinetunerAdapter):
    """The oracle itself. Mutants subclass it and swap ``tuner_cls`` (or one adapter method)."""

    name = "reference"
    role = "reference"
    description = "reference SST-5 fine-tuner (docs/finetuner.md, 'Reference behaviour')"
    tuner_cls: type[ReferenceFineTuner] = ReferenceFineTuner

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.tuner: ReferenceFineTuner | None = None

    def version(self) -> str:
        import transformers

        return f"reference (transformers {transformers.__version__})"

    def capabilities(self) -> dict:
        import torch

        return {
            **every_feature(),
            "hyperparameters": {
                k: (list(v) if isinstance(v, tuple) else v) for k, v in FinetuneConfig().to_dict().items()
            },
            "shims": [],
            "framework": {"name": "torch", "version": torch.__version__},
        }

    # -------------------------------------------------------------- protocol
    def _tuner(self) -> ReferenceFineTuner:
        if self.tuner is None:
            raise RuntimeError(f"{self.name}: call build() first")
        return self.tuner

    def build(self, seed: int = 0, *, model_spec=None, num_labels: int = 5) -> None:
        if model_spec is None:
            raise ValueError("build() needs model_spec= (a reference.finetuner.ModelSpec)")
        self.spec, self.num_labels, self.seed = model_spec, num_labels, int(seed)
        self.tuner = self.tuner_cls(model_spec, num_labels=num_labels, device=self.device)
        self.tuner.build(int(seed))

    def encode(self, texts: Sequence[str], max_length: int | None = None) -> dict:
        enc = self._tuner().encode(texts, max_length)
        return {
            "input_ids": enc.input_ids,
            "attention_mask": enc.attention_mask,
            "special_ids": enc.special_ids,
            "n_truncated": enc.n_truncated,
            "max_length": enc.max_length,
        }

    def _config(self, config: Mapping[str, Any] | None) -> FinetuneConfig:
        values = dict(config or {})
        values.setdefault("seed", self.seed)
        return FinetuneConfig.from_mapping(values)

    def fit(self, train, val, config: Mapping[str, Any] | None = None) -> dict:
        return self._tuner().fit(train, val, self._config(config))

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        return self._tuner().predict(texts)

    def evaluate(self, examples) -> dict:
        return self._tuner().evaluate(examples)

    def run(
        self, train, val, test, config=None, *, seed: int = 0, model_spec=None, num_labels=None, out_dir=None
    ) -> dict:
        spec = model_spec if model_spec is not None else self.spec
        if spec is None:
            raise RuntimeError(f"{self.name}: run() needs model_spec= or an earlier build()")
        cfg = self._config({**dict(config or {}), "seed": seed})
        rec = self._run_once(spec, train, val, test, cfg, seed=seed, run_id=0, out_dir=out_dir)
        return rec

    def _run_once(self, spec, train, val, test, cfg, *, seed, run_id, out_dir) -> dict:
        adapter = self

        class _Tuner(self.tuner_cls):  # type: ignore[name-defined]  # the base is this adapter's tuner_cls
            def __init__(self, *a, **kw):
                super().__init__(*a, device=adapter.device, **kw)
                adapter.tuner = self

        self.spec, self.num_labels, self.seed = spec, train.num_labels, seed
        return run_once(spec, train, val, test, cfg, seed=seed, run_id=run_id, out_dir=out_dir, tuner_cls=_Tuner)

    # -------------------------------------------------------------- hooks
    def collate(self, features: list[dict]) -> dict:
        return self._tuner().collate(features)

    def stopping_rule(self, values, patience, min_delta=0.0, mode="min") -> tuple[int, int]:
        stopper = self.tuner_cls.stopper_cls(patience, min_delta, mode)
        for v in values:
            stopper.step(v)
            if stopper.stopped:
                break
        restored = stopper.best_epoch if getattr(stopper, "restores_best", True) else stopper.epoch
        return stopper.epoch, restored

    def split_log(self) -> list[dict]:
        return list(self._tuner().split_log)

    def torch_module(self):
        return self._tuner()._require_model().eval()

    def binary_view(self, examples):
        from gru4rec_conformance.datasets.sst5 import binary

        return binary(examples)

    def run_repeats(self, train, val, test, config=None, *, seeds, model_spec=None, out_dir=None) -> dict:
        spec = model_spec if model_spec is not None else self.spec
        runs = []
        for i, s in enumerate(seeds):
            cfg = self._config({**dict(config or {}), "seed": int(s)})
            runs.append(self._run_once(spec, train, val, test, cfg, seed=int(s), run_id=i, out_dir=out_dir))
        return {"runs": runs, "aggregate": self.aggregate(runs)}

    def aggregate(self, runs: list[dict]) -> dict:
        """``reference.finetuner.aggregate_runs``."""
        return aggregate_runs(runs)


def simulate(values, patience, min_delta=0.0, mode="min"):
    """The reference stopping rule on a sequence (re-exported for checks)."""
    return _simulate(values, patience, min_delta, mode)


__all__ = ["ReferenceAdapter", "Unsupported", "simulate"]
