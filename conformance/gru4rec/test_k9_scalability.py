"""K9 scalability (docs/checks.md, K9): a training step scores only the b + S sampled columns, so its
cost does not grow with the catalogue. Checks SC-2 (deterministic, white-box) and SC-1 (CPU timing, interleaved)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.conformance._harness.cputime import cpu_call
from gru4rec_conformance.conformance.gru4rec._common import build, declared
from gru4rec_conformance.conformance.gru4rec._data import sessions_frame
from gru4rec_conformance.implementations.base import Unsupported


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
    widest = max(int(tuple(shape)[-1]) if shape is not None else 0, int(rows) if rows is not None else 0)
    assert not problems, (
        "; ".join(problems)
        + f" of {n_items} items: "
        + (
            "the step scores the whole catalogue"
            if widest >= n_items
            else f"the step reaches more items than the B + S = {k} it needs, not the whole catalogue"
        )
    )


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


def _sizes(impl: Any) -> dict[str, Any]:
    """SC1_HPARAMS' sizes (batch_size, layers) that the implementation declares. An undeclared one is left at the
    implementation's own default (noted in the report by the check): the ratio compares two catalogues of the
    same model, so the sizes shift both timings alike and do not decide the verdict."""
    names = declared(impl)
    return {k: v for k, v in SC1_HPARAMS[0].items() if k in names}


def _step_models(impl: Any, large: int, optional: dict | None = None) -> tuple[dict[int, Any], dict[int, np.ndarray]]:
    """One model per catalogue (:data:`SC1_SMALL` and ``large`` items), fit with n_epochs=0 on the same number of
    events; ``optional`` replaces SC1_HPARAMS' optional values. Returns (size → model, size → item ids)."""
    n_events = large + 8_000
    models, ids = {}, {}
    for n in (SC1_SMALL, large):
        models[n] = build(impl, _sizes(impl), optional if optional is not None else SC1_HPARAMS[1])
        models[n].fit(_catalogue(n, n_events), n_epochs=0)
        ids[n] = np.asarray(models[n].item_ids())
    return models, ids


def _train_step_ratio(impl: Any, large: int) -> dict[str, Any]:
    """SC-1 through ``train_step``: one model per catalogue (:func:`_step_models`), blocks of :data:`SC1_BLOCK`
    steps on random (input, target) items; a block's value is its median step. The result also carries the
    models (``"models"``, ``"ids"``) for the diagnosis."""
    models, ids = _step_models(impl, large)
    rng = np.random.default_rng(1)

    def block(n: int, steps: int = SC1_BLOCK) -> float:
        times = []
        for _ in range(steps):
            x, y = ids[n][rng.integers(len(ids[n]), size=32)], ids[n][rng.integers(len(ids[n]), size=32)]
            times.append(_clock(impl, models[n], "train_step", x, y))
        return float(np.median(times))

    for n in models:
        block(n, SC1_WARMUP)
    return {**_interleaved(block, SC1_SMALL, large, SC1_ROUNDS, min_rounds=3), "models": models, "ids": ids}


def _fit_ratio(impl: Any, large: int) -> dict[str, Any]:
    """SC-1 black-box: the CPU time of ``fit`` (one epoch, a freshly built model each time) on two catalogues with
    the same number of events, sessions and steps."""
    n_events = large + 2_000
    data = {n: _catalogue(n, n_events) for n in (SC1_SMALL, large)}

    def one_fit(n: int) -> float:
        model = build(impl, _sizes(impl), SC1_HPARAMS[1])
        return _clock(impl, model, "fit", data[n], n_epochs=1)

    return _interleaved(one_fit, SC1_SMALL, large, SC1_FIT_ROUNDS, min_rounds=1)


#: SC-1's candidate causes (meta-tests match them).
SC1_FULL_SCORING = "all items are scored every step (the step's score tensor grows with the catalogue; SC-2 tests it)"
SC1_DENSE_UPDATE = (
    "the step's gradient or optimizer update is dense over the whole item table (the cost grows outside the "
    "forward pass)"
)
SC1_SAMPLER = "the negative sampler's per-step cost grows with the catalogue (e.g. its distribution rebuilt per step)"
#: Diagnosis timing (after a failure only): ABBA rounds, calls of each hook per catalogue and round.
SC1_PROBE_ROUNDS, SC1_PROBE_CALLS = 4, 5
#: A part of the step "grows" when, at the large catalogue, it adds at least SC1_GROWS small-catalogue steps (half
#: of the 2 that a failing ratio of 3 needs) and is "flat" below SC1_FLAT; in between its probe does not decide.
SC1_GROWS, SC1_FLAT = (SC1_LIMIT - 1) / 2, 0.5
#: SC-1's cause table (docs/checks.md; the probes are :func:`_sc1_causes`'s, run only after a failure).
SC1_TABLE = (
    diagnosis.Candidate(
        SC1_FULL_SCORING,
        "the widest score tensor train_forward reports at each catalogue size: confirmed when it grows with the "
        "catalogue, ruled out when it stays flat",
    ),
    diagnosis.Candidate(
        SC1_DENSE_UPDATE,
        "train_step and train_forward timed apart (CPU time, interleaved, repeated) at both catalogue sizes, and the "
        "step again with n_sample 0: confirmed when train_step minus train_forward grows while the score tensor "
        "stays flat and the growth remains without extra negatives",
    ),
    diagnosis.Candidate(
        SC1_SAMPLER,
        "the step timed with n_sample 0: confirmed when the growth disappears without extra negatives, ruled out "
        "when it remains",
    ),
)


def _pairs(ids: np.ndarray, rng: np.random.Generator, b: int = 32) -> tuple[np.ndarray, np.ndarray]:
    return ids[rng.integers(len(ids), size=b)], ids[rng.integers(len(ids), size=b)]


def _hook_times(impl: Any, models: dict[int, Any], ids: dict[int, np.ndarray], methods: tuple[str, ...]) -> dict:
    """Median seconds per call of each of ``methods`` (``train_forward``, ``train_step``) per catalogue size:
    :data:`SC1_PROBE_ROUNDS` ABBA rounds of :data:`SC1_PROBE_CALLS` calls of each, on the same random (input,
    target) pairs (train_forward gets them as 2-item prefixes), after one warm-up call each.
    Returns ``{method: {n_items: seconds}}``."""
    rng = np.random.default_rng(2)
    sizes = sorted(models)
    times: dict[str, dict[int, list[float]]] = {m: {n: [] for n in sizes} for m in methods}

    def call(method: str, n: int, x: np.ndarray, y: np.ndarray) -> float:
        if method == "train_forward":
            return _clock(impl, models[n], method, [[a, b] for a, b in zip(x.tolist(), y.tolist())], seed=0)
        return _clock(impl, models[n], method, x, y)

    for n in sizes:
        for m in methods:
            call(m, n, *_pairs(ids[n], rng))
    for r in range(SC1_PROBE_ROUNDS):
        for n in sizes if r % 2 == 0 else sizes[::-1]:
            for _ in range(SC1_PROBE_CALLS):
                x, y = _pairs(ids[n], rng)
                for m in methods:
                    times[m][n].append(call(m, n, x, y))
    return {m: {n: float(np.median(v)) for n, v in per.items()} for m, per in times.items()}


def _sc1_causes(
    impl: Any, models: dict[int, Any], ids: dict[int, np.ndarray], step_ok: bool = True
) -> list[diagnosis.Cause]:
    """SC-1's causes, probed after a failure on the two catalogues' models (size → adapter); ``step_ok`` False:
    train_step refused the probe's lanes (its probes then count as missing).

    - :data:`SC1_FULL_SCORING`: the widest score tensor of one ``train_forward`` per catalogue
      (``score_tensor_shape``): more than twice the columns at the large catalogue isolates it, the same width
      rules it out; without the shape, train_forward's time alone cannot tell scoring from a dense gradient
      computed there, so it rules the cause out only when that time is flat.
    - :data:`SC1_DENSE_UPDATE`: train_step and train_forward timed apart (CPU time, repeated, interleaved): the
      step's time outside train_forward (the optimizer update, and the backward where train_forward runs none)
      growing by at least :data:`SC1_GROWS` small steps isolates it, once full scoring (whose dense output
      gradient grows there as well) and the sampler are ruled out.
    - :data:`SC1_SAMPLER`: the same step timed on two more models without extra negatives (n_sample=0): a growth
      that goes away without them isolates the sampler; one that stays rules it out."""
    sizes = sorted(models)
    small_n, large_n = sizes[0], sizes[-1]
    has_fwd, has_step = impl.supports("hook:train_forward"), impl.supports("hook:train_step") and step_ok
    no_step = "needs the train_step hook" if step_ok else "train_step refused the probe's 32 lanes"
    sampled = "n_sample" in impl.capabilities.hyperparameters and impl.supports("extra_shared_negatives")

    @functools.cache
    def split() -> dict:
        return _hook_times(impl, models, ids, ("train_forward", "train_step") if has_step else ("train_forward",))

    def ms(x: float) -> str:
        return f"{x * 1e3:.2f} ms"

    def added(t: dict) -> tuple[float, float]:
        """(train_forward's added cost, the rest's added cost) at the large catalogue, in small-catalogue steps."""
        fwd, step = t["train_forward"], t.get("train_step")
        unit = max((step or fwd)[small_n], 1e-9)
        f = (fwd[large_n] - fwd[small_n]) / unit
        r = ((step[large_n] - fwd[large_n]) - (step[small_n] - fwd[small_n])) / unit if step else float("nan")
        return f, r

    @functools.cache
    def widths() -> dict[int, int | None]:
        out = {}
        rng = np.random.default_rng(3)
        for n in sizes:
            x, y = _pairs(ids[n], rng)
            shape = (
                models[n]
                .train_forward([[a, b] for a, b in zip(x.tolist(), y.tolist())], seed=0)
                .get("score_tensor_shape")
            )
            out[n] = None if shape is None else int(tuple(shape)[-1])
        return out

    def scoring_grows() -> bool | None:
        w_small, w_large = widths()[small_n], widths()[large_n]
        return None if w_small is None or w_large is None else w_large > 2 * max(w_small, 1)

    def full_scoring() -> diagnosis.Finding:
        if not has_fwd:
            return diagnosis.undecided("needs the train_forward hook")
        w, f = widths(), added(split())[0]
        timed = f"train_forward's time goes {ms(split()['train_forward'][small_n])} -> " \
                f"{ms(split()['train_forward'][large_n])} ({f:+.1f} small steps)"  # fmt: skip
        grows = scoring_grows()
        if grows is None:
            if f < SC1_FLAT:
                return diagnosis.ruled_out(f"train_forward reports no score_tensor_shape; {timed}: flat")
            return diagnosis.undecided(f"train_forward reports no score_tensor_shape; {timed}, which full scoring "
                                       "and a dense gradient computed in it give alike")  # fmt: skip
        return diagnosis.decide(grows, f"the widest score tensor of a step has {w[small_n]} columns with "
                                f"{small_n} items and {w[large_n]} with {large_n}; {timed}")  # fmt: skip

    @functools.cache
    def without_samples() -> dict | None:
        if not (sampled and has_step):
            return None
        m0, ids0 = _step_models(impl, large_n, {**SC1_HPARAMS[1], "n_sample": 0})
        step0 = _hook_times(impl, m0, ids0, ("train_step",))["train_step"]
        return {"ratio0": step0[large_n] / max(step0[small_n], 1e-9), "step0": step0}

    def step_ratio() -> float:
        step = split()["train_step"]
        return step[large_n] / max(step[small_n], 1e-9)

    def sampler() -> diagnosis.Finding:
        if not has_step:
            return diagnosis.undecided(no_step)
        w0 = without_samples()
        if w0 is None:
            return diagnosis.undecided("needs n_sample (extra shared negatives) to time the step without them")
        text = f"train_step grows {step_ratio():.1f}x with n_sample={SC1_HPARAMS[1]['n_sample']} and " \
               f"{w0['ratio0']:.1f}x with n_sample=0"  # fmt: skip
        if w0["ratio0"] >= SC1_LIMIT:
            return diagnosis.ruled_out(text)
        if w0["ratio0"] < 1 + SC1_FLAT and step_ratio() >= SC1_LIMIT:
            return diagnosis.confirmed(text)
        return diagnosis.undecided(text)

    def dense_update() -> diagnosis.Finding:
        if not (has_step and has_fwd):
            return diagnosis.undecided(f"{no_step if not has_step else 'needs the train_forward hook'} (the update "
                                       "is timed as train_step minus train_forward)")  # fmt: skip
        t = split()
        f, r = added(t)
        rest = {n: t["train_step"][n] - t["train_forward"][n] for n in sizes}
        text = f"train_step minus train_forward goes {ms(rest[small_n])} -> {ms(rest[large_n])} ({r:+.1f} small " \
               f"steps; train_forward {f:+.1f})"  # fmt: skip
        if scoring_grows():
            return diagnosis.undecided(f"{text}; with full scoring the output table's gradient is dense as well, "
                                       "so the split does not separate the two")  # fmt: skip
        if r < SC1_FLAT:
            return diagnosis.ruled_out(text)
        if r < SC1_GROWS or scoring_grows() is None:
            return diagnosis.undecided(text + ("" if r < SC1_GROWS else "; the score tensor's width is not reported"))
        w0 = without_samples()
        if w0 is None:
            return diagnosis.undecided(f"{text}; the sampler is not ruled out (no n_sample to time the step without "
                                       "extra negatives)")  # fmt: skip
        if w0["ratio0"] < SC1_LIMIT:
            return diagnosis.ruled_out(f"{text}, but without extra negatives the step grows {w0['ratio0']:.1f}x only")
        return diagnosis.confirmed(f"{text}, with the score tensor flat and the growth kept without extra negatives "
                                   f"({w0['ratio0']:.1f}x)")  # fmt: skip

    return [
        diagnosis.Cause(SC1_FULL_SCORING, full_scoring),
        diagnosis.Cause(SC1_DENSE_UPDATE, dense_update),
        diagnosis.Cause(SC1_SAMPLER, sampler),
    ]


@pytest.mark.check("SC-1", kind="K9")
@diagnosis.causes(*SC1_TABLE)
def test_sc1_step_time_flat_in_catalogue(impl, conformance_options, expect):
    """Training cost stays flat when the catalogue grows (2k → 128k items per train_step, 2k → 32k per fit).

    The CPU time of a training step (B=32, S=256, hidden 64; an implementation that declares no batch_size or
    layers runs at its own, noted in the report) grows less than 3x from a 2k to a 128k-item
    catalogue (512k on GPU, wall clock there); without train_step, the CPU time of a one-epoch fit on the same
    events grows less than 3x from 2k to 32k items; so does an implementation whose train_step refuses the probe's
    32 lanes (a batch width fixed by the code, not declared settable). Full-catalogue scoring grows roughly
    linearly.

    Measurement: CPU time of the process that runs the adapter (the worker reports its own for an isolated
    adapter), so other work on the machine does not count; the two catalogues alternate in ABBA rounds (9 rounds
    of 10 train_step calls, or 3 rounds of one fit), the ratio is the median of the per-round ratios.

    Limit 3, from the measured spread (SC1_MEASURED, with the other core busy): the reference's medians were
    0.99-1.13 through train_step (20 of 20 runs passed; single rounds up to 1.89) and 1.01-1.31 through fit; the
    full-catalogue mutants gave 17-28 through train_step and 9.7 through fit.

    Diagnosis: (1) all items scored every step, (2) a dense gradient or dense optimizer update of the whole item
    table, (3) a sampler whose per-step cost grows with the catalogue. Probes, on a model per catalogue: the
    widest score tensor of one train_forward at each size (score_tensor_shape; wider at the large one isolates
    full scoring); train_forward and train_step timed apart (CPU time, ABBA-repeated): the step's cost outside
    train_forward growing, with the score tensor flat, isolates the dense update; the step timed again without
    extra negatives (n_sample=0): a growth that goes away isolates the sampler, one that stays rules it out.
    Without train_step the update and the sampler stay undecided."""
    for name in sorted(set(SC1_HPARAMS[0]) - set(_sizes(impl))):
        impl.note(
            f"{name} not declared: SC-1 ran at the implementation's own {name}",
            hyperparameter=name,
            wanted=repr(SC1_HPARAMS[0][name]),
            rule="the ratio compares two catalogues of the same model; the sizes shift both timings alike",
        )
    res: dict[str, Any] | None = None
    why_fit, step_refused = "no train_step hook", False
    if impl.supports("hook:train_step"):
        method, large = "train_step", (SC1_LARGE_GPU if conformance_options.device == "cuda" else SC1_LARGE)
        try:
            res = _train_step_ratio(impl, large)
            what = "a training step (train_step)"
        except Unsupported as exc:
            if exc.name != "batch_size":
                raise
            # a model whose batch width is fixed (and not declared settable) cannot take the probe's 32 lanes:
            # its fit, at its own width, is measured instead of leaving the check untested
            impl.note(f"train_step refused 32 lanes: SC-1 ran black-box, through fit ({exc})",
                      hyperparameter="batch_size", rule="the fit variant needs no lane count of the suite's")  # fmt: skip
            why_fit, step_refused = "train_step refused 32 lanes", True
    if res is None:
        method, large = "fit", SC1_FIT_LARGE
        res = _fit_ratio(impl, large)
        what = f"a one-epoch fit on the same events ({why_fit}: black-box variant)"
    ratio = res["ratio"]
    clock = "wall clock" if impl.device == "cuda" else "CPU time"
    small_t, large_t = float(np.median(res["small"])), float(np.median(res["large"]))
    flat = expect.holds(
        f"{method} {clock} ratio {large // 1000}k / {SC1_SMALL // 1000}k items",
        ratio,
        reference=1.0,
        lt=SC1_LIMIT,
        rule=f"pass if median of per-round ratios < {SC1_LIMIT:g}",
        method=method,
        clock=clock,
        ms_small=round(small_t * 1e3, 3),
        ms_large=round(large_t * 1e3, 3),
        rounds=len(res["ratios"]),
        ratios=" ".join(f"{x:.2f}" for x in res["ratios"]),
    )
    if flat:
        return
    if "models" in res:
        models, ids = res["models"], res["ids"]
    else:  # the fit variant's probes need a model per catalogue (built only now, after the failure)
        models, ids = _step_models(impl, large)
    diagnosis.fail(
        f"{what} takes {large_t * 1e3:.2f} ms {clock} with {large} items vs {small_t * 1e3:.2f} ms with "
        f"{SC1_SMALL} (median ratio {ratio:.1f}x over {len(res['ratios'])} interleaved rounds: "
        f"{', '.join(f'{x:.1f}' for x in res['ratios'])}; limit {SC1_LIMIT:g}): the cost grows with the catalogue",
        _sc1_causes(impl, models, ids, step_ok=not step_refused),
        details=f"limit: {SC1_MEASURED[method]}",
    )
