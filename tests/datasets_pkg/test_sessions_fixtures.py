"""Hand-worked fixtures, one per dataset (datasets.md Part 3 "Recommended approach"): 10-30 raw rows in the
dataset's raw format whose full pipeline output is written out by hand below, covering the traps of docs/datasets.md, 'Common steps':

- consecutive repeats removed once; (i, j, i) with j filtered becomes (i, i) and stays;
- ties at one timestamp ordered by the dataset's item sort key (not by file order, not by the id's value where
  the key is an index of first appearance);
- the iterative filter needs more than one round;
- a gap of exactly 3600 s (3,600,000 ms) does not split, one millisecond/second more does; non-view events
  bridge view bursts where sessionisation runs on all events (RetailRocket, Coveo) and not for Rees46;
- a session straddling tsplit - tday is truncated in train_full and absent from test; one starting exactly on
  it is in test; the validation anchor is tsplit - 2*tday;
- per dataset: Yoochoose ms floored to seconds; Rees46 indices by first appearance over all event types and
  [Oct, Nov]; Coveo's missing SKU and a multi-SKU purchase take item indices; Diginetica's virtual time uses
  the session's earliest date.

Expected values are literal rows; times are written with calendar.timegm on literal date strings.
"""

from __future__ import annotations

import calendar
import warnings

import pandas as pd
import pytest

from gru4rec_conformance.datasets.sessions.pipeline import prepare, process
from gru4rec_conformance.datasets.sessions.readers import read_raw


def s(text: str) -> int:
    """Epoch seconds of 'YYYY-MM-DD HH:MM:SS' (UTC)."""
    d, t = text.split(" ")
    return calendar.timegm(tuple(map(int, d.split("-"))) + tuple(map(int, t.split(":"))))


def ms(text: str) -> int:
    return s(text) * 1000


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"]).astype("int64")


def check(res_frames: dict, expected: dict) -> None:
    for part, rows in expected.items():
        got = res_frames[part].reset_index(drop=True)
        want = frame(rows)
        assert list(got.columns) == ["SessionId", "ItemId", "Time"], part
        assert got.dtypes.tolist() == ["int64"] * 3, part
        pd.testing.assert_frame_equal(got, want, obj=part)


def run(tmp_path, name, files: dict[str, str], **kw):
    raw = tmp_path / "raw"
    raw.mkdir()
    for fname, text in files.items():
        (raw / fname).write_text(text)
    res = prepare(name, raw, tmp_path / "out", allow_empty=True, **kw)  # hand-made fixtures: some splits are empty
    return res, res.frames()


# ------------------------------------------------------------------------------------------------ Yoochoose
A, B, C, J, K = 214000001, 214000002, 214000003, 214000099, 214000050
Y_T = s("2014-04-10 10:00:00")  # tsplit = max time
Y_BT, Y_BV = Y_T - 86400, Y_T - 2 * 86400

YOOCHOOSE_CLICKS = f"""\
10,2014-04-09T09:58:20.000Z,{A},0
10,2014-04-09T09:59:10.500Z,{B},0
10,2014-04-09T10:01:40.000Z,{C},0
11,2014-04-09T10:00:00.999Z,{A},S
11,2014-04-09T10:01:00.000Z,{B},S
13,2014-04-08T09:58:20.000Z,{B},3
13,2014-04-08T09:59:10.000Z,{A},3
13,2014-04-08T10:01:40.000Z,{C},3
14,2014-04-08T11:00:00.000Z,{C},0
14,2014-04-08T11:01:40.000Z,{A},0
2,2014-04-03T08:00:05.900Z,{A},0
2,2014-04-03T08:00:05.100Z,{C},0
2,2014-04-03T08:00:08.000Z,{A},0
1,2014-04-02T10:00:10.000Z,{A},0
1,2014-04-02T10:00:20.000Z,{A},0
1,2014-04-02T10:00:30.000Z,{B},0
3,2014-04-04T12:00:00.000Z,{B},0
3,2014-04-04T12:00:30.000Z,{J},0
3,2014-04-04T12:01:00.000Z,{B},0
4,2014-04-04T13:00:00.000Z,{C},0
4,2014-04-04T13:00:10.000Z,{C},0
5,2014-04-05T09:00:00.000Z,{K},0
6,2014-04-05T10:00:00.000Z,{K},0
6,2014-04-05T10:00:40.000Z,{A},0
"""
YOOCHOOSE_TEST = f"""\
12,2014-04-06T15:00:00.000Z,{C},0
12,2014-04-06T15:00:30.000Z,{A},0
15,2014-04-10T09:50:00.000Z,{B},0
15,2014-04-10T10:00:00.250Z,{A},0
"""
Y = {  # session -> rows of the full output
    1: [(1, A, s("2014-04-02 10:00:10")), (1, B, s("2014-04-02 10:00:30"))],
    # 08:00:05.900 A and 08:00:05.100 C fall into the same second: ordered by item (A < C), so no repeat
    2: [(2, A, s("2014-04-03 08:00:05")), (2, C, s("2014-04-03 08:00:05")), (2, A, s("2014-04-03 08:00:08"))],
    3: [(3, B, s("2014-04-04 12:00:00")), (3, B, s("2014-04-04 12:01:00"))],  # (B, J, B) -> (B, B)
    10: [(10, A, Y_BT - 100), (10, B, Y_BT - 50), (10, C, Y_BT + 100)],
    11: [(11, A, Y_BT), (11, B, Y_BT + 60)],  # .999 floors onto the boundary itself -> test
    12: [(12, C, s("2014-04-06 15:00:00")), (12, A, s("2014-04-06 15:00:30"))],
    13: [(13, B, Y_BV - 100), (13, A, Y_BV - 50), (13, C, Y_BV + 100)],
    14: [(14, C, s("2014-04-08 11:00:00")), (14, A, s("2014-04-08 11:01:40"))],
    15: [(15, B, Y_T - 600), (15, A, Y_T)],
}
Y_EXPECTED = {
    "full": [r for k in sorted(Y) for r in Y[k]],
    "test": Y[11] + Y[15],
    "train_full": Y[1] + Y[2] + Y[3] + Y[10][:2] + Y[12] + Y[13] + Y[14],
    "train_tr": Y[1] + Y[2] + Y[3] + Y[12] + Y[13][:2],
    "train_valid": Y[10][:2] + Y[14],
}


@pytest.mark.parametrize("index_quirk", [True, False])
def test_yoochoose_fixture(tmp_path, index_quirk):
    res, frames = run(
        tmp_path,
        "yoochoose",
        {"yoochoose-clicks.dat": YOOCHOOSE_CLICKS, "yoochoose-test.dat": YOOCHOOSE_TEST},
        index_quirk=index_quirk,
    )
    check(frames, Y_EXPECTED)
    m = res.manifest
    assert m["filter_rounds"] == 3
    assert m["tsplit"] == Y_T and m["test_boundary"] == Y_BT and m["valid_boundary"] == Y_BV
    dedup = next(st for st in m["steps"] if st["step"] == "dedup")
    assert dedup["removed"] == 2  # session 1's second A and session 4's second C
    assert m["time_unit"] == "s"


def test_yoochoose_index_quirk(tmp_path):
    """The study concatenates clicks and test without resetting the index and drops by label: a removal in one
    file also removes the row at the same line position in the other file. Clicks: 6 sessions (A, B) at labels
    0-11, then (A, A, B) at 12-14 (the repeat at label 13). Test file: 7 sessions (B, A) at labels 0-13.
    Dedup drops clicks label 13 -> also test label 13 (session 107's A) -> 107 = (B) is a singleton, dropped in
    round 1 at label 12 -> also clicks label 12 (session 7's first A) -> 7 = (B) is dropped in round 2 (label 14,
    absent from the test file). Row-wise semantics keeps 7 and 107."""
    day = "2014-04-{:02d}T10:00:{:02d}.000Z"
    clicks = "".join(f"{k},{day.format(k + 1, 0)},{A},0\n{k},{day.format(k + 1, 30)},{B},0\n" for k in range(1, 7))
    clicks += f"7,{day.format(8, 0)},{A},0\n7,{day.format(8, 10)},{A},0\n7,{day.format(8, 20)},{B},0\n"
    test = "".join(
        f"{100 + k},{day.format(k + 10, 0)},{B},0\n{100 + k},{day.format(k + 10, 30)},{A},0\n" for k in range(1, 8)
    )
    inputs = {}
    for fname, text in (("yoochoose-clicks.dat", clicks), ("yoochoose-test.dat", test)):
        p = tmp_path / fname
        p.write_text(text)
        inputs[fname] = read_raw("yoochoose", p)
    quirk = process("yoochoose", inputs, index_quirk=True)
    plain = process("yoochoose", inputs, index_quirk=False)
    assert sorted(quirk.frames["full"]["SessionId"].unique()) == [1, 2, 3, 4, 5, 6, 101, 102, 103, 104, 105, 106]
    assert sorted(plain.frames["full"]["SessionId"].unique()) == [
        1,
        2,
        3,
        4,
        5,
        6,
        7,
        101,
        102,
        103,
        104,
        105,
        106,
        107,
    ]
    assert len(quirk.frames["full"]) == 24 and len(plain.frames["full"]) == 28
    assert quirk.filter_rounds == 3 and plain.filter_rounds == 1
    dedup = next(st for st in quirk.steps if st["step"] == "dedup")
    assert dedup["removed"] == 1 and dedup["index_quirk_extra_rows"] == 1
    assert quirk.filter_log[0]["index_quirk_extra_rows"] == [1, 0]
    assert quirk.filter_log[1]["index_quirk_extra_rows"] == [0, 0]
    # the same through prepare() (which frees the raw frames early), with and without the quirk
    for flag, rows in ((True, 24), (False, 28)):
        res = prepare("yoochoose", tmp_path, tmp_path / f"out_{flag}", index_quirk=flag, allow_empty=True)
        assert len(res.load("full")) == rows and res.manifest["index_quirk_applied"] is flag


# ------------------------------------------------------------------------------------------------ Rees46
PA, PB, PC, PJ, PK = 5000, 300, 7000, 9999, 4242  # first appearance order: PC (a cart), PA, PB, PJ, PK
REES_HEADER = "event_time,event_type,product_id,category_id,category_code,brand,price,user_id,user_session\n"


def rees_row(t, ev, prod, user):
    return f"{t} UTC,{ev},{prod},2053013555631882655,electronics.smartphone,acme,10.50,{user},uuid-{user}\n"


REES_OCT = REES_HEADER + "".join(
    rees_row(*r)
    for r in [
        ("2019-10-01 00:00:00", "cart", PC, 500000007),  # user 7 and product PC appear first; user 7 has no views
        ("2019-10-02 10:00:00", "view", PA, 500000001),
        ("2019-10-02 10:00:20", "view", PA, 500000001),
        ("2019-10-02 10:01:00", "view", PB, 500000001),
        ("2019-10-02 11:01:00", "view", PC, 500000001),  # exactly 3600 s later: same session
        ("2019-10-02 11:30:00", "cart", PC, 500000001),  # a cart does not bridge (views only are sessionised)
        ("2019-10-02 12:01:01", "view", PA, 500000001),  # 3601 s after the last view: new session
        ("2019-10-02 12:01:30", "view", PB, 500000001),
        ("2019-10-03 08:00:00", "view", PA, 500000002),
        ("2019-10-03 08:00:05", "view", PC, 500000002),
        ("2019-10-03 08:00:05", "view", PA, 500000002),  # tie: itemidx PC (0) < PA (1) -> (PA, PC, PA)
        ("2019-10-04 12:00:00", "view", PB, 500000003),
        ("2019-10-04 12:00:30", "view", PJ, 500000003),
        ("2019-10-04 12:01:00", "view", PB, 500000003),
        ("2019-10-05 13:00:00", "view", PC, 500000004),
        ("2019-10-05 13:00:10", "view", PC, 500000004),
        ("2019-10-06 09:00:00", "view", PK, 500000005),
        ("2019-10-06 10:00:00", "view", PK, 500000006),
        ("2019-10-06 10:00:40", "view", PA, 500000006),
    ]
)
REES_NOV = REES_HEADER + "".join(
    rees_row(*r)
    for r in [
        ("2019-11-28 23:59:00", "view", PB, 500000008),
        ("2019-11-28 23:59:30", "view", PA, 500000008),
        ("2019-11-29 00:00:30", "view", PC, 500000008),  # crosses the validation boundary
        ("2019-11-29 12:00:00", "view", PC, 500000009),
        ("2019-11-29 12:00:30", "view", PA, 500000009),
        ("2019-11-29 23:59:00", "view", PA, 500000010),
        ("2019-11-29 23:59:40", "view", PB, 500000010),
        ("2019-11-30 00:00:20", "view", PC, 500000010),  # crosses the test boundary
        ("2019-11-30 00:00:00", "view", PA, 500000011),  # starts exactly on the test boundary
        ("2019-11-30 00:01:00", "view", PB, 500000011),
    ]
)
R = {  # sessions numbered over all views sorted by (user index, time, item index); users 4-6 are filtered
    0: [(0, PA, s("2019-10-02 10:00:00")), (0, PB, s("2019-10-02 10:01:00")), (0, PC, s("2019-10-02 11:01:00"))],
    1: [(1, PA, s("2019-10-02 12:01:01")), (1, PB, s("2019-10-02 12:01:30"))],
    2: [(2, PA, s("2019-10-03 08:00:00")), (2, PC, s("2019-10-03 08:00:05")), (2, PA, s("2019-10-03 08:00:05"))],
    3: [(3, PB, s("2019-10-04 12:00:00")), (3, PB, s("2019-10-04 12:01:00"))],
    7: [(7, PB, s("2019-11-28 23:59:00")), (7, PA, s("2019-11-28 23:59:30")), (7, PC, s("2019-11-29 00:00:30"))],
    8: [(8, PC, s("2019-11-29 12:00:00")), (8, PA, s("2019-11-29 12:00:30"))],
    9: [(9, PA, s("2019-11-29 23:59:00")), (9, PB, s("2019-11-29 23:59:40")), (9, PC, s("2019-11-30 00:00:20"))],
    10: [(10, PA, s("2019-11-30 00:00:00")), (10, PB, s("2019-11-30 00:01:00"))],
}
R_EXPECTED = {
    "full": [r for k in sorted(R) for r in R[k]],
    "test": R[10],
    "train_full": R[0] + R[1] + R[2] + R[3] + R[7] + R[8] + R[9][:2],
    "train_tr": R[0] + R[1] + R[2] + R[3] + R[7][:2],
    "train_valid": R[8] + R[9][:2],
}


def test_rees46_fixture(tmp_path):
    res, frames = run(tmp_path, "rees46", {"2019-Oct.csv": REES_OCT, "2019-Nov.csv": REES_NOV})
    check(frames, R_EXPECTED)
    m = res.manifest
    assert m["filter_rounds"] == 3
    assert m["tsplit"] == 1575158400 and m["test_boundary"] == s("2019-11-30 00:00:00")
    sess = next(st for st in m["steps"] if st["step"].startswith("sessions"))
    assert sess["sessions"] == 11 and sess["rows"] == 27


# ------------------------------------------------------------------------------------------------ RetailRocket
RA, RB, RC, RJ, RK = 100, 200, 300, 999, 500
RR_BT, RR_BV = ms("2015-09-11 03:00:00"), ms("2015-09-04 03:00:00")
RR_ROWS = [  # written in a scrambled order: the file is not time-sorted
    (ms("2015-08-03 08:00:05"), 12, "view", RC, ""),
    (ms("2015-08-02 10:00:20"), 11, "view", RA, ""),
    (RR_BT + 20_000, 20, "view", RC, ""),
    (ms("2015-08-02 10:00:00"), 11, "view", RA, ""),
    (ms("2015-08-02 11:01:00"), 11, "view", RC, ""),  # exactly 3,600,000 ms after the previous event
    (ms("2015-08-02 10:01:00"), 11, "view", RB, ""),
    (ms("2015-08-02 11:41:00"), 11, "addtocart", RC, ""),  # bridges the two view bursts 80 min apart
    (ms("2015-08-02 12:21:00"), 11, "view", RA, ""),
    (ms("2015-08-02 13:21:00") + 1, 11, "view", RB, ""),  # 3,600,001 ms later: new session
    (ms("2015-08-02 13:21:30") + 1, 11, "view", RC, ""),
    (ms("2015-08-03 08:00:00"), 12, "view", RA, ""),
    (ms("2015-08-03 08:00:05"), 12, "view", RA, ""),  # tie with RC: RA (100) first, then a repeat
    (ms("2015-08-03 08:05:00"), 12, "transaction", RA, "4000"),
    (ms("2015-08-04 12:00:00"), 13, "view", RB, ""),
    (ms("2015-08-04 12:00:30"), 13, "view", RJ, ""),
    (ms("2015-08-04 12:01:00"), 13, "view", RB, ""),
    (ms("2015-08-05 13:00:00"), 14, "view", RC, ""),
    (ms("2015-08-05 13:00:10"), 14, "view", RC, ""),
    (ms("2015-08-06 09:00:00"), 15, "view", RK, ""),
    (ms("2015-08-06 10:00:00"), 16, "view", RK, ""),
    (ms("2015-08-06 10:00:40"), 16, "view", RA, ""),
    (RR_BV - 60_000, 18, "view", RB, ""),
    (RR_BV - 30_000, 18, "view", RA, ""),
    (RR_BV + 30_000, 18, "view", RC, ""),
    (ms("2015-09-06 12:00:00"), 19, "view", RC, ""),
    (ms("2015-09-06 12:00:30"), 19, "view", RA, ""),
    (RR_BT - 60_000, 20, "view", RA, ""),
    (RR_BT - 20_000, 20, "view", RB, ""),
    (RR_BT, 21, "view", RA, ""),
    (RR_BT + 60_000, 21, "view", RB, ""),
]
RR_CSV = "timestamp,visitorid,event,itemid,transactionid\n" + "".join(",".join(map(str, r)) + "\n" for r in RR_ROWS)
RRS = {  # session ids count over all events of all visitors (visitor 11 has sessions 0 and 1)
    0: [
        (0, RA, ms("2015-08-02 10:00:00")),
        (0, RB, ms("2015-08-02 10:01:00")),
        (0, RC, ms("2015-08-02 11:01:00")),
        (0, RA, ms("2015-08-02 12:21:00")),
    ],
    1: [(1, RB, ms("2015-08-02 13:21:00") + 1), (1, RC, ms("2015-08-02 13:21:30") + 1)],
    2: [(2, RA, ms("2015-08-03 08:00:00")), (2, RC, ms("2015-08-03 08:00:05"))],
    3: [(3, RB, ms("2015-08-04 12:00:00")), (3, RB, ms("2015-08-04 12:01:00"))],
    7: [(7, RB, RR_BV - 60_000), (7, RA, RR_BV - 30_000), (7, RC, RR_BV + 30_000)],
    8: [(8, RC, ms("2015-09-06 12:00:00")), (8, RA, ms("2015-09-06 12:00:30"))],
    9: [(9, RA, RR_BT - 60_000), (9, RB, RR_BT - 20_000), (9, RC, RR_BT + 20_000)],
    10: [(10, RA, RR_BT), (10, RB, RR_BT + 60_000)],
}
RR_EXPECTED = {
    "full": [r for k in sorted(RRS) for r in RRS[k]],
    "test": RRS[10],
    "train_full": RRS[0] + RRS[1] + RRS[2] + RRS[3] + RRS[7] + RRS[8] + RRS[9][:2],
    "train_tr": RRS[0] + RRS[1] + RRS[2] + RRS[3] + RRS[7][:2],
    "train_valid": RRS[8] + RRS[9][:2],
}


def test_retailrocket_fixture(tmp_path):
    res, frames = run(tmp_path, "retailrocket", {"events.csv": RR_CSV})
    check(frames, RR_EXPECTED)
    m = res.manifest
    assert m["filter_rounds"] == 3
    assert m["tsplit"] == 1442545200000 and m["test_boundary"] == RR_BT and m["valid_boundary"] == RR_BV
    assert m["time_unit"] == "ms"


# ------------------------------------------------------------------------------------------------ Coveo
HA, HB, HC, HJ = "f" * 64, "1" * 64, "c" * 64, "e" * 64  # hash order (1 < c < e < f) differs from index order
CD0 = ms("2018-12-01 00:00:00")
DAY, HOUR, MIN = 86_400_000, 3_600_000, 60_000
CT = CD0 + 9 * DAY + 10 * HOUR  # tsplit = max time
CBT, CBV = CT - DAY, CT - 2 * DAY
C1 = CD0 + DAY
C_ROWS = [  # (session hash, event_type, product_action, skus, time)
    ("s1", "pageview", "", "", C1),  # the empty SKU appears first: item index 0
    ("s1", "pageview", "detail", HA, C1 + 10_000),  # index 1
    ("s1", "pageview", "detail", HB, C1 + 60_000),  # index 2
    ("s1", "event", "purchase", HA + "|" + HB, C1 + 60_000 + HOUR + 41 * MIN),  # index 3 (one item, as a whole)
    ("s1", "pageview", "detail", HC, C1 + 60_000 + HOUR),  # index 4; exactly 3,600,000 ms after the last event
    ("s1", "event", "add", HC, C1 + 60_000 + HOUR + 40 * MIN),  # bridges: non-detail events count for sessions
    ("s1", "pageview", "detail", HA, C1 + 60_000 + HOUR + 80 * MIN),
    ("s2", "pageview", "detail", HB, CD0 + 2 * DAY + 8 * HOUR),
    ("s2", "pageview", "detail", HB, CD0 + 2 * DAY + 8 * HOUR + 5000),
    ("s2", "pageview", "detail", HA, CD0 + 2 * DAY + 8 * HOUR + 5000),  # tie: index HA (1) < HB (2)
    ("s3", "pageview", "detail", HB, CD0 + 3 * DAY + 12 * HOUR),
    ("s3", "pageview", "detail", HJ, CD0 + 3 * DAY + 12 * HOUR + 30_000),  # index 5
    ("s3", "pageview", "detail", HB, CD0 + 3 * DAY + 12 * HOUR + 60_000),
    ("s4", "pageview", "detail", HC, CD0 + 4 * DAY + 13 * HOUR),
    ("s4", "pageview", "detail", HC, CD0 + 4 * DAY + 13 * HOUR + 10_000),
    ("s7", "pageview", "detail", HA, CD0 + 5 * DAY + 9 * HOUR),
    ("s7", "pageview", "detail", HB, CD0 + 5 * DAY + 10 * HOUR + 1),  # 3,600,001 ms: split into two singletons
    ("s8", "pageview", "detail", HB, CBV - 60_000),
    ("s8", "pageview", "detail", HA, CBV - 30_000),
    ("s8", "pageview", "detail", HC, CBV + 30_000),
    ("s9", "pageview", "detail", HC, CBV + 5 * HOUR),
    ("s9", "pageview", "detail", HA, CBV + 5 * HOUR + 30_000),
    ("s10", "pageview", "detail", HA, CBT - 60_000),
    ("s10", "pageview", "detail", HB, CBT - 20_000),
    ("s10", "pageview", "detail", HC, CBT + 20_000),
    ("s11", "pageview", "detail", HA, CBT),
    ("s11", "pageview", "detail", HB, CBT + 60_000),
    ("s12", "pageview", "detail", HB, CT - 60_000),
    ("s12", "pageview", "detail", HC, CT - 30_000),
    ("s12", "pageview", "detail", HA, CT),
]
COVEO_CSV = (
    "session_id_hash,event_type,product_action,product_skus_hash,server_timestamp_epoch_ms,hashed_url\n"
    + "".join(f"{sh}-0000-4000-8000-00000000000a,{et},{pa},{sku},{t},0a1b2c\n" for sh, et, pa, sku, t in C_ROWS)
)
CS = {  # ItemId = item index; sessions: s1 -> 0, s2 -> 1, s3 -> 2, s4 -> 3, s7 -> 4 and 5, s8 -> 6, ... s12 -> 10
    0: [(0, 1, C1 + 10_000), (0, 2, C1 + 60_000), (0, 4, C1 + 60_000 + HOUR), (0, 1, C1 + 60_000 + HOUR + 80 * MIN)],
    1: [
        (1, 2, CD0 + 2 * DAY + 8 * HOUR),
        (1, 1, CD0 + 2 * DAY + 8 * HOUR + 5000),
        (1, 2, CD0 + 2 * DAY + 8 * HOUR + 5000),
    ],
    2: [(2, 2, CD0 + 3 * DAY + 12 * HOUR), (2, 2, CD0 + 3 * DAY + 12 * HOUR + 60_000)],
    6: [(6, 2, CBV - 60_000), (6, 1, CBV - 30_000), (6, 4, CBV + 30_000)],
    7: [(7, 4, CBV + 5 * HOUR), (7, 1, CBV + 5 * HOUR + 30_000)],
    8: [(8, 1, CBT - 60_000), (8, 2, CBT - 20_000), (8, 4, CBT + 20_000)],
    9: [(9, 1, CBT), (9, 2, CBT + 60_000)],
    10: [(10, 2, CT - 60_000), (10, 4, CT - 30_000), (10, 1, CT)],
}
C_EXPECTED = {
    "full": [r for k in sorted(CS) for r in CS[k]],
    "test": CS[9] + CS[10],
    "train_full": CS[0] + CS[1] + CS[2] + CS[6] + CS[7] + CS[8][:2],
    "train_tr": CS[0] + CS[1] + CS[2] + CS[6][:2],
    "train_valid": CS[7] + CS[8][:2],
}


def test_coveo_fixture(tmp_path):
    res, frames = run(tmp_path, "coveo", {"release_10_23_2020.csv": COVEO_CSV})
    check(frames, C_EXPECTED)
    m = res.manifest
    assert m["filter_rounds"] == 2
    assert m["tsplit"] == CT and m["test_boundary"] == CBT and m["valid_boundary"] == CBV


# ------------------------------------------------------------------------------------------------ Diginetica
DA, DB, DC, DJ, DK = 11, 12, 13, 99, 50


def M(day: int) -> int:
    """Midnight (UTC, ms) of 2016-05-01 + day."""
    return ms("2016-05-01 00:00:00") + day * 86_400_000


D_T = M(20) + 600_000
D_BT, D_BV = D_T - 7 * 86_400_000, D_T - 14 * 86_400_000  # M(13) + 600 s, M(6) + 600 s
DIGI_ROWS = """\
1;NA;11;0;2016-05-02
1;NA;11;20000;2016-05-02
1;NA;12;50000;2016-05-02
2;NA;13;10000;2016-05-03
2;NA;13;5000;2016-05-03
2;NA;11;5000;2016-05-03
3;5;12;1000;2016-05-04
3;5;99;2000;2016-05-04
3;5;12;3000;2016-05-04
4;NA;13;0;2016-05-05
4;NA;13;7000;2016-05-05
5;NA;50;0;2016-05-06
6;NA;50;0;2016-05-06
6;NA;11;9000;2016-05-06
10;NA;11;500000;2016-05-14
10;NA;12;550000;2016-05-14
10;NA;13;700000;2016-05-14
11;7;11;600000;2016-05-14
11;7;12;660000;2016-05-14
12;NA;11;0;2016-05-13
12;NA;13;700000;2016-05-14
13;NA;12;500000;2016-05-07
13;NA;11;550000;2016-05-07
13;NA;13;650000;2016-05-07
14;NA;13;0;2016-05-09
14;NA;11;1000;2016-05-09
15;NA;12;0;2016-05-21
15;NA;11;600000;2016-05-21
"""
DS = {
    1: [(1, DA, M(1)), (1, DB, M(1) + 50_000)],
    # ties at 5000 ms: item 11 before 13, so the 13 at 10000 repeats the previous item and goes
    2: [(2, DA, M(2) + 5000), (2, DC, M(2) + 5000)],
    3: [(3, DB, M(3) + 1000), (3, DB, M(3) + 3000)],
    10: [(10, DA, M(13) + 500_000), (10, DB, M(13) + 550_000), (10, DC, M(13) + 700_000)],
    11: [(11, DA, M(13) + 600_000), (11, DB, M(13) + 660_000)],
    # spans two dates: both rows use the earliest date (2016-05-13), so the second stays before the boundary
    12: [(12, DA, M(12)), (12, DC, M(12) + 700_000)],
    13: [(13, DB, M(6) + 500_000), (13, DA, M(6) + 550_000), (13, DC, M(6) + 650_000)],
    14: [(14, DC, M(8)), (14, DA, M(8) + 1000)],
    15: [(15, DB, M(20)), (15, DA, M(20) + 600_000)],
}
D_EXPECTED = {
    "full": [r for k in sorted(DS) for r in DS[k]],
    "test": DS[11] + DS[15],
    "train_full": DS[1] + DS[2] + DS[3] + DS[10][:2] + DS[12] + DS[13] + DS[14],
    "train_tr": DS[1] + DS[2] + DS[3] + DS[13][:2],
    "train_valid": DS[10][:2] + DS[12] + DS[14],
}


@pytest.mark.parametrize(
    "header", ["sessionId;userId;itemId;timeframe;eventdate\n", "session_id;user_id;item_id;timeframe;eventdate\n", ""]
)
def test_diginetica_fixture(tmp_path, header):
    res, frames = run(tmp_path, "diginetica", {"train-item-views.csv": header + DIGI_ROWS})
    check(frames, D_EXPECTED)
    m = res.manifest
    assert m["filter_rounds"] == 3
    assert m["tsplit"] == D_T and m["test_boundary"] == D_BT and m["valid_boundary"] == D_BV


def test_fixture_sizes():
    """The fixtures stay small enough to be checked by hand (10-30 raw rows)."""
    sizes = {
        "yoochoose": YOOCHOOSE_CLICKS.count("\n") + YOOCHOOSE_TEST.count("\n"),
        "rees46": REES_OCT.count("\n") + REES_NOV.count("\n") - 2,
        "retailrocket": len(RR_ROWS),
        "coveo": len(C_ROWS),
        "diginetica": DIGI_ROWS.count("\n"),
    }
    assert all(10 <= n <= 30 for n in sizes.values()), sizes


def test_no_rededuplication_after_filter():
    """(i, j, i) with j filtered must stay (i, i): the same frames through process() directly."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = pd.DataFrame(
            {
                "sessionId": [1, 1, 1] + [2, 2] * 5,
                "userId": float("nan"),
                "itemId": [7, 8, 7] + [7, 9] * 5,
                "timeframe": [0, 1000, 2000] + [0, 1000] * 5,
                "eventdate_days": [16900] * 3 + [16901] * 10,
            }
        )
        df.loc[3:, "sessionId"] = [2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
        res = process("diginetica", {"train-item-views.csv": df})
    full = res.frames["full"]
    s1 = full[full["SessionId"] == 1]
    assert s1["ItemId"].tolist() == [7, 7]
