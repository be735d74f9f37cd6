"""The only place where the GRU4Rec checks import the suite's dataset package (a rename of the package is a
one-line change here).

Check datasets (conformance/gru4rec/README.md, "Data"): D-LAG1, D-LONG, D-TAIL, D-VAR and Zipf sessions, with
session ids decoupled from start times and rows (:func:`_decoupled`);
metric-conformance datasets (``--dataset``): the real Yoochoose 100k slice and its synthetic stand-in, the five study
datasets of ``datasets.sessions.registry`` (``all`` or a comma list), or folders prepared by
``python -m gru4rec_conformance.datasets prepare``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pandas as pd

from gru4rec_conformance.datasets.sessions import checks as _checks
from gru4rec_conformance.datasets.sessions import real as _real
from gru4rec_conformance.datasets.sessions import registry as _registry

CheckDataset = _checks.CheckDataset


def _decoupled(builder: Callable[..., CheckDataset]) -> Callable[..., CheckDataset]:
    """``builder`` whose train and test frames get session ids unrelated to their start times
    (:func:`~datasets.sessions.checks.scramble_session_ids`, seeds 1000 + seed and 2000 + seed): the builders
    give session k the id ``first_id + k``, the k-th start time and the k-th block of rows, so an implementation
    ordering sessions by id or by row would pass for one ordering them by time. Rows stay sorted by
    (SessionId, Time), as the builders document; ``meta`` is unchanged (it names items, not session ids)."""

    @functools.wraps(builder)
    def wrapped(seed: int = 0, **kw: Any) -> CheckDataset:
        ds = builder(seed, **kw)
        return CheckDataset(
            _checks.scramble_session_ids(ds.train, 1000 + seed),
            _checks.scramble_session_ids(ds.test, 2000 + seed),
            ds.meta,
        )

    return wrapped


d_lag1 = _decoupled(_checks.d_lag1)
d_long = _decoupled(_checks.d_long)
d_tail = _decoupled(_checks.d_tail)
d_var = _decoupled(_checks.d_var)
zipf_sessions = _decoupled(_checks.zipf_sessions)
sessions_frame = _checks.sessions_frame
scramble_session_ids = _checks.scramble_session_ids
shuffle_rows = _checks.shuffle_rows
SharedDataMissing = _real.SharedDataMissing

DEFAULT_METRIC_DATASET = "yoochoose_100k"
METRIC_DATASETS = ("yoochoose_100k", "yoochoose_100k_standin", *_registry.KEYS)
MetricFrames = _registry.MetricFrames
metric_frames = _registry.metric_frames
mc_config = _registry.mc_config
study_delta = _registry.study_delta


def metric_selection(option: str | None) -> list[str]:
    """``--dataset`` as the tokens the metric checks run on, one per dataset (``name`` or ``name=folder``):
    ``all`` gives the five study datasets; None gives ``[yoochoose_100k]``. Raises ValueError naming
    ``--dataset`` (see ``datasets.sessions.registry.parse_selection``)."""
    return [f"{n}={f}" if f else n for n, f in _registry.parse_selection(option)]


def metric_token_frames(token: str) -> MetricFrames:
    """The :class:`MetricFrames` of one token of :func:`metric_selection`."""
    name, sep, folder = token.partition("=")
    return _registry.metric_frames(name, folder if sep else None)


def metric_dataset(name: str | None) -> tuple[str, pd.DataFrame, pd.DataFrame, str]:
    """``(label, train, test, notice)`` of ONE metric-conformance dataset (``train_full`` → ``test``).

    ``name``: ``yoochoose_100k`` (default; the real slice in ``<shared>/sessions``, or the synthetic stand-in of
    the same shape with a notice when the shared data are absent), ``yoochoose_100k_standin`` (always synthetic),
    one of the five study datasets (``datasets.sessions.registry``: the real slice when large enough, else the
    study-shaped stand-in, with a notice), or a folder holding ``train_full.parquet`` and ``test.parquet``
    written by ``python -m gru4rec_conformance.datasets prepare``. ``notice`` is empty for the real 100k slice.

    Raises:
        ValueError: naming ``--dataset`` for an unknown name, a list of several, or a folder without the files.
    """
    tokens = metric_selection(name)
    if len(tokens) != 1:
        raise ValueError(f"--dataset {name!r}: names {len(tokens)} datasets; metric_dataset takes one")
    m = metric_token_frames(tokens[0])
    return m.label, m.train, m.test, m.notice
