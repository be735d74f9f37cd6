"""Early-stopping and epoch-loop mutants (caught by FT-10 and FT-13, docs/checks.md)."""

from __future__ import annotations

import math

from gru4rec_conformance.reference.finetuner import EarlyStopping, ReferenceFineTuner

from ._common import MutantAdapter, mutant, tuned_mutant


class PreviousEpochStopping(EarlyStopping):
    """The reproduction's rule: compare with the previous epoch, not the best; never restore."""

    restores_best = False

    def __post_init__(self) -> None:
        super().__post_init__()
        self.previous = math.inf if self.mode == "min" else -math.inf

    def step(self, value: float) -> bool:
        self.epoch += 1
        better = value < self.previous if self.mode == "min" else value > self.previous
        self.previous = float(value)
        if better:
            self.counter = 0
        else:
            self.counter += 1
            if self.patience is not None and self.counter >= self.patience:
                self.stopped = True
        self.best_epoch = self.epoch  # the last weights are kept
        return False


class _PrevEpoch(ReferenceFineTuner):
    stopper_cls = PreviousEpochStopping


MutantPreviousEpochStopping = tuned_mutant(_PrevEpoch, "mutant_ft13_previous_epoch_stopping",
                                           defect="early stopping compares with the previous epoch instead of the best, and never restores")  # fmt: skip


class _OffByOne(ReferenceFineTuner):
    def _epoch_numbers(self, cfg):
        return range(1, cfg.max_epochs)  # runs max_epochs - 1 epochs


MutantEpochOffByOne = tuned_mutant(_OffByOne, "mutant_ft10_epoch_off_by_one",
                                   defect="epoch loop range(1, epochs) runs one epoch fewer than configured")  # fmt: skip


class _NoRestore(ReferenceFineTuner):
    def _restore(self, state):
        pass  # the best epoch is selected and reported, its weights are never loaded


@mutant("mutant_ft13_no_restore",
        defect="the best epoch is selected and reported but its weights are never restored (the last epoch's kept)",
        message="isolated: weights not restored")  # fmt: skip
class MutantNoRestore(MutantAdapter):
    """The best-so-far rule stops and selects correctly, but the final model keeps the last epoch's weights while
    the record names the best epoch as selected. Resembles ``mutant_ft11_retrain_train_dev`` (the final model does
    not reproduce the selected epoch's dev loss) with another cause: nothing is trained off the train split."""

    tuner_cls = _NoRestore
    sibling = "mutant_ft11_retrain_train_dev"
    also_rows = (11,)


MUTANTS = [MutantPreviousEpochStopping, MutantEpochOffByOne, MutantNoRestore]
