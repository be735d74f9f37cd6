"""Translation helpers shared by the adapters of GitHub-only implementations (I/O, seeding, spying).

Everything here *translates* (implementations/README.md): it writes the files an implementation reads, maps
item ids, seeds the random generators the implementation uses, and observes (never alters) the
implementation's own loops. No defect is fixed here.
"""

from __future__ import annotations

import contextlib
import random
import tempfile
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gru4rec_conformance.fileio import atomic_path

__all__ = [
    "check_session_frame",
    "write_sessions",
    "seed_everything",
    "spy_generator",
    "patched",
    "TempDir",
    "layers_list",
    "module_weights",
    "load_module_weights",
    "parameter_arrays",
    "load_parameter_arrays",
    "rows_touched",
]


def check_session_frame(df: Any, what: str = "train_df"):
    """Validate a session frame and return a copy with ``SessionId``/``ItemId`` int64 and ``Time`` float64.

    Raises:
        ValueError: naming ``what`` and the column, when a column is missing or not numeric.
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{what}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in ("SessionId", "ItemId", "Time") if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; columns are {list(df.columns)}")
    out = pd.DataFrame(index=range(len(df)))
    for col, dtype in (("SessionId", "int64"), ("ItemId", "int64"), ("Time", "float64")):
        values = df[col].to_numpy()
        try:
            out[col] = values.astype(dtype)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}: column {col!r} must be numeric ({exc})") from None
    return out


def write_sessions(df: Any, path: Path, sep: str, names: Sequence[str] = ("SessionId", "ItemId", "Time")) -> Path:
    """Write a session frame as the delimited text file an implementation reads (header = ``names``).

    The file is written atomically (``gru4rec_conformance.fileio.atomic_path``: old or new file, never a part).
    """
    out = df[["SessionId", "ItemId", "Time"]].copy()
    out.columns = list(names)
    path = Path(path)
    with atomic_path(path) as tmp:
        out.to_csv(tmp, sep=sep, index=False, float_format="%.17g")
    return path


def seed_everything(seed: int, torch_too: bool = True) -> None:
    """Seed Python's, NumPy's legacy global and (optionally) torch's global generators, as the
    implementations' own scripts do (they use the global generators)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    if torch_too:
        import torch

        torch.manual_seed(seed)


def spy_generator(gen: Generator[Any, Any, Any], on_yield: Callable[[dict, Any], None]) -> Iterator[Any]:
    """Re-yield ``gen``'s items; before each, call ``on_yield(frame_locals, item)`` with the generator's
    local variables at its ``yield`` (read-only use: lane bookkeeping such as ``iters``/``start``)."""
    for item in gen:
        frame = getattr(gen, "gi_frame", None)  # a generator object (typing.Generator has no gi_frame)
        on_yield(dict(frame.f_locals) if frame is not None else {}, item)
        yield item


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any):
    """Temporarily set ``obj.name = value`` (instrumentation of a module attribute), restored on exit."""
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield old
    finally:
        setattr(obj, name, old)


class TempDir:
    """A private temporary folder, removed by :meth:`close`."""

    def __init__(self, prefix: str) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=prefix))

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.path, ignore_errors=True)


def layers_list(value: Any, name: str = "layers") -> list[int]:
    """``layers`` as a list of positive ints (official semantics: int, list, or "100/100")."""
    if isinstance(value, str):
        value = [int(v) for v in value.split("/")]
    if isinstance(value, (int, np.integer)):
        value = [int(value)]
    try:
        out = [int(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected an int or a list of ints, got {value!r}") from None
    if not out or any(v <= 0 for v in out):
        raise ValueError(f"{name}: layer sizes must be positive, got {value!r}")
    return out


def module_weights(module: Any, rows: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Copies of every parameter of a torch ``nn.Module`` as numpy arrays, under ``named_parameters()`` names
    (the ``get_weights`` hook of an adapter whose implementation is one torch module).

    ``rows``: parameter name → the rows (axis 0) to show, a slice or an integer array, e.g. the item rows in
    ``item_ids()`` order without the implementation's padding row; other parameters are shown whole."""
    return parameter_arrays(dict(module.named_parameters()), rows)


def parameter_arrays(
    named: Mapping[str, Any],
    rows: Mapping[str, Any] | None = None,
    convert: Callable[[str, np.ndarray], np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """As :func:`module_weights` for a mapping name → torch parameter; ``convert(name, array)`` (optional) turns
    each copy (after ``rows``) into the layout shown (e.g. gate blocks reordered)."""
    rows = rows or {}
    out = {}
    for k, p in named.items():
        a = p.detach().cpu().numpy()[rows.get(k, slice(None))].copy()
        out[k] = convert(k, a) if convert is not None else a
    return out


def load_module_weights(module: Any, weights: Any, rows: Mapping[str, Any] | None = None) -> None:
    """Copy arrays (name → array, all parameters or a subset, names and ``rows`` as :func:`module_weights`) into
    the parameters of a torch ``nn.Module`` in place (an optimizer holding them keeps its state; rows outside
    ``rows[name]`` are untouched).

    Raises:
        ValueError: for an unknown name (the known ones listed) or an array of another shape.
    """
    load_parameter_arrays(dict(module.named_parameters()), weights, rows)


def load_parameter_arrays(
    named: Mapping[str, Any],
    weights: Any,
    rows: Mapping[str, Any] | None = None,
    convert: Callable[[str, np.ndarray], np.ndarray] | None = None,
) -> None:
    """As :func:`load_module_weights` for a mapping name → torch parameter; ``convert(name, array)`` (optional)
    turns each given array into the parameter's own layout before the shape check (the inverse of
    :func:`parameter_arrays`'s ``convert``). Names are checked before anything is written; arrays are written in
    the order given.

    Raises:
        ValueError: for an unknown name (the known ones listed) or an array of another shape.
    """
    import torch

    rows = rows or {}
    unknown = sorted(set(weights) - set(named))
    if unknown:
        raise ValueError(f"set_weights: unknown parameter name(s) {unknown}; known: {sorted(named)}")
    with torch.no_grad():
        for name, value in weights.items():
            target = named[name]
            index = rows.get(name, slice(None))
            if isinstance(index, np.ndarray):
                index = torch.as_tensor(index, dtype=torch.long, device=target.device)
            a = np.asarray(value)
            if convert is not None:
                a = convert(name, a)
            t = torch.as_tensor(a, dtype=target.dtype, device=target.device)
            want = tuple(target[index].shape)
            if tuple(t.shape) != want:
                raise ValueError(f"set_weights: {name} has shape {tuple(t.shape)}, expected {want}")
            target[index] = t


def rows_touched(grad: Any) -> int:
    """Rows of a gradient (torch tensor, dense or sparse COO, rows on axis 0) with a non-zero entry; 0 for None
    (``train_forward``'s ``output_rows_touched``)."""
    if grad is None:
        return 0
    g = grad.coalesce().to_dense() if grad.is_sparse else grad
    return int((g.detach().abs().reshape(g.shape[0], -1).sum(1) > 0).sum())
