"""The implementation READMEs' generated status block (``reports.readme_status``): every committed README has one,
it equals what the committed records say (so a hand-written "not tested" cannot contradict them unnoticed), and
``render --readmes`` rewrites it in place and only it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gru4rec_conformance.reports import readme_status as rs
from gru4rec_conformance.reports.selection import collect_runs

VERDICTS = Path(__file__).resolve().parents[2] / "reports" / "verdicts"
READMES = sorted(VERDICTS.glob("*/README.md"))


@pytest.fixture(scope="module")
def committed_runs():
    return collect_runs([VERDICTS])


@pytest.mark.parametrize("readme", READMES, ids=[p.parent.name for p in READMES])
def test_committed_readme_block_is_current(readme, committed_runs):
    text = readme.read_text(encoding="utf-8")
    assert rs.BEGIN in text and rs.END in text, f"{readme}: no generated status block (add the two markers)"
    expected = rs.replace_block(text, rs.status_block(readme.parent.name, committed_runs))
    assert expected == text, f"{readme}: the generated status block is out of date; run `{rs.COMMAND}`"


def _run(folder: Path, name: str, records: list[dict]) -> None:
    header = {"type": "run", "schema": 1, "run_id": f"{name}/{folder.name}", "started": "2026-12-01T10:00:00Z",
              "command": ["pytest", "conformance"], "impl": {"name": name, "family": "gru4rec",
              "role": "implementation", "version": "owner/repo@abcdef0123", "features": {}, "study": None},
              "suite": {"version": "2026.11.0", "string": "2026.11.0+gdeadbee", "git_sha": ""}, "device": "cpu"}  # fmt: skip
    end = {"type": "end", "status": "complete", "exitstatus": 0, "finished": "2026-12-01T10:00:00Z"}
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [header, *records, end]))


def _rec(check: str, outcome: str, reason: str = "", **extra) -> dict:
    return {"type": "result", "nodeid": f"conformance/gru4rec/test_x.py::test_{check}", "impl": "x", "outcome": outcome,
            "check": {"id": check, "kind": "K1", "title": ""}, "reason": reason, "metrics": [], "features": [],
            "xfail": None, **extra}  # fmt: skip


def test_render_readmes_rewrites_only_the_block(tmp_path):
    _run(tmp_path / "x" / "1.0", "x", [
        _rec("SR-1", "passed"),
        _rec("SO-1", "skipped-unsupported", "unsupported by x: needs hook:train_step (not declared)"),
        _rec("LF-5", "skipped-unsupported", "unsupported by x: needs logq (not declared)"),
        _rec("HP-3", "skipped-unsupported", "", missing=["n_sample"], outcome_detail="refused"),
    ])  # fmt: skip
    readme = tmp_path / "x" / "README.md"
    readme.write_text(
        f"# x\n\nHand-written: SO-1 is not tested.\n\n{rs.BEGIN}\nstale\n{rs.END}\n\n## Reading\n\nkept\n"
    )
    other = tmp_path / "y" / "README.md"
    other.parent.mkdir()
    other.write_text("# y\n\nno markers\n")
    runs = collect_runs([tmp_path])
    updated, current = rs.update_readmes([tmp_path], runs)
    assert updated == [readme] and current == []
    text = readme.read_text()
    assert text.startswith("# x\n\nHand-written: SO-1 is not tested.\n\n" + rs.BEGIN) and text.endswith(
        "## Reading\n\nkept\n"
    )
    assert "stale" not in text
    assert "missing hook (hook:train_step): SO-1" in text and "refused (n_sample): HP-3" in text
    assert "| `x/abcdef0` |" in text and "| 1 |" in text  # LF-5 counted as n/a, not as not tested
    assert other.read_text() == "# y\n\nno markers\n"  # a README without markers is left alone
    assert rs.update_readmes([tmp_path], runs) == ([], [readme])  # current: not rewritten


def test_replace_block_needs_both_markers():
    assert rs.replace_block("no markers", "B") is None
    assert rs.replace_block(f"a {rs.BEGIN} only", "B") is None
    assert rs.replace_block(f"a {rs.BEGIN} x {rs.END} b", "B") == "a B b"
