"""The conformance pytest plugin (loaded by the root ``conftest.py``).

Options (``pytest --help``, group "conformance"): ``--impl`` (repeatable, ``all``, ``module:Class``; env
``GRU4REC_CONFORMANCE_IMPL``), ``--device``, ``--dataset``, ``--seeds``, ``--gate``, ``--resume RUN_DIR``,
``--xfail-mark``, ``--xfails``, ``--report-dir``, ``--no-report``, ``--isolation``, ``--call-timeout``,
``--worker-memory-mb``, ``--worker-network``, ``--worker-threads``, ``--keep-worker-dirs``.

What it does, in hook order:

1. ``pytest_configure``: parses the options, resolves ``--impl`` against the registry (a usage error lists
   the registered implementations per family), prepares ``--resume``;
2. ``pytest_generate_tests``: parametrizes every test that uses the ``impl`` fixture over the selected
   implementations of its family (the family is the folder ``conformance/<family>/`` or a ``family`` marker);
3. ``pytest_collection_modifyitems``: deselects checks of families without a selected implementation (with
   a note), applies the strict xfail registry (unmatched entries become failing registry items), deselects
   checks that already have a verdict in the ``--resume`` run;
4. ``pytest_runtest_setup``: skips checks whose features/hooks are not declared ("unsupported by ..."),
   and turns :class:`~implementations.base.Unsupported` raised by the adapter into such a skip (or into a
   failure when the thing was declared);
5. ``pytest_runtest_logreport`` (controller only): appends one result per check to the run's results.jsonl;
6. ``pytest_sessionfinish``: writes results.json, summary.md, summary.html and plots; applies ``--gate``.

Fixtures: ``impl`` (:class:`~conformance._harness.handle.Impl`), ``reference_impl``, ``record_metric``,
``conformance_options``.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from gru4rec_conformance.conformance._harness import hookspecs
from gru4rec_conformance.conformance._harness.handle import UNSUPPORTED_PREFIX, HarnessError, Impl, ImplHandle
from gru4rec_conformance.conformance._harness.isolation import DEFAULT_TIMEOUTS_S, IsolationSettings, WorkerError, network_isolation
from gru4rec_conformance.conformance._harness.recording import (
    PROP_DECLARED, PROP_INFO, PROP_METRIC, PROP_SKIP, PROP_WORKER, PROP_XFAIL, Recorder, impl_from_nodeid,
)  # fmt: skip
from gru4rec_conformance.conformance._harness.runinfo import framework_versions, gru4rec_env, platform_info, suite_version
from gru4rec_conformance.conformance._harness.xfails import (
    XfailRegistryError, default_xfail_path, files_matching, load_xfail_file, pattern_file_part, pattern_matches,
    strip_impl_param, when_context,
)  # fmt: skip
from gru4rec_conformance.reports.summary import UNAVAILABLE_MARKER, unavailable_why
from gru4rec_conformance.implementations.base import KNOWN_FAMILY_NAMES, Unsupported, get_family
from gru4rec_conformance.implementations.registry import AdapterSpec, Registry, RegistryError, default_registry

ENV_IMPL = "GRU4REC_CONFORMANCE_IMPL"
DEFAULT_SEEDS = (42,)
MAX_SEED = 2**32
MARKERS = {
    "check": "check(ID, kind=KIND, card=None, timeout=None): conformance check id and defect kind (K1..K11, metric, ...)",
    "feature": "feature(*names): needs declared features (flags, 'loss:bpr-max', 'hook:trace', 'hparam:momentum')",
    "loss": "loss(*names): needs these losses declared (feature 'loss:<name>')",
    "embedding": "embedding(*modes): needs these embedding modes declared (feature 'embedding:<mode>')",
    "final_act": "final_act(*names): needs these final activations declared",
    "hook": "hook(*names): needs these optional adapter methods implemented (feature 'hook:<name>')",
    "hparam": "hparam(*names): needs these hyperparameters declared (feature 'hparam:<name>')",
    "family": "family(name): family of the checks in this module when not inferred from conformance/<family>/",
    "slow": "slow check (deselect with -m 'not slow')",
    "gpu": "needs a GPU (runs only with --device cuda)",
    "metric": "metric-conformance check (trains on a real dataset)",
}
STATE_KEY = pytest.StashKey["State"]()


@dataclasses.dataclass(frozen=True)
class ImplParam:
    """Value of the ``impl`` parameter: a selected implementation, or a placeholder to deselect."""

    family: str
    name: str | None
    missing_selection: bool = False


@dataclasses.dataclass
class ResumeInfo:
    directory: Path
    impl: str
    family: str
    verdicts: dict[str, tuple[str, str]]


@dataclasses.dataclass
class State:
    config: Any
    selection: list[str] | None
    device: str
    dataset: str | None
    seeds: list[int]
    gate: bool
    xfail_mark: str
    report_dir: Path
    report_enabled: bool
    isolation: str
    settings: IsolationSettings
    is_xdist_worker: bool
    registry: Registry | None = None
    specs: list[AdapterSpec] = dataclasses.field(default_factory=list)
    handles: dict[tuple[str, str], ImplHandle] = dataclasses.field(default_factory=dict)
    reference_handles: dict[str, ImplHandle] = dataclasses.field(default_factory=dict)
    resume: dict[tuple[str, str], ResumeInfo] = dataclasses.field(default_factory=dict)
    extra_xfail_files: dict[str, Path] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    ignored_families: list[str] = dataclasses.field(default_factory=list)
    writers: dict[str, Any] = dataclasses.field(default_factory=dict)
    recorder: Recorder | None = None
    old_sigterm: Any = None
    gate_result: dict[str, Any] | None = None
    reused: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def handle_for(self, param: ImplParam) -> ImplHandle:
        return self.handles[(param.family, param.name or "")]


def _state(config: Any) -> State:
    return config.stash[STATE_KEY]


# ---------------------------------------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------------------------------------
def pytest_addhooks(pluginmanager: Any) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: Any) -> None:
    g = parser.getgroup("conformance", "conformance suite (GRU4Rec and fine-tuner implementations)")
    g.addoption("--impl", action="append", dest="conformance_impl", default=None, metavar="NAME",
                help="implementation under test: a registered name, 'all', or some.module:AdapterClass; repeatable "
                     f"and comma-separated (env {ENV_IMPL})")
    g.addoption("--device", dest="conformance_device", choices=("cpu", "cuda"), default="cpu",
                help="device the implementations run on (default cpu)")
    g.addoption("--dataset", dest="conformance_dataset", default=None, metavar="NAME",
                help="dataset of the metric-conformance checks (default: each check's own)")
    g.addoption("--seeds", dest="conformance_seeds", default=None, metavar="S1,S2,...",
                help=f"seeds for checks that repeat over seeds (default {','.join(map(str, DEFAULT_SEEDS))})")
    g.addoption("--gate", action="store_true", dest="conformance_gate",
                help="CI gate: fail on any failure not covered by a declared xfail, on unmatched xfail entries, "
                     "and when no check ran")
    g.addoption("--resume", action="append", dest="conformance_resume", default=[], metavar="RUN_DIR",
                help="continue a run directory: skip checks that already have a verdict there for the same "
                     "implementation and suite version (repeatable, one per implementation)")
    g.addoption("--xfail-mark", dest="conformance_xfail_mark", choices=("xfail", "skip"),
                default=os.environ.get("GRU4REC_XFAIL_MARK", "xfail"),
                help="apply xfail-registry entries as strict xfail (default) or skip them (faster)")
    g.addoption("--xfails", action="append", dest="conformance_xfails", default=[], metavar="TOML",
                help="xfail file of an outside adapter (its 'implementation' key names it); overrides "
                     "conformance/xfails/<impl>.toml")
    g.addoption("--report-dir", dest="conformance_report_dir", default=os.environ.get("GRU4REC_REPORT_DIR"),
                metavar="DIR", help="where run directories go (default <rootdir>/reports/out)")
    g.addoption("--no-report", action="store_true", dest="conformance_no_report",
                help="do not write a report (results.jsonl and summaries)")
    g.addoption("--no-report-plots", action="store_true", dest="conformance_no_plots",
                help="write the report without PNG plots (faster; e.g. for meta-tests over many mutants)")
    g.addoption("--isolation", dest="conformance_isolation", choices=("auto", "always", "never"),
                default=os.environ.get("GRU4REC_ISOLATION", "auto"),
                help="run adapters in worker processes: auto (adapters declaring isolated=True), always, never")
    g.addoption("--call-timeout", dest="conformance_call_timeout", type=float, default=None, metavar="SECONDS",
                help="timeout of every worker call (default: per check kind, "
                     + ", ".join(f"{k} {v:g}s" for k, v in DEFAULT_TIMEOUTS_S.items()) + ")")
    g.addoption("--worker-memory-mb", dest="conformance_worker_memory", type=float, default=None, metavar="MiB",
                help="kill a worker whose resident memory exceeds this (default 80%% of RAM; 0 = no limit)")
    g.addoption("--worker-network", dest="conformance_worker_network", choices=("deny", "allow"), default="deny",
                help="cut workers off the network where the platform allows (default deny)")
    env_threads = os.environ.get("GRU4REC_WORKER_THREADS", "")
    g.addoption("--worker-threads", dest="conformance_worker_threads", type=int,
                default=int(env_threads) if env_threads.isdigit() else None, metavar="N",
                help="OMP/MKL/OpenBLAS and torch threads of each worker (default: OMP_NUM_THREADS etc. as set "
                     "here, else 1; env GRU4REC_WORKER_THREADS)")
    g.addoption("--keep-worker-dirs", action="store_true", dest="conformance_keep_worker_dirs",
                help="keep worker temporary directories (debugging)")  # fmt: skip


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
            raise pytest.UsageError(f"--seeds {raw!r}: {tok!r} is not an integer (expected e.g. --seeds 1,2,3)") from None
        if not 0 <= seed < MAX_SEED:
            # numpy's SeedSequence refuses negative seeds and np.random.seed those >= 2**32, deep inside checks
            raise pytest.UsageError(f"--seeds {raw!r}: seed {seed} is out of range; seeds are integers in "
                                    f"[0, 2**32)")  # fmt: skip
        seeds.append(seed)
    if not seeds:
        raise pytest.UsageError(f"--seeds {raw!r}: no seed given")
    return seeds


def _selection(config: Any) -> list[str] | None:
    raw = config.getoption("conformance_impl")
    if not raw and os.environ.get(ENV_IMPL):
        raw = [os.environ[ENV_IMPL]]
    if not raw:
        return None
    out = [tok.strip() for item in raw for tok in item.split(",") if tok.strip()]
    return out or None


def _looks_like_conformance_run(config: Any) -> bool:
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


def _usage(registry: Registry, head: str) -> str:
    return f"{head}\n{registry.describe()}\nExample: pytest conformance/ --impl reference"


def pytest_configure(config: Any) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    is_worker = hasattr(config, "workerinput")
    report_dir = config.getoption("conformance_report_dir")
    settings = IsolationSettings(
        call_timeout=config.getoption("conformance_call_timeout"),
        memory_limit_mb=config.getoption("conformance_worker_memory"),
        network=config.getoption("conformance_worker_network"),
        keep_dirs=config.getoption("conformance_keep_worker_dirs"),
        threads=config.getoption("conformance_worker_threads"),
    )
    state = State(
        config=config,
        selection=_selection(config),
        device=config.getoption("conformance_device"),
        dataset=config.getoption("conformance_dataset"),
        seeds=_parse_seeds(config.getoption("conformance_seeds")),
        gate=config.getoption("conformance_gate"),
        xfail_mark=config.getoption("conformance_xfail_mark"),
        report_dir=Path(report_dir) if report_dir else Path(config.rootpath) / "reports" / "out",
        report_enabled=not config.getoption("conformance_no_report"),
        isolation=config.getoption("conformance_isolation"),
        settings=settings,
        is_xdist_worker=is_worker,
    )
    config.stash[STATE_KEY] = state
    if state.xfail_mark not in ("xfail", "skip"):
        raise pytest.UsageError(f"--xfail-mark / GRU4REC_XFAIL_MARK must be 'xfail' or 'skip', got {state.xfail_mark!r}")
    if state.isolation not in ("auto", "always", "never"):
        raise pytest.UsageError(f"--isolation / GRU4REC_ISOLATION must be auto, always or never, got {state.isolation!r}")
    if state.gate and state.xfail_mark == "skip":
        raise pytest.UsageError("--gate needs strict xfails: do not combine it with --xfail-mark=skip")
    _check_worker_limits(settings)

    if state.selection is None and not _looks_like_conformance_run(config):
        return  # the suite's own tests (pytest tests/): the plugin stays inert
    registry = default_registry()
    config.hook.pytest_conformance_register_adapters(registry=registry)
    state.registry = registry
    if state.selection is None:
        raise pytest.UsageError(_usage(registry, f"conformance checks need an implementation: pass --impl NAME "
                                                 f"(or set {ENV_IMPL})."))  # fmt: skip
    try:
        state.specs = registry.resolve(state.selection)
    except RegistryError as exc:
        raise pytest.UsageError(str(exc)) from None
    if state.device == "cuda":
        _check_cuda()
    if not state.specs:
        raise pytest.UsageError(_usage(registry, f"--impl {','.join(state.selection)} selects no implementation."))
    _check_family_extras(state)
    for spec in state.specs:
        state.handles[(spec.family, spec.name)] = ImplHandle(
            spec, device=state.device, seeds=state.seeds, dataset=state.dataset, isolation=state.isolation,
            settings=settings,
        )  # fmt: skip
    for raw in config.getoption("conformance_xfails"):
        path = Path(raw).resolve()
        try:
            xf = load_xfail_file(path)
        except XfailRegistryError as exc:
            raise pytest.UsageError(str(exc)) from None
        except OSError as exc:
            raise pytest.UsageError(f"--xfails {raw}: {exc}") from None
        state.extra_xfail_files[xf.implementation] = path
    _prepare_resume(state, config.getoption("conformance_resume"))
    if not is_worker:
        state.recorder = Recorder(
            writer_for=lambda name, family=None: _writer_for(state, name, family) if state.report_enabled else None,
            versions=lambda name, family=None: _versions(state, name, family),
            impl_of_nodeid=lambda nodeid: impl_from_nodeid(nodeid, [s.name for s in state.specs]),
        )
        config.pluginmanager.register(_Reporter(state), f"conformance-reporter-{id(config)}")
        if threading.current_thread() is threading.main_thread():
            # CI systems stop jobs with SIGTERM: turn it into KeyboardInterrupt so the report is finalised.
            state.old_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)


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


def _check_cuda() -> None:
    """--device cuda needs a usable CUDA device for the suite's own torch (the reference runs in this process);
    without it every check would fail deep inside torch. Not checked when torch is not installed here."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return
    import torch

    if not torch.cuda.is_available():
        raise pytest.UsageError(f"--device cuda: no usable CUDA device here (torch {torch.__version__}: "
                                "torch.cuda.is_available() is False); run with --device cpu")  # fmt: skip


def _sigterm_to_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_unconfigure(config: Any) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return
    for handle in list(state.handles.values()) + list(state.reference_handles.values()):
        handle.close()
    if state.old_sigterm is not None:
        signal.signal(signal.SIGTERM, state.old_sigterm)
        state.old_sigterm = None
    for writer in state.writers.values():
        if writer is not None:
            writer.close()
    reporter = config.pluginmanager.get_plugin(f"conformance-reporter-{id(config)}")
    if reporter is not None:
        config.pluginmanager.unregister(reporter)


def _prepare_resume(state: State, run_dirs: list[str]) -> None:
    from gru4rec_conformance.reports.results import RunDirError, load_run

    for raw in run_dirs:
        path = Path(raw).resolve()
        try:
            run = load_run(path)
        except (RunDirError, OSError) as exc:
            raise pytest.UsageError(f"--resume {raw}: {exc}") from None
        name, family = run.impl.get("name"), run.impl.get("family")
        if (family, name) not in state.handles:
            raise pytest.UsageError(
                f"--resume {raw}: that run is of implementation {name!r} ({family}), which is not selected by --impl"
            )
        state.resume[(family, name)] = ResumeInfo(path, name, family, run.verdict_keys())


# ---------------------------------------------------------------------------------------------------------
# report header and collection
# ---------------------------------------------------------------------------------------------------------
def pytest_report_header(config: Any) -> list[str] | None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.handles:
        return None
    suite = suite_version()
    lines = [f"conformance suite {suite['string']} · device {state.device} · seeds {','.join(map(str, state.seeds))}"
             f" · dataset {state.dataset or '(checks default)'}"]  # fmt: skip
    lines.append("frameworks: " + ", ".join(f"{k} {v}" for k, v in framework_versions().items()))
    for handle in state.handles.values():
        d = handle.describe()
        caps = d.capabilities
        framework = " ".join((caps.framework or {}).values()) if caps else "?"
        lines.append(f"implementation {handle.name} [{handle.family}, {handle.spec.role}] version {d.version} "
                     f"({framework}); {d.isolation}")  # fmt: skip
        if d.unavailable:
            lines.append(f"  NOT AVAILABLE (its checks are skipped): {d.unavailable}")
            continue
        if d.error:
            lines.append(f"  ERROR describing the adapter: {d.error}")
            continue
        declared = [f for f, v in caps.features().items() if v] + [f"hook:{h}" for h in sorted(d.hooks)]
        lines.append("  capabilities: " + (", ".join(declared) or "none"))
        if caps.shims:
            lines.append("  shims: " + "; ".join(caps.shims))
    if any(h.uses_worker for h in state.handles.values()):
        lines.append(f"worker network: {network_isolation()[1] if state.settings.network == 'deny' else 'allowed'}")
    env = gru4rec_env()
    lines.append("GRU4REC_* variables: " + (", ".join(f"{k}={v}" for k, v in env.items()) or "none"))
    return lines


def _check_family_extras(state: State) -> None:
    """Raise ``UsageError`` naming the pip extra when a selected implementation's family lacks its modules."""
    for family in sorted({s.family for s in state.specs}):
        fam = get_family(family)
        missing = fam.missing_modules() if fam is not None else []
        if missing:
            names = ", ".join(s.name for s in state.specs if s.family == family)
            extra = f"pip install 'gru4rec-conformance[{fam.extra}]'" if fam and fam.extra else "install them"
            raise pytest.UsageError(f"--impl {names}: the {family} checks need {', '.join(missing)}, which "
                                    f"{'is' if len(missing) == 1 else 'are'} not installed here: {extra}")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Do not collect (or import) ``conformance/<family>/`` when no selected implementation is of that family.

    A family's check modules may import heavy optional packages (the fine-tuner's import transformers), so
    ``--impl torch_gru4rec`` must not even import them. A note in the terminal summary says what was left out.
    """
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.specs or collection_path.parent.name != "conformance":
        return None
    known = set(KNOWN_FAMILY_NAMES) | (set(state.registry.families()) if state.registry else set())
    family = collection_path.name
    if family in known and collection_path.is_dir() and family not in {s.family for s in state.specs}:
        if family not in state.ignored_families:
            state.ignored_families.append(family)
            selected = ", ".join(s.label for s in state.specs)
            state.notes.append(f"{family} checks not collected: no selected implementation of family {family} "
                               f"(selected: {selected})")
        return True
    return None


def _family_of(node: Any, state: State) -> str | None:
    """Family of a check: its ``family`` marker, else the folder ``conformance/<family>/`` it lives in.

    Returns None for tests outside any ``conformance/`` folder (they are not checks; the plugin leaves
    them alone). Raises :class:`HarnessError` for a test under ``conformance/`` outside a family folder.
    """
    marker = node.get_closest_marker("family")
    if marker is not None and marker.args:
        return str(marker.args[0])
    known = set(KNOWN_FAMILY_NAMES) | (set(state.registry.families()) if state.registry else set())
    parts = Path(str(node.path)).parts
    if "conformance" not in parts:
        return None
    after = parts[len(parts) - 1 - parts[::-1].index("conformance") + 1:]
    if after and after[0] in known:
        return after[0]
    raise HarnessError(
        f"{node.nodeid}: cannot tell the family of this check; put it under conformance/<family>/ "
        f"({', '.join(sorted(known))}) or mark it @pytest.mark.family('<name>')"
    )


def pytest_generate_tests(metafunc: Any) -> None:
    if "impl" not in metafunc.fixturenames:
        return
    if any("impl" in _argnames(m) for m in metafunc.definition.iter_markers("parametrize")):
        return  # the test parametrizes its own 'impl' argument
    state = _state(metafunc.config)
    family = _family_of(metafunc.definition, state)
    if family is None:
        return
    if state.selection is None:
        params, ids = [ImplParam(family, None, missing_selection=True)], ["impl-missing"]
    else:
        specs = [s for s in state.specs if s.family == family]
        if specs:
            params, ids = [ImplParam(family, s.name) for s in specs], [s.name for s in specs]
        else:
            params, ids = [ImplParam(family, None)], ["no-impl"]
    metafunc.parametrize("impl", params, ids=ids, indirect=True)


def _argnames(marker: Any) -> list[str]:
    names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
    return [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)


def _impl_param(item: Any) -> ImplParam | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    value = callspec.params.get("impl")
    return value if isinstance(value, ImplParam) else None


def _static_info(item: Any, param: ImplParam, state: State) -> dict[str, Any]:
    """Check id/kind/title and required features of an item (recorded with every report)."""
    problems = []
    marker = item.get_closest_marker("check")
    fam = get_family(param.family)
    check: dict[str, Any] = {"id": None, "kind": None, "title": None, "card": None, "timeout": None}
    if marker is None:
        problems.append("a conformance check needs @pytest.mark.check('<ID>', kind='<kind>')")
    else:
        check["id"] = marker.args[0] if marker.args else marker.kwargs.get("id")
        check["kind"] = marker.kwargs.get("kind")
        check["card"] = marker.kwargs.get("card")
        check["timeout"] = marker.kwargs.get("timeout")
        unknown = sorted(set(marker.kwargs) - {"id", "kind", "card", "timeout"})
        if unknown:
            problems.append(f"@check got unknown argument(s) {unknown}")
        if not check["id"]:
            problems.append("@check needs a check id, e.g. @pytest.mark.check('SR-1', kind='K1')")
        if fam is not None and check["kind"] not in fam.kinds:
            problems.append(f"@check kind {check['kind']!r} is not a kind of family {param.family}: {list(fam.kinds)}")
    doc = getattr(getattr(item, "function", None), "__doc__", None) or ""
    check["title"] = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    features: list[str] = []
    prefixes = dict(fam.marker_prefixes) if fam is not None else {}
    for m in item.iter_markers():
        if m.name == "feature":
            features += [str(a) for a in m.args]
        elif m.name == "hook":
            features += [f"hook:{a}" for a in m.args]
        elif m.name == "hparam":
            features += [f"hparam:{a}" for a in m.args]
        elif m.name in prefixes:
            features += [f"{prefixes[m.name]}:{a}" for a in m.args]
    features = list(dict.fromkeys(features))
    markers = sorted({m.name for m in item.iter_markers()} & {"slow", "gpu", "metric"})
    return {"impl": param.name, "family": param.family, "check": check, "features": features, "markers": markers,
            "problems": problems}  # fmt: skip


class XfailRegistryItem(pytest.Item):
    """A failing item standing for an xfail-registry problem (unmatched entry, entries for the reference)."""

    def __init__(self, *, message: str, impl: str, family: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message
        self.user_properties.append((PROP_INFO, {
            "impl": impl, "family": family, "registry_error": True, "features": [], "markers": [],
            "check": {"id": "XFAIL-REGISTRY", "kind": None, "title": "the xfail registry matches the collected checks",
                      "card": None, "timeout": None},
        }))  # fmt: skip

    def runtest(self) -> None:
        raise XfailRegistryError(self.message)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        return self.message

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"xfail registry: {self.name}"


def _fully_collected_files(config: Any, collected_files: set[str]) -> set[str]:
    """Collected files whose every test was requested (no ``::`` selection), relative to rootdir."""
    root = Path(config.rootpath)
    narrowed = set()
    for arg in config.args:
        if "::" in str(arg):
            path = Path(str(arg).split("::", 1)[0])
            path = (path if path.is_absolute() else Path(config.invocation_params.dir) / path).resolve()
            try:
                narrowed.add(path.relative_to(root).as_posix())
            except ValueError:
                narrowed.add(path.as_posix())
    return {f for f in collected_files if f not in narrowed}


#: The folder that holds the suite's ``conformance/`` package: the checkout root, or ``site-packages/
#: gru4rec_conformance`` for an installed wheel. Check ids and committed xfail files are relative to it.
SUITE_CHECKS_ROOT = Path(__file__).resolve().parents[2]


def _check_roots(config: pytest.Config) -> list[Path]:
    """Where ``conformance/<family>/`` check files and ``conformance/xfails/`` live: the rootdir (a checkout,
    or a project with checks of its own), then the suite's own package folder (an installed wheel)."""
    return list(dict.fromkeys([Path(config.rootpath).resolve(), SUITE_CHECKS_ROOT]))


def check_id(item: pytest.Item) -> str:
    """The item's id as xfail files name it: ``conformance/<family>/<file>.py::<test>[<params>]``.

    Equals the node id in a checkout; for checks collected from an installed wheel (``--pyargs``), whose node
    ids are paths into site-packages, the file part is made relative to :data:`SUITE_CHECKS_ROOT`.
    """
    nodeid = item.nodeid
    path = Path(str(item.path)).resolve()
    for root in _check_roots(item.config):
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            continue
        return rel + nodeid[nodeid.index("::"):] if "::" in nodeid else rel
    return nodeid


def _xfail_file_for(state: State, spec: AdapterSpec) -> Path:
    if spec.name in state.extra_xfail_files:
        return state.extra_xfail_files[spec.name]
    own = getattr(spec.cls, "xfails_file", None)
    if own:
        return Path(own)
    candidates = [default_xfail_path(root, spec.name) for root in _check_roots(state.config)]
    return next((c for c in candidates if c.is_file()), candidates[0])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    state = _state(config)
    by_impl: dict[tuple[str, str], list[Any]] = collections.defaultdict(list)
    deselected: list[Any] = []
    missing_selection = False
    no_impl: collections.Counter = collections.Counter()
    for item in items:
        param = _impl_param(item)
        if param is None:
            continue
        if param.missing_selection:
            missing_selection = True
        elif param.name is None:
            no_impl[param.family] += 1
            deselected.append(item)
        else:
            item.user_properties.append((PROP_INFO, _static_info(item, param, state)))
            by_impl[(param.family, param.name)].append(item)
    if missing_selection:
        registry = state.registry or default_registry()
        raise pytest.UsageError(_usage(registry, f"conformance checks need an implementation: pass --impl NAME "
                                                 f"(or set {ENV_IMPL})."))  # fmt: skip
    selected = ", ".join(s.label for s in state.specs)
    for family, n in sorted(no_impl.items()):
        state.notes.append(f"{n} {family} check(s) deselected: no selected implementation of family {family} "
                           f"(selected: {selected})")  # fmt: skip

    extra_items: list[Any] = []
    collected_files = {check_id(it).split("::", 1)[0] for its in by_impl.values() for it in its}
    full_files = _fully_collected_files(config, collected_files)
    for key, impl_items in by_impl.items():
        handle = state.handles[key]
        extra_items += _apply_xfails(state, session, handle, impl_items, full_files)
        resume = state.resume.get(key)
        if resume is not None:
            current = (handle.version, suite_version()["string"])
            keep = []
            for it in impl_items:
                if resume.verdicts.get(it.nodeid) == current:
                    deselected.append(it)
                    state.reused[handle.name] += 1
                else:
                    keep.append(it)
            if state.reused[handle.name]:
                state.notes.append(f"--resume: {state.reused[handle.name]} {handle.name} check(s) already have a "
                                   f"verdict in {resume.directory}")  # fmt: skip
    if deselected:
        ids = {id(it) for it in deselected}
        items[:] = [it for it in items if id(it) not in ids]
        config.hook.pytest_deselected(items=deselected)
    items[:0] = extra_items


def _apply_xfails(state: State, session: Any, handle: ImplHandle, items: list[Any], full_files: set[str]) -> list[Any]:
    spec = handle.spec
    path = _xfail_file_for(state, spec)
    if not path.is_file():
        if spec.name in state.extra_xfail_files or getattr(spec.cls, "xfails_file", None):
            raise pytest.UsageError(f"xfail file of {spec.name} not found: {path}")
        return []
    try:
        xf = load_xfail_file(path, expected_impl=spec.name)
    except XfailRegistryError as exc:
        raise pytest.UsageError(str(exc)) from None
    errors: list[Any] = []
    roots = _check_roots(state.config)
    rel = path.as_posix()
    for root in roots:
        try:
            rel = path.resolve().relative_to(root).as_posix()
            break
        except ValueError:
            continue

    def error_item(entry_index: int, message: str) -> Any:
        name = f"entry-{entry_index}[{spec.name}]"
        return XfailRegistryItem.from_parent(session, name=name, nodeid=f"{rel}::{name}", path=path,
                                             message=message, impl=spec.name, family=spec.family)  # fmt: skip

    if spec.role == "reference" and xf.entries:
        return [error_item(e.index, f"{rel}: {e.describe()}: the reference must have zero xfail entries "
                                    f"(a reference failure is a bug to fix, not to declare)") for e in xf.entries]  # fmt: skip
    context = when_context(handle.device, handle.version, ("numpy", "pandas", "torch", "tensorflow", "transformers"))
    impl_id = spec.name
    for entry in xf.entries:
        matched = [it for it in items
                   if pattern_matches(entry.pattern, strip_impl_param(check_id(it), impl_id), check_id(it))]
        if not matched:
            file_part = pattern_file_part(entry.pattern)
            on_disk = [(r, f) for r in roots for f in (files_matching(r, file_part) if file_part else [])]
            in_scope = [f for r, f in on_disk if f.relative_to(r).as_posix() in full_files]
            if not on_disk:
                errors.append(error_item(entry.index, f"{rel}: {entry.describe()} names no existing test file "
                                                      f"({file_part!r}); fix or remove the entry"))  # fmt: skip
            elif in_scope:
                errors.append(error_item(entry.index, f"{rel}: {entry.describe()} matches no collected check of "
                                                      f"{spec.name}; fix or remove the entry"))  # fmt: skip
            continue
        if not entry.active(context):
            continue
        reason = f"[{entry.kind}{', ' + entry.defect if entry.defect else ''}] {entry.reason} ({entry.link})"
        for it in matched:
            it.user_properties.append((PROP_XFAIL, {**entry.to_dict(), "file": rel}))
            if state.xfail_mark == "skip":
                it.add_marker(pytest.mark.skip(reason=f"xfail registry: {reason}"))
            else:
                it.add_marker(pytest.mark.xfail(reason=reason, strict=True))
    return errors


# ---------------------------------------------------------------------------------------------------------
# running checks
# ---------------------------------------------------------------------------------------------------------
def _info(item: Any) -> dict[str, Any] | None:
    return next((v for k, v in item.user_properties if k == PROP_INFO), None)


def _mark_unsupported(item: Any) -> None:
    if (PROP_SKIP, "unsupported") not in item.user_properties:
        item.user_properties.append((PROP_SKIP, "unsupported"))


def _handle_adapter_exception(item: Any, handle: ImplHandle | None, exc: BaseException) -> None:
    """Unsupported → skip (undeclared) or failure (declared); worker failures → recorded details."""
    if isinstance(exc, Unsupported) and handle is not None:
        if handle.declares(exc.name):
            item.user_properties.append((PROP_DECLARED, exc.name))
            raise AssertionError(
                f"{handle.name} declares {exc.name!r} but raised Unsupported({exc}): the declaration is not honoured"
            ) from exc
        _mark_unsupported(item)
        raise pytest.skip.Exception(f"{UNSUPPORTED_PREFIX}{handle.name}: {exc}", _use_item_location=True) from None
    if isinstance(exc, WorkerError):
        item.user_properties.append((PROP_WORKER, {"kind": exc.kind, "message": str(exc).split("\n", 1)[0],
                                                   "stderr_tail": exc.stderr_tail}))  # fmt: skip


def _item_handle(item: Any) -> ImplHandle | None:
    param = _impl_param(item)
    if param is None or param.name is None:
        return None
    return _state(item.config).handles.get((param.family, param.name))


def _skip(reason: str) -> None:
    raise pytest.skip.Exception(reason, _use_item_location=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: Any) -> None:
    # A plain (non-wrapper) hook, like pytest's own skip markers, so every wrapper's setup has run.
    handle = _item_handle(item)
    if handle is None:
        return
    info = _info(item) or {}
    if info.get("problems"):
        raise HarnessError(f"{item.nodeid}: " + "; ".join(info["problems"]))
    d = handle.describe()
    if d.unavailable:
        _skip(f"implementation {handle.name}{UNAVAILABLE_MARKER}{d.unavailable}")
    if d.error:
        raise HarnessError(f"{handle.name}: the adapter cannot be described: {d.error}")
    state = _state(item.config)
    if item.get_closest_marker("gpu") is not None and state.device != "cuda":
        _skip("needs a GPU: run with --device cuda")
    missing = handle.unmet(info.get("features", []))
    if missing:
        _mark_unsupported(item)
        _skip(f"{UNSUPPORTED_PREFIX}{handle.name}: needs {', '.join(missing)} (not declared)")
    if state.device not in handle.capabilities.devices:
        _mark_unsupported(item)
        _skip(f"{UNSUPPORTED_PREFIX}{handle.name}: device {state.device!r} is not declared")


@pytest.hookimpl(wrapper=True, specname="pytest_runtest_setup")
def _translate_setup_exceptions(item: Any) -> Any:
    handle = _item_handle(item)
    try:
        return (yield)
    except (Unsupported, WorkerError) as exc:
        _handle_adapter_exception(item, handle, exc)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: Any) -> Any:
    handle = _item_handle(item)
    try:
        return (yield)
    except (Unsupported, WorkerError) as exc:
        _handle_adapter_exception(item, handle, exc)
        raise


# ---------------------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ConformanceOptions:
    """Run options visible to checks (the ``conformance_options`` fixture)."""

    device: str
    dataset: str | None
    seeds: tuple[int, ...]
    gate: bool
    isolation: str


@pytest.fixture(scope="session")
def conformance_options(pytestconfig: Any) -> ConformanceOptions:
    """``--device``, ``--dataset``, ``--seeds``, ``--gate`` and ``--isolation`` of this run."""
    s = _state(pytestconfig)
    return ConformanceOptions(s.device, s.dataset, tuple(s.seeds), s.gate, s.isolation)


def _note(node: Any, name: str, context: dict[str, Any]) -> None:
    """A value-less metric entry of the check (``Impl.note``), recorded once."""
    entry = {"name": name, "value": None, "reference": None, "tolerance": None, "rule": context.pop("rule", None),
             "context": {str(k): (v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
                         for k, v in context.items()}, "within": None}  # fmt: skip
    if (PROP_METRIC, entry) not in node.user_properties:
        node.user_properties.append((PROP_METRIC, entry))


def _impl_view(request: Any, handle: ImplHandle) -> Impl:
    info = _info(request.node) or {}
    check = info.get("check") or {}
    view = Impl(handle, kind=check.get("kind"), timeout=check.get("timeout"),
                on_unsupported=lambda _: _mark_unsupported(request.node),
                on_note=lambda name, context: _note(request.node, name, context))  # fmt: skip
    request.addfinalizer(view.close)
    return view


@pytest.fixture
def impl(request: Any) -> Impl:
    """The implementation under test: a factory of fresh adapters (``impl.build(seed=..., **hparams)``).

    Parametrized by the plugin over the selected implementations of the check's family.
    """
    param = getattr(request, "param", None)
    if not isinstance(param, ImplParam) or param.name is None:
        raise HarnessError("the 'impl' fixture is parametrized by the conformance plugin; select with --impl")
    return _impl_view(request, _state(request.config).handle_for(param))


@pytest.fixture
def reference_impl(request: Any) -> Impl:
    """The reference implementation of the check's family, whatever ``--impl`` selects (in-process unless
    ``--isolation always``). Skips when no reference adapter is registered for the family."""
    state = _state(request.config)
    family = _family_of(request.node, state)
    if family is None:
        raise HarnessError("reference_impl is for conformance checks under conformance/<family>/")
    registry = state.registry or default_registry()
    refs = [s for s in registry.specs(family) if s.role == "reference"]
    if not refs:
        pytest.skip(f"no reference adapter is registered for family {family}")
    handle = state.reference_handles.get(family)
    if handle is None:
        handle = ImplHandle(refs[0], device=state.device, seeds=state.seeds, dataset=state.dataset,
                            isolation="always" if state.isolation == "always" else "never", settings=state.settings)
        state.reference_handles[family] = handle
    return _impl_view(request, handle)


@pytest.fixture
def record_metric(request: Any) -> Any:
    """Record a metric of this check for the report: ``record_metric(name, value, reference=..., tolerance=...,
    rule=..., **context)``.

    ``context`` keys such as ``dataset``, ``loss``, ``cutoff``, ``seed`` are printed; ``dataset`` and ``loss``
    also select the study's published number shown beside ours. Returns the recorded entry, whose
    ``within`` is ``|value - reference| <= tolerance`` (None when either is missing). Values must be finite
    numbers or None; NaN is recorded as None with ``"nan": True``.
    """

    def record(name: str, value: float | None, reference: float | None = None, tolerance: float | None = None,
               rule: str | None = None, **context: Any) -> dict[str, Any]:  # fmt: skip
        def num(x: Any, what: str) -> float | None:
            if x is None:
                return None
            try:
                f = float(x)
            except (TypeError, ValueError):
                raise TypeError(f"record_metric({name!r}): {what} must be a number, got {x!r}") from None
            return f if math.isfinite(f) else None

        entry: dict[str, Any] = {
            "name": str(name),
            "value": num(value, "value"),
            "reference": num(reference, "reference"),
            "tolerance": num(tolerance, "tolerance"),
            "rule": rule,
            "context": {str(k): (v if isinstance(v, (int, float, str, bool)) or v is None else str(v)) for k, v in context.items()},
        }
        if value is not None and entry["value"] is None:
            entry["nan"] = True
        v, r, t = entry["value"], entry["reference"], entry["tolerance"]
        entry["within"] = None if v is None or r is None or t is None else abs(v - r) <= t
        request.node.user_properties.append((PROP_METRIC, entry))
        return entry

    return record


# ---------------------------------------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------------------------------------
def _handle_of(state: State, name: str, family: str | None) -> ImplHandle | None:
    """The selected implementation ``name`` of ``family`` (any family when None or not selected)."""
    handle = state.handles.get((family, name)) if family else None
    return handle or next((h for (f, n), h in state.handles.items() if n == name), None)


def _versions(state: State, name: str, family: str | None = None) -> tuple[str, str]:
    handle = _handle_of(state, name, family)
    return (handle.version if handle else "unknown", suite_version()["string"])


def _run_header(state: State, handle: ImplHandle) -> dict[str, Any]:
    from gru4rec_conformance.reports.writer import utc_now

    d = handle.describe()
    spec = handle.spec
    fam = get_family(spec.family)
    features: dict[str, bool] = {}
    if d.capabilities is not None:
        features.update(d.capabilities.features())
    features.update({f"hook:{h}": h in d.hooks for h in spec.cls.HOOKS})
    xf_path = _xfail_file_for(state, spec)
    entries: list[dict[str, Any]] = []
    if xf_path.is_file():
        try:
            entries = [e.to_dict() for e in load_xfail_file(xf_path, expected_impl=spec.name).entries]
        except XfailRegistryError:
            entries = []
    workers = getattr(state.config.option, "numprocesses", None)
    return {
        "impl": {
            "name": spec.name, "family": spec.family, "role": spec.role, "version": d.version, "source": spec.source,
            "ref": spec.ref, "isolated": handle.uses_worker, "isolation": d.isolation, "description": spec.cls.description,
            "homepage": spec.cls.homepage, "study": dict(spec.cls.study) if spec.cls.study else None,
            "reproducibility": dict(spec.cls.reproducibility), "init_kwargs": dict(spec.init_kwargs),
            "capabilities": d.capabilities.to_dict() if d.capabilities else None, "features": features,
            "hooks": sorted(d.hooks), "error": d.error, "unavailable": d.unavailable,
        },
        "suite": suite_version(),
        "frameworks": framework_versions(),
        "platform": platform_info(),
        "device": state.device,
        "dataset": state.dataset,
        "seeds": state.seeds,
        "env": gru4rec_env(),
        "command": ["pytest", *state.config.invocation_params.args],
        "started": utc_now(),
        "kinds": dict(fam.kinds) if fam else {},
        "xdist_workers": workers,
        "gate": state.gate,
        "options": {"isolation": state.isolation, "xfail_mark": state.xfail_mark,
                    "call_timeout": state.settings.call_timeout, "worker_network": state.settings.network},
        "xfail": {"file": str(xf_path) if xf_path.is_file() else None, "entries": entries},
    }  # fmt: skip


def _writer_for(state: State, name: str, family: str | None = None) -> Any:
    """The run writer of one selected implementation, keyed by (family, name): ``--impl reference`` selects
    the reference of every family, and each gets its own run directory."""
    from gru4rec_conformance.reports.writer import RunWriter, utc_now

    handle = _handle_of(state, name, family)
    if handle is None:
        state.writers[(family, name)] = None
        return None
    key = (handle.family, handle.name)
    if key in state.writers:
        return state.writers[key]
    resume = state.resume.get((handle.family, handle.name))
    if resume is not None:
        writer = RunWriter.resume(resume.directory, {"started": utc_now(), "reused": None,
                                                     "suite": suite_version()["string"], "impl_version": handle.version,
                                                     "command": ["pytest", *state.config.invocation_params.args]})  # fmt: skip
    else:
        writer = RunWriter.create(state.report_dir, name, _run_header(state, handle))
    state.writers[key] = writer
    return writer


class _Reporter:
    """Per-session plugin object of the controller (or of a plain run): receives every check's reports,
    including those xdist forwards from its workers, and the workers' notes."""

    def __init__(self, state: State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: Any) -> None:
        if self.state.recorder is not None:
            self.state.recorder.on_report(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: Any) -> None:
        if self.state.report_enabled:
            for family, name in self.state.resume:
                _writer_for(self.state, name, family)  # a resumed run gets its resume record even if nothing runs

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        for note in output.get("conformance_notes", []):
            if note not in self.state.notes:
                self.state.notes.append(note)
        for name, n in output.get("conformance_reused", {}).items():
            self.state.reused[name] = max(self.state.reused[name], n)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    state = session.config.stash.get(STATE_KEY, None)
    if state is None:
        return
    if state.is_xdist_worker:
        session.config.workeroutput["conformance_notes"] = list(state.notes)
        session.config.workeroutput["conformance_reused"] = dict(state.reused)
        return
    if not state.handles:
        return
    interrupted = int(exitstatus) == int(pytest.ExitCode.INTERRUPTED)
    records = state.recorder.records if state.recorder is not None else []
    gate = _gate(state, records, int(exitstatus), interrupted)
    state.gate_result = gate
    if state.gate and not gate["passed"] and int(exitstatus) == int(pytest.ExitCode.OK):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    status = "interrupted" if interrupted else "complete"
    for (_family, name), writer in list(state.writers.items()):
        if writer is None:
            continue
        try:
            # "reused" is known only after collection (on xdist: when the workers are down), after the
            # resume record was written at session start: the end record carries it (reports.results.load_run)
            writer.finish(status, int(session.exitstatus), {"gate": gate if state.gate else None,
                                                            "reused": state.reused.get(name, 0)},
                          plots=not state.config.getoption("conformance_no_plots"))
        except Exception as exc:  # the run's verdicts are in results.jsonl; say why the summary is missing
            state.notes.append(f"report of {name}: summaries not written ({type(exc).__name__}: {exc}); "
                               f"run: python -m gru4rec_conformance.reports render {writer.directory}")  # fmt: skip


def _gate(state: State, records: list[dict[str, Any]], exitstatus: int, interrupted: bool) -> dict[str, Any]:
    problems = []
    per_impl = collections.Counter(r["impl"] for r in records)
    for (family, name), handle in state.handles.items():
        if per_impl.get(name, 0) + state.reused.get(name, 0) == 0:
            problems.append(f"no check ran for {name} [{family}]")
        if handle.describe().error:
            problems.append(f"{name}: adapter cannot be described")
        if handle.describe().unavailable:
            problems.append(f"{name}: implementation not available ({handle.describe().unavailable})")
    bad = [r for r in records if r["outcome"] in ("failed", "error", "xpass")]
    if bad:
        c = collections.Counter(r["outcome"] for r in bad)
        problems.append("; ".join(f"{n} {o}" for o, n in sorted(c.items())) + " (not covered by declared xfails)")
    if interrupted:
        problems.append("the run was interrupted")
    if exitstatus not in (0, 1) and not interrupted:
        problems.append(f"pytest exit status {exitstatus}")
    return {"passed": not problems, "problems": problems}


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or state.is_xdist_worker or not state.handles:
        return
    tr = terminalreporter
    lines = list(state.notes)
    # an implementation that is not installed/located skips every check: say so here, not only under -rs
    records = state.recorder.records if state.recorder is not None else []
    for name in sorted({r["impl"] for r in records}):
        mine = [r for r in records if r["impl"] == name]
        whys = [w for r in mine if r["outcome"] == "skipped" and (w := unavailable_why(str(r.get("reason") or "")))]
        if whys:
            lines.append(f"UNAVAILABLE {name}: {len(whys)} of {len(mine)} checks skipped: {whys[0]}")
    multi = len({n for _f, n in state.writers}) < len(state.writers)
    for (family, name), writer in state.writers.items():
        if writer is not None:
            label = f"{name} ({family})" if multi else name
            lines.append(f"report of {label}: {writer.directory}/summary.html")
    if state.gate and state.gate_result is not None:
        g = state.gate_result
        lines.append("GATE PASSED" if g["passed"] else "GATE FAILED: " + "; ".join(g["problems"]))
    if lines:
        tr.write_sep("-", "conformance")
        for line in lines:
            tr.write_line(line)
