"""conformance/_harness/diagnosis.py: a message names a cause only when its probe confirmed it."""

from __future__ import annotations

import pytest

from gru4rec_conformance.conformance._harness import diagnosis as dx


def test_isolated_cause_named_and_others_listed():
    d = dx.diagnose(
        [
            dx.Cause("state leak", lambda: dx.ruled_out("scores agree off the masked columns")),
            dx.Cause("evaluator masking", lambda: dx.confirmed("12 columns set to -inf")),
            dx.Cause("tie mode", None),
        ]
    )
    assert d.isolated == ("evaluator masking",)
    assert d.text() == (
        "isolated: evaluator masking (12 columns set to -inf); not decided: tie mode (no probe decides it); "
        "ruled out: state leak (scores agree off the masked columns)"
    )


def test_no_probe_decides_says_not_isolated():
    d = dx.diagnose([dx.Cause("a", lambda: dx.undecided("fits both")), dx.Cause("b", lambda: dx.ruled_out("x"))])
    assert d.isolated == ()
    assert d.text() == "cause not isolated; candidates: a (fits both); ruled out: b (x)"
    assert "isolated: " not in d.text().replace("not isolated", "")
    # every listed cause ruled out: the message says so instead of listing no candidate
    d = dx.diagnose([dx.Cause("a", lambda: dx.ruled_out("y")), dx.Cause("b", lambda: dx.ruled_out("x"))])
    assert d.text() == (
        "cause not isolated; candidates: none left: every listed cause was ruled out; ruled out: a (y); "
        "ruled out: b (x)"
    )


def test_probe_that_raises_is_undecided_and_fail_raises_with_summary():
    def boom():
        raise RuntimeError("no hook\nmore")

    d = dx.diagnose([dx.Cause("a", boom), dx.Cause("b", lambda: "not a finding")])  # type: ignore[arg-type,return-value]
    assert [f.verdict for _, f in d.findings] == [dx.UNDECIDED, dx.UNDECIDED]
    assert "probe failed: RuntimeError: no hook" in d.text() and "more" not in d.text()
    with pytest.raises(AssertionError, match=r"^measured 3: isolated: b \(y\)$"):
        dx.fail("measured 3", [dx.Cause("b", lambda: dx.decide(True, "y"))])
    with pytest.raises(AssertionError, match=r"^differs: cause not isolated; candidates: b \(n\); measured: 3$"):
        dx.fail("differs", [dx.Cause("b", lambda: dx.decide(None, "n"))], "3")


def test_finding_rejects_unknown_verdict():
    with pytest.raises(ValueError):
        dx.Finding("maybe", "")


def test_cause_table_is_declared_on_the_check_and_builds_its_causes():
    leak = dx.Candidate("state leak", "compare two hooks")
    mask = dx.Candidate("evaluator masking", "class the masked columns")

    @dx.causes(leak, mask)
    def check(impl):
        return impl

    assert check(3) == 3 and dx.table_of(check) == (leak, mask)  # the function itself is unchanged
    assert dx.table_of(lambda: None) == ()
    d = dx.diagnose([leak.cause(lambda: dx.ruled_out("agree")), mask.cause(None, "needs score_stream")])
    assert (
        d.text()
        == "cause not isolated; candidates: evaluator masking (needs score_stream); ruled out: state leak (agree)"
    )
    with pytest.raises(ValueError, match="at least one"):
        dx.causes()
    with pytest.raises(ValueError, match="named twice"):
        dx.causes(leak, dx.Candidate("state leak", "other probe"))
    with pytest.raises(TypeError, match="Candidate"):
        dx.causes(dx.Cause("state leak"))  # type: ignore[arg-type]


def test_switch_off_runs_no_probe_and_names_no_cause(monkeypatch):
    ran = []

    def probe():
        ran.append(1)
        return dx.confirmed("seen")

    monkeypatch.setenv(dx.SWITCH, "0")
    d = dx.diagnose([dx.Cause("a leak", probe)])
    assert not ran and d.isolated == () and "diagnosis disabled" in d.text()
    monkeypatch.setenv(dx.SWITCH, "1")
    assert dx.diagnose([dx.Cause("a leak", probe)]).isolated == ("a leak",) and ran == [1]
