"""Metric conformance: the implementation and the reference, fitted with the same hyperparameters
on the same data (``--dataset``; default the real Yoochoose 100k slice, train_full → test), reach the same
Recall@N and MRR@N (N = 1, 5, 10, 20) within a band derived from the reference's seed-to-seed spread.

Three reference runs per configuration (seeds :data:`REF_SEEDS`) give the band; the implementation runs with the
``--seeds`` (default 42; the mean over seeds is compared). As in the study (docs/study.md, 'Matching-features rows'), a
"matching features" reference — the official configuration restricted to the features the implementation
declares — separates missing features (MC-2 fails, MC-1 passes) from bugs (MC-1 fails). All metrics are computed
with the reference evaluator from ``score_prefixes`` (official protocol, conservative ties); MC-3 checks the
implementation's own evaluator against the same band.

Hyperparameters: the study's best configuration of the dataset and loss (docs/study.md, 'Best hyperparameters'; the
``metric_data`` fixture's ``configs``, from ``datasets.sessions.registry.mc_config``) scaled for CPU — one GRU
layer of 100 units instead of 192-512 and 3 epochs instead of 10; everything else as published (n_sample 2048,
batch size, shared embedding, the published dropout, learning rate, momentum, sample_alpha, logq / bpreg, final
activation). ``--dataset all`` (or a comma list) runs every check once per study dataset; the terminal summary
prints each implementation's Δ per dataset beside the study's published Δ.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import numpy as np
import pytest

from gru4rec_conformance.conformance._harness.fixtures import is_suite_reference
from gru4rec_conformance.conformance.gru4rec._common import ADAGRAD, COUPLED, CUTOFFS, build, suite_metrics

REF_SEEDS = (1, 2, 3)
SD_FACTOR, REL_FLOOR, ABS_FLOOR = 4.0, 0.02, 0.002
#: The sampling floor: a metric is a mean over the n evaluated test events, so on a small test set two training
#: seeds differ by about sqrt(p(1−p)/n) (each event's hit or reciprocal rank lies in [0, 1], variance ≤ p(1−p)),
#: however close three seeds happened to land. Without it the reference failed its own band on the RetailRocket
#: stand-in (about 1,000 test events; MC-2 cross-entropy, seed 42: recall@20 0.4143 vs 0.3981 ± 0.0093, 4·SD of
#: seeds 1-3; 2026-12-01). On the Yoochoose slice the floor is below the 2% one for Recall@20.
#: Z is 3, not 2: training seeds spread more than test-event sampling alone. On the Coveo stand-in (about 2,400
#: test sessions) seven reference seeds gave recall@5 an SD of 0.005 where sqrt(p(1−p)/n) is 0.0034, and seeds 1-3
#: happened to land close together: with Z = 2 the reference's seed 42 (1.5 seed-SD below the seven seeds' mean)
#: failed its own cross-entropy band (0.1768 vs 0.1843 ± 0.0067; 2026-12-03). Z = 3 is about two seed-SDs there.
BINOM_Z = 3.0
RULE = (
    f"pass if |impl − mean_ref| ≤ max({SD_FACTOR:g}·sd_ref, {REL_FLOOR:.0%}·mean_ref, "
    f"{BINOM_Z:g}·sqrt(mean_ref·(1 − mean_ref)/n_events), {ABS_FLOOR:g}); mean and sd "
    f"over reference seeds {', '.join(map(str, REF_SEEDS))}"
)
METRICS = [f"{m}@{n}" for n in CUTOFFS for m in ("recall", "mrr")]

#: Study's best Yoochoose configurations (docs/study.md, 'Best hyperparameters'), scaled for CPU: layers 480/448 → 100,
#: n_epochs 10 → 3 (= ``registry.mc_config("yoochoose", loss)``; the default when a dataset brings none).
CONFIGS = {
    "cross-entropy": dict(
        loss="cross-entropy",
        layers=[100],
        batch_size=48,
        dropout_p_embed=0.0,
        dropout_p_hidden=0.2,
        learning_rate=0.07,
        momentum=0.0,
        n_sample=2048,
        sample_alpha=0.2,
        logq=1.0,
        constrained_embedding=True,
        embedding=0,
        n_epochs=3,
    ),
    "bpr-max": dict(
        loss="bpr-max",
        layers=[100],
        batch_size=48,
        dropout_p_embed=0.25,
        dropout_p_hidden=0.0,
        learning_rate=0.075,
        momentum=0.1,
        n_sample=2048,
        sample_alpha=0.2,
        bpreg=0.5,
        elu_param=0.0,
        constrained_embedding=True,
        embedding=0,
        n_epochs=3,
    ),
}


def matching_config(caps: Any, base: dict) -> tuple[dict, list[str]]:
    """The official configuration restricted to declared features (the study's "matching features" rows):
    ``(config, notes)``, one note per feature switched off or replaced."""
    cfg, notes = dict(base), []

    def put(key, value, note):
        if cfg.get(key) != value:
            cfg[key] = value
            notes.append(note)

    if cfg.get("constrained_embedding") and "shared" not in caps.embedding_modes:
        if "separate" in caps.embedding_modes:
            put("constrained_embedding", False, "separate embedding (layer size) instead of shared")
            cfg["embedding"] = cfg["layers"][0]
        elif "none" in caps.embedding_modes:
            put("constrained_embedding", False, "no embedding (one-hot) instead of shared")
            cfg["embedding"] = 0
    if not caps.extra_shared_negatives:
        put("n_sample", 0, "in-batch negatives only (n_sample 0)")
    elif not caps.sample_alpha:
        put("sample_alpha", 0.0, "uniform extra samples (sample_alpha 0)")
    if not caps.logq and cfg.get("loss") == "cross-entropy":
        put("logq", 0.0, "no logQ correction")
    if not caps.adagrad_momentum:
        put("momentum", 0.0, "no Adagrad momentum")
    if not caps.dropout_embed:
        put("dropout_p_embed", 0.0, "no embedding dropout")
    if not caps.dropout_hidden:
        put("dropout_p_hidden", 0.0, "no hidden dropout")
    if caps.dropout_embed and caps.dropout_hidden and not caps.separate_dropouts:
        # one dropout for both places (recpack): the tuned hidden dropout, the larger lever in the study's configs
        put("dropout_p_embed", cfg.get("dropout_p_hidden", 0.0), "one dropout (dropout_p_embed = dropout_p_hidden)")
    if cfg.get("loss") == "bpr-max" and not caps.bpreg:
        put("bpreg", 0.0, "no bpreg")
    if cfg.get("elu_param", 0) > 0 and "elu" not in caps.final_acts:
        put("elu_param", 0.0, "linear final activation")
    return cfg, notes


def unmatched_sampler(caps: Any) -> str:
    """The declared negatives the reference cannot draw, as one phrase (``""`` when it can): the reference has
    in-batch negatives and shared extra negatives only, so a declared per-example sampler (with its count and
    own-item exclusion) has no matching reference."""
    if not caps.per_example_negatives:
        return ""
    n = caps.negatives_per_example
    return (
        "per-example negatives"
        + (f" ({n} per example)" if n else " (count not stated)")
        + (" that exclude the session's own items" if caps.negatives_exclude_own_items else "")
    )


def _require_matching_reference(impl: Any) -> None:
    """Skip (not tested) when no reference with the implementation's declared sampler exists: a gap to a reference
    with other negatives says nothing about a bug."""
    what = unmatched_sampler(impl.capabilities)
    if what:
        pytest.skip(
            f"no matching reference exists for the declared {what}: the reference draws in-batch and shared extra "
            "negatives only, so a comparison would measure the sampler, not a bug (not tested; MC-2 compares with "
            "the full reference)"
        )


def band(values: list[float], rel_floor: float = REL_FLOOR, n_events: int | None = None) -> tuple[float, float]:
    """(mean, tolerance) of a metric over reference seeds (see :data:`RULE`).

    ``values``: the metric (a fraction in [0, 1]) of each reference seed; ``rel_floor``: the relative floor;
    ``n_events``: the number of evaluated test events (None: no sampling floor). Raises ValueError on no values."""
    if not values:
        raise ValueError("band needs at least one reference value")
    mean = float(np.mean(values))
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    sampling = BINOM_Z * math.sqrt(max(mean * (1.0 - mean), 0.0) / n_events) if n_events else 0.0
    return mean, max(SD_FACTOR * sd, rel_floor * mean, sampling, ABS_FLOOR)


#: The official configuration's learning rate and momentum are Adagrad's: they are asked for together with
#: ``optimizer="adagrad"``; an implementation that refuses Adagrad trains with its own optimizer at its own
#: defaults (the drop is recorded), not with Adagrad's rate on another optimizer.
OPTIMIZER_KEYS = COUPLED["optimizer"]


def _fit_key(label: str, cfg: dict, seed: int, data: dict, own_eval: bool, device: str) -> dict:
    """The oracle cache's key of one fit: who, the data (name and content hash), configuration, seed, device and
    torch's thread count (float reductions may differ with it)."""
    try:
        import torch

        threads = int(torch.get_num_threads())
    except ImportError:  # pragma: no cover - the reference needs torch; its key is never made without it
        threads = 0
    return {"what": "metric-fit", "label": label, "data": data["name"], "data_hash": data.get("hash", ""),
            "config": json.loads(json.dumps(cfg, sort_keys=True)), "seed": int(seed), "own_eval": bool(own_eval),
            "device": device, "torch_threads": threads}  # fmt: skip


def _run(
    factory: Any,
    label: str,
    cfg: dict,
    seed: int,
    data: dict,
    cache: dict,
    own_eval: bool,
    adagrad_optional: bool = False,
    progress: Any = None,
    disk: Any = None,
) -> dict:
    """Fit and evaluate one model (cached by label, data, configuration, seed); ``progress``: the check's
    ``progress`` fixture, which shows each fit (minutes on the real data) in the terminal. ``disk``: the
    ``oracle_cache`` fixture, passed for the suite's own reference only (never for the implementation under test):
    the result is read from it when a run with the same key wrote it, and written to it after a fit."""
    key = (label, data["name"], json.dumps(cfg, sort_keys=True), int(seed), bool(own_eval))
    if key in cache:
        return cache[key]
    disk_key = _fit_key(label, cfg, seed, data, own_eval, getattr(factory, "device", "cpu")) if disk else None
    stored = disk.get(disk_key) if disk_key is not None else None
    if stored is not None and _valid_result(stored, own_eval):
        cache[key] = stored
        return stored
    who = label.removeprefix("impl:").split("@", 1)[0]
    what = f"{who} seed {seed}: fit {cfg.get('n_epochs', '?')} epochs on {data['name']} and evaluate"
    with progress.task(what) if progress is not None else contextlib.nullcontext():
        if adagrad_optional:
            required = {k: v for k, v in cfg.items() if k not in OPTIMIZER_KEYS}
            optional = {**ADAGRAD, **{k: cfg[k] for k in OPTIMIZER_KEYS if k in cfg}}
            model = build(factory, required, optional, seed)
        else:
            model = factory.build(seed=seed, **cfg)
        rep = model.fit(data["train"])
        if progress is not None:
            epochs = ", ".join(f"{x:.1f}" for x in rep.epoch_seconds)
            progress.note(f"{who} seed {seed}: epochs took {epochs} s; evaluating")
        out: dict[str, Any] = {
            "suite": suite_metrics(model, data["test"], CUTOFFS, mode="conservative"),
            "own": model.evaluate(data["test"], cutoffs=CUTOFFS, batch_size=512) if own_eval else None,
            "epoch_seconds": [float(x) for x in rep.epoch_seconds],
        }
    bad = [k for k in METRICS if not math.isfinite(out["suite"][k])]
    assert not bad, f"{label} (seed {seed}): non-finite metrics {bad}"
    if disk_key is not None:
        disk.put(disk_key, _plain(out))
    cache[key] = out
    return out


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers (what the oracle cache stores as JSON)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _valid_result(value: dict, own_eval: bool) -> bool:
    """Whether a stored result has what the checks read: finite suite metrics and epoch times (an entry of an
    older layout is recomputed instead of failing a check)."""
    suite = value.get("suite")
    if not isinstance(suite, dict) or not all(isinstance(suite.get(m), (int, float)) for m in METRICS):
        return False
    return isinstance(value.get("epoch_seconds"), list) and (value.get("own") is not None) == own_eval


def _conformance_runs(
    impl,
    reference_impl,
    metric_data,
    metric_cache,
    loss: str,
    progress: Any = None,
    n_epochs: int | None = None,
    oracle_cache: Any = None,
) -> dict:
    """The implementation's runs (``--seeds``) and the reference's (full and matching features, :data:`REF_SEEDS`)
    for the dataset's study-best settings of ``loss`` (``metric_data["configs"]``; :data:`CONFIGS` are Yoochoose's);
    ``n_epochs`` replaces the configuration's epochs for all of them (the fast variants). ``oracle_cache``: the
    fixture of that name; the reference's runs go through it when ``reference_impl`` is the suite's own reference,
    the implementation's never do."""
    disk = oracle_cache if oracle_cache is not None and is_suite_reference(reference_impl) else None
    base = metric_data.get("configs", CONFIGS)[loss]
    if n_epochs is not None:
        base = {**base, "n_epochs": int(n_epochs)}
    match_cfg, notes = matching_config(impl.capabilities, base)
    declared = impl.capabilities.hyperparameters
    impl_cfg = {k: v for k, v in match_cfg.items() if k in declared}
    own = impl.supports("hook:evaluate")
    label = f"impl:{impl.name}@{impl.version}"
    impl_runs = [
        _run(impl, label, impl_cfg, s, metric_data, metric_cache, own, adagrad_optional=True, progress=progress)
        for s in impl.seeds
    ]
    ref_full = [
        _run(reference_impl, "reference", base, s, metric_data, metric_cache, False, progress=progress, disk=disk)
        for s in REF_SEEDS
    ]
    ref_match = [
        _run(reference_impl, "reference", match_cfg, s, metric_data, metric_cache, False, progress=progress, disk=disk)
        for s in REF_SEEDS
    ]
    return {
        "impl": impl_runs,
        "full": ref_full,
        "match": ref_match,
        "notes": notes,
        "unsettable": sorted(set(base) - set(declared)),
        "cfg": impl_cfg,
    }


def _compare(
    runs: list[dict], refs: list[dict], which: str, expect, context: dict, rel_floor: float = REL_FLOOR
) -> list[str]:
    bad: list[str] = []
    rule = RULE if rel_floor == REL_FLOOR else RULE.replace(f"{REL_FLOOR:.0%}·mean_ref", f"{rel_floor:.0%}·mean_ref")
    for m in METRICS:
        value = float(np.mean([r[which][m] for r in runs]))
        n_events = int(min(r["suite"].get("n_events", 0) for r in refs)) or None
        mean, tol = band([r["suite"][m] for r in refs], rel_floor, n_events)
        expect(
            m,
            value,
            reference=mean,
            tolerance=tol,
            rule=rule,
            n_events=n_events,
            **context,
            problems=bad,
            message=f"{m} {value:.4f} vs reference {mean:.4f} ± {tol:.4f}",
        )
    return bad


LOSSES = [
    pytest.param("cross-entropy", marks=pytest.mark.loss("cross-entropy"), id="cross-entropy"),
    pytest.param("bpr-max", marks=[pytest.mark.loss("bpr-max"), pytest.mark.slow], id="bpr-max"),
]


def _study_deltas(impl: Any, metric_data: dict, loss: str, runs: dict) -> None:
    """Append this implementation's Δ (vs the full reference, R@20 and MRR@20) and the study's published Δ of its
    declared study row on this dataset and loss to ``metric_data["deltas"]`` (printed in the terminal summary)."""
    if "deltas" not in metric_data:
        return
    from gru4rec_conformance.conformance.gru4rec import _data

    cls = getattr(getattr(getattr(impl, "handle", None), "spec", None), "cls", None)
    row = getattr(cls, "study", None)
    for m in ("recall@20", "mrr@20"):
        ours = float(np.mean([r["suite"][m] for r in runs["impl"]]))
        ref = float(np.mean([r["suite"][m] for r in runs["full"]]))
        pub = _data.study_delta(metric_data["key"], loss, row, m)
        metric_data["deltas"].append({"impl": impl.name, "dataset": metric_data["name"], "loss": loss, "metric": m,
                                      "ours": (ours - ref) / ref if ref else float("nan"),
                                      "study": pub["delta_rel"] if pub else None,
                                      "study_row": pub["row"] if pub else ""})  # fmt: skip


def _context(metric_data: dict, loss: str, runs: dict, comparison: str) -> dict:
    ctx = {
        "dataset": metric_data["name"],
        "loss": loss,
        "comparison": comparison,
        "seeds": ",".join(str(s) for s in REF_SEEDS),
    }
    if metric_data["notice"]:
        ctx["notice"] = metric_data["notice"]
    return ctx


@pytest.mark.check("MC-1", kind="metric")
@pytest.mark.metric
@pytest.mark.parametrize("loss", LOSSES)
def test_mc1_same_features(impl, reference_impl, metric_data, metric_cache, loss, expect, progress, oracle_cache):
    """Recall@N and MRR@N match the reference with the same features (a miss is a bug).

    Recall@N / MRR@N (N = 1, 5, 10, 20) equal the reference restricted to the implementation's declared
    features (the study's "matching features" run) within the reference's seed band: a failure is a bug.

    The matching reference draws the declared negatives: in-batch only (n_sample 0) without
    extra_shared_negatives, the shared extra negatives otherwise. For declared per-example negatives (their
    negatives_per_example, negatives_exclude_own_items) no matching reference exists: the check says so and is
    not tested (a skip), since the gap to a reference with other negatives is not a bug."""
    _require_matching_reference(impl)
    runs = _conformance_runs(impl, reference_impl, metric_data, metric_cache, loss, progress, oracle_cache=oracle_cache)
    ctx = _context(metric_data, loss, runs, "matching features: " + ("; ".join(runs["notes"]) or "all features"))
    bad = _compare(runs["impl"], runs["match"], "suite", expect, ctx)
    assert not bad, (
        f"on {metric_data['name']} ({loss}) the implementation misses the band of the reference with the "
        "same features: " + "; ".join(bad)
    )


@pytest.mark.check("MC-2", kind="metric")
@pytest.mark.metric
@pytest.mark.parametrize("loss", LOSSES)
def test_mc2_all_features(impl, reference_impl, metric_data, metric_cache, loss, expect, progress, oracle_cache):
    """Recall@N and MRR@N match the full-featured reference (a miss: missing features or bugs).

    Recall@N / MRR@N (N = 1, 5, 10, 20) equal the full-featured reference (the study's best configuration,
    CPU-scaled) within the reference's seed band: a failure with MC-1 passing means missing features."""
    runs = _conformance_runs(impl, reference_impl, metric_data, metric_cache, loss, progress, oracle_cache=oracle_cache)
    sampler = unmatched_sampler(impl.capabilities)
    missing = "; ".join(
        runs["notes"]
        + [f"{k} not settable" for k in runs["unsettable"]]
        + ([f"its own sampler ({sampler}) instead of the reference's negatives"] if sampler else [])
    )
    ctx = _context(metric_data, loss, runs, "all features")
    bad = _compare(runs["impl"], runs["full"], "suite", expect, ctx)
    _study_deltas(impl, metric_data, loss, runs)
    assert not bad, (
        f"on {metric_data['name']} ({loss}) the implementation misses the full reference's band"
        + (f" (missing features: {missing})" if missing else "")
        + ": "
        + "; ".join(bad)
    )


@pytest.mark.check("MC-3", kind="metric")
@pytest.mark.metric
@pytest.mark.hook("evaluate")
@pytest.mark.parametrize("loss", LOSSES)
def test_mc3_own_evaluator(impl, reference_impl, metric_data, metric_cache, loss, expect, progress, oracle_cache):
    """The own evaluator reports Recall@N and MRR@N within the reference band.

    The implementation's own evaluator, on the same fitted models, reports Recall@N / MRR@N within the band
    of the reference with the same features (its inference loop and metric code on real data)."""
    _require_matching_reference(impl)
    runs = _conformance_runs(impl, reference_impl, metric_data, metric_cache, loss, progress, oracle_cache=oracle_cache)
    ctx = _context(metric_data, loss, runs, "own evaluator vs matching features")
    bad = _compare(runs["impl"], runs["match"], "own", expect, ctx)
    assert not bad, (
        f"on {metric_data['name']} ({loss}) the implementation's own evaluator misses the band of the "
        "reference with the same features: " + "; ".join(bad)
    )


#: Fast-set metric conformance: every declared loss gets an MC check outside `slow`. Cross-entropy's
#: MC-1..3 above already run there; BPR-max's three-epoch ones are `slow`, so BPR-max also runs MC-1 after one
#: epoch (same data, same configuration otherwise), against the band of the reference's seeds after one epoch.
QUICK_EPOCHS = 1
#: The relative floor of the one-epoch band. After one epoch seeds differ more than three seeds' SD shows: on the
#: real slice the reference with seed 42 was 2.1% (0.0047) below the mean of seeds 1-3 at Recall@1 and MRR@1 while
#: 4·SD was under 0.0045 (2026-12-01); 4% keeps the reference inside with a margin (the other six metrics were
#: within 0.8%), about the width of the three-epoch band on the more spread metrics.
QUICK_REL_FLOOR = 0.04
QUICK_LOSSES = [pytest.param("bpr-max", marks=pytest.mark.loss("bpr-max"), id="bpr-max-1-epoch")]


@pytest.mark.check("MC-1", kind="metric")
@pytest.mark.metric
@pytest.mark.parametrize("loss", QUICK_LOSSES)
def test_mc1_same_features_one_epoch(
    impl, reference_impl, metric_data, metric_cache, loss, expect, progress, oracle_cache
):
    """Recall@N and MRR@N after one epoch match the reference with the same features (fast set).

    As MC-1 with the configuration trained for one epoch instead of three, for the losses whose three-epoch
    check is slow (BPR-max): the band comes from the reference's seeds after one epoch, with a 4% relative floor
    (QUICK_REL_FLOOR: seeds spread more after one epoch)."""
    _require_matching_reference(impl)
    runs = _conformance_runs(
        impl,
        reference_impl,
        metric_data,
        metric_cache,
        loss,
        progress,
        n_epochs=QUICK_EPOCHS,
        oracle_cache=oracle_cache,
    )
    notes = "; ".join(runs["notes"]) or "all features"
    ctx = {**_context(metric_data, loss, runs, f"matching features: {notes}"), "n_epochs": QUICK_EPOCHS}
    bad = _compare(runs["impl"], runs["match"], "suite", expect, ctx, rel_floor=QUICK_REL_FLOOR)
    assert not bad, (
        f"on {metric_data['name']} ({loss}, {QUICK_EPOCHS} epoch) the implementation misses the band of the "
        "reference with the same features after the same epoch: " + "; ".join(bad)
    )
