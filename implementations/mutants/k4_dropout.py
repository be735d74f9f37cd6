"""K4 dropout mutants (defects, docs/checks.md: TF-1, RP-4, GP-7)."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant


@mutant("mutant:dropout_keep_prob", defect="TF-1", kind="K4", caught_by=("DO-1", "DO-2", "DO-3"), also_fails=("*",),
        collateral="every check that trains with dropout 0 (keep probability 0 gives NaN), as upstream "
        "GRU4Rec_TensorFlow cannot run with --dropout 0")  # fmt: skip
class DropoutKeepProb(MutantAdapter):
    """The dropout value is used as a keep probability: ``dropout_p_hidden=0.2`` keeps 20% of the units, and a
    rate of 0 keeps nothing (0/0 = NaN) (TF-1, TensorFlow's ``output_keep_prob``)."""

    @classmethod
    def gru_overrides(cls):
        import torch

        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def dropout_mask(self, shape, p, generator):
                m = torch.empty(shape, dtype=torch.float32, device=self.device)
                m.bernoulli_(float(p), generator=generator)
                return m.div_(float(p)) if p > 0 else m.div_(0.0)

        return {"model_class": Model}


@mutant("mutant:shared_dropout", defect="RP-4", kind="K4", caught_by=("DO-3", "DO-4", "HP-1"))
class SharedDropout(MutantAdapter):
    """One dropout value serves both the embedding and the hidden dropout: ``dropout_p_hidden`` is used for the
    embedding too and ``dropout_p_embed`` is ignored (RP-4)."""

    @classmethod
    def gru_overrides(cls):
        def _dropout_rates(self):
            return self._hp["dropout_p_hidden"], self._hp["dropout_p_hidden"]

        return {"_dropout_rates": _dropout_rates}


@mutant("mutant:no_hidden_dropout_single_layer", defect="GP-7", kind="K4", caught_by=("DO-2", "DO-3", "HP-1"))
class NoHiddenDropoutSingleLayer(MutantAdapter):
    """Hidden dropout acts only between stacked GRU layers (``torch.nn.GRU(dropout=...)``), so it never reaches
    the last layer's output and is a no-op for one layer (GP-7)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def forward_train(self, x, y, H, p_embed, p_hidden, generator, masks=None, capture=False, rows=None):
                if masks is None:
                    b = x.shape[0]
                    width = self.layers[0] if self.mode == "none" else self.n_input
                    masks = {"embed": self.dropout_mask((b, width), p_embed, generator)}
                    for l in range(self.start, len(self.layers) - 1):  # not the last layer
                        masks[f"hidden.{l}"] = self.dropout_mask((b, self.layers[l]), p_hidden, generator)
                return super().forward_train(
                    x, y, H, p_embed, p_hidden, generator, masks=masks, capture=capture, rows=rows
                )

        return {"model_class": Model}
