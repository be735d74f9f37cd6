"""The reference's CPU training step against its matmul floor, and the official port against the reference.

The *floor* of a training step is the time of the matrix products no implementation of GRU4Rec's step can avoid,
timed alone on preallocated operands (``torch.mm(..., out=...)``): per GRU layer the input and recurrent products of
the forward pass and, backward, the gradients of the layer's input and of its two weight matrices (the incoming
hidden state is detached, so its gradient is never needed); for the scores the forward product and, backward, the
gradients of the last hidden state and of the scored output rows. One layer gives eight products. The lane count b of
every step is that of the reference's epoch (the shrinking tail included), and every step scores K = b + S columns.

One interleaved run per shape (dataset, loss): every round times, one after the other, (1) the reference's epoch
(``train_epoch`` of the built model's standard step over the epoch's recorded runs: the steps only, see
:class:`Replay`), (2) the floor of that same epoch's steps and,
with an official checkout, (3) the official port's whole ``fit`` and the reference's whole ``fit`` (build + epoch) on
the same data. All times are CPU seconds of this process (``time.process_time``) with one torch thread, so the
ratios are robust to the load of a shared machine; the figure of a ratio is its median over the rounds, each round's
pair measured minutes apart at most.

Data: ``workload.padded_data`` (the study's catalogue size of the dataset, about ``minibatches`` trained
minibatches); hyperparameters: the study's best (``workload.best_params``), ``n_sample`` overridable. The sample
cache holds one epoch's rows, as in the epoch benchmarks (``runners.epoch_sample_cache``), so neither side draws
ids it does not use.

    PYTHONPATH=src python -m gru4rec_conformance.benchmarks.floor [--shapes yoochoose/cross-entropy,...]
        [--minibatches 100] [--rounds 3] [--n-sample S] [--official PATH] [--json OUT]

prints one line per shape: ms per step of the reference and of the floor, reference/floor, official/reference.
The official checkout is ``--official``, else ``OFFICIAL_GRU4REC_PATH``, else the adapters' pinned checkout
(``implementations._checkout.locate``: their cache, or ``GRU4REC_MIRROR_DIR``); without one the line says
``official/reference n/a`` and why.
``benchmarks/test_floor.py`` runs the same measurement under pytest (``extra_info``). Speed is reported, never
asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

import torch

from gru4rec_conformance.benchmarks.runners import epoch_sample_cache
from gru4rec_conformance.benchmarks.workload import best_params, padded_data

#: the study's shapes of the speed target: (dataset, loss)
SHAPES = (
    ("yoochoose", "cross-entropy"),
    ("yoochoose", "bpr-max"),
    ("coveo", "cross-entropy"),
    ("retailrocket", "bpr-max"),
)


@dataclass
class FloorResult:
    """One shape's interleaved measurement (CPU seconds per round; ratios: medians over rounds)."""

    dataset: str
    loss: str
    hp: dict
    n_items: int
    n_steps: int
    n_events: int
    ref_epoch_cpu: list = field(default_factory=list)
    floor_cpu: list = field(default_factory=list)
    ref_fit_cpu: list = field(default_factory=list)
    official_fit_cpu: list = field(default_factory=list)

    @property
    def ref_over_floor(self) -> float:
        return statistics.median(r / f for r, f in zip(self.ref_epoch_cpu, self.floor_cpu))

    @property
    def official_over_ref(self) -> float | None:
        if not self.official_fit_cpu:
            return None
        return statistics.median(o / r for o, r in zip(self.official_fit_cpu, self.ref_fit_cpu))

    def as_dict(self) -> dict:
        d = asdict(self)
        d["ref_ms_per_step"] = 1000 * min(self.ref_epoch_cpu) / self.n_steps
        d["floor_ms_per_step"] = 1000 * min(self.floor_cpu) / self.n_steps
        d["ref_over_floor"] = self.ref_over_floor
        d["official_over_ref"] = self.official_over_ref
        return d


class Floor:
    """The unavoidable matrix products of the steps of one epoch, on preallocated float32 operands.

    Args:
        lanes: the lane count b of every step, in order.
        n_input: the first layer's input size (the embedding size); layers: GRU layer sizes; n_sample: S.

    ``run()`` performs every step's products once (operands are random, reused across steps of equal b)."""

    def __init__(self, lanes: list[int], n_input: int, layers: list[int], n_sample: int):
        self.lanes = lanes
        g = torch.Generator().manual_seed(0)

        def rnd(*shape):
            return torch.randn(shape, generator=g)

        self.ops: dict[int, list] = {}
        for b in sorted(set(lanes)):
            ops = []
            n_in = n_input
            for d in layers:
                X, Hs = rnd(b, n_in), rnd(b, d)
                W_ih, W_hh, dG = rnd(3 * d, n_in), rnd(3 * d, d), rnd(b, 3 * d)
                ops += [
                    (X, W_ih.t(), torch.empty(b, 3 * d)),  # forward, input
                    (Hs, W_hh.t(), torch.empty(b, 3 * d)),  # forward, recurrent
                    (dG, W_ih, torch.empty(b, n_in)),  # dL/dX
                    (dG.t(), X, torch.empty(3 * d, n_in)),  # dL/dW_ih
                    (dG.t(), Hs, torch.empty(3 * d, d)),  # dL/dW_hh
                ]
                n_in = d
            K = b + n_sample
            h, O, dR = rnd(b, n_in), rnd(K, n_in), rnd(b, K)
            ops += [
                (h, O.t(), torch.empty(b, K)),  # scores
                (dR, O, torch.empty(b, n_in)),  # dL/dh
                (dR.t(), h, torch.empty(K, n_in)),  # dL/dO
            ]
            self.ops[b] = ops

    def run(self) -> None:
        mm = torch.mm
        for b in self.lanes:
            for a, w, out in self.ops[b]:
                mm(a, w, out=out)


def epoch_lanes(model) -> list[int]:
    """The lane count of every training step of one epoch of a built reference ``GRU4Rec``."""
    out: list[int] = []
    for run in model.iterator:
        out += [run.n_lanes] * run.n_steps
    return out


class Replay:
    """The runs of one epoch of a training iterator, recorded once and replayed: the timed epoch is the steps
    alone, not the iterator's rounds (``padded_data``'s one-event padding sessions cost an iterator round each,
    which real preprocessed data does not have). Offers what ``StandardStep`` uses of an iterator."""

    def __init__(self, iterator):
        self.inner = iterator
        self.n_lanes = iterator.n_lanes
        self.runs = list(iterator)

    def __iter__(self):
        return iter(self.runs)

    def reset_mask(self, run, step):
        return self.inner.reset_mask(run, step)


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def measure(
    dataset: str,
    loss: str,
    *,
    minibatches: int = 100,
    rounds: int = 3,
    scale: float = 1.0,
    n_sample: int | None = None,
    official=None,
    seed: int = 0,
) -> FloorResult:
    """Interleaved CPU times of one shape (see the module docstring).

    ``official``: an ``OfficialRunner`` (benchmarks/runners.py) or None. ``scale`` multiplies the catalogue and the
    minibatches (``padded_data``). Raises ValueError for an unknown dataset or loss (``best_params``)."""
    from gru4rec_conformance.reference.gru4rec import GRU4Rec

    hp = best_params(dataset, loss)
    if n_sample is not None:
        hp["n_sample"] = int(n_sample)
    data = padded_data(dataset, minibatches, hp["batch_size"], scale=scale, seed=seed)
    train = data.train
    cache = epoch_sample_cache(hp, train)

    def ref_model():
        g = GRU4Rec(**hp, n_epochs=1, seed=seed, device="cpu", step_impl="standard")
        g.fit(train, sample_cache_max_size=cache, n_epochs=0)
        return g

    g = ref_model()
    replay = Replay(g.iterator)
    lanes = epoch_lanes(g)
    model = g.model
    n_input = model.n_input if model.mode != "none" else model.layers[0]
    floor = Floor(lanes, n_input, model.layers, hp["n_sample"])
    res = FloorResult(dataset, loss, hp, model.n_items, len(lanes), sum(lanes))
    # warm-up: page in the tables, the allocator's pools and BLAS's buffers
    g.iterator = replay
    g._training_step(None).train_epoch(0)
    floor.run()
    for _ in range(rounds):
        g = ref_model()
        g.iterator = replay
        step = g._training_step(None)
        res.ref_epoch_cpu.append(_cpu(lambda step=step: step.train_epoch(0)))
        res.floor_cpu.append(_cpu(floor.run))
        if official is not None:
            st = official.prepare(train, hp, seed)
            res.official_fit_cpu.append(_cpu(lambda st=st: official.run(st)))
            gf = GRU4Rec(**hp, n_epochs=1, seed=seed, device="cpu", step_impl="standard")
            with contextlib.redirect_stdout(io.StringIO()):
                res.ref_fit_cpu.append(_cpu(lambda gf=gf: gf.fit(train, sample_cache_max_size=cache)))
    return res


def format_line(r: FloorResult, official_missing: str | None = None) -> str:
    """One shape's line; ``official_missing`` (why there is no official checkout) is shown when the run had none."""
    d = r.as_dict()
    if d["official_over_ref"] is not None:
        off = f", official/reference {d['official_over_ref']:.2f}"
    elif official_missing:
        off = f", official/reference n/a ({official_missing})"
    else:
        off = ""
    return (
        f"{r.dataset}/{r.loss}: B {r.hp['batch_size']}, H {r.hp['layers']}, S {r.hp['n_sample']}, "
        f"{r.n_items} items, {r.n_steps} steps: reference {d['ref_ms_per_step']:.2f} ms/step, floor "
        f"{d['floor_ms_per_step']:.2f} ms/step, reference/floor {d['ref_over_floor']:.2f}{off}"
    )


def official_checkout(path: str | None = None) -> tuple[str | None, str | None]:
    """(folder of the official port's checkout, None) or (None, why there is none): ``path``, else
    ``OFFICIAL_GRU4REC_PATH``, else the adapters' pinned checkout (their cache or ``GRU4REC_MIRROR_DIR``; a
    download only where ``GRU4REC_ALLOW_DOWNLOAD=1`` allows the adapters one)."""
    path = path or os.environ.get("OFFICIAL_GRU4REC_PATH")
    if path:
        return path, None
    from gru4rec_conformance.implementations._checkout import locate
    from gru4rec_conformance.implementations.base import ImplementationUnavailable

    try:
        return str(locate("gru4rec_pytorch_official")), None
    except ImplementationUnavailable as e:
        how = str(e).splitlines()[0] if str(e) else ""
        return None, "no official checkout" + (" (" + how.split(":")[0] + ")" if how else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gru4rec_conformance.benchmarks.floor", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--shapes", default=",".join(f"{d}/{l}" for d, l in SHAPES), help="dataset/loss,...")
    ap.add_argument("--minibatches", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--n-sample", type=int, default=None)
    ap.add_argument(
        "--official",
        default=None,
        help="official checkout (default: OFFICIAL_GRU4REC_PATH, else the adapters' pinned checkout if present)",
    )
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    official = None
    path, missing = official_checkout(args.official)
    if path is not None:
        from gru4rec_conformance.benchmarks.runners import OfficialRunner

        official = OfficialRunner(path, "cpu")
    out = []
    for shape in args.shapes.split(","):
        ds, _, loss = shape.strip().partition("/")
        r = measure(
            ds,
            loss,
            minibatches=args.minibatches,
            rounds=args.rounds,
            scale=args.scale,
            n_sample=args.n_sample,
            official=official,
        )
        print(format_line(r, missing), flush=True)
        out.append(r.as_dict())
    if args.json:
        tmp = f"{args.json}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
