"""Static (CUDA-graph) training step against the standard step on one device: agreement and speed.

    python benchmarks/gpu/check_static_step.py --device cuda --out $OUT/static_step.json

(a) Agreement: the same seed trained with ``step_impl='standard'`` and ``'static'`` for 2 epochs on small session
data (the three embedding modes, both losses, dropout and momentum, the shrinking tail included) must give the same
weights to float32 rounding (on CUDA the row-gradient sums use atomics in both steps, so equal values, not equal bits,
are expected; the dropout masks and negative samples are drawn identically). Reported: the largest relative
difference per configuration, whether the CUDA graph was captured (``step_info``), any capture error.

(b) Speed: one epoch of Coveo-shaped data at the study's Coveo cross-entropy and BPR-max parameters with the
standard step, the eager static step and the static step in a CUDA graph (minibatches/s, epoch seconds).

Exit status 0 even when (a) disagrees (the JSON says so: ``"agree": false``); 2 on a usage error; 3 with
``--require-graph`` when on CUDA a static fit did not replay a CUDA graph (the capture failed and the step fell
back to eager execution: ``graph_error`` in the JSON says why), after the JSON is written. ``--update`` merges the
results into an existing JSON (the GPU script runs the agreement first and the speed last). This script is part of
the GPU check of benchmarks/gpu/run_gpu_benchmarks.sh; it runs on CPU too (graph rows then say so).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "src") not in sys.path:  # the gru4rec_conformance namespace (never the root itself)
    sys.path.insert(0, str(REPO / "src"))

from gru4rec_conformance.benchmarks.workload import best_params, sweep_frame  # noqa: E402
from gru4rec_conformance.fileio import atomic_write_json  # noqa: E402
from gru4rec_conformance.reference.gru4rec import GRU4Rec  # noqa: E402

TOL = 1e-4  # relative to each array's largest entry, after 2 epochs


def lag_sessions(n_sessions=160, n_items=40, seed=3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lens = rng.integers(2, 10, n_sessions)
    start = rng.integers(0, n_items, n_sessions)
    items = np.concatenate([(s + np.arange(L)) % n_items for s, L in zip(start, lens)])
    return pd.DataFrame(
        {
            "SessionId": np.repeat(np.arange(n_sessions), lens),
            "ItemId": 1000 + items,
            "Time": np.arange(len(items), dtype=float),
        }
    )


CONFIGS = {
    "shared/xe/dropout": dict(
        constrained_embedding=True,
        loss="cross-entropy",
        logq=1.0,
        sample_alpha=0.5,
        dropout_p_embed=0.3,
        dropout_p_hidden=0.2,
        momentum=0.0,
    ),
    "shared/bprmax/dropout+momentum": dict(
        constrained_embedding=True,
        loss="bpr-max",
        elu_param=1.0,
        bpreg=1.0,
        sample_alpha=0.3,
        dropout_p_embed=0.3,
        dropout_p_hidden=0.2,
        momentum=0.4,
    ),
    "separate/xe/momentum": dict(
        constrained_embedding=False, embedding=12, loss="cross-entropy", logq=1.0, sample_alpha=0.5, momentum=0.4
    ),
    "none/bprmax/dropout+momentum": dict(
        constrained_embedding=False,
        embedding=0,
        loss="bpr-max",
        elu_param=0.5,
        dropout_p_embed=0.3,
        dropout_p_hidden=0.2,
        momentum=0.4,
        layers=[24, 16],
    ),
}


def agreement(device: str) -> dict:
    df = lag_sessions()
    out = {}
    for name, cfg in CONFIGS.items():
        hp = dict(layers=[24], batch_size=16, n_sample=32, learning_rate=0.1, seed=5, device=device)
        hp.update(cfg)
        res = {}
        for impl in ("standard", "static"):
            g = GRU4Rec(step_impl=impl, **hp)
            rep = g.fit(df, n_epochs=2)
            res[impl] = (g.get_weights(), rep, dict(g.step_info))
        (wa, ra, _), (wb, rb, info) = res["standard"], res["static"]
        worst = max(float(np.max(np.abs(wa[k] - wb[k])) / (np.max(np.abs(wa[k])) or 1.0)) for k in wa)
        bitwise = all(np.array_equal(wa[k], wb[k]) for k in wa)
        loss_rel = max(abs(a - b) / abs(a) for a, b in zip(ra.epoch_losses, rb.epoch_losses))
        out[name] = {
            "max_rel_weight_diff": worst,
            "bitwise": bitwise,
            "max_rel_epoch_loss_diff": loss_rel,
            "agree": bool(worst <= TOL and loss_rel <= TOL and ra.n_steps == rb.n_steps),
            "static_step_info": info,
        }
    return out


def speed(device: str, sessions: int) -> dict:
    df = sweep_frame(sessions, 10_868, events_per_session=8.52, seed=0)
    out: dict[str, Any] = {"sessions": sessions, "events": int(len(df))}
    variants = [("standard", "standard", None), ("static-eager", "static", False)]
    if device.startswith("cuda"):
        variants.append(("static-graph", "static", True))
    for loss in ("cross-entropy", "bpr-max"):
        hp = best_params("coveo", loss)
        for label, impl, graph in variants:
            g = GRU4Rec(step_impl=impl, **hp, n_epochs=1, seed=1, device=device)
            if graph is not None:
                g.static_cuda_graph = graph
            cache = hp["n_sample"] * (len(df) // hp["batch_size"] + hp["batch_size"])
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            rep = g.fit(df, sample_cache_max_size=cache)
            wall = time.perf_counter() - t0
            out[f"{loss}/{label}"] = {
                "epoch_seconds": rep.epoch_seconds[0],
                "fit_seconds": wall,
                "minibatches": rep.n_steps[0],
                "minibatches_per_s": rep.n_steps[0] / rep.epoch_seconds[0],
                "step_info": dict(g.step_info),
            }
        base = out[f"{loss}/standard"]["epoch_seconds"]
        for label, _, _ in variants:
            out[f"{loss}/{label}"]["speedup_over_standard"] = base / out[f"{loss}/{label}"]["epoch_seconds"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--speed-sessions", type=int, default=20_000, help="sessions of the speed data (0: skip)")
    ap.add_argument("--no-agreement", action="store_true", help="skip (a), the agreement of the weights")
    ap.add_argument("--update", action="store_true", help="merge into --out when it exists (keys replaced)")
    ap.add_argument(
        "--require-graph", action="store_true", help="exit 3 when on CUDA a static fit ran without its CUDA graph"
    )
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda: CUDA is not available")
    torch.set_num_threads(int(os.environ.get("GRU4REC_BENCH_THREADS", "1")))
    res = {
        "device": args.device,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "cuda": torch.version.cuda,
        "tolerance": TOL,
    }
    if args.update and args.out.is_file():
        res = {**json.loads(args.out.read_text(encoding="utf-8")), **res}
    t0 = time.perf_counter()
    if not args.no_agreement:
        res["agreement"] = agreement(args.device)
        res["agree"] = all(v["agree"] for v in res["agreement"].values())
        res["agreement_seconds"] = time.perf_counter() - t0
    if args.speed_sessions:
        res["speed"] = speed(args.device, args.speed_sessions)
    fell_back = graph_fallbacks(res) if args.device.startswith("cuda") else []
    res["cuda_graph_fallbacks"] = fell_back
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, res, indent=2, default=str, trailing_newline=True)
    print(json.dumps({k: v for k, v in res.items() if k != "speed"}, indent=1, default=str)[:3000])
    for k, v in (res.get("speed") or {}).items():
        if isinstance(v, dict):
            print(
                f"{k:<32} {v['minibatches_per_s']:8.1f} mb/s  {v['epoch_seconds']:7.2f} s  "
                f"x{v['speedup_over_standard']:.2f} vs standard  graph={v['step_info'].get('cuda_graph')}"
            )
    if fell_back and args.require_graph:
        print(
            "FAILED: the CUDA graph was not captured, the static step fell back to eager execution in: "
            + "; ".join(fell_back),
            file=sys.stderr,
        )
        return 3
    return 0


def graph_fallbacks(res: dict) -> list[str]:
    """``'<run>: <graph_error>'`` for every static-step run of ``res`` that was meant to replay a CUDA graph and
    did not (the agreement runs, and the speed runs labelled ``static-graph``)."""
    out = []
    for name, v in (res.get("agreement") or {}).items():
        info = v.get("static_step_info") or {}
        if info.get("cuda_graph") is not True:
            out.append(f"agreement {name}: {info.get('graph_error') or 'no graph'}")
    for name, v in (res.get("speed") or {}).items():
        if name.endswith("/static-graph") and isinstance(v, dict) and v["step_info"].get("cuda_graph") is not True:
            out.append(f"speed {name}: {v['step_info'].get('graph_error') or 'no graph'}")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
