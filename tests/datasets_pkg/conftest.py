"""Fixtures of the tests of the top-level ``datasets`` package. The repository root is put on sys.path here (the
suite runs from its checkout; the root conftest.py, owned elsewhere, does the same for the whole tree).

The folder is ``tests/datasets_pkg``, not ``tests/datasets``: pytest puts test folders without ``__init__.py`` on
sys.path, and a folder named ``datasets`` there would be a namespace portion of that name. Our regular package in
the repository root would still win (test_hf_datasets_overlay.py verifies that rule), but nothing should depend
on it. test_hf_datasets_overlay.py also covers the overlay on Hugging Face ``datasets``; its HF-present tests run
in an interpreter that has HF datasets: this one, or the one named by ``GRU4REC_HF_DATASETS_PYTHON``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from datasets import shared_data_candidate, shared_data_dir  # noqa: E402


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
    from datasets.sessions.synthetic import CI_SCALE, generate_raw

    cache = {}

    def get(name: str) -> Path:
        if name not in cache:
            d = tmp_path_factory.mktemp(f"raw_{name}")
            generate_raw(name, d, CI_SCALE[name], seed=1)
            cache[name] = d
        return cache[name]

    return get
