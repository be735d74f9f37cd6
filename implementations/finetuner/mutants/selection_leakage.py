"""Selection and leakage mutants (caught by FT-11, FT-12 and FT-24, docs/checks.md): the test split used during
training, or training on dev after the selection on dev."""

from __future__ import annotations

from pathlib import Path

from gru4rec_conformance.datasets.sst5 import Examples
from gru4rec_conformance.implementations.finetuner.base import FinetunerAdapter
from gru4rec_conformance.reference.finetuner import ReferenceFineTuner

from ._common import MutantAdapter, mutant, tuned_mutant


class _TestAware(ReferenceFineTuner):
    """Evaluates ``self.test`` after every epoch (as all three studied code bases do)."""

    test = None

    def _epoch_end(self, epoch, row):
        if self.test is not None:
            res = self.evaluate(self.test)
            row["test_accuracy"] = res["accuracy"]
            self._after_test(epoch, row)

    def _after_test(self, epoch, row):
        pass


class _TestEveryEpoch(_TestAware):
    pass


class _TestSelection(_TestAware):
    def _after_test(self, epoch, row):
        best = getattr(self, "_best_test", -1.0)
        if row["test_accuracy"] > best:
            self._best_test = row["test_accuracy"]
            self._best_test_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            self._best_test_epoch = epoch

    def _select_epoch(self, stopper, epochs, cfg):
        if getattr(self, "_best_test_epoch", None) is None:
            return super()._select_epoch(stopper, epochs, cfg)
        self.model.load_state_dict(self._best_test_state)  # highest test accuracy over epochs
        return self._best_test_epoch


class _SaveOnTestScore(_TestAware):
    threshold = 0.0
    save_root = None

    def _after_test(self, epoch, row):
        if self.save_root is not None and row["test_accuracy"] > self.threshold:
            d = Path(self.save_root) / f"model__root__fine__e{epoch}_{int(round(row['test_accuracy'] * 1000))}"
            self.model.save_pretrained(d)


class _TestAwareAdapter(MutantAdapter):
    def _run_once(self, spec, train, val, test, cfg, *, seed, run_id, out_dir):
        base = self.tuner_cls

        class _Bound(base):  # type: ignore[misc,valid-type]
            pass

        _Bound.test = test
        if issubclass(base, _SaveOnTestScore):
            _Bound.save_root = out_dir
        self.tuner_cls = _Bound
        try:
            return super()._run_once(spec, train, val, test, cfg, seed=seed, run_id=run_id, out_dir=out_dir)
        finally:
            self.tuner_cls = base


@mutant("mutant_ft11_test_selection", defect="the checkpoint with the highest test accuracy over epochs is kept")
class MutantTestSelection(_TestAwareAdapter):
    tuner_cls = _TestSelection


@mutant("mutant_ft11_test_selection_no_hook",
        defect="the checkpoint with the highest test accuracy over epochs is kept; split accesses not observable",
        message="selected on test, not on validation")  # fmt: skip
class MutantTestSelectionNoHook(MutantTestSelection):
    """The test-selection mutant without the split-access hook: only black-box checks can catch it."""

    split_log = FinetunerAdapter.split_log  # the protocol's default: the hook is not declared


MutantSaveOnTestScore = tuned_mutant(_SaveOnTestScore, "mutant_ft12_save_on_test_score",
                                     defect="checkpoints saved when test accuracy beats a threshold, named after it (e5_591)", base=_TestAwareAdapter)  # fmt: skip


MutantTestEveryEpoch = tuned_mutant(_TestEveryEpoch, "mutant_ft24_test_every_epoch",
                                    defect="test split evaluated after every epoch (logged only)", base=_TestAwareAdapter)  # fmt: skip


class _RetrainOnTrainDev(ReferenceFineTuner):
    """After selecting the epoch on dev, a fresh model of the same seed is trained for that many epochs on train
    and dev together (a split named ``train+dev`` in the split log); the record keeps the selection's figures."""

    def _fit(self, train, val, cfg):
        rec = super()._fit(train, val, cfg)
        both = Examples(
            f"{train.split}+{val.split}",
            tuple(train.ids) + tuple(f"{val.split}:{i}" for i in val.ids),
            tuple(train.texts) + tuple(val.texts),
            tuple(train.labels) + tuple(val.labels),
            train.num_labels,
            "train and dev",
        )
        assert self.seed is not None  # fit requires build(seed)
        self.build(self.seed)
        super()._fit(both, val, cfg.replace(max_epochs=rec["selected_epoch"], patience=None, restore_best=False))
        self.record = rec
        return rec


@mutant("mutant_ft11_retrain_train_dev",
        defect="after selection on dev, the final model is retrained on train+dev for the selected number of epochs",
        message="trains on a split other than train")  # fmt: skip
class MutantRetrainOnTrainDev(MutantAdapter):
    """The selected number of epochs is found on dev, then the final model is retrained from scratch on train +
    dev, and the record still reports the selection's dev figures. Resembles ``mutant_ft13_no_restore`` (the final
    model does not reproduce the selected epoch's dev loss) but its cause is a training pass on another split, which
    only the split log shows."""

    tuner_cls = _RetrainOnTrainDev
    #: the mutant whose symptom resembles this one's, and the rows whose checks must tell the two apart
    sibling = "mutant_ft13_no_restore"
    also_rows = (13,)


MUTANTS = [
    MutantTestSelection,
    MutantTestSelectionNoHook,
    MutantSaveOnTestScore,
    MutantTestEveryEpoch,
    MutantRetrainOnTrainDev,
]
