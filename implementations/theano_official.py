"""Adapter of the official GRU4Rec, the Theano original (hidasib/GRU4Rec @a4ed5fb, the newest commit on master).

Registered name: ``theano_official``. The reference follows this code where the PyTorch port has quirks
(docs/algorithm.md); the "GRU4Rec Official" row of the study's expected outcomes (docs/study.md, 'Expected
outcome per check') is its expected outcome.

Backend: Theano 1.0.5, the last Theano release, which needs Python <= 3.9 (``collections`` ABCs removed in 3.10)
and NumPy < 1.22 / SciPy < 1.8. The suite's harness runs on Python >= 3.10, so the worker runs in a separate
Python 3.9 interpreter named by ``GRU4REC_WORKER_PYTHON`` (``tox -e theano_official_py39,theano_official`` builds
it; the worker side of the suite imports on 3.9). No Theano fork or module alias is used: the code runs on the
Theano it was written for, on the CPU (``THEANO_FLAGS=device=cpu,floatX=float32``; the repository's
``.theanorc_gru4rec`` asks for ``cuda0`` and libgpuarray, which the flags override).

Driven through its Python API as ``run.py`` does: ``GRU4Rec(**params)``, ``fit(data)``, and
``evaluation.evaluate_gpu`` with the conservative tie mode the study used. The code is located by
``implementations._checkout`` (env ``GRU4REC_THEANO_PATH`` or the cache folder).

Every optional hook reaches into the original's own objects (translation only, shims declared in
``capabilities()``): ``get_weights``/``set_weights`` read and write its Theano shared variables; ``train_step`` calls
the train function ``fit`` compiled (kept by wrapping ``gru4rec.function``) with fit's sample store;
``train_forward`` compiles one training-mode step of ``GRU4Rec.model`` (dropout on, nothing updated); ``trace``
reads ``fit``'s loop variables at each train-function call; ``score_stream`` runs ``evaluation.evaluate_gpu`` with
the scores added to the outputs of the function it compiles; ``loss_on_scores`` compiles the original's loss
functions on given scores.

Cost: Theano compiles every graph with g++ (a few minutes on a busy CPU before the first step; the steps
themselves are fast). The adapter declares ``compile_cache``: its workers share one writable folder
(``implementations.base.compile_cache_dir``, ``~/.cache/gru4rec-conformance/compiled/theano_official``), used as
Theano's ``base_compiledir``, so only the first worker compiles each graph. Run it with a generous
``--call-timeout`` all the same (the first one compiles).
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import redirect_stdout
from typing import Any

import numpy as np

from gru4rec_conformance.implementations._checkout import import_path, locate, located_version
from gru4rec_conformance.implementations._thirdparty import check_session_frame, layers_list, patched, seed_everything
from gru4rec_conformance.implementations.base import (
    Adapter,
    Capabilities,
    FitReport,
    ImplementationUnavailable,
    StepTrace,
    Unsupported,
)
from gru4rec_conformance.implementations.registry import register

_MODULES = ("gru4rec", "evaluation", "gpu_ops", "custom_opt", "custom_theano_ops", "datatools")
_FLAGS = "device=cpu,floatX=float32"
_EPOCH = re.compile(r"Epoch(\d+) --> loss: ([-+0-9.eE]+|nan) \t\(([0-9.]+)s\) \t\[([0-9.]+) mb/s \| ([0-9.]+) e/s\]")
_LOSSES = ("cross-entropy", "bpr-max", "bpr", "top1", "top1-max")
#: gru4rec.py's Wx{i}/Bh{i} hold their column blocks as [candidate | reset | update] (``vec[:, :d]`` is the candidate
#: input, ``vec[:, d:]`` the reset/update input); exposed in ``gate_layout`` order (reset, update, candidate).
_TO_LAYOUT = (1, 2, 0)
_FROM_LAYOUT = (2, 0, 1)
_PROVIDE = (
    "run it with `tox -e theano_official_py39,theano_official` (a Python 3.9 worker with Theano==1.0.5, "
    "numpy==1.21.6, scipy==1.7.3, pandas==1.3.5; GRU4REC_WORKER_PYTHON names its interpreter)"
)


def _theano() -> Any:
    """Import Theano on the CPU, or raise :class:`ImplementationUnavailable` with one line saying why."""
    flags = os.environ.get("THEANO_FLAGS", "")
    if "device=" not in flags:
        flags = f"{flags},{_FLAGS}".strip(",")
    cache = os.environ.get("GRU4REC_COMPILE_CACHE")  # the suite's writable compile cache (compile_cache = True)
    if cache and "base_compiledir=" not in flags and "," not in cache:
        flags = f"{flags},base_compiledir={cache}/theano"
    os.environ["THEANO_FLAGS"] = flags
    try:
        import theano
    except Exception as exc:  # ModuleNotFoundError here; on Python >= 3.10 Theano 1.0.5 fails on collections ABCs
        import sys

        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        raise ImplementationUnavailable(
            f"Theano cannot be imported on Python {py} ({type(exc).__name__}: {exc}): {_PROVIDE}"
        ) from exc
    return theano


def _permute_blocks(a: np.ndarray, order: Sequence[int], axis: int) -> np.ndarray:
    blocks = np.split(a, 3, axis=axis)
    return np.concatenate([blocks[i] for i in order], axis=axis)


def _translate_final_act(loss: str, final_act: Any, elu_param: Any) -> str:
    """The protocol's final_act/elu_param as a gru4rec.py final_act string (the rule of build() for the loss hook):
    None -> softmax for cross-entropy, else ELU(elu_param) with elu_param 0 meaning linear (the port's rule);
    elu -> elu-<elu_param>; leaky -> leaky-0.01; Theano names pass. Unsupported for an unknown name."""
    alpha = 0.5 if elu_param is None else float(elu_param)
    if final_act is None:
        if loss == "cross-entropy":
            return "softmax"
        return f"elu-{alpha}" if alpha > 0 else "linear"
    fa = str(final_act)
    if fa == "elu":
        return f"elu-{alpha}" if alpha > 0 else "linear"
    if fa == "leaky":
        return "leaky-0.01"
    # selu-X-Y exists in gru4rec.py but is not declared (final_act:selu): refused like any undeclared value
    if fa in ("softmax", "linear", "relu", "tanh", "softmax_logit") or fa.startswith(("elu-", "leaky-")):
        return fa
    raise Unsupported(f"final_act:{fa}")


class _EpochLog(io.StringIO):
    """Captured stdout of fit() that counts the epoch lines written so far (``epochs``)."""

    epochs = 0

    def write(self, text: str) -> int:
        if "-->" in text:
            self.epochs += 1
        return super().write(text)


class TheanoOfficialAdapter(Adapter):
    """hidasib/GRU4Rec @a4ed5fb (Theano), driven like run.py, on the CPU."""

    name = "theano_official"
    isolated = True
    checkouts = ("gru4rec_theano",)
    worker_env = ("GRU4REC_THEANO_PATH", "THEANO_FLAGS")
    compile_cache = True  # Theano's compiled C modules, shared by this implementation's workers
    homepage = "https://github.com/hidasib/GRU4Rec"
    description = "Official GRU4Rec, the Theano original (hidasib) @a4ed5fb, Theano 1.0.5 on the CPU"
    study = None  # the study's official rows, through gru4rec_conformance.datasets.study.ROW_ALIASES
    reproducibility = {
        "installs": "Theano 1.0.5 (the last release) installs on Python 3.7-3.9 with numpy<1.22 and scipy<1.8; "
        "not on Python >= 3.10; the GPU path needs libgpuarray/pygpu (not installed: CPU only)",
        "offline": "yes",
        "pinned": "no requirements file (README: Theano 1.0.5, numpy, pandas; .theanorc_gru4rec)",
        "hyperparameters": "all official hyperparameters settable (GRU4Rec(...) / set_params / run.py -ps)",
    }

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device=device)
        self.gru: Any = None  # the original's gru4rec.GRU4Rec (untyped third-party code)
        self._zero_scores: np.ndarray | None = None
        # predict_next_batch resets a lane only when its session id changes, and keeps its state between calls:
        # every lane of every score_prefixes call gets an id never used before.
        self._next_session = 0
        self._train_fn: Any = None  # the train function fit() compiled (raw, unwrapped)
        self._store: Any = None  # (ST, STI, generate_samples): fit()'s sample store, kept past its `del self.ST`
        self._trace_on = False
        self._loss_fns: dict[tuple, Any] = {}
        self._forward: Any = None  # (rng, compiled step, embedded) of train_forward, per fitted model

    def _mods(self) -> tuple[Any, Any]:
        _theano()
        root = locate("gru4rec_theano")
        import_path(root, _MODULES)
        import evaluation
        import gpu_ops
        import gru4rec
        import theano.tensor as T

        if not getattr(gru4rec, "_conformance_cpu", False):
            # The loss functions call gpu_ops.gpu_diag, a custom GPU kernel (no CPU code). Its own fallback
            # (disable_custom_op=True) switches between two diagonals of different shapes and fails for a
            # non-square score matrix, so the diagonal is Theano's ExtractDiag (the same values); the sample
            # store's gpu_searchsorted uses the module's own CPU fallback (a scan over a binary search).
            def cpu_diag(X: Any, keepdims: bool = False) -> Any:
                d = T.ExtractDiag()(X)
                return d.dimshuffle(0, "x") if keepdims else d

            def cpu_searchsorted(P: Any, X: Any, dtype_int64: bool = True) -> Any:
                return gpu_ops.gpu_searchsorted(P, X, dtype_int64=dtype_int64, disable_custom_op=True)

            gru4rec.gpu_diag = cpu_diag
            gru4rec.gpu_searchsorted = cpu_searchsorted
            gru4rec._conformance_cpu = True
        return gru4rec, evaluation

    def version(self) -> str:
        return located_version("gru4rec_theano")

    def capabilities(self) -> dict[str, Any]:
        locate("gru4rec_theano")
        theano = _theano()
        flags = Capabilities.flags(*Capabilities.OFFICIAL_FLAGS)
        return {
            "losses": ["cross-entropy", "bpr-max", "bpr", "top1", "top1-max"],
            "embedding_modes": ["none", "separate", "shared"],
            **flags,
            "final_acts": ["softmax", "elu", "linear", "relu", "tanh", "leaky", "softmax_logit"],
            "devices": ["cpu"],
            "framework": {"name": "theano", "version": str(theano.__version__)},
            "shims": [
                "CPU execution: THEANO_FLAGS=device=cpu,floatX=float32 (the repository's theanorc asks for cuda0), "
                "base_compiledir in the suite's compile cache for this implementation (compiled modules kept "
                "between workers); "
                "gpu_diag (a custom GPU kernel) replaced by Theano's ExtractDiag, gpu_searchsorted by the module's "
                "own CPU fallback (disable_custom_op=True)",
                "Python 3.9 worker (GRU4REC_WORKER_PYTHON): Theano 1.0.5 does not import on Python >= 3.10",
                "FitReport: per-epoch loss and seconds read from the epoch lines fit() prints (its own per-example "
                "average of the step costs); steps and lanes counted by wrapping the train function fit() compiles "
                "(gru4rec.function), epochs delimited by those printed lines",
                "score_prefixes: prefixes run lane-parallel through predict_next_batch (a session id never used "
                "before, in this call or an earlier one, resets each lane's state); an empty prefix is scored from the zero state (final_act(By))",
                "evaluate: evaluation.evaluate_gpu run unchanged (mode='conservative'); n_events counted from the "
                "test events after the first of each session whose item is known",
                "final_act translated: None -> softmax for cross-entropy, elu-<elu_param> otherwise "
                "(elu_param default 0.5, 0 meaning linear as in the port); elu -> elu-<elu_param>; leaky -> leaky-0.01",
                "seed: np.random.seed (the original uses NumPy's global generator; init reseeds it with 42)",
                "stdout of fit/evaluation captured (the original prints progress)",
                "get_weights/set_weights: the Theano shared variables (get_value/set_value) under gru4rec.py's names "
                "(E, Wx{i}, Wrz{i}, Wh{i}, Bh{i}, Wy, By), layer 0 of the no-embedding mode under the reference's "
                "names of that same cell (GE.Wx0, GE.Wrz0, GE.Wh0, GE.Bh0); By as 1-D; the column blocks of Wx/Bh "
                "reordered from [candidate | reset | update] to gate_layout (reset, update, candidate)",
                "loss_on_scores: a graph of gru4rec.py's own loss_function(final_activation(scores), M) / M "
                "(M = rows; a GRU4Rec(loss, final_act, n_sample = columns - rows) holds them, bpreg fed as a "
                "symbolic scalar), gradient by T.grad, float32; logq: scores - logq*log(column_q) before the "
                "activation (model() applies the correction there, not in the loss); final_act translated as in "
                "build (elu_param 0 means linear, the port's rule; elu-0 would be a ReLU)",
                "train_step: the train function fit() compiled, kept by wrapping gru4rec.function, called as fit's "
                "loop does (inputs, targets, M = b, no reset) with H set to the given or zero states and restored "
                "afterwards; its sample store (ST/STI and the refill function, seen by wrapping theano.function "
                "during fit) kept past fit's `del self.ST`, refilled when used up as fit does",
                "trace: lanes read from fit()'s locals at each train-function call (data, start + i, "
                "session_idx_arr[iters], offset_sessions), states entering the step from the shared H, negatives "
                "from the store row ST[STI] the graph reads, learning rate from gru.learning_rate",
                "score_stream: evaluation.evaluate_gpu run unchanged (mode='conservative'); its compiled function "
                "also returns the scores (symbolic_predict's yhat, captured by wrapping symbolic_predict and "
                "theano.function), lane session ids/positions/targets read from evaluate_gpu's locals",
                "train_forward: one step of GRU4Rec.model(X, H, M, R=0, Y, dropout_p_hidden, dropout_p_embed) "
                "compiled once per fitted model, run over the prefix from zero states; fit's sample store set back "
                "on the model while the graph is built (model() appends ST[STI] to Y); embedding output captured "
                "by wrapping GRU4Rec.dropout, layer outputs = the new states; output rows touched from T.grad of "
                "fit's step cost w.r.t. Wy; dropout masks from an MRG_RandomStreams of the adapter's standing in for "
                "the module's mrng during the build, reseeded with seed % (2**30 - 1) + 1 per call (MRG refuses 0)",
            ],
            "score_semantics": "post-activation",
            "eval_tie_mode": "conservative",
            "gate_layout": ["reset", "update", "candidate"],
            "hyperparameters": {
                "layers": [100], "loss": "cross-entropy", "batch_size": 32, "dropout_p_embed": 0.0,
                "dropout_p_hidden": 0.0, "learning_rate": 0.1, "momentum": 0.0, "sample_alpha": 0.75,
                "n_sample": 2048, "embedding": 0, "constrained_embedding": False, "n_epochs": 10, "bpreg": 1.0,
                "elu_param": 0.5, "logq": 0.0, "final_act": None,
            },
        }  # fmt: skip

    # -- required ----------------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        g, _ = self._mods()
        loss = str(hp.pop("loss"))
        if loss not in ("cross-entropy", "bpr-max", "bpr", "top1", "top1-max"):
            raise Unsupported(f"loss:{loss}")
        # the same rule as the loss hook's: elu_param 0 means linear (the port's rule, which the reference follows);
        # `elu_param or 0.5` had built ELU(0.5) for the study's BPR-max configurations (elu_param 0)
        fa = _translate_final_act(loss, hp.pop("final_act"), hp.pop("elu_param"))
        hp["layers"] = layers_list(hp["layers"])
        self.seed = int(seed)
        seed_everything(self.seed, torch_too=False)
        with redirect_stdout(io.StringIO()):
            self.gru = g.GRU4Rec(loss=loss, final_act=fa, **hp)
        self._zero_scores = None
        self._train_fn = None
        self._store = None
        self._forward = None

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        g, _ = self._mods()
        theano = _theano()
        df = check_session_frame(train_df)
        gru = self.gru
        if n_epochs is not None:
            gru.n_epochs = int(n_epochs)
        seed_everything(self.seed, torch_too=False)
        out = _EpochLog()
        steps: list[int] = []
        lanes: list[int] = []
        records: list[StepTrace] = []
        compile_fn = g.function
        theano_function = theano.function
        adapter = self
        tracing = self._trace_on
        generators: list[Any] = []

        def seen_theano_function(*a: Any, **k: Any) -> Any:  # fit() compiles its sample store's refill with it
            fn = theano_function(*a, **k)
            if hasattr(gru, "ST") and any(v is gru.ST for v in (k.get("updates") or {})):
                generators.append(fn)
            return fn

        def counting_function(*a: Any, **k: Any) -> Any:  # fit() compiles its train function with this name
            fn = compile_fn(*a, **k)
            adapter._train_fn = fn
            if hasattr(gru, "ST"):  # fit() deletes ST/STI when it returns; the compiled graphs keep using them
                adapter._store = (gru.ST, gru.STI, generators[-1] if generators else None)

            def step(*args: Any) -> Any:
                while len(steps) <= out.epochs:
                    steps.append(0)
                    lanes.append(0)
                if tracing:
                    records.append(adapter._step_record(sys._getframe(1).f_locals, args, out.epochs, steps[out.epochs]))
                steps[out.epochs] += 1
                lanes[out.epochs] += int(args[2])  # M: the number of active lanes of this step
                return fn(*args)

            return step

        with redirect_stdout(out), patched(g, "function", counting_function):
            with patched(theano, "function", seen_theano_function):
                gru.fit(df)
        text = out.getvalue()
        if getattr(gru, "error_during_train", False):
            raise FloatingPointError(f"the original stopped training on a NaN loss: {text[-300:]}")
        report = FitReport()
        for e, m in enumerate(_EPOCH.finditer(text)):
            report.epoch_losses.append(float(m.group(2)))
            report.epoch_seconds.append(float(m.group(3)))
            report.n_steps.append(steps[e] if e < len(steps) else 0)
            report.n_events_trained.append(lanes[e] if e < len(lanes) else 0)
        if tracing:
            report.trace = records
        self._zero_scores = None
        self._forward = None
        return report

    def item_ids(self) -> np.ndarray:
        return np.asarray(self.gru.itemidmap.index.values).astype(np.int64)

    def _zero_state_scores(self) -> np.ndarray:
        """final_act(0 · Wy + By): the scores of the zero hidden state (an empty prefix)."""
        if self._zero_scores is None:
            theano = _theano()
            import theano.tensor as T

            gru = self.gru
            y = T.dot(T.zeros((1, gru.layers[-1]), dtype=theano.config.floatX), gru.Wy.T) + gru.By.flatten()
            y = gru.softmax(y) if gru.final_act == "softmax_logit" else gru.final_activation(y)
            self._zero_scores = np.asarray(theano.function([], y)(), dtype=np.float32)[0]
        return self._zero_scores

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        gru = self.gru
        known = set(np.asarray(gru.itemidmap.index.values).tolist())
        seqs = [[int(i) for i in p if int(i) in known] for p in prefixes]
        n_items = len(known)
        out = np.zeros((len(seqs), n_items), dtype=np.float32)
        for k, s in enumerate(seqs):
            if not s:
                out[k] = self._zero_state_scores()
        todo = [k for k, s in enumerate(seqs) if s]
        filler = int(gru.itemidmap.index.values[0])
        batch = min(512, max(len(todo), 1))
        with redirect_stdout(io.StringIO()):
            for c in range(0, len(todo), batch):
                chunk = todo[c : c + batch]
                lanes = np.arange(self._next_session, self._next_session + batch)  # every lane starts from zeros
                self._next_session += batch
                for t in range(max(len(seqs[k]) for k in chunk)):
                    items = np.full(batch, filler, dtype=np.int64)
                    for lane, k in enumerate(chunk):
                        if t < len(seqs[k]):
                            items[lane] = seqs[k][t]
                    preds = gru.predict_next_batch(lanes, items, batch=batch)
                    scores = np.asarray(preds.values, dtype=np.float32).T
                    for lane, k in enumerate(chunk):
                        if t == len(seqs[k]) - 1:
                            out[k] = scores[lane]
        return out

    # -- black-box+ ----------------------------------------------------------------------------------------
    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict:
        _, ev = self._mods()
        df = check_session_frame(test_df, "test_df")
        known = df[df["ItemId"].isin(self.gru.itemidmap.index.values)]
        sizes = known.groupby("SessionId").size().to_numpy()
        cut = [int(c) for c in cutoffs]
        with redirect_stdout(io.StringIO()):
            recall, mrr = ev.evaluate_gpu(self.gru, df, cut_off=cut, batch_size=int(batch_size), mode="conservative")
        out: dict[str, Any] = {}
        for j, c in enumerate(cut):
            out[f"recall@{c}"] = float(recall[j])
            out[f"mrr@{c}"] = float(mrr[j])
        out["n_events"] = int(np.clip(sizes - 1, 0, None).sum())
        return out

    def optimizer_info(self) -> dict:
        gru = self.gru
        if gru is None:
            raise RuntimeError("theano_official: call build() first")
        # gru4rec.py adagrad: acc += g^2; step = lr * g / sqrt(acc + 1e-6); Nesterov momentum when momentum > 0
        return {"type": "adagrad", "learning_rate": float(gru.learning_rate), "lr_schedule": "constant",
                "initial_accumulator": 0.0, "eps": 1e-6, "momentum": float(gru.momentum),
                "grad_clip": float(gru.grad_cap) or None}  # fmt: skip

    # -- white-box -----------------------------------------------------------------------------------------
    def _fitted(self) -> Any:
        """The original's GRU4Rec after fit() (its weights exist from fit on); RuntimeError before."""
        if self.gru is None or not hasattr(self.gru, "Wy"):
            raise RuntimeError("theano_official: call fit() first (n_epochs=0 initialises without training)")
        return self.gru

    def _indices(self, ids: Any, what: str) -> np.ndarray:
        """Item ids -> the original's item indices (its itemidmap); ValueError for an id unknown to training."""
        imap = self._fitted().itemidmap
        ids = np.asarray(ids).ravel()
        # the Index's hash table is built once and kept by pandas: a lookup costs O(len(ids)), not O(n_items)
        # (np.isin over the catalogue made every train_step grow with it and SC-1 time the adapter, not the step)
        pos = imap.index.get_indexer(ids)
        if (pos < 0).any():
            raise ValueError(f"{what}: item id(s) unknown to the trained model: {ids[pos < 0][:5].tolist()}")
        return np.asarray(imap.values[pos], dtype=np.int64)

    def _shared(self) -> dict[str, Any]:
        """Protocol name -> the original's Theano shared variable. Layer 0 of the no-embedding mode is the
        reference's ``GE`` cell (the same Theano GRU), so it takes the reference's names; the other layers keep
        gru4rec.py's names (``Wx{i}``/``Wrz{i}``/``Wh{i}``/``Bh{i}``: not torch GRUCells, no reference name)."""
        gru = self._fitted()
        none_mode = not (gru.embedding or gru.constrained_embedding)
        out: dict[str, Any] = {}
        if gru.embedding and not gru.constrained_embedding:
            out["E"] = gru.E
        for i in range(len(gru.layers)):
            prefix = "GE." if none_mode and i == 0 else ""
            for part, var in (("Wx", gru.Wx[i]), ("Wrz", gru.Wrz[i]), ("Wh", gru.Wh[i]), ("Bh", gru.Bh[i])):
                out[f"{prefix}{part}{i}"] = var
        out["Wy"] = gru.Wy
        out["By"] = gru.By
        return out

    @staticmethod
    def _part(name: str) -> str:
        return name.rsplit(".", 1)[-1].rstrip("0123456789")

    def get_weights(self) -> dict:
        """Every weight of the original as float32 arrays: ``E`` (n_items, k) in the separate-embedding mode,
        per layer i ``Wx{i}`` (n_in, 3·d_i), ``Wrz{i}`` (d_i, 2·d_i) [reset | update], ``Wh{i}`` (d_i, d_i),
        ``Bh{i}`` (3·d_i,) (layer 0 of the no-embedding mode as ``GE.Wx0``/``GE.Wrz0``/``GE.Wh0``/``GE.Bh0``),
        ``Wy`` (n_items, d_last), ``By`` (n_items,); item rows in :meth:`item_ids` order, the 3-block columns of
        Wx/Bh in ``gate_layout`` order. RuntimeError before fit()."""
        out = {}
        for name, var in self._shared().items():
            a = np.array(var.get_value(borrow=False), dtype=np.float32)
            part = self._part(name)
            if part == "Wx":
                a = _permute_blocks(a, _TO_LAYOUT, axis=1)
            elif part == "Bh":
                a = _permute_blocks(a, _TO_LAYOUT, axis=0)
            elif part == "By":
                a = a.reshape(-1)
            out[name] = a
        return out

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load arrays (all or a subset) in the layout of :meth:`get_weights` into the original's shared
        variables (set_value; the Adagrad accumulators fit() created are kept).

        Raises:
            ValueError: an unknown name or a shape that differs from :meth:`get_weights`'s (nothing is written).
        """
        theano = _theano()
        shared = self._shared()
        unknown = sorted(set(weights) - set(shared))
        if unknown:
            raise ValueError(f"set_weights: unknown parameter name(s) {unknown}; known: {sorted(shared)}")
        new = {}
        for name, value in weights.items():
            a = np.asarray(value, dtype=theano.config.floatX)
            part = self._part(name)
            current = shared[name].get_value(borrow=True)
            want = (current.shape[0],) if part == "By" else current.shape
            if a.shape != tuple(want):
                raise ValueError(f"set_weights: {name} has shape {a.shape}, expected {tuple(want)}")
            if part == "Wx":
                a = _permute_blocks(a, _FROM_LAYOUT, axis=1)
            elif part == "Bh":
                a = _permute_blocks(a, _FROM_LAYOUT, axis=0)
            elif part == "By":
                a = a.reshape(-1, 1)
            new[name] = np.ascontiguousarray(a)
        for name, a in new.items():
            shared[name].set_value(a)
        self._zero_scores = None

    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        """gru4rec.py's loss function on the final activation of ``scores`` (B, B+S), divided by B (fit's step
        cost is Σ_lanes / batch_size), with ∂/∂scores by ``T.grad``, in float32 (floatX). ``logq`` (with
        ``column_q``, (B+S,)) subtracts logq·log q from the scores before the activation, as model() does.
        Returns ``(value, grad)``, grad float32 (B, B+S). Unsupported for an unknown keyword or loss."""
        g, _ = self._mods()
        theano = _theano()
        import theano.tensor as T

        unknown = set(hparams) - {"bpreg", "elu_param", "logq", "final_act", "column_q"}
        if unknown:
            raise Unsupported(sorted(unknown)[0], "not a parameter of the original's losses")
        if loss not in _LOSSES:
            raise Unsupported(f"loss:{loss}")
        R = np.asarray(scores, dtype=theano.config.floatX)
        if R.ndim != 2 or R.shape[1] < R.shape[0]:
            raise ValueError(f"scores: expected a (B, B+S) matrix, got shape {R.shape}")
        b, k = R.shape
        fa = _translate_final_act(loss, hparams.get("final_act"), hparams.get("elu_param"))
        logq = float(hparams.get("logq") or 0.0)
        q = np.ones(k, dtype=theano.config.floatX)
        if logq > 0:
            if "column_q" not in hparams:
                raise ValueError("loss_on_scores: logq needs column_q (the support of each column's item)")
            q = np.asarray(hparams["column_q"], dtype=theano.config.floatX).reshape(-1)
            if q.shape != (k,):
                raise ValueError(f"column_q: expected shape ({k},), got {q.shape}")
        key = (loss, fa, k - b, logq > 0)
        holder = g.GRU4Rec(loss=loss, final_act=fa, n_sample=k - b)  # n_sample: top1 divides by M + n_sample
        bpreg = float(hparams.get("bpreg", holder.bpreg))  # the original's own default when not given
        if key not in self._loss_fns:
            Rs, lq, qs = T.matrix("R"), T.scalar("logq"), T.vector("q")
            M = T.iscalar("M")
            holder.bpreg = T.scalar("bpreg")  # symbolic: one compiled graph for every bpreg
            y = Rs - lq * T.log(qs) if logq > 0 else Rs  # model()'s correction, before final_activation
            cost = holder.loss_function(holder.final_activation(y), M) / T.cast(M, theano.config.floatX)
            self._loss_fns[key] = theano.function(
                [Rs, M, holder.bpreg, lq, qs], [cost, T.grad(cost, Rs)], on_unused_input="ignore",
                allow_input_downcast=True,
            )  # fmt: skip
        value, grad = self._loss_fns[key](R, b, bpreg, logq, q)
        return float(value), np.asarray(grad)

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One call of the train function fit() compiled (the body of its loop): inputs, targets, M = b, no
        reset; the graph appends its sample store's next row (refilled first when used up, as fit does) and
        updates the weights and Adagrad accumulators. ``hidden``: per-layer (b, d_l) arrays (default zeros); the
        original's H is restored afterwards. Returns the step cost (Σ_lanes loss / batch_size)."""
        theano = _theano()
        gru = self._fitted()
        if self._train_fn is None:
            raise RuntimeError("theano_official: train_step needs the train function fit() compiles; call fit()")
        x = self._indices(batch_inputs, "batch_inputs")
        t = self._indices(batch_targets, "batch_targets")
        if len(x) != len(t):
            raise ValueError(f"batch_targets: expected {len(x)} item(s), got {len(t)}")
        b = len(x)
        fx = theano.config.floatX
        states = [np.zeros((b, d), dtype=fx) for d in gru.layers] if hidden is None else list(hidden)
        saved = [h.get_value(borrow=False) for h in gru.H]
        for h, v in zip(gru.H, states):
            h.set_value(np.array(v, dtype=fx).reshape(b, -1))
        self._refill_store()
        try:
            cost = self._train_fn(x, t, b, np.zeros((b, 1), dtype=np.int8))
        finally:
            for h, v in zip(gru.H, saved):  # predict_next_batch's compiled function reads the same H
                h.set_value(v)
        self._zero_scores = None
        return float(cost)

    def _refill_store(self) -> None:
        """fit()'s rule before each step: refill the sample store when its pointer has used every row."""
        if self._store is None:
            return
        st, sti, generate = self._store
        if generate is not None and int(sti.get_value()) >= st.get_value(borrow=True).shape[0]:
            generate()

    def trace(self, enable: bool = True) -> None:
        """Record one :class:`StepTrace` per call of fit()'s train function in the following ``fit`` calls: the
        active lanes' session ids and input positions, the L2 norm of all layers' states entering the step, the
        step's shared negatives (the store row the graph reads), the learning rate, epoch and step index."""
        self._trace_on = bool(enable)

    def _step_record(self, loc: Mapping[str, Any], args: Sequence[Any], epoch: int, step: int) -> StepTrace:
        """A StepTrace from fit()'s locals at a train-function call (``data`` sorted by session and time,
        ``start + i`` the lanes' input events, ``session_idx_arr[iters]`` their sessions) and the shared
        variables the graph reads (H, ST[STI])."""
        gru = self.gru
        event = np.asarray(loc["start"]) + int(loc["i"])
        sessions = np.asarray(loc["session_idx_arr"])[np.asarray(loc["iters"])]
        state = np.concatenate([np.asarray(h.get_value(borrow=True), dtype=np.float64) for h in gru.H], axis=1)
        negatives = np.zeros(0, dtype=np.int64)
        if gru.n_sample and hasattr(gru, "ST"):
            row = np.asarray(gru.ST.get_value(borrow=True)[int(gru.STI.get_value())])
            negatives = np.asarray(gru.itemidmap.index.values[row], dtype=np.int64)
        return StepTrace(
            session_ids=np.asarray(loc["data"][gru.session_key].values[event], dtype=np.int64),
            positions=np.asarray(event - np.asarray(loc["offset_sessions"])[sessions], dtype=np.int64),
            h_in_norms=np.linalg.norm(state, axis=1),
            n_active=int(args[2]),
            negative_ids=negatives,
            learning_rate=float(gru.learning_rate),
            epoch=int(epoch),
            step=int(step),
        )

    def _forward_graph(self) -> tuple[Any, Any, bool]:
        """(rng, compiled function, whether it outputs the embedding) of one training-mode step of gru4rec.py's
        model(X, H, M, R, Y, dropout_p_hidden, dropout_p_embed), built once per fitted model: inputs X, Y, M, R,
        the per-layer states; outputs the new states (= the layers' dropped-out outputs: R is all zero), the
        score matrix y fed to the loss, the gradient of fit's step cost w.r.t. Wy, and the embedding after its
        dropout (the first self.dropout call outside the no-embedding mode). The dropout masks come from a
        MRG_RandomStreams of the adapter's that stands in for the module's mrng while the graph is built."""
        if self._forward is not None:
            return self._forward
        g, _ = self._mods()
        theano = _theano()
        import theano.tensor as T
        from theano.sandbox.rng_mrg import MRG_RandomStreams

        gru = self._fitted()
        rng = MRG_RandomStreams(1)
        X, Y, M, R = T.ivector("X"), T.ivector("Y"), T.iscalar("M"), T.bcol("R")
        H = [T.matrix(f"H{i}") for i in range(len(gru.layers))]
        dropped: list[Any] = []
        dropout = gru.dropout

        def recording_dropout(Z: Any, p: float) -> Any:
            out = dropout(Z, p)
            dropped.append(out)
            return out

        st = {} if self._store is None else {"ST": self._store[0], "STI": self._store[1]}
        for name, value in st.items():  # fit() deleted them; model() appends ST[STI] to Y when they exist
            setattr(gru, name, value)
        gru.dropout = recording_dropout
        try:
            with patched(g, "mrng", rng):
                H_new, y, _, _, _ = gru.model(X, H, M, R, Y, gru.dropout_p_hidden, gru.dropout_p_embed)
        finally:
            del gru.dropout
            for name in st:
                delattr(gru, name)
        cost = gru.loss_function(y, M) / gru.batch_size  # fit's step cost
        embedded = bool(gru.embedding or gru.constrained_embedding)
        outputs = [*H_new, y, T.grad(cost, gru.Wy)] + ([dropped[0]] if embedded else [])
        with redirect_stdout(io.StringIO()):
            fn = theano.function([X, Y, M, R, *H], outputs, allow_input_downcast=True, on_unused_input="ignore")
        self._forward = (rng, fn, embedded)
        return self._forward

    def train_forward(self, prefix_batch: Any, seed: int) -> dict:
        """gru4rec.py's training-mode model() (dropout on) over b equally long item sequences from zero states,
        one compiled step per transition; the result describes the last one and nothing is updated.

        Returns ``embedding_out`` (b, k) after the embedding dropout (None in the no-embedding mode, where the
        original applies dropout_p_hidden to the first layer's output), ``layer_outputs`` [(b, d_l)] after the
        hidden dropout, ``scores`` (b, b+S) the matrix model() feeds the loss (after the final activation) of
        ``columns`` (the targets, then the sample store's next row), ``score_tensor_shape`` its shape and
        ``output_rows_touched`` the rows of Wy with a non-zero gradient of fit's step cost. ``seed`` reseeds the
        dropout stream (MRG seed ``seed % (2**30 - 1) + 1``). ValueError for sequences of unequal length, shorter than 2, or of unknown items."""
        theano = _theano()
        gru = self._fitted()
        seqs = [self._indices(s, "prefix_batch") for s in prefix_batch]
        if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2:
            raise ValueError("prefix_batch: expected b >= 1 item sequences of one common length >= 2")
        arr = np.stack(seqs)
        b = len(arr)
        rng, fn, embedded = self._forward_graph()
        rng.seed(int(seed) % (2**30 - 1) + 1)  # MRG seeds lie in 1..2**30 (0 is refused)
        self._refill_store()
        H = [np.zeros((b, d), dtype=theano.config.floatX) for d in gru.layers]
        reset = np.zeros((b, 1), dtype=np.int8)
        n = len(gru.layers)
        for k in range(arr.shape[1] - 1):
            out = fn(arr[:, k], arr[:, k + 1], b, reset, *H)
            H = [np.asarray(h) for h in out[:n]]
        y, grad_wy = np.asarray(out[n]), np.asarray(out[n + 1])
        columns = arr[:, -1]
        if self._store is not None and gru.n_sample:
            st, sti, _ = self._store
            columns = np.concatenate([columns, np.asarray(st.get_value(borrow=True)[int(sti.get_value())])])
        return {
            "embedding_out": np.asarray(out[n + 2], dtype=np.float32) if embedded else None,
            "layer_outputs": [h.astype(np.float32) for h in H],
            "scores": y.astype(np.float32),
            "columns": self.item_ids()[columns],
            "score_tensor_shape": tuple(int(v) for v in y.shape),
            "output_rows_touched": int((np.abs(grad_wy).sum(axis=1) > 0).sum()),
        }

    def score_stream(self, test_df: Any, batch_size: int) -> Iterator[tuple[Any, ...]]:
        """evaluation.evaluate_gpu run unchanged (mode='conservative'); yields ``(session_id, position,
        target_item, scores_row)`` per evaluated event, scores_row float32 (n_items,) post-activation in
        :meth:`item_ids` order, in the order the evaluator computes them."""
        _, ev = self._mods()
        theano = _theano()
        gru = self.gru
        df = check_session_frame(test_df, "test_df")
        rows: list[tuple[Any, ...]] = []
        seen: dict[str, Any] = {}
        symbolic_predict = gru.symbolic_predict
        theano_function = theano.function

        def recording_predict(*a: Any, **k: Any) -> Any:
            yhat, H, updates = symbolic_predict(*a, **k)
            seen["yhat"] = yhat
            return yhat, H, updates

        def recording_function(*a: Any, **k: Any) -> Any:  # evaluate_gpu's one compiled function, plus yhat
            if "yhat" not in seen or "outputs" not in k:
                return theano_function(*a, **k)
            k["outputs"] = list(k["outputs"]) + [seen["yhat"]]
            fn = theano_function(*a, **k)

            def evaluate(*args: Any) -> Any:
                out = fn(*args)
                loc = sys._getframe(1).f_locals  # evaluate_gpu's loop: target event start + i + 1 per lane
                data = loc["test_data"]
                target = np.asarray(loc["start"]) + int(loc["i"]) + 1
                pos = target - np.asarray(loc["offset_sessions"])[np.asarray(loc["iters"])]
                sids = data["SessionId"].values[target]
                items = data["ItemId"].values[target]
                scores = np.asarray(out[-1], dtype=np.float32)
                for j in range(len(target)):
                    rows.append((int(sids[j]), int(pos[j]), int(items[j]), scores[j].copy()))
                return out[:-1]

            return evaluate

        gru.symbolic_predict = recording_predict  # an instance attribute over the class's method, removed below
        try:
            with redirect_stdout(io.StringIO()), patched(theano, "function", recording_function):
                ev.evaluate_gpu(gru, df, cut_off=[1], batch_size=int(batch_size), mode="conservative")
        finally:
            del gru.symbolic_predict
        return iter(rows)


register(TheanoOfficialAdapter)
