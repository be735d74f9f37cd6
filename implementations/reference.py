"""The reference GRU4Rec (``reference.gru4rec``) as an implementation under test.

It implements the whole adapter protocol of implementations/base.py, every optional hook included, and must pass
every check with zero xfails (``pytest conformance/ --impl reference``). The mutants in
``implementations/mutants/`` subclass :class:`ReferenceAdapter` and swap :attr:`ReferenceAdapter.gru_class` for a
``GRU4Rec`` subclass with exactly one defect switched on, so everything below is shared with them.

Hook semantics that the protocol leaves open are fixed here and documented in conformance/gru4rec/README.md
("Adapter hooks used by the checks"):

- ``score_stream`` yields ``(session_id, position, target_item, scores_row)``; ``position`` is the index of the
  target within its session after events of unknown items were dropped (the prefix is the session's first
  ``position`` known items);
- ``train_forward(prefix_batch, seed)``: ``prefix_batch`` is a list of b equally long item sequences (length ≥ 2);
  the network runs them in training mode from the zero state and the result describes the *last* transition
  (input = second-to-last item, target = last item), with the columns a training step scores;
- ``loss_on_scores(R, loss, bpreg=, elu_param=, final_act=, logq=, column_q=)``: the mean over rows;
- ``get_weights``: every parameter, item-indexed axes in :meth:`item_ids` order, GRU gate blocks ordered as
  ``gate_layout`` = (reset, update, candidate), biases as 1-D arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from gru4rec_conformance.implementations.base import Adapter, Capabilities, FitReport, StepTrace, Unsupported
from gru4rec_conformance.implementations.registry import register

# Final activations of the reference (docs/algorithm.md, 'Final activations'; Theano names) by feature name.
_FINAL_ACTS = ("linear", "elu", "tanh", "relu", "leaky", "selu", "softmax")
_LOSSES = ("cross-entropy", "bpr-max", "top1", "top1-max", "bpr")
_LOSS_KWARGS = ("bpreg", "elu_param", "final_act", "logq", "column_q")


def _gru4rec_class():
    from gru4rec_conformance.reference.gru4rec import GRU4Rec

    return GRU4Rec


@register
class ReferenceAdapter(Adapter):
    """The oracle (``reference.gru4rec.GRU4Rec``) behind the adapter protocol, with every optional hook.

    Class attributes:
        gru_class: the ``GRU4Rec`` class to drive; ``None`` means ``reference.gru4rec.GRU4Rec`` (imported lazily
            so that listing the registry does not import torch). Mutants set a subclass.
        sample_cache_max_size: passed to ``GRU4Rec.fit`` (the official default, 10,000,000 ids).
    """

    name = "reference"
    role = "reference"
    isolated = False
    description = "Reference GRU4Rec oracle (PyTorch; behaves like hidasib/GRU4Rec_PyTorch_Official d1fc311)"
    homepage = "https://github.com/hidasib/GRU4Rec_PyTorch_Official"
    # The study's official run with all features: printed beside the metric-conformance numbers (the study's
    # value is for the full dataset and the tuned, larger network; ours for the CPU-scaled run).
    study = {"implementation": "GRU4Rec Official", "variant": "Best params"}
    reproducibility = {
        "installs": "part of this suite (requirements.lock)",
        "offline": "yes",
        "pinned": "torch==2.13.0 (requirements.lock)",
        "hyperparameters": "every official hyperparameter of the PyTorch port plus the Theano losses/final activations",
    }

    gru_class: Any = None
    sample_cache_max_size = 10_000_000

    def __init__(self, device: str = "cpu", **options: Any) -> None:
        super().__init__(device=device, **options)
        self.gru = None
        self.hparams: dict[str, Any] = {}
        self._tracing = False

    # -- declarations ------------------------------------------------------------------------------------
    def version(self) -> str:
        from gru4rec_conformance.conformance._records.runinfo import suite_version

        return f"suite {suite_version()['string']}"

    def _gru_cls(self):
        return self.gru_class if self.gru_class is not None else _gru4rec_class()

    def declared_hyperparameters(self) -> dict[str, Any]:
        """Official names with the PyTorch port's defaults (docs/algorithm.md, 'Hyperparameters'), plus ``optimizer``."""
        from gru4rec_conformance.reference.gru4rec.params import DEFAULTS

        hp = {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULTS.items() if k not in ("seed", "device")}
        hp["optimizer"] = "adagrad"
        return hp

    def capabilities(self) -> dict[str, Any]:
        import torch

        flags = Capabilities.flags(*Capabilities.OFFICIAL_FLAGS)
        return {
            "losses": list(_LOSSES),
            "embedding_modes": ["none", "separate", "shared"],
            **flags,
            "final_acts": list(_FINAL_ACTS),
            "devices": ["cpu", "cuda"],
            "framework": {"name": "torch", "version": torch.__version__},
            "shims": [],
            "hyperparameters": self.declared_hyperparameters(),
            "score_semantics": "raw",
            "eval_tie_mode": "conservative",
            "gate_layout": ["reset", "update", "candidate"],
        }

    # -- required surface --------------------------------------------------------------------------------
    def _check_values(self, hp: Mapping[str, Any]) -> None:
        """Refuse values outside the declared vocabulary with :class:`Unsupported` (HP-4)."""
        caps = self._declared_capabilities()
        if hp.get("loss") not in caps.losses:
            raise Unsupported(f"loss:{hp.get('loss')}", "not a declared loss")
        if hp.get("optimizer") != "adagrad":
            raise Unsupported(f"optimizer:{hp.get('optimizer')}", "the reference has Adagrad(+momentum) only")
        fa = hp.get("final_act")
        if fa is not None:
            family = str(fa).split("-", 1)[0]
            if family not in caps.final_acts:
                raise Unsupported(f"final_act:{family}", f"final_act={fa!r} is not declared")

    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        self._check_values(hp)
        kw = {k: v for k, v in hp.items() if k != "optimizer"}
        self.hparams = hp
        self.gru = self._gru_cls()(**kw, seed=int(seed), device=self.device)
        self._tracing = False

    def _require_gru(self):
        if self.gru is None:
            raise RuntimeError(f"{type(self).__name__}: call build() first")
        return self.gru

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        gru = self._require_gru()
        traces: list[StepTrace] = []

        def on_step(t: StepTrace) -> None:  # the reference's own record, with the protocol's dtypes
            lr = None if t.learning_rate is None else float(t.learning_rate)
            traces.append(
                dataclasses.replace(
                    t,
                    session_ids=np.asarray(t.session_ids),
                    positions=np.asarray(t.positions),
                    h_in_norms=np.asarray(t.h_in_norms, dtype=np.float64),
                    n_active=int(t.n_active),
                    negative_ids=np.asarray(t.negative_ids),
                    learning_rate=lr,
                )
            )

        rep = gru.fit(
            train_df,
            sample_cache_max_size=self.sample_cache_max_size,
            n_epochs=n_epochs,
            trace=on_step if self._tracing else None,
        )
        return FitReport(
            epoch_losses=[float(x) for x in rep.epoch_losses],
            n_steps=[int(x) for x in rep.n_steps],
            n_events_trained=[int(x) for x in rep.n_events_trained],
            epoch_seconds=[float(x) for x in rep.epoch_seconds],
            trace=traces if self._tracing else None,
        )

    def item_ids(self) -> np.ndarray:
        return np.asarray(self._require_gru().item_ids())

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        return self._require_gru().score_prefixes([list(p) for p in prefixes])

    # -- black-box+ --------------------------------------------------------------------------------------
    def score_stream(self, test_df: Any, batch_size: int) -> Iterator[tuple]:
        for sid, pos, target, row in self._require_gru().score_stream(test_df, batch_size=int(batch_size)):
            yield int(sid), int(pos), int(target), np.asarray(row)

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict:
        return self._require_gru().evaluate(
            test_df, cutoffs=tuple(cutoffs), batch_size=int(batch_size), mode="conservative"
        )

    # -- white-box ---------------------------------------------------------------------------------------
    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        from gru4rec_conformance.reference.gru4rec.losses import loss_on_scores

        if loss not in self._declared_capabilities().losses:
            raise Unsupported(f"loss:{loss}", "not a declared loss")
        unknown = sorted(set(hparams) - set(_LOSS_KWARGS))
        if unknown:
            raise Unsupported(f"loss_on_scores:{unknown[0]}", f"unknown loss argument(s) {unknown}")
        return loss_on_scores(np.asarray(scores), loss, classes=self._gru_cls().loss_classes, **hparams)

    def train_forward(self, prefix_batch: Any, seed: int) -> dict:
        """Training-mode forward of the last transition of every sequence in ``prefix_batch`` (no update).

        Returns ``embedding_out`` (b, n_in) after embedding dropout (None in no-embedding mode),
        ``layer_outputs`` (per layer (b, d_l), after hidden dropout), ``scores`` (b, K) the training scores of the
        columns ``columns`` (item ids, (K,) or per row (b, K)), ``score_tensor_shape`` (the widest score tensor the
        step computed) and ``output_rows_touched`` (rows of the output weights that get a non-zero gradient from
        the step's loss).
        """
        import torch

        from gru4rec_conformance.reference.gru4rec.core import _rows_touched

        gru = self._require_gru()
        model = gru.model
        if model is None:
            raise RuntimeError("train_forward: call fit() first (n_epochs=0 initialises without training)")
        seqs = [list(s) for s in prefix_batch]
        if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2:
            raise ValueError("prefix_batch: expected b >= 1 item sequences of one common length >= 2")
        b = len(seqs)
        cols = [gru._to_columns([s[t] for s in seqs], f"prefix_batch[:, {t}]") for t in range(len(seqs[0]))]
        gru._gen_dropout.manual_seed(int(seed))
        p_embed, p_hidden = gru._dropout_rates()
        H = model.zero_state(b)
        with torch.no_grad():
            for t in range(len(cols) - 2):
                _, H, _ = model.forward_train(cols[t], cols[t + 1], H, p_embed, p_hidden, gru._gen_dropout)
        samples = gru._sample_block(1, b)
        y = gru._columns(cols[-1], samples[0] if samples is not None else None)
        shapes: list[tuple] = []
        score_all = model.score_all

        def recording_score_all(h):
            out = score_all(h)
            shapes.append(tuple(out.shape))
            return out

        model.score_all = recording_score_all  # instance attribute: sees full-catalogue scoring inside a step
        lookups: list = []
        try:
            R, _, cap = model.forward_train(
                cols[-2], y, H, p_embed, p_hidden, gru._gen_dropout, capture=True, rows=lookups
            )
            loss = gru.loss_function(R, y, b) / gru.batch_size
            names = model.param_names()
            grads = torch.autograd.grad(
                loss, [model.params[k] for k in names] + [leaf for _, _, leaf in lookups], allow_unused=True
            )
        finally:
            del model.score_all
        shapes.append(tuple(R.shape))
        gd = gru._collect_grads(names, grads[: len(names)], lookups, grads[len(names) :])
        rows = _rows_touched(gd.get("Wy"))
        emb = cap["embedding_out"]
        return {
            "embedding_out": None if emb is None else emb.detach().cpu().numpy(),
            "layer_outputs": [t.detach().cpu().numpy() for t in cap["layer_outputs"]],
            "scores": R.detach().cpu().numpy(),
            "columns": np.asarray(gru.data.item_ids[y.cpu().numpy()]),
            "score_tensor_shape": max(shapes, key=lambda s: s[-1]),
            "output_rows_touched": rows,
        }

    # GE (no-embedding first layer) stores its gate blocks as [candidate | reset | update]; expose them as
    # gate_layout (reset, update, candidate), like the GRUCell layers.
    _GE_TO_LAYOUT = (1, 2, 0)
    _GE_FROM_LAYOUT = (2, 0, 1)

    @staticmethod
    def _permute_blocks(a: np.ndarray, order: Sequence[int], axis: int) -> np.ndarray:
        blocks = np.split(a, 3, axis=axis)
        return np.concatenate([blocks[i] for i in order], axis=axis)

    def get_weights(self) -> dict:
        w = self._require_gru().get_weights()
        if "GE.Wx0" in w:
            w["GE.Wx0"] = self._permute_blocks(w["GE.Wx0"], self._GE_TO_LAYOUT, axis=1)
            w["GE.Bh0"] = self._permute_blocks(w["GE.Bh0"], self._GE_TO_LAYOUT, axis=0)
        return w

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        w = {k: np.asarray(v) for k, v in weights.items()}
        if "GE.Wx0" in w:
            w["GE.Wx0"] = self._permute_blocks(w["GE.Wx0"], self._GE_FROM_LAYOUT, axis=1)
        if "GE.Bh0" in w:
            w["GE.Bh0"] = self._permute_blocks(w["GE.Bh0"], self._GE_FROM_LAYOUT, axis=0)
        self._require_gru().set_weights(w)

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One optimizer update on the given (b,) input and target item ids, with the step's own extra samples
        (the sampler's next draw) and dropout masks; returns the loss (Σ_lanes / batch_size)."""
        gru = self._require_gru()
        if gru.model is None:
            raise RuntimeError("train_step: call fit() first (n_epochs=0 initialises without training)")
        x = gru._to_columns(np.asarray(batch_inputs), "batch_inputs")
        t = gru._to_columns(np.asarray(batch_targets), "batch_targets")
        if len(x) != len(t):
            raise ValueError(f"batch_targets: expected {len(x)} item(s), got {len(t)}")
        H = gru._hidden_in(hidden, len(x))
        samples = gru._sample_block(1, len(x))
        loss, _ = gru._step(x, t, samples[0] if samples is not None else None, H)
        return float(loss) / gru.batch_size

    def trace(self, enable: bool = True) -> None:
        self._tracing = bool(enable)

    def optimizer_info(self) -> dict:
        return self._require_gru().optimizer_info()
