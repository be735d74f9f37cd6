"""The session's lifecycle: :func:`pytest_configure` builds the :class:`~.state.State` (options, registry,
handles of the selected implementations, ``--xfails`` files, ``--resume`` runs, the recorder) and
:func:`pytest_unconfigure` releases it (adapters, worker processes, run writers, the SIGTERM handler).

Without ``--impl`` and without a ``conformance/`` path on the command line (the suite's own tests) the plugin
stays inert: the state holds the options only.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import pytest

from gru4rec_conformance.conformance._harness import first_run
from gru4rec_conformance.conformance._harness.collection import xfail_file_info
from gru4rec_conformance.conformance._harness.handle import (
    HarnessError,
    ImplHandle,
    describe_import_path,
    described_spec,
    import_path_root,
    shipped,
    suite_module,
)
from gru4rec_conformance.conformance._harness.options import (
    Options,
    check_cuda,
    check_options,
    check_run_inputs,
    check_sandbox,
    check_xfail_target,
    looks_like_conformance_run,
    missing_selection_usage,
    read_options,
    register_markers,
    usage,
)
from gru4rec_conformance.conformance._harness.refresh import prepare_refresh
from gru4rec_conformance.conformance._harness.reporting import (
    check_refresh_headers,
    prepare_resume,
    start_recording,
    stop_recording,
)
from gru4rec_conformance.conformance._harness.state import STATE_KEY, State, find_state
from gru4rec_conformance.conformance._records.xfails import XfailRegistryError, load_xfail_file
from gru4rec_conformance.implementations.base import get_family
from gru4rec_conformance.implementations.registry import AdapterSpec, Registry, RegistryError, default_registry


def pytest_configure(config: pytest.Config) -> None:
    register_markers(config)
    options = read_options(config)
    state = State(config=config, options=options)
    config.stash[STATE_KEY] = state
    check_options(options)

    if options.selection is None and not looks_like_conformance_run(config):
        return  # the suite's own tests (pytest tests/): the plugin stays inert
    registry = default_registry()
    config.hook.pytest_conformance_register_adapters(registry=registry)
    state.registry = registry
    if options.selection is None:
        raise pytest.UsageError(missing_selection_usage(registry))
    try:
        state.specs, state.explicit = _resolve(registry, options)
    except (RegistryError, HarnessError) as exc:
        raise pytest.UsageError(str(exc)) from None
    check_run_inputs(options)
    if options.device == "cuda":
        check_cuda()
    if not state.specs:
        raise pytest.UsageError(usage(registry, f"--impl {','.join(options.selection)} selects no implementation."))
    _check_family_extras(state)
    for spec in state.specs:
        state.handles[(spec.family, spec.name)] = ImplHandle(
            spec, device=options.device, seeds=options.seeds, dataset=options.dataset, isolation=options.isolation,
            settings=options.settings,
        )  # fmt: skip
    check_sandbox(options, any(h.uses_worker for h in state.handles.values()))
    _check_gate_in_process(state)
    for raw in options.xfail_files:
        path = Path(raw).resolve()
        try:
            xf = load_xfail_file(path)
        except XfailRegistryError as exc:
            raise pytest.UsageError(str(exc)) from None
        except OSError as exc:
            raise pytest.UsageError(f"--xfails {raw}: {exc}") from None
        check_xfail_target(raw, xf.implementation, [s.name for s in state.specs])
        state.extra_xfail_files[xf.implementation] = path
    if not options.is_xdist_worker:  # hashed before any adapter code runs; the gate compares them at the end
        for spec in state.specs:
            state.xfail_infos[(spec.family, spec.name)] = xfail_file_info(state, spec)
    if options.first_run:
        first_run.register(state)
    prepare_resume(state)
    prepare_refresh(state)
    if not options.is_xdist_worker:  # the controller describes each adapter once; a mismatch stops the session
        check_refresh_headers(state)
    if not options.is_xdist_worker:
        start_recording(state)
        if threading.current_thread() is threading.main_thread():
            # CI systems stop jobs with SIGTERM: turn it into KeyboardInterrupt so the report is finalised.
            state.old_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)


def _resolve(registry: Registry, options: Options) -> tuple[list[AdapterSpec], set[tuple[str, str]]]:
    """The specs of ``--impl`` and the (family, name) pairs named explicitly (not through ``all``), like
    ``Registry.resolve``, except that an import path (``module:Class``) is first
    described by a sandboxed worker: its module is imported in this process only when the adapter declares
    ``isolated = False`` (or ``--isolation never``), and never under ``--gate``."""
    out: list[AdapterSpec] = []
    explicit: set[tuple[str, str]] = set()
    for raw in options.selection or ():
        token = raw.strip()
        if not token:
            continue
        never = options.isolation == "never"
        if token == "all" or registry.get(token) or ":" not in token or never or suite_module(token.split(":")[0]):
            found = registry.resolve([token])
        else:
            check_sandbox(options, True)  # the describe worker is sandboxed as the checks' workers will be
            spec, reply = describe_import_path(token, options.settings)
            if spec is None and options.isolation == "always":
                spec = described_spec(token, {**reply, "isolated": True}, import_path_root(token))
            if spec is None and options.gate:
                raise HarnessError(
                    f"--impl {token}: the adapter declares isolated = False, but under --gate only the suite's own "
                    "adapters run in the suite's process (an in-process adapter can rewrite the records); set "
                    "isolated = True in the adapter or pass --isolation always"
                )
            found = [spec] if spec is not None else registry.resolve([token])  # in-process, as it declares
        if token != "all":
            explicit |= {(s.family, s.name) for s in found}
        for spec in found:
            if all((s.family, s.name) != (spec.family, spec.name) for s in out):
                out.append(spec)
    return out, explicit


def _check_gate_in_process(state: State) -> None:
    """Under ``--gate``, refuse an outside adapter (``--impl module:Class``) that would run in the suite's process
    (``--isolation never``); the suite's own adapters and those a plugin or conftest registers may."""
    if not state.options.gate:
        return
    # a plugin or conftest of the user's own repository is trusted as pytest trusts it (it runs here anyway)
    bad = [h.spec for h in state.handles.values() if not h.uses_worker and h.spec.source == "import path"
           and not shipped(h.spec)]  # fmt: skip
    if bad:
        names = ", ".join(f"{s.name} ({s.source})" for s in bad)
        raise pytest.UsageError(
            f"--gate: {names} would run in the suite's process (isolated = False or --isolation never), where it "
            "could rewrite the records; under --gate only the suite's own adapters run in-process: set isolated = "
            "True in the adapter or pass --isolation always"
        )


def _check_family_extras(state: State) -> None:
    """Raise ``UsageError`` naming the pip extra when a selected implementation's family lacks its modules."""
    for family in sorted({s.family for s in state.specs}):
        fam = get_family(family)
        missing = fam.missing_modules() if fam is not None else []
        if missing:
            names = ", ".join(s.name for s in state.specs if s.family == family)
            extra = f"pip install 'gru4rec-conformance[{fam.extra}]'" if fam and fam.extra else "install them"
            raise pytest.UsageError(
                f"--impl {names}: the {family} checks need {', '.join(missing)}, which "
                f"{'is' if len(missing) == 1 else 'are'} not installed here: {extra}"
            )


def _sigterm_to_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = find_state(config)
    if state is None:
        return
    for handle in list(state.handles.values()) + list(state.reference_handles.values()):
        handle.close()
    if state.old_sigterm is not None:
        signal.signal(signal.SIGTERM, state.old_sigterm)
        state.old_sigterm = None
    stop_recording(state)
    first_run.unregister(state)
