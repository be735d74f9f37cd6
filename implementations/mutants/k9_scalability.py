"""K9 scalability mutant (defects, docs/checks.md: GP-10, TG-2, RP-7/RP-8 cost)."""

from __future__ import annotations

from gru4rec_conformance.implementations.base import Adapter
from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant


@mutant("mutant:full_catalogue_scoring", defect="TG-2, GP-10", kind="K9", caught_by=("SC-2", "SC-1"))
class FullCatalogueScoring(MutantAdapter):
    """Every training step computes the scores of the whole catalogue and then picks the sampled columns; the
    loss is unchanged (the transform comes after the selection), only the cost is O(n_items) (TG-2, GP-10)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def score_train(self, h, y, O, Bo):
                if y.ndim != 1:
                    return super().score_train(h, y, O, Bo)
                return self.score_all(h)[:, y]

        return {"model_class": Model}


@mutant("mutant:full_catalogue_scoring_blackbox", caught_by=("SC-2", "SC-1"))
class FullCatalogueScoringBlackBox(FullCatalogueScoring):
    """:class:`FullCatalogueScoring` without the ``train_step`` hook (the protocol's default, which raises
    Unsupported): SC-1 must catch it black-box, from the CPU time of ``fit`` at two catalogue sizes."""

    train_step = Adapter.train_step


@mutant("mutant:dense_item_table_update",
        defect="dense item-table gradient and optimizer update every step (sibling of TG-2's full scoring)", kind="K9",
        caught_by=("SC-1",))  # fmt: skip
class DenseItemTableUpdate(MutantAdapter):
    """Every training step turns the row-sparse gradients of the item tables (output weights and bias, input
    embedding) into dense gradients of the whole table and runs a dense Adagrad update over every row, as an
    embedding without sparse gradients under a dense optimizer does. The weights are the reference's (a zero
    gradient row gets a zero step; with momentum the touched rows are then updated lazily, as in the reference),
    only the cost is O(n_items) per step, outside the forward pass. Its symptom in SC-1, step time growing with
    the catalogue, resembles full-catalogue scoring (mutant:full_catalogue_scoring) while SC-2 passes; the
    diagnosis names the dense update."""

    @classmethod
    def gru_overrides(cls):
        import torch

        from gru4rec_conformance.reference.gru4rec.optim import IndexedAdagradM

        class Optimizer(IndexedAdagradM):
            @torch.no_grad()
            def update_rows(self, name, idx, val, clr):
                p = self.params[name]
                dense = torch.zeros_like(p).index_add_(0, idx, val.reshape(-1, *p.shape[1:]))
                if self.momentum == 0:
                    self.update_dense(name, dense, clr)
                    return
                # the dense pass over the whole table (its cost), then the lazy rows (the reference's values)
                torch.add(self.acc[name], dense * dense).add_(self.eps).sqrt_()
                super().update_rows(name, idx, val, clr)

        return {"optimizer_class": Optimizer}


@mutant("mutant:full_catalogue_scoring_default_sizes", caught_by=("SC-1",))
class FullCatalogueScoringDefaultSizes(FullCatalogueScoringBlackBox):
    """:class:`FullCatalogueScoringBlackBox` that also declares neither ``batch_size`` nor ``layers`` (it trains at
    its own defaults, 64 and [100], as several third-party implementations do): SC-1 must still run, at those
    sizes, and catch the full scoring black-box."""

    def declared_hyperparameters(self) -> dict:
        return {k: v for k, v in super().declared_hyperparameters().items() if k not in ("batch_size", "layers")}


@mutant("mutant:full_catalogue_scoring_fixed_width", caught_by=("SC-1",))
class FullCatalogueScoringFixedWidth(FullCatalogueScoringDefaultSizes):
    """:class:`FullCatalogueScoring` with a batch width fixed by the code: ``batch_size`` is not declared (the model
    trains at its own 64 lanes) and ``train_step`` refuses any other number of lanes, as a model built on
    fixed-shape placeholders does (GRU4Rec_TensorFlow at OOB). SC-1's 32-lane probe cannot run; the check must
    still measure the cost, black-box through ``fit``, and catch the full scoring instead of skipping."""

    def train_step(self, batch_inputs, batch_targets, hidden=None):
        from gru4rec_conformance.implementations.base import Unsupported

        if len(batch_inputs) != 64:
            raise Unsupported("batch_size", f"{len(batch_inputs)} lanes asked; the model's batch width is fixed at 64")
        return FullCatalogueScoring.train_step(self, batch_inputs, batch_targets, hidden)
