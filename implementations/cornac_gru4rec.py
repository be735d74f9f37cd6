"""cornac 3.0.1 ``cornac.models.GRU4Rec``: a port of the official GRU4Rec PyTorch code (not in the study).

docs/implementations.md, 'Packages from PyPI', cornac: session-parallel mini-batches (``cornac.models.seq_utils.io_iter``), in-batch +
shared extra negatives drawn ∝ support^sample_alpha, logQ, cross-entropy / BPR-max / TOP1 / BPR, tied /
separate / no embedding, ``IndexedAdagradM`` (Adagrad with momentum), separate embedding and hidden dropout.

The adapter translates only:

- input: the session frame is sorted by (SessionId, Time) and handed to
  ``cornac.data.SequentialDataset.build(fmt="SIT")`` (cornac treats row order as the event order);
- item ids: cornac's ``iid_map`` (order of first appearance) gives the column order of score matrices;
- ``score_prefixes`` calls ``GRU4Rec.score(None, history_items)`` per prefix (cornac's own inference: a fresh
  zero state, the prefix run item by item in eval mode); unknown items are dropped before the call;
- seeding: cornac's ``seed`` seeds its sampler / session-shuffle RNG only; dropout draws from torch's global
  RNG, so the adapter calls ``torch.manual_seed(seed)`` before ``fit`` (declared shim);
- ``FitReport``: cornac reports nothing per epoch, so the adapter observes ``fit`` without changing it:
  epochs through the training dataset's ``s_iter`` (called once per epoch), optimizer steps through torch's
  global optimizer step hook, lanes and the training score matrix through forward hooks on the model's
  sub-modules (the output embedding rows and the last dropout), from which the step's loss is recomputed
  with cornac's own loss function (declared shim).

Nothing of cornac is patched; every observation hook is removed when ``fit`` returns.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from gru4rec_conformance.implementations._torchbase import (
    FitObserver,
    PackagedTorchAdapter,
    layered_forward_result,
    raw_gru_declarations,
    torch_framework,
)
from gru4rec_conformance.implementations.base import Capabilities, FitReport, StepTrace, Unsupported
from gru4rec_conformance.implementations.registry import register

_LOSSES = ("cross-entropy", "bpr-max", "top1", "bpr")
_LOSS_KWARGS = ("bpreg", "elu_param", "logq", "column_q", "batch_size", "n_targets", "final_act")

#: cornac 3.0.1 defaults under the official names (cornac/models/gru4rec/recom_gru4rec.py GRU4Rec.__init__).
_DEFAULTS: dict[str, Any] = {
    "layers": [100],
    "loss": "cross-entropy",
    "batch_size": 512,
    "dropout_p_embed": 0.0,
    "dropout_p_hidden": 0.0,
    "learning_rate": 0.05,
    "momentum": 0.0,
    "sample_alpha": 0.5,
    "n_sample": 2048,
    "embedding": 0,
    "constrained_embedding": True,
    "n_epochs": 10,
    "bpreg": 1.0,
    "elu_param": 0.5,
    "logq": 0.0,
    "optimizer": "adagrad",
}


@register
class CornacGRU4RecAdapter(PackagedTorchAdapter):
    """cornac 3.0.1 ``cornac.models.GRU4Rec`` (PyTorch), driven through its public ``fit``/``score`` API."""

    name = "cornac"
    label = "CornacGRU4RecAdapter"
    description = "cornac 3.0.1 cornac.models.GRU4Rec (a port of the official PyTorch GRU4Rec)"
    homepage = "https://pypi.org/project/cornac/3.0.1/"
    package = ("cornac", "cornac", "run the checks with `tox -e cornac` (installs cornac==3.0.1)")
    reproducibility = {
        "installs": "yes: cornac==3.0.1 from PyPI with torch==2.13.0 (+pandas) on Python 3.11, numpy 2 / pandas 3",
        "offline": "yes (no download at run time)",
        "pinned": "tox env 'cornac': cornac==3.0.1, torch==2.13.0; cornac itself declares numpy>2.0.0, scipy, "
        "tqdm, powerlaw unpinned and does not declare torch",
        "hyperparameters": "every official hyperparameter except final_act; init ignores the seed (fixed "
        "np.random.seed(42) compatibility init)",
    }

    def __init__(self, device: str = "cpu", **options: Any) -> None:
        super().__init__(device=device, **options)
        # cornac objects (cornac is untyped): the fitted GRU4Rec, its SequentialDataset, the negative sampler's
        # (item indices, distribution) and the IndexedAdagradM of train_step
        self.model: Any = None
        self._train_set: Any = None
        self._sampler: Any = None
        self._opt: Any = None

    # -- declarations ------------------------------------------------------------------------------------
    def capabilities(self) -> dict[str, Any]:
        self._require_package()
        flags = Capabilities.flags(*Capabilities.OFFICIAL_FLAGS)
        return {
            "losses": list(_LOSSES),
            "embedding_modes": ["none", "separate", "shared"],
            **flags,
            "final_acts": ["linear", "elu"],
            "devices": ["cpu", "cuda"],
            "framework": torch_framework(),
            "shims": [
                "session frame sorted by (SessionId, Time) and passed as SIT tuples to SequentialDataset.build",
                "torch.manual_seed(seed) before fit: cornac's seed drives only its sampler/shuffle RNG, dropout "
                "uses torch's global RNG",
                "FitReport observed, not reported by cornac: epochs via the dataset's s_iter, steps via torch's "
                "global optimizer step hook, per-step loss recomputed with cornac's loss function from the "
                "training score matrix captured by sub-module forward hooks",
                "trace: lanes read from the event indices io_iter looks up in the training set's uir_tuple[1] "
                "(an ndarray view that logs list lookups, values unchanged), h_in from a forward pre-hook on the "
                "first GRU layer, shared negatives from the By hook, lr from IndexedAdagradM's param group",
                "score_stream/evaluate: the test frame (unknown items dropped, sorted by (SessionId, Time)) built "
                "as a SequentialDataset on the training maps; evaluate = cornac's next-item ranking_eval "
                "(mode='next') with Recall(k) as recall@k and NCRR(k) as mrr@k (equal for one positive); "
                "score_stream = ranking_eval's loop, GRU4Rec.score(user, history_items) per test event",
                "train_step assembled from cornac's parts as in GRU4Rec.fit's loop body (forward, io_iter's "
                "sample draw, loss function, a fresh IndexedAdagradM: cornac keeps no optimizer after fit)",
            ],
            "hyperparameters": {k: (list(v) if isinstance(v, list) else v) for k, v in _DEFAULTS.items()},
            **raw_gru_declarations(),
        }

    # -- required surface --------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        if hp["loss"] not in _LOSSES:
            raise Unsupported(f"loss:{hp['loss']}", "cornac 3.0.1 GRU4Rec losses: cross-entropy, bpr-max, top1, bpr")
        if hp["optimizer"] != "adagrad":
            raise Unsupported(f"optimizer:{hp['optimizer']}", "cornac's GRU4Rec always uses IndexedAdagradM")
        layers = hp["layers"]
        hp["layers"] = [int(layers)] if isinstance(layers, (int, np.integer)) else [int(x) for x in layers]
        if self.device not in ("cpu", "cuda"):
            raise Unsupported(f"device:{self.device}")
        self._new_build(hp, seed)
        self.model = None

    def _make(self, n_epochs: int):
        from cornac.models import GRU4Rec

        hp = self.hparams
        return GRU4Rec(
            layers=list(hp["layers"]), loss=hp["loss"], batch_size=int(hp["batch_size"]),
            dropout_p_embed=float(hp["dropout_p_embed"]), dropout_p_hidden=float(hp["dropout_p_hidden"]),
            learning_rate=float(hp["learning_rate"]), momentum=float(hp["momentum"]),
            sample_alpha=float(hp["sample_alpha"]), n_sample=int(hp["n_sample"]), embedding=hp["embedding"],
            constrained_embedding=bool(hp["constrained_embedding"]), n_epochs=int(n_epochs),
            bpreg=float(hp["bpreg"]), elu_param=float(hp["elu_param"]), logq=float(hp["logq"]),
            device=self.device, model_selection="last", verbose=False, seed=self.seed,
        )  # fmt: skip

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        import torch
        from cornac.data import SequentialDataset

        if not self.hparams:
            raise RuntimeError("CornacGRU4RecAdapter.fit: call build() first")
        epochs = int(self.hparams["n_epochs"] if n_epochs is None else n_epochs)
        df = train_df.sort_values(["SessionId", "Time"], kind="stable")
        tuples = list(
            zip(df["SessionId"].to_numpy().tolist(), df["ItemId"].to_numpy().tolist(), df["Time"].to_numpy().tolist())
        )
        train_set = SequentialDataset.build(tuples, fmt="SIT", seed=self.seed)
        model = self._make(epochs)
        torch.manual_seed(self.seed)
        observer = _FitObserver(self.hparams, train_set, model, trace=self._trace_on)
        with observer:
            model.fit(train_set)
        self.model = model
        self._train_set = train_set
        self._sampler = None
        self._opt = None
        self._item_ids = np.asarray(list(train_set.iid_map.keys()), dtype=np.int64)
        self._index = {int(i): k for k, i in enumerate(self._item_ids)}
        return observer.report()

    def trace(self, enable: bool = True) -> None:
        """Record one :class:`StepTrace` per optimizer step of the following ``fit`` calls (session-parallel lanes
        of cornac's ``io_iter``): each lane's session and the position of its input event (from the event indices
        io_iter looks up in ``uir_tuple[1]``), the norm of the first layer's hidden state entering the step (a
        forward pre-hook on ``G[0]``, or on ``GE`` in no-embedding mode), ``n_active`` (io_iter shrinks the batch
        in its drain phase), the shared negatives (item ids of ``out_iids`` after the B targets) and the
        optimizer's learning rate. Observation only: cornac's loop runs unchanged."""
        super().trace(enable)

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        if self.model is None or self._item_ids is None:
            raise RuntimeError("CornacGRU4RecAdapter.score_prefixes: call fit() first")
        out = np.empty((len(prefixes), len(self._item_ids)), dtype=np.float32)
        for row, prefix in enumerate(prefixes):
            known = [self._index[int(i)] for i in prefix if int(i) in self._index]
            out[row] = np.asarray(self.model.score(None, known), dtype=np.float32)[: len(self._item_ids)]
        return out

    # -- black-box+ ----------------------------------------------------------------------------------------
    def _test_set(self, test_df: Any) -> Any:
        """The test frame as a cornac ``SequentialDataset`` on copies of the training maps (items, users), events
        of items unknown to training dropped first (cornac would add them to the item map)."""
        from cornac.data import SequentialDataset

        if self.model is None or self._train_set is None:
            raise RuntimeError("CornacGRU4RecAdapter: call fit() first")
        df = test_df[test_df["ItemId"].isin(self._index.keys())].sort_values(["SessionId", "Time"], kind="stable")
        tuples = list(
            zip(df["SessionId"].to_numpy().tolist(), df["ItemId"].to_numpy().tolist(), df["Time"].to_numpy().tolist())
        )
        ts = self._train_set
        return SequentialDataset.build(
            tuples, fmt="SIT", global_uid_map=type(ts.uid_map)(ts.uid_map), global_iid_map=type(ts.iid_map)(ts.iid_map),
            global_sid_map=None, seed=self.seed, exclude_unknowns=True,
        )  # fmt: skip

    def score_stream(self, test_df: Any, batch_size: int) -> Iterator[tuple[Any, ...]]:
        """The loop of cornac's ``ranking_eval`` (mode 'next'): every test event after the first of its session,
        scored by ``GRU4Rec.score(user, history_items)`` (cornac runs the history from a zero state; it has no
        session-parallel inference, so ``batch_size`` has no effect). Rows in :meth:`item_ids` order."""
        test_set = self._test_set(test_df)
        raw_sid = {idx: sid for sid, idx in test_set.sid_map.items()}
        ids = self.item_ids()
        n = len(ids)
        for [sid], [mapped_ids], [items] in test_set.si_iter(batch_size=1, shuffle=False):
            if len(items) < 2:
                continue
            user_idx = test_set.uir_tuple[0][mapped_ids[0]]
            for pos in range(1, len(items)):
                row = np.asarray(self.model.score(user_idx, items[:pos]), dtype=np.float32)[:n]
                yield int(raw_sid[sid]), pos, int(ids[items[pos]]), row

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict[str, Any]:
        """cornac's ``next_item_evaluation.ranking_eval`` (mode 'next', unknown items excluded) with
        ``Recall(k)`` → ``recall@k`` and ``NCRR(k)`` → ``mrr@k`` (one positive: 1/rank within the cutoff, else 0);
        ``n_events`` counts the evaluated events. cornac's evaluation takes no batch size."""
        from cornac.eval_methods.next_item_evaluation import ranking_eval
        from cornac.metrics import NCRR, Recall

        test_set = self._test_set(test_df)
        metrics = [Recall(k=int(k)) for k in cutoffs] + [NCRR(k=int(k)) for k in cutoffs]
        n_events = sum(max(len(s) - 1, 0) for s in test_set.sessions.values() if len(s) >= 2)
        if not n_events:
            return {**{f"{m}@{k}": float("nan") for m in ("recall", "mrr") for k in cutoffs}, "n_events": 0}
        avg, _ = ranking_eval(self.model, metrics, self._train_set, test_set, mode="next", exclude_unknowns=True)
        out: dict[str, Any] = {f"recall@{k}": float(v) for k, v in zip(cutoffs, avg[: len(cutoffs)])}
        out.update({f"mrr@{k}": float(v) for k, v in zip(cutoffs, avg[len(cutoffs) :])})
        out["n_events"] = int(n_events)
        return out

    # -- white-box ---------------------------------------------------------------------------------------
    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        """cornac's own loss function (``cornac.models.seq_utils.losses``) on a given (b, K) score matrix.

        Column i of row i is the target. cornac's scores are linear; its BPR-max applies ELU(``elu_param``) first
        (``final_act`` 'elu-X' means elu_param X there, 'linear' means elu_param 0). ``logq`` with ``column_q``
        (the final q of every column) maps to cornac's P0 with ``sample_alpha=1`` (cornac raises the sample
        columns' P0 to sample_alpha itself).
        Returns (value, dL/dR) as cornac computes them (its normalisation: the mean over rows).
        """
        import torch
        from cornac.models.seq_utils.losses import get_loss_function

        if loss not in _LOSSES:
            raise Unsupported(f"loss:{loss}", "not a cornac GRU4Rec loss")
        unknown = sorted(set(hparams) - set(_LOSS_KWARGS))
        if unknown:
            raise Unsupported(f"loss_on_scores:{unknown[0]}", f"unknown loss argument(s) {unknown}")
        final_act = hparams.get("final_act")
        elu_param = float(hparams.get("elu_param", 0.5 if loss == "bpr-max" else 0.0))
        if final_act is not None and final_act != "linear" and not str(final_act).startswith("elu"):
            raise Unsupported(f"final_act:{str(final_act).split('-')[0]}", "cornac: linear scores; ELU in BPR-max only")
        if final_act is not None and str(final_act).startswith("elu"):
            if loss != "bpr-max":
                raise Unsupported("final_act:elu", "cornac applies ELU(elu_param) in the BPR-max loss only")
            elu_param = float(str(final_act).split("-", 1)[1]) if "-" in str(final_act) else 1.0
        elif final_act == "linear":
            elu_param = 0.0
        arr = np.asarray(scores)
        dtype = torch.float32 if arr.dtype == np.float32 else torch.float64
        R = torch.tensor(arr, dtype=dtype, requires_grad=True)
        b, k = R.shape
        n_targets = int(hparams.get("n_targets") or b)
        if n_targets != b:
            raise Unsupported("loss_on_scores:n_targets", "cornac splits in-batch columns at the row count")
        kwargs: dict[str, Any] = dict(
            bpreg=float(hparams.get("bpreg", 1.0)),
            elu_param=elu_param,
            n_sample=k - b,
            batch_size=b,
            logq=0.0,
            P0=None,
            sample_alpha=1.0,
            out_iids=None,
        )
        logq = float(hparams.get("logq", 0.0) or 0.0)
        if loss == "cross-entropy" and logq > 0:
            q = hparams.get("column_q")
            if q is None:
                raise ValueError("column_q: needed when logq > 0")
            kwargs.update(
                logq=logq, P0=torch.as_tensor(np.asarray(q), dtype=dtype), out_iids=torch.arange(k, dtype=torch.long)
            )
        value = get_loss_function(loss)(R, **kwargs)
        value.backward()
        assert R.grad is not None  # R is a leaf that requires grad
        grad = R.grad.detach().cpu().numpy()
        bs = hparams.get("batch_size")
        if bs is not None and int(bs) != b:
            raise Unsupported("loss_on_scores:batch_size", "cornac divides by the actual number of rows")
        return float(value.detach().cpu()), grad

    # GE (no-embedding first layer) stores its input blocks as [candidate | reset | update] (cornac's chunk order
    # vx_x, vx_r, vx_z); exposed as gate_layout (reset, update, candidate), like torch's GRUCell blocks.
    _GE_TO_LAYOUT = (1, 2, 0)
    _GE_FROM_LAYOUT = (2, 0, 1)

    def _fitted_model(self) -> Any:
        """cornac's torch module (``GRU4Rec.model``), None before ``fit``."""
        return None if self.model is None else getattr(self.model, "model", None)

    @staticmethod
    def _permute_blocks(a: np.ndarray, order: Sequence[int], axis: int) -> np.ndarray:
        blocks = np.split(a, 3, axis=axis)
        return np.concatenate([blocks[i] for i in order], axis=axis)

    def get_weights(self) -> dict:
        """cornac's parameters under their torch names; item-indexed rows in :meth:`item_ids` order without
        cornac's padding row; GRU gate blocks ordered as ``gate_layout`` (reset, update, candidate); biases 1-D.
        ``set_weights`` loads arrays in this layout (padding rows untouched)."""
        return super().get_weights()

    def _weight_rows(self) -> dict[str, slice]:
        return dict.fromkeys(("Wy.weight", "By.weight", "E.weight"), slice(None, len(self.item_ids())))

    def _to_shown(self, name: str, a: np.ndarray) -> np.ndarray:
        if name == "By.weight":
            a = a[:, 0]
        if name == "GE.Wx0.weight":
            a = self._permute_blocks(a, self._GE_TO_LAYOUT, axis=1)
        if name == "GE.Bh0":
            a = self._permute_blocks(a, self._GE_TO_LAYOUT, axis=0)
        return a

    def _from_shown(self, name: str, a: np.ndarray) -> np.ndarray:
        if name == "GE.Wx0.weight":
            a = self._permute_blocks(a, self._GE_FROM_LAYOUT, axis=1)
        if name == "GE.Bh0":
            a = self._permute_blocks(a, self._GE_FROM_LAYOUT, axis=0)
        if name == "By.weight":
            a = a[:, None]
        return a

    def _columns(self, targets: np.ndarray) -> np.ndarray:
        """Targets followed by n_sample shared samples drawn as cornac's io_iter draws them."""
        from cornac.models.seq_utils.iterators import build_neg_sampler

        n_sample = int(self.hparams["n_sample"])
        if n_sample <= 0:
            return targets
        if self._sampler is None:
            self._sampler = build_neg_sampler(self._train_set.uir_tuple, float(self.hparams["sample_alpha"]))
        item_indices, item_dist = self._sampler
        negatives = self.model.rng.choice(item_indices, size=n_sample, replace=True, p=item_dist)
        return np.concatenate([targets, negatives])

    def _loss_kwargs(self, b: int, y: Any) -> dict:
        return _loss_kwargs(self.hparams, self.model.P0, b, y)

    def _mapped(self, ids: Any, what: str) -> np.ndarray:
        out = [self._index.get(int(i)) for i in np.asarray(ids).ravel()]
        if None in out:
            raise ValueError(f"{what}: item id(s) unknown to the trained model")
        return np.asarray(out, dtype=np.int64)

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One update assembled from cornac's own parts exactly as the loop body of ``GRU4Rec.fit``: the model's
        ``forward(X, H, Y, training=True)`` with Y = targets + n_sample shared samples (io_iter's draw, cornac's
        RNG), cornac's loss function and arguments, and an ``IndexedAdagradM(params, lr, momentum)`` created on
        the first call (the state ``fit`` starts from; cornac does not keep its optimizer after ``fit``).
        ``hidden``: list of per-layer (b, layer) arrays, default zeros. Returns the loss."""
        import torch
        from cornac.models.seq_utils.losses import get_loss_function
        from cornac.models.seq_utils.optim import IndexedAdagradM

        m = self._require_model()
        x = self._mapped(batch_inputs, "batch_inputs")
        t = self._mapped(batch_targets, "batch_targets")
        if len(x) != len(t):
            raise ValueError(f"batch_targets: expected {len(x)} item(s), got {len(t)}")
        b = len(x)
        layers = self.hparams["layers"]
        if hidden is None:
            H = [torch.zeros((b, d), dtype=torch.float32, device=self.device) for d in layers]
        else:
            H = [torch.as_tensor(np.asarray(h), dtype=torch.float32, device=self.device) for h in hidden]
        if self._opt is None:
            self._opt = IndexedAdagradM(
                m.parameters(), float(self.hparams["learning_rate"]), float(self.hparams["momentum"])
            )
        y = self._columns(t)
        X = torch.tensor(x, dtype=torch.long, device=self.device)
        Y = torch.tensor(y, dtype=torch.long, device=self.device)
        m.train()
        m.zero_grad()
        R = m.forward(X, H, Y, training=True)
        L = get_loss_function(self.hparams["loss"])(R, **self._loss_kwargs(b, Y))
        L.backward()
        self._opt.step()
        m.eval()
        return float(L.detach().cpu())

    def train_forward(self, prefix_batch: Any, seed: int) -> dict:
        """cornac's training-mode forward (``forward(..., training=True)``) on b equally long sequences from the
        zero state; the result describes the last transition. ``embedding_out`` is the input embedding after
        cornac's embedding dropout (None in no-embedding mode, where that dropout acts on the first layer's
        output, reported as layer 0), ``layer_outputs`` the GRU layer outputs after hidden dropout (forward
        hooks on cornac's dropout modules), ``scores`` the (b, b+S) training score matrix, ``columns`` its item
        ids, ``output_rows_touched`` the rows of ``Wy`` with a non-zero gradient of the step's loss."""
        import torch
        from cornac.models.seq_utils.losses import get_loss_function

        m = self._require_model()
        seqs = [self._mapped(s, "prefix_batch") for s in prefix_batch]
        if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2:
            raise ValueError("prefix_batch: expected b >= 1 item sequences of one common length >= 2")
        arr = np.stack(seqs)
        b = len(arr)
        torch.manual_seed(int(seed))
        H = [torch.zeros((b, d), dtype=torch.float32, device=self.device) for d in self.hparams["layers"]]
        m.train()
        with torch.no_grad():
            for k in range(arr.shape[1] - 2):
                m.forward(
                    torch.tensor(arr[:, k], device=self.device),
                    H,
                    torch.tensor(arr[:, k + 1], device=self.device),
                    training=True,
                )
        captured: dict[str, Any] = {"layers": []}
        none_mode = not (m.constrained_embedding or m.embedding)
        handles = [m.DE.register_forward_hook(lambda mod, a, o: captured.__setitem__("embed", o.detach()))]
        handles += [d.register_forward_hook(lambda mod, a, o: captured["layers"].append(o.detach())) for d in m.D]
        y = self._columns(arr[:, -1])
        Y = torch.tensor(y, dtype=torch.long, device=self.device)
        m.zero_grad()
        try:
            R = m.forward(torch.tensor(arr[:, -2], device=self.device), H, Y, training=True)
        finally:
            for h in handles:
                h.remove()
        L = get_loss_function(self.hparams["loss"])(R, **self._loss_kwargs(b, Y))
        L.backward()
        g = m.Wy.weight.grad
        g = g.coalesce().to_dense() if g.is_sparse else g
        rows = int((g.abs().sum(1) > 0).sum())
        m.zero_grad()
        m.eval()
        return layered_forward_result(captured, none_mode, R, self.item_ids()[y], tuple(R.shape), rows)

    def optimizer_info(self) -> dict:
        hp = self.hparams
        if not hp:
            raise RuntimeError("CornacGRU4RecAdapter.optimizer_info: call build() first")
        # cornac.models.seq_utils.optim.IndexedAdagradM(params, lr, momentum) with its default eps=1e-6, zero
        # initial accumulator, no schedule, no clipping (recom_gru4rec.py GRU4Rec.fit).
        return {
            "type": "IndexedAdagradM",
            "lr_schedule": None,
            "initial_accumulator": 0.0,
            "eps": 1e-6,
            "momentum": float(hp["momentum"]),
            "grad_clip": None,
            "learning_rate": float(hp["learning_rate"]),
        }


def _loss_kwargs(hp: Mapping[str, Any], P0: Any, b: int, y: Any) -> dict:
    """The keyword arguments cornac's ``GRU4Rec.fit`` passes its loss function for a step of ``b`` lanes whose
    output items are ``y`` (targets, then the shared samples)."""
    return dict(
        P0=P0,
        logq=float(hp["logq"]),
        sample_alpha=float(hp["sample_alpha"]),
        batch_size=b,
        bpreg=float(hp["bpreg"]),
        elu_param=float(hp["elu_param"]),
        n_sample=int(hp["n_sample"]),
        out_iids=y,
    )


class _FitObserver(FitObserver):
    """Observes cornac's ``GRU4Rec.fit`` (no behaviour change) and builds the :class:`FitReport`.

    - epoch start: the training dataset's ``s_iter`` (io_iter calls it once per epoch); wrapped on the
      dataset *instance* the adapter built; at the first call the model cornac just created
      (``recommender.model``) gets its forward hooks;
    - per step: torch's global optimizer step post hook (cornac's IndexedAdagradM is a torch Optimizer);
    - per step: forward hooks on the model's sub-modules capture the output-embedding rows (``Wy``), biases
      (``By``, whose input is the step's out_iids = targets + shared samples) and the last dropout output (the
      final hidden state, after hidden dropout), from which the step's training scores R = h·Oᵀ + Bᵀ and loss
      (cornac's loss function with cornac's arguments) are recomputed.
    """

    def __init__(self, hparams: Mapping[str, Any], train_set: Any, recommender: Any, trace: bool = False) -> None:
        super().__init__()
        self.hp = dict(hparams)
        self.trace = [] if trace else None
        self._reads: list[np.ndarray] = []
        self.recommender = recommender
        self.train_set = train_set
        self._loss_sum = 0.0
        self._t0 = 0.0
        self._handles: list[Any] = []
        self._hooked: set[int] = set()
        self._step: dict[str, Any] = {}

    # epochs
    def _start_epoch(self) -> None:
        self._close_epoch()
        self.steps.append(0)
        self.events.append(0)
        self.losses.append(float("nan"))
        self.seconds.append(0.0)
        self._loss_sum = 0.0
        self._t0 = time.perf_counter()

    def _close_epoch(self) -> None:
        if self.steps:
            n = self.events[-1]
            self.losses[-1] = self._loss_sum / n if n else float("nan")
            self.seconds[-1] = time.perf_counter() - self._t0

    def __enter__(self) -> _FitObserver:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook

        original = self.train_set.s_iter

        def s_iter(*args: Any, **kwargs: Any):
            self._hook_model()
            self._start_epoch()
            return original(*args, **kwargs)

        self.train_set.s_iter = s_iter
        if self.trace is not None:
            self._uir = self.train_set.uir_tuple
            u, i, r = self._uir
            self.train_set.uir_tuple = (u, _logged_view(i, self._reads), r)
            self._lanes = _event_lanes(self.train_set)
        self._handles.append(register_optimizer_step_post_hook(self._after_step))
        self._torch = torch
        return self

    def __exit__(self, *exc: Any) -> None:
        self._close_epoch()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        try:
            del self.train_set.s_iter
        except AttributeError:
            pass
        if self.trace is not None:
            self.train_set.uir_tuple = self._uir

    # per-step capture
    def _hook_model(self) -> None:
        """Hook the sub-modules of the GRU4RecModel that cornac's fit just created (``recommender.model``)."""
        m = getattr(self.recommender, "model", None)
        if m is None or id(m) in self._hooked:
            return
        self._hooked.add(id(m))
        self._model = m
        self._handles.append(m.Wy.register_forward_hook(self._on_wy))
        self._handles.append(m.By.register_forward_hook(self._on_by))
        drops = list(m.D) if len(m.D) else [m.DE]
        self._handles.append(drops[-1].register_forward_hook(self._on_last_dropout))
        if self.trace is not None:
            first = m.G[0] if (m.constrained_embedding or m.embedding) else m.GE
            self._handles.append(first.register_forward_pre_hook(self._on_first_layer))

    def _on_first_layer(self, module: Any, args: Any) -> None:
        self._step["h_in"] = args[1].detach().norm(dim=1).cpu().numpy().astype(np.float64)

    def _on_wy(self, module: Any, args: Any, output: Any) -> None:
        self._step.setdefault("wy", []).append((args[0].detach(), output.detach()))

    def _on_by(self, module: Any, args: Any, output: Any) -> None:
        self._step["y"] = args[0].detach()
        self._step["b"] = output.detach()

    def _on_last_dropout(self, module: Any, args: Any, output: Any) -> None:
        self._step["h"] = output.detach()

    def _after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.steps:
            self._start_epoch()
        self.steps[-1] += 1
        step, self._step = self._step, {}
        if self.trace is not None:
            self._record(step, optimizer)
        b, loss = self._step_loss(step)
        self.events[-1] += b
        self._loss_sum += loss * b

    def _record(self, step: Mapping[str, Any], optimizer: Any) -> None:
        """One StepTrace from the two uir_tuple[1] lookups of this step (inputs, then targets) and the hooks."""
        assert self.trace is not None
        reads, self._reads[:] = list(self._reads), []
        events = reads[-2] if len(reads) >= 2 else np.zeros(0, dtype=np.int64)
        sessions, positions = self._lanes
        b = len(events)
        y = step.get("y")
        negatives = None
        if y is not None and int(self.hp["n_sample"]) > 0:
            ids = np.asarray(list(self.train_set.iid_map.keys()), dtype=np.int64)
            negatives = ids[y.cpu().numpy()[b:]]
        self.trace.append(
            StepTrace(
                session_ids=sessions[events],
                positions=positions[events],
                h_in_norms=np.asarray(step.get("h_in", np.zeros(b)), dtype=np.float64),
                n_active=b,
                negative_ids=negatives,
                learning_rate=float(optimizer.param_groups[0]["lr"]),
            )
        )

    def _step_loss(self, step: Mapping[str, Any]) -> tuple[int, float]:
        from cornac.models.seq_utils.losses import get_loss_function

        torch = self._torch
        y, bias, h = step["y"], step["b"], step["h"]
        b = int(h.shape[0])
        m = self._model
        if m.constrained_embedding:
            xy, exy = step["wy"][-1]
            O = exy[xy.shape[0] - y.shape[0] :]
        else:
            O = step["wy"][-1][1]
        R = torch.mm(h, O.T) + bias.T
        with torch.no_grad():
            loss = float(get_loss_function(self.hp["loss"])(R, **_loss_kwargs(self.hp, m.P0, b, y)))
        return b, loss


def _logged_view(a: np.ndarray, log: list[np.ndarray]) -> np.ndarray:
    """A view of ``a`` whose list-indexed lookups (io_iter's ``uir_tuple[1][[event indices]]``) append the indices
    to ``log``; every lookup returns what ``a`` returns (plain ndarrays, same values)."""

    class _Logged(np.ndarray):
        def __getitem__(self, idx: Any) -> Any:
            if isinstance(idx, list):
                log.append(np.asarray(idx, dtype=np.int64))
            out = np.ndarray.__getitem__(self, idx)
            return out.view(np.ndarray) if isinstance(out, np.ndarray) else out

    return a.view(_Logged)


def _event_lanes(train_set: Any) -> tuple[np.ndarray, np.ndarray]:
    """(session id, position in its session) of every event index of a cornac SequentialDataset (its ``sessions``:
    session index → event indices in order; ``sid_map``: session id → session index)."""
    n = len(train_set.uir_tuple[0])
    sessions = np.full(n, -1, dtype=np.int64)
    positions = np.full(n, -1, dtype=np.int64)
    for sid, idx in train_set.sid_map.items():
        events = np.asarray(train_set.sessions[idx], dtype=np.int64)
        sessions[events] = int(sid)
        positions[events] = np.arange(len(events))
    return sessions, positions
