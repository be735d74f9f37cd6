"""The strict xfail registry: file format, matching, strictness, unmatched entries, the reference rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from gru4rec_conformance.conformance._records.xfails import (
    XfailRegistryError,
    check_key_forms,
    is_check_id_pattern,
    load_xfail_file,
    pattern_matches,
    strip_dataset_param,
    strip_impl_param,
)  # fmt: skip

CHECKS = '''
@pytest.mark.check("X-1", kind="K1")
def test_fails(impl):
    """A check that fails on every implementation."""
    assert False, "deviation found"

@pytest.mark.check("X-2", kind="K1")
def test_passes(impl):
    """A check that passes."""

@pytest.mark.check("X-3", kind="K2")
@pytest.mark.parametrize("loss", ["cross-entropy", "bpr-max"])
def test_param(impl, loss):
    """Fails for bpr-max only."""
    assert loss != "bpr-max"
'''


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "x.toml"
    path.write_text(body)
    return path


def test_file_format_errors_name_file_entry_and_key(tmp_path):
    entry = 'implementation = "good"\n[[xfail]]\nid = "a"\nreason = "r"\nkind = "bug"\nlink = "none"\n'
    assert load_xfail_file(_write(tmp_path, entry), "good").entries[0].pattern == "a"
    cases = {
        entry + 'colour = "red"\n': r"x.toml: entry 1: unknown key\(s\) \['colour'\]",
        entry.replace('kind = "bug"', 'kind = "typo"'): r"entry 1: kind 'typo' is not one of",
        entry.replace('reason = "r"\n', ""): r"entry 1: 'reason' is required",
        entry + 'fix_level = "LATER"\n': r"fix_level 'LATER' is not one of",
        entry + '[xfail.when]\nnumpy = "two"\n': r"when.numpy = 'two' is not a version specifier",
        entry.replace('"good"', '"other"'): r"file is for implementation 'other', not 'good'",
        "xfail = 3\n": r"'xfail' must be an array of tables",
        "[[xfail\n": r"not valid TOML",
    }
    for body, message in cases.items():
        with pytest.raises(XfailRegistryError, match=message):
            load_xfail_file(_write(tmp_path, body), "good")


def test_pattern_matching_and_impl_parameter_stripping():
    nodeid = "conformance/gru4rec/test_k2.py::test_lf1[recpack-bpr-max]"
    assert strip_impl_param(nodeid, "recpack") == "conformance/gru4rec/test_k2.py::test_lf1[bpr-max]"
    assert strip_impl_param("f.py::t[a-recpack]", "recpack") == "f.py::t[a]"
    assert strip_impl_param("f.py::t[recpack]", "recpack") == "f.py::t"
    stripped = strip_impl_param(nodeid, "recpack")
    assert pattern_matches("conformance/gru4rec/test_k2.py::test_lf1[bpr-max]", stripped)  # brackets literal
    assert pattern_matches("conformance/gru4rec/test_k2.py::test_lf1", stripped)  # prefix up to '['
    assert pattern_matches("conformance/gru4rec/test_k2.py", stripped)  # whole file
    assert pattern_matches("*::test_lf?[[]bpr*", "x::test_lf1[[]bpr-max]")  # '[' is literal in patterns
    assert not pattern_matches("*::test_lf?[[]bpr*", "x::test_lf1[bpr-max]")
    assert pattern_matches("*test_lf*", stripped)
    assert not pattern_matches("conformance/gru4rec/test_k2.py::test_lf", stripped)  # no partial names
    assert not pattern_matches("conformance/gru4rec/test_k2.py::test_lf1[cross-entropy]", stripped)


def test_dataset_parameter_stripping():
    assert strip_dataset_param("f.py::t[rees46-cross-entropy]", "rees46") == "f.py::t[cross-entropy]"
    assert strip_dataset_param("f.py::t[bpr-max-1-epoch-coveo]", "coveo") == "f.py::t[bpr-max-1-epoch]"
    assert strip_dataset_param("f.py::t[coveo]", "coveo") == "f.py::t"
    assert strip_dataset_param("f.py::t[cross-entropy]", "coveo") == "f.py::t[cross-entropy]"
    assert strip_dataset_param("f.py::t[rees46x-cross-entropy]", "rees46") == "f.py::t[rees46x-cross-entropy]"


MATRIX_CHECKS = '''
@pytest.fixture(scope="session")
def metric_data(request):
    return request.param

@pytest.mark.check("X-9", kind="metric")
@pytest.mark.parametrize("metric_data", ["rees46", "coveo=/some/folder"], indirect=True, ids=["rees46", "coveo"])
@pytest.mark.parametrize("loss", ["cross-entropy", "bpr-max"])
def test_mc(impl, metric_data, loss):
    """Fails for cross-entropy on every dataset, and for bpr-max on Coveo only."""
    assert loss == "bpr-max" and metric_data == "rees46"
'''


def test_an_entry_without_a_dataset_holds_on_every_metric_dataset(project):
    """`--dataset all` adds the dataset to the metric checks' ids: an entry written for the check (no dataset)
    marks it on every dataset, strictly; an entry naming a dataset marks that one only."""
    project.checks(MATRIX_CHECKS, name="test_m")
    project.xfails(
        "good",
        """
        implementation = "good"

        [[xfail]]
        id = "conformance/gru4rec/test_m.py::test_mc[cross-entropy]"
        reason = "cross-entropy crashes"
        kind = "bug"
        link = "none"

        [[xfail]]
        id = "conformance/gru4rec/test_m.py::test_mc[bpr-max-coveo]"
        reason = "bpr-max on Coveo"
        kind = "numerical"
        link = "none"
    """,
    )
    project.run("conformance", "--impl", "good", "-rxX")
    outcomes = {k: v for k, v in project.outcomes("good").items() if k.startswith("test_mc")}
    assert sorted(v for v in outcomes.values()) == ["passed", "xfail", "xfail", "xfail"], outcomes
    assert [k for k, v in outcomes.items() if v == "passed"] == [
        next(k for k in outcomes if "rees46" in k and "bpr-max" in k)
    ]


ONE_DATASET_CHECKS = '''
@pytest.fixture(scope="session")
def metric_data():
    return "one dataset"

@pytest.mark.check("X-9", kind="metric")
@pytest.mark.parametrize("loss", ["cross-entropy", "bpr-max"])
def test_mc(impl, metric_data, loss):
    """Fails for bpr-max."""
    assert loss == "cross-entropy"
'''


@pytest.mark.parametrize(("dataset", "bpr_max"), [(None, "xfail"), ("yoochoose", "xfail"), ("rees46", "failed")])
def test_an_entry_naming_the_dataset_of_a_one_dataset_run_holds_there(project, dataset, bpr_max):
    """A run on one dataset keeps the metric checks' ids free of it; an entry naming that dataset
    (`[yoochoose-bpr-max]`, a gap measured on Yoochoose only) holds there as it does under `--dataset all`
    (the default run is Yoochoose's), and is out of scope in a run on another dataset."""
    project.checks(ONE_DATASET_CHECKS, name="test_m")
    project.xfails(
        "good",
        """
        implementation = "good"

        [[xfail]]
        id = "conformance/gru4rec/test_m.py::test_mc[yoochoose-bpr-max]"
        reason = "bpr-max on Yoochoose"
        kind = "bug"
        link = "none"
    """,
    )
    project.run("conformance", "--impl", "good", *(("--dataset", dataset) if dataset else ()))
    outcomes = project.outcomes("good")
    assert not [k for k in outcomes if k.startswith("entry-")], outcomes
    assert outcomes["test_mc[good-cross-entropy]"] == "passed", outcomes
    assert outcomes["test_mc[good-bpr-max]"] == bpr_max, outcomes


def test_an_entry_for_one_dataset_is_out_of_scope_in_a_run_without_it(project):
    """An entry naming a metric dataset (`[rees46-...]`) matches nothing in a run on the default dataset: it is
    out of scope there, not a stale entry; an entry naming no dataset that matches nothing stays an error."""
    project.checks(CHECKS, name="test_x")
    project.xfails(
        "good",
        """
        implementation = "good"

        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_param[rees46-bpr-max*]"
        reason = "only on the Rees46 stand-in"
        kind = "bug"
        link = "none"

        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_param[nowhere-bpr-max]"
        reason = "a typo"
        kind = "bug"
        link = "none"
    """,
    )
    project.run("conformance", "--impl", "good")
    outcomes = project.outcomes("good")
    assert outcomes["entry-2[good]"] == "error" and "entry-1[good]" not in outcomes, outcomes


def test_strict_xfail_xpass_and_unmatched_entries(project):
    project.checks(CHECKS, name="test_x")
    project.xfails(
        "good",
        """
        implementation = "good"

        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_fails"
        reason = "known deviation"
        kind = "bug"
        link = "https://example.org/issue/1"
        defect = "GP-1"
        fix_level = "INF"

        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_passes"
        reason = "claimed to fail but passes"
        kind = "numerical"
        link = "none"

        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_param[bpr-max]"
        reason = "bpr-max differs"
        kind = "design-difference"
        link = "none"

        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_renamed"
        reason = "stale entry"
        kind = "bug"
        link = "none"

        [[xfail]]
        id = "conformance/gru4rec/test_gone.py::test_a"
        reason = "file was removed"
        kind = "bug"
        link = "none"
    """,
    )
    result = project.run("conformance", "--impl", "good", "-rxX")
    result.assert_outcomes(passed=1, xfailed=2, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*entry 4 (id = 'conformance/gru4rec/test_x.py::test_renamed') matches no collected check of good*",
            "*entry 5 (id = 'conformance/gru4rec/test_gone.py::test_a') names no existing test file*",
            "*[[]XPASS(strict)[]] [[]numerical[]] claimed to fail but passes (none)*",
        ]
    )
    outcomes = project.outcomes("good")
    assert outcomes["test_fails[good]"] == "xfail"
    assert outcomes["test_passes[good]"] == "xpass"
    assert outcomes["test_param[good-cross-entropy]"] == "passed"
    assert outcomes["test_param[good-bpr-max]"] == "xfail"
    assert outcomes["entry-4[good]"] == outcomes["entry-5[good]"] == "error"
    results = {r["test"]: r for r in project.results("good")["results"]}
    assert results["test_fails[good]"]["xfail"]["defect"] == "GP-1"
    # an xfail records the measured failure (the entry's reason stays under "xfail")
    assert "deviation found" in results["test_fails[good]"]["reason"]
    assert "deviation found" in results["test_fails[good]"]["details"]
    assert results["test_fails[good]"]["xfail"]["reason"] == "known deviation"


def test_check_id_keys_are_told_from_node_id_patterns():
    for key in ("SR-3", "SR-3[bpr-max]", "MC-*[cross-entropy]", "FT-20", "X-3[*]"):
        assert is_check_id_pattern(key), key
    for key in ("conformance/gru4rec/test_x.py::test_fails", "test_mc*[cross-entropy]", "*test_lf*",
                "conformance/gru4rec/test_x.py", "SR-3::x", "sr-3"):  # fmt: skip
        assert not is_check_id_pattern(key), key
    node = "conformance/gru4rec/test_x.py::test_param[bpr-max]"
    assert check_key_forms("X-3", [node, "conformance/gru4rec/test_x.py::test_param"]) == ("X-3[bpr-max]", "X-3")
    assert check_key_forms(None, [node]) == ()
    assert pattern_matches("X-3", "X-3[bpr-max]") and not pattern_matches("X-3", "X-30[bpr-max]")


CHECK_ID_TWIN = '''
@pytest.mark.check("X-3", kind="K2")
def test_param_twin(impl):
    """A second test of check X-3 (a check id covers every test that carries it)."""
    assert False, "twin fails"
'''
CHECK_ID_CHECKS = CHECKS + CHECK_ID_TWIN


def test_entries_may_name_a_check_id_with_an_optional_parameter(project):
    """`X-3[bpr-max]` resolves to the X-3 test with that parameter, `X-1` to every test of X-1, `X-3` alone would
    cover both X-3 tests; node-id keys keep working beside them. A check id no test carries, or a parameter no
    test of the check has, is an unmatched entry (a failing item) when the whole folder was collected."""
    project.checks(CHECK_ID_CHECKS, name="test_x")
    project.xfails(
        "good",
        """
        implementation = "good"

        [[xfail]]
        id = "X-1"
        reason = "known deviation"
        kind = "bug"
        link = "none"

        [[xfail]]
        id = "X-3[bpr-max]"
        reason = "bpr-max differs"
        kind = "design-difference"
        link = "none"

        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_param_twin"
        reason = "a node-id key beside check-id keys"
        kind = "bug"
        link = "none"

        [[xfail]]
        id = "X-77"
        reason = "no such check"
        kind = "bug"
        link = "none"

        [[xfail]]
        id = "X-1[bpr-max]"
        reason = "no such parameter"
        kind = "bug"
        link = "none"
    """,
    )
    result = project.run("conformance", "--impl", "good", "-rxX")
    result.assert_outcomes(passed=2, xfailed=3, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "*entry 4 (id = 'X-77') names no check of the collected folders*",
            "*entry 5 (id = 'X-1[[]bpr-max[]]') matches no collected test of its check*",
        ]
    )
    outcomes = project.outcomes("good")
    assert outcomes["test_fails[good]"] == outcomes["test_param_twin[good]"] == "xfail"
    assert outcomes["test_param[good-bpr-max]"] == "xfail"
    assert outcomes["test_param[good-cross-entropy]"] == outcomes["test_passes[good]"] == "passed"
    results = {r["test"]: r for r in project.results("good")["results"]}
    assert results["test_fails[good]"]["xfail"]["pattern"] == "X-1"
    assert results["test_param[good-bpr-max]"]["xfail"]["pattern"] == "X-3[bpr-max]"


def test_a_check_id_key_covers_every_test_of_the_check_and_is_out_of_scope_when_not_collected(project):
    project.checks(CHECK_ID_CHECKS, name="test_x")
    body = """
        implementation = "good"

        [[xfail]]
        id = "X-3"
        reason = "both X-3 tests, all parameters"
        kind = "bug"
        link = "none"

        [[xfail]]
        id = "X-1"
        reason = "not in the selection"
        kind = "bug"
        link = "none"
    """
    project.xfails("good", body)
    result = project.run("conformance", "--impl", "good", "-rxX")
    # X-3's cross-entropy case passes although X-3 is declared as a whole: strict, it XPASSes
    result.assert_outcomes(passed=1, xfailed=3, failed=1)
    assert project.outcomes("good")["test_param[good-cross-entropy]"] == "xpass"
    result = project.run("conformance/gru4rec/test_x.py::test_passes", "--impl", "good")
    result.assert_outcomes(passed=1)  # not collected: out of scope, not unmatched


def test_selecting_one_check_does_not_flag_entries_outside_the_selection(project):
    project.checks(CHECKS, name="test_x")
    project.xfails(
        "good",
        """
        implementation = "good"
        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_fails"
        reason = "known deviation"
        kind = "bug"
        link = "none"
    """,
    )
    result = project.run("conformance/gru4rec/test_x.py::test_passes", "--impl", "good")
    result.assert_outcomes(passed=1)
    result = project.run("conformance", "--impl", "good", "-k", "test_passes")  # -k runs after matching
    result.assert_outcomes(passed=1, deselected=3)


def test_xfail_mark_skip_when_conditions_and_reference_rule(project):
    project.checks(CHECKS, name="test_x")
    body = """
        implementation = "{impl}"
        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_fails"
        reason = "only on GPUs"
        kind = "numerical"
        link = "none"
        [xfail.when]
        device = "cuda"

        [[xfail]]
        id = "conformance/gru4rec/test_x.py::test_param[bpr-max]"
        reason = "old numpy only"
        kind = "bug"
        link = "none"
        [xfail.when]
        numpy = ">=1,<1.27"
    """
    project.xfails("good", body.format(impl="good"))
    result = project.run("conformance", "--impl", "good")
    result.assert_outcomes(passed=2, failed=2)  # neither entry is active on CPU with numpy 2
    project.xfails("good", body.format(impl="good").replace('device = "cuda"', 'device = "cpu"'))
    result = project.run("conformance", "--impl", "good", "--xfail-mark=skip")
    result.assert_outcomes(passed=2, skipped=1, failed=1)
    result = project.run("conformance", "--impl", "good", "--gate", "--xfail-mark=skip")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    project.xfails("reference", body.format(impl="reference"))
    result = project.run("conformance", "--impl", "reference")
    result.stdout.fnmatch_lines(["*entry 1 (id = *): the reference must have zero xfail entries*"])
    assert project.outcomes("reference")["entry-1[reference]"] == "error"


def test_outside_xfail_file_and_malformed_file(project, tmp_path):
    project.checks(CHECKS, name="test_x")
    outside = tmp_path / "my_xfails.toml"
    outside.write_text(
        'implementation = "outside"\n[[xfail]]\nid = "conformance/gru4rec/test_x.py::test_fails"\n'
        'reason = "ours"\nkind = "bug"\nlink = "none"\n'
    )
    result = project.run("conformance", "--impl", "dummies:Outside", "--xfails", str(outside))
    result.assert_outcomes(passed=2, xfailed=1, failed=1)
    project.xfails("good", 'implementation = "good"\n[[xfail]]\nid = "x"\n')
    result = project.run("conformance", "--impl", "good")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "good.toml: entry 1: 'reason' is required" in result.stderr.str()


WAYS_CHECKS = '''
@pytest.mark.check("X-7", kind="metric")
@pytest.mark.parametrize("way", ["gap", "crash"])
def test_way(impl, way):
    """Fails as a measured gap (an assertion) or as a crash (the implementation raised)."""
    if way == "crash":
        raise RuntimeError("evaluate() raised: predict batch size must match the train batch size")
    assert False, "recall@20 0.10 outside the band 0.50 +- 0.01"
'''


def test_fails_as_holds_only_the_declared_way_of_failing(project):
    """An entry with fails_as = "assertion" (a metric gap) does not hold a crash, which is then reported as the
    failure it is, naming the entry; "crash" holds a crash; with both entries matching, the one of the right way
    is recorded. A bad fails_as is a file error."""
    project.checks(WAYS_CHECKS, name="test_w")
    project.xfails(
        "good",
        """
        implementation = "good"

        [[xfail]]
        id = "conformance/gru4rec/test_w.py::test_way"
        reason = "a metric gap"
        kind = "bug"
        link = "none"
        fails_as = "assertion"
    """,
    )
    result = project.run("conformance", "--impl", "good", "-rxX")
    result.assert_outcomes(xfailed=1, failed=1)
    records = {r["test"]: r for r in project.results("good")["results"]}
    gap, crash = records["test_way[good-gap]"], records["test_way[good-crash]"]
    assert gap["outcome"] == "xfail" and gap["xfail"]["fails_as"] == "assertion", gap
    assert crash["outcome"] == "failed" and crash["xfail"] is None, crash
    assert crash["reason"].startswith("not the declared failure: the check failed as a crash"), crash["reason"]
    assert "fails_as = assertion" in crash["reason"] and "predict batch size" in crash["reason"], crash["reason"]

    project.xfails(
        "good",
        """
        implementation = "good"

        [[xfail]]
        id = "conformance/gru4rec/test_w.py::test_way"
        reason = "a metric gap"
        kind = "bug"
        link = "none"
        fails_as = "assertion"

        [[xfail]]
        id = "conformance/gru4rec/test_w.py::test_way[crash]"
        reason = "its evaluator refuses small test sets"
        kind = "bug"
        link = "none"
        fails_as = "crash"
    """,
    )
    result = project.run("conformance", "--impl", "good", "-rxX")
    result.assert_outcomes(xfailed=2)
    records = {r["test"]: r for r in project.results("good")["results"]}
    assert records["test_way[good-crash]"]["xfail"]["reason"] == "its evaluator refuses small test sets"
    assert records["test_way[good-gap]"]["xfail"]["reason"] == "a metric gap"


def test_fails_as_vocabulary(tmp_path):
    entry = 'implementation = "good"\n[[xfail]]\nid = "a"\nreason = "r"\nkind = "bug"\nlink = "none"\n'
    assert load_xfail_file(_write(tmp_path, entry + 'fails_as = "crash"\n'), "good").entries[0].fails_as == "crash"
    assert load_xfail_file(_write(tmp_path, entry), "good").entries[0].fails_as is None
    with pytest.raises(XfailRegistryError, match=r"entry 1: fails_as 'metric' is not one of \['assertion', 'crash'\]"):
        load_xfail_file(_write(tmp_path, entry + 'fails_as = "metric"\n'), "good")
