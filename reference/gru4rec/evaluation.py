"""Next-item evaluation: ranks with tie modes, Recall@N / MRR@N, session-parallel and prefix-scorer evaluators.

Protocol of the official ``evaluation.batch_eval`` (docs/algorithm.md, 'Evaluation protocol'): test events whose item is unknown
to training are dropped before sequences are formed; each test session starts from a zero hidden state; every
event after the first of a session is a prediction point ranked against all training items (nothing excluded);
rank of the target with an explicit tie mode; Recall@N = share of points with rank ≤ N, MRR@N = mean of
1[rank ≤ N]/rank.

Differences from the port: the ``median`` tie mode works (the port's branch raises a TypeError); an evaluation
batch larger than the number of test sessions uses one lane per session (the port raises an IndexError); the
evaluation never stops early (the port stops when fewer than two lanes remain if the model was trained with
n_sample = 0, leaving the last session's events out); sums are exact (``math.fsum``, float64; the port
accumulates MRR in float32), so results are identical for every evaluation batch size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from .data import SessionData, SessionParallelIterator, build_test_data, validate_frame

TIE_MODES = ("standard", "conservative", "median")


def check_mode(mode: str) -> None:
    if mode not in TIE_MODES:
        raise ValueError(f"parameter 'mode': unknown tie mode {mode!r}; one of {', '.join(TIE_MODES)}")


def check_cutoffs(cutoffs) -> list[int]:
    if isinstance(cutoffs, (int, np.integer)):
        cutoffs = [int(cutoffs)]
    out = []
    for c in cutoffs:
        if isinstance(c, bool) or int(c) != c or int(c) < 1:
            raise ValueError(f"parameter 'cutoffs': every cutoff must be a positive int, got {c!r}")
        out.append(int(c))
    if not out:
        raise ValueError("parameter 'cutoffs': at least one cutoff is needed")
    return out


def rank(scores, targets, mode: str = "conservative") -> np.ndarray:
    """Rank of each row's target among all columns (the target itself included in the counts).

    Args:
        scores: (n, n_items) float array or tensor; targets: (n,) int column index of each row's target.
        mode: 'standard' 1 + #{s > t}; 'conservative' #{s ≥ t}; 'median' 1 + #{s > t} + (#{s = t} − 1)/2.

    Returns: (n,) float64 ranks (integers except for median ties).
    Raises ValueError for an unknown mode, mismatched shapes, or a NaN score in a row (a NaN target would
    rank first in standard mode).
    """
    check_mode(mode)
    S = torch.as_tensor(scores)
    T = torch.as_tensor(targets, dtype=torch.int64, device=S.device)
    if S.ndim != 2 or T.ndim != 1 or S.shape[0] != T.shape[0]:
        raise ValueError(f"scores (n, n_items) and targets (n,) do not match: {tuple(S.shape)} vs {tuple(T.shape)}")
    if bool(torch.isnan(S).any()):
        raise ValueError("scores contain NaN; ranks would be meaningless")
    t = S.gather(1, T[:, None])
    if mode == "standard":
        r = (S > t).sum(1).to(torch.float64) + 1
    elif mode == "conservative":
        r = (S >= t).sum(1).to(torch.float64)
    else:
        r = (S > t).sum(1).to(torch.float64) + 0.5 * ((S == t).sum(1).to(torch.float64) - 1) + 1
    return r.cpu().numpy()


def hits(ranks: np.ndarray, cutoff: int) -> np.ndarray:
    """Whether each rank is within the top ``cutoff`` (rank ≤ N, docs/algorithm.md, 'Evaluation protocol', item 7)."""
    return ranks <= cutoff


def metrics_from_ranks(
    ranks: np.ndarray, cutoffs: Iterable[int], hits_fn: Callable[[np.ndarray, int], np.ndarray] = hits
) -> dict:
    """{'recall@N', 'mrr@N' for every cutoff, 'n_events'} from per-event ranks (exact float64 sums).

    Raises ValueError when there is no event (instead of dividing by zero)."""
    ranks = np.asarray(ranks, dtype=np.float64)
    n = len(ranks)
    if n == 0:
        raise ValueError(
            "no test event to evaluate (after dropping items unknown to training, no session has two or more events)"
        )
    out: dict = {}
    for c in check_cutoffs(list(cutoffs)):
        h = hits_fn(ranks, c)
        out[f"recall@{c}"] = int(h.sum()) / n
        out[f"mrr@{c}"] = math.fsum((1.0 / ranks[h]).tolist()) / n
    out["n_events"] = n
    return out


def evaluate_scores(scores, targets, cutoffs=(1, 5, 10, 20), mode: str = "conservative") -> dict:
    """Metrics of a given score matrix (n, n_items) with target column indices (n,)."""
    return metrics_from_ranks(rank(scores, targets, mode), cutoffs)


def _keys(item_key, session_key, time_key):
    return dict(item_key=item_key, session_key=session_key, time_key=time_key)


def prediction_points(
    test_df: pd.DataFrame,
    item_ids: np.ndarray,
    item_key: str = "ItemId",
    session_key: str = "SessionId",
    time_key: str = "Time",
):
    """Every prediction point of a test frame: (session_ids, positions, prefixes (item ids), target columns).

    Items unknown to ``item_ids`` are dropped first; the prefix of the target at filtered position k is the
    session's first k known items. Raises ValueError (naming the column) for a malformed frame.
    """
    validate_frame(test_df, item_key, session_key, time_key, what="test data")
    d = build_test_data(test_df, np.asarray(item_ids), item_key, session_key, time_key)
    sess, pos, prefixes, targets = [], [], [], []
    for k in range(d.n_sessions):
        row = d.items[d.offsets[k] : d.offsets[k + 1]]
        for j in range(1, len(row)):
            sess.append(d.session_ids[k])
            pos.append(j)
            prefixes.append([d.item_ids[i] for i in row[:j]])
            targets.append(int(row[j]))
    return np.asarray(sess), np.asarray(pos, dtype=np.int64), prefixes, np.asarray(targets, dtype=np.int64)


def evaluate_prefix_scorer(
    score_prefixes: Callable[[list], np.ndarray],
    item_ids: Sequence | np.ndarray,
    test_df: pd.DataFrame,
    cutoffs=(1, 5, 10, 20),
    mode: str = "conservative",
    batch_size: int = 512,
    item_key: str = "ItemId",
    session_key: str = "SessionId",
    time_key: str = "Time",
    hits_fn: Callable[[np.ndarray, int], np.ndarray] = hits,
) -> dict:
    """The official protocol applied to any fresh-state scorer (e.g. an adapter's ``score_prefixes``).

    ``score_prefixes(list of prefixes of item ids) -> (n_prefixes, len(item_ids))`` scores in ``item_ids``
    column order. Prediction points as in :func:`prediction_points`; scored ``batch_size`` prefixes at a time.
    Returns {'recall@N', 'mrr@N', 'n_events'}. Raises ValueError when nothing is left to evaluate or the
    scorer returns a wrongly shaped matrix.
    """
    check_mode(mode)
    cutoffs = check_cutoffs(cutoffs)
    if batch_size < 1:
        raise ValueError(f"parameter 'batch_size': must be >= 1, got {batch_size}")
    item_ids = np.asarray(item_ids)
    _, _, prefixes, targets = prediction_points(test_df, item_ids, item_key, session_key, time_key)
    ranks = []
    for s in range(0, len(prefixes), batch_size):
        sc = np.asarray(score_prefixes(prefixes[s : s + batch_size]))
        want = (len(prefixes[s : s + batch_size]), len(item_ids))
        if sc.shape != want:
            raise ValueError(f"score_prefixes returned shape {sc.shape}, expected {want}")
        ranks.append(rank(sc, targets[s : s + batch_size], mode))
    return metrics_from_ranks(np.concatenate(ranks) if ranks else np.zeros(0), cutoffs, hits_fn)


class SessionParallelEvaluator:
    """The reference's own session-parallel inference loop (docs/algorithm.md, 'Evaluation protocol', item 3), used by ``GRU4Rec.evaluate`` and
    ``GRU4Rec.score_stream``.

    Extension points (override in a subclass): :meth:`prepare` (unknown-item handling), :meth:`reset_lanes`
    (hidden-state reset of lanes that start a new session), :meth:`hits` (the cutoff rule),
    :attr:`iterator_class` (the lane schedule of the inference loop).
    """

    iterator_class = SessionParallelIterator

    def __init__(self, gru):
        self.gru = gru

    def prepare(self, test_df: pd.DataFrame, item_key: str, session_key: str, time_key: str) -> SessionData:
        """Validate the frame and map it to item columns, dropping events of unknown items first."""
        validate_frame(test_df, item_key, session_key, time_key, what="test data")
        return build_test_data(test_df, self.gru.item_ids(), item_key, session_key, time_key)

    def reset_lanes(self, H: list[torch.Tensor], mask: torch.Tensor) -> list[torch.Tensor]:
        """Zero the hidden state (all layers) of the lanes in ``mask`` (b,) bool."""
        keep = (~mask).to(H[0].dtype)[:, None]
        return [h * keep for h in H]

    def hits(self, ranks: np.ndarray, cutoff: int) -> np.ndarray:
        return hits(ranks, cutoff)

    def batches(
        self,
        test_df: pd.DataFrame,
        batch_size: int,
        item_key: str = "ItemId",
        session_key: str = "SessionId",
        time_key: str = "Time",
    ) -> Iterator[tuple]:
        """Yield one tuple per lock-step inference step: (session_ids (b,), positions (b,) index of the
        target within its filtered session, target columns (b,) int64 tensor, scores (b, n_items) tensor).

        Raises ValueError when no test event has a known item with a known predecessor."""
        if batch_size < 1:
            raise ValueError(f"parameter 'batch_size': must be >= 1, got {batch_size}")
        gru = self.gru
        d = self.prepare(test_df, item_key, session_key, time_key)
        if d.n_events - d.n_sessions <= 0:
            raise ValueError(
                "test data: no event to evaluate after dropping items unknown to training "
                f"({d.n_events} known event(s) in {d.n_sessions} session(s); a prediction needs "
                "a session with two or more known events)"
            )
        model = gru.model
        dev = model.device
        it = self.iterator_class(d, min(batch_size, d.n_sessions), stop_below_two_lanes=False)
        H = model.zero_state(it.n_lanes)
        for run in it:
            if run.keep is not None:
                keep = torch.as_tensor(run.keep, device=dev)
                H = [h[keep] for h in H]
            xin = torch.as_tensor(run.in_items, device=dev)
            xout = torch.as_tensor(run.out_items, device=dev)
            sess = d.session_ids[run.lane_sessions]
            for i in range(run.n_steps):
                m = it.reset_mask(run, i)
                if m is not None:
                    H = self.reset_lanes(H, torch.as_tensor(m, device=dev))
                with torch.no_grad():  # not around the yield: grad mode must not leak to the consumer
                    h, H = model.forward_eval(xin[i], H)
                    scores = model.score_all(h)
                yield sess, run.start_pos + i + 1, xout[i], scores

    def evaluate(
        self,
        test_df: pd.DataFrame,
        cutoffs=(1, 5, 10, 20),
        batch_size: int = 512,
        mode: str = "conservative",
        item_key: str = "ItemId",
        session_key: str = "SessionId",
        time_key: str = "Time",
    ) -> dict:
        check_mode(mode)
        cutoffs = check_cutoffs(cutoffs)
        ranks = [
            rank(scores, targets, mode)
            for _, _, targets, scores in self.batches(test_df, batch_size, item_key, session_key, time_key)
        ]
        return metrics_from_ranks(np.concatenate(ranks), cutoffs, self.hits)
