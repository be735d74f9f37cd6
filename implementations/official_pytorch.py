"""Adapter of the official GRU4Rec PyTorch port (hidasib/GRU4Rec_PyTorch_Official @d1fc311).

Registered name: ``official_pytorch``. The port is the yardstick (docs/implementations.md, 'Code bases from GitHub'): it must pass
every check the reference passes; where it does not, the registry (conformance/xfails/official_pytorch.toml)
names the port's own documented quirk.

Driven through its Python API exactly as ``run.py`` does: ``GRU4Rec(**params)``, ``fit(data)`` with the
default ``compatibility_mode=True`` initialisation, and ``evaluation.batch_eval`` with the conservative tie
mode the study used. The code is located by ``implementations._checkout`` (env ``OFFICIAL_GRU4REC_PATH``
or the cache folder). Its default initialisation fails under NumPy >= 2 (a float64 array is ``set_`` into
a float32 parameter), so its tox environment pins NumPy 1.26.

Every optional hook is implemented by reaching into the port's own objects (translation only, shims declared in
``capabilities()``): ``get_weights``/``set_weights`` read and write the ``GRU4RecModel``'s torch parameters;
``train_step`` runs the body of ``GRU4Rec.fit``'s loop with the ``IndexedAdagradM`` that ``fit`` created;
``train_forward`` runs ``GRU4RecModel.forward(training=True)`` and observes its ``nn.Dropout`` modules; ``trace``
observes ``fit`` (the training iterator's lanes, the states entering ``forward``, the optimizer's learning rate);
``loss_on_scores`` calls the port's loss functions; ``optimizer_info`` reads the optimizer's parameter group.
"""

from __future__ import annotations

import io
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from typing import Any

import numpy as np

from gru4rec_conformance.implementations._checkout import import_path, locate, located_version
from gru4rec_conformance.implementations._thirdparty import (
    check_session_frame,
    layers_list,
    patched,
    rows_touched,
    seed_everything,
    spy_generator,
)
from gru4rec_conformance.implementations._torchbase import TorchModuleAdapter, layered_forward_result
from gru4rec_conformance.implementations.base import Capabilities, FitReport, StepTrace, Unsupported
from gru4rec_conformance.implementations.registry import register

_MODULES = ("gru4rec_pytorch", "evaluation")

#: The port's nn.Embedding tables: exposed under the reference's names, without the module's ``.weight``.
_TABLES = ("E.weight", "GE.Wx0.weight", "Wy.weight", "By.weight")
#: GE (no-embedding first layer) holds its input blocks as [candidate | reset | update] (``vx_x, vx_r, vx_z``);
#: exposed in ``gate_layout`` order (reset, update, candidate), like torch's GRUCell blocks.
_GE_TO_LAYOUT = (1, 2, 0)
_GE_FROM_LAYOUT = (2, 0, 1)


def _as_run_py_items(df: Any) -> Any:
    """The session frame with ``ItemId`` as strings, as ``run.py`` reads it (``dtype={item_key: 'str'}``).

    Why: ``fit`` builds its logQ popularity with ``torch.tensor(pop[itemidmap.index.values])``, a label-indexed
    Series, which torch reads position by position; pandas resolves those positions only for an index of strings.
    With integer item ids the port raises ``ValueError`` for ``logq > 0``, a failure run.py never meets."""
    return df.assign(ItemId=df["ItemId"].astype(str))


def _permute_blocks(a: np.ndarray, order: Sequence[int], axis: int) -> np.ndarray:
    blocks = np.split(a, 3, axis=axis)
    return np.concatenate([blocks[i] for i in order], axis=axis)


class OfficialPytorchAdapter(TorchModuleAdapter):
    """hidasib/GRU4Rec_PyTorch_Official @d1fc311, driven like run.py."""

    name = "official_pytorch"
    label = "official_pytorch"
    isolated = True
    checkouts = ("gru4rec_pytorch_official",)
    worker_env = ("OFFICIAL_GRU4REC_PATH",)
    homepage = "https://github.com/hidasib/GRU4Rec_PyTorch_Official"
    description = "Official GRU4Rec PyTorch port (hidasib) @d1fc311"
    study = None
    reproducibility = {
        "installs": "partly: runs with torch 2.13 and pandas 3, but its default compatibility-mode "
        "initialisation raises under NumPy >= 2 (float64 weights set_ into float32 parameters); NumPy 1.26 works",
        "offline": "yes",
        "pinned": "no requirements file (README: PyTorch, NumPy, pandas, optuna for paropt)",
        "hyperparameters": "all official hyperparameters settable (GRU4Rec(...) / set_params / run.py -ps)",
    }

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device=device)
        self.gru: Any = None  # the port's gru4rec_pytorch.GRU4Rec (untyped third-party code)
        self._opt: Any = None  # the port's IndexedAdagradM that fit() created (untyped third-party code)
        self._ids: Any = None  # (the port's itemidmap index, its item ids as int64)

    def _mods(self):
        root = locate("gru4rec_pytorch_official")
        import_path(root, _MODULES)
        import evaluation
        import gru4rec_pytorch

        return gru4rec_pytorch, evaluation

    def version(self) -> str:
        return located_version("gru4rec_pytorch_official")

    def capabilities(self) -> dict[str, Any]:
        locate("gru4rec_pytorch_official")
        import torch

        flags = Capabilities.flags(*Capabilities.OFFICIAL_FLAGS)
        return {
            "losses": ["cross-entropy", "bpr-max"],
            "embedding_modes": ["none", "separate", "shared"],
            **flags,
            "final_acts": ["softmax", "elu", "linear"],
            "devices": ["cpu", "cuda"],
            "framework": {"name": "torch", "version": torch.__version__},
            "shims": [
                "get_weights/set_weights: the port's torch parameters under the reference's names (its nn.Embedding "
                "tables E, GE.Wx0, Wy, By without '.weight'), By as 1-D, GE.Wx0/GE.Bh0 column blocks reordered "
                "from the port's [candidate | reset | update] to gate_layout (reset, update, candidate)",
                "train_step: the body of GRU4Rec.fit's loop (forward(training=True) on the targets + the sample "
                "cache's next draw, loss_function(R, Y, batch_size) / batch_size, backward, step) with the "
                "IndexedAdagradM fit created (seen at its construction; its state carries over from fit); the "
                "model is in train mode during the call (the adapter's fit leaves it in eval mode)",
                "train_forward: GRU4RecModel.forward(training=True) from zero states, outputs of the port's "
                "nn.Dropout modules captured by forward hooks, score tensor shapes by wrapping score_items, the "
                "loss gradient of Wy by torch.autograd.grad (nothing updated); seed: torch.manual_seed inside "
                "torch.random.fork_rng (the port's dropout draws from torch's global RNG)",
                "trace: lanes read from the training SessionDataIterator generator's locals (iters, start, i), "
                "states entering a step and the step's negatives observed at GRU4RecModel.forward (wrapped during "
                "fit), learning rate from the optimizer's param group",
                "FitReport: per-epoch loss recomputed per trained example (sum of the step losses' numerators / "
                "lanes) from the loss function's outputs; steps and lanes counted by wrapping the optimizer step "
                "and the loss function; epochs delimited by the iterator's calls",
                "score_prefixes: prefixes run lane-parallel through model.forward(training=False) from zero "
                "states; an empty prefix is scored from the zero state (score_items of a zero vector)",
                "score_stream: evaluation.batch_eval run unchanged; scores captured by wrapping model.forward, "
                "lane session ids/positions read from the SessionDataIterator generator's locals",
                "final_act translated to the port's rule: softmax <-> cross-entropy, elu -> elu_param "
                "(default 0.5), linear -> elu_param=0",
                "seed: torch.manual_seed and np.random.seed (the port uses the global generators; its "
                "compatibility-mode init reseeds NumPy with 42)",
                "stdout of fit/evaluation captured (the port prints progress)",
                "item ids handed to fit and batch_eval as strings, as run.py reads them (dtype str), and read "
                "back as integers (item_ids, trace, score_stream); with integer ids the port's logq > 0 "
                "popularity (torch.tensor of a label-indexed pandas Series) raises ValueError",
            ],
            "score_semantics": "raw",
            "eval_tie_mode": "conservative",
            "gate_layout": ["reset", "update", "candidate"],
            "hyperparameters": {
                "layers": [100], "loss": "cross-entropy", "batch_size": 64, "dropout_p_embed": 0.0,
                "dropout_p_hidden": 0.0, "learning_rate": 0.05, "momentum": 0.0, "sample_alpha": 0.5,
                "n_sample": 2048, "embedding": 0, "constrained_embedding": True, "n_epochs": 10, "bpreg": 1.0,
                "elu_param": 0.5, "logq": 0.0, "final_act": None,
            },
        }  # fmt: skip

    # -- required ----------------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        g, _ = self._mods()
        import torch

        loss = str(hp.pop("loss"))
        final_act = hp.pop("final_act")
        if final_act is not None:
            fa = str(final_act)
            if fa == "softmax" and loss != "cross-entropy" or fa in ("elu", "linear") and loss != "bpr-max":
                raise Unsupported(f"final_act:{fa}", f"the port ties the final activation to the loss ({loss})")
            if fa == "linear":
                hp["elu_param"] = 0.0
            elif fa.startswith("elu-"):
                hp["elu_param"] = float(fa.split("-", 1)[1])
            elif fa not in ("elu", "softmax"):
                raise Unsupported(f"final_act:{fa}")
        if loss not in ("cross-entropy", "bpr-max"):
            raise Unsupported(f"loss:{loss}")
        hp["layers"] = layers_list(hp["layers"])
        self.seed = int(seed)
        seed_everything(self.seed)
        self.gru = g.GRU4Rec(loss=loss, device=torch.device(self.device), **hp)
        self._trained = False
        self._opt = None

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        g, _ = self._mods()
        df = _as_run_py_items(check_session_frame(train_df))
        gru = self.gru
        if n_epochs is not None:
            gru.n_epochs = int(n_epochs)
        seed_everything(self.seed)
        report = FitReport()
        state: dict[str, Any] = {"t0": None}
        epoch = {"loss": 0.0, "lanes": 0, "steps": 0}

        def close_epoch():
            if state["t0"] is None:
                return
            report.epoch_losses.append(epoch["loss"] / max(epoch["lanes"], 1))
            report.n_steps.append(epoch["steps"])
            report.n_events_trained.append(epoch["lanes"])
            report.epoch_seconds.append(time.perf_counter() - state["t0"])
            epoch.update(loss=0.0, lanes=0, steps=0)

        inner_call = g.SessionDataIterator.__call__

        def epoch_call(it, *a, **k):  # fit() calls its iterator once per epoch
            close_epoch()
            state["t0"] = time.perf_counter()
            return inner_call(it, *a, **k)

        inner_loss = gru.loss_function

        def counting_loss(O, Y, M):
            value = inner_loss(O, Y, M)
            epoch["loss"] += float(value.detach())
            epoch["lanes"] += int(O.shape[0])
            return value

        inner_step = g.IndexedAdagradM.step
        inner_init = g.IndexedAdagradM.__init__
        adapter = self
        tracer = _FitTracer(df) if self._trace_on else None

        def seen_init(opt, *a, **k):  # fit() creates its optimizer once, before the first epoch
            inner_init(opt, *a, **k)
            adapter._opt = opt

        def counting_step(opt, *a, **k):
            if tracer is not None:
                tracer.step(opt, epoch=len(report.n_steps), step=epoch["steps"])
            epoch["steps"] += 1
            return inner_step(opt, *a, **k)

        inner_forward = g.GRU4RecModel.forward

        def traced_forward(model, X, H, Y, training=False):
            if tracer is not None and training:
                tracer.forward(X, H, Y)
            R = inner_forward(model, X, H, Y, training=training)
            if tracer is not None and training:
                tracer.scores(R)
            return R

        def traced_call(it, *a, **k):
            gen = epoch_call(it, *a, **k)
            return gen if tracer is None else spy_generator(gen, tracer.lanes)

        out = io.StringIO()
        with (
            patched(g.SessionDataIterator, "__call__", traced_call),
            patched(gru, "loss_function", counting_loss),
            patched(g.IndexedAdagradM, "__init__", seen_init),
            patched(g.IndexedAdagradM, "step", counting_step),
            patched(g.GRU4RecModel, "forward", traced_forward),
            redirect_stdout(out),
        ):
            gru.fit(df, compatibility_mode=True)
        close_epoch()
        if gru.n_epochs == 0 or not report.epoch_losses:
            report = FitReport()
        if tracer is not None:
            report.trace = tracer.records
        if getattr(gru, "error_during_train", False):
            raise FloatingPointError(f"the port stopped training on a NaN loss: {out.getvalue()[-300:]}")
        gru.model.eval()
        self._trained = True
        return report

    def item_ids(self) -> np.ndarray:
        index = self.gru.data_iterator.itemidmap.index
        if self._ids is None or self._ids[0] is not index:  # parsed once per fitted catalogue (str ids)
            self._ids = (index, np.asarray(index.values).astype(np.int64))
        return self._ids[1]

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        import torch

        gru = self.gru
        model = gru.model
        imap = gru.data_iterator.itemidmap
        index = dict(zip(self.item_ids().tolist(), np.asarray(imap.values).tolist()))
        seqs = [[index[int(i)] for i in p if int(i) in index] for p in prefixes]
        out = np.zeros((len(seqs), len(index)), dtype=np.float32)
        dev = torch.device(self.device)
        with torch.no_grad():
            zero = model.score_items(torch.zeros((1, gru.layers[-1]), device=dev), model.Wy.weight, model.By.weight)
            todo = [k for k, s in enumerate(seqs) if s]
            for k, s in enumerate(seqs):
                if not s:
                    out[k] = zero.cpu().numpy()[0]
            for c in range(0, len(todo), 512):
                chunk = todo[c : c + 512]
                H = [torch.zeros((len(chunk), d), device=dev) for d in gru.layers]
                for t in range(max(len(seqs[k]) for k in chunk)):
                    X = torch.tensor([seqs[k][t] if t < len(seqs[k]) else 0 for k in chunk], device=dev)
                    R = model.forward(X, H, None, training=False).cpu().numpy()
                    for lane, k in enumerate(chunk):
                        if t == len(seqs[k]) - 1:
                            out[k] = R[lane]
        return out

    # -- black-box+ ----------------------------------------------------------------------------------------
    def _batch_eval(self, test_df, cutoffs, batch_size, keep_rows: bool):
        g, ev = self._mods()
        gru = self.gru
        df = check_session_frame(test_df, "test_df")
        item_ids = self.item_ids()
        known = df[df["ItemId"].isin(item_ids)]
        session_ids = np.unique(known["SessionId"].to_numpy())
        labels: list[tuple] = []
        rows: list[tuple] = []
        inner_cls = ev.SessionDataIterator

        class SpyIterator(inner_cls):  # type: ignore[valid-type, misc]  # the port's iterator, run-time base
            def __call__(self, *a, **k):
                it = self

                def seen(loc, item):
                    iters = np.asarray(loc["iters"])
                    tgt = np.asarray(loc["start"]) + int(loc["i"]) + 1
                    sess = it.session_idx_arr[iters]
                    labels.append((session_ids[sess], tgt - it.offset_sessions[sess], it.data_items[tgt]))

                return spy_generator(super().__call__(*a, **k), seen)

        forward = gru.model.forward

        def recording_forward(X, H, Y, training=False):
            O = forward(X, H, Y, training=training)
            if keep_rows:
                sess, pos, tgt = labels[-1]
                sc = O.detach().cpu().numpy()
                for j in range(len(sess)):
                    rows.append((int(sess[j]), int(pos[j]), int(item_ids[tgt[j]]), sc[j].astype(np.float32)))
            return O

        with (
            patched(ev, "SessionDataIterator", SpyIterator),
            patched(gru.model, "forward", recording_forward),
            redirect_stdout(io.StringIO()),
        ):
            recall, mrr = ev.batch_eval(
                gru, _as_run_py_items(df), cutoff=list(cutoffs), batch_size=int(batch_size), mode="conservative"
            )
        n = int(sum(len(s) for s, _, _ in labels))
        return recall, mrr, n, rows

    def score_stream(self, test_df: Any, batch_size: int):
        _, _, _, rows = self._batch_eval(test_df, [1], batch_size, keep_rows=True)
        return iter(rows)

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict:
        recall, mrr, n, _ = self._batch_eval(test_df, [int(c) for c in cutoffs], batch_size, keep_rows=False)
        out: dict[str, Any] = {}
        for c in cutoffs:
            out[f"recall@{c}"] = float(recall[int(c)])
            out[f"mrr@{c}"] = float(mrr[int(c)])
        out["n_events"] = n
        return out

    # -- white-box -----------------------------------------------------------------------------------------
    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        g, _ = self._mods()
        import torch

        unknown = set(hparams) - {"bpreg", "elu_param", "logq", "final_act", "column_q"}
        if unknown:
            raise Unsupported(sorted(unknown)[0], "not a parameter of the port's losses")
        if loss not in ("cross-entropy", "bpr-max"):
            raise Unsupported(f"loss:{loss}")
        holder = g.GRU4Rec(loss=loss, device=torch.device("cpu"))
        n_rows, n_cols = np.asarray(scores).shape
        Y = None
        if float(hparams.get("logq", 0.0) or 0.0) > 0:
            if "column_q" not in hparams:
                raise ValueError("loss_on_scores: logq needs column_q (the support of each column's item)")
            # the port's own formula: P0[Y[:B]] for in-batch columns, P0[Y[B:]]**sample_alpha for the samples;
            # the given q are per column, so P0 = q over columns 0..B+S-1 and sample_alpha = 1
            holder.logq = float(hparams["logq"])
            holder.P0 = torch.tensor(np.asarray(hparams["column_q"], dtype=np.float32))
            holder.sample_alpha = 1.0
            Y = torch.arange(n_cols)
        if "bpreg" in hparams:
            holder.bpreg = float(hparams["bpreg"])
        fa = hparams.get("final_act")
        if fa == "linear":
            holder.elu_param = 0.0
        elif "elu_param" in hparams:
            holder.elu_param = float(hparams["elu_param"])
        R = torch.tensor(np.asarray(scores, dtype=np.float32), requires_grad=True)
        B = R.shape[0]
        value = holder.loss_function(R, Y, B) / B  # the step loss of fit(): summed over lanes, divided by B
        value.backward()
        assert R.grad is not None  # backward() of a loss computed from the leaf R fills R.grad
        return float(value.detach()), R.grad.numpy().copy()

    def optimizer_info(self) -> dict:
        if self._opt is None:
            raise RuntimeError("official_pytorch: call fit() first (n_epochs=0 initialises without training)")
        grp = self._opt.param_groups[0]
        return {"type": "adagrad", "learning_rate": float(grp["lr"]), "lr_schedule": "constant",
                "initial_accumulator": 0.0, "eps": float(grp["eps"]), "momentum": float(grp["momentum"]),
                "grad_clip": None}  # fmt: skip

    def trace(self, enable: bool = True) -> None:
        """Record one :class:`StepTrace` per optimizer step of the following ``fit`` calls (``FitReport.trace``):
        the active lanes' session ids and input positions, the L2 norm of all layers' states entering the step,
        the step's shared negatives (item ids), its learning rate, epoch, step and score matrix shape."""
        super().trace(enable)

    def _fitted_model(self) -> Any:
        """The port's ``GRU4RecModel`` (``GRU4Rec.model``), None before ``fit``."""
        return None if self.gru is None else getattr(self.gru, "model", None)

    def _parameters(self) -> dict[str, Any]:
        """Protocol name → the port's parameter (names of the reference, see ``_TABLES``)."""
        return {(k[: -len(".weight")] if k in _TABLES else k): p for k, p in self._require_model().named_parameters()}

    def get_weights(self) -> dict:
        """Every parameter of the port's ``GRU4RecModel`` as float32 arrays: ``E``, ``GE.Wx0``/``GE.Wrz0``/
        ``GE.Wh0``/``GE.Bh0`` (no-embedding first layer), ``G.{k}.weight_ih``/``weight_hh``/``bias_ih``/``bias_hh``
        (torch GRUCell, row blocks [r; z; n]; ``k`` is the port's ModuleList index), ``Wy`` (n_items, d_last) and
        ``By`` (n_items,); item rows in :meth:`item_ids` order, gate blocks as ``gate_layout``. ``set_weights``
        loads arrays in this layout in place (the optimizer's state is kept)."""
        return super().get_weights()

    def _to_shown(self, name: str, a: np.ndarray) -> np.ndarray:
        if name == "By":
            return a.reshape(-1)
        if name == "GE.Wx0":
            return _permute_blocks(a, _GE_TO_LAYOUT, axis=1)
        if name == "GE.Bh0":
            return _permute_blocks(a, _GE_TO_LAYOUT, axis=0)
        return a

    def _from_shown(self, name: str, a: np.ndarray) -> np.ndarray:
        if name == "GE.Wx0":
            return _permute_blocks(a, _GE_FROM_LAYOUT, axis=1)
        if name == "GE.Bh0":
            return _permute_blocks(a, _GE_FROM_LAYOUT, axis=0)
        if name == "By":
            return a.reshape(-1, 1)
        return a

    def _indices(self, ids: Any, what: str) -> np.ndarray:
        """Item ids → the port's item indices (its itemidmap); ValueError for an id unknown to training."""
        imap = self.gru.data_iterator.itemidmap
        ids = np.asarray(ids).ravel()
        known = np.isin(ids, self.item_ids())
        if not known.all():
            raise ValueError(f"{what}: item id(s) unknown to the trained model: {ids[~known][:5].tolist()}")
        return np.asarray(imap[[str(int(i)) for i in ids]].values, dtype=np.int64)

    def _targets_and_samples(self, targets: Any) -> Any:
        """Y of one training step as the port's iterator builds it: the targets, then the sample cache's next
        draw when n_sample > 0 (``torch.cat([out_idx, sample])``)."""
        import torch

        Y = torch.as_tensor(targets, dtype=torch.int64, device=torch.device(self.device))
        if self.gru.n_sample > 0:
            Y = torch.cat([Y, self.gru.data_iterator.sample_cache.get_sample()])
        return Y

    @contextmanager
    def _train_mode(self, model):
        was = model.training
        model.train()
        try:
            yield
        finally:
            model.train(was)

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One update exactly as the body of the port's training loop: ``model.zero_grad()``, ``R =
        model.forward(X, H, Y, training=True)`` with Y = targets + the sample cache's next draw, ``L =
        loss_function(R, Y, batch_size) / batch_size`` (``fit`` passes ``n_valid``, which stays ``batch_size``),
        ``L.backward()``, ``opt.step()`` with the optimizer ``fit`` created. ``hidden``: per-layer (b, d_l) arrays
        (default zeros). Returns L (Σ over lanes / batch_size)."""
        import torch

        model = self._require_model()
        if self._opt is None:
            raise RuntimeError("official_pytorch: train_step needs the optimizer fit() creates; call fit() first")
        x = self._indices(batch_inputs, "batch_inputs")
        t = self._indices(batch_targets, "batch_targets")
        if len(x) != len(t):
            raise ValueError(f"batch_targets: expected {len(x)} item(s), got {len(t)}")
        dev = torch.device(self.device)
        gru = self.gru
        if hidden is None:
            H = [torch.zeros((len(x), d), dtype=torch.float32, device=dev) for d in gru.layers]
        else:
            H = [torch.as_tensor(np.asarray(h), dtype=torch.float32, device=dev) for h in hidden]
        X = torch.as_tensor(x, device=dev)
        with self._train_mode(model):
            Y = self._targets_and_samples(t)
            model.zero_grad()
            R = model.forward(X, H, Y, training=True)
            L = gru.loss_function(R, Y, gru.batch_size) / gru.batch_size
            L.backward()
            self._opt.step()
        return float(L.detach().cpu())

    def train_forward(self, prefix_batch: Any, seed: int) -> dict:
        """The port's training-mode forward (``forward(X, H, Y, training=True)``) of b equally long sequences from
        zero states; the result describes the last transition and nothing is updated.

        Returns ``embedding_out`` (b, n_in): the output of the port's embedding dropout ``DE`` (None in
        no-embedding mode, where ``DE`` acts on the first layer's output, reported as layer 0), ``layer_outputs``
        the outputs of the hidden dropouts ``D[k]``, ``scores`` (b, b+S) the training scores of ``columns`` (the
        targets, then the sample cache's next draw), ``score_tensor_shape`` the widest tensor ``score_items``
        computed and ``output_rows_touched`` the rows of ``Wy`` with a non-zero gradient of the step's loss."""
        import torch

        model = self._require_model()
        gru = self.gru
        seqs = [self._indices(s, "prefix_batch") for s in prefix_batch]
        if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2:
            raise ValueError("prefix_batch: expected b >= 1 item sequences of one common length >= 2")
        arr = np.stack(seqs)
        b = len(arr)
        dev = torch.device(self.device)
        none_mode = not (model.constrained_embedding or model.embedding)
        captured: dict[str, Any] = {"layers": []}
        shapes: list[tuple] = []
        score_items = model.score_items

        def recording_score_items(X, O, B):
            R = score_items(X, O, B)
            shapes.append(tuple(R.shape))
            return R

        with torch.random.fork_rng(devices=[] if dev.type == "cpu" else None), self._train_mode(model):
            torch.manual_seed(int(seed))
            H = [torch.zeros((b, d), dtype=torch.float32, device=dev) for d in gru.layers]
            with torch.no_grad():
                for k in range(arr.shape[1] - 2):
                    model.forward(torch.as_tensor(arr[:, k], device=dev), H,
                                  torch.as_tensor(arr[:, k + 1], device=dev), training=True)  # fmt: skip
            Y = self._targets_and_samples(arr[:, -1])
            handles = [model.DE.register_forward_hook(lambda mod, a, o: captured.__setitem__("embed", o.detach()))]
            handles += [
                d.register_forward_hook(lambda mod, a, o: captured["layers"].append(o.detach())) for d in model.D
            ]
            model.score_items = recording_score_items  # instance attribute: sees every score tensor of the step
            try:
                R = model.forward(torch.as_tensor(arr[:, -2], device=dev), H, Y, training=True)
                L = gru.loss_function(R, Y, gru.batch_size) / gru.batch_size
                (g,) = torch.autograd.grad(L, [model.Wy.weight], allow_unused=True)
            finally:
                del model.score_items
                for h in handles:
                    h.remove()
        columns = self.item_ids()[Y.cpu().numpy()]
        shape = max(shapes, key=lambda s: s[-1])
        return layered_forward_result(captured, none_mode, R, columns, shape, rows_touched(g))


class _FitTracer:
    """Builds one :class:`StepTrace` per optimizer step of the port's ``fit`` from what it observes (no change):

    - ``lanes``: at each yield of the training ``SessionDataIterator`` generator, its locals ``iters`` (the active
      lanes' session slots), ``start`` and ``i`` (the input event is ``start + i``) give each lane's session and
      the input's position in it (sessions are numbered in the port's sorted order: ``offset_sessions`` follows
      the sorted session ids), and the yielded Y gives the step's negatives (Y after the b targets);
    - ``forward``: the states H entering ``GRU4RecModel.forward(training=True)`` (after the reset hook);
    - ``step``: the optimizer's learning rate, the epoch and the step index.
    """

    def __init__(self, df: Any) -> None:
        self.session_ids = np.unique(df["SessionId"].to_numpy())
        self.records: list[StepTrace] = []
        self._lanes: dict[str, Any] = {}
        self._forward: dict[str, Any] = {}

    def lanes(self, loc: Mapping[str, Any], item: Any) -> None:
        it = loc["self"]
        sess = it.session_idx_arr[np.asarray(loc["iters"])]
        event = np.asarray(loc["start"]) + int(loc["i"])
        in_idx, y = item
        self._lanes = {
            "session_ids": np.asarray(self.session_ids[sess], dtype=np.int64),
            "positions": np.asarray(event - it.offset_sessions[sess], dtype=np.int64),
            "negatives": y[len(in_idx) :].detach().cpu().numpy(),
            "item_ids": it.itemidmap.index.values,
        }

    def forward(self, X: Any, H: Any, Y: Any) -> None:
        import torch

        state = torch.cat([h.detach().double() for h in H], dim=1)  # all layers, as the reference's trace
        self._forward = {
            "h_in_norms": torch.linalg.vector_norm(state, dim=1).cpu().numpy(),
            "n_active": int(X.shape[0]),
        }

    def scores(self, R: Any) -> None:
        self._forward["score_shape"] = tuple(int(n) for n in R.shape)

    def step(self, opt: Any, epoch: int, step: int) -> None:
        lanes, fwd = self._lanes, self._forward
        self.records.append(
            StepTrace(
                session_ids=lanes["session_ids"],
                positions=lanes["positions"],
                h_in_norms=np.asarray(fwd["h_in_norms"], dtype=np.float64),
                n_active=int(fwd["n_active"]),
                negative_ids=np.asarray(lanes["item_ids"][lanes["negatives"]]).astype(np.int64),
                learning_rate=float(opt.param_groups[0]["lr"]),
                epoch=int(epoch),
                step=int(step),
                score_shape=fwd.get("score_shape"),
            )
        )


register(OfficialPytorchAdapter)
