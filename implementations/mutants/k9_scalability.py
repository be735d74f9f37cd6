"""K9 scalability mutant (defects, docs/checks.md: GP-10, TG-2, RP-7/RP-8 cost)."""

from __future__ import annotations

from gru4rec_conformance.implementations.base import Adapter
from gru4rec_conformance.implementations.mutants import MutantAdapter
from gru4rec_conformance.implementations.registry import register


@register
class FullCatalogueScoring(MutantAdapter):
    """Every training step computes the scores of the whole catalogue and then picks the sampled columns; the
    loss is unchanged (the transform comes after the selection), only the cost is O(n_items) (TG-2, GP-10)."""

    name = "mutant:full_catalogue_scoring"
    defect = "TG-2, GP-10"
    kind = "K9"
    caught_by = ("SC-2", "SC-1")

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def score_train(self, h, y, O, Bo):
                if y.ndim != 1:
                    return super().score_train(h, y, O, Bo)
                return self.score_all(h)[:, y]

        return {"model_class": Model}


@register
class FullCatalogueScoringBlackBox(FullCatalogueScoring):
    """:class:`FullCatalogueScoring` without the ``train_step`` hook (the protocol's default, which raises
    Unsupported): SC-1 must catch it black-box, from the CPU time of ``fit`` at two catalogue sizes."""

    name = "mutant:full_catalogue_scoring_blackbox"
    caught_by = ("SC-2", "SC-1")
    train_step = Adapter.train_step
