"""Feature coverage on every verdict: the status line, the summary, the card and the scoreboard say which of the
reference's features the implementation declares, a CONFORMANT on a subset reads ``CONFORMANT on 5/26
features``, and a coverage figure that counts only the checks of declared features shows the n/a ones beside it.

Pure tests of ``verdict.assess`` on hand-made records, one of the reference table against the reference adapters,
and one pytester run of the dummy adapters (tests/harness/conftest.py) for the reports.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gru4rec_conformance.conformance._records.verdict import (
    CONFORMANT,
    NOT_CONFORMANT,
    REFERENCE_FEATURES,
    Conformance,
    assess,
    feature_coverage,
)

REF = REFERENCE_FEATURES["gru4rec"]
#: the dummy "good" adapter's declaration (tests/harness/conftest.py CAPS)
GOOD = ("loss:cross-entropy", "embedding:none", "session_parallel", "in_batch_negatives", "full_ranking")


def header(declared: tuple[str, ...], role: str = "implementation") -> dict[str, Any]:
    features = {f: f in declared for f in (*REF, "needs_categories", "device:cpu", "device:cuda")}
    features["hook:trace"] = False
    return {"impl": {"name": "x", "family": "gru4rec", "role": role, "unavailable": None, "error": None,
                     "features": features}, "device": "cpu",
            "command": ["pytest", "conformance/gru4rec", "--impl", "x"]}  # fmt: skip


def rec(test: str, outcome: str, **extra: Any) -> dict[str, Any]:
    return {"nodeid": f"conformance/gru4rec/test_k.py::{test}[x]", "impl": "x", "outcome": outcome,
            "check": {"id": test.upper(), "kind": "K1"}, "reason": "", "xfail": None, "metrics": [],
            "outcome_detail": None, **extra}  # fmt: skip


END: dict[str, Any] = {"type": "end", "status": "complete", "not_run": {}}
ABSENT = [rec(f"n{i}", "skipped-unsupported", missing=["loss:bpr-max"], outcome_detail="unsupported") for i in range(3)]


def test_conformant_on_a_subset_says_on_how_many_features_and_which_it_lacks():
    c = assess(header(GOOD), [rec("a", "passed"), *ABSENT], END)
    assert c.status == CONFORMANT and c.status_label() == "CONFORMANT on 5/26 features"
    assert c.features is not None and c.features.has == GOOD and len(c.features.lacks) == 21
    assert c.line("x") == (
        "x: CONFORMANT on 5/26 features — coverage 1/1 (100%); lacks loss:bpr, loss:bpr-max, loss:top1, "
        "loss:top1-max, embedding:separate, embedding:shared, +15 more; 3 checks n/a (feature absent)"
    )
    # every feature of the reference: plain CONFORMANT, the figure still given
    full = assess(header(REF), [rec("a", "passed")], END)
    assert full.status_label() == CONFORMANT and full.line("x") == "x: CONFORMANT — coverage 1/1 (100%); features 26/26"
    # the reference itself is the yardstick
    assert feature_coverage(header(GOOD, role="reference")) is None
    assert assess(header(GOOD, role="reference"), [rec("a", "passed")], END).line("x") == (
        "x: CONFORMANT — coverage 1/1 (100%)"
    )


def test_a_high_coverage_figure_shows_the_checks_its_absent_features_left_out():
    """40 checks ran, 68 n/a: "coverage 40/40" alone would read as if the implementation had been examined whole."""
    ran = [rec(f"r{i}", "passed") for i in range(39)] + [rec("f", "failed", reason="AssertionError: off")]
    absent = [rec(f"n{i}", "skipped-unsupported", missing=["dropout_embed"], outcome_detail="unsupported")
              for i in range(68)]  # fmt: skip
    c = assess(header(GOOD), ran + absent, END)
    assert c.status == NOT_CONFORMANT
    assert c.line("x") == (
        "x: NOT CONFORMANT — 1 undeclared; coverage 40/40 (100%); features 5/26 (lacks loss:bpr, loss:bpr-max, "
        "loss:top1, loss:top1-max, embedding:separate, embedding:shared, +15 more); 68 checks n/a (feature absent)"
    )


def test_feature_coverage_round_trips_and_older_stored_verdicts_get_it_from_the_header(tmp_path):
    c = assess(header(GOOD), [rec("a", "passed")], END)
    assert Conformance.from_json(c.to_json()) == c
    from gru4rec_conformance.reports.results import RunData

    old = c.to_json()
    del old["features"]  # stored before the feature coverage was
    run = RunData(directory=tmp_path, header=header(GOOD), results=[rec("a", "passed")], resumes=[], end=END,
                  stored_conformance=old)  # fmt: skip
    assert run.conformance().status_label() == "CONFORMANT on 5/26 features"
    assert dataclasses.replace(c, features=None).line("x") == "x: CONFORMANT — coverage 1/1 (100%)"


def test_reference_features_are_the_reference_adapters_declaration():
    from gru4rec_conformance.implementations.base import get_family
    from gru4rec_conformance.implementations.registry import default_registry

    specs = default_registry().get("reference")
    assert {s.family for s in specs} == set(REFERENCE_FEATURES)
    for spec in specs:
        caps = get_family(spec.family).capabilities_cls.from_mapping(spec.cls(device="cpu").capabilities())
        declared = tuple(f for f, v in caps.features().items() if v and not f.startswith("device:"))
        assert declared == REFERENCE_FEATURES[spec.family], spec.family


CHECKS = '''
@pytest.mark.check("F-1", kind="K1")
def test_pass(impl):
    """passes"""


@pytest.mark.check("F-2", kind="K2")
@pytest.mark.loss("bpr-max")
def test_absent(impl):
    """needs an absent loss"""
'''


def test_summary_card_and_scoreboard_show_the_feature_coverage(project):
    from gru4rec_conformance.reports.card import build_card, render_markdown
    from gru4rec_conformance.reports.results import load_run
    from gru4rec_conformance.reports.scoreboard import build_scoreboard
    from gru4rec_conformance.reports.scoreboard import render_markdown as board_markdown

    project.checks(CHECKS)
    result = project.run("conformance", "--impl", "good")
    assert result.ret == pytest.ExitCode.OK
    last = [ln for ln in result.outlines if ln.strip()][-1]
    assert last.startswith("good: CONFORMANT on 5/26 features — coverage 1/1 (100%); lacks loss:bpr, ")
    assert last.endswith("; 1 check n/a (feature absent)")
    run_dir = project.run_dirs("good")[-1]
    md = (run_dir / "summary.md").read_text()
    assert "**Conformance: CONFORMANT on 5/26 features** — coverage 1/1 (100%); lacks" in md
    assert "- features 5/26 of the reference's declared; lacks loss:bpr, loss:bpr-max, " in md
    assert "final_act:tanh, bpreg (their checks are n/a: never tested)" in md  # every lacking feature named
    assert "CONFORMANT on 5/26 features" in (run_dir / "summary.html").read_text()
    card = render_markdown(build_card(load_run(run_dir)))
    assert "**CONFORMANT on 5/26 features**" in card and "Feature coverage: features 5/26 of the reference's" in card
    board = board_markdown(build_scoreboard(project.path / "reports" / "out"))
    assert "| good | CONFORMANT on 5/26 features |" in board
    assert "| 1/1 (100%); features 5/26 (lacks loss:bpr, loss:bpr-max," in board
