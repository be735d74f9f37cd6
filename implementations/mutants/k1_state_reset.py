"""K1 state-reset mutants (defects, docs/checks.md: GP-1, GP-2, KG-3, MS-3)."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant


# caught by EV-4 too: the leaked state depends on which sessions share a lane
@mutant("mutant:no_eval_reset", defect="GP-1", kind="K1", caught_by=("SR-1", "SR-2", "EV-4"))
class NoEvalReset(MutantAdapter):
    """The evaluation loop never zeroes a lane's hidden state when a new session enters it (GP-1)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import SessionParallelEvaluator

        class Evaluator(SessionParallelEvaluator):
            def reset_lanes(self, H, mask):
                return H

        return {"evaluator_class": Evaluator}


@mutant("mutant:stale_train_mask", defect="GP-2", kind="K1", caught_by=("SR-3", "SR-4"))
class StaleTrainMask(MutantAdapter):
    """Training reuses the reset mask of the last session switch for every step of the following run, so the
    lanes of new sessions are zeroed at every step until another session ends (GP-2, KG-3)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import SessionParallelIterator

        class Iterator(SessionParallelIterator):
            def reset_mask(self, run, step):
                return run.reset

        return {"iterator_class": Iterator}


@mutant("mutant:reset_every_step", defect="GP-2 (inference), MS-3", kind="K1", caught_by=("SR-3", "SR-5"))
class ResetEveryStep(MutantAdapter):
    """Inference ignores the carried hidden state (every step starts from zero), so predictions depend on the
    last item only (GP-2's over-reset carried into inference; MS-3's fixed-window model has the same symptom)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def forward_eval(self, x, H):
                return super().forward_eval(x, [h * 0 for h in H])

        return {"model_class": Model}


@mutant("mutant:no_eval_reset_id_order", defect="GP-1", kind="K1", caught_by=("SR-1", "SR-2"))
class NoEvalResetIdOrder(MutantAdapter):
    """GP-1 as GRU4REC-pytorch has it: the evaluation loop never zeroes a lane's hidden state, and sessions enter
    the evaluation lanes in session-id order instead of by start time. A check that predicts which session follows
    which in a lane from start times looks at the wrong session (the one that ran first, from a fresh state)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.implementations.mutants.k7_epoch_batching import LanesBySessionId
        from gru4rec_conformance.reference.gru4rec import SessionParallelEvaluator

        class Evaluator(SessionParallelEvaluator):
            iterator_class = LanesBySessionId.gru_overrides()["iterator_class"]  # the same id-order lanes

            def reset_lanes(self, H, mask):
                return H

        return {"evaluator_class": Evaluator}
