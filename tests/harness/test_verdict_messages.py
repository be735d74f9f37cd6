"""No current committed verdict's check message names a cause its probes did not isolate (the rule of
docs/checks.md, read off the records themselves, so that a message written before a check got its cause table is
found too).

A failed check's message either carries a diagnosis (``isolated: …`` or ``cause not isolated; candidates: …``,
conformance/_harness/diagnosis.py) or states one measured finding. A finding that offers alternatives ("A or B"),
or a guess ("…?"), names causes nobody isolated: it should have been a cause table. Exceptions raised by the code
under test (not an ``AssertionError`` of a check) are quoted as they are and are not judged."""

from __future__ import annotations

from pathlib import Path

import pytest

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.reports.facts import suite_currency
from gru4rec_conformance.reports.results import iter_run_dirs, load_run

VERDICTS = Path(__file__).resolve().parents[2] / "reports" / "verdicts"
FAILED = ("failed", "xfail", "error")
unisolated_guess = diagnosis.unisolated_guess


def test_the_rule_reads_guesses_and_leaves_findings():
    assert unisolated_guess("AssertionError: p = 0: sample_alpha is ignored or the distribution is wrong")
    assert unisolated_guess("AssertionError: non-finite outputs (a drop probability used as keep probability?)")
    assert unisolated_guess("AssertionError: 3 steps: " + diagnosis.ISOLATED + "x (y or z)") is None
    assert unisolated_guess("AssertionError: 0.000 of the embedding output is zero, expected 0.25") is None
    assert unisolated_guess("RuntimeError: is it a tensor or a list?") is None
    assert unisolated_guess("AssertionError: layers={'a or b': 1} gives the same scores") is None
    assert unisolated_guess("Failed: hard-coded or silently ignored")
    assert unisolated_guess("AssertionError: a deviation of the batching (declared: per-example or shared)") is None


@pytest.mark.skipif(not VERDICTS.is_dir(), reason="no committed verdicts in this checkout (reports/verdicts)")
def test_no_committed_message_names_an_unisolated_cause():
    """Every current verdict (a stale one is marked as such on the scoreboard: its messages are an older suite's)."""
    found = []
    for directory in iter_run_dirs(VERDICTS):
        run = load_run(directory)
        if suite_currency(run)[0] is False:
            continue
        for r in run.results:
            if r.get("outcome") in FAILED and (guess := unisolated_guess(str(r.get("reason") or ""))):
                found.append(f"{directory.relative_to(VERDICTS)} {r.get('test')}: …{guess}…")
    assert not found, "\n".join(found)
