"""Options used by the fine-tuner meta-test (tests/finetuner/test_meta_mutants.py): keep, for each mutant,
only the checks of its kind or of its defect row (and of the rows named by its ``also_rows``), and write one JSON line per check result (``real_sst5_only``:
the check asserts real SST-5 facts and skips on the synthetic stand-in; ``reason``: a failure's message)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("finetuner", "fine-tuner conformance (meta-test helpers)")
    group.addoption(
        "--ft-results",
        default=None,
        help="append one JSON line per fine-tuner check result (nodeid, impl, check, kind, outcome)",
    )
    group.addoption(
        "--ft-mutant-scope",
        choices=("all", "kind", "row"),
        default="all",
        help="for mutant implementations, keep only the checks of the mutant's kind or defect row",
    )


def _impl_name(item) -> str | None:
    cs = getattr(item, "callspec", None)
    if cs is None or "impl" not in cs.params:
        return None
    return getattr(cs.params["impl"], "name", None)


def pytest_collection_modifyitems(config, items):
    scope = config.getoption("--ft-mutant-scope")
    if scope == "all":
        return
    keep, drop = [], []
    for item in items:
        name = _impl_name(item) or ""
        mark = item.get_closest_marker("check")
        cls = _mutant_class(name)
        if cls is None or mark is None:
            keep.append(item)
            continue
        # a mutant with a sibling also runs the sibling's row, whose checks must tell the two apart by message
        rows = {f"FT-{r}" for r in (cls.defect_row, *getattr(cls, "also_rows", ()))}
        same = (mark.kwargs.get("kind") == cls.kind) if scope == "kind" else (mark.args[0] in rows)
        (keep if same else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_runtest_logreport(report):
    path = getattr(pytest_runtest_logreport, "path", None)
    if path is None or (report.when != "call" and report.outcome == "passed"):
        return
    if report.when == "teardown" and report.outcome != "failed":
        return
    import json

    rec = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome, **getattr(report, "ft_meta", {})}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    mark = item.get_closest_marker("check")
    report.ft_meta = {
        "impl": _impl_name(item),
        "check": mark.args[0] if mark else None,
        "kind": mark.kwargs.get("kind") if mark else None,
        "real_sst5_only": "sst5_real" in getattr(item, "fixturenames", ()),
    }
    if report.failed and call.excinfo is not None:
        # the failure message, for the meta-test's check that a mutant's message names its defect
        report.ft_meta["reason"] = str(call.excinfo.value)[:2000]


def pytest_sessionstart(session):
    pytest_runtest_logreport.path = session.config.getoption("--ft-results")


def _mutant_class(name: str):
    if not name.startswith("mutant_ft"):
        return None
    from gru4rec_conformance.implementations.finetuner.mutants import MUTANTS

    return MUTANTS.get(name)
