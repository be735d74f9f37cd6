"""The crash, hang and memory-leak mutants on the real suite: each yields a failed check whose reason names what
happened and whose report entry carries the worker's stderr tail; the run goes on and writes a complete report.
One inner run covers the three mutants: one collection of the suite and seven worker
starts (importing torch), about a minute on a loaded 2-core machine."""

from __future__ import annotations

import pandas as pd
import pytest
from reliability_support import describe, results_json, run_suite, the_run_dir

MUTANTS = ("mutant:crash", "mutant:hang", "mutant:leak")
# SR-5 fits on D-LONG, then scores prefixes: the crash and the leak hit fit, the hang hits score_prefixes.
# LF-1 (cross-entropy) only builds and calls loss_on_scores: after the crash it passes in a fresh worker.
# Every worker start costs seconds on a loaded machine, so LF-1 runs for the crash mutant only.
SELECTION = [f"conformance/gru4rec/test_k1_state_reset.py::test_sr5_state_is_used[{m}]" for m in MUTANTS] + [
    "conformance/gru4rec/test_k2_loss_formula.py::test_lf1_fixed_score_matrix[mutant:crash-cross-entropy]"
]
CALL_TIMEOUT_S = 8  # a D-LONG fit takes ~0.5 s in a one-thread worker
MEMORY_LIMIT_MIB = 650  # a worker with torch and the reference holds ~310 MiB; the leak adds 64 MiB per step

EXPECTED = {
    # impl: (worker kind, fragments of the reason, fragments of the worker's stderr tail)
    "mutant:crash": (
        "crash",
        ["worker crash:", "mutant:crash.fit()", "was killed by SIGSEGV"],
        ["mutant:crash: reading address 0 in the first training step", "Fatal Python error: Segmentation fault"],
    ),
    "mutant:hang": (
        "timeout",
        ["worker timeout:", "mutant:hang.score_prefixes()", f"no answer within the timeout of {CALL_TIMEOUT_S} s"],
        ["mutant:hang: score_prefixes waits for an event nobody sets"],
    ),
    "mutant:leak": (
        "memory",
        ["worker memory:", "mutant:leak.fit()", f"exceeded the limit of {MEMORY_LIMIT_MIB} MiB"],
        ["mutant:leak: keeping 64 MiB per training step"],
    ),
}


@pytest.fixture(scope="module")
def mutant_run(tmp_path_factory):
    report_dir = tmp_path_factory.mktemp("reports")
    proc = run_suite(
        report_dir,
        "--impl",
        ",".join(MUTANTS),
        *SELECTION,
        "--call-timeout",
        str(CALL_TIMEOUT_S),
        "--worker-memory-mb",
        str(MEMORY_LIMIT_MIB),
        timeout=300,
    )
    return report_dir, proc


def test_the_run_completes_with_one_failure_per_mutant(mutant_run):
    report_dir, proc = mutant_run
    assert proc.returncode == 1, describe(proc)  # checks failed; not a crash of pytest (>1) nor a pass (0)
    assert "3 failed, 1 passed" in proc.stdout, describe(proc)


@pytest.mark.parametrize("impl", MUTANTS)
def test_mutant_is_reported_as_a_failure_with_the_worker_stderr(mutant_run, impl):
    report_dir, proc = mutant_run
    run_dir = the_run_dir(report_dir, impl.replace(":", "."))
    data = results_json(run_dir)
    assert data["status"] == "complete" and data["end"]["status"] == "complete", data["end"]
    for name in ("results.jsonl", "results.json", "summary.md", "summary.html"):
        assert (run_dir / name).is_file(), f"{run_dir}: {name} missing"
    by_test = {r["test"].split("[")[0]: r for r in data["results"]}
    sr5 = by_test["test_sr5_state_is_used"]
    kind, reason_parts, stderr_parts = EXPECTED[impl]
    assert sr5["outcome"] == "failed" and sr5["check"]["id"] == "SR-5", sr5
    for part in reason_parts:
        assert part in sr5["reason"], (part, sr5["reason"])
    assert sr5["worker"]["kind"] == kind, sr5["worker"]
    for part in stderr_parts:
        assert part in sr5["worker"]["stderr_tail"], (part, sr5["worker"]["stderr_tail"])
    if impl == "mutant:crash":  # the run went on: the next check of the crashed implementation got a fresh worker
        assert by_test["test_lf1_fixed_score_matrix"]["outcome"] == "passed", by_test
        assert data["counts"]["failed"] == 1 and data["counts"]["passed"] == 1, data["counts"]
    else:
        assert data["counts"]["failed"] == 1 and data["counts"]["total"] == 1, data["counts"]
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "**Conformance: NOT CONFORMANT**" in summary and "INTERRUPTED" not in summary
    assert "This report is" not in summary
    assert "Worker stderr (tail):" in summary and stderr_parts[0] in summary and reason_parts[-1] in summary
    assert data["run"]["impl"]["isolation"].startswith("worker process"), data["run"]["impl"]["isolation"]


@pytest.mark.parametrize("impl", MUTANTS)
def test_the_defect_is_refused_in_process(impl):
    """Outside a worker (``--isolation never``) the mutants raise instead of taking the suite's process down."""
    from gru4rec_conformance.implementations.registry import default_registry

    spec = next(s for s in default_registry().specs("gru4rec") if s.name == impl)
    adapter = spec.create("cpu")
    adapter.build(seed=1, layers=[4], batch_size=2, n_epochs=1, n_sample=0)
    train = pd.DataFrame({"SessionId": [1, 1, 2, 2, 3, 3], "ItemId": [1, 2, 2, 3, 3, 1], "Time": [1, 2, 3, 4, 5, 6]})
    with pytest.raises(RuntimeError, match=f"{impl}: refusing to .* outside a worker process"):
        adapter.fit(train)
        adapter.score_prefixes([[1]])
