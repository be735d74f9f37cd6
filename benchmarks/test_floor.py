"""The reference's CPU training step against its matmul floor, and official/reference, per study shape
(``benchmarks/floor.py``; one interleaved run per shape, CPU time, one torch thread). Reported in ``extra_info``
(group ``floor/<dataset>/<loss>``) and printed; never asserted.

Environment: ``GRU4REC_BENCH_FLOOR_MINIBATCHES`` (trained minibatches per epoch, default 100),
``GRU4REC_BENCH_ROUNDS`` (interleaved rounds, default 3), ``OFFICIAL_GRU4REC_PATH`` (official/reference too; else
the adapters' pinned checkout when present, ``floor.official_checkout``).
With ``--benchmark-disable`` (the CI code-path run) one round of 3 minibatches on 2 % of the catalogue.
"""

from __future__ import annotations

import os

import pytest
import torch

from gru4rec_conformance.benchmarks.floor import SHAPES, format_line, measure, official_checkout
from gru4rec_conformance.benchmarks.runners import OfficialRunner


@pytest.mark.benchmark
@pytest.mark.parametrize(("dataset", "loss"), SHAPES, ids=[f"{d}/{l}" for d, l in SHAPES])
def test_floor(benchmark, dataset, loss):
    if benchmark.disabled:
        kw = dict(minibatches=3, rounds=1, scale=0.02)
    else:
        kw = dict(
            minibatches=int(os.environ.get("GRU4REC_BENCH_FLOOR_MINIBATCHES", "100")),
            rounds=int(os.environ.get("GRU4REC_BENCH_ROUNDS", "3")),
        )
    path, missing = official_checkout()
    official = OfficialRunner(path, "cpu") if path else None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = benchmark.pedantic(lambda: measure(dataset, loss, official=official, **kw), rounds=1, iterations=1)
    finally:
        torch.set_num_threads(threads)
    benchmark.group = f"floor/{dataset}/{loss}"
    benchmark.extra_info.update(res.as_dict())
    print("\n" + format_line(res, missing))
    assert res.n_steps > 0
