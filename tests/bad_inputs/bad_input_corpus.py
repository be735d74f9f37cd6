"""The bad-input corpus: one row per bad input — where it enters, what it is, how it must be answered.

Every row is executed by ``test_bad_inputs.py`` (CI) and by ``print_bad_input_table.py`` (the table for the issue
note, with the message actually observed). Answers:

- :class:`Raises` — a clear error: the exception type and fragments of its message (file and line, column or
  parameter), raised by the suite's own code (the raising frame is in this repository, never deep inside
  pandas, numpy or torch without context);
- :class:`Warns` — a warning naming file and line (a truncated last line is skipped, as the study's readers do);
- :class:`UsageError` — the conformance run stops before collecting (pytest exit status 4) with the message;
- :class:`RunErrors` — an option read by some checks only: each of them errors with the message (exit status 1);
- :class:`CheckFails` — a named check failure (or error) in the run's results.json, with the reason;
- :class:`Handled` — a valid input the suite answers by documented behaviour, which the row asserts (e.g.
  unsorted timestamps are sorted, ids are opaque keys). These rows are counted apart from the bad inputs.

Where inputs enter: the raw-file readers (``datasets.sessions.readers``), the study's pipeline
(``datasets.sessions.pipeline``), the reference GRU4Rec (``reference.gru4rec``: parameters, ``fit``,
``evaluate``), the plugin's options (``pytest conformance/gru4rec --impl ...``) and the adapter protocol (what an
adapter returns, validated by ``conformance/_harness/validation.py`` around every adapter call).
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import sys
import traceback
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------------------------------------------
# answers
# ---------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Raises:
    exc: type
    fragments: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.exc.__name__}: " + " … ".join(self.fragments)


@dataclasses.dataclass(frozen=True)
class Warns:
    category: type
    fragments: tuple[str, ...]

    def describe(self) -> str:
        return f"warning {self.category.__name__}: " + " … ".join(self.fragments)


@dataclasses.dataclass(frozen=True)
class UsageError:
    fragments: tuple[str, ...]

    def describe(self) -> str:
        return "usage error (exit 4): " + " … ".join(self.fragments)


@dataclasses.dataclass(frozen=True)
class RunErrors:
    fragments: tuple[str, ...]

    def describe(self) -> str:
        return "every check that reads it errors (exit 1): " + " … ".join(self.fragments)


@dataclasses.dataclass(frozen=True)
class CheckFails:
    impl: str
    check: str
    outcome: str
    fragments: tuple[str, ...]

    def describe(self) -> str:
        return f"check {self.check} {self.outcome}: " + " … ".join(self.fragments)


@dataclasses.dataclass(frozen=True)
class Handled:
    what: str

    def describe(self) -> str:
        return f"handled: {self.what}"


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad input. ``run(ctx)`` feeds it to the suite (None for :class:`CheckFails` rows, answered by the
    shared run of the broken adapters); ``needs`` is a reason to skip the row where it cannot apply."""

    id: str
    enters: str
    input: str
    answer: Raises | Warns | UsageError | RunErrors | CheckFails | Handled
    run: Callable[[Ctx], Any] | None = None
    skip_if: Callable[[], str | None] | None = None


@dataclasses.dataclass
class Observation:
    """What the suite did with a row's input: ``kind`` is ``raises``, ``warns``, ``returns``, ``exit <n>`` or a
    check outcome; ``text`` the message; ``origin`` the file that raised (for ``raises``)."""

    kind: str
    text: str
    origin: str = ""
    exc: BaseException | None = None


class Ctx:
    """Where a row runs: ``tmp`` (a fresh folder), ``pytest(args)`` → ``(exit status, output)`` of an inner
    conformance run (options), ``adapter_results()`` → ``{impl: results.json}`` of the shared broken-adapter run."""

    def __init__(self, tmp: Path, pytest_runner: Callable[[list[str]], tuple[int, str]],
                 adapter_results: Callable[[], dict[str, dict]]) -> None:  # fmt: skip
        self.tmp = Path(tmp)
        self.pytest = pytest_runner
        self.adapter_results = adapter_results

    def file(self, name: str, content: str | bytes) -> Path:
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
        return path


# ---------------------------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------------------------
RR_HEADER = "timestamp,visitorid,event,itemid,transactionid\n"
REES_HEADER = "event_time,event_type,product_id,category_id,category_code,brand,price,user_id,user_session\n"
REES_ROW = "2019-10-01 00:00:0{k} UTC,view,4460006{k},1,,b,1.0,54131214{k},u{k}\n"
DIGI_HEADER = "sessionId;userId;itemId;timeframe;eventdate\n"
YC_ROW = "{s},2014-04-07T10:51:0{k}.277Z,21453650{k},0\n"


def _rr_rows(n: int = 6, item: str | None = None) -> str:
    return "".join(f"{1433221332117 + 1000 * k},{k // 3},view,{item or 355908 + k % 4},\n" for k in range(n))


def _readers():
    from gru4rec_conformance.datasets.sessions import readers

    return readers


def _raw_error():
    from gru4rec_conformance.datasets._suite_io import RawFormatError

    return RawFormatError


def _truncated_warning():
    from gru4rec_conformance.datasets._suite_io import TruncatedLastLineWarning

    return TruncatedLastLineWarning


def _frame(sessions: list[list[int]], times: list[list[float]] | None = None) -> pd.DataFrame:
    """A session frame (SessionId, ItemId, Time) from item lists, times 0, 1, 2, ... unless given."""
    rows = []
    t = 0
    for s, items in enumerate(sessions):
        for j, i in enumerate(items):
            rows.append((s + 1, i, times[s][j] if times else t))
            t += 1
    return pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"]).astype({"SessionId": "int64", "ItemId": "int64"})


TRAIN = _frame([[1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 1], [4, 5, 1, 2], [5, 1, 2, 3], [1, 3, 5, 2]])


def _gru(**hparams: Any):
    from gru4rec_conformance.reference.gru4rec import GRU4Rec

    base = dict(layers=[4], batch_size=2, n_epochs=1, n_sample=0, learning_rate=0.05, seed=1)
    return GRU4Rec(**{**base, **hparams})


def _fitted(**hparams: Any):
    model = _gru(**hparams)
    model.fit(TRAIN)
    return model


def _process(frame_or_obj: Any):
    from gru4rec_conformance.datasets.sessions.pipeline import process

    return process("retailrocket", {"events.csv": frame_or_obj})


def _rr_frame(ctx: Ctx) -> pd.DataFrame:
    return _readers().read_retailrocket(ctx.file("events.csv", RR_HEADER + _rr_rows(12)))


def _gzip_truncated(ctx: Ctx) -> Path:
    data = gzip.compress((RR_HEADER + _rr_rows(2000)).encode())
    return ctx.file("events.csv.gz", data[: len(data) // 2])


def _zip_two_members(ctx: Ctx) -> Path:
    path = ctx.tmp / "release_10_23_2020.csv.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("a.csv", "x\n")
        zf.writestr("b.csv", "y\n")
    return path


# -- handled rows (each asserts the documented behaviour and returns a one-line description) ------------------
def _handled_unsorted_raw(ctx: Ctx) -> str:
    from gru4rec_conformance.datasets.sessions.pipeline import process

    rows = [f"{1433221332117 + 60_000 * k},{s},view,{item},\n" for s in range(8) for k, item in
            enumerate([10 + (s + j) % 6 for j in range(5)])]  # fmt: skip
    rng = np.random.default_rng(0)
    text = RR_HEADER + "".join(rows[i] for i in rng.permutation(len(rows)))
    raw = _readers().read_retailrocket(ctx.file("events.csv", text))
    assert not raw["timestamp"].is_monotonic_increasing  # the file really is unsorted
    full = process("retailrocket", {"events.csv": raw}).frames["full"]
    assert len(full) > 0
    ordered = full.groupby("SessionId", sort=False)["Time"].apply(lambda t: t.is_monotonic_increasing)
    assert ordered.all()
    return f"reader keeps file order; the pipeline sorts by (session, time, item): {len(full)} events in time order"


def _handled_len1_pipeline(ctx: Ctx) -> str:
    raw = _readers().read_retailrocket(ctx.file("events.csv", RR_HEADER + "".join(
        f"{1433221332117 + 7_200_000 * k},{k},view,{10 + k % 3},\n" for k in range(30))))  # fmt: skip
    res = _process(raw)
    assert all(len(f) == 0 for f in res.frames.values())
    return (
        "the study's support filter drops every session of length 1; all outputs are empty (and the reference's "
        "fit on such data raises, row F07)"
    )


def _handled_negative_ids(ctx: Ctx) -> str:
    shifted = TRAIN.assign(ItemId=TRAIN["ItemId"] - 100, SessionId=TRAIN["SessionId"] - 50)
    a, b = _fitted(), _gru()
    b.fit(shifted)
    sa, sb = a.score_prefixes([[1, 2], [3]]), b.score_prefixes([[-99, -98], [-97]])
    np.testing.assert_allclose(sa, sb, rtol=0, atol=0)
    return "ids are opaque keys (official behaviour): scores identical to the same data with non-negative ids"


def _handled_unsorted_fit(ctx: Ctx) -> str:
    # The item columns follow the first appearance of each item in the frame (official behaviour), so the rows
    # that introduce the items stay in front; every other row is shuffled.
    first = TRAIN.drop_duplicates("ItemId").index
    rest = TRAIN.drop(index=first).sample(frac=1.0, random_state=3)
    shuffled = pd.concat([TRAIN.loc[first], rest])
    assert not shuffled["Time"].is_monotonic_increasing
    a, b = _fitted(), _gru()
    b.fit(shuffled)
    np.testing.assert_array_equal(a.score_prefixes([[1, 2, 3]]), b.score_prefixes([[1, 2, 3]]))
    return (
        "rows are sorted by (session, time) before training: the fit equals the one on sorted rows, bit for bit "
        "(item columns follow first appearance, as in the official code)"
    )


def _handled_eval_batch(ctx: Ctx) -> str:
    model = _fitted()
    test = _frame([[1, 2, 3], [3, 4]])
    big, one = model.evaluate(test, batch_size=512), model.evaluate(test, batch_size=1)
    assert big == one and big["n_events"] == 3
    return "evaluation batch 512 > 2 test sessions: the lanes shrink; metrics equal those of batch size 1"


# -- plugin option rows -------------------------------------------------------------------------------------------
def _opts(*args: str) -> Callable[[Ctx], tuple[int, str]]:
    return lambda ctx: ctx.pytest([a.format(tmp=ctx.tmp) for a in args])


def _xfails_file(body: str, *args: str) -> Callable[[Ctx], tuple[int, str]]:
    def run(ctx: Ctx) -> tuple[int, str]:
        ctx.file("bad.toml", body)
        return ctx.pytest(["--impl", "reference", "--xfails", str(ctx.tmp / "bad.toml"), *args])

    return run


def _resume_other_impl(ctx: Ctx) -> tuple[int, str]:
    from gru4rec_conformance.reports.writer import RunWriter

    writer = RunWriter.create(ctx.tmp / "out", "mutant:adam", {"impl": {"name": "mutant:adam", "family": "gru4rec"}})
    writer.close()
    return ctx.pytest(["--impl", "reference", "--resume", str(writer.directory)])


def _has_cuda() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return "a CUDA device is available here, so --device cuda is valid" if torch.cuda.is_available() else None


# ---------------------------------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------------------------------
RD = "reader"
PL = "pipeline"
RF = "reference fit"
EV = "evaluation"
OP = "plugin option"
AP = "adapter protocol"

_V = ValueError


def _cases() -> list[Case]:
    rfe = _raw_error()
    rd = _readers()
    return [
        # -- raw-file readers ------------------------------------------------------------------------------------
        Case(
            "R01",
            RD,
            "Coveo header without product_skus_hash (missing column)",
            Raises(rfe, ("release_10_23_2020.csv:1: column 'product_skus_hash'", "header lacks column(s)")),
            lambda c: rd.read_coveo(
                c.file(
                    "release_10_23_2020.csv", "session_id_hash,product_action,server_timestamp_epoch_ms\na,detail,1\n"
                )
            ),
        ),
        Case(
            "R02",
            RD,
            "Diginetica header with 'item' for 'itemId' (renamed column)",
            Raises(rfe, ("train-item-views.csv:1: column 'itemId'", "header lacks column(s) 'itemId'")),
            lambda c: rd.read_diginetica(
                c.file("train-item-views.csv", "sessionId;userId;item;timeframe;eventdate\n1;;5;0;2016-05-09\n")
            ),
        ),
        Case(
            "R03",
            RD,
            "Diginetica written with commas (wrong separator, header)",
            Raises(rfe, ("train-item-views.csv:1:", "wrong separator? expected semicolon")),
            lambda c: rd.read_diginetica(
                c.file("train-item-views.csv", "sessionId,userId,itemId,timeframe,eventdate\n1,,5,0,2016-05-09\n")
            ),
        ),
        Case(
            "R04",
            RD,
            "Yoochoose clicks with tabs (wrong separator, no header)",
            Raises(rfe, ("yoochoose-clicks.dat:1:", "expected 4 fields", "wrong separator? expected comma")),
            lambda c: rd.read_yoochoose(c.file("yoochoose-clicks.dat", "1\t2014-04-07T10:51:09.277Z\t214536502\t0\n")),
        ),
        Case(
            "R05",
            RD,
            "RetailRocket item id 'NaN'",
            Raises(rfe, ("events.csv:3: column 'itemid'", "empty value (or NaN/NA)")),
            lambda c: rd.read_retailrocket(
                c.file("events.csv", RR_HEADER + _rr_rows(1) + "1433221332999,7,view,NaN,\n")
            ),
        ),
        Case(
            "R06",
            RD,
            "RetailRocket negative item id -5",
            Raises(rfe, ("events.csv:2: column 'itemid'", "negative id -5")),
            lambda c: rd.read_retailrocket(c.file("events.csv", RR_HEADER + "1433221332117,257597,view,-5,\n")),
        ),
        Case(
            "R07",
            RD,
            "Yoochoose negative session id -1",
            Raises(rfe, ("yoochoose-clicks.dat:2: column 'SessionId'", "negative id -1")),
            lambda c: rd.read_yoochoose(
                c.file("yoochoose-clicks.dat", YC_ROW.format(s=1, k=1) + YC_ROW.format(s=-1, k=2))
            ),
        ),
        Case(
            "R08",
            RD,
            "Rees46 product id '-44600061' (negative, not a canonical id)",
            Raises(rfe, ("2019-Oct.csv:2: column 'product_id'", "not a canonical decimal integer id")),
            lambda c: rd.read_rees46(
                c.file("2019-Oct.csv", REES_HEADER + REES_ROW.format(k=1).replace("4460006", "-4460006"))
            ),
        ),
        Case(
            "R09",
            RD,
            "Rees46 timestamp '2019-10-01 25:61:00 UTC' in line 3 (unparsable)",
            Raises(rfe, ("2019-Oct.csv:3: column 'event_time'",)),
            lambda c: rd.read_rees46(
                c.file(
                    "2019-Oct.csv",
                    REES_HEADER
                    + REES_ROW.format(k=1)
                    + "2019-10-01 25:61:00 UTC,view,5,1,,b,1.0,7,u\n"
                    + REES_ROW.format(k=2),
                )
            ),
        ),
        Case(
            "R10",
            RD,
            "one-line Yoochoose file with month 13 (unparsable timestamp, only line)",
            Raises(rfe, ("yoochoose-clicks.dat:1: column 'Timestamp'", "invalid value '2014-13-07T10:51:09.277Z'")),
            lambda c: rd.read_yoochoose(c.file("yoochoose-clicks.dat", "1,2014-13-07T10:51:09.277Z,214536502,0\n")),
        ),
        Case(
            "R11",
            RD,
            "empty file (0 bytes)",
            Raises(rfe, ("events.csv:", "empty file (no bytes)")),
            lambda c: rd.read_retailrocket(c.file("events.csv", "")),
        ),
        Case(
            "R12",
            RD,
            "header line only",
            Raises(rfe, ("2019-Oct.csv:2:", "no data rows after the header")),
            lambda c: rd.read_rees46(c.file("2019-Oct.csv", REES_HEADER)),
        ),
        Case(
            "R13",
            RD,
            "Diginetica line 3 truncated to 3 of 5 fields (in the middle)",
            Raises(rfe, ("train-item-views.csv:3:", "expected 5 fields separated by ';', found 3")),
            lambda c: rd.read_diginetica(
                c.file("train-item-views.csv", DIGI_HEADER + "1;;5;0;2016-05-09\n1;;6\n2;;5;0;2016-05-09\n")
            ),
        ),
        Case(
            "R14",
            RD,
            "last line cut without line end (truncated download)",
            Warns(_truncated_warning(), ("2019-Oct.csv:4:", "skipped as truncated")),
            lambda c: rd.read_rees46(
                c.file(
                    "2019-Oct.csv",
                    REES_HEADER + REES_ROW.format(k=1) + REES_ROW.format(k=2) + "2019-10-01 00:00:09 UTC,view,123,20",
                )
            ),
        ),
        Case(
            "R15",
            RD,
            "RetailRocket header line repeated at line 3 (two files concatenated)",
            # pyarrow converts columns in parallel: which column of line 3 is named first varies
            Raises(rfe, ("events.csv:3: column '", "line: 'timestamp,visitorid,event,itemid,transactionid'")),
            lambda c: rd.read_retailrocket(c.file("events.csv", RR_HEADER + _rr_rows(1) + RR_HEADER + _rr_rows(2))),
        ),
        Case(
            "R16",
            RD,
            "duplicate column name in the header",
            Raises(rfe, ("events.csv:1:", "duplicate column(s) in header: ['itemid']")),
            lambda c: rd.read_retailrocket(
                c.file("events.csv", "timestamp,visitorid,event,itemid,itemid\n1,2,view,3,4\n")
            ),
        ),
        Case(
            "R17",
            RD,
            "RetailRocket item id '5.0' (float)",
            Raises(rfe, ("events.csv:2: column 'itemid'", "invalid value '5.0'")),
            lambda c: rd.read_retailrocket(c.file("events.csv", RR_HEADER + "1433221332117,257597,view,5.0,\n")),
        ),
        Case(
            "R18",
            RD,
            "events.csv.gz that is not gzip data",
            Raises(rfe, ("events.csv.gz:", "cannot decompress the gz data", "BadGzipFile")),
            lambda c: rd.read_retailrocket(c.file("events.csv.gz", "not gzip at all\n")),
        ),
        Case(
            "R19",
            RD,
            "gzip file cut in half (truncated download)",
            Raises(rfe, ("events.csv.gz:", "cannot decompress the gz data", "corrupt or truncated")),
            lambda c: rd.read_retailrocket(_gzip_truncated(c)),
        ),
        Case(
            "R20",
            RD,
            "zip archive with two members",
            Raises(rfe, ("release_10_23_2020.csv.zip:", "zip archive holds 2 files")),
            lambda c: rd.read_coveo(_zip_two_members(c)),
        ),
        Case(
            "R21",
            RD,
            "unknown dataset name 'rsc15'",
            Raises(_V, ("name: unknown dataset 'rsc15'",)),
            lambda c: rd.read_raw("rsc15", c.tmp / "x.csv"),
        ),
        Case(
            "R22",
            RD,
            "RetailRocket events in random time order (non-monotonic timestamps)",
            Handled("sorted by the pipeline"),
            _handled_unsorted_raw,
        ),
        # -- the study's pipeline ---------------------------------------------------------------------------------
        Case(
            "P01",
            PL,
            "raw frame without the 'itemid' column",
            Raises(_V, ("inputs['events.csv']: column(s) 'itemid' missing", "readers.read_retailrocket")),
            lambda c: _process(_rr_frame(c).drop(columns=["itemid"])),
        ),
        Case(
            "P02",
            PL,
            "raw frame with 'itemid' renamed to 'item_id'",
            Raises(_V, ("inputs['events.csv']: column(s) 'itemid' missing", "'item_id'")),
            lambda c: _process(_rr_frame(c).rename(columns={"itemid": "item_id"})),
        ),
        Case(
            "P03",
            PL,
            "raw frame with a NaN item id (float column)",
            Raises(
                _V,
                (
                    "inputs['events.csv']: column 'itemid' must hold integers",
                    "1 missing (NaN) value(s), first at row 3",
                ),
            ),
            lambda c: _process(
                (lambda f: f.assign(itemid=f["itemid"].astype(float).where(f.index != 3)))(_rr_frame(c))
            ),
        ),
        Case(
            "P04",
            PL,
            "raw frame with timestamps as strings",
            Raises(_V, ("inputs['events.csv']: column 'timestamp' must hold integers",)),
            lambda c: _process((lambda f: f.assign(timestamp=f["timestamp"].astype(str)))(_rr_frame(c))),
        ),
        Case(
            "P05",
            PL,
            "a list instead of a raw frame",
            Raises(_V, ("inputs['events.csv']: expected a pandas DataFrame", "got list")),
            lambda c: _process([1, 2, 3]),
        ),
        Case(
            "P06",
            PL,
            "prepare() of an unknown dataset 'rsc15'",
            Raises(_V, ("name: unknown dataset 'rsc15'",)),
            lambda c: __import__("gru4rec_conformance.datasets.sessions.pipeline", fromlist=["prepare"]).prepare(
                "rsc15", c.tmp, c.tmp / "o"
            ),
        ),
        Case(
            "P07",
            PL,
            "prepare() with the raw file missing",
            Raises(FileNotFoundError, ("events.csv",)),
            lambda c: __import__("gru4rec_conformance.datasets.sessions.pipeline", fromlist=["prepare"]).prepare(
                "retailrocket", c.tmp, c.tmp / "o"
            ),
        ),
        Case(
            "P08",
            PL,
            "raw data whose sessions all have length 1",
            Handled("every session filtered out"),
            _handled_len1_pipeline,
        ),
        # -- the reference GRU4Rec: parameters and fit ---------------------------------------------------------------
        Case(
            "F01",
            RF,
            "training frame without the 'Time' column",
            Raises(_V, ("training data: column 'Time' (time_key) is missing; columns present: SessionId, ItemId",)),
            lambda c: _gru().fit(TRAIN.drop(columns=["Time"])),
        ),
        Case(
            "F02",
            RF,
            "training frame with 'ItemId' renamed to 'itemId'",
            Raises(_V, ("column 'ItemId' (item_key) is missing; columns present: SessionId, itemId, Time",)),
            lambda c: _gru().fit(TRAIN.rename(columns={"ItemId": "itemId"})),
        ),
        Case(
            "F03",
            RF,
            "training frame with a NaN item id",
            Raises(_V, ("column 'ItemId' has 1 missing (NaN/None) value(s)",)),
            lambda c: _gru().fit(TRAIN.assign(ItemId=TRAIN["ItemId"].astype(float).where(TRAIN.index != 5))),
        ),
        Case(
            "F04",
            RF,
            "training frame with non-numeric Time ('2014-04-07')",
            Raises(_V, ("column 'Time' must be numeric",)),
            lambda c: _gru().fit(TRAIN.assign(Time="2014-04-07")),
        ),
        Case(
            "F05",
            RF,
            "training frame with an infinite Time",
            Raises(_V, ("column 'Time' has 1 missing or non-finite value(s)",)),
            lambda c: _gru().fit(TRAIN.assign(Time=TRAIN["Time"].astype(float).where(TRAIN.index != 2, np.inf))),
        ),
        Case(
            "F06",
            RF,
            "empty training frame",
            Raises(_V, ("training data: the frame has no rows",)),
            lambda c: _gru().fit(TRAIN.iloc[:0]),
        ),
        Case(
            "F07",
            RF,
            "training sessions of length 1 only",
            Raises(_V, ("no session in column 'SessionId' has two or more events",)),
            lambda c: _gru().fit(_frame([[1], [2], [3]])),
        ),
        Case(
            "F08",
            RF,
            "a catalogue of one item",
            Raises(_V, ("column 'ItemId' has a single distinct item",)),
            lambda c: _gru().fit(_frame([[7, 7], [7, 7, 7]])),
        ),
        Case(
            "F09",
            RF,
            "batch_size=64 with 6 training sessions",
            Raises(_V, ("parameter 'batch_size': batch_size=64 exceeds the number of training sessions",)),
            lambda c: _gru(batch_size=64).fit(TRAIN),
        ),
        Case(
            "F10",
            RF,
            "unknown hyperparameter 'hidden_size'",
            Raises(_V, ("unknown GRU4Rec parameter 'hidden_size'",)),
            lambda c: _gru(hidden_size=100),
        ),
        Case(
            "F11",
            RF,
            "layers='100/abc'",
            Raises(_V, ("parameter 'layers': cannot parse '100/abc'",)),
            lambda c: _gru(layers="100/abc"),
        ),
        Case(
            "F12",
            RF,
            "a list of tuples instead of a frame",
            Raises(_V, ("training data: expected a pandas DataFrame",)),
            lambda c: _gru().fit([(1, 2, 3)]),
        ),
        Case(
            "F13",
            RF,
            "score_prefixes() before fit()",
            Raises(RuntimeError, ("the model is not built: call fit()",)),
            lambda c: _gru().score_prefixes([[1]]),
        ),
        Case(
            "F14",
            RF,
            "GRU4Rec.load() of a folder that is not a saved model",
            Raises(_V, ("not a saved GRU4Rec model",)),
            lambda c: (
                c.file("model/notes.txt", "x"),
                __import__("gru4rec_conformance.reference.gru4rec", fromlist=["GRU4Rec"]).GRU4Rec.load(c.tmp / "model"),
            ),
        ),
        Case("F15", RF, "negative item and session ids", Handled("opaque keys"), _handled_negative_ids),
        Case("F16", RF, "training rows in random order (non-monotonic Time)", Handled("sorted"), _handled_unsorted_fit),
        # -- evaluation ---------------------------------------------------------------------------------------------
        Case(
            "E01",
            EV,
            "test set with unknown items only (no known test event)",
            Raises(
                _V, ("test data: no event to evaluate after dropping items unknown to training", "0 known event(s)")
            ),
            lambda c: _fitted().evaluate(_frame([[91, 92, 93], [94, 95]])),
        ),
        Case(
            "E02",
            EV,
            "test sessions of length 1 only",
            Raises(
                _V, ("test data: no event to evaluate", "a prediction needs a session with two or more known events")
            ),
            lambda c: _fitted().evaluate(_frame([[1], [2], [3]])),
        ),
        Case(
            "E03",
            EV,
            "cutoffs=(0,)",
            Raises(_V, ("parameter 'cutoffs': every cutoff must be a positive int, got 0",)),
            lambda c: _fitted().evaluate(_frame([[1, 2, 3]]), cutoffs=(0,)),
        ),
        Case(
            "E04",
            EV,
            "tie mode 'optimistic'",
            Raises(_V, ("parameter 'mode': unknown tie mode 'optimistic'",)),
            lambda c: _fitted().evaluate(_frame([[1, 2, 3]]), mode="optimistic"),
        ),
        Case(
            "E05",
            EV,
            "evaluation batch_size=0",
            Raises(_V, ("parameter 'batch_size': must be >= 1, got 0",)),
            lambda c: _fitted().evaluate(_frame([[1, 2, 3]]), batch_size=0),
        ),
        Case(
            "E06",
            EV,
            "evaluation batch size larger than the number of test sessions",
            Handled("lanes shrink"),
            _handled_eval_batch,
        ),
        # -- plugin options (pytest conformance/gru4rec ...) -------------------------------------------------------
        Case(
            "O01",
            OP,
            "--impl nope (not registered)",
            UsageError(
                (
                    "--impl 'nope' is not a registered implementation",
                    "Registered implementations:",
                    "gru4rec    reference",
                )
            ),
            _opts("--impl", "nope"),
        ),
        Case(
            "O02",
            OP,
            "--impl no_such_module:Adapter",
            UsageError(("--impl 'no_such_module:Adapter': cannot import module 'no_such_module'",)),
            _opts("--impl", "no_such_module:Adapter"),
        ),
        Case(
            "O03",
            OP,
            "--impl naming a class that is not an adapter",
            UsageError(("is not a subclass of implementations.base.AdapterBase",)),
            _opts("--impl", "bad_input_adapters:NotAnAdapter"),
        ),
        Case(
            "O04",
            OP,
            "--impl naming an adapter without score_prefixes",
            UsageError(("does not implement required method(s) ['score_prefixes']",)),
            _opts("--impl", "bad_input_adapters:MissingScorePrefixes"),
        ),
        Case(
            "O05",
            OP,
            "no --impl at all",
            UsageError(("conformance checks need an implementation: pass --impl NAME",)),
            _opts(),
        ),
        Case(
            "O06",
            OP,
            "--seeds 1,x",
            UsageError(("--seeds '1,x': 'x' is not an integer",)),
            _opts("--impl", "reference", "--seeds", "1,x"),
        ),
        Case(
            "O07",
            OP,
            "--seeds=-1",
            UsageError(("--seeds '-1': seed -1 is out of range",)),
            _opts("--impl", "reference", "--seeds=-1"),
        ),
        Case(
            "O08",
            OP,
            "--device gpu",
            UsageError(("--device: invalid choice: 'gpu'",)),
            _opts("--impl", "reference", "--device", "gpu"),
        ),
        Case(
            "O09",
            OP,
            "--device cuda on a machine without CUDA",
            UsageError(("--device cuda: no usable CUDA device here",)),
            _opts("--impl", "reference", "--device", "cuda"),
            skip_if=_has_cuda,
        ),
        Case(
            "O10",
            OP,
            "--dataset bogus (checked when the session starts)",
            UsageError(("--dataset 'bogus': unknown dataset; use all, a comma list of",)),
            _opts("--impl", "reference", "--dataset", "bogus", "-k", "mc1_same_features"),
        ),
        Case(
            "O11",
            OP,
            "--xfails file that is not valid TOML",
            UsageError(("bad.toml: not valid TOML",)),
            _xfails_file("implementation = 'x'\n[[xfail]\n"),
        ),
        Case(
            "O12",
            OP,
            "--xfails entry without 'reason'",
            UsageError(
                ("bad.toml", "'reason' is required"),
            ),
            _xfails_file('implementation = "reference"\n[[xfail]]\nid = "x"\nkind = "bug"\nlink = "none"\n'),
        ),
        Case(
            "O13",
            OP,
            "--xfails file that does not exist",
            UsageError(
                ("--xfails", "missing.toml"),
            ),
            _opts("--impl", "reference", "--xfails", "{tmp}/missing.toml"),
        ),
        Case(
            "O14",
            OP,
            "--resume of a folder that is not a run directory",
            UsageError(("--resume", "not a run directory (no results.jsonl)")),
            _opts("--impl", "reference", "--resume", "{tmp}"),
        ),
        Case(
            "O15",
            OP,
            "--resume of a run of another implementation",
            UsageError(("that run is of implementation 'mutant:adam'", "not selected by --impl")),
            _resume_other_impl,
        ),
        Case(
            "O16",
            OP,
            "--call-timeout 0",
            UsageError(("--call-timeout 0: the per-call timeout must be a positive number of seconds",)),
            _opts("--impl", "reference", "--call-timeout", "0"),
        ),
        Case(
            "O17",
            OP,
            "--worker-memory-mb=-1",
            UsageError(("--worker-memory-mb -1: the memory limit must be >= 0 MiB",)),
            _opts("--impl", "reference", "--worker-memory-mb=-1"),
        ),
        Case(
            "O18",
            OP,
            "--isolation sometimes",
            UsageError(("--isolation: invalid choice: 'sometimes'",)),
            _opts("--impl", "reference", "--isolation", "sometimes"),
        ),
        Case(
            "O19",
            OP,
            "--gate with --xfail-mark=skip",
            UsageError(("--gate needs strict xfails",)),
            _opts("--impl", "reference", "--gate", "--xfail-mark=skip"),
        ),
        # -- the adapter protocol (validated around every adapter call) ---------------------------------------------
        Case(
            "A01",
            AP,
            "score_prefixes drops a column (shape (n, I-1))",
            CheckFails(
                "bad:wrong_shape",
                "SR-5",
                "failed",
                (
                    "adapter 'bad:wrong_shape' returned an array of shape (8, 18) from score_prefixes(): expected shape "
                    "(8, 19) = (len(prefixes), len(item_ids()))",
                ),
            ),
        ),
        Case(
            "A02",
            AP,
            "score_prefixes returns NaN scores",
            CheckFails(
                "bad:nan_scores",
                "SR-5",
                "failed",
                ("returned 8 NaN and 0 infinite score(s)", "from score_prefixes(): expected finite scores"),
            ),
        ),
        Case(
            "A03",
            AP,
            "score_prefixes returns +inf scores",
            CheckFails(
                "bad:inf_scores", "SR-5", "failed", ("returned 0 NaN and 19 infinite score(s)", "from score_prefixes()")
            ),
        ),
        Case(
            "A04",
            AP,
            "score_prefixes returns None",
            CheckFails(
                "bad:scores_none",
                "SR-5",
                "failed",
                ("returned None from score_prefixes(): expected a numeric array of shape (8, 19)",),
            ),
        ),
        Case(
            "A05",
            AP,
            "item_ids() names items it was never trained on",
            CheckFails(
                "bad:untrained_ids",
                "SR-5",
                "failed",
                ("returned 19 item id(s) that are not in the training data of the last fit()", "from item_ids()"),
            ),
        ),
        Case(
            "A06",
            AP,
            "item_ids() with a duplicate id",
            CheckFails(
                "bad:duplicate_ids", "SR-5", "failed", ("ids with duplicates", "from item_ids(): expected distinct ids")
            ),
        ),
        Case(
            "A07",
            AP,
            "fit() returns None instead of a FitReport",
            CheckFails("bad:fit_none", "SR-5", "failed", ("returned None from fit(): expected a FitReport",)),
        ),
        Case(
            "A08",
            AP,
            "score_stream yields targets it was never trained on",
            CheckFails(
                "bad:stream_target", "SR-2", "failed", ("from score_stream(): expected a target item of item_ids()",)
            ),
        ),
        Case(
            "A09",
            AP,
            "score_stream yields 3-tuples",
            CheckFails(
                "bad:stream_rows", "SR-2", "failed", ("returned row 0: a tuple of length 3 from score_stream()",)
            ),
        ),
        Case(
            "A10",
            AP,
            "capabilities() with an unknown field 'logg'",
            CheckFails(
                "bad:caps_unknown",
                "SR-5",
                "error",
                ("the adapter cannot be described", "unknown capability field(s) ['logg']"),
            ),
        ),
        Case(
            "A11",
            AP,
            "capabilities() declaring bpreg without bpr-max",
            CheckFails(
                "bad:caps_inconsistent", "SR-5", "error", ("inconsistent declaration: bpreg needs 'bpr-max' in losses",)
            ),
        ),
        Case(
            "A12",
            AP,
            "capabilities() raising KeyError",
            CheckFails(
                "bad:caps_raise",
                "SR-5",
                "error",
                ("bad:caps_raise: the adapter cannot be described: KeyError: 'losses'",),
            ),
        ),
        Case(
            "A13",
            AP,
            "isolated adapter returning an object array from score_prefixes",
            CheckFails(
                "bad:unexchangeable",
                "SR-5",
                "failed",
                ("worker exception:", "score_prefixes() result: arrays of dtype object (kind 'O') cannot be exchanged"),
            ),
        ),
    ]


CASES: list[Case] = _cases()
BAD_INPUTS = [c for c in CASES if not isinstance(c.answer, Handled)]

#: the shared run of the broken adapters: one inner conformance run answers every CheckFails row
ADAPTER_IMPLS = {c.answer.impl: c.answer.check for c in CASES if isinstance(c.answer, CheckFails)}
ADAPTER_CLASSES = {
    "bad:wrong_shape": "WrongShape", "bad:nan_scores": "NaNScores", "bad:inf_scores": "InfScores",
    "bad:scores_none": "ScoresNone", "bad:untrained_ids": "UntrainedItemIds", "bad:duplicate_ids": "DuplicateItemIds",
    "bad:fit_none": "FitReturnsNone", "bad:stream_target": "StreamUnknownTarget", "bad:stream_rows": "StreamShortRows",
    "bad:caps_unknown": "UnknownCapability", "bad:caps_inconsistent": "InconsistentCapabilities",
    "bad:caps_raise": "CapabilitiesRaise", "bad:unexchangeable": "Unexchangeable",
}  # fmt: skip
CHECK_TESTS = {
    "SR-5": "test_k1_state_reset.py::test_sr5_state_is_used",
    "SR-2": "test_k1_state_reset.py::test_sr2_first_event_after_switch",
}


def adapter_run_args() -> list[str]:
    """Arguments of the shared inner run: each broken adapter on the one check its row names (node ids)."""
    impls = ",".join(f"bad_input_adapters:{ADAPTER_CLASSES[name]}" for name in ADAPTER_IMPLS)
    nodes = [f"conformance/gru4rec/{CHECK_TESTS[check]}[{name}]" for name, check in ADAPTER_IMPLS.items()]
    return ["--impl", impls, *nodes]


def inner_env() -> dict[str, str]:
    """Environment of inner runs: this folder and the repository importable, one torch thread."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "GRU4REC_CONFORMANCE_IMPL",
            "GRU4REC_REPORT_DIR",
            "GRU4REC_ISOLATION",
            "GRU4REC_XFAIL_MARK",
            "PYTEST_ADDOPTS",
        )
    }
    env.update(
        {"PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(HERE)]), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    )
    return env


QUIET = [
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
    "-p",
    "no:benchmark",
    "-p",
    "no:xdist",
    "--no-report-plots",
]


def start_adapter_run(report_dir: Path):
    """Start the shared inner run in the background (``subprocess.Popen``); read it with :func:`adapter_results`."""
    import subprocess

    cmd = [sys.executable, "-m", "pytest", *QUIET, "--report-dir", str(report_dir), *adapter_run_args()]
    return subprocess.Popen(cmd, cwd=REPO, env=inner_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def adapter_results(proc: Any, report_dir: Path, timeout: float = 300) -> dict[str, dict]:
    """``{impl name: results.json}`` of the shared run (waits for it)."""
    import json

    out, _ = proc.communicate(timeout=timeout)
    results = {}
    for name in ADAPTER_IMPLS:
        folder = Path(report_dir) / name.replace(":", ".")
        runs = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
        if runs:
            results[name] = json.loads((runs[-1] / "results.json").read_text(encoding="utf-8"))
    if set(results) != set(ADAPTER_IMPLS):
        raise RuntimeError(
            f"the broken-adapter run wrote no report for {sorted(set(ADAPTER_IMPLS) - set(results))} "
            f"(exit {proc.returncode}):\n{out[-4000:]}"
        )
    return results


# ---------------------------------------------------------------------------------------------------------------
# observing and verifying a row
# ---------------------------------------------------------------------------------------------------------------
def observe(case: Case, ctx: Ctx) -> Observation:
    """Feed the row's input to the suite and record what it did."""
    answer = case.answer
    if isinstance(answer, CheckFails):
        data = ctx.adapter_results()[answer.impl]
        (rec,) = [r for r in data["results"] if (r.get("check") or {}).get("id") == answer.check]
        return Observation(rec["outcome"], rec["reason"])
    if isinstance(answer, (UsageError, RunErrors)):
        status, output = case.run(ctx)
        lines = [ln for ln in output.splitlines() if ln.startswith("ERROR:") or "error:" in ln]
        return Observation(f"exit {status}", output if not lines else "\n".join(lines) + "\n" + output)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = case.run(ctx)
        except Exception as exc:  # the row's answer is the exception
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            return Observation("raises", f"{type(exc).__name__}: {exc}", frame.filename, exc)
    relevant = [w for w in caught if isinstance(answer, Warns) and issubclass(w.category, answer.category)]
    if relevant:
        return Observation("warns", f"{relevant[0].category.__name__}: {relevant[0].message}")
    return Observation("returns", value if isinstance(value, str) else f"{type(value).__name__}")


def _in_repo(filename: str) -> bool:
    path = Path(filename).resolve()
    return REPO in path.parents and "site-packages" not in path.parts


def verify(case: Case, obs: Observation) -> list[str]:
    """Problems with the observation (empty: the row is answered as the table says)."""
    a = case.answer
    problems = []
    if isinstance(a, Raises):
        if obs.kind != "raises":
            return [f"expected {a.exc.__name__}, got {obs.kind}: {obs.text[:300]}"]
        if not isinstance(obs.exc, a.exc):
            problems.append(f"expected {a.exc.__name__}, got {obs.text[:300]}")
        if not _in_repo(obs.origin):
            problems.append(f"raised from outside the suite ({obs.origin}): a bare library error without context")
    elif isinstance(a, Warns):
        if obs.kind != "warns":
            return [f"expected a {a.category.__name__}, got {obs.kind}: {obs.text[:300]}"]
    elif isinstance(a, UsageError):
        if obs.kind != "exit 4":
            return [f"expected a usage error (exit 4), got {obs.kind}: {obs.text[-1500:]}"]
    elif isinstance(a, RunErrors):
        if obs.kind != "exit 1":
            return [f"expected errors (exit 1), got {obs.kind}: {obs.text[-1500:]}"]
    elif isinstance(a, CheckFails):
        if obs.kind != a.outcome:
            return [f"expected {a.check} {a.outcome}, got {obs.kind}: {obs.text[:300]}"]
    elif isinstance(a, Handled):
        return [] if obs.kind == "returns" else [f"expected the input to be handled, got {obs.kind}: {obs.text[:500]}"]
    problems += [f"message lacks {f!r}: {obs.text[:800]}" for f in getattr(a, "fragments", ()) if f not in obs.text]
    return problems


def first_line(obs: Observation, case: Case) -> str:
    """The line of the observed message that carries the answer (for the printed table)."""
    frags = getattr(case.answer, "fragments", ())
    lines = [ln.strip() for ln in obs.text.splitlines() if ln.strip()]
    for ln in lines:
        if frags and frags[0] in ln:
            return ln
    return lines[0] if lines else ""
