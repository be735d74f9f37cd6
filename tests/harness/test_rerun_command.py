"""Every failure line in the terminal and in summary.md ends with the one command that reruns just that check,
built from the run's own ``--impl`` and the options that change how it measures (``verdict.rerun_command``)."""

from __future__ import annotations

import shlex

import pytest

from gru4rec_conformance.conformance._records.verdict import rerun_command

NODE = "conformance/gru4rec/test_k1.py::test_sr1[yours]"


def test_rerun_command_keeps_impl_and_measuring_options_and_drops_selection_and_parallelism():
    command = ["pytest", "--pyargs", "gru4rec_conformance.conformance", "--impl", "yourpkg.conformance:YourAdapter",
               "--gate", "-k", "sr or lf", "-n", "2", "--device", "cpu", "--call-timeout=60", "-x",
               "--xfails", "my xfails.toml", "-pno:cacheprovider", "--junitxml", "out.xml", "--resume", "r/1"]  # fmt: skip
    assert rerun_command(command, NODE, "yours") == (
        f"pytest '{NODE}' --impl yourpkg.conformance:YourAdapter --device cpu --call-timeout=60 "
        "--xfails 'my xfails.toml' -pno:cacheprovider"
    )
    # --impl all or a list: the implementation of the failed check only
    assert rerun_command(["pytest", "--impl=all,cornac", "--dataset", "x"], NODE, "cornac") == (
        f"pytest '{NODE}' --impl cornac --dataset x"
    )
    assert rerun_command(["pytest"], NODE, "yours") == f"pytest '{NODE}' --impl yours"


CHECKS = '''
@pytest.mark.check("Q-1", kind="K1")
def test_pass(impl):
    """passes"""


@pytest.mark.check("Q-2", kind="K2")
def test_fail(impl):
    """fails"""
    assert False, "recall@20 is off"


@pytest.mark.check("Q-3", kind="K3")
def test_fail_too(impl):
    """fails too"""
    assert False, "mrr@20 is off"
'''


def test_failure_lines_end_with_a_command_that_reruns_just_that_check(project):
    project.checks(CHECKS)
    result = project.run("conformance", "--impl", "good", "--call-timeout", "120", "-k", "fail")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    node = "conformance/gru4rec/test_checks.py::test_fail[good]"
    lines = [ln for ln in result.outlines if ln.startswith("FAILED Q-")]
    assert len(lines) == 2, result.outlines
    assert lines[0].startswith(f"FAILED Q-2 {node}: AssertionError: recall@20 is off — rerun: pytest '{node}' ")
    command = lines[0].split(" — rerun: ", 1)[1]
    args = shlex.split(command)
    assert args[:4] == ["pytest", node, "--impl", "good"] and "--call-timeout" in args and "-k" not in args
    md = (project.run_dirs("good")[-1] / "summary.md").read_text()
    assert f"AssertionError: recall@20 is off — rerun: `{command}`" in md
    # the command reruns that check and nothing else
    again = project.run(*args[1:])
    again.assert_outcomes(failed=1)
