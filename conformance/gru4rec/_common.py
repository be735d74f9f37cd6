"""Helpers shared by the GRU4Rec checks: hyperparameter sets, fresh-state ranking, the suite's own metrics.

The suite owns the data, the metrics and the reference formulas (implementations/README.md): ranks and Recall/MRR
are computed here with the oracle's evaluator (``reference.gru4rec.evaluation``, the official protocol of
docs/algorithm.md, 'Evaluation protocol') from an adapter's ``score_prefixes``, never with the implementation's own code unless a
check is about that code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from gru4rec_conformance.implementations.base import Unsupported
from gru4rec_conformance.reference.gru4rec import evaluation as oracle_eval

#: Small, fast training configuration of the black-box checks on D-LAG1-sized data (CPU, seconds).
SMALL: dict[str, Any] = dict(
    layers=[32],
    batch_size=32,
    n_sample=16,
    sample_alpha=0.5,
    optimizer="adagrad",
    learning_rate=0.1,
    momentum=0.0,
    dropout_p_embed=0.0,
    dropout_p_hidden=0.0,
    loss="cross-entropy",
)

CUTOFFS = (1, 5, 10, 20)


def declared(impl: Any) -> Mapping[str, Any]:
    """The implementation's declared hyperparameters (name → default)."""
    return impl.capabilities.hyperparameters


def hparams(impl: Any, required: Mapping[str, Any] | None = None, optional: Mapping[str, Any] | None = None) -> dict:
    """Hyperparameters for ``impl.build``: every ``required`` one (the adapter raises Unsupported for an undeclared
    name, which the harness turns into a skip with the reason) plus the ``optional`` ones the adapter declares
    (values the check's verdict does not depend on, e.g. ``n_sample > 0 when supported``).

    A declared optional *value* the implementation refuses is only found at ``build``: use :func:`build`, which
    drops it and runs with the rest."""
    out = dict(required or {})
    names = declared(impl)
    out.update({k: v for k, v in (optional or {}).items() if k in names and k not in out})
    return out


def embedding_mode(cfg: Mapping[str, Any]) -> tuple[dict, dict]:
    """Split an embedding-mode configuration into (required, optional) hyperparameters for :func:`build`.

    ``constrained_embedding=False`` only says "not shared": the embedding size (``embedding`` > 0: separate,
    0: none) selects the mode. An implementation whose only embedding is a separate one (GRU4REC-pytorch) need
    not declare the flag, so it is requested as an optional value; ``constrained_embedding=True`` (shared) stays
    required, since nothing else can select it. Everything else in ``cfg`` stays required."""
    req = dict(cfg)
    opt = {}
    if req.get("constrained_embedding") is False:
        opt["constrained_embedding"] = req.pop("constrained_embedding")
    return req, opt


#: Optional hyperparameters tuned for another one: dropping the key drops these too. A learning rate (and a
#: momentum) chosen for Adagrad means nothing for another optimizer, which then runs at its own defaults.
COUPLED: dict[str, tuple[str, ...]] = {"optimizer": ("learning_rate", "momentum")}

#: The optimizer the learning checks name (SR-3: "Adagrad lr 0.1", conformance/gru4rec/README.md; the
#: reference's only optimizer). Requested as an optional value coupled with the learning rate (:data:`COUPLED`).
ADAGRAD: dict[str, Any] = {"optimizer": "adagrad"}


def _refused_key(exc: Unsupported, keys: Sequence[str]) -> str | None:
    """The hyperparameter an Unsupported names (``name`` or ``name:<value>``), if it is one of ``keys``."""
    head = exc.name.partition(":")[0]
    return next((k for k in keys if exc.name == k or head == k), None)


def build(
    impl: Any,
    required: Mapping[str, Any] | None = None,
    optional: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> Any:
    """``impl.build(seed, **hparams(impl, required, optional))``, dropping optional values the implementation
    refuses (the checks ask for "n_sample > 0 when supported" or "the implementation's minimum"; docs/checks.md).

    When ``build`` raises :class:`~implementations.base.Unsupported` for an optional value (the exception names
    the hyperparameter, ``name`` or ``name:<value>``, or a feature that only that value needs, e.g. recpack's
    ``in_batch_negatives`` for ``n_sample=0``), the value is dropped (with its :data:`COUPLED` values) and the
    build retried, so the implementation's own default applies; every drop is recorded in the check's report
    (``impl.note``). An Unsupported naming a required key, or a feature the adapter *declares* (a declaration it
    does not honour, which the harness fails), is raised unchanged, as is one no single optional key explains.

    Returns the built adapter. Raises whatever ``impl.build`` raises otherwise."""
    req = dict(required or {})
    opt = {k: v for k, v in hparams(impl, optional=optional).items() if k not in req}
    features = impl.capabilities.features()
    while True:
        try:
            return impl.build(seed=seed, **req, **opt)
        except Unsupported as exc:
            if features.get(exc.name) or _refused_key(exc, list(req)) is not None:
                raise
            key = _refused_key(exc, list(opt))
            if key is None:  # a refusal named after a feature: find the one optional value it is about
                key = next((k for k in opt if _builds_without(impl, seed, req, opt, k)), None)
            if key is None:
                raise
            dropped = [key] + [c for c in COUPLED.get(key, ()) if c in opt]
            for k in dropped:
                impl.note(
                    f"optional hyperparameter dropped: {k}={opt[k]!r}",
                    hyperparameter=k,
                    value=repr(opt[k]),
                    refused=str(exc),
                    rule="refused by the implementation (Unsupported); the check ran with "
                    "its default" + (f" (dropped with {key})" if k != key else ""),
                )
                del opt[k]


def _builds_without(impl: Any, seed: int | None, req: dict, opt: dict, key: str) -> bool:
    try:
        impl.build(seed=seed, **req, **{k: v for k, v in opt.items() if k != key})
        return True
    except Unsupported:
        return False


def small(impl: Any, **overrides: Any) -> dict:
    """:data:`SMALL` with ``overrides``; keys the adapter does not declare are dropped (they are conveniences).
    Build it with :func:`build` (``optional=small(...)``) so that refused values are dropped too."""
    cfg = {**SMALL, **overrides}
    return hparams(impl, optional=cfg)


def lag1_model(impl: Any, d_lag1: Any, n_epochs: int = 2) -> Any:
    """The implementation fitted on D-LAG1 with :data:`SMALL` (first ``--seeds`` seed), made once per session and
    shared by the checks that only score it (``impl.shared``; they must not modify it)."""
    seed = impl.seeds[0]

    def make(i):
        model = build(i, optional=small(i, n_epochs=n_epochs), seed=seed)
        model.fit(d_lag1.train)
        return model

    return impl.shared(("D-LAG1", "SMALL", n_epochs, seed), make)


def fresh_scores(adapter: Any, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
    """Fresh-state scores (n, n_items) as float64, checked for shape against ``item_ids``."""
    ids = np.asarray(adapter.item_ids())
    s = np.asarray(adapter.score_prefixes([list(p) for p in prefixes]), dtype=np.float64)
    if s.shape != (len(prefixes), len(ids)):
        raise AssertionError(
            f"score_prefixes returned shape {s.shape}, expected {(len(prefixes), len(ids))} "
            f"(one column per item of item_ids())"
        )
    return s


def target_columns(adapter: Any, targets: Sequence[int]) -> np.ndarray:
    """Column index of every target item id in ``item_ids()`` order (ValueError for an unknown id)."""
    ids = pd.Index(np.asarray(adapter.item_ids()))
    col = ids.get_indexer(np.asarray(targets))
    if (col < 0).any():
        raise ValueError(f"target item(s) unknown to the implementation: {np.asarray(targets)[col < 0][:5].tolist()}")
    return col


def ranks(scores: np.ndarray, cols: np.ndarray, mode: str = "conservative") -> np.ndarray:
    """Rank of each row's target column (oracle's tie modes, docs/algorithm.md, 'Evaluation protocol', item 6)."""
    return oracle_eval.rank(np.asarray(scores), np.asarray(cols, dtype=np.int64), mode)


def recall_at(
    adapter: Any, prefixes: Sequence[Sequence[int]], targets: Sequence[int], k: int, mode: str = "conservative"
) -> float:
    """Recall@k of fresh-state scoring over (prefix, target) pairs."""
    r = ranks(fresh_scores(adapter, prefixes), target_columns(adapter, targets), mode)
    return float(np.mean(r <= k))


def suite_metrics(
    adapter: Any,
    test_df: pd.DataFrame,
    cutoffs: Sequence[int] = CUTOFFS,
    mode: str = "conservative",
    batch_size: int = 512,
) -> dict:
    """Recall@N / MRR@N of the adapter's fresh-state scorer under the official protocol (the oracle evaluator)."""
    return oracle_eval.evaluate_prefix_scorer(
        adapter.score_prefixes,
        np.asarray(adapter.item_ids()),
        test_df,
        cutoffs=tuple(cutoffs),
        mode=mode,
        batch_size=batch_size,
    )


def prediction_points(test_df: pd.DataFrame, item_ids: Sequence[int]):
    """(session_ids, positions, prefixes, target columns) of every prediction point (official protocol)."""
    return oracle_eval.prediction_points(test_df, np.asarray(item_ids))


def lag1_pairs(meta: Mapping[str, Any]) -> tuple[list[list[int]], list[int]]:
    """One (prefix [i], target successor(i)) pair per D-LAG1 item."""
    items = list(meta["items"])
    return [[i] for i in items], [int(meta["successor"][i]) for i in items]


def lag1_test_pairs(test_df: pd.DataFrame) -> tuple[list[list[int]], list[int]]:
    """Every (prefix, next item) pair of a session frame, prefixes in session order."""
    prefixes, targets = [], []
    for _, g in test_df.sort_values(["SessionId", "Time"], kind="stable").groupby("SessionId", sort=True):
        items = g["ItemId"].tolist()
        for j in range(1, len(items)):
            prefixes.append(items[:j])
            targets.append(items[j])
    return prefixes, targets


def rel_frobenius(a: np.ndarray, b: np.ndarray) -> float:
    """‖a − b‖_F / ‖a‖_F (inf when a is all zeros and b is not)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na = float(np.linalg.norm(a))
    d = float(np.linalg.norm(a - b))
    return d / na if na > 0 else (0.0 if d == 0 else float("inf"))


def epochs_run(rep: Any, expected: int) -> None:
    """Assert that a FitReport covers ``expected`` epochs (clear message instead of an IndexError later)."""
    got = len(rep.n_steps)
    assert got == expected, f"fit reported {got} epoch(s), {expected} were asked for"


def session_parallel(impl: Any) -> bool:
    """Whether the adapter declares session-parallel training (``session_parallel``): the diagnoses that blame
    lanes, resets or the epoch tail assume it (a model trained on whole padded sequences has none of them)."""
    return bool(impl.supports("session_parallel"))


def declared_negatives(impl: Any) -> str:
    """How the declared negatives of a model that is not session-parallel look, for its diagnoses: e.g.
    ``"declared: per-example negatives (1 per example) that exclude the session's own items"`` (the count when
    ``negatives_per_example`` states it), ``""`` when nothing is declared."""
    per_example = impl.supports("per_example_negatives")
    exclude = impl.supports("negatives_exclude_own_items")
    if not (per_example or exclude):
        return ""
    n = getattr(impl.capabilities, "negatives_per_example", None)
    kind = ("per-example negatives" + (f" ({n} per example)" if n else "")) if per_example else "negatives"
    return f"declared: {kind}" + (" that exclude the session's own items" if exclude else "")


def not_session_parallel_means(impl: Any, meaning: str) -> str:
    """The diagnosis of a check for a model declared not session-parallel: ``"for a model that is not
    session-parallel this means <meaning>"`` plus the declared negatives (:func:`declared_negatives`).

    Call it only when :func:`session_parallel` is False; the check puts it in place of its lane/reset cause."""
    said = declared_negatives(impl)
    return f"for a model that is not session-parallel this means {meaning}" + (f" ({said})" if said else "")
