"""gru4rec-conformance: the conformance suite for reimplementations of GRU4Rec and of SST-5 fine-tuning.

One import namespace for the design card's top-level folders::

    gru4rec_conformance.conformance      checks and the pytest harness (conformance/)
    gru4rec_conformance.reference        the two oracles (reference/)
    gru4rec_conformance.implementations  adapters, mutants, registry (implementations/)
    gru4rec_conformance.datasets         session datasets and SST-5 (datasets/)
    gru4rec_conformance.reports          results, summaries, scoreboard (reports/)
    gru4rec_conformance.benchmarks       epoch-time benchmarks and tuning (benchmarks/)

Installed as a wheel, setuptools' ``package-dir`` mapping in pyproject.toml places each folder under this
package. In a checkout, ``src/gru4rec_conformance/`` holds this file and one relative symbolic link per folder
(``datasets -> ../../datasets``, ...), so ``src/`` on ``sys.path`` (pytest's ``pythonpath`` setting in
pyproject.toml, ``PYTHONPATH=src``, or ``pip install -e .``) imports the same modules under the same names, and
type checkers see an ordinary package. The repository root itself is never put on ``sys.path``: a bare
``import datasets`` always means Hugging Face's.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from pathlib import Path as _Path

_HERE = _Path(__file__).resolve().parent
#: Repository root when this package runs from a checkout (``<root>/src/gru4rec_conformance``), else ``None``
#: (an installed wheel: the folders are real subpackages in site-packages).
CHECKOUT_ROOT: _Path | None = (
    _HERE.parents[1]
    if (_HERE.parents[1] / "pyproject.toml").is_file() and (_HERE.parents[1] / "conformance" / "_harness").is_dir()
    else None
)


def _version() -> str:
    if CHECKOUT_ROOT is not None:  # the checkout's own pyproject.toml wins over any installed metadata
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]

        with open(CHECKOUT_ROOT / "pyproject.toml", "rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    return _metadata.version("gru4rec-conformance")


__version__ = _version()

def import_root() -> _Path:
    """The folder to put on ``PYTHONPATH`` so that another process imports this same ``gru4rec_conformance``.

    ``<checkout>/src`` from a checkout (it holds nothing else, so the repository's folders never become
    top-level names); for an installed wheel, the site-packages folder that holds the package.
    """
    return _HERE.parent


def child_pythonpath(existing: str | None = None) -> str:
    """A ``PYTHONPATH`` value with :func:`import_root` first, then the entries of ``existing`` (``os.pathsep``
    separated; the repository root, if listed, is dropped: it would expose the folders as top-level names)."""
    import os

    drop = {str(import_root())} | ({str(CHECKOUT_ROOT)} if CHECKOUT_ROOT is not None else set())
    keep = [p for p in (existing or "").split(os.pathsep) if p and p.rstrip("/") not in drop]
    return os.pathsep.join([str(import_root()), *keep])
