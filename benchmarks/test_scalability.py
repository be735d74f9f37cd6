"""Scalability sweeps: one training epoch while one quantity grows — batch size, n_sample, hidden size, catalogue
size, number of sessions — for the reference and every other selected implementation (group ``sweep/<name>``,
one point per value; ``python -m gru4rec_conformance.benchmarks.report`` plots time against the value, one line per implementation).

The base configuration is the study's best Diginetica cross-entropy parameters (docs/study.md, 'Best hyperparameters': layers
192, batch 128, n_sample 2048, logQ, dropout 0.45/0.15, learning rate 0.1) on ``benchmarks.workload.sweep_frame``
data (Zipf items, 4.7 events per session). The catalogue sweep matters most: an implementation that scores every
item (instead of the b + n_sample sampled columns) looks fine on a small catalogue and falls apart on a large one;
its trained events stay fixed (the catalogue is padded with one-event sessions, which train nothing).

Grids (``GRU4REC_BENCH_SWEEPS``): ``ci`` two small points each (code paths only), ``cpu`` up to 3 x 10^5 items and
1024 hidden units, ``gpu`` up to 10^6 items and 3 x 10^5 sessions.
"""

from __future__ import annotations

import pytest

from gru4rec_conformance.benchmarks.timing import BenchConfig, env_list, sweep_case, time_epochs
from gru4rec_conformance.benchmarks.workload import best_params, sweep_frame, trained_events

GRIDS = {
    "ci": {
        "batch_size": [32, 256],
        "n_sample": [0, 512],
        "hidden": [32, 128],
        "n_items": [2_000, 20_000],
        "n_sessions": [600, 1_200],
    },
    "cpu": {
        "batch_size": [32, 64, 128, 256, 512, 1024, 2048],
        "n_sample": [0, 128, 512, 2048, 8192],
        "hidden": [64, 128, 256, 512, 1024],
        "n_items": [10_000, 30_000, 100_000, 300_000],
        "n_sessions": [1_000, 3_000, 10_000, 30_000],
    },
    "gpu": {
        "batch_size": [32, 64, 128, 256, 512, 1024, 2048],
        "n_sample": [0, 128, 512, 2048, 8192],
        "hidden": [64, 128, 256, 512, 1024],
        "n_items": [10_000, 30_000, 100_000, 300_000, 1_000_000],
        "n_sessions": [10_000, 30_000, 100_000, 300_000],
    },
    # the catalogue sweep of many implementations on CPU (GRU4REC_BENCH_SWEEP_NAMES=n_items): 10^4 -> 10^6 items
    "impl": {
        "batch_size": [32, 128, 512],
        "n_sample": [0, 2048],
        "hidden": [64, 256],
        "n_items": [10_000, 100_000, 1_000_000],
        "n_sessions": [1_000, 4_000],
    },
}
#: base data per grid: sessions and catalogue size held fixed while another quantity varies
BASE = {
    "ci": {"n_sessions": 600, "n_items": 2_000},
    "cpu": {"n_sessions": 5_000, "n_items": 20_000},
    "gpu": {"n_sessions": 50_000, "n_items": 40_000},
    "impl": {"n_sessions": 1_500, "n_items": 20_000},
}
SWEEPS = ("batch_size", "n_sample", "hidden", "n_items", "n_sessions")


def pytest_generate_tests(metafunc):
    if "sweep_point" in metafunc.fixturenames:
        profile = BenchConfig(metafunc.config).sweeps
        names = env_list("GRU4REC_BENCH_SWEEP_NAMES", SWEEPS, SWEEPS)
        points = [(name, v) for name in names for v in GRIDS[profile][name]]
        metafunc.parametrize("sweep_point", points, ids=[f"{n}={v}" for n, v in points])


@pytest.fixture(scope="module")
def frames():
    made: dict = {}

    def get(n_sessions: int, n_items: int):
        key = (n_sessions, n_items)
        if key not in made:
            made[key] = sweep_frame(n_sessions, n_items, seed=0)
        return made[key]

    return get


@pytest.mark.benchmark
def test_sweep(benchmark, bench_impl, bench_reference, bench_config, frames, sweep_point):
    name, value = sweep_point
    base = BASE[bench_config.sweeps]
    hp = best_params("diginetica", "cross-entropy")
    n_sessions, n_items = base["n_sessions"], base["n_items"]
    if name == "batch_size":
        hp["batch_size"] = value
    elif name == "n_sample":
        hp["n_sample"] = value
    elif name == "hidden":
        hp["layers"] = [value]
    elif name == "n_items":
        n_items = value
    else:
        n_sessions = value
    if n_sessions < hp["batch_size"]:
        pytest.skip(f"{n_sessions} sessions < batch_size {hp['batch_size']}")
    df = frames(n_sessions, n_items)
    shape = {
        "train_events": len(df),
        "train_sessions": int(df["SessionId"].nunique()),
        "n_items": int(df["ItemId"].nunique()),
        "trained_events": trained_events(df),
    }
    group, case = sweep_case(name, value)
    s = time_epochs(
        benchmark,
        bench_impl,
        bench_config,
        group=group,
        case=case,
        train=df,
        hp=hp,
        extra={"sweep": name, "value": value, "shape": shape},
        rounds=bench_config.sweep_rounds,
        warmup=bench_config.sweep_warmup,
        reference=bench_reference,
    )
    assert s["minibatches"] > 0
