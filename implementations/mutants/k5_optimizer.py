"""K5 optimizer mutants (defects, docs/checks.md: TF-2, TF-3, TF-4/KG-2, GP-9/TG-3; BS-3..BS-5: machinery GRU4Rec
does not have, found by blind-spot trials)."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant


@mutant("mutant:adagrad_initial_accumulator", defect="TF-2", kind="K5", caught_by=("OP-1", "OP-2"))
class AdagradInitialAccumulator(MutantAdapter):
    """Adagrad starts from an accumulator of 0.1 (TensorFlow's default ``initial_accumulator_value``), which
    damps the early steps far below the learning rate (TF-2)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import IndexedAdagradM

        class Optimizer(IndexedAdagradM):
            initial_accumulator_value = 0.1

        return {"optimizer_class": Optimizer}


@mutant("mutant:lr_decay", defect="TF-3", kind="K5", caught_by=("OP-3",))
class LearningRateDecay(MutantAdapter):
    """The learning rate decays exponentially: ×0.96 per ``decay_steps`` updates, staircase (TF-3; TensorFlow
    used 10,000 steps, scaled here to 1,000 so that a CPU check reaches the first decay)."""

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


@mutant("mutant:momentum_ignored", defect="GP-9, TG-3", kind="K5", caught_by=("OP-4", "HP-1"))
class MomentumIgnored(MutantAdapter):
    """``momentum`` is declared and accepted but the optimizer runs without it (GP-9, TG-3: Adagrad built
    without the momentum argument)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import IndexedAdagradM

        class Optimizer(IndexedAdagradM):
            def __init__(self, params, learning_rate, momentum=0.0):
                super().__init__(params, learning_rate, 0.0)

        return {"optimizer_class": Optimizer}


@mutant("mutant:adam", defect="TF-4, KG-2", kind="K5", caught_by=("OP-2",))
class AdamOptimizer(MutantAdapter):
    """Adam (β = 0.9, 0.999, eps 1e-8, bias-corrected, lazy rows for the embedding tables) instead of Adagrad
    (TF-4, KG-2: GRU4Rec_TensorFlow and KerasGRU4Rec hard-code Adam)."""

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


def _transformed_grads_optimizer(transform):
    """An ``IndexedAdagradM`` subclass whose ``step`` first maps every gradient through ``transform(opt, name,
    grad, param, norm)``: ``grad`` a dense tensor or the values of a :class:`RowGrad` (then ``param`` holds only
    its rows), ``norm`` the global L2 norm of all gradients of the step. ``info()`` is the reference's: the
    machinery is hidden, as in the defects modelled (BS-3..BS-5)."""
    import torch

    from gru4rec_conformance.reference.gru4rec import IndexedAdagradM
    from gru4rec_conformance.reference.gru4rec.optim import RowGrad

    class Optimizer(IndexedAdagradM):
        @torch.no_grad()
        def step(self, grads):
            def values(g):
                return g.values if isinstance(g, RowGrad) else g.coalesce()._values() if g.is_sparse else g

            live = {k: g for k, g in grads.items() if g is not None}
            norm = float(torch.sqrt(sum((values(g).double() ** 2).sum() for g in live.values())))
            out = {}
            for name, g in grads.items():
                if g is None:
                    out[name] = None
                    continue
                if not isinstance(g, RowGrad) and g.is_sparse:
                    g = g.coalesce()
                    g = RowGrad(g._indices()[0], g._values())
                if isinstance(g, RowGrad):
                    out[name] = RowGrad(g.indices, transform(self, name, g.values, self.params[name][g.indices], norm))
                else:
                    out[name] = transform(self, name, g, self.params[name], norm)
            super().step(out)

    return Optimizer


@mutant("mutant:grad_norm_clipping", defect="BS-3", kind="K5", caught_by=("OP-5",))
class GradientNormClipping(MutantAdapter):
    """The gradients of every step are clipped to a global L2 norm of 1 (``clip_grad_norm_(params, 1.0)``, Keras
    ``clipnorm=1``), which GRU4Rec does not do; ``optimizer_info`` still reports no clipping. Adagrad's
    normalisation hides a rescaling that is the same at every step, so only steps with gradient norms above 1,
    changing from step to step, show it (blind spot BS-3)."""

    max_norm = 1.0

    @classmethod
    def gru_overrides(cls):
        max_norm = cls.max_norm

        def clip(opt, name, grad, param, norm):
            return grad * min(1.0, max_norm / (norm + 1e-6))

        return {"optimizer_class": _transformed_grads_optimizer(clip)}


@mutant("mutant:weight_decay", defect="BS-4", kind="K5", caught_by=("OP-5",))
class WeightDecay(MutantAdapter):
    """L2 weight decay 1e-4 is added to every gradient (torch ``Adagrad(weight_decay=1e-4)``; the rows of an
    item table only when they get a gradient), which GRU4Rec does not have; ``optimizer_info`` still reports 0
    (blind spot BS-4)."""

    weight_decay = 1e-4

    @classmethod
    def gru_overrides(cls):
        wd = cls.weight_decay

        def decay(opt, name, grad, param, norm):
            return grad + wd * param

        return {"optimizer_class": _transformed_grads_optimizer(decay)}


@mutant("mutant:gradient_noise", defect="BS-5", kind="K5", caught_by=("OP-5",))
class GradientNoise(MutantAdapter):
    """Annealed Gaussian noise is added to every gradient (Neelakantan et al.: variance 1e-4/(1 + t)^0.55 at
    update t), which GRU4Rec does not do (blind spot BS-5). The noise is drawn from a generator seeded by the
    model's ``seed``, as a framework's seeded global generator would be: the same seed repeats a run."""

    @classmethod
    def gru_overrides(cls):
        import torch

        def noise(opt, name, grad, param, norm):
            gen = opt.__dict__.setdefault("_noise_gen", torch.Generator(device=grad.device).manual_seed(opt.noise_seed))
            sigma = (1e-4 / (1 + opt.n_updates) ** 0.55) ** 0.5
            return grad + sigma * torch.randn(grad.shape, generator=gen, device=grad.device, dtype=grad.dtype)

        base = _transformed_grads_optimizer(noise)

        def optimizer_class(gru):
            """The optimizer class with the model's seed for its noise (the GRU builds it as
            ``self.optimizer_class(params, learning_rate, momentum)``)."""
            return type("NoisyAdagrad", (base,), {"noise_seed": int(gru._hp["seed"]) + 7})

        return {"optimizer_class": property(optimizer_class)}
