"""Recording and reports: the report header, the run directories (through ``reports.writer``), the terminal
summary, and ``--resume``.

In the controller (or a plain run), :func:`start_recording` registers a per-session :class:`Reporter` that
feeds every check's reports, also those xdist forwards from its workers, to a :class:`~.recording.Recorder`;
the recorder appends one :class:`~.records.ResultRecord` per check to the implementation's results.jsonl
(:func:`writer_for` makes the run directory on first use). :func:`pytest_sessionfinish` evaluates ``--gate``
(:mod:`.gate`) and writes results.json and the summaries; :func:`pytest_terminal_summary` prints the
"conformance" section.

The harness sits above the reports (it writes and reads run directories through ``reports.writer`` and
``reports.results``); the reports import only the records layer below both, ``conformance._records``
(docs/architecture.md, "Import layers").
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gru4rec_conformance.conformance._harness import gate
from gru4rec_conformance.conformance._harness.collection import xfail_file_for
from gru4rec_conformance.conformance._harness.handle import ImplHandle, adapter_class
from gru4rec_conformance.conformance._harness.isolation import network_isolation, sandbox_for
from gru4rec_conformance.conformance._harness.recording import Recorder, RunSink, impl_from_nodeid
from gru4rec_conformance.conformance._harness.refresh import header_mismatch, reused_record
from gru4rec_conformance.conformance._harness.state import ResumeInfo, State, find_state
from gru4rec_conformance.conformance._records.records import (
    BAD_OUTCOMES,
    EndExtra,
    ImplHeader,
    Nondeterminism,
    NotRunEntry,
    ResultRecord,
    ResumeRecord,
    RunHeader,
    XfailFileInfo,
    nondeterminism,
    record_unavailable,
    utc_now,
)
from gru4rec_conformance.conformance._records.runinfo import (
    framework_versions,
    gru4rec_env,
    platform_info,
    suite_version,
)
from gru4rec_conformance.conformance._records.verdict import (
    NOT_REACHED,
    NOT_SELECTED,
    UNAVAILABLE,
    assess,
    rerun_command,
)
from gru4rec_conformance.conformance._records.xfails import XfailRegistryError, load_xfail_file
from gru4rec_conformance.implementations.base import get_family
from gru4rec_conformance.reports.results import RunDirError, load_run
from gru4rec_conformance.reports.writer import RunWriter


# ---------------------------------------------------------------------------------------------------------
# report header (terminal)
# ---------------------------------------------------------------------------------------------------------
def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = find_state(config)
    if state is None or not state.handles:
        return None
    o = state.options
    suite = suite_version()
    lines = [f"conformance suite {suite['string']} · device {o.device} · seeds {','.join(map(str, o.seeds))}"
             f" · dataset {o.dataset or '(checks default)'}"]  # fmt: skip
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
        if d.error or caps is None:
            lines.append(f"  ERROR describing the adapter: {d.error}")
            continue
        declared = [f for f, v in caps.features().items() if v] + [f"hook:{h}" for h in sorted(d.hooks)]
        lines.append("  capabilities: " + (", ".join(declared) or "none"))
        if caps.shims:
            lines.append("  shims: " + "; ".join(caps.shims))
    if any(h.uses_worker for h in state.handles.values()):
        lines.append(f"sandbox: {sandbox_text(state)}")
        sandboxed = sandbox_for(o.settings.sandbox).available
        net = "isolated: own network namespace (bwrap)" if sandboxed else network_isolation()[1]
        lines.append(f"worker network: {net if o.settings.network == 'deny' else 'allowed'}")
    for (_family, name), info in state.xfail_infos.items():
        if info is not None:
            lines.append(f"xfail file of {name}: {describe_xfail_file(info)}")
    env = gru4rec_env()
    lines.append("GRU4REC_* variables: " + (", ".join(f"{k}={v}" for k, v in env.items()) or "none"))
    return lines


def describe_xfail_file(info: XfailFileInfo) -> str:
    """``<path> (sha256 <12 hex>, git <state>[, RECORD <state>][, --xfails])`` for headers and notes."""
    parts = [f"sha256 {info['sha256'][:12]}", f"git {info['git']}"]
    if info.get("package"):
        parts.append(f"installed RECORD {info['package']}")
    if info["explicit"]:
        parts.append("named with --xfails")
    return f"{info['path']} ({', '.join(parts)})"


def xfail_files_of(state: State, handle: ImplHandle) -> list[XfailFileInfo]:
    """The xfail files the run uses for ``handle`` (zero or one), as hashed when the session started."""
    info = state.xfail_infos.get((handle.family, handle.name))
    return [info] if info is not None else []


# ---------------------------------------------------------------------------------------------------------
# run directories
# ---------------------------------------------------------------------------------------------------------
def prepare_resume(state: State) -> None:
    """Read every ``--resume`` run directory into ``state.resume``. Raises ``pytest.UsageError`` for one that
    cannot be read or is of an implementation ``--impl`` does not select."""
    for raw in state.options.resume:
        path = Path(raw).resolve()
        try:
            run = load_run(path)
        except (RunDirError, OSError) as exc:
            raise pytest.UsageError(f"--resume {raw}: {exc}") from None
        name, family = run.impl.get("name"), run.impl.get("family")
        if not isinstance(name, str) or not isinstance(family, str) or (family, name) not in state.handles:
            raise pytest.UsageError(
                f"--resume {raw}: that run is of implementation {name!r} ({family}), which is not selected by --impl"
            )
        state.resume[(family, name)] = ResumeInfo(path, name, family, run.verdict_keys())


def handle_of(state: State, name: str, family: str | None) -> ImplHandle | None:
    """The selected implementation ``name`` of ``family`` (any family when None or not selected)."""
    handle = state.handles.get((family, name)) if family else None
    return handle or next((h for (f, n), h in state.handles.items() if n == name), None)


def versions(state: State, name: str, family: str | None = None) -> tuple[str, str]:
    """``(impl_version, suite_version)`` stamped on a result of implementation ``name``."""
    handle = handle_of(state, name, family)
    return (handle.version if handle else "unknown", suite_version()["string"])


def sandbox_text(state: State, handle: ImplHandle | None = None) -> str:
    """What confines the worker processes: ``bubblewrap 0.8.0 (pid, ipc, net, ... namespaces; ...)`` or
    ``none (why)``; for an in-process ``handle``, ``none (in-process adapter)``."""
    if handle is not None and not handle.uses_worker:
        return "none (in-process adapter: runs in the suite's own process)"
    o = state.options
    return sandbox_for(o.settings.sandbox).describe(network=o.settings.network == "allow")


def run_header(state: State, handle: ImplHandle) -> RunHeader:
    """The first record of a new run directory: implementation, declaration, versions, platform, options."""
    d = handle.describe()
    spec = handle.spec
    cls = adapter_class(spec)
    fam = get_family(spec.family)
    features: dict[str, bool] = {}
    if d.capabilities is not None:
        features.update(d.capabilities.features())
    features.update({f"hook:{h}": h in d.hooks for h in cls.HOOKS})
    xf_path = xfail_file_for(state, spec)
    entries: list[dict[str, object]] = []
    if xf_path.is_file():
        try:
            entries = [e.to_dict() for e in load_xfail_file(xf_path, expected_impl=spec.name).entries]
        except XfailRegistryError:
            entries = []
    workers = getattr(state.config.option, "numprocesses", None)
    o = state.options
    impl: ImplHeader = {
        "name": spec.name, "family": spec.family, "role": spec.role, "version": d.version, "source": spec.source,
        "ref": spec.ref, "isolated": handle.uses_worker, "isolation": d.isolation, "description": cls.description,
        "homepage": cls.homepage, "study": dict(cls.study) if cls.study else None,
        "reproducibility": dict(cls.reproducibility), "init_kwargs": dict(spec.init_kwargs),
        "capabilities": d.capabilities.to_dict() if d.capabilities else None, "features": features,
        "hooks": sorted(d.hooks), "error": d.error, "unavailable": d.unavailable,
        "hooks_absent": {h: str(why) for h, why in sorted(getattr(cls, "HOOKS_ABSENT", {}).items())
                         if h not in d.hooks},
    }  # fmt: skip
    header: RunHeader = {
        "impl": impl,
        "suite": suite_version(),
        "frameworks": framework_versions(),
        "platform": platform_info(),
        "device": o.device,
        "dataset": o.dataset,
        "seeds": o.seeds,
        "env": gru4rec_env(),
        "command": ["pytest", *state.config.invocation_params.args],
        "started": utc_now(),
        "kinds": dict(fam.kinds) if fam else {},
        "xdist_workers": workers,
        "gate": o.gate,
        "options": {"isolation": o.isolation, "xfail_mark": o.xfail_mark,
                    "call_timeout": o.settings.call_timeout, "worker_network": o.settings.network,
                    "profile": o.profile},
        "xfail": {"file": str(xf_path) if xf_path.is_file() else None, "entries": entries},
        "xfail_files": xfail_files_of(state, handle),
        "sandbox": sandbox_text(state, handle),
    }  # fmt: skip
    refresh = state.refresh.get((spec.family, spec.name))
    if refresh is not None:
        header["refresh"] = {"run_id": refresh.run_id, "directory": str(refresh.directory)}
    return header


def writer_for(state: State, name: str, family: str | None = None) -> RunSink | None:
    """The run writer of one selected implementation, keyed by (family, name): ``--impl reference`` selects
    the reference of every family, and each gets its own run directory."""
    handle = handle_of(state, name, family)
    if handle is None:
        state.writers[(family, name)] = None
        return None
    key = (handle.family, handle.name)
    if key in state.writers:
        return state.writers[key]
    resume = state.resume.get((handle.family, handle.name))
    if resume is not None:
        record: ResumeRecord = {"started": utc_now(), "reused": None, "suite": suite_version()["string"],
                                "impl_version": handle.version,
                                "command": ["pytest", *state.config.invocation_params.args],
                                "xfail_files": xfail_files_of(state, handle)}  # fmt: skip
        writer = RunWriter.resume(resume.directory, record)
        if writer.truncated:
            t = writer.truncated
            state.notes.append(f"--resume: {writer.path} ended with a torn line {t['line']} ({t['bytes']} bytes, a "
                               "record cut off when the run was killed): removed before appending")  # fmt: skip
    else:
        writer = RunWriter.create(state.options.report_dir, name, run_header(state, handle))
    state.writers[key] = writer
    return writer


class Reporter:
    """Per-session plugin object of the controller (or of a plain run): receives every check's reports,
    including those xdist forwards from its workers, and the workers' notes."""

    def __init__(self, state: State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.state.recorder is not None:
            self.state.recorder.on_report(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.state.options.report_enabled:
            for family, name in self.state.resume:
                writer_for(self.state, name, family)  # a resumed run gets its resume record even if nothing runs

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object) -> None:
        # node: xdist's WorkerController; workeroutput is what the worker's pytest_sessionfinish left
        output = getattr(node, "workeroutput", None) or {}
        for note in output.get("conformance_notes", []):
            if note not in self.state.notes:
                self.state.notes.append(note)
        for name, n in output.get("conformance_reused", {}).items():
            self.state.reused[name] = max(self.state.reused[name], n)
        for family, name, nodeid, entry in output.get("conformance_planned", []):
            self.state.planned.setdefault((family, name), {})[nodeid] = entry
        self.state.deselected.update(output.get("conformance_deselected", []))
        for family, name, nodeid in output.get("conformance_refreshed", []):
            taken = self.state.refreshed.setdefault((family, name), [])
            if nodeid not in taken:
                taken.append(nodeid)
        write_taken_over(self.state)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        write_taken_over(self.state)  # without xdist the controller collected: write them before any check runs

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        # outermost wrapper: these lines come after pytest's own summary line, as the last lines of the output
        result = yield
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            for line in final_lines(self.state):
                tr.write_line(line)
        return result


def write_taken_over(state: State) -> None:
    """Controller side: record the earlier results ``--refresh`` took over (each once, marked ``reused_from``)."""
    if state.recorder is None:
        return
    for key, nodeids in state.refreshed.items():
        info = state.refresh[key]
        for nodeid in nodeids:
            if (key, nodeid) not in state.refresh_written:
                state.refresh_written.add((key, nodeid))
                state.recorder.reuse(reused_record(info.results[nodeid], info))


def check_refresh_headers(state: State) -> None:
    """Raise ``pytest.UsageError`` when a ``--refresh`` run differs from this one in what decides a check's
    result (nothing of it could be reused: :func:`.refresh.header_mismatch`)."""
    for key, info in state.refresh.items():
        diff = header_mismatch(info.header, dict(run_header(state, state.handles[key])))
        if diff:
            raise pytest.UsageError(f"--refresh {info.directory}: that run differs from this one in {', '.join(diff)}; "
                                    "its results cannot stand for this run's (run without --refresh)")  # fmt: skip


def _reporter_name(config: pytest.Config) -> str:
    return f"conformance-reporter-{id(config)}"


def start_recording(state: State) -> None:
    """Controller side: make the recorder and register the :class:`Reporter` that feeds it."""

    def sink(name: str, family: str | None) -> RunSink | None:
        return writer_for(state, name, family) if state.options.report_enabled else None

    state.recorder = Recorder(
        writer_for=sink,
        versions=lambda name, family: versions(state, name, family),
        impl_of_nodeid=lambda nodeid: impl_from_nodeid(nodeid, [s.name for s in state.specs]),
    )
    state.config.pluginmanager.register(Reporter(state), _reporter_name(state.config))


def stop_recording(state: State) -> None:
    """Close the run writers (a killed session's results.jsonl stays readable) and unregister the reporter."""
    for writer in state.writers.values():
        if writer is not None:
            writer.close()
    reporter = state.config.pluginmanager.get_plugin(_reporter_name(state.config))
    if reporter is not None:
        state.config.pluginmanager.unregister(reporter)


# ---------------------------------------------------------------------------------------------------------
# end of session
# ---------------------------------------------------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    state = find_state(session.config)
    if state is None:
        return
    if state.options.is_xdist_worker:
        output: dict[str, object] = getattr(session.config, "workeroutput", {})  # xdist's; read in testnodedown
        output["conformance_notes"] = list(state.notes)
        output["conformance_reused"] = dict(state.reused)
        output["conformance_planned"] = [[f, n, nodeid, e] for (f, n), plan in state.planned.items()
                                         for nodeid, e in plan.items()]  # fmt: skip
        output["conformance_deselected"] = sorted(state.deselected)
        output["conformance_refreshed"] = [[f, n, nodeid] for (f, n), ids in state.refreshed.items() for nodeid in ids]
        return
    if not state.handles:
        return
    if int(exitstatus) == int(pytest.ExitCode.NO_TESTS_COLLECTED) and any(state.refreshed.values()):
        # --refresh took every check over: nothing was left to run, and the run is complete
        session.exitstatus = exitstatus = pytest.ExitCode.OK
    interrupted = int(exitstatus) == int(pytest.ExitCode.INTERRUPTED)
    records = state.recorder.records if state.recorder is not None else []
    result = gate.apply(session, state, records, int(exitstatus), interrupted)
    _fail_on_explicit_unavailable(session, state)
    status = "interrupted" if interrupted else "complete"
    for (family, name), handle in state.handles.items():
        writer = state.writers.get((family, name))
        mine = [r for r in records if r["impl"] == name and r.get("family") in (family, None)]
        if writer is None and not mine and not state.planned.get((family, name)) and not handle.describe().unavailable:
            continue  # no check of its family was collected (the note says so): no status to give
        # the gate is kept (and shown) with --gate, or when xfail entries apply: then "declared" means something
        shown = state.options.gate or any(r.get("xfail") for r in mine)
        extra: EndExtra = {"gate": result if shown else None, "reused": state.reused.get(name, 0),
                           "not_run": not_run(state, (family, name), mine)}  # fmt: skip
        if writer is not None:
            extra["nondeterminism"] = nondet = _nondeterminism(writer.directory)
            if nondet is not None:
                state.notes.append(nondeterminism_line(name, nondet))
        conformance = None
        if writer is not None:
            try:
                # "reused" is known only after collection (on xdist: when the workers are down), after the
                # resume record was written at session start: the end record carries it (reports.results.load_run)
                run = writer.finish(status, int(session.exitstatus), extra, plots=state.options.plots)
                conformance = assess(run.header, run.results, run.end)
            except Exception as exc:  # the run's verdicts are in results.jsonl; say why the summary is missing
                state.notes.append(f"report of {name}: summaries not written ({type(exc).__name__}: {exc}); "
                                   f"run: python -m gru4rec_conformance.reports render {writer.directory}")  # fmt: skip
                # a run whose report is missing or stale must not look like a success (nor like a plain failure)
                if int(session.exitstatus) in (int(pytest.ExitCode.OK), int(pytest.ExitCode.TESTS_FAILED)):
                    session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        if conformance is None:  # no report (--no-report, nothing recorded) or it failed: from this session
            end = {"type": "end", "status": status, "exitstatus": int(session.exitstatus), **extra}
            conformance = assess(dict(run_header(state, handle)), [dict(r) for r in mine], end)
        state.conformance[(family, name)] = conformance
    _junit_properties(state)


def _nondeterminism(directory: Path) -> Nondeterminism | None:
    """:func:`~.records.nondeterminism` over every verdict of a run directory (earlier sessions of a resumed run
    included); None when it cannot be read (finish then says why)."""
    try:
        return nondeterminism(load_run(directory).results)
    except (RunDirError, OSError):
        return None


def nondeterminism_line(name: str, nd: Nondeterminism) -> str:
    """The terminal summary's warning for a failed determinism check of implementation ``name``."""
    xf = nd["xfails_may_flap"]
    return (f"NON-DETERMINISTIC {name}: determinism check {nd['check']} failed, so its strict xfails cannot be "
            f"trusted; {len(nd['may_flap'])} check verdict(s) may flap between runs"
            + (f", among them the xfail/xpass verdicts of {', '.join(xf)}" if xf else ""))  # fmt: skip


def not_run(state: State, key: tuple[str, str], records: Sequence[ResultRecord]) -> dict[str, NotRunEntry]:
    """The checks collected for implementation ``key`` that gave no result this session: deselected by ``-k`` /
    ``-m`` / ``--deselect`` (``not selected``), or never reached (``not reached``: an interrupt, ``-x``)."""
    done = {r["nodeid"] for r in records}
    out: dict[str, NotRunEntry] = {}
    for nodeid, entry in state.planned.get(key, {}).items():
        if nodeid not in done:
            out[nodeid] = {**entry, "reason": NOT_SELECTED if nodeid in state.deselected else NOT_REACHED}
    return out


def _fail_on_explicit_unavailable(session: pytest.Session, state: State) -> None:
    """An implementation named by ``--impl`` (not only through ``all``) that is unavailable here fails the run:
    exit status 1 (``TESTS_FAILED``, as ``--gate`` fails it), so that CI never reads "N skipped" as success."""
    names = [h.name for key, h in state.handles.items() if key in state.explicit and h.describe().unavailable]
    if not names:
        return
    state.notes.append(f"--impl {', '.join(names)}: not available here; an implementation named with --impl must "
                       "be available, so the run fails (exit status 1); --impl all only lists unavailable ones")  # fmt: skip
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _label(state: State, family: str, name: str) -> tuple[str, str | None]:
    """``(name, family)`` for the conformance line: the family only when two selected ones share the name."""
    multi = sum(1 for f, n in state.conformance if n == name) > 1
    return name, (family if multi else None)


def _junit_properties(state: State) -> None:
    """The conformance status (and the gate) as JSON-valued testsuite properties of ``--junitxml``'s file."""
    xml = _junit_xml(state.config)
    if xml is None:
        return
    for (family, name), c in state.conformance.items():
        data: dict[str, Any] = {"impl": name, "family": family, "line": c.line(*_label(state, family, name)),
                                **c.to_json()}  # fmt: skip
        xml.add_global_property(f"conformance:{family}:{name}", json.dumps(data, default=str))
    if state.gate_result is not None and _show_gate(state):
        xml.add_global_property("conformance:gate", json.dumps(dict(state.gate_result)))


def _junit_xml(config: pytest.Config) -> Any:
    """pytest's ``LogXML`` of ``--junitxml`` (None without it)."""
    from _pytest.junitxml import xml_key  # pytest's own key; there is no public accessor

    return config.stash.get(xml_key, None)


def _show_gate(state: State) -> bool:
    """The gate is shown when ``--gate`` is given or xfail entries apply to a check of the run."""
    records = state.recorder.records if state.recorder is not None else []
    return state.options.gate or any(r.get("xfail") for r in records)


def final_lines(state: State) -> list[str]:
    """The last lines of the terminal output: the gate (when shown) and one conformance line per implementation."""
    if state.options.is_xdist_worker or not state.handles:
        return []
    lines = []
    if state.gate_result is not None and _show_gate(state):
        lines.append(gate.summary_line(state.gate_result))
    records = state.recorder.records if state.recorder is not None else []
    for (family, name), c in state.conformance.items():
        line = c.line(*_label(state, family, name))
        if c.status == UNAVAILABLE and (family, name) not in state.explicit:
            line += " (selected by --impl all: not counted as a failure)"
        lines.append(line)
        lines += [f"  {text}" for text in c.root_cause_lines()]  # failures grouped under a failed prerequisite
        standins = standin_datasets([r for r in records if r["impl"] == name and r.get("family") in (family, None)])
        if standins:  # the notice scrolled away long ago: the verdict's last word says what data it stands on
            lines.append(f"  data: synthetic stand-ins ({', '.join(standins)}), not the real data (set "
                         "GRU4REC_SHARED_DATA); metrics not comparable with the study's")  # fmt: skip
    return lines + state.draft_lines  # --first-run: where the draft xfail files are


def standin_datasets(records: Sequence[ResultRecord]) -> list[str]:
    """The synthetic stand-in datasets (names containing ``standin``, e.g. ``yoochoose_100k_standin``) that the
    checks of ``records`` recorded in their metric contexts, in first-seen order; [] when all data were real."""
    names = (str((m.get("context") or {}).get("dataset") or "") for r in records for m in r.get("metrics") or [])
    return [n for n in dict.fromkeys(names) if "standin" in n]


def failure_lines(state: State, records: Sequence[ResultRecord]) -> list[str]:
    """One line per failed, errored or xpassed check, ending with the command that reruns just that check
    (:func:`~.verdict.rerun_command`, from this session's own ``--impl`` and options). pytest's short summary
    cuts its lines to the terminal's width, so the commands are here, whole."""
    command = ["pytest", *state.config.invocation_params.args]
    out = []
    for r in records:
        if r["outcome"] not in BAD_OUTCOMES:
            continue
        check = r.get("check")
        cid = (check.get("id") if check else None) or "?"
        reason = (str(r.get("reason") or "").strip().splitlines() or [""])[0][:160]
        out.append(f"{r['outcome'].upper()} {cid} {r['nodeid']}: {reason} — rerun: "
                   + rerun_command(command, r["nodeid"], r["impl"]))  # fmt: skip
    return out


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int | pytest.ExitCode,
                            config: pytest.Config) -> None:  # fmt: skip
    state = find_state(config)
    if state is None or state.options.is_xdist_worker or not state.handles:
        return
    tr = terminalreporter
    lines = list(state.notes)
    # an implementation that is not installed/located skips every check: say so here, not only under -rs
    records = state.recorder.records if state.recorder is not None else []
    for name in sorted({r["impl"] for r in records}):
        mine = [r for r in records if r["impl"] == name]
        whys = [w for r in mine if (w := record_unavailable(r))]
        if whys:
            lines.append(f"UNAVAILABLE {name}: {len(whys)} of {len(mine)} checks skipped: {whys[0]}")
    lines += failure_lines(state, records)
    multi = len({n for _f, n in state.writers}) < len(state.writers)
    for (family, name), writer in state.writers.items():
        if writer is not None:
            label = f"{name} ({family})" if multi else name
            lines.append(f"report of {label}: {writer.directory}/summary.html")
    if lines:
        tr.write_sep("-", "conformance")
        for line in lines:
            tr.write_line(line)
