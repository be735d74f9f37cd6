"""recbole 1.2.1 ``recbole.model.sequential_recommender.GRU4Rec`` (Tan et al. 2016 style; not in the study).

ecosystem_and_style.md §1.3.3: every prefix of a session is a separate, padded training sample (the GRU restarts
from zero for each), the input item embedding is tied to the output (scores = dense(h) · Eᵀ), CE over all items
or BPR with one sampled negative, embedding dropout only, no GRU biases, Adam by default.

The adapter translates only:

- input: the session frame becomes a RecBole atomic file ``<tmp>/sessions/sessions.inter``
  (``session_id:token``, ``item_id:token``, ``timestamp:float``; the timestamp is the event's rank so that ties
  in ``Time`` cannot reorder a session) read by RecBole's own ``Config`` / ``create_dataset``, which builds the
  prefix samples (``data_augmentation``); no split: every prefix sample is a training sample
  (``TrainDataLoader`` over the whole dataset, RecBole's filters disabled), since the suite owns the test data;
- training: RecBole's ``Trainer.fit(train_data, valid_data=None, saved=False)``: no best-model checkpoint is
  written or reloaded (``load_best_model`` fails on torch >= 2.6 with the weights-only default);
- ``torch.autograd.set_detect_anomaly(False)`` after import: importing ``recbole.model.sequential_recommender``
  runs ``sine.py``, which switches anomaly detection on for the whole process (a side effect of an unrelated
  model that slows every backward pass many times over; it changes no number);
- scoring: ``GRU4Rec.full_sort_predict`` on the prefixes (0-padded on the right, RecBole's layout; the last
  ``MAX_ITEM_LIST_LENGTH`` = 50 items of a longer prefix, as RecBole's own samples); column 0 (``[PAD]``) is
  dropped; an empty prefix is fed as the single padding item, whose embedding is zero, i.e. the zero state;
- ``FitReport``: the *instance* method ``calculate_loss`` of the model the adapter built is wrapped (one call
  per optimizer step: the batch's mean loss and its size) and so is the trainer's ``_train_epoch``.

Official names: ``layers`` → ``hidden_size``/``num_layers`` (one width); ``constrained_embedding`` (True only;
the embedding size is set to ``layers[-1]`` as in the official shared mode), ``dropout_p_embed`` →
``dropout_prob``, ``loss`` cross-entropy → ``CE`` / bpr → ``BPR`` (one uniform negative), ``learning_rate``,
``batch_size`` → ``train_batch_size``, ``n_epochs`` → ``epochs``, ``optimizer`` → ``learner``. Everything else
raises ``Unsupported``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from gru4rec_conformance.implementations.base import (
    Adapter,
    FitReport,
    Unsupported,
    installed_version,
    require_installed,
)
from gru4rec_conformance.implementations.registry import register

_LOSS = {"cross-entropy": "CE", "bpr": "BPR"}
_LEARNERS = ("adam", "adagrad", "sgd", "rmsprop", "sparse_adam")
_MAX_LEN = 50  # RecBole's MAX_ITEM_LIST_LENGTH default (properties/dataset/sample.yaml)


@register
class RecboleGRU4RecAdapter(Adapter):
    """recbole 1.2.1 GRU4Rec through RecBole's own Config / dataset / Trainer pipeline."""

    name = "recbole"
    role = "implementation"
    isolated = True
    description = "recbole 1.2.1 GRU4Rec (Tan et al. 2016: padded prefix samples, tied embedding, Adam)"
    homepage = "https://pypi.org/project/recbole/1.2.1/"
    study = None
    reproducibility = {
        "installs": "only re-pinned: on a fresh Python 3.11 install the import fails (ray<=2.6.3 needs numpy<2 "
        "for np.bool8 and setuptools<81 for pkg_resources)",
        "offline": "yes (no download at run time)",
        "pinned": "tox env 'recbole': recbole==1.2.1, torch==2.13.0, numpy==1.26.4, pandas==2.3.3, "
        "setuptools==80.10.2; recbole pins ray<=2.6.3, colorlog==4.7.2, colorama==0.4.4 only",
        "hyperparameters": "config keys: hidden/embedding size, layers, one (embedding) dropout, lr, batch, "
        "epochs, optimizer; no hidden dropout, no GRU bias, MAX_ITEM_LIST_LENGTH 50",
    }

    def __init__(self, device: str = "cpu", **options: Any) -> None:
        super().__init__(device=device, **options)
        self.hparams: dict[str, Any] = {}
        self.seed = 0
        self.model = None
        self.dataset = None
        self._item_ids: np.ndarray | None = None
        self._cols: np.ndarray | None = None
        self._index: dict[int, int] = {}
        self._tmp: str | None = None

    def version(self) -> str:
        return installed_version("recbole")

    def capabilities(self) -> dict[str, Any]:
        require_installed(
            "recbole", "recbole", "run the checks with `tox -e recbole` (installs recbole==1.2.1 with numpy 1.26)"
        )
        return {
            "losses": ["cross-entropy", "bpr"],
            "embedding_modes": ["shared"],
            "session_parallel": False,
            "in_batch_negatives": False,
            "extra_shared_negatives": False,
            "sample_alpha": False,
            "logq": False,
            "adagrad_momentum": False,
            "dropout_embed": True,
            "dropout_hidden": False,
            "separate_dropouts": False,
            "bpreg": False,
            "full_ranking": True,
            "needs_categories": False,
            "fixed_batch_shape": False,
            "devices": ["cpu"],
            "framework": {"name": "torch", "version": installed_version("torch")},
            "shims": [
                "session frame written as a RecBole atomic .inter file (timestamp = event rank), read by "
                "RecBole's Config/create_dataset; every prefix sample trains (no RecBole split)",
                "Trainer.fit(valid_data=None, saved=False): no best-model reload (torch>=2.6 weights-only load fails)",
                "torch.autograd.set_detect_anomaly(False) after import (recbole's sine.py turns it on globally)",
                "score_prefixes: full_sort_predict on right-padded prefixes (last 50 items); [PAD] column "
                "dropped; an empty prefix is the single padding item (zero embedding = zero state)",
                "FitReport observed by wrapping the instance methods calculate_loss and Trainer._train_epoch",
            ],
            "hyperparameters": {
                "layers": [128],
                "constrained_embedding": True,
                "dropout_p_embed": 0.3,
                "loss": "cross-entropy",
                "learning_rate": 0.001,
                "batch_size": 2048,
                "n_epochs": 300,
                "optimizer": "adam",
            },
            "score_semantics": "raw",
            "eval_tie_mode": None,
            "gate_layout": None,
        }

    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        if hp["loss"] not in _LOSS:
            raise Unsupported(f"loss:{hp['loss']}", "recbole GRU4Rec loss_type: CE (cross-entropy) or BPR")
        if not hp["constrained_embedding"]:
            raise Unsupported("embedding:separate", "recbole's GRU4Rec ties the input embedding to the output")
        if hp["optimizer"] not in _LEARNERS:
            raise Unsupported(f"optimizer:{hp['optimizer']}", f"recbole learners: {', '.join(_LEARNERS)}")
        layers = hp["layers"]
        layers = [int(layers)] if isinstance(layers, (int, np.integer)) else [int(x) for x in layers]
        if len(set(layers)) != 1:
            raise Unsupported("layers", f"recbole's nn.GRU layers share one hidden_size, got {layers}")
        hp["layers"] = layers
        if self.device != "cpu":
            raise Unsupported(f"device:{self.device}", "the adapter runs recbole on the CPU only")
        self.hparams = hp
        self.seed = int(seed)
        self.model = None

    def _config(self, data_path: str, epochs: int):
        from recbole.config import Config

        hp = self.hparams
        cfg = {
            "data_path": data_path, "checkpoint_dir": os.path.join(data_path, "checkpoints"),
            "USER_ID_FIELD": "session_id", "ITEM_ID_FIELD": "item_id", "TIME_FIELD": "timestamp",
            "load_col": {"inter": ["session_id", "item_id", "timestamp"]},
            "user_inter_num_interval": "[0,inf)", "item_inter_num_interval": "[0,inf)",
            "loss_type": _LOSS[hp["loss"]],
            "train_neg_sample_args": ({"distribution": "uniform", "sample_num": 1, "alpha": 1.0, "dynamic": False,
                                       "candidate_num": 0} if hp["loss"] == "bpr" else None),
            "hidden_size": hp["layers"][0], "num_layers": len(hp["layers"]), "embedding_size": hp["layers"][-1],
            "dropout_prob": float(hp["dropout_p_embed"]), "learning_rate": float(hp["learning_rate"]),
            "train_batch_size": int(hp["batch_size"]), "epochs": int(epochs), "learner": hp["optimizer"],
            "seed": self.seed, "reproducibility": True, "device": "cpu", "use_gpu": False, "show_progress": False,
            "state": "ERROR", "log_wandb": False, "eval_step": 0,
        }  # fmt: skip
        return Config(model="GRU4Rec", dataset="sessions", config_dict=cfg)

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        import torch
        from recbole.data import create_dataset
        from recbole.data.dataloader import TrainDataLoader
        from recbole.data.utils import create_samplers
        from recbole.model.sequential_recommender import GRU4Rec
        from recbole.trainer import Trainer
        from recbole.utils import init_seed

        torch.autograd.set_detect_anomaly(False)
        if not self.hparams:
            raise RuntimeError("RecboleGRU4RecAdapter.fit: call build() first")
        epochs = int(self.hparams["n_epochs"] if n_epochs is None else n_epochs)
        self.close()
        self._tmp = tempfile.mkdtemp(prefix="recbole-")
        folder = os.path.join(self._tmp, "sessions")
        os.makedirs(folder)
        df = train_df.sort_values(["SessionId", "Time"], kind="stable")
        with open(os.path.join(folder, "sessions.inter"), "w", encoding="utf-8") as f:
            f.write("session_id:token\titem_id:token\ttimestamp:float\n")
            for s, i, t in zip(df["SessionId"].to_numpy().tolist(), df["ItemId"].to_numpy().tolist(), range(len(df))):
                f.write(f"{s}\t{i}\t{t}\n")
        config = self._config(self._tmp, max(epochs, 1))
        init_seed(config["seed"], config["reproducibility"])
        dataset = create_dataset(config)
        # RecBole's own processing (feature formats, prefix augmentation, order TO) happens in build(); the
        # split datasets it returns are not used: the whole augmented dataset is the training set.
        dataset.build()
        train_sampler, _, _ = create_samplers(config, dataset, [dataset, dataset, dataset])
        train_data = TrainDataLoader(config, dataset, train_sampler, shuffle=config["shuffle"])
        init_seed(config["seed"], config["reproducibility"])
        model = GRU4Rec(config, train_data.dataset).to("cpu")
        trainer = Trainer(config, model)
        observer = _Observer(model, trainer)
        try:
            if epochs > 0:
                trainer.fit(train_data, valid_data=None, saved=False, show_progress=False)
        finally:
            observer.detach()
        model.eval()
        self.model, self.dataset = model, dataset
        tokens = dataset.id2token(dataset.iid_field, np.arange(1, dataset.item_num))
        self._cols = np.arange(1, dataset.item_num)
        ids = np.asarray([int(t) for t in tokens], dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        self._item_ids, self._cols = ids[order], self._cols[order]
        self._index = {int(i): int(c) for i, c in zip(self._item_ids, self._cols)}
        return observer.report()

    def item_ids(self) -> np.ndarray:
        if self._item_ids is None:
            raise RuntimeError("RecboleGRU4RecAdapter.item_ids: call fit() first")
        return self._item_ids

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        import torch
        from recbole.data.interaction import Interaction

        if self.model is None or self._cols is None:
            raise RuntimeError("RecboleGRU4RecAdapter.score_prefixes: call fit() first")
        out = np.empty((len(prefixes), len(self._cols)), dtype=np.float32)
        chunk = 256
        for start in range(0, len(prefixes), chunk):
            rows = []
            for prefix in prefixes[start : start + chunk]:
                known = [self._index[int(i)] for i in prefix if int(i) in self._index][-_MAX_LEN:]
                rows.append(known or [0])
            seq = torch.zeros((len(rows), _MAX_LEN), dtype=torch.long)
            for r, known in enumerate(rows):
                seq[r, : len(known)] = torch.as_tensor(known)
            lengths = torch.as_tensor([len(k) for k in rows], dtype=torch.long)
            with torch.no_grad():
                scores = self.model.full_sort_predict(Interaction({"item_id_list": seq, "item_length": lengths}))
            out[start : start + len(rows)] = scores.cpu().numpy()[:, self._cols]
        return out

    def close(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


class _Observer:
    """Wraps ``calculate_loss`` of one model instance and ``_train_epoch`` of one trainer instance (originals run
    unchanged): per epoch the mean loss per training sample, optimizer steps, samples and seconds."""

    def __init__(self, model: Any, trainer: Any) -> None:
        self.losses: list[float] = []
        self.steps: list[int] = []
        self.events: list[int] = []
        self.seconds: list[float] = []
        calculate_loss, train_epoch = model.calculate_loss, trainer._train_epoch

        def _calculate_loss(interaction: Any) -> Any:
            loss = calculate_loss(interaction)
            n = len(interaction)
            self._sum += float(loss.detach()) * n
            self._n += n
            self._k += 1
            return loss

        def _train_epoch(*args: Any, **kwargs: Any) -> Any:
            self._sum, self._n, self._k = 0.0, 0, 0
            t0 = time.perf_counter()
            out = train_epoch(*args, **kwargs)
            self.seconds.append(time.perf_counter() - t0)
            self.losses.append(self._sum / self._n if self._n else float("nan"))
            self.steps.append(self._k)
            self.events.append(self._n)
            return out

        model.calculate_loss = _calculate_loss
        trainer._train_epoch = _train_epoch
        self._targets = ((model, "calculate_loss"), (trainer, "_train_epoch"))

    def detach(self) -> None:
        """Remove the instance wrappers (the class methods apply again)."""
        for obj, name in self._targets:
            obj.__dict__.pop(name, None)

    def report(self) -> FitReport:
        return FitReport(
            epoch_losses=list(self.losses),
            n_steps=list(self.steps),
            n_events_trained=list(self.events),
            epoch_seconds=list(self.seconds),
        )
