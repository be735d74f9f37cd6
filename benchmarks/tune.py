"""Hyperparameter optimisation of a GRU4Rec implementation with Optuna, as in the study (docs/study.md, 'Hyperparameter search').

    python -m gru4rec_conformance.benchmarks.tune --impl reference --dataset diginetica --loss bpr-max --trials 200 \\
        --storage sqlite:///tuning.db [--study-name NAME] [--n-epochs E] [--device cuda] [--no-final]

- search space: the study's (``benchmarks/data/parspace_<loss>.jsonl``, the official ``paropt.py`` format; another
  file with ``--param-space``), the fixed parameters of ``benchmarks/data/fixed_params.json`` (embedding setup 1,
  n_sample 2048, logq, n_epochs 10 unless ``--n-epochs``). A ``batch_size`` range above the number of training
  sessions is capped to it (the result says so);
- objective: MRR@20 on ``train_valid`` of a model trained on ``train_tr`` (conservative ties), maximised; named
  ``MRR@20 (train_valid)`` in the study (``Study.set_metric_names``: optuna-dashboard labels its plots with it);
- after the last trial: a retrain with the best parameters on ``train_full``, evaluated on ``test`` at 1, 5, 10, 20
  (recall and MRR), written atomically as ``result.json`` and ``result.md`` into a new folder
  ``<out>/<study name>/<UTC timestamp>/`` (default ``reports/out/tuning``).

Workers: every process started with the same ``--storage`` and ``--study-name`` joins the same study (Optuna's RDB
storage: SQLite on one machine, PostgreSQL across machines; see benchmarks/README.md) and stops once the study has
``--trials`` complete trials (so the study ends with at most one extra trial per additional worker). Start workers
with ``--no-final`` and run the final retrain once, by a last call (which finds the trials done and only retrains).
An interrupted study resumes: a new call continues to ``--trials``; trials a killed worker left running are failed
after ``--heartbeat`` × 2 seconds without a heartbeat and retried once with the same parameters. A tqdm progress bar
counts the study's complete trials (all workers).

Datasets (``--dataset``): ``diginetica`` — the real Diginetica slice of ``../shared/data/sessions/diginetica``
through the study's preprocessing (when the shared data are absent: a notice and the synthetic stand-in, unless
``--no-fallback``); ``yoochoose_100k`` — the real Yoochoose 100k slice (``datasets.sessions.real``; its synthetic
stand-in with a notice when absent); ``synth:<name>[@<scale>]`` — the synthetic stand-in of one of the five
datasets through the same preprocessing (scale as ``GRU4REC_BENCH_SCALE``: ``ci``, ``ci*F`` or a fraction of the
full size; default ``ci``).

Implementations (``--impl``): ``reference`` (this repository's, in this process) or any registered GRU4Rec adapter
name or ``module:Class`` (built through the conformance harness, in a worker process when the adapter is isolated;
its own ``evaluate`` when it has one, else the suite's protocol over its ``score_prefixes``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gru4rec_conformance.fileio import atomic_path, atomic_write_json, atomic_write_text, new_run_dir

REPO = Path(__file__).resolve().parents[1]

DATA = Path(__file__).resolve().parent / "data"
DEFAULT_OUT = REPO / "reports" / "out" / "tuning"
DEFAULT_STORAGE = f"sqlite:///{REPO / '.cache' / 'tuning' / 'optuna.sqlite3'}"
CUTOFFS = (1, 5, 10, 20)
OBJECTIVE = "mrr@20"
#: the objective's name in the study (``Study.set_metric_names``): optuna-dashboard and ``optuna.visualization``
#: label the value axis with it instead of "Objective Value"
METRIC_NAME = "MRR@20 (train_valid)"
LOSSES = ("cross-entropy", "bpr-max")


# ----------------------------------------------------------------------------------------------------------------
# search space (the official paropt.py format)


@dataclass
class Parameter:
    """One searched hyperparameter, as a line of the official ``paropt.py`` parameter file:
    ``{"name": ..., "dtype": "int"|"float"|"categorical", "values": [low, high] | [options], "step": ..., "log": ...}``.
    """

    name: str
    dtype: str
    values: list
    step: float | None = None
    log: bool = False

    @classmethod
    def from_json(cls, text: str, where: str) -> Parameter:
        """Parse one line; ValueError naming ``where`` (file:line) for anything paropt would reject."""
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not a JSON object ({exc.msg})") from None
        if not isinstance(obj, dict) or not {"name", "dtype", "values"} <= set(obj):
            raise ValueError(f"{where}: a parameter needs 'name', 'dtype' and 'values'")
        dtype, values = obj["dtype"], obj["values"]
        if dtype not in ("int", "float", "categorical"):
            raise ValueError(f"{where}: dtype must be int, float or categorical, got {dtype!r}")
        if not isinstance(values, list) or (dtype != "categorical" and len(values) != 2) or not values:
            raise ValueError(f"{where}: 'values' must be [low, high] for {dtype} (the options for categorical)")
        step = obj.get("step")
        if step is None and dtype == "int":
            step = 1
        return cls(str(obj["name"]), dtype, values, step, bool(obj.get("log", False)))

    def __call__(self, trial) -> Any:
        if self.dtype == "int":
            assert self.step is not None  # from_json gives int parameters step 1
            return trial.suggest_int(
                self.name, int(self.values[0]), int(self.values[1]), step=int(self.step), log=self.log
            )
        if self.dtype == "float":
            return trial.suggest_float(
                self.name, float(self.values[0]), float(self.values[1]), step=self.step, log=self.log
            )
        return trial.suggest_categorical(self.name, self.values)

    def describe(self) -> str:
        if self.dtype == "categorical":
            return f"{self.name}: one of {self.values}"
        return f"{self.name}: {self.dtype} [{self.values[0]}..{self.values[1]}] step {self.step}" + (
            " (log)" if self.log else ""
        )


def load_space(path: Path) -> list[Parameter]:
    """The parameters of a paropt-format file (one JSON object per line; blank lines ignored)."""
    path = Path(path)
    out = []
    with open(path, encoding="utf-8") as f:
        for k, line in enumerate(f, 1):
            if line.strip():
                out.append(Parameter.from_json(line, f"{path}:{k}"))
    if not out:
        raise ValueError(f"{path}: no parameter")
    return out


def fit_space_to_data(space: list[Parameter], n_sessions: int) -> list[str]:
    """Cap a ``batch_size`` range above the number of training sessions (every implementation needs at least one
    session per lane); returns notes of what changed. Raises ValueError when even the lowest batch size is too big."""
    notes = []
    for p in space:
        if p.name == "batch_size" and p.dtype == "int" and int(p.values[1]) > n_sessions:
            assert p.step is not None  # from_json gives int parameters step 1
            low, step = int(p.values[0]), int(p.step)
            if low > n_sessions:
                raise ValueError(
                    f"parameter space: batch_size starts at {low}, above the {n_sessions} training "
                    "sessions of the dataset"
                )
            high = low + (n_sessions - low) // step * step
            notes.append(
                f"batch_size range capped from [{p.values[0]}..{p.values[1]}] to [{low}..{high}]: the "
                f"training data (train_tr) have {n_sessions} sessions"
            )
            p.values = [low, high]
    return notes


def model_params(fixed: dict, searched: dict) -> dict:
    """Hyperparameters of one training: the fixed ones, the searched ones (floats rounded to 10 decimals: Optuna's
    stepped floats carry binary noise such as 0.30000000000000004), ``layers`` as a list."""
    hp = {**fixed, **{k: (round(v, 10) if isinstance(v, float) else v) for k, v in searched.items()}}
    if "layers" in hp and not isinstance(hp["layers"], list):
        hp["layers"] = [int(hp["layers"])]
    return hp


def fixed_params(loss: str) -> dict:
    """The study's fixed parameters of ``loss`` with the embedding setup (benchmarks/data/fixed_params.json)."""
    with open(DATA / "fixed_params.json", encoding="utf-8") as f:
        d = json.load(f)
    return {**d["setup"], **d[loss]}


# ----------------------------------------------------------------------------------------------------------------
# data


def load_dataset(name: str, fallback: bool = True) -> dict:
    """{'train_tr', 'train_valid', 'train_full', 'test' frames, 'source': str, 'name': str}.

    Raises ValueError for an unknown name; FileNotFoundError (naming the path) for the real Diginetica slice when
    the shared data are absent and ``fallback`` is false."""
    from gru4rec_conformance.benchmarks.workload import CACHE, DATASETS, epoch_data, parse_scale

    if name == "yoochoose_100k":
        from gru4rec_conformance.datasets.sessions import real

        try:
            frames = real.yoochoose_100k(fallback=False)
            source = f"real Yoochoose 100k slice ({real.slice_path('yoochoose_100k')})"
        except real.SharedDataMissing as exc:
            if not fallback:
                raise
            print(
                f"notice: real Yoochoose 100k slice unavailable ({exc}); using its synthetic stand-in", file=sys.stderr
            )
            frames = real.yoochoose_100k_standin()
            source = "synthetic stand-in of the Yoochoose 100k slice (datasets.sessions.real.yoochoose_100k_standin)"
        return {**frames, "source": source, "name": name}
    if name == "diginetica":
        from gru4rec_conformance.datasets.sessions import real
        from gru4rec_conformance.datasets.sessions.pipeline import prepare

        try:
            raw_file = real.slice_path("diginetica_sample")
        except real.SharedDataMissing as exc:
            if not fallback:
                raise
            print(
                f"notice: the real Diginetica slice is unavailable ({exc}); using the synthetic stand-in "
                "synth:diginetica",
                file=sys.stderr,
            )
            return {**load_dataset("synth:diginetica"), "name": name}
        folder = CACHE / "real" / "diginetica_sample"
        raw = folder / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        target = raw / "train-item-views.csv"  # prepare() finds the file by its original name
        if not target.is_file() or target.stat().st_size != raw_file.stat().st_size:
            with atomic_path(target) as tmp:
                shutil.copyfile(raw_file, tmp)
        prep = prepare("diginetica", raw, folder / "prepared")
        return {
            **{p: prep.load(p) for p in ("train_tr", "train_valid", "train_full", "test")},
            "source": f"real Diginetica slice ({raw_file}) through the study's preprocessing",
            "name": name,
        }
    if name.startswith("synth:"):
        spec = name[len("synth:") :]
        ds, _, scale_txt = spec.partition("@")
        if ds not in DATASETS:
            raise ValueError(f"--dataset {name!r}: unknown dataset {ds!r}; one of {', '.join(DATASETS)}")
        scale = parse_scale(scale_txt or "ci", ds)
        data = epoch_data(ds, scale)
        from gru4rec_conformance.datasets.sessions.pipeline import load_prepared

        prep = load_prepared(data.folder / "prepared")
        return {
            **{p: prep.load(p) for p in ("train_tr", "train_valid", "train_full", "test")},
            "source": f"synthetic stand-in of {ds} at scale {scale:g} (datasets.sessions.synthetic, the study's "
            f"preprocessing; {data.folder})",
            "name": name,
        }
    raise ValueError(
        f"--dataset {name!r}: one of diginetica, yoochoose_100k, synth:<name>[@<scale>] "
        f"(<name> in {', '.join(DATASETS)})"
    )


def _shape(df) -> dict:
    return {"events": int(len(df)), "sessions": int(df["SessionId"].nunique()), "items": int(df["ItemId"].nunique())}


# ----------------------------------------------------------------------------------------------------------------
# implementations


class Trainer:
    """Builds, trains and evaluates one implementation: ``train_eval(train, test, hp, seed, cutoffs) -> metrics``.

    ``reference`` runs in this process; any other name is resolved through the adapter registry (ValueError naming
    --impl when unknown) and built through the conformance harness (a worker process for isolated adapters)."""

    def __init__(self, impl: str, device: str = "cpu"):
        self.impl = impl
        self.device = device
        self.handle = None
        if impl != "reference":
            from gru4rec_conformance.conformance._harness.handle import ImplHandle
            from gru4rec_conformance.implementations.registry import RegistryError, default_registry

            try:
                specs = [s for s in default_registry().resolve([impl]) if s.family == "gru4rec"]
            except RegistryError as exc:
                raise ValueError(f"--impl {impl!r}: {exc}") from None
            if len(specs) != 1:
                raise ValueError(f"--impl {impl!r}: selects {len(specs)} GRU4Rec implementations; name exactly one")
            self.handle = ImplHandle(specs[0], device=device)

    @property
    def version(self) -> str:
        if self.handle is not None:
            return str(self.handle.version)
        from gru4rec_conformance.benchmarks.runners import _suite_version

        return _suite_version()

    def train_eval(self, train, test, hp: dict, seed: int, cutoffs=CUTOFFS) -> dict:
        from gru4rec_conformance.benchmarks.runners import eval_batch

        if self.handle is None:
            from gru4rec_conformance.reference.gru4rec import GRU4Rec

            g = GRU4Rec(**hp, seed=seed, device=self.device)
            g.fit(train)
            return g.evaluate(test, cutoffs=cutoffs, batch_size=eval_batch(test), mode="conservative")
        adapter = self.handle.new_adapter()
        try:
            adapter.build(seed=seed, **hp)
            adapter.fit(train)
            if "evaluate" in self.handle.hooks:
                return dict(adapter.evaluate(test, cutoffs=cutoffs, batch_size=eval_batch(test)))
            from gru4rec_conformance.reference.gru4rec.evaluation import evaluate_prefix_scorer

            return evaluate_prefix_scorer(
                adapter.score_prefixes, adapter.item_ids(), test, cutoffs, "conservative", eval_batch(test)
            )
        finally:
            adapter.close()


# ----------------------------------------------------------------------------------------------------------------
# the study


def _storage(url: str, heartbeat: int):
    """Optuna RDB storage with heartbeats: a trial whose worker died is failed after 2 × ``heartbeat`` seconds and
    retried once (the same parameters, enqueued again)."""
    import warnings

    import optuna
    from optuna import storages

    kwargs: dict = {}
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 120}}  # concurrent workers wait for the lock
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if hasattr(storages, "RetryHeartbeatStaleTrialCallback"):  # optuna >= 4.9 names it so
        kwargs["heartbeat_stale_trial_callback"] = storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
    else:
        kwargs["failed_trial_callback"] = storages.RetryFailedTrialCallback(max_retry=1)
    last: Exception | None = None
    for attempt in range(6):
        try:
            return storages.RDBStorage(url, heartbeat_interval=heartbeat, grace_period=2 * heartbeat, **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported below with the URL
            # Workers started together on a new database race to create its tables (optuna issues #1092, #4621):
            # the loser fails once and finds the tables on the next attempt.
            last = exc
            if type(exc).__name__ not in ("IntegrityError", "OperationalError", "ProgrammingError"):
                break  # a bad URL, a missing driver: no point in waiting
            time.sleep(0.5 + random.random() * (1 + attempt))
    raise ValueError(f"--storage {_mask(url)}: {type(last).__name__}: {last}") from None


def _mask(url: str) -> str:
    """The storage URL with a password replaced by ***."""
    if "://" in url and "@" in url.split("://", 1)[1]:
        scheme, rest = url.split("://", 1)
        cred, host = rest.rsplit("@", 1)
        user = cred.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url


def _counts(study) -> dict:
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    return {
        s.name.lower(): sum(t.state == s for t in trials)
        for s in (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
    }


class _StopAt:
    """Stop a worker once the study has ``n`` complete trials, or ``max_failed`` failed ones (all workers)."""

    def __init__(self, n: int, max_failed: int, bar=None):
        self.n, self.max_failed, self.bar = n, max_failed, bar

    def __call__(self, study, trial) -> None:
        c = _counts(study)
        if self.bar is not None:
            self.bar.n = min(c["complete"], self.bar.total)
            self.bar.set_postfix(best=f"{study.best_value:.4f}" if c["complete"] else "-", failed=c["fail"])
            self.bar.refresh()
        if c["complete"] >= self.n or c["fail"] >= self.max_failed:
            study.stop()


def _markdown(res: dict) -> str:
    b, f = res.get("best_trial") or {}, res.get("final") or {}
    lines = [
        f"# Tuning: {res['impl']} on {res['dataset']['name']}, {res['loss']}",
        "",
        f"- study `{res['study_name']}` in `{res['storage']}`: {res['trials']['complete']} complete, "
        f"{res['trials']['fail']} failed trial(s) (target {res['n_trials']})",
        f"- data: {res['dataset']['source']}; train_tr {res['dataset']['shapes']['train_tr']}, train_valid "
        f"{res['dataset']['shapes']['train_valid']}, train_full {res['dataset']['shapes']['train_full']}, test "
        f"{res['dataset']['shapes']['test']}",
        f"- objective: {res['objective']}",
        f"- fixed: {json.dumps(res['fixed'])}",
        "- search space: " + "; ".join(res["search_space"]),
    ]
    lines += [f"- note: {n}" for n in res.get("notes", [])]
    lines += ["", "## Best trial", ""]
    if b:
        lines += [
            f"trial {b['number']}: MRR@20 on train_valid = {b['value']:.4f} (Recall@20 "
            f"{b.get('recall@20', float('nan')):.4f})",
            "",
            "| parameter | value |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v} |" for k, v in b["params"].items()]
    if f:
        m = f["test_metrics"]
        lines += [
            "",
            "## Retrained on train_full, evaluated on test",
            "",
            f"({m.get('n_events')} test events, conservative ties; {f['seconds']:.1f} s)",
            "",
            "| cutoff | Recall | MRR |",
            "|---|---|---|",
        ]
        lines += [f"| {c} | {m[f'recall@{c}']:.4f} | {m[f'mrr@{c}']:.4f} |" for c in CUTOFFS]
    return "\n".join(lines) + "\n"


def run(args) -> dict:
    """Run the study (and the final retrain unless ``args.no_final``); returns the result dictionary (also
    written as JSON and Markdown unless ``args.no_final``)."""
    import optuna
    import torch
    from optuna.trial import TrialState

    torch.set_num_threads(args.threads)
    data = load_dataset(args.dataset, fallback=not args.no_fallback)
    space_file = Path(args.param_space) if args.param_space else DATA / f"parspace_{args.loss}.jsonl"
    space = load_space(space_file)
    notes = fit_space_to_data(space, int(data["train_tr"]["SessionId"].nunique()))
    notes += (
        []
        if data["train_full"]["SessionId"].nunique() >= data["train_tr"]["SessionId"].nunique()
        else ["train_full has fewer sessions than train_tr"]
    )
    fixed = fixed_params(args.loss)
    if args.n_epochs is not None:
        fixed["n_epochs"] = int(args.n_epochs)
        notes.append(f"n_epochs = {args.n_epochs} instead of the study's 10 (--n-epochs)")
    trainer = Trainer(args.impl, args.device)
    study_name = args.study_name or f"gru4rec-{args.impl}-{args.dataset}-{args.loss}".replace(":", "_")
    storage = _storage(args.storage, args.heartbeat)
    sampler = optuna.samplers.TPESampler(seed=args.sampler_seed) if args.sampler_seed is not None else None
    study = optuna.create_study(
        study_name=study_name, storage=storage, direction="maximize", sampler=sampler, load_if_exists=True
    )
    if study.metric_names != [METRIC_NAME]:  # set once per study (a system attribute in the storage)
        study.set_metric_names([METRIC_NAME])
    meta = {
        "impl": args.impl,
        "dataset": args.dataset,
        "loss": args.loss,
        "objective": OBJECTIVE,
        "space_file": str(space_file),
    }
    for k, v in meta.items():
        old = study.user_attrs.get(k)
        if old is None:
            study.set_user_attr(k, v)
        elif k != "space_file" and old != v:
            raise ValueError(
                f"--study-name {study_name!r}: the study in {_mask(args.storage)} was made for "
                f"{k}={old!r}, not {v!r}; choose another --study-name"
            )
    worker = f"{socket.gethostname()}:{os.getpid()}"

    def objective(trial) -> float:
        hp = model_params(fixed, {p.name: p(trial) for p in space})
        trial.set_user_attr("worker", worker)
        t0 = time.perf_counter()
        m = trainer.train_eval(data["train_tr"], data["train_valid"], hp, args.seed, cutoffs=(20,))
        trial.set_user_attr("recall@20", float(m["recall@20"]))
        trial.set_user_attr("seconds", time.perf_counter() - t0)
        value = float(m[OBJECTIVE])
        if not math.isfinite(value):
            raise FloatingPointError(f"{OBJECTIVE} is {value}")
        return value

    done = _counts(study)["complete"]
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(
            total=args.trials,
            initial=min(done, args.trials),
            desc=f"trials ({study_name})",
            unit="trial",
            file=sys.stderr,
            dynamic_ncols=True,
        )
    try:
        if done < args.trials:
            study.optimize(
                objective,
                n_trials=None,
                catch=(FloatingPointError,),
                callbacks=[_StopAt(args.trials, args.max_failed or args.trials, bar)],
            )
    finally:
        if bar is not None:
            bar.close()
    counts = _counts(study)
    complete = list(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    res = {
        "study_name": study_name,
        "storage": _mask(args.storage),
        "impl": args.impl,
        "impl_version": trainer.version,
        "loss": args.loss,
        "device": args.device,
        "n_trials": args.trials,
        "trials": counts,
        "worker": worker,
        "objective": "MRR@20 on train_valid of a model trained on train_tr (conservative ties), maximised",
        "metric_name": METRIC_NAME,
        "dataset": {
            "name": data["name"],
            "requested": args.dataset,
            "source": data["source"],
            "shapes": {p: _shape(data[p]) for p in ("train_tr", "train_valid", "train_full", "test")},
        },
        "fixed": fixed,
        "search_space": [p.describe() for p in space],
        "search_space_file": str(space_file),
        "notes": notes,
        "seed": args.seed,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if not complete:
        res["best_trial"] = None
        return res
    best = study.best_trial
    shown = {k: (round(v, 10) if isinstance(v, float) else v) for k, v in best.params.items()}  # as trained
    res["best_trial"] = {
        "number": best.number,
        "value": best.value,
        "params": shown,
        "recall@20": best.user_attrs.get("recall@20"),
        "worker": best.user_attrs.get("worker"),
    }
    if args.no_final:
        return res
    hp = model_params(fixed, best.params)
    t0 = time.perf_counter()
    metrics = trainer.train_eval(data["train_full"], data["test"], hp, args.seed, cutoffs=CUTOFFS)
    res["final"] = {
        "hparams": hp,
        "train": "train_full",
        "test_metrics": {k: (float(v) if k != "n_events" else int(v)) for k, v in metrics.items()},
        "seconds": time.perf_counter() - t0,
    }
    folder = new_run_dir(Path(args.out) / study_name)  # <stamp>, then <stamp>-1, <stamp>-2, ...
    atomic_write_json(folder / "result.json", res, indent=2, default=str, trailing_newline=True)
    atomic_write_text(folder / "result.md", _markdown(res))
    res["folder"] = str(folder)
    return res


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m gru4rec_conformance.benchmarks.tune",
        description="Optuna hyperparameter search of a GRU4Rec implementation over the "
        "study's search space (see the module docstring).",
    )
    ap.add_argument("--impl", default="reference", help="reference, or a registered adapter name / module:Class")
    ap.add_argument("--dataset", required=True, help="diginetica | yoochoose_100k | synth:<name>[@<scale>]")
    ap.add_argument("--loss", required=True, choices=LOSSES)
    ap.add_argument("--trials", type=int, required=True, help="complete trials the study should reach")
    ap.add_argument(
        "--storage",
        default=DEFAULT_STORAGE,
        help="Optuna RDB URL: sqlite:///path.db or postgresql://user:pw@host/db (default: %(default)s)",
    )
    ap.add_argument("--study-name", default=None, help="default: gru4rec-<impl>-<dataset>-<loss>")
    ap.add_argument("--n-epochs", type=int, default=None, help="epochs per training (default: the study's 10)")
    ap.add_argument("--param-space", default=None, help="a paropt-format parameter file instead of the study's")
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads of this worker (default 1: scale out with workers; on a loaded "
        "machine several threads per process spin and slow each other down)",
    )
    ap.add_argument("--seed", type=int, default=42, help="model seed of every trial and of the final retrain")
    ap.add_argument("--sampler-seed", type=int, default=None, help="seed of the TPE sampler (one worker only)")
    ap.add_argument(
        "--heartbeat",
        type=int,
        default=60,
        help="seconds between a running trial's heartbeats; a trial silent for twice this long is failed and retried",
    )
    ap.add_argument(
        "--max-failed", type=int, default=None, help="stop after this many failed trials (default: --trials)"
    )
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="parent folder of the result folders")
    ap.add_argument("--no-final", action="store_true", help="do not retrain on train_full (extra workers)")
    ap.add_argument("--no-fallback", action="store_true", help="fail instead of using a synthetic stand-in")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.trials < 1:
        ap.error(f"--trials: must be >= 1, got {args.trials}")
    if args.n_epochs is not None and args.n_epochs < 1:
        ap.error(f"--n-epochs: must be >= 1, got {args.n_epochs}")
    if args.threads < 1:
        ap.error(f"--threads: must be >= 1, got {args.threads}")
    if args.heartbeat < 1:
        ap.error(f"--heartbeat: must be >= 1, got {args.heartbeat}")
    return ap, args


def main(argv=None) -> int:
    ap, args = parse_args(argv)
    try:
        res = run(args)
    except (ValueError, FileNotFoundError) as exc:
        ap.exit(2, f"{ap.prog}: error: {exc}\n")
    b = res.get("best_trial")
    print(f"study {res['study_name']}: {res['trials']['complete']} complete, {res['trials']['fail']} failed trial(s)")
    if b:
        print(f"best trial {b['number']}: MRR@20 (train_valid) = {b['value']:.4f}, params {b['params']}")
    if res.get("final"):
        m = res["final"]["test_metrics"]
        print("test: " + ", ".join(f"R@{c} {m[f'recall@{c}']:.4f} MRR@{c} {m[f'mrr@{c}']:.4f}" for c in CUTOFFS))
        print(f"result: {res['folder']}/result.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
