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

from gru4rec_conformance.implementations._checkout import CHECKOUTS, locate
from gru4rec_conformance.implementations._thirdparty import (
    check_session_frame,
    layers_list,
    patched,
    seed_everything,
    spy_generator,
)
from gru4rec_conformance.implementations.base import Adapter, FitReport, Unsupported
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


class KerasGRU4RecAdapter(Adapter):
    """KerasGRU4Rec upstream (paxcema) @5f52c60; subclasses give the fork's levels."""

    name = "keras_gru4rec"
    level = "upstream"
    role = "implementation"
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

    def version(self) -> str:
        locate(self._key)
        c = CHECKOUTS[self._key]
        return f"{c.repo}@{c.short}" + (f" level={self.level}" if self.fork else "")

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
        ]
        return {
            "losses": ["cross-entropy"],
            "embedding_modes": ["none"],
            "session_parallel": True,
            "in_batch_negatives": False,
            "extra_shared_negatives": False,
            "sample_alpha": False,
            "logq": False,
            "adagrad_momentum": False,
            "dropout_embed": False,
            "dropout_hidden": True,
            "separate_dropouts": False,
            "final_acts": ["softmax"],
            "bpreg": False,
            "full_ranking": True,
            "needs_categories": False,
            "fixed_batch_shape": True,
            "devices": ["cpu"],
            "framework": {"name": "tensorflow", "version": tf.__version__},
            "shims": shims,
            "score_semantics": "post-activation",
            "eval_tie_mode": "standard",
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
        report = FitReport()
        epoch: dict[str, Any] = {"t0": None, "losses": [], "events": 0}

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

                def seen(loc, item):
                    epoch["events"] += int(len(item[0]))

                return spy_generator(super().__iter__(), seen)

        inner_tob = model.train_on_batch

        def tob(x, y, *args, **kw):
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
    def _get_metrics(self, test_df, batch_size: int, k: int, keep_rows: bool):
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

    def score_stream(self, test_df: Any, batch_size: int):
        if self.model is None:
            raise RuntimeError("keras_gru4rec: call fit() first")
        _, _, _, rows = self._get_metrics(test_df, batch_size, k=min(20, len(self.item_ids())), keep_rows=True)
        return iter(rows)

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict:
        if self.model is None:
            raise RuntimeError("keras_gru4rec: call fit() first")
        out: dict[str, Any] = {}
        for c in cutoffs:  # one get_metrics per cutoff, as the fork's __main__ does
            rec, mrr, n, _ = self._get_metrics(test_df, batch_size, k=int(c), keep_rows=False)
            out[f"recall@{c}"], out[f"mrr@{c}"], out["n_events"] = rec, mrr, n
        return out

    def optimizer_info(self) -> dict:
        if self.model is None:
            raise RuntimeError("keras_gru4rec: call fit() first")
        opt = self.model.optimizer
        cfg = opt.get_config()
        return {"type": type(opt).__name__.lower(), "learning_rate": float(cfg.get("learning_rate", float("nan"))),
                "lr_schedule": "constant" if not cfg.get("decay") else f"decay {cfg.get('decay')}",
                "initial_accumulator": cfg.get("initial_accumulator_value"), "eps": cfg.get("epsilon"),
                "momentum": 0.0, "grad_clip": cfg.get("clipnorm") or cfg.get("clipvalue")}  # fmt: skip


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
