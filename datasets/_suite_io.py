"""File plumbing shared by the readers and the pipeline: transparent decompression, block-wise CSV parsing with
errors that name file and line, and content hashes (atomic writes: :mod:`gru4rec_conformance.fileio`).

Nothing here knows about a particular dataset; the formats are described by :class:`CsvSpec` in
``datasets.sessions.readers``.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import re
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from gru4rec_conformance import fileio

COMPRESSED_SUFFIXES = (".gz", ".bz2", ".zip")
BLOCK_BYTES = 32 << 20  # raw bytes parsed per pyarrow call: bounds peak memory independently of file size


class RawFormatError(ValueError):
    """Bad raw input. The message starts with ``<file>:<line>:`` (line omitted when it does not apply) and names
    the column when one is at fault. Attributes: ``path``, ``line`` (1-based, or None), ``column`` (or None)."""

    def __init__(self, path, message: str, line: int | None = None, column: str | None = None):
        self.path = str(path)
        self.line = line
        self.column = column
        where = f"{self.path}:{line}" if line is not None else self.path
        col = f" column {column!r}:" if column else ""
        super().__init__(f"{where}:{col} {message}")


class RowError(Exception):
    """Raised by a block converter for a value it rejects; ``row`` is the 0-based row within the block. The reader
    turns it into a RawFormatError naming file, line and column."""

    def __init__(self, row: int, column: str, message: str):
        super().__init__(message)
        self.row, self.column, self.message = row, column, message


class TruncatedLastLineWarning(UserWarning):
    """The last line of a raw file has no line end and cannot be parsed; it was skipped."""


# ----------------------------------------------------------------------------------------------------------------
# opening files


def resolve_raw_file(raw_dir: Path, basename: str) -> Path:
    """Find ``basename`` in ``raw_dir``: as is, with a .gz/.bz2/.zip suffix, or as a member of any zip archive in
    ``raw_dir`` (Kaggle downloads are zips). Returns the path (a zip member is returned as ``archive.zip/member``
    -- see :func:`open_raw`). Raises FileNotFoundError naming the folder and what was looked for."""
    raw_dir = Path(raw_dir)
    for cand in [basename] + [basename + s for s in COMPRESSED_SUFFIXES]:
        p = raw_dir / cand
        if p.is_file():
            return p
    stem = basename.rsplit(".", 1)[0]
    for p in sorted(raw_dir.glob("*.zip")):
        with contextlib.suppress(zipfile.BadZipFile):
            with zipfile.ZipFile(p) as zf:
                for m in zf.namelist():
                    if Path(m).name == basename:
                        return p / m
        if p.stem == stem:
            return p
    raise FileNotFoundError(
        f"{raw_dir}: raw file {basename!r} not found (looked for {basename}[.gz|.bz2|.zip] and for a member "
        f"{basename!r} in *.zip)"
    )


def _split_zip_member(path: Path) -> tuple[Path, str | None]:
    """``a/b.zip/c.csv`` -> (a/b.zip, 'c.csv'); a plain path -> (path, None)."""
    parts = path.parts
    for i, part in enumerate(parts[:-1]):
        if part.lower().endswith(".zip") and Path(*parts[: i + 1]).is_file():
            return Path(*parts[: i + 1]), "/".join(parts[i + 1 :])
    return path, None


@contextlib.contextmanager
# the stream is a BufferedIOBase (plain, .gz, .bz2) or, for a .zip member, what ZipFile.open returns (IO[bytes])
def open_raw(path) -> Iterator[tuple[io.BufferedIOBase | IO[bytes], Callable[[], int], int]]:
    """Open a raw file for binary reading, decompressing .gz/.bz2/.zip transparently.

    Yields ``(stream, consumed, total)``: ``consumed()`` returns the number of bytes of the file on disk read so
    far and ``total`` is its size (for progress bars). A .zip must hold exactly one file unless ``path`` names
    the member (``archive.zip/member``). Raises FileNotFoundError or RawFormatError (bad archive)."""
    path = Path(path)
    archive, member = _split_zip_member(path)
    if not archive.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    total = archive.stat().st_size
    raw = open(archive, "rb")
    suffix = archive.suffix.lower()
    try:
        if suffix == ".gz":
            yield gzip.GzipFile(fileobj=raw, mode="rb"), raw.tell, total
        elif suffix == ".bz2":
            yield bz2.BZ2File(raw, mode="rb"), raw.tell, total
        elif suffix == ".zip":
            try:
                zf = zipfile.ZipFile(raw)
            except zipfile.BadZipFile as e:
                raise RawFormatError(archive, f"not a readable zip archive ({e})") from None
            names = [n for n in zf.namelist() if not n.endswith("/")]
            if member is None:
                if len(names) != 1:
                    raise RawFormatError(
                        archive,
                        f"zip archive holds {len(names)} files; name the member (archive.zip/member): {names[:5]}",
                    )
                member = names[0]
            with zf.open(member) as f:
                yield f, raw.tell, total
        else:
            yield raw, raw.tell, total
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as e:
        # decompression errors surface while the caller reads; name the file instead of gzip/bz2/zlib internals
        if suffix not in COMPRESSED_SUFFIXES or isinstance(e, FileNotFoundError):
            raise
        raise RawFormatError(
            archive,
            f"cannot decompress the {suffix[1:]} data ({type(e).__name__}: {e}); the file is corrupt or truncated",
        ) from e
    finally:
        raw.close()


# ----------------------------------------------------------------------------------------------------------------
# block-wise CSV parsing


@dataclass(frozen=True)
class CsvSpec:
    """How to read one raw format.

    ``delimiter``: field separator. ``header``: 'required', 'none' or 'optional' (then a first line whose first
    field parses as an integer is data). ``names``: column names of a header-less file, in file order.
    ``aliases``: header spelling -> canonical name (e.g. snake_case Diginetica headers). ``required``: canonical
    columns that must be present and are returned. ``types``: pyarrow types of returned columns (others:
    string). ``nullable``: returned columns that may be empty. ``timestamp_parsers``: strptime formats for
    timestamp columns (None: pyarrow's ISO-8601 parser).
    """

    delimiter: str
    header: str
    required: tuple[str, ...]
    types: dict = field(default_factory=dict)
    names: tuple[str, ...] = ()
    aliases: dict = field(default_factory=dict)
    nullable: tuple[str, ...] = ()
    timestamp_parsers: tuple[str, ...] | None = None
    null_values: tuple[str, ...] = ("", "NA", "NaN", "nan", "null", "NULL")


_OTHER_SEPARATORS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}


def _sep_hint(line: str, expected: str) -> str:
    for sep, name in _OTHER_SEPARATORS.items():
        if sep != expected and sep in line:
            return f" (the line contains {name}s: wrong separator? expected {_OTHER_SEPARATORS[expected]})"
    return ""


def _split_header(line: str, delimiter: str) -> list[str]:
    return [c.strip().strip('"').strip() for c in line.split(delimiter)]


_COLUMN_RE = re.compile(r"In CSV column #(\d+): ")


class _BlockParser:
    def __init__(self, path, spec: CsvSpec, names: list[str]):
        self.path = path
        self.spec = spec
        self.names = names
        include = list(spec.required)
        types = {c: spec.types.get(c, pa.string()) for c in include}
        kw = {}
        if spec.timestamp_parsers is not None:
            kw["timestamp_parsers"] = list(spec.timestamp_parsers)
        self.convert = pacsv.ConvertOptions(
            column_types=types,
            include_columns=include,
            null_values=list(spec.null_values),
            strings_can_be_null=True,
            **kw,
        )
        self.parse_opts = pacsv.ParseOptions(delimiter=spec.delimiter)

    def read_opts(self):
        return pacsv.ReadOptions(
            column_names=self.names, autogenerate_column_names=False, use_threads=True, block_size=1 << 22
        )

    def parse(self, data) -> pa.Table:
        return pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(data)),
            read_options=self.read_opts(),
            parse_options=self.parse_opts,
            convert_options=self.convert,
        )

    def check_nulls(self, table: pa.Table) -> int | None:
        """Index of the first row with an empty required (non-nullable) value, or None; sets self.null_col."""
        first = None
        for name in self.spec.required:
            if name in self.spec.nullable:
                continue
            col = table.column(name)
            if col.null_count:
                idx = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                if first is None or idx < first[0]:
                    first = (idx, name)
        if first is None:
            return None
        self.null_col = first[1]
        return first[0]

    def locate_error(self, data: bytes, first_line: int, exc: Exception) -> RawFormatError:
        """Find the first bad line of ``data`` (bisection with the same parser) and describe it."""
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        lo, hi = 0, len(lines)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                t = self.parse(b"\n".join(lines[lo:mid]) + b"\n")
                bad = self.check_nulls(t) is not None
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                bad = True
            if bad:
                hi = mid
            else:
                lo = mid
        line_no = first_line + lo
        text = lines[lo].decode("utf-8", "replace").rstrip("\r") if lines else ""
        return self.describe(line_no, text, exc)

    def describe(self, line_no: int, text: str, exc: Exception | None) -> RawFormatError:
        n_fields = len(text.split(self.spec.delimiter))
        if n_fields != len(self.names):
            return RawFormatError(
                self.path,
                f"expected {len(self.names)} fields separated by "
                f"{self.spec.delimiter!r}, found {n_fields}: {text[:200]!r}"
                f"{_sep_hint(text, self.spec.delimiter)}",
                line=line_no,
            )
        try:
            t = self.parse(text.encode() + b"\n")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            msg = str(e)
            m = _COLUMN_RE.search(msg)
            col = self.names[int(m.group(1))] if m else None
            msg = _COLUMN_RE.sub("", msg).split(". If these timestamps")[0]
            return RawFormatError(self.path, f"{msg}; line: {text[:200]!r}", line=line_no, column=col)
        if self.check_nulls(t) is not None:
            return RawFormatError(
                self.path, f"empty value (or NaN/NA); line: {text[:200]!r}", line=line_no, column=self.null_col
            )
        return RawFormatError(self.path, f"cannot parse line ({exc}); line: {text[:200]!r}", line=line_no)


def read_csv_table(
    path,
    spec: CsvSpec,
    *,
    progress: Callable[[int, int], None] | None = None,
    convert: Callable[[pa.Table], dict] | None = None,
    block_bytes: int = BLOCK_BYTES,
) -> dict:
    """Parse a raw CSV-like file block by block with pyarrow.

    Returns a dict column name -> list of per-block values (what ``convert(table)`` returns for each block,
    default: the pyarrow columns), so callers can turn each block into compact numpy arrays before the next
    block is read (peak memory ~ one block of text + the compact columns).

    Errors (RawFormatError, naming file and 1-based line): empty file, header-only file, missing column, wrong
    separator, wrong number of fields, unparsable or empty value. A last line that has no line end and does not
    parse is skipped with a :class:`TruncatedLastLineWarning` naming the line. ``progress(consumed, total)`` is
    called with on-disk bytes after each block.
    """
    out: dict[str, list] = {}
    with open_raw(path) as (stream, consumed, total):
        first = stream.readline()
        if not first.strip():
            rest = stream.read(1 << 16)
            if not first and not rest:
                raise RawFormatError(path, "empty file (no bytes)")
            if not rest.strip():
                raise RawFormatError(path, "empty file (only blank lines)")
            raise RawFormatError(
                path, "the first line is blank; expected " + ("a header" if spec.header != "none" else "data"), line=1
            )
        head_text = first.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n")
        names, data_starts_at_line, carry = _header(path, spec, head_text, first)
        parser = _BlockParser(path, spec, names)
        line_no = data_starts_at_line  # 1-based number of the first line in the current block
        n_rows = 0
        while True:
            # read straight into a buffer after the carried-over partial line (no concatenation copies)
            buf = bytearray(len(carry) + block_bytes)
            buf[: len(carry)] = carry
            got = _readinto(stream, memoryview(buf)[len(carry) :])
            if not got:
                break
            view = memoryview(buf)[: len(carry) + got]
            cut = buf.rfind(b"\n", 0, len(carry) + got)
            if cut < 0:
                carry = bytes(view)
                continue
            block = view[: cut + 1]
            carry = bytes(view[cut + 1 :])
            n_rows += _parse_block(parser, block, line_no, out, convert)
            line_no += buf.count(b"\n", 0, cut + 1)
            if progress is not None:
                progress(consumed(), total)
        if carry.strip() and carry.endswith(b"\n"):
            # a one-line file without header: the line is complete (it has its line end), so errors are errors
            n_rows += _parse_block(parser, carry, line_no, out, convert)
        elif carry.strip():
            # the last line has no line end: keep it if it parses, skip it with a warning if it is truncated
            try:
                n_rows += _parse_block(parser, carry + b"\n", line_no, out, convert)
            except RawFormatError as e:
                warnings.warn(
                    TruncatedLastLineWarning(
                        f"{path}:{line_no}: last line has no line end and does not parse; skipped as truncated "
                        f"({str(e).split(': ', 1)[-1][:300]})"
                    ),
                    stacklevel=3,
                )
        if progress is not None:
            progress(total, total)
    if n_rows == 0:
        raise RawFormatError(
            path, "no data rows" + (" after the header" if data_starts_at_line > 1 else ""), line=data_starts_at_line
        )
    return out


def _readinto(stream, mv: memoryview) -> int:
    """Fill ``mv`` as far as the stream allows (decompressors may return short reads); 0 at the end."""
    total = 0
    while total < len(mv):
        n = stream.readinto(mv[total:])
        if not n:
            break
        total += n
    return total


def _parse_block(parser: _BlockParser, block, line_no: int, out: dict, convert) -> int:
    try:
        table = parser.parse(block)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        block = bytes(block)
        raise parser.locate_error(block, line_no, e) from None
    bad = parser.check_nulls(table)
    if bad is not None:
        raise parser.locate_error(bytes(block), line_no, ValueError("empty value")) from None
    try:
        cols = convert(table) if convert is not None else {c: table.column(c) for c in table.column_names}
    except RowError as e:
        # row index -> line number (pyarrow skips blank lines)
        lines = bytes(block).split(b"\n")
        seen = -1
        for k, ln in enumerate(lines):  # noqa: B007 (k, the line index, is read after the loop)
            if ln.strip(b"\r"):
                seen += 1
                if seen == e.row:
                    break
        text = lines[k].decode("utf-8", "replace").rstrip("\r")
        raise RawFormatError(
            parser.path, f"{e.message}; line: {text[:200]!r}", line=line_no + k, column=e.column
        ) from None
    for k, v in cols.items():
        out.setdefault(k, []).append(v)
    return table.num_rows


def _header(path, spec: CsvSpec, head_text: str, first_raw: bytes) -> tuple[list[str], int, bytes]:
    """Column names of the file, the line number where data starts and the bytes to parse first."""
    fields = _split_header(head_text, spec.delimiter)
    if spec.header == "none":
        has_header = False
    elif spec.header == "optional":
        has_header = not re.fullmatch(r"-?\d+", fields[0] or "x")
    else:
        has_header = True
    if not has_header:
        names = list(spec.names)
        if len(fields) != len(names):
            raise RawFormatError(
                path,
                f"expected {len(names)} fields separated by {spec.delimiter!r} "
                f"({', '.join(names)}), found {len(fields)}: {head_text[:200]!r}"
                f"{_sep_hint(head_text, spec.delimiter)}",
                line=1,
            )
        return names, 1, first_raw
    names = [spec.aliases.get(f, f) for f in fields]
    missing = [c for c in spec.required if c not in names]
    if missing:
        raise RawFormatError(
            path,
            f"header lacks column(s) {', '.join(map(repr, missing))}; header is "
            f"{head_text[:200]!r}{_sep_hint(head_text, spec.delimiter)}",
            line=1,
            column=missing[0],
        )
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise RawFormatError(path, f"duplicate column(s) in header: {dup}", line=1)
    return names, 2, b""


# ----------------------------------------------------------------------------------------------------------------
# hashing


def sha256_file(path, chunk: int = 8 << 20) -> str:
    """Hex SHA-256 of a file's bytes on disk (a zip member: of the whole archive)."""
    archive, _ = _split_zip_member(Path(path))
    return fileio.sha256_file(archive, chunk)
