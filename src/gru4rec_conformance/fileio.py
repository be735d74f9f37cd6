"""Atomic file writes, new run folders and file hashes: the one implementation the whole suite uses.

Atomic write (:func:`atomic_path`, :func:`atomic_write_bytes`, :func:`atomic_write_text`,
:func:`atomic_write_json`): the content goes to a temporary file in the destination's own folder (same file
system, so the rename is atomic), the file is fsynced, ``os.replace`` puts it onto the destination and the folder
is fsynced so that the rename itself survives a crash. A reader sees the old file or the new one, never a part of
either; after a failure (an exception, including ``KeyboardInterrupt``) the old file is intact and the temporary
file is removed. A process killed between the two steps can leave a temporary file
(``.<name>.tmp-<pid>-<hex><suffix>``): :func:`remove_stale_temporaries` deletes those.

The new file is created with mode ``0o666`` less the process umask (``0o644`` under the usual umask ``022``), as
``open()`` would create it -- not ``tempfile.mkstemp``'s ``0o600``; ``mode=`` sets it whatever the umask (reports
use ``0o644``, so that a run under umask ``077`` still writes files others can read). The destination's folder must
exist.
``os.replace`` replaces a symbolic link at the destination, not the file it points to.

Run folder (:func:`new_run_dir`): ``<root>/<prefix><UTC YYYYmmddTHHMMSSZ>`` made with ``mkdir`` (which fails on
an existing name), so an earlier run is never reused or overwritten: on a collision the name gets a ``-N``
suffix.

File hash (:func:`sha256_file`): hex SHA-256 of a file's bytes, read in chunks (for manifests and caches).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "TMP_MARK",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "remove_stale_temporaries",
    "utc_stamp",
    "new_run_dir",
    "sha256_file",
]

#: Marks the suite's temporary files: ``.<name>.tmp-<pid>-<8 hex><suffix>`` next to the destination ``<name>``
#: (the destination's suffix last, so writers that choose a format by extension, as matplotlib and pandas do,
#: choose the destination's).
TMP_MARK = ".tmp-"
#: Folder fsync errors that mean "not supported by this file system" (the write itself is complete).
_FSYNC_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF}


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX; a no-op where folders cannot be opened, e.g. Windows)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def _create_temporary(path: Path) -> Path:
    """Create (exclusively, mode ``0o666`` less the umask) an empty temporary file next to ``path``."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}{path.suffix}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666))
            return tmp
        except FileExistsError:  # 32 random bits: a clash is a freak; draw again
            continue
    raise FileExistsError(f"{path.parent}: cannot create a temporary file for {path.name}")


def _fsync_file(tmp: Path) -> None:
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, durable: bool = True, mode: int | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path`` for a writer that wants a file name (pyarrow, ``savefig``,
    ``np.save``, ``shutil.copyfile``, ...); when the block ends without an exception, that file becomes ``path``.

    The temporary file already exists (empty, mode ``0o666`` less the umask) so that its name is reserved; the
    block overwrites it. On success it is fsynced, renamed onto ``path`` with ``os.replace`` and the folder is
    fsynced; ``durable=False`` skips both fsyncs (for scratch files that need atomicity, not crash survival).
    ``mode`` (e.g. ``0o644``): the new file's permission bits, set with ``chmod`` before the rename (umask ignored).
    On any exception in the block or in these steps the temporary file is removed and the exception propagates;
    ``path`` then still holds its old content (or still does not exist).

    Raises ``FileNotFoundError`` when the folder of ``path`` does not exist, ``OSError`` for the other file system
    errors (a failing folder fsync after the rename included: the new file is then in place).
    """
    path = Path(path)
    tmp = _create_temporary(path)
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        if durable:
            _fsync_file(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    if durable:
        _fsync_folder(path.parent)


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, durable: bool = True, mode: int | None = None
) -> Path:
    """Replace ``path`` atomically with ``data`` (see :func:`atomic_path` for the guarantees, ``durable``, ``mode``
    and errors). Returns ``path`` as a ``Path``."""
    with atomic_path(path, durable=durable, mode=mode) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(
    path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", durable: bool = True, mode: int | None = None
) -> Path:
    """Replace ``path`` atomically with ``text`` encoded as ``encoding`` (no newline translation: ``"\\n"`` is
    written as is on every platform). Returns ``path``. Raises ``UnicodeEncodeError`` for text the encoding
    cannot hold (nothing is written then), and what :func:`atomic_path` raises."""
    return atomic_write_bytes(path, text.encode(encoding), durable=durable, mode=mode)


def atomic_write_json(
    path: str | os.PathLike[str],
    obj: Any,
    *,
    indent: int | None = 1,
    sort_keys: bool = False,
    default: Callable[[Any], Any] | None = None,
    allow_nan: bool = True,
    trailing_newline: bool = False,
    durable: bool = True,
    mode: int | None = None,
) -> Path:
    """Replace ``path`` atomically with ``obj`` as UTF-8 JSON (``json.dumps`` with these ``indent``,
    ``sort_keys``, ``default`` and ``allow_nan``; non-ASCII escaped as ``json.dumps`` does by default), followed
    by ``"\\n"`` when ``trailing_newline``. Returns ``path``.

    The text is made before any file is touched, so ``TypeError`` (a value JSON cannot hold and ``default`` does
    not convert) or ``ValueError`` (NaN/inf with ``allow_nan=False``, a circular reference) leave ``path``
    unchanged. File system errors: as :func:`atomic_path`.
    """
    text = json.dumps(obj, indent=indent, sort_keys=sort_keys, default=default, allow_nan=allow_nan)
    return atomic_write_text(path, text + ("\n" if trailing_newline else ""), durable=durable, mode=mode)


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> int:
    """Delete the temporary files (``.<name>.tmp-*``) that interrupted atomic writes left in ``folder``; files
    that cannot be removed are left. Only call it when no other process is writing into ``folder``: its live
    temporary files look the same. Returns how many were removed (0 for a missing folder)."""
    removed = 0
    for p in Path(folder).glob(f".*{TMP_MARK}*"):
        with contextlib.suppress(OSError):
            p.unlink()
            removed += 1
    return removed


def utc_stamp(when: _dt.datetime | None = None) -> str:
    """``YYYYmmddTHHMMSSZ`` of ``when`` (an aware datetime, converted to UTC; default: now), e.g.
    ``20261130T040332Z``. Raises ``ValueError`` for a naive datetime (its time zone would be a guess)."""
    if when is None:
        when = _dt.datetime.now(_dt.timezone.utc)
    elif when.tzinfo is None:
        raise ValueError("utc_stamp: a naive datetime has no time zone; pass an aware one")
    return when.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def new_run_dir(
    root: str | os.PathLike[str],
    *,
    prefix: str = "",
    first_suffix: int = 1,
    attempts: int = 1000,
    when: _dt.datetime | None = None,
) -> Path:
    """Create and return a new, empty folder ``<root>/<prefix><stamp>`` (stamp: :func:`utc_stamp` of ``when``).

    ``root`` is created (with parents) when missing. The folder is made with ``mkdir``, which fails on an
    existing name, so an existing run folder is never reused, even by a concurrent process: on a collision the
    next names tried are ``<prefix><stamp>-<first_suffix>``, ``-<first_suffix + 1>``, ... (the reports number the
    second run of a second ``-2``, the benchmarks ``-1``). Raises ``FileExistsError`` when ``attempts`` names are
    all taken, ``OSError`` when ``root`` cannot be created or written.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    stamp = prefix + utc_stamp(when)
    for k in range(attempts):
        folder = root / (stamp if k == 0 else f"{stamp}-{first_suffix + k - 1}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"{root}: no free run folder name for {stamp} ({attempts} tried)")


def sha256_file(path: str | os.PathLike[str], chunk_bytes: int = 8 << 20) -> str:
    """Hex SHA-256 of the bytes of the file at ``path``, read ``chunk_bytes`` at a time (memory stays bounded for
    any file size). Raises ``FileNotFoundError`` / ``IsADirectoryError`` / ``OSError`` as ``open`` does."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk_bytes), b""):
            h.update(block)
    return h.hexdigest()
