"""Small seeded datasets of the conformance checks (which check uses which: conformance/gru4rec/README.md, the
checks themselves: docs/checks.md): D-LAG1, D-LONG, D-TAIL, D-VAR, and Zipf-distributed sessions for SO-3.

Every function returns a :class:`CheckDataset` whose ``train`` and ``test`` are session data frames with columns
SessionId int64, ItemId int64, Time int64 (seconds), sorted by (SessionId, Time); Time increases with the
session index (sessions never overlap in time) and by 60 s per event inside a session. ``meta`` holds what the
checks need (listed per function). Item ids are deliberately not 0..K-1 (so an implementation that confuses ids
with column indices shows it): each dataset documents its ids in ``meta``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = [
    "CheckDataset",
    "d_lag1",
    "d_long",
    "d_tail",
    "d_var",
    "zipf_sessions",
    "sessions_frame",
    "scramble_session_ids",
    "shuffle_rows",
]

SESSION_SPACING_S = 10_000  # seconds between session starts
EVENT_SPACING_S = 60


@dataclass
class CheckDataset:
    """``train``/``test``: session frames (SessionId int64, ItemId int64, Time int64 seconds); ``meta``: dict."""

    train: pd.DataFrame
    test: pd.DataFrame
    meta: dict = field(default_factory=dict)


def sessions_frame(sessions: list[list[int]], first_session_id: int = 1, t0: int = 1_600_000_000) -> pd.DataFrame:
    """Session frame from item lists: session k gets id first_session_id + k and starts at
    t0 + k * 10,000 s; events are 60 s apart."""
    lengths = np.array([len(s) for s in sessions], dtype=np.int64)
    sid = np.repeat(np.arange(len(sessions), dtype=np.int64), lengths)
    pos = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    items = np.fromiter((i for s in sessions for i in s), dtype=np.int64, count=int(lengths.sum()))
    return pd.DataFrame(
        {
            "SessionId": sid + first_session_id,
            "ItemId": items,
            "Time": t0 + sid * SESSION_SPACING_S + pos * EVENT_SPACING_S,
        }
    )


def scramble_session_ids(frame: pd.DataFrame, seed: int, key: str = "SessionId") -> pd.DataFrame:
    """A copy of ``frame`` whose session ids are a seeded permutation of its own ids, so that the id order says
    nothing about the sessions' start times; rows are then sorted by (id, Time), so that row order follows the
    new ids, not time. Items, times and the session of every event are kept.

    The check builders give session k the id ``first_id + k`` *and* the k-th start time (and sort rows so);
    an implementation that orders sessions by id or by row instead of by first timestamp is only told apart on
    data like this (the GRU4Rec checks get every builder's frames through it: conformance/gru4rec/_data.py).
    Returns a new frame with a fresh RangeIndex.
    """
    ids = np.unique(frame[key].to_numpy())
    new = pd.Series(np.random.default_rng(seed).permutation(ids), index=ids)
    out = frame.assign(**{key: new[frame[key].to_numpy()].to_numpy()})
    return out.sort_values([key, "Time"], kind="stable").reset_index(drop=True)


def shuffle_rows(frame: pd.DataFrame, seed: int, item_key: str = "ItemId") -> pd.DataFrame:
    """A copy of ``frame`` with its rows in a seeded random order, across and within sessions (every row keeps
    its session, item and Time), except that the first occurrence of each item comes first, in the frame's
    order: the official item map numbers items by first appearance in the frame as given
    (docs/algorithm.md, 'Item map'), so this shuffle leaves an implementation that follows it the same columns and
    the same initial weights, and an order-invariant one must train and evaluate exactly as on ``frame``.
    Returns a new frame with a fresh RangeIndex."""
    firsts = np.flatnonzero(~frame[item_key].duplicated().to_numpy())
    rest = np.setdiff1d(np.arange(len(frame)), firsts)
    perm = np.concatenate([firsts, np.random.default_rng(seed).permutation(rest)])
    return frame.iloc[perm].reset_index(drop=True)


def _lag1_sessions(rng: np.random.Generator, items: np.ndarray, n: int, lo: int, hi: int) -> list[list[int]]:
    k = len(items)
    out = []
    for _ in range(n):
        length = int(rng.integers(lo, hi + 1))
        start = int(rng.integers(0, k))
        out.append([int(items[(start + j) % k]) for j in range(length)])
    return out


def d_lag1(
    seed: int = 0,
    n_items: int = 20,
    n_sessions: int = 400,
    n_test_sessions: int = 30,
    min_len: int = 4,
    max_len: int = 8,
) -> CheckDataset:
    """D-LAG1: K=20 items in a deterministic cycle, transitions i -> i+1 (mod K); 400 train sessions of length
    4-8 with random start items; a test set of 30 more sessions of the same kind (SR-1 uses 30).

    meta: ``items`` (ids in cycle order; ids are 101, 103, ..., i.e. 101 + 2k), ``successor`` (dict id -> next id),
    ``cycle_length``. Any working GRU4Rec reaches Recall@1 close to 1.
    """
    rng = np.random.default_rng(seed)
    items = 101 + 2 * np.arange(n_items, dtype=np.int64)
    train = sessions_frame(_lag1_sessions(rng, items, n_sessions, min_len, max_len))
    test = sessions_frame(
        _lag1_sessions(rng, items, n_test_sessions, min_len, max_len),
        first_session_id=n_sessions + 1,
        t0=1_600_000_000 + n_sessions * SESSION_SPACING_S,
    )
    succ = {int(items[k]): int(items[(k + 1) % n_items]) for k in range(n_items)}
    return CheckDataset(
        train,
        test,
        {"name": "D-LAG1", "items": items.tolist(), "successor": succ, "cycle_length": n_items, "seed": seed},
    )


def d_long(seed: int = 0, n_keys: int = 8, sessions_per_key: int = 50, test_sessions_per_key: int = 2) -> CheckDataset:
    """D-LONG: K=8 key items a_k, K answer items t_k and three shared fillers n1, n2, n3; every session is exactly
    [a_k, n1, n2, n3, t_k]; 50 sessions per k in shuffled order (test: 2 per k, shuffled).

    meta: ``key_items`` (a_k), ``answer_items`` (t_k), ``filler_items`` ([n1, n2, n3]), ``prefixes``
    ([[a_k, n1, n2, n3] for each k]) and ``answers`` ([t_k], aligned with ``prefixes``). Only a model that
    carries state across 3 steps predicts t_k from the prefix; a last-item model sits at 1/K.
    """
    rng = np.random.default_rng(seed)
    keys = 1001 + np.arange(n_keys, dtype=np.int64)
    answers = 2001 + np.arange(n_keys, dtype=np.int64)
    fillers = [3001, 3002, 3003]

    def sess(per_k):
        ks = rng.permutation(np.repeat(np.arange(n_keys), per_k))
        return [[int(keys[k])] + fillers + [int(answers[k])] for k in ks]

    train = sessions_frame(sess(sessions_per_key))
    n_train = n_keys * sessions_per_key
    test = sessions_frame(
        sess(test_sessions_per_key), first_session_id=n_train + 1, t0=1_600_000_000 + n_train * SESSION_SPACING_S
    )
    return CheckDataset(
        train,
        test,
        {
            "name": "D-LONG",
            "key_items": keys.tolist(),
            "answer_items": answers.tolist(),
            "filler_items": fillers,
            "prefixes": [[int(a)] + fillers for a in keys],
            "answers": answers.tolist(),
            "seed": seed,
        },
    )


def d_tail(seed: int = 0, chain_length: int = 40) -> CheckDataset:
    """D-TAIL: D-LAG1 plus a final training session (latest start time, largest id) made of 40 items
    z1..z40 that appear nowhere else, in a deterministic chain z1 -> z2 -> ... -> z40.

    ``test`` holds the z-chain once more as one session (so an implementation's own evaluator scores exactly the
    z-chain transitions). meta: D-LAG1's meta plus ``z_items`` (ids 5001..5040 in chain order), ``z_prefixes``
    ([z1], [z1, z2], ..., 39 prefixes) and ``z_targets`` (z2..z40), aligned. EB-2 passes when Recall@5 over
    these transitions is >= 0.8.
    """
    base = d_lag1(seed)
    z = 5001 + np.arange(chain_length, dtype=np.int64)
    last_id = int(base.train["SessionId"].max())
    t_last = int(base.test["Time"].max()) + SESSION_SPACING_S  # after every D-LAG1 session, test included
    tail = sessions_frame([z.tolist()], first_session_id=last_id + base.test["SessionId"].nunique() + 1, t0=t_last)
    train = pd.concat([base.train, tail], ignore_index=True)
    test = sessions_frame(
        [z.tolist()], first_session_id=int(tail["SessionId"].iloc[0]) + 1, t0=t_last + SESSION_SPACING_S
    )
    zl = z.tolist()
    meta = {
        **base.meta,
        "name": "D-TAIL",
        "z_items": zl,
        "z_prefixes": [zl[: k + 1] for k in range(len(zl) - 1)],
        "z_targets": zl[1:],
        "lag1_test": base.test,
    }
    return CheckDataset(train, test, meta)


def d_var(seed: int = 0, n_sessions: int = 160, short: int = 2, long: int = 40, n_items: int = 20) -> CheckDataset:
    """D-VAR: sessions whose lengths alternate 2 and 40 (session k has length 2 if k is even, else 40), items
    following D-LAG1's cycle from a random start. Test: 16 sessions of the same kind.

    meta: ``lengths`` (train session lengths in session order), ``n_events``, ``n_sessions``,
    ``expected_steps_per_epoch`` = (E - Ns) / B for B=8 (EB-4), ``padded_steps_estimate`` for B=8 with
    consecutive batches of whole sessions (sum over batches of max_len - 1).
    """
    rng = np.random.default_rng(seed)
    items = 101 + 2 * np.arange(n_items, dtype=np.int64)

    def sess(n):
        out = []
        for k in range(n):
            length = short if k % 2 == 0 else long
            start = int(rng.integers(0, n_items))
            out.append([int(items[(start + j) % n_items]) for j in range(length)])
        return out

    tr = sess(n_sessions)
    train = sessions_frame(tr)
    test = sessions_frame(sess(16), first_session_id=n_sessions + 1, t0=1_600_000_000 + n_sessions * SESSION_SPACING_S)
    lengths = [len(s) for s in tr]
    e, ns, b = sum(lengths), len(lengths), 8
    padded = sum(max(lengths[i : i + b]) - 1 for i in range(0, ns, b))
    return CheckDataset(
        train,
        test,
        {
            "name": "D-VAR",
            "lengths": lengths,
            "n_events": e,
            "n_sessions": ns,
            "items": items.tolist(),
            "expected_steps_per_epoch": (e - ns) / b,
            "padded_steps_estimate": padded,
            "seed": seed,
        },
    )


def zipf_sessions(
    seed: int = 0, n_items: int = 1000, n_sessions: int = 2000, exponent: float = 1.0, mean_length: float = 6.0
) -> CheckDataset:
    """Sessions with Zipf-distributed item popularity (P(rank r) ~ r^-exponent), for the sampling-distribution
    check SO-3. Lengths are 2 + geometric (mean ``mean_length``); items are drawn independently.

    meta: ``items`` (ids by popularity rank; ids 10,001 + a seeded permutation), ``support`` (dict id -> number
    of training events, the count the reference raises to sample_alpha), ``exponent``. Every item occurs at
    least once in train (the least popular ones are appended as one extra session).
    """
    rng = np.random.default_rng(seed)
    ids = 10_001 + rng.permutation(n_items).astype(np.int64)
    w = np.arange(1, n_items + 1, dtype=np.float64) ** -exponent
    p = w / w.sum()
    lengths = 2 + rng.geometric(1.0 / max(mean_length - 1, 1.01), size=n_sessions) - 1
    flat = ids[rng.choice(n_items, size=int(lengths.sum()), p=p)]
    cuts = np.cumsum(lengths)[:-1]
    sessions = [s.tolist() for s in np.split(flat, cuts)]
    missing = [int(i) for i in ids if i not in set(flat.tolist())]
    if len(missing) == 1:
        missing.append(int(ids[0]))
    if missing:
        sessions.append(missing)
    train = sessions_frame(sessions)
    test = sessions_frame(
        [s.tolist() for s in np.split(ids[rng.choice(n_items, size=200, p=p)], 40)],
        first_session_id=len(sessions) + 1,
        t0=1_600_000_000 + len(sessions) * SESSION_SPACING_S,
    )
    support = train["ItemId"].value_counts()
    return CheckDataset(
        train,
        test,
        {
            "name": "Zipf",
            "items": ids.tolist(),
            "exponent": exponent,
            "support": {int(k): int(v) for k, v in support.items()},
            "seed": seed,
        },
    )
