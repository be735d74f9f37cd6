"""Broken adapters of the bad-input corpus (tests/bad_inputs): the reference adapter with one protocol violation
each, loaded by import path (``--impl bad_input_adapters:WrongShape``; this folder is put on PYTHONPATH).

They are not registered and never selected by ``--impl all``; each row of ``bad_input_corpus.CASES`` that uses
one names the check that must fail and the message the harness gives (conformance/_harness/validation.py).
"""

from __future__ import annotations

import numpy as np

from gru4rec_conformance.implementations.base import Adapter
from gru4rec_conformance.implementations.reference import ReferenceAdapter


class _Broken(ReferenceAdapter):
    role = "example"
    description = "bad-input corpus: the reference with one protocol violation"


class WrongShape(_Broken):
    """score_prefixes drops the last item's column."""

    name = "bad:wrong_shape"

    def score_prefixes(self, prefixes):
        return super().score_prefixes(prefixes)[:, :-1]


class NaNScores(_Broken):
    """score_prefixes returns NaN for one item."""

    name = "bad:nan_scores"

    def score_prefixes(self, prefixes):
        s = super().score_prefixes(prefixes).copy()
        s[:, 3] = np.nan
        return s


class InfScores(_Broken):
    """score_prefixes returns +inf for one prefix."""

    name = "bad:inf_scores"

    def score_prefixes(self, prefixes):
        s = super().score_prefixes(prefixes).copy()
        s[-1, :] = np.inf
        return s


class ScoresNone(_Broken):
    """score_prefixes returns None."""

    name = "bad:scores_none"

    def score_prefixes(self, prefixes):
        super().score_prefixes(prefixes)
        return None


class UntrainedItemIds(_Broken):
    """item_ids() names ids the model was never trained on (shifted by 10**6; the scores keep their shape)."""

    name = "bad:untrained_ids"

    def item_ids(self):
        return super().item_ids() + 10**6


class DuplicateItemIds(_Broken):
    """item_ids() repeats its first id in place of its last."""

    name = "bad:duplicate_ids"

    def item_ids(self):
        ids = np.array(super().item_ids())
        ids[-1] = ids[0]
        return ids


class FitReturnsNone(_Broken):
    """fit() trains but returns None instead of a FitReport."""

    name = "bad:fit_none"

    def fit(self, train_df, n_epochs=None):
        super().fit(train_df, n_epochs)
        return None


class StreamUnknownTarget(_Broken):
    """score_stream yields target item ids the model was never trained on."""

    name = "bad:stream_target"

    def score_stream(self, test_df, batch_size):
        for sid, pos, target, row in super().score_stream(test_df, batch_size):
            yield sid, pos, target + 10**6, row


class StreamShortRows(_Broken):
    """score_stream yields 3-tuples (no scores row)."""

    name = "bad:stream_rows"

    def score_stream(self, test_df, batch_size):
        for sid, pos, target, _ in super().score_stream(test_df, batch_size):
            yield sid, pos, target


class UnknownCapability(_Broken):
    """capabilities() declares a field outside the closed vocabulary (a typo: 'logg')."""

    name = "bad:caps_unknown"

    def capabilities(self):
        return {**super().capabilities(), "logg": True}


class InconsistentCapabilities(_Broken):
    """capabilities() declares bpreg without the bpr-max loss."""

    name = "bad:caps_inconsistent"

    def capabilities(self):
        return {**super().capabilities(), "losses": ["cross-entropy"], "logq": False}


class CapabilitiesRaise(_Broken):
    """capabilities() raises (a KeyError from the adapter's own code)."""

    name = "bad:caps_raise"

    def capabilities(self):
        return {}["losses"]


class Unexchangeable(_Broken):
    """An isolated adapter whose score_prefixes returns an object array (cannot cross the worker boundary)."""

    name = "bad:unexchangeable"
    isolated = True

    def score_prefixes(self, prefixes):
        return np.array([object()] * len(prefixes), dtype=object)


class MissingScorePrefixes(Adapter):
    """An adapter class without the required score_prefixes (refused when --impl names it)."""

    name = "bad:missing_method"

    def capabilities(self):
        return {}

    def build(self, seed, **hparams):
        pass

    def fit(self, train_df, n_epochs=None):
        pass

    def item_ids(self):
        return []


class NotAnAdapter:
    """Not a subclass of implementations.base.AdapterBase."""

    name = "bad:not_an_adapter"
