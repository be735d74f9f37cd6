"""K6 hard-coded / silently ignored / silently capped hyperparameter mutants (defects, docs/checks.md: KG-1, TF-5,
GP-9, a silent n_sample cap, a batch size capped at the catalogue)."""

from __future__ import annotations

from typing import Any

from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant


@mutant("mutant:hidden_size_hardcoded", defect="KG-1", kind="K6", caught_by=("HP-1", "HP-2"), also_fails=("IN-1",),
        collateral="IN-1: gate blocks are found from the configured layer size, which the weights do not have")  # fmt: skip
class HiddenSizeHardcoded(MutantAdapter):
    """The GRU has 100 units whatever ``layers`` says (KG-1: KerasGRU4Rec hard-codes GRU(100))."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import GRU4RecModel

        class Model(GRU4RecModel):
            def __init__(self, n_items, layers, embedding, constrained_embedding, generator, device="cpu"):
                super().__init__(n_items, [100], embedding, constrained_embedding, generator, device)

        return {"model_class": Model}


@mutant("mutant:batch_size_hardcoded", defect="TF-5", kind="K6", caught_by=("HP-3",), also_fails=("EB-4",),
        collateral="EB-4: the trace shows 50 active lanes where batch_size=8 was asked")  # fmt: skip
class BatchSizeHardcoded(MutantAdapter):
    """The session-parallel minibatch always has 50 lanes whatever ``batch_size`` says (TF-5: batch_size fixed
    at 50 in GRU4Rec_TensorFlow's Args; the loss is still divided by the configured value)."""

    lanes = 50

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import SessionParallelIterator

        lanes = cls.lanes

        class Iterator(SessionParallelIterator):
            def __init__(self, data, n_lanes, stop_below_two_lanes):
                super().__init__(data, min(lanes, data.n_sessions), stop_below_two_lanes)

        return {"iterator_class": Iterator}


@mutant("mutant:batch_size_capped_at_catalogue", kind="K6", caught_by=("HP-1",),
        defect="batch size silently capped at the catalogue size (as Torch-GRU4Rec's DataGenerator; sibling of "
        "TF-5's hard-coded batch size)")  # fmt: skip
class BatchSizeCappedAtCatalogue(MutantAdapter):
    """``batch_size`` becomes min(batch_size, n_items) at fit time (the lanes and the loss's divisor alike): a cap
    that acts only when the asked batch exceeds the number of items, so on a 20-item catalogue 32, 128 and 256 all
    train as 20 while 16 behaves as asked. HP-1 must call it a cap, not a hard-coded value (the range case's small
    value 32 is capped too; only the small pair's 16 acts)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import GRU4Rec

        def fit(self, data, *args, **kwargs):
            n_items = int(data[kwargs.get("item_key", "ItemId")].nunique())
            self._hp["batch_size"] = min(int(self._hp["batch_size"]), n_items)
            return GRU4Rec.fit(self, data, *args, **kwargs)

        return {"fit": fit}


@mutant("mutant:undeclared_momentum_accepted", defect="GP-9", kind="K6", caught_by=("HP-4", "OP-4"))
class UndeclaredMomentumAccepted(MutantAdapter):
    """The implementation has no Adagrad momentum and does not declare it, yet ``momentum`` is accepted and
    silently dropped instead of refused (GP-9: GRU4REC-pytorch accepts --momentum and ignores it)."""

    def capabilities(self) -> dict[str, Any]:
        caps = super().capabilities()
        caps["adagrad_momentum"] = False
        caps["hyperparameters"] = {k: v for k, v in caps["hyperparameters"].items() if k != "momentum"}
        return caps

    def build(self, seed: int, **hparams: Any) -> None:
        hparams.pop("momentum", None)  # the defect: accepted and dropped
        super().build(seed, **hparams)

    @classmethod
    def gru_overrides(cls):
        return {}


@mutant("mutant:n_sample_clamped", kind="K6", caught_by=("HP-1", "HP-2"), also_fails=("MC-1", "MC-2", "MC-3"),
        defect="silent n_sample cap (a size clamped inside its range; sibling of KG-1's hard-coded size)",
        collateral="MC-1..3: the study's n_sample=2048 trains with 1024 negatives, which may move the metrics")  # fmt: skip
class NSampleClamped(MutantAdapter):
    """The sampler silently clamps ``n_sample`` to 1024 extra negatives, so the official 2048 (and anything above)
    trains with 1024 while 16 or 512 behave as asked: a cap that a check of small values only never meets."""

    cap = 1024

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import SampleCache

        cap = cls.cap

        class Sampler(SampleCache):
            def __init__(self, supports, n_sample, sample_alpha, cache_max_size, generator, device):
                super().__init__(supports, min(int(n_sample), cap), sample_alpha, cache_max_size, generator, device)

        return {"sampler_class": Sampler}
