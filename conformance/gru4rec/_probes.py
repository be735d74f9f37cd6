"""Discriminating probes of the GRU4Rec checks' differential diagnoses (conformance/_harness/diagnosis.py).

Each function here builds the :class:`~conformance._harness.diagnosis.Cause` list of a family of failures; the
probes run only when :func:`~conformance._harness.diagnosis.fail` is called, i.e. after the check failed.

- :func:`stream_causes`: the implementation's own inference loop (``score_stream``) disagrees with the suite's
  ranking of the model's raw scores (``score_prefixes`` from a fresh state). Probe "evaluator vs state": compare
  the two score rows column by column; columns the loop set to −inf (or below −1e20) are *masked*, the others
  must agree unless the state differs. Probe "future-target masking": the test sessions' items are known, so
  every masked column is classed as the input item, an earlier item of the session, the target, a later item of
  the session, or another item.
- :func:`ranking_causes`: the own evaluator's metrics disagree with the suite's. Probe: rank the loop's own rows
  with the suite's ranking (declared tie mode, rank ≤ N) and with the alternatives (other tie modes, rank < N):
  the variant that reproduces the evaluator's metrics names the counting rule it applies; when the suite's own
  rule on the loop's rows reproduces them, the counting is right and the rows' scores are the cause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from gru4rec_conformance.conformance._harness.diagnosis import (
    Candidate,
    Cause,
    Finding,
    confirmed,
    decide,
    ruled_out,
    undecided,
)
from gru4rec_conformance.conformance.gru4rec._common import fresh_scores, target_columns
from gru4rec_conformance.reference.gru4rec import evaluation as oracle_eval

#: A score at or below this counts as masked (set to −inf, or to a huge negative stand-in for it).
MASKED_BELOW = -1e20
#: Largest relative score difference counted as agreement (SR-1's tolerance).
AGREE_REL = 1e-4

#: Names of the stream causes (meta-tests match them).
STATE = "hidden state leaks across sessions or is reset when it should not be"
FUTURE_MASKED = "the own inference loop masks the session's future items (the target among them) before ranking"
SEEN_REMOVED = "the own inference loop removes items already seen in the session (the input item) from the ranking"
TIE_MODE = "the own evaluator does not apply the declared tie mode"
CUTOFF = "the own evaluator counts a hit at rank < N instead of rank <= N"

#: The cause tables (diagnosis.causes on the checks; docs/checks.md prints them).
_EVALUATOR_VS_STATE = (
    "evaluator vs state: score_stream's rows against fresh-state score_prefixes rows of the same prefixes, column "
    "by column; columns the loop set to -inf (or below -1e20) count as masked"
)
_MASK_ROLES = (
    "future-target masking: every masked column is classed by its role in the known test session (input item, "
    "earlier item, target, later item, other)"
)
STREAM_TABLE = (
    Candidate(STATE, f"{_EVALUATOR_VS_STATE}; confirmed when rows still differ outside the masked columns"),
    Candidate(FUTURE_MASKED, f"{_MASK_ROLES}; confirmed when the target or a later item is masked"),
    Candidate(SEEN_REMOVED, f"{_MASK_ROLES}; confirmed when the input item or an earlier item is masked"),
)
RANKING_TABLE = (
    Candidate(
        TIE_MODE,
        "the loop's own score rows ranked by the suite with each tie mode (standard, conservative, median): "
        "confirmed when another mode than the declared one reproduces the evaluator's metrics, ruled out when "
        "the declared one does",
    ),
    Candidate(
        CUTOFF,
        "the loop's own score rows ranked with the declared tie mode and a hit counted at rank < N: confirmed "
        "when that reproduces the evaluator's metrics and rank <= N does not",
    ),
)


def _memo(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run at most once (several probes share one measurement)."""
    box: list[Any] = []

    def get() -> Any:
        if not box:
            box.append(fn())
        return box[0]

    return get


def stream_probe(model: Any, test_df: pd.DataFrame, batch_size: int = 7) -> dict:
    """Compare ``score_stream`` rows with fresh-state scores of the same prefixes, column by column.

    Returns ``{"n": rows, "vector_rows": rows with a score vector, "masked": {category: count}, "rows_masked":
    rows with a masked column, "off_mask_rel": largest relative difference over the unmasked columns,
    "rows_off": rows differing there}``; categories: ``input``, ``past``, ``target``, ``future``, ``other``."""
    sessions = {
        sid: g.sort_values("Time", kind="stable")["ItemId"].tolist()
        for sid, g in test_df.groupby("SessionId", sort=False)
    }
    ids = np.asarray(model.item_ids())
    known = set(ids.tolist())
    rows = list(model.score_stream(test_df, batch_size))
    prefixes, stream, items_of = [], [], []
    for sid, pos, _target, row in rows:
        items = [i for i in sessions[sid] if i in known]
        if np.ndim(row) == 0 or not 0 < pos < len(items):
            continue
        prefixes.append(items[:pos])
        stream.append(np.asarray(row, dtype=np.float64))
        items_of.append((items, pos))
    out: dict[str, Any] = {"n": len(rows), "vector_rows": len(stream), "rows_masked": 0, "rows_off": 0,
                           "off_mask_rel": 0.0, "masked": dict.fromkeys(("input", "past", "target", "future",
                                                                         "other"), 0)}  # fmt: skip
    if not stream:
        return out
    fresh = fresh_scores(model, prefixes)
    col = {int(i): j for j, i in enumerate(ids.tolist())}
    for row, f, (items, pos) in zip(stream, fresh, items_of):
        masked = ~np.isfinite(row) | (row <= MASKED_BELOW)
        masked &= np.isfinite(f) & (f > MASKED_BELOW)  # masked by the loop, not in the raw scores
        if masked.any():
            out["rows_masked"] += 1
            # an item already seen counts as seen (input, then past) even when it comes again later
            cat = {col[i]: "future" for i in items[pos + 1 :]}
            cat[col[items[pos]]] = "target"
            cat.update({col[i]: "past" for i in items[: pos - 1]})
            cat[col[items[pos - 1]]] = "input"
            for j in np.flatnonzero(masked):
                out["masked"][cat.get(int(j), "other")] += 1
        keep = ~masked
        scale = max(float(np.abs(f[keep]).max()) if keep.any() else 0.0, 1e-12)
        rel = float(np.abs(row[keep] - f[keep]).max()) / scale if keep.any() else 0.0
        out["off_mask_rel"] = max(out["off_mask_rel"], rel)
        out["rows_off"] += int(rel >= AGREE_REL)
    return out


def _masked_text(p: dict) -> str:
    m = {k: v for k, v in p["masked"].items() if v}
    what = ", ".join(f"{v} {k}" for k, v in m.items()) or "none"
    return f"{p['rows_masked']}/{p['vector_rows']} loop rows set columns to -inf or below -1e20 (masked: {what})"


def stream_causes(model: Any, test_df: pd.DataFrame, batch_size: int = 7, available: bool = True) -> list[Cause]:
    """The causes of a disagreement between the own inference loop and fresh-state scoring (module docstring):
    :data:`STATE`, :data:`FUTURE_MASKED`, :data:`SEEN_REMOVED`. Needs a model with ``score_stream`` returning
    score vectors (rank-only rows leave every cause undecided); ``available=False`` (the hook is not declared)
    lists them without a probe."""
    if not available:
        return [c.cause(None, "needs the score_stream hook") for c in STREAM_TABLE]
    probe = _memo(lambda: stream_probe(model, test_df, batch_size))

    def no_vectors(p: dict) -> Finding | None:
        return undecided("score_stream yields target ranks only, no score rows") if not p["vector_rows"] else None

    def state() -> Finding:
        p = probe()
        return no_vectors(p) or decide(
            p["rows_off"] > 0,
            f"outside the masked columns {p['rows_off']}/{p['vector_rows']} rows differ from fresh-state "
            f"scoring (largest relative difference {p['off_mask_rel']:.3g})",
        )

    def future() -> Finding:
        p = probe()
        n = p["masked"]["target"] + p["masked"]["future"]
        return no_vectors(p) or decide(n > 0, _masked_text(p))

    def seen() -> Finding:
        p = probe()
        n = p["masked"]["input"] + p["masked"]["past"]
        return no_vectors(p) or decide(n > 0, _masked_text(p))

    by_name = {STATE: state, FUTURE_MASKED: future, SEEN_REMOVED: seen}
    return [c.cause(by_name[c.name]) for c in STREAM_TABLE]


def _metrics(ranks: np.ndarray, cutoffs: Sequence[int], strict: bool) -> dict:
    out: dict[str, float] = {}
    for n in cutoffs:
        hit = ranks < n if strict else ranks <= n
        out[f"recall@{n}"] = float(np.mean(hit))
        out[f"mrr@{n}"] = float(np.mean(np.where(hit, 1.0 / ranks, 0.0)))
    return out


def _close(a: Mapping[str, float], b: Mapping[str, Any], tol: float) -> bool:
    return all(abs(float(a[k]) - float(b.get(k, np.nan))) <= tol for k in a)


def ranking_causes(model: Any, test_df: pd.DataFrame, own: Mapping[str, Any], mode: str, cutoffs: Sequence[int],
                   tol: float, batch_size: int = 7, available: bool = True) -> list[Cause]:  # fmt: skip
    """The counting causes of an own-evaluator mismatch, :data:`TIE_MODE` and :data:`CUTOFF`, decided by ranking
    the own loop's rows (``score_stream``) with each rule and comparing with the evaluator's metrics ``own``
    (within ``tol``). Needs ``score_stream`` with score rows (``available=False``: listed without a probe)."""
    if not available:
        return [c.cause(None, "needs the score_stream hook") for c in RANKING_TABLE]

    def ranked() -> dict[str, Any]:
        rows = list(model.score_stream(test_df, batch_size))
        vec = [r for r in rows if np.ndim(r[3]) == 1]
        if not vec:
            return {}
        scores = np.stack([np.asarray(r[3], dtype=np.float64) for r in vec])
        cols = target_columns(model, [r[2] for r in vec])
        by_mode = {m: np.asarray(oracle_eval.rank(scores, cols, m), dtype=np.float64)
                   for m in ("standard", "conservative", "median")}  # fmt: skip
        return {"by_mode": by_mode, "n": len(vec)}

    get = _memo(ranked)

    def tie() -> Finding:
        r = get()
        if not r:
            return undecided("score_stream yields no score rows")
        declared = _close(_metrics(r["by_mode"][mode], cutoffs, False), own, tol)
        others = [m for m in r["by_mode"] if m != mode and _close(_metrics(r["by_mode"][m], cutoffs, False), own, tol)]
        if declared:
            return ruled_out(f"the suite's {mode!r} ranking of the loop's own {r['n']} rows reproduces its metrics")
        if others:
            return confirmed(f"its metrics are the {'/'.join(repr(m) for m in others)} ranking of its own rows")
        return undecided("no tie mode applied to the loop's own rows reproduces its metrics")

    def cutoff() -> Finding:
        r = get()
        if not r:
            return undecided("score_stream yields no score rows")
        if _close(_metrics(r["by_mode"][mode], cutoffs, False), own, tol):
            return ruled_out("rank <= N on the loop's own rows reproduces its metrics")
        strict = _close(_metrics(r["by_mode"][mode], cutoffs, True), own, tol)
        return decide(True if strict else None, "rank < N on the loop's own rows reproduces its metrics"
                      if strict else "rank < N on the loop's own rows does not reproduce its metrics either")  # fmt: skip

    by_name = {TIE_MODE: tie, CUTOFF: cutoff}
    return [c.cause(by_name[c.name]) for c in RANKING_TABLE]
