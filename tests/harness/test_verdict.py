"""The conformance status : CONFORMANT / NOT CONFORMANT / INCOMPLETE / UNAVAILABLE, kept apart
from the gate, with coverage (checks run / applicable); the terminal's last lines and the exit status.

Pure unit tests of ``verdict.assess`` on hand-made records, and small pytester runs of the dummy adapters
(tests/harness/conftest.py) for what the harness records (``missing``, ``not_run``) and prints.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gru4rec_conformance.conformance._records.verdict import (
    CONFORMANT,
    INCOMPLETE,
    NOT_CONFORMANT,
    UNAVAILABLE,
    Conformance,
    assess,
)

HEADER: dict[str, Any] = {"impl": {"name": "x", "unavailable": None, "error": None}, "device": "cpu",
                          "command": ["pytest", "conformance/gru4rec", "--impl", "x"]}  # fmt: skip
END: dict[str, Any] = {"type": "end", "status": "complete", "not_run": {}}
#: what the lines say of the dummy "good" adapter's features (tests/harness/test_feature_coverage.py tests them)
LACKS = "lacks loss:bpr, loss:bpr-max, loss:top1, loss:top1-max, embedding:separate, embedding:shared, +15 more"
GOOD_FEATURES = f"features 5/26 ({LACKS})"


def rec(test: str, outcome: str, kind: str = "K1", **extra: Any) -> dict[str, Any]:
    return {"nodeid": f"conformance/gru4rec/test_k.py::{test}[x]", "impl": "x", "outcome": outcome,
            "check": {"id": test.upper(), "kind": kind}, "reason": extra.pop("reason", ""), "xfail": None,
            "metrics": [], "outcome_detail": None, **extra}  # fmt: skip


XFAIL = {"kind": "bug", "defect": "GP-1", "fix_level": "INF", "reason": "leaks state (see also GP-2; SR-1 fails)",
         "link": "none"}  # fmt: skip


# -- assess(), pure ------------------------------------------------------------------------------------------
def test_all_applicable_passed_is_conformant_and_absent_features_gpu_checks_do_not_count():
    records = [
        rec("a", "passed"),
        rec("b", "passed", kind="K2"),
        rec("c", "skipped-unsupported", missing=["loss:bpr-max"], outcome_detail="unsupported"),
        rec("d", "skipped-unsupported", missing=["loss:bpr-max", "hook:trace"], outcome_detail="unsupported"),
        rec("e", "skipped", outcome_detail="device", reason="needs a GPU: run with --device cuda"),
        rec("f", "skipped", outcome_detail="data", reason="asserts the real SST-5 split sizes"),
    ]
    c = assess(HEADER, records, END)
    assert c.status == CONFORMANT and c.reasons == () and not c.defects
    cov = c.coverage
    assert (cov.ran, cov.applicable, cov.percent, cov.feature_absent) == (2, 2, 100.0, 2)
    assert dict(cov.not_applicable) == {"needs a GPU (run on cpu)": 1, "needs data this run does not have": 1}
    assert dict(cov.by_kind) == {"K1": (1, 1), "K2": (1, 1)}
    assert c.line("x") == (
        "x: CONFORMANT — coverage 2/2 (100%); 2 checks n/a (feature absent); n/a on this run: 1 needs a GPU "
        "(run on cpu), 1 needs data this run does not have"
    )
    assert (
        assess(HEADER, records[:2], END).line("x", family="gru4rec") == "x: CONFORMANT [gru4rec] — coverage 2/2 (100%)"
    )


def test_declared_failures_are_not_conformant_with_kinds_ids_fix_level_and_figure():
    metric = {"name": "recall@20", "value": 0.5, "reference": 0.625, "tolerance": 0.01}
    records = [
        rec("a", "passed"),
        rec("b", "xfail", xfail=XFAIL, metrics=[metric]),
        rec("c", "xfail", xfail={**XFAIL, "kind": "design-difference", "defect": None, "fix_level": "NEVER"}),
        rec("d", "failed", reason="AssertionError: boom"),
    ]
    c = assess(HEADER, records, END)
    assert c.status == NOT_CONFORMANT and dict(c.counts_by_kind) == {"bug": 1, "design-difference": 1,
                                                                      "undeclared": 1}  # fmt: skip
    b = c.defects[0]
    assert (b.check, b.kind, b.defect_ids, b.fix_level) == ("conformance/gru4rec/test_k.py::b", "bug",
                                                            ("GP-1", "GP-2"), "INF")  # fmt: skip
    assert b.figure == "recall@20 0.5 vs 0.625 (-20.0%)"
    assert c.defects[2].kind == "undeclared" and c.defects[2].fix_level is None
    assert (
        c.line("x") == "x: NOT CONFORMANT — 1 bug, 1 design-difference, 1 undeclared (GP-1, GP-2); coverage 4/4 (100%)"
    )
    assert Conformance.from_json(json.loads(json.dumps(c.to_json()))) == c


def test_a_defects_figure_is_the_metric_that_failed_not_a_passing_one():
    # recall@20 inside its band, MRR@20 outside it: the figure must show MRR@20, the cause of the failure
    passing = {"name": "recall@20", "value": 0.6155, "reference": 0.6223, "tolerance": 0.02, "within": True}
    failing = {"name": "mrr@20", "value": 0.1806, "reference": 0.2703, "tolerance": 0.01, "within": False}
    failing_5 = {"name": "mrr@5", "value": 0.1, "reference": 0.2, "tolerance": 0.01, "within": False}
    c = assess(HEADER, [rec("a", "failed", metrics=[passing, failing]),
                        rec("b", "failed", metrics=[passing, failing, failing_5])], END)  # fmt: skip
    assert c.defects[0].figure == "mrr@20 0.1806 vs 0.2703 (-33.2%)"
    assert c.defects[1].figure == "mrr@20 0.1806 vs 0.2703 (-33.2%); mrr@5 0.1 vs 0.2 (-50.0%)"
    # no band verdict recorded: recall@20 as before
    c = assess(HEADER, [rec("a", "failed", metrics=[{**failing, "within": None}, {**passing, "within": None}])], END)
    assert c.defects[0].figure == "recall@20 0.6155 vs 0.6223 (-1.1%)"


def test_an_xpass_still_carries_its_declared_defect():
    c = assess(HEADER, [rec("a", "xpass", xfail=XFAIL)], END)
    assert c.status == NOT_CONFORMANT and c.defects[0].outcome == "xpass" and c.defects[0].kind == "bug"


def test_missing_hook_on_a_declared_feature_counts_against_coverage():
    records = [
        rec("a", "passed"),
        rec("b", "skipped-unsupported", missing=["hook:trace"], outcome_detail="unsupported"),
        rec("c", "skipped-unsupported", missing=["hook:trace", "hook:train_forward"], outcome_detail="unsupported"),
    ]
    c = assess(HEADER, records, END)
    assert c.status == INCOMPLETE and (c.coverage.ran, c.coverage.applicable) == (1, 3)
    assert dict(c.coverage.missing_hook) == {"trace": 2}
    assert c.line("x") == "x: INCOMPLETE — 2 not tested (2 adapter lacks hook trace); coverage 1/3 (33%)"
    # with a defect too: NOT CONFORMANT, and the line still says how much was not tested
    c = assess(HEADER, [*records, rec("d", "failed")], END)
    assert c.status == NOT_CONFORMANT and c.line("x").endswith(
        "coverage 2/4 (50%); incomplete: 2 not tested (2 adapter lacks hook trace)"
    )
    assert "incomplete: 2 not tested (2 adapter lacks hook trace)" in c.reasons


def test_a_hook_declared_absent_prints_its_reason_beside_the_not_tested_checks():
    header = {
        **HEADER,
        "impl": {
            **HEADER["impl"],
            "hooks_absent": {"trace": "no training loop to observe", "evaluate": "unused: no check lacks it"},
        },
    }
    records = [
        rec("a", "passed"),
        rec("b", "skipped-unsupported", missing=["hook:trace"], outcome_detail="unsupported"),
    ]
    c = assess(header, records, END)
    assert dict(c.coverage.hooks_absent) == {"trace": "no training loop to observe"}
    assert c.coverage.why_not_tested() == [
        "1 adapter lacks hook trace (cannot be expressed: no training loop to observe)"
    ]
    assert c.status == INCOMPLETE  # a hook that cannot be expressed still leaves the check not tested
    assert Conformance.from_json(json.loads(json.dumps(c.to_json()))) == c


def test_not_selected_and_not_reached_checks_make_it_incomplete_unless_not_applicable():
    not_run = {
        "conformance/gru4rec/test_k.py::s[x]": {
            "reason": "not selected",
            "check": {"id": "S", "kind": "K3"},
            "missing": [],
            "markers": [],
        },  # fmt: skip
        "conformance/gru4rec/test_k.py::h[x]": {
            "reason": "not reached",
            "check": {"id": "H", "kind": "K3"},
            "missing": ["hook:trace"],
            "markers": [],
        },  # fmt: skip
        "conformance/gru4rec/test_k.py::f[x]": {
            "reason": "not selected",
            "check": {"id": "F", "kind": "K3"},
            "missing": ["logq"],
            "markers": [],
        },  # fmt: skip
        "conformance/gru4rec/test_k.py::g[x]": {
            "reason": "not selected",
            "check": {"id": "G", "kind": "K3"},
            "missing": [],
            "markers": ["gpu"],
        },  # fmt: skip
    }
    c = assess(HEADER, [rec("a", "passed")], {**END, "not_run": not_run})
    assert c.status == INCOMPLETE and (c.coverage.ran, c.coverage.applicable, c.coverage.not_selected) == (1, 3, 2)
    assert dict(c.coverage.by_kind) == {"K1": (1, 1), "K3": (0, 2)}
    assert c.line("x") == "x: INCOMPLETE — 2 not tested (2 not selected or not reached); coverage 1/3 (33%)"


def test_killed_interrupted_errored_and_empty_runs_are_incomplete():
    c = assess(HEADER, [rec("a", "passed")], None)
    assert c.status == INCOMPLETE and c.coverage.figure() == "1/1+ (100%)"
    assert c.reasons == ("the run was killed: checks it did not reach are not counted",)
    c = assess(HEADER, [rec("a", "passed")], {**END, "status": "interrupted"})
    assert c.status == INCOMPLETE and "the run was interrupted: checks it did not reach are not counted" in c.reasons
    c = assess(HEADER, [rec("a", "passed"), rec("b", "error", reason="RuntimeError: fixture broke")], END)
    assert c.status == INCOMPLETE and dict(c.coverage.other_not_run) == {"error: RuntimeError: fixture broke": 1}
    c = assess(HEADER, [], END)
    assert c.status == INCOMPLETE and "no check ran" in c.reasons


def test_interrupted_run_line_says_so_and_never_reads_as_complete_coverage():
    """An interrupted run whose end record lists nothing as not reached (pytest-xdist workers killed before they
    reported their plan) must not read "nothing applicable was tested; coverage 2/2 (100%)"."""
    records = [rec("a", "passed"), rec("b", "passed")]
    c = assess(HEADER, records, {**END, "status": "interrupted"})
    line = c.line("x")
    assert c.status == INCOMPLETE and c.coverage.figure() == "2/2+ (100%)"
    assert "nothing applicable was tested" not in line
    want = "x: INCOMPLETE — the run was interrupted: checks it did not reach are not counted; coverage 2/2+ (100%)"
    assert line == want
    planned = {"conformance/gru4rec/test_k.py::c[x]": {"reason": "not reached", "check": {"id": "C", "kind": "K1"},
                                                       "missing": [], "markers": []}}  # fmt: skip
    c = assess(HEADER, records, {**END, "status": "interrupted", "not_run": planned})
    assert c.line("x") == ("x: INCOMPLETE — the run was interrupted; 1 not tested (1 not selected or not reached); "
                           "coverage 2/3 (67%)")  # fmt: skip


def test_unavailable_implementation():
    header = {**HEADER, "impl": {"name": "x", "unavailable": "tox -e x", "error": None}}
    records = [rec("a", "skipped", outcome_detail="unavailable", unavailable="tox -e x")]
    c = assess(header, records, END)
    assert c.status == UNAVAILABLE and c.line("x") == "x: UNAVAILABLE — not available here: tox -e x"


def test_legacy_records_are_read_from_reasons_and_the_command_line():
    """Results written before schema 1.2 (committed verdicts) have no ``missing`` and no ``not_run``."""
    header = {**HEADER, "command": ["pytest", "conformance/gru4rec", "--impl", "x", "-m", "not slow"]}
    legacy = [
        {k: v for k, v in rec("a", "passed").items() if k != "outcome_detail"},
        {
            k: v
            for k, v in rec(
                "b", "skipped-unsupported", reason="unsupported by x: needs hook:trace (not declared)"
            ).items()
            if k != "outcome_detail"
        },  # fmt: skip
        {
            k: v
            for k, v in rec("c", "skipped", reason="needs a GPU: run with --device cuda").items()
            if k != "outcome_detail"
        },  # fmt: skip
    ]
    c = assess(header, legacy, {"type": "end", "status": "complete"})
    assert c.status == INCOMPLETE and dict(c.coverage.missing_hook) == {"trace": 1}
    assert c.coverage.unknown_not_run == "a subset run (-m 'not slow'): checks not selected are not counted"
    assert c.coverage.figure() == "1/2+ (50%)"


# -- the harness: records, terminal, exit status ------------------------------------------------------------------
CHECKS = '''
@pytest.mark.check("V-1", kind="K1")
def test_pass(impl):
    """passes"""


@pytest.mark.check("V-2", kind="K2")
@pytest.mark.loss("cross-entropy")
def test_declared(impl):
    """fails as declared"""
    assert False, "recall@20 is off"


@pytest.mark.check("V-3", kind="K3")
@pytest.mark.loss("cross-entropy")
@pytest.mark.hook("trace")
def test_needs_trace(impl):
    """a declared loss, a missing hook"""


@pytest.mark.check("V-4", kind="K3")
@pytest.mark.loss("bpr-max")
@pytest.mark.hook("trace")
def test_absent_feature(impl):
    """needs an absent feature"""


@pytest.mark.check("V-5", kind="K10")
@pytest.mark.gpu
def test_gpu(impl):
    """needs a GPU"""
'''
XFAILS = """
implementation = "good"

[[xfail]]
id = "conformance/gru4rec/test_checks.py::test_declared"
reason = "a declared defect"
kind = "bug"
link = "none"
defect = "GP-3"
fix_level = "MAJ"
"""


def _last_lines(result: pytest.RunResult, n: int) -> list[str]:
    return [ln for ln in result.outlines if ln.strip()][-n:]


def test_only_declared_failures_is_not_conformant_with_gate_passed(project):
    project.checks(CHECKS)
    registry = project.xfails("good", XFAILS)  # not in git: named with --xfails, so the gate may trust it
    result = project.run("conformance", "--impl", "good", "--gate", "--xfails", str(registry))
    assert result.ret == pytest.ExitCode.OK
    assert _last_lines(result, 2) == [
        "GATE PASSED",
        f"good: NOT CONFORMANT — 1 bug (GP-3); coverage 2/3 (67%); {GOOD_FEATURES}; 1 check n/a (feature absent); "
        "incomplete: 1 not tested (1 adapter lacks hook trace)",
    ]
    data = project.results("good")
    assert data["schema_version"] == "1.2" and data["conformance"]["status"] == NOT_CONFORMANT
    assert data["conformance"]["defects"][0]["defect_ids"] == ["GP-3"]
    cov = data["conformance"]["coverage"]
    assert (cov["ran"], cov["applicable"], cov["feature_absent"], cov["missing_hook"]) == (2, 3, 1, {"trace": 1})
    assert cov["not_applicable"] == {"needs a GPU (run on cpu)": 1}
    by_test = {r["test"]: r for r in data["results"]}
    assert by_test["test_needs_trace[good]"]["missing"] == ["hook:trace"]
    assert sorted(by_test["test_absent_feature[good]"]["missing"]) == ["hook:trace", "loss:bpr-max"]
    assert by_test["test_gpu[good]"]["outcome_detail"] == "device" and by_test["test_pass[good]"]["missing"] is None
    md = (project.run_dirs("good")[-1] / "summary.md").read_text()
    assert "**Conformance: NOT CONFORMANT** — 1 bug (GP-3); coverage 2/3 (67%)" in md and "**Gate: PASSED**" in md
    assert "- not tested: 1 adapter lacks hook trace" in md
    assert "- n/a (not counted): 1 feature absent (declared), 1 needs a GPU (run on cpu)" in md
    # without --gate the gate is still shown (xfail entries apply), and the conformance line ends the output
    result = project.run("conformance", "--impl", "good", "--xfails", str(registry))
    assert result.ret == pytest.ExitCode.OK and _last_lines(result, 2)[0] == "GATE PASSED"


def test_a_k_run_is_incomplete_and_records_what_was_not_selected(project):
    project.checks(CHECKS)
    result = project.run("conformance", "--impl", "good", "-k", "pass")
    assert result.ret == pytest.ExitCode.OK
    # no xfail applies and no --gate: no gate line
    # applicable: pass, declared, needs_trace (deselected: counted as not selected, whatever hooks it lacks)
    assert _last_lines(result, 1) == [
        f"good: INCOMPLETE — 2 not tested (2 not selected or not reached); coverage 1/3 (33%); {GOOD_FEATURES}"
    ]
    assert "GATE" not in result.stdout.str()
    data = project.results("good")
    not_run = data["end"]["not_run"]
    assert {k.split("::")[1]: v["reason"] for k, v in not_run.items()} == {
        "test_declared[good]": "not selected",
        "test_needs_trace[good]": "not selected",
        "test_absent_feature[good]": "not selected",
        "test_gpu[good]": "not selected",
    }
    assert not_run["conformance/gru4rec/test_checks.py::test_needs_trace[good]"]["missing"] == ["hook:trace"]
    assert data["conformance"]["status"] == INCOMPLETE and data["conformance"]["coverage"]["not_selected"] == 2


def test_runtime_require_of_a_hook_is_not_testable(project):
    project.checks('''
    @pytest.mark.check("V-6", kind="K1")
    def test_require(impl):
        """asks for a hook at run time"""
        impl.require("hook:trace")


    @pytest.mark.check("V-7", kind="K1")
    def test_pass(impl):
        """passes"""
    ''')
    result = project.run("conformance", "--impl", "good")
    assert _last_lines(result, 1) == [
        f"good: INCOMPLETE — 1 not tested (1 adapter lacks hook trace); coverage 1/2 (50%); {GOOD_FEATURES}"
    ]
    assert project.results("good")["results"][0]["missing"] == ["hook:trace"]


def test_reference_run_is_conformant(project):
    """Absent features and GPU checks of a CPU run do not count; everything applicable ran and passed."""
    project.checks(CHECKS.replace('    assert False, "recall@20 is off"\n', "").replace(
        '@pytest.mark.hook("trace")\ndef test_needs_trace', "def test_needs_trace"))  # fmt: skip
    result = project.run("conformance", "--impl", "reference")
    assert result.ret == pytest.ExitCode.OK
    assert _last_lines(result, 1) == [
        "reference: CONFORMANT — coverage 3/3 (100%); 1 check n/a (feature absent); n/a on this run: 1 needs a GPU "
        "(run on cpu)"
    ]
    assert project.results("reference")["conformance"]["status"] == CONFORMANT


def test_a_check_that_needs_data_the_run_lacks_is_not_applicable_here(project):
    """``skip_for_this_run`` (the fine-tuner's real-SST-5 checks on the stand-in), also from a session fixture."""
    project.checks('''
    from gru4rec_conformance.conformance._harness.running import skip_for_this_run


    @pytest.fixture(scope="session")
    def real_data():
        skip_for_this_run("needs the real data: set X to its folder")


    @pytest.mark.check("V-9", kind="K1")
    def test_real_1(impl, real_data):
        """needs real data"""


    @pytest.mark.check("V-10", kind="K1")
    def test_real_2(impl, real_data):
        """needs real data too"""


    @pytest.mark.check("V-11", kind="K1")
    def test_pass(impl):
        """passes"""
    ''')
    result = project.run("conformance", "--impl", "good")
    assert _last_lines(result, 1) == [
        f"good: CONFORMANT on 5/26 features — coverage 1/1 (100%); {LACKS}; n/a on this run: 2 needs data this run "
        "does not have"
    ]
    data = project.results("good")
    assert [r["outcome_detail"] for r in data["results"]] == ["data", "data", None]
    assert data["results"][0]["reason"] == "needs the real data: set X to its folder"


SMALL_REGISTRY = """
pytest_plugins = ["gru4rec_conformance.conformance._harness.plugin"]

import dummies


def pytest_conformance_register_adapters(registry):
    registry.clear()
    for cls in (dummies.Good, dummies.Missing, dummies.Reference):
        registry.add(cls)
"""


def test_unavailable_named_with_impl_fails_the_run_and_impl_all_only_lists_it(project):
    project.pytester.makeconftest(SMALL_REGISTRY)
    project.checks('''
    @pytest.mark.check("V-8", kind="K1")
    def test_any(impl):
        """anything"""
    ''')
    result = project.run("conformance", "--impl", "missing", "--isolation", "never")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*--impl missing: not available here; * the run fails (exit status 1)*"])
    assert _last_lines(result, 1) == [
        "missing: UNAVAILABLE — not available here: set MISSING_PATH to a checkout of example/missing@abc123"
    ]
    result = project.run("conformance", "--impl", "all", "--isolation", "never")
    assert result.ret == pytest.ExitCode.OK
    assert sorted(_last_lines(result, 3)) == [
        f"good: CONFORMANT on 5/26 features — coverage 1/1 (100%); {LACKS}",
        "missing: UNAVAILABLE — not available here: set MISSING_PATH to a checkout of example/missing@abc123 "
        "(selected by --impl all: not counted as a failure)",
        "reference: CONFORMANT — coverage 1/1 (100%)",
    ]
    # named next to all: named wins
    result = project.run("conformance", "--impl", "all,missing", "--isolation", "never")
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_no_report_still_prints_the_status(project):
    project.checks(CHECKS)
    result = project.run("conformance", "--impl", "good", "--no-report", "-k", "pass or gpu")
    assert _last_lines(result, 1)[0].startswith("good: INCOMPLETE — 2 not tested (2 not selected or not reached)")
    assert not project.run_dirs("good")
