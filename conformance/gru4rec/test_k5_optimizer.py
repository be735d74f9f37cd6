"""K5 optimizer (docs/checks.md, K5): Adagrad with a zero initial accumulator and eps 1e-6 inside the
square root, heavy-ball momentum on the scaled step, a constant learning rate (docs/algorithm.md, 'Optimizer').
Checks OP-1..OP-4, measured on parameter snapshots around ``train_step``."""

from __future__ import annotations

import numpy as np
import pytest

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.conformance.gru4rec._common import build
from gru4rec_conformance.implementations.base import Unsupported

WB_HOOKS = ("get_weights", "train_step")

#: OP-3's relative tolerance on a reported learning rate: float32 resolution. TensorFlow/Keras keep η in a float32
#: variable, so a constant η = 0.05 reads back as 0.05000000074505806 (1.5e-8 relative); a schedule moves it by
#: far more (TensorFlow's staircase decay: 4% at its first step; even a 1e-5 floor is resolved).
LR_REL_TOL = float(np.finfo(np.float32).eps)


def lr_deviation(lr, eta: float) -> np.ndarray:
    """|lr/η − 1| of reported learning rates (scalar or array, float64); OP-3 passes where it is ≤ LR_REL_TOL."""
    return np.abs(np.asarray(lr, dtype=np.float64) / float(eta) - 1.0)


def _model(impl, d_lag1, learning_rate: float):
    opt = dict(layers=[16], n_sample=0, loss="cross-entropy", dropout_p_embed=0.0, dropout_p_hidden=0.0, momentum=0.0)
    model = build(impl, dict(learning_rate=learning_rate, batch_size=8), opt)
    model.fit(d_lag1.train, n_epochs=0)
    return model


def _batch(d_lag1):
    cycle = list(d_lag1.meta["items"])
    return np.array(cycle[0:16:2]), np.array(cycle[1:17:2])


def _flat(params: dict) -> np.ndarray:
    return np.concatenate([np.asarray(params[k], dtype=np.float64).ravel() for k in sorted(params)])


def _spacing(params: dict) -> np.ndarray:
    """Per entry, the gap to the next representable value in the parameter's own dtype (float32: ~1.2e-7·|θ|)."""
    return np.concatenate(
        [
            np.spacing(np.abs(np.asarray(params[k]))).astype(np.float64).ravel()
            if np.issubdtype(np.asarray(params[k]).dtype, np.floating)
            else np.zeros(np.asarray(params[k]).size)
            for k in sorted(params)
        ]
    )


def _steps(model, d_lag1, n: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Parameter vectors before and after each of ``n`` updates on the same batch, and per entry the largest
    representation gap seen (the resolution of a measured step)."""
    inputs, targets = _batch(d_lag1)
    p = model.get_weights()
    snaps, gap = [_flat(p)], _spacing(p)
    for _ in range(n):
        model.train_step(inputs, targets)
        p = model.get_weights()
        snaps.append(_flat(p))
        gap = np.maximum(gap, _spacing(p))
    return snaps, gap


def _two_step_ratio(snaps: list[np.ndarray], gap: np.ndarray) -> tuple[float, int]:
    """Median Δ2/Δ1 over the resolved entries with the largest first steps.

    Resolved: the entry's representation gap is ≤ 1e-3·|Δ1|. At η = 1e-6 a step is a few float32 ulps of a
    parameter of size ~0.1, so those entries' ratios are quantised (a median lands on a ratio of small integers,
    e.g. 8/11); entries near zero (the zero-initialised biases) resolve the step exactly. Largest: |Δ1| ≥ 0.99 ·
    the largest resolved step, i.e. for Adagrad the entries whose gradient dwarfs √eps = 1e-3 (|Δ1| ≈ η), where
    Δ2/Δ1 = 1/√2 exactly. Returns (ratio, entries used); (nan, 0) when no step is resolved."""
    d1, d2 = snaps[1] - snaps[0], snaps[2] - snaps[1]
    resolved = (np.abs(d1) > 0) & (gap <= 1e-3 * np.abs(d1))
    if not resolved.any():
        return float("nan"), 0
    sel = resolved & (np.abs(d1) >= 0.99 * np.abs(d1[resolved]).max())
    return float(np.median(d2[sel] / d1[sel])), int(sel.sum())


def _unresolved(ratio: float) -> str:
    return (
        "no parameter step is resolvable at η = 1e-6 (every step is below 1000 float ulps of its parameter): "
        "cause not isolated; candidates: steps not Adagrad-normalised (e.g. SGD, step ∝ |g|), vanishing steps"
        if ratio != ratio
        else ""
    )


@pytest.mark.check("OP-1", kind="K5")
@pytest.mark.hook(*WB_HOOKS)
def test_op1_first_step_magnitude(impl, d_lag1, expect):
    """The first Adagrad step has size η for large gradients (zero initial accumulator).

    From the initial state one update with lr η = 0.05 moves no parameter entry by more than η, and the
    entries with large gradients by η (max |Δθ|/η in [0.99, 1.0001]: Adagrad with a zero initial accumulator)."""
    eta = 0.05
    snaps, _ = _steps(_model(impl, d_lag1, eta), d_lag1, 1)
    r = np.abs(snaps[1] - snaps[0]) / eta
    expect(
        "max |Δθ|/η after one step",
        float(r.max()),
        ge=0.99,
        le=1.0001,
        reference=1.0,
        message=f"max |Δθ|/η after the first update is {r.max():.4f}, expected in [0.99, 1.0001]: "
        + (
            "the first steps are smaller than η; cause not isolated; candidates: a large initial Adagrad "
            "accumulator, another optimizer, every gradient below ~1e-2 (vanishing gradients)"
            if r.max() < 0.99
            else "steps exceed the learning rate; cause not isolated; candidates: steps not Adagrad-normalised "
            "(another optimizer), a learning rate other than η"
        ),
    )


@pytest.mark.check("OP-2", kind="K5")
@pytest.mark.hook(*WB_HOOKS)
def test_op2_two_step_ratio(impl, d_lag1, expect):
    """The optimizer is Adagrad: a second step on the same batch is 1/√2 of the first.

    Two updates on the same batch with the spec's tiny lr η = 1e-6 (the gradient barely changes) have step ratio
    Δ2/Δ1 ≈ 1/√2 = 0.707 ± 0.01 (Adagrad with momentum 0; Adam gives ≈ 1, SGD 1), measured on the entries whose
    step float precision resolves."""
    ratio, n = _two_step_ratio(*_steps(_model(impl, d_lag1, 1e-6), d_lag1, 2))
    adagrad = expect.holds(
        "second/first step ratio", ratio, reference=2**-0.5, tolerance=0.01, entries=n, learning_rate=1e-6
    )
    assert n, _unresolved(ratio)
    assert adagrad, (
        f"second/first step ratio {ratio:.4f} (median over {n} entries), expected 0.7071 ± 0.01 for Adagrad: "
        + (
            "steps of equal size; cause not isolated; candidates: an Adam-like optimizer, SGD (no accumulator)"
            if abs(ratio - 1) <= 0.05
            else "cause not isolated; candidates: a non-zero initial accumulator, momentum, another optimizer"
        )
    )


def _constant_lr(impl, d_lag1, n_epochs: int, expect) -> None:
    eta = 0.05
    has_trace, has_info = impl.supports("hook:trace"), impl.supports("hook:optimizer_info")
    if not (has_trace or has_info):
        impl.require("hook:trace")
    model = build(
        impl,
        dict(learning_rate=eta, batch_size=4, n_epochs=n_epochs),
        dict(layers=[8], n_sample=0, loss="cross-entropy", momentum=0.0),
    )
    if has_trace:
        model.trace(True)
    rep = model.fit(d_lag1.train)
    steps = int(sum(rep.n_steps))
    checked = False
    if has_trace and rep.trace:
        lrs = np.array([np.nan if t.learning_rate is None else t.learning_rate for t in rep.trace], dtype=np.float64)
        known = lrs[np.isfinite(lrs)]
        if len(known):
            checked = True
            dev = lr_deviation(known, eta)
            worst = float(dev.max())
            first_bad = int(np.argmax(dev > LR_REL_TOL))  # where the message points
            expect(
                "max relative deviation of the traced learning rate",
                worst,
                reference=0.0,
                tolerance=LR_REL_TOL,
                steps=steps,
                message=_lr_message(known, first_bad, eta),
            )
    if has_info:
        info = model.optimizer_info()
        lr = info.get("learning_rate")
        if lr is not None:
            checked = True
            expect(
                "optimizer_info learning rate after training",
                float(lr),
                reference=eta,
                tolerance=LR_REL_TOL * eta,
                steps=steps,
                schedule=str(info.get("lr_schedule")),
                message=f"after {steps} steps the learning rate is {lr}, configured "
                f"{eta} (relative deviation {float(lr_deviation(lr, eta)):.3g})",
            )
        assert info.get("lr_schedule") in (None, "constant", "none"), f"lr_schedule is {info.get('lr_schedule')!r}"
    if not checked:
        pytest.skip("neither the trace nor optimizer_info reports the learning rate")


def _lr_message(known: np.ndarray, first_bad: int, eta: float) -> str:
    """OP-3's message: what the traced rate was; a schedule is named only when the trace shows the rate change."""
    lo, hi = float(known.min()), float(known.max())
    seen = f"step {first_bad}: {known[first_bad]:.6g} vs η = {eta}; first {known[0]:.6g}, last {known[-1]:.6g}"
    if hi - lo > LR_REL_TOL * max(abs(hi), 1e-12):
        return f"the traced learning rate changes during training ({seen}; range {lo:.6g}..{hi:.6g}): a schedule"
    return (
        f"the traced learning rate is constant at {lo:.6g}, not η = {eta} ({seen}): cause not isolated; "
        "candidates: learning_rate ignored or overridden (e.g. an optimizer default), another rate convention"
    )


@pytest.mark.check("OP-3", kind="K5")
def test_op3_constant_learning_rate(impl, d_lag1, expect):
    """The learning rate stays constant over 2,500 training steps (no schedule).

    The effective learning rate stays the configured η over 2,500 training steps (trace per step and
    optimizer_info): no decay schedule (the spec's 20,000 steps run in the slow variant)."""
    _constant_lr(impl, d_lag1, 5, expect)


@pytest.mark.check("OP-3", kind="K5")
@pytest.mark.slow
def test_op3_constant_learning_rate_20k_steps(impl, d_lag1, expect):
    """The learning rate stays constant over 20,000 training steps (no late schedule either).

    The effective learning rate stays the configured η over 20,000 training steps (the spec's length; a
    schedule that only starts late, e.g. TensorFlow's staircase decay every 10,000 steps, shows here)."""
    _constant_lr(impl, d_lag1, 40, expect)


@pytest.mark.check("OP-4", kind="K5")
def test_op4_momentum_honoured_or_refused(impl, d_lag1, record_metric, expect):
    """momentum is either honoured (heavy-ball on the Adagrad step) or refused with Unsupported.

    momentum=0.5 is either refused with Unsupported (when not declared) or honoured: the two-step ratio shifts
    by +0.5 to 1.207 ± 0.01 (heavy-ball momentum on the Adagrad step)."""
    declared = impl.supports("hparam:momentum") and impl.supports("adagrad_momentum")
    try:
        # batch_size is optional: train_step takes its batch explicitly, and an implementation that refuses the
        # batch size (TF-5) must still get a verdict on momentum
        model = build(
            impl,
            dict(learning_rate=1e-6, momentum=0.5),
            dict(
                layers=[16], batch_size=8, n_sample=0, loss="cross-entropy", dropout_p_embed=0.0, dropout_p_hidden=0.0
            ),
        )
    except Unsupported as exc:
        if exc.name.partition(":")[0] not in ("momentum", "adagrad_momentum"):
            raise  # refused for another reason (e.g. learning_rate undeclared): not a verdict on momentum
        assert not declared, f"momentum is declared but build(momentum=0.5) raised Unsupported({exc})"
        record_metric("momentum refused", 1.0, rule="refused loudly: pass")
        return
    impl.require(*(f"hook:{h}" for h in WB_HOOKS))
    model.fit(d_lag1.train, n_epochs=0)
    ratio, n = _two_step_ratio(*_steps(model, d_lag1, 2))
    want = 2**-0.5 + 0.5
    honoured = expect.holds(
        "second/first step ratio with momentum 0.5",
        ratio,
        reference=want,
        tolerance=0.01,
        entries=n,
        learning_rate=1e-6,
    )
    assert n, _unresolved(ratio)
    assert honoured, (
        f"build(momentum=0.5) was accepted but the two-step ratio is {ratio:.4f}, expected {want:.4f}: "
        + (
            "momentum has no effect on the first two steps (the ratio is Adagrad's without momentum, 0.7071)"
            if abs(ratio - 2**-0.5) <= 0.01
            else "neither Adagrad's ratio with this momentum nor without it; cause not isolated; candidates: momentum "
            "applied another way, another optimizer"
        )
    )


#: OP-5's tolerance on a parameter entry after each step: |θ − θ_ref| ≤ atol + rtol·|θ_ref| (float32 rounding
#: of one update is ~1e-7·|θ|; a missing or extra transform of the gradient moves entries by ~1e-4 or more).
WHOLE_UPDATE_ATOL, WHOLE_UPDATE_RTOL = 1e-6, 1e-5
#: OP-5's runs: (label, factor applied to every initial weight). The initial weights give gradient norms below 1;
#: ×10 gives norms of ~4-7 that change from step to step, so a clipping of the norm shows through Adagrad.
WHOLE_UPDATE_RUNS = (("initial weights (gradient norm < 1)", 1.0), ("weights ×10 (gradient norm ≫ 1)", 10.0))
WHOLE_UPDATE_STEPS = 4


def _item_permutation(impl_ids, ref_ids) -> np.ndarray | None:
    """Index array p with ref_ids[p] == impl_ids (None when the two item sets differ)."""
    impl_ids, ref_ids = np.asarray(impl_ids), np.asarray(ref_ids)
    pos = {v: k for k, v in enumerate(ref_ids.tolist())}
    if len(impl_ids) != len(ref_ids) or any(v not in pos for v in impl_ids.tolist()):
        return None
    return np.array([pos[v] for v in impl_ids.tolist()], dtype=np.int64)


def _to_reference(weights: dict, perm: np.ndarray, n_items: int) -> dict:
    """Weights in an implementation's item order → the reference's (every axis of length n_items permuted)."""
    out = {}
    inv = np.argsort(perm)  # impl row k holds ref item perm[k]; ref row j holds impl row inv[j]
    for k, v in weights.items():
        a = np.asarray(v)
        for ax, n in enumerate(a.shape):
            if n == n_items:
                a = np.take(a, inv, axis=ax)
        out[k] = a
    return out


#: OP-5's causes of an update that is not Adagrad's alone (meta-tests match them).
OP5_CLIPPING = "the gradients are clipped to a maximum norm"
OP5_DECAY = "weight decay: the update pulls every weight toward zero"
OP5_RANDOM = "a random term in the update (e.g. gradient noise)"
#: Share of the deviating entries that must show a signature for the probe to confirm its cause; at or below
#: OP5_NO_SIGNATURE the signature is absent (a share near 1/2 is what an unrelated perturbation gives).
OP5_SIGNATURE, OP5_NO_SIGNATURE = 0.95, 0.6
OP5_TABLE = (
    diagnosis.Candidate(
        OP5_CLIPPING,
        "which runs deviate and how: confirmed when the run with gradient norms below 1 matches the reference and, "
        "in the run with norms far above 1, the first deviating step is the reference's step rescaled (>= 95% of "
        "the deviating entries made larger, or >= 95% smaller); ruled out when at most 60% are; optimizer_info's "
        "grad_clip, when declared and on, confirms it",
    ),
    diagnosis.Candidate(
        OP5_DECAY,
        "at the first deviating step, confirmed when >= 95% of the deviating entries end closer to zero than the "
        "reference's (the sign of the weight decides the direction of the deviation), ruled out when at most 60% "
        "do; optimizer_info's weight_decay, when declared and on, confirms it",
    ),
    diagnosis.Candidate(
        OP5_RANDOM,
        "the same weights and batches on a model built with another seed (no dropout, no sampled negatives: the "
        "reference's update draws nothing): confirmed when its weights differ from the first model's by more than "
        "the tolerance, not decided when they agree (a term seeded apart from the build seed stays possible); "
        "optimizer_info's gradient_noise, when declared and on, confirms it",
    ),
)


def _flat_ref(weights: dict) -> np.ndarray:
    """Weights in the reference's order as one float64 vector (sorted names, C order)."""
    return np.concatenate([np.asarray(weights[k], dtype=np.float64).ravel() for k in sorted(weights)])


def _deviating(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Mask of the entries outside OP-5's tolerance."""
    return np.abs(got - want) - WHOLE_UPDATE_RTOL * np.abs(want) > WHOLE_UPDATE_ATOL


def _share(mask: np.ndarray) -> float:
    return float(mask.mean()) if mask.size else float("nan")


@pytest.mark.check("OP-5", kind="K5")
@pytest.mark.hook("get_weights", "set_weights", "train_step")
@diagnosis.causes(*OP5_TABLE)
def test_op5_whole_update_matches_reference(impl, d_lag1, record_metric):
    """Several updates from given weights give the reference's weights after every step (no clipping, decay, noise).

    The implementation and the reference (``implementations.reference``, same hyperparameters: hidden 16, B 8,
    n_sample 0, cross-entropy, lr 0.05, no dropout, no momentum) get the same weights through ``set_weights``,
    then 4 ``train_step``s on the same D-LAG1 batches: once from the implementation's initial weights (gradient
    norms < 1) and once from them ×10 (norms ≫ 1, changing per step, where a clipped norm shows through
    Adagrad's normalisation). After every step each weight entry must equal the reference's within 1e-6 +
    1e-5·|θ|. ``optimizer_info`` (when declared): ``grad_clip``, ``weight_decay`` and ``lr_schedule`` must be
    off. Inconclusive (skip) when the weights do not map onto the reference's (names, shapes, gate layout).

    Diagnosis (:data:`OP5_TABLE`): which runs deviate, and at the first deviating step whether the deviation
    rescales the reference's step (clipping), pulls the weights toward zero (decay) or changes with the build
    seed (a random term)."""
    from gru4rec_conformance.implementations.reference import ReferenceAdapter

    eta = 0.05
    hp = dict(layers=[16], batch_size=8, n_sample=0, loss="cross-entropy", learning_rate=eta)
    opt = dict(dropout_p_embed=0.0, dropout_p_hidden=0.0, momentum=0.0, **{"optimizer": "adagrad"})
    seed = impl.seeds[0]
    problems: list[str] = []
    info_on: dict = {}
    if impl.supports("hook:optimizer_info"):
        m = build(impl, hp, opt, seed=seed)
        m.fit(d_lag1.train, n_epochs=0)
        info = dict(m.optimizer_info())
        info_on = {
            k: info.get(k)
            for k in ("grad_clip", "weight_decay", "gradient_noise")
            if info.get(k) not in (None, 0, 0.0, False, "none", "None")
        }
        on = dict(info_on)
        if info.get("lr_schedule") not in (None, "constant", "none"):
            on["lr_schedule"] = info["lr_schedule"]
        record_metric("optimizer_info fields switched on at the defaults", len(on), reference=0, **{"read": str(info)})
        if on:
            problems.append(f"optimizer_info reports machinery GRU4Rec does not have, on at the defaults: {on}")
    cycle = list(d_lag1.meta["items"])
    succ = d_lag1.meta["successor"]
    batches = [[cycle[(2 * k + 3 * j) % len(cycle)] for k in range(8)] for j in range(WHOLE_UPDATE_STEPS)]
    worst = 0.0
    # per run: the first deviating step (None: every step matched) with the weights around it, for the probes
    runs: dict[str, dict] = {}
    for label, factor in WHOLE_UPDATE_RUNS:
        model = build(impl, hp, opt, seed=seed)
        model.fit(d_lag1.train, n_epochs=0)
        ref = ReferenceAdapter()
        ref.build(seed=seed, **hp, **opt)
        ref.fit(d_lag1.train, n_epochs=0)
        w0 = {k: np.asarray(v, dtype=np.float64) * factor for k, v in model.get_weights().items()}
        rw = ref.get_weights()
        perm = _item_permutation(model.item_ids(), ref.item_ids())
        layout = impl.capabilities.gate_layout
        ref_layout = tuple(ref.capabilities()["gate_layout"])
        shapes_ok = perm is not None and set(w0) == set(rw)
        if shapes_ok:
            mapped = _to_reference(w0, perm, len(perm))
            shapes_ok = all(np.shape(mapped[k]) == np.shape(rw[k]) for k in rw)
        if not shapes_ok or (layout is not None and tuple(layout) != ref_layout):
            pytest.skip(
                "inconclusive: the implementation's weights do not map onto the reference's (names "
                f"{sorted(w0)} vs {sorted(rw)}, gate layout {layout} vs {ref_layout}, or other items)"
            )
        model.set_weights({k: v.astype(np.float32) for k, v in w0.items()})
        ref.set_weights({k: v.astype(np.float32) for k, v in mapped.items()})
        run: dict = {"w0": w0, "step": None, "trajectory": [], "items": np.asarray(model.item_ids()), "perm": perm}
        before_got = before_want = _flat_ref({k: v.astype(np.float32) for k, v in mapped.items()})
        for j, b in enumerate(batches):
            x, t = np.array(b), np.array([succ[i] for i in b])
            model.train_step(x, t)
            ref.train_step(x, t)
            got = _to_reference(
                {k: np.asarray(v, dtype=np.float64) for k, v in model.get_weights().items()}, perm, len(perm)
            )
            want = {k: np.asarray(v, dtype=np.float64) for k, v in ref.get_weights().items()}
            run["trajectory"].append(_flat_ref(got))
            for k in sorted(want):
                err = np.abs(got[k] - want[k]) - WHOLE_UPDATE_RTOL * np.abs(want[k])
                worst = max(worst, float(np.max(np.abs(got[k] - want[k]))))
                if (err > WHOLE_UPDATE_ATOL).any():
                    i = int(np.argmax(err))
                    problems.append(
                        f"{label}, after step {j + 1}: {k!r} differs from the reference's by up to "
                        f"{float(np.max(np.abs(got[k] - want[k]))):.3g} (entry {tuple(int(n) for n in np.unravel_index(i, want[k].shape))}: "
                        f"{got[k].ravel()[i]:.7g} vs {want[k].ravel()[i]:.7g})"
                    )
                    break
            if run["step"] is None and problems and problems[-1].startswith(label):
                run.update(step=j, before_got=before_got, before_want=before_want, got=_flat_ref(got),
                           want=_flat_ref(want))  # fmt: skip
                break
            before_got, before_want = _flat_ref(got), _flat_ref(want)
        runs[label] = run
        ref.close()
    record_metric("max |θ − θ_ref| over the steps", worst, reference=0.0, tolerance=WHOLE_UPDATE_ATOL)
    if not problems:
        return
    (small, small_run), (large, large_run) = runs.items()
    failing = [(label, r) for label, r in runs.items() if r["step"] is not None]

    def at_first_deviation(label: str, r: dict) -> tuple[np.ndarray, str]:
        """The deviating entries of the run's first deviating step and where that is."""
        return _deviating(r["got"], r["want"]), f"{label}, step {r['step'] + 1}"

    def clipping() -> diagnosis.Finding:
        if "grad_clip" in info_on:
            return diagnosis.confirmed(f"optimizer_info reports grad_clip = {info_on['grad_clip']!r}")
        if large_run["step"] is None:
            return diagnosis.ruled_out(f"the {large} match the reference at every step")
        dev, where = at_first_deviation(large, large_run)
        step_ref = (large_run["want"] - large_run["before_want"])[dev]
        step_got = (large_run["got"] - large_run["before_got"])[dev]
        live = step_ref != 0
        larger = _share(np.abs(step_got[live]) > np.abs(step_ref[live]))
        rescaled = max(larger, 1.0 - larger)
        evidence = (
            f"{where}: {larger:.0%} of {int(live.sum())} deviating entries took a larger step than the reference's, "
            f"{1 - larger:.0%} a smaller one; the {small} "
            + ("match at every step" if small_run["step"] is None else f"deviate from step {small_run['step'] + 1}")
        )
        if not rescaled > OP5_NO_SIGNATURE:
            return diagnosis.ruled_out(evidence)
        return diagnosis.decide(True if rescaled >= OP5_SIGNATURE and small_run["step"] is None else None, evidence)

    def decay() -> diagnosis.Finding:
        if "weight_decay" in info_on:
            return diagnosis.confirmed(f"optimizer_info reports weight_decay = {info_on['weight_decay']!r}")
        if not failing:
            return diagnosis.undecided("no run deviates from the reference")
        label, r = failing[0]
        dev, where = at_first_deviation(label, r)
        w = r["before_want"][dev]
        live = w != 0
        toward = _share(np.abs(r["got"][dev][live]) < np.abs(r["want"][dev][live]))
        evidence = (
            f"{where}: {toward:.0%} of {int(live.sum())} deviating entries end closer to zero than the reference's"
        )
        if toward >= OP5_SIGNATURE:
            return diagnosis.confirmed(evidence)
        return diagnosis.decide(False if toward <= OP5_NO_SIGNATURE else None, evidence)

    def random_term() -> diagnosis.Finding:
        if "gradient_noise" in info_on:
            return diagnosis.confirmed(f"optimizer_info reports gradient_noise = {info_on['gradient_noise']!r}")
        if not failing:
            return diagnosis.undecided("no run deviates from the reference")
        label, r = failing[0]
        other = next((s for s in impl.seeds if s != seed), seed + 1)
        model = build(impl, hp, opt, seed=other)
        model.fit(d_lag1.train, n_epochs=0)
        if not np.array_equal(np.asarray(model.item_ids()), r["items"]):
            return diagnosis.undecided(f"the model built with seed {other} orders the items another way")
        perm = r["perm"]
        model.set_weights({k: v.astype(np.float32) for k, v in r["w0"].items()})
        for j, b in enumerate(batches[: r["step"] + 1]):
            model.train_step(np.array(b), np.array([succ[i] for i in b]))
            got = _flat_ref(_to_reference(
                {k: np.asarray(v, dtype=np.float64) for k, v in model.get_weights().items()}, perm, len(perm)
            ))  # fmt: skip
            n = int(_deviating(got, r["trajectory"][j]).sum())
            if n:
                return diagnosis.confirmed(
                    f"{label}: with seed {other} instead of {seed}, {n} entries differ after step {j + 1}"
                )
        return diagnosis.undecided(
            f"{label}: seeds {seed} and {other} give the same weights up to step {r['step'] + 1}"
        )

    diagnosis.fail(
        "; ".join(problems) + " (implementation's value vs the reference's): the update is not Adagrad's alone",
        [OP5_TABLE[0].cause(clipping), OP5_TABLE[1].cause(decay), OP5_TABLE[2].cause(random_term)],
    )
