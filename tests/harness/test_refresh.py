"""``--refresh RUN_DIR`` (conformance/_harness/refresh.py): a new run takes over the earlier results whose check code
is unchanged and reruns the others; a result is never taken over when its own module, a helper, the reference or
the data readers changed since it was recorded, when it failed, or when the xfail registry now says otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gru4rec_conformance.conformance._harness.refresh import header_mismatch, suite_commit, why_not_reusable
from gru4rec_conformance.reports.results import load_run

REPO = Path(__file__).resolve().parents[2]
MODULE = "conformance/gru4rec/test_k11_initialisation.py"
ENTRY = {"index": 3, "file": "x.toml", "pattern": "SC-1", "reason": "scores all items", "kind": "bug"}


def _record(outcome: str = "passed", module: str = MODULE, xfail: dict | None = None) -> dict:
    return {"nodeid": f"{module}::test_x[impl]", "module": module, "outcome": outcome,
            "suite_version": "2026.11.0+gabc1234.dirty", "xfail": xfail}  # fmt: skip


def _changed(*paths: str):
    def changed(sha: str, roots: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        assert sha == "abc1234" and "conformance/gru4rec" in roots
        return tuple(("M", p) for p in paths)

    return changed


def test_a_result_stands_only_while_its_checks_are_unchanged():
    assert suite_commit(_record()) == "abc1234"
    assert why_not_reusable(_record(), "gru4rec", [], _changed()) is None
    # another check module, or documentation beside the checks, changed: the result still stands
    other = _changed("conformance/gru4rec/test_k9_scalability.py", "conformance/gru4rec/README.md")
    assert why_not_reusable(_record(), "gru4rec", [], other) is None
    # its own module, a helper, the reference or a data reader changed: it runs again
    for path in (MODULE, "conformance/gru4rec/_common.py", "reference/gru4rec/model.py", "datasets/sessions/x.py"):
        why = why_not_reusable(_record(), "gru4rec", [], _changed(path))
        assert why is not None and path in why, path
    # a helper only other modules import (this checkout's import graph: _probes.py serves SR and EV checks)
    probes = _changed("conformance/gru4rec/_probes.py")
    assert why_not_reusable(_record(), "gru4rec", [], probes) is None
    assert why_not_reusable(_record(module="conformance/gru4rec/test_k1_state_reset.py"), "gru4rec", [], probes)
    assert "git cannot compare" in str(why_not_reusable(_record(), "gru4rec", [], lambda sha, roots: None))
    assert why_not_reusable({**_record(), "suite_version": "unknown"}, "gru4rec", [], _changed()) is not None


def test_failures_and_changed_declarations_run_again():
    for outcome in ("failed", "error", "xpass", "skipped"):
        assert why_not_reusable(_record(outcome), "gru4rec", [], _changed()) == f"outcome {outcome}"
    assert why_not_reusable(_record("skipped-unsupported"), "gru4rec", [], _changed()) is None
    held = _record("xfail", xfail=ENTRY)
    assert why_not_reusable(held, "gru4rec", [{**ENTRY, "index": 7, "file": "y.toml"}], _changed()) is None
    assert "changed or no longer applies" in str(why_not_reusable(held, "gru4rec", [], _changed()))
    reworded = [{**ENTRY, "reason": "another reason"}]
    assert "changed or no longer applies" in str(why_not_reusable(held, "gru4rec", reworded, _changed()))
    assert "applies to it now" in str(why_not_reusable(_record(), "gru4rec", [ENTRY], _changed()))


def test_header_mismatch_names_what_would_change_a_result():
    head = {"impl": {"version": "a@1", "init_kwargs": {}, "features": {"logq": True}, "hooks": ["fit"],
                     "capabilities": {"losses": ["bpr-max"], "shims": ["x"]}},
            "frameworks": {"torch": "2.13.0"}, "device": "cpu", "dataset": None, "seeds": [42], "env": {},
            "options": {"profile": None}}  # fmt: skip
    assert header_mismatch(head, head) == []
    shims = {**head, "impl": {**head["impl"], "capabilities": {"losses": ["bpr-max"], "shims": ["y"]}}}
    assert header_mismatch(head, shims) == []  # free text only
    other = {**head, "impl": {**head["impl"], "version": "a@2"}, "frameworks": {"torch": "2.12.0"}, "seeds": [1]}
    assert header_mismatch(head, other) == ["the implementation's version", "framework versions (torch)", "seeds"]
    # where checkouts and caches are found does not change a result; which data or worker interpreter does
    mirror = {**head, "env": {"GRU4REC_MIRROR_DIR": "/work/.mirror", "GRU4REC_CACHE_DIR": "/c"}}
    assert header_mismatch(head, mirror) == []
    data = {**head, "env": {"GRU4REC_SHARED_DATA": "/d", "GRU4REC_MIRROR_DIR": "/m"}}
    assert header_mismatch(head, data) == ["GRU4REC_* variables (GRU4REC_SHARED_DATA)"]


def _run(out: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", MODULE, "--impl", "reference", "--report-dir", str(out),
                           "-p", "no:cacheprovider", "-q", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip


def _only_run(out: Path) -> Path:
    (run_dir,) = (out / "reference").iterdir()
    return run_dir


@pytest.mark.timeout(900)
def test_refresh_takes_over_unchanged_results_and_reruns_the_rest(tmp_path):
    first = _run(tmp_path / "a")
    assert first.returncode == 0, first.stdout[-2000:]
    earlier = _only_run(tmp_path / "a")
    n = len(load_run(earlier).results)
    assert n > 0
    second = _run(tmp_path / "b", "--refresh", str(earlier))
    assert second.returncode == 0, second.stdout[-2000:]
    assert f"--refresh: {n} reference check(s) taken over from {earlier}, 0 run again" in second.stdout
    run = load_run(_only_run(tmp_path / "b"))
    assert run.status == "complete" and len(run.results) == n
    assert all(r["reused_from"]["run_id"] == load_run(earlier).header["run_id"] for r in run.results)
    assert run.header["refresh"]["directory"] == str(earlier)
    assert f"{n} results taken over" in (_only_run(tmp_path / "b") / "summary.md").read_text()

    # one result from a commit git does not know, one that failed: both run again, the others are taken over
    lines = (earlier / "results.jsonl").read_text().splitlines()
    results = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "result"]
    unknown, failed = json.loads(lines[results[0]]), json.loads(lines[results[1]])
    unknown["suite_version"] = "2026.11.0+g0000000"
    failed["outcome"] = "failed"
    lines[results[0]], lines[results[1]] = json.dumps(unknown), json.dumps(failed)
    (earlier / "results.jsonl").write_text("\n".join(lines) + "\n")
    (earlier / "results.json").unlink(missing_ok=True)
    third = _run(tmp_path / "c", "--refresh", str(earlier))
    assert third.returncode == 0, third.stdout[-2000:]
    assert f"{n - 2} reference check(s) taken over" in third.stdout and "2 run again" in third.stdout
    run = load_run(_only_run(tmp_path / "c"))
    ran = {r["nodeid"] for r in run.results if "reused_from" not in r}
    assert ran == {unknown["nodeid"], failed["nodeid"]} and len(run.results) == n


def test_refresh_refuses_a_run_of_another_implementation_or_an_unfinished_one(tmp_path):
    first = _run(tmp_path / "a")
    assert first.returncode == 0
    earlier = _only_run(tmp_path / "a")
    lines = (earlier / "results.jsonl").read_text().splitlines()
    (earlier / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # no end record: interrupted
    (earlier / "results.json").unlink(missing_ok=True)
    refused = _run(tmp_path / "b", "--refresh", str(earlier))
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR
    assert "not complete (use --resume to continue it)" in refused.stderr
