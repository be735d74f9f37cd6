"""Fixtures of the GRU4Rec checks: the check datasets (session-scoped, seeded), the metric-conformance datasets
(``--dataset``: one, ``all`` or a comma list, parametrizing the metric checks) and a session cache of
metric-conformance results.

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


#: per-session list of the study-vs-ours deltas the metric checks record (printed in the terminal summary)
_DELTAS = pytest.StashKey[list]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``--dataset all`` or a comma list: every check using ``metric_data`` runs once per dataset (ids are the
    dataset names); one dataset (the default) keeps the checks unparametrized, so their ids do not change."""
    if "metric_data" not in metafunc.fixturenames:
        return
    try:
        tokens = _data.metric_selection(metafunc.config.getoption("conformance_dataset", None))
    except ValueError:
        return  # left to the metric_data fixture: every check that reads --dataset errors with the message
    if len(tokens) > 1:
        ids = [t.partition("=")[0] for t in tokens]
        metafunc.parametrize("metric_data", tokens, indirect=True, ids=ids, scope="session")


@pytest.fixture(scope="session")
def metric_data(conformance_options: Any, pytestconfig: Any, request: pytest.FixtureRequest) -> dict:
    """The metric-conformance dataset: one of ``--dataset`` (default: the real Yoochoose 100k slice; the synthetic
    stand-in with a printed notice when ``../shared`` is absent; ``all``: the five study datasets, see
    ``datasets.sessions.registry``). ``{"name", "key", "train", "test", "notice", "source", "configs", "deltas"}``:
    ``configs`` maps each loss to the study's best hyperparameters for the dataset (CPU-scaled, or as published
    with ``--profile study``: ``datasets.sessions.registry.mc_config``); ``deltas`` is the
    session's list the checks append their Δ-vs-study rows to; ``hash`` is the frames' content hash
    (:func:`frames_hash`, part of the oracle cache's keys)."""
    token = getattr(request, "param", None)
    try:
        if token is None:
            (token,) = _data.metric_selection(conformance_options.dataset)
        m = _data.metric_token_frames(token)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if m.notice:
        tr = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        capman = pytestconfig.pluginmanager.get_plugin("capturemanager")
        if tr is not None:  # written past pytest's output capture, which would otherwise swallow it
            with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
                tr.write_line(f"\nNOTICE (metric conformance): {m.notice}", yellow=True, bold=True)
    key = m.key if m.key in _data.METRIC_DATASETS else "yoochoose"  # a plain folder: Yoochoose's settings
    profile = getattr(conformance_options, "profile", None)  # --profile; None: GRU4REC_MC_SCALE, else cpu
    configs = {loss: _data.mc_config(key, loss, profile) for loss in ("cross-entropy", "bpr-max")}
    deltas = pytestconfig.stash.setdefault(_DELTAS, [])
    return {"name": m.label, "key": m.key, "train": m.train, "test": m.test, "notice": m.notice,
            "source": m.source, "configs": configs, "deltas": deltas,
            "hash": frames_hash(m.train, m.test)}  # fmt: skip


def frames_hash(*frames: Any) -> str:
    """A sha256 hex digest of the frames' columns, dtypes, index and values, in order (``pandas.util.
    hash_pandas_object`` per row): two datasets share it only when every row is the same."""
    import hashlib

    import pandas as pd

    h = hashlib.sha256()
    for df in frames:
        h.update(repr([(str(c), str(t)) for c, t in df.dtypes.items()]).encode())
        h.update(pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes())
        h.update(b"|")
    return h.hexdigest()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Δ per dataset: each implementation's relative change against the full-featured reference beside the
    study's published change for the implementation's declared study row (docs/study.md, 'Published accuracy and epoch times')."""
    rows = config.stash.get(_DELTAS, [])
    if not rows:
        return
    terminalreporter.write_sep("-", "metric conformance: Δ vs the full reference (ours) and vs official best (study)")
    for r in rows:
        study = "–" if r["study"] is None else f"{r['study']:+.1%} ({r['study_row']})"
        terminalreporter.write_line(
            f"{r['impl']:<28} {r['dataset']:<24} {r['loss']:<14} {r['metric']:<10} ours {r['ours']:+.1%}   study {study}"
        )


@pytest.fixture(scope="session")
def metric_cache() -> dict:
    """Session cache of metric-conformance results: (implementation, dataset, hyperparameters, seed) → metrics.

    Only numbers are cached (never live models), so checks stay independent: the cache saves refitting the
    reference seeds that every metric check of the session compares against."""
    return {}
