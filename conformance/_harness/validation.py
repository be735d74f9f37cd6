"""Validation of what adapters return, between the adapter and the checks (bad input: the adapter
protocol).

Every adapter a check gets from ``impl.build()`` / ``impl.new()`` / ``reference_impl`` is wrapped in a
:class:`CheckedAdapter` (in-process adapters and worker proxies alike). For the GRU4Rec protocol
(implementations/base.py, implementations/README.md) it checks the results of

- ``fit`` — a :class:`~implementations.base.FitReport`;
- ``item_ids`` — a 1-D array of distinct integer ids, each of them an item of the last ``fit``'s training frame
  ("item ids it was never trained on" are refused);
- ``score_prefixes`` — a numeric array of shape ``(len(prefixes), len(item_ids()))`` with finite values;
- ``score_stream`` — rows ``(session_id, position, target_item, scores_row)`` whose target is a training item
  and whose scores row is one finite score per item (or a single rank).

A violation raises :class:`AdapterOutputError` (an ``AssertionError``: the check *fails*) whose message names the
adapter, the method, what it returned and what the protocol expects, e.g. ``adapter 'x' returned an array of shape
(3, 19) from score_prefixes(): expected shape (3, 20) = (len(prefixes), len(item_ids()))``. Every check sees the
same message, before its own code interprets the values. Exceptions raised by the adapter itself pass through
unchanged (the plugin turns ``Unsupported`` into skips and worker failures into failures with stderr).

Families without validators (the fine-tuner family) get their adapters unwrapped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any, cast

import numpy as np

from gru4rec_conformance.implementations.base import FitReport

__all__ = ["AdapterOutputError", "CheckedAdapter", "checked"]

_SHOW = 5  # offending values quoted in a message


class AdapterOutputError(AssertionError):
    """An adapter returned a value the protocol does not allow (the check fails with this message)."""


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if value is None:
        return "None"
    try:
        return f"a {type(value).__name__} of length {len(value)}"
    except TypeError:
        return f"a {type(value).__name__} ({value!r:.80})"


def _first_bad(mask: np.ndarray) -> str:
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"first at index {idx[0] if len(idx) == 1 else idx}"


class CheckedAdapter:
    """A GRU4Rec adapter whose protocol results are validated (see the module docstring).

    Args:
        adapter: the adapter (or worker proxy) to wrap; every attribute not validated here is forwarded.
        label: the implementation's name, used in messages.
    Raises:
        AdapterOutputError: from a validated method whose result breaks the protocol.
    """

    def __init__(self, adapter: Any, label: str) -> None:
        self.__dict__["_adapter"] = adapter
        self.__dict__["_label"] = label
        self.__dict__["_trained_items"] = None  # np.ndarray of the last fit's item ids, or None when unknown
        self.__dict__["_item_ids"] = None  # validated item_ids(), cached until the next build/fit/set_weights
        self.__dict__["_item_set"] = None  # the same as a set (score_stream targets: one lookup per row)

    # -- forwarding ------------------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        value = getattr(self.__dict__["_adapter"], name)
        if name in ("build", "set_weights", "set_params"):  # set_params: the deprecated name of set_weights
            return self._invalidating(value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._adapter, name, value)

    def __repr__(self) -> str:
        return f"<checked {self._adapter!r}>"

    @property
    def wrapped(self) -> Any:
        """The adapter (or worker proxy) itself."""
        return self._adapter

    def _invalidating(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self._set_ids(None)
            return method(*args, **kwargs)

        return call

    def _fail(self, method: str, returned: str, expected: str) -> None:
        raise AdapterOutputError(f"adapter {self._label!r} returned {returned} from {method}(): {expected}")

    # -- validated methods ---------------------------------------------------------------------------------
    def fit(self, train_df: Any, *args: Any, **kwargs: Any) -> Any:
        self._set_ids(None)
        self.__dict__["_trained_items"] = None
        report = self._adapter.fit(train_df, *args, **kwargs)
        try:
            self.__dict__["_trained_items"] = np.unique(np.asarray(train_df["ItemId"]))
        except Exception:  # not a session frame: the subset check of item_ids() is skipped
            pass
        if not isinstance(report, FitReport):
            self._fail("fit", _describe(report), "expected a FitReport (implementations.base.FitReport) with one "
                                                 "entry per epoch")  # fmt: skip
        return report

    def item_ids(self) -> Any:
        value = self._adapter.item_ids()
        self._set_ids(self._check_item_ids(value))
        return value

    def _check_item_ids(self, value: Any) -> np.ndarray:
        try:
            ids = np.asarray(value)
        except Exception:
            ids = np.asarray([], dtype=object)
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            self._fail("item_ids", _describe(value), "expected a 1-D array (or list) of integer item ids")
        uniq, counts = np.unique(ids, return_counts=True)
        if (counts > 1).any():
            dup = uniq[counts > 1][:_SHOW].tolist()
            self._fail("item_ids", f"{len(ids)} ids with duplicates {dup}", "expected distinct ids, one per score "
                                                                            "column")  # fmt: skip
        trained = self._trained_items
        if trained is not None and trained.dtype.kind in "iu":
            unknown = np.setdiff1d(ids, trained)
            if len(unknown):
                self._fail("item_ids", f"{len(unknown)} item id(s) that are not in the training data of the last "
                                       f"fit(), e.g. {unknown[:_SHOW].tolist()}",
                           "expected only items it was trained on (columns of the score matrices)")  # fmt: skip
        return ids

    def _n_items(self) -> int:
        if self._item_ids is None:
            self._set_ids(self._check_item_ids(self._adapter.item_ids()))
        return len(self._item_ids)

    def _set_ids(self, ids: np.ndarray | None) -> None:
        self.__dict__["_item_ids"] = ids
        self.__dict__["_item_set"] = None

    def _known(self, item: Any) -> bool:
        if self._item_set is None:
            self.__dict__["_item_set"] = frozenset(self._item_ids.tolist())
        try:
            return int(item) in self._item_set and int(item) == item
        except (TypeError, ValueError):
            return False

    def _check_scores(self, method: str, value: Any, shape: tuple[int, ...], what: str) -> None:
        try:
            arr = np.asarray(value)
        except Exception:
            arr = np.asarray([], dtype=object)
        if arr.dtype.kind not in "fiu":
            self._fail(method, _describe(value), f"expected a numeric array of shape {shape} = {what}")
        if arr.shape != shape:
            self._fail(method, f"an array of shape {arr.shape}", f"expected shape {shape} = {what}")
        finite = np.isfinite(arr)
        if not finite.all():
            n_nan = int(np.isnan(arr).sum())
            n_inf = int((~finite).sum()) - n_nan
            self._fail(
                method, f"{n_nan} NaN and {n_inf} infinite score(s) ({_first_bad(~finite)})", "expected finite scores"
            )

    def score_prefixes(self, prefixes: Iterable[Iterable[int]], *args: Any, **kwargs: Any) -> Any:
        prefixes = prefixes if hasattr(prefixes, "__len__") else list(prefixes)
        value = self._adapter.score_prefixes(prefixes, *args, **kwargs)
        self._check_scores(
            "score_prefixes",
            value,
            (len(cast(Sized, prefixes)), self._n_items()),
            "(len(prefixes), len(item_ids())): one row per prefix, one column per item",
        )
        return value

    def score_stream(self, test_df: Any, batch_size: int, *args: Any, **kwargs: Any) -> Any:
        value = self._adapter.score_stream(test_df, batch_size, *args, **kwargs)
        if isinstance(value, (list, tuple)):  # a worker proxy materialises the stream
            for k, row in enumerate(value):
                self._check_stream_row(k, row)
            return value
        return self._checked_stream(iter(value))

    def _checked_stream(self, rows: Iterator[Any]) -> Iterator[Any]:
        for k, row in enumerate(rows):
            self._check_stream_row(k, row)
            yield row

    def _check_stream_row(self, k: int, row: Any) -> None:
        method = "score_stream"
        if not isinstance(row, (tuple, list)) or len(row) != 4:
            self._fail(method, f"row {k}: {_describe(row)}", "expected (session_id, position, target_item, "
                                                             "scores_row)")  # fmt: skip
        target, scores = row[2], row[3]
        n_items = self._n_items()
        if not self._known(target):
            self._fail(method, f"row {k} with target item {target!r}", "expected a target item of item_ids() "
                                                                      "(events of unknown items are dropped)")  # fmt: skip
        if np.ndim(scores) == 0:  # the implementation reports target ranks only
            self._check_scores(method, np.asarray([scores]), (1,), "a single target rank")
        else:
            self._check_scores(method, scores, (n_items,), f"(len(item_ids()),) in row {k}")


def checked(adapter: Any, label: str, family: str) -> Any:
    """``adapter`` wrapped in a :class:`CheckedAdapter` for the GRU4Rec family; unchanged for other families."""
    if family != "gru4rec" or isinstance(adapter, CheckedAdapter):
        return adapter
    return CheckedAdapter(adapter, label)
