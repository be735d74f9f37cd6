"""Bad raw input: a clear error naming file, line and column (a truncated last line only: a warning), and
nothing half-written left behind (docs/architecture.md "Errors on bad input")."""

from __future__ import annotations

import re
import warnings

import pytest

from gru4rec_conformance.datasets._suite_io import RawFormatError, TruncatedLastLineWarning
from gru4rec_conformance.datasets.sessions import readers
from gru4rec_conformance.datasets.sessions.pipeline import prepare

REES_HEADER = "event_time,event_type,product_id,category_id,category_code,brand,price,user_id,user_session\n"
REES_ROW = "2019-10-01 00:00:0{k} UTC,view,4460006{k},1,,b,1.0,54131214{k},u{k}\n"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def raises(func, path, *, line=None, column=None, match=None):
    with pytest.raises(RawFormatError) as ei:
        func(path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}:{line}:" if line is not None else f"{path}:"), msg
    assert ei.value.line == line
    if column is not None:
        assert ei.value.column == column and repr(column) in msg, msg
    if match is not None:
        assert re.search(match, msg), msg
    return msg


def test_missing_column(tmp_path):
    text = REES_HEADER.replace(",user_id", "") + "2019-10-01 00:00:00 UTC,view,1,1,,b,1.0,u\n"
    raises(
        readers.read_rees46,
        write(tmp_path, "2019-Oct.csv", text),
        line=1,
        column="user_id",
        match="header lacks column",
    )


def test_wrong_separator_headered(tmp_path):
    text = "sessionId,userId,itemId,timeframe,eventdate\n1,NA,5,0,2016-05-09\n"
    raises(readers.read_diginetica, write(tmp_path, "train-item-views.csv", text), line=1, match="wrong separator")


def test_wrong_separator_headerless(tmp_path):
    text = "1;2014-04-07T10:51:09.277Z;214536502;0\n"
    raises(
        readers.read_yoochoose,
        write(tmp_path, "yoochoose-clicks.dat", text),
        line=1,
        match="expected 4 fields.*wrong separator",
    )


def test_unparsable_timestamp_names_line_and_column(tmp_path):
    text = REES_HEADER + REES_ROW.format(k=1) + "2019-10-01 25:61:00 UTC,view,5,1,,b,1.0,7,u\n" + REES_ROW.format(k=2)
    raises(readers.read_rees46, write(tmp_path, "2019-Oct.csv", text), line=3, column="event_time")


def test_unparsable_iso_timestamp_deep_in_a_big_file(tmp_path):
    good = "".join(f"{k},2014-04-07T10:51:09.277Z,214536502,0\n" for k in range(20_000))
    text = good + "20001,2014-04-07 10:51:09,214536502,0\n" + good
    raises(readers.read_yoochoose, write(tmp_path, "yoochoose-clicks.dat", text), line=20_001, column="Timestamp")


def test_unparsable_integer(tmp_path):
    text = (
        "timestamp,visitorid,event,itemid,transactionid\n1433221332117,257597,view,355908,\n"
        "1433224214164,99x,view,248676,\n"
    )
    raises(readers.read_retailrocket, write(tmp_path, "events.csv", text), line=3, column="visitorid")


def test_empty_required_value(tmp_path):
    text = "timestamp,visitorid,event,itemid,transactionid\n1433221332117,257597,view,,\n"
    raises(readers.read_retailrocket, write(tmp_path, "events.csv", text), line=2, column="itemid", match="empty value")


def test_non_canonical_id(tmp_path):
    text = REES_HEADER + REES_ROW.format(k=1) + "2019-10-01 00:00:05 UTC,view,007,1,,b,1.0,5,u\n"
    raises(
        readers.read_rees46,
        write(tmp_path, "2019-Oct.csv", text),
        line=3,
        column="product_id",
        match="canonical decimal integer",
    )


def test_wrong_field_count_in_the_middle(tmp_path):
    text = REES_HEADER + REES_ROW.format(k=1) + "2019-10-01 00:00:05 UTC,view,5,1\n" + REES_ROW.format(k=2)
    raises(readers.read_rees46, write(tmp_path, "2019-Oct.csv", text), line=3, match="expected 9 fields")


@pytest.mark.parametrize("text, what", [("", "no bytes"), ("\n\n", "only blank lines")])
def test_empty_file(tmp_path, text, what):
    raises(readers.read_yoochoose, write(tmp_path, "yoochoose-clicks.dat", text), match=what)


def test_header_only(tmp_path):
    raises(readers.read_rees46, write(tmp_path, "2019-Oct.csv", REES_HEADER), line=2, match="no data rows")


def test_truncated_last_line_is_a_warning(tmp_path):
    text = REES_HEADER + REES_ROW.format(k=1) + REES_ROW.format(k=2) + "2019-10-01 00:00:09 UTC,view,123,20"
    p = write(tmp_path, "2019-Oct.csv", text)
    with pytest.warns(TruncatedLastLineWarning, match=re.escape(f"{p}:4:")):
        df = readers.read_rees46(p)
    assert len(df) == 2


def test_complete_last_line_without_line_end_is_kept(tmp_path):
    text = REES_HEADER + REES_ROW.format(k=1) + REES_ROW.format(k=2).rstrip("\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = readers.read_rees46(write(tmp_path, "2019-Oct.csv", text))
    assert len(df) == 2


def test_unknown_dataset_name():
    with pytest.raises(ValueError, match="name: unknown dataset 'rsc15'"):
        readers.read_raw("rsc15", "x")


def test_missing_raw_file_names_folder_and_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="events.csv"):
        prepare("retailrocket", tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_prepare_leaves_nothing_behind_on_bad_input(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "events.csv").write_text("timestamp,visitorid,event,itemid,transactionid\n1,2,view,x,\n")
    out = tmp_path / "out"
    with pytest.raises(RawFormatError, match=r"events\.csv:2: column 'itemid'"):
        prepare("retailrocket", raw, out)
    assert not out.exists()


def test_prepare_failure_keeps_an_earlier_complete_run(tmp_path):
    from gru4rec_conformance.datasets.sessions.synthetic import generate_raw

    raw = tmp_path / "raw"
    generate_raw("retailrocket", raw, 2e-3, seed=3)
    out = tmp_path / "out"
    first = prepare("retailrocket", raw, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (raw / "events.csv").write_text("timestamp,visitorid,event,itemid,transactionid\n1,2,view,x,\n")
    with pytest.raises(RawFormatError):
        prepare("retailrocket", raw, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert first.manifest["filter_rounds"] >= 1
