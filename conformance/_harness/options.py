"""Command-line options of the conformance plugin, their environment defaults, and the markers it registers.

:func:`pytest_addoption` declares the options (group "conformance" of ``pytest --help``); :func:`read_options`
turns a configured session's values into :class:`Options` and :func:`check_options` rejects inconsistent ones
(``pytest.UsageError``). :data:`MARKERS` is the one list of the suite's markers (``pytest_configure`` registers
them, so ``--strict-markers`` accepts them in checks and in the suite's own tests alike).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from pathlib import Path

import pytest

from gru4rec_conformance.conformance._harness import oracle_cache
from gru4rec_conformance.conformance._harness.isolation import (
    DEFAULT_TIMEOUTS_S,
    SANDBOX_MODES,
    IsolationSettings,
    sandbox_for,
)
from gru4rec_conformance.implementations.registry import Registry

#: The folder that holds the suite's ``conformance/`` package: the checkout root, or ``site-packages/
#: gru4rec_conformance`` for an installed wheel. Check ids and committed xfail files are relative to it.
SUITE_CHECKS_ROOT = Path(__file__).resolve().parents[2]

ENV_IMPL = "GRU4REC_CONFORMANCE_IMPL"
#: ``--profile`` values: the metric checks' scale (``datasets.sessions.registry.mc_config``): ``cpu`` the study's
#: best hyperparameters with one 100-unit layer and 3 epochs, ``study`` as published (layer size, 10 epochs).
PROFILES = ("cpu", "study")
DEFAULT_SEEDS = (42,)
MAX_SEED = 2**32
#: ``--first-run``'s timeout of every worker call, in seconds, unless ``--call-timeout`` is given: a hang of a new
#: implementation is reported (with the worker's stacks) within minutes instead of the kinds' generous defaults.
FIRST_RUN_CALL_TIMEOUT_S = 120.0
MARKERS = {
    "check": "check(ID, kind=KIND, card=None, timeout=None): conformance check id and defect kind (K1..K11, metric, ...)",
    "feature": "feature(*names): needs declared features (flags, 'loss:bpr-max', 'hook:trace', 'hparam:momentum')",
    "loss": "loss(*names): needs these losses declared (feature 'loss:<name>')",
    "embedding": "embedding(*modes): needs these embedding modes declared (feature 'embedding:<mode>')",
    "final_act": "final_act(*names): needs these final activations declared",
    "hook": "hook(*names): needs these optional adapter methods implemented (feature 'hook:<name>')",
    "hparam": "hparam(*names): needs these hyperparameters declared (feature 'hparam:<name>')",
    "family": "family(name): family of the checks in this module when not inferred from conformance/<family>/",
    "slow": "slow check or test (deselect with -m 'not slow')",
    "gpu": "needs a GPU (runs only with --device cuda)",
    "metric": "metric-conformance check (trains on a real dataset)",
    "determinism": "determinism check (same-seed runs agree); when it fails, reports warn that verdicts may flap",
}


@dataclasses.dataclass(frozen=True)
class Options:
    """The conformance options of one session, as given (see :func:`pytest_addoption` for each).

    Attributes:
        selection: ``--impl`` tokens (comma-split, env ``GRU4REC_CONFORMANCE_IMPL``), None when none given.
        device: ``cpu`` or ``cuda``.
        dataset: ``--dataset`` as given (None = each check's default; ``all`` or a comma list: parsed by the checks).
        seeds: ``--seeds`` (integers in ``[0, 2**32)``).
        gate: ``--gate``.
        xfail_mark: ``xfail`` or ``skip`` (how xfail-registry entries are applied).
        report_dir: parent of the run directories.
        report_enabled: False with ``--no-report``.
        plots: False with ``--no-report-plots``.
        isolation: ``auto``, ``always`` or ``never``.
        settings: worker settings (``--call-timeout``, ``--worker-*``, ``--keep-worker-dirs``, ``--sandbox``).
        allow_unsandboxed: ``--allow-unsandboxed`` (``--gate`` may run isolated adapters without the sandbox).
        is_xdist_worker: this process is a pytest-xdist worker (the controller writes the reports).
        resume: ``--resume`` run directories, as given.
        refresh: ``--refresh`` run directories, as given (:mod:`.refresh`).
        xfail_files: ``--xfails`` files, as given.
        first_run: ``--first-run`` (short call timeouts, fast checks first, a draft xfail file at the end:
            :mod:`.first_run`).
        profile: ``--profile`` (one of :data:`PROFILES`), None when not given (the metric checks then read
            ``GRU4REC_MC_SCALE``, default ``cpu``).
        oracle_cache_dir: folder of the disk cache of the reference's oracle results (:mod:`.oracle_cache`);
            None with ``--no-oracle-cache``.
        oracle_cache_mb: its size limit in MiB (``--oracle-cache-mb``).
    """

    selection: list[str] | None
    device: str
    dataset: str | None
    seeds: list[int]
    gate: bool
    xfail_mark: str
    report_dir: Path
    report_enabled: bool
    plots: bool
    isolation: str
    settings: IsolationSettings
    is_xdist_worker: bool
    resume: list[str]
    xfail_files: list[str]
    refresh: list[str] = dataclasses.field(default_factory=list)
    allow_unsandboxed: bool = False
    first_run: bool = False
    profile: str | None = None
    oracle_cache_dir: Path | None = None
    oracle_cache_mb: float = oracle_cache.DEFAULT_MAX_MB


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("conformance", "conformance suite (GRU4Rec and fine-tuner implementations)")
    g.addoption(
        "--impl",
        action="append",
        dest="conformance_impl",
        default=None,
        metavar="NAME",
        help="implementation under test: a registered name, 'all', or some.module:AdapterClass; repeatable "
        f"and comma-separated (env {ENV_IMPL})",
    )
    g.addoption(
        "--device",
        dest="conformance_device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="device the implementations run on (default cpu)",
    )
    g.addoption(
        "--dataset",
        dest="conformance_dataset",
        default=None,
        metavar="NAME[,NAME...]",
        help="dataset(s) of the metric-conformance checks (default: each check's own): a name, a prepared folder, "
        "NAME=FOLDER, 'all' (the five study datasets) or a comma list; several parametrize the checks",
    )
    g.addoption(
        "--profile",
        dest="conformance_profile",
        default=None,
        metavar="|".join(PROFILES),
        help="settings of the metric checks: 'study' trains with the study's published hyperparameters per dataset "
        "and loss (layer size, 10 epochs; for full-size data on a GPU), 'cpu' (default) with one 100-unit layer "
        "and 3 epochs (env GRU4REC_MC_SCALE)",
    )
    g.addoption(
        "--seeds",
        dest="conformance_seeds",
        default=None,
        metavar="S1,S2,...",
        help=f"seeds for checks that repeat over seeds (default {','.join(map(str, DEFAULT_SEEDS))})",
    )
    g.addoption(
        "--gate",
        action="store_true",
        dest="conformance_gate",
        help="CI gate: fail on any failure not covered by a declared xfail, on unmatched xfail entries, "
        "and when no check ran",
    )
    g.addoption(
        "--resume",
        action="append",
        dest="conformance_resume",
        default=[],
        metavar="RUN_DIR",
        help="continue a run directory: skip checks that already have a verdict there for the same "
        "implementation and suite version (repeatable, one per implementation)",
    )
    g.addoption(
        "--refresh",
        action="append",
        dest="conformance_refresh",
        default=[],
        metavar="RUN_DIR",
        help="a new run that takes over from RUN_DIR (an earlier complete run or a committed verdict folder of "
        "the same implementation) the results of checks whose code has not changed since, and runs the rest "
        "(repeatable, one per implementation)",
    )
    g.addoption(
        "--xfail-mark",
        dest="conformance_xfail_mark",
        choices=("xfail", "skip"),
        default=os.environ.get("GRU4REC_XFAIL_MARK", "xfail"),
        help="apply xfail-registry entries as strict xfail (default) or skip them (faster)",
    )
    g.addoption(
        "--xfails",
        action="append",
        dest="conformance_xfails",
        default=[],
        metavar="TOML",
        help="xfail file of an outside adapter (its 'implementation' key names it); overrides "
        "conformance/xfails/<impl>.toml",
    )
    g.addoption(
        "--report-dir",
        dest="conformance_report_dir",
        default=os.environ.get("GRU4REC_REPORT_DIR"),
        metavar="DIR",
        help="where run directories go (default <rootdir>/reports/out)",
    )
    g.addoption(
        "--no-report",
        action="store_true",
        dest="conformance_no_report",
        help="do not write a report (results.jsonl and summaries)",
    )
    g.addoption(
        "--no-report-plots",
        action="store_true",
        dest="conformance_no_plots",
        help="write the report without PNG plots (faster; e.g. for meta-tests over many mutants)",
    )
    g.addoption(
        "--isolation",
        dest="conformance_isolation",
        choices=("auto", "always", "never"),
        default=os.environ.get("GRU4REC_ISOLATION", "auto"),
        help="run adapters in worker processes: auto (adapters declaring isolated=True), always, never",
    )
    g.addoption(
        "--call-timeout",
        dest="conformance_call_timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="timeout of every worker call (default: per check kind, "
        + ", ".join(f"{k} {v:g}s" for k, v in DEFAULT_TIMEOUTS_S.items())
        + ")",
    )
    g.addoption(
        "--first-run",
        action="store_true",
        dest="conformance_first_run",
        help=f"first run of a new implementation: every worker call times out after {FIRST_RUN_CALL_TIMEOUT_S:g}s "
        "unless --call-timeout is given (the worker's stacks are shown), fast checks run first, and a DRAFT xfail "
        "file listing every failure is written next to the report for review",
    )
    g.addoption(
        "--worker-memory-mb",
        dest="conformance_worker_memory",
        type=float,
        default=None,
        metavar="MiB",
        help="kill a worker whose resident memory exceeds this (default 80%% of RAM; 0 = no limit)",
    )
    g.addoption(
        "--worker-network",
        dest="conformance_worker_network",
        choices=("deny", "allow"),
        default="deny",
        help="cut workers off the network where the platform allows (default deny)",
    )
    env_threads = os.environ.get("GRU4REC_WORKER_THREADS", "").strip()
    g.addoption(
        "--worker-threads",
        dest="conformance_worker_threads",
        type=int,
        # as text: argparse converts it like a command-line value, so a non-integer is a usage error
        default=env_threads or None,
        metavar="N",
        help="OMP/MKL/OpenBLAS and torch threads of each worker (default: OMP_NUM_THREADS etc. as set "
        "here, else 1; env GRU4REC_WORKER_THREADS)",
    )
    g.addoption(
        "--sandbox",
        dest="conformance_sandbox",
        default=os.environ.get("GRU4REC_SANDBOX", "auto"),
        metavar="auto|bwrap|none",
        help="sandbox of worker processes: bwrap (bubblewrap, required), auto (bwrap where it works, else none; "
        "default) or none (env GRU4REC_SANDBOX)",
    )
    g.addoption(
        "--allow-unsandboxed",
        action="store_true",
        dest="conformance_allow_unsandboxed",
        default=os.environ.get("GRU4REC_ALLOW_UNSANDBOXED", "").lower() in ("1", "true", "yes"),
        help="let --gate run isolated adapters although the sandbox cannot be used (their verdict can be forged; "
        "env GRU4REC_ALLOW_UNSANDBOXED=1, e.g. on CI runners that forbid user namespaces)",
    )
    g.addoption(
        "--no-oracle-cache",
        action="store_true",
        dest="conformance_no_oracle_cache",
        help="neither read nor write the disk cache of the reference's oracle results (the metric checks' "
        "reference fits then run in this session)",
    )
    g.addoption(
        "--oracle-cache-dir",
        dest="conformance_oracle_cache_dir",
        default=None,
        metavar="DIR",
        help=f"folder of the oracle cache (default: env {oracle_cache.ENV_DIR}, else "
        "$XDG_CACHE_HOME/gru4rec-conformance/oracle, ~/.cache when unset)",
    )
    g.addoption(
        "--oracle-cache-mb",
        dest="conformance_oracle_cache_mb",
        type=float,
        default=os.environ.get(oracle_cache.ENV_MAX_MB, "").strip() or None,
        metavar="MiB",
        help=f"size limit of the oracle cache; the oldest entries are deleted beyond it (default "
        f"{oracle_cache.DEFAULT_MAX_MB:g}; env {oracle_cache.ENV_MAX_MB})",
    )
    g.addoption("--keep-worker-dirs", action="store_true", dest="conformance_keep_worker_dirs",
                help="keep worker temporary directories (debugging)")  # fmt: skip


def register_markers(config: pytest.Config) -> None:
    """Register :data:`MARKERS` with ``config`` (``--strict-markers`` then accepts them)."""
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def check_roots(config: pytest.Config) -> list[Path]:
    """Where ``conformance/<family>/`` check files and ``conformance/xfails/`` live: the rootdir (a checkout,
    or a project with checks of its own), then the suite's own package folder (an installed wheel)."""
    return list(dict.fromkeys([Path(config.rootpath).resolve(), SUITE_CHECKS_ROOT]))


def read_options(config: pytest.Config) -> Options:
    """The options of ``config``. Raises ``pytest.UsageError`` for unparsable ``--seeds``."""
    report_dir = config.getoption("conformance_report_dir")
    report_root = Path(report_dir) if report_dir else Path(config.rootpath) / "reports" / "out"
    no_cache = bool(config.getoption("conformance_no_oracle_cache", False))
    raw_cache = config.getoption("conformance_oracle_cache_dir", None)
    cache_dir = None if no_cache else (Path(raw_cache).expanduser() if raw_cache else oracle_cache.default_dir())
    cache_mb = config.getoption("conformance_oracle_cache_mb", None)
    # the worker gets no path to the run folders, the registries nor the oracle cache (isolation: hidden_paths)
    hidden = (str(report_root.resolve()), *(str(r / "conformance" / "xfails") for r in check_roots(config)),
              *([str(cache_dir.resolve())] if cache_dir is not None else []))  # fmt: skip
    first_run = bool(config.getoption("conformance_first_run", False))
    call_timeout = config.getoption("conformance_call_timeout")
    if call_timeout is None and first_run:
        call_timeout = FIRST_RUN_CALL_TIMEOUT_S
    settings = IsolationSettings(
        hidden_paths=hidden,
        call_timeout=call_timeout,
        memory_limit_mb=config.getoption("conformance_worker_memory"),
        network=config.getoption("conformance_worker_network"),
        keep_dirs=config.getoption("conformance_keep_worker_dirs"),
        threads=config.getoption("conformance_worker_threads"),
        sandbox=config.getoption("conformance_sandbox"),
    )
    return Options(
        selection=_selection(config),
        device=config.getoption("conformance_device"),
        dataset=config.getoption("conformance_dataset"),
        seeds=_parse_seeds(config.getoption("conformance_seeds")),
        gate=config.getoption("conformance_gate"),
        xfail_mark=config.getoption("conformance_xfail_mark"),
        report_dir=report_root,
        report_enabled=not config.getoption("conformance_no_report"),
        plots=not config.getoption("conformance_no_plots"),
        isolation=config.getoption("conformance_isolation"),
        settings=settings,
        is_xdist_worker=hasattr(config, "workerinput"),
        resume=list(config.getoption("conformance_resume")),
        refresh=list(config.getoption("conformance_refresh")),
        xfail_files=list(config.getoption("conformance_xfails")),
        allow_unsandboxed=bool(config.getoption("conformance_allow_unsandboxed")),
        first_run=first_run,
        profile=config.getoption("conformance_profile", None),
        oracle_cache_dir=cache_dir,
        oracle_cache_mb=float(cache_mb) if cache_mb is not None else oracle_cache.DEFAULT_MAX_MB,
    )


def check_options(options: Options) -> None:
    """Raise ``pytest.UsageError`` for values the environment defaults let through or that contradict."""
    if options.xfail_mark not in ("xfail", "skip"):
        raise pytest.UsageError(
            f"--xfail-mark / GRU4REC_XFAIL_MARK must be 'xfail' or 'skip', got {options.xfail_mark!r}"
        )
    if options.isolation not in ("auto", "always", "never"):
        raise pytest.UsageError(
            f"--isolation / GRU4REC_ISOLATION must be auto, always or never, got {options.isolation!r}"
        )
    if options.settings.sandbox not in SANDBOX_MODES:
        raise pytest.UsageError(
            f"--sandbox / GRU4REC_SANDBOX must be auto, bwrap or none, got {options.settings.sandbox!r}"
        )
    if options.profile is not None and options.profile not in PROFILES:
        close = difflib.get_close_matches(options.profile, PROFILES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise pytest.UsageError(f"--profile {options.profile!r}: unknown profile; known: {', '.join(PROFILES)}{hint}")
    if options.gate and options.xfail_mark == "skip":
        raise pytest.UsageError("--gate needs strict xfails: do not combine it with --xfail-mark=skip")
    if not (options.oracle_cache_mb > 0 and options.oracle_cache_mb < float("inf")):
        raise pytest.UsageError(f"--oracle-cache-mb / {oracle_cache.ENV_MAX_MB} {options.oracle_cache_mb:g}: the "
                                "size limit must be a positive number of MiB (or pass --no-oracle-cache)")  # fmt: skip
    _check_worker_limits(options.settings)


def _parse_seeds(raw: str | None) -> list[int]:
    if raw is None:
        return list(DEFAULT_SEEDS)
    seeds = []
    for tok in raw.replace(" ", ",").split(","):
        if not tok:
            continue
        try:
            seed = int(tok)
        except ValueError:
            raise pytest.UsageError(
                f"--seeds {raw!r}: {tok!r} is not an integer (expected e.g. --seeds 1,2,3)"
            ) from None
        if not 0 <= seed < MAX_SEED:
            # numpy's SeedSequence refuses negative seeds and np.random.seed those >= 2**32, deep inside checks
            raise pytest.UsageError(f"--seeds {raw!r}: seed {seed} is out of range; seeds are integers in "
                                    f"[0, 2**32)")  # fmt: skip
        seeds.append(seed)
    if not seeds:
        raise pytest.UsageError(f"--seeds {raw!r}: no seed given")
    return seeds


def _selection(config: pytest.Config) -> list[str] | None:
    raw: list[str] | None = config.getoption("conformance_impl")
    if not raw and os.environ.get(ENV_IMPL):
        raw = [os.environ[ENV_IMPL]]
    if not raw:
        return None
    out = [tok.strip() for item in raw for tok in item.split(",") if tok.strip()]
    return out or None


def _check_worker_limits(settings: IsolationSettings) -> None:
    """--call-timeout must be positive and --worker-memory-mb non-negative (0 = no limit)."""
    if settings.call_timeout is not None and not settings.call_timeout > 0:
        raise pytest.UsageError(f"--call-timeout {settings.call_timeout:g}: the per-call timeout must be a positive "
                                "number of seconds")  # fmt: skip
    if settings.threads is not None and not settings.threads >= 1:
        raise pytest.UsageError(f"--worker-threads {settings.threads}: the thread count must be >= 1")
    if settings.memory_limit_mb is not None and not settings.memory_limit_mb >= 0:
        raise pytest.UsageError(f"--worker-memory-mb {settings.memory_limit_mb:g}: the memory limit must be >= 0 MiB "
                                "(0 = no limit)")  # fmt: skip


def check_run_inputs(options: Options) -> None:
    """Raise ``pytest.UsageError`` (one line) for a ``--dataset`` or ``--report-dir`` a conformance run cannot use,
    before any run folder is made: an unknown dataset name (with the closest one), a prepared folder that is
    missing or lacks its Parquet files, a report folder that is a file or cannot be written."""
    if options.dataset is not None:
        from gru4rec_conformance.datasets.sessions.registry import check_selection

        try:
            check_selection(options.dataset)
        except (ValueError, OSError) as exc:
            raise pytest.UsageError(str(exc)) from None
    if options.report_enabled and not options.is_xdist_worker:
        _check_report_dir(options.report_dir)
    if options.oracle_cache_dir is not None:
        _check_oracle_cache_dir(options.oracle_cache_dir)


def _check_oracle_cache_dir(folder: Path) -> None:
    """The oracle cache folder must be (or be creatable as) a writable folder; it is made now, before any worker
    starts, so that the sandbox can hide it from the workers."""
    what = f"--oracle-cache-dir / {oracle_cache.ENV_DIR} {folder}"
    try:
        oracle_cache.check_folder(folder)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (ValueError, OSError) as exc:
        raise pytest.UsageError(f"{what}: {exc} (pass --no-oracle-cache to run without the cache)") from None


def _check_report_dir(root: Path) -> None:
    """``root`` or its nearest existing ancestor must be a writable folder (run folders are made under it)."""
    existing = root
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise pytest.UsageError(f"--report-dir / GRU4REC_REPORT_DIR {root}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"--report-dir / GRU4REC_REPORT_DIR {root}: {existing} is not writable")


def check_xfail_target(raw: str, implementation: str, selected: list[str]) -> None:
    """Raise ``pytest.UsageError`` when the ``implementation`` key of the ``--xfails`` file ``raw`` names none of
    the ``selected`` implementations (its entries would silently apply to nothing)."""
    if implementation in selected:
        return
    close = difflib.get_close_matches(implementation, selected, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise pytest.UsageError(f"--xfails {raw}: its implementation {implementation!r} is not selected by --impl "
                            f"(selected: {', '.join(selected)}){hint}")  # fmt: skip


def check_sandbox(options: Options, uses_workers: bool) -> None:
    """Raise ``pytest.UsageError`` when workers need the sandbox and cannot have it: ``--sandbox bwrap`` where
    bubblewrap does not run, or ``--gate`` over isolated adapters without it (unless ``--allow-unsandboxed``)."""
    if not uses_workers:
        return
    sandbox = sandbox_for(options.settings.sandbox)
    if sandbox.available:
        return
    if options.settings.sandbox == "bwrap":
        raise pytest.UsageError(f"--sandbox bwrap: bubblewrap cannot sandbox the workers here: {sandbox.reason}")
    if options.gate and not options.allow_unsandboxed:
        raise pytest.UsageError(
            f"--gate runs adapters in worker processes, but the sandbox cannot be used ({sandbox.reason}): an "
            "unsandboxed worker can forge its verdict. Install bubblewrap (apt-get install bubblewrap), or pass "
            "--allow-unsandboxed to gate anyway"
        )


def looks_like_conformance_run(config: pytest.Config) -> bool:
    """Whether the command line asks for checks under a ``conformance/`` folder (then --impl is required)."""
    root = Path(config.rootpath)
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0])
        path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
        path = path.resolve()
        try:
            parts = path.relative_to(root).parts
        except ValueError:
            parts = path.parts
        if "conformance" in parts or (path.is_dir() and (path / "conformance").is_dir()):
            return True
    return False


def usage(registry: Registry, head: str) -> str:
    """A usage-error text: ``head``, the registered implementations per family, an example command."""
    return f"{head}\n{registry.describe()}\nExample: pytest conformance/ --impl reference"


def missing_selection_usage(registry: Registry) -> str:
    """The usage-error text of a conformance run without ``--impl``."""
    return usage(registry, f"conformance checks need an implementation: pass --impl NAME (or set {ENV_IMPL}).")


def check_cuda() -> None:
    """--device cuda needs a usable CUDA device for the suite's own torch (the reference runs in this process);
    without it every check would fail deep inside torch. Not checked when torch is not installed here."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return
    import torch

    if not torch.cuda.is_available():
        raise pytest.UsageError(f"--device cuda: no usable CUDA device here (torch {torch.__version__}: "
                                "torch.cuda.is_available() is False); run with --device cpu")  # fmt: skip
