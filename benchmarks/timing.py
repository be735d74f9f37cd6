"""Timing helpers and settings of the benchmarks (benchmarks/conftest.py is the pytest side).

A regular module, not the conftest: pytest imports the conftest under a name of its own, while the benchmark
modules import these helpers as ``gru4rec_conformance.benchmarks.timing``; the results table (``RESULTS``)
must be one object for both. Settings come from the ``GRU4REC_BENCH_*`` variables listed in
benchmarks/conftest.py's docstring.
"""

from __future__ import annotations

import json
import os

import pytest

from gru4rec_conformance.benchmarks import runners as R
from gru4rec_conformance.benchmarks.workload import DATASETS, LOSSES

RESULTS: dict = {}  # (group, case) -> {impl: summary dict}; insertion order = run order
#: (group, case) of a reference case -> every reference epoch measured for it, in run order (the reference's own
#: benchmark, then the interleaved runs after each other implementation); read by :func:`reference_around`
REFERENCE_RUNS: dict = {}
#: every benchmark test skipped in this session, as its results-JSONL skip record (:func:`skip_record`), in run order;
#: filled by benchmarks/conftest.py, written into a ``--benchmark-json`` report under ``gru4rec_bench.skipped``
SKIPPED: list = []


def env_list(name: str, allowed, default) -> list:
    """The comma-separated values of environment variable ``name`` (``default`` when unset or empty).

    Raises ``pytest.UsageError`` naming the variable and the allowed values for an unknown entry.
    """
    raw = os.environ.get(name)
    if not raw:
        return list(default)
    out = [x.strip() for x in raw.split(",") if x.strip()]
    bad = [x for x in out if x not in allowed]
    if bad:
        raise pytest.UsageError(f"{name}={raw!r}: unknown {bad}; allowed: {', '.join(allowed)}")
    return out


def bench_device(config) -> str:
    dev = os.environ.get("GRU4REC_BENCH_DEVICE")
    if not dev:
        try:
            dev = config.getoption("conformance_device") or "cpu"
        except ValueError:
            dev = "cpu"
    return dev


#: hyperparameter sets of an epoch benchmark: the study's best (docs/study.md, 'Best hyperparameters') and, for an adapter that
#: declares its defaults, the implementation's own ("out of the box", only the loss set)
VARIANTS = ("best", "oob")


def results_jsonl_path() -> str | None:
    """The results JSON-lines file of this session (``GRU4REC_BENCH_RESULTS_JSONL``), or None when unset or empty."""
    return os.environ.get("GRU4REC_BENCH_RESULTS_JSONL") or None


class BenchConfig:
    """The benchmark settings of this session (see the module docstring)."""

    # defaults of the settings added later (an instance made without __init__, as in tests, has them)
    data = "synthetic"
    minibatches = 1000
    results_jsonl: str | None = None
    epoch_limit: float | None = None
    interleave = True
    variants: list = ["best"]

    def __init__(self, config):
        self.device = bench_device(config)
        self.cuda = self.device.startswith("cuda")
        self.scale = os.environ.get("GRU4REC_BENCH_SCALE") or ("1" if self.cuda else "ci")
        self.datasets = env_list("GRU4REC_BENCH_DATASETS", DATASETS, DATASETS)
        self.losses = env_list("GRU4REC_BENCH_LOSSES", LOSSES, LOSSES)
        self.sweeps = os.environ.get("GRU4REC_BENCH_SWEEPS") or ("gpu" if self.cuda else "cpu")
        if self.sweeps not in ("ci", "cpu", "gpu", "impl"):
            raise pytest.UsageError(f"GRU4REC_BENCH_SWEEPS={self.sweeps!r}: one of ci, cpu, gpu, impl")
        self.rounds = int(os.environ.get("GRU4REC_BENCH_ROUNDS", "3"))
        self.warmup = int(os.environ.get("GRU4REC_BENCH_WARMUP", "1"))
        self.sweep_rounds = int(os.environ.get("GRU4REC_BENCH_SWEEP_ROUNDS", "1"))
        self.sweep_warmup = self.warmup if self.cuda else 0
        self.threads = int(os.environ.get("GRU4REC_BENCH_THREADS", "1"))
        self.seed = 1
        # 'synthetic': the study's preprocessing of generated raw data at `scale`; 'catalogue': the real item counts
        # (workload.catalogue_data) with about `minibatches` x scale minibatches per epoch
        self.data = os.environ.get("GRU4REC_BENCH_DATA") or "synthetic"
        if self.data not in ("synthetic", "catalogue", "padded"):
            raise pytest.UsageError(f"GRU4REC_BENCH_DATA={self.data!r}: one of synthetic, catalogue, padded")
        self.minibatches = int(os.environ.get("GRU4REC_BENCH_MINIBATCHES", "1000"))
        self.results_jsonl = results_jsonl_path()
        # per-epoch CPU-time limit of the adapters (benchmarks/limit.py), interleaved reference runs, variants
        limit = os.environ.get("GRU4REC_BENCH_EPOCH_LIMIT") or ""
        try:
            self.epoch_limit = float(limit) if limit else None
        except ValueError:
            raise pytest.UsageError(f"GRU4REC_BENCH_EPOCH_LIMIT={limit!r}: CPU seconds (a number)") from None
        self.interleave = os.environ.get("GRU4REC_BENCH_INTERLEAVE", "1") != "0"
        self.variants = env_list("GRU4REC_BENCH_VARIANTS", VARIANTS, ("best",))

    def as_dict(self) -> dict:
        return dict(vars(self).items())


def _rates(res: R.EpochResult) -> dict:
    out = {
        "epoch_seconds": res.epoch_seconds,
        "fit_seconds": res.fit_seconds,
        "minibatches": res.n_steps,
        "events": res.n_events,
        "minibatches_per_s": res.n_steps / res.epoch_seconds,
        "events_per_s": res.n_events / res.epoch_seconds,
        "cpu_seconds": res.cpu_seconds,
        "peak_rss_mb": res.peak_rss_mb,
        "base_rss_mb": res.base_rss_mb,
        "cuda_max_allocated_mb": res.cuda_max_allocated_mb,
    }
    if res.cpu_seconds:
        out["minibatches_per_cpu_s"] = res.n_steps / res.cpu_seconds
        out["events_per_cpu_s"] = res.n_events / res.cpu_seconds
    for k in ("limited", "limit_limit_s", "events_estimated", "dropped_hparams"):
        if res.info.get(k) is not None:
            out[{"limit_limit_s": "epoch_cpu_limit_s"}.get(k, k)] = res.info[k]
    return out


def reference_around(ref_case: tuple, before: int) -> list[dict]:
    """The reference epochs of ``ref_case`` adjacent to a run that began when ``before`` reference epochs had
    been recorded: the last one before it and the first after it (those that exist)."""
    runs = REFERENCE_RUNS.get(ref_case, [])
    return runs[max(0, before - 1) : before + 1]


def ratios(summary: dict, refs: list[dict]) -> dict:
    """Ratios of ``summary`` (an implementation's recorded epoch) to the mean of the reference epochs ``refs``.

    Complete epoch: ``epoch_seconds_over_reference`` and ``cpu_seconds_over_reference`` (this / reference).
    Stopped at the limit (``summary["limited"]``): ``cpu_seconds_over_reference_min`` (CPU seconds spent up to
    the stop / the reference's whole epoch: a lower bound of the epoch ratio) and ``cpu_seconds_over_reference_est``
    (the CPU seconds per trained event so far, times the reference's events, over the reference's CPU seconds:
    an estimate), the same for wall time (``epoch_seconds_over_reference_min``). Empty without references."""
    refs = [r for r in refs if r.get("epoch_seconds")]
    if not refs:
        return {}
    ref_epoch = sum(r["epoch_seconds"] for r in refs) / len(refs)
    cpus = [r["cpu_seconds"] for r in refs if r.get("cpu_seconds")]
    ref_cpu = sum(cpus) / len(cpus) if cpus else None
    ref_events = sum(r["events"] for r in refs) / len(refs)
    out: dict = {"reference_runs": len(refs), "reference_epoch_seconds": ref_epoch, "reference_cpu_seconds": ref_cpu}
    cpu = summary.get("cpu_seconds")
    if summary.get("limited"):
        out["epoch_seconds_over_reference_min"] = summary["epoch_seconds"] / ref_epoch
        if cpu and ref_cpu:
            out["cpu_seconds_over_reference_min"] = cpu / ref_cpu
            if summary.get("events"):
                out["cpu_seconds_over_reference_est"] = cpu / summary["events"] * ref_events / ref_cpu
        return out
    out["epoch_seconds_over_reference"] = summary["epoch_seconds"] / ref_epoch
    if cpu and ref_cpu:
        out["cpu_seconds_over_reference"] = cpu / ref_cpu
    return out


def is_unsupported(exc: BaseException) -> bool:
    """Whether ``exc`` is the protocol's ``Unsupported`` (the benchmark is then skipped, not failed)."""
    try:
        from gru4rec_conformance.implementations.base import Unsupported
    except ImportError:
        return False
    return isinstance(exc, Unsupported)


def time_epochs(
    benchmark,
    runner: R.Runner,
    cfg: BenchConfig,
    *,
    group: str,
    case: str,
    train,
    hp: dict,
    extra: dict,
    rounds: int,
    warmup: int,
    reference: R.Runner | None = None,
    ref_case: tuple | None = None,
    ref_hp: dict | None = None,
) -> dict:
    """Time one-epoch fits of ``runner`` with pytest-benchmark (``pedantic``: a fresh model per round, built in
    the untimed setup) and record the best round (smallest epoch time) in ``extra_info`` and the session summary.
    An ``Unsupported`` from the implementation skips the test with its reason. Returns the recorded summary.

    Interleaving: with ``reference`` (and ``cfg.interleave``), an implementation other than the reference is
    followed by one reference epoch on the same data (``ref_hp``, default ``hp``), recorded under ``ref_case``
    (default ``(group, case)``); its ratios are to the mean of the reference epoch before it and this one
    (:func:`ratios`), so each implementation is compared with reference runs minutes apart at most. A fit
    stopped at the per-epoch limit (``GRU4REC_BENCH_EPOCH_LIMIT``) is recorded with ``limited`` True."""
    results: list[R.EpochResult] = []
    ref_case = ref_case or (group, case)
    before = len(REFERENCE_RUNS.get(ref_case, []))

    def setup():
        return (runner.prepare(train, hp, cfg.seed),), {}

    def target(state):
        res = runner.run(state)
        results.append(res)
        return res

    benchmark.group = group
    try:
        benchmark.pedantic(
            target, setup=setup, teardown=runner.close, rounds=rounds, iterations=1, warmup_rounds=warmup
        )
    except Exception as exc:
        if is_unsupported(exc):
            pytest.skip(f"unsupported by {runner.name}: {exc}")
        # a failed case is reported too (never left out): its error in the summary and the results JSONL
        failed = {"failed": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
        record(benchmark, runner, cfg, group, case, failed, hp=hp, extra=extra)
        raise
    timed = results[-rounds:] if len(results) >= rounds else results
    best = min(timed, key=lambda r: (bool(r.info.get("limited")), r.epoch_seconds))
    summary = {**_rates(best), "rounds_epoch_seconds": [r.epoch_seconds for r in timed], "step_info": best.info or None}
    if runner.name == "reference":
        REFERENCE_RUNS.setdefault(ref_case, []).append(summary)
    elif reference is not None and cfg.interleave:
        state = reference.prepare(train, ref_hp or hp, cfg.seed)
        try:
            REFERENCE_RUNS.setdefault(ref_case, []).append(_rates(reference.run(state)))
        finally:
            reference.close(state)
    if runner.name != "reference":
        summary.update(ratios(summary, reference_around(ref_case, before)))
    record(benchmark, runner, cfg, group, case, summary, hp=hp, extra=extra)
    return summary


def time_eval(
    benchmark,
    runner: R.Runner,
    cfg: BenchConfig,
    *,
    group: str,
    case: str,
    train,
    test,
    hp: dict,
    extra: dict,
    rounds: int,
    warmup: int,
) -> dict:
    """Time full-catalogue evaluation of a freshly initialised model (untrained: ranking costs the same)."""
    results: list[R.EvalResult] = []

    def setup():
        return (runner.prepare_eval(train, test, hp, cfg.seed),), {}

    def target(state):
        res = runner.run_eval(state)
        results.append(res)
        return res

    benchmark.group = group
    try:
        benchmark.pedantic(
            target, setup=setup, teardown=runner.close, rounds=rounds, iterations=1, warmup_rounds=warmup
        )
    except Exception as exc:
        if is_unsupported(exc):
            pytest.skip(f"unsupported by {runner.name}: {exc}")
        raise
    timed = results[-rounds:] if len(results) >= rounds else results
    best = min(timed, key=lambda r: r.seconds)
    summary = {
        "eval_seconds": best.seconds,
        "eval_events": best.n_events,
        "eval_events_per_s": best.n_events / best.seconds,
        "eval_cpu_seconds": best.cpu_seconds,
        "recall@20": best.metrics.get("recall@20"),
        "mrr@20": best.metrics.get("mrr@20"),
    }
    if best.cpu_seconds:
        summary["eval_events_per_cpu_s"] = best.n_events / best.cpu_seconds
    record(benchmark, runner, cfg, group, case, summary, hp=hp, extra=extra)
    return summary


def record(
    benchmark, runner: R.Runner, cfg: BenchConfig, group: str, case: str, summary: dict, *, hp: dict, extra: dict
) -> None:
    """Put the run's description, settings and results into ``extra_info`` (and the ratio to the reference's
    result of the same group and case, when the reference ran before in this session)."""
    key = (group, case)
    ref = RESULTS.get(key, {}).get("reference")
    metric = "epoch_seconds" if "epoch_seconds" in summary else "eval_seconds"
    if (
        ref is not None
        and runner.name != "reference"
        and ref.get(metric)
        and "reference_runs" not in summary
        and not summary.get("limited")
    ):
        summary[f"{metric}_over_reference"] = summary[metric] / ref[metric]
        if summary.get("cpu_seconds") and ref.get("cpu_seconds"):
            summary["cpu_seconds_over_reference"] = summary["cpu_seconds"] / ref["cpu_seconds"]
    RESULTS.setdefault(key, {})[runner.name] = summary
    benchmark.extra_info.update(
        {
            **runner.describe(),
            "case": case,
            "hparams": hp,
            **extra,
            **summary,
            "settings": {
                "scale": cfg.scale,
                "rounds": cfg.rounds,
                "warmup": cfg.warmup,
                "threads": cfg.threads,
                "sweeps": cfg.sweeps,
                "data": cfg.data,
                "minibatches": cfg.minibatches if cfg.data != "synthetic" else None,
                "epoch_cpu_limit_s": cfg.epoch_limit,
                "interleave": cfg.interleave,
            },
            "versions": R.versions(cfg.device),
            "study": runner.study,
        }
    )
    if cfg.results_jsonl:
        append_jsonl(cfg.results_jsonl, {"group": group, "name": case, "extra_info": benchmark.extra_info})


def append_jsonl(path: str | os.PathLike, row: dict) -> None:
    """Append ``row`` as one JSON line to ``path`` (created when absent) and fsync it, so that a run killed later
    keeps every case finished before (``GRU4REC_BENCH_RESULTS_JSONL``; read back by benchmarks/gpu/gpu_report.py).
    One ``write`` of the whole line on an O_APPEND descriptor: a kill leaves at most a torn last line, which the
    reader skips. Values JSON cannot hold are written as their ``str``."""
    line = (json.dumps(row, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------------------------------
# the group and case of a benchmark test (shared by the tests and the skip records of benchmarks/conftest.py)


def epoch_case(dataset: str, loss: str, variant: str = "best") -> tuple[str, str]:
    """``(group, case)`` of the one-epoch benchmark of ``dataset`` and ``loss`` with the hyperparameter set ``variant``
    (:data:`VARIANTS`): ``("epoch/<dataset>/<loss>", "<dataset>/<loss>")``, the group ``epoch-<variant>/...``
    for a variant other than ``best``. Raises nothing."""
    prefix = "epoch" if variant == "best" else f"epoch-{variant}"
    return f"{prefix}/{dataset}/{loss}", f"{dataset}/{loss}"


def eval_case(dataset: str) -> tuple[str, str]:
    """``(group, case)`` of the evaluation benchmark of ``dataset``: ``("eval/<dataset>", "<dataset>")``."""
    return f"eval/{dataset}", dataset


def sweep_case(name: str, value) -> tuple[str, str]:
    """``(group, case)`` of the point ``value`` of the sweep ``name``: ``("sweep/<name>", "<name>=<value>")``."""
    return f"sweep/{name}", f"{name}={value}"


def skip_record(
    test: str,
    params: dict,
    reason: str,
    *,
    nodeid: str = "",
    when: str = "call",
    kind: str | None = None,
    case_id: str = "",
) -> dict:
    """The results-JSONL line (``GRU4REC_BENCH_RESULTS_JSONL``) of a skipped benchmark test.

    ``test``: the test function's name (``test_epoch``, ``test_evaluation``, ``test_sweep`` or another);
    ``params``: its parametrization (``bench_impl`` the implementation's name, ``bench_dataset``, ``bench_loss``,
    ``bench_variant``, ``sweep_point``); ``reason``: the skip reason; ``nodeid``, ``when`` (the phase that skipped:
    ``setup`` or ``call``), ``kind`` (the implementation's runner kind, when known) and ``case_id`` (the
    parametrization's id, the case of a test not listed above) are copied into the record.

    Returns ``{"group", "name", "skipped": True, "reason", "skip_info", "nodeid", "when"}``: ``group`` and
    ``name`` as the same case's result line would have them (:func:`epoch_case`, :func:`eval_case`,
    :func:`sweep_case`; for another test, the test's name and ``case_id``), ``skip_info`` the implementation
    (``impl``, ``kind``) and the case's fields (``case``, ``dataset``, ``loss``, ``variant``, ``sweep``, ``value``).
    The line has no ``extra_info``, so readers of result lines only (older report.py, benchmarks/gpu/gpu_report.py)
    pass over it. Raises nothing (a parameter missing from ``params`` falls back to the test's name and
    ``case_id``)."""
    info: dict = {"impl": params.get("bench_impl"), "kind": kind}
    dataset, loss = params.get("bench_dataset"), params.get("bench_loss")
    point = params.get("sweep_point")
    if test == "test_epoch" and dataset and loss:
        variant = params.get("bench_variant") or "best"
        group, case = epoch_case(dataset, loss, variant)
        info.update(dataset=dataset, loss=loss, variant=variant)
    elif test == "test_evaluation" and dataset:
        group, case = eval_case(dataset)
        info.update(dataset=dataset)
    elif test == "test_sweep" and isinstance(point, (tuple, list)) and len(point) == 2:
        group, case = sweep_case(*point)
        info.update(sweep=point[0], value=point[1])
    else:
        group, case = test, case_id
    info["case"] = case
    return {
        "group": group,
        "name": case,
        "skipped": True,
        "reason": reason,
        "skip_info": {k: v for k, v in info.items() if v is not None},
        "nodeid": nodeid,
        "when": when,
    }
