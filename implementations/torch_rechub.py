"""torch-rechub 0.9.0 ``torch_rechub.models.matching.GRU4Rec``: a two-tower retriever named GRU4Rec (negative
control; not in the study).

docs/implementations.md, 'Packages from PyPI', torch-rechub: the "user" tower runs a bias-free GRU over a pre-padded history, concatenates a
user-id embedding, applies an MLP and L2-normalises; items are L2-normalised embeddings; training is a
list-wise softmax (mode 2) over the positive and ``neg_ratio`` negatives fixed per sample at preprocessing
(the pair-wise mode 1 cannot drive this model: its forward returns one tensor); Adam with weight decay by
default. Almost no GRU4Rec feature applies; the suite
is expected to skip most checks as unsupported and to fail the learning checks that a GRU4Rec must pass.

The adapter translates only, through torch-rechub's documented matching pipeline:

- items are remapped to 1..I (0 is torch-rechub's padding id; column order = ascending item id);
- ``generate_seq_feature_match(df, "session_id", "item_id", "time", sample_method=0, mode=2, neg_ratio)``
  builds the (history, target, negatives) samples per session; as in torch-rechub's examples it keeps the
  last transition of every session as its own "test" sample, which the adapter discards (the suite owns the
  test data), so that transition is never trained on;
- ``gen_model_input(..., seq_max_len=50)`` pads histories on the left ('pre');
- the model needs a user-id feature: session ids identify nothing across sessions (test sessions are new),
  so every sample gets the same pseudo-user id 1 (declared shim);
- torch-rechub has no seed argument: ``random``, ``numpy`` and ``torch`` are seeded with the build seed before
  preprocessing and training (declared shim); DataLoaders use ``num_workers=0`` (an argument of
  ``MatchDataGenerator.generate_dataloader``);
- ``layers`` cannot be expressed (the GRU always has 2 layers, see ``build``): the adapter uses 2 layers of the
  embedding width 64; the user-tower MLP is one layer of that width (its output must match the item embedding);
- scoring: ``MatchTrainer.inference_embedding`` in "user" mode on the prefixes and in "item" mode on every
  item, scores = dot products (torch-rechub's retrieval scores); an empty prefix is the all-padding history;
- ``FitReport``: the adapter wraps the *instance* method ``train_one_epoch`` of the trainer it built (its
  return value, torch-rechub's own epoch loss: the mean over batches of the batch-mean criterion, is the
  epoch loss) and the model's ``forward`` (one training call per optimizer step: steps and samples).

White-box hooks reach into the objects ``fit`` built (the ``GRU4Rec`` nn.Module, the ``MatchTrainer`` with its
criterion and optimizer), declared in ``shims``: ``get_weights``/``set_weights`` (the module's parameters; the
shared item table's rows in :meth:`item_ids` order without the padding row 0), ``loss_on_scores`` (the trainer's
list-wise criterion, ``nn.CrossEntropyLoss``, on the given columns with the diagonal as target: the column order
is immaterial to a softmax, so the positive need not be moved to column 0 as torch-rechub's samples hold it),
``train_step`` (the loop body of ``MatchTrainer.train_one_epoch`` on b one-item histories, negatives from
torch-rechub's ``negative_sample`` as ``generate_seq_feature_match`` draws them), ``train_forward`` (the model's
training forward on b samples, what its criterion sees as ``scores``), ``trace`` (samples identified through an
extra ``_sample`` key of the model input, which no feature reads) and ``optimizer_info``.
Not implemented: ``score_stream`` and ``evaluate``: torch-rechub has no session inference loop and no evaluator
of its own for next-item targets (its ``evaluate`` utilities score retrieval lists per user id).
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from gru4rec_conformance.implementations._torchbase import (
    FitObserver,
    PackagedTorchAdapter,
    loss_and_gradient,
    raw_gru_declarations,
    refuse_loss_arguments,
    torch_framework,
)
from gru4rec_conformance.implementations.base import Capabilities, FitReport, StepTrace, Unsupported
from gru4rec_conformance.implementations.registry import register

_MAX_LEN = 50
_WIDTH = 64  # embedding = GRU width (torch-rechub ties them); not settable through GRU4Rec's ``layers``
_OPTIMIZERS = ("adam", "adagrad", "sgd")


@register
class TorchRechubGRU4RecAdapter(PackagedTorchAdapter):
    """torch-rechub 0.9.0 matching ``GRU4Rec`` with ``MatchTrainer`` (list-wise mode 2)."""

    name = "torch_rechub"
    label = "TorchRechubGRU4RecAdapter"
    description = "torch-rechub 0.9.0 GRU4Rec (two-tower retriever; negative control)"
    homepage = "https://pypi.org/project/torch-rechub/0.9.0/"
    package = (
        "torch_rechub",
        "torch-rechub",
        "run the checks with `tox -e torch_rechub` (installs torch-rechub==0.9.0)",
    )
    HOOKS_ABSENT = {
        "score_stream": "torch-rechub has no session inference loop: its GRU4Rec encodes a padded history into one "
        "user vector, so per-event scores would be the adapter's own loop, not the implementation's",
        "evaluate": "torch-rechub has no next-item evaluator: topk_metrics takes ready-made top-K lists (built with "
        "annoy/faiss in its examples) and rounds to 4 decimals, so the ranking would be the adapter's own",
    }
    reproducibility = {
        "installs": "yes: torch-rechub==0.9.0 with torch==2.13.0 on Python 3.11, numpy 2.4 / pandas 3.1",
        "offline": "yes (no download at run time)",
        "pinned": "tox env 'torch_rechub': torch-rechub==0.9.0, torch==2.13.0; the package itself declares "
        "lower bounds only (numpy>=1.19, pandas>=1.2, torch>=1.10)",
        "hyperparameters": "lr, batch size, epochs, negatives settable; GRU layer count hard-coded to 2 "
        "(num_layers is read but breaks the MLP); no seed argument (global RNGs)",
    }

    def __init__(self, device: str = "cpu", **options: Any) -> None:
        super().__init__(device=device, **options)
        self.model: Any = None  # torch-rechub objects (untyped): the GRU4Rec module and its MatchTrainer
        self.trainer: Any = None
        self._tmp: str | None = None
        self._item_counts: dict[int, int] = {}

    def capabilities(self) -> dict[str, Any]:
        self._require_package()
        return {
            "losses": ["cross-entropy"],
            "embedding_modes": ["shared"],
            **Capabilities.flags("full_ranking"),
            "devices": ["cpu"],
            "framework": torch_framework(),
            "shims": [
                "items remapped to 1..I (0 = padding); samples built by generate_seq_feature_match (mode 2), "
                "whose per-session 'test' sample (the last transition) is discarded",
                "one constant pseudo-user id for every sample (the user tower needs a user feature; session ids "
                "carry nothing to unseen test sessions)",
                "random/numpy/torch seeded with the build seed (torch-rechub has no seed argument)",
                "DataLoaders with num_workers=0; embedding/GRU width fixed at 64 (2 GRU layers, not settable); "
                "user-tower MLP dims [64]",
                "scores = dot products of inference_embedding('user') on the prefixes and ('item') on all items",
                "FitReport observed by wrapping the instance methods train_one_epoch and forward",
                "get/set_weights: the shared item table's rows in item_ids() order, padding row 0 left out",
                "loss_on_scores: MatchTrainer's list-wise criterion (CrossEntropyLoss) with the diagonal as target",
                "train_step: MatchTrainer.train_one_epoch's loop body on one-item 'pre'-padded histories, "
                "negatives from torch_rechub.utils.match.negative_sample (method 0, as in fit; numpy reseeded with the "
                "build seed per step: one batch, the same negatives)",
                "train_forward: the model's training forward (no update) on 'pre'-padded histories s[:-1] with "
                "target s[-1] and negative_sample negatives; scores = the forward's output as the criterion sees it",
                "trace (only when enabled): an extra '_sample' key (row index of generate_seq_feature_match's "
                "samples) in the model input, read by the forward wrapper; no feature reads it",
            ],
            "hyperparameters": {
                "constrained_embedding": True,
                "loss": "cross-entropy",
                "n_sample": 4,
                "learning_rate": 0.001,
                "batch_size": 256,
                "n_epochs": 10,
                "optimizer": "adam",
            },
            **raw_gru_declarations(),
        }

    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        if hp["loss"] != "cross-entropy":
            # GRU4Rec is documented for the list-wise softmax (MatchTrainer mode 2); its forward returns one score
            # tensor, so the pair-wise mode 1 (BPR) fails to unpack it.
            raise Unsupported(f"loss:{hp['loss']}", "torch-rechub GRU4Rec trains with the list-wise softmax only")
        if not hp["constrained_embedding"]:
            raise Unsupported("embedding:separate", "torch-rechub shares the history and item embedding table")
        if hp["optimizer"] not in _OPTIMIZERS:
            raise Unsupported(f"optimizer:{hp['optimizer']}", f"the adapter maps {', '.join(_OPTIMIZERS)}")
        # ``layers`` is not declared: torch-rechub's GRU4Rec always has 2 GRU layers (it reads
        # user_params.get("num_layers", 2), but the same dict goes to MLP(**user_params), which rejects the key
        # with a TypeError), so GRU4Rec's layers (count and widths) cannot be expressed. The width is the
        # embedding width, kept at the adapter's fixed _WIDTH.
        hp["layers"] = [_WIDTH, _WIDTH]
        if int(hp["n_sample"]) < 1:
            # GRU4Rec's n_sample=0 means "the other targets of the mini-batch are the only negatives"; the adapter
            # drives torch-rechub's list-wise mode with per-sample negatives (neg_ratio >= 1) only.
            raise Unsupported("in_batch_negatives", "the adapter's list-wise mode needs n_sample (neg_ratio) >= 1")
        if self.device != "cpu":
            raise Unsupported(f"device:{self.device}", "the adapter runs torch-rechub on the CPU only")
        self.hparams = hp
        self.seed = int(seed)
        self.model = None

    def _seed(self) -> None:
        import torch

        random.seed(self.seed)
        np.random.seed(self.seed)
        torch.manual_seed(self.seed)

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        import pandas as pd
        import torch
        from torch_rechub.basic.features import SequenceFeature, SparseFeature
        from torch_rechub.models.matching import GRU4Rec
        from torch_rechub.trainers import MatchTrainer
        from torch_rechub.utils.data import MatchDataGenerator
        from torch_rechub.utils.match import gen_model_input, generate_seq_feature_match

        if not self.hparams:
            raise RuntimeError("TorchRechubGRU4RecAdapter.fit: call build() first")
        hp = self.hparams
        epochs = int(hp["n_epochs"] if n_epochs is None else n_epochs)
        self.close()
        self._tmp = tempfile.mkdtemp(prefix="rechub-")
        df = train_df.sort_values(["SessionId", "Time"], kind="stable")
        self._item_ids = np.unique(df["ItemId"].to_numpy(dtype=np.int64))
        self._index = {int(i): k + 1 for k, i in enumerate(self._item_ids)}
        n_items = len(self._item_ids)
        data = pd.DataFrame(
            {
                "session_id": df["SessionId"].to_numpy(),
                "item_id": np.searchsorted(self._item_ids, df["ItemId"].to_numpy(dtype=np.int64)) + 1,
                "time": np.arange(len(df), dtype=np.int64),
            }
        )
        mode = 2  # list-wise softmax over the positive and neg_ratio negatives
        self._seed()
        df_train, _ = generate_seq_feature_match(
            data, "session_id", "item_id", time_col="time", sample_method=0, mode=mode, neg_ratio=int(hp["n_sample"])
        )
        user_profile = pd.DataFrame({"session_id": data["session_id"].unique()})
        item_profile = pd.DataFrame({"item_id": np.arange(1, n_items + 1)})
        x_train = gen_model_input(df_train, user_profile, "session_id", item_profile, "item_id", seq_max_len=_MAX_LEN)
        x_train["session_id"] = np.ones(len(df_train), dtype=np.int64)
        lanes = None
        if self._trace_on:
            x_train["_sample"] = np.arange(len(df_train), dtype=np.int64)
            lanes = (df_train["session_id"].to_numpy(dtype=np.int64), df_train["histlen_item_id"].to_numpy() - 1)
        d = hp["layers"][-1]
        self._features = dict(
            user=[SparseFeature("session_id", vocab_size=2, embed_dim=d)],
            history=[SequenceFeature("hist_item_id", vocab_size=n_items + 1, embed_dim=d, pooling="concat",
                                     shared_with="item_id", padding_idx=0)],
            item=[SparseFeature("item_id", vocab_size=n_items + 1, embed_dim=d, padding_idx=0)],
            neg=[SequenceFeature("neg_items", vocab_size=n_items + 1, embed_dim=d, pooling="concat",
                                 shared_with="item_id", padding_idx=0)],
        )  # fmt: skip
        self._seed()
        model = GRU4Rec(
            self._features["user"],
            self._features["history"],
            self._features["item"],
            self._features["neg"],
            user_params={"dims": [d]},
            temperature=1.0,
        )
        opt = {"adam": torch.optim.Adam, "adagrad": torch.optim.Adagrad, "sgd": torch.optim.SGD}[hp["optimizer"]]
        trainer = MatchTrainer(
            model,
            mode=mode,
            optimizer_fn=opt,
            optimizer_params={"lr": float(hp["learning_rate"]), "weight_decay": 1e-5},
            n_epoch=epochs,
            device="cpu",
            model_path=self._tmp,
        )
        y = np.zeros(len(df_train), dtype=np.int64)
        gen = MatchDataGenerator(x=x_train, y=y)
        train_dl, _, _ = gen.generate_dataloader(
            {"session_id": np.ones(1, dtype=np.int64)},
            {"item_id": np.arange(1, n_items + 1)},
            batch_size=int(hp["batch_size"]),
            num_workers=0,
        )
        observer = _Observer(model, trainer, lanes)
        try:
            trainer.fit(train_dl)
        finally:
            observer.detach()
        self.model, self.trainer = model, trainer
        self._item_counts = {int(k): 1 for k in range(1, n_items + 1)}  # negative_sample's item set (method 0)
        return observer.report()

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        from torch.utils.data import DataLoader
        from torch_rechub.utils.data import PredictDataset

        if self.model is None or self._item_ids is None:
            raise RuntimeError("TorchRechubGRU4RecAdapter.score_prefixes: call fit() first")
        hist = np.zeros((len(prefixes), _MAX_LEN), dtype=np.int64)
        for r, prefix in enumerate(prefixes):
            known = [self._index[int(i)] for i in prefix if int(i) in self._index][-_MAX_LEN:]
            if known:
                hist[r, _MAX_LEN - len(known) :] = known  # 'pre' padding, as gen_model_input
        x_user = {"session_id": np.ones(len(prefixes), dtype=np.int64), "hist_item_id": hist}
        x_item = {"item_id": np.arange(1, len(self._item_ids) + 1, dtype=np.int64)}
        user_dl = DataLoader(PredictDataset(x_user), batch_size=512, shuffle=False, num_workers=0)
        item_dl = DataLoader(PredictDataset(x_item), batch_size=512, shuffle=False, num_workers=0)
        u = self.trainer.inference_embedding(self.model, "user", user_dl, model_path=self._tmp)
        v = self.trainer.inference_embedding(self.model, "item", item_dl, model_path=self._tmp)
        return (u @ v.T).cpu().numpy().astype(np.float32)

    # -- white-box hooks ---------------------------------------------------------------------------------
    _ITEM_TABLE = "embedding.embed_dict.item_id.weight"

    def _fitted_model(self) -> Any:
        """The GRU4Rec module once ``fit`` has built it, its MatchTrainer and the item ids, else None.
        ``get_weights`` shows its parameters under their torch names: the shared item table
        ``embedding.embed_dict.item_id.weight`` (I, 64) in :meth:`item_ids` order without padding row 0, the
        pseudo-user table, ``gru.weight_ih_l<k>``/``weight_hh_l<k>`` (torch's gate blocks reset, update,
        candidate; no biases) and the user-tower MLP; ``set_weights`` leaves padding row 0 untouched."""
        return None if self.trainer is None or self._item_ids is None else self.model

    def _weight_rows(self) -> dict[str, slice]:
        return {self._ITEM_TABLE: slice(1, None)}

    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        """MatchTrainer's list-wise criterion (mode 2: ``nn.CrossEntropyLoss``, the mean over rows) on a (b, K)
        score matrix whose diagonal holds the targets. No loss argument is settable: ``final_act='linear'``,
        ``elu_param=0``, ``logq=0``, ``bpreg=0`` describe what it computes and are accepted; other values raise
        :class:`Unsupported`. The regularisation term MatchTrainer adds acts on the weights, not on the scores
        (zero with its default coefficients). Returns (value, dL/dscores)."""
        import torch

        if loss != "cross-entropy":
            raise Unsupported(f"loss:{loss}", "torch-rechub GRU4Rec trains with the list-wise softmax only")
        refuse_loss_arguments(hparams, "torch-rechub's list-wise loss")
        criterion = self.trainer.criterion if self.trainer is not None else torch.nn.CrossEntropyLoss()
        return loss_and_gradient(scores, lambda R: criterion(R, torch.arange(R.shape[0])))

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One update as the loop body of ``MatchTrainer.train_one_epoch`` (mode 2): the model's forward on b
        samples (pseudo-user 1, history = the input item 'pre'-padded to 50, target, ``n_sample`` negatives from
        ``negative_sample`` method 0 as ``generate_seq_feature_match`` draws them; numpy's global RNG reseeded with
        the build seed first, since torch-rechub fixes negatives per sample: repeated steps on one batch see the
        same ones), criterion against label 0 plus the trainer's regularisation loss, ``zero_grad``, backward, optimizer step. Returns the loss. A given
        ``hidden`` state cannot enter torch-rechub's user tower (its GRU runs each history from zero):
        Unsupported."""
        import torch
        from torch_rechub.utils.match import negative_sample

        if hidden is not None:
            raise Unsupported("train_step:hidden", "torch-rechub runs every history from the zero state")
        model = self._require_model()
        x = [self._index.get(int(i)) for i in np.asarray(batch_inputs).ravel()]
        y = [self._index.get(int(i)) for i in np.asarray(batch_targets).ravel()]
        if None in x or None in y or len(x) != len(y) or not x:
            raise ValueError("batch_inputs/batch_targets: expected equally many known item ids")
        b, k = len(x), int(self.hparams["n_sample"])
        hist = np.zeros((b, _MAX_LEN), dtype=np.int64)
        hist[:, -1] = np.asarray(x, dtype=np.int64)
        np.random.seed(self.seed)  # torch-rechub fixes negatives per sample: one batch, the same negatives
        neg = np.asarray(negative_sample(self._item_counts, ratio=b * k, method_id=0), dtype=np.int64).reshape(b, k)
        x_dict = {
            "session_id": torch.ones(b, dtype=torch.long),
            "hist_item_id": torch.as_tensor(hist),
            "item_id": torch.as_tensor(np.asarray(y, dtype=np.int64)),
            "neg_items": torch.as_tensor(neg),
        }
        trainer = self.trainer
        model.train()
        y_pred = model(x_dict)
        loss = trainer.criterion(y_pred, torch.zeros(b, dtype=torch.long)) + trainer.reg_loss_fn(model)
        model.zero_grad()
        loss.backward()
        trainer.optimizer.step()
        model.eval()
        return float(loss.detach())

    def train_forward(self, prefix_batch: Any, seed: int) -> dict[str, Any]:
        """The model's training-mode forward (as ``train_one_epoch`` calls it; nothing updated) on b samples:
        history = ``s[:-1]`` 'pre'-padded to 50, target ``s[-1]``, ``n_sample`` negatives from ``negative_sample``
        (numpy's global RNG seeded with ``seed``; torch-rechub has no dropout). ``embedding_out``: the input
        (last history) item's embedding; ``layer_outputs``: each GRU layer's state after it (``nn.GRU``'s h_n);
        ``scores``: the forward's output as MatchTrainer's criterion receives it (no item columns: see
        ``score_tensor_shape``); ``output_rows_touched``: rows of the shared item table with a non-zero gradient
        of the step's loss."""
        import torch
        from torch_rechub.utils.match import negative_sample

        model = self._require_model()
        seqs = [[self._index.get(int(i)) for i in s] for s in prefix_batch]
        if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2 or any(None in s for s in seqs):
            raise ValueError("prefix_batch: expected b >= 1 sequences of known items with one common length >= 2")
        b, k = len(seqs), int(self.hparams["n_sample"])
        hist = np.zeros((b, _MAX_LEN), dtype=np.int64)
        for r, s in enumerate(seqs):
            h = [int(v) for v in s[:-1] if v is not None][-_MAX_LEN:]
            hist[r, _MAX_LEN - len(h) :] = h
        np.random.seed(int(seed))
        neg = np.asarray(negative_sample(self._item_counts, ratio=b * k, method_id=0), dtype=np.int64).reshape(b, k)
        x_dict = {
            "session_id": torch.ones(b, dtype=torch.long),
            "hist_item_id": torch.as_tensor(hist),
            "item_id": torch.as_tensor(np.asarray([s[-1] for s in seqs], dtype=np.int64)),
            "neg_items": torch.as_tensor(neg),
        }
        captured: dict[str, Any] = {}
        handle = model.gru.register_forward_hook(lambda m, a, o: captured.update(inp=a[0].detach(), h_n=o[1].detach()))
        model.train()
        model.zero_grad()
        try:
            y_pred = model(x_dict)
        finally:
            handle.remove()
        loss = self.trainer.criterion(y_pred, torch.zeros(b, dtype=torch.long)) + self.trainer.reg_loss_fn(model)
        loss.backward()
        table = dict(model.named_parameters())[self._ITEM_TABLE]
        assert table.grad is not None
        rows = int((table.grad.abs().sum(1) > 0).sum())
        model.zero_grad()
        model.eval()
        return {
            "embedding_out": captured["inp"][:, -1, :].cpu().numpy(),
            "layer_outputs": [h.cpu().numpy() for h in captured["h_n"]],
            "scores": y_pred.detach().cpu().numpy(),
            "score_tensor_shape": tuple(y_pred.shape),
            "output_rows_touched": rows,
        }

    def trace(self, enable: bool = True) -> None:
        """Record one :class:`StepTrace` per optimizer step of the following ``fit`` calls: a lane is a row of the
        step's batch of samples (torch-rechub shuffles them): its session, the position of its input event (the
        history length − 1), the norm of the last GRU layer's state before that event (zero at a session start:
        the padded positions embed to zero and the GRU has no bias), ``n_active`` the batch's rows,
        ``negative_ids`` None (negatives are fixed per sample, not shared), the optimizer's learning rate."""
        super().trace(enable)

    def _fitted_optimizer(self) -> Any:
        """MatchTrainer's torch optimizer (``optimizer_fn(params, lr, weight_decay=1e-5)``; train_one_epoch clips
        nothing). RuntimeError before ``fit``."""
        self._require_model()
        return self.trainer.optimizer

    def _lr_schedule(self) -> Any:
        """MatchTrainer's scheduler class name (None: the adapter passes no ``scheduler_fn``)."""
        return None if self.trainer.scheduler is None else type(self.trainer.scheduler).__name__


class _Observer(FitObserver):
    """Wraps ``train_one_epoch`` of one trainer and ``forward`` of one model (originals unchanged): per epoch the
    mean loss per sample, optimizer steps, samples and seconds."""

    def __init__(self, model: Any, trainer: Any, lanes: Any = None) -> None:
        super().__init__()
        forward, train_one_epoch = model.forward, trainer.train_one_epoch
        self._batches: list[int] = []
        self.trace = [] if lanes is not None else None
        captured: dict[str, Any] = {}
        if lanes is not None:
            self.hook(model.gru.register_forward_hook(lambda m, a, o: captured.__setitem__("out", o[0].detach())))

        def _forward(x: Any) -> Any:
            if model.training:
                self._batches.append(int(next(iter(x.values())).shape[0]))
            out = forward(x)
            if model.training and self.trace is not None and "_sample" in x:
                rows = x["_sample"].cpu().numpy()
                gru_out = captured.get("out")
                norms = np.zeros(len(rows)) if gru_out is None else gru_out[:, -2, :].norm(dim=1).cpu().numpy()
                self.trace.append(
                    StepTrace(
                        session_ids=lanes[0][rows],
                        positions=lanes[1][rows],
                        h_in_norms=np.asarray(norms, dtype=np.float64),
                        n_active=len(rows),
                        negative_ids=None,
                        learning_rate=float(trainer.optimizer.param_groups[0]["lr"]),
                    )
                )
            return out

        def _train_one_epoch(data_loader: Any, *args: Any, **kwargs: Any) -> Any:
            self._batches = []
            t0 = time.perf_counter()
            mean_batch_loss = train_one_epoch(data_loader, *args, **kwargs)
            self.seconds.append(time.perf_counter() - t0)
            n = sum(self._batches)
            self.losses.append(float(mean_batch_loss) if self._batches else float("nan"))
            self.steps.append(len(self._batches))
            self.events.append(n)
            return mean_batch_loss

        self.wrap(model, "forward", _forward)
        self.wrap(trainer, "train_one_epoch", _train_one_epoch)
