"""Fixtures of the reference GRU4Rec tests (tests/reference/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
if str(REPO / "src") not in sys.path:  # the gru4rec_conformance namespace (never the root itself)
    sys.path.insert(0, str(REPO / "src"))
if str(Path(__file__).parent) not in sys.path:  # for ref_testdata, whatever pytest's import mode
    sys.path.insert(0, str(Path(__file__).parent))

from ref_testdata import lag1_sessions  # noqa: E402

from gru4rec_conformance.datasets.paths import shared_data_candidate  # noqa: E402  (our package: REPO is first on sys.path)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes longer than ~20 s; not in the default run")


def pytest_collection_modifyitems(config, items):
    """Keep this folder's slow tests out of the default run unless asked for (-m selecting 'slow', or
    GRU4REC_RUN_SLOW=1); a faster test covers the same behaviour by default."""
    if os.environ.get("GRU4REC_RUN_SLOW") == "1" or "slow" in (config.getoption("markexpr", "") or ""):
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="slow test: run with GRU4REC_RUN_SLOW=1 or -m slow")
    for item in items:
        if item.get_closest_marker("slow") and here in Path(str(item.path)).parents:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The oracle's test models are tiny: one intra-op thread is faster and far steadier on the 2-core CI
    machine. Module scope, so module-scoped fixtures (trained models) run with it too; restored after each
    module, so other suites in the same session are unaffected."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


YOOCHOOSE_100K = "sessions/yoochoose/rsc15_100k_prepared"


@pytest.fixture(scope="session")
def yoochoose_100k():
    """The real Yoochoose 100k slice (train_full, test) or a skip naming the missing path."""
    want = shared_data_candidate() / YOOCHOOSE_100K  # datasets.shared_data_dir()'s rule, one place
    if not want.is_dir():
        pytest.skip(f"real data absent: {want} not found (set GRU4REC_SHARED_DATA to the shared data folder)")

    def read(name):
        return pd.read_csv(want / f"yoochoose-clicks-100k_{name}.txt", sep="\t")

    return {"train_full": read("train_full"), "test": read("test")}


@pytest.fixture
def lag1():
    return lag1_sessions()


@pytest.fixture
def lag1_test():
    return lag1_sessions(seed=1, n_sessions=30, first_session=10_000, t0=1e6)
