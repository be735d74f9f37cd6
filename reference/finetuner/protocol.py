"""The full protocol: N seeded runs, each selected on validation, test evaluated once per run, artifacts saved
per run, results aggregated (docs/finetuner.md, 'Reference behaviour' items 9-12, 'Literature')."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gru4rec_conformance.datasets.sst5 import Examples
from gru4rec_conformance.fileio import atomic_write_json, atomic_write_text

from .config import FinetuneConfig
from .metrics import aggregate_runs, collapse_reasons, count_mismatch
from .models import ModelSpec
from .trainer import ReferenceFineTuner, _json_default


def run_dir_name(run_id: int, seed: int) -> str:
    """Directory name of one run's artifacts: carries the run id and the seed (FT-16, docs/checks.md)."""
    return f"run-{run_id:02d}-seed{seed}"


def run_once(
    spec: ModelSpec,
    train: Examples,
    val: Examples,
    test: Examples,
    config: FinetuneConfig,
    *,
    seed: int,
    run_id: int = 0,
    out_dir: str | os.PathLike | None = None,
    tuner_cls=ReferenceFineTuner,
) -> dict:
    """Build with ``seed``, fit on train/val, then evaluate test exactly once on the selected model.

    Returns the run record extended with run_id, seed, test (metrics dict), test_accuracy, test_macro_f1,
    test_collapse_reasons (None when the fine-tuner returned another number of test predictions than examples),
    split_log and, when ``out_dir`` is given, ``artifact_dir`` / ``artifacts`` (the
    selected checkpoint via save_pretrained, run.json and test_predictions.csv).
    """
    ft = tuner_cls(spec, num_labels=train.num_labels)
    ft.build(seed)
    rec = dict(ft.fit(train, val, config))
    test_metrics = ft.evaluate(test)
    # a fine-tuner that gives another number of test predictions than examples is reported by the checks that
    # count them (FT-6); its collapse cannot be judged against the labels
    miscounted = count_mismatch(len(test_metrics["predictions"]), len(test), "test examples")
    test_collapse = None
    if not miscounted:
        test_collapse = collapse_reasons(
            test_metrics["predictions"], test.labels, test_metrics["mean_ce"], test.num_labels
        )
    rec.update(
        run_id=run_id,
        seed=seed,
        test=test_metrics,
        test_accuracy=test_metrics["accuracy"],
        test_macro_f1=test_metrics["macro_f1"],
        test_collapse_reasons=test_collapse,
        split_log=list(ft.split_log),
        epochs_run=len(rec["epochs"]),
    )
    # A copy: the saved run.json keeps the fit manifest only, so no artifact depends on test labels (row 12).
    rec["manifest"] = {
        **rec["manifest"],
        "data": {
            **rec["manifest"]["data"],
            "test": {"split": test.split, "n": len(test), "sha256": test.content_hash(), "source": test.source},
        },
    }
    if out_dir is not None:
        d = Path(out_dir) / run_dir_name(run_id, seed)
        files = ft.save(d, extra={"seed": seed, "run_id": run_id})
        pred_path = d / "test_predictions.csv"
        _write_predictions(pred_path, test, test_metrics)
        rec["selected_checkpoint"] = str(d)
        rec["artifact_dir"] = str(d)
        rec["artifacts"] = sorted(files + [str(pred_path)])
    return rec


def _write_predictions(path: Path, test: Examples, metrics: dict) -> None:
    # no labels: artifacts must not depend on test labels (FT-12, docs/checks.md)
    atomic_write_text(path, "id,prediction\n" + "".join(f"{i},{p}\n" for i, p in zip(test.ids, metrics["predictions"])))


def run_repeats(
    spec: ModelSpec,
    train: Examples,
    val: Examples,
    test: Examples,
    config: FinetuneConfig | dict | None = None,
    *,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    out_dir: str | os.PathLike | None = None,
    tuner_cls=ReferenceFineTuner,
) -> dict:
    """N runs (one per seed), each selected on validation with test evaluated once; then ``aggregate_runs``.

    Returns {"runs": [run records], "aggregate": {...}, "config": config dict, "seconds": wall time}.
    With ``out_dir``, every run's artifacts go to ``out_dir/run-<id>-seed<seed>/`` and ``results.json`` is
    written there (atomically; an existing ``out_dir`` with results is refused).
    """
    cfg = config if isinstance(config, FinetuneConfig) else FinetuneConfig.from_mapping(config or {})
    if out_dir is not None:
        out_dir = Path(out_dir)
        if (out_dir / "results.json").exists():
            raise FileExistsError(f"{out_dir}/results.json exists; runs are never overwritten")
        out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs = [
        run_once(
            spec,
            train,
            val,
            test,
            cfg.replace(seed=int(s)),
            seed=int(s),
            run_id=i,
            out_dir=out_dir,
            tuner_cls=tuner_cls,
        )
        for i, s in enumerate(seeds)
    ]
    result = {
        "runs": runs,
        "aggregate": aggregate_runs(runs),
        "config": cfg.to_dict(),
        "seconds": time.perf_counter() - t0,
    }
    if out_dir is not None:
        write_json(out_dir / "results.json", result)
    return result


def write_json(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as JSON (indent 1; numpy scalars as numbers, other values JSON cannot hold as their ``str``)
    atomically (:func:`gru4rec_conformance.fileio.atomic_write_json`; ``OSError`` when it cannot be written)."""
    atomic_write_json(path, obj, default=_json_default)


def summarize(result: dict, label_names: Sequence[str] | None = None) -> str:
    """A Markdown summary: accuracy and macro-F1 mean ± std over runs, per-run table, collapse count."""
    agg = result["aggregate"]
    acc, f1 = agg["test_accuracy"], agg["test_macro_f1"]

    def pm(d):
        std = "n/a" if d["std"] is None or (isinstance(d["std"], float) and np.isnan(d["std"])) else f"{d['std']:.4f}"
        return f"{d['mean']:.4f} ± {std} (min {d['min']:.4f}, max {d['max']:.4f}, n={d['n']})"

    lines = [
        "# Reference fine-tuner: SST-5 runs",
        "",
        f"- test accuracy (val-selected): {pm(acc)}",
        f"- test macro-F1 (val-selected): {pm(f1)}",
        f"- collapsed runs: {agg['n_collapsed']} of {agg['n_runs']} (kept in the statistics)",
        "- expected max validation accuracy over k runs (Dodge et al. 2019): "
        + ", ".join(f"k={k + 1}: {v:.4f}" for k, v in enumerate(agg["expected_max_val_accuracy"])),
        "",
        "| run | seed | epochs | selected | stop | val | test acc | test macro-F1 | s/epoch (train) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        secs = [e["train_seconds"] for e in r["epochs"] if e.get("train_seconds") is not None]
        spe = f"{np.mean(secs):.1f}" if secs else "n/a"
        lines.append(
            f"| {r['run_id']} | {r['seed']} | {r['epochs_run']} | {r['selected_epoch']} | "
            f"{r['stop_reason']} | {r['selected_val_metric']:.4f} | {r['test_accuracy']:.4f} | "
            f"{r['test_macro_f1']:.4f} | {spe} |"
        )
    return "\n".join(lines) + "\n"


def plot(result: dict, out_dir: str | os.PathLike) -> list[str]:
    """confusion.png (summed test confusion matrix over runs, rows = true) and curves.png (per-epoch train/val
    loss and val accuracy of every run). Returns the written paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    paths = []
    cm = np.sum([np.asarray(r["test"]["confusion_matrix"]) for r in result["runs"]], axis=0)
    fig, ax = plt.subplots(figsize=(4.5, 4))
    im = ax.imshow(cm, cmap="Blues")
    for (i, j), v in np.ndenumerate(cm):
        ax.text(j, i, str(v), ha="center", va="center", fontsize=8, color="white" if v > cm.max() / 2 else "black")
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"test confusion matrix (sum of {len(result['runs'])} runs)")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    p = out_dir / "confusion.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    paths.append(str(p))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for r in result["runs"]:
        ep = [e["epoch"] for e in r["epochs"]]
        axes[0].plot(ep, [e["train_loss"] for e in r["epochs"]], "--", label=f"train s{r['seed']}")
        axes[0].plot(ep, [e["val_loss"] for e in r["epochs"]], "-", label=f"val s{r['seed']}")
        axes[1].plot(ep, [e["val_accuracy"] for e in r["epochs"]], "-o", label=f"seed {r['seed']}")
        axes[1].axvline(r["selected_epoch"], color="grey", lw=0.5)
    axes[0].set_title("mean per-example CE")
    axes[1].set_title("val accuracy (vertical: selected epoch)")
    for a in axes:
        a.set_xlabel("epoch")
        a.legend(fontsize=6)
    fig.tight_layout()
    p = out_dir / "curves.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    paths.append(str(p))
    return paths
