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
from collections.abc import Sequence
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
    Unsupported,
)
from gru4rec_conformance.implementations.registry import register

_MODULES = ("gru4rec", "evaluation", "gpu_ops", "custom_opt", "custom_theano_ops", "datatools")
_FLAGS = "device=cpu,floatX=float32"
_EPOCH = re.compile(r"Epoch(\d+) --> loss: ([-+0-9.eE]+|nan) \t\(([0-9.]+)s\) \t\[([0-9.]+) mb/s \| ([0-9.]+) e/s\]")
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
                "(elu_param default 0.5); elu -> elu-<elu_param>; leaky -> leaky-0.01",
                "seed: np.random.seed (the original uses NumPy's global generator; init reseeds it with 42)",
                "stdout of fit/evaluation captured (the original prints progress)",
            ],
            "score_semantics": "post-activation",
            "eval_tie_mode": "conservative",
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
        elu = float(hp.pop("elu_param") or 0.5)
        final_act = hp.pop("final_act")
        if final_act is None:
            fa = "softmax" if loss == "cross-entropy" else f"elu-{elu}"
        else:
            fa = str(final_act)
            if fa == "elu":
                fa = f"elu-{elu}"
            elif fa == "leaky":
                fa = "leaky-0.01"
            elif fa not in ("softmax", "linear", "relu", "tanh", "softmax_logit") and not fa.startswith(
                ("elu-", "leaky-")
            ):
                raise Unsupported(f"final_act:{fa}")
        hp["layers"] = layers_list(hp["layers"])
        self.seed = int(seed)
        seed_everything(self.seed, torch_too=False)
        with redirect_stdout(io.StringIO()):
            self.gru = g.GRU4Rec(loss=loss, final_act=fa, **hp)
        self._zero_scores = None

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        g, _ = self._mods()
        df = check_session_frame(train_df)
        gru = self.gru
        if n_epochs is not None:
            gru.n_epochs = int(n_epochs)
        seed_everything(self.seed, torch_too=False)
        out = _EpochLog()
        steps: list[int] = []
        lanes: list[int] = []
        compile_fn = g.function

        def counting_function(*a: Any, **k: Any) -> Any:  # fit() compiles its train function with this name
            fn = compile_fn(*a, **k)

            def step(*args: Any) -> Any:
                while len(steps) <= out.epochs:
                    steps.append(0)
                    lanes.append(0)
                steps[out.epochs] += 1
                lanes[out.epochs] += int(args[2])  # M: the number of active lanes of this step
                return fn(*args)

            return step

        with redirect_stdout(out), patched(g, "function", counting_function):
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
        self._zero_scores = None
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


register(TheanoOfficialAdapter)
