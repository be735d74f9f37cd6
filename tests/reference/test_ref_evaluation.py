"""Evaluation of the reference GRU4Rec (docs/algorithm.md, 'Evaluation protocol'): ranks, tie modes, invariances, errors."""

import numpy as np
import pandas as pd
import pytest
from ref_testdata import lag1_sessions

from gru4rec_conformance.reference.gru4rec import (
    GRU4Rec,
    evaluate_prefix_scorer,
    evaluate_scores,
    metrics_from_ranks,
    rank,
)
from gru4rec_conformance.reference.gru4rec.evaluation import prediction_points


@pytest.fixture(scope="module")
def trained():
    g = GRU4Rec(layers=[24], batch_size=16, n_sample=8, learning_rate=0.1, n_epochs=2, dropout_p_hidden=0.1)
    g.fit(lag1_sessions())
    return g


def _brute_rank(row, t, mode):
    gt = sum(1 for s in row if s > row[t])
    eq = sum(1 for s in row if s == row[t])
    return {"standard": 1 + gt, "conservative": gt + eq, "median": 1 + gt + 0.5 * (eq - 1)}[mode]


@pytest.mark.parametrize("mode", ["standard", "conservative", "median"])
def test_tie_modes_on_planted_ties(mode):
    rng = np.random.default_rng(0)
    S = rng.integers(0, 6, size=(50, 12)).astype(np.float32)  # many ties
    T = rng.integers(0, 12, size=50)
    r = rank(S, T, mode)
    np.testing.assert_array_equal(r, [_brute_rank(S[i], T[i], mode) for i in range(50)])


def test_all_equal_scores_rank_last_in_conservative_mode():
    S = np.zeros((3, 10), dtype=np.float32)
    assert list(rank(S, [0, 4, 9], "conservative")) == [10, 10, 10]
    assert list(rank(S, [0, 4, 9], "standard")) == [1, 1, 1]
    assert list(rank(S, [0, 4, 9], "median")) == [5.5, 5.5, 5.5]


def test_cutoff_is_rank_at_most_n():
    m = metrics_from_ranks(np.array([1.0, 5.0, 6.0, 20.0, 21.0]), cutoffs=(5, 20))
    assert m["recall@5"] == 2 / 5 and m["recall@20"] == 4 / 5
    assert m["mrr@5"] == pytest.approx((1 + 1 / 5) / 5)
    assert m["mrr@20"] == pytest.approx((1 + 1 / 5 + 1 / 6 + 1 / 20) / 5)
    with pytest.raises(ValueError, match="no test event"):
        metrics_from_ranks(np.array([]), cutoffs=(5,))


def test_nan_scores_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        rank(np.array([[0.0, np.nan]]), [0], "standard")


@pytest.mark.parametrize("mode", ["conservative", "standard", "median"])
def test_evaluation_batch_size_invariance(trained, lag1_test, mode):
    res = [trained.evaluate(lag1_test, cutoffs=(1, 5, 20), batch_size=b, mode=mode) for b in (1, 7, 50, 512)]
    assert all(r == res[0] for r in res[1:])
    assert res[0]["n_events"] == len(lag1_test) - lag1_test.SessionId.nunique()


@pytest.mark.parametrize("b", [1, 3, 7])
def test_stream_equals_fresh_state_scoring(trained, lag1_test, b):
    """SR-1 on the reference itself: its own inference loop ≡ scoring each prefix from a zero state."""
    rows = list(trained.score_stream(lag1_test, batch_size=b))
    sess, pos, prefixes, targets = prediction_points(lag1_test, trained.item_ids())
    fresh = trained.score_prefixes(prefixes)
    key = {(s, p): i for i, (s, p) in enumerate(zip(sess, pos))}
    assert len(rows) == len(key)
    for s, p, target, scores in rows:
        i = key[(s, p)]
        assert trained.item_ids()[targets[i]] == target
        np.testing.assert_allclose(scores, fresh[i], rtol=1e-4, atol=1e-5)
        assert np.argsort(-scores, kind="stable")[:5].tolist() == np.argsort(-fresh[i], kind="stable")[:5].tolist()


def test_prefix_scorer_evaluator_matches_own_evaluator(trained, lag1_test):
    own = trained.evaluate(lag1_test, cutoffs=(1, 5, 10, 20))
    generic = evaluate_prefix_scorer(trained.score_prefixes, trained.item_ids(), lag1_test, cutoffs=(1, 5, 10, 20))
    assert own == pytest.approx(generic, rel=1e-12)


def test_unknown_items_are_dropped_before_sequences_form(trained, lag1_test):
    """EV-2: unknown items are removed (A, X, B becomes A → B), never raised on."""
    rng = np.random.default_rng(4)
    noisy = lag1_test.copy()
    pick = rng.random(len(noisy)) < 0.05
    noisy.loc[pick, "ItemId"] = 999_999 + np.arange(pick.sum())
    removed = noisy[~pick]
    assert trained.evaluate(noisy) == trained.evaluate(removed)
    # a session reduced to one known event contributes nothing
    df = pd.DataFrame(
        {"SessionId": [1, 1, 1, 2, 2], "ItemId": [1000, 424242, 1001, 1003, 424243], "Time": [0, 1, 2, 3, 4]}
    )
    assert trained.evaluate(df, cutoffs=(1,))["n_events"] == 1
    s = [r[:3] for r in trained.score_stream(df)]
    assert s == [(1, 1, 1001)]


def test_no_known_test_event_is_a_clear_error(trained):
    df = pd.DataFrame({"SessionId": [1, 1, 2], "ItemId": [5, 6, 7], "Time": [0, 1, 2]})
    with pytest.raises(ValueError, match="no event to evaluate"):
        trained.evaluate(df)
    with pytest.raises(ValueError, match="no event to evaluate"):
        list(trained.score_stream(df))
    with pytest.raises(ValueError, match="no test event"):
        evaluate_prefix_scorer(trained.score_prefixes, trained.item_ids(), df)


def test_bad_evaluation_arguments(trained, lag1_test):
    with pytest.raises(ValueError, match="mode"):
        trained.evaluate(lag1_test, mode="optimistic")
    with pytest.raises(ValueError, match="cutoffs"):
        trained.evaluate(lag1_test, cutoffs=(0,))
    with pytest.raises(ValueError, match="ItemId"):
        trained.evaluate(lag1_test.rename(columns={"ItemId": "item"}))


def test_score_prefixes_drops_unknown_items_and_scores_empty_prefix_from_zero_state(trained):
    a = trained.score_prefixes([[1000, 1001], [1000, 555555, 1001], [], [777777]])
    np.testing.assert_array_equal(a[0], a[1])
    np.testing.assert_array_equal(a[2], a[3])
    np.testing.assert_allclose(a[2], trained.get_weights()["By"], rtol=0, atol=0)
    assert a.dtype == np.float32 and a.shape == (4, len(trained.item_ids()))


def test_evaluate_scores_on_matrix():
    S = np.array([[3.0, 1.0, 2.0], [1.0, 1.0, 1.0]])
    m = evaluate_scores(S, [2, 1], cutoffs=(1, 2), mode="conservative")
    assert m == {"recall@1": 0.0, "mrr@1": 0.0, "recall@2": 0.5, "mrr@2": 0.25, "n_events": 2}


def test_model_trained_without_samples_is_evaluated_on_every_event(lag1_test):
    """Deliberate difference: the port's evaluator stops with fewer than two lanes when n_sample = 0."""
    g = GRU4Rec(layers=[8], batch_size=8, n_sample=0, n_epochs=1)
    g.fit(lag1_sessions(n_sessions=40))
    tail = pd.DataFrame(
        {"SessionId": 99_999, "ItemId": [1000 + i % 20 for i in range(15)], "Time": 5e6 + np.arange(15)}
    )
    test = pd.concat([lag1_test, tail], ignore_index=True)
    for b in (1, 4, 512):
        assert g.evaluate(test, batch_size=b)["n_events"] == len(test) - test.SessionId.nunique()
