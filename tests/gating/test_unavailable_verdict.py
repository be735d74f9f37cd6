"""An implementation that cannot run here (``ImplementationUnavailable``, e.g. Microsoft Recommenders on Python
3.11) gets the verdict UNAVAILABLE with its one-line reason in summaries and the scoreboard, not PASS."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gru4rec_conformance.implementations.base import ImplementationUnavailable, require_installed
from gru4rec_conformance.implementations.registry import default_registry
from gru4rec_conformance.reports.results import RunData
from gru4rec_conformance.reports.scoreboard import render_markdown
from gru4rec_conformance.reports.summary import unavailable_reason, verdict

REASON = "recommenders 1.2.1 cannot run on Python 3.11: importing GRUModel fails"


def _run(outcomes_reasons):
    results = [
        {"nodeid": f"t::c{i}", "outcome": o, "reason": r, "check": {"id": f"C-{i}", "kind": "K1"}}
        for i, (o, r) in enumerate(outcomes_reasons)
    ]
    header = {
        "impl": {"name": "ms_recommenders", "family": "gru4rec", "role": "implementation", "version": "1.2.1"},
        "kinds": {"K1": "state reset"},
    }
    return RunData(
        directory=Path("/nowhere/ms_recommenders/20260101T000000Z"),
        header=header,
        results=results,
        resumes=[],
        end={"status": "complete"},
    )


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
    from gru4rec_conformance.reports.scoreboard import build_scoreboard

    why = f"implementation ms_recommenders is not available here: {REASON}"
    run = _run([("skipped", why)])
    run.results[0].update(outcome_detail="unavailable", unavailable=REASON)  # as the harness writes it (schema 1.1)
    board = build_scoreboard([], runs=[run])
    md = render_markdown(board)
    assert "| UNAVAILABLE |" in md and f"- ms_recommenders 1.2.1: {REASON}" in md


def test_require_installed_names_the_package_and_how_to_provide_it():
    require_installed("json", "json", "never needed")  # present: nothing raised
    with pytest.raises(ImplementationUnavailable, match=r"no-such-dist is not installed .*: tox -e no_such"):
        require_installed("no_such_module_gru4rec_conformance", "no-such-dist", "tox -e no_such")


def test_pypi_adapters_without_their_package_are_unavailable_not_failed():
    """In an environment without the package (the main venv for cornac, recpack, recbole, torch-rechub), the
    adapter says UNAVAILABLE with the tox environment to use, instead of failing every check in ``fit``."""
    checked = 0
    registry = default_registry()
    for impl, module, env in (
        ("cornac", "cornac", "tox -e cornac"),
        ("recpack:cross_entropy", "recpack", "tox -e recpack"),
        ("recbole", "recbole", "tox -e recbole"),
        ("torch_rechub", "torch_rechub", "tox -e torch_rechub"),
    ):
        if importlib.util.find_spec(module) is not None:
            continue  # installed here (a tox environment): its checks run for real
        (spec,) = registry.get(impl, family="gru4rec")
        with pytest.raises(ImplementationUnavailable, match=env):
            spec.create().capabilities()
        checked += 1
    if not checked:
        pytest.skip("every PyPI implementation is installed in this environment")
