"""Metric conformance across datasets: the runs made with ``--dataset all`` (or a comma list of datasets).

Such a run (``pytest conformance/gru4rec --impl NAME --dataset all -k MC``) checks recall@N and MRR@N on each
study dataset; it is kept beside the implementation's verdict under its own key
(``<impl>/[<level>/]<version>+datasets-all``, :func:`reports.compact.verdict_key`) and never stands for the verdict.
:func:`matrix_rows` turns the runs into one row per implementation, dataset and loss: recall@20 and MRR@20 Δ of
the all-features check (MC-2, ours against the full-featured reference on that dataset) beside the study's published
Δ of the implementation's declared study row on the same dataset and loss (``datasets/study/study_results.csv``), and
the outcome of every metric check on that dataset and loss. The scoreboard prints them as a section of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from gru4rec_conformance.datasets.sessions.registry import KEYS  # the dataset ids of `--dataset all`
from gru4rec_conformance.reports.facts import headline_metrics, suite_currency
from gru4rec_conformance.reports.render import md_table
from gru4rec_conformance.reports.results import RunData
from gru4rec_conformance.reports.selection import is_matrix, newest_per_key

__all__ = ["standing_matrix_runs", "matrix_rows", "render_markdown", "OUTCOME_WORD"]

#: How a check's outcome reads in a matrix cell.
OUTCOME_WORD = {
    "passed": "pass",
    "failed": "FAIL",
    "xfail": "xfail",
    "xpass": "XPASS",
    "error": "ERROR",
    "skipped-unsupported": "n/a",
    "skipped": "skipped",
    "deselected": "not run",
}


def standing_matrix_runs(runs: Iterable[RunData]) -> list[RunData]:
    """The run that stands for each matrix key (the rule of :func:`reports.compact.standing`: complete first, then
    the newest), ordered reference first, then by implementation name."""
    chosen = newest_per_key([r for r in runs if is_matrix(r)])
    return sorted(chosen.values(), key=lambda r: (r.impl.get("role") != "reference", str(r.impl.get("name"))))


def _params(nodeid: str) -> str:
    m = re.search(r"\[(.*)\]$", nodeid)
    return m.group(1) if m else ""


def _labels(run: RunData) -> dict[str, str]:
    """``{parameter id: dataset label}`` from the metrics the run recorded (``rees46`` → ``rees46_standin``), to
    name the rows of checks that crashed before measuring as the measured ones are named."""
    out: dict[str, str] = {}
    for r in run.results:
        for m in r.get("metrics") or ():
            label = str((m.get("context") or {}).get("dataset") or "")
            key = next((k for k in KEYS if label.startswith(k)), None)
            if key is not None:
                out.setdefault(key, label)
    return out


def _source(notice: str | None, label: str = "") -> str:
    """``real slice`` / ``stand-in`` / ``prepared`` from the notice the metric fixture printed for the dataset,
    else from the dataset's label (``*_standin``; ``yoochoose_100k`` is the real slice); ``–`` when unknown (no
    check measured anything on it)."""
    if not notice:
        if label.endswith("_standin"):
            return "stand-in"
        return "real slice" if label == "yoochoose_100k" else "–"
    text = notice.lower()
    if "stand-in" in text or "synthetic" in text:
        return "stand-in"
    if "prepared" in text or "folder" in text:
        return "prepared"
    if "real" in text:
        return "real slice"
    return "–"


def matrix_rows(runs: Iterable[RunData]) -> list[dict[str, Any]]:
    """One row per (matrix run, dataset, loss), in the runs' order, datasets in the order the run checked them.

    Each row: ``impl``, ``role``, ``dataset``, ``loss``, ``source`` (real slice, stand-in, prepared),
    ``recall@20`` and ``mrr@20`` (each ``{"ours", "study"}``: relative Δ as fractions, None when not measured or
    the study has no row), ``checks`` (``{check id + variant: outcome word}``, e.g. ``{"MC-1": "pass",
    "MC-1 (1 epoch)": "pass", "MC-2": "FAIL"}``), ``suite`` (the suite version string), ``status`` (the run's)
    and ``stale`` (why the run's checks are older than the checkout's, else None).
    """
    out: list[dict[str, Any]] = []
    for run in runs:
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        labels = _labels(run)
        current, note = suite_currency(run)  # once per run, not per row
        stale = note if current is False else None

        for r in run.results:
            check = (r.get("check") or {}).get("id") or ""
            if not check.startswith("MC-"):
                continue
            ctx = next(((m.get("context") or {}) for m in r.get("metrics") or () if m.get("context")), {})
            params = _params(str(r.get("nodeid") or ""))
            dataset = ctx.get("dataset") or labels.get(_dataset_from_params(params) or "", _dataset_from_params(params))
            loss = ctx.get("loss") or ("bpr-max" if "bpr-max" in params else "cross-entropy")
            if dataset is None:
                continue
            target = rows.setdefault((str(dataset), str(loss)), _blank_row(run, str(dataset), str(loss), stale))
            if ctx.get("notice") or target["source"] == "?":
                target["source"] = _source(ctx.get("notice"), str(dataset))
            label = check + (" (1 epoch)" if "1-epoch" in params else "")
            word = OUTCOME_WORD.get(str(r.get("outcome")), str(r.get("outcome")))
            if r.get("outcome") == "xfail" and (r.get("xfail") or {}).get("fails_as") == "crash":
                word += " (crash)"  # declared as a crash: no metric was measured on this dataset
            target["checks"][label] = word
        for h in headline_metrics(run, ("recall@20", "mrr@20")):
            if h["comparison"] != "all features":
                continue
            key = (str(h["dataset"]), str(h["loss"]))
            cell = rows.setdefault(key, _blank_row(run, *key, stale))[h["name"]]
            cell["ours"], cell["study"] = h["delta_rel"], h["study_delta_rel"]
        out += rows.values()
    return out


def _blank_row(run: RunData, dataset: str, loss: str, stale: str | None) -> dict[str, Any]:
    return {"impl": str(run.impl.get("name") or "?"), "role": str(run.impl.get("role") or "?"),
            "dataset": dataset, "loss": loss, "source": "?",
            "recall@20": {"ours": None, "study": None}, "mrr@20": {"ours": None, "study": None},
            "checks": {}, "suite": str((run.header.get("suite") or {}).get("string") or "?"),
            "status": run.status, "stale": stale}  # fmt: skip


def _dataset_from_params(params: str) -> str | None:
    """A check without metrics (it crashed before measuring) is placed by its parameter id."""
    for name in KEYS:
        if re.search(rf"(^|-){name}($|-)", params):
            return name
    return None


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.1f}%"


def render_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The scoreboard section (Markdown lines; empty when there are no rows)."""
    if not rows:
        return []
    lines = ["## Metric conformance across datasets", "",
             "Runs with `--dataset all` (`pytest conformance/gru4rec --impl NAME --dataset all -k MC`). Δ: "
             "MC-2, ours against the full-featured reference on the same data and settings (for the reference: "
             "its seed 42 against its seeds 1–3); study: the published Δ of the implementation's study row "
             "against the official code's best parameters on the study's full dataset. These runs are not "
             "verdicts: each implementation's verdict is its row above.", ""]  # fmt: skip
    head = ["implementation", "dataset", "loss", "data", "recall@20 Δ", "study", "MRR@20 Δ", "study",
            "metric checks", "suite"]  # fmt: skip
    body = [[r["impl"] + (" (reference)" if r["role"] == "reference" and r["impl"] != "reference" else ""), r["dataset"], r["loss"], r["source"],
             _pct(r["recall@20"]["ours"]), _pct(r["recall@20"]["study"]), _pct(r["mrr@20"]["ours"]),
             _pct(r["mrr@20"]["study"]), ", ".join(f"{k} {v}" for k, v in sorted(r["checks"].items())) or "–",
             r["suite"] + ("" if r["status"] == "complete" else f" ({r['status']})")
             + (f" ({r['stale']})" if r.get("stale") else "")]
            for r in rows]  # fmt: skip
    return lines + md_table(head, body) + [""]
