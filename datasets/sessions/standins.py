"""The metric checks' synthetic stand-ins of Rees46, Coveo, RetailRocket and Diginetica: how each is generated,
the statistics it is calibrated to, and their measurement (docs/datasets.md, 'Stand-ins of the metric matrix').

Each stand-in is ``synthetic.generate_raw`` with the dataset's profile on a shortened calendar (``span_days``
days ending where the full data end, flat traffic) run through the study's pipeline (``pipeline.process``, the
study's split rule unchanged). Shortening the calendar is what lets a CPU-sized training set come with a test
split of at least :data:`MIN_TEST_SESSIONS` sessions (the study's 1- or 7-day test period, at the density of a
day of the stand-in): every evaluator that fills 512 lanes at once can run. The train period is therefore 3
days (1-day test) or 14 days (7-day test) instead of the study's 17-146: the number of train days and the
train/test ratio are the statistics deliberately *not* matched.

Matched, per dataset, and measured by :func:`measure` / :func:`compare` (the stated tolerance in :data:`TARGETS`):

- test split: at least :data:`MIN_TEST_SESSIONS` evaluable sessions (two or more events of items known in
  train_full);
- session lengths: mean events per session of train_full within 10% of the published one, of test within 25%
  (one length distribution serves both periods; the study's test sessions are a little shorter); right-skewed
  (median below the mean, 90th percentile at least 1.8 x the median, at least 10% of train sessions of length 2);
- item count scaled: train_full's items between what a uniform sample of as many events from a Zipf(1) catalogue
  of the published size keeps after the 5-event support filter (``E / (5 H_N)``) and the most the filter allows
  (``min(N, E / 5)``);
- item popularity: the most popular 1% of items hold 4-17% of train_full events (the range measured on real
  data: Yoochoose raw to Rees46); the rank-frequency slope (log-log, ranks 10 to half the catalogue) is between
  -2.0 and -0.5 (Zipf-like);
- repeats: the share of views the pipeline's consecutive-repeat removal drops within 0.03 of the dataset's rate
  (Rees46 0.23 and Diginetica 0.07 as measured on real data; Coveo 0.12 and RetailRocket 0.15 are the
  generator's assumptions, no measured figure exists); non-consecutive re-visits (an event whose item occurred
  earlier in its session) 3-40% of train_full events;
- split rule: every train_full event before tsplit - tday and every test session starting at or after it, with
  the study's tday (1 or 7 days) and anchor (fixed for Rees46 and RetailRocket, the last event otherwise).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["KEYS", "MIN_TEST_SESSIONS", "STANDINS", "TARGETS", "Standin", "standin_profile", "generate", "measure",
           "compare", "evaluable_sessions"]  # fmt: skip

KEYS = ("rees46", "coveo", "retailrocket", "diginetica")
#: every evaluator with a 512-lane batch needs this many test sessions with a margin (almost four full batches)
MIN_TEST_SESSIONS = 2000
SEED = 0


@dataclasses.dataclass(frozen=True)
class Standin:
    """How one stand-in is generated: ``scale`` (fraction of the full raw size, ``generate_raw``'s scale),
    ``span_days`` (calendar days ending at the profile's end), ``tail_mean`` (mean raw length of non-singleton
    sessions, calibrated so that the pipeline's mean length meets the published one)."""

    scale: float
    span_days: float
    tail_mean: float


STANDINS = {
    "rees46": Standin(scale=1.24e-3, span_days=4, tail_mean=6.8),
    "coveo": Standin(scale=0.079, span_days=4, tail_mean=9.2),
    "retailrocket": Standin(scale=0.0333, span_days=21, tail_mean=4.4),
    "diginetica": Standin(scale=0.038, span_days=21, tail_mean=5.2),
}

#: consecutive-repeat share of raw views: measured on real data (Rees46, Diginetica) or assumed (Coveo, RetailRocket)
REPEAT_RATE = {"rees46": 0.23, "coveo": 0.12, "retailrocket": 0.15, "diginetica": 0.07}


def _published() -> dict:
    return json.loads((Path(__file__).with_name("study_stats.json")).read_text())["published"]


#: per dataset: the published train/test events per session and item count, the repeat rate, and the tolerances
TARGETS = {
    k: {
        "train_events_per_session": (_published()[k]["train"]["events_per_session"], 0.10),
        "test_events_per_session": (_published()[k]["test"]["events_per_session"], 0.25),
        "published_items": _published()[k]["items"],
        "repeat_rate": (REPEAT_RATE[k], 0.03),
        "top1pct_share": (0.04, 0.17),
        "zipf_slope": (-2.0, -0.5),
        "revisit_rate": (0.03, 0.40),
        "min_test_sessions": MIN_TEST_SESSIONS,
    }
    for k in KEYS
}


def standin_profile(key: str):
    """The ``synthetic.Profile`` of ``key``'s stand-in: the dataset's profile on the last ``span_days`` days of its
    calendar, flat traffic (no trend), the calibrated ``tail_mean``. Raises ValueError for an unknown key."""
    from .synthetic import DAY_MS, PROFILES

    if key not in STANDINS:
        raise ValueError(f"key: no stand-in for {key!r}; known: {', '.join(KEYS)}")
    s, prof = STANDINS[key], PROFILES[key]
    start = prof.end_ms - int(s.span_days * DAY_MS)
    return dataclasses.replace(prof, start_ms=start, trend=0.0, tail_mean=s.tail_mean)


def _has_rows(path: Path) -> bool:
    """True when a raw file holds a data row after its header (the Rees46 October file is empty on a
    November-only calendar; the pipeline runs without it as with ``--allow-missing``)."""
    with open(path, "rb") as f:
        f.readline()
        return bool(f.readline().strip())


@functools.cache
def generate(key: str):
    """``key``'s stand-in through the study's pipeline: the ``pipeline.Processed`` (``frames`` train_full, test,
    train_tr, train_valid; SessionId/ItemId int64, Time in the dataset's unit). Deterministic (seed 0), a few
    seconds; cached per process (do not modify the frames). Raises ValueError for an unknown key."""
    from .pipeline import process
    from .readers import read_raw
    from .synthetic import generate_raw

    prof = standin_profile(key)
    with tempfile.TemporaryDirectory(prefix=f"gru4rec-standin-{key}-") as d:
        paths = generate_raw(key, d, STANDINS[key].scale, seed=SEED, profile=prof)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inputs = {f: read_raw(key, p) for f, p in paths.items() if _has_rows(Path(p))}
        return process(key, inputs)


def evaluable_sessions(train: pd.DataFrame, test: pd.DataFrame) -> int:
    """Test sessions an evaluator sees: those with two or more events of items that occur in ``train``."""
    known = test[test["ItemId"].isin(train["ItemId"].unique())]
    return int((known.groupby("SessionId").size() >= 2).sum())


def measure(res) -> dict:
    """The statistics of :data:`TARGETS` measured on a ``pipeline.Processed`` (a stand-in, or a real sample
    prepared the same way): a flat dict of floats/ints (sessions, events, items, per-session lengths, popularity,
    repeat and re-visit rates, split-rule flags)."""
    tr, te = res.frames["train_full"], res.frames["test"]
    lengths = tr.groupby("SessionId").size().to_numpy()
    counts = np.sort(tr["ItemId"].value_counts().to_numpy())[::-1]
    n_items = len(counts)
    top = counts[: max(1, n_items // 100)].sum() / max(1, counts.sum())
    hi = max(11, n_items // 2)
    ranks = np.arange(10, min(hi, n_items)) + 1
    slope = float(np.polyfit(np.log(ranks), np.log(counts[ranks - 1]), 1)[0]) if len(ranks) > 2 else float("nan")
    i = next(k for k, s in enumerate(res.steps) if s["step"] == "dedup")
    repeat = res.steps[i]["removed"] / max(1, res.steps[i - 1]["rows"])
    s, it = tr["SessionId"].to_numpy(), tr["ItemId"].to_numpy()
    revisit = float(pd.DataFrame({"s": s, "i": it}).duplicated().mean()) if len(tr) else 0.0
    boundary = res.tsplit - res.tday if res.tsplit is not None else None
    test_start = te.groupby("SessionId")["Time"].min()
    return {
        "train_events": len(tr),
        "train_sessions": int(tr["SessionId"].nunique()),
        "train_items": n_items,
        "test_events": len(te),
        "test_sessions": int(te["SessionId"].nunique()),
        "test_sessions_evaluable": evaluable_sessions(tr, te),
        "train_events_per_session": len(tr) / max(1, len(lengths)),
        "test_events_per_session": len(te) / max(1, te["SessionId"].nunique()),
        "train_length_p50": float(np.median(lengths)) if len(lengths) else 0.0,
        "train_length_p90": float(np.quantile(lengths, 0.9)) if len(lengths) else 0.0,
        "train_length2_share": float((lengths == 2).mean()) if len(lengths) else 0.0,
        "top1pct_share": float(top),
        "zipf_slope": slope,
        "repeat_rate": float(repeat),
        "revisit_rate": revisit,
        "split_train_before": bool(boundary is not None and (tr["Time"] < boundary).all()),
        "split_test_after": bool(boundary is not None and (test_start >= boundary).all()),
        "filter_rounds": int(res.filter_rounds),
    }


def _harmonic(n: int) -> float:
    return math.log(n) + 0.5772156649 + 1 / (2 * n)


def compare(key: str, stats: dict) -> list[dict]:
    """Each statistic of ``key``'s :data:`TARGETS` against ``stats`` (:func:`measure`): a list of
    ``{"stat", "value", "target", "ok"}`` (``target`` in words: the band). Raises KeyError for an unknown key."""
    t = TARGETS[key]
    rows: list[dict] = []

    def put(stat, value, target, ok):
        rows.append({"stat": stat, "value": value, "target": target, "ok": bool(ok)})

    for stat in ("train_events_per_session", "test_events_per_session"):
        want, tol = t[stat]
        put(stat, stats[stat], f"{want:g} ± {tol:.0%}", abs(stats[stat] / want - 1) <= tol)
    p50, p90, mean = stats["train_length_p50"], stats["train_length_p90"], stats["train_events_per_session"]
    put("train length skew", (p50, p90, stats["train_length2_share"]), "p50 < mean, p90 ≥ 1.8·p50, length-2 ≥ 10%",
        p50 < mean and p90 >= 1.8 * p50 and stats["train_length2_share"] >= 0.10)  # fmt: skip
    n_pub, e = t["published_items"], stats["train_events"]
    lo, hi = e / (5 * _harmonic(n_pub)), min(n_pub, e / 5)
    put("train_items", stats["train_items"], f"[{lo:.0f}, {hi:.0f}]", lo <= stats["train_items"] <= hi)
    for stat in ("top1pct_share", "zipf_slope", "revisit_rate"):
        a, b = t[stat]
        put(stat, stats[stat], f"[{a:g}, {b:g}]", a <= stats[stat] <= b)
    want, tol = t["repeat_rate"]
    put("repeat_rate", stats["repeat_rate"], f"{want:g} ± {tol:g}", abs(stats["repeat_rate"] - want) <= tol)
    put("test_sessions_evaluable", stats["test_sessions_evaluable"], f"≥ {t['min_test_sessions']}",
        stats["test_sessions_evaluable"] >= t["min_test_sessions"])  # fmt: skip
    put("split rule", (stats["split_train_before"], stats["split_test_after"]), "train < tsplit − tday ≤ test start",
        stats["split_train_before"] and stats["split_test_after"])  # fmt: skip
    return rows
