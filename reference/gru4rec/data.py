"""Session data preparation and the session-parallel minibatch iterator (docs/algorithm.md, 'Input data' to 'The
session-parallel iterator').

Behaviour follows the official PyTorch port (``SessionDataIterator`` in hidasib/GRU4Rec_PyTorch_Official
d1fc311): item map in order of first appearance, sessions sorted by id then time, training order = argsort of
each session's first timestamp, lanes refilled in lock-step, the batch shrinking at the end of the epoch.
The input frame is never modified (the port sorts the caller's frame in place).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass
class SessionData:
    """Events of a set of sessions, sorted by (session id, time), as item column indices.

    Attributes:
        item_ids: (n_items,) the item id of every score column (the training item map), any dtype.
        items: (n_events,) int64 item column index of every event, sessions contiguous.
        offsets: (n_sessions + 1,) int64; session k occupies rows offsets[k] .. offsets[k+1]-1.
        session_ids: (n_sessions,) original session id of each session (ascending).
        order: (n_sessions,) int64 processing order: argsort of each session's first timestamp
            (numpy default sort kind, exactly as the port).
        supports: (n_items,) float64 number of events of each item in *this* data (training supports for
            training data; only meaningful there).
    """

    item_ids: np.ndarray
    items: np.ndarray
    offsets: np.ndarray
    session_ids: np.ndarray
    order: np.ndarray
    supports: np.ndarray

    @property
    def n_sessions(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_events(self) -> int:
        return len(self.items)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)


def validate_frame(data, item_key: str, session_key: str, time_key: str, what: str = "data") -> None:
    """Check a session frame before use; raise ValueError naming the offending column.

    Checks: a pandas DataFrame; the three columns present; no missing session/item ids; a numeric,
    finite, non-missing time column; at least one row.
    """
    if not isinstance(data, pd.DataFrame):
        raise ValueError(
            f"{what}: expected a pandas DataFrame with columns {session_key!r}, {item_key!r}, "
            f"{time_key!r}, got {type(data).__name__}"
        )
    for key, role in ((session_key, "session_key"), (item_key, "item_key"), (time_key, "time_key")):
        if key not in data.columns:
            raise ValueError(
                f"{what}: column {key!r} ({role}) is missing; columns present: {', '.join(map(str, data.columns))}"
            )
    if len(data) == 0:
        raise ValueError(f"{what}: the frame has no rows")
    for key in (session_key, item_key):
        n_null = int(data[key].isna().sum())
        if n_null:
            first = int(np.flatnonzero(data[key].isna().to_numpy())[0])
            raise ValueError(
                f"{what}: column {key!r} has {n_null} missing (NaN/None) value(s), first at row position {first}"
            )
    t = data[time_key]
    if not (pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t)):
        raise ValueError(f"{what}: column {time_key!r} must be numeric (int or float timestamps), got dtype {t.dtype}")
    tv = t.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(tv)
    if bad.any():
        raise ValueError(
            f"{what}: column {time_key!r} has {int(bad.sum())} missing or non-finite value(s), "
            f"first at row position {int(np.flatnonzero(bad)[0])}"
        )


def _is_sorted(data: pd.DataFrame, session_key: str, time_key: str) -> bool:
    # Same test as the port's sort_if_needed: session ids non-decreasing, time non-decreasing within a session.
    s = data[session_key].to_numpy()
    t = data[time_key].to_numpy()
    if not np.all(s[1:] >= s[:-1]):
        return False
    return bool(np.all((s[1:] != s[:-1]) | (t[1:] >= t[:-1])))


def _sorted_view(data: pd.DataFrame, session_key: str, time_key: str) -> pd.DataFrame:
    if _is_sorted(data, session_key, time_key):
        return data
    # pandas sorts by several keys with a stable lexsort, as in the port.
    return data.sort_values([session_key, time_key], kind="mergesort")


def _offsets_and_order(data: pd.DataFrame, session_key: str, time_key: str):
    grouped = data.groupby(session_key, sort=True)
    sizes = grouped.size()
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    offsets[1:] = sizes.cumsum().to_numpy()
    # numpy's default argsort kind, as the port (ties in start time keep numpy's order).
    order = np.argsort(grouped[time_key].min().to_numpy()).astype(np.int64)
    return offsets, sizes.index.to_numpy(), order


def build_training_data(data: pd.DataFrame, item_key: str, session_key: str, time_key: str) -> SessionData:
    """Item map, sorting, offsets, session order and supports of a training frame (docs/algorithm.md, 'Item map', 'Sorting and
    session order').

    The item map assigns 0..n_items-1 in order of first appearance in ``data`` as given (before sorting).
    ``data`` must have passed :func:`validate_frame`. It is not modified.
    """
    item_ids = pd.unique(data[item_key].to_numpy())
    itemidmap = pd.Series(np.arange(len(item_ids), dtype=np.int64), index=item_ids)
    sdata = _sorted_view(data, session_key, time_key)
    offsets, session_ids, order = _offsets_and_order(sdata, session_key, time_key)
    items = itemidmap[sdata[item_key].to_numpy()].to_numpy().astype(np.int64)
    supports = np.bincount(items, minlength=len(item_ids)).astype(np.float64)
    return SessionData(np.asarray(item_ids), items, offsets, session_ids, order, supports)


def build_test_data(
    data: pd.DataFrame, item_ids: np.ndarray, item_key: str, session_key: str, time_key: str
) -> SessionData:
    """Test events mapped to the training item columns; events of unknown items are dropped first (docs/algorithm.md,
    'Evaluation protocol', item 1).

    Returns a SessionData with possibly zero events (the caller decides whether that is an error).
    """
    itemidmap = pd.Series(np.arange(len(item_ids), dtype=np.int64), index=item_ids)
    known = data[item_key].isin(itemidmap.index)
    kdata = data[known.to_numpy()]
    if len(kdata) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return SessionData(item_ids, empty, np.zeros(1, dtype=np.int64), empty, empty, np.zeros(len(item_ids)))
    sdata = _sorted_view(kdata, session_key, time_key)
    offsets, session_ids, order = _offsets_and_order(sdata, session_key, time_key)
    items = itemidmap[sdata[item_key].to_numpy()].to_numpy().astype(np.int64)
    supports = np.bincount(items, minlength=len(item_ids)).astype(np.float64)
    return SessionData(item_ids, items, offsets, session_ids, order, supports)


@dataclass
class Run:
    """A block of lock-step minibatches between two lane changes (one pass of the port's inner loop).

    Attributes:
        in_items, out_items: (n_steps, b) int64 item columns of inputs and targets; step i trains
            in_items[i] → out_items[i] on every lane.
        keep: (b,) int64 rows of the previous run's lanes that survive into this run, in order, or None when
            all survive. Applied to the hidden state *before* ``reset``.
        reset: (b,) bool, lanes that hold a new session and start from a zero hidden state (all layers), or
            None (first run of an epoch: the state is zero anyway).
        lane_sessions: (b,) int64 session index (into SessionData.session_ids) of every lane.
        start_pos: (b,) int64 position within its session of each lane's first input event in this run.
    """

    in_items: np.ndarray
    out_items: np.ndarray
    keep: np.ndarray | None
    reset: np.ndarray | None
    lane_sessions: np.ndarray
    start_pos: np.ndarray

    @property
    def n_steps(self) -> int:
        return self.in_items.shape[0]

    @property
    def n_lanes(self) -> int:
        return self.in_items.shape[1]


class SessionParallelIterator:
    """Session-parallel lock-step minibatches of one epoch (docs/algorithm.md, 'The session-parallel iterator'; the
    port's ``SessionDataIterator``).

    Iterating yields :class:`Run` objects. Lanes start with the first ``n_lanes`` sessions of
    ``data.order``; a lane whose session has no transition left takes the next session; when none is left
    the lane is removed (the batch shrinks). The epoch ends when no lane is left, or, with
    ``stop_below_two_lanes`` (training with n_sample = 0), as soon as fewer than two lanes remain.

    Extension points (override in a subclass):
        - :meth:`should_stop` — the end-of-epoch rule;
        - :meth:`reset_mask` — which lanes get a zeroed hidden state before a given step.
    """

    def __init__(self, data: SessionData, n_lanes: int, stop_below_two_lanes: bool):
        if n_lanes < 1:
            raise ValueError(f"batch_size must be >= 1, got {n_lanes}")
        if n_lanes > data.n_sessions:
            raise ValueError(f"batch_size={n_lanes} exceeds the number of sessions ({data.n_sessions})")
        self.data = data
        self.n_lanes = n_lanes
        self.stop_below_two_lanes = stop_below_two_lanes

    def should_stop(self, n_valid: int, n_lanes_before: int) -> bool:
        """End-of-epoch rule, asked after lanes were refilled: ``n_valid`` lanes still hold a session,
        ``n_lanes_before`` lanes were active in the run that just ended. Official: stop when no lane is left
        (handled by the caller) or, without extra samples, when fewer than two remain."""
        return self.stop_below_two_lanes and n_valid < 2

    def reset_mask(self, run: Run, step: int) -> np.ndarray | None:
        """Lanes whose hidden state is zeroed right before ``step`` of ``run``: the new sessions, at the
        run's first step only."""
        return run.reset if step == 0 else None

    def __iter__(self) -> Iterator[Run]:
        d = self.data
        offsets, order, items = d.offsets, d.order, d.items
        n_sessions = d.n_sessions
        iters = np.arange(self.n_lanes, dtype=np.int64)
        maxiter = int(iters.max())
        lane_sess = order[iters]
        start = offsets[lane_sess].copy()
        end = offsets[lane_sess + 1].copy()
        keep: np.ndarray | None = None
        reset: np.ndarray | None = None
        while True:
            minlen = int((end - start).min())
            if minlen > 1:
                idx = start[None, :] + np.arange(minlen, dtype=np.int64)[:, None]
                block = items[idx]
                yield Run(block[:-1], block[1:], keep, reset, lane_sess.copy(), start - offsets[lane_sess])
                keep, reset = None, None
            start = start + minlen - 1
            finished = (end - start) <= 1
            n_finished = int(finished.sum())
            iters[finished] = maxiter + np.arange(1, n_finished + 1)
            maxiter += n_finished
            valid = iters < n_sessions
            n_valid = int(valid.sum())
            if n_valid == 0:
                return
            refill = finished & valid
            lane_sess = lane_sess.copy()
            lane_sess[refill] = order[iters[refill]]
            start[refill] = offsets[lane_sess[refill]]
            end[refill] = offsets[lane_sess[refill] + 1]
            n_before = len(iters)
            iters, start, end, lane_sess = iters[valid], start[valid], end[valid], lane_sess[valid]
            if self.should_stop(n_valid, n_before):
                return
            # Compose with pending changes of runs that had no step (a lane holding a length-1 session).
            new_keep = np.flatnonzero(valid) if n_valid < n_before else None
            new_reset = finished[valid]
            if reset is not None:
                reset = reset[new_keep] if new_keep is not None else reset
                new_reset = new_reset | reset
            if keep is not None and new_keep is not None:
                new_keep = keep[new_keep]
            elif keep is not None:
                new_keep = keep
            keep, reset = new_keep, new_reset
