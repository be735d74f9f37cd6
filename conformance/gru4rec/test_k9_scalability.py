"""K9 scalability (docs/checks.md, K9): a training step scores only the b + S sampled columns, so its
cost does not grow with the catalogue. Checks SC-2 (deterministic, white-box) and SC-1 (CPU timing, interleaved)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.conformance._harness.cputime import cpu_call
from gru4rec_conformance.conformance.gru4rec._common import build
from gru4rec_conformance.conformance.gru4rec._data import sessions_frame


@pytest.mark.check("SC-2", kind="K9")
@pytest.mark.hook("train_forward")
def test_sc2_columns_scored_per_step(impl, zipf, expect):
    """A training step scores only the B+S sampled columns, not the whole catalogue.

    A training step (Zipf catalogue of 1000 items, B=8, S=8) computes at most B+S score columns and its loss
    reaches at most the output rows of those columns (plus the inputs' rows with a shared embedding)."""
    B_, S_ = 8, 8
    opt = dict(layers=[16], loss="cross-entropy", learning_rate=0.05)
    # any declared embedding mode: SC-2 is n/a only without the hook (one-hot models, KG-7, included)
    shared = not impl.supports("embedding:separate") and impl.supports("embedding:shared")
    if impl.supports("embedding:separate"):
        mode: dict = dict(constrained_embedding=False, embedding=16)
    elif shared:
        mode = dict(constrained_embedding=True)
    else:
        mode = dict(constrained_embedding=False, embedding=0)
    req = dict(batch_size=B_, n_sample=S_) if impl.supports("extra_shared_negatives") else dict(batch_size=B_)
    model = build(impl, req, {**opt, **mode})
    model.fit(zipf.train, n_epochs=0)
    items = list(zipf.meta["items"])
    out = model.train_forward([[items[k], items[k + 1]] for k in range(0, 2 * B_, 2)], seed=0)
    n_items = len(np.asarray(model.item_ids()))
    k = B_ + (S_ if "n_sample" in req else 0)
    rows_bound = k + (B_ if shared else 0)
    shape, rows = out.get("score_tensor_shape"), out.get("output_rows_touched")
    if shape is None and rows is None:
        pytest.skip("train_forward reports neither score_tensor_shape nor output_rows_touched")
    problems = []
    if shape is not None:
        cols = int(tuple(shape)[-1])
        expect(
            "columns scored in one training step",
            cols,
            le=k,
            reference=k,
            catalogue=n_items,
            problems=problems,
            message=f"the step computes a score tensor of shape {tuple(shape)} ({cols} columns, allowed {k})",
        )
    if rows is not None:
        expect(
            "output rows reached by the step's gradient",
            int(rows),
            le=rows_bound,
            reference=rows_bound,
            problems=problems,
            message=f"the loss reaches {int(rows)} output rows (allowed {rows_bound})",
        )
    assert not problems, "; ".join(problems) + f" of {n_items} items: the step scores the whole catalogue"


def _catalogue(n_items: int, n_events: int, seed: int = 0) -> pd.DataFrame:
    """Sessions of 4 events covering ``n_items`` distinct items (each at least once) in ``n_events`` events."""
    rng = np.random.default_rng(seed)
    items = np.concatenate([np.arange(n_items), rng.integers(0, n_items, size=max(0, n_events - n_items))])
    rng.shuffle(items)
    items = items[: (len(items) // 4) * 4] + 1
    return sessions_frame(items.reshape(-1, 4).tolist())


#: SC-1's limit on t(large catalogue) / t(2k items); see :func:`test_sc1_step_time_flat_in_catalogue`.
SC1_LIMIT = 3.0
SC1_SMALL = 2_000
#: train_step variant: large catalogue (CPU; GPU), rounds, train_step calls per block, warm-up calls per model.
SC1_LARGE, SC1_LARGE_GPU, SC1_ROUNDS, SC1_BLOCK, SC1_WARMUP = 128_000, 512_000, 9, 10, 10
#: fit variant (no train_step): large catalogue, rounds (one fit of one epoch per catalogue and round). 32k, not
#: 128k: every item must occur in the training events, and an epoch over 130k events costs a sampled
#: implementation ~7 s CPU (a full-catalogue one minutes); at 16x the full-catalogue mutant still shows ~11x.
SC1_FIT_LARGE, SC1_FIT_ROUNDS = 32_000, 3
#: A measurement stops early (after 3 rounds of train_step blocks, or 1 round of fits, each of ~800 steps) when
#: every ratio so far is at least this: a clear failure needs no more repeats, and full-catalogue steps are the
#: expensive ones (a 32k-item fit of the full-catalogue mutant costs ~20 s CPU).
SC1_DECISIVE = 2 * SC1_LIMIT
SC1_HPARAMS = (dict(batch_size=32, layers=[64]), dict(n_sample=256, loss="cross-entropy", learning_rate=0.05))
#: Measured 2026-12-01 on 2 shared cores (load average 10-14) with the other core running a busy loop: the evidence
#: behind SC1_LIMIT, quoted in every failure message (conformance/gru4rec/README.md, SC-1).
SC1_MEASURED = {
    "train_step": (
        "the reference (sampled columns) gave median ratios 0.99-1.13 (single rounds 0.75-1.89) and passed 20 of 20 "
        "runs with the other core busy; the full-catalogue mutants gave 17-28 (single rounds 16-29), so 3 lies 2.7x "
        "above the reference's worst median and 6x below the mutants"
    ),
    "fit": (
        "the reference's one-epoch fit gave median ratios 1.01-1.31 (single rounds 0.91-1.45) in 5 runs with the "
        "other core busy; the full-catalogue mutant without train_step gave 9.7, so 3 lies 2.3x above the "
        "reference's worst median and 3x below the mutant"
    ),
}


def _interleaved(
    measure: Callable[[int], float], small: int, large: int, rounds: int, min_rounds: int
) -> dict[str, Any]:
    """Alternate the two catalogues (small, large, large, small, ...: ABBA rounds, so a drift of the machine's
    speed hits both alike) and take per-round ratios; ``measure(n_items)`` returns seconds. Stops after
    ``min_rounds`` when every ratio so far is at least :data:`SC1_DECISIVE`.

    Returns ``{"ratio": median of the per-round ratios, "ratios", "small", "large"}`` (seconds per round)."""
    out: dict[str, Any] = {"ratios": [], "small": [], "large": []}
    for r in range(rounds):
        values = {}
        for n in (small, large) if r % 2 == 0 else (large, small):
            values[n] = measure(n)
        out["small"].append(values[small])
        out["large"].append(values[large])
        out["ratios"].append(values[large] / max(values[small], 1e-9))
        if r + 1 >= min_rounds and min(out["ratios"]) >= SC1_DECISIVE:
            break
    out["ratio"] = float(np.median(out["ratios"]))
    return out


def _clock(impl: Any, model: Any, method: str, *args: Any, **kwargs: Any) -> float:
    """Seconds of one call: the CPU time of the process that runs the adapter (harness cputime), or wall clock on
    cuda (the GPU's work is not CPU time)."""
    if impl.device == "cuda":
        t0 = time.perf_counter()
        getattr(model, method)(*args, **kwargs)
        return time.perf_counter() - t0
    return cpu_call(model, method, *args, **kwargs)[1]


def _train_step_ratio(impl: Any, large: int) -> dict[str, Any]:
    """SC-1 through ``train_step``: one model per catalogue (fit with n_epochs=0 on the same number of events),
    blocks of :data:`SC1_BLOCK` steps on random (input, target) items; a block's value is its median step."""
    n_events = large + 8_000
    models, ids = {}, {}
    for n in (SC1_SMALL, large):
        models[n] = build(impl, *SC1_HPARAMS)
        models[n].fit(_catalogue(n, n_events), n_epochs=0)
        ids[n] = np.asarray(models[n].item_ids())
    rng = np.random.default_rng(1)

    def block(n: int, steps: int = SC1_BLOCK) -> float:
        times = []
        for _ in range(steps):
            x, y = ids[n][rng.integers(len(ids[n]), size=32)], ids[n][rng.integers(len(ids[n]), size=32)]
            times.append(_clock(impl, models[n], "train_step", x, y))
        return float(np.median(times))

    for n in models:
        block(n, SC1_WARMUP)
    return _interleaved(block, SC1_SMALL, large, SC1_ROUNDS, min_rounds=3)


def _fit_ratio(impl: Any, large: int) -> dict[str, Any]:
    """SC-1 black-box: the CPU time of ``fit`` (one epoch, a freshly built model each time) on two catalogues with
    the same number of events, sessions and steps."""
    n_events = large + 2_000
    data = {n: _catalogue(n, n_events) for n in (SC1_SMALL, large)}

    def one_fit(n: int) -> float:
        model = build(impl, *SC1_HPARAMS)
        return _clock(impl, model, "fit", data[n], n_epochs=1)

    return _interleaved(one_fit, SC1_SMALL, large, SC1_FIT_ROUNDS, min_rounds=1)


@pytest.mark.check("SC-1", kind="K9")
def test_sc1_step_time_flat_in_catalogue(impl, conformance_options, record_metric):
    """Training cost stays flat when the catalogue grows (2k → 128k items per train_step, 2k → 32k per fit).

    The CPU time of a training step (B=32, S=256, hidden 64) grows less than 3x from a 2k to a 128k-item
    catalogue (512k on GPU, wall clock there); without train_step, the CPU time of a one-epoch fit on the same
    events grows less than 3x from 2k to 32k items. Full-catalogue scoring grows roughly linearly.

    Measurement: CPU time of the process that runs the adapter (the worker reports its own for an isolated
    adapter), so other work on the machine does not count; the two catalogues alternate in ABBA rounds (9 rounds
    of 10 train_step calls, or 3 rounds of one fit), the ratio is the median of the per-round ratios.

    Limit 3, from the measured spread (SC1_MEASURED, with the other core busy): the reference's medians were
    0.99-1.13 through train_step (20 of 20 runs passed; single rounds up to 1.89) and 1.01-1.31 through fit; the
    full-catalogue mutants gave 17-28 through train_step and 9.7 through fit."""
    if impl.supports("hook:train_step"):
        method, large = "train_step", (SC1_LARGE_GPU if conformance_options.device == "cuda" else SC1_LARGE)
        res = _train_step_ratio(impl, large)
        what = "a training step (train_step)"
    else:
        method, large = "fit", SC1_FIT_LARGE
        res = _fit_ratio(impl, large)
        what = "a one-epoch fit on the same events (no train_step hook: black-box variant)"
    ratio = res["ratio"]
    clock = "wall clock" if impl.device == "cuda" else "CPU time"
    small_t, large_t = float(np.median(res["small"])), float(np.median(res["large"]))
    record_metric(
        f"{method} {clock} ratio {large // 1000}k / {SC1_SMALL // 1000}k items",
        ratio,
        reference=1.0,
        rule=f"pass if median of per-round ratios < {SC1_LIMIT:g}",
        method=method,
        clock=clock,
        ms_small=round(small_t * 1e3, 3),
        ms_large=round(large_t * 1e3, 3),
        rounds=len(res["ratios"]),
        ratios=" ".join(f"{x:.2f}" for x in res["ratios"]),
    )
    assert ratio < SC1_LIMIT, (
        f"{what} takes {large_t * 1e3:.2f} ms {clock} with {large} items vs {small_t * 1e3:.2f} ms with "
        f"{SC1_SMALL} (median ratio {ratio:.1f}x over {len(res['ratios'])} interleaved rounds: "
        f"{', '.join(f'{x:.1f}' for x in res['ratios'])}; limit {SC1_LIMIT:g}): the cost grows with the catalogue "
        f"(all items scored every step). Limit: {SC1_MEASURED[method]}"
    )
