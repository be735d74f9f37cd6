"""prepare's inputs : explicit ``--file`` paths identified by header/columns, shipped sample names
found by content, missing inputs named with why and the documented way to run without them, empty results as
errors naming the step and the counts, errors on their own line, the files used in the manifest."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gru4rec_conformance import child_pythonpath
from gru4rec_conformance.datasets.sessions.inputs import InputError, MissingInputError, identify
from gru4rec_conformance.datasets.sessions.pipeline import PARTS, EmptyResultError, prepare
from gru4rec_conformance.datasets.sessions.readers import RAW_FILES

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("yoochoose", "rees46", "coveo", "retailrocket", "diginetica")


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH"))}
    return subprocess.run(
        [sys.executable, "-m", "gru4rec_conformance.datasets", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", NAMES)
def test_identify_every_format_and_role(synthetic_raw, name):
    for fname in RAW_FILES[name]:
        got = identify(synthetic_raw(name) / fname)
        assert (got.dataset, got.role) == (name, fname), got.evidence


def test_identify_other_spellings(tmp_path):
    snake = tmp_path / "x.csv"
    snake.write_text("session_id;user_id;item_id;timeframe;eventdate\n1;NA;81766;526309;2016-05-09\n")
    none = tmp_path / "y.csv"
    none.write_text("1;NA;81766;526309;2016-05-09\n")
    buys = tmp_path / "b.dat"
    buys.write_text("420374,2014-04-06T18:44:58.314Z,214537888,12462,1\n")
    assert identify(snake).role == identify(none).role == "train-item-views.csv"
    assert identify(buys).dataset == "yoochoose-buys"
    with pytest.raises(InputError, match="buys file"):
        prepare("yoochoose", None, tmp_path / "o", files=[buys])
    dec = tmp_path / "2019-Dec.csv"
    dec.write_text("event_time,event_type,product_id,category_id,category_code,brand,price,user_id,user_session\n"
                   "2019-12-01 00:00:00 UTC,view,1,2,,b,1.0,3,u\n")  # fmt: skip
    with pytest.raises(InputError, match="only October and November"):
        prepare("rees46", None, tmp_path / "o", files=[dec])


@pytest.mark.parametrize("name", ["rees46", "yoochoose"])
def test_explicit_files_under_other_names_give_the_same_outputs(synthetic_raw, tmp_path, name):
    raw = synthetic_raw(name)
    by_dir = prepare(name, raw, tmp_path / "dir")
    files = []
    for k, fname in enumerate(reversed(RAW_FILES[name])):  # order of --file does not matter
        dst = tmp_path / "given" / (f"part{k}_test.dat" if fname == "yoochoose-test.dat" else f"part{k}.csv")
        dst.parent.mkdir(exist_ok=True)
        shutil.copy(raw / fname, dst)
        files.append(dst)
    by_file = prepare(name, None, tmp_path / "file", files=files)
    for part in PARTS:
        pd.testing.assert_frame_equal(by_file.load(part), by_dir.load(part), obj=part)
    m = by_file.manifest
    assert [i["file"] for i in m["inputs"]] == list(RAW_FILES[name])  # the study's order, whatever --file's order
    for inp in m["inputs"]:
        p = Path(inp["path"])
        assert p.parent == tmp_path / "given"
        assert inp["bytes"] == p.stat().st_size
        assert inp["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
        assert inp["identified_by"]
    assert m["missing_inputs"] == []


def test_wrong_dataset_and_duplicate_role(synthetic_raw, tmp_path):
    with pytest.raises(InputError, match=r"a retailrocket file .*not an input of coveo"):
        prepare("coveo", None, tmp_path / "o", files=[synthetic_raw("retailrocket") / "events.csv"])
    oct_ = synthetic_raw("rees46") / "2019-Oct.csv"
    copy = tmp_path / "copy.csv"
    shutil.copy(oct_, copy)
    with pytest.raises(InputError, match="both are 2019-Oct.csv"):
        prepare("rees46", None, tmp_path / "o", files=[oct_, copy])
    assert not (tmp_path / "o").exists()


def test_missing_second_input_says_which_file_why_and_the_option(synthetic_raw, tmp_path):
    clicks = synthetic_raw("yoochoose") / "yoochoose-clicks.dat"
    with pytest.raises(MissingInputError) as e:
        prepare("yoochoose", None, tmp_path / "o", files=[clicks])
    msg = str(e.value)
    assert (
        "yoochoose-test.dat" in msg
        and "docs/datasets.md" in msg
        and "--allow-missing" in msg
        and e.value.missing == ["yoochoose-test.dat"]
    )
    res = prepare("yoochoose", None, tmp_path / "o", files=[clicks], allow_missing=True)
    assert res.manifest["missing_inputs"] == ["yoochoose-test.dat"] and res.manifest["index_quirk_applied"] is False
    assert [i["file"] for i in res.manifest["inputs"]] == ["yoochoose-clicks.dat"]
    assert len(res.load("test")) > 0

    oct_ = synthetic_raw("rees46") / "2019-Oct.csv"
    with pytest.raises(MissingInputError, match=r"2019-Nov\.csv.*2019-11-30.*no documented way"):
        prepare("rees46", None, tmp_path / "r", files=[oct_])
    # with October alone the fixed split date leaves test empty: an error naming the split and the counts
    with pytest.raises(EmptyResultError, match=r"split 'test' is empty: \d+ events before .*0 after") as e2:
        prepare("rees46", None, tmp_path / "r", files=[oct_], allow_missing=True)
    assert e2.value.step == "test" and e2.value.before > 0 and e2.value.after == 0
    assert not (tmp_path / "r").exists()


def test_nothing_found_points_at_the_download(tmp_path):
    with pytest.raises(MissingInputError, match=r"(?s)events\.csv.*datasets info retailrocket"):
        prepare("retailrocket", tmp_path, tmp_path / "o")


def test_filter_that_removes_everything_is_an_error(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = [f"{1442000000000 + k * 1000},{k % 7},view,{100 + k},\n" for k in range(40)]  # 40 items, 1 event each
    (raw / "events.csv").write_text("timestamp,visitorid,event,itemid,transactionid\n" + "".join(rows))
    with pytest.raises(EmptyResultError, match=r"support filter removed every event: 40 rows before .*0 after") as e:
        prepare("retailrocket", raw, tmp_path / "out")
    assert e.value.step == "support filter" and (e.value.before, e.value.after) == (40, 0)
    assert not (tmp_path / "out").exists()
    res = prepare("retailrocket", raw, tmp_path / "out", allow_empty=True)
    assert res.manifest["options"]["allow_empty"] is True
    assert any("support filter removed every event" in w for w in res.manifest["warnings"])


# ---------------------------------------------------------------------------------------------- real slices


def test_shipped_samples_by_file_and_by_folder(shared_sessions, tmp_path):
    sample = shared_sessions / "diginetica" / "sample_train-item-views.csv"
    by_file = prepare("diginetica", None, tmp_path / "f", files=[sample])
    by_dir = prepare("diginetica", sample.parent, tmp_path / "d")  # found by content, not by name
    assert len(by_file.load("train_full")) == len(by_dir.load("train_full")) == 707
    assert by_dir.manifest["inputs"][0]["path"] == str(sample)
    assert "session_id;user_id" in by_dir.manifest["inputs"][0]["identified_by"]


def test_retailrocket_sample_fails_with_the_counts(shared_sessions, tmp_path):
    """The 100-row sample (one hour of 2015-06-02, 97 items) cannot survive the item-support filter: an error
    naming the step and the counts, exit 2, printed on its own line after the progress bar, nothing written."""
    sample = shared_sessions / "retailrocket" / "retailrocket-sample.csv"
    with pytest.raises(EmptyResultError) as e:
        prepare("retailrocket", None, tmp_path / "o", files=[sample])
    assert (e.value.step, e.value.before, e.value.after) == ("support filter", 95, 0)
    out = tmp_path / "cli"
    r = _cli("prepare", "retailrocket", "--file", str(sample), "--out", str(out))  # with the progress bar
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.splitlines()
    err = [ln for ln in lines if "support filter removed every event" in ln]
    assert len(err) == 1 and err[0].startswith("error: retailrocket: "), r.stderr
    assert "95 rows before" in err[0] and "Traceback" not in r.stderr
    assert not out.exists()


def test_rees46_head_needs_november(shared_sessions, tmp_path):
    head = shared_sessions / "rees46" / "2019-Oct_head17434.csv"
    r = _cli("prepare", "rees46", "--file", str(head), "--out", str(tmp_path / "o"), "--quiet")
    assert r.returncode == 2 and "2019-Nov.csv is needed because" in r.stderr
    r2 = _cli(
        "prepare", "rees46", "--file", str(head), "--out", str(tmp_path / "o"), "--allow-missing", "--allow-empty"
    )
    assert r2.returncode == 0, r2.stderr
    assert "input 2019-Nov.csv: missing" in r2.stdout and "rows=2516" in r2.stdout
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["missing_inputs"] == ["2019-Nov.csv"] and m["inputs"][0]["path"] == str(head)


def test_yoochoose_head_needs_the_test_file(shared_sessions, tmp_path):
    r = _cli("prepare", "yoochoose", "--raw", str(shared_sessions / "yoochoose" / "raw_head"), "--out",
             str(tmp_path / "o"), "--allow-missing", "--quiet")  # fmt: skip
    assert r.returncode == 2 and "support filter removed every event" in r.stderr, r.stderr
    r2 = _cli("prepare", "yoochoose", "--raw", str(shared_sessions / "yoochoose" / "raw_head"), "--out",
              str(tmp_path / "o"), "--quiet")  # fmt: skip
    assert r2.returncode == 2 and "yoochoose-test.dat is needed because" in r2.stderr


def test_cli_requires_an_input():
    r = _cli("prepare", "coveo", "--out", "/nonexistent")
    assert r.returncode == 2 and "--raw DIR, --file PATH" in r.stderr
