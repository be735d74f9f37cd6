"""recpack 0.3.6 ``GRU4RecCrossEntropy`` and ``GRU4RecNegSampling`` (one of the study's six; the study used 0.3.5).

Two registered variants, one per recpack class (docs/implementations.md, 'Code bases from GitHub' and docs/implementations.md, 'Packages from PyPI'):

- ``recpack:cross_entropy`` — ``recpack.algorithms.GRU4RecCrossEntropy`` (full softmax over all items);
- ``recpack:neg_sampling`` — ``recpack.algorithms.GRU4RecNegSampling`` (TOP1 / TOP1-max / BPR / BPR-max over
  ``num_negatives`` uniform negatives per position).

The adapter translates only:

- ids: sessions and items are remapped to the contiguous 0-based indices recpack requires (items in ascending
  id order = the column order of score matrices); the frame becomes a
  ``recpack.matrix.InteractionMatrix(df, item_ix, user_ix, timestamp_ix, shape=(n_sessions, n_items))``;
- ``fit`` builds the recpack object with ``keep_last=True`` and a one-session validation tuple:
  recpack requires ``validation_data`` and, with the default ``keep_last=False``, reloads the best epoch
  with ``torch.load`` of a pickled module, which fails on torch >= 2.6 (weights-only default);
  ``keep_last=True`` keeps the last epoch, so the validation data never influences the model;
- ``score_prefixes``: one pseudo-user per prefix in an InteractionMatrix with increasing timestamps,
  scored by recpack's own ``predict`` (``predict_topK=None``: every item), which runs each history from a
  zero state and returns the scores after its last item; unknown items are dropped first;
- ``FitReport``: recpack reports no per-epoch figures, so the adapter wraps the *instance* methods
  ``_train_epoch`` (epoch boundaries and time) and ``_compute_loss`` (one call per optimizer step: the step's
  mean loss and its number of valid positions = trained transitions) of the object it built; the wrappers
  call the originals unchanged.

Hyperparameters under official names: ``layers`` → ``num_layers``/``hidden_size`` (one width for all layers),
``embedding`` → ``num_components`` (separate embedding only), ``dropout_p_embed`` = ``dropout_p_hidden`` →
``dropout`` (recpack has one dropout for both; different values are refused), ``n_sample`` → ``num_negatives``
(NegSampling: per-position uniform negatives, not shared), ``n_epochs`` → ``max_epochs``, ``learning_rate``,
``batch_size``, ``optimizer`` (adagrad | sgd). Everything else (bpreg, elu_param, logq, sample_alpha,
momentum for Adagrad, shared / no embedding, final_act) cannot be expressed and raises ``Unsupported``.
recpack-specific settings keep recpack's defaults: ``clipnorm=1.0``, ``bptt=1``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypedDict, cast

import numpy as np

from gru4rec_conformance.implementations._torchbase import (
    FitObserver,
    PackagedTorchAdapter,
    diagonal_split,
    loss_and_gradient,
    raw_gru_declarations,
    torch_framework,
)
from gru4rec_conformance.implementations.base import Capabilities, FitReport, StepTrace, Unsupported
from gru4rec_conformance.implementations.registry import register


class _Variant(TypedDict):
    """One registered recpack class."""

    cls: str  # the recpack.algorithms class
    losses: tuple[str, ...]  # official loss names it computes
    loss: str  # the default loss


_VARIANTS: dict[str, _Variant] = {
    "cross_entropy": {"cls": "GRU4RecCrossEntropy", "losses": ("cross-entropy",), "loss": "cross-entropy"},
    "neg_sampling": {"cls": "GRU4RecNegSampling", "losses": ("bpr-max", "top1", "top1-max", "bpr"),
                     "loss": "bpr"},
}  # fmt: skip


class RecpackAdapter(PackagedTorchAdapter):
    """recpack 0.3.6 GRU4Rec (one class per registered variant), driven through ``fit``/``predict``."""

    name = "recpack"
    label = "RecpackAdapter"
    description = "recpack 0.3.6 GRU4Rec (GRU4RecCrossEntropy / GRU4RecNegSampling)"
    homepage = "https://pypi.org/project/recpack/0.3.6/"
    package = ("recpack", "recpack", "run the checks with `tox -e recpack` (installs recpack==0.3.6 with numpy 1.26)")
    study = {"implementation": "Recpack", "variant": "OOB"}
    reproducibility = {
        "installs": "yes: recpack==0.3.6 with torch==2.13.0 on Python 3.11 (resolves numpy 1.26, pandas 2.3); "
        "fit fails at its end on torch>=2.6 unless keep_last=True",
        "offline": "yes (no download at run time)",
        "pinned": "tox env 'recpack': recpack==0.3.6, torch==2.13.0, numpy<2, pandas<3; recpack pins majors "
        "only (numpy==1.*, pandas==2.*, torch==2.*)",
        "hyperparameters": "layers, embedding size, one dropout, lr, batch size, epochs, negatives settable; "
        "bpreg fixed at 1.0, init U(-0.01, 0.01), no logQ / sample_alpha / Adagrad momentum",
    }

    def __init__(self, device: str = "cpu", variant: str = "cross_entropy", **options: Any) -> None:
        super().__init__(device=device, **options)
        if variant not in _VARIANTS:
            raise ValueError(f"variant: {variant!r} is not one of {sorted(_VARIANTS)}")
        self.variant = variant
        self.algo: Any = None  # the fitted recpack GRU4Rec* object (recpack is untyped)

    # -- declarations ------------------------------------------------------------------------------------
    def _declared_hyperparameters(self) -> dict[str, Any]:
        v = _VARIANTS[self.variant]
        hp: dict[str, Any] = {
            "layers": [100], "embedding": 250, "constrained_embedding": False, "loss": v["loss"],
            "batch_size": 512, "learning_rate": 0.03, "dropout_p_embed": 0.0, "dropout_p_hidden": 0.0,
            "n_epochs": 5, "optimizer": "adagrad",
        }  # fmt: skip
        if self.variant == "neg_sampling":
            hp["n_sample"] = 50
        return hp

    def capabilities(self) -> dict[str, Any]:
        self._require_package()
        v = _VARIANTS[self.variant]
        return {
            "losses": list(v["losses"]),
            "embedding_modes": ["separate"],
            **Capabilities.flags("dropout_embed", "dropout_hidden", "full_ranking"),
            "per_example_negatives": True,  # per-position independent uniform negatives (spec A.5)
            "devices": ["cpu"],
            "framework": torch_framework(),
            "shims": [
                "keep_last=True: recpack's best-epoch reload (torch.load of a pickled module) fails on torch>=2.6",
                "one-session validation tuple (recpack requires validation_data; unused with keep_last=True)",
                "session and item ids remapped to contiguous 0-based indices (InteractionMatrix requirement)",
                "score_prefixes: one pseudo-user per prefix, scored by recpack's predict (predict_topK=None)",
                "FitReport observed by wrapping the instance methods _train_epoch and _compute_loss",
                "score_stream/evaluate: one pseudo-user per test event (its session's known items before it), "
                "scored by recpack's predict; evaluate = recpack.metrics RecallK / ReciprocalRankK on that "
                "prediction matrix with the target as y_true (mean over events)",
            ],
            "hyperparameters": self._declared_hyperparameters(),
            **raw_gru_declarations(),
        }

    # -- required surface --------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        v = _VARIANTS[self.variant]
        if hp["loss"] not in v["losses"]:
            raise Unsupported(f"loss:{hp['loss']}", f"recpack {v['cls']} losses: {', '.join(v['losses'])}")
        if hp["constrained_embedding"]:
            raise Unsupported("embedding:shared", "recpack has a separate input embedding only")
        if int(hp["embedding"]) <= 0:
            raise Unsupported("embedding:none", "recpack always has an input embedding (num_components)")
        layers = hp["layers"]
        layers = [int(layers)] if isinstance(layers, (int, np.integer)) else [int(x) for x in layers]
        if len(set(layers)) != 1:
            raise Unsupported("layers:unequal", f"recpack's nn.GRU layers share one hidden_size, got {layers}")
        hp["layers"] = layers
        if float(hp["dropout_p_embed"]) != float(hp["dropout_p_hidden"]):
            raise Unsupported(
                "separate_dropouts",
                "recpack has one dropout for the embedding and the GRU output "
                f"(dropout_p_embed={hp['dropout_p_embed']} != dropout_p_hidden={hp['dropout_p_hidden']})",
            )
        if self.variant == "neg_sampling" and int(hp["n_sample"]) < 1:
            # GRU4Rec's n_sample=0 means "the other targets of the mini-batch are the only negatives"; recpack has
            # no in-batch negatives, and with num_negatives=0 its losses see no negative at all.
            raise Unsupported("in_batch_negatives", "recpack GRU4RecNegSampling needs n_sample (num_negatives) >= 1")
        if hp["optimizer"] not in ("adagrad", "sgd"):
            raise Unsupported(f"optimizer:{hp['optimizer']}", "recpack: optimization_algorithm adagrad or sgd")
        if self.device != "cpu":
            raise Unsupported(f"device:{self.device}", "the adapter runs recpack on the CPU only")
        self._new_build(hp, seed)
        self.algo = None

    def _make(self, max_epochs: int):
        import recpack.algorithms as ra

        hp = self.hparams
        kw: dict[str, Any] = dict(
            num_layers=len(hp["layers"]), hidden_size=hp["layers"][0], num_components=int(hp["embedding"]),
            dropout=float(hp["dropout_p_hidden"]), optimization_algorithm=hp["optimizer"],
            batch_size=int(hp["batch_size"]), max_epochs=int(max_epochs), learning_rate=float(hp["learning_rate"]),
            seed=self.seed, keep_last=True, predict_topK=None,
        )  # fmt: skip
        if self.variant == "neg_sampling":
            kw.update(loss_fn=hp["loss"], num_negatives=int(hp["n_sample"]))
        return getattr(ra, _VARIANTS[self.variant]["cls"])(**kw)

    def _matrix(self, users: np.ndarray, items: np.ndarray, times: np.ndarray, n_users: int):
        import pandas as pd
        from recpack.matrix import InteractionMatrix

        df = pd.DataFrame({"uid": users.astype(np.int64), "iid": items.astype(np.int64), "ts": times.astype(np.int64)})
        return InteractionMatrix(
            df, item_ix="iid", user_ix="uid", timestamp_ix="ts", shape=(int(n_users), len(self.item_ids()))
        )

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        if not self.hparams:
            raise RuntimeError("RecpackAdapter.fit: call build() first")
        epochs = int(self.hparams["n_epochs"] if n_epochs is None else n_epochs)
        df = train_df.sort_values(["SessionId", "Time"], kind="stable")
        self._item_ids = np.unique(df["ItemId"].to_numpy(dtype=np.int64))
        self._index = {int(i): k for k, i in enumerate(self._item_ids)}
        sess_codes, sess_uniques = _codes(df["SessionId"].to_numpy())
        items = np.searchsorted(self._item_ids, df["ItemId"].to_numpy(dtype=np.int64))
        # Event order inside a session is the frame's (sorted) order; recpack sorts by timestamp, so the
        # timestamps handed over are the event ranks (ties in Time cannot reorder events).
        ranks = np.arange(len(df), dtype=np.int64)
        X = self._matrix(sess_codes, items, ranks, len(sess_uniques))
        first = sess_codes == sess_codes[0]
        n_first = int(first.sum())
        val_in_mask = first.copy()
        if n_first > 1:
            val_in_mask[np.flatnonzero(first)[-1]] = False
        val_out_mask = first & ~val_in_mask if n_first > 1 else first
        val_in = self._matrix(sess_codes[val_in_mask], items[val_in_mask], ranks[val_in_mask], len(sess_uniques))
        val_out = self._matrix(sess_codes[val_out_mask], items[val_out_mask], ranks[val_out_mask], len(sess_uniques))
        algo = self._make(epochs)
        observer = _EpochObserver(algo, sess_uniques if self._trace_on else None)
        try:
            algo.fit(X, (val_in, val_out))
        finally:
            observer.detach()
        self.algo = algo
        return observer.report()

    def trace(self, enable: bool = True) -> None:
        """Record one :class:`StepTrace` per optimizer step of the following ``fit`` calls.

        recpack's step is one chunk (``bptt=1``: one position) of a mini-batch of whole sequences sorted by
        length; a "lane" is a row of that mini-batch (``batch_size`` rows, the last mini-batch smaller): its
        session, the position of its input event, the norm of the hidden state entering the GRU (first layer),
        and whether it still has a target (rows whose sequence ended are inactive, -1; recpack never refills
        them). Captured by instance wrappers of the sampler's ``sample`` and the model's ``forward`` installed
        at each epoch start. recpack draws negatives per position and row, not shared: ``negative_ids`` is None.
        """
        super().trace(enable)

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        if self.algo is None or self._item_ids is None:
            raise RuntimeError("RecpackAdapter.score_prefixes: call fit() first")
        users, items = [], []
        for row, prefix in enumerate(prefixes):
            for i in prefix:
                k = self._index.get(int(i))
                if k is not None:
                    users.append(row)
                    items.append(k)
        n = len(prefixes)
        if not users:
            return np.zeros((n, len(self._item_ids)), dtype=np.float32)
        users_a = np.asarray(users, dtype=np.int64)
        X = self._matrix(users_a, np.asarray(items, dtype=np.int64), np.arange(len(users_a), dtype=np.int64), n)
        pred = self.algo.predict(X)
        return np.asarray(pred.toarray(), dtype=np.float32)

    # -- black-box+ ----------------------------------------------------------------------------------------
    def _test_events(self, test_df: Any) -> tuple[list[tuple[int, int, int]], list[list[int]]]:
        """((session id, position, target item id), prefix of item ids) for every test event after the first
        known one of its session; unknown items are dropped first (positions count known items)."""
        df = test_df.sort_values(["SessionId", "Time"], kind="stable")
        events, prefixes = [], []
        for sid, g in df.groupby("SessionId", sort=False):
            known = [int(i) for i in g["ItemId"].to_numpy() if int(i) in self._index]
            for pos in range(1, len(known)):
                events.append((int(sid), pos, known[pos]))
                prefixes.append(known[:pos])
        return events, prefixes

    def score_stream(self, test_df: Any, batch_size: int) -> Iterator[tuple[Any, ...]]:
        """recpack's inference over the test events: one pseudo-user per event whose history is the session's
        known items before it, all scored by one ``predict`` call (recpack batches and runs each history from the
        zero state itself; ``batch_size`` has no effect). Rows in :meth:`item_ids` order."""
        events, prefixes = self._test_events(test_df)
        if not events:
            return
        scores = self.score_prefixes(prefixes)
        for (sid, pos, target), row in zip(events, scores):
            yield sid, pos, target, row

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict[str, Any]:
        """recpack's metrics on its own prediction: ``RecallK(K)`` → ``recall@K`` and ``ReciprocalRankK(K)`` →
        ``mrr@K`` over the test events (pseudo-users as in :meth:`score_stream`, ``y_true`` = the target item),
        ``value`` = the mean over events. Ties: recpack's ``get_top_K_ranks`` (argpartition order)."""
        import scipy.sparse
        from recpack.metrics import RecallK, ReciprocalRankK

        if self.algo is None or self._item_ids is None:
            raise RuntimeError("RecpackAdapter.evaluate: call fit() first")
        events, prefixes = self._test_events(test_df)
        if not events:
            return {**{f"{m}@{k}": float("nan") for m in ("recall", "mrr") for k in cutoffs}, "n_events": 0}
        users = np.repeat(np.arange(len(prefixes), dtype=np.int64), [len(p) for p in prefixes])
        items = np.asarray([self._index[i] for p in prefixes for i in p], dtype=np.int64)
        X = self._matrix(users, items, np.arange(len(users), dtype=np.int64), len(prefixes))
        y_pred = scipy.sparse.csr_matrix(self.algo.predict(X))
        targets = [self._index[t] for _, _, t in events]
        y_true = scipy.sparse.csr_matrix(
            (np.ones(len(targets)), (np.arange(len(targets)), targets)), shape=(len(targets), len(self._item_ids))
        )
        out: dict[str, Any] = {}
        for k in cutoffs:
            for name, cls in (("recall", RecallK), ("mrr", ReciprocalRankK)):
                metric = cls(K=int(k))
                metric.calculate(y_true, y_pred)
                out[f"{name}@{k}"] = float(metric.value)
        out["n_events"] = len(events)
        return out

    # -- white-box ---------------------------------------------------------------------------------------
    def _fitted_model(self) -> Any:
        """recpack's ``GRU4RecTorch`` module (``model_``), None before ``fit``. ``get_weights`` shows its parameters
        under their torch names; item-indexed rows in :meth:`item_ids` order without recpack's padding row (index
        I, zeroed in the embedding); GRU gate blocks in torch's order (reset, update, candidate) = ``gate_layout``;
        biases 1-D. ``set_weights`` leaves the padding rows untouched."""
        return None if self.algo is None else getattr(self.algo, "model_", None)

    def _weight_rows(self) -> dict[str, slice]:
        """The item-indexed parameters' rows in :meth:`item_ids` order (recpack's padding rows follow them)."""
        return dict.fromkeys(("emb.weight", "lin.weight", "lin.bias"), slice(0, len(self.item_ids())))

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One optimizer update of recpack's own training loop on the b transitions input → target.

        The b transitions become b two-event sequences of an InteractionMatrix and go through
        ``GRU4Rec._train_epoch`` (recpack's sampler, forward, ``_compute_loss``, clipping, optimizer step):
        with ``bptt=1`` that is exactly one update (the second chunk has only padding targets). Negatives
        (GRU4RecNegSampling) come from numpy's global RNG, reseeded with the build seed before each step, so
        repeated steps on one batch see the same negatives. Returns recpack's loss of the step (mean over
        the b transitions). A given ``hidden`` state cannot be passed to recpack's loop: Unsupported.
        """
        if hidden is not None:
            raise Unsupported("train_step:hidden", "recpack's training loop starts every sequence from zero")
        self._require_model()
        x = [self._index.get(int(i)) for i in np.asarray(batch_inputs).ravel()]
        y = [self._index.get(int(i)) for i in np.asarray(batch_targets).ravel()]
        if None in x or None in y or len(x) != len(y) or not x:
            raise ValueError("batch_inputs/batch_targets: expected equally many known item ids")
        b = len(x)
        users = np.repeat(np.arange(b, dtype=np.int64), 2)
        items = np.column_stack([cast(list[int], x), cast(list[int], y)]).ravel().astype(np.int64)  # None: refused
        X = self._matrix(users, items, np.arange(2 * b, dtype=np.int64), b)
        batch_size = self.algo.fit_sampler.batch_size
        self.algo.fit_sampler.batch_size = max(batch_size, b)  # one mini-batch holds all b transitions
        np.random.seed(self.seed)
        self.algo.model_.train()
        try:
            losses = self.algo._train_epoch(X)
        finally:
            self.algo.fit_sampler.batch_size = batch_size
        return float(sum(losses))

    def train_forward(self, prefix_batch: Any, seed: int) -> dict:
        """recpack's training-mode forward on b equally long sequences, from the zero state; the result describes
        the last transition (input = second-to-last item, target = last item).

        ``embedding_out`` and ``layer_outputs`` (the GRU output of the last layer) are captured after recpack's
        in-place dropout (a forward hook on its ``drop`` module, called once on the embedding and once on the GRU
        output); ``scores`` are the columns the step's loss sees: every item for GRU4RecCrossEntropy (its full
        softmax, recpack's padding output dropped from ``scores`` but counted in ``score_tensor_shape``), or the
        target plus the negatives recpack's own sampler draws for GRU4RecNegSampling (gathered from the full
        output); ``output_rows_touched``: rows of the output layer with a non-zero gradient of the step's loss.
        """
        import torch
        from recpack.algorithms.samplers import SequenceMiniBatchPositivesTargetsNegativesSampler

        model = self._require_model()
        algo = self.algo
        seqs = [[self._index.get(int(i)) for i in s] for s in prefix_batch]
        if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2 or any(None in s for s in seqs):
            raise ValueError("prefix_batch: expected b >= 1 sequences of known items with one common length >= 2")
        ids = self.item_ids()
        b, n = len(seqs), len(ids)
        pos = torch.as_tensor(seqs, dtype=torch.long)
        if self.variant == "neg_sampling":
            X = self._matrix(
                np.repeat(np.arange(b), pos.shape[1]), pos.numpy().ravel(), np.arange(pos.numel(), dtype=np.int64), b
            )
            np.random.seed(int(seed))
            sampler = SequenceMiniBatchPositivesTargetsNegativesSampler(
                algo.num_negatives, algo.pad_token, batch_size=b
            )
            uids, pos, targets, negatives = next(iter(sampler.sample(X)))
            order = np.argsort(uids.numpy(), kind="stable")
            pos, targets, negatives = pos[order], targets[order], negatives[order]
        else:
            targets = torch.roll(pos, -1, dims=1)
            targets[:, -1] = algo.pad_token
            negatives = torch.zeros((*pos.shape, 0), dtype=torch.long)
        inputs, tgt, neg = pos[:, :-1], targets[:, :-1], negatives[:, :-1]
        captured: list[Any] = []
        handle = model.drop.register_forward_hook(lambda m, a, o: captured.append(a[0]))
        model.train()
        model.zero_grad()
        torch.manual_seed(int(seed))
        try:
            output, _ = model(inputs, model.init_hidden(b))
        finally:
            handle.remove()
        mask = torch.zeros_like(tgt, dtype=torch.bool)
        mask[:, -1] = True  # the loss of the last transition only
        loss = algo._compute_loss(output, tgt, neg, mask)
        loss.backward()
        rows = int((model.lin.weight.grad.abs().sum(1) > 0).sum())
        model.zero_grad()
        last = output[:, -1, :].detach()
        if self.variant == "neg_sampling":
            cols = torch.cat([tgt[:, -1:], neg[:, -1, :]], dim=1)
            scores = torch.gather(last, 1, cols).numpy()
            columns = ids[cols.numpy()]
        else:
            scores, columns = last[:, :n].numpy(), ids.copy()
        emb, hid = captured[0], captured[1]
        return {
            "embedding_out": emb[:, -1, :].detach().cpu().numpy(),
            "layer_outputs": [hid[:, -1, :].detach().cpu().numpy()],
            "scores": scores,
            "columns": columns,
            "score_tensor_shape": tuple(output[:, -1, :].shape),
            "output_rows_touched": rows,
        }

    def _fitted_optimizer(self) -> Any:
        """recpack's torch optimizer (``GRU4Rec._init_model``: ``optim.Adagrad(params, lr)`` or ``optim.SGD(params,
        lr, momentum)``); no learning-rate schedule. RuntimeError before ``fit``."""
        self._require_model()
        return self.algo.optimizer

    def _grad_clip(self) -> Any:
        """recpack's ``clipnorm`` (``clip_grad_norm_`` before every step, default 1.0), None when 0."""
        return float(self.algo.clipnorm) if self.algo.clipnorm else None

    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        """recpack's loss on a given (b, K) score matrix whose diagonal holds the targets.

        ``cross-entropy`` (GRU4RecCrossEntropy): ``torch.nn.CrossEntropyLoss`` over the K columns with target
        column i for row i (recpack applies it to its full output row). The NegSampling losses take
        ``positive_scores`` = the diagonal (b, 1) and ``negative_scores`` = each row's other K−1 columns, as
        ``GRU4RecNegSampling._compute_loss`` passes them. No loss argument is settable: ``bpreg=1.0`` (the value
        fixed inside ``bpr_max_loss``) and ``elu_param=0`` / ``final_act='linear'`` (no activation) are accepted
        as descriptions of what recpack computes; any other value raises :class:`Unsupported`.
        """
        import torch

        v = _VARIANTS[self.variant]
        if loss not in v["losses"]:
            raise Unsupported(f"loss:{loss}", f"not a loss of recpack {v['cls']}")
        for k, val in hparams.items():
            # Values recpack has fixed are accepted (they describe what it computes); others are refused.
            if k == "logq" and not val:
                continue
            if k == "final_act" and val in (None, "linear"):
                continue
            if k == "elu_param" and float(val) == 0.0:
                continue
            if k == "bpreg" and loss == "bpr-max" and float(val) == 1.0:
                continue
            if k in ("batch_size", "n_targets") and val is None:
                continue
            name = {"bpreg": "bpreg", "logq": "logq", "elu_param": "final_act:elu"}.get(k, f"loss_on_scores:{k}")
            raise Unsupported(name, f"recpack's {loss} loss cannot take {k}={val!r} (bpreg is fixed at 1.0, no ELU)")

        def loss_of(R: Any) -> Any:
            if loss == "cross-entropy":
                return torch.nn.CrossEntropyLoss()(R, torch.arange(R.shape[0]))
            from recpack.algorithms import loss_functions as lf

            fn = {"bpr-max": lf.bpr_max_loss, "top1": lf.top1_loss, "top1-max": lf.top1_max_loss, "bpr": lf.bpr_loss}
            return fn[loss](*diagonal_split(R))

        return loss_and_gradient(scores, loss_of)


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """0-based codes of ``values`` in order of first appearance, and the unique values in that order."""
    uniques, first_idx, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first_idx, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse].astype(np.int64), uniques[order]


class _EpochObserver(FitObserver):
    """Wraps ``_train_epoch`` and ``_compute_loss`` on one recpack object (instance attributes; the originals
    run unchanged) to collect per-epoch loss (mean per trained transition), steps, transitions and seconds;
    with ``sessions`` (tracing) it also wraps, per epoch, the sampler's ``sample`` and the model's ``forward``
    to record one :class:`StepTrace` per step."""

    def __init__(self, algo: Any, sessions: Any = None) -> None:
        super().__init__()
        self.trace = [] if sessions is not None else None
        train_epoch, compute_loss = algo._train_epoch, algo._compute_loss
        self._algo = algo

        def _train_epoch(X: Any) -> Any:
            if self.trace is not None:
                self._install_tracing(sessions)
            return self.run_epoch(train_epoch, X)

        def _compute_loss(output: Any, targets_chunk: Any, negatives_chunk: Any, true_input_mask: Any) -> Any:
            loss = compute_loss(output, targets_chunk, negatives_chunk, true_input_mask)
            self.count(loss, int(true_input_mask.sum()))
            return loss

        self.wrap(algo, "_train_epoch", _train_epoch)
        self.wrap(algo, "_compute_loss", _compute_loss)

    def _install_tracing(self, sessions: Any) -> None:
        trace = self.trace
        assert trace is not None  # installed only when tracing (sessions given)
        algo = self._algo
        sampler, model = algo.fit_sampler, algo.model_
        sample, forward = type(sampler).sample.__get__(sampler), type(model).forward.__get__(model)
        state: dict[str, Any] = {}

        def _sample(X: Any):
            for batch in sample(X):
                state["uids"] = batch[0].numpy()
                state["position"] = 0
                yield batch

        def _forward(x: Any, hidden: Any):
            if model.training and "uids" in state:
                uids = state["uids"]
                n_rows, n_active = len(uids), int(x.shape[0])
                sid = np.full(n_rows, -1, dtype=np.int64)
                pos = np.full(n_rows, -1, dtype=np.int64)
                norms = np.zeros(n_rows, dtype=np.float64)
                sid[:n_active] = np.asarray(sessions)[uids[:n_active]]  # active rows come first (sorted by length)
                pos[:n_active] = state["position"]
                norms[:n_active] = hidden[0].detach().norm(dim=1).cpu().numpy()
                trace.append(
                    StepTrace(
                        session_ids=sid,
                        positions=pos,
                        h_in_norms=norms,
                        n_active=n_active,
                        negative_ids=None,
                        learning_rate=float(algo.optimizer.param_groups[0]["lr"]),
                    )
                )
                state["position"] += int(x.shape[1])
            return forward(x, hidden)

        self.wrap(sampler, "sample", _sample)
        self.wrap(model, "forward", _forward)


@register(name="recpack:cross_entropy", variant="cross_entropy")
class RecpackCrossEntropyAdapter(RecpackAdapter):
    """recpack 0.3.6 ``GRU4RecCrossEntropy`` (``--impl recpack:cross_entropy``)."""

    name = "recpack:cross_entropy"
    description = "recpack 0.3.6 GRU4RecCrossEntropy (full softmax over all items)"


@register(name="recpack:neg_sampling", variant="neg_sampling")
class RecpackNegSamplingAdapter(RecpackAdapter):
    """recpack 0.3.6 ``GRU4RecNegSampling`` (``--impl recpack:neg_sampling``)."""

    name = "recpack:neg_sampling"
    description = "recpack 0.3.6 GRU4RecNegSampling (per-position uniform negatives; TOP1/TOP1-max/BPR/BPR-max)"
