"""The study's published numbers (datasets/study/study_results.csv) and its expected outcome per check
(datasets/study/study_expected.csv, docs/study.md, 'Expected outcome per check'); sources in datasets/study/README.md.

Reports print them beside our measurements: for an implementation that declares
``study = {"implementation": "Recpack", "variant": "OOB"}`` and a metric recorded with ``dataset`` and
``loss`` context, the published value of that row and its relative change against the official "Best
params" row of the same dataset and loss (or against the official code restricted to the implementation's
features, ``against="matching"``); and, per check the study names, whether it expects the suite to flag the
implementation at that fix level (:func:`expected`; compared with our outcomes in :mod:`reports.agreement`).
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).resolve().parent / "study_results.csv"
EXPECTED_FILE = DATA_FILE.with_name("study_expected.csv")
METRICS = tuple(f"{m}@{n}" for n in (1, 5, 10, 20) for m in ("recall", "mrr"))
DATASET_ALIASES = {"rsc15": "yoochoose", "yoochoose": "yoochoose", "rees46": "rees46", "coveo": "coveo",
                   "retailrocket": "retailrocket", "diginetica": "diginetica"}  # fmt: skip
OFFICIAL = "GRU4Rec Official"
BEST = "Best params"


@functools.lru_cache(maxsize=1)
def rows() -> tuple[dict[str, str], ...]:
    """All rows of the study table (strings, as transcribed)."""
    with open(DATA_FILE, newline="", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh))


def study_dataset(name: str | None) -> str | None:
    """Map one of our dataset names (``yoochoose_100k``, ``rsc15``, ``retailrocket``) to the study's, or None."""
    if not name:
        return None
    low = name.lower()
    for prefix, canonical in DATASET_ALIASES.items():
        if low.startswith(prefix):
            return canonical
    return None


def find(dataset: str, implementation: str, variant: str, loss: str) -> dict[str, str] | None:
    """The study row for (dataset, implementation, variant, loss), matched case-insensitively."""
    ds = study_dataset(dataset)
    for row in rows():
        if (
            ds is not None
            and row["dataset"].lower() == ds
            and row["implementation"].lower() == implementation.lower()
            and row["variant"].lower() == variant.lower()
            and row["loss"].lower() == loss.lower()
        ):
            return row
    return None


def _float(x: str | None) -> float | None:
    try:
        return float(x) if x not in (None, "", "N/A") else None
    except ValueError:
        return None


def published(
    metric: str, dataset: str | None, loss: str | None, study: dict[str, str] | None, against: str = "best"
) -> dict[str, Any] | None:
    """Published value of ``metric`` for the declared study row, with its relative change against the official
    implementation: its "Best params" row (``against="best"``, all features) or its "<impl> params" row
    (``against="matching"``: the official code restricted to the implementation's features), same dataset and loss.

    Returns ``{"value", "official_best", "delta_rel", "row": "<impl> / <variant>", "dataset", "against"}``
    (``official_best`` is the value compared against, whichever row that is) or None when the study has no such
    row (different dataset, loss, or an implementation outside the study).
    """
    if not (study and dataset and loss) or metric not in METRICS:
        return None
    row = find(dataset, study.get("implementation", ""), study.get("variant", ""), loss)
    base = BEST if against != "matching" else f"{study.get('implementation', '')} params"
    best = find(dataset, OFFICIAL, base, loss)
    if row is None:
        return None
    value, ref = _float(row.get(metric)), _float(best.get(metric)) if best else None
    delta = (value - ref) / ref if value is not None and ref else None
    return {"value": value, "official_best": ref, "delta_rel": delta, "against": base,
            "row": f"{row['implementation']} / {row['variant']}", "dataset": row["dataset"]}  # fmt: skip


#: Implementations the expected-outcome table names without a ``study`` declaration of their own: the official code's row (the
#: PyTorch port and the Theano original) and GRU4Rec_TensorFlow's upstream ("TF upstream").
ROW_ALIASES = {"official_pytorch": (OFFICIAL, ""), "theano_official": (OFFICIAL, ""),
               "gru4rec_tensorflow": ("GRU4Rec_Tensorflow", "UPSTREAM")}  # fmt: skip
#: Agreement values (:func:`gru4rec_conformance.reports.agreement.agreement`).
AGREE, DISAGREE, NOT_TESTED = "agree", "disagree", "not tested"


def fix_level(study: dict[str, str] | None) -> str | None:
    """The fix level (``OOB`` / ``INF`` / ``MIN`` / ``MAJ``; ``""`` for the official implementation) of a declared
    study row, read from the study table; None when the table has no such implementation and variant."""
    if not study:
        return None
    for row in rows():
        if (row["implementation"].lower() == str(study.get("implementation", "")).lower()
                and row["variant"].lower() == str(study.get("variant", "")).lower()):  # fmt: skip
            return row["fix_level"]
    return None


def table_key(impl_name: str, study: dict[str, str] | None) -> tuple[str, str] | None:
    """The expected-outcome row ``(implementation, fix level)`` of an implementation: from its declared study row (any row of
    the official code is the official row), else :data:`ROW_ALIASES` by base name; None when the table has none."""
    if study and study.get("implementation") == OFFICIAL:
        key: tuple[str, str | None] = (OFFICIAL, "")
    elif study:
        key = (str(study.get("implementation", "")), fix_level(study))
    else:
        key = ROW_ALIASES.get(impl_name.split(":")[0], ("", None))
    if key[1] is None or not any((r["implementation"], r["fix_level"]) == key for r in expected_rows()):
        return None
    return key[0], key[1]


@functools.lru_cache(maxsize=1)
def expected_rows() -> tuple[dict[str, str], ...]:
    """The expected-outcome table as rows ``{implementation, fix_level, checks ("LF-1/2"), expected (FAIL | pass | n/a), note}``."""
    with open(EXPECTED_FILE, newline="", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh))


def expected(impl_name: str, study: dict[str, str] | None) -> list[dict[str, str]]:
    """The expected outcomes for one implementation (:func:`table_key`), in the table's column order; empty when
    the table has no row for it."""
    key = table_key(impl_name, study)
    return [r for r in expected_rows() if (r["implementation"], r["fix_level"]) == key] if key else []


#: Defect-id prefixes of the study's implementations (docs/study.md, 'Implementations and their ids'); other ``XX-n`` in a note name checks.
_DEFECT_PREFIXES = ("GP", "TG", "TF", "KG", "RP", "MS")


def check_ids(column: str, note: str = "") -> list[str]:
    """The check ids of an expected-outcome column, plus the checks its note names as the one to watch: ``LF-1/2`` →
    ``["LF-1", "LF-2"]``; ``EB-1/2`` with the note ``EB-4`` → ``["EB-1", "EB-2", "EB-4"]`` (defect ids such as
    ``KG-4`` in a note are not checks and are left out)."""
    prefix, _, numbers = column.partition("-")
    ids = [f"{prefix}-{n}" for n in numbers.split("/")] if numbers else [column]
    named = [m for m in re.findall(r"\b([A-Z]{2})-(\d+)\b", note) if m[0] not in _DEFECT_PREFIXES]
    return ids + [f"{a}-{n}" for a, n in named if f"{a}-{n}" not in ids]
