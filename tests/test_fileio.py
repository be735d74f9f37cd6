"""gru4rec_conformance.fileio: atomic writes (crash leaves the old file and no temporary, modes follow the umask,
fsync unless told otherwise) and new run folders (UTC stamp, never an existing folder, suffix on collision)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import stat
from pathlib import Path

import pytest

from gru4rec_conformance import fileio
from gru4rec_conformance.fileio import (
    TMP_MARK,
    atomic_path,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    new_run_dir,
    remove_stale_temporaries,
    utc_stamp,
)

WHEN = dt.datetime(2026, 11, 30, 4, 3, 32, tzinfo=dt.timezone.utc)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask():
    """Set the process umask for one test (restored afterwards)."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def test_writes_text_bytes_and_json(tmp_path):
    assert atomic_write_text(tmp_path / "a.md", "x\ny\n") == tmp_path / "a.md"
    assert (tmp_path / "a.md").read_bytes() == b"x\ny\n"  # no newline translation
    atomic_write_bytes(str(tmp_path / "b.bin"), b"\x00\xff")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\xff"
    atomic_write_json(tmp_path / "c.json", {"b": 1, "a": float("nan")}, sort_keys=True, trailing_newline=True)
    assert (tmp_path / "c.json").read_text() == '{\n "a": NaN,\n "b": 1\n}\n'
    atomic_write_json(tmp_path / "d.json", {"p": Path("q")}, indent=None, default=str)
    assert json.loads((tmp_path / "d.json").read_text()) == {"p": "q"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "b.bin", "c.json", "d.json"]


def test_crash_at_replace_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    target.write_text("old")

    def crash(src, dst):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    for write in (
        lambda: atomic_write_text(target, "new"),
        lambda: atomic_write_bytes(target, b"new"),
        lambda: atomic_write_json(target, {"new": 1}),
    ):
        with pytest.raises(OSError, match="simulated crash"):
            write()
        assert target.read_text() == "old"
        assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_error_or_interrupt_inside_the_block_keeps_the_old_file(tmp_path):
    target = tmp_path / "plot.png"
    target.write_bytes(b"old")
    for exc in (RuntimeError("writer failed"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with atomic_path(target) as tmp:
                tmp.write_bytes(b"half")
                raise exc
        assert target.read_bytes() == b"old"
        assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_unserialisable_json_touches_nothing(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old")
    with pytest.raises(TypeError):
        atomic_write_json(target, {"x": object()})
    with pytest.raises(ValueError):
        atomic_write_json(target, [float("inf")], allow_nan=False)
    assert target.read_text() == "old" and len(list(tmp_path.iterdir())) == 1


def test_missing_folder_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write_text(tmp_path / "no" / "x.txt", "x")
    assert not (tmp_path / "no").exists()


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_mode_follows_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    atomic_write_text(tmp_path / "a.txt", "x")
    with atomic_path(tmp_path / "b.csv") as tmp:
        assert _mode(tmp) == expected  # the reserved temporary file already has the final mode
        tmp.write_text("x")  # a writer that opens the name itself keeps it
    assert _mode(tmp_path / "a.txt") == expected
    assert _mode(tmp_path / "b.csv") == expected
    # replacing an existing file gives the new file the umask's mode, not the old file's
    os.chmod(tmp_path / "a.txt", 0o600)
    atomic_write_text(tmp_path / "a.txt", "y")
    assert _mode(tmp_path / "a.txt") == expected


def test_temporary_name_is_hidden_marked_and_keeps_the_suffix(tmp_path):
    with atomic_path(tmp_path / "stats.tsv.gz") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".stats.tsv.gz" + TMP_MARK)
        assert tmp.suffix == ".gz"  # writers that pick a format by extension (pandas, matplotlib) pick the right one
        tmp.write_bytes(b"")


@pytest.mark.parametrize("durable, expected", [(True, 2), (False, 0)])
def test_fsync_of_file_and_folder_unless_not_durable(tmp_path, monkeypatch, durable, expected):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    atomic_write_text(tmp_path / "a.txt", "x", durable=durable)
    assert len(calls) == (expected if os.name == "posix" else expected // 2)


def test_remove_stale_temporaries_removes_only_ours(tmp_path):
    (tmp_path / ".manifest.json.tmp-123-abcdef01.json").write_text("")
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / ".hidden").write_text("")
    assert remove_stale_temporaries(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hidden", "manifest.json"]
    assert remove_stale_temporaries(tmp_path / "missing") == 0


def test_utc_stamp():
    assert utc_stamp(WHEN) == "20261130T040332Z"
    assert utc_stamp(WHEN.astimezone(dt.timezone(dt.timedelta(hours=2)))) == "20261130T040332Z"
    assert re.fullmatch(r"\d{8}T\d{6}Z", utc_stamp())
    with pytest.raises(ValueError, match="naive"):
        utc_stamp(dt.datetime(2026, 1, 1))


def test_new_run_dir_never_reuses_a_folder(tmp_path):
    root = tmp_path / "out" / "impl"  # created with its parents
    first = new_run_dir(root, when=WHEN)
    assert first == root / "20261130T040332Z" and first.is_dir() and not any(first.iterdir())
    (first / "results.jsonl").write_text("kept")
    assert new_run_dir(root, when=WHEN).name == "20261130T040332Z-1"
    assert new_run_dir(root, when=WHEN).name == "20261130T040332Z-2"
    assert (first / "results.jsonl").read_text() == "kept"
    assert (
        new_run_dir(root, when=WHEN, prefix="finetuner-protocol-", first_suffix=2).name
        == "finetuner-protocol-20261130T040332Z"
    )
    assert (
        new_run_dir(root, when=WHEN, prefix="finetuner-protocol-", first_suffix=2).name
        == "finetuner-protocol-20261130T040332Z-2"
    )
    with pytest.raises(FileExistsError, match="no free run folder"):
        new_run_dir(root, when=WHEN, attempts=3)


def test_report_run_folders_number_the_second_run_2(tmp_path, monkeypatch):
    """reports/ keeps its numbering (<stamp>, <stamp>-2, ...) on top of new_run_dir."""
    from gru4rec_conformance.reports.writer import RunWriter

    monkeypatch.setattr(fileio, "utc_stamp", lambda when=None: "20261130T040332Z")
    names = []
    for _ in range(3):
        w = RunWriter.create(tmp_path, "mutant:adam", {})
        w.close()
        names.append(w.directory.relative_to(tmp_path).as_posix())
    assert names == ["mutant.adam/20261130T040332Z", "mutant.adam/20261130T040332Z-2", "mutant.adam/20261130T040332Z-3"]
