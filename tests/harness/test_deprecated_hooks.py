"""The weight hooks' old names (``get_params``/``set_params``, renamed ``get_weights``/``set_weights``) keep working
for one release: an outside adapter that overrides only the old names is found, called and warned about once."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gru4rec_conformance.implementations.base import Adapter, Unsupported

WEIGHTS = {"W": np.arange(6, dtype=np.float32).reshape(2, 3)}


class _Base(Adapter):
    """The required surface only (never run)."""

    def capabilities(self):
        return {}

    def build(self, seed, **hparams):
        pass

    def fit(self, train_df, n_epochs=None):
        raise NotImplementedError

    def item_ids(self):
        return np.arange(3)

    def score_prefixes(self, prefixes):
        return np.zeros((len(prefixes), 3), dtype=np.float32)


def _define_legacy() -> tuple[type, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        class Legacy(_Base):
            """Written against the old protocol: overrides get_params/set_params only."""

            def __init__(self, device="cpu"):
                super().__init__(device)
                self.loaded = None

            def get_params(self):
                return dict(WEIGHTS)

            def set_params(self, params):
                self.loaded = dict(params)

    return Legacy, caught


def test_an_old_style_adapter_is_found_called_and_warned_about_once():
    Legacy, caught = _define_legacy()
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert [str(w.message).split(" overrides ")[1][:13] for w in deprecations] == ["get_params(),", "set_params(),"]
    assert "rename it to get_weights()" in str(deprecations[0].message)
    assert all(w.filename == __file__ for w in deprecations)  # points at the class statement
    assert {"get_weights", "set_weights"} <= Legacy.implemented_hooks()
    assert {"get_weights", "set_weights", "get_params", "set_params"} <= set(Legacy.protocol_methods())
    adapter = Legacy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # calling through the new names warns no more
        assert adapter.get_weights().keys() == WEIGHTS.keys()
        adapter.set_weights(WEIGHTS)
        assert adapter.loaded is not None and adapter.get_params().keys() == WEIGHTS.keys()


def test_a_subclass_of_a_new_style_adapter_may_still_override_the_old_name():
    class New(_Base):
        def get_weights(self):
            return {"new": np.zeros(1)}

    with pytest.warns(DeprecationWarning, match="overrides get_params"):

        class Old(New):
            def get_params(self):
                return {"old": np.zeros(1)}

    assert list(Old().get_weights()) == ["old"]
    assert list(New().get_weights()) == ["new"]


def test_old_names_on_a_new_style_adapter_warn_and_forward():
    class New(_Base):
        def get_weights(self):
            return dict(WEIGHTS)

        def set_weights(self, weights):
            self.loaded = dict(weights)

    adapter = New()
    with pytest.warns(DeprecationWarning, match=r"get_params\(\) is deprecated"):
        assert adapter.get_params().keys() == WEIGHTS.keys()
    with pytest.warns(DeprecationWarning, match=r"set_params\(\) is deprecated"):
        adapter.set_params(WEIGHTS)
    assert adapter.loaded.keys() == WEIGHTS.keys()
    assert {"get_weights", "set_weights"} <= New.implemented_hooks()


def test_without_either_name_the_hook_is_unsupported_and_undeclared():
    adapter = _Base()
    assert not {"get_weights", "set_weights"} & _Base.implemented_hooks()
    with pytest.raises(Unsupported, match="get_weights"):
        adapter.get_weights()
    with pytest.warns(DeprecationWarning), pytest.raises(Unsupported, match="get_weights"):
        adapter.get_params()


def test_an_old_style_super_call_raises_unsupported_instead_of_recursing():
    with pytest.warns(DeprecationWarning):

        class Partial(_Base):
            def get_params(self):
                return super().get_params()  # "not this time": the base raised Unsupported before the rename

    with pytest.warns(DeprecationWarning), pytest.raises(Unsupported, match="get_weights"):
        Partial().get_weights()


LEGACY_MODULE = '''
import warnings

import numpy as np

from dummies import Good


class Legacy(Good):
    """An outside adapter written against the old protocol (weight hooks named get_params/set_params)."""

    name = "legacy"

    def fit(self, train_df, n_epochs=None):
        self.w = {"Wy": np.ones((3, 2), dtype=np.float32)}
        return super().fit(train_df, n_epochs)

    def get_params(self):
        return {k: v.copy() for k, v in self.w.items()}

    def set_params(self, params):
        self.w = {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}
'''

CHECKS = '''
import numpy as np

@pytest.mark.check("DH-1", kind="K11")
@pytest.mark.hook("get_weights", "set_weights")
def test_weights_roundtrip(impl):
    """The new hook names reach the old-style overrides."""
    model = impl.build()
    model.fit(TRAIN)
    w = model.get_weights()
    model.set_weights({"Wy": 2 * w["Wy"]})
    assert np.array_equal(model.get_weights()["Wy"], 2 * w["Wy"])

@pytest.mark.check("DH-2", kind="K11")
@pytest.mark.hook("get_params")
def test_old_marker_name(impl):
    """A check still naming the old hook is an alias of the new one."""
    model = impl.build()
    model.fit(TRAIN)
    assert set(model.get_weights()) == {"Wy"}
'''


def test_the_harness_runs_the_hooks_of_an_old_style_outside_adapter_and_warns_once(project):
    project.pytester.makepyfile(legacy=LEGACY_MODULE)
    project.checks(CHECKS)
    # a fresh process: the warnings as a user sees them
    result = project.run_subprocess("conformance", "--impl", "legacy:Legacy")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*capabilities: *hook:get_weights*hook:set_weights*"])
    output = result.stdout.str() + result.stderr.str()
    for old, new in (("get_params", "get_weights"), ("set_params", "set_weights")):
        assert output.count(f"legacy.Legacy overrides {old}(), a deprecated hook name: rename it to {new}()") == 1


def test_an_old_style_outside_adapter_in_a_worker_process(project):
    project.pytester.makepyfile(legacy=LEGACY_MODULE)
    project.checks(CHECKS)
    result = project.run(
        "conformance",
        "--impl",
        "legacy:Legacy",
        "--isolation",
        "always",
        "-W",
        "ignore:legacy.Legacy overrides:DeprecationWarning",
    )  # the warning is tested above
    result.assert_outcomes(passed=2)
    assert "worker process" in project.results("legacy")["run"]["impl"]["isolation"]
