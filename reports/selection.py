"""Which runs the pages use, shared by the scoreboard, the dataset matrix, the study agreement and the rendered
tree: every run under some roots (:func:`collect_runs`), the one run that stands for each verdict key
(:func:`newest_per_key`) and whether a run is a metric run on several datasets (:func:`is_matrix`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from gru4rec_conformance.reports.compact import dataset_matrix, standing, verdict_key
from gru4rec_conformance.reports.results import RunData, RunDirError, iter_run_dirs, load_run

__all__ = ["collect_runs", "newest_per_key", "is_matrix"]


def collect_runs(roots: Iterable[Path], unreadable: list[str] | None = None) -> list[RunData]:
    """Every conformance run under ``roots`` (the same run found under two roots, by ``run_id``, counts once).

    A folder that cannot be read is left out and, when ``unreadable`` is given, appended to it as
    ``"<path>: <error>"`` (the error names the file and line); records of another kind (no implementation in the
    header, e.g. a fine-tuning protocol run) are skipped silently."""
    seen: set[tuple[str, str]] = set()
    runs = []
    for root in roots:
        for directory in iter_run_dirs(Path(root)):
            try:
                run = load_run(directory)
            except (RunDirError, OSError) as exc:
                if unreadable is not None:
                    unreadable.append(f"{directory}: {exc}")
                continue
            if not run.header or not run.impl:
                continue
            ident = (str(run.header.get("run_id") or directory), str(run.header.get("started") or ""))
            if ident in seen:
                continue
            seen.add(ident)
            runs.append(run)
    return runs


def newest_per_key(runs: Sequence[RunData]) -> dict[Path, RunData]:
    """The run that stands for each verdict key (:func:`reports.compact.verdict_key`), by the rule ``compact`` uses
    (:func:`reports.compact.standing`): complete before not, a run of every selected check before a subset, then
    the newest."""
    chosen: dict[Path, RunData] = {}
    for run in runs:
        key = verdict_key(run)
        old = chosen.get(key)
        if old is None or standing(run) > standing(old):
            chosen[key] = run
    return chosen


def is_matrix(run: RunData) -> bool:
    """Whether the run selected metric datasets other than the default one (``--dataset all``, a list, a folder)."""
    return dataset_matrix(run) is not None
