"""The plugin's per-session state, kept in ``config.stash[STATE_KEY]`` and shared by the hook modules."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from gru4rec_conformance.conformance._harness.handle import ImplHandle
from gru4rec_conformance.conformance._harness.options import Options
from gru4rec_conformance.conformance._harness.recording import Recorder, RunSink
from gru4rec_conformance.conformance._records.records import GateResult, NotRunEntry, XfailFileInfo
from gru4rec_conformance.conformance._records.verdict import Conformance
from gru4rec_conformance.implementations.registry import AdapterSpec, Registry

#: What ``signal.signal`` returns (a previous handler): a callable, ``SIG_DFL``/``SIG_IGN`` or None.
SignalHandler = Callable[[int, FrameType | None], object] | int | None


@dataclasses.dataclass(frozen=True)
class ImplParam:
    """Value of the ``impl`` parameter: a selected implementation, or a placeholder to deselect."""

    family: str
    name: str | None
    missing_selection: bool = False


@dataclasses.dataclass
class ResumeInfo:
    """A ``--resume`` run directory and ``{node id: (impl_version, suite_version)}`` of its verdicts."""

    directory: Path
    impl: str
    family: str
    verdicts: dict[str, tuple[str, str]]


@dataclasses.dataclass
class State:
    """Everything the hooks of one session share.

    Attributes:
        config: the session's config.
        options: the parsed command line.
        registry: the adapter registry (None when the plugin stays inert: the suite's own tests).
        specs: the selected implementations.
        handles: ``(family, name)`` → handle of each selected implementation.
        reference_handles: family → handle of its reference (``reference_impl`` fixture), made on first use.
        resume: ``(family, name)`` → the ``--resume`` run of that implementation.
        refresh: ``(family, name)`` → the ``--refresh`` run of that implementation (``refresh.RefreshInfo``).
        refreshed: ``(family, name)`` → node ids whose earlier result ``--refresh`` took over (merged from the
            xdist workers); the controller writes their records (``refresh_written``: those written).
        extra_xfail_files: implementation name → its ``--xfails`` file.
        notes: lines of the terminal summary's "conformance" section.
        ignored_families: families whose folders were not collected.
        writers: ``(family, name)`` → the run's writer (None: not written, e.g. ``--no-report``).
        recorder: the controller's recorder of results (None in xdist workers).
        old_sigterm: the SIGTERM handler to restore at unconfigure.
        gate_result: ``--gate``'s evaluation, set at session finish.
        reused: implementation name → checks ``--resume`` skipped because they had a verdict.
        xfail_infos: ``(family, name)`` → hash and provenance of its xfail file when the session started (None:
            it has none), controller only.
        explicit: ``(family, name)`` of the implementations ``--impl`` names (not only through ``all``): one that
            is unavailable fails the run.
        planned: ``(family, name)`` → node id → the check as collected for it (``reason`` still empty), before
            ``-k`` / ``-m`` / ``--deselect``; merged from the xdist workers.
        deselected: node ids deselected by ``-k`` / ``-m`` / ``--deselect`` (not by the harness itself).
        conformance: ``(family, name)`` → the implementation's conformance status, set at session finish.
        draft_lines: ``--first-run``'s lines naming the draft xfail files it wrote (the last lines of the output).
    """

    config: pytest.Config
    options: Options
    registry: Registry | None = None
    specs: list[AdapterSpec] = dataclasses.field(default_factory=list)
    handles: dict[tuple[str, str], ImplHandle] = dataclasses.field(default_factory=dict)
    reference_handles: dict[str, ImplHandle] = dataclasses.field(default_factory=dict)
    resume: dict[tuple[str, str], ResumeInfo] = dataclasses.field(default_factory=dict)
    refresh: dict[tuple[str, str], Any] = dataclasses.field(default_factory=dict)
    refreshed: dict[tuple[str, str], list[str]] = dataclasses.field(default_factory=dict)
    refresh_written: set[tuple[tuple[str, str], str]] = dataclasses.field(default_factory=set)
    extra_xfail_files: dict[str, Path] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    ignored_families: list[str] = dataclasses.field(default_factory=list)
    writers: dict[tuple[str | None, str], RunSink | None] = dataclasses.field(default_factory=dict)
    recorder: Recorder | None = None
    old_sigterm: SignalHandler = None
    gate_result: GateResult | None = None
    reused: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    xfail_infos: dict[tuple[str, str], XfailFileInfo | None] = dataclasses.field(default_factory=dict)
    explicit: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    planned: dict[tuple[str, str], dict[str, NotRunEntry]] = dataclasses.field(default_factory=dict)
    deselected: set[str] = dataclasses.field(default_factory=set)
    conformance: dict[tuple[str, str], Conformance] = dataclasses.field(default_factory=dict)
    draft_lines: list[str] = dataclasses.field(default_factory=list)

    def handle_for(self, param: ImplParam) -> ImplHandle:
        return self.handles[(param.family, param.name or "")]


STATE_KEY = pytest.StashKey[State]()


def state_of(config: pytest.Config) -> State:
    """The session's state (set in ``pytest_configure``; KeyError before)."""
    return config.stash[STATE_KEY]


def find_state(config: pytest.Config) -> State | None:
    """The session's state, or None when the plugin's ``pytest_configure`` has not run (or failed early)."""
    return config.stash.get(STATE_KEY, None)
