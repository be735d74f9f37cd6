"""Fixtures of the reference GRU4Rec tests (tests/reference/)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the root conftest does this too; kept so this folder also runs on its own
    sys.path.insert(0, str(REPO))
if str(Path(__file__).parent) not in sys.path:  # for ref_testdata, whatever pytest's import mode
    sys.path.insert(0, str(Path(__file__).parent))

from ref_testdata import lag1_sessions  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes longer than ~20 s; not in the default run")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The oracle's test models are tiny: one intra-op thread is faster and steadier on the 2-core CI machine.
    Restored after each test, so other suites in the same session are unaffected."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def shared_data_dir() -> Path | None:
    """``datasets.shared_data_dir()`` when the datasets package is present, else the same rule: env
    GRU4REC_SHARED_DATA, else <repo>/../shared/data; None when absent."""
    if (REPO / "datasets" / "__init__.py").exists():  # our package, never Hugging Face's
        from datasets import shared_data_dir as sdd
        p = sdd()
        return None if p is None else Path(p)
    env = os.environ.get("GRU4REC_SHARED_DATA")
    p = Path(env) if env else REPO.parent / "shared" / "data"
    return p if p.is_dir() else None


YOOCHOOSE_100K = "sessions/yoochoose/rsc15_100k_prepared"


@pytest.fixture(scope="session")
def yoochoose_100k():
    """The real Yoochoose 100k slice (train_full, test) or a skip naming the missing path."""
    base = shared_data_dir()
    want = (base / YOOCHOOSE_100K) if base is not None else None
    if want is None or not want.is_dir():
        where = want if want is not None else (os.environ.get("GRU4REC_SHARED_DATA") or REPO.parent / "shared/data")
        pytest.skip(f"real data absent: {where} not found (set GRU4REC_SHARED_DATA to the shared data folder)")
    read = lambda name: pd.read_csv(want / f"yoochoose-clicks-100k_{name}.txt", sep="\t")
    return {"train_full": read("train_full"), "test": read("test")}


@pytest.fixture
def lag1():
    return lag1_sessions()


@pytest.fixture
def lag1_test():
    return lag1_sessions(seed=1, n_sessions=30, first_session=10_000, t0=1e6)
