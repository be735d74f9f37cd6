"""Data for the conformance suite: the study's session datasets (``suite_datasets.sessions``) and SST-5.

The package is deliberately *not* called ``datasets``: the repository root is on ``sys.path`` whenever the suite
runs, and a top-level ``datasets`` there would shadow Hugging Face ``datasets`` (and make
``transformers.utils.is_datasets_available()``, which only asks ``importlib.util.find_spec("datasets")``, report
our package as Hugging Face's). ``tests/datasets/test_hf_datasets_shadowing.py`` proves both.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["shared_data_dir", "repo_root"]


def repo_root() -> Path:
    """Absolute path of the repository checkout (the folder that holds this package)."""
    return Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path | None:
    """Folder of the workplace's shared real data (``sessions/``, ``study/``, ``sst5/``), or ``None``.

    Resolution order (docs/architecture.md, "Conventions"): the environment variable ``GRU4REC_SHARED_DATA``
    when set and non-empty, else ``<repo>/../shared/data``. Returns ``None`` when the resolved folder does not
    exist (a user's fresh clone), so callers can skip with a reason naming :func:`shared_data_candidate`.
    """
    path = shared_data_candidate()
    return path if path.is_dir() else None


def shared_data_candidate() -> Path:
    """The path :func:`shared_data_dir` looks at, whether or not it exists (for skip reasons and notices)."""
    env = os.environ.get("GRU4REC_SHARED_DATA", "").strip()
    if env:
        return Path(env).expanduser().resolve()
    return (repo_root().parent / "shared" / "data").resolve()
