"""``GRU4Rec``: the reference implementation's public API (docs/architecture.md, "reference/gru4rec").

Training follows docs/algorithm.md (input data to hyperparameters) and the official PyTorch port
(hidasib/GRU4Rec_PyTorch_Official d1fc311, ``GRU4Rec.fit``); evaluation its 'Evaluation protocol'; save/load its
'Saving and loading' (state, item map and hyperparameters instead of a pickle).
The components are classes selected through class attributes, so a variant overrides exactly one piece:
``iterator_class``, ``sampler_class``, ``model_class``, ``optimizer_class``, ``evaluator_class``, ``loss_classes``
(see reference/gru4rec/README.md for the list of extension points).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from gru4rec_conformance.fileio import atomic_path, atomic_write_json

from . import params as P
from .data import SessionData, SessionParallelIterator, build_training_data, validate_frame
from .evaluation import SessionParallelEvaluator, check_cutoffs, check_mode
from .losses import LOSS_CLASSES, make_loss
from .model import GRU4RecModel
from .optim import IndexedAdagradM, RowGrad
from .records import FitReport, StepResult, StepTrace
from .sampling import SampleCache
from .steps import STEP_IMPLS as _STEP_IMPLS
from .steps import TrainingStep, select_step

FORMAT_VERSION = 1


class TrainingDivergedError(FloatingPointError):
    """A training step produced a NaN loss; training was aborted (the port sets ``error_during_train``)."""


class GRU4Rec:
    """Reference GRU4Rec (session-based recommendation with GRUs, session-parallel minibatches, sampled losses).

    Constructor arguments are the official hyperparameters (docs/algorithm.md, 'Hyperparameters'; PyTorch-port defaults):
    ``layers=[100]``, ``loss='cross-entropy'`` (also 'bpr-max', and the Theano losses 'top1', 'top1-max',
    'bpr'), ``batch_size=64``, ``dropout_p_embed=0.0``, ``dropout_p_hidden=0.0``, ``learning_rate=0.05``,
    ``momentum=0.0``, ``sample_alpha=0.5``, ``n_sample=2048``, ``embedding=0`` (int or 'layersize'),
    ``constrained_embedding=True``, ``n_epochs=10``, ``bpreg=1.0``, ``elu_param=0.5``, ``logq=0.0``, plus
    ``final_act`` (Theano name for non-XE losses; None = the port's ELU(elu_param) rule), ``seed=42`` (drives
    initialisation, dropout masks and negative sampling through explicit generators: same seed → identical
    scores on CPU) and ``device='cpu'``.

    ``step_impl`` (an execution option, not a hyperparameter: not in ``get_params``, not saved) selects the
    training step of ``fit`` (``steps/``, behind the ``steps.TrainingStep`` interface): ``'standard'``
    (``steps.StandardStep``: the seams ``_step`` etc., shapes follow the shrinking batch), ``'static'``
    (``steps.StaticStep``: fixed shapes, captured as a CUDA graph on CUDA; identical results, bit for bit on CPU
    while all lanes are active) or ``'auto'`` (default: static on CUDA when the model's components allow it,
    standard otherwise). ``step_info`` tells what the last ``fit`` used. A per-step ``trace`` always uses the
    standard step. The steps read the model through ``steps.StepHost``: the public state, ``dropout_generator``,
    ``overridden_methods`` and the documented protected seams listed there.

    Raises ValueError naming the parameter for an unknown name or an invalid value.
    """

    iterator_class = SessionParallelIterator
    sampler_class = SampleCache
    model_class = GRU4RecModel
    optimizer_class = IndexedAdagradM
    evaluator_class = SessionParallelEvaluator
    loss_classes = LOSS_CLASSES

    #: steps between NaN checks of the accumulated loss (a check is a host sync on GPU)
    nan_check_interval = 64

    #: the static step's CUDA graph: None = capture on CUDA, False = run the static step eagerly (set on an instance
    #: to compare the two)
    static_cuda_graph: bool | None = None

    #: values of the ``step_impl`` option
    STEP_IMPLS = _STEP_IMPLS

    def __init__(self, step_impl: str = "auto", **hparams: Any):
        self._hp = dict(P.DEFAULTS)
        self._hp["layers"] = list(P.DEFAULTS["layers"])
        self.model: GRU4RecModel | None = None
        self.error_during_train = False
        if step_impl not in self.STEP_IMPLS:
            raise ValueError(f"parameter 'step_impl': one of {', '.join(self.STEP_IMPLS)}, got {step_impl!r}")
        self.step_impl = step_impl
        self.step_info: dict = {}
        self.set_params(**hparams)

    # ------------------------------------------------------------------ hyperparameters
    def set_params(self, **kw: Any) -> GRU4Rec:
        """Set hyperparameters with the official string semantics (see ``params.coerce``); 'layersize' is
        resolved after all values are set. Unknown names raise ValueError. A fitted model is unaffected until
        the next ``fit``."""
        hp = dict(self._hp)
        for k, v in kw.items():
            hp[k] = P.coerce(k, v, hp.get(k))
        self._hp = P.resolve(hp)
        return self

    def get_params(self) -> dict:
        """Current hyperparameters (resolved), a copy. (Params are hyperparameters here, as in the official port's
        ``set_params`` and scikit-learn; the model weights are :meth:`get_weights` / :meth:`set_weights`, the
        names the adapter protocol uses too.)"""
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self._hp.items()}

    def __getattr__(self, name: str):
        hp = self.__dict__.get("_hp")
        if hp is not None and name in hp:
            return hp[name]
        raise AttributeError(name)

    @property
    def device(self) -> torch.device:
        return torch.device(self._hp["device"])

    @property
    def dropout_generator(self) -> torch.Generator:
        """The ``torch.Generator`` (on ``device``) that draws the training dropout masks; seeded from ``seed`` by
        ``fit``/``load``. Raises AttributeError before the model is built."""
        return self._gen_dropout

    @classmethod
    def overridden_methods(cls, names: Iterable[str]) -> list[str]:
        """The names among ``names`` (methods of ``GRU4Rec``) that ``cls`` overrides, in the given order (a
        training step that re-implements a seam refuses a model overriding it)."""
        return [n for n in names if getattr(cls, n) is not getattr(GRU4Rec, n)]

    def _seeds(self) -> tuple[int, int, int]:
        """Independent seeds for initialisation, dropout and sampling derived from ``seed``."""
        ss = np.random.SeedSequence(int(self._hp["seed"])).spawn(3)
        init, dropout, sample = (int(s.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)) for s in ss)
        return init, dropout, sample

    def _dropout_rates(self) -> tuple[float, float]:
        """(dropout_p_embed, dropout_p_hidden) used by the training forward pass."""
        return self._hp["dropout_p_embed"], self._hp["dropout_p_hidden"]

    # ------------------------------------------------------------------ building
    def _check_training_frame(self, data, item_key, session_key, time_key) -> None:
        validate_frame(data, item_key, session_key, time_key, what="training data")

    def _build(
        self, data: pd.DataFrame, sample_cache_max_size: int, item_key: str, session_key: str, time_key: str
    ) -> None:
        self._check_training_frame(data, item_key, session_key, time_key)
        sd = build_training_data(data, item_key, session_key, time_key)
        if sd.n_items < 2:
            raise ValueError(
                f"training data: column {item_key!r} has a single distinct item "
                f"({sd.item_ids[0]!r}); ranking needs at least two items"
            )
        B = self._hp["batch_size"]
        if sd.n_sessions < B:
            raise ValueError(
                f"parameter 'batch_size': batch_size={B} exceeds the number of training sessions "
                f"({sd.n_sessions}) in column {session_key!r}; lower batch_size (the official "
                f"port fails with an IndexError here)"
            )
        if sd.n_events - sd.n_sessions < 1:
            raise ValueError(
                f"training data: no session in column {session_key!r} has two or more events; nothing to train on"
            )
        if int(sample_cache_max_size) < 1 and self._hp["n_sample"] > 0:
            raise ValueError(f"parameter 'sample_cache_max_size': must be >= 1, got {sample_cache_max_size}")
        self.data = sd
        self.keys = {"item_key": item_key, "session_key": session_key, "time_key": time_key}
        dev = self.device
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"parameter 'device': {self._hp['device']!r} requested but CUDA is not available")
        s_init, s_drop, s_samp = self._seeds()
        g_init = torch.Generator().manual_seed(s_init)
        self._gen_dropout = torch.Generator(device=dev).manual_seed(s_drop)
        self._gen_sample = torch.Generator(device=dev).manual_seed(s_samp)
        hp = self._hp
        self.model = self.model_class(
            sd.n_items, hp["layers"], hp["embedding"], hp["constrained_embedding"], g_init, dev
        )
        self.supports = torch.tensor(sd.supports, dtype=torch.float32, device=dev)
        self.loss_function = make_loss(
            hp["loss"],
            logq=hp["logq"],
            sample_alpha=hp["sample_alpha"],
            supports=self.supports,
            bpreg=hp["bpreg"],
            elu_param=hp["elu_param"],
            final_act=hp["final_act"],
            classes=self.loss_classes,
        )
        self.optimizer = self.optimizer_class(self.model.params, hp["learning_rate"], hp["momentum"])
        self.sampler = (
            self.sampler_class(
                sd.supports, hp["n_sample"], hp["sample_alpha"], sample_cache_max_size, self._gen_sample, dev
            )
            if hp["n_sample"] > 0
            else None
        )
        self.iterator = self.iterator_class(sd, B, stop_below_two_lanes=(hp["n_sample"] == 0))
        self._item_index = pd.Series(np.arange(sd.n_items, dtype=np.int64), index=sd.item_ids)
        self.error_during_train = False

    # ------------------------------------------------------------------ training
    def fit(
        self,
        data: pd.DataFrame,
        sample_cache_max_size: int = 10_000_000,
        item_key: str = "ItemId",
        session_key: str = "SessionId",
        time_key: str = "Time",
        n_epochs: int | None = None,
        trace: Callable[[StepTrace], None] | None = None,
    ) -> FitReport:
        """Build the item map and the model from ``data`` and train it (docs/algorithm.md, 'Input data' to 'Optimizer').

        Args:
            data: session events with columns ``session_key`` (ids), ``item_key`` (any hashable ids) and
                ``time_key`` (numeric; only the order matters). Not modified.
            sample_cache_max_size: ids held by the negative-sample cache (rows = this // n_sample).
            n_epochs: epochs to run (None = the ``n_epochs`` hyperparameter; 0 = build and initialise only).
            trace: optional callable receiving a :class:`StepTrace` per training step (costs a host sync per
                step).

        Returns a :class:`FitReport`.

        Raises ValueError (naming the column or parameter) for a malformed frame, a single item, fewer sessions
        than ``batch_size`` or no session with two events; :class:`TrainingDivergedError` when a step loss is
        NaN (training is aborted and the model refuses to evaluate).
        """
        n_epochs = self._hp["n_epochs"] if n_epochs is None else int(n_epochs)
        if n_epochs < 0:
            raise ValueError(f"parameter 'n_epochs': must be >= 0, got {n_epochs}")
        self._build(data, sample_cache_max_size, item_key, session_key, time_key)
        step = self._training_step(trace) if n_epochs > 0 else None
        report = FitReport()
        for epoch in range(n_epochs):
            t0 = time.perf_counter()
            assert step is not None  # n_epochs > 0
            loss_sum, n_steps, n_events = step.train_epoch(epoch)
            dt = time.perf_counter() - t0
            report.epoch_losses.append(loss_sum / n_events if n_events else float("nan"))
            report.n_steps.append(n_steps)
            report.n_events_trained.append(n_events)
            report.epoch_seconds.append(dt)
        return report

    def _training_step(self, trace: Callable[[StepTrace], None] | None) -> TrainingStep:
        """The training step selected by ``step_impl`` for this fit (``steps.select_step``); sets ``step_info``.
        Raises ValueError when ``step_impl='static'`` cannot run this model."""
        step = select_step(self, self.step_impl, trace, use_cuda_graph=self.static_cuda_graph)
        self.step_info = step.info
        return step

    # -- the training seams (documented protected members, used by ``steps.StandardStep``; see ``steps.StepHost``)
    def _apply_keep(self, H: list[torch.Tensor], keep: np.ndarray | None) -> list[torch.Tensor]:
        """Hidden states of the lanes kept by a run: ``H[l][keep]`` per layer (``keep`` (b,) int64, None = all)."""
        if keep is None:
            return H
        k = torch.as_tensor(keep, device=self.device)
        return [h[k] for h in H]

    def _reset_lanes(self, H: list[torch.Tensor], mask: np.ndarray) -> list[torch.Tensor]:
        """Zero the states of the lanes whose session starts (``mask`` (b,) bool, True = reset)."""
        keep = torch.as_tensor(~mask, device=self.device).to(torch.float32)[:, None]
        return [h * keep for h in H]

    def _sample_block(self, n_steps: int, n_lanes: int) -> torch.Tensor | None:
        """Shared extra samples of the next ``n_steps`` steps, (n_steps, S) int64 columns, or None (S = 0)."""
        return self.sampler.take(n_steps) if self.sampler is not None else None

    def _columns(self, targets: torch.Tensor, samples: torch.Tensor | None) -> torch.Tensor:
        """Item columns scored by a training step: [targets of the b lanes ; S shared samples] (docs/algorithm.md, 'Negative sampling')."""
        return torch.cat([targets, samples]) if samples is not None else targets

    def _check_nan(self, acc: torch.Tensor, epoch: int, n_steps: int) -> None:
        """Raise :class:`TrainingDivergedError` and set ``error_during_train`` when the accumulated loss ``acc``
        (0-d tensor) is NaN (a host sync on GPU)."""
        if bool(torch.isnan(acc)):
            self.error_during_train = True
            raise TrainingDivergedError(
                f"NaN loss during training (epoch {epoch + 1}, detected by step {n_steps}); training aborted. "
                f"Check learning_rate={self._hp['learning_rate']}, the loss settings and the input data."
            )

    def _step(
        self,
        x: torch.Tensor,
        targets: torch.Tensor,
        samples: torch.Tensor | None,
        H: list[torch.Tensor],
        masks: dict | None = None,
        want_info: bool = False,
        want_grads: bool = False,
    ):
        """One training update (forward, loss, backward, optimizer) on item columns.

        x, targets: (b,) int64; samples: (S,) int64 or None; H: per-layer (b, d_l) states entering the step.
        Returns (summed loss over lanes as a 0-d tensor, new detached states[, info dict]). The loss used for the
        gradient is the summed loss divided by the nominal batch size B. Kept free of host synchronisation.
        """
        y = self._columns(targets, samples)
        p_embed, p_hidden = self._dropout_rates()
        model = self.model
        assert model is not None, "built by _build/load before any step"  # fit builds it; train_step requires it
        rows: list = []
        R, H_new, _ = model.forward_train(x, y, H, p_embed, p_hidden, self._gen_dropout, masks=masks, rows=rows)
        loss_sum = self.loss_function(R, y, x.shape[0])
        L = loss_sum / self._hp["batch_size"]
        names = model.param_names()
        params = [model.params[k] for k in names]
        grads = torch.autograd.grad(L, params + [leaf for _, _, leaf in rows], allow_unused=True)
        gd = self._collect_grads(names, grads[: len(names)], rows, grads[len(names) :])
        info = None
        if want_info or want_grads:
            info = {"score_shape": tuple(R.shape), "output_rows_touched": _rows_touched(gd.get("Wy"))}
            if want_grads:
                info["grads"] = {k: _dense(g, model.params[k]) for k, g in gd.items()}
        self.optimizer.step(gd)
        H_new = [h.detach() for h in H_new]
        if want_info or want_grads:
            return loss_sum.detach(), H_new, info
        return loss_sum.detach(), H_new

    @staticmethod
    def _collect_grads(names, dense, rows, row_grads) -> dict:
        """Gradient per parameter: dense autograd gradients, plus the row-sparse lookups' gradients summed per
        table (duplicate rows added). A table that also got a dense gradient is updated densely."""
        gd = dict(zip(names, dense))
        per_table: dict = {}
        for (name, idx, _), g in zip(rows, row_grads):
            if g is not None:
                per_table.setdefault(name, []).append((idx, g.reshape(idx.shape[0], -1)))
        for name, parts in per_table.items():
            if gd.get(name) is not None:
                dense = gd[name].clone()
                for idx, val in parts:
                    dense.index_add_(0, idx, val.reshape(-1, *dense.shape[1:]))
                gd[name] = dense
            else:
                gd[name] = RowGrad.from_parts(parts)
        return gd

    # ------------------------------------------------------------------ id mapping
    def _require_model(self) -> GRU4RecModel:
        """The built model. Raises RuntimeError when it is not built (neither ``fit`` nor ``load`` ran)."""
        if self.model is None:
            raise RuntimeError("the model is not built: call fit() (n_epochs=0 builds without training) or load()")
        return self.model

    def item_ids(self) -> np.ndarray:
        """Training item ids in the column order of every score matrix, (n_items,)."""
        self._require_model()
        return self.data.item_ids

    def _to_columns(self, ids, what: str) -> torch.Tensor:
        arr = np.asarray(ids)
        idx = self._item_index.reindex(arr)
        if idx.isna().any():
            bad = arr[idx.isna().to_numpy()][:5]
            raise ValueError(f"{what}: item id(s) unknown to the training data: {list(bad)}")
        return torch.as_tensor(idx.to_numpy().astype(np.int64), device=self.device)

    # ------------------------------------------------------------------ inference
    def score_prefixes(self, prefixes: Sequence[Sequence], batch_size: int = 512) -> np.ndarray:
        """Scores of every training item after each prefix, from a fresh zero state, in eval mode.

        Args:
            prefixes: list of item-id sequences. Items unknown to training are dropped; an empty prefix (after
                dropping) is scored from the zero state (the output bias).
            batch_size: prefixes processed together.
        Returns: (n_prefixes, n_items) float32 raw scores (logits; no final activation), columns as
        :meth:`item_ids`.
        """
        model = self._require_model()
        cols = []
        for p in prefixes:
            idx = self._item_index.reindex(np.asarray(list(p), dtype=object if len(p) == 0 else None))
            cols.append(idx.dropna().to_numpy().astype(np.int64))
        out = np.empty((len(cols), self.data.n_items), dtype=np.float32)
        with torch.no_grad():
            for s in range(0, len(cols), batch_size):
                chunk = cols[s : s + batch_size]
                n = len(chunk)
                lens = np.array([len(c) for c in chunk], dtype=np.int64)
                L = int(lens.max()) if n else 0
                mat = np.zeros((n, max(L, 1)), dtype=np.int64)
                for j, c in enumerate(chunk):
                    mat[j, : len(c)] = c
                H = model.zero_state(n)
                last = torch.zeros((n, model.layers[-1]), dtype=torch.float32, device=self.device)
                matt = torch.as_tensor(mat, device=self.device)
                for t in range(L):
                    act = np.flatnonzero(lens > t)
                    a = torch.as_tensor(act, device=self.device)
                    h, Hs = model.forward_eval(matt[a, t], [hh[a] for hh in H])
                    for hh, hn in zip(H, Hs):
                        hh[a] = hn
                    last[a] = h
                out[s : s + n] = model.score_all(last).cpu().numpy()
        return out

    def _eval_keys(self, item_key, session_key, time_key):
        k = dict(self.keys) if getattr(self, "keys", None) else {}
        return (
            item_key or k.get("item_key", "ItemId"),
            session_key or k.get("session_key", "SessionId"),
            time_key or k.get("time_key", "Time"),
        )

    def _require_trained(self) -> None:
        self._require_model()
        if self.error_during_train:
            raise RuntimeError("the model was not trained properly (NaN loss during training); refusing to evaluate")

    def evaluate(
        self,
        test_df: pd.DataFrame,
        cutoffs=(1, 5, 10, 20),
        batch_size: int = 512,
        mode: str = "conservative",
        item_key: str | None = None,
        session_key: str | None = None,
        time_key: str | None = None,
    ) -> dict:
        """Official session-parallel evaluation (docs/algorithm.md, 'Evaluation protocol'): {'recall@N', 'mrr@N' per cutoff, 'n_events'}.

        Column names default to those given to ``fit``. ``mode`` is the tie mode ('conservative' default, as
        the port's ``batch_eval``; 'standard'; 'median'). Results do not depend on ``batch_size``.
        Raises ValueError for a malformed frame, an unknown mode/cutoff, or no event left to evaluate.
        """
        self._require_trained()
        check_mode(mode)
        cutoffs = check_cutoffs(cutoffs)
        ik, sk, tk = self._eval_keys(item_key, session_key, time_key)
        return self.evaluator_class(self).evaluate(test_df, cutoffs, batch_size, mode, ik, sk, tk)

    def score_stream(
        self,
        test_df: pd.DataFrame,
        batch_size: int = 512,
        item_key: str | None = None,
        session_key: str | None = None,
        time_key: str | None = None,
    ) -> Iterator[tuple]:
        """The reference's own session-parallel inference loop over a test frame.

        Yields ``(session_id, position, target_item_id, scores_row)`` per prediction point: ``position`` is the
        index of the target within its session after unknown items were dropped (its prefix is the first
        ``position`` known items), ``scores_row`` (n_items,) float32 raw scores in :meth:`item_ids` order.
        Raises ValueError when nothing is left to evaluate.
        """
        self._require_trained()
        ik, sk, tk = self._eval_keys(item_key, session_key, time_key)
        ev = self.evaluator_class(self)
        item_ids = self.item_ids()
        for sess, pos, targets, scores in ev.batches(test_df, batch_size, ik, sk, tk):
            sc = scores.cpu().numpy()
            tg = item_ids[targets.cpu().numpy()]
            for j in range(len(sess)):
                yield sess[j], int(pos[j]), tg[j], sc[j]

    # ------------------------------------------------------------------ white-box
    def _hidden_in(self, hidden, b: int) -> list[torch.Tensor]:
        model = self._require_model()
        if hidden is None:
            return model.zero_state(b)
        if len(hidden) != len(model.layers):
            raise ValueError(f"hidden: expected {len(model.layers)} layer state(s), got {len(hidden)}")
        out = []
        for l, (h, d) in enumerate(zip(hidden, model.layers)):
            t = torch.as_tensor(np.asarray(h, dtype=np.float32), device=self.device)
            if tuple(t.shape) != (b, d):
                raise ValueError(f"hidden[{l}]: expected shape {(b, d)}, got {tuple(t.shape)}")
            out.append(t.clone())
        return out

    def _masks_in(self, dropout_masks) -> dict | None:
        if dropout_masks is None:
            return None
        return {
            k: (None if v is None else torch.as_tensor(np.asarray(v, dtype=np.float32), device=self.device))
            for k, v in dropout_masks.items()
        }

    def train_forward(
        self,
        in_items: Sequence,
        hidden=None,
        targets: Sequence | None = None,
        samples: Sequence | None = None,
        dropout_masks: dict | None = None,
    ) -> dict:
        """Training-mode forward of one step without updating anything (dropout active).

        Args:
            in_items: (b,) input item ids. hidden: per-layer (b, d_l) states (None = zeros).
            targets, samples: item ids of the scored columns; both None = score the full catalogue.
            dropout_masks: explicit multipliers, keys 'embed' and 'hidden.{l}' (see ``GRU4RecModel``).
        Returns dict: 'embedding_out' ((b, n_in) after embedding dropout, None in no-embedding mode, where
        dropout_p_embed acts on layer 0's output), 'layer_outputs' (per layer (b, d_l), post-dropout),
        'scores' ((b, K) or (b, n_items)), 'columns' (item ids of the score columns).
        """
        model = self._require_model()
        x = self._to_columns(in_items, "in_items")
        H = self._hidden_in(hidden, len(x))
        if targets is None and samples is None:
            y = torch.arange(self.data.n_items, device=self.device)
        else:
            parts = [self._to_columns(targets, "targets")] if targets is not None else []
            if samples is not None and len(samples):
                parts.append(self._to_columns(samples, "samples"))
            y = torch.cat(parts)
        p_embed, p_hidden = self._dropout_rates()
        with torch.no_grad():
            R, _, cap = model.forward_train(
                x, y, H, p_embed, p_hidden, self._gen_dropout, masks=self._masks_in(dropout_masks), capture=True
            )
        emb = cap["embedding_out"]
        return {
            "embedding_out": None if emb is None else emb.detach().cpu().numpy(),
            "layer_outputs": [t.detach().cpu().numpy() for t in cap["layer_outputs"]],
            "scores": R.detach().cpu().numpy(),
            "columns": self.data.item_ids[y.cpu().numpy()],
        }

    def train_step(
        self,
        in_items: Sequence,
        targets: Sequence,
        samples: Sequence | None = None,
        hidden=None,
        dropout_masks: dict | None = None,
        return_grads: bool = False,
    ) -> StepResult:
        """One optimizer update on a given batch, exactly as inside ``fit``.

        Args:
            in_items, targets: (b,) item ids; samples: (S,) shared extra-sample item ids or None.
            hidden: per-layer (b, d_l) states entering the step (None = zeros).
            dropout_masks: explicit dropout multipliers (keys 'embed', 'hidden.{l}'); None = random masks with
                the configured rates; {} = no dropout.
            return_grads: also return every parameter's gradient (dense, duplicates summed).
        Returns :class:`StepResult` (loss = Σ_lanes loss / batch_size).
        """
        self._require_model()
        x = self._to_columns(in_items, "in_items")
        t = self._to_columns(targets, "targets")
        if len(t) != len(x):
            raise ValueError(f"targets: expected {len(x)} item(s) (one per input), got {len(t)}")
        s = self._to_columns(samples, "samples") if samples is not None and len(samples) else None
        H = self._hidden_in(hidden, len(x))
        loss, H_new, info = self._step(
            x, t, s, H, masks=self._masks_in(dropout_masks), want_grads=return_grads, want_info=True
        )
        grads = None
        if return_grads:
            grads = {k: v.cpu().numpy() for k, v in info["grads"].items()}
            if "By" in grads:
                grads["By"] = grads["By"].reshape(-1)
        return StepResult(float(loss) / self._hp["batch_size"], [h.cpu().numpy() for h in H_new], grads)

    def get_weights(self) -> dict:
        """Copies of every parameter as float32 numpy arrays (names and gate layouts: ``model.GRU4RecModel``;
        ``By`` as (n_items,))."""
        out = {k: v.detach().cpu().numpy().copy() for k, v in self._require_model().params.items()}
        out["By"] = out["By"].reshape(-1)
        return out

    def set_weights(self, weights: dict, reset_optimizer: bool = False) -> None:
        """Overwrite parameters in place from name → array (a subset is allowed). Raises ValueError for an
        unknown name or a wrong shape. The optimizer state is kept unless ``reset_optimizer``."""
        model = self._require_model()
        params = model.params
        for k, v in weights.items():
            if k not in params:
                raise ValueError(f"weights: unknown parameter {k!r}; known: {', '.join(params)}")
            arr = np.asarray(v, dtype=np.float32)
            if k == "By":
                arr = arr.reshape(-1, 1) if arr.ndim == 1 else arr
            if tuple(arr.shape) != tuple(params[k].shape):
                raise ValueError(f"weights[{k!r}]: expected shape {tuple(params[k].shape)}, got {arr.shape}")
            with torch.no_grad():
                params[k].copy_(torch.as_tensor(arr))
        if reset_optimizer:
            self.optimizer = self.optimizer_class(model.params, self._hp["learning_rate"], self._hp["momentum"])

    def optimizer_info(self) -> dict:
        """{type, learning_rate, lr_schedule, initial_accumulator, eps, momentum, nesterov, grad_clip, ...}."""
        self._require_model()
        return self.optimizer.info()

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the model to directory ``path``: ``weights.safetensors`` (parameters, float32), ``items.json``
        (item ids in column order), ``hparams.json`` (hyperparameters, fit keys, format version). Files are
        written atomically (``gru4rec_conformance.fileio``: old or new file, never a part). No pickles."""
        from safetensors.torch import save_file

        model = self._require_model()
        path = os.fspath(path)
        os.makedirs(path, exist_ok=True)
        tensors = {k: v.detach().cpu().contiguous() for k, v in model.params.items()}
        ids = self.data.item_ids
        if np.issubdtype(ids.dtype, np.integer):
            items = {"dtype": "int", "ids": [int(i) for i in ids]}
        else:
            items = {"dtype": "str", "ids": [str(i) for i in ids]}
        meta = {
            "format_version": FORMAT_VERSION,
            "hparams": self.get_params(),
            "keys": self.keys,
            "error_during_train": self.error_during_train,
            "n_items": int(len(ids)),
            "supports": [float(s) for s in self.data.supports],
        }
        with atomic_path(os.path.join(path, "weights.safetensors")) as tmp:
            save_file(tensors, str(tmp))
        atomic_write_json(os.path.join(path, "items.json"), items, indent=None)
        atomic_write_json(os.path.join(path, "hparams.json"), meta, indent=None)

    @classmethod
    def load(cls, path: str | os.PathLike, device: str | None = None) -> GRU4Rec:
        """Load a directory written by :meth:`save`; scores are reproduced exactly. ``device`` overrides the
        saved one. Raises ValueError for a missing file or an unsupported format version."""
        from safetensors.torch import load_file

        path = os.fspath(path)
        for name in ("weights.safetensors", "items.json", "hparams.json"):
            if not os.path.exists(os.path.join(path, name)):
                raise ValueError(f"{path}: not a saved GRU4Rec model ({name} is missing)")
        with open(os.path.join(path, "hparams.json"), encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}/hparams.json: unsupported format_version {meta.get('format_version')!r}")
        with open(os.path.join(path, "items.json"), encoding="utf-8") as f:
            items = json.load(f)
        hp = dict(meta["hparams"])
        if device is not None:
            hp["device"] = device
        gru = cls(**hp)
        ids = np.asarray(items["ids"], dtype=np.int64 if items["dtype"] == "int" else object)
        sd = SessionData(
            ids,
            np.zeros(0, dtype=np.int64),
            np.zeros(1, dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            np.asarray(meta["supports"], dtype=np.float64),
        )
        gru.data = sd
        gru.keys = meta["keys"]
        dev = gru.device
        s_init, s_drop, s_samp = gru._seeds()
        gru._gen_dropout = torch.Generator(device=dev).manual_seed(s_drop)
        gru._gen_sample = torch.Generator(device=dev).manual_seed(s_samp)
        gru.model = gru.model_class(
            len(ids),
            hp["layers"],
            hp["embedding"],
            hp["constrained_embedding"],
            torch.Generator().manual_seed(s_init),
            dev,
        )
        tensors = load_file(os.path.join(path, "weights.safetensors"))
        if set(tensors) != set(gru.model.params):
            raise ValueError(
                f"{path}/weights.safetensors: parameters {sorted(tensors)} do not match the "
                f"architecture {sorted(gru.model.params)}"
            )
        with torch.no_grad():
            for k, v in tensors.items():
                gru.model.params[k].copy_(v.to(dev))
        gru.supports = torch.tensor(sd.supports, dtype=torch.float32, device=dev)
        gru.loss_function = make_loss(
            hp["loss"],
            logq=hp["logq"],
            sample_alpha=hp["sample_alpha"],
            supports=gru.supports,
            bpreg=hp["bpreg"],
            elu_param=hp["elu_param"],
            final_act=hp["final_act"],
            classes=gru.loss_classes,
        )
        gru.optimizer = gru.optimizer_class(gru.model.params, hp["learning_rate"], hp["momentum"])
        gru._item_index = pd.Series(np.arange(len(ids), dtype=np.int64), index=ids)
        gru.error_during_train = bool(meta.get("error_during_train", False))
        gru.sampler = None
        return gru


def _dense(g, p: torch.Tensor) -> torch.Tensor:
    if g is None:
        return torch.zeros_like(p.detach())
    if isinstance(g, RowGrad):
        return g.to_dense(p.detach())
    return g.to_dense() if g.is_sparse else g


def _rows_touched(g) -> int:
    if g is None:
        return 0
    if isinstance(g, RowGrad):
        return int((g.values.abs().sum(1) > 0).sum())
    if g.is_sparse:
        g = g.coalesce()
        return int((g._values().abs().sum(1) > 0).sum())
    return int((g.abs().sum(1) > 0).sum())
