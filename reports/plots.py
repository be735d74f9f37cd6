"""PNG plots of a run (matplotlib, Agg backend), written atomically into ``<run>/plots/``.

- ``kinds.png``: outcomes per check kind (stacked horizontal bars);
- ``features.png``: feature × outcome heatmap (counts; rows = features exercised or declared);
- ``metrics.png``: each recorded metric beside its reference value, with the tolerance as an error bar.
"""

from __future__ import annotations

import collections
import io
from pathlib import Path
from typing import Any

from gru4rec_conformance.fileio import atomic_write_bytes
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
    atomic_write_bytes(path, buf.getvalue())


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
    declared = run.header.get("impl", {}).get("features") or {}
    per_feature: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        for f in r.get("features", []):
            per_feature[f][r["outcome"]] += 1
    features = [f for f in declared if f in per_feature] + sorted(f for f in per_feature if f not in declared)
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
        labels = [f"{f}{'' if declared.get(f) else ' (undeclared)'}" for f in features]
        ax.set_yticks(range(len(features)), labels, fontsize=8)
        ax.set_title(f"{title}: feature × outcome")
        _save(fig, directory / "features.png")
        plt.close(fig)
        written["features"] = "plots/features.png"

    # -- metrics against the reference --------------------------------------------------------------------
    metrics = [
        (m, r) for r in results for m in r.get("metrics", [])
        if isinstance(m.get("value"), (int, float)) and isinstance(m.get("reference"), (int, float))
    ]  # fmt: skip
    if metrics:
        import numpy as np

        names = [f"{(r.get('check') or {}).get('id') or ''} {m['name']}".strip() for m, r in metrics]
        ours = np.array([m["value"] for m, _ in metrics], dtype=float)
        ref = np.array([m["reference"] for m, _ in metrics], dtype=float)
        tol = np.array(
            [m.get("tolerance") if isinstance(m.get("tolerance"), (int, float)) else 0.0 for m, _ in metrics]
        )
        x = np.arange(len(metrics))
        fig, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.5 * len(metrics) + 2)), 3.6))
        ax.bar(x - 0.2, ref, width=0.4, color="#57606a", label="reference", yerr=tol, capsize=3, error_kw={"lw": 1})
        colors = [COLORS.get(r["outcome"], "#0969da") for _, r in metrics]
        ax.bar(x + 0.2, ours, width=0.4, color=colors, label=title)
        ax.set_xticks(x, names, rotation=45, ha="right", fontsize=8)
        ax.set_title(f"{title} vs reference (error bar: tolerance; colour: outcome)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        ax.spines[["top", "right"]].set_visible(False)
        _save(fig, directory / "metrics.png")
        plt.close(fig)
        written["metrics"] = "plots/metrics.png"
    return written
