"""K6 hard-coded or silently ignored hyperparameters (docs/checks.md, K6): every declared hyperparameter
changes the model, structure echoes the requested sizes, the batch size drives the number of steps, and
anything undeclared is refused loudly. Checks HP-1..HP-4 — the capability probes "both ways"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.conformance.gru4rec._common import (
    build,
    embedding_mode,
    epochs_run,
    fresh_scores,
    lag1_test_pairs,
    rel_frobenius,
    session_parallel,
)
from gru4rec_conformance.implementations.base import GRU4REC_HYPERPARAMETERS, Unsupported

BASE = dict(
    layers=[16],
    batch_size=32,
    n_sample=16,
    sample_alpha=0.5,
    learning_rate=0.1,
    momentum=0.0,
    dropout_p_embed=0.0,
    dropout_p_hidden=0.0,
    loss="cross-entropy",
    n_epochs=1,
)


_NO_LOW = None


def _case(name, a, b, base=None, marks=(), low=_NO_LOW):
    """One HP-1 case: ``a`` vs ``b``; a range case (``low`` given, id ``<name>-range``) compares two values of the
    size the study and the official defaults use (and above), with ``low`` a small value that shows the
    hyperparameter acts at all (probed only after a failure: a cap or clamp vs an ignored hyperparameter)."""
    case_id = name if low is _NO_LOW else f"{name}-range"
    return pytest.param(name, a, b, base or {}, low, marks=[pytest.mark.hparam(name), *marks], id=case_id)


HP1_CASES = [
    _case("layers", [16], [24]),
    _case("batch_size", 16, 32),
    _case("learning_rate", 0.05, 0.2),
    # gated on the declared hyperparameter, not on the adagrad_momentum feature: an adapter that accepts
    # momentum without Adagrad momentum (GP-9, TG-3) must show it changes nothing here
    _case("momentum", 0.0, 0.5),
    _case("dropout_p_embed", 0.0, 0.3, marks=[pytest.mark.feature("dropout_embed")]),
    _case("dropout_p_hidden", 0.0, 0.3, marks=[pytest.mark.feature("dropout_hidden")]),
    _case("n_sample", 0, 16, marks=[pytest.mark.feature("extra_shared_negatives")]),
    _case("sample_alpha", 0.0, 1.0, marks=[pytest.mark.feature("sample_alpha")]),
    _case("logq", 0.0, 1.0, marks=[pytest.mark.feature("logq")]),
    _case("bpreg", 0.0, 1.0, {"loss": "bpr-max", "elu_param": 0.0}, marks=[pytest.mark.feature("bpreg")]),
    _case(
        "elu_param", 0.0, 1.0, {"loss": "bpr-max"}, marks=[pytest.mark.loss("bpr-max"), pytest.mark.final_act("elu")]
    ),
    _case(
        "final_act",
        "linear",
        "tanh",
        {"loss": "bpr-max"},
        marks=[pytest.mark.loss("bpr-max"), pytest.mark.final_act("linear", "tanh")],
    ),
    _case("loss", "cross-entropy", "bpr-max", marks=[pytest.mark.loss("cross-entropy", "bpr-max")]),
    _case("embedding", 8, 16, {"constrained_embedding": False}, marks=[pytest.mark.embedding("separate")]),
    _case(
        "constrained_embedding",
        True,
        False,
        {"embedding": 0},
        marks=[pytest.mark.embedding("shared", "none"), pytest.mark.hparam("embedding")],
    ),
    _case("n_epochs", 1, 2),
    # the study's ranges (layers 64..512, batch_size 32..256, dropouts to 0.5/0.7, momentum to 0.9, bpreg to 2)
    # and the official n_sample=2048 and above: a silent cap or clamp inside the range gives equal scores
    _case("layers", [64], [512], low=[16]),
    _case("batch_size", 128, 256, low=32),
    _case("momentum", 0.5, 0.9, low=0.0),
    _case("dropout_p_embed", 0.3, 0.5, marks=[pytest.mark.feature("dropout_embed")], low=0.0),
    _case("dropout_p_hidden", 0.3, 0.7, marks=[pytest.mark.feature("dropout_hidden")], low=0.0),
    _case("n_sample", 2048, 4096, marks=[pytest.mark.feature("extra_shared_negatives")], low=16),
    _case("sample_alpha", 0.5, 1.0, marks=[pytest.mark.feature("sample_alpha")], low=0.0),
    _case("bpreg", 1.0, 2.0, {"loss": "bpr-max", "elu_param": 0.0}, marks=[pytest.mark.feature("bpreg")], low=0.0),
]

#: HP-1's causes (meta-tests match them): for a range case, the hyperparameter acts below the range, not in it (a cap
#: or clamp); for any case, it acts only in another configuration than the check's (e.g. hidden dropout only
#: between stacked layers), or not at all.
HP1_CAPPED = "the hyperparameter is silently capped or clamped: it acts below the range's lower value, not within it"
HP1_CONFIG = (
    "the hyperparameter acts only in another configuration: it has no effect in this one (e.g. hidden dropout "
    "only between stacked layers, embedding dropout only with a separate embedding)"
)
HP1_IGNORED = "the hyperparameter is ignored (hard-coded): it acts neither within the range nor below it"
HP1_TABLE = (
    diagnosis.Candidate(
        HP1_CAPPED,
        "further fits with the case's small value (e.g. n_sample 16 for 2048 vs 4096) and, when that one gives "
        "the same scores, with each value of the hyperparameter's small pair (e.g. batch_size 16 and 32): "
        "confirmed when one of them gives other scores than the range's lower value (a cap below the small "
        "value, e.g. at the catalogue size, acts there)",
    ),
    diagnosis.Candidate(
        HP1_CONFIG,
        "the case's two values fitted again in the configuration the hyperparameter needs (dropout_p_hidden with "
        "two stacked layers [16, 16], dropout_p_embed with a separate embedding of 8): confirmed when they give "
        "other scores there; ruled out when they do not or the implementation refuses that configuration",
    ),
    diagnosis.Candidate(
        HP1_IGNORED,
        "the same further fits: confirmed when every one of them gives the same scores as well (no effect below "
        "the range, none in the other configuration)",
    ),
)
#: The small pair of every hyperparameter (the cases without ``low``): the further values HP-1's range probe tries
#: when the case's ``low`` gives the same scores too, so that a cap below ``low`` is not taken for a hard-coded value.
_SMALL_VALUES = {c.values[0]: c.values[1:3] for c in HP1_CASES if c.values[4] is _NO_LOW}
#: Hyperparameters that act only in some configurations, and the configuration HP-1 tries them in after a failure.
_OTHER_CONFIG: dict[str, dict[str, Any]] = {
    "dropout_p_hidden": {"layers": [16, 16]},
    "dropout_p_embed": {"embedding": 8, "constrained_embedding": False},
}


def _hp1_scores(impl, d_lag1, name, value, base, prefixes) -> tuple[np.ndarray, tuple[int, int, int]]:
    """Scores of ``prefixes`` after one seeded fit with ``name=value`` and (epochs reported, asked, steps)."""
    req, opt = embedding_mode({name: value, **base})
    model = build(impl, req, {**BASE, **opt}, seed=3)
    rep = model.fit(d_lag1.train)
    want = int({**BASE, **base, name: value}["n_epochs"])
    return fresh_scores(model, prefixes), (len(rep.epoch_losses), want, int(sum(rep.n_steps)))


@pytest.mark.check("HP-1", kind="K6")
@pytest.mark.parametrize("name,a,b,base,low", HP1_CASES)
@diagnosis.causes(*HP1_TABLE)
def test_hp1_sensitivity(impl, d_lag1, name, a, b, base, low, expect):
    """Every declared hyperparameter changes the trained model, also across the range the study uses.

    Every declared hyperparameter has an effect: two fits on D-LAG1 with the same seed and two values of it
    give different scores (‖ΔS‖_F/‖S‖_F > 1e-3), for a small pair and (``-range`` cases) for two values of the
    size the study and the official defaults use and above (n_sample 2048 vs 4096, layers 64 vs 512, batch
    size 128 vs 256, ...), so that a silent cap or clamp is caught. A hyperparameter is blamed only when
    training happened: when fit reported other epoch counts than asked, or the scores equal the untrained
    model's, the failure says it may follow from EB-3 and gives no verdict on the hyperparameter."""
    prefixes, _ = lag1_test_pairs(d_lag1.test)
    prefixes = prefixes[:50]
    scores, epochs = [], []
    for value in (a, b):
        sc, ep = _hp1_scores(impl, d_lag1, name, value, base, prefixes)
        scores.append(sc)
        epochs.append(ep)
    change = rel_frobenius(scores[0], scores[1])
    if expect.holds(f"relative score change {name}: {a} → {b}", change, gt=1e-3):
        return
    # Before blaming the hyperparameter: was anything trained at all? (a prerequisite failing, e.g. the epoch
    # count of EB-3, makes every HP-1 case look "ignored")
    if any(got != want or steps == 0 for got, want, steps in epochs):
        pytest.fail(
            f"{name}={a!r} and {name}={b!r} give the same scores, but fit did not train as asked "
            f"(epochs reported / asked / steps: {epochs}): may follow from EB-3 (epoch count); no verdict on {name}",
            pytrace=False,
        )
    req, opt = embedding_mode({name: a, **base})
    untrained = build(impl, req, {**BASE, **opt}, seed=3)
    untrained.fit(d_lag1.train, n_epochs=0)
    moved = rel_frobenius(fresh_scores(untrained, prefixes), scores[0])
    assert moved > 1e-6, (
        f"{name}={a!r} and {name}={b!r} give the same scores, and so does the untrained model (relative change "
        f"{moved:.2g}): training changes nothing — may follow from EB-3 (epoch count) or the optimizer (K5); no "
        f"verdict on {name}"
    )
    base_change = f"{name}={a!r} and {name}={b!r} give the same scores (relative change {change:.2g})"

    def other_config() -> diagnosis.Finding:
        extra = _OTHER_CONFIG.get(name)
        if extra is None:
            return diagnosis.ruled_out(f"{name} needs no other configuration")
        cfg = {**base, **extra}
        text = ", ".join(f"{k}={v!r}" for k, v in extra.items())
        try:
            moved = rel_frobenius(*(_hp1_scores(impl, d_lag1, name, v, cfg, prefixes)[0] for v in (a, b)))
        except Unsupported as exc:
            return diagnosis.ruled_out(f"the implementation refuses {text}: {exc}")
        return diagnosis.decide(moved > 1e-3, f"with {text}: {name}={a!r} vs {b!r}: relative score change {moved:.2g}")

    config = _memo(other_config)
    if low is not _NO_LOW:
        # a range case: does it act below the range (capped/clamped), only elsewhere, or not at all (ignored)?
        def below() -> diagnosis.Finding:
            # the case's low value first; then the small pair's values, which a cap below low still lets act
            tried = []
            for value in [low, *(v for v in _SMALL_VALUES.get(name, ()) if v not in (low, a, b))]:
                moved_low = rel_frobenius(_hp1_scores(impl, d_lag1, name, value, base, prefixes)[0], scores[0])
                tried.append(f"{name}={value!r} vs {name}={a!r}: relative score change {moved_low:.2g}")
                if moved_low > 1e-3:
                    break
            return diagnosis.decide(moved_low > 1e-3, "; ".join(tried))

        probe = _memo(below)
        diagnosis.fail(
            base_change,
            [
                HP1_TABLE[0].cause(probe),
                HP1_TABLE[1].cause(config),
                HP1_TABLE[2].cause(lambda: _neither(probe, config)),
            ],
        )
    # no range: "another configuration" is probed where the hyperparameter needs one (_OTHER_CONFIG) and ruled
    # out where GRU4Rec has none, so "ignored" is isolated only when that probe rules its alternative out
    diagnosis.fail(
        base_change + ": the hyperparameter is declared but has no effect here",
        [HP1_TABLE[1].cause(config), HP1_TABLE[2].cause(lambda: _neither(config))],
    )


def _neither(*probes) -> diagnosis.Finding:
    """The finding of "ignored": confirmed when every other cause's probe ruled its cause out, ruled out when one
    confirmed it, not decided otherwise; the evidence of all."""
    found = [p() for p in probes]
    evidence = "; ".join(f.evidence for f in found)
    if any(f.verdict == diagnosis.CONFIRMED for f in found):
        return diagnosis.ruled_out(evidence)
    if all(f.verdict == diagnosis.RULED_OUT for f in found):
        return diagnosis.confirmed(evidence)
    return diagnosis.undecided(evidence)


def _memo(fn):
    """``fn`` run at most once (two causes share one probe)."""
    box: list = []

    def get():
        if not box:
            box.append(fn())
        return box[0]

    return get


def _shapes(impl, d_lag1, **cfg) -> tuple[dict[str, tuple], int]:
    req, opt = embedding_mode(cfg)  # a separate-only implementation need not declare constrained_embedding
    model = build(impl, req, dict(n_sample=0, loss="cross-entropy", **opt))
    model.fit(d_lag1.train, n_epochs=0)
    return {k: tuple(np.shape(v)) for k, v in model.get_weights().items()}, len(np.asarray(model.item_ids()))


def _with_item_axis(shapes: dict, n_items: int, other: int) -> list[str]:
    return [k for k, s in shapes.items() if len(s) == 2 and sorted(s) == sorted((n_items, other))]


HP2_CASES = [
    pytest.param(
        {"layers": [24], "constrained_embedding": True}, marks=pytest.mark.embedding("shared"), id="shared-24"
    ),
    pytest.param(
        {"layers": [24, 12], "constrained_embedding": True}, marks=pytest.mark.embedding("shared"), id="shared-24-12"
    ),
    pytest.param(
        {"layers": [24], "constrained_embedding": False, "embedding": 10},
        marks=pytest.mark.embedding("separate"),
        id="separate-10",
    ),
    # the top of the study's layer range (64..512), where a silent cap of the hidden size would sit
    pytest.param(
        {"layers": [512], "constrained_embedding": True}, marks=pytest.mark.embedding("shared"), id="shared-512"
    ),
    pytest.param(
        {"layers": [512], "constrained_embedding": False, "embedding": 128},
        marks=pytest.mark.embedding("separate"),
        id="separate-512-128",
    ),
]


@pytest.mark.check("HP-2", kind="K6")
@pytest.mark.hook("get_weights")
@pytest.mark.parametrize("cfg", HP2_CASES)
def test_hp2_structural_echo(impl, d_lag1, cfg, record_metric):
    """Parameter shapes echo the configured layer sizes, embedding size and catalogue.

    GRU weights 3·d per layer size d in ``layers``, an embedding of width ``embedding`` (none extra when shared),
    output weights (n_items × last layer size)."""
    shapes, n_items = _shapes(impl, d_lag1, **cfg)
    problems = []
    for d in cfg["layers"]:
        if not any(len(s) == 2 and 3 * d in s for s in shapes.values()):
            problems.append(f"no GRU weight with a dimension 3·{d} = {3 * d} (layer size {d})")
    last = cfg["layers"][-1]
    outputs = _with_item_axis(shapes, n_items, last)
    if not outputs:
        problems.append(f"no output weights of shape ({n_items}, {last})")
    if cfg.get("constrained_embedding") is False:
        k = cfg["embedding"]
        if not _with_item_axis(shapes, n_items, k):
            problems.append(f"no embedding of shape ({n_items}, {k})")
    else:
        item_matrices = [name for name, s in shapes.items() if len(s) == 2 and n_items in s]
        if len(item_matrices) != 1:
            problems.append(f"shared embedding expected one item matrix, found {item_matrices}")
    record_metric("parameters", len(shapes), shapes="; ".join(f"{k}{list(s)}" for k, s in shapes.items()))
    assert not problems, f"configuration {cfg}: " + "; ".join(problems) + f" (parameter shapes: {shapes})"


#: Causes of a size the model does not echo across its range (HP-2 n_sample, HP-3 batch size; meta-tests match).
SIZE_CAPPED = "the value is silently capped: every value above a cap gives the cap"
SIZE_FIXED = "the value is ignored: one fixed size whatever is asked"
SIZE_TABLE = (
    diagnosis.Candidate(
        SIZE_CAPPED,
        "the size measured for each asked value (small, the study's or official size, and above): confirmed when "
        "each equals min(asked, c) for one cap c below the largest asked value",
    ),
    diagnosis.Candidate(
        SIZE_FIXED, "the same sizes: confirmed when every asked value, the small one too, gives one size"
    ),
)


def _size_causes(asked: Sequence[int], got: Sequence[int]) -> list[diagnosis.Cause]:
    """:data:`SIZE_TABLE`'s causes decided from the sizes ``got`` measured for the values ``asked``."""
    pairs = ", ".join(f"{a} → {g}" for a, g in zip(asked, got))
    cap = max(got)
    # a cap: the values below it act as asked (at least one does), every value above it gives the cap
    capped = (
        cap < max(asked)
        and all(g == min(a, cap) for a, g in zip(asked, got))
        and any(g == a for a, g in zip(asked, got))
    )
    fixed = len(set(got)) == 1 and any(a != got[0] for a in asked)
    return [
        SIZE_TABLE[0].cause(
            lambda: diagnosis.decide(capped, f"asked → measured: {pairs}" + (f"; cap {cap}" if capped else ""))
        ),
        SIZE_TABLE[1].cause(lambda: diagnosis.decide(fixed, f"asked → measured: {pairs}")),
    ]


NS_RANGE = (16, 2048, 4096)


@pytest.mark.check("HP-2", kind="K6")
@pytest.mark.feature("extra_shared_negatives")
@pytest.mark.hparam("n_sample")
@pytest.mark.hook("train_forward")
@diagnosis.causes(*SIZE_TABLE)
def test_hp2_n_sample_echo(impl, d_lag1, record_metric):
    """The number of extra negatives echoes n_sample across its range: 16, the official 2048, and 4096.

    train_forward's training score matrix of b = B = 4 rows has b + n_sample columns, and (with the trace hook)
    every traced step of a one-epoch fit (B = 32) has n_sample ``negative_ids`` per row, for n_sample 16, 2048 (the
    official default and the study's value) and 4096, so that a silent cap or clamp of the sample count is
    caught."""
    B_ = 4
    cycle = list(d_lag1.meta["items"])
    batch = [[cycle[k], cycle[k + 1]] for k in range(0, 2 * B_, 2)]
    opt = dict(layers=[16], learning_rate=0.05, loss="cross-entropy")
    forward, traced = [], []
    for S in NS_RANGE:
        model = build(impl, dict(batch_size=B_, n_sample=S, n_epochs=1), opt)
        model.fit(d_lag1.train, n_epochs=0)
        forward.append(int(np.shape(model.train_forward(batch, seed=0)["scores"])[1]) - B_)
        if impl.supports("hook:trace"):
            model = build(impl, dict(batch_size=32, n_sample=S, n_epochs=1), opt)
            model.trace(True)
            rep = model.fit(d_lag1.train)
            # negatives per row: the last axis ((S,) shared, (b, S) per row); None = the step does not sample
            lengths = [int(np.shape(t.negative_ids)[-1]) for t in rep.trace if np.ndim(t.negative_ids) >= 1]
            traced.append(max(lengths) if lengths else None)
    if None in traced:  # a fit that traced no sampling step (e.g. trained nothing, EB-3) says nothing here
        traced = []
    record_metric("extra negative columns (train_forward)", forward[-1], asked=", ".join(map(str, NS_RANGE)),
                  measured=", ".join(map(str, forward)), traced=", ".join(map(str, traced)) or "not traced")  # fmt: skip
    for source, got in (("extra score columns in train_forward", forward), ("negative ids per traced step", traced)):
        if got and list(got) != list(NS_RANGE):
            worst = next(k for k, (a, g) in enumerate(zip(NS_RANGE, got)) if a != g)
            diagnosis.fail(
                f"n_sample={NS_RANGE[worst]} gives {got[worst]} {source} (asked {list(NS_RANGE)}, got {list(got)})",
                _size_causes(NS_RANGE, got),
            )


#: HP-3's causes of a step count outside the refilled-lanes bound (meta-tests match them).
HP3_IGNORED = "the batch size is ignored: the number of optimizer steps does not change with it"
HP3_BATCHING = (
    "the batch size acts, but finished lanes are not refilled as GRU4Rec's are: the epoch takes more steps than "
    "refilled lanes need (e.g. groups of whole sessions stepped to their longest)"
)
HP3_EARLY_END = "the epoch trains fewer transitions than the data holds (EB-1 counts them)"
HP3_MISCOUNT = "the fit report's n_steps miscounts the optimizer steps the fit took"
HP3_TABLE = (
    diagnosis.Candidate(
        HP3_IGNORED,
        "a second one-epoch fit with batch_size=14: confirmed when it takes within 10% of batch_size=7's steps, "
        "ruled out when it takes at most 75% of them",
    ),
    diagnosis.Candidate(
        HP3_BATCHING,
        "the same fit: confirmed when batch_size=14 takes 1/1.4..1/2.6 of batch_size=7's steps (the batch size "
        "sets the step count) and batch_size=7 took more steps than the bound allows; ruled out when the counts "
        "are within 10% or batch_size=7 took fewer steps than the bound",
    ),
    diagnosis.Candidate(
        HP3_EARLY_END,
        "the fit report's transitions trained in the epoch (n_events_trained): confirmed when fewer than the "
        "data's transitions, ruled out when all of them",
    ),
    diagnosis.Candidate(
        HP3_MISCOUNT,
        "with the trace hook, a traced one-epoch fit with batch_size=7: confirmed when the traced steps differ "
        "from its n_steps, ruled out when they agree",
    ),
)


@pytest.mark.check("HP-3", kind="K6")
@diagnosis.causes(*HP3_TABLE)
def test_hp3_batch_size_echo(impl, d_lag1, expect):
    """The batch size sets the number of parallel lanes (steps per epoch ≈ transitions / B).

    With batch_size=7 one epoch takes between (E − Ns)/7 and (E − Ns)/7 + L_max optimizer steps (D-LAG1,
    L_max = the longest session): the batch size really sets the number of parallel sessions.

    Diagnosis (:data:`HP3_TABLE`): a fit with batch_size=14 tells an ignored batch size (same step count) from
    lanes that are not refilled (the count halves, above the bound); the transitions trained tell an epoch that
    ends early (below the bound); the trace tells a miscounted ``n_steps``."""
    B_ = 7
    opt = dict(layers=[16], n_sample=16, learning_rate=0.1, loss="cross-entropy")
    model = build(impl, dict(batch_size=B_, n_epochs=1), opt)
    rep = model.fit(d_lag1.train)
    epochs_run(rep, 1)
    sizes = d_lag1.train.groupby("SessionId").size()
    T, L = int(sizes.sum() - len(sizes)), int(sizes.max())
    steps = int(rep.n_steps[0])
    lo, hi = (T - L) / B_, T / B_ + L
    if expect.holds("optimizer steps per epoch (batch_size=7)", steps, ge=lo, le=hi, reference=T / B_,
                    transitions=T):  # fmt: skip
        return

    def at_14() -> int:
        return int(build(impl, dict(batch_size=2 * B_, n_epochs=1), opt).fit(d_lag1.train).n_steps[0])

    double = _memo(at_14)

    def ignored() -> diagnosis.Finding:
        s14 = double()
        ratio = s14 / steps if steps else float("nan")
        evidence = f"batch_size=14 takes {s14} steps, batch_size=7 {steps} (ratio {ratio:.2f})"
        return diagnosis.decide(True if abs(ratio - 1) <= 0.1 else False if ratio <= 0.75 else None, evidence)

    def batching() -> diagnosis.Finding:
        s14 = double()
        halves = steps / s14 if s14 else float("inf")
        evidence = f"batch_size=7 takes {halves:.2f}× the steps of batch_size=14 and {steps} steps (bound {hi:.1f})"
        if abs(halves - 1) <= 0.1 or steps < lo:
            return diagnosis.ruled_out(evidence)
        return diagnosis.decide(True if 1.4 <= halves <= 2.6 and steps > hi else None, evidence)

    def early_end() -> diagnosis.Finding:
        trained = int(rep.n_events_trained[0]) if len(rep.n_events_trained) else None
        if trained is None:
            return diagnosis.undecided("the fit report gives no transitions trained")
        return diagnosis.decide(trained < T, f"{trained} of {T} transitions trained in the epoch")

    def miscount() -> diagnosis.Finding:
        if not impl.supports("hook:trace"):
            return diagnosis.undecided("no trace hook to count the steps")
        traced = build(impl, dict(batch_size=B_, n_epochs=1), opt)
        traced.trace(True)
        rt = traced.fit(d_lag1.train)
        n = len(rt.trace)
        return diagnosis.decide(n != int(rt.n_steps[0]), f"{n} traced steps, n_steps {int(rt.n_steps[0])}")

    # a model declared not session-parallel gets no reading here: the cause table decides for it as for any other
    summary = f"{steps} steps for {T} transitions with batch_size=7, expected {lo:.1f}..{hi:.1f}"
    probes = (ignored, batching, early_end, miscount)
    diagnosis.fail(summary, [row.cause(probe) for row, probe in zip(HP3_TABLE, probes)])


PROBES = {
    "layers": [12],
    "loss": "bpr-max",
    "batch_size": 16,
    "learning_rate": 0.07,
    "momentum": 0.5,
    "dropout_p_embed": 0.2,
    "dropout_p_hidden": 0.2,
    "n_sample": 16,
    "sample_alpha": 0.3,
    "bpreg": 0.5,
    "logq": 1.0,
    "embedding": 16,
    "constrained_embedding": False,
    "final_act": "tanh",
    "elu_param": 1.0,
    "n_epochs": 2,
    "optimizer": "adagrad",
    "hidden_act": "relu",
    "lmbd": 0.01,
    "smoothing": 0.1,
    "adapt": "adam",
    "adapt_params": [0.9, 0.999],
    "grad_cap": 1.0,
    "sigma": 0.1,
    "init_as_normal": True,
    "train_random_order": True,
    "time_sort": False,
    "no_such_hyperparameter": 1,
}
FINAL_ACT_PROBES = {
    "linear": "linear",
    "elu": "elu-1",
    "tanh": "tanh",
    "relu": "relu",
    "leaky": "leaky-0.1",
    "selu": "selu-1.05-1.67",
    "softmax": "softmax",
    "softmax_logit": "softmax_logit",
}
EMBEDDING_PROBES = {
    "none": {"embedding": 0, "constrained_embedding": False},
    "separate": {"embedding": 16, "constrained_embedding": False},
    "shared": {"constrained_embedding": True},
}


def _refused(impl, **hp) -> bool:
    try:
        impl.new().build(seed=1, **hp)
    except Unsupported:
        return True
    return False


@pytest.mark.check("HP-4", kind="K6")
def test_hp4_undeclared_names_refused(impl, record_metric):
    """Every undeclared hyperparameter name is refused with Unsupported, never ignored.

    Every official hyperparameter name the adapter does not declare (and an unknown name) is refused by
    build() with Unsupported, never accepted and ignored."""
    declared = set(impl.capabilities.hyperparameters)
    names = sorted((set(GRU4REC_HYPERPARAMETERS) | {"no_such_hyperparameter"}) - declared)
    accepted = [n for n in names if not _refused(impl, **{n: PROBES[n]})]
    record_metric("undeclared names probed", len(names), accepted=", ".join(accepted) or "none")
    assert not accepted, (
        f"build() silently accepted undeclared hyperparameter(s) {accepted}: they must raise Unsupported"
    )


@pytest.mark.check("HP-4", kind="K6")
def test_hp4_undeclared_values_refused(impl, record_metric):
    """Every undeclared loss, final activation and embedding mode is refused with Unsupported.

    Values outside the declared vocabulary — losses, final activations, embedding modes — are refused by
    build() with Unsupported."""
    caps = impl.capabilities
    declared = set(caps.hyperparameters)
    probes: list[tuple[str, dict]] = []
    if "loss" in declared:
        probes += [
            (f"loss:{v}", {"loss": v})
            for v in ("cross-entropy", "bpr-max", "top1", "top1-max", "bpr")
            if v not in caps.losses
        ]
    if "final_act" in declared:
        for fam, value in FINAL_ACT_PROBES.items():
            if fam not in caps.final_acts:
                loss = "cross-entropy" if fam.startswith("softmax") else "bpr-max"
                probes.append(
                    (f"final_act:{fam}", {"final_act": value, **({"loss": loss} if "loss" in declared else {})})
                )
    for mode, cfg in EMBEDDING_PROBES.items():
        if mode not in caps.embedding_modes and set(cfg) <= declared:
            probes.append((f"embedding:{mode}", cfg))
    if not probes:
        pytest.skip("every value of the probed vocabularies is declared (or its hyperparameter is not)")
    accepted = [label for label, hp in probes if not _refused(impl, **hp)]
    record_metric("undeclared values probed", len(probes), accepted=", ".join(accepted) or "none")
    assert not accepted, f"build() silently accepted undeclared value(s) {accepted}: they must raise Unsupported"


BATCH_RANGE = (32, 256, 512)


@pytest.mark.check("HP-3", kind="K6")
@pytest.mark.hook("trace")
@diagnosis.causes(*SIZE_TABLE)
def test_hp3_batch_size_range(impl, zipf, record_metric):
    """The widest training step echoes the batch size across its range: 32, 256 (the study's) and 512.

    One epoch on the Zipf sessions (2000 sessions) per batch size: the largest ``n_active`` of the traced steps
    equals the batch size, so that a silent cap of the batch is caught. The trace's lanes are the B parallel
    sessions of a session-parallel model and the B rows of a mini-batch of a model that is not (see
    implementations/README.md, hooks of such models); either way the first step fills all B."""
    widest = []
    for B_ in BATCH_RANGE:
        model = build(
            impl,
            dict(batch_size=B_, n_epochs=1),
            dict(layers=[16], n_sample=16, learning_rate=0.05, loss="cross-entropy"),
        )
        model.trace(True)
        rep = model.fit(zipf.train)
        assert rep.trace, f"trace(True) was set but FitReport.trace is empty (batch_size={B_})"
        widest.append(max(int(t.n_active) for t in rep.trace))
    lanes = "parallel sessions" if session_parallel(impl) else "mini-batch rows"
    record_metric(f"widest step ({lanes})", widest[-1], asked=", ".join(map(str, BATCH_RANGE)),
                  measured=", ".join(map(str, widest)))  # fmt: skip
    if widest != list(BATCH_RANGE):
        k = next(k for k, (a, g) in enumerate(zip(BATCH_RANGE, widest)) if a != g)
        diagnosis.fail(
            f"batch_size={BATCH_RANGE[k]} gives at most {widest[k]} active {lanes} in a step (asked "
            f"{list(BATCH_RANGE)}, widest steps {widest})",
            _size_causes(BATCH_RANGE, widest),
        )
