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
