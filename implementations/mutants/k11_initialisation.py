"""K11 initialisation mutant (defects, docs/checks.md: RP-3; GP-13 and TF-10 have the same symptom)."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant


@mutant("mutant:small_uniform_init", defect="RP-3", kind="K11", caught_by=("IN-1",), also_fails=("OP-1",),
        collateral="OP-1: tiny weights give tiny gradients, so no first Adagrad step reaches η")  # fmt: skip
class SmallUniformInit(MutantAdapter):
    """Every parameter, biases included, starts from U(−0.01, 0.01) (RP-3: recpack's ``init_weights``)."""

    @classmethod
    def gru_overrides(cls):
        import torch

        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def init_block(self, rows, cols, generator):
                return (torch.rand((rows, cols), generator=generator, dtype=torch.float32) * 2 - 1) * 0.01

            def init_bias(self, n, generator):
                return (torch.rand(n, generator=generator, dtype=torch.float32) * 2 - 1) * 0.01

        return {"model_class": Model}
