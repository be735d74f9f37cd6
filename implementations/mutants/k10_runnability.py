"""K10 runnability mutants (defects, docs/checks.md: TG-1, GP-11; BS-6 from the blind-spot trials)."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter, batch_evaluator, mutant


@mutant("mutant:declared_loss_crashes", defect="TG-1", kind="K10", caught_by=("RN-1",), also_fails=("LF-1", "LF-2",
        "LF-4"), collateral="LF-1/2/4[top1]: the loss hook runs the same crashing code")  # fmt: skip
class DeclaredLossCrashes(MutantAdapter):
    """A declared loss crashes on its first use with a NameError (TG-1: a misspelled variable in a loss's
    forward; here the TOP1 loss)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec.losses import LOSS_CLASSES, TOP1Loss

        class Loss(TOP1Loss):
            def __call__(self, R, y, n_targets):
                raise NameError("name 'terget' is not defined")

        return {"loss_classes": {**LOSS_CLASSES, "top1": Loss}}


@mutant("mutant:cuda_eval_crash", defect="GP-11", kind="K10", caught_by=("RN-2",), needs_device="cuda")
class CudaEvalCrash(MutantAdapter):
    """The evaluator converts a device tensor with ``.numpy()``: fine on CPU, a crash on CUDA (GP-11)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec.evaluation import metrics_from_ranks

        def metrics(evaluator, batches, cutoffs, mode):
            import numpy as np

            ranks = []
            for _, _, targets, scores in batches:
                s = scores.numpy()  # the defect: no .cpu() before .numpy()
                t = s[np.arange(len(s)), targets.numpy()][:, None]
                ranks.append(
                    (s >= t).sum(1).astype(np.float64)
                    if mode == "conservative"
                    else (s > t).sum(1).astype(np.float64) + 1
                )
            return metrics_from_ranks(np.concatenate(ranks), cutoffs, evaluator.hits)

        return {"evaluator_class": batch_evaluator(metrics)}


@mutant("mutant:embedding_size_tied_to_hidden", defect="BS-6", kind="K10", caught_by=("RN-1",),
        also_fails=("HP-1", "HP-2"),
        collateral="HP-1/HP-2 build a separate embedding of another size than the hidden layer: the same crash")  # fmt: skip
class EmbeddingSizeTiedToHidden(MutantAdapter):
    """The first GRU layer is built for inputs of the hidden size, not of the separate embedding's size (an
    ``nn.GRU(hidden_size, hidden_size)`` behind an ``nn.Embedding(n_items, embedding_dim)``): right while the two
    sizes are equal, a shape error in the first forward pass when they differ (blind spot BS-6)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def layer_input_size(self, layer):
                if layer == 0 and self.mode == "separate":
                    return self.layers[0]  # the defect: the embedding's own size is ignored
                return super().layer_input_size(layer)

        return {"model_class": Model}
