"""The study's published numbers (reports/data/study_results.csv; source in reports/data/README.md).

Reports print them beside our measurements: for an implementation that declares
``study = {"implementation": "Recpack", "variant": "OOB"}`` and a metric recorded with ``dataset`` and
``loss`` context, the published value of that row and its relative change against the official "Best
params" row of the same dataset and loss.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).resolve().parent / "data" / "study_results.csv"
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
    metric: str, dataset: str | None, loss: str | None, study: dict[str, str] | None
) -> dict[str, Any] | None:
    """Published value of ``metric`` for the declared study row, with its change against official best.

    Returns ``{"value", "official_best", "delta_rel", "row": "<impl> / <variant>"}`` or None when the
    study has no such row (different dataset, loss, or an implementation outside the study).
    """
    if not (study and dataset and loss) or metric not in METRICS:
        return None
    row = find(dataset, study.get("implementation", ""), study.get("variant", ""), loss)
    best = find(dataset, OFFICIAL, BEST, loss)
    if row is None:
        return None
    value, ref = _float(row.get(metric)), _float(best.get(metric)) if best else None
    delta = (value - ref) / ref if value is not None and ref else None
    return {"value": value, "official_best": ref, "delta_rel": delta,
            "row": f"{row['implementation']} / {row['variant']}", "dataset": row["dataset"]}  # fmt: skip
