"""The implementations a benchmark times, behind one interface (:class:`Runner`).

- :class:`ReferenceRunner` — ``reference.gru4rec.GRU4Rec`` in this process (``step_impl`` from
  ``GRU4REC_BENCH_STEP_IMPL``, default ``auto``: the static, CUDA-graph step on CUDA, the standard step on CPU);
- :class:`OfficialRunner` — the official PyTorch port (hidasib/GRU4Rec_PyTorch_Official) imported from a checkout
  (``OFFICIAL_GRU4REC_PATH``), in this process; one declared shim: ``torch.tensor(pandas.Series)`` (its logQ
  supports) converts the Series to NumPy first (pandas 3 refuses the implicit conversion). Its epoch time, minibatch
  and event counts are read from its own epoch line (its e/s counts B per minibatch also in the shrinking tail,
  so the trained events are counted from the data instead);
- :class:`AdapterRunner` — any adapter selected with ``--impl`` (conformance plugin registry), in this process or
  in its worker process; its epoch time is the one its ``FitReport`` reports.

Each ``prepare`` builds a fresh, untrained model (not timed); ``run`` trains one epoch (timed by pytest-benchmark:
the whole ``fit`` call, data preparation included) and returns an :class:`EpochResult` with the implementation's own
epoch time, the process CPU time of the fit (in-process runners; steadier than wall time on a shared machine), the
peak resident memory during the fit (Linux VmHWM, reset before the fit; in-process runners only) and, on CUDA, the
peak allocated device memory. ``evaluate_*`` time full-catalogue evaluation.
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import io
import os
import platform
import re
import sys
import time
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

CUTOFFS = (1, 5, 10, 20)
EVAL_BATCH = 512


@dataclass
class EpochResult:
    """One timed epoch. ``epoch_seconds``: the implementation's own epoch timer; ``fit_seconds``: wall time of
    the whole ``fit`` call; ``cpu_seconds``: process CPU time of the fit (None when the fit ran in another
    process); ``peak_rss_mb``: peak resident memory of this process during the fit, ``base_rss_mb`` before it
    (None out of process or off Linux); ``cuda_max_allocated_mb``: peak allocated CUDA memory (None off CUDA)."""

    epoch_seconds: float
    fit_seconds: float
    n_steps: int
    n_events: int
    cpu_seconds: float | None = None
    peak_rss_mb: float | None = None
    base_rss_mb: float | None = None
    cuda_max_allocated_mb: float | None = None
    info: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class EvalResult:
    """Full-catalogue evaluation: ``seconds`` wall time, ``n_events`` evaluated test events, ``cpu_seconds`` (None
    out of process), the metrics returned."""

    seconds: float
    n_events: int
    cpu_seconds: float | None
    metrics: dict


# ----------------------------------------------------------------------------------------------------------------
# measurement helpers


def _status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            m = re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M)
        return int(m.group(1)) / 1024 if m else None
    except OSError:
        return None


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set size (Linux: writing 5 to /proc/self/clear_refs resets VmHWM)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


class _Meter:
    """Wall, CPU, peak RSS and CUDA peak memory around a block (synchronising CUDA at both ends)."""

    def __init__(self, device: str, in_process: bool = True):
        self.cuda = str(device).startswith("cuda") and torch.cuda.is_available()
        self.in_process = in_process

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self.rss_ok = self.in_process and reset_peak_rss()
        self.base = _status_mb("VmRSS") if self.rss_ok else None
        self.c0, self.t0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
        self.wall = time.perf_counter() - self.t0
        self.cpu = time.process_time() - self.c0 if self.in_process else None
        self.peak = _status_mb("VmHWM") if self.rss_ok else None
        self.cuda_peak = torch.cuda.max_memory_allocated() / 2**20 if self.cuda else None
        return False


def versions(device: str) -> dict:
    """Library versions, interpreter, CPU and (on CUDA) GPU and CUDA versions, for ``extra_info``."""
    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
    }
    if str(device).startswith("cuda") and torch.cuda.is_available():
        out.update(cuda=torch.version.cuda, gpu=torch.cuda.get_device_name(), cudnn=torch.backends.cudnn.version())
    return out


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def epoch_steps(train: pd.DataFrame, batch_size: int) -> int:
    """Training steps of one epoch of the session-parallel iterator on ``train`` (columns SessionId, ItemId, Time)
    with ``batch_size`` lanes: the official port's count, which the reference's iterator reproduces (lanes drop
    out when no session is left). Raises ValueError when ``batch_size`` exceeds the number of sessions."""
    from gru4rec_conformance.reference.gru4rec.data import SessionParallelIterator, build_training_data

    data = build_training_data(train, "ItemId", "SessionId", "Time")
    return sum(run.n_steps for run in SessionParallelIterator(data, int(batch_size), stop_below_two_lanes=False))


def epoch_sample_cache(hp: dict, train: pd.DataFrame) -> int:
    """The sample cache (ids) of one timed epoch, as each side needs it: ``n_sample`` × the epoch's steps
    (:func:`epoch_steps`), so the official port, which draws its whole cache when the fit starts, draws exactly
    the rows the epoch consumes (one generation, no refresh), instead of ``batch_size`` × ``n_sample`` extra ids
    that weighed on its figures at large batch sizes; the reference draws its rows on demand in blocks, so the
    same size costs it nothing it does not use. 1 without extra samples."""
    n_sample = int(hp.get("n_sample", 0))
    if n_sample <= 0:
        return 1
    return max(1, n_sample * epoch_steps(train, int(hp["batch_size"])))


def eval_batch(test: pd.DataFrame) -> int:
    """Evaluation batch size: 512 lanes, or one per test session when there are fewer (the official port fails
    with an IndexError when a test set has fewer sessions than its evaluation batch size)."""
    return max(1, min(EVAL_BATCH, int(test["SessionId"].nunique())))


def eval_events(test: pd.DataFrame, item_ids) -> int:
    """Prediction points of the official protocol: per test session (unknown items dropped), its length − 1."""
    known = test[test["ItemId"].isin(pd.Index(item_ids))]
    sizes = known.groupby("SessionId").size()
    return int((sizes - 1).clip(lower=0).sum())


# ----------------------------------------------------------------------------------------------------------------
# runners


class Runner(abc.ABC):
    """Common interface. ``name`` (report label), ``kind`` ('reference' | 'official' | 'adapter'), ``device``,
    ``version``, ``in_process``, ``study`` (the study row the implementation corresponds to, if any)."""

    name = "?"
    kind = "?"
    in_process = True
    study: dict | None = None
    _warmed_up: bool  # set by benchmarks/conftest.py after a warm-up run (read with getattr)

    def __init__(self, device: str = "cpu"):
        self.device = str(device)

    @property
    def version(self) -> str:
        return "unknown"

    @abc.abstractmethod
    def prepare(self, train: pd.DataFrame, hp: dict, seed: int) -> Any:
        """Everything one timed epoch on ``train`` needs (a built, untrained model, converted data), untimed."""

    @abc.abstractmethod
    def run(self, state: Any) -> EpochResult:
        """Train one epoch from ``prepare``'s state; the timed part."""

    @abc.abstractmethod
    def prepare_eval(self, train: pd.DataFrame, test: pd.DataFrame, hp: dict, seed: int) -> Any:
        """A model built on ``train`` (initialised, not trained: evaluation costs the same) and the test frame."""

    @abc.abstractmethod
    def run_eval(self, state: Any) -> EvalResult:
        """Evaluate (full-catalogue ranking of every test event) from ``prepare_eval``'s state; the timed part."""

    def close(self, state: Any) -> None:  # noqa: B027 - optional: most runners hold nothing to release
        """Release what ``prepare`` made (nothing by default)."""

    def describe(self) -> dict:
        return {
            "impl": self.name,
            "kind": self.kind,
            "impl_version": self.version,
            "device": self.device,
            "in_process": self.in_process,
        }


class ReferenceRunner(Runner):
    """The reference GRU4Rec (this repository). ``require_graph`` (default: ``GRU4REC_BENCH_REQUIRE_GRAPH=1``): on
    CUDA, ``run`` raises RuntimeError when the fit did not replay a CUDA graph (a capture failure falls back to the
    eager static step, the slowest variant)."""

    name = "reference"
    kind = "reference"

    def __init__(self, device: str = "cpu", step_impl: str | None = None, require_graph: bool | None = None):
        super().__init__(device)
        self.step_impl = step_impl or os.environ.get("GRU4REC_BENCH_STEP_IMPL", "auto")
        # on CUDA, a fit whose static step fell back to eager execution raises instead of being timed
        self.require_graph = (
            os.environ.get("GRU4REC_BENCH_REQUIRE_GRAPH") == "1" if require_graph is None else require_graph
        )

    @property
    def version(self) -> str:
        return _suite_version()

    def describe(self) -> dict:
        return {**super().describe(), "step_impl": self.step_impl}

    def prepare(self, train, hp, seed):
        from gru4rec_conformance.reference.gru4rec import GRU4Rec

        return {
            "model": GRU4Rec(**hp, n_epochs=1, seed=seed, device=self.device, step_impl=self.step_impl),
            "train": train,
            "cache": epoch_sample_cache(hp, train),
        }

    def run(self, state) -> EpochResult:
        g = state["model"]
        with _Meter(self.device) as m:
            rep = g.fit(state["train"], sample_cache_max_size=state["cache"])
        if self.require_graph and self.device.startswith("cuda") and g.step_info.get("cuda_graph") is not True:
            raise RuntimeError(
                "GRU4REC_BENCH_REQUIRE_GRAPH=1: the reference's fit did not replay a CUDA graph "
                f"(step_info {g.step_info}); its time would be the eager step's, not the one to compare"
            )
        return EpochResult(
            rep.epoch_seconds[0],
            m.wall,
            rep.n_steps[0],
            rep.n_events_trained[0],
            m.cpu,
            m.peak,
            m.base,
            m.cuda_peak,
            info=dict(g.step_info),
        )

    def prepare_eval(self, train, test, hp, seed):
        from gru4rec_conformance.reference.gru4rec import GRU4Rec

        g = GRU4Rec(**hp, seed=seed, device=self.device, step_impl=self.step_impl)
        g.fit(train, n_epochs=0, sample_cache_max_size=1)
        return {"model": g, "test": test}

    def run_eval(self, state) -> EvalResult:
        with _Meter(self.device) as m:
            res = state["model"].evaluate(state["test"], cutoffs=CUTOFFS, batch_size=eval_batch(state["test"]))
        return EvalResult(m.wall, int(res["n_events"]), m.cpu, res)


def _suite_version() -> str:
    try:
        from gru4rec_conformance.conformance._records.runinfo import suite_version

        return suite_version()["string"]
    except Exception:  # the harness is optional for the benchmarks
        return "unknown"


#: The one shim the official port needs with the suite's torch and pandas (declared wherever the port runs).
OFFICIAL_SHIM = "torch.tensor(pandas.Series) converts to NumPy first"


class _TorchShim(types.ModuleType):
    """torch, except that ``tensor`` converts a pandas Series/Index to NumPy first (the port passes Series)."""

    def __getattr__(self, k):
        return getattr(torch, k)

    @staticmethod
    def tensor(x, *a, **k):
        if isinstance(x, (pd.Series, pd.Index)):
            x = x.to_numpy()
        return torch.tensor(x, *a, **k)


def import_official_port(path: str | os.PathLike) -> tuple[types.ModuleType, types.ModuleType]:
    """``(gru4rec_pytorch, evaluation)`` of a checkout of hidasib/GRU4Rec_PyTorch_Official at ``path``, with
    :data:`OFFICIAL_SHIM` applied (the module's ``torch`` becomes :class:`_TorchShim`).

    ``path`` goes first on ``sys.path`` (once); the modules are imported under their own names, so a later call
    returns the same modules. Raises ``ModuleNotFoundError`` when the checkout lacks them.
    """
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    gp: Any = importlib.import_module("gru4rec_pytorch")  # Any: the checkout's module is untyped; its torch is replaced
    ev = importlib.import_module("evaluation")
    gp.torch = _TorchShim("torch")
    return gp, ev


def official_commit() -> str:
    """The official port's commit pinned in ``implementations._checkout.CHECKOUTS`` (40 hex digits)."""
    from gru4rec_conformance.implementations._checkout import CHECKOUTS

    return CHECKOUTS["gru4rec_pytorch_official"].commit


_EPOCH_LINE = re.compile(r"Epoch1 --> loss: \S+ \t\(([0-9.]+)s\) \t\[([0-9.]+) mb/s \| ([0-9.]+) e/s\]")


class OfficialRunner(Runner):
    """The official PyTorch port from a checkout (``OFFICIAL_GRU4REC_PATH``), in this process.

    Raises FileNotFoundError naming OFFICIAL_GRU4REC_PATH when the checkout has no gru4rec_pytorch.py."""

    name = "official"
    kind = "official"
    study = {"implementation": "GRU4Rec Official", "variant": "Best params"}

    def __init__(self, path: str | os.PathLike, device: str = "cpu"):
        super().__init__(device)
        self.path = Path(path)
        if not (self.path / "gru4rec_pytorch.py").is_file():
            raise FileNotFoundError(
                f"OFFICIAL_GRU4REC_PATH={self.path}: gru4rec_pytorch.py is missing (expected a "
                "checkout of hidasib/GRU4Rec_PyTorch_Official)"
            )
        self._mod = None
        self._eval: types.ModuleType | None = None  # the checkout's evaluation.py, imported by module()

    @property
    def version(self) -> str:
        """``checkout <commit[:10]>`` from the checkout's ``.git``; without one (an extracted archive) the commit
        pinned in ``implementations._checkout.CHECKOUTS`` (``pinned <commit[:10]>``), which the documented
        extraction exports."""
        head = self.path / ".git" / "HEAD"
        try:
            ref = head.read_text().strip()
            if ref.startswith("ref: "):
                ref = (self.path / ".git" / ref[5:]).read_text().strip()
            return f"checkout {ref[:10]}"
        except OSError:
            return f"pinned {official_commit()[:10]} (no .git)"

    def describe(self) -> dict:
        return {**super().describe(), "shims": [OFFICIAL_SHIM], "pinned_commit": official_commit()}

    def module(self):
        if self._mod is None:
            self._mod, self._eval = import_official_port(self.path)
        return self._mod

    def _build(self, hp, seed, n_epochs):
        gp = self.module()
        torch.manual_seed(seed)
        with contextlib.redirect_stdout(io.StringIO()):
            return gp.GRU4Rec(**hp, n_epochs=n_epochs, device=torch.device(self.device))

    def prepare(self, train, hp, seed):
        return {
            "model": self._build(hp, seed, 1),
            "train": train.copy(),
            "cache": epoch_sample_cache(hp, train),
            "events": int(len(train) - train["SessionId"].nunique()),
        }

    def run(self, state) -> EpochResult:
        g = state["model"]
        out = io.StringIO()
        with _Meter(self.device) as m, contextlib.redirect_stdout(out):
            g.fit(state["train"], sample_cache_max_size=state["cache"], compatibility_mode=False)
        if getattr(g, "error_during_train", False):
            raise RuntimeError("the official port reported a NaN loss (error_during_train)")
        hit = _EPOCH_LINE.search(out.getvalue())
        if not hit:
            raise RuntimeError(f"no epoch line in the official port's output: {out.getvalue()[-300:]!r}")
        sec, mbs, _ = (float(v) for v in hit.groups())
        return EpochResult(sec, m.wall, int(round(mbs * sec)), state["events"], m.cpu, m.peak, m.base, m.cuda_peak)

    def prepare_eval(self, train, test, hp, seed):
        g = self._build(hp, seed, 0)
        with contextlib.redirect_stdout(io.StringIO()):
            g.fit(train.copy(), sample_cache_max_size=max(1, int(hp.get("n_sample", 0))), compatibility_mode=False)
        return {"model": g, "test": test.copy()}

    def run_eval(self, state) -> EvalResult:
        g, test = state["model"], state["test"]
        assert self._eval is not None  # prepare_eval built the model through module()
        n = eval_events(test, g.data_iterator.itemidmap.index)
        with _Meter(self.device) as m, contextlib.redirect_stdout(io.StringIO()):
            recall, mrr = self._eval.batch_eval(
                g, test, cutoff=list(CUTOFFS), batch_size=eval_batch(test), mode="conservative"
            )
        metrics = {
            **{f"recall@{c}": float(v) for c, v in recall.items()},
            **{f"mrr@{c}": float(v) for c, v in mrr.items()},
            "n_events": n,
        }
        return EvalResult(m.wall, n, m.cpu, metrics)


#: hyperparameters a benchmark may leave out (at their implementation's default, listed in the report as dropped)
#: when an adapter cannot express them; the loss, the layers and the batch size are never dropped
DROPPABLE = (
    "n_sample", "sample_alpha", "bpreg", "logq", "momentum", "dropout_p_embed", "dropout_p_hidden", "embedding",
    "constrained_embedding", "elu_param", "final_act", "learning_rate", "optimizer",
)  # fmt: skip


#: an unsupported value (``Unsupported`` name ``"<field>:<value>"``) -> the hyperparameter that asked for it
_UNSUPPORTED_VALUE = {"embedding:shared": "constrained_embedding", "separate_dropouts": "dropout_p_embed"}


def worker_pythons(raw: str | None = None) -> dict[str, str]:
    """``GRU4REC_BENCH_WORKER_PYTHONS``: ``name=python,name2=python2`` (a name ending in ``*`` matches every
    adapter name with that prefix, e.g. ``recpack*=/env/bin/python``). A relative path is made absolute here (the
    sandboxed worker starts in another folder; symlinks are kept, a venv's python is one). Raises ValueError for an
    entry without ``=`` and for a path that does not exist."""
    raw = os.environ.get("GRU4REC_BENCH_WORKER_PYTHONS", "") if raw is None else raw
    out: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        name, sep, python = entry.partition("=")
        if not sep or not name or not python:
            raise ValueError(f"GRU4REC_BENCH_WORKER_PYTHONS: expected name=python, got {entry!r}")
        python = python.strip()
        if os.sep in python:
            if not os.path.exists(python):
                raise ValueError(f"GRU4REC_BENCH_WORKER_PYTHONS: {name.strip()}={python}: no such file")
            python = os.path.abspath(python)
        out[name.strip()] = python
    return out


def _python_for(name: str, table: dict[str, str]) -> str | None:
    if name in table:
        return table[name]
    hits = [k for k in table if k.endswith("*") and name.startswith(k[:-1])]
    return table[max(hits, key=len)] if hits else None


def _proc_mb(pid: int, key: str) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            m = re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M)
        return int(m.group(1)) / 1024 if m else None
    except OSError:
        return None


def _worker_process(pid: int | None) -> int | None:
    """The process that runs the adapter: under the sandbox the proxy's pid is bwrap's, so the descendant with
    the largest resident set (the Python worker)."""
    if not pid:
        return None
    from gru4rec_conformance.conformance._harness.isolation import tree_pids

    pids = tree_pids(pid)
    return max(pids, key=lambda p: _proc_mb(p, "VmRSS") or 0.0) if pids else pid


def _reset_peak(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


class AdapterRunner(Runner):
    """An adapter selected with ``--impl`` (an ``ImplHandle`` of the conformance plugin).

    One adapter (one worker process for an isolated adapter) serves every benchmark of the session: each
    ``prepare`` calls ``build`` again (a fresh, untrained model), so the worker's start and the implementation's
    imports are paid once, in an untimed warm-up fit on a tiny frame, not in the first timed epoch. A failed fit
    closes it (the next ``prepare`` starts a new one).

    Args:
        handle: the plugin's ``ImplHandle``.
        cpu_limit_s: per-epoch CPU-time limit (``GRU4REC_BENCH_EPOCH_LIMIT``; None = none): the fit stops at the
            first optimizer step past it (``benchmarks/limit.py``) and :meth:`run` returns a result with
            ``info["limited"]`` True, the steps reached and the CPU seconds spent.
        python: the worker's interpreter (``GRU4REC_BENCH_WORKER_PYTHONS``; default: ``GRU4REC_WORKER_PYTHON`` or
            the adapter's own).
        hard_timeout_s: wall-clock timeout of one worker call (default 4 x the limit + 120 s, or the harness's).

    CPU time: the suite's measurement of the ``fit`` call over the worker's process tree from /proc
    (``conformance._harness.cputime.cpu_call``; the parent's encoding and pipes excluded). Peak memory: the
    worker's VmHWM (reset before the fit) on Linux.
    ``prepare`` drops a hyperparameter of :data:`DROPPABLE` the adapter answers ``Unsupported`` for and builds
    again (``state["dropped"]``); any other ``Unsupported`` reaches the test, which skips with the reason.
    """

    kind = "adapter"

    def __init__(
        self,
        handle,
        cpu_limit_s: float | None = None,
        python: str | None = None,
        hard_timeout_s: float | None = None,
    ):
        super().__init__(handle.device)
        self.handle = handle
        self.name = handle.name
        self.in_process = not handle.uses_worker
        self.study = getattr(handle.spec.cls, "study", None) or None
        self.cpu_limit_s = cpu_limit_s
        self.python = python
        self.hard_timeout_s = hard_timeout_s or (4 * cpu_limit_s + 120 if cpu_limit_s else None)
        self._adapter: Any = None
        if python:  # describe (capabilities, version) in the interpreter the benchmarks will use
            with self._worker_python():
                handle.describe(refresh=True)

    @property
    def version(self) -> str:
        return str(self.handle.version)

    def describe(self) -> dict:
        d = self.handle.describe()
        shims = list(getattr(d.capabilities, "shims", ()) or ()) if d.capabilities is not None else []
        out = {**super().describe(), "isolation": d.isolation, "shims": shims}
        if self.cpu_limit_s:
            out["epoch_cpu_limit_s"] = self.cpu_limit_s
        if self.python:
            out["worker_python"] = self.python
        return out

    def defaults(self) -> dict:
        """The adapter's declared hyperparameter defaults (its implementation's own, "out of the box"); {} when it
        declares none. ``losses``: see :meth:`losses`."""
        caps = self.handle.describe().capabilities
        return dict(getattr(caps, "hyperparameters", None) or {})

    def losses(self) -> frozenset[str]:
        caps = self.handle.describe().capabilities
        return frozenset(getattr(caps, "losses", None) or ())

    @contextlib.contextmanager
    def _worker_python(self):
        """``GRU4REC_WORKER_PYTHON`` = :attr:`python` inside the block (the handle reads it per new adapter)."""
        before = os.environ.get("GRU4REC_WORKER_PYTHON")
        if self.python:
            os.environ["GRU4REC_WORKER_PYTHON"] = self.python
        try:
            yield
        finally:
            if self.python:
                if before is None:
                    os.environ.pop("GRU4REC_WORKER_PYTHON", None)
                else:
                    os.environ["GRU4REC_WORKER_PYTHON"] = before

    def _new_adapter(self):
        timeout = self.hard_timeout_s
        with self._worker_python():
            adapter = self.handle.new_adapter(timeout_kind=(lambda: (None, timeout)) if timeout else None)
        if self.cpu_limit_s and not self.in_process:
            from gru4rec_conformance.benchmarks.limit import LIMIT_REF

            # the worker builds the registered class through the limit's factory (benchmarks/limit.py); the
            # proxy starts its worker at the first call, so its ref can still be redirected here
            adapter.route_through(LIMIT_REF, cpu_limit_s=self.cpu_limit_s)
        return adapter

    def _get(self, seed: int):
        if self._adapter is None:
            adapter = self._new_adapter()
            try:
                self._warm_up(adapter, seed)
            except BaseException:
                with contextlib.suppress(Exception):
                    adapter.close()
                raise
            self._adapter = adapter
        return self._adapter

    def _warm_up(self, adapter, seed: int) -> None:
        from gru4rec_conformance.benchmarks.workload import sweep_frame

        hp = {"layers": [16], "batch_size": 8}
        declared = self.defaults()
        hp = {k: v for k, v in hp.items() if not declared or k in declared}
        try:
            adapter.build(seed=seed, **hp)
            self._fit(adapter, sweep_frame(60, 200, seed=0))
        except Exception as exc:  # noqa: BLE001 - the timed cases report what fails; this only warms up
            if not _is_unsupported(exc):
                print(f"warm-up of {self.name} failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)

    def _fit(self, adapter, train):
        if self.in_process:
            from gru4rec_conformance.benchmarks.limit import limited_fit

            return limited_fit(adapter.fit, self.cpu_limit_s, train, n_epochs=1)
        return adapter.fit(train, n_epochs=1)

    def _drop(self) -> None:
        if self._adapter is not None:
            with contextlib.suppress(Exception):
                self._adapter.close()
        self._adapter = None

    def prepare(self, train, hp, seed):
        adapter = self._get(seed)
        hp = dict(hp)
        dropped: list[str] = []
        while True:
            try:
                adapter.build(seed=seed, **hp)
                break
            except Exception as exc:
                name = str(getattr(exc, "name", "")) if _is_unsupported(exc) else ""
                name = _UNSUPPORTED_VALUE.get(name, name.split(":", 1)[0])  # "<field>:<value>" -> the field
                if name in DROPPABLE and name in hp:
                    hp.pop(name)
                    dropped.append(name)
                    continue
                if not _is_unsupported(exc):
                    self._drop()
                raise
        return {"adapter": adapter, "train": train, "dropped": dropped, "hp": hp}

    def run(self, state) -> EpochResult:
        from gru4rec_conformance.benchmarks.limit import limit_payload
        from gru4rec_conformance.conformance._harness.cputime import cpu_call

        adapter = state["adapter"]
        pid = None if self.in_process else _worker_process(getattr(adapter, "worker_pid", None))
        base = _proc_mb(pid, "VmRSS") if pid else None
        rss_ok = pid is not None and _reset_peak(pid)
        info: dict = {"dropped_hparams": state.get("dropped") or None}
        t0 = time.perf_counter()
        try:
            with _Meter(self.device, self.in_process) as m:
                if self.in_process:
                    rep = self._fit(adapter, state["train"])
                else:
                    rep, cpu = cpu_call(adapter, "fit", state["train"], n_epochs=1)
        except Exception as exc:
            payload = limit_payload(exc)
            if payload is None:
                if not _is_unsupported(exc):
                    self._drop()
                raise
            wall = time.perf_counter() - t0
            peak = _proc_mb(pid, "VmHWM") if rss_ok and pid else None
            # a stopped fit reports no events: the rows the limit saw fed (TF, Keras), else the full lanes of the
            # steps reached (the tail is later); 0 where B is hard-coded and not declared (then no estimate E)
            b = int(state.get("hp", {}).get("batch_size") or 0)
            info.update(limited=True, events_estimated=True, **{f"limit_{k}": v for k, v in payload.items()})
            return EpochResult(
                float(payload["wall_s"]),
                wall,
                int(payload["steps"]),
                int(payload.get("events") or payload["steps"] * b),
                float(payload["cpu_s"]),
                peak,
                base,
                m.cuda_peak if m.cuda else None,
                info=info,
            )
        if self.in_process:
            cpu, peak, base = m.cpu, m.peak, m.base
        else:
            peak = _proc_mb(pid, "VmHWM") if rss_ok and pid else None
        epoch = rep.epoch_seconds[0] if rep.epoch_seconds else m.wall
        return EpochResult(
            float(epoch),
            m.wall,
            int(rep.n_steps[0]),
            int(rep.n_events_trained[0]),
            cpu,
            peak,
            base,
            m.cuda_peak,
            info={k: v for k, v in info.items() if v is not None},
        )

    def close(self, state) -> None:
        """Nothing: the adapter serves the next benchmark too (:meth:`shutdown` ends it)."""

    def shutdown(self) -> None:
        """Close the adapter (its worker) at the end of the session."""
        self._drop()

    def prepare_eval(self, train, test, hp, seed):
        state = self.prepare(train, hp, seed)
        try:
            state["adapter"].fit(train, n_epochs=0)
        except BaseException:
            self._drop()
            raise
        return {**state, "test": test}

    def run_eval(self, state) -> EvalResult:
        adapter, test = state["adapter"], state["test"]
        with _Meter(self.device, self.in_process) as m:
            if "evaluate" in self.handle.hooks:
                res = adapter.evaluate(test, cutoffs=CUTOFFS, batch_size=eval_batch(test))
            else:
                from gru4rec_conformance.reference.gru4rec.evaluation import evaluate_prefix_scorer

                res = evaluate_prefix_scorer(
                    adapter.score_prefixes, adapter.item_ids(), test, CUTOFFS, "conservative", eval_batch(test)
                )
        return EvalResult(m.wall, int(res["n_events"]), m.cpu, dict(res))


def _is_unsupported(exc: BaseException) -> bool:
    try:
        from gru4rec_conformance.implementations.base import Unsupported
    except ImportError:
        return False
    return isinstance(exc, Unsupported)
