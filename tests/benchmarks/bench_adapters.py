"""A test adapter for the benchmark entry-point test: the adapter template's Markov chain, declaring (and ignoring)
the official GRU4Rec hyperparameters so that the benchmarks can build it with the study's parameters. Role
"example": never selected by ``--impl all``; not an implementation of GRU4Rec."""

from __future__ import annotations

from gru4rec_conformance.implementations.template import TemplateAdapter

OFFICIAL = {
    "layers": [100],
    "loss": "cross-entropy",
    "batch_size": 64,
    "dropout_p_embed": 0.0,
    "dropout_p_hidden": 0.0,
    "learning_rate": 0.05,
    "momentum": 0.0,
    "sample_alpha": 0.5,
    "n_sample": 2048,
    "embedding": 0,
    "constrained_embedding": True,
    "n_epochs": 1,
    "bpreg": 1.0,
    "elu_param": 0.5,
    "logq": 0.0,
}


class LenientMarkov(TemplateAdapter):
    """Markov chain that accepts every official hyperparameter name (and uses none of them)."""

    name = "lenient-markov"

    def capabilities(self):
        return {
            **super().capabilities(),
            "hyperparameters": dict(OFFICIAL),
            "shims": ["test adapter: accepts and ignores every GRU4Rec hyperparameter"],
        }


class SlowTorchMarkov(LenientMarkov):
    """The lenient Markov chain whose ``fit`` also runs a torch optimizer for ``steps`` steps of a small matrix
    product (~a second per 2,000 steps): a slow implementation for the per-epoch time limit's tests. It reports
    those steps in its FitReport."""

    name = "slow-torch-markov"
    steps = 20_000

    def fit(self, train_df, n_epochs=None):
        import torch

        rep = super().fit(train_df, n_epochs)
        w = torch.nn.Parameter(torch.randn(64, 64))
        opt = torch.optim.SGD([w], lr=1e-4)
        x = torch.randn(64, 64)
        for _ in range(self.steps):
            opt.zero_grad()
            (x @ w).square().mean().backward()
            opt.step()
        if rep.n_steps:
            rep.n_steps[0] = self.steps
        return rep
