"""K8 evaluation mutants (defects, docs/checks.md: TF-6, GP-12/KG-4 in evaluation, the `<=` cutoff fix of
the TensorFlow fork (docs/study.md, 'Notes on single defects'), evaluation-batch dependence, id mapping)."""

from __future__ import annotations

from gru4rec_conformance.implementations.mutants import MutantAdapter, batch_evaluator, mutant


@mutant("mutant:unknown_item_crash", defect="TF-6", kind="K8", caught_by=("EV-2",))
class UnknownItemCrash(MutantAdapter):
    """Evaluation maps test items through the training item map without filtering and fails on an unseen item
    (TF-6)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import SessionParallelEvaluator

        class Evaluator(SessionParallelEvaluator):
            def prepare(self, test_df, item_key, session_key, time_key):
                unknown = ~test_df[item_key].isin(self.gru.item_ids())
                if unknown.any():
                    raise KeyError(f"item {test_df[item_key][unknown].iloc[0]} is not in the item map")
                return super().prepare(test_df, item_key, session_key, time_key)

        return {"evaluator_class": Evaluator}


@mutant("mutant:recall_cutoff_off_by_one", defect="rank < N (TF fork fix `<=`, docs/study.md)", kind="K8",
        caught_by=("EV-1",))  # fmt: skip
class RecallCutoffOffByOne(MutantAdapter):
    """A hit is counted when rank < N instead of rank ≤ N (the legacy Theano baseline evaluator; fixed in the
    study's TensorFlow fork, docs/study.md, 'Notes on single defects')."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import SessionParallelEvaluator

        class Evaluator(SessionParallelEvaluator):
            def hits(self, ranks, cutoff):
                return ranks < cutoff

        return {"evaluator_class": Evaluator}


@mutant("mutant:eval_batch_dependent",
        defect="evaluation batch-size dependence (EV-4; cf. the port's float32 MRR accumulation)", kind="K8",
        caught_by=("EV-4",))  # fmt: skip
class EvalBatchDependent(MutantAdapter):
    """The evaluator averages per-minibatch metrics instead of per-event ones, so the (smaller) tail
    minibatches weigh more and the metrics change with the evaluation batch size."""

    @classmethod
    def gru_overrides(cls):
        import numpy as np

        from gru4rec_conformance.reference.gru4rec.evaluation import metrics_from_ranks, rank

        def metrics(evaluator, batches, cutoffs, mode):
            per_batch = [
                metrics_from_ranks(rank(scores, targets, mode), cutoffs, evaluator.hits)
                for _, _, targets, scores in batches
            ]
            out = {k: float(np.mean([m[k] for m in per_batch])) for k in per_batch[0] if k != "n_events"}
            out["n_events"] = sum(m["n_events"] for m in per_batch)
            return out

        return {"evaluator_class": batch_evaluator(metrics)}


@mutant("mutant:eval_drops_tail", defect="GP-12, KG-4", kind="K8", caught_by=("EV-3",))
class EvalDropsTail(MutantAdapter):
    """The evaluation loop stops as soon as one lane cannot be refilled, so the remainders of the other test
    sessions are never evaluated (GP-12, KG-4 in evaluation)."""

    @classmethod
    def gru_overrides(cls):
        from gru4rec_conformance.reference.gru4rec import SessionParallelEvaluator, SessionParallelIterator

        class Iterator(SessionParallelIterator):
            def should_stop(self, n_valid, n_lanes_before):
                return n_valid < n_lanes_before or super().should_stop(n_valid, n_lanes_before)

        class Evaluator(SessionParallelEvaluator):
            iterator_class = Iterator

        return {"evaluator_class": Evaluator}


@mutant("mutant:item_map_misaligned", defect="id mapping (docs/implementations.md, 'Adapter rules')", kind="K8",
        caught_by=("EV-5",), also_fails=("*",),
        collateral="every check that maps score columns to item ids through item_ids()")  # fmt: skip
class ItemMapMisaligned(MutantAdapter):
    """``item_ids()`` lists the items sorted by id while the score columns follow the item map (order of first
    appearance): every score is attributed to the wrong item (an id-mapping defect; ``Adapter.item_ids`` in
    implementations/base.py: ``item_ids()`` is the column order of score matrices)."""

    @classmethod
    def gru_overrides(cls):
        import numpy as np

        from gru4rec_conformance.reference.gru4rec import GRU4Rec

        def item_ids(self):
            return np.sort(GRU4Rec.item_ids(self))

        return {"item_ids": item_ids}


@mutant("mutant:eval_optimistic_ties",
        defect="tie policy ignored (optimistic ranking of tied scores, EV-1 all-equal case)", kind="K8",
        caught_by=("EV-1",))  # fmt: skip
class EvalOptimisticTies(MutantAdapter):
    """The evaluator ranks a target by the number of strictly higher scores plus one, whatever tie mode it
    declares (``conservative``): tied items are counted below the target, so a model that scores many items
    alike (e.g. a collapsed one) looks good (EV-1's all-equal-scores case, docs/checks.md; the official
    ``batch_eval`` counts ties against the target in its default conservative mode)."""

    @classmethod
    def gru_overrides(cls):
        import numpy as np

        from gru4rec_conformance.reference.gru4rec.evaluation import metrics_from_ranks, rank

        def metrics(evaluator, batches, cutoffs, mode):
            ranks = [
                rank(scores, targets, "standard") for _, _, targets, scores in batches
            ]  # the declared mode ignored
            return metrics_from_ranks(np.concatenate(ranks), cutoffs, evaluator.hits)

        return {"evaluator_class": batch_evaluator(metrics)}


def _session_columns(gru, test_df, item_key, session_key, time_key) -> dict:
    """Session id → the item columns of its known events in time order (the positions ``batches`` yields)."""
    import numpy as np
    import pandas as pd

    ids = pd.Index(np.asarray(gru.item_ids()))
    df = test_df[test_df[item_key].isin(ids)].sort_values([session_key, time_key], kind="stable")
    cols = ids.get_indexer(df[item_key].to_numpy())
    return {sid: cols[idx] for sid, idx in df.groupby(session_key, sort=False).indices.items()}


def _masking_evaluator(which: str):
    """A SessionParallelEvaluator whose loop sets columns of the session to -1e30 (a finite -inf) before anything ranks them:
    ``"session"``: every item of the session, earlier and later ones (the target among them); ``"input"``: the
    input item only."""
    from gru4rec_conformance.reference.gru4rec import SessionParallelEvaluator

    class Evaluator(SessionParallelEvaluator):
        def batches(self, test_df, batch_size, item_key="ItemId", session_key="SessionId", time_key="Time"):
            import torch

            sessions = _session_columns(self.gru, test_df, item_key, session_key, time_key)
            for sess, pos, targets, scores in super().batches(test_df, batch_size, item_key, session_key, time_key):
                scores = scores.clone()
                for lane, (sid, p) in enumerate(zip(sess.tolist(), pos.tolist())):
                    cols = sessions[sid] if which == "session" else sessions[sid][p - 1 : p]
                    scores[lane, torch.as_tensor(cols, device=scores.device)] = -1e30  # finite: the harness refuses inf
                yield sess, pos, targets, scores

    return Evaluator


@mutant("mutant:eval_masks_session",
        defect="evaluator masks the session's past and future items (sibling of GP-1's state leak)", kind="K8",
        caught_by=("EV-1", "SR-1", "SR-2"))  # fmt: skip
class EvalMasksSession(MutantAdapter):
    """The own inference loop sets every item of the session, earlier and later ones, to -inf before ranking (a
    "do not recommend what the session holds" filter that also hides the future targets). Its symptom, the loop
    disagreeing with fresh-state scoring, resembles a hidden-state leak (SR-1); the diagnosis names the masking."""

    @classmethod
    def gru_overrides(cls):
        return {"evaluator_class": _masking_evaluator("session")}


@mutant("mutant:eval_removes_input_item",
        defect="evaluator removes the input item from the ranking (sibling of the tie-mode defect)", kind="K8",
        caught_by=("EV-1", "SR-1", "SR-2"))  # fmt: skip
class EvalRemovesInputItem(MutantAdapter):
    """The own inference loop removes the input item from the ranking (sets its column to -inf): repeated items
    can never be hit, and every other item moves up one rank. Its symptom, the evaluator's metrics disagreeing
    with the suite's, resembles an ignored tie mode (EV-1); the diagnosis names the removal."""

    @classmethod
    def gru_overrides(cls):
        return {"evaluator_class": _masking_evaluator("input")}
