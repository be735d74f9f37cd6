"""Microsoft Recommenders' "GRU4Rec" (docs/implementations.md, 'Code bases from GitHub'): ``GRU4RecModel`` of
recommenders 1.1.1, driven in a Python 3.9 worker (``tox -e ms_recommenders_py39,ms_recommenders``), a negative
control (the study leaves it out as a different algorithm).

Why recommenders 1.1.1 in Python 3.9 (checked with pip against PyPI on Python 3.11, and by importing in the tox
environments):

- the ``GRU4RecModel`` the study examined (``recommenders/models/deeprec/models/sequential/gru4rec.py``) exists up to
  recommenders 1.1.1, whose metadata requires Python < 3.10 (1.0.0: < 3.9); pip on 3.11 offers only 1.2.0
  and 1.2.1;
- 1.2.0 / 1.2.1 renamed it ``GRUModel`` (``.../sequential/gru.py``, the same TF1-compat model) and pin
  ``tensorflow<2.16``; ``gru.py`` imports ``keras.layers.legacy_rnn.rnn_cell_impl``, which keras ships only up to
  2.8 (TensorFlow 2.8, no Python 3.11 wheel), so it cannot import on Python 3.11 under any TensorFlow the package
  allows. Making it import would take an aliasing shim over TensorFlow's private tree: a port, not a translation.

What the model is (recommenders 1.1.1, read from its source): ``SequentialBaseModel`` with ``_build_seq_graph`` =
one ``GRUCell(hidden_size)`` run by ``dynamic_rnn`` over the concatenated item and *category* embeddings of the
history (up to ``max_seq_length`` last items, padded on the right and masked); the score of one (history, candidate)
pair is an MLP (``layer_sizes``, ``activation``, ``dropout``) over ``[final GRU state, candidate item embedding,
candidate category embedding]`` followed by a sigmoid (``method="classification"``). Training reads tab-separated
text lines (label, user, item, category, time, item history, category history, time history) through its
``SequentialIterator``, which shuffles the lines with Python's ``random`` and gives every positive line
``train_num_ngs`` negatives drawn from the *other lines of its mini-batch* (never the positive's own item; a batch of
fewer than 5 lines is dropped); the loss is a softmax over each group of 1 + ``train_num_ngs`` candidates, Adam by
default. ``predict(infile, outfile)`` writes one score per input line: it scores only the candidates it is given.

So the scores cannot be factorised into (state) x (output weights): there is no output matrix and no full-catalogue
ranking. The adapter declares that (``full_ranking`` absent: EV-5 fails as "not GRU4Rec-conformant"), and still
drives the model by translation only:

- ``fit`` writes the session frame in recommenders' text format: one training line per event with a non-empty
  history (the session's earlier items, the last ``max_seq_length`` kept by the iterator), label 1, the sessions in
  (SessionId, Time) order; the vocabularies are pickled dicts in its own layout (index 0 = its "default" entry);
- ``train_num_ngs`` stays at recommenders' default 4 (``negatives_per_example``); GRU4Rec's ``n_sample`` (extra
  negatives shared by the mini-batch) is not declared, since the model has no shared negatives (a mapping onto its
  per-example negatives would also make every training example 1 + n_sample GRU passes: with the metric checks'
  n_sample 2048, thousands of times the cost);
- every item gets one constant category (the suite has no categories; declared shim), and every line one constant
  user (the GRU4RecModel graph never reads the user embedding);
- ``fit`` requires a validation file with groups of 1 + ``valid_num_ngs`` lines, evaluated after every epoch (group
  AUC, for early stopping): the adapter writes one group (the first training line and one other item) and disables
  early stopping (``EARLY_STOP=0``) and checkpoints (``save_model=False``), so the validation cannot change what is
  trained (declared shim);
- ``score_prefixes`` enumerates the whole catalogue as the candidate list: one text line per (prefix, item) pair
  through ``predict`` (P x I GRU forwards; the model's own cost of scoring the catalogue). An empty prefix cannot be
  written (its parser reads the last history time stamp), so it is written as a one-item history of an item outside
  the vocabulary, which the parser maps to the default entry 0 (declared shim; not the zero state);
- ``get_weights`` reads the TensorFlow variables of the session ``fit`` built; ``FitReport`` is observed by wrapping
  the instance's ``train`` method (one call per optimizer step).

Declared absent (``HOOKS_ABSENT``): ``score_stream`` (no session inference loop: a history is re-encoded from
scratch for every candidate line), ``evaluate`` (its ``run_eval`` computes AUC/MRR/NDCG/hit over each group of
1 + N given candidates: sampled-group metrics, not next-item recall/MRR over the catalogue) and ``loss_on_scores``
(the softmax loss is built into the graph on its own logits reshaped to groups of 1 + ``train_num_ngs``; nothing
takes a score matrix). Not written yet (expressible through its session): ``set_weights``, ``train_step``,
``train_forward``, ``trace``, ``optimizer_info``.

The third-party package is imported only inside methods, in the worker (``isolated = True``); its own prints go to
the worker's stdout.
"""

from __future__ import annotations

import os
import pickle
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from gru4rec_conformance.implementations.base import (
    Adapter,
    Capabilities,
    FitReport,
    ImplementationUnavailable,
    Unsupported,
    installed_version,
)
from gru4rec_conformance.implementations.registry import register

#: GRU4RecModel (recommenders <= 1.1.1) and GRUModel (recommenders >= 1.2, renamed).
_GRU_MODULES = ("recommenders.models.deeprec.models.sequential.gru4rec",
                "recommenders.models.deeprec.models.sequential.gru")  # fmt: skip
_PROVIDE = ("run it with `tox -e ms_recommenders_py39,ms_recommenders` (a Python 3.9 worker with "
            "recommenders==1.1.1, tensorflow-cpu==2.7.4)")  # fmt: skip
_CATE = "c"  # the one category every item gets
_USER = "u"  # the one user every line gets
_UNKNOWN_ITEM = "unknown"  # not in the item vocabulary: the parser maps it to the default entry 0
_GROUP_NEG = 4  # train_num_ngs, recommenders' default: 1 + 4 candidates per training group


def _installed_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("recommenders")
    except importlib.metadata.PackageNotFoundError:
        return None


def _import_error() -> str | None:
    """The error of importing recommenders' GRU4RecModel here (None when it imports)."""
    import importlib

    try:
        importlib.import_module(_GRU_MODULES[0])
    except Exception as exc:  # ModuleNotFoundError expected on 3.11; any import failure is the verdict
        first = f"{type(exc).__name__}: {exc}"
    else:
        return None
    try:
        importlib.import_module(_GRU_MODULES[1])
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return first


def why_unavailable() -> str | None:
    """One line: why Microsoft Recommenders' GRU4RecModel cannot run in this environment (None when it can)."""
    import sys

    version = _installed_version()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    if version is None:
        return f"recommenders is not installed in this environment: {_PROVIDE}"
    err = _import_error()
    if err is not None:
        return (
            f"recommenders {version} cannot run on Python {py}: importing GRU4RecModel / GRUModel (its 1.2 name) "
            f"fails with {err} — keras.layers.legacy_rnn ships only with keras<=2.8 (TensorFlow<=2.8, no "
            f"Python 3.11 wheels), and the GRU4RecModel of recommenders<=1.1.1 requires Python<3.10: {_PROVIDE}"
        )
    if not version.startswith("1.1."):
        return f"recommenders {version} is installed, the adapter drives GRU4RecModel of 1.1.1: {_PROVIDE}"
    return None


def _require() -> None:
    why = why_unavailable()
    if why is not None:
        raise ImplementationUnavailable(why)


@register
class MsRecommendersAdapter(Adapter):
    """Microsoft Recommenders 1.1.1 ``GRU4RecModel``, driven through its text files (see the module docstring)."""

    name = "ms_recommenders"
    isolated = True
    description = "Microsoft Recommenders 1.1.1 GRU4RecModel (TensorFlow 1-compat, Python 3.9; negative control)"
    homepage = "https://pypi.org/project/recommenders/1.1.1/"
    study = None
    HOOKS_ABSENT = {
        "score_stream": "recommenders has no session inference loop: GRU4RecModel re-encodes a history from scratch "
        "for every candidate line it is given (predict), so per-event scores would be the adapter's own loop",
        "evaluate": "recommenders' run_eval computes AUC/MRR/NDCG/hit within each group of 1 + N given candidates "
        "(sampled-group metrics); it has no next-item recall/MRR over the catalogue",
        "loss_on_scores": "the softmax loss is built into the TensorFlow graph on the model's own logits reshaped to "
        "groups of 1 + train_num_ngs; nothing takes a score matrix",
    }
    reproducibility = {
        "installs": "pip resolves recommenders==1.2.1 + tensorflow-cpu==2.15.1 on Python 3.11, but GRUModel does "
        "not import (keras.layers.legacy_rnn needs keras<=2.8); recommenders 1.1.1 (Python<3.10) with "
        "tensorflow-cpu 2.7.4 on Python 3.9 imports and runs GRU4RecModel (installed --no-deps: its full "
        "requirement list builds lightfm, scikit-surprise and cornac<2 from source)",
        "offline": "yes in the Python 3.9 worker (no download at run time)",
        "pinned": "tox envs 'ms_recommenders_py39' + 'ms_recommenders': recommenders==1.1.1, tensorflow-cpu==2.7.4, "
        "keras==2.7.0, numpy==1.21.6, pandas==1.3.5 in a Python 3.9 worker; the package pins tensorflow~=2.7.0, "
        "pandas<2",
        "hyperparameters": "HParams from prepare_hparams (YAML or keywords): hidden_size, embedding widths, MLP "
        "layer_sizes, learning rate, batch size, epochs, train_num_ngs settable; seed argument of the model "
        "(TensorFlow and numpy); the iterator's shuffling and negatives use Python's global random",
    }

    def __init__(self, device: str = "cpu", **options: Any) -> None:
        super().__init__(device=device, **options)
        self.hparams: dict[str, Any] = {}
        self.seed = 0
        self.model: Any = None  # recommenders' GRU4RecModel (untyped)
        self._item_ids: Any = None
        self._tmp: str | None = None
        self._n_pred = 0

    def version(self) -> str:
        return _installed_version() or "not installed"

    def capabilities(self) -> dict[str, Any]:
        _require()
        return {
            "losses": ["cross-entropy"],
            "embedding_modes": ["shared"],
            **Capabilities.flags("needs_categories", "per_example_negatives"),
            "negatives_per_example": _GROUP_NEG,
            "devices": ["cpu"],
            "framework": {"name": "tensorflow", "version": installed_version("tensorflow-cpu")},
            "score_semantics": "post-activation",
            "gate_layout": ("reset", "update", "candidate"),
            "shims": [
                "fit writes recommenders' tab-separated text format: one line per event with a non-empty history "
                "(label 1, the session's earlier items as history), sessions in (SessionId, Time) order, time "
                "stamps = the frame's Time; vocabularies pickled in its layout (index 0 = its default entry)",
                "one constant category for every item and one constant user for every line (the suite has no "
                "categories; GRU4RecModel never reads the user embedding)",
                "validation file: one group (the first training line and one other item, valid_num_ngs=1), "
                "EARLY_STOP=0 and save_model=False, so the per-epoch validation cannot change the trained model",
                "Python's random seeded with the build seed before fit (the iterator shuffles and samples with it); "
                "the model's own seed argument = the build seed",
                "train_num_ngs fixed at recommenders' default 4 (per-example negatives from the other lines of the "
                "mini-batch); GRU4Rec's n_sample (extra negatives shared by the mini-batch) is not declared: the "
                "model has no shared negatives",
                "score_prefixes: the whole catalogue enumerated as the candidate list, one text line per (prefix, "
                "item) pair through predict(); unknown prefix items dropped; an empty prefix is written as a "
                "one-item history of an out-of-vocabulary item (default entry 0): the text format cannot carry an "
                "empty history",
                "FitReport observed by wrapping the instance method train (one call per optimizer step; its "
                "data_loss, the mean over the step's groups)",
                "get_weights: item embedding rows 1..I in item_ids() order (the default row 0 left out); the GRU "
                "cell's gates/kernel (reset, update) and candidate/kernel concatenated on the output axis, input and "
                "recurrent rows stacked as the cell keeps them",
            ],
            "hyperparameters": {
                "layers": [40],
                "constrained_embedding": True,
                "loss": "cross-entropy",
                "learning_rate": 0.001,
                "batch_size": 400,
                "n_epochs": 10,
                "optimizer": "adam",
            },
        }

    def build(self, seed: int, **hparams: Any) -> None:
        _require()
        hp = self.resolve_hparams(hparams)
        if hp["loss"] != "cross-entropy":
            raise Unsupported(
                f"loss:{hp['loss']}", "GRU4RecModel trains with a softmax over 1 + train_num_ngs candidates"
            )
        if not hp["constrained_embedding"]:
            raise Unsupported(
                "constrained_embedding:False", "one item table embeds the history and the scored candidate"
            )
        layers = list(hp["layers"])
        if len(layers) != 1:
            raise Unsupported(f"layers:{layers}", "GRU4RecModel has one GRUCell (hidden_size)")
        if hp["optimizer"] not in ("adam", "adagrad", "sgd", "rmsprop", "adadelta", "ftrl", "gd", "padagrad", "pgd"):
            raise Unsupported(f"optimizer:{hp['optimizer']}", "not one of recommenders' optimizer names")
        if self.device != "cpu":
            raise Unsupported(f"device:{self.device}", "the worker runs tensorflow-cpu")
        self.close()
        self.hparams = hp
        self.seed = int(seed)
        self.model = None
        self._item_ids = None

    # -- text files ------------------------------------------------------------------------------------
    def _dir(self) -> str:
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="msrec-")
        return self._tmp

    @staticmethod
    def _line(label: int, item: str, t: float, history: Sequence[str], times: Sequence[float]) -> str:
        return "\t".join(
            [
                str(label), _USER, item, _CATE, repr(float(t)),
                ",".join(history), ",".join(_CATE for _ in history), ",".join(repr(float(x)) for x in times),
            ]
        )  # fmt: skip

    def _hparams(self, n_epochs: int) -> Any:
        from recommenders.models.deeprec.deeprec_utils import prepare_hparams

        d = self._dir()
        hp = self.hparams
        return prepare_hparams(
            None,
            model_type="GRU4Rec",
            method="classification",
            loss="softmax",
            user_vocab=os.path.join(d, "user_vocab.pkl"),
            item_vocab=os.path.join(d, "item_vocab.pkl"),
            cate_vocab=os.path.join(d, "cate_vocab.pkl"),
            item_embedding_dim=32,
            cate_embedding_dim=8,
            user_embedding_dim=16,
            hidden_size=int(hp["layers"][0]),
            max_seq_length=50,
            layer_sizes=[100, 64],
            activation=["relu", "relu"],
            dropout=[0.0, 0.0],
            learning_rate=float(hp["learning_rate"]),
            optimizer=str(hp["optimizer"]),
            epochs=int(n_epochs),
            batch_size=int(hp["batch_size"]),
            train_num_ngs=_GROUP_NEG,
            need_sample=True,
            EARLY_STOP=0,
            save_model=False,
            write_tfevents=False,
            show_step=10**9,
            metrics=["auc"],
            pairwise_metrics=["group_auc"],
        )

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        import numpy as np
        from recommenders.models.deeprec.io.sequential_iterator import SequentialIterator
        from recommenders.models.deeprec.models.sequential.gru4rec import GRU4RecModel

        if not self.hparams:
            raise RuntimeError("MsRecommendersAdapter.fit: call build() first")
        epochs = int(self.hparams["n_epochs"] if n_epochs is None else n_epochs)
        d = self._dir()
        df = train_df.sort_values(["SessionId", "Time"], kind="stable")
        self._item_ids = np.unique(df["ItemId"].to_numpy(dtype=np.int64))
        items = [str(int(i)) for i in self._item_ids]
        with open(os.path.join(d, "item_vocab.pkl"), "wb") as fb:
            pickle.dump({"default_mid": 0, **{s: k + 1 for k, s in enumerate(items)}}, fb)
        with open(os.path.join(d, "cate_vocab.pkl"), "wb") as fb:
            pickle.dump({"default_cat": 0, _CATE: 1}, fb)
        with open(os.path.join(d, "user_vocab.pkl"), "wb") as fb:
            pickle.dump({"default_uid": 0, _USER: 1}, fb)
        lines = []
        sids = df["SessionId"].to_numpy()
        iids = df["ItemId"].to_numpy(dtype=np.int64)
        times = df["Time"].to_numpy(dtype=np.float64)
        start = 0
        for end in [int(e) for e in np.flatnonzero(sids[1:] != sids[:-1]) + 1] + [len(sids)]:
            s_items = [str(int(i)) for i in iids[start:end]]
            s_times = times[start:end]
            for j in range(1, len(s_items)):
                lines.append(self._line(1, s_items[j], s_times[j], s_items[:j], s_times[:j]))
            start = end
        train_file = os.path.join(d, "train.txt")
        with open(train_file, "w") as f:
            f.write("\n".join(lines) + ("\n" if lines else ""))
        valid_file = os.path.join(d, "valid.txt")
        first = lines[0].split("\t") if lines else None
        with open(valid_file, "w") as f:
            if first is not None:
                other = next((s for s in items if s != first[2]), first[2])
                f.write("\t".join(first) + "\n" + "\t".join(["0", first[1], other] + first[3:]) + "\n")
        random.seed(self.seed)
        self.model = GRU4RecModel(self._hparams(epochs), SequentialIterator, seed=self.seed)
        model = self.model
        group = _GROUP_NEG + 1
        per_epoch: dict[int, list[float]] = {}
        steps: dict[int, int] = {}
        events: dict[int, int] = {}
        clock: dict[int, float] = {}
        own_train = model.train

        def train(sess: Any, feed_dict: Any) -> Any:
            epoch = int(model.hparams.current_epoch)
            clock.setdefault(epoch, time.perf_counter())
            n = int(np.asarray(feed_dict[model.iterator.labels]).shape[0]) // group
            out = own_train(sess, feed_dict)
            per_epoch.setdefault(epoch, []).append(float(out[3]) * n)
            steps[epoch] = steps.get(epoch, 0) + 1
            events[epoch] = events.get(epoch, 0) + n
            return out

        model.train = train
        try:
            model.fit(train_file, valid_file, valid_num_ngs=1, eval_metric="group_auc")
        finally:
            del model.train
        report = FitReport()
        for epoch in range(1, epochs + 1):
            n = events.get(epoch, 0)
            report.epoch_losses.append(sum(per_epoch.get(epoch, [])) / n if n else float("nan"))
            report.n_steps.append(steps.get(epoch, 0))
            report.n_events_trained.append(n)
            report.epoch_seconds.append(time.perf_counter() - clock[epoch] if epoch in clock else 0.0)
        return report

    def item_ids(self) -> Any:
        if self._item_ids is None:
            raise RuntimeError("MsRecommendersAdapter.item_ids: call fit() first")
        return self._item_ids.copy()

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> Any:
        import numpy as np

        if self.model is None:
            raise RuntimeError("MsRecommendersAdapter.score_prefixes: call fit() first")
        known = set(self._item_ids.tolist())
        items = [str(int(i)) for i in self._item_ids]
        if not len(prefixes):
            return np.zeros((0, len(items)), dtype=np.float64)
        d = self._dir()
        self._n_pred += 1
        infile = os.path.join(d, f"score-{self._n_pred}.txt")
        outfile = os.path.join(d, f"score-{self._n_pred}.out")
        with open(infile, "w") as f:
            for prefix in prefixes:
                hist = [str(int(i)) for i in prefix if int(i) in known] or [_UNKNOWN_ITEM]
                times = [0.0] * len(hist)
                for item in items:
                    f.write(self._line(0, item, 0.0, hist, times) + "\n")
        try:
            self.model.predict(infile, outfile)
            scores = np.loadtxt(outfile, dtype=np.float64, ndmin=1)
        finally:
            self.model.iterator.iter_data.pop(infile, None)
            for path in (infile, outfile):
                if os.path.exists(path):
                    os.remove(path)
        return scores.reshape(len(prefixes), len(items))

    def get_weights(self) -> dict[str, Any]:
        """The trained TensorFlow variables under their names (``:0`` dropped), with the item embedding's rows in
        :meth:`item_ids` order (the default row 0 left out) and the GRU cell's kernels and biases concatenated
        (``.../gru/gru_cell/kernel`` (in + h, 3h) and ``.../bias`` (3h,): reset, update, candidate)."""
        import numpy as np

        if self.model is None:
            raise RuntimeError("MsRecommendersAdapter.get_weights: call fit() first")
        with self.model.graph.as_default():
            import tensorflow as tf

            variables = tf.compat.v1.trainable_variables()
            values = self.model.sess.run(variables)
        out: dict[str, Any] = {}
        cell: dict[str, Any] = {}
        for var, value in zip(variables, values):
            name = var.name.split(":")[0]
            if name.endswith("/gates/kernel") or name.endswith("/gates/bias"):
                cell.setdefault(name.rsplit("/", 2)[0], {})["gates_" + name.rsplit("/", 1)[1]] = value
            elif name.endswith("/candidate/kernel") or name.endswith("/candidate/bias"):
                cell.setdefault(name.rsplit("/", 2)[0], {})["candidate_" + name.rsplit("/", 1)[1]] = value
            elif name.endswith("item_embedding"):
                out[name] = np.asarray(value)[1:]
            else:
                out[name] = np.asarray(value)
        for prefix, parts in cell.items():
            out[f"{prefix}/kernel"] = np.concatenate([parts["gates_kernel"], parts["candidate_kernel"]], axis=1)
            out[f"{prefix}/bias"] = np.concatenate([parts["gates_bias"], parts["candidate_bias"]], axis=0)
        return out

    def close(self) -> None:
        if self.model is not None:
            try:
                self.model.sess.close()
            except Exception:  # noqa: BLE001 (closing must not raise at teardown)
                pass
            self.model = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
