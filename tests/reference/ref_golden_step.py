"""The golden training-step comparison (used by test_ref_golden.py and test_ref_golden_mutants.py).

The reference's step is run from the weights, hidden states, batch, samples and dropout masks recorded in
``fixtures/step_golden.npz`` and compared, element by element, with what the official port computed there: the
loss, every gradient, every parameter after the update, every parameter's update and the new hidden states.

Tolerance
---------
Both sides compute in float32, and the order in which a CPU's kernels (MKL, OpenBLAS, ATen's vectorised
loops) round and sum is not fixed: it changes with the CPU and the library. A tolerance relative to the result
alone misses cancellation. A bias gradient is a sum over the minibatch; when its terms nearly cancel, the sum
is far smaller than the rounding error of its terms. Adagrad's g/√(g² + 1e-6) then amplifies that error
(×40 for |g| ≈ 4e-4), and the update can cancel most of the old weight. That is how ``GE.Bh0[5]`` of
``bprmax_none_dropout_masks`` (−2.28e-05) came out 2.3e-07 away on an AMD EPYC machine, against 2.0e-07 allowed.

So each element's tolerance also gets a term measured on the step itself (*empirical sensitivity*). Backward
error analysis says a float32 result is the exact result of slightly perturbed data: each rounding acts as a
relative perturbation of about one ulp of an intermediate value, and it reaches the output through the same
derivatives as a perturbation of the inputs. :func:`sensitivity` measures that reach. It reruns the step
:data:`N_PROBES` times from inputs (initial weights, hidden states, dropout masks) moved by :data:`PROBE_ULPS`
float32 ulp each, with seeded random signs, and with the lanes in a seeded random order (which really
reorders every sum over the minibatch). It keeps the largest elementwise deviation from the unperturbed run,
the *spread*. The spread is large exactly where cancellation or amplification makes an element fragile, at
any stage of forward, backward or optimizer, and small where the element is well conditioned. The allowed
deviation (:func:`tolerance`) is

    |ours − official| ≤ rtol·|official| + rtol·0.1·max|official| + K·spread,

the previous relative term plus :data:`K_SPREAD` × spread. The spread is always the reference's own, measured
on the machine that runs the test (never a mutant's: a defective step cannot widen its own tolerance).

Calibration. Other MKL code paths stood in for other CPUs (``MKL_ENABLE_INSTRUCTIONS=AVX2`` or ``SSE4_2``,
``MKL_CBWR=COMPATIBLE`` or ``AVX``: other kernels, other summation orders). Each fails the purely relative
tolerance on one or two cases, as the AMD machine did. On the elements where the spread term dominates (about
6%), the deviation from the port reached at most 2 spreads. K = 16 leaves a factor 8 on top of that: for CPUs
and libraries that round less alike, and because the spread is a maximum over 8 random draws, not a worst
case. With it, the largest |diff|/allowed is 0.04 on the default path and 0.08 on the others. Every
step-changing mutant still exceeds 1, by a factor of 10⁴ or more (test_ref_golden_mutants.py).
"""

from __future__ import annotations

import functools
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.reference.gru4rec import GRU4Rec

FIXTURES = Path(__file__).parent / "fixtures"

#: relative term of the loss, gradient, weight and hidden-state comparisons
RTOL = 1e-5
#: relative term of the weight-update comparison (an update is a small difference of two weights)
RTOL_UPDATE = 1e-4
#: perturbed reruns per case whose elementwise maximum deviation is the spread
N_PROBES = 8
#: ulps by which every nonzero input element is moved in a perturbed rerun
PROBE_ULPS = 1
#: multiplier of the spread in the tolerance (see the module docstring's calibration)
K_SPREAD = 16.0
#: seed of the perturbation signs and lane orders (combined with the case name)
PROBE_SEED = 20261201


@functools.cache
def load(name: str) -> dict:
    """The arrays of fixture ``fixtures/<name>`` (a dict; cached). Fails the test when the file is missing."""
    path = FIXTURES / name
    if not path.exists():
        pytest.fail(f"golden fixture {path} is missing; regenerate it with tests/reference/make_golden_fixtures.py")
    with np.load(path, allow_pickle=False) as z:
        return dict(z)


def frame(fx: dict, prefix: str = "data") -> pd.DataFrame:
    """The session frame stored in fixture ``fx`` under ``prefix``."""
    return pd.DataFrame(
        {"SessionId": fx[f"{prefix}.SessionId"], "ItemId": fx[f"{prefix}.ItemId"], "Time": fx[f"{prefix}.Time"]}
    )


@dataclass(frozen=True)
class StepInputs:
    """What a recorded step case feeds the step: hyperparameters, parameter names, initial weights, initial
    hidden states, and per step (input columns, target columns, sample columns, dropout masks)."""

    hp: dict
    names: list
    w0: dict
    hidden: list
    steps: list


@functools.cache
def step_inputs(case: str) -> StepInputs:
    """The recorded inputs of step case ``case`` (item *columns*, not ids; cached, not to be modified)."""
    fx = load("step_golden.npz")
    assert case in json.loads(str(fx["cases_json"])), f"{case} not recorded: regenerate the step fixture"
    hp = json.loads(str(fx[f"{case}.hp_json"]))
    names = sorted(k[len(f"{case}.w0.") :] for k in fx if k.startswith(f"{case}.w0."))
    steps = []
    for s in range(int(fx[f"{case}.n_steps"])):
        p = f"{case}.s{s}"
        masks = {k[len(p) + 6 :]: fx[k] for k in fx if k.startswith(f"{p}.mask.")}
        steps.append((fx[f"{p}.in"], fx[f"{p}.targets"], fx[f"{p}.samples"], masks))
    return StepInputs(
        hp,
        names,
        {k: fx[f"{case}.w0.{k}"] for k in names},
        [fx[f"{case}.hidden.{j}"] for j in range(len(hp["layers"]))],
        steps,
    )


def build(case: str, gru_cls=GRU4Rec, device: str = "cpu") -> GRU4Rec:
    """A ``gru_cls`` model built (not trained) on ``device`` on the case's data, with the port's item map and
    parameters."""
    fx = load("step_golden.npz")
    inp = step_inputs(case)
    g = gru_cls(seed=0, device=device, **inp.hp)
    g.fit(frame(fx), n_epochs=0, sample_cache_max_size=100)
    np.testing.assert_array_equal(g.item_ids(), fx[f"{case}.item_ids"])
    assert sorted(g.get_weights()) == inp.names
    return g


def run_steps(
    case: str,
    gru: GRU4Rec | None = None,
    inputs: StepInputs | None = None,
    perm: np.ndarray | None = None,
    device: str = "cpu",
) -> list[dict]:
    """Run the recorded step(s) of ``case`` on ``gru`` (default: a fresh reference model on ``device``) from ``inputs``
    (default: the recorded ones), optimizer state reset first. Each later step starts from our own new hidden
    state, as in training.

    ``perm`` feeds the lanes in that order (a pure reordering: rows and in-batch columns move together); the
    hidden states are returned in the recorded order. Returns per step a dict keyed as the fixture:
    ``'loss'``, ``'grad.<name>'``, ``'w.<name>'`` (after the step; ``By`` as (n_items,)), ``'H.<layer>'``.
    """
    gru = build(case, device=device) if gru is None else gru
    inputs = step_inputs(case) if inputs is None else inputs
    ids = gru.item_ids()
    gru.set_weights(inputs.w0, reset_optimizer=True)
    order = np.arange(len(inputs.steps[0][0])) if perm is None else np.asarray(perm)
    back = np.argsort(order)
    hidden = [h[order] for h in inputs.hidden]
    out = []
    for xin, targets, samples, masks in inputs.steps:
        res = gru.train_step(
            ids[xin[order]],
            ids[targets[order]],
            ids[samples],
            hidden=hidden,
            dropout_masks={k: v[order] for k, v in masks.items()},
            return_grads=True,
        )
        w = gru.get_weights()
        o = {"loss": np.float64(res.loss)}
        o.update({f"grad.{k}": res.grads[k] for k in inputs.names})
        o.update({f"w.{k}": w[k] for k in inputs.names})
        o.update({f"H.{j}": h[back] for j, h in enumerate(res.hidden)})
        out.append(o)
        hidden = res.hidden
    return out


def _nudge(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``a`` (float32) with every nonzero element moved PROBE_ULPS ulps up or down at random; zeros stay (a
    dropped unit stays dropped)."""
    a = np.asarray(a, dtype=np.float32)
    toward = np.where(rng.random(a.shape) < 0.5, np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
    b = a
    for _ in range(PROBE_ULPS):
        b = np.nextafter(b, toward)
    return np.where(a == 0, a, b)


def sensitivity(case: str, device: str = "cpu") -> tuple[dict, ...]:
    """Per step, the reference's spread on ``device``: elementwise max over N_PROBES reruns from ulp-perturbed
    inputs, lanes reordered, of |rerun − unperturbed run| (float64; keys as :func:`run_steps`). Seeded (on CUDA
    the row-gradient sums use atomics, so a rerun may differ in the last bits); computed once per (case, device)."""
    return _sensitivity(case, device)


@functools.cache
def _sensitivity(case: str, device: str) -> tuple[dict, ...]:
    inputs = step_inputs(case)
    gru = build(case, device=device)
    base = run_steps(case, gru, inputs)
    spread = [{k: np.zeros(np.shape(v)) for k, v in o.items()} for o in base]
    rng = np.random.default_rng([PROBE_SEED, zlib.crc32(case.encode())])
    b = len(inputs.steps[0][0])
    for _ in range(N_PROBES):
        probe = StepInputs(
            inputs.hp,
            inputs.names,
            {k: _nudge(v, rng) for k, v in inputs.w0.items()},
            [_nudge(h, rng) for h in inputs.hidden],
            [(x, t, s, {k: _nudge(m, rng) for k, m in masks.items()}) for x, t, s, masks in inputs.steps],
        )
        for sp, o, ob in zip(spread, run_steps(case, gru, probe, perm=rng.permutation(b)), base):
            for k in sp:
                np.maximum(sp[k], np.abs(np.asarray(o[k], np.float64) - np.asarray(ob[k], np.float64)), out=sp[k])
    return tuple(spread)


def tolerance(official, spread, rtol: float = RTOL) -> np.ndarray:
    """Allowed |ours − official| per element: rtol·|official| + rtol·0.1·max|official| + K_SPREAD·spread."""
    official = np.abs(np.asarray(official, dtype=np.float64))
    scale = max(float(official.max(initial=0.0)), 1e-30)
    return rtol * official + rtol * 0.1 * scale + K_SPREAD * np.asarray(spread, dtype=np.float64)


@dataclass(frozen=True)
class Comparison:
    """One compared quantity: ``ratio`` = max over elements of |ours − official| / allowed (> 1 = mismatch),
    at flat index ``index`` with the values there."""

    what: str
    ratio: float
    index: int
    ours: float
    official: float
    allowed: float

    @property
    def ok(self) -> bool:
        return self.ratio <= 1.0

    def __str__(self) -> str:
        return (
            f"{self.what}[{self.index}]: ours {self.ours:.6g}, official {self.official:.6g}, "
            f"|diff| {abs(self.ours - self.official):.3g}, allowed {self.allowed:.3g} "
            f"(ratio {self.ratio:.3g})"
        )


def _compare(what: str, ours, official, spread, rtol: float) -> Comparison:
    ours = np.asarray(ours, dtype=np.float64)
    official = np.asarray(official, dtype=np.float64)
    if official.size != ours.size:
        return Comparison(f"{what} (shape {ours.shape}, official {official.shape})", np.inf, 0, np.nan, np.nan, 0.0)
    official = official.reshape(ours.shape)
    allowed = tolerance(official, spread, rtol).reshape(-1)
    diff = np.abs(ours - official).reshape(-1)
    if diff.size == 0:
        return Comparison(what, 0.0, 0, 0.0, 0.0, 0.0)
    # NaN (a diverged step) counts as an infinite deviation
    ratio = np.where(np.isnan(diff), np.inf, diff / allowed)
    i = int(np.argmax(ratio))
    return Comparison(
        what, float(ratio[i]), i, float(ours.reshape(-1)[i]), float(official.reshape(-1)[i]), float(allowed[i])
    )


def compare_step(case: str, outputs: list[dict], device: str = "cpu") -> list[Comparison]:
    """Every comparison of the golden step test for ``outputs`` (from :func:`run_steps`) against the port:
    per step the loss, each gradient, each parameter after the step and its update (against the port's previous
    parameters, rtol RTOL_UPDATE), each new hidden state. Tolerances from the reference's :func:`sensitivity` on
    ``device`` (the device ``outputs`` were computed on)."""
    fx = load("step_golden.npz")
    names = step_inputs(case).names
    spread = sensitivity(case, device)
    assert len(outputs) == len(spread), f"{case}: {len(outputs)} step(s) run, {len(spread)} recorded"
    w_prev = {k: fx[f"{case}.w0.{k}"] for k in names}
    out = []
    for s, (o, sp) in enumerate(zip(outputs, spread)):
        p = f"{case}.s{s}"
        for key in o:
            out.append(_compare(f"{p} {key}", o[key], fx[f"{p}.{key}"], sp[key], RTOL))
        for k in names:
            prev = np.asarray(w_prev[k], np.float64).reshape(np.shape(o[f"w.{k}"]))
            off = np.asarray(fx[f"{p}.w.{k}"], np.float64).reshape(prev.shape)
            # the spread of (w − fixed previous weights) is the spread of w
            out.append(_compare(f"{p} update.{k}", o[f"w.{k}"] - prev, off - prev, sp[f"w.{k}"], RTOL_UPDATE))
        w_prev = {k: fx[f"{p}.w.{k}"] for k in names}
    return out


def step_mismatches(case: str, outputs: list[dict], device: str = "cpu") -> list[Comparison]:
    """The comparisons of :func:`compare_step` that fail (empty = the step matches the port)."""
    return [c for c in compare_step(case, outputs, device) if not c.ok]


def assert_step_matches(case: str, outputs: list[dict], device: str = "cpu") -> None:
    """Raise AssertionError listing every mismatch of :func:`step_mismatches`."""
    bad = step_mismatches(case, outputs, device)
    assert not bad, f"{case}: {len(bad)} quantities differ from the port:\n" + "\n".join(map(str, bad))
