"""Fixtures of the benchmarks (pytest-benchmark) under benchmarks/.

Implementations measured (the ``bench_impl`` parameter, ids ``impl=<name>``; the reference first, so every ratio to
the reference is measured in the same run):

- ``reference`` — this repository's reference GRU4Rec, always;
- ``official`` — the official PyTorch port from a checkout, when ``OFFICIAL_GRU4REC_PATH`` is set;
- every GRU4Rec adapter selected with the conformance plugin's ``--impl`` (``pytest benchmarks/ --impl recpack``;
  the registry's reference adapter is left out: it is the reference measured directly).

Environment (all optional):

| variable | meaning | default |
|---|---|---|
| ``GRU4REC_BENCH_DEVICE`` | device of every implementation | ``--device`` (cpu) |
| ``GRU4REC_BENCH_SCALE`` | epoch data: ``ci``, ``ci*F`` or a fraction of the full §1.6a raw size (1 = full) | ``ci`` on CPU, ``1`` on CUDA |
| ``GRU4REC_BENCH_DATASETS`` | comma-separated datasets of the epoch/evaluation benchmarks | all five |
| ``GRU4REC_BENCH_LOSSES`` | comma-separated losses | both |
| ``GRU4REC_BENCH_SWEEPS`` | ``ci`` (2 small points per sweep), ``cpu`` or ``gpu`` sweep grids | ``cpu``/``gpu`` by device |
| ``GRU4REC_BENCH_ROUNDS`` / ``GRU4REC_BENCH_WARMUP`` | timed rounds / warm-up rounds of an epoch benchmark | 3 / 1 |
| ``GRU4REC_BENCH_SWEEP_ROUNDS`` | timed rounds of a sweep point (warm-up as above on CUDA, none on CPU) | 1 |
| ``GRU4REC_BENCH_THREADS`` | torch intra-op threads | 1 |
| ``GRU4REC_BENCH_STEP_IMPL`` | the reference's ``step_impl`` | ``auto`` |
| ``OFFICIAL_GRU4REC_PATH`` | checkout of hidasib/GRU4Rec_PyTorch_Official | unset (official not measured) |
| ``GRU4REC_BENCH_REPORT_DIR`` | where the Markdown/PNG report of a ``--benchmark-json`` run goes | reports/out/benchmarks |

With ``--benchmark-json=PATH`` the terminal summary also writes the Markdown + PNG report
(``benchmarks/report.py``) into ``reports/out/benchmarks/<UTC timestamp>/``.
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

from gru4rec_conformance.benchmarks import runners as R  # noqa: E402
from gru4rec_conformance.benchmarks.workload import LOSSES, DATASETS  # noqa: E402

_RESULTS: dict = {}  # (group, case) -> {impl: summary dict}; insertion order = run order
_RUNNERS_KEY = pytest.StashKey[list]()


def _env_list(name: str, allowed, default) -> list:
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

    def __init__(self, config):
        self.device = bench_device(config)
        self.cuda = self.device.startswith("cuda")
        self.scale = os.environ.get("GRU4REC_BENCH_SCALE") or ("1" if self.cuda else "ci")
        self.datasets = _env_list("GRU4REC_BENCH_DATASETS", DATASETS, DATASETS)
        self.losses = _env_list("GRU4REC_BENCH_LOSSES", LOSSES, LOSSES)
        self.sweeps = os.environ.get("GRU4REC_BENCH_SWEEPS") or ("gpu" if self.cuda else "cpu")
        if self.sweeps not in ("ci", "cpu", "gpu"):
            raise pytest.UsageError(f"GRU4REC_BENCH_SWEEPS={self.sweeps!r}: one of ci, cpu, gpu")
        self.rounds = int(os.environ.get("GRU4REC_BENCH_ROUNDS", "3"))
        self.warmup = int(os.environ.get("GRU4REC_BENCH_WARMUP", "1"))
        self.sweep_rounds = int(os.environ.get("GRU4REC_BENCH_SWEEP_ROUNDS", "1"))
        self.sweep_warmup = self.warmup if self.cuda else 0
        self.threads = int(os.environ.get("GRU4REC_BENCH_THREADS", "1"))
        self.seed = 1

    def as_dict(self) -> dict:
        return {k: v for k, v in vars(self).items()}


def pytest_configure(config):
    config.addinivalue_line("markers", "benchmark: a pytest-benchmark timing (benchmarks/)")
    config.addinivalue_line("markers", "gpu: needs a GPU")


def _runners(config) -> list:
    if _RUNNERS_KEY in config.stash:
        return config.stash[_RUNNERS_KEY]
    device = bench_device(config)
    out: list = [R.ReferenceRunner(device)]
    official = os.environ.get("OFFICIAL_GRU4REC_PATH")
    if official:
        out.append(R.OfficialRunner(official, device))
    try:
        from gru4rec_conformance.conformance._harness.plugin import STATE_KEY
        state = config.stash.get(STATE_KEY, None)
    except ImportError:  # the conformance plugin is not loaded (benchmarks run on their own)
        state = None
    for (family, name), handle in (state.handles.items() if state is not None else ()):
        if family == "gru4rec" and handle.spec.role != "reference":
            out.append(R.AdapterRunner(handle))
    config.stash[_RUNNERS_KEY] = out
    return out


def pytest_generate_tests(metafunc):
    if "bench_impl" in metafunc.fixturenames:
        names = [r.name for r in _runners(metafunc.config)]
        metafunc.parametrize("bench_impl", names, ids=[f"impl={n}" for n in names], indirect=True, scope="session")
    if "bench_dataset" in metafunc.fixturenames:
        metafunc.parametrize("bench_dataset", _env_list("GRU4REC_BENCH_DATASETS", DATASETS, DATASETS))
    if "bench_loss" in metafunc.fixturenames:
        metafunc.parametrize("bench_loss", _env_list("GRU4REC_BENCH_LOSSES", LOSSES, LOSSES))


def pytest_collection_modifyitems(session, config, items):
    """Run the implementations of one case back to back, the reference first: wall-clock ratios then compare runs
    minutes apart at most by seconds, not by the whole suite (the load of a shared machine drifts)."""
    names = [r.name for r in _runners(config)] if any(_impl_of(i) for i in items) else []
    first: dict = {}
    keyed = []
    for pos, item in enumerate(items):
        impl = _impl_of(item)
        if impl is None:
            keyed.append(((pos,), 0, item))
            continue
        params = {k: v for k, v in item.callspec.params.items() if k != "bench_impl"}
        case = (item.path, item.originalname, tuple(sorted((k, repr(v)) for k, v in params.items())))
        first.setdefault(case, pos)
        keyed.append(((first[case],), names.index(impl) if impl in names else len(names), item))
    keyed.sort(key=lambda t: (t[0], t[1]))
    items[:] = [t[2] for t in keyed]


def _impl_of(item) -> str | None:
    cs = getattr(item, "callspec", None)
    return cs.params.get("bench_impl") if cs is not None else None


@pytest.fixture(scope="session")
def bench_impl(request) -> R.Runner:
    """The implementation measured (parametrized by name: the reference, the official port, --impl adapters).
    On CUDA each is warmed up once with two tiny untimed fits (CUDA context, cuBLAS handles, allocator pools), so
    that the first timed benchmark does not pay for them."""
    runner = next(r for r in _runners(request.config) if r.name == request.param)
    if BenchConfig(request.config).cuda and not getattr(runner, "_warmed_up", False):
        _warm_up(runner)
    return runner


def _warm_up(runner: R.Runner) -> None:
    from gru4rec_conformance.benchmarks.workload import best_params, sweep_frame
    df = sweep_frame(400, 2_000, seed=0)
    for loss in LOSSES:
        try:
            state = runner.prepare(df, best_params("coveo", loss), seed=0)
            try:
                runner.run(state)
            finally:
                runner.close(state)
        except Exception as exc:  # noqa: BLE001 - an unsupported loss or a failing build shows up in the benchmark
            if not _unsupported(exc):
                print(f"warm-up of {runner.name} ({loss}) failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    runner._warmed_up = True


@pytest.fixture(scope="session")
def bench_config(pytestconfig) -> BenchConfig:
    return BenchConfig(pytestconfig)


@pytest.fixture(scope="session")
def epoch_datasets(bench_config):
    """Synthetic prepared data per dataset shape at the session's scale, generated (and cached on disk) once."""
    from gru4rec_conformance.benchmarks.workload import epoch_data, parse_scale
    made: dict = {}

    def get(name: str):
        if name not in made:
            made[name] = epoch_data(name, parse_scale(bench_config.scale, name))
        return made[name]
    return get


@pytest.fixture(scope="session", autouse=True)
def _bench_threads(bench_config):
    before = torch.get_num_threads()
    torch.set_num_threads(bench_config.threads)
    yield
    torch.set_num_threads(before)


def _rates(res: R.EpochResult) -> dict:
    out = {"epoch_seconds": res.epoch_seconds, "fit_seconds": res.fit_seconds, "minibatches": res.n_steps,
           "events": res.n_events, "minibatches_per_s": res.n_steps / res.epoch_seconds,
           "events_per_s": res.n_events / res.epoch_seconds, "cpu_seconds": res.cpu_seconds,
           "peak_rss_mb": res.peak_rss_mb, "base_rss_mb": res.base_rss_mb,
           "cuda_max_allocated_mb": res.cuda_max_allocated_mb}
    if res.cpu_seconds:
        out["minibatches_per_cpu_s"] = res.n_steps / res.cpu_seconds
        out["events_per_cpu_s"] = res.n_events / res.cpu_seconds
    return out


def _unsupported(exc: BaseException) -> bool:
    try:
        from gru4rec_conformance.implementations.base import Unsupported
    except ImportError:
        return False
    return isinstance(exc, Unsupported)


def time_epochs(benchmark, runner: R.Runner, cfg: BenchConfig, *, group: str, case: str, train, hp: dict,
                extra: dict, rounds: int, warmup: int) -> dict:
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
        benchmark.pedantic(target, setup=setup, teardown=runner.close, rounds=rounds, iterations=1,
                           warmup_rounds=warmup)
    except Exception as exc:
        if _unsupported(exc):
            pytest.skip(f"unsupported by {runner.name}: {exc}")
        raise
    timed = results[-rounds:] if len(results) >= rounds else results
    best = min(timed, key=lambda r: r.epoch_seconds)
    summary = {**_rates(best), "rounds_epoch_seconds": [r.epoch_seconds for r in timed],
               "step_info": best.info or None}
    record(benchmark, runner, cfg, group, case, summary, hp=hp, extra=extra)
    return summary


def time_eval(benchmark, runner: R.Runner, cfg: BenchConfig, *, group: str, case: str, train, test, hp: dict,
              extra: dict, rounds: int, warmup: int) -> dict:
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
        benchmark.pedantic(target, setup=setup, teardown=runner.close, rounds=rounds, iterations=1,
                           warmup_rounds=warmup)
    except Exception as exc:
        if _unsupported(exc):
            pytest.skip(f"unsupported by {runner.name}: {exc}")
        raise
    timed = results[-rounds:] if len(results) >= rounds else results
    best = min(timed, key=lambda r: r.seconds)
    summary = {"eval_seconds": best.seconds, "eval_events": best.n_events,
               "eval_events_per_s": best.n_events / best.seconds, "eval_cpu_seconds": best.cpu_seconds,
               "recall@20": best.metrics.get("recall@20"), "mrr@20": best.metrics.get("mrr@20")}
    if best.cpu_seconds:
        summary["eval_events_per_cpu_s"] = best.n_events / best.cpu_seconds
    record(benchmark, runner, cfg, group, case, summary, hp=hp, extra=extra)
    return summary


def record(benchmark, runner: R.Runner, cfg: BenchConfig, group: str, case: str, summary: dict, *, hp: dict,
           extra: dict) -> None:
    """Put the run's description, settings and results into ``extra_info`` (and the ratio to the reference's
    result of the same group and case, when the reference ran before in this session)."""
    key = (group, case)
    ref = _RESULTS.get(key, {}).get("reference")
    metric = "epoch_seconds" if "epoch_seconds" in summary else "eval_seconds"
    if ref is not None and runner.name != "reference" and ref.get(metric):
        summary[f"{metric}_over_reference"] = summary[metric] / ref[metric]
        if summary.get("cpu_seconds") and ref.get("cpu_seconds"):
            summary["cpu_seconds_over_reference"] = summary["cpu_seconds"] / ref["cpu_seconds"]
    _RESULTS.setdefault(key, {})[runner.name] = summary
    benchmark.extra_info.update({**runner.describe(), "case": case, "hparams": hp, **extra, **summary,
                                 "settings": {"scale": cfg.scale, "rounds": cfg.rounds, "warmup": cfg.warmup,
                                              "threads": cfg.threads, "sweeps": cfg.sweeps},
                                 "versions": R.versions(cfg.device), "study": runner.study})


def pytest_benchmark_update_json(config, benchmarks, output_json):
    output_json["gru4rec_bench"] = {"device": bench_device(config), "versions": R.versions(bench_device(config)),
                                    "implementations": [r.describe() for r in _runners(config)],
                                    "env": {k: v for k, v in os.environ.items() if k.startswith("GRU4REC_")}}


def _fmt(v, width: int, prec: int) -> str:
    return f"{v:{width}.{prec}f}" if isinstance(v, (int, float)) else f"{'-':>{width}}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _RESULTS:
        return
    tr = terminalreporter
    tr.write_sep("-", "GRU4Rec benchmarks (best round; ratio = this / reference, > 1: slower than the reference)")
    tr.write_line("CPU-time rates (per CPU second of the process) are steadier than wall-clock rates on a shared "
                  "machine.")
    tr.write_line(f"{'group':<34}{'case':<26}{'impl':<12}{'seconds':>9}{'mb/s':>9}{'ev/s':>10}{'mb/CPUs':>9}"
                  f"{'ev/CPUs':>10}{'peakMB':>8}{'ratio':>7}{'ratioCPU':>9}")
    for (group, case), per in _RESULTS.items():
        for impl, s in per.items():
            sec = s.get("epoch_seconds", s.get("eval_seconds"))
            ratio = s.get("epoch_seconds_over_reference", s.get("eval_seconds_over_reference"))
            ev = s.get("events_per_s", s.get("eval_events_per_s"))
            evc = s.get("events_per_cpu_s", s.get("eval_events_per_cpu_s"))

            tr.write_line(f"{group[:33]:<34}{case[:25]:<26}{impl[:11]:<12}{_fmt(sec, 9, 2)}"
                          f"{_fmt(s.get('minibatches_per_s'), 9, 1)}{_fmt(ev, 10, 0)}"
                          f"{_fmt(s.get('minibatches_per_cpu_s'), 9, 1)}{_fmt(evc, 10, 0)}"
                          f"{_fmt(s.get('peak_rss_mb') or s.get('cuda_max_allocated_mb'), 8, 0)}{_fmt(ratio, 7, 2)}"
                          f"{_fmt(s.get('cpu_seconds_over_reference'), 9, 2)}")
    path = config.getoption("benchmark_json", None)
    if path and Path(path).is_file() and not os.environ.get("GRU4REC_BENCH_NO_REPORT"):
        from gru4rec_conformance.benchmarks.report import write_report
        out_root = Path(os.environ.get("GRU4REC_BENCH_REPORT_DIR", str(ROOT / "reports" / "out" / "benchmarks")))
        with contextlib.suppress(FileNotFoundError):
            folder = write_report(Path(path), out_root)
            tr.write_line(f"benchmark report: {folder / 'report.md'}")
