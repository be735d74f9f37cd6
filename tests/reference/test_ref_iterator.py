"""Session-parallel iterator and sample cache (docs/algorithm.md, 'The session-parallel iterator', 'Negative sampling'): properties."""

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from gru4rec_conformance.reference.gru4rec import SampleCache, SessionParallelIterator
from gru4rec_conformance.reference.gru4rec.data import build_training_data

KEYS = ("ItemId", "SessionId", "Time")


def _data(lengths, seed=0, shuffle=True):
    rng = np.random.default_rng(seed)
    rows = []
    starts = rng.permutation(len(lengths)) * 100.0  # distinct start times, not in session-id order
    for s, L in enumerate(lengths):
        for j in range(L):
            rows.append((s, int(rng.integers(0, 9)), starts[s] + j))
    df = pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"])
    return df.sample(frac=1.0, random_state=1) if shuffle else df


def _flatten(it, data):
    """Per step: (session ids, positions, in items, out items, reset lanes, n lanes)."""
    steps = []
    for run in it:
        for i in range(run.n_steps):
            m = it.reset_mask(run, i)
            steps.append(
                (
                    data.session_ids[run.lane_sessions],
                    run.start_pos + i,
                    run.in_items[i],
                    run.out_items[i],
                    m,
                    run.n_lanes,
                    run.keep if i == 0 else None,
                )
            )
    return steps


@pytest.mark.parametrize("B", [1, 3, 8])
def test_every_transition_once_with_samples(B):
    df = _data([1, 2, 3, 4, 5, 6, 7, 3, 2, 5, 1, 7])
    d = build_training_data(df, *KEYS)
    steps = _flatten(SessionParallelIterator(d, B, stop_below_two_lanes=False), d)
    seen = [(s, p) for st in steps for s, p in zip(st[0], st[1])]
    assert len(seen) == len(set(seen)) == d.n_events - d.n_sessions
    # inputs/targets are the session's consecutive events
    for sess, pos, xin, xout, *_ in steps:
        for s, p, a, b in zip(sess, pos, xin, xout):
            k = int(np.flatnonzero(d.session_ids == s)[0])
            row = d.items[d.offsets[k] : d.offsets[k + 1]]
            assert (row[p], row[p + 1]) == (a, b)


def test_sessions_start_in_order_of_first_timestamp_and_reset_exactly_at_position_zero():
    df = _data([3, 2, 4, 5, 2, 6, 3, 2, 4])
    d = build_training_data(df, *KEYS)
    start_time = df.groupby("SessionId").Time.min()
    steps = _flatten(SessionParallelIterator(d, 3, stop_below_two_lanes=False), d)
    first_seen = []
    for sess, pos, _, _, reset, _, _ in steps:
        for lane, (s, p) in enumerate(zip(sess, pos)):
            if p == 0:
                first_seen.append(s)
            if reset is not None:
                assert bool(reset[lane]) == (p == 0)
    assert first_seen == list(start_time.sort_values().index)
    # first run: zero state anyway, no reset mask; later every session start is reset
    assert steps[0][4] is None


def test_batch_shrinks_in_the_tail_and_never_grows():
    df = _data([2] * 5 + [9])
    d = build_training_data(df, *KEYS)
    lanes = [st[5] for st in _flatten(SessionParallelIterator(d, 3, stop_below_two_lanes=False), d)]
    assert lanes[0] == 3 and lanes[-1] == 1
    assert all(a >= b for a, b in zip(lanes, lanes[1:]))


def test_without_samples_epoch_stops_below_two_lanes():
    df = _data([2] * 5 + [9])
    d = build_training_data(df, *KEYS)
    full = _flatten(SessionParallelIterator(d, 3, stop_below_two_lanes=False), d)
    cut = _flatten(SessionParallelIterator(d, 3, stop_below_two_lanes=True), d)
    assert min(st[5] for st in cut) >= 2
    assert len(cut) < len(full)
    # the long session's tail is what gets lost
    assert sum(st[5] for st in full) == d.n_events - d.n_sessions


def test_batch_larger_than_sessions_is_refused():
    d = build_training_data(_data([2, 3]), *KEYS)
    with pytest.raises(ValueError, match="batch_size"):
        SessionParallelIterator(d, 3, stop_below_two_lanes=False)


def test_item_map_is_first_appearance_order_of_the_given_frame():
    df = pd.DataFrame({"SessionId": [5, 5, 1, 1], "ItemId": [30, 10, 20, 30], "Time": [3, 4, 1, 2]})
    d = build_training_data(df, *KEYS)
    assert list(d.item_ids) == [30, 10, 20]
    assert list(d.session_ids) == [1, 5]
    assert list(d.items) == [2, 0, 0, 1]  # sorted by session then time
    np.testing.assert_array_equal(d.supports, [2, 1, 1])


def _cache(supports, S=64, alpha=0.5, size=640, seed=0):
    g = torch.Generator().manual_seed(seed)
    return SampleCache(np.asarray(supports, dtype=float), S, alpha, size, g, torch.device("cpu"))


def test_cache_rows_are_consumed_in_order_and_refreshed_only_when_used_up():
    c1 = _cache(np.arange(1, 30), S=8, size=40)  # 5 rows
    c2 = _cache(np.arange(1, 30), S=8, size=40)
    a = torch.cat([c1.take(2), c1.take(2), c1.take(1)])
    b = c2.take(5)
    assert torch.equal(a, b) and c1.n_refreshes == 1
    c1.take(1)
    assert c1.n_refreshes == 2
    c3 = _cache(np.arange(1, 30), S=8, size=40)
    assert torch.equal(c3.take(7)[:5], b)
    assert _cache([1, 2], S=8, size=3).generate_length == 1


def test_cache_filled_in_blocks_gives_the_same_rows():
    """Drawing a generation's rows block by block (on demand) gives the rows of a one-shot generation (CPU)."""

    class SmallBlocks(SampleCache):
        block_ids = 16  # 2 rows of 8

    g = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    small = SmallBlocks(np.arange(1, 30.0), 8, 0.5, 40, g(), torch.device("cpu"))
    whole = SampleCache(np.arange(1, 30.0), 8, 0.5, 40, g(), torch.device("cpu"))
    a = torch.cat([small.take(k) for k in (1, 3, 2, 4, 1)])
    b = torch.cat([whole.take(k) for k in (4, 7)])
    assert torch.equal(a, b) and small.n_refreshes == whole.n_refreshes == 3


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_sampling_distribution_is_support_to_the_alpha(alpha):
    """SO-3: chi-square goodness of fit of 512 × 200 draws against support^α / Σ support^α."""
    supp = np.array([1000 / (k + 1) for k in range(40)]).round() + 1
    c = _cache(supp, S=512, alpha=alpha, size=512 * 200, seed=3)
    draws = c.take(200).numpy().ravel()
    counts = np.bincount(draws, minlength=len(supp))
    expected = supp**alpha / (supp**alpha).sum() * draws.size
    p = stats.chisquare(counts, expected).pvalue
    assert p > 1e-3
    other = 1.0 if alpha < 1 else 0.0
    wrong = supp**other / (supp**other).sum() * draws.size
    assert stats.chisquare(counts, wrong).pvalue < 1e-6
