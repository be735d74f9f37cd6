"""A pytest plugin that fits a stage of the GPU check into its time: cases that would end after the stage's
deadline are dropped before they start, each recorded with the reason.

    GPU_STAGE_DEADLINE=<unix seconds> python -m pytest -p gru4rec_conformance.benchmarks.gpu.timebox NODEIDS...

Without ``GPU_STAGE_DEADLINE`` the plugin does nothing. With it, the tests run in their collected order; the
tests of one *case* (the same test function and parameters but the implementation, ``bench_impl``: the reference
and the official port of one dataset and loss) run or are dropped together, so a case never has one side only.
Before the first test of a case, the time its tests will take is estimated from the tests already run in this
session: seconds per unit of :func:`weight` (minibatches of an epoch, catalogue items × test events of an
evaluation, the swept value of a sweep point, 1 otherwise), per test function and implementation (another
implementation's rate of the same test function where this one has none yet, the largest). A case is dropped when
``now + estimate > GPU_STAGE_DEADLINE``; the first case of a session always runs (nothing to estimate from: the
stage's own ``timeout`` bounds it). A later, cheaper case may still run after a dropped one.

A dropped test is skipped in its setup with the reason ``dropped for time: ...`` (estimate and time left). The
benchmarks' own hook (``benchmarks/conftest.py``) appends a skip line to ``GRU4REC_BENCH_RESULTS_JSONL`` for a
benchmark test; for any other test (the golden steps) this plugin appends the same kind of line itself
(``timing.skip_record``), so every dropped case is in the results file. The terminal summary lists them.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import pytest

ENV = "GPU_STAGE_DEADLINE"
DROPPED = "dropped for time"
_KEY = pytest.StashKey["Timebox"]()


def _params(item) -> dict:
    cs = getattr(item, "callspec", None)
    return dict(cs.params) if cs is not None else {}


def _test_name(item) -> str:
    return str(getattr(item, "originalname", None) or item.name)


def case_key(item) -> tuple:
    """The case of ``item``: its file, its test function and its parameters other than the implementation."""
    params = {k: v for k, v in _params(item).items() if k != "bench_impl"}
    return (str(item.path), _test_name(item), tuple(sorted((k, repr(v)) for k, v in params.items())))


def weight(item) -> float:
    """The relative amount of work of ``item`` (dimensionless; only ratios between tests of one function matter).

    ``test_epoch``: the epoch's minibatches as ``workload.catalogue_data`` makes them (``GRU4REC_BENCH_MINIBATCHES``
    × scale, raised until every catalogue item occurs); ``test_evaluation``: catalogue items × the dataset's test
    events per session; ``test_sweep``: the swept value; any other test: 1. A parameter it cannot read gives 1."""
    p = _params(item)
    name = _test_name(item)
    try:
        from gru4rec_conformance.benchmarks import workload as W

        scale_text = os.environ.get("GRU4REC_BENCH_SCALE", "1")
        dataset = p.get("bench_dataset")
        if name == "test_epoch" and dataset and p.get("bench_loss"):
            scale = W.parse_scale(scale_text, dataset)
            shape = W.published_shape(dataset)
            eps = float(shape["train"]["events_per_session"])
            batch = int(W.best_params(dataset, p["bench_loss"])["batch_size"])
            minibatches = int(os.environ.get("GRU4REC_BENCH_MINIBATCHES", "1000"))
            items = W.catalogue_items(dataset, scale)
            return float(max(max(1, round(minibatches * scale)), items * (eps - 1.0) / eps / batch))
        if name == "test_evaluation" and dataset:
            scale = W.parse_scale(scale_text, dataset)
            t_eps = float(W.published_shape(dataset)["test"]["events_per_session"])
            return float(W.catalogue_items(dataset, scale)) * t_eps
        point = p.get("sweep_point")
        if name == "test_sweep" and isinstance(point, (tuple, list)) and len(point) == 2:
            return float(point[1])
    except (ValueError, KeyError, TypeError, ImportError):
        return 1.0
    return 1.0


@dataclass
class Timebox:
    """The session's state: the deadline, the measured rates, the decisions per case and what was dropped."""

    deadline: float
    rates: dict = field(default_factory=dict)  # (test name, impl) -> seconds per unit of weight, the largest seen
    decided: dict = field(default_factory=dict)  # case key -> None (run) or the reason it was dropped
    dropped: list = field(default_factory=list)  # node ids
    started: dict = field(default_factory=dict)  # node id -> time.monotonic() at its start

    def rate(self, item) -> float | None:
        name, impl = _test_name(item), _params(item).get("bench_impl")
        if (name, impl) in self.rates:
            return self.rates[(name, impl)]
        same = [r for (n, _), r in self.rates.items() if n == name]
        return max(same) if same else None

    def decide(self, item, items) -> str | None:
        """None to run ``item``'s case, else the reason to drop it (decided once per case)."""
        key = case_key(item)
        if key in self.decided:
            return self.decided[key]
        group = [i for i in items if case_key(i) == key]
        rates = [self.rate(i) for i in group]
        reason = None
        if any(r is not None for r in rates):
            fallback = max(r for r in rates if r is not None)
            estimate = sum((r if r is not None else fallback) * weight(i) for r, i in zip(rates, group))
            left = self.deadline - time.time()
            if estimate > left:
                reason = f"{DROPPED}: estimated {estimate:.0f} s, {max(left, 0):.0f} s left before the stage's end"
        self.decided[key] = reason
        return reason

    def finished(self, item, seconds: float) -> None:
        w = weight(item)
        key = (_test_name(item), _params(item).get("bench_impl"))
        self.rates[key] = max(self.rates.get(key, 0.0), seconds / max(w, 1e-9))


def deadline_from_env() -> float | None:
    """``GPU_STAGE_DEADLINE`` as unix seconds, or None when unset. Raises pytest.UsageError naming the variable
    when it is not a number."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise pytest.UsageError(f"{ENV}={text!r}: expected unix seconds (date +%s)") from None


def pytest_configure(config) -> None:
    deadline = deadline_from_env()
    if deadline is not None:
        config.stash[_KEY] = Timebox(deadline)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    box = item.config.stash.get(_KEY, None)
    if box is None:
        return
    box.started[item.nodeid] = time.monotonic()
    reason = box.decide(item, item.session.items)
    if reason is not None:
        box.dropped.append(item.nodeid)
        pytest.skip(reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    box = item.config.stash.get(_KEY, None)
    if box is None:
        return
    report = outcome.get_result()
    if report.when == "setup" and report.skipped and item.nodeid in box.dropped:
        if "benchmark" not in getattr(item, "fixturenames", ()):
            _record(item, box.decided.get(case_key(item)) or DROPPED)
    elif report.when == "teardown" and item.nodeid in box.started and item.nodeid not in box.dropped:
        box.finished(item, time.monotonic() - box.started[item.nodeid])


def _record(item, reason: str) -> None:
    """A skip line for a dropped test that the benchmarks' hook does not record (not a benchmark test)."""
    from gru4rec_conformance.benchmarks.timing import append_jsonl, results_jsonl_path, skip_record

    path = results_jsonl_path()
    if not path:
        return
    cs = getattr(item, "callspec", None)
    row = skip_record(
        _test_name(item), _params(item), reason, nodeid=item.nodeid, when="setup", case_id=cs.id if cs else ""
    )
    try:
        append_jsonl(path, row)
    except OSError as exc:
        print(f"timebox: could not append to {path}: {exc}", file=sys.stderr)


def pytest_terminal_summary(terminalreporter) -> None:
    box = terminalreporter.config.stash.get(_KEY, None)
    if box is None:
        return
    n = len(box.decided)
    if box.dropped:
        terminalreporter.write_line(f"timebox: dropped {len(box.dropped)} test(s) of {n} case(s) for time:")
        for nodeid in box.dropped:
            terminalreporter.write_line(f"  {nodeid}")
    else:
        terminalreporter.write_line(f"timebox: all {n} case(s) ran within the stage's time")
