"""The committed verdicts under reports/verdicts/ are readable records: every results file parses as the
scoreboard reads it, no committed file carries a merge-conflict marker (one did, in cornac's verdict, and
the scoreboard silently left that verdict out), and the folder keeps its compact layout (one results.json.gz per
implementation and judged version, no generated pages, under 3 MB)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gru4rec_conformance.reports.compact import VERDICT_FILE, verdict_key
from gru4rec_conformance.reports.selection import collect_runs

VERDICTS = Path(__file__).resolve().parents[2] / "reports" / "verdicts"
CONFLICT = re.compile(r"^(<{7,8}|>{7,8}) \S", re.MULTILINE)


def _text(path: Path) -> str:
    import gzip

    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8", errors="replace")


def test_no_merge_conflict_markers_in_committed_verdicts():
    kept = (".json", ".jsonl", ".md", ".html", ".toml", ".gz")
    files = [p for p in VERDICTS.rglob("*") if p.is_file() and p.suffix in kept]
    assert files, f"no committed verdict files under {VERDICTS}"
    marked = [str(p.relative_to(VERDICTS)) for p in files if CONFLICT.search(_text(p))]
    assert not marked, f"merge-conflict markers in committed verdicts: {marked}"


def test_every_committed_verdict_is_readable():
    if not VERDICTS.is_dir():
        pytest.skip(f"{VERDICTS} absent")
    unreadable: list[str] = []
    runs = collect_runs([VERDICTS], unreadable)
    assert not unreadable, "unreadable committed verdicts: " + "; ".join(unreadable)
    names = {r.impl.get("name") for r in runs}
    assert {"reference", "cornac", "official_pytorch"} <= names, f"committed verdicts found: {sorted(names)}"


def test_committed_verdicts_are_compact():
    """One results.json.gz per verdict key, in the folder its header names (so a rerun lands on the same path);
    no summaries, cards or plots of runs (``reports render`` writes them); the folder stays under 3 MB."""
    runs = collect_runs([VERDICTS])
    assert runs
    for run in runs:
        assert run.directory.relative_to(VERDICTS) == verdict_key(run), run.directory
        assert [p.name for p in run.directory.iterdir() if p.is_file()] == [VERDICT_FILE], run.directory
    generated = [p for p in VERDICTS.rglob("*") if p.name in ("summary.html", "card.md", "card.html", "kinds.png")]
    assert not generated, f"generated pages committed: {generated}"
    size = sum(p.stat().st_size for p in VERDICTS.rglob("*") if p.is_file())
    assert size < 3 * 2**20, f"reports/verdicts holds {size / 2**20:.1f} MB"
