"""Adapters of KerasGRU4Rec (paxcema/KerasGRU4Rec) and of the study's fork with its fix levels.

Registered names:

- ``keras_gru4rec``: upstream paxcema/KerasGRU4Rec @5f52c60 (code of 7b22556), as it is;
- ``keras_gru4rec:oob``, ``keras_gru4rec:minor_fix``, ``keras_gru4rec:major_fix``: the study's fork
  czappi44/KerasGRU4Rec @bf4b7c8 with the flags of ``example_keras_gru4rec.ipynb``: ``--optim adam``
  (hidden 100, dropout 0.25, lr 0.001: the upstream constants); ``--optim adagrad`` with free hidden size,
  dropout and lr; the same plus ``--use_correct_mask_reset``.

Keras 2 vs Keras 3 (answered from evidence, see the report): the code is Keras 2 code. Upstream pins
``keras==2.4.3`` (a redirect to ``tf.keras``) with TensorFlow 2.11; the study ran TF 2.9 / Keras 2.9. On a
current stack (TensorFlow 2.21, whose ``tf.keras`` is Keras 3) both fail when the model is compiled:
``ValueError: Argument(s) not recognized: {'lr': ...}``. The adapters therefore run on **tf-keras 2.21** (the
Keras 2 API, ``TF_USE_LEGACY_KERAS=1``), upstream's ``import keras`` resolved to it, and resolve
``tf.keras.optimizers.Adam``/``Adagrad`` to ``tf.keras.optimizers.legacy`` (the Keras <= 2.10 optimizers of
the study's environment; the Keras >= 2.11 classes reject the ``decay=0.0`` the code passes to Adam). These
are declared shims; nothing the model computes is changed.

Runs in a TensorFlow environment: ``tox -e keras_gru4rec`` (or set ``GRU4REC_TF_PYTHON`` to such an
interpreter so the worker uses it).

Every optional hook reaches into the Keras model ``create_model`` built and the checkout's own functions, declared
in ``shims``: ``get_weights``/``set_weights`` read and write the GRU and output layers' variables (the unused extra
index n_items of the one-hot input and softmax left out, KG-8); ``train_step`` is the body of ``train_model``'s loop
(``reset_states``, ``to_categorical``, ``train_on_batch``); ``loss_on_scores`` applies the output activation and the
compiled loss in a ``tf.function`` as ``train_on_batch`` does; ``train_forward`` calls the model's layers in training
mode; ``trace`` observes ``train_model`` (the loader's locals, the GRU state before each ``train_on_batch``);
``optimizer_info`` reads the compiled optimizer's config. The model's fixed batch shape ties ``train_step`` and
``train_forward`` to the built ``batch_size``. No hook is missing (``HOOKS_ABSENT`` is empty).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import types
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from gru4rec_conformance.implementations._checkout import locate, located_version
from gru4rec_conformance.implementations._thirdparty import (
    check_session_frame,
    layers_list,
    patched,
    seed_everything,
    spy_generator,
)
from gru4rec_conformance.implementations._torchbase import OwnEvaluatorByCutoff
from gru4rec_conformance.implementations.base import Capabilities, FitReport, StepTrace, Unsupported
from gru4rec_conformance.implementations.registry import register

LEVELS = {
    # level: (fork?, optimizer, use_correct_mask_reset, hyperparameters settable)
    "upstream": (False, "adam", False, False),
    "oob": (True, "adam", False, True),
    "minor_fix": (True, "adagrad", False, True),
    "major_fix": (True, "adagrad", True, True),
}


def _keras2_environment(upstream: bool):
    """Import TensorFlow with the Keras 2 API (tf-keras) and, for upstream, make ``import keras`` resolve to it."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tf_keras

    if upstream:
        sys.modules["keras"] = tf_keras
        for sub in ("models", "backend", "callbacks", "losses", "layers", "utils", "optimizers"):
            sys.modules[f"keras.{sub}"] = getattr(tf_keras, sub)
    return tf, tf_keras


class KerasGRU4RecAdapter(OwnEvaluatorByCutoff):
    """KerasGRU4Rec upstream (paxcema) @5f52c60; subclasses give the fork's levels."""

    name = "keras_gru4rec"
    label = "keras_gru4rec"
    level = "upstream"
    isolated = True
    checkouts = ("keras_gru4rec", "keras_gru4rec_fork")
    worker_env = ("KERAS_GRU4REC_PATH", "KERAS_GRU4REC_FORK_PATH", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
    worker_python = os.environ.get("GRU4REC_TF_PYTHON") or None
    homepage = "https://github.com/paxcema/KerasGRU4Rec"
    description = "KerasGRU4Rec (paxcema) @5f52c60, upstream as it is (Keras 2 API via tf-keras)"
    study: ClassVar[Mapping[str, str] | None] = None
    reproducibility = {
        "installs": "no, not as pinned: requirements.txt pins tensorflow 2.11.1 + keras 2.4.3 + numpy 1.22 "
        "(no Python 3.11 wheels for that set); on TensorFlow 2.21 (Keras 3) compile fails "
        "(Argument(s) not recognized: {'lr'}); runs on tf-keras 2.21 with the legacy-optimizer shim",
        "offline": "yes",
        "pinned": "yes: requirements.txt (tensorflow 2.11.1, keras 2.4.3, numpy 1.22.0, pandas 1.0.5)",
        "hyperparameters": "hard-coded: 100 GRU units, dropout 0.25, Adam lr 0.001 (KG-1); only epochs and "
        "batch size settable (--batch-size has type str on the CLI, KG-6)",
    }

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device=device)
        self.fork, self.optim, self.mask_fix, self.free = LEVELS[self.level]
        self._key = "keras_gru4rec_fork" if self.fork else "keras_gru4rec"
        self.model: Any = None  # the Keras model create_model builds (TensorFlow is untyped here)
        self._mod = None
        self._trace_on = False
        self._loss_fns: dict[tuple[int, int], Any] = {}

    def version(self) -> str:
        return located_version(self._key) + (f" level={self.level}" if self.fork else "")

    def capabilities(self) -> dict[str, Any]:
        locate(self._key)
        tf, tf_keras = _keras2_environment(upstream=not self.fork)
        hp: dict[str, Any] = {"loss": "cross-entropy", "embedding": 0, "final_act": "softmax", "batch_size": 512,
                              "n_epochs": 10}  # fmt: skip
        if self.free:  # the fork's flags; upstream hard-codes them in create_model (KG-1)
            hp.update(layers=[100], dropout_p_hidden=0.25, learning_rate=0.001, optimizer=self.optim)
        shims = [
            "Keras 2 API: TF_USE_LEGACY_KERAS=1 with tf-keras "
            + tf_keras.__version__
            + (
                " and `import keras` resolved to tf_keras (requirements.txt pins keras 2.4.3, a redirect to tf.keras)"
                if not self.fork
                else ""
            ),
            "tf.keras.optimizers.Adam/Adagrad resolved to tf.keras.optimizers.legacy.Adam/Adagrad while the model "
            "is compiled (the Keras <= 2.10 optimizers of the study's TF 2.9 env; Keras >= 2.11 rejects decay=)",
            "args namespace built for create_model/train_model/get_metrics (train_data/test_data DataFrames)",
            "train_model run unchanged except its closing get_metrics call on a test set, skipped during fit "
            "(get_metrics replaced by a no-op for the call)",
            "FitReport: losses and steps from wrapping model.train_on_batch; epochs delimited by the "
            "SessionDataLoader's iterations",
            "score_prefixes: prefixes run lane-parallel through model.predict after gru.reset_states(), padded "
            "to the model's fixed batch shape; the unused extra output column (index n_items) dropped",
            "score_stream/evaluate: get_metrics run unchanged; scores captured by wrapping model.predict, lane "
            "session ids/positions read from the SessionDataLoader generator's locals; an evaluation batch "
            "size != the training batch size runs on a twin model built by create_model with that batch "
            "shape and the trained weights copied",
            "seed: random, np.random and tf.random.set_seed",
            "get_weights/set_weights: the Keras variables of the GRU and output layers under layer/variable names "
            "(GRU/kernel (n_items, 3d), GRU/recurrent_kernel (d, 3d), the GRU's (2, 3d) bias split into the 1-D "
            "GRU/bias_input and GRU/bias_recurrent (reset_after=True), output/kernel (d, n_items), output/bias); "
            "Keras gate blocks [update, reset, candidate]; item rows/columns in item_ids() order, the unused extra "
            "index n_items (KG-8) left out and untouched",
            "train_step: the body of train_model's loop (GRU states written with reset_states, one-hot input and "
            "target by to_categorical with the model's n_items + 1 classes, model.train_on_batch) on the model fit "
            "built; its batch must be the model's fixed batch size",
            "loss_on_scores: the output layer's activation (softmax) and the model's compiled loss "
            "(categorical_crossentropy, mean over rows) in a tf.function as train_on_batch runs them, on the given "
            "columns as the catalogue (the model has no sampling: every item is a column)",
            "train_forward: the model's layers called in training mode (a Keras sub-model over the GRU, dropout "
            "and output tensors) from a zero GRU state, the GRU state restored afterwards; seed: tf.random.set_seed; "
            "scores = the full post-activation output over the n_items columns; the loss gradient of the output "
            "kernel by tf.GradientTape (nothing updated)",
            "trace: lanes' session ids and input positions read from the SessionDataLoader generator's locals, "
            "the GRU state entering each step read before train_on_batch (after train_model's mask reset), "
            "learning rate from the optimizer's _decayed_lr; no sampled negatives (full softmax)",
        ]
        return {
            "losses": ["cross-entropy"],
            "embedding_modes": ["none"],
            **Capabilities.flags("session_parallel", "dropout_hidden", "full_ranking", "fixed_batch_shape"),
            "final_acts": ["softmax"],
            "devices": ["cpu"],
            "framework": {"name": "tensorflow", "version": tf.__version__},
            "shims": shims,
            "score_semantics": "post-activation",
            "eval_tie_mode": "standard",
            "gate_layout": ["update", "reset", "candidate"],
            "hyperparameters": hp,
        }

    # -- helpers ---------------------------------------------------------------------------------------
    def _module(self):
        if self._mod is not None:
            return self._mod
        root = locate(self._key)
        _keras2_environment(upstream=not self.fork)
        name = f"_gru4rec_conformance_{self._key}"
        spec = importlib.util.spec_from_file_location(name, root / "model" / "gru4rec.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        self._mod = mod
        return mod

    def _create(self, batch_size: int):
        mod = self._module()
        tf = mod.tf
        a = types.SimpleNamespace(**vars(self.args))
        a.batch_size = int(batch_size)
        with (
            patched(tf.keras.optimizers, "Adam", tf.keras.optimizers.legacy.Adam),
            patched(tf.keras.optimizers, "Adagrad", tf.keras.optimizers.legacy.Adagrad),
        ):
            return mod.create_model(a)

    # -- required ----------------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)  # undeclared names (hard-coded ones) raise Unsupported
        hp.setdefault("layers", [100])
        hp.setdefault("dropout_p_hidden", 0.25)
        hp.setdefault("learning_rate", 0.001)
        hp.setdefault("optimizer", self.optim)
        if hp["loss"] != "cross-entropy":
            raise Unsupported(f"loss:{hp['loss']}")
        if hp["final_act"] != "softmax":
            raise Unsupported(f"final_act:{hp['final_act']}")
        if hp["embedding"]:
            raise Unsupported("embedding:separate", "one-hot input only")
        if hp["optimizer"] != self.optim:
            raise Unsupported(f"optimizer:{hp['optimizer']}", f"this level uses --optim {self.optim}")
        layers = layers_list(hp["layers"])
        if len(layers) != 1:
            raise Unsupported("layers:stacked", "one GRU layer only")
        self.seed = int(seed)
        self.hp = hp
        self.args = types.SimpleNamespace(
            batch_size=int(hp["batch_size"]), epochs=int(hp["n_epochs"]), hidden_size=layers[0],
            dropout_p_hidden=float(hp["dropout_p_hidden"]), lr=float(hp["learning_rate"]), optim=self.optim,
            use_correct_mask_reset=self.mask_fix, save_weights=False, eval_all_epochs=False, save_path="",
        )  # fmt: skip
        self.model = None

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        mod = self._module()
        tf = mod.tf
        df = check_session_frame(train_df)
        seed_everything(self.seed, torch_too=False)
        tf.random.set_seed(self.seed)
        a = self.args
        a.train_data = df.copy()
        a.train_n_items = len(df["ItemId"].unique()) + 1
        a.train_samples_qty = len(df["SessionId"].unique()) + 1
        if n_epochs is not None:
            a.epochs = int(n_epochs)
        self.model = model = self._create(a.batch_size)
        self.train_map: Any = None  # the checkout's SessionDataset.itemmap (a DataFrame: ItemId, item_idx)
        report = FitReport(trace=[] if self._trace_on else None)
        epoch: dict[str, Any] = {"t0": None, "losses": [], "events": 0}
        lanes: dict[str, Any] = {}

        def close():
            if epoch["t0"] is None:
                return
            report.epoch_losses.append(float(np.mean(epoch["losses"])) if epoch["losses"] else float("nan"))
            report.n_steps.append(len(epoch["losses"]))
            report.n_events_trained.append(epoch["events"])
            report.epoch_seconds.append(time.perf_counter() - epoch["t0"])
            epoch.update(losses=[], events=0)

        adapter = self
        inner_loader = mod.SessionDataLoader

        # the base is the checkout's SessionDataLoader, a class only known at run time
        class SpyLoader(inner_loader):  # type: ignore[valid-type, misc]
            def __iter__(self):
                close()
                epoch["t0"] = time.perf_counter()
                adapter.train_map = self.dataset.itemmap
                d = self.dataset

                def seen(loc, item):
                    epoch["events"] += int(len(item[0]))
                    if adapter._trace_on:  # the input events' rows, as get_metrics' targets are start + i + 1
                        rows = np.asarray(loc["start"]) + int(loc["i"])
                        first = d.click_offsets[d.session_idx_arr[np.asarray(loc["iters"])]]
                        lanes.update(sessions=d.df["SessionId"].to_numpy()[rows], positions=rows - first)

                return spy_generator(super().__iter__(), seen)

        inner_tob = model.train_on_batch
        gru = model.get_layer(name="GRU")

        def tob(x, y, *args, **kw):
            if report.trace is not None:  # the state entering the step: after train_model's mask reset
                h = gru.states[0].numpy().astype(np.float64)
                report.trace.append(StepTrace(
                    session_ids=np.asarray(lanes["sessions"], dtype=np.int64),
                    positions=np.asarray(lanes["positions"], dtype=np.int64),
                    h_in_norms=np.linalg.norm(h, axis=1), n_active=int(h.shape[0]), negative_ids=None,
                    learning_rate=adapter._learning_rate(model)))  # fmt: skip
            loss = inner_tob(x, y, *args, **kw)
            epoch["losses"].append(float(np.asarray(loss).reshape(-1)[0]))
            return loss

        with (
            patched(mod, "SessionDataLoader", SpyLoader),
            patched(model, "train_on_batch", tob),
            patched(mod, "get_metrics", lambda *x, **k: ((float("nan"), 0), (float("nan"), 0))),
        ):
            mod.train_model(model, a)
        close()
        if self.train_map is None:  # zero epochs ran: the map train_model would have built
            self.train_map = mod.SessionDataset(df.copy()).itemmap
        return report

    def item_ids(self) -> np.ndarray:
        if self.train_map is None:
            raise RuntimeError("keras_gru4rec: call fit() first")
        return self.train_map.sort_values("item_idx")["ItemId"].to_numpy().astype(np.int64)

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("keras_gru4rec: call fit() first")
        self._module()  # the checkout's module must be importable here, as in fit()
        model = self.model
        im = self.train_map
        index = dict(zip(im["ItemId"].tolist(), im["item_idx"].tolist()))
        n_items = len(index)
        seqs = [[index[int(i)] for i in p if int(i) in index] for p in prefixes]
        out = np.zeros((len(seqs), n_items), dtype=np.float32)
        B = self.args.batch_size
        gru = model.get_layer(name="GRU")
        n_out = self.args.train_n_items
        saved = [s.numpy() for s in gru.states]
        todo = list(range(len(seqs)))
        for c in range(0, len(todo), B):
            chunk = todo[c : c + B]
            gru.reset_states()
            longest = max([len(seqs[k]) for k in chunk] + [1])
            for t in range(longest):
                inp = np.zeros((B, 1, n_out), dtype=np.float32)
                for lane, k in enumerate(chunk):
                    if t < len(seqs[k]):
                        inp[lane, 0, seqs[k][t]] = 1.0
                pred = model.predict(inp, batch_size=B, verbose=0)
                for lane, k in enumerate(chunk):
                    if t == max(len(seqs[k]) - 1, 0):
                        if seqs[k]:
                            out[k] = pred[lane, :n_items]
            for _lane, k in enumerate(chunk):  # empty prefixes: the output of the zero state
                if not seqs[k]:
                    h0 = np.zeros((1, self.args.hidden_size), dtype=np.float32)
                    dense = model.layers[-1]
                    out[k] = np.asarray(dense(h0))[0, :n_items]
        gru.reset_states(states=saved[0])
        return out

    # -- black-box+ ----------------------------------------------------------------------------------------
    def _run_eval(self, test_df, batch_size: int, k: int, keep_rows: bool):
        mod = self._module()
        df = check_session_frame(test_df, "test_df")
        B = int(batch_size)
        model = self.model
        if B != self.args.batch_size:
            twin = self._create(B)
            twin.set_weights(model.get_weights())
            model = twin
        a = types.SimpleNamespace(**vars(self.args))
        a.batch_size = B
        a.test_data = df.copy()
        labels: list[tuple] = []
        rows: list[tuple] = []
        item_ids = self.item_ids()
        inner_loader = mod.SessionDataLoader

        # the base is the checkout's SessionDataLoader, a class only known at run time
        class SpyLoader(inner_loader):  # type: ignore[valid-type, misc]
            def __iter__(self):
                d = self.dataset

                def seen(loc, item):
                    tgt = np.asarray(loc["start"]) + int(loc["i"]) + 1
                    first = d.click_offsets[d.session_idx_arr[np.asarray(loc["iters"])]]
                    labels.append((d.df["SessionId"].to_numpy()[tgt], tgt - first, d.df["item_idx"].to_numpy()[tgt]))

                return spy_generator(super().__iter__(), seen)

        inner_predict = model.predict

        def predict(x, *args, **kw):
            kw.setdefault("verbose", 0)
            pred = inner_predict(x, *args, **kw)
            if keep_rows:
                sess, pos, tgt = labels[-1]
                for j in range(len(sess)):
                    rows.append((int(sess[j]), int(pos[j]), int(item_ids[tgt[j]]),
                                 np.asarray(pred[j, : len(item_ids)], dtype=np.float32)))  # fmt: skip
            return pred

        with patched(mod, "SessionDataLoader", SpyLoader), patched(model, "predict", predict):
            (rec, _), (mrr, _) = mod.get_metrics(model, a, self.train_map, recall_k=k, mrr_k=k)
        return float(rec), float(mrr), int(sum(len(s) for s, _, _ in labels)), rows

    def optimizer_info(self) -> dict:
        if self.model is None:
            raise RuntimeError("keras_gru4rec: call fit() first")
        opt = self.model.optimizer
        cfg = opt.get_config()
        return {"type": type(opt).__name__.lower(), "learning_rate": float(cfg.get("learning_rate", float("nan"))),
                "lr_schedule": "constant" if not cfg.get("decay") else f"decay {cfg.get('decay')}",
                "initial_accumulator": cfg.get("initial_accumulator_value"), "eps": cfg.get("epsilon"),
                "momentum": 0.0, "grad_clip": cfg.get("clipnorm") or cfg.get("clipvalue")}  # fmt: skip

    # -- white-box ---------------------------------------------------------------------------------------------
    def trace(self, enable: bool = True) -> None:
        """Record one :class:`StepTrace` per ``train_on_batch`` of the following ``fit`` calls: every lane's
        session id and input position (B lanes, all active: the loader keeps the fixed batch full), the L2 norm of
        the GRU state entering the step, no negatives (``None``: full softmax) and the optimizer's learning rate."""
        self._trace_on = bool(enable)

    @staticmethod
    def _learning_rate(model: Any) -> float:
        """The legacy optimizer's current learning rate (``_decayed_lr``; the code passes decay 0)."""
        import tensorflow as tf

        return float(model.optimizer._decayed_lr(tf.float32).numpy())

    def _require_model(self) -> Any:
        if self.model is None:
            raise RuntimeError("keras_gru4rec: call fit() first (n_epochs=0 initialises without training)")
        self._module()  # the checkout's module (and the Keras 2 environment) as in fit()
        return self.model

    def _variables(self) -> dict[str, tuple[Any, Any]]:
        """Exposed name → (Keras variable, index into it: the item rows/columns and, for the bias, its row)."""
        model = self._require_model()
        gru, out = model.get_layer(name="GRU"), model.layers[-1]
        n = len(self.item_ids())
        kernel, recurrent, bias = gru.cell.kernel, gru.cell.recurrent_kernel, gru.cell.bias
        return {
            "GRU/kernel": (kernel, np.s_[:n]),
            "GRU/recurrent_kernel": (recurrent, np.s_[:]),
            "GRU/bias_input": (bias, np.s_[0]),
            "GRU/bias_recurrent": (bias, np.s_[1]),
            "output/kernel": (out.kernel, np.s_[:, :n]),
            "output/bias": (out.bias, np.s_[:n]),
        }

    def get_weights(self) -> dict:
        """The trained Keras variables as float32 arrays: ``GRU/kernel`` (n_items, 3·d) (the one-hot input's rows),
        ``GRU/recurrent_kernel`` (d, 3·d), ``GRU/bias_input`` and ``GRU/bias_recurrent`` (3·d,) (the two rows of the
        GRU's reset_after bias), ``output/kernel`` (d, n_items) and ``output/bias`` (n_items,); gate blocks
        [update, reset, candidate] (Keras's order); item axes in :meth:`item_ids` order, without the extra index
        n_items that the model's one-hot input and softmax carry but no item uses (KG-8)."""
        return {k: np.array(v.numpy()[ix], copy=True) for k, (v, ix) in self._variables().items()}

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Write arrays (all or a subset, layout of :meth:`get_weights`) into the Keras variables in place (the
        optimizer keeps its slots; the extra index n_items is untouched). Raises ValueError for an unknown name or
        another shape."""
        named = self._variables()
        unknown = sorted(set(weights) - set(named))
        if unknown:
            raise ValueError(f"set_weights: unknown parameter name(s) {unknown}; known: {sorted(named)}")
        for name, value in weights.items():
            var, ix = named[name]
            full = var.numpy()
            a = np.asarray(value, dtype=full.dtype)
            if a.shape != full[ix].shape:
                raise ValueError(f"set_weights: {name} has shape {a.shape}, expected {full[ix].shape}")
            full[ix] = a
            var.assign(full)

    def _indices(self, ids: Any, what: str) -> np.ndarray:
        """Item ids → the checkout's item_idx; ValueError for an id unknown to training."""
        im = self.train_map
        index = dict(zip(im["ItemId"].tolist(), im["item_idx"].tolist()))
        ids = np.asarray(ids).ravel()
        bad = [int(i) for i in ids if int(i) not in index]
        if bad:
            raise ValueError(f"{what}: item id(s) unknown to the trained model: {bad[:5]}")
        return np.asarray([index[int(i)] for i in ids], dtype=np.int64)

    def _lanes(self, ids: Any, what: str) -> np.ndarray:
        idx = self._indices(ids, what)
        if len(idx) != self.args.batch_size:
            raise ValueError(
                f"{what}: {len(idx)} lanes, but the stateful GRU has the fixed batch shape {self.args.batch_size} "
                "(create_model's Input(batch_shape=...)); build with batch_size={len(idx)}"
            )
        return idx

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One update as the body of ``train_model``'s loop: the GRU state set with ``reset_states`` (``hidden``:
        (B, d) array, or a one-element list of it; None = zeros), input and target one-hot by ``to_categorical``
        with the model's n_items + 1 classes, ``model.train_on_batch``. Returns its loss (the mean categorical
        cross-entropy of the full softmax). The batch must be the built ``batch_size`` (fixed batch shape)."""
        model = self._require_model()
        mod = self._module()
        x = self._lanes(batch_inputs, "batch_inputs")
        t = self._indices(batch_targets, "batch_targets")
        if len(t) != len(x):
            raise ValueError(f"batch_targets: expected {len(x)} item(s), got {len(t)}")
        gru = model.get_layer(name="GRU")
        if hidden is None:
            h = np.zeros((len(x), gru.units), dtype=np.float32)
        else:
            h = np.asarray(hidden[0] if isinstance(hidden, (list, tuple)) else hidden, dtype=np.float32)
            h = h.reshape(len(x), gru.units)
        gru.reset_states(states=h)
        n_cls = self.args.train_n_items
        input_oh = np.expand_dims(mod.to_categorical(x, num_classes=n_cls), axis=1)
        target_oh = mod.to_categorical(t, num_classes=n_cls)
        loss = model.train_on_batch(input_oh, target_oh)
        return float(np.asarray(loss).reshape(-1)[0])

    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        """The model's training loss on a given score matrix: the output layer's softmax and the compiled
        ``categorical_crossentropy`` (reduced to the mean over rows) with row j's target in column j, run in a
        ``tf.function`` as ``train_on_batch`` runs it (Keras then takes the cross-entropy from the softmax's logits).
        The columns stand for the catalogue: the model scores every item, so no column is sampled. Returns
        (value, d value / d scores) as float32."""
        if loss != "cross-entropy":
            raise Unsupported(f"loss:{loss}")
        act = hparams.pop("final_act", None)
        if act not in (None, "softmax"):
            raise Unsupported(f"final_act:{act}")
        if hparams:
            raise Unsupported(sorted(hparams)[0], "not a parameter of the model's loss")
        R = np.asarray(scores, dtype=np.float32)
        if R.ndim != 2 or R.shape[1] < R.shape[0]:
            raise ValueError(f"scores: expected a (b, b + S) matrix, got shape {R.shape}")
        fn = self._loss_fn(*R.shape)
        value, grad = fn(R)
        return float(value.numpy()), np.asarray(grad.numpy(), dtype=np.float32)

    def _loss_fn(self, b: int, k: int):
        """A tf.function over a (b, k) score matrix with the activation and compiled loss of a model create_model
        builds (batch b, k - 1 items + the extra class: k outputs), cached per shape."""
        if (b, k) not in self._loss_fns:
            if getattr(self, "args", None) is None:
                raise RuntimeError("keras_gru4rec: call build() first")
            tf = self._module().tf
            saved = self.args
            self.args = types.SimpleNamespace(**{**vars(saved), "train_n_items": k})
            try:
                holder = self._create(b)
            finally:
                self.args = saved
            target = tf.constant(np.eye(b, k, dtype=np.float32))
            act, compiled_loss = holder.layers[-1].activation, holder.compiled_loss

            @tf.function
            def fn(R):
                with tf.GradientTape() as tape:
                    tape.watch(R)
                    value = compiled_loss(target, act(R), regularization_losses=holder.losses)
                return value, tape.gradient(value, R)

            self._loss_fns[(b, k)] = fn
        return self._loss_fns[(b, k)]

    def train_forward(self, prefix_batch: Any, seed: int) -> dict:
        """The model's training-mode forward of B equally long item sequences from a zero GRU state (the prefix
        steps through the stateful GRU, then the last transition through a Keras sub-model returning the GRU
        output, the dropout output and the softmax), nothing updated and the GRU state restored afterwards.

        Returns ``embedding_out`` None (one-hot input, no embedding), ``layer_outputs`` [(B, d)] after the dropout,
        ``scores`` (B, n_items) the post-activation output over every item (``columns`` = :meth:`item_ids`: the
        model samples nothing), ``score_tensor_shape`` the output's (B, n_items + 1) and ``output_rows_touched``
        the output-kernel columns (items, the extra class included) with a non-zero gradient of the step's loss.
        ``seed`` is passed to ``tf.random.set_seed`` before the call."""
        import tensorflow as tf

        model = self._require_model()
        mod = self._module()
        seqs = [self._indices(s, "prefix_batch") for s in prefix_batch]
        if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2:
            raise ValueError("prefix_batch: expected b >= 1 item sequences of one common length >= 2")
        arr = np.stack(seqs)
        self._lanes(self.item_ids()[arr[:, 0]], "prefix_batch")
        n_cls = self.args.train_n_items
        gru, drop, out = model.get_layer(name="GRU"), model.layers[-2], model.layers[-1]
        sub = tf.keras.Model(model.inputs, [gru.output[0], drop.output, model.output])
        saved = gru.states[0].numpy()
        try:
            gru.reset_states(states=np.zeros_like(saved))
            for k in range(arr.shape[1] - 2):
                sub(np.expand_dims(mod.to_categorical(arr[:, k], num_classes=n_cls), 1), training=True)
            x = np.expand_dims(mod.to_categorical(arr[:, -2], num_classes=n_cls), 1)
            y = tf.constant(mod.to_categorical(arr[:, -1], num_classes=n_cls))
            tf.random.set_seed(int(seed))
            with tf.GradientTape() as tape:
                _, dropped, pred = sub(x, training=True)
                value = model.compiled_loss(y, pred, regularization_losses=model.losses)
            g = tape.gradient(value, out.kernel).numpy()
        finally:
            gru.reset_states(states=saved)
        n = len(self.item_ids())
        return {
            "embedding_out": None,
            "layer_outputs": [dropped.numpy()],
            "scores": pred.numpy()[:, :n],
            "columns": self.item_ids(),
            "score_tensor_shape": tuple(int(v) for v in pred.shape),
            "output_rows_touched": int((np.abs(g).sum(axis=0) > 0).sum()),
        }


class KerasGRU4RecOOB(KerasGRU4RecAdapter):
    """czappi44/KerasGRU4Rec @bf4b7c8 at OOB: --optim adam (hidden 100, dropout 0.25, lr 0.001)."""

    name = "keras_gru4rec:oob"
    level = "oob"
    homepage = "https://github.com/czappi44/KerasGRU4Rec"
    description = "czappi44/KerasGRU4Rec @bf4b7c8 (the study's fork), OOB: --optim adam"
    study = {"implementation": "KerasGRU4Rec", "variant": "OOB"}
    reproducibility = dict(KerasGRU4RecAdapter.reproducibility,
                           installs="no, not as pinned (its requirements.txt is upstream's); runs on tf-keras 2.21 "
                                    "with the legacy-optimizer shim",
                           hyperparameters="hidden size, dropout, lr (Adagrad only; Adam keeps lr 0.001), "
                                           "optimizer, batch size, epochs settable")  # fmt: skip


class KerasGRU4RecMinorFix(KerasGRU4RecOOB):
    """czappi44/KerasGRU4Rec at the minor fix: --optim adagrad with free hidden size, dropout and lr."""

    name = "keras_gru4rec:minor_fix"
    level = "minor_fix"
    description = "czappi44/KerasGRU4Rec @bf4b7c8 (the study's fork), minor fix: --optim adagrad"
    study = {"implementation": "KerasGRU4Rec", "variant": "Correct exp"}


class KerasGRU4RecMajorFix(KerasGRU4RecOOB):
    """czappi44/KerasGRU4Rec at the major fix: --optim adagrad --use_correct_mask_reset."""

    name = "keras_gru4rec:major_fix"
    level = "major_fix"
    description = (
        "czappi44/KerasGRU4Rec @bf4b7c8 (the study's fork), major fix: --optim adagrad --use_correct_mask_reset"
    )
    study = {"implementation": "KerasGRU4Rec", "variant": "Correct full"}


for _cls in (KerasGRU4RecAdapter, KerasGRU4RecOOB, KerasGRU4RecMinorFix, KerasGRU4RecMajorFix):
    register(_cls)
