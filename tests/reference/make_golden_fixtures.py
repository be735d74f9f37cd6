"""Record the golden outputs of the official GRU4Rec PyTorch port for the reference's golden tests.

Usage (from the repository root; the official code is never copied into this repository):

    git clone https://github.com/hidasib/GRU4Rec_PyTorch_Official /tmp/official   # commit d1fc311
    python tests/reference/make_golden_fixtures.py /tmp/official [--parts iterator,step,eval,e2e]
        [--shared-data ../shared/data] [--seeds 1,2,3] [--threads 1]

Writes, under tests/reference/fixtures/ (numbers only, atomically):
    iterator_golden.npz     the official (input, target, lane reset, lane count) sequence per step
    step_golden.npz         one/two training steps from injected weights: loss, gradients, parameters, states
    eval_golden.npz         per-event ranks and metrics of the official evaluator on a score table with ties
    e2e_yoochoose_100k.json Recall/MRR@{1,5,10,20} of official and reference on the real Yoochoose 100k slice
    provenance.json         official commit, library versions, command line, per-part timestamps

Shims applied to the official code at run time (declared; none changes its semantics):
    - ``gru4rec_pytorch.torch`` is wrapped so that ``torch.tensor(pandas.Series)`` converts the Series to NumPy
      first: the port builds its logQ supports with ``torch.tensor(Series)``, which current pandas/torch reject.
    - ``fit(..., compatibility_mode=False)``: the compatibility init fails on NumPy 2 (float64 promotion).
    - device 'cpu'; weights are injected with ``copy_`` into the port's parameters; fixed dropout masks are
      injected by replacing the port's ``nn.Dropout`` modules with a module multiplying by the mask.
    - evaluation: ``batch_eval`` receives a port ``GRU4Rec`` object whose ``model.forward`` returns rows of a
      given score table (the score of every item after the *last* input item).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURES = HERE / "fixtures"
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HERE))

from ref_golden_cases import E2E_PARAMS, EVAL_CASE, ITERATOR_CASES, STEP_CASES, eval_data, iterator_data, step_data  # noqa: E402

from gru4rec_conformance.fileio import atomic_path, atomic_write_json  # noqa: E402


# ----------------------------------------------------------------------------------------------- utilities
def save_npz(path: Path, arrays: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)


def save_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, obj, indent=1, sort_keys=True, trailing_newline=True)


def load_official(path: Path):
    """The port's ``(gru4rec_pytorch, evaluation)`` from a checkout, with the declared shim (benchmarks.runners)."""
    from gru4rec_conformance.benchmarks.runners import import_official_port

    return import_official_port(path)


def official_commit(path: Path) -> str:
    try:
        return subprocess.check_output(["git", "-C", str(path), "rev-parse", "HEAD"], text=True).strip()
    except Exception:
        return "unknown (not a git checkout; expected d1fc311)"


class _Quiet:
    """Silence the port's prints."""

    def __enter__(self):
        self._stdout = sys.stdout
        sys.stdout = open(os.devnull, "w")

    def __exit__(self, *a):
        sys.stdout.close()
        sys.stdout = self._stdout


class MaskMul(torch.nn.Module):
    """Stands in for the port's nn.Dropout: multiplies by a fixed (already scaled) mask."""

    def __init__(self, mask):
        super().__init__()
        self.mask = torch.as_tensor(mask, dtype=torch.float32)

    def forward(self, x):
        return x * self.mask


# ----------------------------------------------------------------------------------------------- iterator
def make_iterator(gp) -> dict:
    out = {}
    df = iterator_data()
    out["data.SessionId"] = df.SessionId.to_numpy()
    out["data.ItemId"] = df.ItemId.to_numpy()
    out["data.Time"] = df.Time.to_numpy()
    for name, B, S in ITERATOR_CASES:
        with _Quiet():
            gru = gp.GRU4Rec(layers=[1], batch_size=B, n_sample=S, device=torch.device("cpu"))
            it = gp.SessionDataIterator(
                df.copy(), B, n_sample=S, sample_alpha=0.5, sample_cache_max_size=1000, device=torch.device("cpu")
            )
        H = [torch.ones((B, 1))]
        hook = lambda n_valid, fm, vm: gru._adjust_hidden(n_valid, fm, vm, H)  # noqa: E731, B023 (used in this iteration)
        ins, outs, resets, lanes, nsamp = [], [], [], [], []
        for in_idx, y in it(enable_neg_samples=(S > 0), reset_hook=hook):
            b = len(in_idx)
            # lanes whose state the port zeroed since the previous step (H re-armed to 1 after each step)
            resets.append((H[0][:, 0] == 0).numpy().copy())
            H[0].fill_(1.0)
            ins.append(in_idx.numpy().astype(np.int64))
            outs.append(y[:b].numpy().astype(np.int64))
            nsamp.append(len(y) - b)
            lanes.append(b)
        out[f"{name}.item_ids"] = it.itemidmap.index.to_numpy()
        out[f"{name}.lanes"] = np.asarray(lanes, dtype=np.int64)
        out[f"{name}.n_samples"] = np.asarray(nsamp, dtype=np.int64)
        out[f"{name}.in"] = np.concatenate(ins) if ins else np.zeros(0, np.int64)
        out[f"{name}.out"] = np.concatenate(outs) if outs else np.zeros(0, np.int64)
        out[f"{name}.reset"] = np.concatenate(resets) if resets else np.zeros(0, bool)
    return out


# ----------------------------------------------------------------------------------------------- one step
def _official_param(model, name):
    if name == "Wy":
        return model.Wy.weight
    if name == "By":
        return model.By.weight
    if name == "E":
        return model.E.weight
    if name == "GE.Wx0":
        return model.GE.Wx0.weight
    if name.startswith("GE."):
        return getattr(model.GE, name[3:])
    _, l, attr = name.split(".")
    return getattr(model.G[int(l) - model.start], attr)


def make_steps(gp) -> dict:
    out = {"cases_json": np.asarray(json.dumps([c["name"] for c in STEP_CASES]))}
    df = step_data()
    out["data.SessionId"] = df.SessionId.to_numpy()
    out["data.ItemId"] = df.ItemId.to_numpy()
    out["data.Time"] = df.Time.to_numpy()
    for case in STEP_CASES:
        name, hp, steps = case["name"], dict(case["hp"]), case["steps"]
        with _Quiet():
            gru = gp.GRU4Rec(device=torch.device("cpu"), n_epochs=0, **hp)
            gru.fit(df.copy(), sample_cache_max_size=1000, compatibility_mode=False)
        model = gru.model
        out[f"{name}.item_ids"] = gru.data_iterator.itemidmap.index.to_numpy()
        out[f"{name}.hp_json"] = np.asarray(json.dumps(hp))
        out[f"{name}.n_steps"] = np.int64(len(steps))
        weights = case["weights"]
        names = sorted(weights)
        with torch.no_grad():
            official_names = {n for n, _ in model.named_parameters()}
            assert len(official_names) == len(names), (name, official_names, names)
            for k in names:
                p = _official_param(model, k)
                p.copy_(torch.as_tensor(weights[k].reshape(p.shape)))
        for k in names:
            out[f"{name}.w0.{k}"] = weights[k]
        opt = gp.IndexedAdagradM(model.parameters(), gru.learning_rate, gru.momentum)
        H = [torch.as_tensor(h.copy()) for h in case["hidden"]]
        for j, h in enumerate(case["hidden"]):
            out[f"{name}.hidden.{j}"] = h
        for s, st in enumerate(steps):
            x = torch.as_tensor(st["in"])
            y = torch.as_tensor(np.concatenate([st["targets"], st["samples"]]).astype(np.int64))
            out[f"{name}.s{s}.in"] = st["in"]
            out[f"{name}.s{s}.targets"] = st["targets"]
            out[f"{name}.s{s}.samples"] = st["samples"]
            if st.get("masks"):
                for k, m in st["masks"].items():
                    out[f"{name}.s{s}.mask.{k}"] = m
                    mod = MaskMul(m)
                    if k == "embed":
                        model.DE = mod
                    else:
                        model.D[int(k.split(".")[1]) - model.start] = mod
            model.zero_grad()
            for h in H:
                h.detach_()
            R = model.forward(x, H, y, training=True)
            M = st.get("M", hp["batch_size"])  # the port passes the nominal B
            out[f"{name}.s{s}.M"] = np.int64(M)
            L = gru.loss_function(R, y, M) / hp["batch_size"]
            L.backward()
            out[f"{name}.s{s}.loss"] = np.float64(L.item())
            out[f"{name}.s{s}.R"] = R.detach().numpy()
            for k in names:
                g = _official_param(model, k).grad
                g = g.coalesce().to_dense() if g is not None and g.is_sparse else g
                out[f"{name}.s{s}.grad.{k}"] = (
                    np.zeros_like(weights[k]) if g is None else g.detach().numpy().reshape(weights[k].shape)
                )
            opt.step()
            for k in names:
                out[f"{name}.s{s}.w.{k}"] = _official_param(model, k).detach().numpy().reshape(weights[k].shape).copy()
            for j, h in enumerate(H):
                out[f"{name}.s{s}.H.{j}"] = h.detach().numpy().copy()
    return out


# ----------------------------------------------------------------------------------------------- evaluation
def make_eval(gp, ev) -> dict:
    table, train, test = eval_data()
    out = {
        "table": table,
        "test.SessionId": test.SessionId.to_numpy(),
        "test.ItemId": test.ItemId.to_numpy(),
        "test.Time": test.Time.to_numpy(),
        "train.ItemId": train.ItemId.to_numpy(),
    }

    class FakeModel:
        def forward(self, X, H, Y, training=False):
            return torch.as_tensor(table)[X]

    with _Quiet():
        gru = gp.GRU4Rec(layers=[1], n_sample=EVAL_CASE["n_sample"], device=torch.device("cpu"))
        itemidmap = gp.SessionDataIterator(train.copy(), 1, 0, device=torch.device("cpu")).itemidmap
    gru.error_during_train = False
    gru.data_iterator = types.SimpleNamespace(itemidmap=itemidmap)
    gru.model = FakeModel()
    out["item_ids"] = itemidmap.index.to_numpy()
    N = len(itemidmap)
    pairs = EVAL_CASE["pairs"]
    out["pairs"] = np.asarray(pairs, dtype=np.int64)
    errors = {}
    for mode in ("standard", "conservative", "median"):
        try:
            ranks = []
            for a, b in pairs:
                one = pd.DataFrame({"SessionId": [1, 1], "ItemId": [a, b], "Time": [0, 1]})
                with _Quiet():
                    rec, _ = ev.batch_eval(gru, one, cutoff=list(range(1, N + 1)), batch_size=1, mode=mode)
                ranks.append(N + 1 - sum(rec.values()))
            out[f"{mode}.pair_ranks"] = np.asarray(ranks, dtype=np.float64)
            for bs in EVAL_CASE["batch_sizes"]:
                with _Quiet():
                    rec, mrr = ev.batch_eval(gru, test.copy(), cutoff=EVAL_CASE["cutoffs"], batch_size=bs, mode=mode)
                out[f"{mode}.b{bs}.recall"] = np.asarray([rec[c] for c in EVAL_CASE["cutoffs"]], dtype=np.float64)
                out[f"{mode}.b{bs}.mrr"] = np.asarray([mrr[c] for c in EVAL_CASE["cutoffs"]], dtype=np.float64)
        except Exception as e:  # the port's median branch is broken
            errors[mode] = f"{type(e).__name__}: {e}"
    out["cutoffs"] = np.asarray(EVAL_CASE["cutoffs"])
    out["errors_json"] = np.asarray(json.dumps(errors))
    return out


# ----------------------------------------------------------------------------------------------- end to end
def make_e2e(gp, ev, shared: Path, seeds: list[int], previous: dict | None = None) -> dict:
    """Train and evaluate both sides; with ``previous`` (an earlier result) and ``gp`` None, only the reference
    side is re-run and the recorded official side is kept."""
    from gru4rec_conformance.reference.gru4rec import GRU4Rec

    base = shared / "sessions/yoochoose/rsc15_100k_prepared"
    train = pd.read_csv(base / "yoochoose-clicks-100k_train_full.txt", sep="\t")
    test = pd.read_csv(base / "yoochoose-clicks-100k_test.txt", sep="\t")
    cutoffs = [1, 5, 10, 20]
    result = {
        "dataset": "yoochoose rsc15_100k_prepared train_full -> test",
        "cutoffs": cutoffs,
        "mode": "conservative",
        "eval_batch_size": 512,
        "seeds": seeds,
        "runs": {},
    }
    for loss, hp in E2E_PARAMS.items():
        runs = {"params": hp, "official": [], "reference": []}
        if gp is None:
            runs["official"] = previous["runs"][loss]["official"]
            assert [r["seed"] for r in runs["official"]] == seeds, "recorded official seeds differ"
        for seed in seeds:
            if gp is not None:
                torch.manual_seed(seed)
                np.random.seed(seed)
                t0 = time.perf_counter()
                with _Quiet():
                    gru = gp.GRU4Rec(device=torch.device("cpu"), **hp)
                    gru.fit(train.copy(), compatibility_mode=False)
                t1 = time.perf_counter()
                with _Quiet():
                    rec, mrr = ev.batch_eval(gru, test.copy(), cutoff=cutoffs, batch_size=512, mode="conservative")
                runs["official"].append(
                    {
                        "seed": seed,
                        "train_seconds": t1 - t0,
                        **{f"recall@{c}": float(rec[c]) for c in cutoffs},
                        **{f"mrr@{c}": float(mrr[c]) for c in cutoffs},
                    }
                )
            t0 = time.perf_counter()
            ref = GRU4Rec(seed=seed, **hp)
            rep = ref.fit(train)
            t1 = time.perf_counter()
            m = ref.evaluate(test, cutoffs=cutoffs, batch_size=512, mode="conservative")
            runs["reference"].append(
                {
                    "seed": seed,
                    "train_seconds": t1 - t0,
                    "epoch_losses": rep.epoch_losses,
                    **{k: float(v) for k, v in m.items() if k != "n_events"},
                }
            )
            runs["n_events"] = int(m["n_events"])
            off = [r for r in runs["official"] if r["seed"] == seed][0]
            print(
                f"  e2e {loss} seed {seed}: official R@20 {off['recall@20']:.4f} MRR@20 {off['mrr@20']:.4f} | "
                f"reference R@20 {m['recall@20']:.4f} MRR@20 {m['mrr@20']:.4f}",
                flush=True,
            )
        for side in ("official", "reference"):
            keys = [k for k in runs[side][0] if k.startswith(("recall", "mrr"))]
            runs[f"{side}_mean"] = {k: float(np.mean([r[k] for r in runs[side]])) for k in keys}
            runs[f"{side}_std"] = {
                k: float(np.std([r[k] for r in runs[side]], ddof=1)) if len(seeds) > 1 else 0.0 for k in keys
            }
        runs["relative_difference_of_means"] = {
            k: runs["reference_mean"][k] / runs["official_mean"][k] - 1 for k in runs["official_mean"]
        }
        result["runs"][loss] = runs
    return result


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("official", type=Path, help="path of a GRU4Rec_PyTorch_Official checkout (commit d1fc311)")
    ap.add_argument(
        "--parts",
        default="iterator,step,eval,e2e",
        help="comma-separated: iterator, step, eval, e2e (both sides), e2e-reference (re-run only the "
        "reference side of an existing e2e fixture)",
    )
    ap.add_argument(
        "--shared-data", type=Path, default=Path(os.environ.get("GRU4REC_SHARED_DATA", REPO.parent / "shared" / "data"))
    )
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = ap.parse_args(argv)
    if not (args.official / "gru4rec_pytorch.py").exists():
        ap.error(f"{args.official}: gru4rec_pytorch.py not found; pass the official checkout path")
    torch.set_num_threads(args.threads)
    gp, ev = load_official(args.official)
    parts = args.parts.split(",")
    prov_path = FIXTURES / "provenance.json"
    prov = json.loads(prov_path.read_text()) if prov_path.exists() else {}
    prov.update(
        {
            "official_repository": "hidasib/GRU4Rec_PyTorch_Official",
            "official_commit": official_commit(args.official),
            "versions": {
                "python": sys.version.split()[0],
                "torch": torch.__version__,
                "numpy": np.__version__,
                "pandas": pd.__version__,
            },
            "threads": args.threads,
        }
    )
    prov.setdefault("parts", {})
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    cmd = "python tests/reference/make_golden_fixtures.py <official checkout> " + " ".join(
        a for a in (argv if argv is not None else sys.argv[2:])
    )
    if "iterator" in parts:
        save_npz(FIXTURES / "iterator_golden.npz", make_iterator(gp))
        prov["parts"]["iterator"] = {"written": stamp, "command": cmd}
    if "step" in parts:
        save_npz(FIXTURES / "step_golden.npz", make_steps(gp))
        prov["parts"]["step"] = {"written": stamp, "command": cmd}
    if "eval" in parts:
        save_npz(FIXTURES / "eval_golden.npz", make_eval(gp, ev))
        prov["parts"]["eval"] = {"written": stamp, "command": cmd}
    if "e2e" in parts or "e2e-reference" in parts:
        seeds = [int(s) for s in args.seeds.split(",")]
        path = FIXTURES / "e2e_yoochoose_100k.json"
        if "e2e" in parts:
            save_json(path, make_e2e(gp, ev, args.shared_data, seeds))
            prov["parts"]["e2e"] = {"written": stamp, "command": cmd}
        else:  # re-run only the reference side, keep the recorded official numbers
            save_json(path, make_e2e(None, None, args.shared_data, seeds, json.loads(path.read_text())))
            prov["parts"]["e2e"]["reference_side_rewritten"] = {"written": stamp, "command": cmd}
    save_json(prov_path, prov)
    print("fixtures written to", FIXTURES)


if __name__ == "__main__":
    main()
