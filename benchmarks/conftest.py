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
| ``GRU4REC_BENCH_SCALE`` | epoch data: ``ci``, ``ci*F`` or a fraction of the full raw size (docs/datasets.md, 'Published statistics'; 1 = full) | ``ci`` on CPU, ``1`` on CUDA |
| ``GRU4REC_BENCH_DATASETS`` | comma-separated datasets of the epoch/evaluation benchmarks | all five |
| ``GRU4REC_BENCH_LOSSES`` | comma-separated losses | both |
| ``GRU4REC_BENCH_SWEEPS`` | ``ci`` (2 small points per sweep), ``cpu`` or ``gpu`` sweep grids | ``cpu``/``gpu`` by device |
| ``GRU4REC_BENCH_ROUNDS`` / ``GRU4REC_BENCH_WARMUP`` | timed rounds / warm-up rounds of an epoch benchmark | 3 / 1 |
| ``GRU4REC_BENCH_SWEEP_ROUNDS`` | timed rounds of a sweep point (warm-up as above on CUDA, none on CPU) | 1 |
| ``GRU4REC_BENCH_THREADS`` | torch intra-op threads | 1 |
| ``GRU4REC_BENCH_STEP_IMPL`` | the reference's ``step_impl`` | ``auto`` |
| ``GRU4REC_BENCH_REQUIRE_GRAPH`` | ``1``: a reference fit on CUDA that did not replay a CUDA graph fails | unset |
| ``GRU4REC_BENCH_DATA`` | ``synthetic`` (generated raw data, the study's preprocessing), ``catalogue`` (the study's item counts, ``workload.catalogue_data``) or ``padded`` (the study's item counts, few trained minibatches, ``workload.padded_data``) | ``synthetic`` |
| ``GRU4REC_BENCH_MINIBATCHES`` | catalogue data: minibatches per epoch at scale 1 (more where every item must occur) | 1000 |
| ``GRU4REC_BENCH_EPOCH_LIMIT`` | per-epoch CPU-seconds limit of the adapters: a fit past it stops at the next optimizer step, reported "> limit" with the steps reached (``limit.py``) | unset (no limit) |
| ``GRU4REC_BENCH_INTERLEAVE`` | ``0``: no reference epoch after each other implementation's (ratios then to the reference's own benchmark) | ``1`` |
| ``GRU4REC_BENCH_VARIANTS`` | ``best`` (the study's parameters) and/or ``oob`` (an adapter's declared defaults, the loss set) | ``best`` |
| ``GRU4REC_BENCH_WORKER_PYTHONS`` | ``name=python,...`` (``name*`` a prefix): an adapter's worker interpreter (tox environments) | unset |
| ``GRU4REC_BENCH_ORDER`` | ``impl``: every case of one implementation before the next (one adapter worker alive at a time; the interleaved reference epochs keep the ratios local) | cases first |
| ``GRU4REC_BENCH_SWEEP_NAMES`` | comma-separated sweeps of ``test_scalability.py`` | all |
| ``GRU4REC_BENCH_RESULTS_JSONL`` | append every finished case to this JSON-lines file as it is recorded, and every skipped one with its reason (``timing.skip_record``) | unset |
| ``OFFICIAL_GRU4REC_PATH`` | checkout of hidasib/GRU4Rec_PyTorch_Official | unset (official not measured) |
| ``GRU4REC_BENCH_REPORT_DIR`` | where the Markdown/PNG report of a ``--benchmark-json`` run goes | reports/out/benchmarks |

With ``--benchmark-json=PATH`` the terminal summary also writes the Markdown + PNG report
(``benchmarks/report.py``) into ``reports/out/benchmarks/<UTC timestamp>/``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

from gru4rec_conformance.benchmarks import runners as R  # noqa: E402
from gru4rec_conformance.benchmarks.timing import RESULTS as _RESULTS  # noqa: E402
from gru4rec_conformance.benchmarks.timing import SKIPPED as _SKIPPED  # noqa: E402
from gru4rec_conformance.benchmarks.timing import (  # noqa: E402
    BenchConfig,
    append_jsonl,
    bench_device,
    env_list,
    is_unsupported,
    results_jsonl_path,
    skip_record,
)
from gru4rec_conformance.benchmarks.workload import DATASETS, LOSSES  # noqa: E402
from gru4rec_conformance.conformance._records.runinfo import gru4rec_env  # noqa: E402

_RUNNERS_KEY = pytest.StashKey[list]()


def pytest_configure(config):
    config.addinivalue_line("markers", "benchmark: a pytest-benchmark timing (benchmarks/)")
    config.addinivalue_line("markers", "gpu: needs a GPU")
    if importlib.util.find_spec("pytest_benchmark") is None:
        raise pytest.UsageError(
            "the benchmarks need pytest-benchmark, which is not installed here: pip install 'gru4rec-conformance[bench]'"
        )


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
    cfg = BenchConfig(config)
    pythons = R.worker_pythons()
    for (family, name), handle in state.handles.items() if state is not None else ():
        if family == "gru4rec" and handle.spec.role != "reference":
            out.append(R.AdapterRunner(handle, cpu_limit_s=cfg.epoch_limit, python=R._python_for(name, pythons)))
    config.stash[_RUNNERS_KEY] = out
    return out


def pytest_generate_tests(metafunc):
    if "bench_impl" in metafunc.fixturenames:
        names = [r.name for r in _runners(metafunc.config)]
        metafunc.parametrize("bench_impl", names, ids=[f"impl={n}" for n in names], indirect=True, scope="session")
    if "bench_dataset" in metafunc.fixturenames:
        metafunc.parametrize("bench_dataset", env_list("GRU4REC_BENCH_DATASETS", DATASETS, DATASETS))
    if "bench_loss" in metafunc.fixturenames:
        metafunc.parametrize("bench_loss", env_list("GRU4REC_BENCH_LOSSES", LOSSES, LOSSES))
    if "bench_variant" in metafunc.fixturenames:
        metafunc.parametrize("bench_variant", BenchConfig(metafunc.config).variants)


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
    if os.environ.get("GRU4REC_BENCH_ORDER") == "impl":  # every case of one implementation, then the next one
        keyed.sort(key=lambda t: (t[1], t[0]))
    else:
        keyed.sort(key=lambda t: (t[0], t[1]))
    items[:] = [t[2] for t in keyed]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Record a skipped benchmark test (one that uses the ``benchmark`` fixture; skipped in its setup or its body,
    not an xfail): its skip record (``timing.skip_record``: group, case, reason, ``skipped`` True) goes into
    ``timing.SKIPPED`` and, with ``GRU4REC_BENCH_RESULTS_JSONL`` set, is appended to that file at once like a
    finished case (``timing.append_jsonl``: one write, fsynced), so the report shows the reason instead of a bare
    "not run". A file that cannot be written is reported on stderr, never as a failure of the test."""
    report = yield
    if (
        report.skipped
        and report.when in ("setup", "call")
        and not hasattr(report, "wasxfail")
        and "benchmark" in getattr(item, "fixturenames", ())
    ):
        _record_skip(item, report)
    return report


def _skip_reason(longrepr) -> str:
    """The reason of a skip report's ``longrepr`` (``(path, line, "Skipped: reason")`` or a string)."""
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    text = str(text)
    return text[len("Skipped: ") :] if text.startswith("Skipped: ") else text


def _record_skip(item, report) -> None:
    cs = getattr(item, "callspec", None)
    params = dict(cs.params) if cs is not None else {}
    impl = params.get("bench_impl")
    runner = next((r for r in item.config.stash.get(_RUNNERS_KEY, []) if r.name == impl), None)
    row = skip_record(
        getattr(item, "originalname", item.name),
        params,
        _skip_reason(report.longrepr),
        nodeid=item.nodeid,
        when=report.when,
        kind=runner.kind if runner is not None else None,
        case_id=cs.id if cs is not None else "",
    )
    _SKIPPED.append(row)
    path = results_jsonl_path()
    if path:
        try:
            append_jsonl(path, row)
        except OSError as exc:
            print(f"GRU4REC_BENCH_RESULTS_JSONL={path}: skip of {item.nodeid} not recorded: {exc}", file=sys.stderr)


def _impl_of(item) -> str | None:
    cs = getattr(item, "callspec", None)
    return cs.params.get("bench_impl") if cs is not None else None


@pytest.fixture(scope="session")
def bench_impl(request) -> R.Runner:
    """The implementation measured (parametrized by name: the reference, the official port, --impl adapters).
    On CUDA each is warmed up once with two tiny untimed fits (CUDA context, cuBLAS handles, allocator pools), so
    that the first timed benchmark does not pay for them."""
    runner = next(r for r in _runners(request.config) if r.name == request.param)
    if os.environ.get("GRU4REC_BENCH_ORDER") == "impl":  # one worker alive at a time: the memory of a 2-core box
        for other in _runners(request.config):
            if other is not runner and isinstance(other, R.AdapterRunner):
                other.shutdown()
    if BenchConfig(request.config).cuda and not getattr(runner, "_warmed_up", False):
        _warm_up(runner)
    return runner


@pytest.fixture(scope="session")
def bench_reference(request) -> R.Runner:
    """The reference's runner (for the interleaved reference epochs after every other implementation's)."""
    return _runners(request.config)[0]


@pytest.fixture(scope="session", autouse=True)
def _shutdown_adapters(request):
    """Adapters keep one worker for the whole session (AdapterRunner); close them at its end."""
    yield
    for r in request.config.stash.get(_RUNNERS_KEY, []):
        if isinstance(r, R.AdapterRunner):
            r.shutdown()


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
            if not is_unsupported(exc):
                print(f"warm-up of {runner.name} ({loss}) failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    runner._warmed_up = True


@pytest.fixture(scope="session")
def bench_config(pytestconfig) -> BenchConfig:
    return BenchConfig(pytestconfig)


@pytest.fixture(scope="session")
def epoch_datasets(bench_config):
    """Data per dataset shape at the session's scale, made once: ``get(name, batch_size)``. ``GRU4REC_BENCH_DATA``
    ``synthetic`` (default): the study's preprocessing of generated raw data (cached on disk); ``catalogue``: the
    real item counts with about ``GRU4REC_BENCH_MINIBATCHES`` x scale minibatches of ``batch_size`` per epoch;
    ``padded``: the same with one-event sessions for the items the trained sessions lack."""
    from gru4rec_conformance.benchmarks.workload import catalogue_data, epoch_data, padded_data, parse_scale

    made: dict = {}

    def get(name: str, batch_size: int):
        """The data of dataset ``name``; ``batch_size`` sizes the catalogue mode's epoch (minibatches x B)."""
        key = (name, batch_size if bench_config.data != "synthetic" else None)
        if key not in made:
            scale = parse_scale(bench_config.scale, name)
            if bench_config.data == "catalogue":
                made[key] = catalogue_data(name, bench_config.minibatches, batch_size, scale)
            elif bench_config.data == "padded":
                made[key] = padded_data(name, bench_config.minibatches, batch_size, scale)
            else:
                made[key] = epoch_data(name, scale)
        return made[key]

    return get


@pytest.fixture(scope="session", autouse=True)
def _bench_threads(bench_config):
    before = torch.get_num_threads()
    torch.set_num_threads(bench_config.threads)
    yield
    torch.set_num_threads(before)


@pytest.hookimpl(optionalhook=True)  # pytest-benchmark's hook; without the plugin the usage error above says why
def pytest_benchmark_update_json(config, benchmarks, output_json):
    output_json["gru4rec_bench"] = {
        "device": bench_device(config),
        "versions": R.versions(bench_device(config)),
        "implementations": [r.describe() for r in _runners(config)],
        "env": gru4rec_env(),  # secrets (a PostgreSQL URL's password) redacted: the JSON is a shared report
    }
    if _SKIPPED:  # the skipped tests with their reasons (report.py fills the matrix's cells with them)
        output_json["gru4rec_bench"]["skipped"] = list(_SKIPPED)


def _fmt(v, width: int, prec: int) -> str:
    return f"{v:{width}.{prec}f}" if isinstance(v, (int, float)) else f"{'-':>{width}}"


def _fmt_ratio(v, width: int) -> str:
    # significant figures, not decimals: a model thousands of times faster than the reference would read "0.00"
    return f" {v:{width - 1}.3g}" if isinstance(v, (int, float)) else f"{'-':>{width}}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _RESULTS:
        return
    tr = terminalreporter
    tr.write_sep("-", "GRU4Rec benchmarks (best round; ratio = this / reference, > 1: slower than the reference)")
    tr.write_line(
        "CPU-time rates (per CPU second of the process) are steadier than wall-clock rates on a shared machine."
    )
    tr.write_line(
        f"{'group':<34}{'case':<26}{'impl':<12}{'seconds':>9}{'mb/s':>9}{'ev/s':>10}{'mb/CPUs':>9}"
        f"{'ev/CPUs':>10}{'peakMB':>8}{'ratio':>7}{'ratioCPU':>9}"
    )
    for (group, case), per in _RESULTS.items():
        for impl, s in per.items():
            sec = s.get("epoch_seconds", s.get("eval_seconds"))
            ratio = s.get("epoch_seconds_over_reference", s.get("eval_seconds_over_reference"))
            ev = s.get("events_per_s", s.get("eval_events_per_s"))
            evc = s.get("events_per_cpu_s", s.get("eval_events_per_cpu_s"))

            tr.write_line(
                f"{group[:33]:<34}{case[:25]:<26}{impl[:11]:<12}{_fmt(sec, 9, 2)}"
                f"{_fmt(s.get('minibatches_per_s'), 9, 1)}{_fmt(ev, 10, 0)}"
                f"{_fmt(s.get('minibatches_per_cpu_s'), 9, 1)}{_fmt(evc, 10, 0)}"
                f"{_fmt(s.get('peak_rss_mb') or s.get('cuda_max_allocated_mb'), 8, 0)}{_fmt_ratio(ratio, 7)}"
                f"{_fmt_ratio(s.get('cpu_seconds_over_reference'), 9)}"
            )
    path = config.getoption("benchmark_json", None)
    if path and Path(path).is_file() and not os.environ.get("GRU4REC_BENCH_NO_REPORT"):
        from gru4rec_conformance.benchmarks.report import write_report

        out_root = Path(os.environ.get("GRU4REC_BENCH_REPORT_DIR", str(ROOT / "reports" / "out" / "benchmarks")))
        with contextlib.suppress(FileNotFoundError):
            folder = write_report(Path(path), out_root)
            tr.write_line(f"benchmark report: {folder / 'report.md'}")
