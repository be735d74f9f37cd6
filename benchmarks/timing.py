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


class BenchConfig:
    """The benchmark settings of this session (see the module docstring)."""

    # defaults of the settings added later (an instance made without __init__, as in tests, has them)
    data = "synthetic"
    minibatches = 1000
    results_jsonl: str | None = None

    def __init__(self, config):
        self.device = bench_device(config)
        self.cuda = self.device.startswith("cuda")
        self.scale = os.environ.get("GRU4REC_BENCH_SCALE") or ("1" if self.cuda else "ci")
        self.datasets = env_list("GRU4REC_BENCH_DATASETS", DATASETS, DATASETS)
        self.losses = env_list("GRU4REC_BENCH_LOSSES", LOSSES, LOSSES)
        self.sweeps = os.environ.get("GRU4REC_BENCH_SWEEPS") or ("gpu" if self.cuda else "cpu")
        if self.sweeps not in ("ci", "cpu", "gpu"):
            raise pytest.UsageError(f"GRU4REC_BENCH_SWEEPS={self.sweeps!r}: one of ci, cpu, gpu")
        self.rounds = int(os.environ.get("GRU4REC_BENCH_ROUNDS", "3"))
        self.warmup = int(os.environ.get("GRU4REC_BENCH_WARMUP", "1"))
        self.sweep_rounds = int(os.environ.get("GRU4REC_BENCH_SWEEP_ROUNDS", "1"))
        self.sweep_warmup = self.warmup if self.cuda else 0
        self.threads = int(os.environ.get("GRU4REC_BENCH_THREADS", "1"))
        self.seed = 1
        # 'synthetic': the study's preprocessing of generated raw data at `scale`; 'catalogue': the real item counts
        # (workload.catalogue_data) with about `minibatches` x scale minibatches per epoch
        self.data = os.environ.get("GRU4REC_BENCH_DATA") or "synthetic"
        if self.data not in ("synthetic", "catalogue"):
            raise pytest.UsageError(f"GRU4REC_BENCH_DATA={self.data!r}: one of synthetic, catalogue")
        self.minibatches = int(os.environ.get("GRU4REC_BENCH_MINIBATCHES", "1000"))
        self.results_jsonl = os.environ.get("GRU4REC_BENCH_RESULTS_JSONL") or None

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
) -> dict:
    """Time one-epoch fits of ``runner`` with pytest-benchmark (``pedantic``: a fresh model per round, built in
    the untimed setup) and record the best round (smallest epoch time) in ``extra_info`` and the session summary.
    An ``Unsupported`` from the implementation skips the test with its reason. Returns the recorded summary."""
    results: list[R.EpochResult] = []

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
        raise
    timed = results[-rounds:] if len(results) >= rounds else results
    best = min(timed, key=lambda r: r.epoch_seconds)
    summary = {**_rates(best), "rounds_epoch_seconds": [r.epoch_seconds for r in timed], "step_info": best.info or None}
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
    if ref is not None and runner.name != "reference" and ref.get(metric):
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
                "minibatches": cfg.minibatches if cfg.data == "catalogue" else None,
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
