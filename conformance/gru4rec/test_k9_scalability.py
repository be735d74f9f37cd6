"""K9 scalability (docs/checks.md, K9): a training step scores only the b + S sampled columns, so its
cost does not grow with the catalogue. Checks SC-2 (deterministic, white-box) and SC-1 (timing, slow)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.conformance.gru4rec._common import build
from gru4rec_conformance.conformance.gru4rec._data import sessions_frame


@pytest.mark.check("SC-2", kind="K9")
@pytest.mark.hook("train_forward")
def test_sc2_columns_scored_per_step(impl, zipf, record_metric):
    """A training step scores only the B+S sampled columns, not the whole catalogue.

    A training step (Zipf catalogue of 1000 items, B=8, S=8) computes at most B+S score columns and its loss
    reaches at most the output rows of those columns (plus the inputs' rows with a shared embedding)."""
    B_, S_ = 8, 8
    opt = dict(layers=[16], loss="cross-entropy", learning_rate=0.05)
    shared = not impl.supports("embedding:separate")
    mode = dict(constrained_embedding=True) if shared else dict(constrained_embedding=False, embedding=16)
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
        record_metric("columns scored in one training step", cols, reference=k, tolerance=0, catalogue=n_items)
        if cols > k:
            problems.append(f"the step computes a score tensor of shape {tuple(shape)} ({cols} columns, allowed {k})")
    if rows is not None:
        record_metric("output rows reached by the step's gradient", int(rows), reference=rows_bound, tolerance=0)
        if int(rows) > rows_bound:
            problems.append(f"the loss reaches {int(rows)} output rows (allowed {rows_bound})")
    assert not problems, "; ".join(problems) + f" of {n_items} items: the step scores the whole catalogue"


def _catalogue(n_items: int, n_events: int, seed: int = 0) -> pd.DataFrame:
    """Sessions of 4 events covering ``n_items`` distinct items (each at least once) in ``n_events`` events."""
    rng = np.random.default_rng(seed)
    items = np.concatenate([np.arange(n_items), rng.integers(0, n_items, size=max(0, n_events - n_items))])
    rng.shuffle(items)
    items = items[: (len(items) // 4) * 4] + 1
    return sessions_frame(items.reshape(-1, 4).tolist())


def _step_seconds(impl, train: pd.DataFrame, warmup: int = 10, steps: int = 50) -> float:
    model = build(impl, dict(batch_size=32, layers=[64]), dict(n_sample=256, loss="cross-entropy", learning_rate=0.05))
    if impl.supports("hook:train_step"):
        import time

        model.fit(train, n_epochs=0)
        ids = np.asarray(model.item_ids())
        rng = np.random.default_rng(1)
        times = []
        for _k in range(warmup + steps):
            x, y = ids[rng.integers(len(ids), size=32)], ids[rng.integers(len(ids), size=32)]
            t0 = time.perf_counter()
            model.train_step(x, y)
            times.append(time.perf_counter() - t0)
        return float(np.median(times[warmup:]))
    rep = model.fit(train, n_epochs=2)  # the second epoch: caches built, no warm-up cost
    return float(rep.epoch_seconds[1]) / int(rep.n_steps[1])


@pytest.mark.check("SC-1", kind="K9")
@pytest.mark.slow
def test_sc1_step_time_flat_in_catalogue(impl, conformance_options, record_metric):
    """Training-step time stays flat when the catalogue grows 64x (2k → 128k items).

    The median training-step time (B=32, S=256, hidden 64) grows less than 3x from a 2k to a 128k-item
    catalogue on CPU (2k → 512k on GPU); full-catalogue scoring grows roughly linearly."""
    large = 512_000 if conformance_options.device == "cuda" else 128_000
    small_t = _step_seconds(impl, _catalogue(2_000, large + 8_000))
    large_t = _step_seconds(impl, _catalogue(large, large + 8_000))
    ratio = large_t / small_t
    record_metric(
        f"step time ratio {large // 1000}k / 2k items",
        ratio,
        reference=1.0,
        rule="pass if < 3",
        step_ms_2k=round(small_t * 1e3, 3),
        step_ms_large=round(large_t * 1e3, 3),
    )
    assert ratio < 3, (
        f"a training step takes {large_t * 1e3:.2f} ms with {large} items vs {small_t * 1e3:.2f} ms with "
        f"2000 ({ratio:.1f}x): the cost grows with the catalogue (all items scored every step)"
    )
