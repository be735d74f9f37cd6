"""A change of the reference that computes the same bits leaves the verdicts current; any other change stales them
(reports/reference_fingerprint.py, reports/facts.py).

The fingerprint is deterministic and moves with a change of one constant of the optimizer; two trees count as the
same only when the ledger holds both with one fingerprint measured on one machine; a missing entry, another
fingerprint or another machine leaves the run stale, as before the ledger."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gru4rec_conformance.reports import facts
from gru4rec_conformance.reports import reference_fingerprint as rf
from gru4rec_conformance.reports.facts import suite_currency
from gru4rec_conformance.reports.results import RunData


@pytest.fixture(scope="module")
def fingerprint() -> str:
    return rf.compute()


def test_fingerprint_is_deterministic(fingerprint):
    assert len(fingerprint) == 64 and rf.compute() == fingerprint


def test_fingerprint_moves_with_the_optimizer_epsilon(fingerprint, monkeypatch):
    from gru4rec_conformance.reference.gru4rec.optim import IndexedAdagradM

    monkeypatch.setattr(IndexedAdagradM, "eps", 1.1e-6)
    assert rf.compute() != fingerprint


def test_heads_ledger_entry_holds_on_this_machine():
    """The committed ledger's entry of HEAD's reference tree, where it was measured on a machine like this one."""
    if not rf.LEDGER.exists():
        pytest.skip(f"no ledger at {rf.LEDGER}")
    tree = rf.tree_of("HEAD")
    if tree is None:
        pytest.skip("not a git checkout: the ledger names git trees")
    if not any(e.get("tree") == tree and e.get("machine") == rf.machine() for e in rf.read_ledger()):
        pytest.skip(f"the ledger has no entry of tree {tree[:12]} measured on {rf.machine()}")
    assert rf.check() is None


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _commit(root: Path, msg: str) -> str:
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", msg)
    facts._changed_files.cache_clear()
    return _git(root, "rev-parse", "HEAD")


def _run(sha: str) -> RunData:
    header = {"suite": {"string": "1.0+g" + sha[:7], "git_sha": sha}, "impl": {"name": "x", "family": "gru4rec"},
              "command": ["pytest", "conformance/gru4rec"]}  # fmt: skip
    results = [{"module": "conformance/gru4rec/test_a.py", "outcome": "passed"}]
    return RunData(directory=Path("."), header=header, results=results, resumes=[], end=None)


def _ledger(root: Path, *entries: tuple[str, str, str]) -> None:
    (root / "reports").mkdir(exist_ok=True)
    rows = [{"tree": t, "fingerprint": f, "machine": m, "version": rf.VERSION} for t, f, m in entries]
    (root / "reports" / "reference_fingerprints.json").write_text(json.dumps({"schema": 1, "entries": rows}))


def test_a_reference_change_with_the_same_fingerprint_leaves_the_run_current(tmp_path):
    root = tmp_path / "repo"
    for rel in ("conformance/gru4rec/test_a.py", "reference/gru4rec/optim.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n", encoding="utf-8")
    _git(root.parent, "init", "-q", str(root))
    first = _commit(root, "one")
    old_tree = _git(root, "rev-parse", f"{first}:reference/gru4rec")
    (root / "reference/gru4rec/optim.py").write_text("x = 1  # faster\n", encoding="utf-8")
    second = _commit(root, "two")
    new_tree = _git(root, "rev-parse", f"{second}:reference/gru4rec")

    current, note = suite_currency(_run(first), root)
    assert current is False and "1 files of the gru4rec checks" in note, note  # no ledger: stale, as before
    for entries, same in [
        (((old_tree, "f1", "cpu A"), (new_tree, "f1", "cpu A")), True),
        (((old_tree, "f1", "cpu A"), (new_tree, "f2", "cpu A")), False),  # other bits
        (((old_tree, "f1", "cpu A"), (new_tree, "f1", "cpu B")), False),  # measured on two machines
        (((old_tree, "f1", "cpu A"),), False),  # the new tree was never measured
    ]:
        _ledger(root, *entries)
        rf._same.cache_clear()
        assert rf.same_outputs(first, root) is same, entries
        current, note = suite_currency(_run(first), root)
        assert current is same, (entries, note)
        assert (facts.changed_files(first, str(root), ("reference/gru4rec",)) == ()) is same

    # a change of a check module still counts, whatever the ledger says of the reference
    _ledger(root, (old_tree, "f1", "cpu A"), (new_tree, "f1", "cpu A"))
    (root / "conformance/gru4rec/test_a.py").write_text("x = 2\n", encoding="utf-8")
    third = _commit(root, "three")
    assert rf.tree_of(third, root) == new_tree
    current, note = suite_currency(_run(first), root)
    assert current is False and "1 files of the gru4rec checks" in note, note


def test_a_broken_ledger_is_named_and_counts_as_no_ledger(tmp_path):
    bad = tmp_path / "ledger.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="ledger.json"):
        rf.read_ledger(bad)
    assert rf.same_outputs("HEAD~0", tmp_path, ledger=bad) is False  # not a repository either
