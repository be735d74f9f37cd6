"""The bad-input corpus (bad_input_corpus.CASES), one test per row: each bad input gets a clear error naming the
file, line, column or parameter, a usage error, or a named check failure — never a bare library traceback, never a
silent pass. ``python tests/bad_inputs/print_bad_input_table.py --run`` prints the same rows with the messages."""

from __future__ import annotations

import collections

import pytest

from gru4rec_conformance.implementations.registry import discover

discover()  # the registry's modules and the broken adapters are imported before pytester snapshots sys.modules,
import bad_input_adapters  # noqa: E402,F401  so that in-process inner runs never register an adapter twice
from bad_input_corpus import (  # noqa: E402
    BAD_INPUTS,
    CASES,
    QUIET,
    REPO,
    CheckFails,
    Ctx,
    adapter_results,
    observe,
    start_adapter_run,
    verify,
)  # fmt: skip  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def adapter_run(request, tmp_path_factory):
    """The shared run of the broken adapters, started in the background when the first row of this module runs
    (the CheckFails rows come last in the table, so the other rows run meanwhile)."""

    def row(item):
        callspec = getattr(item, "callspec", None)
        return callspec.params.get("case") if callspec is not None else None

    wanted = any(isinstance(getattr(row(item), "answer", None), CheckFails) for item in request.session.items)
    if not wanted:
        yield None
        return
    report_dir = tmp_path_factory.mktemp("adapter-run")
    proc = start_adapter_run(report_dir)
    cache = {}

    def get():
        if "results" not in cache:
            cache["results"] = adapter_results(proc, report_dir)
        return cache["results"]

    yield get
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _pytest_runner(request):
    def run(args):
        pytester = request.getfixturevalue("pytester")
        result = pytester.runpytest_inprocess(
            *QUIET,
            "--rootdir",
            str(REPO),
            "-c",
            str(REPO / "pyproject.toml"),
            str(REPO / "conformance" / "gru4rec"),
            *args,
        )
        return int(result.ret), "\n".join(result.outlines + result.errlines)

    return run


@pytest.mark.parametrize("case", CASES, ids=[f"{c.id}-{c.enters.replace(' ', '_')}" for c in CASES])
def test_bad_input_is_answered_clearly(case, tmp_path, request, adapter_run):
    if case.skip_if is not None and (reason := case.skip_if()):
        pytest.skip(f"{case.id}: {reason}")
    ctx = Ctx(tmp_path, _pytest_runner(request), adapter_run)
    obs = observe(case, ctx)
    problems = verify(case, obs)
    assert not problems, f"{case.id} ({case.enters}: {case.input}) → expected {case.answer.describe()}:\n" + "\n".join(
        problems
    )


def test_the_corpus_covers_every_entry_point():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(BAD_INPUTS) >= 30
    by_entry = collections.Counter(c.enters for c in BAD_INPUTS)
    assert set(by_entry) == {"reader", "pipeline", "reference fit", "evaluation", "plugin option", "adapter protocol"}
    assert min(by_entry.values()) >= 4, by_entry
