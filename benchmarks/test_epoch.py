"""One training epoch per dataset shape and loss at the study's best parameters (docs/study.md, 'Best hyperparameters'), for
the reference and every other selected implementation; full-catalogue evaluation throughput per dataset shape.

Data: synthetic stand-ins of the five datasets in their raw formats, run through the study's preprocessing
(``benchmarks.workload.epoch_data``) at ``GRU4REC_BENCH_SCALE`` (``ci`` on CPU, the full published shape on CUDA), or
with ``GRU4REC_BENCH_DATA=catalogue`` the study's item counts and a fixed number of minibatches
(``benchmarks.workload.catalogue_data``; the GPU check).
Groups ``epoch/<dataset>/<loss>`` and ``eval/<dataset>``; ``extra_info`` holds the implementation, device, data
shape, hyperparameters, library versions, the epoch time, minibatches/s, events/s, the CPU-time rates, peak memory
and the ratio to the reference measured in the same run. Speed is reported, never asserted.
"""

from __future__ import annotations

import pytest

from gru4rec_conformance.benchmarks.timing import epoch_case, eval_case, time_epochs, time_eval
from gru4rec_conformance.benchmarks.workload import best_params


def oob_params(runner, loss: str) -> dict:
    """An adapter's declared hyperparameter defaults (its implementation's own, "out of the box") with ``loss``
    set and ``n_epochs`` left out; skips the test for a runner that is not an adapter, declares no defaults or
    lacks the loss."""
    if runner.kind != "adapter":
        pytest.skip(f"{runner.name}: out of the box is a third-party adapter's own defaults")
    defaults = runner.defaults()
    if not defaults:
        pytest.skip(f"{runner.name} declares no hyperparameter defaults")
    if loss not in runner.losses():
        pytest.skip(f"unsupported by {runner.name}: loss {loss}")
    return {**{k: v for k, v in defaults.items() if k != "n_epochs"}, "loss": loss}


@pytest.mark.benchmark
def test_epoch(
    benchmark, bench_impl, bench_reference, bench_config, epoch_datasets, bench_dataset, bench_loss, bench_variant
):
    best = best_params(bench_dataset, bench_loss)
    hp = best if bench_variant == "best" else oob_params(bench_impl, bench_loss)
    data = epoch_datasets(bench_dataset, best["batch_size"])  # one data set per case: sized by the study's B
    # an implementation that hard-codes its minibatch size declares no batch_size (GRU4Rec_TensorFlow's OOB B=50)
    if data.shape()["train_sessions"] < hp.get("batch_size", 0):
        pytest.skip(
            f"{bench_dataset} at scale {data.scale:g} has {data.shape()['train_sessions']} sessions, fewer "
            f"than batch_size={hp['batch_size']}: raise GRU4REC_BENCH_SCALE"
        )
    group, case = epoch_case(bench_dataset, bench_loss, bench_variant)
    s = time_epochs(
        benchmark,
        bench_impl,
        bench_config,
        group=group,
        case=case,
        train=data.train,
        hp=hp,
        extra={"dataset": bench_dataset, "loss": bench_loss, "shape": data.shape(), "variant": bench_variant},
        rounds=bench_config.rounds,
        warmup=bench_config.warmup,
        reference=bench_reference,
        ref_case=epoch_case(bench_dataset, bench_loss, "best"),
        ref_hp=best,
    )
    if bench_impl.kind == "reference":
        # every transition of every session is trained once (n_sample = 2048 > 0: the epoch runs to the last lane)
        assert s["events"] == len(data.train) - data.train["SessionId"].nunique()


@pytest.mark.benchmark
def test_evaluation(benchmark, bench_impl, bench_config, epoch_datasets, bench_dataset):
    hp = best_params(bench_dataset, "cross-entropy")
    data = epoch_datasets(bench_dataset, hp["batch_size"])
    group, case = eval_case(bench_dataset)
    s = time_eval(
        benchmark,
        bench_impl,
        bench_config,
        group=group,
        case=case,
        train=data.train,
        test=data.test,
        hp=hp,
        extra={"dataset": bench_dataset, "shape": data.shape(), "cutoffs": [1, 5, 10, 20], "mode": "conservative"},
        rounds=bench_config.rounds,
        warmup=bench_config.warmup,
    )
    assert s["eval_events"] > 0
