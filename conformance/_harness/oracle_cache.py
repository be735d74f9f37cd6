"""Disk cache of the reference's oracle results, shared by the runs of one user (``--no-oracle-cache`` turns it off).

The metric checks compare every implementation with bands from the reference's fits on real data (three seeds per
configuration, minutes each on a CPU). Those fits depend only on the suite's own code, the data, the configuration
and the seed, so their results are written here once and read by later runs: a third-party run pays only for its
own fits.

What is stored: JSON objects computed by the suite from the reference's outputs (metrics, epoch times), never
anything the code under test returned (callers store only the reference's results) and never pickles. An entry is
one file ``<sha256 of its key>.json`` holding ``{"schema", "key", "value"}``; it is written to a temporary file in
the same folder and moved into place with :func:`os.replace`, so concurrent runs see either no entry or a whole
one. A reader that finds a torn, corrupt or mismatching entry (another key, another schema) ignores it and the
caller recomputes and rewrites it. After each write the oldest entries (by modification time; a hit refreshes it)
are deleted until the folder is within its size limit.

The key always carries :func:`suite_fingerprint` (the suite's version and a hash of the source files that decide
the reference's results, plus the numeric libraries' versions), so an edited reference never reads stale results.

Location: ``--oracle-cache-dir`` / env ``GRU4REC_ORACLE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gru4rec-conformance/
oracle`` (``~/.cache/...`` when ``XDG_CACHE_HOME`` is unset). Worker processes of isolated adapters see the folder
empty (it is one of the sandbox's hidden paths).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import platform
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_DIR = "GRU4REC_ORACLE_CACHE_DIR"
ENV_MAX_MB = "GRU4REC_ORACLE_CACHE_MB"
#: Default size limit of the folder in MiB: an entry of the metric checks is about 1 KiB.
DEFAULT_MAX_MB = 64.0
#: Version of the entry layout; an entry of another schema is ignored (recomputed).
SCHEMA = 1
_SUFFIX = ".json"
#: Repository-relative folders and files whose sources decide the reference's oracle results.
_FINGERPRINT_SOURCES = (
    "reference/gru4rec",
    "implementations/reference.py",
    "implementations/base.py",
    "conformance/gru4rec/_common.py",
    "conformance/gru4rec/test_metric_conformance.py",
)


def default_dir() -> Path:
    """``$GRU4REC_ORACLE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gru4rec-conformance/oracle`` (``~/.cache`` when
    ``XDG_CACHE_HOME`` is unset or relative, as the XDG specification asks)."""
    env = os.environ.get(ENV_DIR, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "gru4rec-conformance" / "oracle"


@functools.cache
def suite_fingerprint() -> str:
    """A hex digest of the suite's version, the sources that decide the reference's results (the reference
    package, its adapter, the metric code and check module), and the versions of Python, torch and numpy and the
    machine type. Any edit of those sources gives another fingerprint, hence other cache keys."""
    from gru4rec_conformance import __version__

    root = Path(__file__).resolve().parents[2]  # the checkout, or site-packages/gru4rec_conformance
    h = hashlib.sha256()
    for item in (__version__, platform.python_version(), platform.machine(), _version_of("torch"),
                 _version_of("numpy")):  # fmt: skip
        h.update(f"{item}\0".encode())
    for rel in _FINGERPRINT_SOURCES:
        path = root / rel
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            h.update(f"{f.relative_to(root).as_posix()}\0".encode())
            with contextlib.suppress(OSError):
                h.update(f.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def _version_of(module: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return "absent"


def _finite_json(value: Any) -> bool:
    """Whether ``value`` is made of JSON types only, with finite floats (what an entry may hold)."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _finite_json(v) for k, v in value.items())
    return False


class OracleCache:
    """The oracle cache in ``folder`` (created with mode 0700 on the first write), or a disabled one.

    Args:
        folder: where the entries live; None: disabled (:meth:`get` misses, :meth:`put` does nothing).
        max_bytes: size limit of the folder's entries in bytes (oldest evicted first); must be > 0.

    Attributes:
        hits, misses, writes: counts of this process's lookups and stores (shown in the terminal summary).
    """

    def __init__(self, folder: Path | None, max_bytes: int = int(DEFAULT_MAX_MB * (1 << 20))) -> None:
        if max_bytes <= 0:
            raise ValueError(f"the oracle cache's size limit must be > 0 bytes, got {max_bytes}")
        self.folder = Path(folder) if folder is not None else None
        self.max_bytes = int(max_bytes)
        self.hits = self.misses = self.writes = 0

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    @staticmethod
    def full_key(key: Mapping[str, Any]) -> dict[str, Any]:
        """``key`` with the suite's fingerprint and the entry schema added (what is hashed and stored)."""
        return {**dict(key), "suite": suite_fingerprint(), "schema": SCHEMA}

    def path_of(self, key: Mapping[str, Any]) -> Path:
        """The entry file of ``key`` (a JSON object of JSON values). Raises ValueError when disabled."""
        if self.folder is None:
            raise ValueError("the oracle cache is disabled")
        text = json.dumps(self.full_key(key), sort_keys=True, separators=(",", ":"))
        return self.folder / (hashlib.sha256(text.encode()).hexdigest() + _SUFFIX)

    def get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        """The stored value of ``key``, or None: disabled, absent, or an entry that is unreadable, not JSON, of
        another schema or key, or larger than the size limit (the caller recomputes and :meth:`put` replaces it).
        A hit refreshes the entry's modification time (eviction removes the least recently used first)."""
        if self.folder is None:
            return None
        path = self.path_of(key)
        value = self._read(path, self.full_key(key))
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        with contextlib.suppress(OSError):
            os.utime(path)
        return value

    def _read(self, path: Path, full: dict[str, Any]) -> dict[str, Any] | None:
        try:
            with open(path, "rb") as f:
                raw = f.read(self.max_bytes + 1)  # bounded: a huge file is not read whole
        except OSError:
            return None
        if len(raw) > self.max_bytes:
            return None
        try:
            entry = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
        if not isinstance(entry, dict) or entry.get("schema") != SCHEMA or entry.get("key") != full:
            return None
        value = entry.get("value")
        return value if isinstance(value, dict) and _finite_json(value) else None

    def put(self, key: Mapping[str, Any], value: Mapping[str, Any]) -> bool:
        """Store ``value`` (a dict of JSON types, finite floats) under ``key`` atomically, then evict the oldest
        entries beyond the size limit. Returns whether it was written: False when disabled, when ``value`` is not
        plain finite JSON, or when the folder cannot be written (a cache failure never fails a check).
        Raises nothing."""
        if self.folder is None or not _finite_json(dict(value)):
            return False
        full = self.full_key(key)
        data = json.dumps({"schema": SCHEMA, "key": full, "value": dict(value)}, sort_keys=True).encode()
        if len(data) > self.max_bytes:
            return False
        path = self.path_of(key)
        tmp = None
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=_SUFFIX)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            tmp = None
        except OSError:
            return False
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self.writes += 1
        self.evict(keep=path)
        return True

    def entries(self) -> list[tuple[float, int, Path]]:
        """``(mtime, size in bytes, path)`` of every entry, oldest first (temporary files of writers excluded)."""
        if self.folder is None:
            return []
        out = []
        try:
            names = os.listdir(self.folder)
        except OSError:
            return []
        for name in names:
            if not name.endswith(_SUFFIX) or name.startswith("."):
                continue
            p = self.folder / name
            with contextlib.suppress(OSError):
                st = p.stat()
                out.append((st.st_mtime, st.st_size, p))
        return sorted(out)

    def evict(self, keep: Path | None = None) -> int:
        """Delete the oldest entries until their total size is within the limit (``keep`` last of all).
        Returns the number deleted; a file another run deleted first is skipped."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, p in sorted(entries, key=lambda e: (e[2] == keep, e[0])):
            if total <= self.max_bytes:
                break
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                removed += 1
            total -= size
        return removed

    def summary(self) -> str:
        """One line for the terminal summary: where, hits, misses, writes."""
        if self.folder is None:
            return "oracle cache: off (--no-oracle-cache)"
        return f"oracle cache {self.folder}: {self.hits} hit(s), {self.misses} miss(es), {self.writes} written"


def check_folder(folder: Path) -> None:
    """Raise ValueError (one line) when ``folder`` cannot hold the cache: it, or its nearest existing ancestor,
    is not a folder or not writable."""
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{existing} is not writable")
