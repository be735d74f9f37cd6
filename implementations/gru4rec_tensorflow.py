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
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TypedDict

import numpy as np

from gru4rec_conformance.implementations._checkout import CHECKOUTS, locate
from gru4rec_conformance.implementations._thirdparty import (
    TempDir,
    check_session_frame,
    layers_list,
    patched,
    seed_everything,
)
from gru4rec_conformance.implementations.base import Adapter, FitReport, ImplementationUnavailable, Unsupported
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
    role = "implementation"
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


class GRU4RecTensorflowFork(Adapter):
    """czappi44/GRU4Rec_TensorFlow @f3ba65f (compat.v1 port) at one fix level (class attribute ``level``)."""

    name = "gru4rec_tensorflow:oob"
    level = "oob"
    role = "implementation"
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

    def version(self) -> str:
        locate("gru4rec_tensorflow_fork")
        c = CHECKOUTS["gru4rec_tensorflow_fork"]
        return f"{c.repo}@{c.short} level={self.level}"

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
        return {
            "losses": ["cross-entropy", "bpr", "top1"],
            "embedding_modes": ["separate"],
            "session_parallel": True,
            "in_batch_negatives": True,
            "extra_shared_negatives": False,
            "sample_alpha": False,
            "logq": False,
            "adagrad_momentum": False,
            "dropout_embed": False,
            "dropout_hidden": True,
            "separate_dropouts": False,
            "final_acts": ["softmax", "tanh", "linear", "relu"],
            "bpreg": False,
            "full_ranking": True,
            "needs_categories": False,
            "fixed_batch_shape": True,
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
            ],
            "score_semantics": "post-activation",
            "eval_tie_mode": "standard",
            "hyperparameters": hparams,
        }  # fmt: skip

    # -- graph helpers --------------------------------------------------------------------------------
    def _make(self, is_training: bool, batch_size: int, test_model: int | None = None):
        model_mod, _ = self._modules()
        tf = model_mod.tf
        args = _Args()
        for k, v in self.args.items():
            setattr(args, k, v)
        args.is_training = is_training
        args.batch_size = int(batch_size)
        args.dropout_p_hidden = 1.0 if not is_training else 1.0 - self.dropout
        if test_model is not None:
            args.test_model = test_model
        graph = tf.Graph()
        with graph.as_default():
            tf.set_random_seed(self.seed)
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
        report = FitReport()
        ep: dict[str, Any] = {"t0": time.perf_counter(), "costs": [], "lr": []}
        inner_run = gru.sess.run

        def run(fetches, feed_dict=None, *a, **k):
            out = inner_run(fetches, feed_dict, *a, **k)
            if isinstance(fetches, list) and len(fetches) == 5:  # [cost, final_state, global_step, lr, train_op]
                ep["costs"].append(float(out[0]))
                ep["lr"].append(float(out[3]))
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
        return report

    def _predictor(self, batch_size: int):
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
    def _evaluate(self, test_df, batch_size: int, cut_off: int, keep_rows: bool):
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
            recall, mrr = evaluation.evaluate_sessions_batch(pred, self.train_df.copy(), df.copy(), cut_off=cut_off,
                                                             batch_size=int(batch_size))  # fmt: skip
        return float(recall), float(mrr), len(rows), rows

    def score_stream(self, test_df: Any, batch_size: int):
        if self.gru is None:
            raise RuntimeError("gru4rec_tensorflow: call fit() first")
        _, _, _, rows = self._evaluate(test_df, batch_size, 20, keep_rows=True)
        return iter(rows)

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict:
        if self.gru is None:
            raise RuntimeError("gru4rec_tensorflow: call fit() first")
        out: dict[str, Any] = {}
        for c in cutoffs:  # one evaluation per cutoff, as the fork's main.py does
            recall, mrr, n, _ = self._evaluate(test_df, batch_size, int(c), keep_rows=False)
            out[f"recall@{c}"], out[f"mrr@{c}"], out["n_events"] = recall, mrr, n
        return out

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

    def close(self) -> None:
        for g in [self.gru, *self._pred.values()]:
            if g is not None:
                try:
                    g.sess.close()
                except Exception:
                    pass
        if self._tmp is not None:
            self._tmp.close()
            self._tmp = None


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
