"""Readers for the raw files of the five session datasets of the study (Hidasi & Czapp, RecSys 2023), in their
original formats (docs/datasets.md, section 5: one subsection per dataset).

Each ``read_<name>(path)`` reads ONE raw file (plain, .gz, .bz2, or .zip -- see ``datasets._suite_io.open_raw``)
block by block with pyarrow and returns a pandas DataFrame in file order with compact dtypes (``progress``, optional:
a callable receiving (bytes read, file size) after each block). Time is converted
explicitly to integers (epoch seconds or milliseconds as stated per reader), never through the datetime64
reinterpretation idiom of the study scripts, whose result depends on the pandas version (pandas 3 parses to
microseconds). Bad input raises ``datasets._suite_io.RawFormatError`` (a ValueError naming file and line); a
truncated last line is skipped with a ``TruncatedLastLineWarning`` naming the line.

Identifiers the study reads as strings (Rees46 ``product_id``/``user_id``) are returned as int64 after checking
that every value is a canonical decimal integer (so that string identity and integer identity coincide);
anything else raises RawFormatError naming the line. Integer ids of the other formats (session, visitor and item
ids) must be non-negative, as in every published file: a negative id raises RawFormatError naming line and column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._suite_io import CsvSpec, RowError, read_csv_table

__all__ = [
    "RAW_FILES",
    "SPECS",
    "read_yoochoose",
    "read_rees46",
    "read_coveo",
    "read_retailrocket",
    "read_diginetica",
    "read_raw",
]

#: raw file names per dataset, in the order the study concatenates them (docs/datasets.md, 'Common steps', step 1)
RAW_FILES: dict[str, tuple[str, ...]] = {
    "yoochoose": ("yoochoose-clicks.dat", "yoochoose-test.dat"),
    "rees46": ("2019-Oct.csv", "2019-Nov.csv"),
    "coveo": ("release_10_23_2020.csv",),
    "retailrocket": ("events.csv",),
    "diginetica": ("train-item-views.csv",),
}

SPECS: dict[str, CsvSpec] = {
    # docs/datasets.md 'Yoochoose': no header, 4 columns, ISO-8601 UTC with ms and 'Z'
    "yoochoose": CsvSpec(
        delimiter=",",
        header="none",
        names=("SessionId", "Timestamp", "ItemId", "Category"),
        required=("SessionId", "Timestamp", "ItemId"),
        types={"SessionId": pa.int64(), "Timestamp": pa.timestamp("ns", tz="UTC"), "ItemId": pa.int64()},
    ),
    # 'Rees46': header; '2019-10-01 00:00:00 UTC'; ids read as strings by the study
    "rees46": CsvSpec(
        delimiter=",",
        header="required",
        required=("event_time", "event_type", "product_id", "user_id"),
        types={"event_time": pa.timestamp("s"), "product_id": pa.string(), "user_id": pa.string()},
        timestamp_parsers=("%Y-%m-%d %H:%M:%S UTC",),
    ),
    # 'Coveo': the 2020 release (release_10_23_2020.csv)
    "coveo": CsvSpec(
        delimiter=",",
        header="required",
        required=("session_id_hash", "product_action", "product_skus_hash", "server_timestamp_epoch_ms"),
        types={"server_timestamp_epoch_ms": pa.int64()},
        nullable=("product_action", "product_skus_hash"),
    ),
    # 'RetailRocket': events.csv, ms epochs, unsorted
    "retailrocket": CsvSpec(
        delimiter=",",
        header="required",
        required=("timestamp", "visitorid", "event", "itemid"),
        types={"timestamp": pa.int64(), "visitorid": pa.int64(), "itemid": pa.int64()},
    ),
    # 'Diginetica': ';'-separated; camelCase header, snake_case header (SR-GNN sample) or none
    "diginetica": CsvSpec(
        delimiter=";",
        header="optional",
        names=("sessionId", "userId", "itemId", "timeframe", "eventdate"),
        aliases={"session_id": "sessionId", "user_id": "userId", "item_id": "itemId"},
        required=("sessionId", "userId", "itemId", "timeframe", "eventdate"),
        types={
            "sessionId": pa.int64(),
            "userId": pa.float64(),
            "itemId": pa.int64(),
            "timeframe": pa.int64(),
            "eventdate": pa.date32(),
        },
        nullable=("userId",),
    ),
}

_CANONICAL_INT = r"^(0|[1-9][0-9]*)$"


def _concat(parts: list) -> np.ndarray:
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


class _Vocab:
    """Maps a string column to small integer codes, block by block, with a vocabulary that grows in order of
    first appearance after the expected values."""

    def __init__(self, expected: list[str]):
        self.values = list(expected)

    def codes(self, col) -> np.ndarray:
        col = pc.cast(col, pa.string())
        idx = pc.index_in(col, value_set=pa.array(self.values, pa.string()))
        if idx.null_count:
            for v in pc.unique(pc.filter(col, pc.is_null(idx))).to_pylist():
                if v not in self.values:
                    self.values.append(v)
            idx = pc.index_in(col, value_set=pa.array(self.values, pa.string()))
        return idx.to_numpy(zero_copy_only=False).astype(np.int16)

    def categorical(self, parts: list) -> pd.Categorical:
        return pd.Categorical.from_codes(_concat(parts), categories=self.values)


def _canonical_ids(t, src: str) -> np.ndarray:
    col = t.column(src)
    ok = pc.match_substring_regex(col, _CANONICAL_INT)
    if not pc.all(ok).as_py():
        bad = int(np.flatnonzero(~ok.to_numpy(zero_copy_only=False))[0])
        raise RowError(
            bad,
            src,
            f"{col[bad].as_py()!r} is not a canonical decimal integer id (the study "
            "compares ids as strings, so ids like '007' or '+7' cannot be read as integers)",
        )
    return col.cast(pa.int64()).to_numpy()


def _non_negative_ids(t, src: str) -> np.ndarray:
    """The int64 id column ``src`` of a block; a negative id is corrupt input (every dataset's ids are >= 0)."""
    a = t.column(src).to_numpy()
    neg = np.flatnonzero(a < 0)
    if len(neg):
        raise RowError(int(neg[0]), src, f"negative id {int(a[neg[0]])} (the dataset's ids are non-negative integers)")
    return a


def read_yoochoose(path, progress=None) -> pd.DataFrame:
    """Read ``yoochoose-clicks.dat`` or ``yoochoose-test.dat`` (docs/datasets.md, 'Yoochoose').

    Returns columns ``SessionId`` int64, ``Time`` int64 (epoch **seconds**, floor of the ms timestamp: the study's
    ``datetime64[ns] // 10**9``), ``ItemId`` int64, in file order. The Category column is not read.
    """

    def convert(t: pa.Table) -> dict:
        ns = t.column("Timestamp").cast(pa.int64()).to_numpy()
        return {
            "SessionId": _non_negative_ids(t, "SessionId"),
            "Time": np.floor_divide(ns, 10**9),
            "ItemId": _non_negative_ids(t, "ItemId"),
        }

    cols = read_csv_table(path, SPECS["yoochoose"], convert=convert, progress=progress)
    return pd.DataFrame({k: _concat(v) for k, v in cols.items()}, copy=False)


def read_rees46(path, progress=None) -> pd.DataFrame:
    """Read one monthly Rees46 file, e.g. ``2019-Oct.csv`` (docs/datasets.md, 'Rees46').

    Returns ``Time`` int64 (epoch **seconds** of ``event_time``, UTC), ``EventType`` categorical (view, cart,
    remove_from_cart, purchase, then any other value in order of appearance), ``ProductId`` int64, ``UserId``
    int64, in file order. ``user_session`` and the other columns are not read (the study ignores them).
    """
    vocab = _Vocab(["view", "cart", "remove_from_cart", "purchase"])

    def convert(t: pa.Table) -> dict:
        return {
            "Time": t.column("event_time").cast(pa.int64()).to_numpy(),
            "EventType": vocab.codes(t.column("event_type")),
            "ProductId": _canonical_ids(t, "product_id"),
            "UserId": _canonical_ids(t, "user_id"),
        }

    cols = read_csv_table(path, SPECS["rees46"], convert=convert, progress=progress)
    return pd.DataFrame(
        {
            "Time": _concat(cols["Time"]),
            "EventType": vocab.categorical(cols["EventType"]),
            "ProductId": _concat(cols["ProductId"]),
            "UserId": _concat(cols["UserId"]),
        }
    )


def read_coveo(path, progress=None) -> pd.DataFrame:
    """Read ``release_10_23_2020.csv`` of the Coveo 2020 release (docs/datasets.md, 'Coveo').

    Returns ``session_id_hash`` (object: str), ``product_action`` (object: str or None), ``product_skus_hash``
    (object: str or None; pipe-separated multi-SKU values are kept whole, as in the study),
    ``server_timestamp_epoch_ms`` int64 (epoch **milliseconds**), in file order. ``event_type`` and
    ``hashed_url`` are not read.
    """

    def convert(t: pa.Table) -> dict:
        return {c: t.column(c) for c in t.column_names}

    cols = read_csv_table(path, SPECS["coveo"], convert=convert, progress=progress)
    out = {}
    for c in SPECS["coveo"].required:
        arr = pa.chunked_array([ch for part in cols[c] for ch in part.chunks], type=cols[c][0].type)
        out[c] = arr.to_numpy() if c == "server_timestamp_epoch_ms" else np.asarray(arr.to_pylist(), dtype=object)
    return pd.DataFrame(out)


def read_retailrocket(path, progress=None) -> pd.DataFrame:
    """Read RetailRocket ``events.csv`` (docs/datasets.md, 'RetailRocket').

    Returns ``timestamp`` int64 (epoch **milliseconds**), ``visitorid`` int64, ``event`` categorical (view,
    addtocart, transaction, then any other value), ``itemid`` int64, in file order (the file is not
    time-sorted). ``transactionid`` is not read.
    """
    vocab = _Vocab(["view", "addtocart", "transaction"])

    def convert(t: pa.Table) -> dict:
        return {
            "timestamp": t.column("timestamp").to_numpy(),
            "visitorid": _non_negative_ids(t, "visitorid"),
            "event": vocab.codes(t.column("event")),
            "itemid": _non_negative_ids(t, "itemid"),
        }

    cols = read_csv_table(path, SPECS["retailrocket"], convert=convert, progress=progress)
    return pd.DataFrame(
        {
            "timestamp": _concat(cols["timestamp"]),
            "visitorid": _concat(cols["visitorid"]),
            "event": vocab.categorical(cols["event"]),
            "itemid": _concat(cols["itemid"]),
        }
    )


def read_diginetica(path, progress=None) -> pd.DataFrame:
    """Read Diginetica ``train-item-views.csv`` (docs/datasets.md, 'Diginetica'): ';'-separated, camelCase or snake_case header, or none.

    Returns ``sessionId`` int64, ``userId`` float64 (NaN for ``NA``), ``itemId`` int64, ``timeframe`` int64
    (ms since the session's start), ``eventdate_days`` int64 (the ``eventdate`` as days since 1970-01-01 UTC),
    in file order.
    """

    def convert(t: pa.Table) -> dict:
        return {
            "sessionId": _non_negative_ids(t, "sessionId"),
            "userId": t.column("userId").to_numpy().astype(np.float64),
            "itemId": _non_negative_ids(t, "itemId"),
            "timeframe": t.column("timeframe").to_numpy(),
            "eventdate_days": t.column("eventdate").cast(pa.int32()).to_numpy().astype(np.int64),
        }

    cols = read_csv_table(path, SPECS["diginetica"], convert=convert, progress=progress)
    return pd.DataFrame({k: _concat(v) for k, v in cols.items()})


READERS = {
    "yoochoose": read_yoochoose,
    "rees46": read_rees46,
    "coveo": read_coveo,
    "retailrocket": read_retailrocket,
    "diginetica": read_diginetica,
}


def read_raw(name: str, path, progress=None) -> pd.DataFrame:
    """Dispatch to ``read_<name>``; raises ValueError naming the parameter for an unknown dataset name.
    ``progress(bytes_read, total_bytes)`` (optional) is called after each block of every reader."""
    try:
        reader = READERS[name]
    except KeyError:
        raise ValueError(f"name: unknown dataset {name!r}; known: {', '.join(READERS)}") from None
    return reader(Path(path), progress=progress)
