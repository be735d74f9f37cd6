"""The harness's validation of adapter results (conformance/_harness/validation.py) beyond the corpus rows: it is
transparent for valid results, keeps score_stream lazy, follows re-fits, and leaves other families alone."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.conformance._harness.validation import AdapterOutputError, CheckedAdapter, checked
from gru4rec_conformance.implementations.base import FitReport, Unsupported


class Counting:
    """A minimal GRU4Rec-like adapter: one column per training item, constant scores."""

    def __init__(self):
        self.items = np.array([], dtype=np.int64)
        self.calls = []

    def build(self, seed, **hparams):
        self.calls.append("build")

    def fit(self, train_df, n_epochs=None):
        self.items = np.unique(train_df["ItemId"].to_numpy())
        return FitReport([1.0], [1], [len(train_df)], [0.0])

    def item_ids(self):
        self.calls.append("item_ids")
        return self.items

    def score_prefixes(self, prefixes):
        return np.zeros((len(prefixes), len(self.items)), dtype=np.float32)

    def score_stream(self, test_df, batch_size):
        for k, item in enumerate(test_df["ItemId"]):
            yield 1, k + 1, int(item), np.zeros(len(self.items))

    def optimizer_info(self):
        raise Unsupported("optimizer_info")


def frame(items):
    return pd.DataFrame({"SessionId": [1] * len(items), "ItemId": items, "Time": range(len(items))})


def test_valid_results_pass_through_unchanged():
    inner = Counting()
    model = checked(inner, "counting", "gru4rec")
    assert isinstance(model, CheckedAdapter) and model.wrapped is inner
    model.build(seed=1)
    model.fit(frame([5, 6, 7]))
    scores = model.score_prefixes([[5], []])
    assert scores.shape == (2, 3) and scores.dtype == np.float32
    assert model.calls.count("item_ids") == 1  # validated once per fit, then cached
    model.score_prefixes([[6]])
    assert model.calls.count("item_ids") == 1
    with pytest.raises(Unsupported):  # the adapter's own exceptions pass through
        model.optimizer_info()
    assert checked(model, "counting", "gru4rec") is model


def test_score_stream_stays_lazy_and_is_validated_row_by_row():
    model = checked(Counting(), "counting", "gru4rec")
    model.fit(frame([5, 6, 7]))
    stream = model.score_stream(frame([5, 6, 99]), 2)
    assert isinstance(stream, types.GeneratorType)
    assert next(stream)[2] == 5 and next(stream)[2] == 6
    with pytest.raises(AdapterOutputError, match=r"returned row 2 with target item 99 from score_stream\(\)"):
        next(stream)


def test_a_refit_on_other_items_is_followed():
    model = checked(Counting(), "counting", "gru4rec")
    model.fit(frame([5, 6, 7]))
    assert model.score_prefixes([[5]]).shape == (1, 3)
    model.fit(frame([1, 2, 3, 4]))
    assert model.score_prefixes([[1]]).shape == (1, 4)
    assert [row[2] for row in model.score_stream(frame([1, 4]), 1)] == [1, 4]
    model.fit(frame([11, 12, 13, 14]))  # as many items as before, other ids: the stream follows them
    assert [row[2] for row in model.score_stream(frame([11, 14]), 1)] == [11, 14]
    with pytest.raises(AdapterOutputError, match="target item 4 from score_stream"):
        list(model.score_stream(frame([4]), 1))
    model.fit(frame([1, 2, 3, 4]))
    model.wrapped.items = np.array([1, 2, 3, 4, 5])  # the adapter now claims an item it was not trained on
    with pytest.raises(AdapterOutputError, match=r"not in the training data of the last fit\(\), e\.g\. \[5\]"):
        model.item_ids()


def test_other_families_are_not_wrapped():
    inner = Counting()
    assert checked(inner, "x", "finetuner") is inner
