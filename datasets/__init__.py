"""Data for the conformance suite: the study's session datasets (``datasets.sessions``) and SST-5 (``datasets.sst5``),
laid over Hugging Face ``datasets`` when that is installed.

Why an overlay. The design fixes a top-level package ``datasets/`` (CLI ``python -m datasets prepare|info|synth``),
and the suite always runs from its checkout with the repository root first on ``sys.path``. Hugging Face's
distribution ``datasets`` has the same import name, and transformers 5.x decides whether it is available with
``importlib.util.find_spec("datasets")`` alone (``transformers.utils.is_datasets_available``): any top-level
``datasets`` on ``sys.path`` is taken for Hugging Face's, and ``transformers.trainer`` then uses
``datasets.Dataset``. So this package makes both work in one module object:

- When the distribution ``datasets`` is installed (``importlib.metadata``; its package directory located with
  ``dist.locate_file("datasets/__init__.py")``, ignored when that resolves to this folder), Hugging Face's package
  directory is appended to ``__path__`` and Hugging Face's ``__init__.py`` is executed in this module's namespace
  (compiled under its own file name, so tracebacks point at it). ``import datasets`` then exposes Hugging Face's
  complete API (``Dataset``, ``load_dataset``, ``datasets.arrow_dataset``, ``__version__``, ...), and our
  subpackages (``datasets.sessions``, ``datasets.sst5``) stay importable: this folder comes first on ``__path__``.
  Our submodule names therefore never equal Hugging Face's top-level module names (HF 5.2.0: arrow_dataset,
  arrow_reader, arrow_writer, builder, combine, config, data_files, dataset_dict, distributed, exceptions,
  fingerprint, hub, info, inspect, iterable_dataset, load, naming, search, splits, streaming, table, commands,
  download, features, filesystems, formatting, io, packaged_modules, parallel, utils); private helpers carry the
  ``_suite_`` prefix. ``tests/datasets_pkg/test_hf_datasets_overlay.py`` checks this against the installed file
  list. Our helpers below are defined after the overlay, so Hugging Face's ``__init__`` cannot replace them.
- When it is not installed, this package is plain. transformers' probe still reports "datasets available" (it
  finds this package), and ``transformers.Trainer`` would fail with an obscure ``AttributeError`` on
  ``datasets.Dataset``; code that uses transformers' Trainer calls :func:`require_hf_datasets` first, which
  raises a clear ``ImportError``. Hugging Face ``datasets`` is a declared dependency of every environment that
  has transformers (pyproject extra ``finetuner``).

If Hugging Face's package is installed but fails to import, ``import datasets`` raises an ``ImportError`` naming
its directory and version (the original error chained): a half-imported overlay would mislead transformers.
"""

from __future__ import annotations

# Private aliases: HF's __init__ runs in this namespace (star imports included) and must not rebind what our
# helpers use.
import importlib.metadata as _metadata
import os as _os
from pathlib import Path as _Path

_OUR_DIR = _Path(__file__).resolve().parent


def _find_hf_datasets() -> tuple[str | None, _Path | None]:
    """(version, package directory) of the installed Hugging Face ``datasets`` distribution.

    ``(None, None)`` when the distribution is not installed; ``(version, None)`` when its metadata is found but
    ``datasets/__init__.py`` is not where the metadata says (an editable or broken install), or is this folder.
    """
    try:
        dist = _metadata.distribution("datasets")
    except _metadata.PackageNotFoundError:
        return None, None
    try:
        init = _Path(dist.locate_file("datasets/__init__.py")).resolve()
    except (OSError, TypeError, ValueError):
        return dist.version, None
    if not init.is_file() or init.parent == _OUR_DIR:
        return dist.version, None
    return dist.version, init.parent


def _overlay_hf_datasets(namespace: dict) -> tuple[str | None, _Path | None]:
    """Append HF's package directory to ``__path__`` and run HF's ``__init__.py`` in ``namespace``.

    Returns :func:`_find_hf_datasets`'s (version, directory); the overlay happened when the directory is not
    ``None``. Raises ``ImportError`` (chaining the original exception) when HF's ``__init__`` fails.
    """
    version, hf_dir = _find_hf_datasets()
    if hf_dir is None:
        return version, None
    init = hf_dir / "__init__.py"
    if str(hf_dir) not in namespace["__path__"]:
        namespace["__path__"].append(str(hf_dir))  # after ours: our subpackages are found first
    keep = {k: namespace[k] for k in ("__doc__", "__file__", "__spec__", "__loader__", "__path__", "__package__")
            if k in namespace}
    try:
        # dont_inherit: HF's code must not pick up this module's `from __future__ import annotations`.
        code = compile(init.read_bytes(), str(init), "exec", dont_inherit=True)
        exec(code, namespace)
    except Exception as e:
        raise ImportError(f"Hugging Face datasets {version} at {hf_dir} failed to import inside the suite's "
                          f"`datasets` overlay ({_OUR_DIR / '__init__.py'}): {type(e).__name__}: {e}") from e
    namespace.update(keep)
    return version, hf_dir


_HF_VERSION, _HF_DIR = _overlay_hf_datasets(globals())

_OURS = ["require_hf_datasets", "repo_root", "shared_data_dir", "shared_data_candidate"]
if _HF_DIR is None:
    __all__ = list(_OURS)
elif "__all__" in globals():  # HF 5.2.0 defines none: `from datasets import *` then gives HF's names and ours
    __all__ = [*globals()["__all__"], *(n for n in _OURS if n not in globals()["__all__"])]


def require_hf_datasets(purpose: str) -> str:
    """Return the installed Hugging Face ``datasets`` version; raise a clear ``ImportError`` when it is absent.

    Call it before using ``transformers.Trainer`` (or anything else that relies on transformers'
    ``is_datasets_available()``): without Hugging Face ``datasets`` this package is the only ``datasets`` on
    ``sys.path``, transformers' probe takes it for Hugging Face's, and the Trainer fails later with an
    ``AttributeError`` on ``datasets.Dataset``.

    Args:
        purpose: what needs it, named in the message (e.g. ``"the reference fine-tuner"``).

    Returns:
        the version string of the installed distribution (e.g. ``"5.2.0"``).

    Raises:
        ImportError: the ``datasets`` distribution is not installed, or its package directory was not found
            where its metadata says (an editable or broken install).
    """
    if _HF_DIR is not None:
        return _HF_VERSION
    where = (f"the distribution datasets {_HF_VERSION} is installed but its package directory was not found "
             "where its metadata says (editable or broken install); " if _HF_VERSION else "")
    raise ImportError(f"{purpose} needs Hugging Face `datasets`: {where}Hugging Face `datasets` must be installed "
                      "next to transformers: the suite's own `datasets/` package is on sys.path and transformers' "
                      "availability probe would take it for Hugging Face's; pip install datasets==5.2.0")


def repo_root() -> _Path:
    """Absolute path of the repository checkout (the folder that holds this package)."""
    return _OUR_DIR.parent


def shared_data_dir() -> _Path | None:
    """Folder of the workplace's shared real data (``sessions/``, ``study/``, ``sst5/``), or ``None``.

    Resolution order (docs/architecture.md, "Conventions"): the environment variable ``GRU4REC_SHARED_DATA``
    when set and non-empty, else ``<repo>/../shared/data``. Returns ``None`` when the resolved folder does not
    exist (a user's fresh clone), so callers can skip with a reason naming :func:`shared_data_candidate`.
    """
    path = shared_data_candidate()
    return path if path.is_dir() else None


def shared_data_candidate() -> _Path:
    """The path :func:`shared_data_dir` looks at, whether or not it exists (for skip reasons and notices)."""
    env = _os.environ.get("GRU4REC_SHARED_DATA", "").strip()
    if env:
        return _Path(env).expanduser().resolve()
    return (repo_root().parent / "shared" / "data").resolve()
