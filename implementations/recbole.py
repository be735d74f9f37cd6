"""recbole 1.2.1 ``recbole.model.sequential_recommender.GRU4Rec`` (Tan et al. 2016 style; not in the study).

docs/implementations.md, 'Packages from PyPI', recbole: every prefix of a session is a separate, padded training sample (the GRU restarts
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

White-box hooks reach into the objects ``fit`` built (the ``GRU4Rec`` nn.Module, the ``Trainer`` with its optimizer,
the ``TrainDataLoader`` with its negative sampler); every one is declared in ``shims``:

- ``get_weights``/``set_weights``: the module's parameters under their torch names, ``item_embedding.weight`` rows
  in :meth:`item_ids` order without the ``[PAD]`` row (torch's GRU gate order: reset, update, candidate);
- ``loss_on_scores``: the loss module recbole's GRU4Rec builds (``nn.CrossEntropyLoss``; ``BPRLoss`` with every
  other column of a row as that row's negatives);
- ``train_step``/``train_forward``: each transition is a one-item prefix sample (recbole's own layout) through
  ``calculate_loss``/``forward``; ``train_step`` repeats the loop body of ``Trainer._train_epoch`` (zero_grad,
  calculate_loss, backward, clip_grad_norm if configured, optimizer.step) with the trainer's optimizer, BPR
  negatives drawn by the training data loader's own ``_neg_sampling``;
- ``trace``: one ``StepTrace`` per ``calculate_loss`` call of ``fit``: each row is a prefix sample, its session,
  the position of its input event, and the norm of the GRU state entering that event (the last GRU layer's
  output at the previous position, zero at a session start: every sample runs from the zero state);
- ``score_stream``/``evaluate``: every test event after the first of its session is a prefix sample (recbole's
  augmentation layout), batched and scored by ``Trainer._full_sort_batch_eval`` (``full_sort_predict``, the
  ``[PAD]`` column masked); ``evaluate`` feeds the batches to recbole's ``Collector``/``Evaluator`` (Recall, MRR,
  ``topk`` = the cutoffs, ``metric_decimal_place`` 12 instead of the display default 4), as ``Trainer.evaluate``.

Official names: ``layers`` → ``hidden_size``/``num_layers`` (one width); ``constrained_embedding`` (True only;
the embedding size is set to ``layers[-1]`` as in the official shared mode), ``dropout_p_embed`` →
``dropout_prob``, ``loss`` cross-entropy → ``CE`` / bpr → ``BPR`` (one uniform negative), ``learning_rate``,
``batch_size`` → ``train_batch_size``, ``n_epochs`` → ``epochs``, ``optimizer`` → ``learner``. Everything else
raises ``Unsupported``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from gru4rec_conformance.implementations._torchbase import (
    FitObserver,
    PackagedTorchAdapter,
    diagonal_split,
    loss_and_gradient,
    raw_gru_declarations,
    refuse_loss_arguments,
    torch_framework,
)
from gru4rec_conformance.implementations.base import Capabilities, FitReport, StepTrace, Unsupported
from gru4rec_conformance.implementations.registry import register

_LOSS = {"cross-entropy": "CE", "bpr": "BPR"}
_LEARNERS = ("adam", "adagrad", "sgd", "rmsprop", "sparse_adam")
_MAX_LEN = 50  # RecBole's MAX_ITEM_LIST_LENGTH default (properties/dataset/sample.yaml)


@register
class RecboleGRU4RecAdapter(PackagedTorchAdapter):
    """recbole 1.2.1 GRU4Rec through RecBole's own Config / dataset / Trainer pipeline."""

    name = "recbole"
    label = "RecboleGRU4RecAdapter"
    description = "recbole 1.2.1 GRU4Rec (Tan et al. 2016: padded prefix samples, tied embedding, Adam)"
    homepage = "https://pypi.org/project/recbole/1.2.1/"
    package = ("recbole", "recbole", "run the checks with `tox -e recbole` (installs recbole==1.2.1 with numpy 1.26)")
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
        self.model: Any = None  # recbole objects (recbole is untyped): the GRU4Rec module and its Dataset
        self.dataset: Any = None
        self._cols: np.ndarray | None = None
        self._tmp: str | None = None
        self.trainer: Any = None
        self.train_data: Any = None
        self._rank_session: np.ndarray | None = None
        self._rank_position: np.ndarray | None = None
        self._traces: list[StepTrace] | None = None

    def capabilities(self) -> dict[str, Any]:
        self._require_package()
        return {
            "losses": ["cross-entropy", "bpr"],
            "embedding_modes": ["shared"],
            **Capabilities.flags("dropout_embed", "full_ranking"),
            "devices": ["cpu"],
            "framework": torch_framework(),
            "shims": [
                "session frame written as a RecBole atomic .inter file (timestamp = event rank), read by "
                "RecBole's Config/create_dataset; every prefix sample trains (no RecBole split)",
                "Trainer.fit(valid_data=None, saved=False): no best-model reload (torch>=2.6 weights-only load fails)",
                "torch.autograd.set_detect_anomaly(False) after import (recbole's sine.py turns it on globally)",
                "score_prefixes: full_sort_predict on right-padded prefixes (last 50 items); [PAD] column "
                "dropped; an empty prefix is the single padding item (zero embedding = zero state)",
                "FitReport observed by wrapping the instance methods calculate_loss and Trainer._train_epoch",
                "get/set_weights: item_embedding rows in item_ids() order, [PAD] row left out (untouched)",
                "loss_on_scores: recbole's loss modules (CrossEntropyLoss; BPRLoss with a row's other columns as "
                "its negatives, broadcast)",
                "train_step/train_forward: each transition is a one-item prefix sample; train_step repeats "
                "Trainer._train_epoch's loop body with the trainer's optimizer and the loader's _neg_sampling",
                "trace: StepTrace per calculate_loss call (rows = prefix samples; h_in = the last GRU layer's "
                "output before the input event, captured by a forward hook on gru_layers)",
                "score_stream/evaluate: test prefixes (last 50 known items) scored in batches by "
                "Trainer._full_sort_batch_eval; evaluate through recbole's Collector/Evaluator (Recall, MRR) "
                "with metric_decimal_place 12",
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
            **raw_gru_declarations(),
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
            raise Unsupported("layers:unequal", f"recbole's nn.GRU layers share one hidden_size, got {layers}")
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
        self._rank_session = df["SessionId"].to_numpy(dtype=np.int64)
        self._rank_position = df.groupby("SessionId", sort=False).cumcount().to_numpy(dtype=np.int64)
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
        self._traces = [] if self._trace_on else None
        self.trainer = trainer  # the trace reads its optimizer's learning rate during fit
        observer = _Observer(model, trainer, self._trace_record if self._trace_on else None)
        try:
            if epochs > 0:
                trainer.fit(train_data, valid_data=None, saved=False, show_progress=False)
        finally:
            observer.detach()
        model.eval()
        self.model, self.dataset, self.trainer, self.train_data = model, dataset, trainer, train_data
        tokens = dataset.id2token(dataset.iid_field, np.arange(1, dataset.item_num))
        self._cols = np.arange(1, dataset.item_num)
        ids = np.asarray([int(t) for t in tokens], dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        self._item_ids, self._cols = ids[order], self._cols[order]
        self._index = {int(i): int(c) for i, c in zip(self._item_ids, self._cols)}
        observer.trace = self._traces
        return observer.report()

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

    # -- black-box+ and white-box hooks ------------------------------------------------------------------
    def _fitted_model(self) -> Any:
        """The GRU4Rec module once ``fit`` has built it and its trainer and item columns, else None."""
        return None if self.trainer is None or self._cols is None else self.model

    def _fitted_optimizer(self) -> Any:
        """The trainer's torch optimizer (``Trainer._build_optimizer`` from ``learner``), None before ``fit``."""
        return None if self.trainer is None else self.trainer.optimizer

    def _weight_rows(self) -> Mapping[str, Any]:
        """``item_embedding.weight``'s rows in :meth:`item_ids` order, without ``[PAD]``."""
        return {"item_embedding.weight": self._cols}

    def _prefix_interaction(self, prefixes: Sequence[Sequence[int]], targets: Any = None) -> Any:
        """A recbole ``Interaction`` of prefix samples (recbole ids, the last 50 of each, right-padded with 0;
        an empty prefix is the single padding item), with ``item_id`` = ``targets`` (recbole ids) when given."""
        import torch
        from recbole.data.interaction import Interaction

        rows = [list(p)[-_MAX_LEN:] or [0] for p in prefixes]
        seq = torch.zeros((len(rows), _MAX_LEN), dtype=torch.long)
        for r, known in enumerate(rows):
            seq[r, : len(known)] = torch.as_tensor(known, dtype=torch.long)
        data = {"item_id_list": seq, "item_length": torch.as_tensor([len(k) for k in rows], dtype=torch.long)}
        if targets is not None:
            data["item_id"] = torch.as_tensor(np.asarray(targets, dtype=np.int64))
        return Interaction(data)

    def _mapped(self, ids: Any, what: str) -> list[int]:
        out = [self._index.get(int(i)) for i in np.asarray(ids).ravel()]
        if any(v is None for v in out):
            raise ValueError(f"{what}: item id(s) unknown to the trained model")
        return [int(v) for v in out if v is not None]

    def _test_samples(self, test_df: Any) -> list[tuple[int, int, int, list[int]]]:
        """(session id, position, target item id, prefix in recbole ids) of every test event after the first
        known one of its session; events of unknown items are dropped first (positions count known items)."""
        df = test_df.sort_values(["SessionId", "Time"], kind="stable")
        out = []
        for sid, items in zip(*_sessions(df)):
            known = [int(i) for i in items if int(i) in self._index]
            for pos in range(1, len(known)):
                out.append((int(sid), pos, known[pos], [self._index[i] for i in known[:pos]]))
        return out

    def _eval_batches(self, samples: Sequence[tuple[int, int, int, list[int]]], batch_size: int) -> Iterator[Any]:
        """(batch samples, Interaction, positive_u, positive_i, scores (b, item_num)) per batch of test samples,
        scored by ``Trainer._full_sort_batch_eval`` (its ``[PAD]`` column is -inf)."""
        import torch

        model = self._require_model()
        model.eval()
        self.trainer.tot_item_num = self.dataset.item_num  # what Trainer.evaluate sets before its loop
        for start in range(0, len(samples), max(int(batch_size), 1)):
            chunk = samples[start : start + max(int(batch_size), 1)]
            targets = [self._index[t] for _, _, t, _ in chunk]
            inter = self._prefix_interaction([p for _, _, _, p in chunk], targets)
            pos_u = torch.arange(len(chunk), dtype=torch.long)
            pos_i = torch.as_tensor(targets, dtype=torch.long)
            with torch.no_grad():
                inter, scores, pos_u, pos_i = self.trainer._full_sort_batch_eval((inter, None, pos_u, pos_i))
            yield chunk, inter, pos_u, pos_i, scores

    def score_stream(self, test_df: Any, batch_size: int) -> Iterator[tuple[Any, ...]]:
        """recbole's evaluation scoring over the test events: rows in :meth:`item_ids` order (``[PAD]`` dropped).
        recbole keeps no state across samples: each event's prefix runs from the zero state."""
        assert self._cols is not None
        for chunk, _inter, _u, _i, scores in self._eval_batches(self._test_samples(test_df), batch_size):
            rows = scores.cpu().numpy()[:, self._cols]
            for (sid, pos, target, _p), row in zip(chunk, rows):
                yield sid, pos, target, row

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict[str, Any]:
        """recbole's ``Collector``/``Evaluator`` (Recall, MRR at ``cutoffs``) over the test prefix samples, as
        ``Trainer.evaluate`` runs them. Ties: ``torch.topk`` order (recbole declares no tie rule)."""
        from recbole.evaluator import Collector, Evaluator

        self._require_model()
        config = self.trainer.config
        config["metrics"], config["topk"], config["metric_decimal_place"] = ["Recall", "MRR"], list(cutoffs), 12
        collector, evaluator = Collector(config), Evaluator(config)
        samples = self._test_samples(test_df)
        if not samples:
            return {**{f"{m}@{k}": float("nan") for m in ("recall", "mrr") for k in cutoffs}, "n_events": 0}
        for _chunk, inter, pos_u, pos_i, scores in self._eval_batches(samples, batch_size):
            collector.eval_batch_collect(scores, inter, pos_u, pos_i)
        collector.model_collect(self.model)
        result = evaluator.evaluate(collector.get_data_struct())
        out: dict[str, Any] = {str(k).lower(): float(v) for k, v in result.items()}
        out["n_events"] = len(samples)
        return out

    def get_weights(self) -> dict[str, Any]:
        """The GRU4Rec module's parameters under their torch names (``item_embedding.weight`` (I, k) in
        :meth:`item_ids` order without ``[PAD]``; ``gru_layers.weight_ih_l<k>``/``weight_hh_l<k>`` (3d, ·) with
        torch's gate blocks reset, update, candidate; ``dense.weight``/``dense.bias``); ``set_weights`` loads
        arrays in this layout, the ``[PAD]`` row untouched."""
        return super().get_weights()

    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        """recbole GRU4Rec's loss module on a (b, K) score matrix whose diagonal holds the targets:
        ``nn.CrossEntropyLoss`` over the K columns (target column i for row i), or ``BPRLoss(pos, neg)`` with pos =
        the diagonal (b, 1) and neg = the row's other K−1 columns (recbole passes one negative per row; its loss
        is elementwise and averages over all pairs). No loss argument is settable: ``final_act='linear'``,
        ``elu_param=0``, ``logq=0``, ``bpreg=0`` describe what recbole computes and are accepted; other values
        raise :class:`Unsupported`. Returns (value, dL/dscores)."""
        import torch

        if loss not in _LOSS:
            raise Unsupported(f"loss:{loss}", "recbole GRU4Rec loss_type: CE (cross-entropy) or BPR")
        refuse_loss_arguments(hparams, f"recbole's {loss} loss")
        from recbole.model.loss import BPRLoss

        def loss_of(R: Any) -> Any:
            if loss == "cross-entropy":
                return torch.nn.CrossEntropyLoss()(R, torch.arange(R.shape[0]))
            return BPRLoss()(*diagonal_split(R))

        return loss_and_gradient(scores, loss_of)

    def _with_negatives(self, inter: Any) -> Any:
        """BPR: the training loader's own negative sampling (one per row) joined to ``inter`` (session id 0)."""
        import torch

        if self.hparams["loss"] != "bpr":
            return inter
        inter.update(type(inter)({"session_id": torch.zeros(len(inter), dtype=torch.long)}))
        return self.train_data._neg_sampling(inter)

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One update as the loop body of ``Trainer._train_epoch``: zero_grad, ``calculate_loss`` on the b
        one-item prefix samples input → target (BPR: negatives from the loader's ``_neg_sampling``), backward,
        ``clip_grad_norm_`` when configured, the trainer's optimizer step. Returns recbole's loss (batch mean).
        A given ``hidden`` state cannot enter recbole's samples (each runs from zero): Unsupported."""
        import torch
        from torch.nn.utils import clip_grad_norm_

        if hidden is not None:
            raise Unsupported("train_step:hidden", "recbole runs every prefix sample from the zero state")
        model = self._require_model()
        x = self._mapped(batch_inputs, "batch_inputs")
        t = self._mapped(batch_targets, "batch_targets")
        if len(x) != len(t) or not x:
            raise ValueError("batch_inputs/batch_targets: expected equally many (>= 1) item ids")
        inter = self._with_negatives(self._prefix_interaction([[i] for i in x], t))
        trainer = self.trainer
        model.train()
        trainer.optimizer.zero_grad()
        loss = model.calculate_loss(inter)
        loss.backward()
        if trainer.clip_grad_norm:
            clip_grad_norm_(model.parameters(), **trainer.clip_grad_norm)
        trainer.optimizer.step()
        model.eval()
        with torch.no_grad():
            return float(loss.detach())

    def train_forward(self, prefix_batch: Any, seed: int) -> dict[str, Any]:
        """recbole's training-mode ``forward`` on the prefix samples ``s[:-1]`` with target ``s[-1]``
        (``torch.manual_seed(seed)`` first: ``emb_dropout`` uses torch's global RNG). ``embedding_out``: the
        dropped-out embedding of the input (last) item (forward hook on ``emb_dropout``); ``layer_outputs``: each
        GRU layer's output at the input item (``nn.GRU``'s h_n: the samples have no padding; recbole has no
        hidden dropout); ``scores``: CE the (b, I) logits over every item (the ``[PAD]`` column dropped from
        ``scores``, counted in ``score_tensor_shape``), BPR the (b, 2) target and sampled-negative scores;
        ``output_rows_touched``: rows of the (tied) item embedding with a non-zero gradient of the step's loss."""
        import torch

        model = self._require_model()
        seqs = [self._mapped(s, "prefix_batch") for s in prefix_batch]
        if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2:
            raise ValueError("prefix_batch: expected b >= 1 item sequences of one common length >= 2")
        b = len(seqs)
        hist = [s[:-1][-_MAX_LEN:] for s in seqs]
        seq = torch.as_tensor(hist, dtype=torch.long)
        lengths = torch.full((b,), seq.shape[1], dtype=torch.long)
        targets = torch.as_tensor([s[-1] for s in seqs], dtype=torch.long)
        captured: dict[str, Any] = {}
        handles = [
            model.emb_dropout.register_forward_hook(lambda m, a, o: captured.__setitem__("emb", o.detach())),
            model.gru_layers.register_forward_hook(lambda m, a, o: captured.__setitem__("h_n", o[1].detach())),
        ]
        model.train()
        model.zero_grad()
        torch.manual_seed(int(seed))
        try:
            seq_output = model.forward(seq, lengths)
        finally:
            for h in handles:
                h.remove()
        weight = model.item_embedding.weight
        if self.hparams["loss"] == "bpr":
            inter = self._with_negatives(self._prefix_interaction(hist, targets.numpy()))
            cols = torch.stack([targets, inter["neg_item_id"]], dim=1)
            R = (seq_output.unsqueeze(1) * model.item_embedding(cols)).sum(-1)  # calculate_loss's pos/neg scores
            loss = model.loss_fct(R[:, 0], R[:, 1])
            scores, columns, shape = R, np.asarray(self.dataset.id2token("item_id", cols.numpy())), tuple(R.shape)
        else:
            logits = torch.matmul(seq_output, weight.transpose(0, 1))  # calculate_loss's CE logits
            loss = model.loss_fct(logits, targets)
            scores, columns, shape = logits[:, self._cols], self.item_ids().copy(), tuple(logits.shape)
        loss.backward()
        assert weight.grad is not None
        rows = int((weight.grad.abs().sum(1) > 0).sum())
        model.zero_grad()
        model.eval()
        return {
            "embedding_out": captured["emb"][:, -1, :].cpu().numpy(),
            "layer_outputs": [h.cpu().numpy() for h in captured["h_n"]],
            "scores": scores.detach().cpu().numpy(),
            "columns": columns.astype(np.int64),
            "score_tensor_shape": shape,
            "output_rows_touched": rows,
        }

    def trace(self, enable: bool = True) -> None:
        """Record one :class:`StepTrace` per optimizer step of the following ``fit`` calls: a lane is a row of the
        step's batch of prefix samples (its session, the position of its input event in the session, the norm
        of the last GRU layer's output before that event, 0 at a session start), ``n_active`` the batch's rows,
        ``negative_ids`` None (BPR negatives are per row, not shared), the optimizer's learning rate."""
        super().trace(enable)

    def _trace_record(self, interaction: Any, gru_output: Any) -> None:
        assert self._traces is not None and self._rank_session is not None and self._rank_position is not None
        ranks = interaction["timestamp"].numpy().astype(np.int64)  # the target's event rank (see fit)
        lengths = interaction["item_length"].numpy().astype(np.int64)
        norms = np.zeros(len(ranks), dtype=np.float64)
        if gru_output is not None:
            for r, n in enumerate(lengths):
                if n >= 2:
                    norms[r] = float(gru_output[r, n - 2].norm())
        self._traces.append(
            StepTrace(
                session_ids=self._rank_session[ranks],
                positions=self._rank_position[ranks] - 1,
                h_in_norms=norms,
                n_active=len(ranks),
                negative_ids=None,
                learning_rate=float(self.trainer.optimizer.param_groups[0]["lr"]),
            )
        )

    def _grad_clip(self) -> Any:
        """recbole's ``clip_grad_norm`` setting (None when unset); recbole's Trainer has no learning-rate schedule."""
        return self.trainer.clip_grad_norm or None


def _sessions(df: Any) -> tuple[list[Any], list[Any]]:
    """Session ids and their item arrays of a frame sorted by (SessionId, Time), in frame order."""
    sids = df["SessionId"].to_numpy()
    items = df["ItemId"].to_numpy(dtype=np.int64)
    if not len(sids):
        return [], []
    starts = np.flatnonzero(np.r_[True, sids[1:] != sids[:-1]])
    return list(sids[starts]), np.split(items, starts[1:])


class _Observer(FitObserver):
    """Wraps ``calculate_loss`` of one model instance and ``_train_epoch`` of one trainer instance (originals run
    unchanged): per epoch the mean loss per training sample, optimizer steps, samples and seconds. With
    ``on_step`` (tracing), a forward hook on ``model.gru_layers`` keeps the step's GRU output (b, L, d), and
    ``on_step(interaction, gru_output)`` is called after every ``calculate_loss``."""

    def __init__(self, model: Any, trainer: Any, on_step: Any = None) -> None:
        super().__init__()
        calculate_loss, train_epoch = model.calculate_loss, trainer._train_epoch
        captured: dict[str, Any] = {}
        if on_step is not None:
            self.hook(
                model.gru_layers.register_forward_hook(lambda m, a, o: captured.__setitem__("out", o[0].detach()))
            )

        def _calculate_loss(interaction: Any) -> Any:
            captured.clear()
            loss = calculate_loss(interaction)
            if on_step is not None:
                on_step(interaction, captured.get("out"))
            self.count(loss, len(interaction))
            return loss

        self.wrap(model, "calculate_loss", _calculate_loss)
        self.wrap(trainer, "_train_epoch", lambda *args, **kwargs: self.run_epoch(train_epoch, *args, **kwargs))
