"""Reporting checks (FT-9 and FT-16..FT-21, docs/checks.md): losses, metrics, manifest, artifacts, collapse flags
and the aggregate over runs."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.conformance.finetuner.support import OFF_TRAIN_ROW, fresh, off_train_cause
from gru4rec_conformance.datasets.sst5 import EXPECTED_COUNTS
from gru4rec_conformance.reference.finetuner import FinetuneConfig, mean_cross_entropy, model_identity

KIND = "reporting"
ROOT = Path(__file__).resolve().parents[2]


#: FT-9's causes of a reported val loss that is not the mean CE of the final model's logits.
NOT_MEAN_CE = diagnosis.Candidate(
    "the loss is not the mean per-example CE",
    "the implementation's own evaluate() of the same final model against the mean CE of its logits: confirmed "
    "when it differs too (> 1e-6), ruled out when it agrees",
)
OTHER_MODEL = diagnosis.Candidate(
    "the reported loss is of another model than the final one, the weights having changed after the last validation",
    "the same evaluate(): not decided when it agrees with the logits (what changed the weights is not observed), "
    "ruled out when it differs from them and gives the reported loss (to the digits the loss was printed with)",
)
VAL_LOSS_TABLE = (NOT_MEAN_CE, OFF_TRAIN_ROW, OTHER_MODEL)


def _printed_tolerance(value: float) -> float:
    """Half a unit of the last decimal a loss was printed with (``0.2012`` → 5e-5), at least 1e-6: a value
    parsed from an implementation's log keeps only the digits it printed."""
    text = f"{value:.7f}".rstrip("0")
    decimals = len(text.partition(".")[2])
    return 0.5 * 10.0**-decimals if 3 <= decimals <= 6 else 1e-6  # fewer than 3: a computed value, not a print


@pytest.mark.check("FT-9", kind=KIND)
@diagnosis.causes(*VAL_LOSS_TABLE)
def test_val_loss_is_mean_cross_entropy(impl, tiny_bert, slices):
    """The reported val loss equals the mean per-example CE recomputed from the implementation's logits."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    eval_bs = 8
    rec = a.fit(slices.train, slices.val, dict(max_epochs=1, batch_size=8, eval_batch_size=eval_bs))
    logits, labels = a.predict(list(slices.val.texts)), slices.val.labels
    ce = mean_cross_entropy(logits, labels)
    reported = rec["epochs"][0]["val_loss"]
    if abs(reported - ce) <= 1e-6:
        return
    own = float(a.evaluate(slices.val)["mean_ce"])
    differs, agrees = abs(own - ce) > 1e-6, abs(own - ce) <= 1e-6  # both False for NaN
    said = f"evaluate() of the same final model reports {own:.7f}"
    # a loss read back from a log carries only its printed decimals: agreement is judged to that precision
    printed = _printed_tolerance(reported)

    def not_mean_ce() -> diagnosis.Finding:
        if differs:
            n = len(labels)
            means = [mean_cross_entropy(logits[i : i + eval_bs], labels[i : i + eval_bs]) for i in range(0, n, eval_bs)]
            per_batch = abs(own - sum(means) / n) <= 1e-6  # a known form: the batch means summed over the example count
            how = f", the sum of its {len(means)} per-batch mean CEs (eval batch size {eval_bs}) over the {n} examples"
            return diagnosis.confirmed(said + (how if per_batch else ""))
        return diagnosis.ruled_out(f"{said}, the mean CE of its logits") if agrees else diagnosis.undecided(said)

    def other_model() -> diagnosis.Finding:
        if agrees:
            return diagnosis.undecided(f"{said}, the mean CE of its logits, not the reported loss")
        if differs and abs(own - reported) <= printed:
            to_print = f" to its printed precision (± {printed:.0e})" if printed > 1e-6 else ""
            return diagnosis.ruled_out(f"{said}, the reported loss{to_print}")
        return diagnosis.undecided(said)

    diagnosis.fail(
        f"reported val loss {reported:.7f}, mean CE of the logits {ce:.7f}",
        [NOT_MEAN_CE.cause(not_mean_ce), off_train_cause(impl, a, slices.train.split), OTHER_MODEL.cause(other_model)],
    )


@pytest.mark.check("FT-9", kind=KIND)
def test_val_loss_independent_of_eval_batch_size(impl, tiny_bert, slices):
    """The reported val loss is the same with eval batch size 1 and 64."""
    losses = []
    for bs in (1, 64):
        a = fresh(impl)
        a.build(0, model_spec=tiny_bert, num_labels=5)
        rec = a.fit(
            slices.train,
            slices.val,
            dict(max_epochs=1, batch_size=8, eval_batch_size=bs, learning_rate=1e-3, warmup_ratio=0.0, patience=None),
        )
        losses.append(rec["epochs"][0]["val_loss"])
    assert abs(losses[0] - losses[1]) <= 1e-6, f"val loss {losses[0]:.7f} (bs 1) vs {losses[1]:.7f} (bs 64)"


@pytest.mark.check("FT-21", kind=KIND)
def test_metrics_match_sklearn(impl, base_run, slices):
    """Accuracy, macro-F1 and the confusion matrix equal scikit-learn's on the returned predictions; the
    matrix is C x C, rows = true labels, summing to n."""
    a, _ = base_run
    res = a.evaluate(slices.val)
    y, p = np.asarray(slices.val.labels), np.asarray(res["predictions"])
    labels = list(range(5))
    assert res["accuracy"] == accuracy_score(y, p)
    assert res["macro_f1"] == f1_score(y, p, labels=labels, average="macro", zero_division=0), (
        f"macro-F1 {res['macro_f1']} != sklearn {f1_score(y, p, labels=labels, average='macro', zero_division=0)}"
    )
    cm = np.asarray(res["confusion_matrix"])
    assert cm.shape == (5, 5), f"confusion matrix shape {cm.shape} (margins?)"
    assert (cm == confusion_matrix(y, p, labels=labels)).all() and cm.sum() == len(y)


@pytest.mark.check("FT-21", kind=KIND)
def test_metrics_independent_of_eval_batch_size(impl, tiny_bert, slices):
    """On 33 dev sentences, evaluated after the same seeded run with eval batch sizes 1, 4 and 64 (4 does not
    divide 33): accuracy and macro-F1 are identical and equal scikit-learn's on the returned predictions, and the
    mean CE agrees within 1e-6 and equals the mean CE of the returned logits."""
    split = slices.full["dev"].head(33)
    y = np.asarray(split.labels)
    got, problems = {}, []
    for bs in (1, 4, 64):
        a = fresh(impl)
        a.build(0, model_spec=tiny_bert, num_labels=5)
        cfg = dict(max_epochs=2, batch_size=8, eval_batch_size=bs, learning_rate=2e-3, warmup_ratio=0.0, patience=None)
        a.fit(slices.train, slices.val, cfg)
        res = a.evaluate(split)
        p = np.asarray(res["predictions"])
        sk = {
            "accuracy": float(accuracy_score(y, p)),
            "macro_f1": float(f1_score(y, p, labels=list(range(5)), average="macro", zero_division=0)),
            "mean_ce": float(mean_cross_entropy(np.asarray(a.predict(list(split.texts))), split.labels)),
        }
        for key in ("accuracy", "macro_f1"):
            if res[key] != sk[key]:
                problems.append(
                    f"eval batch size {bs}: {key} {res[key]:.6f}, scikit-learn on its predictions {sk[key]:.6f}"
                )
        if abs(res["mean_ce"] - sk["mean_ce"]) > 1e-6:
            problems.append(
                f"eval batch size {bs}: mean_ce {res['mean_ce']:.7f}, mean CE of its logits {sk['mean_ce']:.7f}"
            )
        got[bs] = res
    for key, tol in (("accuracy", 0.0), ("macro_f1", 0.0), ("mean_ce", 1e-6)):
        vals = {bs: float(r[key]) for bs, r in got.items()}
        if max(vals.values()) - min(vals.values()) > tol:
            problems.append(f"{key} depends on the eval batch size (n = 33): {vals}")
    assert not problems, "metrics are not aggregated over examples: " + "; ".join(problems)


@pytest.mark.check("FT-17", kind=KIND)
@pytest.mark.feature("manifest")
def test_manifest_model_identity(impl, base_run, tiny_bert):
    """The manifest records the requested model: path, config hash, tokenizer fingerprint, lower-casing and
    num_labels, and the implementation tokenizes exactly like the requested tokenizer."""
    a, rec = base_run
    want = model_identity(tiny_bert, num_labels=5)
    got = rec["manifest"]["model"]
    for key in ("model_path", "config_sha256", "tokenizer_fingerprint", "do_lower_case", "num_labels"):
        assert got.get(key) == want[key], f"manifest {key}={got.get(key)!r}, requested {want[key]!r}"
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert.path, local_files_only=True)
    probe = ["A Stirring, FUNNY movie"]
    assert a.encode(probe)["input_ids"][0][: len(tok(probe[0])["input_ids"])] == tok(probe[0])["input_ids"]


REQUIRED_HP = (
    "optimizer",
    "learning_rate",
    "betas",
    "eps",
    "weight_decay",
    "warmup_ratio",
    "schedule",
    "clip_norm",
    "batch_size",
    "max_epochs",
    "patience",
    "seed",
)


@pytest.mark.check("FT-18", kind=KIND)
@pytest.mark.feature("manifest", "lr_trace", "configurable_optimizer")
def test_hyperparameters_recorded_and_schedule_followed(impl, tiny_bert, slices):
    """The manifest records every optimisation hyperparameter as requested, and the learning rate used at
    step 0, at the end of warmup and at the last step follows the configured warmup + linear decay."""
    cfg = dict(
        max_epochs=2,
        batch_size=8,
        learning_rate=1e-3,
        warmup_ratio=0.25,
        schedule="linear",
        optimizer="adamw",
        weight_decay=0.01,
        clip_norm=1.0,
        patience=None,
        seed=0,
    )
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    rec = a.fit(slices.train, slices.val, cfg)
    hp = rec["manifest"]["hyperparameters"]
    full = FinetuneConfig.from_mapping(cfg)
    for k in REQUIRED_HP:
        assert k in hp, f"manifest lacks hyperparameter {k!r}"
        want = list(getattr(full, k)) if k == "betas" else getattr(full, k)
        got = list(hp[k]) if k == "betas" else hp[k]
        assert got == want, f"manifest {k}={got!r}, requested {want!r}"
    lrs = rec["lr_by_step"]
    total = full.steps_per_epoch(len(slices.train)) * full.max_epochs
    w = full.warmup_steps(total)
    assert len(lrs) == total, f"{len(lrs)} steps traced, {total} planned"
    for step in (0, w, total - 1):
        assert math.isclose(lrs[step], full.lr_at(step, total), rel_tol=1e-6, abs_tol=1e-12), (
            f"lr at step {step} is {lrs[step]:.3e}, schedule says {full.lr_at(step, total):.3e}"
        )


#: FT-19's causes of a setup that does not give a constant predictor (the check cannot judge the flag then).
NOT_FITTED = diagnosis.Candidate(
    "training does not fit a one-class train split in 3 epochs, fitting being judged by FT-8 test_overfits_32_examples"
)
COLLAPSE_TABLE = (OFF_TRAIN_ROW, NOT_FITTED)


@pytest.mark.check("FT-19", kind=KIND)
@diagnosis.causes(*COLLAPSE_TABLE)
def test_collapse_flagged(impl, tiny_bert, slices):
    """A run that predicts a single class (trained on one-class data) is flagged as collapsed, with reasons; a
    one-class run that does not predict a single class fails the check's setup."""
    a = fresh(impl)
    a.build(0, model_spec=tiny_bert, num_labels=5)
    train = slices.train.with_labels([1] * len(slices.train))
    rec = a.fit(
        train, slices.val, dict(max_epochs=3, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0, patience=None)
    )
    preds = a.evaluate(slices.val)["predictions"]
    if len(set(preds)) != 1:
        diagnosis.fail(
            f"setup: expected a constant predictor after training on one class, got classes {sorted(set(preds))}",
            [off_train_cause(impl, a, train.split), NOT_FITTED.cause(None)],
        )
    assert rec.get("collapsed") is True and rec.get("collapse_reasons"), (
        f"collapsed run not flagged: collapsed={rec.get('collapsed')!r}, reasons={rec.get('collapse_reasons')!r}"
    )


@pytest.mark.check("FT-20", kind=KIND)
@pytest.mark.feature("hook:run_repeats")
def test_aggregate_over_runs(impl, tiny_bert, slices):
    """N=3 runs (early stopping, so lengths may differ) aggregate to n, mean, std (ddof=1), min and max of
    the val-selected test accuracy and macro-F1; collapsed runs are counted, not dropped."""
    a = fresh(impl)
    res = a.run_repeats(
        slices.train,
        slices.val,
        slices.test,
        dict(max_epochs=4, batch_size=8, learning_rate=2e-3, warmup_ratio=0.0, patience=1),
        seeds=[0, 1, 2],
        model_spec=tiny_bert,
    )
    runs, agg = res["runs"], res["aggregate"]
    assert len(runs) == 3
    for key, field in (("test_accuracy", "accuracy"), ("test_macro_f1", "macro_f1")):
        v = np.array([r["test"][field] for r in runs])
        d = agg[key]
        assert d["n"] == 3, f"{key}: n={d['n']}"
        assert math.isclose(d["mean"], v.mean(), abs_tol=1e-12), f"{key}: mean {d['mean']} vs {v.mean()}"
        assert d.get("std") is not None and math.isclose(d["std"], v.std(ddof=1), abs_tol=1e-12), (
            f"{key}: std {d.get('std')} vs ddof=1 {v.std(ddof=1)}"
        )
        assert d["min"] == v.min() and d["max"] == v.max()
    assert agg["n_collapsed"] == sum(bool(r["collapsed"]) for r in runs)


@pytest.mark.check("FT-16", kind=KIND)
@pytest.mark.feature("save_pretrained")
def test_artifacts_per_run_reload_in_fresh_process(impl, tiny_bert, slices, tmp_path):
    """Two runs (seeds 3 and 4) save two distinct checkpoints whose paths name run id and seed; each reloads
    with from_pretrained in a fresh process and reproduces the run's logits."""
    texts = list(slices.val.texts[:5])
    dirs, logits = [], []
    for _run_id, seed in enumerate((3, 4)):
        a = fresh(impl)
        rec = a.run(
            slices.train,
            slices.val,
            slices.test,
            dict(max_epochs=1, batch_size=8, learning_rate=1e-3, warmup_ratio=0.0, patience=None),
            seed=seed,
            model_spec=tiny_bert,
            num_labels=5,
            out_dir=tmp_path,
        )
        d = rec.get("artifact_dir") or rec.get("selected_checkpoint")
        assert d and f"seed{seed}" in str(d), f"checkpoint path {d!r} does not name the seed {seed}"
        dirs.append(str(d))
        logits.append(a.predict(texts))
    assert len(set(dirs)) == 2, f"two runs share one checkpoint path: {dirs}"
    script = textwrap.dedent("""
        import json, sys, torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        dirs, texts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
        out = []
        for d in dirs:
            m = AutoModelForSequenceClassification.from_pretrained(d, local_files_only=True).eval()
            t = AutoTokenizer.from_pretrained(d, local_files_only=True)
            with torch.no_grad():
                out.append(m(**t(texts, padding=True, return_tensors="pt")).logits.tolist())
        print(json.dumps(out))
    """)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(dirs), json.dumps(texts)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, f"reload of {dirs} failed:\n{out.stderr[-2000:]}"
    reloaded = json.loads(out.stdout.strip().splitlines()[-1])
    for d, z, got in zip(dirs, logits, reloaded):
        diff = np.abs(np.array(got) - z).max()
        assert diff <= 1e-5, f"{d}: reloaded logits differ by {diff:.2e}"


@pytest.mark.check("FT-20", kind=KIND)
@pytest.mark.feature("hook:run_repeats")
@pytest.mark.slow
def test_protocol_on_full_sst5(impl, tiny_bert, sst5_data, record_metric, request, progress):
    """Three seeded runs on the full SST-5 splits (tiny BERT, 2 epochs): every run evaluates all 2210 test
    sentences once (all test sentences of the synthetic stand-in when the real data are absent), and the report
    gets accuracy and macro-F1 mean ± std, a confusion-matrix plot and the training curves."""
    from gru4rec_conformance.reference.finetuner import plot, summarize

    sst5_full = sst5_data.splits
    n_test = EXPECTED_COUNTS["fine"]["test"] if sst5_data.real else len(sst5_full["test"])
    a = fresh(impl)
    with progress.task(f"{impl.name}: 3 seeded runs (seeds 0, 1, 2) of 2 epochs on {sst5_data.name}"):
        res = a.run_repeats(
            sst5_full["train"],
            sst5_full["dev"],
            sst5_full["test"],
            dict(max_epochs=2, batch_size=32, learning_rate=2e-3, warmup_ratio=0.0, patience=1),
            seeds=[0, 1, 2],
            model_spec=tiny_bert,
        )
    for r in res["runs"]:
        progress.note(f"seed {r.get('seed', '?')}: test accuracy {r['test'].get('accuracy', float('nan')):.3f}")
    for r in res["runs"]:
        assert r["test"]["n"] == n_test and sum(np.asarray(r["test"]["confusion_matrix"]).ravel()) == n_test, (
            f"test evaluated on {r['test']['n']} examples, expected {n_test}"
        )
    agg = res["aggregate"]
    for key in ("test_accuracy", "test_macro_f1"):
        record_metric(f"{key} mean", agg[key]["mean"], dataset=sst5_data.name, seeds="0,1,2")
        record_metric(f"{key} std", agg[key]["std"], dataset=sst5_data.name, seeds="0,1,2")
    record_metric("collapsed runs", agg["n_collapsed"], dataset=sst5_data.name)
    report_root = Path(
        request.config.getoption("--report-dir", default=None)
        or os.environ.get("GRU4REC_REPORT_DIR")
        or ROOT / "reports" / "out"
    )
    from gru4rec_conformance.fileio import new_run_dir

    out = new_run_dir(report_root / impl.name, prefix="finetuner-protocol-", first_suffix=2)
    res["config"] = dict(
        max_epochs=2, batch_size=32, learning_rate=2e-3, warmup_ratio=0.0, patience=1, monitor="val_loss"
    )
    plot(res, out)
    (out / "summary.md").write_text(summarize(res), encoding="utf-8")
    assert (out / "confusion.png").is_file() and (out / "curves.png").is_file()
