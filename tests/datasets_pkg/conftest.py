"""Fixtures of the tests of ``gru4rec_conformance.datasets`` (the folder ``datasets/``).

The folder is ``tests/datasets_pkg``, not ``tests/datasets``: pytest puts test folders without ``__init__.py`` on
sys.path, and a folder named ``datasets`` there would shadow Hugging Face's ``datasets``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gru4rec_conformance.datasets.paths import shared_data_candidate, shared_data_dir


@pytest.fixture(scope="session")
def shared_sessions() -> Path:
    """<shared>/sessions, or skip with the path that was looked at."""
    root = shared_data_dir()
    if root is None or not (root / "sessions").is_dir():
        pytest.skip(
            f"real session slices absent: {shared_data_candidate() / 'sessions'} not found "
            "(set GRU4REC_SHARED_DATA to the shared data folder)"
        )
    return root / "sessions"


@pytest.fixture(scope="session")
def synthetic_raw(tmp_path_factory):
    """Callable name -> folder with the CI-size synthetic raw files of that dataset (generated once, seed 1)."""
    from gru4rec_conformance.datasets.sessions.synthetic import CI_SCALE, generate_raw

    cache = {}

    def get(name: str) -> Path:
        if name not in cache:
            d = tmp_path_factory.mktemp(f"raw_{name}")
            generate_raw(name, d, CI_SCALE[name], seed=1)
            cache[name] = d
        return cache[name]

    return get
