"""Selecting implementations: --impl, the env fallback, import paths, families, usage errors, the header."""

from __future__ import annotations

import os

import pytest

BASIC = '''
@pytest.mark.check("T-1", kind="K10")
def test_fit_and_score(impl):
    """A fresh model fits and scores one row per prefix."""
    model = impl.build(seed=3)
    model.fit(TRAIN)
    assert model.score_prefixes([[5], [6, 7]]).shape == (2, 3)
'''


def test_missing_impl_is_a_usage_error_listing_registered_names(project):
    project.checks(BASIC)
    result = project.run("conformance")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "need an implementation: pass --impl NAME" in err
    assert "gru4rec" in err and "good" in err and "mutants: good-mutant" in err
    assert "some.module:AdapterClass" in err


def test_unknown_impl_is_a_usage_error_listing_registered_names(project):
    project.checks(BASIC)
    result = project.run("conformance", "--impl", "nosuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--impl 'nosuch' is not a registered implementation" in err
    assert "good" in err and "toyfam" in err


def test_bad_import_path_names_the_module(project):
    project.checks(BASIC)
    result = project.run("conformance", "--impl", "no_such_module:Adapter")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot import module 'no_such_module'" in result.stderr.str()
    # the adapter's own package missing from sys.path (not a dependency of it) gets the PYTHONPATH=. hint
    assert "PYTHONPATH=. makes its packages importable" in result.stderr.str()
    project.pytester.makepyfile(needs_dep="import no_such_dependency\n")
    result = project.run("conformance", "--impl", "needs_dep:Adapter")
    assert "No module named 'no_such_dependency'" in result.stderr.str()
    assert "PYTHONPATH=." not in result.stderr.str()  # a missing dependency is not a path problem
    result = project.run("conformance", "--impl", "dummies:NotThere")
    assert "module 'dummies' has no attribute 'NotThere'" in result.stderr.str()


def test_the_imported_protocol_class_is_named_as_such(project):
    """``your_pkg.conformance:Adapter`` names the protocol class the template imports, not the user's adapter:
    the usage error says so and names the module's own adapter class (in-process and in the describe worker)."""
    project.checks(BASIC)
    project.pytester.makepyfile(
        theirs="from gru4rec_conformance.implementations.base import Adapter\n"
        "from dummies import Good\n\n\nclass Mine(Good):\n    name = 'mine'\n"
    )
    for extra in ((), ("--isolation", "never")):
        result = project.run("conformance", "--impl", "theirs:Adapter", *extra)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, extra
        err = result.stderr.str()
        assert "is the suite's protocol class gru4rec_conformance.implementations.base.Adapter" in err, err
        assert "--impl theirs:Mine" in err, err


def test_plugin_is_inert_for_tests_outside_conformance(project):
    project.pytester.makepyfile(test_plain="def test_x():\n    assert 1 + 1 == 2\n")
    result = project.run("test_plain.py")
    result.assert_outcomes(passed=1)
    assert not (project.path / "reports").exists()


def test_env_fallback_selects_the_implementation(project, monkeypatch):
    project.checks(BASIC)
    monkeypatch.setenv("GRU4REC_CONFORMANCE_IMPL", "good")
    result = project.run("conformance")
    result.assert_outcomes(passed=1)
    assert [r["impl"] for r in project.results("good")["results"]] == ["good"]


def test_outside_adapter_by_import_path_without_registration(project):
    project.checks(BASIC)
    result = project.run("conformance", "--impl", "dummies:Outside", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_fit_and_score?outside? PASSED*"])
    assert project.results("outside")["run"]["impl"]["source"] == "import path"


def test_repeatable_comma_separated_and_all(project):
    project.checks(BASIC)
    result = project.run("conformance", "--impl", "good,isolated", "--impl", "dummies:Outside", "-v")
    result.assert_outcomes(passed=3)
    result = project.run("conformance", "--impl", "all", "--co", "-q")
    out = result.stdout.str()
    # 'all' = reference + implementation roles of every family; never mutants or examples
    assert "[good]" in out and "[reference]" in out and "[crashing]" in out and "good-mutant" not in out


def test_family_parametrization_and_deselection_note(project):
    project.checks(BASIC)
    project.checks(
        '''
    @pytest.mark.check("TOY-1", kind="T1")
    def test_toy(impl):
        """The toy family's adapter echoes."""
        assert impl.new().predict(3) == 3
    ''',
        name="test_toy",
        family="toyfam",
    )
    result = project.run("conformance", "--impl", "toy", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*gru4rec checks not collected: no selected implementation of family gru4rec*"])
    # 'reference' selects the reference of every family
    result = project.run("conformance", "--impl", "reference", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_fit_and_score?reference? PASSED*", "*test_toy?reference? PASSED*"])


def test_unselected_family_is_not_even_imported(project):
    """A family's check modules may import heavy optional packages (the fine-tuner's import transformers): with
    no implementation of that family selected, its folder is not collected, so its modules are never imported."""
    project.checks(BASIC)
    project.checks(
        """
    import no_such_heavy_framework  # would fail at collection if this module were imported

    def test_never():
        pass
    """,
        name="test_heavy",
        family="toyfam",
    )
    result = project.run("conformance", "--impl", "good")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*toyfam checks not collected: no selected implementation of family toyfam*"])
    result = project.run("conformance", "--impl", "toy")
    assert result.ret != 0  # selected: collected, and its import error is reported
    result.stdout.fnmatch_lines(["*no_such_heavy_framework*"])


def test_check_outside_a_family_folder_is_an_error(project):
    project.pytester.makepyfile(
        **{
            "conformance/test_nofamily": '''
import pytest

@pytest.mark.check("X-1", kind="K1")
def test_x(impl):
    """no family folder"""
'''
        }
    )
    result = project.run("conformance", "--impl", "good")
    result.stdout.fnmatch_lines(["*cannot tell the family of this check*"])
    assert result.ret != 0


def test_report_header_names_impl_version_capabilities_suite_and_env(project, monkeypatch):
    project.checks(BASIC)
    for var in [v for v in os.environ if v.startswith("GRU4REC_")]:  # e.g. GRU4REC_SHARED_DATA of the caller
        monkeypatch.delenv(var)
    monkeypatch.setenv("GRU4REC_SOMETHING", "secret?")  # not on the allow-list: the name only
    monkeypatch.setenv("GRU4REC_ISOLATION", "never")  # a run setting: shown
    monkeypatch.setenv("DUMMY_VERSION", "7.1")
    result = project.run("conformance", "--impl", "good", "--seeds", "1,2", "--dataset", "yoochoose_100k")
    result.stdout.fnmatch_lines(
        [
            "conformance suite * device cpu * seeds 1,2 * dataset yoochoose_100k",
            "frameworks: python *numpy*",
            "implementation good [[]gru4rec, implementation[]] version 7.1 (numpy *); in-process",
            "  capabilities: device:cpu, loss:cross-entropy, embedding:none, session_parallel, in_batch_negatives, full_ranking, hook:optimizer_info",
            "  shims: scores padded to nothing (dummy)",
            "GRU4REC_* variables: GRU4REC_ISOLATION=never, GRU4REC_SOMETHING=<redacted>",
        ]
    )


def test_bad_seeds_is_a_usage_error(project):
    project.checks(BASIC)
    result = project.run("conformance", "--impl", "good", "--seeds", "1,x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--seeds '1,x': 'x' is not an integer" in result.stderr.str()


def test_impl_fixture_builds_fresh_models_with_hyperparameters_and_seeds(project):
    project.checks('''
    @pytest.mark.check("T-2", kind="K6")
    def test_factory(impl, conformance_options):
        """Each build is a fresh model; seeds default to --seeds."""
        a = impl.build(layers=[8])
        b = impl.build(seed=11, learning_rate=0.5)
        assert a is not b
        assert a.seed == conformance_options.seeds[0] == 5 and b.seed == 11
        assert a.hparams["layers"] == [8] and b.hparams["learning_rate"] == 0.5 and b.hparams["layers"] == [4]
        assert impl.supports("loss:cross-entropy", "hparam:layers", "hook:optimizer_info")
        assert not impl.supports("logq")
        assert impl.name == "good" and impl.family == "gru4rec" and impl.device == "cpu"
    ''')
    result = project.run("conformance", "--impl", "good", "--seeds", "5,6")
    result.assert_outcomes(passed=1)


def test_shared_values_are_made_once_per_implementation_and_session(project):
    project.checks('''
    CALLS = []

    def fitted(impl):
        CALLS.append(impl.name)
        model = impl.build(seed=1)
        model.fit(TRAIN)
        return model

    @pytest.mark.check("T-3", kind="K1")
    def test_one(impl):
        """uses the shared model"""
        assert impl.shared(("train", 1), fitted).score_prefixes([[5]]).shape == (1, 3)

    @pytest.mark.check("T-4", kind="K8")
    def test_two(impl):
        """uses it again: made once"""
        model = impl.shared(("train", 1), fitted)
        assert list(model.item_ids()) == [5, 6, 7]
        assert CALLS == [impl.name]

    def broken(impl):
        CALLS.append("broken")
        raise ValueError("fit exploded")

    @pytest.mark.check("T-5", kind="K7")
    @pytest.mark.parametrize("n", [1, 2])
    def test_failed_setup_is_not_repeated(impl, n):
        """a failed shared setup fails every check that needs it, once"""
        try:
            impl.shared("broken", broken)
        finally:
            assert CALLS.count("broken") == 1
    ''')
    result = project.run("conformance", "--impl", "isolated")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*ValueError: fit exploded*"])
