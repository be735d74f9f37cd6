"""What the benchmarks train on and with which parameters.

- :data:`DATASETS` and :func:`published_shape`: the five datasets of the study and their published train/test
  shapes (docs/datasets.md, 'Published statistics'; ``datasets/sessions/study_stats.json``);
- :func:`best_params`: the study's best hyperparameters per dataset and loss (docs/study.md, 'Best hyperparameters'), read from
  the "GRU4Rec Official / Best params" rows of ``datasets/study/study_results.csv`` (source in
  ``datasets/study/README.md``), translated to the official PyTorch port's names;
- :func:`study_epoch_rows`: the study's published epoch times, events/s and minibatches/s (docs/study.md, 'Published accuracy and epoch times') from the same file;
- :func:`epoch_data`: synthetic train/test frames with a dataset's shape, generated in the dataset's raw format and
  run through the study's preprocessing (``datasets.sessions.synthetic`` + ``pipeline.prepare``), cached under
  ``.cache/benchmarks/synth``; ``scale`` is the fraction of the full raw data (1.0 = the full published shape);
- :func:`sweep_frame`: a session frame with a controlled number of sessions, events per session and catalogue size
  for the scalability sweeps.

Scales are read from the environment by :func:`parse_scale` (``GRU4REC_BENCH_SCALE``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("GRU4REC_BENCH_CACHE", str(REPO / ".cache" / "benchmarks")))

#: our dataset names → the study's spelling in datasets/study/study_results.csv
DATASETS = {
    "yoochoose": "Yoochoose",
    "rees46": "Rees46",
    "coveo": "Coveo",
    "retailrocket": "Retailrocket",
    "diginetica": "Diginetica",
}
LOSSES = ("cross-entropy", "bpr-max")


def published_shape(name: str) -> dict:
    """The study's published statistics of ``name`` (docs/datasets.md, 'Published statistics'): {'train': {...}, 'test': {...},
    'items': int}. Raises ValueError for an unknown dataset."""
    _check_dataset(name)
    with open(REPO / "datasets" / "sessions" / "study_stats.json", encoding="utf-8") as f:
        return json.load(f)["published"][name]


def _check_dataset(name: str) -> None:
    if name not in DATASETS:
        raise ValueError(f"dataset: unknown {name!r}; one of {', '.join(DATASETS)}")


def _study_rows() -> tuple:
    from gru4rec_conformance.datasets.study import rows

    return rows()


def best_params(name: str, loss: str) -> dict:
    """The study's best hyperparameters for (dataset, loss) with the official PyTorch port's names.

    Source: the "GRU4Rec Official / Best params" row of datasets/study/study_results.csv (= docs/study.md,
    'Best hyperparameters'): constrained_embedding, embedding, layers, batch_size, dropouts, learning_rate, momentum, n_sample,
    sample_alpha, bpreg, logq; ``final_act`` elu-X → ``elu_param`` X, linear → 0 (the port's rule).
    Raises ValueError for an unknown dataset or loss.
    """
    _check_dataset(name)
    if loss not in LOSSES:
        raise ValueError(f"loss: unknown {loss!r}; one of {', '.join(LOSSES)}")
    for r in _study_rows():
        if (r["dataset"], r["implementation"], r["variant"], r["loss"]) == (
            DATASETS[name],
            "GRU4Rec Official",
            "Best params",
            loss,
        ):
            fa = r["final_act"]
            elu = float(fa.split("-", 1)[1]) if fa.startswith("elu-") else 0.0
            return {
                "loss": loss,
                "constrained_embedding": r["constrained_embedding"] == "true",
                "embedding": int(r["embedding"]),
                "layers": [int(r["layers"])],
                "batch_size": int(r["batch_size"]),
                "dropout_p_embed": float(r["dropout_p_embed"]),
                "dropout_p_hidden": float(r["dropout_p_hidden"]),
                "learning_rate": float(r["learning_rate"]),
                "momentum": float(r["momentum"]),
                "n_sample": int(r["n_sample"]),
                "sample_alpha": float(r["sample_alpha"]),
                "bpreg": float(r["bpreg"]),
                "logq": float(r["logq"]),
                "elu_param": elu,
            }
    raise ValueError(
        f"datasets/study/study_results.csv: no 'GRU4Rec Official / Best params' row for {DATASETS[name]} / {loss}"
    )


def study_epoch_rows(name: str, loss: str) -> list[dict]:
    """Every study row of (dataset, loss) with its published epoch time: implementation, variant, n_sample,
    epoch_seconds, events_per_second, minibatches_per_second and ``x_best`` (epoch time / the official best-params
    run's, as the study's "× best" column)."""
    _check_dataset(name)
    out = []
    best = None
    for r in _study_rows():
        if r["dataset"] != DATASETS[name] or r["loss"] != loss:
            continue
        row = {
            "implementation": r["implementation"],
            "variant": r["variant"],
            "n_sample": r["n_sample"],
            "epoch_seconds": float(r["epoch_seconds"]),
            "events_per_second": float(r["events_per_second"]),
            "minibatches_per_second": float(r["minibatches_per_second"]),
        }
        if r["implementation"] == "GRU4Rec Official" and r["variant"] == "Best params":
            best = row["epoch_seconds"]
        out.append(row)
    for row in out:
        row["x_best"] = row["epoch_seconds"] / best if best else None
    return out


# ----------------------------------------------------------------------------------------------------------------
# scale


def ci_scale(name: str) -> float:
    """``datasets.sessions.synthetic.CI_SCALE[name]``: about 3-4 x 10^4 raw rows."""
    from gru4rec_conformance.datasets.sessions.synthetic import CI_SCALE

    return CI_SCALE[name]


def parse_scale(raw: str | None, name: str, default: str = "ci") -> float:
    """Fraction of the full raw data of ``name`` to generate, from a ``GRU4REC_BENCH_SCALE`` value.

    ``'ci'`` = ``CI_SCALE[name]`` (a few 10^4 raw rows); ``'ci*F'`` = F times that; a number = that fraction for
    every dataset (``1`` = the full published shape). Raises ValueError naming GRU4REC_BENCH_SCALE for anything else.
    """
    text = (raw or default).strip()
    try:
        if text == "ci":
            return ci_scale(name)
        if text.startswith("ci*"):
            return ci_scale(name) * float(text[3:])
        value = float(text)
    except ValueError:
        raise ValueError(f"GRU4REC_BENCH_SCALE: expected 'ci', 'ci*F' or a number in (0, 4], got {text!r}") from None
    if not 0 < value <= 4:
        raise ValueError(f"GRU4REC_BENCH_SCALE: expected a number in (0, 4], got {text!r}")
    return value


# ----------------------------------------------------------------------------------------------------------------
# data


@dataclass
class EpochData:
    """Synthetic prepared data of one dataset shape: ``train`` (train_full) and ``test`` frames (SessionId, ItemId,
    Time int64), the generator ``scale`` and ``seed``, and the folder they were cached in."""

    name: str
    scale: float
    seed: int
    train: pd.DataFrame
    test: pd.DataFrame
    folder: Path

    def shape(self) -> dict:
        """Events, sessions and items of the training data, and test events (for reports)."""
        tr = self.train
        return {
            "train_events": int(len(tr)),
            "train_sessions": int(tr["SessionId"].nunique()),
            "n_items": int(tr["ItemId"].nunique()),
            "test_events": int(len(self.test)),
            "scale": self.scale,
        }


def epoch_data(name: str, scale: float, seed: int = 0, cache: Path | None = None) -> EpochData:
    """Synthetic train/test data shaped like dataset ``name`` at ``scale`` (fraction of the full raw data).

    Raw files are generated once per (name, scale, seed) by ``datasets.sessions.synthetic.generate_raw`` (into a
    private temporary folder, then moved into place) and prepared by ``datasets.sessions.pipeline.prepare`` (which
    caches by content hash). Processes sharing a cache should let one of them make the data first (``prepare``
    writing the same folder from two processes at once is not coordinated). Raises ValueError for an unknown dataset
    or a scale outside (0, 4].
    """
    _check_dataset(name)
    from gru4rec_conformance.datasets.sessions.pipeline import prepare
    from gru4rec_conformance.datasets.sessions.synthetic import generate_raw

    folder = (cache or CACHE) / "synth" / f"{name}-scale{scale:.6g}-seed{seed}"
    raw = folder / "raw"
    marker = raw / "COMPLETE"
    if not marker.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="raw.partial.", dir=folder))  # private to this process
        try:
            generate_raw(name, tmp, scale, seed=seed)
            (tmp / "COMPLETE").write_text("generated by benchmarks.workload.epoch_data\n")
            if not marker.is_file():  # another process may have finished first: then keep its files
                shutil.rmtree(raw, ignore_errors=True)
                try:
                    os.replace(tmp, raw)
                except OSError:
                    if not marker.is_file():
                        raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    prep = prepare(name, raw, folder / "prepared")
    return EpochData(name, scale, seed, prep.load("train_full"), prep.load("test"), folder)


def sweep_frame(
    n_sessions: int,
    n_items: int,
    events_per_session: float = 4.7,
    seed: int = 0,
    pad_catalogue: bool = True,
    zipf: float = 1.0,
) -> pd.DataFrame:
    """Training sessions for a scalability sweep.

    ``n_sessions`` sessions of 2 + Geometric length (mean ``events_per_session``), items Zipf(``zipf``) over
    ``n_items``, increasing integer Time. With ``pad_catalogue`` every item that no session drew gets a one-event
    session: those train nothing (a one-event session has no transition), so the trained events stay fixed while
    the catalogue (the item columns every implementation builds from the data) is exactly ``n_items``.
    Raises ValueError for n_sessions < 1, n_items < 2 or events_per_session <= 2.
    """
    if n_sessions < 1 or n_items < 2 or not events_per_session > 2:
        raise ValueError(
            f"sweep_frame: need n_sessions >= 1, n_items >= 2, events_per_session > 2; got "
            f"{n_sessions}, {n_items}, {events_per_session}"
        )
    rng = np.random.default_rng(seed)
    lens = 1 + rng.geometric(1.0 / (events_per_session - 1.0), size=n_sessions)
    p = 1.0 / np.arange(1, n_items + 1) ** zipf
    items = rng.choice(n_items, size=int(lens.sum()), p=p / p.sum())
    sess = np.repeat(np.arange(n_sessions, dtype=np.int64), lens)
    if pad_catalogue:
        missing = np.setdiff1d(np.arange(n_items), items)
        items = np.concatenate([items, missing])
        sess = np.concatenate([sess, n_sessions + np.arange(len(missing), dtype=np.int64)])
    time = np.arange(len(items), dtype=np.int64)
    return pd.DataFrame({"SessionId": sess, "ItemId": items.astype(np.int64) + 1_000_000, "Time": time})


def trained_events(df: pd.DataFrame) -> int:
    """Input → target pairs of one epoch: events minus sessions (every session's first event is only an input)."""
    return int(len(df) - df["SessionId"].nunique())


# ----------------------------------------------------------------------------------------------------------------
# data at the real catalogue sizes (the GPU check: benchmarks/gpu/run_gpu_benchmarks.sh)


def catalogue_items(name: str, scale: float = 1.0) -> int:
    """The study's item count of ``name`` (docs/datasets.md, 'Published statistics'; ``published_shape(name)['items']``) times ``scale``
    (at least 10). Raises ValueError for an unknown dataset or a scale outside (0, 4]."""
    if not 0 < scale <= 4:
        raise ValueError(f"scale: expected a number in (0, 4], got {scale!r}")
    return max(10, round(published_shape(name)["items"] * scale))


def catalogue_data(name: str, minibatches: int, batch_size: int, scale: float = 1.0, seed: int = 0) -> EpochData:
    """Training and test sessions with the real catalogue of ``name`` and a chosen amount of training work.

    The catalogue has exactly ``catalogue_items(name, scale)`` items, every one of them inside a trained session
    (a catalogue padded with one-event sessions would add iterator rounds that train nothing, and bias the
    minibatch rates). Session lengths are 2 + Geometric with the dataset's train events per session (published statistics);
    positions get every item once (a random permutation), the rest Zipf(1) draws, in random order. The number of
    transitions is about ``max(1, round(minibatches * scale)) * batch_size`` (so one epoch takes about that many
    minibatches; the shrinking tail adds a few smaller ones), raised where needed so that every item occurs and
    there are more sessions than ``batch_size`` lanes. The test frame: 5000 * scale sessions (at least 20) with the
    test events per session, Zipf items from the catalogue. Time is an increasing int64 (test after train).

    Returns :class:`EpochData` (``scale`` as given, ``folder`` the current directory: nothing is cached; it is
    generated in well under a second per 10^6 events). Raises ValueError for an unknown dataset, a scale outside
    (0, 4], ``minibatches < 1`` or ``batch_size < 1``.
    """
    if minibatches < 1 or batch_size < 1:
        raise ValueError(f"catalogue_data: need minibatches >= 1 and batch_size >= 1, got {minibatches}, {batch_size}")
    shape = published_shape(name)
    n_items = catalogue_items(name, scale)
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])  # hash() is salted per process

    def sessions(n_events_min: int, eps: float, n_sessions_min: int) -> np.ndarray:
        mean_extra = max(eps - 2.0, 0.05)  # lengths 2 + Geometric(p) - 1 have mean 2 + (1/p - 1)
        lens: list[np.ndarray] = []
        total = count = 0
        while total < n_events_min or count < n_sessions_min:
            chunk = 2 + rng.geometric(1.0 / (1.0 + mean_extra), size=max(1024, n_sessions_min)) - 1
            lens.append(chunk)
            total += int(chunk.sum())
            count += len(chunk)
        out = np.concatenate(lens)
        cut = int(np.searchsorted(np.cumsum(out), n_events_min)) + 1
        return out[: max(cut, n_sessions_min)]

    eps = float(shape["train"]["events_per_session"])
    transitions = max(1, round(minibatches * scale)) * batch_size
    lens = sessions(max(n_items, round(transitions * eps / (eps - 1.0))), eps, batch_size + 1)
    n_events = int(lens.sum())
    zipf = 1.0 / np.arange(1, n_items + 1)
    items = np.concatenate(
        [rng.permutation(n_items), rng.choice(n_items, size=n_events - n_items, p=zipf / zipf.sum())]
    )
    rng.shuffle(items)
    train = pd.DataFrame(
        {
            "SessionId": np.repeat(np.arange(len(lens), dtype=np.int64), lens),
            "ItemId": items.astype(np.int64) + 1_000_000,
            "Time": np.arange(n_events, dtype=np.int64),
        }
    )
    t_eps = float(shape["test"]["events_per_session"])
    t_lens = sessions(0, t_eps, max(20, round(5000 * scale)))
    t_items = rng.choice(n_items, size=int(t_lens.sum()), p=zipf / zipf.sum())
    test = pd.DataFrame(
        {
            "SessionId": len(lens) + np.repeat(np.arange(len(t_lens), dtype=np.int64), t_lens),
            "ItemId": t_items.astype(np.int64) + 1_000_000,
            "Time": n_events + np.arange(len(t_items), dtype=np.int64),
        }
    )
    return EpochData(name, scale, seed, train, test, Path("."))


def padded_data(name: str, minibatches: int, batch_size: int, scale: float = 1.0, seed: int = 0) -> EpochData:
    """The real catalogue of ``name`` with little training work: CPU benchmarks of many implementations.

    About ``max(1, round(minibatches * scale)) * batch_size`` transitions in sessions with the dataset's train
    events per session (published statistics; :func:`sweep_frame`: 2 + Geometric lengths, Zipf(1) items over the catalogue), then
    one one-event session for every item those sessions did not draw (later in time: they train nothing), so the
    catalogue has exactly ``catalogue_items(name, scale)`` items whatever the number of minibatches — unlike
    :func:`catalogue_data`, whose every item is in a trained session (at least as many transitions as items: 5,400
    minibatches of 32 for Rees46). The padding sessions add iterator rounds that train nothing (cheap for a
    session-parallel iterator, nothing for one that drops one-event sessions). Test frame: 500 * scale sessions (at
    least 20) with the dataset's test events per session, items from the catalogue. Returns :class:`EpochData`
    (``folder`` the current directory: nothing is cached). Raises ValueError for an unknown dataset, a scale
    outside (0, 4], ``minibatches < 1`` or ``batch_size < 1``.
    """
    if minibatches < 1 or batch_size < 1:
        raise ValueError(f"padded_data: need minibatches >= 1 and batch_size >= 1, got {minibatches}, {batch_size}")
    shape = published_shape(name)
    n_items = catalogue_items(name, scale)
    eps = max(float(shape["train"]["events_per_session"]), 2.05)
    transitions = max(1, round(minibatches * scale)) * batch_size
    n_sessions = max(batch_size + 1, round(transitions / (eps - 1.0)))
    seed2 = zlib.crc32(name.encode()) + seed
    train = sweep_frame(n_sessions, n_items, eps, seed=seed2, pad_catalogue=True)
    t_eps = max(float(shape["test"]["events_per_session"]), 2.05)
    test = sweep_frame(max(20, round(500 * scale)), n_items, t_eps, seed=seed2 + 1, pad_catalogue=False)
    test = test.assign(SessionId=test["SessionId"] + int(train["SessionId"].max()) + 1, Time=test["Time"] + len(train))
    return EpochData(name, scale, seed, train, test, Path("."))
