"""Training speed of the reference GRU4Rec and of the official PyTorch port, side by side in the same run.

One epoch on a synthetic data set shaped like Coveo (docs/datasets.md, 'Published statistics': 10,868 items, 8.52 events per session;
scaled to ``GRU4REC_BENCH_SCALE`` × 165,673 sessions, default 0.03 ≈ 43k events) with the study's best Coveo
parameters (docs/study.md, 'Best hyperparameters'; BPR-max: layers 512, batch 144, n_sample 2048, ...; cross-entropy:
layers 512, batch 32, logQ, ...). Timed with pytest-benchmark: ``fit`` with one epoch, data preparation and
initialisation included on both sides (the sample cache is sized to the epoch for both); ``extra_info`` and the
terminal summary give each side's own epoch time, minibatches/s and events/s, the process CPU time of the whole fit
(steadier than wall time on a shared machine), and the official/reference ratios (> 1: the reference is faster).

    OFFICIAL_GRU4REC_PATH=/path/to/GRU4Rec_PyTorch_Official pytest benchmarks/test_reference_vs_official.py

Environment: ``OFFICIAL_GRU4REC_PATH`` (checkout of hidasib/GRU4Rec_PyTorch_Official; without it the official side
is skipped), ``GRU4REC_BENCH_SCALE`` (a fraction of Coveo's 165,673 sessions, or ``ci``/``ci*F`` as in
benchmarks/conftest.py), ``GRU4REC_BENCH_ROUNDS`` (default 3), ``GRU4REC_BENCH_THREADS`` (torch
threads, default 1), ``GRU4REC_BENCH_DEVICE`` (default cpu). The official code runs from its checkout, with one
declared shim: ``torch.tensor(pandas.Series)`` (its logQ supports) converts the Series to NumPy first.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

from gru4rec_conformance.benchmarks.runners import import_official_port  # noqa: E402
from gru4rec_conformance.benchmarks.workload import parse_scale  # noqa: E402
from gru4rec_conformance.reference.gru4rec import GRU4Rec  # noqa: E402

OFFICIAL = os.environ.get("OFFICIAL_GRU4REC_PATH")
# GRU4REC_BENCH_SCALE as in benchmarks/conftest.py: 'ci', 'ci*F' or a fraction of the full size (here of Coveo's
# session count)
SCALE = parse_scale(os.environ.get("GRU4REC_BENCH_SCALE"), "coveo", default="0.03")
ROUNDS = int(os.environ.get("GRU4REC_BENCH_ROUNDS", "3"))
THREADS = int(os.environ.get("GRU4REC_BENCH_THREADS", "1"))
DEVICE = os.environ.get("GRU4REC_BENCH_DEVICE", "cpu")

COVEO = {"sessions": 165_673, "items": 10_868, "events_per_session": 8.52}

#: The study's best Coveo parameters (docs/study.md, 'Best hyperparameters'; the official READMEs' paramfiles).
PARAMS = {
    "bpr-max": dict(
        loss="bpr-max",
        constrained_embedding=True,
        embedding=0,
        elu_param=1.0,
        layers=[512],
        batch_size=144,
        dropout_p_embed=0.35,
        dropout_p_hidden=0.0,
        learning_rate=0.05,
        momentum=0.4,
        n_sample=2048,
        sample_alpha=0.2,
        bpreg=1.85,
        logq=0.0,
    ),
    "cross-entropy": dict(
        loss="cross-entropy",
        constrained_embedding=True,
        embedding=0,
        elu_param=0.0,
        layers=[512],
        batch_size=32,
        dropout_p_embed=0.4,
        dropout_p_hidden=0.15,
        learning_rate=0.03,
        momentum=0.0,
        n_sample=2048,
        sample_alpha=0.0,
        bpreg=0.0,
        logq=1.0,
    ),
}
# cross-entropy's batch is 4.5× smaller: a smaller slice gives a comparable number of minibatches
LOSS_SCALE = {"bpr-max": 1.0, "cross-entropy": 0.25}

_RESULTS: dict = {}


def coveo_like(scale: float, seed: int = 0) -> pd.DataFrame:
    """Sessions shaped like the prepared Coveo data: Zipf(1) item popularity over 10,868 items, session lengths
    2 + geometric with mean 8.52, increasing millisecond timestamps."""
    rng = np.random.default_rng(seed)
    n_sessions = max(200, int(round(COVEO["sessions"] * scale)))
    lens = 1 + rng.geometric(1.0 / (COVEO["events_per_session"] - 1.0), size=n_sessions)
    p = 1.0 / np.arange(1, COVEO["items"] + 1)
    items = rng.choice(COVEO["items"], size=int(lens.sum()), p=p / p.sum())
    return pd.DataFrame(
        {
            "SessionId": np.repeat(np.arange(n_sessions, dtype=np.int64), lens),
            "ItemId": (items + 1_000_000).astype(np.int64),
            "Time": np.cumsum(rng.integers(1, 5000, size=int(lens.sum()))).astype(np.int64),
        }
    )


@pytest.fixture(scope="module")
def datasets():
    return {loss: coveo_like(SCALE * LOSS_SCALE[loss]) for loss in PARAMS}


@pytest.fixture(autouse=True)
def _threads():
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def official():
    if not OFFICIAL:
        pytest.skip("official GRU4Rec not found: set OFFICIAL_GRU4REC_PATH to a GRU4Rec_PyTorch_Official checkout")
    path = Path(OFFICIAL)
    if not (path / "gru4rec_pytorch.py").exists():
        pytest.skip(f"official GRU4Rec not found: {path}/gru4rec_pytorch.py is missing (OFFICIAL_GRU4REC_PATH)")
    return import_official_port(path)[0]


@pytest.fixture(scope="module", autouse=True)
def _summary(request):
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if not _RESULTS or tr is None:
        return
    with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
        _write_summary(tr)


def _write_summary(tr) -> None:
    tr.write_line("")
    tr.write_line(
        f"GRU4Rec one epoch, Coveo-shaped synthetic data (scale {SCALE}), device {DEVICE}, "
        f"{THREADS} torch thread(s); best of {ROUNDS} rounds"
    )
    tr.write_line(
        "epoch s, mb/s, events/s: wall clock of the epoch; fit CPU s: process CPU time of the whole fit, "
        "and mb and events per CPU second of it; ratios official/reference (> 1: reference faster)"
    )
    tr.write_line(
        f"{'loss':<14}{'impl':<11}{'events':>8}{'mb':>6}{'epoch s':>9}{'mb/s':>8}{'events/s':>10}"
        f"{'fit CPU s':>10}{'mb/CPU s':>10}{'ev/CPU s':>10}{'ratio wall':>11}{'ratio CPU':>10}"
    )
    for loss in PARAMS:
        ref = _RESULTS.get((loss, "reference"))
        for impl in ("reference", "official"):
            r = _RESULTS.get((loss, impl))
            if r is None:
                continue
            ratio = f"{r['epoch_seconds'] / ref['epoch_seconds']:.2f}" if ref and impl == "official" else ""
            cpu_ratio = f"{r['fit_cpu_seconds'] / ref['fit_cpu_seconds']:.2f}" if ref and impl == "official" else ""
            cpu = r["fit_cpu_seconds"]
            tr.write_line(
                f"{loss:<14}{impl:<11}{r['events']:>8}{r['minibatches']:>6}{r['epoch_seconds']:>9.2f}"
                f"{r['minibatches_per_s']:>8.1f}{r['events_per_s']:>10.0f}{cpu:>10.1f}"
                f"{r['minibatches'] / cpu:>10.1f}{r['events'] / cpu:>10.0f}{ratio:>11}{cpu_ratio:>10}"
            )


def _record(benchmark, loss, impl, epochs: list[tuple[float, int, int, float]]):
    best = min(epochs)  # (epoch wall seconds, minibatches, events, CPU seconds of the whole fit)
    res = {
        "epoch_seconds": best[0],
        "minibatches": best[1],
        "events": best[2],
        "minibatches_per_s": best[1] / best[0],
        "events_per_s": best[2] / best[0],
        "fit_cpu_seconds": min(e[3] for e in epochs),
    }
    _RESULTS[(loss, impl)] = res
    benchmark.extra_info.update(res)
    ref = _RESULTS.get((loss, "reference"))
    if impl == "official" and ref:
        benchmark.extra_info["official_over_reference_epoch_time"] = best[0] / ref["epoch_seconds"]


@pytest.mark.parametrize("loss", list(PARAMS))
def test_reference_epoch(benchmark, datasets, loss):
    df = datasets[loss]
    hp = PARAMS[loss]
    cache = hp["n_sample"] * (len(df) // hp["batch_size"] + hp["batch_size"])
    epochs = []

    def run():
        c0 = time.process_time()
        g = GRU4Rec(**hp, n_epochs=1, seed=1, device=DEVICE)
        rep = g.fit(df, sample_cache_max_size=cache)
        epochs.append((rep.epoch_seconds[0], rep.n_steps[0], rep.n_events_trained[0], time.process_time() - c0))
        return rep

    rep = benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    assert rep.n_events_trained[0] == len(df) - df.SessionId.nunique()
    _record(benchmark, loss, "reference", epochs)


_EPOCH_LINE = re.compile(r"Epoch1 --> loss: \S+ \t\(([0-9.]+)s\) \t\[([0-9.]+) mb/s \| ([0-9.]+) e/s\]")


@pytest.mark.parametrize("loss", list(PARAMS))
def test_official_epoch(benchmark, official, datasets, loss):
    df = datasets[loss]
    hp = PARAMS[loss]
    cache = hp["n_sample"] * (len(df) // hp["batch_size"] + hp["batch_size"])
    epochs = []

    def run():
        c0 = time.process_time()
        torch.manual_seed(1)
        g = official.GRU4Rec(**hp, n_epochs=1, device=torch.device(DEVICE))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            g.fit(df.copy(), sample_cache_max_size=cache, compatibility_mode=False)
        m = _EPOCH_LINE.search(out.getvalue())
        assert m, f"no epoch line in the official output: {out.getvalue()[-300:]!r}"
        sec, mbs, _ = (float(v) for v in m.groups())
        # the port's e/s counts B per minibatch (also in the shrunk tail): count the trained events instead
        epochs.append((sec, int(round(mbs * sec)), len(df) - df.SessionId.nunique(), time.process_time() - c0))
        return g

    g = benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    assert not g.error_during_train
    _record(benchmark, loss, "official", epochs)
