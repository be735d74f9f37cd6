"""The import layers of pyproject.toml's ``[tool.importlinter]`` hold, and they can fail.

``lint-imports`` (import-linter) checks two contracts on the package ``gru4rec_conformance``: the folder layers
(``folders``: benchmarks and the checks above the harness, above the reports, above the adapters, ... down to
the run records and ``fileio``) and no import cycle among the modules of any one package (``no-cycles``).
Each run is a subprocess whose ``PYTHONPATH`` starts with the package folder under test, so it analyses this
checkout (not whatever copy an editable install points at). The failing cases analyse a copy of the package's
Python files with one import added: an upward import from the records layer, and a cycle inside ``reports/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gru4rec_conformance

pytest.importorskip("importlinter", reason="import-linter is in the dev extra (pip install -e '.[dev]')")

ROOT = gru4rec_conformance.CHECKOUT_ROOT
pytestmark = pytest.mark.skipif(ROOT is None, reason="needs a checkout (pyproject.toml holds the contracts)")
PACKAGE_DIR = Path(gru4rec_conformance.__file__).resolve().parent
CONTRACTS = ("folders", "no-cycles")


def _lint(import_root: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the checkout's pyproject.toml, importing ``gru4rec_conformance`` from ``import_root``."""
    assert ROOT is not None
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(import_root), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def _copy_package(dest: Path) -> Path:
    """The Python files of the package (its folders followed through the checkout's links) under ``dest/src``;
    returns that ``src``."""
    src = dest / "src"
    shutil.copytree(
        PACKAGE_DIR,
        src / "gru4rec_conformance",
        symlinks=False,
        ignore=lambda d, names: [n for n in names if not (n.endswith(".py") or (Path(d) / n).is_dir()) or n in (
            "__pycache__", "verdicts", "fixtures")],
    )  # fmt: skip
    return src


def _contract_lines(out: str) -> dict[str, str]:
    """Contract name → ``KEPT`` / ``BROKEN`` from lint-imports' summary."""
    found = {}
    for line in out.splitlines():
        for word in ("KEPT", "BROKEN"):
            if line.rstrip().endswith(word):
                found[line.rstrip()[: -len(word)].strip()] = word
    return found


def test_the_checkout_keeps_every_import_contract(tmp_path):
    done = _lint(PACKAGE_DIR.parent, tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    states = _contract_lines(out)
    assert len(states) == len(CONTRACTS) and set(states.values()) == {"KEPT"}, out


@pytest.mark.parametrize(
    ("where", "text", "append_to", "broken"),
    [
        # the records layer importing the reports: an arrow back up the folder layers
        ("conformance/_records/_back_edge.py", "from gru4rec_conformance.reports import results\n", None,
         "Folder layers"),
        # results -> _back_edge -> writer -> results: a circle inside reports/ (the layers between folders hold)
        ("reports/_back_edge.py", "from gru4rec_conformance.reports import writer\n", "reports/results.py",
         "No import cycles"),
    ],
    ids=["upward-import", "cycle-in-a-folder"],
)  # fmt: skip
def test_an_added_back_edge_breaks_the_contract(tmp_path, where, text, append_to, broken):
    src = _copy_package(tmp_path)
    pkg = src / "gru4rec_conformance"
    (pkg / where).write_text(text, encoding="utf-8")
    if append_to:
        module = "gru4rec_conformance." + where.removesuffix(".py").replace("/", ".")
        with open(pkg / append_to, "a", encoding="utf-8") as fh:
            fh.write(f"\nimport {module}  # noqa: E402\n")
    done = _lint(src, tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    states = _contract_lines(out)
    assert [name for name, state in states.items() if state == "BROKEN"] == [
        name for name in states if name.startswith(broken)
    ], out
    assert "_back_edge" in out, out
