"""Fixtures of the dataset tests. The repository root is put on sys.path here (the suite runs from its checkout;
the root conftest.py, owned elsewhere, does the same for the whole tree)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from suite_datasets import shared_data_candidate, shared_data_dir  # noqa: E402


@pytest.fixture(scope="session")
def shared_sessions() -> Path:
    """<shared>/sessions, or skip with the path that was looked at."""
    root = shared_data_dir()
    if root is None or not (root / "sessions").is_dir():
        pytest.skip(f"real session slices absent: {shared_data_candidate() / 'sessions'} not found "
                    "(set GRU4REC_SHARED_DATA to the shared data folder)")
    return root / "sessions"


@pytest.fixture(scope="session")
def synthetic_raw(tmp_path_factory):
    """Callable name -> folder with the CI-size synthetic raw files of that dataset (generated once, seed 1)."""
    from suite_datasets.sessions.synthetic import CI_SCALE, generate_raw

    cache = {}

    def get(name: str) -> Path:
        if name not in cache:
            d = tmp_path_factory.mktemp(f"raw_{name}")
            generate_raw(name, d, CI_SCALE[name], seed=1)
            cache[name] = d
        return cache[name]

    return get
