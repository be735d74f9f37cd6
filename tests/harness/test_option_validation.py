"""Options are validated when the session starts: one usage line naming the bad value (exit 4), a "did you
mean" where a close name exists, no run folder, whether or not a check reading the option is selected."""

from __future__ import annotations

import pytest
from test_selection import BASIC


def _usage_error(project, *args: str, env: dict[str, str] | None = None) -> str:
    project.checks(BASIC)
    result = project.run("conformance", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert not (project.path / "reports").exists(), "a usage error made a run folder"
    return result.stderr.str()


def test_mistyped_impl_suggests_the_close_name_and_counts_the_mutants(project):
    err = _usage_error(project, "--impl", "goood")
    first = err.strip().splitlines()[0]
    assert "--impl 'goood' is not a registered implementation; did you mean 'good'?" in first
    assert "good-mutant" not in err and "and 1 mutants" in err  # mutants counted, not listed
    assert len(err) < 800


def test_unknown_dataset_is_a_usage_error_without_a_metric_check(project):
    err = _usage_error(project, "--impl", "good", "--dataset", "rees64")
    assert "--dataset 'rees64': unknown dataset" in err and "did you mean 'rees46'?" in err
    assert len(err.strip().splitlines()) == 1


def test_dataset_folder_without_its_files_is_a_usage_error(project):
    (project.path / "prepared").mkdir()
    err = _usage_error(project, "--impl", "good", "--dataset", f"coveo={project.path / 'prepared'}")
    assert "lacks train_full.parquet, test.parquet" in err
    err = _usage_error(project, "--impl", "good", "--dataset", "coveo=/nonexistent/folder")
    assert "/nonexistent/folder is not a folder" in err


def test_report_dir_that_is_a_file_is_a_usage_error(project):
    (project.path / "afile").write_text("x")
    err = _usage_error(project, "--impl", "good", "--report-dir", str(project.path / "afile" / "out"))
    assert "--report-dir" in err and "is not a folder" in err and "INTERNALERROR" not in err


def test_xfails_file_for_an_unselected_implementation_is_a_usage_error(project):
    path = project.path / "mine.toml"
    path.write_text('implementation = "godo"\n')
    err = _usage_error(project, "--impl", "good", "--xfails", str(path))
    assert "its implementation 'godo' is not selected by --impl" in err and "did you mean 'good'?" in err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--device", "gpu"), "invalid choice: 'gpu'"),
        (("--call-timeout", "0"), "--call-timeout 0: the per-call timeout must be a positive number"),
        (("--call-timeout", "soon"), "invalid float value: 'soon'"),
        (("--xfails", "missing.toml"), "--xfails missing.toml"),
    ],
    ids=["device", "call-timeout-0", "call-timeout-text", "xfails-missing"],
)
def test_other_bad_values_are_usage_errors(project, args, fragment):
    assert fragment in _usage_error(project, "--impl", "good", *args)


def test_non_integer_worker_threads_env_is_a_usage_error(project, monkeypatch):
    monkeypatch.setenv("GRU4REC_WORKER_THREADS", "four")
    assert "--worker-threads: invalid int value: 'four'" in _usage_error(project, "--impl", "good")
