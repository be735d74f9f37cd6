"""The fixtures checks use: ``impl``, ``reference_impl``, ``record_metric``, ``conformance_options`` and
``progress``."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Iterator
from typing import Protocol, cast

import pytest

from gru4rec_conformance.conformance._harness.collection import family_of
from gru4rec_conformance.conformance._harness.handle import HarnessError, Impl, ImplHandle
from gru4rec_conformance.conformance._harness.recording import PROP_METRIC
from gru4rec_conformance.conformance._harness.running import mark_unsupported, static_info
from gru4rec_conformance.conformance._harness.state import ImplParam, state_of
from gru4rec_conformance.conformance._records.records import MetricEntry
from gru4rec_conformance.implementations.registry import default_registry

#: A metric context value as recorded: JSON scalars kept, anything else as its ``str``.
ContextValue = int | float | str | bool | None


@dataclasses.dataclass(frozen=True)
class ConformanceOptions:
    """Run options visible to checks (the ``conformance_options`` fixture)."""

    device: str
    dataset: str | None
    seeds: tuple[int, ...]
    gate: bool
    isolation: str


@pytest.fixture(scope="session")
def conformance_options(pytestconfig: pytest.Config) -> ConformanceOptions:
    """``--device``, ``--dataset``, ``--seeds``, ``--gate`` and ``--isolation`` of this run."""
    o = state_of(pytestconfig).options
    return ConformanceOptions(o.device, o.dataset, tuple(o.seeds), o.gate, o.isolation)


def _context(context: dict[str, object]) -> dict[str, ContextValue]:
    return {str(k): (v if isinstance(v, (int, float, str, bool)) or v is None else str(v)) for k, v in context.items()}


def _check_item(request: pytest.FixtureRequest) -> pytest.Item:
    """The check a function-scoped fixture is set up for."""
    node = request.node
    if not isinstance(node, pytest.Item):
        raise HarnessError(f"{request.fixturename} is a function-scoped fixture of checks, not of {node.nodeid}")
    return node


def _note(item: pytest.Item, name: str, context: dict[str, object]) -> None:
    """A value-less metric entry of the check (``Impl.note``), recorded once."""
    rule = cast("str | None", context.pop("rule", None))  # recorded as given
    entry: MetricEntry = {"name": name, "value": None, "reference": None, "tolerance": None, "rule": rule,
                          "context": _context(context), "within": None}  # fmt: skip
    if (PROP_METRIC, entry) not in item.user_properties:
        item.user_properties.append((PROP_METRIC, entry))


def _impl_view(request: pytest.FixtureRequest, handle: ImplHandle) -> Impl:
    item = _check_item(request)
    info = static_info(item)
    check = info["check"] if info else None
    view = Impl(handle, kind=check["kind"] if check else None, timeout=check["timeout"] if check else None,
                on_unsupported=lambda missing: mark_unsupported(item, missing),
                on_note=lambda name, context: _note(item, name, context))  # fmt: skip
    request.addfinalizer(view.close)
    return view


@pytest.fixture
def impl(request: pytest.FixtureRequest) -> Impl:
    """The implementation under test: a factory of fresh adapters (``impl.build(seed=..., **hparams)``).

    Parametrized by the plugin over the selected implementations of the check's family.
    """
    param = getattr(request, "param", None)
    if not isinstance(param, ImplParam) or param.name is None:
        raise HarnessError("the 'impl' fixture is parametrized by the conformance plugin; select with --impl")
    return _impl_view(request, state_of(request.config).handle_for(param))


@pytest.fixture
def reference_impl(request: pytest.FixtureRequest) -> Impl:
    """The reference implementation of the check's family, whatever ``--impl`` selects (in-process unless
    ``--isolation always``). Skips when no reference adapter is registered for the family."""
    state = state_of(request.config)
    family = family_of(_check_item(request), state)
    if family is None:
        raise HarnessError("reference_impl is for conformance checks under conformance/<family>/")
    registry = state.registry or default_registry()
    refs = [s for s in registry.specs(family) if s.role == "reference"]
    if not refs:
        pytest.skip(f"no reference adapter is registered for family {family}")
    handle = state.reference_handles.get(family)
    if handle is None:
        o = state.options
        handle = ImplHandle(
            refs[0],
            device=o.device,
            seeds=o.seeds,
            dataset=o.dataset,
            isolation="always" if o.isolation == "always" else "never",
            settings=o.settings,
        )
        state.reference_handles[family] = handle
    return _impl_view(request, handle)


class RecordMetric(Protocol):
    """The ``record_metric`` fixture's value (see :func:`record_metric`)."""

    def __call__(self, name: str, value: float | None, reference: float | None = None, tolerance: float | None = None,
                 rule: str | None = None, **context: object) -> MetricEntry: ...  # fmt: skip


@pytest.fixture
def record_metric(request: pytest.FixtureRequest) -> RecordMetric:
    """Record a metric of this check for the report: ``record_metric(name, value, reference=..., tolerance=...,
    rule=..., **context)``.

    ``context`` keys such as ``dataset``, ``loss``, ``cutoff``, ``seed`` are printed; ``dataset`` and ``loss``
    also select the study's published number shown beside ours. Returns the recorded entry, whose
    ``within`` is ``|value - reference| <= tolerance`` (None when either is missing). Values must be finite
    numbers or None; NaN is recorded as None with ``"nan": True``.
    """
    item = _check_item(request)

    def record(name: str, value: float | None, reference: float | None = None, tolerance: float | None = None,
               rule: str | None = None, **context: object) -> MetricEntry:  # fmt: skip
        def num(x: float | None, what: str) -> float | None:
            if x is None:
                return None
            try:
                f = float(x)
            except (TypeError, ValueError):
                raise TypeError(f"record_metric({name!r}): {what} must be a number, got {x!r}") from None
            return f if math.isfinite(f) else None

        v, r, t = num(value, "value"), num(reference, "reference"), num(tolerance, "tolerance")
        within = None if v is None or r is None or t is None else abs(v - r) <= t
        ctx = _context(context)
        entry: MetricEntry
        if value is not None and v is None:  # NaN (or infinite): "nan" comes before "within", as it always did
            entry = {"name": str(name), "value": v, "reference": r, "tolerance": t, "rule": rule, "context": ctx,
                     "nan": True, "within": within}  # fmt: skip
        else:
            entry = {"name": str(name), "value": v, "reference": r, "tolerance": t, "rule": rule, "context": ctx,
                     "within": within}  # fmt: skip
        item.user_properties.append((PROP_METRIC, entry))
        return entry

    return record


class Progress:
    """Progress lines of a long check (fits of several seconds: epochs, seeds) in the terminal, so that a slow
    check is told from a hung one: ``progress.note("...")`` writes one line, ``with progress.task("...")`` writes
    a line at the start and one with the elapsed seconds at the end (or when it raises).

    Lines go through pytest's terminal reporter with output capturing suspended while they are written (as live
    logging does), prefixed by the check (``  [MC-1 reference-cross-entropy] ...``); nothing is written with
    ``-q`` (verbosity < 0), without a terminal reporter, or in pytest-xdist workers (their output is not shown).
    """

    def __init__(self, config: pytest.Config, label: str) -> None:
        self._config = config
        self.label = label

    @property
    def enabled(self) -> bool:
        """Whether lines reach the terminal."""
        return (
            self._config.get_verbosity() >= 0
            and self._config.pluginmanager.get_plugin("terminalreporter") is not None
            and not hasattr(self._config, "workerinput")  # an xdist worker
        )

    def note(self, text: str) -> None:
        """Write ``text`` as one line (see the class docstring for when nothing is written)."""
        tr = self._config.pluginmanager.get_plugin("terminalreporter")
        if not self.enabled or tr is None:
            return
        capman = self._config.pluginmanager.get_plugin("capturemanager")
        suspended = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
        with suspended:
            tr.ensure_newline()
            tr.write_line(f"  [{self.label}] {text}")

    @contextlib.contextmanager
    def task(self, text: str) -> Iterator[None]:
        """``text …`` now, ``text: done in 12.3 s`` at the end (``failed after`` when the block raises)."""
        self.note(f"{text} …")
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            self.note(f"{text}: failed after {time.perf_counter() - start:.1f} s")
            raise
        self.note(f"{text}: done in {time.perf_counter() - start:.1f} s")


@pytest.fixture
def progress(request: pytest.FixtureRequest) -> Progress:
    """A :class:`Progress` of this check: ``progress.note(text)``, ``with progress.task(text): ...``."""
    item = _check_item(request)
    info = static_info(item)
    check_id = info["check"]["id"] if info and info["check"] else None
    params = item.nodeid.rsplit("[", 1)[1].rstrip("]") if item.nodeid.endswith("]") else ""
    return Progress(request.config, " ".join(x for x in (check_id or item.name, params) if x))
