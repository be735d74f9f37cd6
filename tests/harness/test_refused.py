"""Values an implementation refuses at run time (``Unsupported`` raised while a check runs whose declared
requirements are met: ``layers:[24, 12]``, ``n_sample``) are "refused by the implementation at run time": recorded
with outcome detail ``refused``, counted as applicable and not tested (never CONFORMANT), and kept apart from the
features the implementation declares absent (n/a)."""

from __future__ import annotations

from typing import Any

import pytest

from gru4rec_conformance.conformance._records.verdict import CONFORMANT, INCOMPLETE, Conformance, assess

HEADER: dict[str, Any] = {"impl": {"name": "x", "unavailable": None, "error": None}, "device": "cpu",
                          "command": ["pytest", "conformance/gru4rec", "--impl", "x"]}  # fmt: skip
END: dict[str, Any] = {"type": "end", "status": "complete", "not_run": {}}


def rec(test: str, outcome: str, **extra: Any) -> dict[str, Any]:
    return {"nodeid": f"conformance/gru4rec/test_k.py::{test}[x]", "impl": "x", "outcome": outcome,
            "check": {"id": test.upper(), "kind": "K6"}, "reason": "", "xfail": None, "metrics": [],
            "outcome_detail": None, **extra}  # fmt: skip


def test_refused_values_are_not_tested_and_not_absent_features():
    records = [
        rec("a", "passed"),
        rec("b", "skipped-unsupported", missing=["layers:[24, 12]"], outcome_detail="refused"),
        rec("c", "skipped-unsupported", missing=["layers:[24, 12]"], outcome_detail="refused"),
        rec("d", "skipped-unsupported", missing=["n_sample"], outcome_detail="refused"),
        rec("e", "skipped-unsupported", missing=["loss:bpr-max"], outcome_detail="unsupported"),
    ]
    c = assess(HEADER, records, END)
    assert c.status == INCOMPLETE  # refused never counts as conformant coverage
    cov = c.coverage
    assert (cov.ran, cov.applicable, cov.feature_absent) == (1, 4, 1)
    assert dict(cov.refused) == {"layers:[24, 12]": 2, "n_sample": 1}
    assert cov.why_not_tested() == ["3 refused by the implementation at run time (layers:[24, 12], n_sample)"]
    assert c.line("x") == (
        "x: INCOMPLETE — 3 not tested (3 refused by the implementation at run time (layers:[24, 12], n_sample)); "
        "coverage 1/4 (25%); 1 check n/a (feature absent)"
    )
    assert Conformance.from_json(c.to_json()) == c
    # a record of the same skip before the category existed still reads as an absent feature
    legacy = [rec("a", "passed"), rec("b", "skipped-unsupported", missing=["n_sample"], outcome_detail="unsupported")]
    assert assess(HEADER, legacy, END).status == CONFORMANT


CHECKS = '''
from gru4rec_conformance.implementations.base import Unsupported


@pytest.mark.check("U-1", kind="K6")
def test_refused(impl):
    """the implementation refuses a value at run time"""
    raise Unsupported("layers:[24, 12]", "one layer only")


@pytest.mark.check("U-2", kind="K2")
@pytest.mark.loss("bpr-max")
def test_absent(impl):
    """needs a feature declared absent"""


@pytest.mark.check("U-3", kind="K1")
def test_pass(impl):
    """passes"""
'''


def test_the_harness_records_a_run_time_refusal_as_refused(project):
    project.checks(CHECKS)
    result = project.run("conformance", "--impl", "good")
    assert result.ret == pytest.ExitCode.OK
    data = project.results("good")
    by_test = {r["test"]: r for r in data["results"]}
    refused, absent = by_test["test_refused[good]"], by_test["test_absent[good]"]
    assert (refused["outcome"], refused["outcome_detail"], refused["missing"]) == (
        "skipped-unsupported", "refused", ["layers:[24, 12]"])  # fmt: skip
    assert (absent["outcome_detail"], absent["missing"]) == ("unsupported", ["loss:bpr-max"])
    cov = data["conformance"]["coverage"]
    assert data["conformance"]["status"] == INCOMPLETE
    assert (cov["ran"], cov["applicable"], cov["feature_absent"], cov["refused"]) == (1, 2, 1, {"layers:[24, 12]": 1})
    md = (project.run_dirs("good")[-1] / "summary.md").read_text()
    assert "- not tested: 1 refused by the implementation at run time (layers:[24, 12])" in md
    assert "- n/a (not counted): 1 feature absent (declared)" in md
    # the Outcomes sentence counts the refusal apart from the absent feature, and so does the HTML header
    assert ("1 not applicable (feature absent), 0 not tested (adapter lacks a hook), 1 refused by the "
            "implementation at run time") in md  # fmt: skip
    html = (project.run_dirs("good")[-1] / "summary.html").read_text()
    assert "1 n/a (feature absent)" in html and "1 refused at run time" in html and "lack a hook" not in html
    assert "or a value the implementation refused at run time" in html  # the n/a column's legend


def test_the_outcomes_sentence_counts_absent_features_missing_hooks_and_refusals_apart(tmp_path):
    from gru4rec_conformance.reports.render import render_markdown
    from gru4rec_conformance.reports.results import RunData
    from gru4rec_conformance.reports.summary import build_summary

    records = [
        rec("a", "passed"),
        rec("b", "skipped-unsupported", missing=["layers:[24, 12]"], outcome_detail="refused"),
        rec("c", "skipped-unsupported", missing=["hook:trace"], outcome_detail="unsupported"),
        rec("d", "skipped-unsupported", missing=["hook:trace"], outcome_detail="unsupported"),
        rec("e", "skipped-unsupported", missing=["loss:bpr-max"], outcome_detail="unsupported"),
    ]
    run = RunData(directory=tmp_path, header=HEADER, results=records, resumes=[], end=END)
    md = render_markdown(build_summary(run))
    assert ("Outcomes: 5 checks: 1 passed, 0 failed, 0 errors, 0 xfail, 0 xpass, "
            "1 not applicable (feature absent), 2 not tested (adapter lacks a hook), 1 refused by the "
            "implementation at run time, 0 skipped.") in md  # fmt: skip
