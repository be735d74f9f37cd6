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


def _run(sha: str, family: str, modules: tuple[str, ...] = (), command: tuple[str, ...] = ()) -> RunData:
    header = {"suite": {"string": "1.0+g" + sha[:7], "git_sha": sha}, "impl": {"name": "x", "family": family},
              "command": ["pytest", "conformance/gru4rec", *command]}  # fmt: skip
    results = [{"module": m, "outcome": "passed"} for m in modules]
    return RunData(directory=Path("."), header=header, results=results, resumes=[], end=None)


def _commit(root: Path, msg: str) -> str:
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", msg)
    facts._changed_files.cache_clear()  # the cache assumes HEAD does not move within one process
    return _git(root, "rev-parse", "HEAD")


MODS = ("conformance/gru4rec/test_a.py", "conformance/finetuner/test_b.py")  # the checks the runs ran


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

    current, note = suite_currency(_run(first, "gru4rec", MODS), root)
    assert current is True, note
    current, note = suite_currency(_run(first, "finetuner", MODS), root)
    assert current is False and note.startswith("stale: 1 files of the finetuner checks changed"), note
    current, note = suite_currency(_run(first, "other", MODS), root)  # an unknown family: every family's checks count
    assert current is False and note.startswith("stale: 1 files of the checks changed"), note
    (root / "reference/gru4rec/core.py").write_text("x = 3\n", encoding="utf-8")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "three")
    facts._changed_files.cache_clear()  # the cache assumes HEAD does not move within one process
    current, note = suite_currency(_run(first, "gru4rec", MODS), root)
    assert current is False and "1 files of the gru4rec checks" in note, note


def test_a_changed_check_module_stales_only_the_runs_that_ran_its_checks(tmp_path):
    """A ``-k MC`` matrix run stays current when a hyperparameter check changes; the full run goes stale. A check
    module added later stales a full run (its checks would have run), not a subset run; a changed helper module
    (not ``test_*.py``) stales both."""
    root = tmp_path / "repo"
    mc, hp = "conformance/gru4rec/test_metric_conformance.py", "conformance/gru4rec/test_k6_hyperparameters.py"
    for rel in (mc, hp, "conformance/gru4rec/support.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n", encoding="utf-8")
    _git(root.parent, "init", "-q", str(root))
    first = _commit(root, "one")
    matrix = _run(first, "gru4rec", (mc,), ("--dataset", "all", "-k", "MC"))
    full = _run(first, "gru4rec", (mc, hp))

    (root / hp).write_text("x = 2\n", encoding="utf-8")
    _commit(root, "two")
    current, note = suite_currency(matrix, root)
    assert current is True and "1 check modules it did not run" in note, note
    current, note = suite_currency(full, root)
    assert current is False and note.startswith("stale: 1 files of the gru4rec checks changed"), note

    (root / "conformance/gru4rec/test_k12_new.py").write_text("x = 1\n", encoding="utf-8")
    _commit(root, "three")
    assert suite_currency(matrix, root)[0] is True
    assert suite_currency(_run(first, "gru4rec", (mc, hp)), root)[1].startswith("stale: 2 files")

    (root / "conformance/gru4rec/support.py").write_text("x = 2\n", encoding="utf-8")
    _commit(root, "four")
    current, note = suite_currency(matrix, root)
    assert current is False and note.startswith("stale: 1 files"), note


def test_documentation_beside_the_checks_stales_no_run(tmp_path):
    """A README in the check folder is read by no check: editing it leaves every run current."""
    root = tmp_path / "repo"
    mc = "conformance/gru4rec/test_metric_conformance.py"
    for rel in (mc, "conformance/gru4rec/README.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n", encoding="utf-8")
    _git(root.parent, "init", "-q", str(root))
    first = _commit(root, "one")
    (root / "conformance/gru4rec/README.md").write_text("x = 2\n", encoding="utf-8")
    _commit(root, "two")
    assert suite_currency(_run(first, "gru4rec", (mc,)), root)[0] is True
    (root / mc).write_text("x = 2\n", encoding="utf-8")
    _commit(root, "three")
    assert suite_currency(_run(first, "gru4rec", (mc,)), root)[0] is False


def test_a_changed_helper_stales_only_the_runs_whose_modules_import_it(tmp_path):
    """``_probes.py`` imported by one check module (through another helper too) stales the runs of that module
    only; a helper conftest.py imports, like any other file, stales every run."""
    root = tmp_path / "repo"
    g = "conformance/gru4rec"
    files = {
        f"{g}/test_k1.py": "from gru4rec_conformance.conformance.gru4rec import _probes as P\n",
        f"{g}/test_k8.py": "from ._extra import y\n",
        f"{g}/test_k9.py": "from gru4rec_conformance.conformance.gru4rec._common import build\n",
        f"{g}/_extra.py": "from gru4rec_conformance.conformance.gru4rec._probes import STATE\n",
        f"{g}/_probes.py": "STATE = 1\n",
        f"{g}/_common.py": "build = 1\n",
        f"{g}/_data.py": "x = 1\n",
        f"{g}/conftest.py": "from gru4rec_conformance.conformance.gru4rec import _data\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    _git(root.parent, "init", "-q", str(root))
    first = _commit(root, "one")
    k1, k8, k9 = (_run(first, "gru4rec", (f"{g}/{m}.py",)) for m in ("test_k1", "test_k8", "test_k9"))

    (root / f"{g}/_probes.py").write_text("STATE = 2\n", encoding="utf-8")
    _commit(root, "two")
    assert [suite_currency(r, root)[0] for r in (k1, k8, k9)] == [False, False, True]
    assert facts.affects(f"{g}/_probes.py", f"{g}/test_k9.py", root) is False

    (root / f"{g}/_probes.py").write_text("STATE = 1\n", encoding="utf-8")
    second = _commit(root, "three")
    k9 = _run(second, "gru4rec", (f"{g}/test_k9.py",))
    (root / f"{g}/_data.py").write_text("x = 2\n", encoding="utf-8")
    _commit(root, "four")
    assert suite_currency(k9, root)[0] is False  # conftest.py imports _data: every module's fixtures
