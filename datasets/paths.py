"""Where the suite finds its checkout and the workplace's shared real data.

``gru4rec_conformance.datasets`` holds the study's session datasets (``.sessions``) and SST-5 (``.sst5``); CLI
``python -m gru4rec_conformance.datasets prepare|info|synth``. The folder ``datasets/`` deliberately has no
``__init__.py``: it is an implicit namespace package, so even with the repository root on ``sys.path`` (``python
-c`` run in the root) a bare ``import datasets`` finds Hugging Face's regular package, never this folder, and
without Hugging Face's installed transformers' probe sees no ``datasets`` distribution.
"""

from __future__ import annotations

import os
from pathlib import Path

from gru4rec_conformance import CHECKOUT_ROOT

__all__ = ["repo_root", "shared_data_dir", "shared_data_candidate"]


def repo_root() -> Path:
    """The repository checkout this package runs from; the current directory for an installed wheel."""
    return CHECKOUT_ROOT if CHECKOUT_ROOT is not None else Path.cwd()


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
