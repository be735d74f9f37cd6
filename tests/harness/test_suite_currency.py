"""A committed verdict is stale only when the checks of its own family changed since the run's suite commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gru4rec_conformance.reports import facts
from gru4rec_conformance.reports.facts import suite_currency
from gru4rec_conformance.reports.results import RunData


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _run(sha: str, family: str) -> RunData:
    header = {"suite": {"string": "1.0+g" + sha[:7], "git_sha": sha}, "impl": {"name": "x", "family": family}}
    return RunData(directory=Path("."), header=header, results=[], resumes=[], end=None)


def test_a_change_to_one_familys_checks_leaves_the_other_familys_verdicts_current(tmp_path):
    root = tmp_path / "repo"
    for rel in ("conformance/gru4rec/test_a.py", "conformance/finetuner/test_b.py", "reference/gru4rec/core.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n", encoding="utf-8")
    _git(root.parent, "init", "-q", str(root))
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    first = _git(root, "rev-parse", "HEAD")
    (root / "conformance/finetuner/test_b.py").write_text("x = 2\n", encoding="utf-8")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")

    current, note = suite_currency(_run(first, "gru4rec"), root)
    assert current is True, note
    current, note = suite_currency(_run(first, "finetuner"), root)
    assert current is False and note.startswith("stale: 1 files of the finetuner checks changed"), note
    current, note = suite_currency(_run(first, "other"), root)  # an unknown family: every family's checks count
    assert current is False and note.startswith("stale: 1 files of the checks changed"), note
    (root / "reference/gru4rec/core.py").write_text("x = 3\n", encoding="utf-8")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "three")
    facts._changed_since.cache_clear()  # the cache assumes HEAD does not move within one process
    current, note = suite_currency(_run(first, "gru4rec"), root)
    assert current is False and "1 files of the gru4rec checks" in note, note
