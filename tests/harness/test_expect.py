"""The ``expect`` fixture: a check states its figure, threshold and message once; the metric record and the
verdict both come from that one statement."""

from __future__ import annotations

import math

import pytest

from gru4rec_conformance.conformance._harness.fixtures import Expect, threshold_of


class _Recorder:
    """Stands in for ``record_metric``: keeps every call, returns the entry as record_metric shapes it."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, name, value, reference=None, tolerance=None, rule=None, **context):
        v = None if value is None or not math.isfinite(float(value)) else float(value)
        self.calls.append({"name": name, "value": v, "reference": reference, "tolerance": tolerance, "rule": rule,
                           "context": context})  # fmt: skip
        return self.calls[-1]


def _expect() -> tuple[Expect, _Recorder]:
    rec = _Recorder()
    return Expect(rec), rec


def test_a_met_threshold_passes_and_records_once():
    expect, rec = _expect()
    assert expect("gap", 0.5e-4, lt=1e-4, reference=0.0, message="never shown", events=3) is True
    assert rec.calls == [{"name": "gap", "value": 0.5e-4, "reference": 0.0, "tolerance": 1e-4,
                          "rule": "pass if < 0.0001", "context": {"events": 3}}]  # fmt: skip


def test_a_missed_threshold_fails_with_the_message_and_records_once():
    expect, rec = _expect()
    with pytest.raises(AssertionError) as exc:
        expect("recall@1", 0.5, ge=0.9, reference=1.0, message="Recall@1 0.500 < 0.9: state reset too often")
    assert str(exc.value) == "Recall@1 0.500 < 0.9: state reset too often"
    assert len(rec.calls) == 1
    # the tolerance of the record comes from the bound (12 significant digits: 1.0 - 0.9 is 0.1, not 0.0999...)
    assert rec.calls[0]["reference"] == 1.0 and rec.calls[0]["tolerance"] == 0.1
    assert rec.calls[0]["rule"] == "pass if >= 0.9"


def test_a_band_passes_inside_and_fails_outside():
    expect, rec = _expect()
    assert expect("ratio", 0.71, reference=2**-0.5, tolerance=0.01, message="m")
    with pytest.raises(AssertionError, match="^off$"):
        expect("ratio", 0.8, reference=2**-0.5, tolerance=0.01, message="off")
    assert [c["tolerance"] for c in rec.calls] == [0.01, 0.01] and [c["rule"] for c in rec.calls] == [None, None]


def test_bounds_are_strict_or_not_as_named_and_all_must_hold():
    th = threshold_of(None, None, {"ge": 0.99, "le": 1.0001})
    assert th.holds(0.99) and th.holds(1.0001) and not th.holds(0.98) and not th.holds(1.01)
    assert th.rule() == "pass if in [0.99, 1.0001]"
    assert not threshold_of(None, None, {"lt": 1.0}).holds(1.0) and threshold_of(None, None, {"le": 1.0}).holds(1.0)
    assert not threshold_of(None, None, {"gt": 0.0}).holds(0.0) and threshold_of(None, None, {"ge": 0.0}).holds(0.0)
    assert threshold_of(None, None, {"gt": 0.0, "lt": 1.0}).rule() == "pass if in (0, 1)"
    assert threshold_of(0.0, None, {"ge": 0.99, "le": 1.0001}).record_fields() == (0.0, 1.0001)


def test_nan_none_and_infinity_never_meet_a_threshold():
    expect, rec = _expect()
    for bad in (float("nan"), None, float("inf")):
        assert expect.holds("x", bad, le=1.0) is False
        assert expect.holds("x", bad, reference=0.0, tolerance=1.0) is False
    assert len(rec.calls) == 6


def test_problems_collects_the_message_instead_of_raising():
    expect, rec = _expect()
    problems: list[str] = []
    assert expect("a", 2.0, le=1.0, message="a is 2", problems=problems) is False
    assert expect("b", 0.5, le=1.0, message="b is fine", problems=problems) is True
    assert problems == ["a is 2"] and len(rec.calls) == 2


def test_a_callable_message_is_built_only_on_failure():
    expect, _ = _expect()
    short: list[int] = []
    assert expect("idle steps", len(short), le=0, message=lambda: f"first at step {short[0]}")  # short[0]: unbuilt
    short.append(7)
    with pytest.raises(AssertionError, match="first at step 7"):
        expect("idle steps", len(short), le=0, message=lambda: f"first at step {short[0]}")


def test_an_expect_without_a_threshold_or_with_a_bad_bound_is_refused():
    expect, rec = _expect()
    with pytest.raises(TypeError, match="needs a threshold"):
        expect("x", 1.0, reference=1.0, message="m")
    with pytest.raises(TypeError, match="needs a threshold"):
        expect.holds("x", 1.0)
    with pytest.raises(TypeError, match="not finite"):
        expect("x", 1.0, le=float("nan"), message="m")
    with pytest.raises(TypeError, match="unknown bound 'eq'"):
        threshold_of(None, None, {"eq": 1.0})
    assert rec.calls == []  # nothing recorded by a refused call


CHECKS = '''
@pytest.mark.check("E-1", kind="K1")
def test_met(impl, expect):
    """Meets its threshold."""
    expect("recall@1", 0.95, ge=0.9, reference=1.0, message="too low", keys=8)

@pytest.mark.check("E-2", kind="K1")
def test_missed(impl, expect):
    """Misses its threshold."""
    expect("gap", 0.5, reference=0.0, tolerance=1e-4, message="the gap is 0.5, expected 0 +- 1e-4")
'''


def test_the_fixture_records_once_and_fails_the_check_with_its_message(project):
    project.checks(CHECKS)
    project.run("conformance", "--impl", "good").assert_outcomes(passed=1, failed=1)
    by_test = {r["test"]: r for r in project.results("good")["results"]}
    met, missed = by_test["test_met[good]"], by_test["test_missed[good]"]
    assert met["metrics"] == [{"name": "recall@1", "value": 0.95, "reference": 1.0, "tolerance": 0.1,
                               "rule": "pass if >= 0.9", "context": {"keys": 8}, "within": True}]  # fmt: skip
    assert len(missed["metrics"]) == 1 and missed["metrics"][0]["within"] is False
    assert missed["outcome"] == "failed"
    assert missed["reason"] == "AssertionError: the gap is 0.5, expected 0 +- 1e-4"
