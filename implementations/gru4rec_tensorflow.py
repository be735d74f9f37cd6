"""Adapters of GRU4Rec_TensorFlow (Songweiping/GRU4Rec_TensorFlow, ``gru4rec_BP``) and of the study's fork.

Registered names:

- ``gru4rec_tensorflow``: upstream Songweiping/GRU4Rec_TensorFlow @d53fd9e. **It cannot run here**: it is
  Python 2 / TensorFlow 0.12 / pandas < 0.17 code, and a syntax-only port (``xrange`` → ``range``, the only
  shim allowed) still fails on APIs that no longer exist (``tf.placeholder``, ``tf.global_variables_initializer``
  without compat.v1, ``DataFrame.sort``, ``DataFrame.ix``). ``capabilities()`` raises
  ImplementationUnavailable with that reason; the report carries the evidence.
- ``gru4rec_tensorflow:oob``, ``gru4rec_tensorflow:minor_fix``: the study's fork czappi44/GRU4Rec_TensorFlow
  @f3ba65f (a ``tensorflow.compat.v1`` / Python 3 port that also switched Adam → Adagrad, converts the
  dropout value to a keep probability 1 − p and filters unknown test items at every level), with the flags
  of ``example_gru4rec_tensorflow.ipynb``: OOB ``--batch_size 50 --decay 0.96 --initial_accumulator_value
  0.1``; minor fix ``--decay 1.0 --initial_accumulator_value 1e-12`` with a free batch size.

Driven through the fork's Python API as its ``main.py`` does: ``model.GRU4Rec(sess, args)`` in a graph of
its own, ``fit(data)``, then, for inference, a second graph built with ``is_training=False`` that restores
the checkpoint ``fit`` wrote (the code's own mechanism), and ``evaluation.evaluate_sessions_batch``.
Runs in a TensorFlow environment (``tox -e gru4rec_tensorflow`` or ``GRU4REC_TF_PYTHON``).

Every optional hook of the fork reaches into the ``GRU4Rec`` object ``fit`` built (its graph, session, placeholders
and variables), declared in ``shims``: ``get_weights``/``set_weights`` read the trainable variables with
``sess.run`` and write them through their initializers (the legacy GRUCell's gates and candidate kernels shown as
one 3·d kernel), after which inference restores them the code's own way (checkpoint); ``train_step`` is one
``sess.run`` of the loop body of ``GRU4Rec.fit``; ``loss_on_scores`` applies the ``final_activation`` and
``loss_function`` that ``GRU4Rec.__init__`` selects; ``train_forward`` runs a training graph built as ``fit`` builds
it; ``trace`` reads ``fit``'s lane bookkeeping at each training ``sess.run``; ``optimizer_info`` reports the
AdagradOptimizer settings and the decay schedule. Placeholders of fixed shape tie ``train_step`` and
``train_forward`` to the built batch size; every loss takes ``diag_part`` of the square in-batch matrix, so
``loss_on_scores`` refuses extra columns (``Unsupported("extra_shared_negatives")``, not declared). No hook is missing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import Any, TypedDict

import numpy as np

from gru4rec_conformance.implementations._checkout import CHECKOUTS, locate, located_version
from gru4rec_conformance.implementations._thirdparty import (
    TempDir,
    check_session_frame,
    layers_list,
    patched,
    seed_everything,
)
from gru4rec_conformance.implementations._torchbase import OwnEvaluatorByCutoff
from gru4rec_conformance.implementations.base import (
    Adapter,
    Capabilities,
    FitReport,
    ImplementationUnavailable,
    StepTrace,
    Unsupported,
)
from gru4rec_conformance.implementations.registry import register


class _Level(TypedDict):
    """Settings one level fixes (batch_size None: settable)."""

    decay: float
    initial_accumulator_value: float
    batch_size: int | None


LEVELS = {"oob": _Level(decay=0.96, initial_accumulator_value=0.1, batch_size=50),
          "minor_fix": _Level(decay=1.0, initial_accumulator_value=1e-12, batch_size=None)}  # fmt: skip

UPSTREAM_REASON = (
    "upstream GRU4Rec_TensorFlow @d53fd9e is Python 2 / TensorFlow 0.12 / pandas<0.17 code: after the only "
    "allowed shim (a syntax-only Python 3 port) it still fails on removed APIs (tf.placeholder, "
    "DataFrame.sort, DataFrame.ix) and no Python-3.11 TensorFlow provides the 0.12 API; use the fork's "
    "compat.v1 port: --impl gru4rec_tensorflow:oob / :minor_fix"
)


class GRU4RecTensorflowUpstream(Adapter):
    """Upstream GRU4Rec_TensorFlow: registered so that the suite reports why it cannot run."""

    name = "gru4rec_tensorflow"
    isolated = True
    checkouts = ("gru4rec_tensorflow",)
    worker_env = ("GRU4REC_TENSORFLOW_PATH",)
    homepage = "https://github.com/Songweiping/GRU4Rec_TensorFlow"
    description = "GRU4Rec_TensorFlow (Songweiping) @d53fd9e, upstream: Python 2 / TF 0.12, cannot run on Python 3.11"
    reproducibility = {
        "installs": "no: Python 2.7 + TensorFlow 0.12 + pandas < 0.17 (DataFrame.sort, .ix, xrange)",
        "offline": "yes",
        "pinned": "no (README names TensorFlow 0.12)",
        "hyperparameters": "batch size, decay, decay steps, sigma, grad cap and data paths hard-coded in Args (TF-5)",
    }

    def version(self) -> str:
        c = CHECKOUTS["gru4rec_tensorflow"]
        return f"{c.repo}@{c.short}"

    def capabilities(self) -> dict[str, Any]:
        locate("gru4rec_tensorflow")
        raise ImplementationUnavailable(UPSTREAM_REASON)

    def build(self, seed: int, **hparams: Any) -> None:
        raise ImplementationUnavailable(UPSTREAM_REASON)

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        raise ImplementationUnavailable(UPSTREAM_REASON)

    def item_ids(self) -> Any:
        raise ImplementationUnavailable(UPSTREAM_REASON)

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> Any:
        raise ImplementationUnavailable(UPSTREAM_REASON)


class _Args:
    """The fork's ``main.Args`` defaults (gru4rec_BP/main.py), completed per run."""

    is_training = True
    layers = 1
    rnn_size = 100
    n_epochs = 5
    batch_size = 256
    dropout_p_hidden = 0.3
    learning_rate = 0.05
    initial_accumulator_value = 1e-1
    decay = 0.96
    decay_steps = 1e4
    sigma = 0
    init_as_normal = False
    reset_after_session = True
    session_key = "SessionId"
    item_key = "ItemId"
    time_key = "Time"
    grad_cap = 0
    test_model = 2
    checkpoint_dir = "./checkpoint"
    loss = "cross-entropy"
    final_act = "softmax"
    hidden_act = "tanh"
    n_items = -1


class GRU4RecTensorflowFork(OwnEvaluatorByCutoff):
    """czappi44/GRU4Rec_TensorFlow @f3ba65f (compat.v1 port) at one fix level (class attribute ``level``)."""

    name = "gru4rec_tensorflow:oob"
    label = "gru4rec_tensorflow"
    level = "oob"
    isolated = True
    checkouts = ("gru4rec_tensorflow_fork",)
    worker_env = ("GRU4REC_TENSORFLOW_FORK_PATH", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
    worker_python = os.environ.get("GRU4REC_TF_PYTHON") or None
    homepage = "https://github.com/czappi44/GRU4Rec_TensorFlow"
    description = (
        "czappi44/GRU4Rec_TensorFlow @f3ba65f (the study's compat.v1 fork), OOB: B=50, decay 0.96, accumulator 0.1"
    )
    study = {"implementation": "GRU4Rec_Tensorflow", "variant": "OOB"}
    reproducibility = {
        "installs": "yes on TensorFlow 2.21 (tensorflow.compat.v1 graph mode, legacy rnn_cell) with numpy 2 / pandas 3",
        "offline": "yes",
        "pinned": "no requirements file; the study's conda env pins python 3.8, tensorflow 2.9.3, numpy 1.24.1, "
        "pandas 1.5.2",
        "hyperparameters": "layers, size, epochs, lr, dropout, batch size, decay, accumulator settable by flags; "
        "embedding size tied to rnn_size; cross-entropy/bpr/top1 only",
    }

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device=device)
        self._tmp: TempDir | None = None
        self.gru = None
        self._pred: dict[int, Any] = {}
        self._mods: tuple | None = None
        self.args: dict[str, Any]  # the _Args attributes of a run, set by build
        self._trace_on = False
        self._dirty = False  # weights changed since the checkpoint the inference graph restores
        self._loss_graphs: dict[tuple, Any] = {}

    def version(self) -> str:
        return located_version("gru4rec_tensorflow_fork") + f" level={self.level}"

    def _modules(self):
        if self._mods is None:
            root = locate("gru4rec_tensorflow_fork") / "gru4rec_BP"
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            mods = []
            for leaf in ("model", "evaluation"):
                name = f"_gru4rec_conformance_tf_{leaf}"
                spec = importlib.util.spec_from_file_location(name, root / f"{leaf}.py")
                mod = importlib.util.module_from_spec(spec)
                sys.modules[name] = mod
                spec.loader.exec_module(mod)
                mods.append(mod)
            self._mods = tuple(mods)
        return self._mods

    def capabilities(self) -> dict[str, Any]:
        locate("gru4rec_tensorflow_fork")
        import tensorflow as tf

        fixed = LEVELS[self.level]
        hparams = {
            "layers": [100],
            "loss": "cross-entropy",
            "final_act": "softmax",
            "embedding": "layersize",
            "batch_size": fixed["batch_size"] or 256,
            "learning_rate": 0.05,
            "dropout_p_hidden": 0.3,
            "n_epochs": 5,
            "optimizer": "adagrad",
        }
        if fixed["batch_size"] is not None:
            del hparams["batch_size"]  # hard-coded at OOB (B=50, as upstream's Args), TF-5
        flags = Capabilities.flags("session_parallel", "in_batch_negatives", "dropout_hidden", "full_ranking",
                                   "fixed_batch_shape")  # fmt: skip
        return {
            "losses": ["cross-entropy", "bpr", "top1"],
            "embedding_modes": ["separate"],
            **flags,
            "final_acts": ["softmax", "tanh", "linear", "relu"],
            "devices": ["cpu"],
            "framework": {"name": "tensorflow", "version": tf.__version__},
            "shims": [
                "Args object filled from the official names (layers -> layer count and rnn_size, n_epochs, "
                "batch_size, learning_rate, dropout_p_hidden -> keep probability 1 - p as the fork's main.py "
                "converts it, decay / initial_accumulator_value by level)",
                "each model in a tf.Graph and tf.compat.v1.Session of its own, as main.py's `with tf.Session()`",
                "inference: a second graph built with is_training=False and dropout keep 1.0 restores the "
                "checkpoint fit() wrote (main.py --train 0); for another evaluation batch size the same graph "
                "is built with that batch size (placeholders are fixed-shape)",
                "FitReport: step losses and counts from wrapping the session's run() during fit; epochs "
                "delimited by the per-epoch checkpoint save",
                "score_prefixes: predict_next_batch with one pseudo session id per prefix lane (the method "
                "resets a lane's state when its session id changes), padded to the batch size; an empty prefix "
                "scored as softmax of the output bias (the zero state)",
                "score_stream/evaluate: evaluation.evaluate_sessions_batch run unchanged; scores captured by "
                "wrapping predict_next_batch, session ids/positions read from the evaluator's locals",
                "seed: tf.compat.v1.set_random_seed in the graph, np.random.seed",
                "get_weights/set_weights: the trainable variables of the training graph (embedding, softmax_w, "
                "softmax_b; per GRU cell the legacy GRUCell's gates/kernel (n_in + d, 2d) [reset | update] and "
                "candidate/kernel (n_in + d, d) concatenated along the gate axis into one (n_in + d, 3d) kernel, "
                "rows [input; state], and likewise the biases into one (3d,)), read with sess.run and written with "
                "Variable.load; after set_weights or train_step the training session is saved to the checkpoint "
                "the inference graph restores (the code's own save/restore path) before the next inference",
                "train_step: the body of GRU4Rec.fit's loop, one sess.run of [cost, final_state, global_step, lr, "
                "train_op] with X, Y and the state placeholders fed (hidden None = zeros); its batch must be the "
                "built batch_size (fixed-shape placeholders)",
                "loss_on_scores: the final_activation and loss_function that GRU4Rec.__init__ selects for the loss "
                "and final_act, taken from a GRU4Rec built in a graph of its own with batch_size b (top1 divides "
                "by it), applied to the given B x B matrix; gradient by tf.gradients",
                "train_forward: a training graph built as fit builds it (graph seed = the call's seed), the trained "
                "values loaded into it; the prefix steps fed through final_state, then the last transition's "
                "embedding lookup, cell output after the DropoutWrapper (the first arguments of the code's "
                "tf.nn.embedding_lookup and tf.matmul calls, observed while the graph is built), yhat and the "
                "cost's gradient of softmax_w (its touched rows); nothing updated",
                "trace: lanes' session ids and input positions read from GRU4Rec.fit's locals at each training "
                "sess.run, the fed state placeholders' norms (all layers), the fetched lr; in-batch negatives only "
                "(negative_ids empty)",
            ],
            "score_semantics": "post-activation",
            "eval_tie_mode": "standard",
            "gate_layout": ["reset", "update", "candidate"],
            "hyperparameters": hparams,
        }  # fmt: skip

    # -- graph helpers --------------------------------------------------------------------------------
    def _make(self, is_training: bool, batch_size: int, test_model: int | None = None, seed: int | None = None,
              **overrides: Any):  # fmt: skip
        model_mod, _ = self._modules()
        tf = model_mod.tf
        args = _Args()
        for k, v in {**self.args, **overrides}.items():
            setattr(args, k, v)
        args.is_training = is_training
        args.batch_size = int(batch_size)
        args.dropout_p_hidden = 1.0 if not is_training else 1.0 - self.dropout
        if test_model is not None:
            args.test_model = test_model
        graph = tf.Graph()
        with graph.as_default():
            tf.set_random_seed(self.seed if seed is None else int(seed))
            sess = tf.Session(graph=graph)
            with sess.as_default():
                gru = model_mod.GRU4Rec(sess, args)
        gru._graph = graph
        return gru

    # -- required ----------------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        fixed = LEVELS[self.level]
        hp.setdefault("batch_size", fixed["batch_size"])
        if fixed["batch_size"] is not None:  # not declared at OOB (TF-5): resolve_hparams refused other values
            hp["batch_size"] = fixed["batch_size"]
        layers = layers_list(hp["layers"])
        if len(set(layers)) != 1:
            raise Unsupported("layers:unequal", f"one rnn_size for all layers; got {layers}")
        if hp["embedding"] != "layersize" and int(hp["embedding"]) != layers[0]:
            raise Unsupported("embedding:size", "the embedding size is tied to rnn_size")
        if str(hp["optimizer"]) != "adagrad":
            raise Unsupported(f"optimizer:{hp['optimizer']}")
        loss = str(hp["loss"])
        if loss not in ("cross-entropy", "bpr", "top1"):
            raise Unsupported(f"loss:{loss}")
        self.seed = int(seed)
        self.dropout = float(hp["dropout_p_hidden"])
        self.args = dict(layers=len(layers), rnn_size=layers[0], n_epochs=int(hp["n_epochs"]),
                         batch_size=int(hp["batch_size"]), learning_rate=float(hp["learning_rate"]),
                         decay=fixed["decay"], initial_accumulator_value=fixed["initial_accumulator_value"],
                         loss=loss, final_act=str(hp["final_act"]))  # fmt: skip
        if self._tmp is None:
            self._tmp = TempDir("gru4rec-tf-")
        self.args["checkpoint_dir"] = str(self._tmp.path)
        self.gru = None
        self._pred = {}

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        df = check_session_frame(train_df)
        seed_everything(self.seed, torch_too=False)
        if n_epochs is not None:
            self.args["n_epochs"] = int(n_epochs)
        self.args["n_items"] = int(df["ItemId"].nunique())
        self.train_df = df
        self._pred = {}
        gru = self._make(True, self.args["batch_size"])
        self.gru = gru
        report = FitReport(trace=[] if self._trace_on else None)
        ep: dict[str, Any] = {"t0": time.perf_counter(), "costs": [], "lr": []}
        inner_run = gru.sess.run

        def run(fetches, feed_dict=None, *a, **k):
            step = isinstance(fetches, list) and len(fetches) == 5  # [cost, final_state, global_step, lr, train_op]
            lanes = (
                self._lanes(sys._getframe(1).f_locals, gru, feed_dict) if step and report.trace is not None else None
            )
            out = inner_run(fetches, feed_dict, *a, **k)
            if step:
                ep["costs"].append(float(out[0]))
                ep["lr"].append(float(out[3]))
                if lanes is not None:
                    report.trace.append(StepTrace(**lanes, learning_rate=float(out[3])))
            return out

        inner_save = gru.saver.save

        def save(sess, path, *a, **k):
            report.epoch_losses.append(float(np.mean(ep["costs"])) if ep["costs"] else float("nan"))
            report.n_steps.append(len(ep["costs"]))
            report.n_events_trained.append(len(ep["costs"]) * self.args["batch_size"])
            report.epoch_seconds.append(time.perf_counter() - ep["t0"])
            self._lrs = list(ep["lr"])
            ep.update(t0=time.perf_counter(), costs=[], lr=[])
            return inner_save(sess, path, *a, **k)

        with patched(gru.sess, "run", run), patched(gru.saver, "save", save), gru._graph.as_default():
            gru.fit(df.copy())
        if getattr(gru, "error_during_train", False):
            raise FloatingPointError("GRU4Rec_TensorFlow stopped training on a NaN cost")
        if not report.epoch_losses:  # zero epochs: keep the initial weights for inference
            with gru._graph.as_default():
                gru.saver.save(gru.sess, f"{self.args['checkpoint_dir']}/gru-model", global_step=0)
        self._last_epoch = max(len(report.epoch_losses) - 1, 0)
        itemids = df["ItemId"].unique()
        self._item_ids = np.asarray(itemids, dtype=np.int64)
        self._index = {int(v): k for k, v in enumerate(self._item_ids.tolist())}
        self._dirty = False
        return report

    @staticmethod
    def _lanes(loc: Mapping[str, Any], gru: Any, feed_dict: Mapping[Any, Any]) -> dict[str, Any]:
        """StepTrace fields of one training sess.run from GRU4Rec.fit's locals (read only): the input rows are
        ``start + i``, a lane's session starts at ``offset_sessions[session_idx_arr[iters]]``; the state entering the
        step is what is fed to the state placeholders."""
        rows = np.asarray(loc["start"]) + int(loc["i"])
        first = np.asarray(loc["offset_sessions"])[np.asarray(loc["session_idx_arr"])[np.asarray(loc["iters"])]]
        h = np.concatenate([np.asarray(feed_dict[p], dtype=np.float64) for p in gru.state], axis=1)
        return dict(session_ids=loc["data"][gru.session_key].to_numpy()[rows].astype(np.int64),
                    positions=(rows - first).astype(np.int64), h_in_norms=np.linalg.norm(h, axis=1),
                    n_active=int(len(rows)), negative_ids=np.zeros(0, dtype=np.int64))  # fmt: skip

    def _predictor(self, batch_size: int):
        if self._dirty:  # weights changed by set_weights/train_step: save them where the inference graph restores
            gru = self._require()
            with gru._graph.as_default():
                gru.saver.save(gru.sess, f"{self.args['checkpoint_dir']}/gru-model", global_step=self._last_epoch)
            for p in self._pred.values():
                p.sess.close()
            self._pred = {}
            self._dirty = False
        if int(batch_size) not in self._pred:
            self._pred[int(batch_size)] = self._make(False, batch_size, test_model=self._last_epoch)
        return self._pred[int(batch_size)]

    def item_ids(self) -> np.ndarray:
        if self.gru is None:
            raise RuntimeError("gru4rec_tensorflow: call fit() first")
        return self._item_ids

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        import pandas as pd

        if self.gru is None:
            raise RuntimeError("gru4rec_tensorflow: call fit() first")
        ids = self._item_ids
        itemidmap = pd.Series(data=np.arange(len(ids)), index=ids)
        known = set(ids.tolist())
        seqs = [[int(i) for i in p if int(i) in known] for p in prefixes]
        out = np.zeros((len(seqs), len(ids)), dtype=np.float32)
        B = self.args["batch_size"]
        pred = self._predictor(B)
        tf = self._modules()[0].tf
        with pred._graph.as_default():
            var = [v for v in tf.global_variables() if v.name == "gru_layer/softmax_b:0"][0]
            b = np.asarray(pred.sess.run(var), dtype=np.float64)
        e = np.exp(b - b.max())
        zero = (e / e.sum()).astype(np.float32)
        todo = [k for k, s in enumerate(seqs) if s]
        for k, s in enumerate(seqs):
            if not s:
                out[k] = zero
        next_id = 0
        for c in range(0, len(todo), B):
            chunk = todo[c : c + B]
            sess_ids = np.full(B, -2, dtype=np.int64)
            for lane in range(len(chunk)):
                sess_ids[lane] = next_id
                next_id += 1
            pred.predict = False
            for t in range(max(len(seqs[k]) for k in chunk)):
                inp = np.full(B, ids[0], dtype=np.int64)
                for lane, k in enumerate(chunk):
                    if t < len(seqs[k]):
                        inp[lane] = seqs[k][t]
                with pred._graph.as_default():
                    preds = pred.predict_next_batch(sess_ids, inp, itemidmap, B)
                vals = preds.to_numpy()
                for lane, k in enumerate(chunk):
                    if t == len(seqs[k]) - 1:
                        out[k] = vals[:, lane]
        return out

    # -- black-box+ ----------------------------------------------------------------------------------------
    def _run_eval(self, test_df, batch_size: int, k: int, keep_rows: bool):
        _, evaluation = self._modules()
        df = check_session_frame(test_df, "test_df")
        pred = self._predictor(batch_size)
        rows: list[tuple] = []
        inner = pred.predict_next_batch

        def predict_next_batch(session_ids, input_item_ids, itemidmap, batch=50):
            preds = inner(session_ids, input_item_ids, itemidmap, batch)
            f = sys._getframe(1).f_locals  # the evaluator's lane bookkeeping (read only)
            valid = np.asarray(f["valid_mask"])
            tgt = np.asarray(f["start_valid"]) + int(f["i"]) + 1
            data = f["test_data"]
            first = np.asarray(f["offset_sessions"])[np.asarray(f["iters"])[valid]]
            sess = data[self.args.get("session_key", "SessionId")].to_numpy()[tgt]
            items = data["ItemId"].to_numpy()[tgt]
            vals = preds.to_numpy()
            lanes = np.flatnonzero(valid)
            for j, lane in enumerate(lanes):
                rows.append((int(sess[j]), int(tgt[j] - first[j]), int(items[j]),
                             vals[:, lane].astype(np.float32) if keep_rows else None))  # fmt: skip
            return preds

        with patched(pred, "predict_next_batch", predict_next_batch), pred._graph.as_default():
            recall, mrr = evaluation.evaluate_sessions_batch(pred, self.train_df.copy(), df.copy(), cut_off=k,
                                                             batch_size=int(batch_size))  # fmt: skip
        return float(recall), float(mrr), len(rows), rows

    def _evaluable(self) -> Any:
        return self.gru

    def _stream_cutoff(self) -> int:
        return 20

    def optimizer_info(self) -> dict:
        if self.gru is None:
            raise RuntimeError("gru4rec_tensorflow: call fit() first")
        a = self.args
        schedule = (
            "constant"
            if a["decay"] == 1.0
            else (f"exponential decay x{a['decay']} every 10000 steps (staircase), floor 1e-5")
        )
        return {"type": "adagrad", "learning_rate": a["learning_rate"], "lr_schedule": schedule,
                "initial_accumulator": a["initial_accumulator_value"], "eps": 0.0, "momentum": 0.0,
                "grad_clip": None, "effective_learning_rates": getattr(self, "_lrs", [])[-1:]}  # fmt: skip

    # -- white-box ---------------------------------------------------------------------------------------------
    def trace(self, enable: bool = True) -> None:
        """Record one :class:`StepTrace` per training ``sess.run`` of the following ``fit`` calls: every lane's
        session id and input position, the L2 norm of the fed state (all layers), n_active = B, no extra negatives
        (in-batch only: empty) and the learning rate the step fetched."""
        self._trace_on = bool(enable)

    def _require(self) -> Any:
        if self.gru is None:
            raise RuntimeError("gru4rec_tensorflow: call fit() first (n_epochs=0 initialises without training)")
        return self.gru

    @staticmethod
    def _cells(gru: Any) -> dict[str, dict[str, Any]]:
        """Trainable variables of the graph: ``{"": {embedding, softmax_w, softmax_b}, "cell_k": {gates/kernel,
        ...}}`` keyed by their scope-relative names."""
        out: dict[str, dict[str, Any]] = {}
        for v in gru._graph.get_collection("trainable_variables"):
            name = v.name.split(":")[0]
            parts = name.split("/")
            if "gru_cell" in parts:  # gru_layer/multi_rnn_cell/cell_k/gru_cell/<gates|candidate>/<kernel|bias>
                cell = parts[parts.index("gru_cell") - 1]
                out.setdefault(cell, {})["/".join(parts[-2:])] = v
            else:
                out.setdefault("", {})[parts[-1]] = v
        return out

    def get_weights(self) -> dict:
        """The training graph's trainable variables as float32 arrays: ``embedding`` (n_items, d), ``softmax_w``
        (n_items, d), ``softmax_b`` (n_items,) and per GRU cell ``cell_<k>/kernel`` (n_in + d, 3·d) = the legacy
        GRUCell's gates/kernel [reset | update] beside its candidate/kernel (rows: input, then state) and
        ``cell_<k>/bias`` (3·d,) likewise; item rows in :meth:`item_ids` order. ``MultiRNNCell([cell] * layers)``
        reuses one cell, so more layers still give one cell's variables (TF-11)."""
        gru = self._require()
        cells = self._cells(gru)
        with gru._graph.as_default():
            values = gru.sess.run(cells)
        out = {k: np.asarray(v) for k, v in values.pop("").items()}
        for cell, v in values.items():
            out[f"{cell}/kernel"] = np.concatenate([v["gates/kernel"], v["candidate/kernel"]], axis=1)
            out[f"{cell}/bias"] = np.concatenate([v["gates/bias"], v["candidate/bias"]])
        return out

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load arrays (all or a subset, layout of :meth:`get_weights`) into the training graph's variables
        (``Variable.load``; Adagrad's accumulators are kept). Raises ValueError for an unknown name or shape."""
        gru = self._require()
        cells = self._cells(gru)
        targets: dict[str, list[tuple[Any, Any]]] = {k: [(v, np.s_[:])] for k, v in cells[""].items()}
        for cell, v in cells.items():
            if cell:
                d = int(v["candidate/bias"].shape[0])
                targets[f"{cell}/kernel"] = [
                    (v["gates/kernel"], np.s_[..., : 2 * d]),
                    (v["candidate/kernel"], np.s_[..., 2 * d :]),
                ]
                targets[f"{cell}/bias"] = [(v["gates/bias"], np.s_[: 2 * d]), (v["candidate/bias"], np.s_[2 * d :])]
        unknown = sorted(set(weights) - set(targets))
        if unknown:
            raise ValueError(f"set_weights: unknown parameter name(s) {unknown}; known: {sorted(targets)}")
        current = self.get_weights()
        for name, value in weights.items():
            a = np.asarray(value, dtype=np.float32)
            if a.shape != current[name].shape:
                raise ValueError(f"set_weights: {name} has shape {a.shape}, expected {current[name].shape}")
            for var, ix in targets[name]:
                _load(var, a[ix], gru.sess)
        self._dirty = True

    def _item_index(self, ids: Any, what: str) -> np.ndarray:
        """Item ids → the model's ItemIdx (itemidmap order = :meth:`item_ids`); ValueError for an unknown id."""
        ids = np.asarray(ids).ravel()
        bad = [int(i) for i in ids if int(i) not in self._index]
        if bad:
            raise ValueError(f"{what}: item id(s) unknown to the trained model: {bad[:5]}")
        out = np.asarray([self._index[int(i)] for i in ids], dtype=np.int32)
        if len(out) != self.args["batch_size"] and LEVELS[self.level]["batch_size"] is not None:
            # the level hard-codes the batch size (TF-5): a step of another width cannot be built, so the request
            # is refused under the undeclared hyperparameter (a skip naming it), not failed as a hook error
            raise Unsupported("batch_size", f"{len(out)} lanes asked; this level's placeholders have the fixed "
                                            f"batch size {self.args['batch_size']}")  # fmt: skip
        if len(out) != self.args["batch_size"]:
            raise ValueError(f"{what}: {len(out)} lanes, but the placeholders have the fixed batch size "
                             f"{self.args['batch_size']}; build with batch_size={len(out)}")  # fmt: skip
        return out

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One update as the body of ``GRU4Rec.fit``'s loop: ``sess.run([cost, final_state, global_step, lr,
        train_op])`` with X, Y and the state placeholders fed; ``hidden``: (layers, B, d) array or a list of (B, d)
        arrays, None = zeros. Returns the step's cost. The batch must be the built batch_size."""
        gru = self._require()
        x = self._item_index(batch_inputs, "batch_inputs")
        y = self._item_index(batch_targets, "batch_targets")
        shape = (len(x), self.args["rnn_size"])
        state = ([np.zeros(shape, dtype=np.float32) for _ in gru.state] if hidden is None
                 else [np.asarray(h, dtype=np.float32).reshape(shape) for h in hidden])  # fmt: skip
        feed = {gru.X: x, gru.Y: y, **dict(zip(gru.state, state))}
        with gru._graph.as_default():
            c, *_ = gru.sess.run([gru.cost, gru.final_state, gru.global_step, gru.lr, gru.train_op], feed)
        self._dirty = True
        return float(c)

    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        """The implementation's training loss on a square score matrix: the ``final_activation`` and
        ``loss_function`` that ``GRU4Rec.__init__`` picks for ``loss`` and ``final_act`` (default: the built one),
        from a GRU4Rec built with batch_size b in a graph of its own, on the (b, b) matrix of in-batch scores; the
        gradient by ``tf.gradients``. A matrix with extra columns raises Unsupported: every loss takes
        ``tf.diag_part`` of the B x B in-batch matrix."""
        if loss not in ("cross-entropy", "bpr", "top1"):
            raise Unsupported(f"loss:{loss}")
        act = hparams.pop("final_act", None)
        act = str(self.args["final_act"] if act is None else act)
        if act not in ("softmax", "tanh", "linear", "relu"):
            raise Unsupported(f"final_act:{act}")
        if hparams:
            raise Unsupported(sorted(hparams)[0], "not a parameter of the implementation's losses")
        R = np.asarray(scores, dtype=np.float32)
        if R.ndim != 2 or R.shape[0] != R.shape[1]:
            raise Unsupported("extra_shared_negatives", "the losses take tf.diag_part of the square B x B matrix of "
                              f"in-batch scores; got shape {R.shape}")  # fmt: skip
        key = (R.shape[0], loss, act)
        if key not in self._loss_graphs:
            holder = self._make(True, R.shape[0], loss=loss, final_act=act, layers=1, rnn_size=1, n_items=R.shape[0])
            tf = self._modules()[0].tf
            with holder._graph.as_default():
                ph = tf.placeholder(tf.float32, R.shape)
                value = holder.loss_function(holder.final_activation(ph))
                (grad,) = tf.gradients(value, [ph])
            self._loss_graphs[key] = (holder, ph, value, grad)
        holder, ph, value, grad = self._loss_graphs[key]
        with holder._graph.as_default():
            v, g = holder.sess.run([value, grad], {ph: R})
        return float(v), np.asarray(g, dtype=np.float32)

    def train_forward(self, prefix_batch: Any, seed: int) -> dict:
        """The training graph's forward of B equally long sequences from zero states, in a training graph built
        as fit builds it (graph seed ``seed`` drives the DropoutWrapper masks) holding the trained values; nothing
        is updated.

        Returns ``embedding_out`` (B, d) the embedding lookup of the last input, ``layer_outputs`` [(B, d)] the
        cell output after the DropoutWrapper, ``scores`` (B, B) yhat of the in-batch columns (``columns`` = the
        lanes' targets), ``score_tensor_shape`` yhat's shape and ``output_rows_touched`` the rows of softmax_w
        with a non-zero gradient of the cost. One layer only (the DropoutWrapper of a lower layer is inside the
        MultiRNNCell)."""
        self._require()
        if int(self.args["layers"]) != 1:
            raise Unsupported("train_forward:layers", "the outputs of lower layers are inside the MultiRNNCell")
        seqs = [np.asarray(s) for s in prefix_batch]
        if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2:
            raise ValueError("prefix_batch: expected b >= 1 item sequences of one common length >= 2")
        arr = np.stack([self._item_index(np.stack(seqs)[:, k], "prefix_batch") for k in range(len(seqs[0]))], 1)
        model_mod = self._modules()[0]
        tf = model_mod.tf
        seen: dict[str, list] = {"lookup": [], "matmul": []}
        lookup, matmul = tf.nn.embedding_lookup, tf.matmul

        def spy_lookup(*a, **k):
            out = lookup(*a, **k)
            seen["lookup"].append(out)
            return out

        def spy_matmul(*a, **k):
            seen["matmul"].append(a[0] if a else k["a"])
            return matmul(*a, **k)

        with ExitStack() as stack:
            stack.enter_context(patched(tf.nn, "embedding_lookup", spy_lookup))
            stack.enter_context(patched(tf, "matmul", spy_matmul))
            fwd = self._make(True, len(arr), seed=seed)
        try:
            values = self.get_weights()
            with fwd._graph.as_default():
                cells = self._cells(fwd)
                for k, v in cells[""].items():
                    _load(v, values[k], fwd.sess)
                for cell, v in cells.items():
                    if cell:
                        d = int(v["candidate/bias"].shape[0])
                        kernel, bias = values[f"{cell}/kernel"], values[f"{cell}/bias"]
                        _load(v["gates/kernel"], kernel[:, : 2 * d], fwd.sess)
                        _load(v["candidate/kernel"], kernel[:, 2 * d :], fwd.sess)
                        _load(v["gates/bias"], bias[: 2 * d], fwd.sess)
                        _load(v["candidate/bias"], bias[2 * d :], fwd.sess)
                state = [np.zeros((len(arr), self.args["rnn_size"]), dtype=np.float32) for _ in fwd.state]
                for j in range(arr.shape[1] - 2):
                    state = fwd.sess.run(fwd.final_state, {fwd.X: arr[:, j], **dict(zip(fwd.state, state))})
                softmax_w = cells[""]["softmax_w"]
                (g,) = tf.gradients(fwd.cost, [softmax_w])
                feed = {fwd.X: arr[:, -2], fwd.Y: arr[:, -1], **dict(zip(fwd.state, state))}
                emb, out, yhat, gv = fwd.sess.run([seen["lookup"][0], seen["matmul"][0], fwd.yhat, g], feed)
        finally:
            fwd.sess.close()
        if hasattr(gv, "indices"):  # IndexedSlicesValue: the gradient of an embedding_lookup of softmax_w
            touched = len(np.unique(gv.indices[np.abs(gv.values).reshape(len(gv.indices), -1).sum(1) > 0]))
        else:
            touched = int((np.abs(np.asarray(gv)).sum(1) > 0).sum())
        return {
            "embedding_out": np.asarray(emb),
            "layer_outputs": [np.asarray(out)],
            "scores": np.asarray(yhat),
            "columns": self._item_ids[arr[:, -1]],
            "score_tensor_shape": tuple(int(v) for v in np.shape(yhat)),
            "output_rows_touched": int(touched),
        }

    def close(self) -> None:
        for g in [self.gru, *self._pred.values(), *(h[0] for h in self._loss_graphs.values())]:
            if g is not None:
                try:
                    g.sess.close()
                except Exception:
                    pass
        if self._tmp is not None:
            self._tmp.close()
            self._tmp = None


def _load(var: Any, value: np.ndarray, sess: Any) -> None:
    """Write ``value`` into a graph variable by running its own initializer with the initial value fed (no new op
    is added to the graph, unlike ``Variable.load``/``assign``)."""
    with sess.graph.as_default():
        sess.run(var.initializer, {var.initial_value: value})


class GRU4RecTensorflowMinorFix(GRU4RecTensorflowFork):
    """czappi44/GRU4Rec_TensorFlow at the minor fix: decay 1.0, accumulator 1e-12, batch size free."""

    name = "gru4rec_tensorflow:minor_fix"
    level = "minor_fix"
    description = (
        "czappi44/GRU4Rec_TensorFlow @f3ba65f (the study's compat.v1 fork), minor fix: decay 1.0, "
        "accumulator 1e-12, batch size free"
    )
    study = {"implementation": "GRU4Rec_Tensorflow", "variant": "Correct Exp"}


for _cls in (GRU4RecTensorflowUpstream, GRU4RecTensorflowFork, GRU4RecTensorflowMinorFix):
    register(_cls)
