"""Fixtures of the tests of benchmarks/ (report, workload, runners, the pytest entry point, the tuner)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models: one intra-op thread is faster and far steadier on a loaded 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def bench_cache(tmp_path_factory) -> Path:
    """A private cache folder for generated benchmark data (also passed to subprocesses as GRU4REC_BENCH_CACHE)."""
    return tmp_path_factory.mktemp("bench_cache")


@pytest.fixture()
def subprocess_env(bench_cache) -> dict:
    env = dict(os.environ)
    env.update(GRU4REC_BENCH_CACHE=str(bench_cache), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env
