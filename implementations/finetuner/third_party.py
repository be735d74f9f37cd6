"""Adapters of the studied GitHub code bases (docs/finetuner.md, 'Studied code'), run as they are from a checkout:

- ``munikar``: munikarmanish/bert-sentiment (the package ``bert_sentiment``; pytorch-transformers 1.2);
- ``cheang_bert``: bw-tech/Language-Representation-Models-for-Fine-Grained-Sentiment-Classification,
  Models/BERT-Base-Uncased.ipynb (code cells extracted at run time; transformers as installed);
- ``minzoni_bert``: riccardominzoni/reproducibilitycasestudy, Models/BERT-Base-Uncased.ipynb (same way).

Nothing of theirs is copied here: the worker (``_worker_3p``) imports their modules or executes their notebook
cells from the checkout. Checkouts are found through an environment variable (``FINETUNER_MUNIKAR_PATH``,
``FINETUNER_CHEANG_PATH``, ``FINETUNER_MINZONI_PATH``) or ``<cache dir>/<name>@<commit>``. The interpreter
that runs them is ``FINETUNER_3P_PYTHON`` (default: this one); it needs pytreebank, loguru and, for munikar,
pytorch-transformers 1.2.0.

Shims (declared in capabilities): data written as PTB trees (right-branching, root label on every node) into
a private ``$HOME/stanford_sentiment_treebank``; hub names (bert-base-uncased, bert-large-uncased) mapped to the
local model directory in ``from_pretrained``; for pytorch-transformers the weights copied to
``pytorch_model.bin``; ``fit`` without a test split writes the validation trees as test.txt (the code always
evaluates a test split); the model object from ``from_pretrained`` is kept to predict; DataLoader creations
recorded to observe which split is read.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gru4rec_conformance import child_pythonpath  # noqa: E402
from gru4rec_conformance.datasets.sst5 import Examples, write_root_trees
from gru4rec_conformance.implementations.base import ImplementationUnavailable, RemoteException, cache_dir
from gru4rec_conformance.implementations.registry import register

from .base import FinetunerAdapter, Unsupported

if TYPE_CHECKING:  # adapter modules import cheaply (registry)
    pass

#: What the studied code does regardless of any configuration (docs/finetuner.md, 'The studied pipeline'): values a check may ask for.
FIXED = {
    "optimizer": "adam",
    "learning_rate": 1e-5,
    "weight_decay": 0.0,
    "warmup_ratio": 0.0,
    "schedule": "constant",
    "clip_norm": None,
    "drop_last": False,
    "monitor": "val_loss",
}


class _ThirdParty(FinetunerAdapter):
    code: str = ""
    repo: str = ""
    commit: str = ""
    env_var: str = ""
    needs: tuple[str, ...] = ("pytreebank", "loguru", "transformers")
    marker: str = ""  # a file that must exist in the checkout
    hub_names = ("bert-base-uncased", "bert-large-uncased")
    default_batch_size = 8
    has_patience = False

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self._state: str | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix=f"ft3p_{self.code}_")
        self._calls = 0
        self._split_log: list[dict] = []
        self._attempts: list = []
        self._env_changes: dict = {}
        self.batch_size = self.default_batch_size

    # -------------------------------------------------------------- location
    def checkout(self) -> Path:
        env = os.environ.get(self.env_var)
        path = Path(env) if env else Path(cache_dir()) / f"{self.code}@{self.commit}"
        if not (path / self.marker).is_file():
            raise ImplementationUnavailable(
                f"{self.name}: checkout of {self.repo} not found: set {self.env_var} to a checkout at commit "
                f"{self.commit[:12]} (git worktree add / git archive of the repository) or put it at {path}"
            )
        return path

    _probed: dict = {}

    def python(self) -> str:
        py = os.environ.get("FINETUNER_3P_PYTHON", sys.executable)
        key = (py, self.needs)
        if key not in _ThirdParty._probed:  # one import probe per interpreter and process
            probe = subprocess.run(
                [
                    py,
                    "-c",
                    "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) "
                    f"is None for m in {list(self.needs)!r}))",
                ],
                capture_output=True,
                text=True,
            )
            _ThirdParty._probed[key] = probe.returncode == 0
        if not _ThirdParty._probed[key]:
            raise ImplementationUnavailable(
                f"{self.name}: interpreter {py} lacks {', '.join(self.needs)}: set FINETUNER_3P_PYTHON to a "
                "Python with them (see implementations/finetuner/README.md)"
            )
        return py

    def version(self) -> str:
        return f"{self.repo}@{self.commit[:12]}"

    def capabilities(self) -> dict:
        self.checkout()
        hp = {"max_epochs": 30 if self.code != "minzoni_bert" else 10, "batch_size": self.default_batch_size}
        if self.has_patience:
            hp["patience"] = 5
        return {
            "models": {"bert"},
            "early_stopping": self.has_patience,
            "hyperparameters": hp,
            "shims": [
                "SST data written as right-branching PTB trees (root label on every node) in a private "
                "$HOME/stanford_sentiment_treebank",
                "hub names mapped to the local model directory in from_pretrained",
                "fit() without a test split writes the validation trees as test.txt",
                "encode/predict/evaluate run train() with zero epochs on tree files holding the texts "
                "(repeated past pytreebank's 100-byte download threshold), then the kept model",
                "model object kept from from_pretrained to predict; DataLoader creations recorded",
            ]
            + (
                [
                    "weights copied to pytorch_model.bin (and vocab.txt written from the tokenizer) for "
                    "pytorch-transformers"
                ]
                if self.code == "munikar"
                else []
            ),
            "framework": {"name": "torch", "version": "as installed for FINETUNER_3P_PYTHON"},
        }

    # -------------------------------------------------------------- jobs
    def _spec_path(self) -> str:
        """The local model directory of the built spec (build() refuses a spec without one).

        Raises RuntimeError before build()."""
        if self.spec is None or self.spec.path is None:
            raise RuntimeError(f"{self.name}: call build() first")
        return self.spec.path

    def _model_dir(self) -> str:
        if self.code != "munikar":
            return self._spec_path()
        d = Path(self._tmp.name) / "model_pt"
        if not d.exists():
            import torch
            from safetensors.torch import load_file

            d.mkdir()
            for f in Path(self._spec_path()).iterdir():
                if f.suffix in (".json", ".txt"):
                    shutil.copy(f, d / f.name)
            weights = Path(self._spec_path()) / "model.safetensors"
            torch.save(load_file(str(weights)), d / "pytorch_model.bin")
            if not (d / "vocab.txt").exists():  # pytorch-transformers reads only vocab.txt
                from transformers import AutoTokenizer

                vocab = AutoTokenizer.from_pretrained(self._spec_path(), local_files_only=True).get_vocab()
                (d / "vocab.txt").write_text(
                    "".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda x: x[1])), encoding="utf-8"
                )
        return str(d)

    def _job(
        self,
        train: Examples,
        val: Examples,
        test: Examples,
        epochs: int,
        *,
        predict: Examples | None = None,
        state_in: str | None = None,
        patience: int | None = None,
    ) -> dict:
        self._calls += 1
        work = Path(self._tmp.name) / f"call{self._calls}"
        home = work / "home"
        trees = home / "stanford_sentiment_treebank"
        trees.mkdir(parents=True)
        for name, ex in (("train", train), ("dev", val), ("test", test)):
            if predict is not None:  # no epoch runs: these files only have to keep load_sst() from downloading
                ex = ex.subset(list(range(len(ex))) * (1 + 200 // max(1, sum(len(t) for t in ex.texts))))
            write_root_trees(ex, trees / f"{name}.txt")
            if (trees / f"{name}.txt").stat().st_size <= 100:
                raise ValueError(
                    f"{self.name}: {name} split too small for pytreebank (file <= 100 bytes would trigger its download)"
                )
        kwargs: dict[str, Any] = {
            "root": True,
            "binary": self.num_labels == 2,
            "bert": "bert-base-uncased",
            "epochs": epochs,
            "batch_size": self.batch_size,
            "save": False,
        }
        if self.has_patience:
            kwargs["patience"] = patience if patience is not None else max(epochs, 1)
        job: dict[str, Any] = {
            "impl": self.code,
            "checkout": str(self.checkout()),
            "model_dir": self._model_dir(),
            "hub_names": list(self.hub_names),
            "train_kwargs": kwargs,
            "out": str(work),
            "state_out": str(work / "model_state.pt"),
            "state_in": state_in,
            "threads": 1,
        }
        if predict is not None:
            write_root_trees(predict, work / "predict.txt")
            job.update(predict_trees=str(work / "predict.txt"), evaluate=True)
        (work / "job.json").write_text(json.dumps(job), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON",))}
        env.update(
            HOME=str(home),
            PYTHONPATH=child_pythonpath(),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            OMP_NUM_THREADS="1",
        )
        proc = subprocess.run(
            [self.python(), "-m", "gru4rec_conformance.implementations.finetuner._worker_3p", str(work / "job.json")],
            cwd=str(work),
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        res_path = work / "result.json"
        if not res_path.exists():
            last = next((ln for ln in reversed(proc.stderr.splitlines()) if ln.strip()), "")
            raise self._remote(f"worker died (exit {proc.returncode})", last, proc.stderr[-3000:])
        res = json.loads(res_path.read_text(encoding="utf-8"))
        self._attempts += res.get("network_attempts", [])
        self._env_changes.update({k: v for k, v in res.get("env_changes", {}).items() if k != "HOME"})
        res["state"] = job["state_out"] if Path(job["state_out"]).exists() else None
        return res

    def _remote(self, what: str, error: str, tail: str) -> RemoteException:
        """The exception for a failure in the worker: ``error`` is its last line (``"Type: message"``), so a module
        missing from ``FINETUNER_3P_PYTHON`` reads as an environment error (with the set-up advice), not as a
        finding of the code."""
        remote_type, remote_message = RemoteException.split(error)
        how = (
            f"set FINETUNER_3P_PYTHON to an interpreter with requirements.lock and the code's own pins installed "
            f"(implementations/finetuner/README.md; now {os.environ.get('FINETUNER_3P_PYTHON', sys.executable)})"
        )
        return RemoteException(f"{self.name}: {what}: {error}\n{tail}", remote_type, remote_message, how=how)

    def _predict_job(self, examples: Examples) -> dict:
        if self.spec is None:
            raise RuntimeError(f"{self.name}: call build() first")
        zero = 0 if self.has_patience else 1  # range(1, epochs[+1]) runs no epoch
        res = self._job(examples, examples, examples, zero, predict=examples, state_in=self._state)
        if self._state is None:  # the code seeds nothing: keep the first built model for this adapter's life
            self._state = res.get("state")
        if "logits" not in res:
            raise self._remote("no prediction", res.get("error") or "", res.get("traceback", ""))
        return res

    # -------------------------------------------------------------- protocol
    def build(self, seed: int = 0, *, model_spec=None, num_labels: int = 5) -> None:
        self.python()
        if model_spec is None or model_spec.path is None:
            raise Unsupported("model_spec", "the code loads models with from_pretrained from a directory")
        if num_labels not in (2, 5):
            raise Unsupported("num_labels", "the code has fine-grained (5) and binary (2) modes only")
        self.checkout()
        self.spec, self.num_labels, self.seed = model_spec, num_labels, int(seed)
        self._state = None  # the seed cannot be passed: the code sets none

    def encode(self, texts: Sequence[str], max_length: int | None = None) -> dict:
        if max_length is not None:
            raise Unsupported("encode_max_length", "the code pads and cuts to a fixed 66")
        res = self._predict_job(Examples.from_lists(list(texts), [0] * len(texts), split="encode"))
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(self._spec_path(), local_files_only=True)
        sp = {"cls": tok.cls_token_id, "sep": tok.sep_token_id, "pad": tok.pad_token_id, "bos": None, "eos": None}
        return {
            "input_ids": res["encoded"],
            "attention_mask": None,
            "special_ids": sp,
            "n_truncated": None,
            "max_length": 66,
        }

    def _config(self, config: Mapping[str, Any] | None) -> dict:
        cfg = dict(config or {})
        for k, v in cfg.items():
            if k in FIXED and v != FIXED[k]:
                raise Unsupported(k, f"the code always uses {FIXED[k]!r}")
            if k == "patience" and v is not None and not self.has_patience:
                raise Unsupported("patience", "the code has no early stopping")
            if k in ("seed", "init_seed", "data_seed") and v is not None and v != self.seed:
                raise Unsupported(k, "the code sets no seed")
            if k not in FIXED and k not in (
                "max_epochs",
                "batch_size",
                "eval_batch_size",
                "patience",
                "seed",
                "init_seed",
                "data_seed",
                "restore_best",
                "min_delta",
            ):
                raise Unsupported(k, "not a parameter of the code's train()")
            if k == "restore_best" and v:
                raise Unsupported("restore_best", "the code keeps the last weights")
            if k == "min_delta" and v:
                raise Unsupported("min_delta", "the code has no min_delta")
            if k == "eval_batch_size" and v != cfg.get("batch_size", self.default_batch_size):
                raise Unsupported("eval_batch_size", "evaluation uses the training batch size")
        return cfg

    def fit(self, train, val, config: Mapping[str, Any] | None = None) -> dict:
        return self._fit(train, val, val, config)

    def _fit(self, train, val, test, config) -> dict:
        cfg = self._config(config)
        self.batch_size = int(cfg.get("batch_size", self.default_batch_size))
        epochs = int(cfg.get("max_epochs", 30))
        res = self._job(train, val, test, epochs, patience=cfg.get("patience"))
        self._state = res.get("state")
        for d in res["dataloaders"]:
            split = {"train": train.split, "dev": val.split, "test": test.split}.get(d["split"], d["split"])
            self._split_log.append(
                {"split": split, "purpose": "train" if d["split"] == "train" else "evaluate", "n": d["n"]}
            )
        if res.get("error"):
            raise self._remote("the code failed", res["error"], res.get("traceback", "")[-1500:])
        return self._record(res, train, val, epochs)

    def _record(self, res: dict, train, val, epochs_asked: int) -> dict:
        rows, cur = [], None
        for line in res["log"].splitlines():
            m = re.match(r"epoch=(\d+)", line)
            if m:
                cur = {"epoch": int(m.group(1))}
                rows.append(cur)
            elif cur is not None and line.startswith("train_loss="):
                cur.update({k: float(v) for k, v in re.findall(r"(\w+)=([-\d.e]+)", line)})
            elif cur is not None and line.startswith("train_acc="):
                cur.update({k: float(v) for k, v in re.findall(r"(\w+)=([-\d.e]+)", line)})
        loaders = res["dataloaders"]
        n_train = next((d["n"] for d in loaders if d["split"] == "train"), 0)
        n_val = next((d["n"] for d in loaders if d["split"] == "dev"), 0)
        steps = -(-n_train // self.batch_size)
        epochs = [
            {
                "epoch": r["epoch"],
                "train_loss": r.get("train_loss"),
                "val_loss": r.get("val_loss"),
                "val_accuracy": r.get("val_acc"),
                "val_macro_f1": None,
                "test_loss": r.get("test_loss"),
                "test_accuracy": r.get("test_acc"),
                "steps": steps,
                "cumulative_steps": steps * r["epoch"],
            }
            for r in rows
        ]
        stopped_early = "Done with Early Stopping" in res["log"]
        return {
            "epochs": epochs,
            "selected_epoch": len(epochs),
            "stopped_epoch": len(epochs),
            "stop_reason": "patience" if stopped_early else "max_epochs",
            "monitor": "val_loss",
            "selected_val_metric": epochs[-1]["val_loss"] if epochs else math.nan,
            "selected_checkpoint": "last weights (no selection)",
            "n_examples": {"train": n_train, "val": n_val},
            "epochs_asked": epochs_asked,
            "collapsed": None,
            "collapse_reasons": None,
            "files_written": res.get("files", []),
        }

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        res = self._predict_job(Examples.from_lists(list(texts), [0] * len(texts), split="predict"))
        return np.asarray(res["logits"], dtype=np.float32)

    def evaluate(self, examples, *, _log: bool = True) -> dict:
        res = self._predict_job(examples)
        if _log:
            self._split_log.append({"split": examples.split, "purpose": "evaluate", "n": len(examples)})
        if res.get("own_evaluation_error"):
            raise RuntimeError(f"{self.name}: the code's evaluate_one_epoch failed: {res['own_evaluation_error']}")
        logits = np.asarray(res["logits"], dtype=np.float32)
        own = res.get("own_evaluation", {})
        preds = [int(p) for p in logits.argmax(1)] if len(logits) else []
        return {
            "accuracy": own.get("accuracy"),
            "mean_ce": own.get("loss"),
            "macro_f1": None,
            "confusion_matrix": None,
            "n": own.get("n", len(preds)),
            "predictions": preds,
            "ids": list(examples.ids)[: len(preds)],
            "n_truncated": None,
        }

    def run(
        self, train, val, test, config=None, *, seed: int = 0, model_spec=None, num_labels=None, out_dir=None
    ) -> dict:
        if model_spec is not None:
            self.build(seed, model_spec=model_spec, num_labels=num_labels or train.num_labels)
        rec = self._fit(train, val, test, config)
        test_loaders = [e for e in self._split_log if e["split"] == test.split]
        rec["test"] = {
            "n": test_loaders[-1]["n"] if test_loaders else 0,
            "accuracy": rec["epochs"][-1].get("test_accuracy") if rec["epochs"] else None,
            "ids": None,
            "predictions": None,
            "n_truncated": None,
            "note": "the code's own last-epoch test evaluation (no prediction file)",
        }
        if out_dir is not None:
            raise Unsupported("save_pretrained", "the code saves pickles in its working directory only")
        return rec

    def split_log(self) -> list[dict]:
        return list(self._split_log)

    def network_attempts(self) -> list:
        return list(self._attempts)

    def environment_changes(self) -> dict:
        return dict(self._env_changes)


@register
class MunikarAdapter(_ThirdParty):
    name = "munikar"
    description = "Munikar et al. 2019 bert_sentiment package (pytorch-transformers 1.2)"
    code = "munikar"
    repo = "munikarmanish/bert-sentiment"
    homepage = "https://github.com/munikarmanish/bert-sentiment"
    commit = "9651ee76863b95a0d0fb41903d41a01da0a8f6ee"
    env_var = "FINETUNER_MUNIKAR_PATH"
    marker = "bert_sentiment/train.py"
    needs = ("pytreebank", "loguru", "pytorch_transformers")
    default_batch_size = 32


@register
class CheangBertAdapter(_ThirdParty):
    name = "cheang_bert"
    description = "Cheang et al. 2020 BERT-base notebook, run with the installed transformers"
    code = "cheang_bert"
    repo = "bw-tech/Language-Representation-Models-for-Fine-Grained-Sentiment-Classification"
    homepage = "https://github.com/bw-tech/Language-Representation-Models-for-Fine-Grained-Sentiment-Classification"
    commit = "b4fe752f2dcb98b4a589882400bc4d5d3b5f2595"
    env_var = "FINETUNER_CHEANG_PATH"
    marker = "Models/BERT-Base-Uncased.ipynb"


@register
class MinzoniBertAdapter(_ThirdParty):
    name = "minzoni_bert"
    description = "the reproduction's BERT-base notebook, run with the installed transformers"
    code = "minzoni_bert"
    repo = "riccardominzoni/reproducibilitycasestudy"
    homepage = "https://github.com/riccardominzoni/reproducibilitycasestudy"
    commit = "37087184200814fee2a61529ba71e631dd45fe7e"
    env_var = "FINETUNER_MINZONI_PATH"
    marker = "Models/BERT-Base-Uncased.ipynb"
    has_patience = True
