"""The only place where the GRU4Rec checks import the suite's dataset package (a rename of the package is a
one-line change here).

Check datasets (conformance/gru4rec/README.md, "Data"): D-LAG1, D-LONG, D-TAIL, D-VAR and Zipf sessions, with
session ids decoupled from start times and rows (:func:`_decoupled`);
metric-conformance datasets (``--dataset``): the real Yoochoose 100k slice and its synthetic stand-in, or a folder
prepared by ``python -m gru4rec_conformance.datasets prepare``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from gru4rec_conformance.datasets.sessions import checks as _checks
from gru4rec_conformance.datasets.sessions import real as _real

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
METRIC_DATASETS = ("yoochoose_100k", "yoochoose_100k_standin")


def metric_dataset(name: str | None) -> tuple[str, pd.DataFrame, pd.DataFrame, str]:
    """``(name, train, test, notice)`` of a metric-conformance dataset (``train_full`` → ``test``).

    ``name``: ``yoochoose_100k`` (default; the real slice in ``<shared>/sessions``, or the synthetic stand-in of
    the same shape with a notice when the shared data are absent), ``yoochoose_100k_standin`` (always synthetic),
    or a folder holding ``train_full.parquet`` and ``test.parquet`` written by ``python -m gru4rec_conformance.datasets prepare``.
    ``notice`` is empty unless a fallback was used.

    Raises:
        ValueError: naming ``--dataset`` for an unknown name or a folder without the two Parquet files.
    """
    name = name or DEFAULT_METRIC_DATASET
    if name == "yoochoose_100k":
        try:
            frames = _real.yoochoose_100k(fallback=False)
            return name, frames["train_full"], frames["test"], ""
        except SharedDataMissing as exc:
            frames = _real.yoochoose_100k_standin(seed=0)
            notice = (
                f"real Yoochoose 100k slice unavailable ({exc}); using the synthetic stand-in of the same "
                "shape (yoochoose_100k_standin, seed 0)"
            )
            return "yoochoose_100k_standin", frames["train_full"], frames["test"], notice
    if name == "yoochoose_100k_standin":
        frames = _real.yoochoose_100k_standin(seed=0)
        return name, frames["train_full"], frames["test"], ""
    folder = Path(name)
    if folder.is_dir():
        missing = [p for p in ("train_full.parquet", "test.parquet") if not (folder / p).is_file()]
        if missing:
            raise ValueError(
                f"--dataset {name}: folder lacks {missing} (prepare it with python -m gru4rec_conformance.datasets "
                "prepare)"
            )
        cols = ["SessionId", "ItemId", "Time"]
        return (
            folder.name,
            pd.read_parquet(folder / "train_full.parquet")[cols],
            pd.read_parquet(folder / "test.parquet")[cols],
            "",
        )
    raise ValueError(
        f"--dataset {name!r}: unknown dataset; use one of {', '.join(METRIC_DATASETS)} or a folder "
        "with train_full.parquet and test.parquet"
    )
