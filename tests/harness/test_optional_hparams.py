"""``conformance.gru4rec._common.build``: optional hyperparameter values the implementation refuses are dropped
(with their coupled values) and noted in the check's record; required ones and broken declarations are not."""

from __future__ import annotations

import pytest

from gru4rec_conformance.conformance.gru4rec._common import ADAGRAD, build
from gru4rec_conformance.implementations.base import Unsupported


class _Caps:
    def __init__(self, hyperparameters, features):
        self.hyperparameters = hyperparameters
        self._features = features

    def features(self):
        return dict(self._features)


class FakeImpl:
    """The parts of the ``impl`` fixture that ``build`` uses; ``refuse(hp)`` decides what build refuses."""

    def __init__(self, refuse, hyperparameters=None, features=None):
        names = ("layers", "n_sample", "optimizer", "learning_rate", "momentum", "loss", "batch_size")
        self.capabilities = _Caps(hyperparameters or dict.fromkeys(names), features or {})
        self.refuse = refuse
        self.notes: list[tuple[str, dict]] = []
        self.builds: list[dict] = []

    def build(self, seed=None, **hp):
        self.builds.append(hp)
        reason = self.refuse(hp)
        if reason:
            raise Unsupported(reason)
        return dict(hp)

    def note(self, name, **context):
        self.notes.append((name, context))


def test_refused_optional_value_is_dropped_and_noted():
    impl = FakeImpl(lambda hp: "n_sample:0" if hp.get("n_sample") == 0 else None)
    built = build(impl, dict(layers=[8]), dict(n_sample=0, loss="cross-entropy"))
    assert built == {"layers": [8], "loss": "cross-entropy"}
    assert [n for n, _ in impl.notes] == ["optional hyperparameter dropped: n_sample=0"]
    assert "n_sample:0" in impl.notes[0][1]["refused"]


def test_refusal_named_after_a_feature_finds_the_optional_key():
    # recpack refuses n_sample=0 as Unsupported("in_batch_negatives")
    impl = FakeImpl(lambda hp: "in_batch_negatives" if hp.get("n_sample") == 0 else None)
    built = build(impl, dict(layers=[8]), dict(loss="cross-entropy", n_sample=0, batch_size=4))
    assert built == {"layers": [8], "loss": "cross-entropy", "batch_size": 4}
    assert [c["hyperparameter"] for _, c in impl.notes] == ["n_sample"]


def test_refused_optimizer_drops_its_learning_rate_and_momentum():
    impl = FakeImpl(lambda hp: f"optimizer:{hp['optimizer']}" if hp.get("optimizer", "adam") != "adam" else None)
    built = build(impl, dict(layers=[8]), dict(**ADAGRAD, learning_rate=0.1, momentum=0.0, loss="cross-entropy"))
    assert built == {"layers": [8], "loss": "cross-entropy"}
    assert sorted(c["hyperparameter"] for _, c in impl.notes) == ["learning_rate", "momentum", "optimizer"]


def test_accepted_values_are_passed_unchanged():
    impl = FakeImpl(lambda hp: None)
    assert build(impl, dict(layers=[8]), dict(**ADAGRAD, learning_rate=0.1)) == {
        "layers": [8],
        "optimizer": "adagrad",
        "learning_rate": 0.1,
    }
    assert impl.notes == [] and len(impl.builds) == 1


def test_required_refusal_and_broken_declaration_are_raised():
    impl = FakeImpl(lambda hp: "layers:unequal")
    with pytest.raises(Unsupported, match="layers"):
        build(impl, dict(layers=[8, 4]), dict(n_sample=0))
    lying = FakeImpl(lambda hp: "loss:cross-entropy" if "loss" in hp else None, features={"loss:cross-entropy": True})
    with pytest.raises(Unsupported, match="loss:cross-entropy"):
        build(lying, dict(layers=[8]), dict(loss="cross-entropy"))
    assert lying.notes == []


def test_unexplained_refusal_is_raised():
    impl = FakeImpl(lambda hp: "device:cuda")
    with pytest.raises(Unsupported, match="device:cuda"):
        build(impl, dict(layers=[8]), dict(n_sample=0, loss="cross-entropy"))


def test_dropped_values_reach_the_check_record(project):
    """Through the plugin: the note is a value-less metric entry of the check's record (results.json)."""
    project.checks('''
    from gru4rec_conformance.conformance.gru4rec._common import build

    @pytest.mark.check("I-9", kind="K10")
    def test_drop(impl):
        """A refused optional value is dropped."""
        model = build(impl, dict(n_epochs=1), dict(learning_rate=0.5, layers=[4]))
        assert model.fit(TRAIN).n_steps == [1]
    ''')
    project.pytester.makepyfile(
        refusing="""
        from dummies import Good
        from gru4rec_conformance.implementations.base import Unsupported

        class Refusing(Good):
            name = "refusing"

            def build(self, seed, **hp):
                if hp.get("learning_rate", 0.1) != 0.1:
                    raise Unsupported(f"learning_rate:{hp['learning_rate']}", "fixed at 0.1")
                return super().build(seed, **hp)
    """
    )
    project.run("conformance", "--impl", "refusing:Refusing").assert_outcomes(passed=1)
    (impl_dir,) = [p.name for p in (project.path / "reports" / "out").iterdir() if p.is_dir()]
    (rec,) = project.results(impl_dir)["results"]
    notes = [m for m in rec["metrics"] if m["name"].startswith("optional hyperparameter dropped")]
    assert [(m["context"]["hyperparameter"], m["context"]["value"], m["value"]) for m in notes] == [
        ("learning_rate", "0.5", None)
    ]
    assert "fixed at 0.1" in notes[0]["context"]["refused"]
