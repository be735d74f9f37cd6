"""Meta-test: every mutant (the reference with one defect of finetuner spec §3 switched on) is caught by the
conformance checks of its kind, and the reference passes those same checks.

The default run keeps, for each mutant, the checks of its own defect row (``--ft-mutant-scope row``); the slow
variant runs every check of the mutant's kind (``--ft-mutant-scope kind``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from implementations.finetuner.mutants import MUTANTS  # noqa: E402

KINDS = ("tokenization", "padding_masking", "data_integrity", "selection_leakage", "early_stopping", "seeding",
         "reporting", "offline")


def _run_suite(tmp_path_factory, scope: str) -> dict:
    from datasets.sst5 import sst5_dir

    if sst5_dir() is None:
        pytest.skip("SST-5 not found: set GRU4REC_SHARED_DATA to the folder holding sst5/stsa.fine.*")
    out = tmp_path_factory.mktemp(f"meta_{scope}") / "results.jsonl"
    args = [sys.executable, "-m", "pytest", "conformance/finetuner", "-q", "-p", "no:cacheprovider",
            "-p", "conformance.finetuner.meta_plugin", "--no-report", "--ft-results", str(out),
            "--ft-mutant-scope", scope]
    for name in MUTANTS:
        args += ["--impl", name]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=3600,
                          env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    results = defaultdict(list)
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            results[r["impl"]].append(r)
    if not results:
        pytest.fail(f"the conformance run produced no result:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return results


@pytest.fixture(scope="module")
def row_results(tmp_path_factory):
    return _run_suite(tmp_path_factory, "row")


@pytest.fixture(scope="module")
def kind_results(tmp_path_factory):
    return _run_suite(tmp_path_factory, "kind")


def _caught(results, cls, *, own_row: bool) -> list[str]:
    rows = results.get(cls.name, [])
    return [r["nodeid"] for r in rows if r["outcome"] == "failed" and r["kind"] == cls.kind
            and (not own_row or r["check"] == f"FT-{cls.defect_row}")]


def test_every_defect_row_has_a_mutant():
    rows = sorted(c.defect_row for c in MUTANTS.values())
    assert rows == [1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]
    assert {c.kind for c in MUTANTS.values()} == set(KINDS)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_caught_by_its_own_check(row_results, name):
    """At least one check with the mutant's defect-row id fails on the mutant."""
    cls = MUTANTS[name]
    ran = row_results.get(name, [])
    assert ran, f"no check of row FT-{cls.defect_row} ran on {name}"
    caught = _caught(row_results, cls, own_row=True)
    assert caught, f"{name} (row {cls.defect_row}: {cls.defect}) passed every FT-{cls.defect_row} check"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_caught_by_checks_of_its_kind(kind_results, name):
    """Running every check of the mutant's kind, at least one fails."""
    cls = MUTANTS[name]
    assert _caught(kind_results, cls, own_row=False), f"{name} passed every {cls.kind} check"
