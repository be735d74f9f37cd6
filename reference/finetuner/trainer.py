"""The reference fine-tuner: one run of SST-5 fine-tuning as docs/finetuner.md, 'Reference behaviour', describes it.

Tokenization with the model's own tokenizer (special tokens added once, by the tokenizer), dynamic padding with
the attention mask always passed, AdamW (or plain Adam) with warmup and linear decay, one run seed for
initialisation and data order, per-epoch validation only, early stopping on the best value so far with
restore-best, and the test split evaluated once by whoever calls ``evaluate`` after ``fit``.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gru4rec_conformance.datasets.sst5 import Examples

from .config import MONITORS, FinetuneConfig
from .early_stopping import EarlyStopping
from .metrics import classification_report, collapse_reasons
from .models import ModelSpec, build_model, load_tokenizer, model_identity

if TYPE_CHECKING:  # transformers is imported where used
    from transformers import DataCollatorWithPadding, PreTrainedModel

DEFAULT_MAX_LENGTH = 128


def set_seed(seed: int) -> None:
    """Seed python ``random``, numpy's global RNG and torch (CPU and, when present, CUDA)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def special_ids(tokenizer) -> dict:
    """cls/bos, sep/eos and pad ids of ``tokenizer`` (None where the tokenizer has no such token)."""
    return {
        "cls": tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id,
        "sep": tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id,
        "pad": tokenizer.pad_token_id,
        "bos": tokenizer.bos_token_id,
        "eos": tokenizer.eos_token_id,
    }


@dataclass
class Encoded:
    """Token ids of a list of texts, unpadded (one list per text).

    input_ids / attention_mask / token_type_ids: lists of int lists (token_type_ids only when the tokenizer
    produces them); n_truncated: how many texts were longer than max_length (they are truncated, never dropped);
    max_length: the length used; special_ids: see ``special_ids``.
    """

    input_ids: list[list[int]]
    attention_mask: list[list[int]]
    token_type_ids: list[list[int]] | None
    n_truncated: int
    max_length: int
    special_ids: dict

    def features(self, labels: Sequence[int] | None = None) -> list[dict]:
        """Per-example feature dicts for ``DataCollatorWithPadding`` (with ``labels`` when given)."""
        out = []
        for i, ids in enumerate(self.input_ids):
            f: dict[str, Any] = {"input_ids": ids, "attention_mask": self.attention_mask[i]}
            if self.token_type_ids is not None:
                f["token_type_ids"] = self.token_type_ids[i]
            if labels is not None:
                f["labels"] = int(labels[i])
            out.append(f)
        return out


def resolve_max_length(tokenizer, max_length: int | None) -> int:
    """``max_length`` or min(tokenizer.model_max_length, 128)."""
    if max_length is not None:
        return int(max_length)
    mml = getattr(tokenizer, "model_max_length", None) or DEFAULT_MAX_LENGTH
    return int(min(mml, DEFAULT_MAX_LENGTH))


def encode(tokenizer, texts: Sequence[str], max_length: int | None = None) -> Encoded:
    """Tokenize ``texts`` with ``add_special_tokens=True`` and tokenizer truncation to ``max_length`` (which keeps
    the final SEP/``</s>``); count the truncated texts. No marker is ever added to the text (docs/finetuner.md, 'Reference behaviour', item 2).

    Raises ``ValueError`` if a text is not a non-empty string.
    """
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise ValueError(f"text {i} must be a non-empty string, got {t!r}")
    L = resolve_max_length(tokenizer, max_length)
    full = tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
    n_truncated = sum(len(ids) > L for ids in full)
    enc = tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=L)
    tti = enc.get("token_type_ids")
    return Encoded(
        input_ids=[list(x) for x in enc["input_ids"]],
        attention_mask=[list(x) for x in enc["attention_mask"]],
        token_type_ids=None if tti is None else [list(x) for x in tti],
        n_truncated=int(n_truncated),
        max_length=L,
        special_ids=special_ids(tokenizer),
    )


class ReferenceFineTuner:
    """One fine-tuning run of the reference (docs/finetuner.md, 'Reference behaviour').

    Usage: ``ft = ReferenceFineTuner(spec, num_labels=5); ft.build(seed); rec = ft.fit(train, val, config);
    test_metrics = ft.evaluate(test)``. ``split_log`` lists every pass over a split (split, purpose, epoch), the
    data-access hook (implementations/finetuner/README.md) used by the selection/leakage checks.
    """

    def __init__(self, spec: ModelSpec, num_labels: int = 5, *, device: str = "cpu") -> None:
        if num_labels < 2:
            raise ValueError(f"num_labels must be >= 2, got {num_labels}")
        self.spec = spec
        self.num_labels = num_labels
        self.device = torch.device(device)
        self.tokenizer = load_tokenizer(spec)
        self.model: PreTrainedModel | None = None
        self.seed: int | None = None
        self.config = FinetuneConfig()
        self.split_log: list[dict] = []
        self.record: dict | None = None
        self._collator: DataCollatorWithPadding | None = None

    # ------------------------------------------------------------------ building
    def build(self, seed: int, init_seed: int | None = None) -> None:
        """Seed everything with ``init_seed`` (default ``seed``) and build the classifier (head initialised from
        that seed). ``seed`` stays the run seed for data order unless the config's data_seed overrides it."""
        self.seed = int(seed)
        self._seed_build(self.seed if init_seed is None else int(init_seed))
        self.model = build_model(self.spec, self.num_labels).to(self.device)
        self.model.eval()

    def _seed_build(self, seed: int) -> None:
        """Seed every RNG before the model (and its random head) is built."""
        set_seed(seed)

    def _require_model(self) -> PreTrainedModel:
        """The built classifier; raises RuntimeError before ``build``."""
        if self.model is None:
            raise RuntimeError("call build(seed) before fit/predict/evaluate")
        return self.model

    # ------------------------------------------------------------------ data
    def encode(self, texts: Sequence[str], max_length: int | None = None) -> Encoded:
        """See module function ``encode`` (with this run's tokenizer)."""
        return encode(self.tokenizer, texts, max_length if max_length is not None else self.config.max_length)

    def collate(self, features: list[dict]) -> dict:
        """Dynamic padding of a list of feature dicts to the longest in the batch, pad id = tokenizer pad id,
        attention mask included (``DataCollatorWithPadding``). Returns torch tensors."""
        if self._collator is None:
            from transformers import DataCollatorWithPadding

            self._collator = DataCollatorWithPadding(self.tokenizer, padding="longest", return_tensors="pt")
        return dict(self._collator(features))

    def _batches(self, features: list[dict], batch_size: int, generator: torch.Generator | None):
        order = (
            torch.randperm(len(features), generator=generator).tolist()
            if generator is not None
            else list(range(len(features)))
        )
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            yield idx, self.collate([features[i] for i in idx])

    def _forward_logits(self, features: list[dict], batch_size: int) -> np.ndarray:
        assert self.model is not None  # predict/evaluate/fit require a built model
        self.model.eval()
        out = []
        with torch.no_grad():
            for _, batch in self._batches(features, batch_size, None):
                batch.pop("labels", None)
                batch = {k: v.to(self.device) for k, v in batch.items()}
                out.append(self.model(**batch).logits.float().cpu().numpy())
        return np.concatenate(out, axis=0) if out else np.zeros((0, self.num_labels), np.float32)

    # ------------------------------------------------------------------ optimisation
    def _optimizer(self, cfg: FinetuneConfig):
        assert self.model is not None  # fit requires a built model
        if cfg.optimizer == "adam":
            return torch.optim.Adam(
                self.model.parameters(),
                lr=cfg.learning_rate,
                betas=cfg.betas,
                eps=cfg.eps,
                weight_decay=cfg.weight_decay,
            )
        decay: list[torch.nn.Parameter] = []
        no_decay: list[torch.nn.Parameter] = []
        norm_param_ids = {
            id(p)
            for m in self.model.modules()
            if isinstance(m, torch.nn.LayerNorm)
            for p in m.parameters(recurse=False)
        }
        for name, p in self.model.named_parameters():
            if not p.requires_grad:
                continue
            (no_decay if name.endswith("bias") or id(p) in norm_param_ids else decay).append(p)
        groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=cfg.betas, eps=cfg.eps)

    def _scheduler(self, optimizer, cfg: FinetuneConfig, total_steps: int):
        from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

        w = cfg.warmup_steps(total_steps)
        if cfg.schedule == "linear":
            return get_linear_schedule_with_warmup(optimizer, w, total_steps)
        return get_constant_schedule_with_warmup(optimizer, w)

    # ------------------------------------------------------------------ the run
    def fit(self, train: Examples, val: Examples, config: FinetuneConfig | dict | None = None) -> dict:
        """Train on ``train``, evaluate ``val`` after every epoch, stop early and restore the best epoch.

        Returns the run record (JSON-able dict): ``epochs`` (one row per epoch: epoch, train_loss, val_loss,
        val_accuracy, val_macro_f1, train_seconds, eval_seconds, steps, cumulative_steps, lr_end),
        ``selected_epoch``, ``stopped_epoch``, ``stop_reason`` ('patience' | 'max_epochs' | 'collapse'),
        ``selected_val_metric``, ``selected_checkpoint`` ('memory:epoch-<k>'), ``lr_by_step``, ``n_truncated``,
        ``collapsed`` and ``collapse_reasons`` (of the selected model on val), ``total_steps_planned`` and the
        ``manifest``.

        Raises ``ValueError`` when the splits' num_labels differ from the model's or a split is empty.
        """
        self._require_model()
        cfg = config if isinstance(config, FinetuneConfig) else FinetuneConfig.from_mapping(config or {})
        self.config = cfg
        for ex, what in ((train, "train"), (val, "val")):
            if ex.num_labels != self.num_labels:
                raise ValueError(
                    f"{what} split {ex.split!r} has num_labels={ex.num_labels}, model has {self.num_labels}"
                )
            if len(ex) == 0:
                raise ValueError(f"{what} split {ex.split!r} is empty")
        prev_det = torch.are_deterministic_algorithms_enabled()
        if cfg.deterministic:
            torch.use_deterministic_algorithms(True)
        try:
            return self._fit(train, val, cfg)
        finally:
            torch.use_deterministic_algorithms(prev_det)

    # Extension points: a mutant in implementations/finetuner/mutants overrides exactly one of these.
    stopper_cls = EarlyStopping

    def _epoch_numbers(self, cfg: FinetuneConfig) -> range:
        """Epochs to run: 1..max_epochs."""
        return range(1, cfg.max_epochs + 1)

    def _data_generator(self, seed: int) -> torch.Generator:
        """The training sampler's generator, seeded from the run's data seed."""
        return torch.Generator().manual_seed(seed)

    def _step_loss(self, batch: dict) -> torch.Tensor:
        """Training loss of one batch: the model's mean cross-entropy, read by attribute (never by position)."""
        assert self.model is not None  # fit requires a built model
        return self.model(**batch).loss

    #: optional callable(epoch_row) told after every epoch (the CLI prints progress with it)
    progress: Callable[[dict], None] | None = None

    def _epoch_end(self, epoch: int, row: dict) -> None:
        """Called after each epoch's validation: reports progress, nothing else."""
        if self.progress is not None:
            self.progress(row)

    def _select_epoch(self, stopper: EarlyStopping, epochs: list[dict], cfg: FinetuneConfig) -> int:
        """The epoch whose weights are kept: the best on validation (or the last without restore_best)."""
        return stopper.best_epoch if (cfg.restore_best and stopper.best_epoch > 0) else len(epochs)

    def _restore(self, state: dict) -> None:
        """Load the selected epoch's weights (restore-best), a state dict saved after that epoch's validation."""
        assert self.model is not None  # fit requires a built model
        self.model.load_state_dict(state)

    def _fit(self, train: Examples, val: Examples, cfg: FinetuneConfig) -> dict:
        assert self.model is not None and self.seed is not None  # fit requires build(seed)
        data_seed = cfg.run_data_seed if cfg.data_seed is not None else self.seed
        set_seed(data_seed)
        gen = self._data_generator(data_seed)
        enc_train, enc_val = self.encode(train.texts), self.encode(val.texts)
        f_train, f_val = enc_train.features(train.labels), enc_val.features(val.labels)
        steps_per_epoch = cfg.steps_per_epoch(len(train))
        if steps_per_epoch == 0:
            raise ValueError(
                f"train split has {len(train)} examples: fewer than batch_size={cfg.batch_size} with drop_last=True"
            )
        total = steps_per_epoch * cfg.max_epochs
        opt = self._optimizer(cfg)
        sched = self._scheduler(opt, cfg, total)
        stopper = self.stopper_cls(cfg.patience, cfg.min_delta, MONITORS[cfg.monitor])
        states: dict[int, dict] = {}
        epochs, lr_by_step = [], []
        stop_reason = "max_epochs"
        cum_steps = 0
        for epoch in self._epoch_numbers(cfg):
            t0 = time.perf_counter()
            self.model.train()
            self.split_log.append({"split": train.split, "purpose": "train", "epoch": epoch})
            loss_sum, n_seen, steps = 0.0, 0, 0
            for idx, batch in self._batches(f_train, cfg.batch_size, gen):
                if cfg.drop_last and len(idx) < cfg.batch_size:
                    continue
                batch = {k: v.to(self.device) for k, v in batch.items()}
                lr_by_step.append(float(opt.param_groups[0]["lr"]))
                loss = self._step_loss(batch)
                loss.backward()
                if cfg.clip_norm is not None:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                loss_sum += float(loss.detach()) * len(idx)
                n_seen += len(idx)
                steps += 1
            cum_steps += steps
            t1 = time.perf_counter()
            val_metrics = self._evaluate_features(f_val, val, epoch=epoch)
            t2 = time.perf_counter()
            row = {
                "epoch": epoch,
                "train_loss": loss_sum / max(1, n_seen),
                "val_loss": val_metrics["mean_ce"],
                "val_accuracy": val_metrics["accuracy"],
                "val_macro_f1": val_metrics["macro_f1"],
                "val_collapse_reasons": self._collapse_reasons(val_metrics, val),
                "train_seconds": t1 - t0,
                "eval_seconds": t2 - t1,
                "steps": steps,
                "cumulative_steps": cum_steps,
                "lr_end": float(opt.param_groups[0]["lr"]),
            }
            epochs.append(row)
            if stopper.step(row[cfg.monitor]) and cfg.restore_best:
                states = {epoch: {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}}
            self._epoch_end(epoch, row)
            if stopper.stopped:
                stop_reason = "patience"
                break
            if cfg.stop_on_collapse and epoch >= 2 and row["val_collapse_reasons"]:
                stop_reason = "collapse"
                break
        if not epochs:
            raise ValueError(f"no epoch was run (max_epochs={cfg.max_epochs})")
        selected = self._select_epoch(stopper, epochs, cfg)
        if selected != len(epochs) and selected in states:
            self._restore(states[selected])
        self.model.eval()
        sel_row = epochs[selected - 1]
        record = {
            "epochs": epochs,
            "selected_epoch": selected,
            "stopped_epoch": len(epochs),
            "stop_reason": stop_reason,
            "monitor": cfg.monitor,
            "selected_val_metric": sel_row[cfg.monitor],
            "selected_val_loss": sel_row["val_loss"],
            "selected_val_accuracy": sel_row["val_accuracy"],
            "selected_checkpoint": f"memory:epoch-{selected}",
            "lr_by_step": lr_by_step,
            "total_steps_planned": total,
            "n_truncated": {"train": enc_train.n_truncated, "val": enc_val.n_truncated},
            "n_examples": {"train": len(train), "val": len(val)},
            "collapsed": bool(sel_row["val_collapse_reasons"]),
            "collapse_reasons": sel_row["val_collapse_reasons"],
            "manifest": self.manifest(cfg, {"train": train, "val": val}),
        }
        self.record = record
        return record

    def _collapse_reasons(self, metrics: dict, examples: Examples) -> list[str]:
        """Collapse flags of one evaluation (FT-19, docs/checks.md)."""
        return collapse_reasons(metrics["predictions"], examples.labels, metrics["mean_ce"], self.num_labels)

    def _evaluate_features(
        self, features: list[dict], examples: Examples, *, epoch: int | None, purpose: str = "evaluate"
    ) -> dict:
        self.split_log.append({"split": examples.split, "purpose": purpose, "epoch": epoch})
        logits = self._forward_logits(features, self.config.eval_batch_size)
        return self._metrics(logits, examples)

    def _metrics(self, logits: np.ndarray, examples: Examples) -> dict:
        """Metrics of eval-mode ``logits`` against ``examples`` (``classification_report``)."""
        return classification_report(logits, examples.labels, self.num_labels)

    # ------------------------------------------------------------------ inference
    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Eval-mode logits, float32 array (N, num_labels), in input order."""
        self._require_model()
        enc = self.encode(texts)
        return self._forward_logits(enc.features(), self.config.eval_batch_size)

    def evaluate(self, examples: Examples) -> dict:
        """Accuracy, macro-F1, per-class F1, confusion matrix, mean CE, n, predictions and ids of ``examples``;
        logged in ``split_log`` (call it once on test, after ``fit``). Also reports ``n_truncated``."""
        self._require_model()
        enc = self.encode(examples.texts)
        res = self._evaluate_features(enc.features(examples.labels), examples, epoch=None)
        res["ids"] = list(examples.ids)
        res["n_truncated"] = enc.n_truncated
        return res

    # ------------------------------------------------------------------ provenance and saving
    def manifest(self, cfg: FinetuneConfig, splits: dict[str, Examples]) -> dict:
        """Versions, hyperparameters (with the effective max_length), model identity and data hashes."""
        import platform

        import sklearn
        import tokenizers
        import transformers

        return {
            "implementation": "reference",
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__,
                "numpy": np.__version__,
                "scikit-learn": sklearn.__version__,
            },
            "hyperparameters": {
                **cfg.to_dict(),
                "effective_max_length": resolve_max_length(self.tokenizer, cfg.max_length),
            },
            "seed": self.seed,
            "model": model_identity(self.spec, self.tokenizer, self.num_labels),
            "data": {
                name: {"split": ex.split, "n": len(ex), "sha256": ex.content_hash(), "source": ex.source}
                for name, ex in splits.items()
            },
            "device": str(self.device),
        }

    def save(self, directory: str | os.PathLike, extra: dict | None = None) -> list[str]:
        """``save_pretrained`` of model and tokenizer (safetensors) plus ``run.json`` (record + ``extra``) into a
        new ``directory`` (created via a temporary sibling, then renamed). Raises ``FileExistsError`` if it
        exists: earlier runs are never overwritten. Returns the written file paths."""
        model = self._require_model()
        directory = Path(directory)
        if directory.exists():
            raise FileExistsError(f"{directory} exists; runs are never overwritten")
        tmp = directory.with_name(f".{directory.name}.tmp{os.getpid()}")
        tmp.mkdir(parents=True)
        model.save_pretrained(tmp)
        self.tokenizer.save_pretrained(tmp)
        with open(tmp / "run.json", "w", encoding="utf-8") as f:
            json.dump({"record": self.record, **(extra or {})}, f, indent=1, default=_json_default)
        os.replace(tmp, directory)
        return sorted(str(p) for p in directory.rglob("*") if p.is_file())


def _json_default(o: Any):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, float) and math.isnan(o):
        return None
    return str(o)


def load_saved(directory: str | os.PathLike):
    """(model, tokenizer) reloaded from a ``save`` directory with ``from_pretrained`` (local files only)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(directory, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    return model.eval(), tok
