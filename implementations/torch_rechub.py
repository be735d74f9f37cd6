"""torch-rechub 0.9.0 ``torch_rechub.models.matching.GRU4Rec``: a two-tower retriever named GRU4Rec (negative
control; not in the study).

ecosystem_and_style.md §1.3.4: the "user" tower runs a bias-free GRU over a pre-padded history, concatenates a
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
"""

from __future__ import annotations

import random
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

_MAX_LEN = 50
_WIDTH = 64  # embedding = GRU width (torch-rechub ties them); not settable through GRU4Rec's ``layers``
_OPTIMIZERS = ("adam", "adagrad", "sgd")


@register
class TorchRechubGRU4RecAdapter(Adapter):
    """torch-rechub 0.9.0 matching ``GRU4Rec`` with ``MatchTrainer`` (list-wise mode 2)."""

    name = "torch_rechub"
    role = "implementation"
    isolated = True
    description = "torch-rechub 0.9.0 GRU4Rec (two-tower retriever; negative control)"
    homepage = "https://pypi.org/project/torch-rechub/0.9.0/"
    study = None
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
        self.hparams: dict[str, Any] = {}
        self.seed = 0
        self.model = None
        self.trainer = None
        self._item_ids: np.ndarray | None = None
        self._index: dict[int, int] = {}
        self._tmp: str | None = None

    def version(self) -> str:
        return installed_version("torch-rechub")

    def capabilities(self) -> dict[str, Any]:
        require_installed(
            "torch_rechub", "torch-rechub", "run the checks with `tox -e torch_rechub` (installs torch-rechub==0.9.0)"
        )
        return {
            "losses": ["cross-entropy"],
            "embedding_modes": ["shared"],
            "session_parallel": False,
            "in_batch_negatives": False,
            "extra_shared_negatives": False,
            "sample_alpha": False,
            "logq": False,
            "adagrad_momentum": False,
            "dropout_embed": False,
            "dropout_hidden": False,
            "separate_dropouts": False,
            "bpreg": False,
            "full_ranking": True,
            "needs_categories": False,
            "fixed_batch_shape": False,
            "devices": ["cpu"],
            "framework": {"name": "torch", "version": installed_version("torch")},
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
            "score_semantics": "raw",
            "eval_tie_mode": None,
            "gate_layout": None,
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
        observer = _Observer(model, trainer)
        try:
            trainer.fit(train_dl)
        finally:
            observer.detach()
        self.model, self.trainer = model, trainer
        return observer.report()

    def item_ids(self) -> np.ndarray:
        if self._item_ids is None:
            raise RuntimeError("TorchRechubGRU4RecAdapter.item_ids: call fit() first")
        return self._item_ids

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

    def close(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


class _Observer:
    """Wraps ``train_one_epoch`` of one trainer and ``forward`` of one model (originals unchanged): per epoch the
    mean loss per sample, optimizer steps, samples and seconds."""

    def __init__(self, model: Any, trainer: Any) -> None:
        self.losses: list[float] = []
        self.steps: list[int] = []
        self.events: list[int] = []
        self.seconds: list[float] = []
        forward, train_one_epoch = model.forward, trainer.train_one_epoch
        self._batches: list[int] = []

        def _forward(x: Any) -> Any:
            if model.training:
                self._batches.append(int(next(iter(x.values())).shape[0]))
            return forward(x)

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

        model.forward = _forward
        trainer.train_one_epoch = _train_one_epoch
        self._targets = ((model, "forward"), (trainer, "train_one_epoch"))

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
