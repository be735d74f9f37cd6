"""K7 epoch-boundary / batching mutants (defects, docs/checks.md: TF-9/GP-12, RP-6; KerasGRU4Rec's epoch
off-by-one, docs/study.md, 'Fix levels')."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant


@mutant("mutant:epoch_ends_early", defect="TF-9, GP-12", kind="K7", caught_by=("EB-1", "EB-2", "EB-4"),
        also_fails=("HP-3",),
        collateral="HP-3: the dropped tail leaves 284 steps for 2006 transitions at batch_size=7, below the bound; "
        "its diagnosis isolates the early end, not the batch size")  # fmt: skip
class EpochEndsEarly(MutantAdapter):
    """Training ends the epoch as soon as one lane cannot be refilled, dropping the remainders of the other
    lanes (TF-9; GP-12/KG-4 in training)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import SessionParallelIterator

        class Iterator(SessionParallelIterator):
            def should_stop(self, n_valid, n_lanes_before):
                return n_valid < n_lanes_before or super().should_stop(n_valid, n_lanes_before)

        return {"iterator_class": Iterator}


@mutant("mutant:padded_batches", defect="RP-6", kind="K7", caught_by=("EB-4", "HP-3"))
class PaddedBatches(MutantAdapter):
    """Not session-parallel: each minibatch is a fixed group of B whole sessions stepped until its longest one
    ends; finished lanes drop out and are never refilled, the state restarts per group (RP-6)."""

    @classmethod
    def gru_overrides(cls):
        import numpy as np

        from gru4rec_conformance.reference.gru4rec import Run, SessionParallelIterator

        class Iterator(SessionParallelIterator):
            def __iter__(self):
                d = self.data
                rows = self.n_lanes  # rows of the hidden state the trainer holds
                for s0 in range(0, d.n_sessions, self.n_lanes):
                    sess = d.order[s0 : s0 + self.n_lanes]
                    start, end = d.offsets[sess].copy(), d.offsets[sess + 1].copy()
                    ok = (end - start) > 1
                    sess, start, end = sess[ok], start[ok], end[ok]
                    # a new group: fresh rows (copies of row 0, then zeroed) for every session of the group
                    keep, reset = np.zeros(len(sess), dtype=np.int64), np.ones(len(sess), dtype=bool)
                    if s0 == 0 and len(sess) == rows:
                        keep, reset = None, None
                    while len(sess):
                        minlen = int((end - start).min())
                        block = d.items[start[None, :] + np.arange(minlen, dtype=np.int64)[:, None]]
                        yield Run(block[:-1], block[1:], keep, reset, sess.copy(), start - d.offsets[sess])
                        start = start + minlen - 1
                        alive = (end - start) > 1
                        keep = np.flatnonzero(alive) if not alive.all() else None
                        reset = None
                        sess, start, end = sess[alive], start[alive], end[alive]

        return {"iterator_class": Iterator}


@mutant("mutant:epochs_off_by_one", defect="KG epoch off-by-one (docs/study.md, 'Fix levels')", kind="K7",
        caught_by=("EB-3",), also_fails=("HP-1",),
        collateral="HP-1 trains 1 epoch, i.e. nothing here; its message says the failure may follow from EB-3 "
        "(tests/meta: test_hp1_attributes_untrained_model_to_eb3)")  # fmt: skip
class EpochsOffByOne(MutantAdapter):
    """Training runs one epoch fewer than asked (``range(1, epochs)``; KerasGRU4Rec, fixed unconditionally in the
    study's fork, docs/study.md, 'Fix levels')."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import GRU4Rec

        def fit(
            self,
            data,
            sample_cache_max_size=10_000_000,
            item_key="ItemId",
            session_key="SessionId",
            time_key="Time",
            n_epochs=None,
            trace=None,
        ):
            n = self._hp["n_epochs"] if n_epochs is None else int(n_epochs)
            return GRU4Rec.fit(
                self, data, sample_cache_max_size, item_key, session_key, time_key, n_epochs=max(n - 1, 0), trace=trace
            )

        return {"fit": fit}


@mutant("mutant:row_order_trusted", defect="BS-1", kind="K7", caught_by=("EB-5",))
class RowOrderTrusted(MutantAdapter):
    """The events of a session are taken in the order of the input rows: ``Time`` only places the session's
    start, not its events (``df.sort_values(session_key)`` without the time column). Identical to the reference
    on rows already sorted by (SessionId, Time), which is all the other checks feed (blind spot BS-1)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import GRU4Rec

        def _build(self, data, sample_cache_max_size, item_key, session_key, time_key):
            g = data.groupby(session_key, sort=False)
            # session start kept, events renumbered in row order (the defect)
            data = data.assign(**{time_key: g[time_key].transform("min") + g.cumcount()})
            GRU4Rec._build(self, data, sample_cache_max_size, item_key, session_key, time_key)

        return {"_build": _build}


@mutant("mutant:lanes_by_session_id", defect="BS-2", kind="K7", caught_by=("EB-6",))
class LanesBySessionId(MutantAdapter):
    """Sessions enter the minibatch lanes in session-id order instead of by their first event's time (no
    ``time_sort``, as GRU4REC-pytorch's default; docs/algorithm.md, 'Sorting and session order'). Identical to
    the reference wherever session ids follow start times, as in every builder's frame (blind spot BS-2)."""

    @classmethod
    def gru_overrides(cls):
        import dataclasses

        import numpy as np

        from gru4rec_conformance.reference.gru4rec import SessionParallelIterator

        class Iterator(SessionParallelIterator):
            def __init__(self, data, n_lanes, stop_below_two_lanes):
                data = dataclasses.replace(data, order=np.arange(data.n_sessions, dtype=np.int64))
                super().__init__(data, n_lanes, stop_below_two_lanes)

        return {"iterator_class": Iterator}
