"""benchmarks/workload.py: the study's parameters and epoch times, scales, sweep data."""

from __future__ import annotations

import pytest

from gru4rec_conformance.benchmarks.workload import (
    best_params,
    parse_scale,
    published_shape,
    study_epoch_rows,
    sweep_frame,
    trained_events,
)

# docs/study.md 'Best hyperparameters', typed in from that table (independent of reports/data/study_results.csv)
SPEC_9_1 = {
    ("coveo", "cross-entropy"): dict(
        layers=[512],
        batch_size=32,
        dropout_p_embed=0.4,
        dropout_p_hidden=0.15,
        learning_rate=0.03,
        momentum=0.0,
        sample_alpha=0.0,
        bpreg=0.0,
        logq=1.0,
    ),
    ("retailrocket", "bpr-max"): dict(
        layers=[224],
        batch_size=80,
        dropout_p_embed=0.5,
        dropout_p_hidden=0.05,
        learning_rate=0.05,
        momentum=0.4,
        sample_alpha=0.4,
        bpreg=1.95,
        logq=0.0,
        elu_param=0.5,
    ),
    ("yoochoose", "bpr-max"): dict(
        layers=[448],
        batch_size=48,
        dropout_p_embed=0.25,
        dropout_p_hidden=0.0,
        learning_rate=0.075,
        momentum=0.1,
        sample_alpha=0.2,
        bpreg=0.5,
        elu_param=0.0,
    ),
    ("diginetica", "bpr-max"): dict(layers=[512], batch_size=128, elu_param=1.0, momentum=0.15, bpreg=0.9),
}


@pytest.mark.parametrize("key", list(SPEC_9_1))
def test_best_params_are_the_studys(key):
    hp = best_params(*key)
    assert hp["n_sample"] == 2048 and hp["constrained_embedding"] is True and hp["embedding"] == 0
    assert hp["loss"] == key[1]
    for k, v in SPEC_9_1[key].items():
        assert hp[k] == v, k


def test_study_epoch_rows_are_section_9_5():
    rows = study_epoch_rows("coveo", "cross-entropy")
    best = next(r for r in rows if r["variant"] == "Best params")
    assert (best["epoch_seconds"], best["events_per_second"], best["minibatches_per_second"]) == (37.17, 33505, 1047.47)
    keras = next(r for r in rows if r["implementation"] == "KerasGRU4Rec" and r["variant"] == "OOB")
    assert keras["x_best"] == pytest.approx(15.29, abs=0.005)


def test_published_shape():
    assert published_shape("diginetica")["train"]["events"] == 833_113
    with pytest.raises(ValueError, match="dataset: unknown 'movielens'"):
        published_shape("movielens")
    with pytest.raises(ValueError, match="loss"):
        best_params("coveo", "top1")


def test_parse_scale():
    from gru4rec_conformance.datasets.sessions.synthetic import CI_SCALE

    assert parse_scale(None, "coveo") == CI_SCALE["coveo"]
    assert parse_scale("ci*0.5", "rees46") == CI_SCALE["rees46"] * 0.5
    assert parse_scale("1", "rees46") == 1.0
    for bad in ("big", "0", "5", "ci*x"):
        with pytest.raises(ValueError, match="GRU4REC_BENCH_SCALE"):
            parse_scale(bad, "coveo")


def test_sweep_frame_catalogue_grows_while_trained_events_stay():
    small, big = sweep_frame(300, 500, seed=3), sweep_frame(300, 20_000, seed=3)
    assert small["ItemId"].nunique() == 500 and big["ItemId"].nunique() == 20_000
    # the padding sessions have one event each: same transitions to train
    assert trained_events(big) == trained_events(sweep_frame(300, 20_000, seed=3, pad_catalogue=False))
    assert big.groupby("SessionId").size().iloc[:300].min() >= 2
    with pytest.raises(ValueError, match="sweep_frame"):
        sweep_frame(0, 10)


@pytest.mark.parametrize(
    "name,minibatches,batch_size", [("coveo", 40, 32), ("rees46", 5, 32), ("retailrocket", 3, 240)]
)
def test_catalogue_data_has_the_real_item_count_and_the_asked_work(name, minibatches, batch_size):
    from gru4rec_conformance.benchmarks.workload import catalogue_data, catalogue_items

    scale = 0.02
    d = catalogue_data(name, minibatches, batch_size, scale)
    n_items = catalogue_items(name, scale)
    assert n_items == round(published_shape(name)["items"] * scale)
    assert d.train["ItemId"].nunique() == n_items  # every item trained, no padding sessions
    assert d.train.groupby("SessionId").size().min() >= 2
    assert d.train["SessionId"].nunique() > batch_size
    want = max(round(minibatches * scale), 1) * batch_size
    eps = published_shape(name)["train"]["events_per_session"]
    assert trained_events(d.train) >= want
    # no larger than its bounds need: the work asked, every item once, or batch_size + 1 sessions
    assert (
        len(d.train) <= max(n_items, 1.2 * want * eps / (eps - 1)) + 50
        or d.train["SessionId"].nunique() == batch_size + 1
    )
    assert set(d.test["ItemId"]) <= set(d.train["ItemId"]) and d.test["Time"].min() > d.train["Time"].max()
    again = catalogue_data(name, minibatches, batch_size, scale)
    assert again.train.equals(d.train) and again.test.equals(d.test)  # seeded
