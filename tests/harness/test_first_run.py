"""``--first-run``: short call timeouts, fast checks first, and a draft xfail file that the gate refuses until a
person has filled in its placeholders."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from gru4rec_conformance.conformance._harness.first_run import draft_key, draft_reason, isolated_causes
from gru4rec_conformance.conformance._harness.options import FIRST_RUN_CALL_TIMEOUT_S

TWO_FAILURES = '''
@pytest.mark.check("X-1", kind="K1")
def test_fails(impl):
    """A check whose probe isolated the cause."""
    raise AssertionError("scores differ after a session switch: isolated: the hidden state is not reset "
                         "(probe: fresh state scores equal); ruled out: masking (no item masked)")

@pytest.mark.check("X-2", kind="K1")
def test_passes(impl):
    """A check that passes."""

@pytest.mark.check("X-3", kind="K2")
@pytest.mark.parametrize("loss", ["cross-entropy", "bpr-max"])
def test_param(impl, loss):
    """The implementation raises for bpr-max."""
    if loss == "bpr-max":
        raise RuntimeError("bpr-max exploded\\nsecond line")
'''

ORDER = '''
@pytest.mark.check("O-1", kind="metric")
@pytest.mark.metric
def test_metric(impl):
    """A metric check."""

@pytest.mark.check("O-2", kind="K1")
@pytest.mark.slow
def test_slow(impl):
    """A slow check."""

@pytest.mark.check("O-3", kind="K9")
def test_scalability(impl):
    """A check of an expensive kind."""

@pytest.mark.check("O-4", kind="K1")
def test_cheap(impl):
    """A cheap check."""
'''


def _draft_line(result) -> Path:
    last = result.outlines[-1]
    assert last.startswith("first run: DRAFT xfail file of good"), result.outlines[-5:]
    return Path(last.rsplit(": ", 1)[1])


def test_the_option_shortens_call_timeouts_unless_call_timeout_is_given(project):
    project.checks(ORDER)
    project.run("conformance", "--impl", "good")
    project.run("conformance", "--impl", "good", "--first-run")
    project.run("conformance", "--impl", "good", "--first-run", "--call-timeout", "30")
    timeouts = [project.results("good", i)["run"]["options"]["call_timeout"] for i in range(3)]
    assert timeouts == [None, FIRST_RUN_CALL_TIMEOUT_S, 30.0]
    assert FIRST_RUN_CALL_TIMEOUT_S == 120.0


def test_fast_checks_come_first(project):
    project.checks(ORDER)
    plain = project.run("conformance", "--impl", "good", "--collect-only", "-q")
    first = project.run("conformance", "--impl", "good", "--first-run", "--collect-only", "-q")

    def order(result):
        return [m.group(1) for line in result.outlines if (m := re.search(r"::(test_\w+)\[good\]", line))]

    assert order(plain) == ["test_metric", "test_slow", "test_scalability", "test_cheap"]
    assert order(first) == ["test_cheap", "test_scalability", "test_metric", "test_slow"]
    # what runs follows the same order
    ran = project.run("conformance", "--impl", "good", "--first-run", "-v")
    assert [m.group(1) for line in ran.outlines if (m := re.search(r"::(test_\w+)\[good\] PASSED", line))] == \
        order(first)  # fmt: skip


def test_a_run_with_two_failures_writes_a_draft_the_gate_refuses_until_it_is_filled_in(project, tmp_path):
    project.checks(TWO_FAILURES)
    result = project.run("conformance", "--impl", "good", "--first-run")
    result.assert_outcomes(passed=2, failed=2)
    draft = _draft_line(result)
    run_dir = project.run_dirs("good")[-1]
    assert draft == run_dir / "xfails.draft.toml" and draft.is_file()
    text = draft.read_text()
    # both failures, under their check ids, with the way they failed and the reason from the message
    assert re.findall(r'^id = "(.*)"$', text, re.M) == ["X-1", "X-3[bpr-max]"]
    assert re.findall(r'^fails_as = "(\w+)"', text, re.M) == ["assertion", "crash"]
    reasons = re.findall(r'^reason = "(.*)"$', text, re.M)
    assert reasons[0] == "isolated: the hidden state is not reset (probe: fresh state scores equal)"
    assert reasons[1].startswith("RuntimeError: bpr-max exploded") and "second line" not in reasons[1]
    assert text.count('kind = "TODO"') == 2 and text.count('link = "TODO"') == 2
    assert "rerun: pytest" in text and "test_param[good-bpr-max]" in text

    # not picked up by its place, and refused when named: the placeholders must be chosen first
    gate = project.run("conformance", "--impl", "good", "--gate")
    assert gate.ret == 1 and "GATE FAILED" in gate.stdout.str()
    runs = len(project.run_dirs("good"))
    refused = project.run("conformance", "--impl", "good", "--gate", "--xfails", str(draft))
    assert refused.ret == 4
    assert "kind 'TODO' is a placeholder of a generated draft" in refused.stderr.str()
    assert len(project.run_dirs("good")) == runs  # a usage error: no run folder

    # filled in and kept in the maintainer's repository, it is accepted and the gate passes
    mine = tmp_path / "good_xfails.toml"
    shutil.copy(draft, mine)
    mine.write_text(text.replace('kind = "TODO"', 'kind = "bug"').replace('link = "TODO"', 'link = "none"'))
    passed = project.run("conformance", "--impl", "good", "--gate", "--xfails", str(mine))
    assert passed.ret == 0, passed.stdout.str()
    assert "GATE PASSED" in passed.stdout.str()
    passed.assert_outcomes(passed=2, xfailed=2)


def test_a_run_without_failures_writes_no_draft(project):
    project.checks(ORDER)
    result = project.run("conformance", "--impl", "good", "--first-run")
    assert result.outlines[-1] == "first run: good: no failure to declare, no draft xfail file written"
    assert not list(project.run_dirs("good")[-1].glob("*.draft*.toml"))


def test_a_timeout_under_the_short_limit_is_a_crash_with_the_workers_stacks(project):
    project.checks('''
    @pytest.mark.check("I-1", kind="K10")
    def test_fit(impl):
        """Fitting completes."""
        impl.build().fit(TRAIN)
    ''')
    result = project.run("conformance", "--impl", "hanging", "--first-run", "--call-timeout", "3")
    result.assert_outcomes(failed=1)
    fit = project.results("hanging")["results"][0]
    assert fit["worker"]["kind"] == "timeout" and "in fit" in fit["worker"]["stacks"]
    last = result.outlines[-1]
    assert last.startswith("first run: DRAFT xfail file of hanging"), result.outlines[-5:]
    text = Path(last.rsplit(": ", 1)[1]).read_text()
    assert 'id = "I-1"' in text and 'fails_as = "crash"' in text
    reason = re.search(r'^reason = "(.*)"$', text, re.M).group(1)
    assert re.fullmatch(
        r"worker timeout: .*no answer within the timeout of 3 s \(stuck at dummies\.py:\d+ in fit\)", reason
    ), reason


def test_draft_ids_and_reasons():
    planned = {
        "conformance/gru4rec/test_a.py::test_one[good]": {"check": {"id": "X-5"}},
        "conformance/gru4rec/test_a.py::test_two[good]": {"check": {"id": "X-5"}},
        "conformance/gru4rec/test_a.py::test_p[good-a]": {"check": {"id": "X-6"}},
        "conformance/gru4rec/test_a.py::test_p[good-b]": {"check": {"id": "X-6"}},
    }

    def record(nodeid, cid, reason="r"):
        module, _, test = nodeid.partition("::")
        return {"nodeid": nodeid, "impl": "good", "module": module, "test": test, "check": {"id": cid},
                "outcome": "failed", "reason": reason}  # fmt: skip

    # a check id shared by two tests would declare the passing one too: the node id then
    assert draft_key(record("conformance/gru4rec/test_a.py::test_one[good]", "X-5"), planned) == \
        "conformance/gru4rec/test_a.py::test_one"  # fmt: skip
    assert draft_key(record("conformance/gru4rec/test_a.py::test_p[good-b]", "X-6"), planned) == "X-6[b]"
    # an installed wheel's node ids point into site-packages; the draft names the suite's own path
    site = "../venv/lib/site-packages/gru4rec_conformance/conformance/gru4rec/test_a.py::test_one[good]"
    assert draft_key(record(site, "X-5"), planned) == "conformance/gru4rec/test_a.py::test_one"
    assert isolated_causes("x: cause not isolated; candidates: A (e)") == []
    assert isolated_causes("x: isolated: A (e1); isolated: B (e2); measured: 3") == ["A (e1)", "B (e2)"]
    assert draft_reason(record("n::t", "X", "x: isolated: A (e1); not decided: C")) == "isolated: A (e1)"
    assert draft_reason(record("n::t", "X", "first\nsecond")) == "first"
    assert len(draft_reason(record("n::t", "X", "y" * 1000))) == 300
