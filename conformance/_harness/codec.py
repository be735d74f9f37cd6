"""Safe exchange of values between the suite and an adapter worker process.

Only JSON and ``.npy`` files (written and read with ``allow_pickle=False``) cross the boundary; nothing
coming from an implementation is ever unpickled in the suite's process. Supported values:

- ``None``, bool, int, float (NaN/inf allowed), str; numpy scalars (converted to Python scalars);
- numeric, boolean and fixed-width string numpy arrays (object arrays are refused);
- pandas DataFrame / Series (column by column; the index is not transferred);
- list, tuple, set/frozenset, dict (any keys of the supported scalar types);
- the suite's exchange records (:data:`EXCHANGE_TYPES`: ``FitReport``, ``StepTrace``), rebuilt field by field;
- capability objects (:class:`implementations.base.BaseCapabilities`), rebuilt through ``from_mapping`` of one of
  the capability classes in :data:`EXCHANGE_TYPES` (the nearest registered base of the sender's class);
- iterators/generators are materialised into lists (``score_stream``).

Lists of equal-shaped tuples and lists of integer lists are packed column-wise into few ``.npy`` files.

Decoding trusts nothing in the message (the worker may be hostile): a class is looked up by name in the fixed registry
:data:`EXCHANGE_TYPES` (never imported), and every ``.npy`` file is opened without following links, must be a
regular file whose header declares a plain numeric, boolean or fixed-width string dtype (no object or structured
dtype) and whose payload fits the decoder's byte budget (``max_bytes``, summed over one message), checked from the
header before a byte of the payload is read. The parent's codec works relative to a descriptor of the exchange
folder it opened itself (``dir_fd``): writes, reads and the removal after each call never go through a path the
worker could have replaced by a link.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import stat
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gru4rec_conformance.fileio import atomic_path

if TYPE_CHECKING:  # imported lazily at run time (see _capabilities_base)
    from gru4rec_conformance.implementations.base import BaseCapabilities

__all__ = ["Codec", "ExchangeError", "EXCHANGE_TYPES", "DEFAULT_MAX_BYTES", "dumps", "loads"]

_SAFE_KINDS = set("biufcUS")
_INLINE_MAX = 256
#: Default byte budget of the ``.npy`` payloads of one decoded message (2 GiB).
DEFAULT_MAX_BYTES = 2 << 30
#: The only classes that may cross, by the name the encoder writes (``module:QualName``). Fixed here: a decoder
#: never imports a module named in a message, and a name outside this table is refused.
EXCHANGE_TYPES: dict[str, tuple[str, str]] = {
    "gru4rec_conformance.reference.gru4rec.records:FitReport": ("gru4rec_conformance.reference.gru4rec.records", "FitReport"),
    "gru4rec_conformance.reference.gru4rec.records:StepTrace": ("gru4rec_conformance.reference.gru4rec.records", "StepTrace"),
    "gru4rec_conformance.implementations.base:BaseCapabilities": ("gru4rec_conformance.implementations.base", "BaseCapabilities"),
    "gru4rec_conformance.implementations.base:Capabilities": ("gru4rec_conformance.implementations.base", "Capabilities"),
    "gru4rec_conformance.implementations.finetuner.base:FinetunerCapabilities": (
        "gru4rec_conformance.implementations.finetuner.base", "FinetunerCapabilities"),
}  # fmt: skip


class ExchangeError(TypeError):
    """A value cannot cross the worker boundary safely (names the type and where it was found)."""


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, allow_nan=True, separators=(",", ":")).encode("utf-8")


def loads(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


def _is_scalar(x: Any) -> bool:
    return isinstance(x, (bool, int, float, np.generic)) and not isinstance(x, np.void)


def _class_ref(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _registered_class(ref: object) -> type:
    """The class registered in :data:`EXCHANGE_TYPES` under ``ref`` (its module, one of the suite's, is named by
    the table, never by the message); raises :class:`ExchangeError` for any other name."""
    import importlib

    entry = EXCHANGE_TYPES.get(ref) if isinstance(ref, str) else None
    if entry is None:
        raise ExchangeError(f"refusing to rebuild {ref!r}: only the registered exchange types may cross "
                            f"({', '.join(sorted(EXCHANGE_TYPES))})")  # fmt: skip
    cls = getattr(importlib.import_module(entry[0]), entry[1], None)
    if not isinstance(cls, type):
        raise ExchangeError(f"refusing to rebuild {ref!r}: {entry[0]} has no class {entry[1]}")
    return cls


def _exchange_name(cls: type) -> str | None:
    """The registered name of ``cls`` or of its nearest registered base class (None when there is none)."""
    for base in cls.__mro__:
        ref = _class_ref(base)
        if ref in EXCHANGE_TYPES:
            return ref
    return None


class Codec:
    """Encoder/decoder bound to an exchange directory.

    Args:
        directory: folder shared by the two processes for ``.npy`` files.
        prefix: file-name prefix of this side (``"p"`` parent, ``"c"`` child), so the sides never clash.
        max_bytes: byte budget of the ``.npy`` payloads decoded between two :meth:`clear` calls (one message);
            a file past it raises :class:`ExchangeError` before it is read.
        dir_fd: an open descriptor of ``directory`` (the parent's side): every file is then written, read and
            removed relative to it (``openat``/``unlinkat``), never through the path, so a worker that replaces the
            folder by a symbolic link or another folder cannot redirect the suite's reads, writes or deletions. The
            caller owns and closes it.
    """

    def __init__(self, directory: Path | str, prefix: str, max_bytes: int = DEFAULT_MAX_BYTES,
                 dir_fd: int | None = None) -> None:  # fmt: skip
        self.directory = Path(directory)
        self.prefix = prefix
        self.max_bytes = int(max_bytes)
        self.dir_fd = dir_fd
        self.closed = False  # set by the owner of dir_fd once it closed it: no file is touched after that
        self._loaded = 0
        self._counter = itertools.count()

    # -- encoding ----------------------------------------------------------------------------------------
    def encode(self, value: Any, where: str = "value") -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float):
            return value
        if isinstance(value, np.generic):
            if isinstance(value, (np.bool_, np.integer, np.floating)):
                return value.item()
            raise ExchangeError(f"{where}: numpy scalar of dtype {value.dtype} cannot be exchanged")
        if isinstance(value, np.ndarray):
            return self._encode_array(value, where)
        if isinstance(value, (list, types.GeneratorType)) or _is_iterator(value):
            items = list(value)
            packed = self._try_rows(items, where) or self._try_ragged(items, where)
            if packed is not None:
                return packed
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(items)]
        if isinstance(value, tuple):
            return {"__tuple__": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, (set, frozenset)):
            return {"__set__": [self.encode(v, f"{where}{{}}") for v in sorted(value, key=repr)]}
        if isinstance(value, dict):
            return {
                "__dict__": [
                    [self.encode(k, f"{where} key"), self.encode(v, f"{where}[{k!r}]")] for k, v in value.items()
                ]
            }
        caps = _capabilities_base()
        if caps is not None and isinstance(value, caps):
            return {"__capabilities__": _exchange_name(type(value)) or _class_ref(caps), "data": value.to_dict()}
        if dataclasses.is_dataclass(value) and getattr(value, "__exchange__", False):
            name = _exchange_name(type(value))
            if name is None:
                raise ExchangeError(f"{where}: {_class_ref(type(value))} is not a registered exchange type")
            fields = {
                f.name: self.encode(getattr(value, f.name), f"{where}.{f.name}") for f in dataclasses.fields(value)
            }
            return {"__dataclass__": name, "fields": fields}
        pd = _pandas_if_loaded()
        if pd is not None and isinstance(value, pd.DataFrame):
            names = [str(c) for c in value.columns]
            if len(set(names)) != len(names):
                raise ExchangeError(
                    f"{where}: DataFrame column names must be unique strings, got {list(value.columns)}"
                )
            cols = [
                self._encode_array(_column_array(value[c], f"{where}[{c!r}]"), f"{where}[{c!r}]") for c in value.columns
            ]
            return {"__dataframe__": {"columns": names, "data": cols}}
        if pd is not None and isinstance(value, pd.Series):
            return {
                "__series__": {
                    "name": None if value.name is None else str(value.name),
                    "data": self._encode_array(_column_array(value, where), where),
                }
            }
        raise ExchangeError(
            f"{where}: values of type {type(value).__module__}.{type(value).__qualname__} cannot be exchanged"
        )

    def _encode_array(self, arr: np.ndarray, where: str) -> Any:
        if arr.dtype.kind not in _SAFE_KINDS:
            raise ExchangeError(f"{where}: arrays of dtype {arr.dtype} (kind {arr.dtype.kind!r}) cannot be exchanged")
        if arr.size <= _INLINE_MAX and arr.dtype.kind in "biuf":
            return {"__array__": {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": arr.ravel().tolist()}}
        name = f"{self.prefix}{next(self._counter)}.npy"
        if self.closed:
            raise ExchangeError(f"{where}: the exchange folder is closed")
        if self.dir_fd is not None:  # the parent: relative to the folder it opened, never following a link
            try:
                os.unlink(name, dir_fd=self.dir_fd)  # whatever the worker may have planted under this name
            except FileNotFoundError:
                pass
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(name, flags, 0o644, dir_fd=self.dir_fd), "wb") as fh:
                np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)
            return {"__ndarray__": name}
        # atomic, not durable: the exchange folder lives for one call, a crash discards it anyway
        with atomic_path(self.directory / name, durable=False) as tmp, open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)
        return {"__ndarray__": name}

    def _try_rows(self, items: list[Any], where: str) -> Any:
        """Column-pack a list of equal-length tuples of scalars / same-shaped numeric arrays."""
        if len(items) < 2 or not all(isinstance(t, tuple) for t in items):
            return None
        width = len(items[0])
        if width == 0 or any(len(t) != width for t in items):
            return None
        columns, kinds = [], []
        for j in range(width):
            col = [t[j] for t in items]
            if all(_is_scalar(v) for v in col):
                arr = np.asarray(col)
                if arr.dtype.kind not in "biuf":
                    return None
                kinds.append("scalar")
            elif (
                all(isinstance(v, np.ndarray) and v.dtype.kind in "biuf" for v in col)
                and len({v.shape for v in col}) == 1
            ):
                arr = np.stack(col)
                kinds.append("array")
            else:
                return None
            columns.append(self._encode_array(arr, f"{where} column {j}"))
        return {"__rows__": {"kinds": kinds, "columns": columns}}

    def _try_ragged(self, items: list[Any], where: str) -> Any:
        """Pack a list of integer lists (prefixes) as flat values + offsets."""
        if len(items) < 16 or not all(isinstance(s, (list, tuple)) for s in items):
            return None
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for s in items for v in s):
            return None
        lengths = np.fromiter((len(s) for s in items), dtype=np.int64, count=len(items))
        flat = np.fromiter((int(v) for s in items for v in s), dtype=np.int64, count=int(lengths.sum()))
        return {
            "__ragged__": {
                "values": self._encode_array(flat, where),
                "lengths": self._encode_array(lengths, where),
                "tuples": isinstance(items[0], tuple),
            }
        }

    # -- decoding ----------------------------------------------------------------------------------------
    def decode(self, obj: Any) -> Any:
        if isinstance(obj, list):
            return [self.decode(v) for v in obj]
        if not isinstance(obj, dict):
            return obj
        if len(obj) != 1 and "__capabilities__" not in obj and "__dataclass__" not in obj:
            raise ExchangeError(f"malformed exchange object with keys {sorted(obj)}")
        if "__array__" in obj:
            a = obj["__array__"]
            dtype = np.dtype(a["dtype"])
            if dtype.kind not in "biuf" or dtype.fields is not None:
                raise ExchangeError(f"refusing an inline array of dtype {dtype}")
            return np.asarray(a["data"], dtype=dtype).reshape(a["shape"])
        if "__ndarray__" in obj:
            return self._load(obj["__ndarray__"])
        if "__tuple__" in obj:
            return tuple(self.decode(v) for v in obj["__tuple__"])
        if "__set__" in obj:
            return {self.decode(v) for v in obj["__set__"]}
        if "__dict__" in obj:
            return {_hashable(self.decode(k)): self.decode(v) for k, v in obj["__dict__"]}
        if "__rows__" in obj:
            r = obj["__rows__"]
            cols = [self.decode(c) for c in r["columns"]]
            out_cols = [c.tolist() if k == "scalar" else list(c) for c, k in zip(cols, r["kinds"])]
            return [tuple(row) for row in zip(*out_cols)]
        if "__ragged__" in obj:
            r = obj["__ragged__"]
            values, lengths = self.decode(r["values"]), self.decode(r["lengths"])
            bounds = np.concatenate([[0], np.cumsum(lengths)])
            conv = tuple if r.get("tuples") else list
            return [conv(values[bounds[i] : bounds[i + 1]].tolist()) for i in range(len(lengths))]
        if "__dataframe__" in obj:
            import pandas as pd

            d = obj["__dataframe__"]
            return pd.DataFrame({name: self.decode(col) for name, col in zip(d["columns"], d["data"])})
        if "__series__" in obj:
            import pandas as pd

            d = obj["__series__"]
            return pd.Series(self.decode(d["data"]), name=d["name"])
        if "__capabilities__" in obj:
            cls = _registered_class(obj["__capabilities__"])
            caps = _capabilities_base()
            if caps is None or not (isinstance(cls, type) and issubclass(cls, caps)):
                raise ExchangeError(f"{obj['__capabilities__']!r} is not a capabilities class")
            return cls.from_mapping(obj["data"], source=f"worker capabilities ({obj['__capabilities__']})")
        if "__dataclass__" in obj:
            cls = _registered_class(obj["__dataclass__"])
            if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and getattr(cls, "__exchange__", False)):
                raise ExchangeError(f"{obj['__dataclass__']!r} is not an exchange dataclass")
            return cls(**{k: self.decode(v) for k, v in obj["fields"].items()})
        raise ExchangeError(f"unknown exchange tag {next(iter(obj))!r}")

    def _load(self, name: str) -> np.ndarray:
        if (
            not isinstance(name, str)
            or "/" in name
            or "\\" in name
            or name.startswith(".")
            or not name.endswith(".npy")
        ):
            raise ExchangeError(f"refusing exchange file name {name!r}")
        if self.closed:
            raise ExchangeError(f"exchange file {name}: the exchange folder is closed")
        # no link followed, no FIFO or device waited on in open(); relative to the folder's descriptor when held
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            if self.dir_fd is not None:
                fd = os.open(name, flags, dir_fd=self.dir_fd)
            else:
                fd = os.open(self.directory / name, flags)
        except OSError as exc:
            raise ExchangeError(f"exchange file {name}: cannot open it without following links: {exc}") from None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ExchangeError(f"exchange file {name} is not a regular file")
            try:
                version = np.lib.format.read_magic(fh)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
                else:
                    raise ExchangeError(f"exchange file {name}: unsupported .npy format version {version}")
            except ValueError as exc:
                raise ExchangeError(f"exchange file {name}: not a valid .npy header: {exc}") from None
            if dtype.hasobject or dtype.fields is not None or dtype.kind not in _SAFE_KINDS:
                raise ExchangeError(f"exchange file {name}: dtype {dtype} is refused (only plain numeric, boolean "
                                    "and fixed-width string arrays may cross)")  # fmt: skip
            nbytes = math.prod(shape) * dtype.itemsize
            if self._loaded + nbytes > self.max_bytes:
                raise ExchangeError(f"exchange file {name}: an array of shape {tuple(shape)} and dtype {dtype} "
                                    f"({nbytes} bytes) exceeds the reply budget of {self.max_bytes} bytes "
                                    f"({self._loaded} bytes already received)")  # fmt: skip
            if info.st_size < fh.tell() + nbytes:
                raise ExchangeError(f"exchange file {name} is truncated: {info.st_size} bytes for a payload of "
                                    f"{nbytes} bytes")  # fmt: skip
            self._loaded += nbytes
            fh.seek(0)
            arr: np.ndarray = np.lib.format.read_array(fh, allow_pickle=False)
        return arr

    def clear(self) -> None:
        """Remove every exchange file of both sides (called by the parent after each completed call) and reset
        the byte budget."""
        self._loaded = 0
        if self.closed:
            return
        if self.dir_fd is not None:  # unlinkat on names in the folder held open: a link is removed, not followed
            with os.scandir(self.dir_fd) as entries:
                names = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
            for name in names:
                try:
                    os.unlink(name, dir_fd=self.dir_fd)
                except FileNotFoundError:
                    pass
            return
        for entry in os.scandir(self.directory):
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)


def _is_iterator(value: Any) -> bool:
    return hasattr(value, "__next__") and hasattr(value, "__iter__") and not isinstance(value, (str, bytes, dict))


def _hashable(x: Any) -> Any:
    return tuple(x) if isinstance(x, list) else x


def _column_array(series: Any, where: str) -> np.ndarray:
    arr: np.ndarray = series.to_numpy()
    if arr.dtype.kind == "O":
        values = arr.tolist()
        if all(isinstance(v, str) for v in values):
            return np.asarray(values, dtype=str)
        raise ExchangeError(f"{where}: object column with non-string values cannot be exchanged")
    if arr.dtype.kind not in _SAFE_KINDS:
        # pandas extension dtypes (nullable ints, Arrow strings) are converted to plain numpy first
        try:
            arr = np.asarray(series.to_numpy(dtype=series.dtype.numpy_dtype))
        except (AttributeError, TypeError, ValueError):
            raise ExchangeError(f"{where}: column dtype {series.dtype} cannot be exchanged") from None
    return arr


def _pandas_if_loaded() -> Any:
    import sys

    return sys.modules.get("pandas")


def _capabilities_base() -> type[BaseCapabilities] | None:
    import sys

    base = sys.modules.get("gru4rec_conformance.implementations.base")
    caps: type[BaseCapabilities] | None = getattr(base, "BaseCapabilities", None)
    return caps
