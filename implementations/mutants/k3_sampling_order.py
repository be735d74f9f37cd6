"""K3 sampling-order mutants (defects, docs/checks.md: GP-4, RP-7, TG/RP sampling distribution)."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant


@mutant("mutant:score_all_then_sample", defect="GP-4, GP-10", kind="K3", caught_by=("SO-1", "SC-2", "SC-1",
        "LF-5"), also_fails=("OP-1",), collateral="OP-1: probabilities normalised over the catalogue give tiny "
        "gradients, so no first Adagrad step reaches η")  # fmt: skip
class ScoreAllThenSample(MutantAdapter):
    """The training step applies softmax to the scores of the whole catalogue and picks the sampled columns
    afterwards, so the loss sees probabilities normalised over all items (GP-4; GP-10's full scoring)."""

    @classmethod
    def gru_overrides(cls):
        import torch

        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def score_train(self, h, y, O, Bo):
                return torch.softmax(self.score_all(h), dim=1)[:, y]

        return {"model_class": Model}


@mutant("mutant:per_row_negatives", defect="RP-7", kind="K3", caught_by=("SO-2",), also_fails=("SC-2",),
        collateral="SC-2: b·S per-row negatives reach more output rows than the B+S shared columns")  # fmt: skip
class PerRowNegatives(MutantAdapter):
    """Extra negatives are drawn independently for every lane instead of one vector shared by the minibatch
    (RP-7; the distribution support^sample_alpha is kept, so only the sharing differs)."""

    @classmethod
    def gru_overrides(cls):
        import torch

        def _sample_block(self, n_steps, n_lanes):
            if self.sampler is None:
                return None
            return self.sampler.draw((n_steps, n_lanes, self.sampler.n_sample))

        def _columns(self, targets, samples):
            if samples is None:
                return targets
            b = targets.shape[0]
            return torch.cat([targets[None, :].expand(b, b), samples[:b]], dim=1)

        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def score_train(self, h, y, O, Bo):
                if y.ndim == 1:
                    return super().score_train(h, y, O, Bo)
                return torch.einsum("bd,bkd->bk", h, O) + Bo[..., 0]

        from gru4rec_conformance.reference.gru4rec.losses import LOSS_CLASSES, CrossEntropyLoss

        class XELoss(CrossEntropyLoss):
            def column_q(self, y, n_targets):
                if y.ndim == 1:
                    return super().column_q(y, n_targets)
                return torch.cat(
                    [self.supports[y[:, :n_targets]], self.supports[y[:, n_targets:]] ** self.sample_alpha], dim=1
                )

        return {
            "_sample_block": _sample_block,
            "_columns": _columns,
            "model_class": Model,
            "loss_classes": {**LOSS_CLASSES, "cross-entropy": XELoss},
        }


@mutant("mutant:sample_alpha_ignored",
        defect="sample_alpha ignored (RP-7's uniform sampling; N/A in the study's tables)", kind="K3",
        caught_by=("SO-3", "HP-1"))  # fmt: skip
class SampleAlphaIgnored(MutantAdapter):
    """Extra negatives are drawn uniformly whatever sample_alpha says (the parameter is accepted and ignored)."""

    @classmethod
    def gru_overrides(cls):
        import numpy as np

        from gru4rec_conformance.reference.gru4rec import SampleCache

        class Cache(SampleCache):
            @staticmethod
            def weights(supports, sample_alpha):
                return np.ones_like(np.asarray(supports, dtype=np.float64))

        return {"sampler_class": Cache}


@mutant("mutant:fresh_per_example_negatives",
        defect="fresh per-example negatives every step (sibling of GP-4's catalogue-wide normalisation)", kind="K3",
        caught_by=("SO-1",), also_fails=("HP-2",),
        collateral="HP-2: its n_sample echo sees one negative per example whatever n_sample asks (16, 2048, 4096)")  # fmt: skip
class FreshPerExampleNegatives(MutantAdapter):
    """Every training example draws one negative of its own, afresh at every step, even with ``n_sample=0``
    (a per-example sampler added to the in-batch negatives; declared as ``per_example_negatives``). Its symptom in
    SO-1, the loss of a fixed batch changing between two steps whatever item is shifted, resembles a softmax over
    the whole catalogue (mutant:score_all_then_sample); the diagnosis names the sampler's randomness."""

    def capabilities(self):
        return {**super().capabilities(), "per_example_negatives": True, "negatives_per_example": 1}

    @classmethod
    def gru_overrides(cls):
        import torch

        def _sample_block(self, n_steps, n_lanes):
            size = (n_steps, n_lanes, 1)
            return torch.randint(0, self.data.n_items, size, generator=self._gen_sample, device=self.device)

        return {**PerRowNegatives.gru_overrides(), "_sample_block": _sample_block}
