"""Run metadata: suite version (pyproject version + git SHA), framework versions, GRU4REC_* variables.

Everything here is read without importing the heavy frameworks (``importlib.metadata`` only), so the
report header costs nothing when torch or TensorFlow are not needed by the run.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from gru4rec_conformance import CHECKOUT_ROOT
from gru4rec_conformance import __version__ as _SUITE_VERSION
from gru4rec_conformance.conformance._records.records import SuiteVersion

#: The suite's checkout, or None for an installed wheel (then the version is the distribution's, the SHA unknown).
SUITE_ROOT: Path | None = CHECKOUT_ROOT
FRAMEWORK_DISTRIBUTIONS = ("numpy", "pandas", "torch", "tensorflow", "tensorflow-cpu", "keras", "transformers",
                           "pytest", "pytest-xdist")  # fmt: skip


@functools.cache
def suite_version() -> SuiteVersion:
    """``{"version", "git_sha", "dirty", "string"}`` of the suite.

    ``version`` is ``gru4rec_conformance.__version__`` (the checkout's pyproject.toml, or the installed
    distribution's metadata). ``string`` is ``<version>+g<sha7>`` (``.dirty`` appended for uncommitted changes);
    it is what ``--resume`` compares. Installed, or outside a git checkout, the SHA is ``unknown``.
    """
    version = _SUITE_VERSION
    if SUITE_ROOT is None:  # installed: no checkout to ask git about
        return {"version": version, "git_sha": "unknown", "dirty": False, "string": version}
    base = SUITE_ROOT
    sha, dirty = "unknown", False
    try:
        sha = subprocess.run(["git", "-C", str(base), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip() or "unknown"  # fmt: skip
        status = subprocess.run(["git", "-C", str(base), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True).stdout  # fmt: skip
        dirty = bool(status.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    string = version if sha == "unknown" else f"{version}+g{sha[:7]}{'.dirty' if dirty else ''}"
    return {"version": version, "git_sha": sha, "dirty": dirty, "string": string}


def framework_versions() -> dict[str, str]:
    """Installed versions of the frameworks that matter to verdicts (absent ones omitted), plus Python."""
    out = {"python": platform.python_version()}
    for dist in FRAMEWORK_DISTRIBUTIONS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


#: ``GRU4REC_*`` variables whose values reports show: run settings and flags, which hold no secret.
ENV_SHOWN_NAMES = frozenset({
    "GRU4REC_CONFORMANCE_IMPL", "GRU4REC_ISOLATION", "GRU4REC_WORKER_THREADS", "GRU4REC_TORCH_THREADS",
    "GRU4REC_XFAIL_MARK", "GRU4REC_DATASET", "GRU4REC_KINDS", "GRU4REC_RUN_SLOW", "GRU4REC_ALLOW_DOWNLOAD",
    "GRU4REC_META_SELECTION", "GRU4REC_SHARED_DATA", "GRU4REC_HYPERPARAMETERS",
})  # fmt: skip
#: Name patterns whose values are shown too: paths and folders (``GRU4REC_PATH``, ``GRU4REC_MIRROR_DIR``,
#: ``GRU4REC_TF_PYTHON``), the benchmark settings (``GRU4REC_BENCH_*``).
ENV_SHOWN_PATTERNS = (re.compile(r"GRU4REC_(\w+_)?(PATH|DIR|PYTHON)"), re.compile(r"GRU4REC_BENCH_\w+"))
#: What reports print instead of any other value (a URL, a token, a password).
REDACTED = "<redacted>"
#: A value that carries credentials (``scheme://user:secret@host``) is redacted even under a shown name.
_CREDENTIALS = re.compile(r"://[^/\s@]*:[^/\s@]*@")


def env_value_shown(name: str, value: str) -> bool:
    """Whether reports may print the value of ``GRU4REC_*`` variable ``name``: its name is on the allow-list
    (:data:`ENV_SHOWN_NAMES`, :data:`ENV_SHOWN_PATTERNS`) and the value holds no URL credentials."""
    listed = name in ENV_SHOWN_NAMES or any(p.fullmatch(name) for p in ENV_SHOWN_PATTERNS)
    return listed and not _CREDENTIALS.search(value)


def redact_env(env: Mapping[str, object]) -> dict[str, str]:
    """``env`` with every value not shown by :func:`env_value_shown` replaced by :data:`REDACTED` (names kept)."""
    return {k: (str(v) if env_value_shown(k, str(v)) else REDACTED) for k, v in env.items()}


def gru4rec_env() -> dict[str, str]:
    """Every ``GRU4REC_*`` environment variable by name, sorted (so that typos in names are visible), with the
    values of settings, flags and paths, and :data:`REDACTED` for the rest (:func:`redact_env`): reports are
    shared, and a variable may hold a secret (``GRU4REC_TEST_POSTGRES_URL``)."""
    return redact_env({k: v for k, v in sorted(os.environ.items()) if k.startswith("GRU4REC_")})


def platform_info() -> dict[str, str]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor_count": str(os.cpu_count()),
        "executable": sys.executable,
    }
