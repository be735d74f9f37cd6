"""Adapter ``hf_trainer``: the typical Hugging Face ``Trainer`` recipe for SST-5 (docs/finetuner.md, 'Comparison with the Hugging Face Trainer').

The recipe: ``set_seed`` then ``AutoModelForSequenceClassification.from_pretrained``; tokenize with truncation;
``Trainer`` with ``DataCollatorWithPadding`` (the default when a processing class is given), ``eval_strategy`` and
``save_strategy`` "epoch", ``load_best_model_at_end=True``, ``metric_for_best_model`` from the monitor,
``EarlyStoppingCallback``, ``compute_metrics`` with accuracy and macro-F1; test via ``trainer.predict`` after
training; the final model saved with ``save_model``.

Checked against transformers 5.24.0: ``eval_strategy`` (``evaluation_strategy`` is gone), ``warmup_steps``
takes a float ratio (``warmup_ratio`` is gone), ``optim`` defaults to "adamw_torch_fused", ``report_to``
defaults to "none", ``EarlyStoppingCallback(early_stopping_patience, early_stopping_threshold)``.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gru4rec_conformance.implementations.registry import register
from gru4rec_conformance.reference.finetuner import (
    FinetuneConfig,
    aggregate_runs,
    classification_report,
    model_identity,
)
from gru4rec_conformance.reference.finetuner.trainer import resolve_max_length, special_ids

from .base import (
    FinetunerAdapter,
    FinetunerCapabilities,
    ImplementationUnavailable,
    Unsupported,
    every_feature,
)

if TYPE_CHECKING:  # transformers is imported where used
    from transformers import PreTrainedTokenizerBase, Trainer


#: TrainingArguments the recipe sets from the suite's config: every FinetuneConfig name the family knows but
#: these four (the recipe neither drops a last batch, stops on collapse, seeds init separately nor forces
#: deterministic kernels).
HONOURED = (FinetunerCapabilities.HYPERPARAMETERS or frozenset()) - {
    "drop_last",
    "stop_on_collapse",
    "init_seed",
    "deterministic",
}


class _Data(torch.utils.data.Dataset):
    def __init__(self, features: list[dict]):
        self.features = features

    def __len__(self):
        return len(self.features)

    def __getitem__(self, i):
        return self.features[i]


@register
class HFTrainerAdapter(FinetunerAdapter):
    """The HF Trainer recipe. Shims: none (the Trainer's output_dir is a scratch folder; the selected model is
    saved with ``save_model`` into the run directory)."""

    name = "hf_trainer"
    description = "the typical transformers Trainer recipe (EarlyStoppingCallback, load_best_model_at_end)"
    homepage = "https://huggingface.co/docs/transformers/main_classes/trainer"

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        # set by build (all but trainer) and fit (trainer)
        self.tokenizer: PreTrainedTokenizerBase | None = None
        self.model: torch.nn.Module | None = None  # a PreTrainedModel (the Trainer's model after fit)
        self.trainer: Trainer | None = None
        self.cfg = FinetuneConfig()
        self._split_log: list[dict] = []

    def version(self) -> str:
        import transformers

        return f"transformers {transformers.__version__}"

    def capabilities(self) -> dict:
        import importlib.util

        import torch

        if importlib.util.find_spec("accelerate") is None:
            raise ImplementationUnavailable(
                "hf_trainer: transformers' Trainer needs accelerate>=1.1.0: pip install accelerate==1.15.0"
            )

        return {
            **every_feature(),
            "hyperparameters": {k: v for k, v in FinetuneConfig().to_dict().items() if k in HONOURED},
            "framework": {"name": "torch", "version": torch.__version__},
        }

    # -------------------------------------------------------------- building and data
    def build(self, seed: int = 0, *, model_spec=None, num_labels: int = 5) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed

        if model_spec is None or model_spec.path is None:
            raise Unsupported("model_spec", "the recipe loads models from a local directory")
        self.spec, self.num_labels, self.seed = model_spec, num_labels, int(seed)
        self.tokenizer = AutoTokenizer.from_pretrained(model_spec.path, local_files_only=True)
        set_seed(self.seed)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            model_spec.path, num_labels=num_labels, local_files_only=True
        )
        self.trainer = None
        self._split_log = []

    def _require(self):
        if self.model is None:
            raise RuntimeError("hf_trainer: call build() first")

    def encode(self, texts: Sequence[str], max_length: int | None = None) -> dict:
        self._require()
        assert self.tokenizer is not None  # build sets it with the model
        L = resolve_max_length(self.tokenizer, max_length if max_length is not None else self.cfg.max_length)
        full = self.tokenizer(list(texts))["input_ids"]
        enc = self.tokenizer(list(texts), truncation=True, max_length=L)
        return {
            "input_ids": [list(x) for x in enc["input_ids"]],
            "attention_mask": [list(x) for x in enc["attention_mask"]],
            "special_ids": special_ids(self.tokenizer),
            "n_truncated": sum(len(x) > L for x in full),
            "max_length": L,
        }

    def _dataset(self, examples, with_labels: bool = True) -> _Data:
        assert self.tokenizer is not None  # called after _require(): built
        L = resolve_max_length(self.tokenizer, self.cfg.max_length)
        enc = self.tokenizer(list(examples.texts), truncation=True, max_length=L)
        feats = []
        for i in range(len(examples)):
            f = {k: enc[k][i] for k in enc.keys()}
            if with_labels:
                f["labels"] = int(examples.labels[i])
            feats.append(f)
        return _Data(feats)

    def collate(self, features: list[dict]) -> dict:
        from transformers import DataCollatorWithPadding

        self._require()
        assert self.tokenizer is not None  # build sets it with the model
        return dict(DataCollatorWithPadding(self.tokenizer)(features))

    # -------------------------------------------------------------- training
    def _args(self, cfg: FinetuneConfig, output_dir: str):
        from transformers import TrainingArguments

        if cfg.optimizer != "adamw":
            raise Unsupported("optimizer", "the recipe uses the Trainer's AdamW")
        greater = cfg.monitor != "val_loss"
        return TrainingArguments(
            output_dir=output_dir,
            eval_strategy="epoch",
            save_strategy="epoch",
            logging_strategy="epoch",
            load_best_model_at_end=cfg.restore_best,
            metric_for_best_model={
                "val_loss": "eval_loss",
                "val_accuracy": "eval_accuracy",
                "val_macro_f1": "eval_macro_f1",
            }[cfg.monitor],
            greater_is_better=greater,
            num_train_epochs=cfg.max_epochs,
            per_device_train_batch_size=cfg.batch_size,
            per_device_eval_batch_size=cfg.eval_batch_size,
            learning_rate=cfg.learning_rate,
            adam_beta1=cfg.betas[0],
            adam_beta2=cfg.betas[1],
            adam_epsilon=cfg.eps,
            weight_decay=cfg.weight_decay,
            lr_scheduler_type="linear" if cfg.schedule == "linear" else "constant_with_warmup",
            warmup_steps=float(cfg.warmup_ratio),
            max_grad_norm=cfg.clip_norm if cfg.clip_norm else 0.0,
            seed=self.seed,
            data_seed=cfg.data_seed,
            dataloader_drop_last=cfg.drop_last,
            report_to="none",
            disable_tqdm=True,
            use_cpu=True,
            save_total_limit=None,
        )

    def fit(self, train, val, config: Mapping[str, Any] | None = None) -> dict:
        from transformers import EarlyStoppingCallback, Trainer, TrainerCallback

        self._require()
        values = dict(config or {})
        values.setdefault("seed", self.seed)
        cfg = FinetuneConfig.from_mapping(values)
        self.cfg = cfg
        scratch = tempfile.mkdtemp(prefix="hf_trainer_")
        lr_by_step: list[float] = []
        timings: dict[int, float] = {}
        log = self._split_log
        adapter = self

        class _Trace(TrainerCallback):
            def on_epoch_begin(self, args, state, control, **kw):
                timings[len(timings) + 1] = time.perf_counter()
                log.append({"split": train.split, "purpose": "train", "epoch": len(timings)})

            def on_step_begin(self, args, state, control, lr_scheduler=None, optimizer=None, **kw):
                lr_by_step.append(
                    float(optimizer.param_groups[0]["lr"])
                    if optimizer is not None
                    else float(lr_scheduler.get_last_lr()[0])
                )

            def on_evaluate(self, args, state, control, **kw):
                log.append({"split": val.split, "purpose": "evaluate", "epoch": len(timings)})

        def compute_metrics(p):
            logits, labels = p.predictions, p.label_ids
            r = classification_report(logits, labels, adapter.num_labels)
            return {"accuracy": r["accuracy"], "macro_f1": r["macro_f1"]}

        callbacks: list[TrainerCallback] = [_Trace()]
        if cfg.patience is not None:
            callbacks.append(
                EarlyStoppingCallback(early_stopping_patience=cfg.patience, early_stopping_threshold=cfg.min_delta)
            )
        try:
            self.trainer = Trainer(
                model=self.model,
                args=self._args(cfg, scratch),
                train_dataset=self._dataset(train),
                eval_dataset=self._dataset(val),
                processing_class=self.tokenizer,
                compute_metrics=compute_metrics,
                callbacks=callbacks,
            )
            self.trainer.train()
            history = list(self.trainer.state.log_history)
            best_ckpt = self.trainer.state.best_model_checkpoint
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        assert self.trainer.model is not None  # the Trainer was given the model
        self.model = self.trainer.model.eval()
        return self._record(cfg, train, val, history, best_ckpt, lr_by_step)

    def _record(self, cfg, train, val, history, best_ckpt, lr_by_step) -> dict:
        evals = [h for h in history if "eval_loss" in h]
        trains = [h for h in history if "loss" in h and "eval_loss" not in h]
        steps_per_epoch = cfg.steps_per_epoch(len(train))
        epochs = []
        for i, e in enumerate(evals, start=1):
            t = trains[i - 1] if i - 1 < len(trains) else {}
            epochs.append(
                {
                    "epoch": i,
                    "train_loss": t.get("loss", math.nan),
                    "val_loss": e["eval_loss"],
                    "val_accuracy": e.get("eval_accuracy"),
                    "val_macro_f1": e.get("eval_macro_f1"),
                    "train_seconds": None,
                    "eval_seconds": e.get("eval_runtime"),
                    "steps": int(e["step"]) - (int(evals[i - 2]["step"]) if i > 1 else 0),
                    "cumulative_steps": int(e["step"]),
                    "lr_end": t.get("learning_rate"),
                }
            )
        selected = len(epochs)
        if best_ckpt and cfg.restore_best:
            m = re.search(r"checkpoint-(\d+)", best_ckpt)
            assert m is not None  # the Trainer names its checkpoints checkpoint-<step>
            step = int(m.group(1))
            selected = next(e["epoch"] for e in epochs if e["cumulative_steps"] == step)
        assert self.trainer is not None and self.spec is not None  # called by fit, after build
        rec_val = self.evaluate(val, log=False)
        from gru4rec_conformance.reference.finetuner import collapse_reasons

        reasons = collapse_reasons(rec_val["predictions"], val.labels, rec_val["mean_ce"], self.num_labels)
        import platform

        import tokenizers
        import transformers

        return {
            "epochs": epochs,
            "selected_epoch": selected,
            "stopped_epoch": len(epochs),
            "stop_reason": "patience" if len(epochs) < cfg.max_epochs else "max_epochs",
            "monitor": cfg.monitor,
            "selected_val_metric": epochs[selected - 1][cfg.monitor] if epochs else math.nan,
            "selected_val_accuracy": epochs[selected - 1]["val_accuracy"] if epochs else math.nan,
            "selected_checkpoint": f"memory:epoch-{selected}",
            "lr_by_step": lr_by_step,
            "total_steps_planned": steps_per_epoch * cfg.max_epochs,
            "n_examples": {"train": len(train), "val": len(val)},
            "collapsed": bool(reasons),
            "collapse_reasons": reasons,
            "manifest": {
                "implementation": self.name,
                "versions": {
                    "python": platform.python_version(),
                    "torch": torch.__version__,
                    "transformers": transformers.__version__,
                    "tokenizers": tokenizers.__version__,
                },
                "hyperparameters": cfg.to_dict(),
                "seed": self.seed,
                "training_arguments": {k: str(v) for k, v in self.trainer.args.to_dict().items()},
                "model": model_identity(self.spec, self.tokenizer, self.num_labels),
                "data": {
                    "train": {"n": len(train), "sha256": train.content_hash()},
                    "val": {"n": len(val), "sha256": val.content_hash()},
                },
            },
        }

    # -------------------------------------------------------------- inference
    def _logits(self, dataset) -> np.ndarray:
        from transformers import Trainer, TrainingArguments

        trainer = self.trainer
        if trainer is None:
            scratch = tempfile.mkdtemp(prefix="hf_trainer_")
            args = TrainingArguments(
                output_dir=scratch,
                per_device_eval_batch_size=self.cfg.eval_batch_size,
                report_to="none",
                disable_tqdm=True,
                use_cpu=True,
            )
            trainer = Trainer(model=self.model, args=args, processing_class=self.tokenizer)
        out = trainer.predict(dataset)
        return np.asarray(out.predictions, dtype=np.float32)

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        self._require()
        from gru4rec_conformance.datasets.sst5 import Examples

        ex = Examples.from_lists(list(texts), [0] * len(texts), split="predict", num_labels=self.num_labels)
        return self._logits(self._dataset(ex, with_labels=False))

    def evaluate(self, examples, log: bool = True) -> dict:
        self._require()
        assert self.tokenizer is not None  # build sets it with the model
        if log:
            self._split_log.append({"split": examples.split, "purpose": "evaluate", "epoch": None})
        res = classification_report(
            self._logits(self._dataset(examples, with_labels=False)), examples.labels, self.num_labels
        )
        L = resolve_max_length(self.tokenizer, self.cfg.max_length)
        res["ids"] = list(examples.ids)
        res["n_truncated"] = sum(len(x) > L for x in self.tokenizer(list(examples.texts))["input_ids"])
        return res

    def run(
        self, train, val, test, config=None, *, seed: int = 0, model_spec=None, num_labels=None, out_dir=None
    ) -> dict:
        spec = model_spec or self.spec
        self.build(seed, model_spec=spec, num_labels=num_labels or train.num_labels)
        rec = dict(self.fit(train, val, {**dict(config or {}), "seed": seed}))
        rec["test"] = self.evaluate(test)
        rec["split_log"] = list(self._split_log)
        if out_dir is not None:
            d = Path(out_dir) / f"run-{int(rec.get('run_id', 0)):02d}-seed{seed}"
            if d.exists():
                raise FileExistsError(f"{d} exists; runs are never overwritten")
            tmp = d.with_name(f".{d.name}.tmp{os.getpid()}")
            assert self.trainer is not None  # set by fit
            self.trainer.save_model(str(tmp))
            os.replace(tmp, d)
            with open(d / "test_predictions.csv", "w", encoding="utf-8") as f:
                f.write("id,prediction\n" + "".join(f"{i},{p}\n" for i, p in zip(test.ids, rec["test"]["predictions"])))
            rec["artifact_dir"] = rec["selected_checkpoint"] = str(d)
            rec["artifacts"] = sorted(str(p) for p in d.rglob("*") if p.is_file())
        return rec

    def run_repeats(self, train, val, test, config=None, *, seeds, model_spec=None, out_dir=None) -> dict:
        runs = []
        for i, s in enumerate(seeds):
            r = self.run(train, val, test, config, seed=int(s), model_spec=model_spec, out_dir=None)
            r.update(
                run_id=i,
                seed=int(s),
                test_accuracy=r["test"]["accuracy"],
                test_macro_f1=r["test"]["macro_f1"],
                epochs_run=len(r["epochs"]),
            )
            runs.append(r)
        return {"runs": runs, "aggregate": aggregate_runs(runs)}

    # -------------------------------------------------------------- hooks
    def split_log(self) -> list[dict]:
        return list(self._split_log)

    def torch_module(self):
        self._require()
        return self.model.eval()
