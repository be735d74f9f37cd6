"""The training steps sit behind one interface without an import cycle (reference/gru4rec/steps/)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gru4rec_conformance import child_pythonpath
from gru4rec_conformance.reference.gru4rec import GRU4Rec
from gru4rec_conformance.reference.gru4rec.steps import STEP_IMPLS, StandardStep, StaticStep, TrainingStep

PKG = "gru4rec_conformance.reference.gru4rec"


@pytest.mark.parametrize("module", ["records", "steps.base", "steps.standard", "steps.static", "steps", "core"])
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    """Any import order works (no cycle); the steps never load core (core imports them)."""
    code = f"import sys, importlib; importlib.import_module('{PKG}.{module}'); print('{PKG}.core' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": child_pythonpath(), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == str(module == "core")


def test_both_steps_implement_the_interface():
    assert issubclass(StandardStep, TrainingStep) and issubclass(StaticStep, TrainingStep)
    assert GRU4Rec.STEP_IMPLS == STEP_IMPLS == ("auto", "standard", "static")
    assert (StandardStep.name, StaticStep.name) == ("standard", "static")
