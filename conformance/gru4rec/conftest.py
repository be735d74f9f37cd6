"""Fixtures of the GRU4Rec checks: the check datasets (session-scoped, seeded), the metric-conformance dataset
(``--dataset``) and a session cache of metric-conformance results.

Torch runs with one intra-op thread in this process (env ``GRU4REC_TORCH_THREADS`` overrides): the check models
are tiny, and on a 2-core machine shared with other work, multi-threaded torch slows them down by up to 20x.
Worker processes of isolated adapters are pinned by the harness instead (``--worker-threads``, default 1:
conformance/README.md "Reliability").
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pytest

from gru4rec_conformance.conformance.gru4rec import _data


@pytest.fixture(scope="session", autouse=True)
def _torch_threads():
    try:
        import torch
    except ImportError:  # an isolated adapter's environment may lack torch; nothing to set then
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("GRU4REC_TORCH_THREADS", "1")))
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def d_lag1() -> _data.CheckDataset:
    """D-LAG1 (seed 0): 20 items in a cycle, 400 training sessions of length 4-8, 30 test sessions."""
    return _data.d_lag1(0)


@pytest.fixture(scope="session")
def d_long() -> _data.CheckDataset:
    """D-LONG (seed 0): sessions [a_k, n1, n2, n3, t_k], 50 per key, K = 8."""
    return _data.d_long(0)


@pytest.fixture(scope="session")
def d_tail() -> _data.CheckDataset:
    """D-TAIL (seed 0): D-LAG1 plus a final 40-item chain session."""
    return _data.d_tail(0)


@pytest.fixture(scope="session")
def d_var() -> _data.CheckDataset:
    """D-VAR (seed 0): 160 sessions whose lengths alternate 2 and 40."""
    return _data.d_var(0)


@pytest.fixture(scope="session")
def zipf() -> _data.CheckDataset:
    """Zipf-popularity sessions (seed 0): 1000 items, 2000 sessions."""
    return _data.zipf_sessions(0)


@pytest.fixture(scope="session")
def metric_data(conformance_options: Any, pytestconfig: Any) -> dict:
    """The metric-conformance dataset of ``--dataset`` (default: the real Yoochoose 100k slice; the synthetic
    stand-in with a printed notice when ``../shared`` is absent): ``{"name", "train", "test", "notice"}``."""
    try:
        name, train, test, notice = _data.metric_dataset(conformance_options.dataset)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if notice:
        tr = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        capman = pytestconfig.pluginmanager.get_plugin("capturemanager")
        if tr is not None:  # written past pytest's output capture, which would otherwise swallow it
            with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
                tr.write_line(f"\nNOTICE (metric conformance): {notice}", yellow=True, bold=True)
    return {"name": name, "train": train, "test": test, "notice": notice}


@pytest.fixture(scope="session")
def metric_cache() -> dict:
    """Session cache of metric-conformance results: (implementation, dataset, hyperparameters, seed) → metrics.

    Only numbers are cached (never live models), so checks stay independent: the cache saves refitting the
    reference seeds that every metric check of the session compares against."""
    return {}
