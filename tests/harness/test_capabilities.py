"""Capability declarations: validation of the closed vocabulary, the registry, and skipping by capability."""

from __future__ import annotations

import pytest

from gru4rec_conformance.implementations.base import Adapter, Capabilities, CapabilityError, FitReport, Unsupported
from gru4rec_conformance.implementations.registry import Registry, RegistryError, load_import_path
from gru4rec_conformance.implementations.template import TemplateAdapter


def test_capabilities_validate_the_closed_vocabulary():
    caps = Capabilities.from_mapping({"losses": ["bpr-max"], "bpreg": True, "logq": False}, source="X")
    assert caps.declares("loss:bpr-max") and caps.declares("bpreg") and not caps.declares("loss:top1")
    assert caps.features()["embedding:shared"] is False
    with pytest.raises(CapabilityError, match=r"X: unknown capability field\(s\) \['logg'\]"):
        Capabilities.from_mapping({"logg": True}, source="X")
    with pytest.raises(CapabilityError, match=r"field 'losses': unknown value\(s\) \['xe'\]"):
        Capabilities.from_mapping({"losses": ["xe"]}, source="X")
    with pytest.raises(CapabilityError, match="field 'logq' must be a bool"):
        Capabilities.from_mapping({"logq": "yes"}, source="X")
    with pytest.raises(CapabilityError, match=r"unknown hyperparameter name\(s\) \['droput_p_hidden'\]"):
        Capabilities.from_mapping({"hyperparameters": {"droput_p_hidden": 0.1}}, source="X")
    with pytest.raises(CapabilityError, match="bpreg needs 'bpr-max' in losses"):
        Capabilities.from_mapping({"bpreg": True}, source="X")
    with pytest.raises(CapabilityError, match="separate_dropouts needs dropout_embed and dropout_hidden"):
        Capabilities.from_mapping({"separate_dropouts": True, "dropout_embed": True}, source="X")
    with pytest.raises(CapabilityError, match="gate_layout"):
        Capabilities.from_mapping({"gate_layout": ["reset", "update"]}, source="X")
    ok = Capabilities.from_mapping({"gate_layout": ["update", "reset", "candidate"], "eval_tie_mode": "conservative"})
    assert ok.gate_layout == ("update", "reset", "candidate") and ok.to_dict()["eval_tie_mode"] == "conservative"


def test_negatives_per_example_is_a_count_of_a_per_example_sampler():
    caps = Capabilities.from_mapping({"per_example_negatives": True, "negatives_per_example": 1})
    assert caps.negatives_per_example == 1 and caps.to_dict()["negatives_per_example"] == 1
    assert Capabilities.from_mapping({}).negatives_per_example is None
    assert "negatives_per_example" not in Capabilities.feature_vocabulary()  # a count, not a feature
    for bad in (0, -2, 1.5, True, "1"):
        with pytest.raises(CapabilityError, match="field 'negatives_per_example' must be a whole number >= 1"):
            Capabilities.from_mapping({"per_example_negatives": True, "negatives_per_example": bad}, source="X")
    with pytest.raises(CapabilityError, match="negatives_per_example needs per_example_negatives"):
        Capabilities.from_mapping({"negatives_per_example": 4}, source="X")


def test_fit_report_checks_per_epoch_lengths():
    assert FitReport([1.0, 0.5], [3, 3], [10, 10], [0.1, 0.1]).n_epochs == 2
    with pytest.raises(ValueError, match="per-epoch lists differ in length"):
        FitReport([1.0], [3, 3], [10], [0.1])


def test_unsupported_hooks_and_resolve_hparams():
    adapter = TemplateAdapter()
    adapter.build(seed=1)
    with pytest.raises(Unsupported) as exc:
        adapter.train_forward([[1]], seed=0)
    assert exc.value.name == "train_forward"
    with pytest.raises(Unsupported, match="momentum"):
        adapter.build(seed=1, momentum=0.1)
    assert TemplateAdapter.implemented_hooks() == frozenset()


def test_registry_rejects_bad_registrations_and_resolves_variants():
    class NoFamily(Adapter):
        family = ""

    class Incomplete(Adapter):
        name = "incomplete"

        def capabilities(self):
            return {}

    class Variant(TemplateAdapter):
        name = "tmpl"
        role = "implementation"

        def __init__(self, device="cpu", level="oob"):
            super().__init__(device)
            self.level = level

    reg = Registry()
    with pytest.raises(RegistryError, match="declares no family"):
        reg.add(NoFamily, name="x")
    with pytest.raises(RegistryError, match=r"does not implement required method\(s\) \['build', 'fit'"):
        reg.add(Incomplete)
    reg.add(Variant)
    reg.add(Variant, name="tmpl:inference_fix", level="inference_fix")
    with pytest.raises(RegistryError, match="registered twice"):
        reg.add(TemplateAdapter, name="tmpl")
    with pytest.raises(RegistryError, match="invalid implementation name"):
        reg.add(Variant, name="Bad Name")
    specs = reg.resolve(["tmpl:inference_fix"])  # a registered name with a colon wins over an import path
    assert [s.name for s in specs] == ["tmpl:inference_fix"] and specs[0].create().level == "inference_fix"
    assert [s.name for s in reg.resolve(["all"])] == ["tmpl", "tmpl:inference_fix"]
    assert load_import_path("gru4rec_conformance.implementations.template:TemplateAdapter").source == "import path"
    with pytest.raises(RegistryError, match="not a registered implementation"):
        reg.resolve(["nope"])


CHECKS = '''
from gru4rec_conformance.implementations.base import Unsupported

@pytest.mark.check("C-1", kind="K2")
@pytest.mark.loss("top1")
def test_needs_top1(impl):
    """Needs a loss the adapter lacks."""
    raise AssertionError("must not run")

@pytest.mark.check("C-2", kind="K5")
@pytest.mark.hook("train_step")
def test_needs_hook(impl):
    """Needs a hook the adapter lacks."""
    raise AssertionError("must not run")

@pytest.mark.check("C-3", kind="K5")
@pytest.mark.hook("optimizer_info")
def test_has_hook(impl):
    """Uses a hook the adapter has."""
    assert impl.build().optimizer_info()["type"] == "sgd"

@pytest.mark.check("C-4", kind="K6")
def test_runtime_unsupported_hparam(impl):
    """An undeclared hyperparameter raised at run time is a skip."""
    impl.build(momentum=0.3)

@pytest.mark.check("C-5", kind="K6")
def test_hp4_style(impl):
    """A check may expect Unsupported itself (HP-4)."""
    with pytest.raises(Unsupported):
        impl.new().build(seed=1, momentum=0.3)

@pytest.mark.check("C-6", kind="K3")
def test_require(impl):
    """impl.require skips with the reason."""
    impl.require("logq", "extra_shared_negatives")

@pytest.mark.check("C-7", kind="K2")
def test_declared_but_unsupported_loss(impl):
    """Declared bpr-max must not raise Unsupported."""
    impl.build(loss="bpr-max")

@pytest.mark.check("C-8", kind="K5")
def test_declared_hook_raises_unsupported(impl):
    """A declared (overridden) hook must not raise Unsupported."""
    impl.build().optimizer_info()
'''


def test_capability_skips_with_reason_and_declared_unsupported_fails(project):
    project.checks(CHECKS)
    result = project.run("conformance", "--impl", "good", "--impl", "liar", "-rs")
    result.stdout.fnmatch_lines(
        [
            "*test_checks.py:*: unsupported by liar: needs loss:top1 (not declared)",
            "*test_checks.py:*: unsupported by liar: needs hook:train_step (not declared)",
            "*unsupported by liar: momentum (Liar does not declare hyperparameter 'momentum')",
            "*unsupported by liar: needs logq, extra_shared_negatives (not declared)",
        ]
    )
    result.stdout.fnmatch_lines(["*liar declares 'loss:bpr-max' but raised Unsupported(loss:bpr-max (not really))*"])
    result.stdout.fnmatch_lines(["*liar declares 'optimizer_info' but raised Unsupported(optimizer_info)*"])
    good, liar = project.outcomes("good"), project.outcomes("liar")
    expected_good = {
        "needs_top1": "skipped-unsupported",
        "needs_hook": "skipped-unsupported",
        "has_hook": "passed",
        "runtime_unsupported_hparam": "skipped-unsupported",
        "hp4_style": "passed",
        "require": "skipped-unsupported",
        "declared_but_unsupported_loss": "skipped-unsupported",
        "declared_hook_raises_unsupported": "passed",
    }
    expected_liar = {
        **expected_good,
        "has_hook": "failed",
        "declared_but_unsupported_loss": "failed",
        "declared_hook_raises_unsupported": "failed",
    }
    assert good == {f"test_{k}[good]": v for k, v in expected_good.items()}
    assert liar == {f"test_{k}[liar]": v for k, v in expected_liar.items()}
    result.assert_outcomes(passed=4, skipped=9, failed=3)


def test_bad_check_declarations_are_errors(project):
    project.checks('''
    def test_no_check_marker(impl):
        """no marker"""

    @pytest.mark.check("B-1", kind="K12")
    def test_unknown_kind(impl):
        """bad kind"""

    @pytest.mark.check("B-2", kind="K1")
    @pytest.mark.feature("lgoq")
    def test_unknown_feature(impl):
        """typo in a feature name"""
    ''')
    result = project.run("conformance", "--impl", "good")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(
        [
            "*a conformance check needs @pytest.mark.check('<ID>', kind='<kind>')*",
            "*@check kind 'K12' is not a kind of family gru4rec*",
            "*unknown feature 'lgoq' for family gru4rec*",
        ]
    )
    assert set(project.outcomes("good").values()) == {"error"}


def test_invalid_declaration_errors_every_check_of_that_adapter(project):
    project.checks('''
    @pytest.mark.check("B-3", kind="K10")
    def test_any(impl):
        """anything"""
    ''')
    result = project.run("conformance", "--impl", "badcaps", "--impl", "good")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR describing the adapter: CapabilityError*unknown capability field(s)*logg*",
            "*badcaps: the adapter cannot be described*",
        ]
    )


def test_unavailable_implementation_skips_its_checks_with_how_to_provide_it(project):
    project.checks('''
    @pytest.mark.check("B-4", kind="K10")
    def test_any(impl):
        """anything"""
    ''')
    result = project.run("conformance", "--impl", "missing", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*NOT AVAILABLE (its checks are skipped): set MISSING_PATH to a checkout of example/missing@abc123",
            "*implementation missing is not available here: set MISSING_PATH to a checkout*",
        ]
    )
    # and once more at the end of the output, where a user without -rs looks
    result.stdout.fnmatch_lines(["UNAVAILABLE missing: 1 of 1 checks skipped: set MISSING_PATH to a checkout*"])
    result = project.run("conformance", "--impl", "missing", "--gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["GATE FAILED: missing: implementation not available (set MISSING_PATH*"])
