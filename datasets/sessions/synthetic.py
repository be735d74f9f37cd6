"""Seeded synthetic stand-ins of the five session datasets, written as raw files in each dataset's exact raw format
(docs/datasets.md, 'Stand-ins' for what they exercise, the per-dataset sections for the formats), so that the same readers and
pipeline run in CI and, at ``scale=1``, on inputs of the full datasets' size (docs/datasets.md, 'Published statistics') for GPU benchmarks.

What is built in (Part 3):
- session lengths: a mixture of singletons (about 35%) and a geometric tail (mean about 4), capped at 200;
- item popularity: Zipf (exponent about 1) over a catalogue several times larger than what survives the
  support filter, plus first-order item-to-item transitions (so models have something to learn);
- repeats: consecutive repeats at the dataset's rate, non-consecutive re-visits (i, j, i), and explicit
  (i, j, i) sessions with a j that the support filter removes (post-filter (i, i));
- time: the dataset's calendar span with a diurnal rhythm, log-normal gaps inside sessions (median ~40 s),
  identical timestamps, sessions straddling the test and validation boundaries and one starting exactly on
  the test boundary, items that occur only in test sessions;
- owners (Rees46 users, RetailRocket visitors, Coveo source sessions): follow-up bursts 1 s under, exactly on
  and 1 s over the 1-hour gap, and non-view events between two view bursts (bridging them for RetailRocket and
  Coveo, not for Rees46);
- event-type mixes and format details (Yoochoose categories; Rees46 ' UTC' times, category ids, UUID sessions;
  Coveo hashes, empty and pipe-joined SKUs; RetailRocket unsorted rows with transaction ids; Diginetica 'NA'
  users, ms time frames, dates, sessions spanning two dates).

Generation is streamed in time windows (``chunk_events`` raw events at a time), so memory stays bounded at
any scale. Files are written atomically.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from gru4rec_conformance.fileio import atomic_path

from .readers import RAW_FILES

__all__ = ["PROFILES", "CI_SCALE", "generate_raw", "Profile", "iso_timestamps"]

DAY_MS = 86_400_000
HOUR_MS = 3_600_000


def _ms(date: str) -> int:
    return int(np.datetime64(date, "ms").astype(np.int64))


@dataclass(frozen=True)
class Profile:
    """Calibration of one dataset's stand-in. Counts are those of the full raw data (scale=1)."""

    name: str
    full_events: int  # raw rows of all raw files together (docs/datasets.md, 'Published statistics')
    start_ms: int  # first possible event
    end_ms: int  # the last event (the anchor session ends exactly here)
    items_full: int  # raw catalogue size at full scale
    zipf: float = 1.0
    p_single: float = 0.35  # share of sessions with one distinct view (before repeats)
    tail_mean: float = 4.0  # mean length of the non-singleton part
    repeat: float = 0.22  # probability that a view is immediately repeated
    revisit: float = 0.06  # probability that a view returns to the item two steps back
    markov: float = 0.5  # probability of following one of the previous item's successors
    tie: float = 0.05  # probability that a gap is zero (identical timestamps)
    nonview: float = 0.0  # non-view events per view (Rees46 carts/purchases, RetailRocket carts/transactions)
    tday_ms: int = DAY_MS  # length of the test period
    fixed_tsplit_ms: int | None = None  # fixed split anchor (Rees46, RetailRocket)
    owner_sessions: float = 1.0  # mean sessions per owner (users / visitors)
    time_unit_ms: int = 1000  # unit of the pipeline's Time (1000: seconds, 1: milliseconds)
    trend: float = 0.0  # traffic grows linearly over the span: density at the end = (1 + trend) x the start


PROFILES: dict[str, Profile] = {
    "yoochoose": Profile(
        "yoochoose",
        41_255_735,
        _ms("2014-04-01T03:00"),
        _ms("2014-09-30T20:59:59.500"),
        52_739,
        repeat=0.19,
        tail_mean=3.9,
        trend=-0.7,
    ),
    "rees46": Profile(
        "rees46",
        109_950_743,
        _ms("2019-10-01T00:00"),
        _ms("2019-11-30T23:59:59"),
        206_876,
        repeat=0.26,
        tail_mean=4.3,
        p_single=0.3,
        nonview=0.04,
        fixed_tsplit_ms=_ms("2019-12-01"),
        owner_sessions=2.2,
    ),
    "coveo": Profile(
        "coveo",
        5_433_611,
        _ms("2018-11-15T00:00"),
        _ms("2018-12-03T22:10:00.123"),
        14_000,
        repeat=0.12,
        tail_mean=8.5,
        p_single=0.3,
        time_unit_ms=1,
        trend=-0.5,
    ),
    "retailrocket": Profile(
        "retailrocket",
        2_756_101,
        _ms("2015-05-03T03:00"),
        _ms("2015-09-18T02:59:00"),
        235_061,
        repeat=0.15,
        tail_mean=4.0,
        p_single=0.82,
        nonview=0.035,
        tday_ms=7 * DAY_MS,
        fixed_tsplit_ms=_ms("2015-09-18T03:00"),
        owner_sessions=1.3,
        time_unit_ms=1,
        trend=-0.4,
    ),
    "diginetica": Profile(
        "diginetica",
        1_235_380,
        _ms("2016-01-01T00:00"),
        _ms("2016-06-01T20:00"),
        122_993,
        repeat=0.06,
        tail_mean=4.6,
        p_single=0.3,
        tday_ms=7 * DAY_MS,
        time_unit_ms=1,
        trend=3.0,
    ),
}

#: scale giving about 3-4 x 10^4 raw events per dataset (CI size, seconds to generate and prepare)
CI_SCALE = {"yoochoose": 1e-3, "rees46": 3e-4, "coveo": 6e-3, "retailrocket": 1.2e-2, "diginetica": 2.6e-2}


# ----------------------------------------------------------------------------------------------------------------
# fast text formatting


def _civil(days: np.ndarray):
    """(year, month, day) of days since 1970-01-01 (proleptic Gregorian; H. Hinnant's algorithm)."""
    z = days + 719468
    era = np.floor_divide(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = np.where(mp < 10, mp + 3, mp - 9)
    return y + (m <= 2), m, d


def _digits(buf: np.ndarray, col: int, values: np.ndarray, width: int) -> None:
    v = values.copy()
    for k in range(width - 1, -1, -1):
        buf[:, col + k] = 48 + v % 10
        v //= 10


def _strings(buf: np.ndarray) -> pa.Array:
    n, w = buf.shape
    offsets = pa.py_buffer(np.arange(0, (n + 1) * w, w, dtype=np.int32).tobytes())
    return pa.StringArray.from_buffers(n, offsets, pa.py_buffer(np.ascontiguousarray(buf).tobytes()))


def iso_timestamps(ms: np.ndarray, style: str) -> pa.Array:
    """Format epoch milliseconds as strings: style 'yoochoose' -> '2014-04-07T10:51:09.277Z', 'rees46' ->
    '2019-10-01 00:00:00 UTC' (seconds, floor), 'date' -> '2016-05-09'. Vectorised (no per-row Python)."""
    ms = np.asarray(ms, dtype=np.int64)
    days = np.floor_divide(ms, DAY_MS)
    rem = ms - days * DAY_MS
    y, m, d = _civil(days)
    if style == "date":
        buf = np.empty((len(ms), 10), dtype=np.uint8)
    elif style == "yoochoose":
        buf = np.empty((len(ms), 24), dtype=np.uint8)
    elif style == "rees46":
        buf = np.empty((len(ms), 23), dtype=np.uint8)
    else:
        raise ValueError(f"style: unknown {style!r}")
    _digits(buf, 0, y, 4)
    buf[:, 4] = buf[:, 7] = ord("-")
    _digits(buf, 5, m, 2)
    _digits(buf, 8, d, 2)
    if style == "date":
        return _strings(buf)
    buf[:, 10] = ord("T") if style == "yoochoose" else ord(" ")
    _digits(buf, 11, rem // HOUR_MS, 2)
    buf[:, 13] = buf[:, 16] = ord(":")
    _digits(buf, 14, (rem // 60000) % 60, 2)
    _digits(buf, 17, (rem // 1000) % 60, 2)
    if style == "yoochoose":
        buf[:, 19] = ord(".")
        _digits(buf, 20, rem % 1000, 3)
        buf[:, 23] = ord("Z")
    else:
        buf[:, 19:23] = np.frombuffer(b" UTC", dtype=np.uint8)
    return _strings(buf)


def _hex(rng: np.random.Generator, n: int, nbytes: int, uuid_dashes: bool = False) -> np.ndarray:
    """n random lowercase hex strings of 2*nbytes characters (UUID layout with dashes if asked), as uint8 rows."""
    raw = rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
    table = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    out = np.empty((n, 2 * nbytes), dtype=np.uint8)
    out[:, 0::2] = table[raw >> 4]
    out[:, 1::2] = table[raw & 15]
    if uuid_dashes:  # 8-4-4-4-12
        dash = np.full((n, 1), ord("-"), dtype=np.uint8)
        out = np.hstack([out[:, :8], dash, out[:, 8:12], dash, out[:, 12:16], dash, out[:, 16:20], dash, out[:, 20:]])
    return out


# ----------------------------------------------------------------------------------------------------------------
# the session model


@dataclass
class _World:
    """Everything fixed for one generate_raw call: catalogue, popularity, transitions, id maps."""

    prof: Profile
    n_items: int
    cdf: np.ndarray
    succ: np.ndarray
    item_ids: np.ndarray
    new_ids: np.ndarray  # items used only in test sessions
    rare_ids: np.ndarray  # items used once, as j in (i, j, i)
    n_events: int
    n_sessions: int


def _catalogue_size(prof: Profile, n_events: int) -> int:
    """Catalogue several times larger than what survives the support filter (Zipf exponent a): about
    n = 5 * (E / (5 H))^(1/a) items, capped by the real catalogue size."""
    n = 1000
    for _ in range(20):
        h = math.log(n) + 0.5772
        n = int(5 * (n_events / (5 * h)) ** (1 / prof.zipf))
    return int(min(max(n, 200), prof.items_full))


_ID_SPACE = {
    "yoochoose": (214_500_000, 700_000),
    "rees46": (1_000_000, 99_000_000),
    "coveo": (0, 10**9),
    "retailrocket": (0, 466_868),
    "diginetica": (1, 184_000),
}


def _world(prof: Profile, scale: float, rng: np.random.Generator) -> _World:
    n_events = max(2000, int(round(prof.full_events * scale)))
    mean_len = prof.p_single + (1 - prof.p_single) * prof.tail_mean
    views_per_row = 1.0 / ((1 + prof.repeat) * (1 + prof.nonview))
    if prof.name == "coveo":  # each detail view comes with about 1.85 other rows (see _coveo_tables)
        views_per_row = 1.0 / ((1 + prof.repeat) * 2.85)
    n_sessions = max(200, int(n_events * views_per_row / mean_len))
    n_items = _catalogue_size(prof, int(n_events * views_per_row))
    # Zipf-Mandelbrot: (rank + q)^-a; the offset q flattens the head to the real top-1% shares (4-17%)
    w = (np.arange(1, n_items + 1, dtype=np.float64) + min(50.0, max(5.0, n_items / 100))) ** -prof.zipf
    cdf = np.cumsum(w / w.sum())
    off = rng.integers(1, 25, size=(n_items, 3)) * rng.choice([-1, 1], size=(n_items, 3))
    succ = np.clip(np.arange(n_items)[:, None] + off, 0, n_items - 1)
    base, span = _ID_SPACE[prof.name]
    need = n_items + 64 + 64
    ids = base + _choice_no_replace(rng, max(span, 2 * need), need)
    return _World(
        prof, n_items, cdf, succ, ids[:n_items], ids[n_items : n_items + 64], ids[n_items + 64 :], n_events, n_sessions
    )


def _choice_no_replace(rng: np.random.Generator, space: int, k: int) -> np.ndarray:
    """k distinct integers in [0, space) without materialising the space."""
    out = np.unique(rng.integers(0, space, size=int(k * 1.3) + 16))
    while len(out) < k:
        out = np.unique(np.concatenate([out, rng.integers(0, space, size=k)]))
    return rng.permutation(out)[:k]


def _zipf(world: _World, rng: np.random.Generator, n: int) -> np.ndarray:
    return np.minimum(np.searchsorted(world.cdf, rng.random(n)), world.n_items - 1)


def _diurnal(rng: np.random.Generator, n: int) -> np.ndarray:
    """Time of day in ms: a mixture peaking around 20:00 and 12:00 UTC."""
    peak = np.where(rng.random(n) < 0.6, 20.0, 12.0)
    h = np.mod(rng.normal(peak, 3.0), 24.0)
    return (h * HOUR_MS).astype(np.int64)


def _trend_cdf(x, gamma: float):
    """Unnormalised CDF of the density 1 + gamma*x on [0, 1]."""
    return x + gamma * x * x / 2


def _trend_times(rng: np.random.Generator, n: int, t_lo: int, t_hi: int, t0: int, t1: int, gamma: float) -> np.ndarray:
    """n times in [t_lo, t_hi) from the linear-trend density over the whole span [t0, t1) (inverse CDF)."""
    x_lo, x_hi = (t_lo - t0) / (t1 - t0), (t_hi - t0) / (t1 - t0)
    u = _trend_cdf(x_lo, gamma) + rng.random(n) * (_trend_cdf(x_hi, gamma) - _trend_cdf(x_lo, gamma))
    x = u if gamma == 0 else (np.sqrt(1 + 2 * gamma * u) - 1) / gamma
    return (t0 + x * (t1 - t0)).astype(np.int64)


def _views(world: _World, rng: np.random.Generator, n_sessions: int, t_lo: int, t_hi: int):
    """Random sessions starting in [t_lo, t_hi): returns per-session start, owner slot and per-event arrays
    (session index, item rank, time in ms)."""
    prof = world.prof
    single = rng.random(n_sessions) < prof.p_single
    tail = 2 + rng.geometric(1.0 / max(prof.tail_mean - 1, 1.01), size=n_sessions) - 1
    L = np.where(single, 1, np.minimum(tail, 200)).astype(np.int64)
    order = np.argsort(-L, kind="stable")  # longest first: active sessions at position k are a prefix
    L = L[order]
    starts = np.zeros(n_sessions, dtype=np.int64)
    starts[1:] = np.cumsum(L)[:-1]
    total = int(L.sum())
    rank = np.empty(total, dtype=np.int64)
    rank[starts] = _zipf(world, rng, n_sessions)
    for k in range(1, int(L.max())):
        act = int(np.searchsorted(-L, -k, side="left"))  # sessions with L > k
        idx = starts[:act] + k
        prev = rank[idx - 1]
        u = rng.random(act)
        new = _zipf(world, rng, act)
        follow = world.succ[prev, rng.integers(0, 3, size=act)]
        new = np.where(u < prof.markov, follow, new)
        if k >= 2:
            new = np.where(u > 1 - prof.revisit, rank[idx - 2], new)
        rank[idx] = new
    sess = np.repeat(np.arange(n_sessions), L)
    # consecutive repeats
    copies = (rng.random(total) < prof.repeat).astype(np.int64)
    copies += (copies > 0) & (rng.random(total) < 0.15)
    rep = 1 + copies
    is_copy = np.ones(int(rep.sum()), dtype=bool)
    first_of = np.cumsum(rep) - rep
    is_copy[first_of] = False
    rank = np.repeat(rank, rep)
    sess = np.repeat(sess, rep)
    # times
    t0, t1 = prof.start_ms, prof.end_ms - 3 * HOUR_MS
    days = _trend_times(rng, n_sessions, t_lo, t_hi, t0, t1, prof.trend) // DAY_MS
    start = days * DAY_MS + _diurnal(rng, n_sessions)
    start = t_lo + np.mod(start - t_lo, t_hi - t_lo)  # wrap into the window (no pile-up at its edges)
    n = len(rank)
    gap = np.exp(rng.normal(np.log(40_000.0), 1.2, size=n)).astype(np.int64)
    gap = np.minimum(gap, 45 * 60_000)
    gap = np.where(is_copy, np.where(rng.random(n) < 0.3, 0, rng.integers(1000, 30_000, size=n)), gap)
    gap = np.where(rng.random(n) < prof.tie, 0, gap)
    first = np.ones(n, dtype=bool)
    first[1:] = sess[1:] != sess[:-1]
    gap[first] = 0
    cum = np.cumsum(gap)
    t = start[sess] + cum - cum[first][sess]
    return start, sess, rank, t


# ----------------------------------------------------------------------------------------------------------------
# event tables (all datasets): owner, session key, time (ms), item id, event kind


KIND_VIEW, KIND_NONVIEW, KIND_PAGE = 0, 1, 2


@dataclass
class _Chunk:
    owner: np.ndarray  # user / visitor / source session / session id
    time: np.ndarray  # ms
    item: np.ndarray  # item id (int64); -1 = no product
    kind: np.ndarray  # 0 view, 1 non-view product event, 2 page view without product (Coveo)
    sub: np.ndarray  # kind detail (e.g. 0 cart / 1 purchase)
    session: np.ndarray  # generated session number (for formats with precomputed sessions)
    explicit: np.ndarray  # bool: a hand-placed trap session (Diginetica: time frame counted from midnight)

    FIELDS = ("owner", "time", "item", "kind", "sub", "session", "explicit")

    @staticmethod
    def cat(parts: list[_Chunk]) -> _Chunk:
        return _Chunk(*(np.concatenate([getattr(p, f) for p in parts]) for f in _Chunk.FIELDS))

    def take(self, idx) -> _Chunk:
        return _Chunk(*(getattr(self, f)[idx] for f in _Chunk.FIELDS))

    def __len__(self):
        return len(self.time)


def _explicit(world: _World, rng: np.random.Generator, owner0: int, session0: int) -> _Chunk:
    """The hand-placed traps (see module docstring); owners and sessions numbered from owner0/session0."""
    prof = world.prof
    top = world.item_ids[:10]
    unit = prof.time_unit_ms
    end = prof.end_ms
    tsplit = prof.fixed_tsplit_ms if prof.fixed_tsplit_ms is not None else end // unit * unit
    b_test = tsplit - prof.tday_ms
    b_valid = tsplit - 2 * prof.tday_ms
    rows = []  # (owner, session, time, item, kind, sub)
    counter = {"o": owner0, "s": session0}

    def new_owner() -> int:
        counter["o"] += 1
        return counter["o"] - 1

    def sess(times, items, kinds=None, own=None):
        own = new_owner() if own is None else own
        for k, (tt, it) in enumerate(zip(times, items)):
            rows.append((own, counter["s"], int(tt), int(it), 0 if kinds is None else kinds[k], 0))
        counter["s"] += 1

    # the anchor: last event of the data exactly at `end` (popular items: survives the filter)
    sess([end - 300_000, end - 120_000, end], [top[0], top[1], top[2]])
    # sessions straddling the test and the validation boundary; one starting exactly on the test boundary
    for b in (b_test, b_valid):
        sess([b - 60_000, b - 20_000, b + 30_000, b + 200_000], [top[3], top[4], top[5], top[6]])
        sess([b - 5 * 60_000, b + 10_000, b + 20_000], [top[1], top[7], top[8]])
    sess([b_test, b_test + 40_000], [top[0], top[9]])
    # items only in test sessions, each in 6 sessions so that they survive the filter
    for k in range(3):
        for r in range(6):
            t0 = b_test + (k * 6 + r + 1) * (prof.tday_ms // 40)
            sess([t0, t0 + 30_000, t0 + 70_000], [top[r % 10], world.new_ids[k], top[(r + 3) % 10]])
    # (i, j, i) with j filtered out: becomes (i, i) after the filter and stays
    for k in range(6):
        t0 = b_valid - (k + 2) * 3 * HOUR_MS
        sess([t0, t0 + 25_000, t0 + 50_000], [top[k], world.rare_ids[k], top[k]])
    # identical timestamps inside a session, items in descending id order
    t0 = b_valid - 40 * HOUR_MS
    hi, lo = max(top[0], top[1]), min(top[0], top[1])
    sess([t0, t0 + 1_000, t0 + 1_000, t0 + 9_000], [top[2], hi, lo, top[3]])
    if prof.name in ("rees46", "retailrocket", "coveo"):
        # follow-up bursts of one owner 1 s under / exactly / 1 s over the 1-hour gap
        for k, g in enumerate((HOUR_MS - 1000, HOUR_MS, HOUR_MS + 1000)):
            t0 = b_valid - (30 + 3 * k) * HOUR_MS
            own = new_owner()
            sess([t0, t0 + 20_000], [top[1], top[2]], own=own)
            t1 = t0 + 20_000 + g
            sess([t1, t1 + 15_000], [top[3], top[4]], own=own)
        # two view bursts 80 min apart with a non-view event 40 min after the first burst
        t0 = b_valid - 50 * HOUR_MS
        sess(
            [t0, t0 + 20_000, t0 + 20_000 + 40 * 60_000, t0 + 20_000 + 80 * 60_000, t0 + 20_000 + 81 * 60_000],
            [top[5], top[6], top[6], top[7], top[8]],
            kinds=[0, 0, 1, 0, 0],
        )
    a = np.array(rows, dtype=np.int64)
    return _Chunk(a[:, 0], a[:, 2], a[:, 3], a[:, 4], a[:, 5], a[:, 1], np.ones(len(a), dtype=bool))


def _chunks(world: _World, rng: np.random.Generator, chunk_events: int):
    """Yield _Chunk objects covering the calendar span in time windows (explicit traps in the last one)."""
    prof = world.prof
    n_chunks = max(1, int(math.ceil(world.n_events / chunk_events)))
    edges = np.linspace(prof.start_ms, prof.end_ms - 3 * HOUR_MS, n_chunks + 1).astype(np.int64)
    x = (edges - edges[0]) / (edges[-1] - edges[0])
    cdf = _trend_cdf(x, prof.trend) / _trend_cdf(1.0, prof.trend)
    per = np.diff(np.round(cdf * world.n_sessions).astype(np.int64))
    n_owners = max(1, int(world.n_sessions / prof.owner_sessions))
    owner_w = np.arange(1, n_owners + 1, dtype=np.float64) ** -0.6
    owner_cdf = np.cumsum(owner_w / owner_w.sum())
    owner_perm = rng.permutation(n_owners)
    session_base = 0
    for c in range(n_chunks):
        start, sess, rank, t = _views(world, rng, int(per[c]), int(edges[c]), int(edges[c + 1]))
        keep = t < prof.end_ms - 10 * 60_000  # nothing after the anchor session (Diginetica: +5 min frames)
        if prof.owner_sessions > 1:
            owner = owner_perm[np.minimum(np.searchsorted(owner_cdf, rng.random(len(start))), n_owners - 1)]
        else:
            owner = np.arange(len(start)) + session_base
        # session numbers in order of start time
        srank = np.empty(len(start), dtype=np.int64)
        srank[np.argsort(start, kind="stable")] = np.arange(len(start))
        ch = _Chunk(
            owner[sess] + (1_000_000_000 if prof.owner_sessions <= 1 else 0),
            t,
            world.item_ids[rank],
            np.zeros(len(t), np.int64),
            np.zeros(len(t), np.int64),
            srank[sess] + session_base,
            np.zeros(len(t), dtype=bool),
        )
        ch = ch.take(keep)
        session_base += len(start)
        if c == n_chunks - 1:
            ch = _Chunk.cat([ch, _explicit(world, rng, 2_000_000_000, session_base)])
        yield _add_nonview(world, rng, ch)


def _add_nonview(world: _World, rng: np.random.Generator, ch: _Chunk) -> _Chunk:
    """Non-view product events after some views (same owner, item, session), a few seconds later."""
    p = world.prof.nonview
    if world.prof.name == "coveo":
        return ch
    if p <= 0:
        return ch
    pick = np.flatnonzero((ch.kind == 0) & (rng.random(len(ch)) < p))
    extra = ch.take(pick)
    extra.time = extra.time + rng.integers(2000, 60_000, size=len(pick))
    extra.kind = np.ones(len(pick), np.int64)
    extra.sub = (rng.random(len(pick)) < 0.3).astype(np.int64)  # 0 cart/addtocart, 1 purchase/transaction
    return _Chunk.cat([ch, extra])


# ----------------------------------------------------------------------------------------------------------------
# writers: one per raw format


class _CsvOut:
    """Streams pyarrow tables into one raw file (optionally compressed), atomically."""

    def __init__(self, path: Path, header: bool, delimiter: str, compression: str | None):
        self.path = path
        self.header = header
        self.delimiter = delimiter
        self.compression = compression
        self._ctx = atomic_path(path)
        self.tmp = self._ctx.__enter__()
        self.sink = (
            pa.CompressedOutputStream(str(self.tmp), compression) if compression else pa.OSFile(str(self.tmp), "wb")
        )
        self.writer: pacsv.CSVWriter | None = None
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if self.writer is None:
            if self.header:  # pyarrow quotes header names; the raw formats do not
                self.sink.write((self.delimiter.join(table.column_names) + "\n").encode())
            self.writer = pacsv.CSVWriter(
                self.sink,
                table.schema,
                write_options=pacsv.WriteOptions(include_header=False, delimiter=self.delimiter, quoting_style="none"),
            )
        self.writer.write_table(table)
        self.rows += table.num_rows

    def close(self, ok: bool) -> None:
        if self.writer is not None:
            self.writer.close()
        self.sink.close()
        if ok:
            self._ctx.__exit__(None, None, None)
        else:
            self._ctx.__exit__(RuntimeError, RuntimeError("aborted"), None)


def _str(values) -> pa.Array:
    return pa.array(np.asarray(values).astype(np.int64)).cast(pa.string())


def _yoochoose_tables(world, rng, ch: _Chunk, state):
    o = np.lexsort((ch.time, ch.session))
    ch = ch.take(o)
    n = len(ch)
    cat = np.full(n, "0", dtype=object)
    r = rng.random(n)
    cat[r < 0.08] = "S"
    few = r > 0.9
    cat[few] = rng.integers(1, 13, size=int(few.sum())).astype(str)
    brand = r > 0.97
    cat[brand] = (2_089_000_000 + rng.integers(0, 999_999, size=int(brand.sum()))).astype(str)
    # sessions go to the clicks file (80%) or to the challenge's test file (20%), disjoint
    to_test = _hash01(ch.session, 7) < 0.2
    table = pa.table(
        {"s": ch.session + 1, "t": iso_timestamps(ch.time, "yoochoose"), "i": ch.item, "c": pa.array(cat, pa.string())}
    )
    return {
        "yoochoose-clicks.dat": table.filter(pa.array(~to_test)),
        "yoochoose-test.dat": table.filter(pa.array(to_test)),
    }


def _hash01(x: np.ndarray, salt: int) -> np.ndarray:
    """Deterministic pseudo-random number in [0, 1) per integer (stable across chunks)."""
    v = (x.astype(np.uint64) + np.uint64(salt)) * np.uint64(0x9E3779B97F4A7C15)
    v ^= v >> np.uint64(31)
    v *= np.uint64(0xBF58476D1CE4E5B9)
    v ^= v >> np.uint64(29)
    return (v >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def _rees46_tables(world, rng, ch: _Chunk, state):
    ch = ch.take(np.argsort(ch.time, kind="stable"))
    ch.time = ch.time // 1000 * 1000
    n = len(ch)
    etype = np.where(ch.kind == 0, "view", np.where(ch.sub == 1, "purchase", "cart"))
    item = ch.item
    cat_id = 2_053_013_552_226_107_603 + (item * 7919) % 10**15
    codes = np.array(
        ["electronics.smartphone", "appliances.kitchen.washer", "computers.notebook", "apparel.shoes", "", "", ""],
        dtype=object,
    )
    brands = np.array(["samsung", "apple", "xiaomi", "huawei", "", "lucente", "shiseido"], dtype=object)
    cents = item % 97_000 + 100
    price = pc.binary_join_element_wise(_str(cents // 100), pc.utf8_lpad(_str(cents % 100), 2, "0"), ".")
    uuid = _hex(rng, n, 16, uuid_dashes=True)
    table = pa.table(
        {
            "event_time": iso_timestamps(ch.time, "rees46"),
            "event_type": pa.array(etype, pa.string()),
            "product_id": item,
            "category_id": cat_id,
            "category_code": pa.array(codes[item % len(codes)], pa.string()),
            "brand": pa.array(brands[(item // 7) % len(brands)], pa.string()),
            "price": price,
            "user_id": 510_000_000 + ch.owner % 90_000_000,
            "user_session": _strings(uuid),
        }
    )
    nov = ch.time >= _ms("2019-11-01")
    return {"2019-Oct.csv": table.filter(pa.array(~nov)), "2019-Nov.csv": table.filter(pa.array(nov))}


def _coveo_tables(world, rng, ch: _Chunk, state):
    # add the non-product page views and the product events around the detail views
    views = np.flatnonzero(ch.kind == 0)
    parts = [ch]
    n_v = len(views)
    for kind, sub, p, dt_lo, dt_hi in (
        (2, 0, 0.8, -40_000, 40_000),
        (2, 0, 0.8, -90_000, 90_000),
        (1, 1, 0.15, 500, 20_000),
        (1, 2, 0.06, 1_000, 60_000),
        (1, 3, 0.01, 1_000, 90_000),
        (1, 4, 0.03, 60_000, 600_000),
    ):
        pick = views[rng.random(n_v) < p]
        e = ch.take(pick)
        e.time = e.time + rng.integers(dt_lo, dt_hi, size=len(pick))
        e.kind = np.full(len(pick), kind, np.int64)
        e.sub = np.full(len(pick), sub, np.int64)
        parts.append(e)
    existing = ch.kind == 1  # explicit bridging events: product click
    ch.sub = np.where(existing, 1, ch.sub)
    ch = _Chunk.cat(parts)
    ch = ch.take(np.lexsort((ch.time, ch.owner)))
    n = len(ch)
    action = np.array(["detail", "click", "add", "remove", "purchase"], dtype=object)
    # None fills an object array; numpy's stubs accept only array-likes there
    prod = np.where(ch.kind == 2, None, action[np.where(ch.kind == 0, 0, ch.sub)])  # type: ignore[call-overload]
    # SKU hashes: 64 hex characters per item id, deterministic; empty for page views without product
    sku = _strings(_det_hex(ch.item, 32, 1))
    second = _strings(_det_hex(world.item_ids[rng.integers(0, 50, n)], 32, 1))
    multi = (ch.kind == 1) & (ch.sub == 4) & (rng.random(n) < 0.4)  # multi-SKU purchase rows
    sku = pc.if_else(pa.array(multi), pc.binary_join_element_wise(sku, second, "|"), sku)
    no_sku = (ch.kind == 2) | ((ch.kind == 1) & (ch.sub == 1) & (rng.random(n) < 0.05))
    sku = pc.if_else(pa.array(no_sku), pa.scalar(None, pa.string()), sku)
    sess_hash = _strings(_det_hex(ch.owner, 16, 2, uuid_dashes=True))
    etype = np.where(np.isin(ch.kind, (0, 2)), "pageview", "event")
    url = _strings(_hex(rng, n, 32))
    table = pa.table(
        {
            "session_id_hash": sess_hash,
            "event_type": pa.array(etype, pa.string()),
            "product_action": pa.array(prod, pa.string()),
            "product_skus_hash": sku,
            "server_timestamp_epoch_ms": ch.time,
            "hashed_url": url,
        }
    )
    return {"release_10_23_2020.csv": table}


def _det_hex(x: np.ndarray, nbytes: int, salt: int, uuid_dashes: bool = False) -> np.ndarray:
    """Deterministic hex strings (uint8 rows) of 2*nbytes characters per integer (hashes of item/session)."""
    words = np.stack(
        [(_hash01(x, salt * 131 + k) * 2.0**53).astype(np.uint64) for k in range((nbytes + 5) // 6)], axis=1
    )
    raw = words.view(np.uint8).reshape(len(x), -1)[:, :nbytes]
    table = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    out = np.empty((len(x), 2 * nbytes), dtype=np.uint8)
    out[:, 0::2] = table[raw >> 4]
    out[:, 1::2] = table[raw & 15]
    if uuid_dashes:
        dash = np.full((len(x), 1), ord("-"), dtype=np.uint8)
        out = np.hstack([out[:, :8], dash, out[:, 8:12], dash, out[:, 12:16], dash, out[:, 16:20], dash, out[:, 20:]])
    return out


def _retailrocket_tables(world, rng, ch: _Chunk, state):
    n = len(ch)
    ev = np.where(ch.kind == 0, "view", np.where(ch.sub == 1, "transaction", "addtocart"))
    tid = np.full(n, None, dtype=object)
    tr = np.flatnonzero(ev == "transaction")
    tid[tr] = (state.setdefault("tid", 0) + np.arange(len(tr))).astype(str)
    state["tid"] += len(tr)
    table = pa.table(
        {
            "timestamp": ch.time,
            "visitorid": ch.owner,
            "event": pa.array(ev, pa.string()),
            "itemid": ch.item,
            "transactionid": pa.array(tid, pa.string()),
        }
    )
    return {"events.csv": table.take(pa.array(rng.permutation(n)))}


def _diginetica_tables(world, rng, ch: _Chunk, state):
    ch = ch.take(np.lexsort((ch.time, ch.session)))
    n = len(ch)
    first = np.ones(n, dtype=bool)
    first[1:] = ch.session[1:] != ch.session[:-1]
    idx = np.flatnonzero(first)
    start = np.repeat(ch.time[idx], np.diff(np.append(idx, n)))
    offset0 = (_hash01(ch.session, 3) * 300_000).astype(np.int64)  # per-session first time frame, 0-5 min
    midnight = start // DAY_MS * DAY_MS
    # explicit trap sessions count from midnight, so their virtual time equals their generated time
    timeframe = np.where(ch.explicit, ch.time - midnight, ch.time - start + offset0)
    date = iso_timestamps(ch.time, "date")
    has_user = _hash01(ch.session, 5) < 0.38
    user = np.where(has_user, (_hash01(ch.session, 9) * 250_000).astype(np.int64), -1)
    user_s = pa.array(np.where(has_user, user.astype(str), "NA"), pa.string())
    # the file is sorted by sessionId; rows inside a session are not time-ordered
    shuffle = np.lexsort((rng.random(n), ch.session))
    table = pa.table(
        {"sessionId": ch.session + 1, "userId": user_s, "itemId": ch.item, "timeframe": timeframe, "eventdate": date}
    ).take(pa.array(shuffle))
    return {"train-item-views.csv": table}


_TABLES = {
    "yoochoose": _yoochoose_tables,
    "rees46": _rees46_tables,
    "coveo": _coveo_tables,
    "retailrocket": _retailrocket_tables,
    "diginetica": _diginetica_tables,
}
_HEADER = {"yoochoose": False, "rees46": True, "coveo": True, "retailrocket": True, "diginetica": True}
_DELIM = {"diginetica": ";"}


def generate_raw(
    name: str,
    out_dir,
    scale: float,
    seed: int = 0,
    *,
    chunk_events: int = 2_000_000,
    compression: str | None = None,
    diginetica_header: str = "camel",
    profile: Profile | None = None,
) -> dict:
    """Write synthetic raw files of dataset ``name`` into ``out_dir`` in its original raw format.

    ``scale``: fraction of the full raw data's size (docs/datasets.md, 'Published statistics'): 1.0 gives about ``PROFILES[name].full_events``
    raw rows (Yoochoose 41M, Rees46 110M, Coveo 5.4M, RetailRocket 2.8M, Diginetica 1.2M), ``CI_SCALE[name]``
    about 3-4 x 10^4. ``seed``: numpy Generator seed; the same (name, scale, seed, chunk_events) gives the same
    bytes. Generation streams ``chunk_events`` rows at a time (memory stays bounded at any scale).
    ``compression``: None, 'gzip' or 'bz2' (file names get .gz / .bz2). ``diginetica_header``: 'camel'
    (original), 'snake' (SR-GNN sample spelling) or 'none'. ``profile``: a calibration to use instead of
    ``PROFILES[name]`` (same ``name``; e.g. a shorter calendar span, see ``standins.standin_profile``); ``scale``
    stays a fraction of its ``full_events``.

    Returns {raw file name: path} (plus nothing else); raises ValueError naming a bad parameter.
    """
    if name not in PROFILES:
        raise ValueError(f"name: unknown dataset {name!r}; known: {', '.join(PROFILES)}")
    if not (scale > 0) or scale > 4:
        raise ValueError(f"scale: must be in (0, 4], got {scale!r}")
    if compression not in (None, "gzip", "bz2"):
        raise ValueError(f"compression: None, 'gzip' or 'bz2', got {compression!r}")
    if diginetica_header not in ("camel", "snake", "none"):
        raise ValueError(f"diginetica_header: 'camel', 'snake' or 'none', got {diginetica_header!r}")
    if profile is not None and profile.name != name:
        raise ValueError(f"profile: calibrates {profile.name!r}, not {name!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    world = _world(profile or PROFILES[name], scale, rng)
    suffix = {None: "", "gzip": ".gz", "bz2": ".bz2"}[compression]
    header = _HEADER[name] and not (name == "diginetica" and diginetica_header == "none")
    outs = {f: _CsvOut(out_dir / (f + suffix), header, _DELIM.get(name, ","), compression) for f in RAW_FILES[name]}
    ok = False
    state: dict = {}
    try:
        for ch in _chunks(world, rng, chunk_events):
            for fname, table in _TABLES[name](world, rng, ch, state).items():
                if name == "diginetica" and diginetica_header == "snake":
                    table = table.rename_columns(["session_id", "user_id", "item_id", "timeframe", "eventdate"])
                outs[fname].write(table)
        ok = True
    finally:
        for o in outs.values():
            with contextlib.suppress(Exception):
                o.close(ok)
    return {f: o.path for f, o in outs.items()}
