"""The study's expected outcomes (docs/study.md) computed against result records (``reports.agreement``): how each record
and each cell maps to an outcome, how outcomes map to agree / disagree / not tested, the table over several runs
(a table row without a verdict included), and ``reports study-agreement`` writing CSV and Markdown."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gru4rec_conformance import child_pythonpath
from gru4rec_conformance.reports import agreement as ag
from gru4rec_conformance.reports.results import load_run


def _rec(check: str, outcome: str, reason: str = "", **extra: Any) -> dict[str, Any]:
    return {"type": "result", "nodeid": f"conformance/gru4rec/test_x.py::test_{check}_{outcome}_{len(reason)}",
            "impl": extra.pop("impl", "gp:oob"), "outcome": outcome, "check": {"id": check, "kind": "K1", "title": ""},
            "reason": reason, "metrics": [], "features": [], "xfail": extra.pop("xfail", None), **extra}  # fmt: skip


NA = "unsupported by gp:oob: needs logq (not declared)"
HOOK = "unsupported by gp:oob: needs hook:train_step (not declared)"


@pytest.mark.parametrize(
    ("records", "outcome", "complete", "note"),
    [
        ([_rec("SR-1", "failed"), _rec("SR-1", "xfail")], ag.FAIL, True, "1/2 failed, 1 xfail"),
        ([_rec("SR-1", "xfail"), _rec("SR-1", "passed")], ag.XFAIL, True, "1/2 xfail"),
        ([_rec("SR-1", "passed"), _rec("SR-1", "skipped-unsupported", NA)], ag.PASS, True, "1 passed, 1 n/a"),
        ([_rec("SR-1", "xpass")], ag.PASS, True, "1 passed (xpass among them)"),
        ([_rec("SR-1", "passed"), _rec("SR-1", "skipped", "needs a GPU: run with --device cuda")], ag.PASS, False,
         "1 passed, 1 not run (needs a GPU)"),
        ([_rec("SR-1", "skipped-unsupported", NA)], ag.NA, True, "feature absent: logq"),
        ([_rec("SR-1", "skipped-unsupported", HOOK)], ag.NOT_RUN, True, "hook:train_step"),
        ([_rec("SR-1", "skipped-unsupported", "refused", missing=["n_sample"], outcome_detail="refused")], ag.NOT_RUN,
         True, "refused: n_sample"),
        ([_rec("SR-1", "error", "RuntimeError: boom")], ag.NOT_RUN, True, "error"),
        ([_rec("SR-2", "passed")], ag.NOT_RUN, True, "not in this run"),
    ],
)  # fmt: skip
def test_records_map_to_one_outcome_per_cell(records, outcome, complete, note):
    ours = ag.our_outcome(records, ["SR-1"])
    assert (ours.outcome, ours.complete, ours.note) == (outcome, complete, note)


@pytest.mark.parametrize(
    ("expected", "ours", "verdict"),
    [
        ("FAIL", ag.Ours(ag.FAIL, ""), "agree"),
        ("FAIL", ag.Ours(ag.XFAIL, ""), "agree"),
        ("FAIL", ag.Ours(ag.PASS, ""), "disagree"),
        ("FAIL", ag.Ours(ag.PASS, "", complete=False), "not tested"),  # what did not run may be what fails
        ("FAIL", ag.Ours(ag.NA, ""), "not tested"),
        ("FAIL", ag.Ours(ag.NOT_RUN, ""), "not tested"),
        ("pass", ag.Ours(ag.FAIL, ""), "disagree"),
        ("pass", ag.Ours(ag.XFAIL, ""), "disagree"),
        ("pass", ag.Ours(ag.PASS, "", complete=False), "agree"),
        ("pass", ag.Ours(ag.NA, ""), "not tested"),  # a declared-absent feature ran no check: nothing agrees
        ("n/a", ag.Ours(ag.NA, ""), "not tested"),
        ("n/a", ag.Ours(ag.PASS, ""), "agree"),
        ("n/a", ag.Ours(ag.NOT_RUN, ""), "not tested"),
    ],
)
def test_outcomes_map_to_agree_disagree_not_tested(expected, ours, verdict):
    assert ag.agreement(expected, ours) == verdict
    assert bool(ag.not_tested_reason(expected, ours)) == (verdict == "not tested")  # every not tested says why


@pytest.mark.parametrize(
    ("expected", "records", "why"),
    [
        ("pass", [_rec("SR-1", "skipped-unsupported", NA)], "absent feature (logq)"),
        ("FAIL", [_rec("SR-1", "skipped-unsupported", HOOK)], "missing hook (hook:train_step)"),
        ("pass", [_rec("SR-1", "skipped-unsupported", "", missing=["layers:[24, 12]"], outcome_detail="refused")],
         "refused (layers:[24, 12])"),
        ("pass", [_rec("SR-1", "error", "RuntimeError: boom")], "could not run (error)"),
        ("pass", [], "could not run (not in this run)"),
        ("FAIL", [_rec("SR-1", "passed"), _rec("SR-1", "skipped", "needs a GPU: run with --device cuda")],
         "partial: could not run (needs a GPU)"),
        ("pass", [_rec("SR-1", "passed"), _rec("SR-1", "skipped-unsupported", NA)], ""),  # one ran: it agrees
    ],
)  # fmt: skip
def test_a_cell_not_tested_names_why(expected, records, why):
    assert ag.not_tested_reason(expected, ag.our_outcome(records, ["SR-1"])) == why


def _write_run(folder: Path, name: str, study: dict[str, str] | None, records: list[dict[str, Any]]) -> Path:
    header = {"type": "run", "schema": 1, "run_id": f"{name}/{folder.name}", "started": "2026-12-01T10:00:00Z",
              "command": ["pytest", "conformance"], "impl": {"name": name, "family": "gru4rec",
              "role": "implementation", "version": "owner/repo@abcdef0123", "features": {}, "study": study},
              "suite": {"version": "2026.11.0", "string": "2026.11.0+gdeadbee", "git_sha": ""}, "device": "cpu"}  # fmt: skip
    end = {"type": "end", "status": "complete", "exitstatus": 0, "finished": "2026-12-01T10:00:00Z"}
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [header, *records, end]))
    return folder


def _verdicts(root: Path) -> None:
    xfail = {"index": 1, "kind": "bug", "defect": "GP-1", "fix_level": "INF", "reason": "no reset", "link": "none"}
    _write_run(root / "gp" / "oob" / "abcdef0", "gp:oob", {"implementation": "GRU4REC-pytorch", "variant": "OOB"}, [
        _rec("SR-1", "xfail", xfail=xfail),  # expected FAIL
        _rec("EV-1", "failed"),  # expected pass
        _rec("EV-2", "passed"),  # expected pass
        _rec("LF-1", "passed"), _rec("LF-2", "passed"),  # LF-1/2 expected FAIL (BPR-max)
        _rec("SO-1", "skipped-unsupported", HOOK),  # expected FAIL, adapter lacks the hook
    ])  # fmt: skip
    # the official row through the alias of a name without a study declaration
    _write_run(root / "official_pytorch" / "d1fc311", "official_pytorch", None, [_rec("SR-1", "passed")])
    _write_run(root / "other" / "1.0", "other", None, [_rec("SR-1", "passed")])  # no expected-outcome row


def test_cells_and_table_cover_every_b3_row(tmp_path):
    _verdicts(tmp_path)
    run = load_run(tmp_path / "gp" / "oob" / "abcdef0")
    cells = {c["checks"]: c for c in ag.cells(run)}
    assert len(cells) == 13  # every column of the GRU4REC-pytorch OOB row
    got = {k: (c["expected"], c["ours"], c["agreement"]) for k, c in cells.items()}
    assert got["SR-1"] == ("FAIL", "xfail", "agree") and "GP-1" in cells["SR-1"]["our_note"]
    assert got["EV-1"] == ("pass", "fail", "disagree")
    assert got["EV-2"] == ("pass", "pass", "agree")
    assert got["LF-1/2"] == ("FAIL", "pass", "disagree") and cells["LF-1/2"]["check_ids"] == "LF-1 LF-2"
    assert got["SO-1"] == ("FAIL", "not run", "not tested") and cells["SO-1"]["our_note"] == "hook:train_step"
    assert got["IN-1"] == ("FAIL", "not run", "not tested") and cells["IN-1"]["our_note"] == "not in this run"
    assert ag.tally(cells.values()) == {"agree": 2, "disagree": 2, "not tested": 9}

    from gru4rec_conformance.reports.selection import collect_runs, newest_per_key

    table = ag.agreement_table(list(newest_per_key(collect_runs([tmp_path])).values()))
    impls = {r["implementation"] for r in table}
    assert "other" not in impls and {"gp:oob", "official_pytorch", "–"} <= impls
    official = [r for r in table if r["implementation"] == "official_pytorch"]
    assert {r["study_implementation"] for r in official} == {"GRU4Rec Official"} and len(official) == 13
    missing = [r for r in table if r["study_implementation"] == "Recpack" and r["fix_level"] == "MAJ"]
    assert len(missing) == 13 and {(r["ours"], r["our_note"], r["agreement"]) for r in missing} == {
        ("not run", "no verdict", "not tested")
    }


def test_cli_writes_csv_and_markdown(tmp_path):
    _verdicts(tmp_path / "verdicts")
    env = {**os.environ, "PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH"))}
    done = subprocess.run([sys.executable, "-m", "gru4rec_conformance.reports", "study-agreement",
                           str(tmp_path / "verdicts"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "out" / "study_agreement.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == ag.CSV_FIELDS
    sr1 = next(r for r in rows if r["implementation"] == "gp:oob" and r["checks"] == "SR-1")
    assert (sr1["expected"], sr1["ours"], sr1["agreement"], sr1["judged"]) == ("FAIL", "xfail", "agree", "abcdef0")
    md = (tmp_path / "out" / "study_agreement.md").read_text(encoding="utf-8")
    assert "| GRU4REC-pytorch | OOB | gp:oob | abcdef0 | 2 | 2 | 9 |" in md
    assert "| Recpack | MAJ | – | – | 0 | 0 | 13 |" in md
    assert "## How our outcome and the agreement are computed" in md
