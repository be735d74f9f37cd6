"""PNG plots of a run (matplotlib, Agg backend), written atomically into ``<run>/plots/``.

- ``kinds.png``: outcomes per check kind (stacked horizontal bars);
- ``features.png``: feature × outcome heatmap (counts; rows = features exercised or declared);
- ``metrics.png``: small multiples of the ranking metrics, one panel per metric and cutoff (recall@N, MRR@N);
  in each, one row per metric check (MC-1, MC-2, ...) with the reference band shaded and ours as a dot.

:func:`write_study_figure` draws the study figure of several runs (``reports render``): recall@20 and MRR@20 Δ
against the official code per implementation and fix level, ours beside the study's published Δ.
"""

from __future__ import annotations

import collections
import io
from pathlib import Path
from typing import Any

from gru4rec_conformance.datasets import study
from gru4rec_conformance.fileio import atomic_write_bytes
from gru4rec_conformance.reports.facts import headline_metrics
from gru4rec_conformance.reports.files import REPORT_FILE_MODE
from gru4rec_conformance.reports.results import OUTCOMES, RunData

COLORS = {
    "passed": "#1a7f37",
    "failed": "#cf222e",
    "error": "#8250df",
    "xpass": "#fa4549",
    "xfail": "#bf8700",
    "skipped-unsupported": "#8c959f",
    "skipped": "#d0d7de",
}


def _save(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue(), mode=REPORT_FILE_MODE)


def write_plots(run: RunData, directory: Path) -> dict[str, str]:
    """Write the plots that have data; returns ``{name: path relative to the run directory}``."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    results = run.results
    if not results:
        return written
    title = run.header.get("impl", {}).get("name", "?")

    # -- outcomes per kind ------------------------------------------------------------------------------
    kinds_order = list((run.header.get("kinds") or {}).keys())
    per_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        per_kind[(r.get("check") or {}).get("kind") or "(no kind)"][r["outcome"]] += 1
    kinds = [k for k in kinds_order if k in per_kind] + sorted(k for k in per_kind if k not in kinds_order)
    fig, ax = plt.subplots(figsize=(6.0, 0.28 * len(kinds) + 1.0))
    left = [0] * len(kinds)
    for outcome in OUTCOMES:
        vals = [per_kind[k].get(outcome, 0) for k in kinds]
        if any(vals):
            ax.barh(kinds, vals, left=left, color=COLORS[outcome], label=outcome, edgecolor="white", linewidth=0.5)
            left = [a + b for a, b in zip(left, vals)]
    ax.invert_yaxis()
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("checks")
    ax.set_title(f"{title}: outcomes per kind")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, directory / "kinds.png")
    plt.close(fig)
    written["kinds"] = "plots/kinds.png"

    # -- feature x outcome heatmap ---------------------------------------------------------------------
    per_feature: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        for f in r.get("features", []):
            per_feature[f][r["outcome"]] += 1
    rows = feature_rows(run)
    features = [f for f, _ in rows]
    if features:
        import numpy as np

        counts = np.array([[per_feature[f].get(o, 0) for o in OUTCOMES] for f in features], dtype=float)
        fig, ax = plt.subplots(figsize=(6.0, 0.28 * len(features) + 1.4))
        shown = np.where(counts > 0, 1.0, 0.0)
        rgb = np.ones(counts.shape + (3,))
        for j, o in enumerate(OUTCOMES):
            c = matplotlib.colors.to_rgb(COLORS[o])
            for i in range(len(features)):
                if shown[i, j]:
                    rgb[i, j] = c
        ax.imshow(rgb, aspect="auto", interpolation="nearest")
        for i in range(len(features)):
            for j in range(len(OUTCOMES)):
                if counts[i, j]:
                    ax.text(j, i, str(int(counts[i, j])), ha="center", va="center", fontsize=8, color="white")
        ax.set_xticks(range(len(OUTCOMES)), OUTCOMES, rotation=30, ha="right", fontsize=8)
        labels = [label for _, label in rows]
        ax.set_yticks(range(len(features)), labels, fontsize=8)
        ax.set_title(f"{title}: feature × outcome")
        _save(fig, directory / "features.png")
        plt.close(fig)
        written["features"] = "plots/features.png"

    # -- ranking metrics against the reference band, one panel per metric and cutoff ----------------------
    if write_metrics_figure(run, directory / "metrics.png"):
        written["metrics"] = "plots/metrics.png"
    return written


def feature_rows(run: RunData) -> list[tuple[str, str]]:
    """The rows of ``features.png``: ``(feature, label)`` for each feature a recorded check needs, the declared
    flags first in their declared order, then the others sorted.

    The label is the feature's name, with `` (declared absent)`` when the implementation declared it false and
    `` (undeclared)`` when its declaration does not name it. A ``hparam:<name>`` feature is declared when ``<name>``
    is among the declared hyperparameters (``capabilities.hyperparameters``), as the harness judges it.
    """
    impl = run.header.get("impl") or {}
    flags = impl.get("features") or {}
    hparams = (impl.get("capabilities") or {}).get("hyperparameters") or {}
    needed = list(dict.fromkeys(f for r in run.results for f in r.get("features") or ()))
    ordered = [f for f in flags if f in needed] + sorted(f for f in needed if f not in flags)

    def label(feature: str) -> str:
        prefix, _, name = feature.partition(":")
        if feature in flags:
            return feature if flags[feature] else f"{feature} (declared absent)"
        if prefix == "hparam" and name in hparams:
            return feature
        return f"{feature} (undeclared)"

    return [(f, label(f)) for f in ordered]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def write_metrics_figure(run: RunData, path: Path) -> bool:
    """Small multiples of recall@N and MRR@N (rows) per cutoff N (columns); False (nothing written) when the run
    recorded no ranking metric with a reference.

    In each panel, one row per check and context (``MC-1 cross-entropy``...): the reference band (reference ±
    tolerance) shaded grey, the reference a tick, ours a dot (green inside the band, red outside). Units are those
    of the metric (a fraction in [0, 1]); every panel of a row shares its x axis.
    """
    rows = headline_metrics(run)
    if not rows:
        return False
    plt = _pyplot()
    cutoffs = sorted({r["cutoff"] for r in rows})
    families = [m for m in ("recall", "mrr") if any(r["name"].startswith(m) for r in rows)]
    labels = list(dict.fromkeys(f"{r['check']} {r['loss']}" + (f" ({r['comparison']})" if r["comparison"] != "–" else "")
                                for r in rows))  # fmt: skip
    fig, axes = plt.subplots(
        len(families), len(cutoffs), figsize=(2.6 * len(cutoffs) + 2.4, 0.32 * len(labels) * len(families) + 1.6),
        squeeze=False, sharey=True,
    )  # fmt: skip
    for i, fam in enumerate(families):
        xmax = max([r["value"] for r in rows if r["name"].startswith(fam)]
                   + [r["reference"] + (r["tolerance"] or 0) for r in rows if r["name"].startswith(fam)])  # fmt: skip
        for j, n in enumerate(cutoffs):
            ax = axes[i][j]
            for r in rows:
                if r["name"] != f"{fam}@{n}":
                    continue
                y = labels.index(
                    f"{r['check']} {r['loss']}" + (f" ({r['comparison']})" if r["comparison"] != "–" else "")
                )
                tol = r["tolerance"] or 0.0
                ax.barh(y, 2 * tol, left=r["reference"] - tol, height=0.6, color="#d0d7de", zorder=1)
                ax.plot([r["reference"]] * 2, [y - 0.3, y + 0.3], color="#57606a", lw=1.2, zorder=2)
                ax.plot(r["value"], y, "o", ms=6, zorder=3,
                        color="#1a7f37" if r["within"] else "#cf222e")  # fmt: skip
            ax.set_xlim(0, min(1.0, xmax * 1.15) or 1.0)
            ax.set_title(f"{'Recall' if fam == 'recall' else 'MRR'}@{n}", fontsize=9)
            ax.tick_params(labelsize=7)
            ax.grid(axis="x", color="#eaeef2", zorder=0)
            ax.spines[["top", "right"]].set_visible(False)
    axes[0][0].set_yticks(range(len(labels)), labels, fontsize=7)
    axes[0][0].invert_yaxis()
    title = run.header.get("impl", {}).get("name", "?")
    fig.suptitle(f"{title}: ranking metrics vs the reference band (grey: reference ± tolerance; dot: ours, "
                 "green inside, red outside)", fontsize=9)  # fmt: skip
    fig.tight_layout()
    _save(fig, Path(path))
    plt.close(fig)
    return True


def study_points(runs: list[RunData], per_dataset: bool = False) -> list[dict[str, Any]]:
    """Per run with a study row: recall@20 and MRR@20 Δ of ours (the all-features check against the reference's
    best parameters, MC-2) and the study's published Δ (same implementation, fix level and loss against the
    official best parameters on its full dataset). Rows: ``label``, ``metric``, ``loss``, ``dataset``, ``ours``,
    ``study`` (fractions or None). ``per_dataset``: one label per dataset too (``"name [loss] @ rees46"``), for
    the runs on several datasets (:mod:`reports.matrix`)."""
    levels = ("OOB", "INF", "MIN", "MAJ")

    def order(run: RunData) -> tuple[str, int]:
        level = study.fix_level(run.header.get("impl", {}).get("study")) or ""
        name = str(run.header.get("impl", {}).get("name") or "")
        return (name.split(":")[0], levels.index(level) if level in levels else len(levels))

    out = []
    for run in sorted(runs, key=order):
        decl = run.header.get("impl", {}).get("study")
        if not decl or run.header.get("impl", {}).get("role") == "reference":
            continue  # the reference against itself says nothing
        for r in headline_metrics(run, ("recall@20", "mrr@20")):
            if r["comparison"] != "all features":
                continue
            where = f" @ {r['dataset']}" if per_dataset else ""
            out.append({"label": f"{run.header['impl'].get('name')} [{r['loss']}]{where}", "metric": r["name"],
                        "loss": r["loss"], "dataset": r["dataset"], "ours": r["delta_rel"],
                        "study": r["study_delta_rel"]})  # fmt: skip
    return out


def write_study_figure(runs: list[RunData], path: Path, per_dataset: bool = False) -> bool:
    """The study figure: recall@20 (left) and MRR@20 (right) Δ against the official implementation, one row per
    implementation, fix level and loss (and dataset, with ``per_dataset``); ours (blue, our dataset) beside the
    study's published Δ (orange, the study's full dataset). Δ in percent. False (nothing written) when no run has
    a study row with metrics."""
    points = study_points(runs, per_dataset)
    if not points:
        return False
    plt = _pyplot()
    labels = list(dict.fromkeys(p["label"] for p in points))
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 0.42 * len(labels) + 1.6), sharey=True, squeeze=False)
    for ax, metric in zip(axes[0], ("recall@20", "mrr@20")):
        for p in points:
            if p["metric"] != metric:
                continue
            y = labels.index(p["label"])
            if p["ours"] is not None:
                ax.barh(
                    y - 0.19,
                    100 * p["ours"],
                    height=0.36,
                    color="#0969da",
                    label="ours" if y == 0 or "ours" not in ax.get_legend_handles_labels()[1] else None,
                )
            if p["study"] is not None:
                ax.barh(y + 0.19, 100 * p["study"], height=0.36, color="#bc4c00",
                        label="study (published)" if "study (published)" not in ax.get_legend_handles_labels()[1]
                        else None)  # fmt: skip
        ax.axvline(0, color="#57606a", lw=0.8)
        ax.set_title(f"{metric}: Δ vs official best parameters (%)", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(axis="x", color="#eaeef2")
        ax.spines[["top", "right"]].set_visible(False)
    axes[0][0].set_yticks(range(len(labels)), labels, fontsize=8)
    axes[0][0].invert_yaxis()
    datasets = ", ".join(sorted({str(p["dataset"]) for p in points}))
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper right", fontsize=8, frameon=False, ncol=2)
    fig.suptitle(f"Ours (MC-2 on {datasets}) beside the study's published Δ (its full datasets)", fontsize=9, x=0.4)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    _save(fig, Path(path))
    plt.close(fig)
    return True
