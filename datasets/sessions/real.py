"""Loaders of the real slices in ``<shared>/sessions`` (found through ``datasets.shared_data_dir()``) and a
synthetic stand-in for the Yoochoose 100k slice when the shared data are absent (docs/datasets.md,
'Real slices').

The 100k files are the first 100k lines of yoochoose-clicks.dat prepared by rn5l/session-rec with the OLD RSC15
protocol (no consecutive-repeat removal, split by session end, unknown test items removed), Time in float
seconds. The folder on disk is ``yoochoose/rsc15_100k_prepared`` (its README calls it
``session-rec_100k_prepared``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..paths import shared_data_candidate, shared_data_dir

__all__ = [
    "SharedDataMissing",
    "slice_path",
    "yoochoose_100k",
    "yoochoose_100k_standin",
    "YOOCHOOSE_100K_SHAPE",
    "RAW_SLICES",
    "SPLITS",
]

SPLITS = ("train_full", "test", "train_tr", "train_valid")

#: raw slices: name -> path below <shared>/sessions
RAW_SLICES = {
    "diginetica_sample": "diginetica/sample_train-item-views.csv",
    "rees46_oct_head": "rees46/2019-Oct_head17434.csv",
    "yoochoose_clicks_head": "yoochoose/raw_head/yoochoose-clicks.dat",
    "retailrocket_head": "retailrocket/retailrocket-sample.csv",
    "yoochoose_100k": "yoochoose/rsc15_100k_prepared",
}

#: events / sessions / items of the real 100k slice per split (docs/datasets.md, 'Real slices', and the slice's README)
YOOCHOOSE_100K_SHAPE = {
    "train_full": (70_278, 17_794, 2_933),
    "test": (13_568, 3_416, 1_771),
    "train_tr": (53_254, 13_629, 2_873),
    "train_valid": (16_539, 4_084, 2_029),
}


class SharedDataMissing(FileNotFoundError):
    """The shared data folder (or one slice in it) is absent; the message names the path looked at."""


def slice_path(name: str) -> Path:
    """Path of a real slice (a key of ``RAW_SLICES``). Raises ValueError for an unknown name and
    SharedDataMissing (a FileNotFoundError naming the path) when the shared data or the slice is absent."""
    if name not in RAW_SLICES:
        raise ValueError(f"name: unknown slice {name!r}; known: {', '.join(RAW_SLICES)}")
    root = shared_data_dir()
    if root is None:
        raise SharedDataMissing(f"shared data not found at {shared_data_candidate()} (set GRU4REC_SHARED_DATA)")
    p = root / "sessions" / RAW_SLICES[name]
    if not p.exists():
        raise SharedDataMissing(f"{p}: slice {name!r} not found")
    return p


def _read_prepared(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, sep="\t", dtype={"SessionId": np.int64, "ItemId": np.int64, "Time": np.float64})
    except (ValueError, pd.errors.ParserError) as e:
        raise ValueError(f"{path}: not a TAB-separated SessionId/ItemId/Time file ({e})") from None
    missing = {"SessionId", "ItemId", "Time"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}:1: header lacks {sorted(missing)}")
    return df[["SessionId", "ItemId", "Time"]]


def yoochoose_100k(fallback: bool = True, seed: int = 0) -> dict[str, pd.DataFrame]:
    """The four prepared frames of the real Yoochoose 100k slice: train_full, test, train_tr, train_valid, each
    with SessionId int64, ItemId int64, Time float64 (epoch seconds), in file order.

    When the shared data are absent and ``fallback`` is true, prints a notice to stderr and returns
    :func:`yoochoose_100k_standin` (same shape, synthetic); with ``fallback=False`` raises SharedDataMissing.
    """
    try:
        folder = slice_path("yoochoose_100k")
    except SharedDataMissing as e:
        if not fallback:
            raise
        print(
            f"notice: real Yoochoose 100k slice unavailable ({e}); using the synthetic stand-in of the same "
            f"shape (datasets.sessions.real.yoochoose_100k_standin, seed={seed})",
            file=sys.stderr,
        )
        return yoochoose_100k_standin(seed)
    return {s: _read_prepared(folder / f"yoochoose-clicks-100k_{s}.txt") for s in SPLITS}


def yoochoose_100k_standin(seed: int = 0) -> dict[str, pd.DataFrame]:
    """Synthetic frames shaped like the real 100k slice (``YOOCHOOSE_100K_SHAPE``: events and sessions within about 15%):
    about 7 days of Yoochoose-like sessions (learnable item-to-item transitions, Zipf popularity, consecutive
    repeats kept as in the RSC15 protocol), split like the slice: test = sessions *ending* on the last day with
    unknown items removed and sessions shorter than 2 dropped; train_tr/train_valid likewise one day earlier.
    Columns SessionId int64, ItemId int64, Time float64 (epoch seconds). Deterministic for a seed.
    """
    rng = np.random.default_rng(seed)
    n_items = 3_300
    n_sessions = 21_900
    w = (np.arange(1, n_items + 1) + 30.0) ** -1.0
    cdf = np.cumsum(w / w.sum())
    succ = np.clip(np.arange(n_items)[:, None] + rng.integers(-20, 21, size=(n_items, 3)), 0, n_items - 1)
    lengths = np.minimum(2 + rng.geometric(1 / 2.9, size=n_sessions) - 1, 150)
    ids = 214_500_000 + rng.choice(400_000, size=n_items, replace=False)
    t0 = 1_396_310_400.0  # 2014-04-01
    # the real slice is denser on its last two days (about 16.5k and 13.5k events vs 10.6k per earlier day)
    day = rng.choice(7, size=n_sessions, p=np.array([1, 1, 1, 1, 1, 1.55, 1.3]) / 7.85)
    starts = np.sort(t0 + day * 86400.0 + rng.random(n_sessions) * (86400.0 - 3600))
    rows_s, rows_i, rows_t = [], [], []
    for k in range(n_sessions):
        r = int(np.searchsorted(cdf, rng.random()))
        t = starts[k]
        for _j in range(int(lengths[k])):
            rows_s.append(k + 1)
            rows_i.append(int(ids[min(r, n_items - 1)]))
            rows_t.append(round(t, 3))
            t += float(np.exp(rng.normal(np.log(45.0), 1.0)))
            u = rng.random()
            if u < 0.16:
                continue  # consecutive repeat (the RSC15 protocol keeps them)
            r = int(succ[r, rng.integers(0, 3)]) if u < 0.7 else int(np.searchsorted(cdf, rng.random()))
    df = pd.DataFrame(
        {
            "SessionId": np.array(rows_s, np.int64),
            "ItemId": np.array(rows_i, np.int64),
            "Time": np.array(rows_t, np.float64),
        }
    )
    # RSC15-style filtering: sessions >= 2, items >= 5, sessions >= 2 (one pass)
    df = df[df.groupby("SessionId")["SessionId"].transform("size") > 1]
    df = df[df.groupby("ItemId")["ItemId"].transform("size") >= 5]
    df = df[df.groupby("SessionId")["SessionId"].transform("size") > 1]

    def split(data: pd.DataFrame, boundary: float):
        send = data.groupby("SessionId")["Time"].transform("max")
        train = data[send < boundary]
        test = data[send >= boundary]
        test = test[test["ItemId"].isin(train["ItemId"].unique())]
        test = test[test.groupby("SessionId")["SessionId"].transform("size") >= 2]
        return train.reset_index(drop=True), test.reset_index(drop=True)

    tmax = float(df["Time"].max())
    train_full, test = split(df, tmax - 86400)
    train_tr, train_valid = split(train_full, float(train_full["Time"].max()) - 86400)
    return {"train_full": train_full, "test": test, "train_tr": train_tr, "train_valid": train_valid}
