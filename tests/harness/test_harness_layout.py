"""The harness's layout and its records: hooks gathered in the plugin module (the import layers between the
folders are tests/test_import_layers.py's), results.json valid against the versioned JSON Schema, unavailable/unsupported as record fields."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import jsonschema

from gru4rec_conformance.conformance._harness import (
    collection,
    fixtures,
    gate,
    options,
    plugin,
    reporting,
    running,
    session,
)
from gru4rec_conformance.conformance._records.records import (
    OUTCOMES,
    RESULTS_SCHEMA_PATH,
    RESULTS_SCHEMA_VERSION,
    SCHEMA,
    record_unavailable,
)

HARNESS = Path(plugin.__file__).resolve().parent
HOOK_MODULES = (collection, fixtures, gate, options, reporting, running, session)


def test_every_hook_and_fixture_of_the_harness_modules_is_in_the_plugin_namespace():
    """pytest collects hooks and fixtures from the plugin module's namespace: a hook defined in a module but not
    imported into plugin.py would silently never run; two modules implementing one hook could not both be."""
    seen: dict[str, str] = {}
    for module in HOOK_MODULES:
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != module.__name__:
                continue  # imported from elsewhere
            is_hook = name.startswith("pytest_") and inspect.isfunction(obj)
            is_fixture = type(obj).__name__ == "FixtureFunctionDefinition"
            if not (is_hook or is_fixture):
                continue
            assert name not in seen, f"{name} is defined in {seen[name]} and {module.__name__}"
            seen[name] = module.__name__
            assert getattr(plugin, name, None) is obj, f"plugin.py does not import {module.__name__}.{name}"
    assert {
        "pytest_configure",
        "pytest_collection_modifyitems",
        "pytest_runtest_setup",
        "pytest_sessionfinish",
        "impl",
        "reference_impl",
        "record_metric",
        "expect",
        "conformance_options",
    } <= set(seen)
    assert set(plugin.__all__) >= set(seen) | {"pytest_addhooks"}


def test_the_schema_file_is_a_versioned_draft_2020_12_schema():
    schema = json.loads(RESULTS_SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"].endswith(f"/results-{RESULTS_SCHEMA_VERSION}.schema.json")
    assert schema["properties"]["schema_version"] == {
        "const": RESULTS_SCHEMA_VERSION,
        "description": "version of this JSON Schema",
    }
    assert schema["properties"]["schema"]["const"] == SCHEMA
    assert RESULTS_SCHEMA_VERSION.split(".")[0] == str(SCHEMA)
    assert schema["$defs"]["outcome"]["enum"] == list(OUTCOMES)


CHECKS = '''
@pytest.mark.check("S-1", kind="K1")
def test_pass(impl, record_metric):
    """Passes, with metrics (one NaN)."""
    record_metric("recall@20", 0.61, reference=0.62, tolerance=0.02, rule="2 sd", dataset="d", seed=1)
    record_metric("loss", float("nan"), reference=1.0)

@pytest.mark.check("S-2", kind="K2")
def test_fail(impl):
    """Fails."""
    assert False, "deviation"

@pytest.mark.check("S-3", kind="K3")
@pytest.mark.feature("logq")
def test_unsupported(impl):
    """Needs logq."""

@pytest.mark.check("S-4", kind="K8")
def test_skip_other(impl):
    """Skips for another reason."""
    pytest.skip("dataset not available at /nowhere")

@pytest.mark.check("S-5", kind="K1")
def test_known(impl):
    """Fails as declared."""
    assert False, "known"

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

@pytest.mark.check("S-6", kind="K10")
def test_error(impl, broken):
    """Errors in setup."""
'''

XFAILS = """
implementation = "good"

[[xfail]]
id = "conformance/gru4rec/test_checks.py::test_known"
reason = "declared"
kind = "bug"
link = "none"
"""


def _validate(data: dict) -> None:
    schema = json.loads(RESULTS_SCHEMA_PATH.read_text(encoding="utf-8"))
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])


def test_results_json_of_a_run_validates_against_the_schema(project):
    project.checks(CHECKS)
    project.xfails("good", XFAILS)
    project.run("conformance", "--impl", "good", "--gate").assert_outcomes(passed=1, failed=1, skipped=2, errors=1,
                                                                           xfailed=1)  # fmt: skip
    data = project.results("good")
    _validate(data)
    assert data["schema_version"] == RESULTS_SCHEMA_VERSION and data["end"]["gate"]["passed"] is False
    by_test = {r["test"]: r for r in data["results"]}
    assert {t: (r["outcome"], r["outcome_detail"], r["unavailable"]) for t, r in by_test.items()} == {
        "test_pass[good]": ("passed", None, None),
        "test_fail[good]": ("failed", None, None),
        "test_unsupported[good]": ("skipped-unsupported", "unsupported", None),
        "test_skip_other[good]": ("skipped", None, None),
        "test_known[good]": ("xfail", None, None),
        "test_error[good]": ("error", None, None),
    }
    assert by_test["test_pass[good]"]["metrics"][1]["nan"] is True


def test_unavailable_is_a_record_field_and_old_records_are_read_from_the_reason(project):
    project.checks(CHECKS)
    project.run("conformance", "--impl", "missing", "-k", "test_pass or test_fail").assert_outcomes(skipped=2)
    data = project.results("missing")
    _validate(data)
    why = "set MISSING_PATH to a checkout of example/missing@abc123"
    for record in data["results"]:
        assert (record["outcome"], record["outcome_detail"], record["unavailable"]) == ("skipped", "unavailable", why)
        assert record_unavailable(record) == why
        # the field decides, not the reason text
        assert record_unavailable({**record, "reason": "anything"}) == why
        assert record_unavailable({**record, "outcome_detail": None}) is None
        # LEGACY: a record written before schema 1.1 has no outcome_detail; its reason text is parsed
        legacy = {k: v for k, v in record.items() if k not in ("outcome_detail", "unavailable")}
        assert record_unavailable(legacy) == why
        assert record_unavailable({**legacy, "outcome": "passed"}) is None


def test_markers_are_registered_by_the_plugin_only(pytestconfig):
    """One marker list (options.MARKERS): pyproject.toml has none, and this very run of tests/ (--strict-markers)
    knows them because the root conftest loads the plugin."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    pyproject = tomllib.loads((HARNESS.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert "markers" not in pyproject["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in pyproject["tool"]["pytest"]["ini_options"]["addopts"]
    registered = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in pytestconfig.getini("markers")}
    assert set(options.MARKERS) <= registered
