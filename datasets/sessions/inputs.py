"""Which raw file plays which role: the study's input files of each dataset (``readers.RAW_FILES``), found by
their original names in a folder, by their content (header, columns, first event), or given one by one
(``prepare --file PATH``).

A file is identified from its first two lines (decompressed as ``_suite_io.open_raw`` does): the header's
columns name the format (Rees46, Coveo, RetailRocket, Diginetica in either header spelling), a header-less
comma line ``int,ISO-8601 time,int,category`` is Yoochoose and a header-less ``;`` line of five fields is
Diginetica. Within a dataset the role comes from the content where it can: the month of a Rees46 file's first
event (2019-10 or 2019-11); Yoochoose's clicks and test files share one format, so a file whose name contains
``test`` is the test file and any other the clicks file.

Errors are :class:`InputError` (a ValueError: a file that is another dataset's, or unreadable, or two files for
one role) and :class:`MissingInputError` (a FileNotFoundError: a role without a file; the message says which file,
why the study needs it and whether ``--allow-missing`` is a documented way to run without it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import _suite_io
from .readers import RAW_FILES

__all__ = ["Identified", "InputError", "MissingInputError", "NEEDED_FOR", "identify", "resolve_inputs"]


class InputError(ValueError):
    """A raw file that cannot play a role of the dataset asked for; the message names the file and why."""


class MissingInputError(FileNotFoundError):
    """A raw input of the dataset is missing; the message names the file, why it is needed and the option (if
    any) that runs without it. ``missing``: the original file names lacking."""

    def __init__(self, message: str, missing: list[str]):
        super().__init__(message)
        self.missing = missing


#: per original file name: why the study needs it, and how to run without it (None: no documented way)
NEEDED_FOR: dict[str, tuple[str, str | None]] = {
    "yoochoose-clicks.dat": (
        "the challenge's click file holds the bulk of the events (docs/datasets.md, 'Yoochoose')",
        None,
    ),
    "yoochoose-test.dat": (
        "the study concatenates the challenge's test file (about 8.25M clicks of other sessions over the same "
        "six months) after the click file (docs/datasets.md, 'Yoochoose'); without it the counts stay below the published "
        "29,107,309 train / 71,849 test events",
        "--allow-missing prepares the click file alone (recorded in the manifest; the index quirk needs both "
        "files, so it does not apply)",
    ),
    "2019-Oct.csv": (
        "the study uses October and November 2019 (docs/datasets.md, 'Rees46'); October is the first month of training",
        "--allow-missing prepares November alone (its test and validation days are complete; train_full then "
        "covers one month instead of two; recorded in the manifest)",
    ),
    "2019-Nov.csv": (
        "the test split is the sessions starting on 2019-11-30 (fixed tsplit 2019-12-01 00:00 UTC, "
        "docs/datasets.md, 'Rees46'), which only the November file holds",
        None,
    ),
    "release_10_23_2020.csv": ("the Coveo 2020 release is the dataset's only input (docs/datasets.md, 'Coveo')", None),
    "events.csv": ("RetailRocket's events.csv is the dataset's only input (docs/datasets.md, 'RetailRocket')", None),
    "train-item-views.csv": (
        "Diginetica's train-item-views.csv is the dataset's only input (docs/datasets.md, 'Diginetica')",
        None,
    ),
}

_NO_WAY = {
    "2019-Nov.csv": "there is no documented way to run without it: with October alone every session lies "
    "before the fixed split date and test is empty (--allow-missing --allow-empty writes that train-only "
    "folder for pipeline tests; the metric checks cannot use it)",
}

_HEADER_COLUMNS = {
    "rees46": {"event_time", "event_type", "product_id", "user_id"},
    "coveo": {"session_id_hash", "product_action", "product_skus_hash", "server_timestamp_epoch_ms"},
    "retailrocket": {"timestamp", "visitorid", "event", "itemid"},
    "diginetica": {"sessionId", "itemId", "timeframe", "eventdate"},
}
_DIGINETICA_SNAKE = {"session_id": "sessionId", "user_id": "userId", "item_id": "itemId"}
_REES46_MONTHS = {"2019-10": "2019-Oct.csv", "2019-11": "2019-Nov.csv"}
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


@dataclass(frozen=True)
class Identified:
    """What a raw file is: ``dataset`` (None when not one of the five formats), ``role`` (the original file name
    it stands for, e.g. ``2019-Nov.csv``; None when the dataset is known but the role is not) and ``evidence``
    (what was read to decide, for messages and the manifest)."""

    path: Path
    dataset: str | None
    role: str | None
    evidence: str


def _head(path: Path, n: int = 2) -> list[str]:
    with _suite_io.open_raw(path) as (stream, _c, _t):
        lines = []
        for _ in range(n):
            line = stream.readline()
            if not line:
                break
            lines.append(line.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n"))
    return lines


def _fields(line: str, sep: str) -> list[str]:
    return [f.strip().strip('"').strip() for f in line.split(sep)]


def identify(path) -> Identified:
    """Identify one raw file by its first two lines (see the module docstring).

    Returns an :class:`Identified`; ``dataset`` is None for a file in none of the five formats (``evidence``
    then quotes its first line). Raises :class:`InputError` when the file cannot be opened or decompressed."""
    path = Path(path)
    try:
        lines = _head(path)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: cannot be read as a raw file ({e})") from None
    if not lines:
        return Identified(path, None, None, "empty file")
    first = lines[0]
    second = lines[1] if len(lines) > 1 else ""
    for sep in (",", ";"):
        cols = {_DIGINETICA_SNAKE.get(c, c) if sep == ";" else c for c in _fields(first, sep)}
        for name, need in _HEADER_COLUMNS.items():
            if need <= cols:
                evidence = f"header {first[:120]!r}"
                role = RAW_FILES[name][0] if len(RAW_FILES[name]) == 1 else None
                if name == "rees46":
                    month = _fields(second, ",")[0][:7] if second else ""
                    role = _REES46_MONTHS.get(month)
                    evidence += f", first event {_fields(second, ',')[0]!r}" if second else ", no data line"
                return Identified(path, name, role, evidence)
    comma = _fields(first, ",")
    if len(comma) == 5 and comma[0].isdigit() and _ISO.match(comma[1]):
        return Identified(path, "yoochoose-buys", None, f"header-less buys line {first[:120]!r}")
    if len(comma) == 4 and comma[0].isdigit() and _ISO.match(comma[1]) and comma[2].isdigit():
        role = "yoochoose-test.dat" if "test" in path.name.lower() else "yoochoose-clicks.dat"
        return Identified(path, "yoochoose", role, f"header-less click line {first[:120]!r}, file name {path.name!r}")
    semi = _fields(first, ";")
    if len(semi) == 5 and semi[0].isdigit():
        return Identified(path, "diginetica", "train-item-views.csv", f"header-less ';' line {first[:120]!r}")
    return Identified(path, None, None, f"first line {first[:120]!r}")


def _why(fname: str) -> str:
    reason, option = NEEDED_FOR[fname]
    return f"{fname} is needed because {reason}; " + (
        option or _NO_WAY.get(fname, "there is no documented way to run without it")
    )


def _assign(name: str, ident: Identified, chosen: dict[str, Identified]) -> None:
    if ident.dataset == "yoochoose-buys":
        raise InputError(f"{ident.path}: a Yoochoose buys file ({ident.evidence}); the study does not use it")
    if ident.dataset != name:
        what = f"a {ident.dataset} file" if ident.dataset else "in none of the five datasets' formats"
        raise InputError(
            f"{ident.path}: {what} ({ident.evidence}), not an input of {name} ({', '.join(RAW_FILES[name])})"
        )
    if ident.role is None:
        raise InputError(
            f"{ident.path}: a {name} file, but which of {', '.join(RAW_FILES[name])} it is could not be told "
            f"({ident.evidence}); the study uses only October and November 2019"
        )
    if ident.role in chosen and chosen[ident.role].path != ident.path:
        raise InputError(
            f"{ident.path} and {chosen[ident.role].path}: both are {ident.role} ({ident.evidence}); give one file per input"
        )
    chosen[ident.role] = ident


def resolve_inputs(
    name: str, raw_dir=None, files=(), *, allow_missing: bool = False
) -> tuple[dict[str, Identified], list[str]]:
    """The raw file of each input of ``name``: ``({original file name: Identified}, [missing file names])``, in
    the study's order (``readers.RAW_FILES``).

    ``files`` (explicit paths) are identified by content and must all be inputs of ``name``. Inputs still lacking
    are then looked up in ``raw_dir``: by the original name (plain, .gz/.bz2/.zip, or a member of a zip), else by
    content among the folder's files (so shipped samples such as ``sample_train-item-views.csv`` are found).
    Raises :class:`InputError` for a file of another format or role clash, and :class:`MissingInputError` for a
    missing input unless ``allow_missing`` (then it is returned in the list; at least one input must exist).
    """
    chosen: dict[str, Identified] = {}
    for f in files:
        p = Path(f)
        if not _suite_io._split_zip_member(p)[0].is_file():
            raise MissingInputError(f"{p}: no such file (--file)", [])
        _assign(name, identify(p), chosen)
    if raw_dir is not None:
        raw_dir = Path(raw_dir)
        if not raw_dir.is_dir():
            raise MissingInputError(f"{raw_dir}: no such folder (--raw)", list(RAW_FILES[name]))
        for fname in RAW_FILES[name]:
            if fname in chosen:
                continue
            try:
                p = _suite_io.resolve_raw_file(raw_dir, fname)
            except FileNotFoundError:
                continue
            chosen[fname] = Identified(p, name, fname, "original file name")
        if any(f not in chosen for f in RAW_FILES[name]):
            used = {c.path for c in chosen.values()}
            for p in sorted(raw_dir.iterdir()):
                if not p.is_file() or p in used or p.name.startswith("."):
                    continue
                try:
                    ident = identify(p)
                except InputError:
                    continue  # e.g. a zip of several members: only found by member name
                if ident.dataset == name and ident.role is not None and ident.role not in chosen:
                    chosen[ident.role] = ident
    missing = [f for f in RAW_FILES[name] if f not in chosen]
    where = " and ".join(
        x
        for x in (f"in {raw_dir} (by name or content)" if raw_dir is not None else "", "among --file" if files else "")
        if x
    )
    if missing and (not allow_missing or len(missing) == len(RAW_FILES[name])):
        lines = [f"{name}: input file(s) {', '.join(missing)} not found {where}".rstrip()]
        lines += [f"  {_why(f)}" for f in missing]
        if len(missing) == len(RAW_FILES[name]):
            lines.append(f"  (download: python -m gru4rec_conformance.datasets info {name})")
        raise MissingInputError("\n".join(lines), missing)
    return {f: chosen[f] for f in RAW_FILES[name] if f in chosen}, missing
