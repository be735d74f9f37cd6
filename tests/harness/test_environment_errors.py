"""An exception that says the environment is wrong (a missing module, a module of another version) is reported as an
environment error naming the tox environment to use: not a check failure, not a defect, and never CONFORMANT."""

from __future__ import annotations

import pytest

from gru4rec_conformance.conformance._harness import environment
from gru4rec_conformance.conformance._harness.isolation import stack_dump
from gru4rec_conformance.conformance._records import verdict

ENV_DUMMIES = """
import types

from dummies import Good


def _old_numpy_call():
    fake = types.ModuleType("numpy")  # a numpy without in1d, as numpy 2.4 is for code written for numpy 1
    return fake.in1d


class NumpyTooNew(Good):
    name = "recpack"  # so that the message names recpack's tox environment
    isolated = True

    def fit(self, train_df, n_epochs=None):
        return _old_numpy_call()


class NoRecbole(Good):
    name = "recbole"

    def fit(self, train_df, n_epochs=None):
        import recbole_is_not_installed_here  # noqa: F401


class OwnWorkerLacksModule(Good):
    # an adapter that runs the code in an interpreter of its own, as the fine-tuner's third-party adapters do
    name = "own_worker"

    def fit(self, train_df, n_epochs=None):
        from gru4rec_conformance.implementations.base import RemoteException

        raise RemoteException("own_worker: the code failed: ModuleNotFoundError: No module named 'pytreebank'",
                              "ModuleNotFoundError", "No module named 'pytreebank'", how="set OWN_PYTHON to ...")


class OwnWorkerFails(Good):
    name = "own_worker_fails"

    def fit(self, train_df, n_epochs=None):
        from gru4rec_conformance.implementations.base import RemoteException

        raise RemoteException("own_worker_fails: the code failed: ValueError: bad shape", "ValueError", "bad shape")
"""

FIT = """
@pytest.mark.check("E-1", kind="K10")
def test_fit(impl):
    '''Fitting completes.'''
    impl.build().fit(TRAIN)

@pytest.mark.check("E-2", kind="K10")
def test_attribute_error_of_the_check_itself(impl):
    '''A bug of a check stays a failure.'''
    import types
    types.ModuleType("numpy").in1d

@pytest.mark.check("E-3", kind="K10")
def test_fit_wrapped(impl):
    '''A check that reports any exception of the call in words of its own.'''
    try:
        impl.build().fit(TRAIN)
    except Exception as e:
        pytest.fail(f"fit broke its contract: {e}")
"""


@pytest.mark.parametrize(
    "type_name,text,expected",
    [
        ("AttributeError", "module 'numpy' has no attribute 'in1d'", "the installed numpy is not the version"),
        ("ModuleNotFoundError", "No module named 'recbole'", "missing or broken"),
        ("ImportError", "cannot import name 'x' from 'scipy.sparse'", "missing or broken"),
        ("AttributeError", "'NoneType' object has no attribute 'fit'", None),
        ("AttributeError", "module 'gru4rec_conformance.datasets' has no attribute 'x'", None),
        ("ModuleNotFoundError", "No module named 'gru4rec_conformance.nothing'", None),
        ("ValueError", "module 'numpy' has no attribute 'in1d'", None),
    ],
)
def test_what_counts_as_an_environment_problem(type_name, text, expected):
    got = environment.environment_problem(type_name, text)
    assert (got is None) if expected is None else (expected in got), got


def test_the_tox_environment_is_read_from_tox_ini():
    assert environment.tox_env_for("recpack:neg_sampling") == "recpack"
    assert environment.tox_env_for("gru4rec_pytorch:oob") == "gru4rec_pytorch"
    assert environment.tox_env_for("no_such_impl") is None
    text = environment.message("recbole", "ModuleNotFoundError: No module named 'recbole'")
    assert text.startswith(environment.ENVIRONMENT_PREFIX) and "`tox -e recbole`" in text


def test_environment_errors_are_not_tested_not_defects_and_fail_the_gate(project):
    project.pytester.makepyfile(envdummies=ENV_DUMMIES)
    project.checks(FIT)
    result = project.run(
        "conformance",
        "--impl",
        "envdummies:NumpyTooNew",
        "--impl",
        "envdummies:NoRecbole",
        "--gate",
        "--isolation",
        "always",
    )
    result.assert_outcomes(skipped=4, failed=2)
    for impl, tox in (("recpack", "`tox -e recpack`"), ("recbole", "`tox -e recbole`")):
        run = project.results(impl)
        records = {r["test"].split("[")[0]: r for r in run["results"]}
        fit = records["test_fit"]
        assert fit["outcome"] == "skipped" and fit["outcome_detail"] == "environment", fit
        assert fit["reason"].startswith(environment.ENVIRONMENT_PREFIX) and tox in fit["reason"], fit["reason"]
        assert ("in1d" if impl == "recpack" else "recbole_is_not_installed_here") in fit["reason"], fit["reason"]
        assert records["test_attribute_error_of_the_check_itself"]["outcome"] == "failed"
        assert records["test_fit_wrapped"]["outcome_detail"] == "environment", records["test_fit_wrapped"]
        conf = run["conformance"]
        assert conf["status"] == verdict.NOT_CONFORMANT and conf["coverage"]["ran"] == 1, conf
        assert conf["coverage"]["other_not_run"] == {f"not run: environment error (run {tox})": 2}, conf
    result.stdout.fnmatch_lines(["*GATE FAILED*environment error*"])


def test_an_environment_error_in_a_process_of_the_adapter_is_one_too(project):
    """A missing module in an interpreter the adapter runs itself (RemoteException) is an environment error with the
    adapter's set-up advice; another remote exception stays a failure of the check."""
    project.pytester.makepyfile(envdummies=ENV_DUMMIES)
    project.checks(FIT)
    result = project.run("conformance", "--impl", "envdummies:OwnWorkerLacksModule", "-k", "test_fit")
    result.assert_outcomes(skipped=2)  # also through the check that wraps the exception in its own pytest.fail
    for fit in project.results("own_worker")["results"]:
        assert fit["outcome"] == "skipped" and fit["outcome_detail"] == "environment", fit
        assert "pytreebank" in fit["reason"] and "set OWN_PYTHON to" in fit["reason"], fit["reason"]
    result = project.run("conformance", "--impl", "envdummies:OwnWorkerFails", "-k", "test_fit")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*ValueError: bad shape*"])


@pytest.mark.parametrize(
    "line,expected",
    [
        ("ModuleNotFoundError: No module named 'x'", ("ModuleNotFoundError", "No module named 'x'")),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory", ("OutOfMemoryError", "CUDA out of memory")),
        ("KeyboardInterrupt", ("", "KeyboardInterrupt")),
        ('  File "a.py", line 1', ("", '  File "a.py", line 1')),
    ],
)
def test_remote_exception_splits_the_last_traceback_line(line, expected):
    from gru4rec_conformance.implementations.base import RemoteException

    assert RemoteException.split(line) == expected


def test_an_environment_error_alone_gives_incomplete():
    header = {"impl": {"name": "x"}, "command": []}
    rec = {"nodeid": "conformance/gru4rec/t.py::test_fit[x]", "impl": "x", "outcome": "skipped",
           "outcome_detail": "environment", "check": {"id": "E-1", "kind": "K10"},
           "reason": "environment error: ...; run it in its own environment: `tox -e x`"}  # fmt: skip
    conf = verdict.assess(header, [rec], {"status": "complete", "not_run": {}})
    assert conf.status == verdict.INCOMPLETE and conf.coverage.not_tested == 1 and not conf.defects
    assert "environment error (run `tox -e x`)" in conf.line("x")


def test_stack_dump_is_the_last_faulthandler_dump():
    text = 'noise\nTimeout (0:00:01)!\nThread 0x1 (most recent call first):\n  File "a.py", line 1 in f\n'
    text += 'more\nTimeout (0:00:02.500000)!\nThread 0x2 (most recent call first):\n  File "b.py", line 2 in g\n'
    assert stack_dump(text).startswith("Timeout (0:00:02.500000)!") and "in g" in stack_dump(text)
    assert stack_dump("no dump here") == ""
    assert stack_dump(text, limit=20).endswith("[... stack dump cut]")
