"""K5 optimizer mutants (defects, docs/checks.md: TF-2, TF-3, TF-4/KG-2, GP-9/TG-3)."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter
from gru4rec_conformance.implementations.registry import register


@register
class AdagradInitialAccumulator(MutantAdapter):
    """Adagrad starts from an accumulator of 0.1 (TensorFlow's default ``initial_accumulator_value``), which
    damps the early steps far below the learning rate (TF-2)."""

    name = "mutant:adagrad_initial_accumulator"
    defect = "TF-2"
    kind = "K5"
    caught_by = ("OP-1", "OP-2")

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import IndexedAdagradM

        class Optimizer(IndexedAdagradM):
            initial_accumulator_value = 0.1

        return {"optimizer_class": Optimizer}


@register
class LearningRateDecay(MutantAdapter):
    """The learning rate decays exponentially: ×0.96 per ``decay_steps`` updates, staircase (TF-3; TensorFlow
    used 10,000 steps, scaled here to 1,000 so that a CPU check reaches the first decay)."""

    name = "mutant:lr_decay"
    defect = "TF-3"
    kind = "K5"
    caught_by = ("OP-3",)
    decay_steps = 1_000

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import IndexedAdagradM

        decay_steps = cls.decay_steps

        class Optimizer(IndexedAdagradM):
            def current_lr(self):
                return max(self.learning_rate * 0.96 ** (self.n_updates // decay_steps), 1e-5)

            def info(self):
                return {**super().info(), "lr_schedule": "exponential (0.96 per 1,000 steps, staircase)"}

        return {"optimizer_class": Optimizer}


@register
class MomentumIgnored(MutantAdapter):
    """``momentum`` is declared and accepted but the optimizer runs without it (GP-9, TG-3: Adagrad built
    without the momentum argument)."""

    name = "mutant:momentum_ignored"
    defect = "GP-9, TG-3"
    kind = "K5"
    caught_by = ("OP-4", "HP-1")

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import IndexedAdagradM

        class Optimizer(IndexedAdagradM):
            def __init__(self, params, learning_rate, momentum=0.0):
                super().__init__(params, learning_rate, 0.0)

        return {"optimizer_class": Optimizer}


@register
class AdamOptimizer(MutantAdapter):
    """Adam (β = 0.9, 0.999, eps 1e-8, bias-corrected, lazy rows for the embedding tables) instead of Adagrad
    (TF-4, KG-2: GRU4Rec_TensorFlow and KerasGRU4Rec hard-code Adam)."""

    name = "mutant:adam"
    defect = "TF-4, KG-2"
    kind = "K5"
    caught_by = ("OP-2",)

    @classmethod
    def gru_overrides(cls):
        import torch

        from gru4rec_conformance.reference.gru4rec import IndexedAdagradM
        from gru4rec_conformance.reference.gru4rec.optim import RowGrad

        class Adam(IndexedAdagradM):
            beta1, beta2, adam_eps = 0.9, 0.999, 1e-8

            def __init__(self, params, learning_rate, momentum=0.0):
                super().__init__(params, learning_rate, momentum)
                with torch.no_grad():
                    self.m = {k: torch.zeros_like(p) for k, p in params.items()}
                    self.t = {k: torch.zeros(p.shape[0] if p.ndim else 1, device=p.device) for k, p in params.items()}

            @torch.no_grad()
            def step(self, grads):
                lr, b1, b2 = self.current_lr(), self.beta1, self.beta2
                for name, grad in grads.items():
                    if grad is None:
                        continue
                    p, v, m, t = self.params[name], self.acc[name], self.m[name], self.t[name]
                    if isinstance(grad, RowGrad):
                        idx, val = grad.indices, grad.values
                    elif grad.is_sparse:
                        grad = grad.coalesce()
                        idx, val = grad._indices()[0], grad._values()
                    else:
                        idx, val = torch.arange(p.shape[0], device=p.device), grad
                    t[idx] += 1
                    m_new = b1 * m[idx] + (1 - b1) * val
                    v_new = b2 * v[idx] + (1 - b2) * val * val
                    m.index_copy_(0, idx, m_new)
                    v.index_copy_(0, idx, v_new)
                    shape = (-1,) + (1,) * (val.ndim - 1)
                    tt = t[idx].reshape(shape)
                    upd = (m_new / (1 - b1**tt)) / ((v_new / (1 - b2**tt)).sqrt() + self.adam_eps)
                    p.index_add_(0, idx, -lr * upd)
                self.n_updates += 1

            def info(self):
                return {**super().info(), "type": "adam"}

        return {"optimizer_class": Adam}
