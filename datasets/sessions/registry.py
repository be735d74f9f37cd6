"""The five study datasets as metric-conformance datasets: where each one's data come from, the
study's best hyperparameters for it (scaled for CPU) and the study's published numbers for it.

Source of each dataset, in order (:func:`metric_frames`):

1. the user's prepared folder (``--dataset <key>=<folder>`` or a folder whose manifest names the dataset; written
   by ``python -m gru4rec_conformance.datasets prepare``): train_full -> test as prepared, full size;
2. the real slice in ``<shared>/sessions`` when the study's pipeline turns it into a split with at least
   :data:`MIN_REAL_EVENTS` train_full events and :data:`MIN_TEST_SESSIONS` evaluable test sessions (today only
   Yoochoose's 100k slice does: 3,416 test sessions; the Diginetica sample prepares to 707 / 69 events and 20
   test sessions, the Rees46 head has no test day, the RetailRocket sample does not survive the support filter,
   and no Coveo data may be redistributed);
3. the synthetic stand-in calibrated to the dataset's published statistics (``standins.generate``: at least
   2,000 test sessions, 1.8-8.9 x 10^4 train events; what is matched and how closely: ``standins``). Yoochoose:
   the stand-in of the 100k slice, ``real.yoochoose_100k_standin``.

A notice says which source was used and why (empty only for the Yoochoose 100k slice, the historical default).

Hyperparameters (:func:`mc_config`): the study's best configuration per dataset and loss (docs/study.md,
'Best hyperparameters', read from the study table in ``datasets/study/study_results.csv``, rows "GRU4Rec Official / Best params"),
scaled as the Yoochoose check always was: one GRU layer of :data:`MC_LAYERS` units instead of 192-512 and
:data:`MC_EPOCHS` epochs instead of 10; batch size, dropouts, learning rate, momentum, n_sample 2048,
sample_alpha, bpreg / logq and the final activation as published. With the stand-in sizes above the
reference's matrix (5 datasets x 7 checks) takes the time measured in docs/datasets.md, '4. Run the metric
matrix'.
``GRU4REC_MC_SCALE=study`` keeps the published layer size and 10 epochs (full-size runs: docs/datasets.md).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import real as _real
from . import standins as _standins

__all__ = [
    "KEYS",
    "STUDY_NAME",
    "MIN_REAL_EVENTS",
    "MIN_TEST_SESSIONS",
    "MC_LAYERS",
    "MC_EPOCHS",
    "SCALE_ENV",
    "MetricFrames",
    "metric_frames",
    "parse_selection",
    "check_selection",
    "mc_config",
    "study_delta",
]

KEYS = ("yoochoose", "rees46", "coveo", "retailrocket", "diginetica")
#: the study table's spelling of each dataset
STUDY_NAME = {"yoochoose": "Yoochoose", "rees46": "Rees46", "coveo": "Coveo", "retailrocket": "Retailrocket",
              "diginetica": "Diginetica"}  # fmt: skip
#: a real slice is used when its train_full holds at least these many events ...
MIN_REAL_EVENTS = {"train_full": 5_000}
#: ... and its test split this many evaluable sessions (as the stand-ins: every 512-lane evaluator can run)
MIN_TEST_SESSIONS = _standins.MIN_TEST_SESSIONS
MC_LAYERS = 100
MC_EPOCHS = 3
STUDY_EPOCHS = 10

#: why each dataset's real slice cannot serve (checked again at run time where a slice exists)
_NO_REAL = {"coveo": "no Coveo data may be redistributed (docs/datasets.md, 'Coveo'), so no real slice is shipped"}


@dataclass(frozen=True)
class MetricFrames:
    """One metric-conformance dataset: ``key`` (one of :data:`KEYS`), ``label`` (the name recorded with each metric;
    it starts with the key, so reports find the study's rows), ``train``/``test`` (SessionId int64, ItemId int64,
    Time numeric), ``source`` (``prepared``, ``real slice`` or ``stand-in``) and ``notice`` (what was used and why;
    empty for the real Yoochoose 100k slice)."""

    key: str
    label: str
    train: pd.DataFrame
    test: pd.DataFrame
    source: str
    notice: str


def parse_selection(option: str | None) -> list[tuple[str, str | None]]:
    """``--dataset`` as a list of ``(name, folder or None)``.

    ``option``: None (the default: ``[("yoochoose_100k", None)]``), or a comma list of ``all`` (the five
    :data:`KEYS`), a key, ``yoochoose_100k``/``yoochoose_100k_standin``, ``<key>=<folder>`` or a prepared folder
    (its manifest names the key). A folder replaces that key's default source wherever the key appears; order of
    first appearance is kept, duplicates dropped. Raises ValueError naming ``--dataset`` for anything else."""
    if not option:
        return [("yoochoose_100k", None)]
    names: list[str] = []
    folders: dict[str, str] = {}
    for token in (t.strip() for t in option.split(",")):
        if not token:
            continue
        if token == "all":
            names += KEYS
            continue
        key, sep, folder = token.partition("=")
        if sep:
            if key not in KEYS:
                raise ValueError(f"--dataset {token!r}: {key!r} is not one of {', '.join(KEYS)}")
            folders[key] = folder
            names.append(key)
        elif token in KEYS or token in ("yoochoose_100k", "yoochoose_100k_standin"):
            names.append(token)
        elif Path(token).is_dir():
            key = _prepared_key(Path(token))
            folders[key] = token
            names.append(key)
        elif "/" in token or token.startswith((".", "~")):  # meant as a prepared folder, which is not there
            raise ValueError(f"--dataset {token!r}: no such folder ({Path(token).expanduser().resolve()}); a "
                             "prepared folder is written by python -m gru4rec_conformance.datasets prepare")  # fmt: skip
        else:
            close = difflib.get_close_matches(token, ["all", *KEYS, "yoochoose_100k", "yoochoose_100k_standin"], n=1)
            raise ValueError(
                f"--dataset {token!r}: unknown dataset; use all, a comma list of {', '.join(KEYS)}, "
                "yoochoose_100k, yoochoose_100k_standin, <name>=<folder> or a folder written by "
                "python -m gru4rec_conformance.datasets prepare" + (f" (did you mean {close[0]!r}?)" if close else "")
            )
    seen: dict[str, None] = dict.fromkeys(names)
    return [(n, folders.get(n)) for n in seen]


def check_selection(option: str | None) -> None:
    """Validate ``--dataset`` without reading any data: :func:`parse_selection`, and every folder it names
    exists and holds ``train_full.parquet`` and ``test.parquet``. Raises ValueError naming ``--dataset``."""
    for name, folder in parse_selection(option):
        if folder is None:
            continue
        if not Path(folder).is_dir():
            raise ValueError(f"--dataset {name}={folder}: {folder} is not a folder")
        missing = [p for p in ("train_full.parquet", "test.parquet") if not (Path(folder) / p).is_file()]
        if missing:
            raise ValueError(
                f"--dataset {name}: folder {folder} lacks {', '.join(missing)} (prepare it with python -m "
                "gru4rec_conformance.datasets prepare)"
            )


def _prepared_key(folder: Path) -> str:
    """The dataset a prepared folder holds (its manifest), or ``folder`` (a plain train_full/test folder)."""
    m = folder / "manifest.json"
    if m.is_file():
        try:
            key = json.loads(m.read_text()).get("dataset")
        except (OSError, ValueError):
            key = None
        if key in KEYS:
            return str(key)
    return str(folder)


def _read_prepared_folder(name: str, folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    missing = [p for p in ("train_full.parquet", "test.parquet") if not (folder / p).is_file()]
    if missing:
        raise ValueError(
            f"--dataset {name}: folder {folder} lacks {missing} (prepare it with python -m "
            "gru4rec_conformance.datasets prepare)"
        )
    cols = ["SessionId", "ItemId", "Time"]
    return pd.read_parquet(folder / "train_full.parquet")[cols], pd.read_parquet(folder / "test.parquet")[cols]


def _real_slice(key: str) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The real slice's (train_full, test, path); raises SharedDataMissing or ValueError (why it cannot serve)."""
    import warnings

    from .pipeline import process
    from .readers import read_raw

    if key in _NO_REAL:
        raise ValueError(_NO_REAL[key])
    slice_name, fname = {
        "rees46": ("rees46_oct_head", "2019-Oct.csv"),
        "retailrocket": ("retailrocket_head", "events.csv"),
        "diginetica": ("diginetica_sample", "train-item-views.csv"),
    }[key]
    path = _real.slice_path(slice_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the Rees46 head's truncated last line: its tests check the warning
        res = process(key, {fname: read_raw(key, path)})
    train, test = res.frames["train_full"], res.frames["test"]
    n_test = _standins.evaluable_sessions(train, test)
    if len(train) < MIN_REAL_EVENTS["train_full"] or n_test < MIN_TEST_SESSIONS:
        raise ValueError(
            f"the real slice {path} prepares to {len(train):,} train_full events (at least "
            f"{MIN_REAL_EVENTS['train_full']:,} needed) and {n_test:,} evaluable test sessions (at least "
            f"{MIN_TEST_SESSIONS:,} needed)"
        )
    return train, test, str(path)


def metric_frames(name: str, folder: str | None = None) -> MetricFrames:
    """The frames of one metric-conformance dataset (see the module docstring for the order of sources).

    ``name``: a key of :data:`KEYS`, ``yoochoose_100k`` (the Yoochoose key's historical name) or
    ``yoochoose_100k_standin`` (always synthetic); ``folder``: the user's prepared folder for it. Raises
    ValueError naming ``--dataset`` for an unknown name or a folder without train_full/test Parquet files."""
    if folder is not None:
        train, test = _read_prepared_folder(name, Path(folder))
        key = name if name in KEYS else "yoochoose" if name.startswith("yoochoose") else name
        label = f"{key}@{Path(folder).name}" if key in KEYS else Path(folder).name
        return MetricFrames(key, label, train, test, "prepared", f"{key}: the prepared folder {folder}")
    if name in ("yoochoose", "yoochoose_100k"):
        try:
            frames = _real.yoochoose_100k(fallback=False)
            notice = "" if name == "yoochoose_100k" else "yoochoose: the real 100k slice (RSC15 protocol, 7 days)"
            return MetricFrames("yoochoose", "yoochoose_100k", frames["train_full"], frames["test"], "real slice",
                                notice)  # fmt: skip
        except _real.SharedDataMissing as exc:
            frames = _real.yoochoose_100k_standin(seed=0)
            notice = (
                f"real Yoochoose 100k slice unavailable ({exc}); using the synthetic stand-in of the same "
                "shape (yoochoose_100k_standin, seed 0)"
            )
            return MetricFrames("yoochoose", "yoochoose_100k_standin", frames["train_full"], frames["test"],
                                "stand-in", notice)  # fmt: skip
    if name == "yoochoose_100k_standin":
        frames = _real.yoochoose_100k_standin(seed=0)
        return MetricFrames("yoochoose", name, frames["train_full"], frames["test"], "stand-in", "")
    if name not in KEYS:
        raise ValueError(f"--dataset {name!r}: unknown dataset; known: {', '.join(KEYS)}")
    try:
        train, test, path = _real_slice(name)
        return MetricFrames(name, f"{name}_slice", train, test, "real slice", f"{name}: the real slice {path}")
    except (_real.SharedDataMissing, ValueError) as exc:
        why = str(exc)
    res = _standins.generate(name)
    train, test = res.frames["train_full"], res.frames["test"]
    spec = _standins.STANDINS[name]
    return MetricFrames(
        name,
        f"{name}_standin",
        train,
        test,
        "stand-in",
        f"{name}: synthetic stand-in calibrated to the study's statistics ({len(train):,} train / {len(test):,} "
        f"test events, {_standins.evaluable_sessions(train, test):,} test sessions; scale {spec.scale:g} on the last "
        f"{spec.span_days:g} days, seed {_standins.SEED}, through the study's pipeline) because {why}; give your "
        f"prepared data with --dataset {name}=<folder>",
    )


_FINAL_ACT = {"elu-1": 1.0, "elu-0.5": 0.5, "linear": 0.0}


#: environment variable choosing the metric checks' scale: ``cpu`` (default) or ``study`` (full-size runs)
SCALE_ENV = "GRU4REC_MC_SCALE"


def mc_config(key: str, loss: str, scale: str | None = None) -> dict:
    """The study's best hyperparameters of ``key`` and ``loss`` (``cross-entropy`` or ``bpr-max``) as keyword
    arguments of the reference ``GRU4Rec``: scaled for CPU (``scale="cpu"``: :data:`MC_LAYERS`, :data:`MC_EPOCHS`)
    or as published (``scale="study"``: the study's layer size and 10 epochs, for full-size runs on a GPU).
    ``scale`` None reads :data:`SCALE_ENV` (default ``cpu``).

    Raises ValueError for an unknown key, loss or scale, or when the study table lacks the row."""
    import os

    from gru4rec_conformance.datasets import study

    scale = scale or os.environ.get(SCALE_ENV, "").strip() or "cpu"
    if scale not in ("cpu", "study"):
        raise ValueError(f"scale ({SCALE_ENV}): 'cpu' or 'study', got {scale!r}")

    if key not in KEYS:
        raise ValueError(f"key: unknown dataset {key!r}; known: {', '.join(KEYS)}")
    if loss not in ("cross-entropy", "bpr-max"):
        raise ValueError(f"loss: 'cross-entropy' or 'bpr-max', got {loss!r}")
    row = study.find(key, study.OFFICIAL, study.BEST, loss)
    if row is None:
        raise ValueError(f"the study table has no {study.OFFICIAL} / {study.BEST} row for {key} {loss}")
    cfg: dict = dict(
        loss=loss,
        layers=[MC_LAYERS if scale == "cpu" else int(row["layers"])],
        batch_size=int(row["batch_size"]),
        dropout_p_embed=float(row["dropout_p_embed"]),
        dropout_p_hidden=float(row["dropout_p_hidden"]),
        learning_rate=float(row["learning_rate"]),
        momentum=float(row["momentum"]),
        n_sample=int(row["n_sample"]),
        sample_alpha=float(row["sample_alpha"]),
    )
    if loss == "cross-entropy":
        cfg["logq"] = float(row["logq"])
    else:
        cfg["bpreg"] = float(row["bpreg"])
        cfg["elu_param"] = _FINAL_ACT[row["final_act"]]
    cfg.update(constrained_embedding=row["constrained_embedding"] == "true", embedding=int(row["embedding"]),
               n_epochs=MC_EPOCHS if scale == "cpu" else STUDY_EPOCHS)  # fmt: skip
    return cfg


def study_delta(key: str, loss: str, study_row, metric: str = "recall@20") -> dict | None:
    """The study's published relative change of ``metric`` for the implementation's declared study row
    (``{"implementation", "variant"}``) against the official best run of ``key`` and ``loss``
    (``datasets.study.published``: ``{"value", "official_best", "delta_rel", "row", ...}``), or None."""
    from gru4rec_conformance.datasets import study

    return study.published(metric, key, loss, dict(study_row) if study_row else None)
