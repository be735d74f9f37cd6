"""Every committed report under reports/benchmarks/ re-renders to itself, byte for byte, from its folder's data with
the command reports/benchmarks/README.md gives for it (run here with ``--out-root`` in a temporary folder)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from gru4rec_conformance.benchmarks import report, suite_cost

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "reports" / "benchmarks"
README = FOLDER / "README.md"
MODULES = {"gru4rec_conformance.benchmarks.report": report, "gru4rec_conformance.benchmarks.suite_cost": suite_cost}


def _commands() -> dict[str, list[str]]:
    """folder name → the argument list of its render command in the README (a ``python -m`` line of one of
    :data:`MODULES` naming a file of the folder, continuation lines joined; ``suite_cost run`` is a measurement)."""
    text = re.sub(r"\\\n\s*", " ", README.read_text(encoding="utf-8"))
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        words = shlex.split(line.strip()) if line.startswith("    python -m ") else []
        if len(words) < 4 or words[2] not in MODULES or words[3] == "run":
            continue
        named = [w.split("/")[2] for w in words if w.startswith("reports/benchmarks/") and w.count("/") >= 3]
        if named:
            out.setdefault(named[0], words)
    return out


def test_every_committed_report_has_a_render_command():
    folders = sorted(p.name for p in FOLDER.iterdir() if p.is_dir())
    assert folders, "no committed report"
    missing = [f for f in folders if f not in _commands()]
    assert not missing, f"reports/benchmarks/README.md gives no render command for {missing}"


@pytest.mark.parametrize("name", sorted(p.name for p in FOLDER.iterdir() if p.is_dir()))
def test_committed_report_re_renders_to_itself(name, tmp_path, monkeypatch):
    words = _commands().get(name)
    if words is None:
        pytest.fail(f"no render command for {name} (see test_every_committed_report_has_a_render_command)")
    monkeypatch.chdir(REPO)  # the README's paths are relative to the checkout
    module, args = MODULES[words[2]], words[3:]
    if module is report:
        i = args.index("--out-root")
        args[i + 1] = str(tmp_path / "out")
        with contextlib.redirect_stdout(io.StringIO()):
            assert report.main(args) == 0
        (rendered,) = (tmp_path / "out").glob("*/report.md")
        assert rendered.read_text(encoding="utf-8") == (FOLDER / name / "report.md").read_text(encoding="utf-8")
    else:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert suite_cost.main(args) == 0
        assert out.getvalue() == (FOLDER / name / "suite_cost.md").read_text(encoding="utf-8")
