"""The study's preprocessing of the five session datasets, step by step (docs/datasets.md, section 5;
behaviour of hidasib/gru4rec_third_party_comparison:<name>_preproc.py, which produced the published numbers).

Order of steps (docs/datasets.md, 'Common steps'): load -> keep item views (for RetailRocket and Coveo: after sessionising all events) ->
sessions (precomputed ids, or a 1-hour gap, strictly greater, per user) -> consecutive-repeat removal, once ->
iterative support filter to a fixpoint (sessions of length 1, then items with < 5 events, per round) -> full ->
time split (test = sessions starting at >= tsplit - tday; train_full = events before it, sessions of length 1
dropped; test not filtered) -> validation split at tsplit - 2*tday.

Traps reproduced on purpose:
- ties inside a session are ordered by the dataset's item sort key (docs/datasets.md, 'Ties and sort keys'), the sort is
  stable like pandas' multi-column ``sort_values``;
- (i, j, i) with j filtered becomes (i, i) and stays (no re-deduplication);
- a gap of exactly 3600 s (3,600,000 ms) does not split a session;
- train sessions straddling the split are truncated, and are absent from test;
- the validation boundary is tsplit - 2*tday (tsplit is not recomputed on train_full);
- Yoochoose only: the study concatenates the clicks and test files without resetting the index and then drops
  rows *by index label*, so every removal also removes the row with the same line position in the other file
  (``index_quirk``, default on; see :func:`process`). The spec's text does not mention it; the code does it.

Times are converted explicitly (see ``readers``): Yoochoose/Rees46 in epoch seconds, Coveo/RetailRocket in ms,
Diginetica in virtual ms (session's first eventdate at 00:00 UTC, in ms, plus ``timeframe``).

Outputs of :func:`prepare`: Parquet files ``full``, ``train_full``, ``test``, ``train_tr``, ``train_valid`` with
columns SessionId int64, ItemId int64, Time int64 (unit per dataset, in ``TIME_UNIT`` and in the Parquet schema
metadata), in the study's row order (sorted by session, time, item); ``stats.tsv`` (the study's stats table) and
``manifest.json`` (input hashes, rows after each step, filter rounds, library versions, cache key).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from gru4rec_conformance.fileio import atomic_path, atomic_write_json, remove_stale_temporaries

from .. import _suite_io
from .inputs import resolve_inputs
from .readers import RAW_FILES, read_raw

__all__ = [
    "DATASETS",
    "TIME_UNIT",
    "SPLITS",
    "PIPELINE_VERSION",
    "Processed",
    "Prepared",
    "EmptyResultError",
    "empty_result",
    "process",
    "prepare",
    "load_prepared",
    "dedup_consecutive",
    "support_filter",
    "time_split",
    "stats_table",
]

PIPELINE_VERSION = "1"
DATASETS = ("yoochoose", "rees46", "coveo", "retailrocket", "diginetica")
PARTS = ("full", "train_full", "test", "train_tr", "train_valid")
SPLITS = PARTS[1:]
DAY_S = 86400
DAY_MS = 86400 * 1000

#: unit of the Time column per dataset (docs/datasets.md, 'Time units')
TIME_UNIT = {"yoochoose": "s", "rees46": "s", "coveo": "ms", "retailrocket": "ms", "diginetica": "ms"}

#: tday (length of the test period, in the Time unit) and the fixed tsplit (None: max Time of the full data)
SPLIT_PARAMS = {
    "yoochoose": (DAY_S, None),
    "rees46": (DAY_S, 1575158400),  # 2019-12-01 00:00 UTC
    "coveo": (DAY_MS, None),
    "retailrocket": (7 * DAY_MS, 1442545200000),  # 2015-09-18 03:00 UTC
    "diginetica": (7 * DAY_MS, None),
}

#: gap that starts a new session (strictly greater), in the Time unit
SESSION_GAP = {"rees46": 3600, "coveo": 3600 * 1000, "retailrocket": 3600 * 1000}

#: the study's output file prefixes ('Common steps', step 9)
STUDY_PREFIX = {
    "yoochoose": "yoochoose_processed_view",
    "rees46": "rees46_processed_view_userbased",
    "coveo": "coveo_processed_view",
    "retailrocket": "retailrocket_processed_view",
    "diginetica": "diginetica_processed_view",
}

MIN_ITEM_SUPPORT = 5

#: columns of each reader's frame that :func:`process` uses; "int" columns are read as int64 and must hold integers
INPUT_COLUMNS = {
    "yoochoose": {"SessionId": "int", "Time": "int", "ItemId": "int"},
    "rees46": {"Time": "int", "EventType": "any", "ProductId": "int", "UserId": "any"},
    "coveo": {
        "session_id_hash": "any",
        "product_action": "any",
        "product_skus_hash": "any",
        "server_timestamp_epoch_ms": "int",
    },
    "retailrocket": {"timestamp": "int", "visitorid": "int", "event": "any", "itemid": "int"},
    "diginetica": {"sessionId": "int", "eventdate_days": "int", "timeframe": "int", "itemId": "int"},
}


def _check_inputs(name: str, inputs: dict) -> None:
    """Raise ValueError naming the input file and column when a raw frame is not what ``readers.read_<name>``
    returns: not a DataFrame, a column missing or renamed, an integer column of another dtype or with NaN."""
    for fname, df in inputs.items():
        where = f"inputs[{fname!r}]"
        if not isinstance(df, pd.DataFrame):
            raise ValueError(
                f"{where}: expected a pandas DataFrame as returned by readers.read_{name}, got {type(df).__name__}"
            )
        missing = [c for c in INPUT_COLUMNS[name] if c not in df.columns]
        if missing:
            raise ValueError(
                f"{where}: column(s) {', '.join(map(repr, missing))} missing; columns present: "
                f"{list(map(str, df.columns))} (frames of {name} come from readers.read_{name})"
            )
        for c, kind in INPUT_COLUMNS[name].items():
            if kind != "int":
                continue
            col = df[c]
            null = col.isna().to_numpy()
            if not pd.api.types.is_integer_dtype(col.dtype) or null.any():
                detail = (
                    f" with {int(null.sum())} missing (NaN) value(s), first at row {int(np.flatnonzero(null)[0])}"
                    if null.any()
                    else ""
                )
                raise ValueError(f"{where}: column {c!r} must hold integers, got dtype {col.dtype}{detail}")


def _check_name(name: str) -> None:
    if name not in DATASETS:
        raise ValueError(f"name: unknown dataset {name!r}; known: {', '.join(DATASETS)}")


# ----------------------------------------------------------------------------------------------------------------
# sorting


def _as_sort_key(a: np.ndarray) -> tuple[np.ndarray, int]:
    """Non-negative uint64 version of an int array preserving order, and its bit width."""
    a = np.asarray(a)
    if a.size == 0:
        return a.astype(np.uint64), 0
    lo = a.min()
    k = (a - lo).astype(np.uint64)
    return k, int(k.max()).bit_length()


def _key_bits(a: np.ndarray) -> int:
    return int(int(a.max()) - int(a.min())).bit_length() if len(a) else 0


def _lsd_lexsort(keys: list[np.ndarray]) -> np.ndarray:
    """Stable multi-key order by packing keys into as few 64-bit composites as fit, least significant first."""
    n = len(keys[0])
    prepared = [_as_sort_key(k) for k in keys]
    groups: list[list[tuple[np.ndarray, int]]] = []
    cur: list[tuple[np.ndarray, int]] = []
    bits = 0
    for k, b in reversed(prepared):  # least significant first
        if cur and bits + b > 64:
            groups.append(cur)
            cur, bits = [], 0
        cur.append((k, b))
        bits += b
    if cur:
        groups.append(cur)
    order = None
    for group in groups:
        comp = np.zeros(n, dtype=np.uint64)
        shift = 0
        for k, b in group:  # group is least significant first
            if b:
                comp |= k << np.uint64(shift)
            shift += b
        if order is None:
            order = np.argsort(comp, kind="stable")
        else:
            order = order[np.argsort(comp[order], kind="stable")]
    return order if order is not None else np.arange(n)


def stable_lexsort(keys: list[np.ndarray]) -> np.ndarray:
    """Stable sort order by several integer keys (most significant first); equal rows keep their input order,
    which is the order pandas' multi-column ``sort_values`` gives (it is stable for several columns).

    Fast path for (group, time, item) keys: the first key is replaced by its dense rank and the second by its
    offset from the group's minimum, which usually packs all keys into one 64-bit composite; raw session data
    are nearly sorted, so the stable argsorts are cheap. Otherwise an LSD sort over packed composites.
    """
    n = len(keys[0])
    if n == 0:
        return np.arange(0)
    if sum(_key_bits(k) for k in keys) <= 64 or len(keys) < 2:
        return _lsd_lexsort(keys)
    g = np.asarray(keys[0])
    o = np.argsort(g, kind="stable")
    gs = g[o]
    change = np.empty(n, dtype=bool)
    change[0] = True
    np.not_equal(gs[1:], gs[:-1], out=change[1:])
    del gs
    code = np.cumsum(change, dtype=np.int64)
    code -= 1  # dense group code, in group-sorted order
    starts = np.flatnonzero(change)
    del change
    k1 = np.asarray(keys[1])[o]
    k1 -= np.repeat(np.minimum.reduceat(k1, starts), np.diff(np.append(starts, n)))  # offset within the group
    rest = [np.asarray(k)[o] for k in keys[2:]]
    b = [_key_bits(code), _key_bits(k1)] + [_key_bits(k) for k in rest]
    if sum(b) > 64:
        return o[_lsd_lexsort([code, k1] + rest)]
    # one composite in group-sorted order; a stable argsort keeps equal rows in input order
    comp = code.astype(np.uint64)
    for k, bits in zip([k1] + rest, b[1:]):
        comp <<= np.uint64(bits)
        comp |= (k - k.min()).astype(np.uint64)
    return o[np.argsort(comp, kind="stable")]


def _first_appearance_codes(values: np.ndarray) -> np.ndarray:
    """Integer codes 0, 1, 2, ... in order of first appearance, missing values (None/NaN) included as one value
    at the position of their first appearance -- what ``Series.unique()`` followed by a merge gives."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    codes = codes.astype(np.int32 if len(uniques) < 2**31 - 1 else np.int64, copy=False)
    na = codes < 0
    if not na.any():
        return codes
    first_na = int(np.flatnonzero(na)[0])
    first_pos = np.full(len(uniques), len(values), dtype=np.int64)
    np.minimum.at(first_pos, codes[~na], np.flatnonzero(~na))
    before = first_pos < first_na  # uniques that appeared before the first missing value
    n_before = int(before.sum())
    shifted = np.where(before, np.arange(len(uniques)), np.arange(len(uniques)) + 1)
    # factorize numbers uniques in order of appearance, so 'before' is a prefix
    out = np.where(na, n_before, shifted[np.where(na, 0, codes)])
    return out.astype(codes.dtype, copy=False)


# ----------------------------------------------------------------------------------------------------------------
# the steps


@dataclass
class _Events:
    """View events sorted by (session, time, item sort key); ``label``/``n_labels`` only for the index quirk."""

    session: np.ndarray
    item_key: np.ndarray
    item_out: np.ndarray
    time: np.ndarray
    label: np.ndarray | None = None
    steps: list = field(default_factory=list)


def dedup_consecutive(session: np.ndarray, item_key: np.ndarray) -> np.ndarray:
    """Mask of rows that repeat the previous row's session and item (docs/datasets.md, 'Common steps', step 4); rows must be sorted by
    (session, time, item). Returns a bool array, True = drop. Applied once, never after filtering."""
    mask = np.zeros(len(session), dtype=bool)
    if len(session) > 1:
        mask[1:] = (session[1:] == session[:-1]) & (item_key[1:] == item_key[:-1])
    return mask


class _Dropper:
    """Removes rows from parallel arrays; with labels (Yoochoose index quirk) a removal also removes every other
    row carrying the same label, as pandas ``DataFrame.drop(labels)`` does on a duplicated index."""

    def __init__(self, arrays: dict, label: np.ndarray | None):
        self.a = arrays
        self.label = label

    def __len__(self):
        return len(next(iter(self.a.values())))

    def drop(self, mask: np.ndarray) -> int:
        """Drop rows where ``mask``; returns the number of rows removed by label collision beyond ``mask``."""
        extra = 0
        if self.label is not None and mask.any():
            hit = np.zeros(int(self.label.max()) + 1, dtype=bool)
            hit[self.label[mask]] = True
            full = hit[self.label]
            extra = int(full.sum() - mask.sum())
            mask = full
        if mask.any():
            keep = ~mask
            self.a = {k: v[keep] for k, v in self.a.items()}
            if self.label is not None:
                self.label = self.label[keep]
        return extra


def support_filter(
    session: np.ndarray,
    item_key: np.ndarray,
    *,
    label: np.ndarray | None = None,
    min_item_support: int = MIN_ITEM_SUPPORT,
    log: list | None = None,
) -> tuple[np.ndarray, int]:
    """The iterative support filter (docs/datasets.md, 'Common steps', step 5) on rows sorted by session.

    Each round: (a) drop all events of sessions of length exactly 1; (b) drop all events of items with fewer than
    ``min_item_support`` events. Rounds repeat while the previous round changed the row count (the study's
    ``while len(data) != pl``). Returns (indices of the kept rows, number of rounds run, the last one being the
    round that changed nothing). ``label``: Yoochoose index quirk (see :class:`_Dropper`). ``log`` receives one
    dict per round with rows/sessions/items after (a) and (b) and the quirk's extra removals.
    """
    n = len(session)
    s_code = np.zeros(n, dtype=np.int64)
    if n > 1:
        s_code[1:] = np.cumsum(session[1:] != session[:-1])
    i_code = pd.factorize(item_key)[0].astype(np.int32)
    idx_type = np.int32 if n < 2**31 else np.int64
    d = _Dropper({"s": s_code.astype(idx_type), "i": i_code, "idx": np.arange(n, dtype=idx_type)}, label)
    n_items = int(i_code.max()) + 1 if n else 0
    n_sess = int(s_code[-1]) + 1 if n else 0
    rounds = 0
    prev = -1
    while len(d) != prev:
        prev = len(d)
        rounds += 1
        s = d.a["s"]
        sl = np.bincount(s, minlength=n_sess)
        if log:
            log[-1]["after_b"]["sessions"] = int(np.count_nonzero(sl))
        single = sl == 1
        extra_a = d.drop(single[s]) if single.any() else 0
        i = d.a["i"]
        sup = np.bincount(i, minlength=n_items)
        after_a = {"rows": len(d), "sessions": _runs(d.a["s"]), "items": int(np.count_nonzero(sup))}
        low = (sup < min_item_support) & (sup > 0)
        extra_b = d.drop(low[i]) if low.any() else 0
        if log is not None:
            items_b = after_a["items"] - int(np.count_nonzero(low))
            if extra_b:
                items_b = int(np.count_nonzero(np.bincount(d.a["i"], minlength=n_items)))
            log.append(
                {
                    "round": rounds,
                    "after_a": after_a,
                    "after_b": {"rows": len(d), "sessions": None, "items": items_b},
                    **({"index_quirk_extra_rows": [extra_a, extra_b]} if label is not None else {}),
                }
            )
    if log:
        log[-1]["after_b"]["sessions"] = _runs(d.a["s"])
    return d.a["idx"].astype(np.int64), rounds


def _runs(s: np.ndarray) -> int:
    """Number of sessions in rows sorted by session."""
    return int(np.count_nonzero(s[1:] != s[:-1])) + 1 if len(s) else 0


def time_split(full: pd.DataFrame, tday: int, tsplit: int | None) -> dict[str, pd.DataFrame]:
    """Steps 7-8 of docs/datasets.md 'Common steps' on the full processed data (columns SessionId, ItemId, Time; sorted by session).

    ``tsplit`` None means the max Time of ``full``. Returns dict train_full, test, train_tr, train_valid.
    test = all events of sessions whose first event is at >= tsplit - tday (unfiltered); train_full = events
    with Time < tsplit - tday, then sessions of length <= 1 removed; train_tr = train_full events with
    Time < tsplit - 2*tday, then sessions of length <= 1 removed; train_valid = train_full events of sessions
    whose first event (on ``full``) is at >= tsplit - 2*tday.
    """
    if len(full) == 0:
        empty = full.iloc[:0]
        return {k: empty.copy() for k in SPLITS}
    if tsplit is None:
        tsplit = int(full["Time"].max())
    code, t, starts = _session_codes(full)
    sbeg = _per_session(np.minimum, code, t, starts)[code]  # session start on the full data, per row

    n_sess = int(code[-1]) + 1 if starts is not None else int(code.max()) + 1

    def longer_than_1(mask: np.ndarray) -> np.ndarray:
        n = np.bincount(code[mask], minlength=n_sess)
        return mask & (n[code] > 1)

    test = sbeg >= tsplit - tday
    train = longer_than_1(t < tsplit - tday)
    train_tr = longer_than_1(train & (t < tsplit - 2 * tday))
    train_valid = train & (sbeg >= tsplit - 2 * tday)
    cols = {c: full[c].to_numpy() for c in full.columns}

    def take(mask):
        return pd.DataFrame({c: v[mask] for c, v in cols.items()}, copy=False)

    return {"train_full": take(train), "test": take(test), "train_tr": take(train_tr), "train_valid": take(train_valid)}


def _session_codes(df: pd.DataFrame):
    """Dense session codes per row (0..n-1), the Time array and the first row of each session when sessions are
    contiguous (then codes come from boundaries, not hashing)."""
    sid = df["SessionId"].to_numpy()
    t = df["Time"].to_numpy()
    n = len(sid)
    change = np.empty(n, dtype=bool)
    if n:
        change[0] = True
        np.not_equal(sid[1:], sid[:-1], out=change[1:])
    code = np.cumsum(change) - 1
    starts = np.flatnonzero(change)
    # contiguous (one run per session): sorted ids, or as many runs as distinct ids
    if n == 0 or bool(np.all(sid[1:] >= sid[:-1])) or len(starts) == pd.unique(sid).size:
        return code, t, starts
    code = pd.factorize(sid)[0]
    return code, t, None


def _per_session(ufunc, code: np.ndarray, t: np.ndarray, starts: np.ndarray | None) -> np.ndarray:
    """np.minimum / np.maximum of ``t`` per session code (reduceat on contiguous sessions)."""
    if starts is not None:
        return ufunc.reduceat(t, starts) if len(t) else t[:0]
    fill = np.iinfo(np.int64).max if ufunc is np.minimum else np.iinfo(np.int64).min
    out = np.full(int(code.max()) + 1, fill, dtype=np.int64)
    ufunc.at(out, code, t)
    return out


def stats_table(frames: dict[str, pd.DataFrame], name: str) -> pd.DataFrame:
    """The study's stats.tsv rows ('Common steps', step 9), one per frame, named like the study's files.

    Columns: Dataset, NumEvents, NumSessions, NumItems, NumDays ((max-min Time)/one day), StartTime, EndTime
    (UTC, '%Y-%m-%d %H:%M:%S.%f'), AvgItemViews (events per item), Min/Max/AvgSessionLength, 'MinSessionTime
    (sec)', 'MaxSessionTime (sec)' (last minus first event of a session, in seconds). Empty frames give NaN and
    empty strings where the study's script would crash.
    """
    per_s = 1 if TIME_UNIT[name] == "s" else 1000
    day = DAY_S * per_s
    rows = []
    for part, df in frames.items():
        t = df["Time"].to_numpy()
        code, _, starts = _session_codes(df) if len(df) else (np.zeros(0, np.int64), t, None)
        icode = pd.factorize(df["ItemId"].to_numpy())[0]
        row = {
            "Dataset": f"{STUDY_PREFIX[name]}_{part}.tsv",
            "NumEvents": len(df),
            "NumSessions": int(code.max()) + 1 if len(df) else 0,
            "NumItems": int(icode.max()) + 1 if len(df) else 0,
        }
        if len(df):
            slen = np.bincount(code)
            sdiff = (_per_session(np.maximum, code, t, starts) - _per_session(np.minimum, code, t, starts)) / per_s
            fmt = "%Y-%m-%d %H:%M:%S.%f"
            row.update(
                NumDays=(t.max() - t.min()) / day,
                StartTime=(dt.datetime(1970, 1, 1) + dt.timedelta(seconds=t.min() / per_s)).strftime(fmt),
                EndTime=(dt.datetime(1970, 1, 1) + dt.timedelta(seconds=t.max() / per_s)).strftime(fmt),
                AvgItemViews=len(df) / (int(icode.max()) + 1),
                MinSessionLength=int(slen.min()),
                MaxSessionLength=int(slen.max()),
                AvgSessionLength=float(slen.mean()),
                **{"MinSessionTime (sec)": float(sdiff.min()), "MaxSessionTime (sec)": float(sdiff.max())},
            )
        else:
            row.update(
                NumDays=np.nan,
                StartTime="",
                EndTime="",
                AvgItemViews=np.nan,
                MinSessionLength=np.nan,
                MaxSessionLength=np.nan,
                AvgSessionLength=np.nan,
                **{"MinSessionTime (sec)": np.nan, "MaxSessionTime (sec)": np.nan},
            )
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------------
# per-dataset event construction (load -> views -> sessions, sorted by (session, time, item key))


def _concat_inputs(name: str, inputs: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, np.ndarray, list]:
    """Concatenate raw frames in the study's order; also return each row's position in its own file. With the
    private key ``"__consume__"`` in ``inputs`` the dict is emptied afterwards (frees the raw frames early)."""
    consume = bool(inputs.pop("__consume__", False))
    order = [f for f in RAW_FILES[name] if f in inputs] + [f for f in inputs if f not in RAW_FILES[name]]
    if not order:
        raise ValueError(f"inputs: no raw frames given for {name}")
    frames = [inputs[f] for f in order]
    labels = np.concatenate([np.arange(len(f), dtype=np.int64) for f in frames])
    steps = [{"step": f"read {f}", "rows": len(inputs[f])} for f in order]
    if len(frames) == 1:
        df = frames[0].reset_index(drop=True)
    else:
        df = pd.DataFrame({c: _concat_column([f[c] for f in frames]) for c in frames[0].columns}, copy=False)
    del frames
    if consume:
        inputs.clear()
    return df, labels, steps


def _concat_column(cols: list[pd.Series]):
    if all(isinstance(c.dtype, np.dtype) for c in cols) and len({c.dtype for c in cols}) == 1:
        return np.concatenate([c.to_numpy() for c in cols])
    return pd.concat(cols, ignore_index=True)


def _sessionise(owner: np.ndarray, t: np.ndarray, gap: int) -> np.ndarray:
    """Running count of session boundaries on rows sorted by (owner, time, item): a boundary where the owner
    changes or the time difference is strictly greater than ``gap``. Starts at 0."""
    b = np.zeros(len(t), dtype=np.int64)
    if len(t) > 1:
        b[1:] = ((t[1:] - t[:-1]) > gap) | (owner[1:] != owner[:-1])
    return np.cumsum(b)


def _events_yoochoose(inputs, index_quirk: bool) -> _Events:
    n_files = len([k for k in inputs if k != "__consume__"])  # counted before _concat_inputs may empty inputs
    df, labels, steps = _concat_inputs("yoochoose", inputs)
    s, t, i = (df[c].to_numpy(np.int64) for c in ("SessionId", "Time", "ItemId"))
    del df
    o = stable_lexsort([s, t, i])
    quirk = index_quirk and n_files > 1
    steps.append({"step": "views (all rows are clicks)", "rows": len(o), "sessions": len(pd.unique(s))})
    io = i[o]
    return _Events(s[o], io, io, t[o], labels[o] if quirk else None, steps)


def _events_rees46(inputs, index_quirk: bool) -> _Events:
    df, _, steps = _concat_inputs("rees46", inputs)
    view = (df["EventType"] == "view").to_numpy()
    # indices by first appearance over ALL events of [Oct, Nov]; only the views' codes are kept
    u = _first_appearance_codes(df["UserId"].to_numpy())[view]
    it = _first_appearance_codes(df["ProductId"].to_numpy())[view]
    t = df["Time"].to_numpy(np.int64)[view]
    prod = df["ProductId"].to_numpy(np.int64)[view]
    del df
    steps.append({"step": "views", "rows": int(view.sum())})
    del view
    # filtering before sorting keeps the relative order of the views that a stable sort of all events gives
    o = stable_lexsort([u, t, it])
    u = u[o]
    t = t[o]
    it = it[o]
    prod = prod[o]
    del o
    sess = _sessionise(u, t, SESSION_GAP["rees46"])
    del u
    steps.append(
        {"step": "sessions (1 h gap, views only)", "rows": len(t), "sessions": int(sess[-1]) + 1 if len(sess) else 0}
    )
    return _Events(sess, it, prod, t, None, steps)


def _events_all_then_views(
    name: str,
    owner: np.ndarray,
    t: np.ndarray,
    item_key: np.ndarray,
    item_out: np.ndarray,
    is_view: np.ndarray,
    steps: list,
) -> _Events:
    o = stable_lexsort([owner, t, item_key])
    owner, t, item_key, item_out, is_view = owner[o], t[o], item_key[o], item_out[o], is_view[o]
    sess = _sessionise(owner, t, SESSION_GAP[name])
    steps.append(
        {"step": "sessions (1 h gap, all events)", "rows": len(t), "sessions": int(sess[-1]) + 1 if len(sess) else 0}
    )
    steps.append({"step": "views", "rows": int(is_view.sum()), "sessions": len(pd.unique(sess[is_view]))})
    return _Events(sess[is_view], item_key[is_view], item_out[is_view], t[is_view], None, steps)


def _events_coveo(inputs, index_quirk: bool) -> _Events:
    df, _, steps = _concat_inputs("coveo", inputs)
    sidx = _first_appearance_codes(df["session_id_hash"].to_numpy(object))
    item = _first_appearance_codes(df["product_skus_hash"].to_numpy(object))
    t = df["server_timestamp_epoch_ms"].to_numpy(np.int64)
    is_view = (df["product_action"] == "detail").to_numpy(bool)
    return _events_all_then_views("coveo", sidx, t, item, item, is_view, steps)


def _events_retailrocket(inputs, index_quirk: bool) -> _Events:
    df, _, steps = _concat_inputs("retailrocket", inputs)
    item = df["itemid"].to_numpy(np.int64)
    is_view = (df["event"] == "view").to_numpy(bool)
    return _events_all_then_views(
        "retailrocket",
        df["visitorid"].to_numpy(np.int64),
        df["timestamp"].to_numpy(np.int64),
        item,
        item,
        is_view,
        steps,
    )


def _events_diginetica(inputs, index_quirk: bool) -> _Events:
    df, _, steps = _concat_inputs("diginetica", inputs)
    s = df["sessionId"].to_numpy(np.int64)
    # virtual time: the session's earliest eventdate at 00:00 UTC in ms, plus the row's timeframe (docs/datasets.md, 'Diginetica')
    day0 = pd.Series(df["eventdate_days"].to_numpy(np.int64)).groupby(s).transform("min").to_numpy()
    t = day0 * DAY_MS + df["timeframe"].to_numpy(np.int64)
    i = df["itemId"].to_numpy(np.int64)
    o = stable_lexsort([s, t, i])
    steps.append({"step": "views (all rows are item views)", "rows": len(o), "sessions": len(pd.unique(s))})
    io = i[o]
    return _Events(s[o], io, io, t[o], None, steps)


_EVENTS = {
    "yoochoose": _events_yoochoose,
    "rees46": _events_rees46,
    "coveo": _events_coveo,
    "retailrocket": _events_retailrocket,
    "diginetica": _events_diginetica,
}


# ----------------------------------------------------------------------------------------------------------------
# whole pipeline in memory


@dataclass
class Processed:
    """Result of :func:`process`: the five frames (SessionId/ItemId/Time int64), the stats table, the row counts
    after each step, the number of filter rounds and the split boundaries (in the Time unit)."""

    name: str
    frames: dict
    stats: pd.DataFrame
    steps: list
    filter_rounds: int
    filter_log: list
    tsplit: int | None
    tday: int
    index_quirk: bool

    @property
    def time_unit(self) -> str:
        return TIME_UNIT[self.name]


def process(
    name: str, inputs: dict[str, pd.DataFrame], *, index_quirk: bool = True, progress=None, consume: bool = False
) -> Processed:
    """Run the study's pipeline on raw frames already read by ``readers.read_<name>``.

    ``inputs``: raw file basename (e.g. 'yoochoose-clicks.dat') -> frame; concatenated in the study's order
    (``readers.RAW_FILES``). ``index_quirk`` (Yoochoose with both files only): reproduce the study's removal by
    duplicated index label (see module docstring); False gives the spec's row-wise semantics. ``progress``: an
    optional callable receiving the name of each step as it starts. ``consume``: empty ``inputs`` as soon as the
    frames are concatenated (lower peak memory; ``prepare`` uses it).
    Raises ValueError for an unknown ``name``, empty ``inputs``, or a frame that is not a reader's (naming the
    input and the column: missing or renamed columns, non-integer ids or times, NaN).
    """
    _check_name(name)
    _check_inputs(name, inputs)
    say = progress or (lambda s: None)
    say("sessions")
    if consume:
        inputs["__consume__"] = True
    ev = _EVENTS[name](inputs, index_quirk)
    steps = ev.steps
    say("dedup")
    dup = dedup_consecutive(ev.session, ev.item_key)
    arrays = {"s": ev.session, "k": ev.item_key, "o": ev.item_out, "t": ev.time}
    label = ev.label
    quirk = label is not None
    del ev  # release its arrays early (peak memory)
    same_ko = arrays["k"] is arrays["o"]
    if same_ko:
        del arrays["o"]
    d = _Dropper(arrays, label)
    del arrays, label
    n_dup = int(dup.sum())
    extra = d.drop(dup)
    del dup
    if same_ko:
        d.a["o"] = d.a["k"]
    steps.append(
        {"step": "dedup", "rows": len(d), "removed": n_dup, **({"index_quirk_extra_rows": extra} if quirk else {})}
    )
    say("filter")
    log: list = []
    keep, rounds = support_filter(d.a["s"], d.a["k"], label=d.label, log=log)
    full = pd.DataFrame({"SessionId": d.a["s"][keep], "ItemId": d.a["o"][keep], "Time": d.a["t"][keep]}, copy=False)
    steps.append(
        {
            "step": "support filter",
            "rows": len(full),
            "sessions": int(full["SessionId"].nunique()),
            "items": int(full["ItemId"].nunique()),
            "rounds": rounds,
        }
    )
    say("split")
    tday, tsplit = SPLIT_PARAMS[name]
    splits = time_split(full, tday, tsplit)
    frames = {"full": full}
    for k in SPLITS:
        frames[k] = splits[k]
        steps.append(
            {
                "step": k,
                "rows": len(frames[k]),
                "sessions": int(frames[k]["SessionId"].nunique()),
                "items": int(frames[k]["ItemId"].nunique()),
            }
        )
    eff_tsplit = tsplit if tsplit is not None else (int(full["Time"].max()) if len(full) else None)
    return Processed(name, frames, stats_table(frames, name), steps, rounds, log, eff_tsplit, tday, quirk)


class EmptyResultError(ValueError):
    """A pipeline step left no events (or a split came out empty). ``step``: the step's name as in the manifest's
    ``steps``; ``before``/``after``: the row counts going into and out of it. The message adds why (the rule
    that removed everything, and the data's time range against the split boundary)."""

    def __init__(self, message: str, step: str, before: int, after: int):
        super().__init__(message)
        self.step, self.before, self.after = step, before, after


def _utc(t: int | None, unit: str) -> str:
    if t is None:
        return "?"
    sec = t if unit == "s" else t / 1000
    return dt.datetime.fromtimestamp(sec, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def empty_result(res: Processed) -> EmptyResultError | None:
    """The first step of ``res`` that left no events, as an :class:`EmptyResultError` (not raised), or None.

    Checks, in order: the event filter (no item views), the support filter (everything removed), then the
    splits train_full, test, train_tr, train_valid (each must hold events; the message gives the full data's time
    range and the boundary of the split, in UTC)."""
    steps = res.steps
    rows_before = None
    for st in steps:
        if st["step"].startswith("read "):
            rows_before = (rows_before or 0) + st["rows"]
            continue
        if st["step"] in SPLITS:
            break
        if st["rows"] == 0:
            if st["step"] == "support filter":
                log = res.filter_log[0] if res.filter_log else None
                detail = (
                    f"; round 1: {log['after_a']['rows']} rows after dropping sessions of length 1, "
                    f"{log['after_b']['rows']} after dropping items with < {MIN_ITEM_SUPPORT} events"
                    if log
                    else ""
                )
                msg = (
                    f"{res.name}: the support filter removed every event: {rows_before} rows before (after dedup), "
                    f"0 after {res.filter_rounds} round(s){detail}. Every item needs >= {MIN_ITEM_SUPPORT} events and "
                    "every session >= 2 (docs/datasets.md, 'Common steps', step 5): the input is too small or too sparse for the "
                    "study's protocol"
                )
            else:
                msg = f"{res.name}: step {st['step']!r} left no events ({rows_before} rows before, 0 after)"
            return EmptyResultError(msg, st["step"], int(rows_before or 0), 0)
        rows_before = st["rows"]
    full = res.frames["full"]
    unit = TIME_UNIT[res.name]
    lo, hi = (int(full["Time"].min()), int(full["Time"].max())) if len(full) else (None, None)
    tsplit = res.tsplit
    bounds = {
        "train_full": ("events before", None if tsplit is None else tsplit - res.tday),
        "test": ("sessions starting at or after", None if tsplit is None else tsplit - res.tday),
        "train_tr": ("events before", None if tsplit is None else tsplit - 2 * res.tday),
        "train_valid": ("train_full sessions starting at or after", None if tsplit is None else tsplit - 2 * res.tday),
    }
    for part in SPLITS:
        if len(res.frames[part]) == 0:
            rule, b = bounds[part]
            fixed = "fixed split date" if SPLIT_PARAMS[res.name][1] is not None else "split at the last event"
            return EmptyResultError(
                f"{res.name}: split {part!r} is empty: {len(full)} events before (full, {_utc(lo, unit)} .. "
                f"{_utc(hi, unit)}), 0 after; {part} = {rule} {_utc(b, unit)} ({fixed} {_utc(tsplit, unit)}, "
                f"test period {res.tday // (DAY_S if unit == 's' else DAY_MS)} day(s)): the data do not cover the "
                "split's period",
                part,
                len(full),
                0,
            )
    return None


# ----------------------------------------------------------------------------------------------------------------
# files: prepare / load with a content-hash cache


@dataclass
class Prepared:
    """A prepared dataset on disk: ``out_dir`` with ``<part>.parquet`` for each of ``PARTS``, ``stats.tsv`` and
    ``manifest.json``. ``cached`` is True when :func:`prepare` found a valid earlier run and wrote nothing."""

    name: str
    out_dir: Path
    manifest: dict
    cached: bool

    @property
    def stats(self) -> pd.DataFrame:
        return pd.read_csv(self.out_dir / "stats.tsv", sep="\t")

    def path(self, part: str) -> Path:
        if part not in PARTS:
            raise ValueError(f"part: unknown {part!r}; known: {', '.join(PARTS)}")
        return self.out_dir / f"{part}.parquet"

    def load(self, part: str) -> pd.DataFrame:
        """One prepared frame: SessionId int64, ItemId int64, Time int64 (unit: ``TIME_UNIT[name]``)."""
        return pq.read_table(self.path(part)).to_pandas()

    def frames(self) -> dict[str, pd.DataFrame]:
        """train_full, test, train_tr, train_valid (and full) as data frames."""
        return {p: self.load(p) for p in PARTS}


def _code_hash() -> str:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for f in (here / "pipeline.py", here / "readers.py", here.parent / "_suite_io.py"):
        h.update(f.read_bytes())
    return h.hexdigest()


def _versions() -> dict:
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "pyarrow": pa.__version__,
    }


def _cache_key(name: str, inputs: list[dict], options: dict, code: str) -> str:
    blob = json.dumps(
        {
            "name": name,
            "inputs": [(i["file"], i["sha256"]) for i in inputs],
            "options": options,
            "code": code,
            "version": PIPELINE_VERSION,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _valid_cache(out_dir: Path, key: str) -> dict | None:
    mpath = out_dir / "manifest.json"
    if not mpath.is_file():
        return None
    try:
        m = json.loads(mpath.read_text())
    except (OSError, ValueError):
        return None
    if m.get("cache_key") != key:
        return None
    for _part, info in m.get("outputs", {}).items():
        p = out_dir / info["file"]
        if not p.is_file() or p.stat().st_size != info["bytes"] or _suite_io.sha256_file(p) != info["sha256"]:
            return None
    return m


def _write_parquet(df: pd.DataFrame, path: Path, meta: dict) -> None:
    table = pa.table({c: np.asarray(df[c].to_numpy(), dtype=np.int64) for c in ("SessionId", "ItemId", "Time")})
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), b"gru4rec_conformance": json.dumps(meta).encode()}
    )
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, use_dictionary=False, compression="snappy", row_group_size=1 << 18)


def _write_tsv(df: pd.DataFrame, path: Path) -> None:
    table = pa.Table.from_pandas(df, preserve_index=False)
    with atomic_path(path) as tmp:
        pacsv.write_csv(table, tmp, write_options=pacsv.WriteOptions(delimiter="\t", quoting_style="none"))


def prepare(
    name: str,
    raw_dir,
    out_dir,
    *,
    files=(),
    allow_missing: bool = False,
    allow_empty: bool = False,
    index_quirk: bool = True,
    tsv: bool = False,
    force: bool = False,
    progress: bool = False,
) -> Prepared:
    """Read the raw files of ``name`` from ``raw_dir``, run :func:`process` and write the outputs to ``out_dir``.

    Raw files: ``files`` (explicit paths, each identified by its content) and, for inputs still lacking, ``raw_dir``
    (None: only ``files``), where they are found by their original names (``readers.RAW_FILES``), plain or
    .gz/.bz2/.zip, or inside a zip archive, else by content (``inputs.resolve_inputs``). ``allow_missing``: run
    with the inputs present where a documented deviation exists (the manifest lists ``missing_inputs``).
    ``allow_empty``: write the outputs even when a step leaves no events (otherwise :class:`EmptyResultError`,
    naming the step and the counts before and after; nothing is written). Outputs (all written atomically; ``manifest.json`` last, so a folder with a
    manifest is complete): ``<part>.parquet`` for full/train_full/test/train_tr/train_valid, ``stats.tsv``,
    ``manifest.json`` and, with ``tsv=True``, the study's TSV files (``<study prefix>_<part>.tsv``).

    Cache: the key hashes the input files' bytes, the options and this module's code; when ``out_dir`` holds a
    manifest with the same key and intact outputs, nothing is read or written (``Prepared.cached`` is True)
    unless ``force``. Errors: ValueError for an unknown name; ``inputs.MissingInputError`` (a FileNotFoundError
    saying which file is missing and why) and ``inputs.InputError`` (a file of another dataset); RawFormatError (a
    ValueError naming file and line) for bad raw input; :class:`EmptyResultError` -- then nothing is written.
    The progress bar is closed before any error propagates, so a message printed next starts on its own line.
    """
    _check_name(name)
    bar = _Progress(name, progress)
    try:
        return _prepare(name, raw_dir, Path(out_dir), bar, files, allow_missing, allow_empty, index_quirk, tsv, force)
    finally:
        bar.close()


def _prepare(name, raw_dir, out_dir, bar, files, allow_missing, allow_empty, index_quirk, tsv, force) -> Prepared:
    t0 = time.time()
    bar.step("hash inputs")
    found, missing = resolve_inputs(name, raw_dir, files, allow_missing=allow_missing)
    inputs = [
        {
            "file": f,
            "path": str(ident.path),
            "bytes": _suite_io._split_zip_member(ident.path)[0].stat().st_size,
            "sha256": _suite_io.sha256_file(ident.path),
            "identified_by": ident.evidence,
        }
        for f, ident in found.items()
    ]
    options: dict[str, object] = {"index_quirk": bool(index_quirk), "tsv": bool(tsv)}
    if missing:
        options["missing_inputs"] = list(missing)
    if allow_empty:
        options["allow_empty"] = True
    code = _code_hash()
    key = _cache_key(name, inputs, options, code)
    if not force:
        m = _valid_cache(out_dir, key)
        if m is not None:
            bar.done("cached: inputs, options and code unchanged; nothing to do")
            return Prepared(name, out_dir, m, True)
    frames_in = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for spec, ident in found.items():
            bar.step(f"read {spec}")
            frames_in[spec] = read_raw(name, ident.path, progress=bar.bytes_callback(spec))
    for w in caught:
        warnings.warn(w.message, w.category, stacklevel=2)
    pa.default_memory_pool().release_unused()  # hand pyarrow's cached read buffers back before the heavy steps
    res = process(name, frames_in, index_quirk=index_quirk, progress=bar.step, consume=True)
    del frames_in
    empty = empty_result(res)
    if empty is not None and not allow_empty:
        raise empty
    if empty is not None:
        warnings.warn(f"{empty} (written anyway: --allow-empty)", stacklevel=2)
        caught.append(warnings.WarningMessage(f"{empty} (written anyway: --allow-empty)", UserWarning, "", 0))
    bar.step("write")
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(out_dir)
    old_manifest = out_dir / "manifest.json"
    if old_manifest.exists():
        old_manifest.unlink()  # the folder is incomplete until the new manifest is written
    meta = {"dataset": name, "time_unit": TIME_UNIT[name], "pipeline_version": PIPELINE_VERSION}
    outputs = {}

    def write_part(part: str) -> dict:
        p = out_dir / f"{part}.parquet"
        _write_parquet(res.frames[part], p, {**meta, "part": part})
        return {
            "file": p.name,
            "rows": len(res.frames[part]),
            "bytes": p.stat().st_size,
            "sha256": _suite_io.sha256_file(p),
        }

    with ThreadPoolExecutor(max_workers=2) as pool:  # pyarrow and hashlib release the GIL
        for part, info in zip(PARTS, pool.map(write_part, PARTS)):
            outputs[part] = info
    stats_path = out_dir / "stats.tsv"
    with atomic_path(stats_path) as tmp:
        res.stats.to_csv(tmp, sep="\t", index=False, float_format="%.4f")
    outputs["stats"] = {
        "file": stats_path.name,
        "rows": len(res.stats),
        "bytes": stats_path.stat().st_size,
        "sha256": _suite_io.sha256_file(stats_path),
    }
    if tsv:
        for part in PARTS:
            p = out_dir / f"{STUDY_PREFIX[name]}_{part}.tsv"
            _write_tsv(res.frames[part], p)
            outputs[f"tsv_{part}"] = {
                "file": p.name,
                "rows": len(res.frames[part]),
                "bytes": p.stat().st_size,
                "sha256": _suite_io.sha256_file(p),
            }
    manifest = {
        "dataset": name,
        "pipeline_version": PIPELINE_VERSION,
        "code_sha256": code,
        "cache_key": key,
        "options": options,
        "inputs": inputs,
        "missing_inputs": list(missing),
        "warnings": [str(w.message) for w in caught],
        "steps": res.steps,
        "filter_rounds": res.filter_rounds,
        "filter_log": res.filter_log,
        "time_unit": TIME_UNIT[name],
        "tday": res.tday,
        "tsplit": res.tsplit,
        "test_boundary": None if res.tsplit is None else res.tsplit - res.tday,
        "valid_boundary": None if res.tsplit is None else res.tsplit - 2 * res.tday,
        "index_quirk_applied": res.index_quirk,
        "outputs": outputs,
        "columns": {"SessionId": "int64", "ItemId": "int64", "Time": f"int64 ({TIME_UNIT[name]})"},
        "library_versions": _versions(),
        "created_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round(time.time() - t0, 3),
    }
    atomic_write_json(out_dir / "manifest.json", manifest, default=_json_default)
    bar.done(
        f"{len(res.frames['train_full'])} train_full / {len(res.frames['test'])} test events, "
        f"{res.filter_rounds} filter rounds"
    )
    return Prepared(name, out_dir, manifest, False)


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    raise TypeError(type(o))


def load_prepared(out_dir) -> Prepared:
    """Open a folder written by :func:`prepare`; raises FileNotFoundError when it has no manifest (incomplete)."""
    out_dir = Path(out_dir)
    mpath = out_dir / "manifest.json"
    if not mpath.is_file():
        raise FileNotFoundError(f"{out_dir}: no manifest.json (not prepared, or an interrupted run)")
    m = json.loads(mpath.read_text())
    return Prepared(m["dataset"], out_dir, m, True)


class _Progress:
    """One tqdm bar per prepare() call, advanced once per pipeline step (disabled unless requested)."""

    STEPS = 9

    def __init__(self, name: str, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.STEPS, desc=name, unit="step", file=sys.stderr)
        self.n = 0
        self.inner = None

    def step(self, label: str) -> None:
        if self.bar is not None:
            if self.n:
                self.bar.update(1)
            self.n += 1
            self.bar.set_description(label)

    def bytes_callback(self, label: str):
        """A reader progress callback that shows a byte bar under the step bar (None when disabled)."""
        if self.bar is None:
            return None
        from tqdm.auto import tqdm

        state = {}

        def cb(done: int, total: int) -> None:
            if "bar" not in state:
                state["bar"] = tqdm(total=total, desc=label, unit="B", unit_scale=True, leave=False, file=sys.stderr)
                self.inner = state["bar"]
            state["bar"].update(done - state["bar"].n)
            if done >= total:
                state["bar"].close()

        return cb

    def done(self, msg: str) -> None:
        if self.bar is not None:
            self.bar.update(self.bar.total - self.bar.n)
            self.bar.set_description(msg)
        self.close()

    def close(self) -> None:
        """Close the bars (idempotent): tqdm ends its line, so a message printed next starts on its own line."""
        inner = getattr(self, "inner", None)
        if inner is not None:
            inner.close()
            self.inner = None
        if self.bar is not None:
            self.bar.close()
            self.bar = None
