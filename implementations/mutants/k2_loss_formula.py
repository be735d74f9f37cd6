"""K2 loss-formula mutants (defects, docs/checks.md: GP-3, TG-4, GP-5, GP-6, RP-1, RP-2)."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant


def _loss_classes(name: str, cls) -> dict:
    from gru4rec_conformance.reference.gru4rec.losses import LOSS_CLASSES

    return {"loss_classes": {**LOSS_CLASSES, name: cls}}


def _loss_value(name: str, value) -> dict:
    """``_loss_classes`` with the reference's ``name`` loss whose value is ``value(loss, O, d)``: ``O`` the
    activated (b, n) scores, ``d`` their diagonal (the targets' scores) as a (b, 1) column."""
    from gru4rec_conformance.reference.gru4rec.losses import LOSS_CLASSES, _diag

    def __call__(self, R, y, n_targets):
        O = self.activation(R)
        return value(self, O, _diag(O).reshape(-1, 1))

    return _loss_classes(name, type("Loss", (LOSS_CLASSES[name],), {"__call__": __call__}))


# MC-1..3: the tiny gradients leave the model nearly untrained (yoochoose_100k_standin, cross-entropy, seed 42:
# recall@20 0.0086 vs the reference's 0.6452 ± 0.0129; tests/meta/test_mutants.py, the metric meta-test)
@mutant("mutant:xe_double_softmax", defect="GP-3, TG-4", kind="K2", caught_by=("LF-1", "LF-5", "MC-1", "MC-2",
        "MC-3"), also_fails=("OP-1",), collateral="OP-1: the doubly normalised loss has tiny gradients, so no first "
        "Adagrad step reaches η (OP-1 infers |g| > 1e-2 from the step size)")  # fmt: skip
class XEDoubleSoftmax(MutantAdapter):
    """Cross-entropy applies softmax to already softmax-normalised scores (final_act=softmax fed into a
    softmax-CE loss; GP-3, TG-4)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec.losses import CrossEntropyLoss

        class Loss(CrossEntropyLoss):
            def softmax(self, R):
                return super().softmax(super().softmax(R))

        return _loss_classes("cross-entropy", Loss)


@mutant("mutant:bprmax_matrix_mean", defect="GP-5", kind="K2", caught_by=("LF-1", "LF-2"))
class BPRMaxMatrixMean(MutantAdapter):
    """BPR-max takes −log of the mean over the whole score matrix of s·σ(r_i − r_j) instead of a per-row
    −log Σ_j averaged over rows (GP-5)."""

    @classmethod
    def gru_overrides(cls):
        import torch

        from gru4rec_conformance.reference.gru4rec.losses import EPS_LOG

        def value(loss, O, d):
            s = loss.softmax_neg(O)
            inner = torch.mean(torch.sigmoid(d - O) * s)  # one mean over all rows and columns
            return O.shape[0] * (-torch.log(inner + EPS_LOG)) + loss.bpreg * torch.sum((O**2) * s)

        return _loss_value("bpr-max", value)


@mutant("mutant:bprmax_softmax_with_target", defect="GP-5", kind="K2", caught_by=("LF-1", "LF-3"))
class BPRMaxSoftmaxWithTarget(MutantAdapter):
    """The BPR-max negative weights are a softmax over the whole row, the target column included (the second
    half of GP-5)."""

    @classmethod
    def gru_overrides(cls):
        import torch

        from gru4rec_conformance.reference.gru4rec.losses import BPRMaxLoss

        class Loss(BPRMaxLoss):
            def softmax_neg(self, X):
                return torch.softmax(X, dim=1)

        return _loss_classes("bpr-max", Loss)


@mutant("mutant:bpreg_ignored", defect="GP-6, RP-1", kind="K2", caught_by=("LF-1", "LF-6", "HP-1"))
class BPRegIgnored(MutantAdapter):
    """The BPR-max score regulariser is missing: bpreg is accepted and has no effect (GP-6; RP-1 hard-codes it)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec.losses import BPRMaxLoss

        class Loss(BPRMaxLoss):
            def __init__(self, bpreg, activation):
                super().__init__(0.0, activation)

        return _loss_classes("bpr-max", Loss)


@mutant("mutant:bprmax_no_log_eps", defect="RP-2", kind="K2", caught_by=("LF-4",))
class BPRMaxNoLogEpsilon(MutantAdapter):
    """BPR-max takes −log Σ_j s_ij σ(r_i − r_j) without an epsilon: inf/NaN once the sum underflows (RP-2)."""

    @classmethod
    def gru_overrides(cls):
        import torch

        def value(loss, O, d):
            s = loss.softmax_neg(O)
            return torch.sum(
                -torch.log(torch.sum(torch.sigmoid(d - O) * s, dim=1)) + loss.bpreg * torch.sum((O**2) * s, dim=1)
            )

        return _loss_value("bpr-max", value)


@mutant("mutant:bpr_value_without_diagonal", defect="cornac BPR value (LF-1[bpr], design difference)", kind="K2",
        caught_by=("LF-1",))  # fmt: skip
class BPRValueWithoutDiagonal(MutantAdapter):
    """BPR's loss value leaves out the gradient-free j = i term (log 2 per row): the gradient is exactly the
    reference's, only the value differs (as cornac's BPR, whose value lacks that constant). Proves that LF-1's
    value comparison bites on its own, not only through the gradient."""

    @classmethod
    def gru_overrides(cls):
        import torch

        def value(loss, O, d):
            terms = -torch.nn.functional.logsigmoid(d - O)
            off_diagonal = ~torch.eye(O.shape[0], O.shape[1], dtype=torch.bool, device=O.device)
            return torch.sum(terms[off_diagonal])

        return _loss_value("bpr", value)


@mutant("mutant:bpr_value_doubled", defect="a loss value normalised apart from its gradient (sibling of the BPR "
        "value without its j = i term)", kind="K2", caught_by=("LF-1",))  # fmt: skip
class BPRValueDoubled(MutantAdapter):
    """BPR's reported loss value is twice the value its gradient comes from (a value summed or scaled for the
    report while the step uses another normalisation): the gradient is exactly the reference's. The sibling of
    :class:`BPRValueWithoutDiagonal`: both miss only in the value, LF-1's probes must tell a constant factor from
    a constant offset."""

    @classmethod
    def gru_overrides(cls):
        import torch

        def value(loss, O, d):
            v = torch.sum(-torch.nn.functional.logsigmoid(d - O))
            return v + v.detach()

        return _loss_value("bpr", value)
