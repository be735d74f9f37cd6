"""An implementation that cannot run here (``ImplementationUnavailable``, e.g. Microsoft Recommenders on Python
3.11) gets the verdict UNAVAILABLE with its one-line reason in summaries and the scoreboard, not PASS."""

from __future__ import annotations

from pathlib import Path

from reports.results import RunData
from reports.scoreboard import render_markdown
from reports.summary import unavailable_reason, verdict

REASON = "recommenders 1.2.1 cannot run on Python 3.11: importing GRUModel fails"


def _run(outcomes_reasons):
    results = [{"nodeid": f"t::c{i}", "outcome": o, "reason": r, "check": {"id": f"C-{i}", "kind": "K1"}}
               for i, (o, r) in enumerate(outcomes_reasons)]
    header = {"impl": {"name": "ms_recommenders", "family": "gru4rec", "role": "implementation", "version": "1.2.1"},
              "kinds": {"K1": "state reset"}}
    return RunData(directory=Path("/nowhere/ms_recommenders/20260101T000000Z"), header=header, results=results,
                   resumes=[], end={"status": "complete"})


def test_all_skipped_as_unavailable_is_not_a_pass():
    why = f"implementation ms_recommenders is not available here: {REASON}"
    run = _run([("skipped", why), ("skipped", why)])
    assert verdict(run) == "UNAVAILABLE"
    assert unavailable_reason(run) == REASON


def test_other_skips_and_failures_keep_their_verdicts():
    assert verdict(_run([("skipped", "no GPU"), ("skipped", "no GPU")])) == "PASS"
    why = f"implementation x is not available here: {REASON}"
    assert verdict(_run([("skipped", why), ("failed", "boom")])) == "FAIL"
    assert unavailable_reason(_run([("skipped", why), ("passed", "")])) is None


def test_scoreboard_prints_the_reason():
    from reports.scoreboard import _row

    why = f"implementation ms_recommenders is not available here: {REASON}"
    row = _row(_run([("skipped", why)]), "committed verdict", Path("/nowhere"))
    board = {"rows": [row], "families": {"gru4rec": ["K1"]}, "outcomes": []}
    md = render_markdown(board)
    assert "| UNAVAILABLE |" in md and f"- ms_recommenders 1.2.1: {REASON}" in md
