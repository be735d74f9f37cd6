"""The committed verdicts under reports/verdicts/ are readable records: every results file parses as the
scoreboard reads it, and no committed file carries a merge-conflict marker (one did, in cornac's verdict, and
the scoreboard silently left that verdict out)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gru4rec_conformance.reports.scoreboard import verdict_runs

VERDICTS = Path(__file__).resolve().parents[2] / "reports" / "verdicts"
CONFLICT = re.compile(r"^(<{7,8}|>{7,8}) \S", re.MULTILINE)


def test_no_merge_conflict_markers_in_committed_verdicts():
    files = [p for p in VERDICTS.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".md", ".html", ".toml")]
    assert files, f"no committed verdict files under {VERDICTS}"
    marked = [
        str(p.relative_to(VERDICTS)) for p in files if CONFLICT.search(p.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not marked, f"merge-conflict markers in committed verdicts: {marked}"


def test_every_committed_verdict_is_readable():
    if not VERDICTS.is_dir():
        pytest.skip(f"{VERDICTS} absent")
    unreadable: list[str] = []
    runs = verdict_runs(VERDICTS, unreadable)
    assert not unreadable, "unreadable committed verdicts: " + "; ".join(unreadable)
    names = {r.impl.get("name") for r in runs}
    assert {"reference", "cornac", "official_pytorch"} <= names, f"committed verdicts found: {sorted(names)}"
