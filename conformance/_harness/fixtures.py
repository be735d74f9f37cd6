"""The fixtures checks use: ``impl``, ``reference_impl``, ``record_metric``, ``expect``, ``conformance_options``,
``progress`` and ``oracle_cache``."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from typing import Protocol, cast

import pytest

from gru4rec_conformance.conformance._harness.collection import family_of
from gru4rec_conformance.conformance._harness.handle import HarnessError, Impl, ImplHandle
from gru4rec_conformance.conformance._harness.oracle_cache import OracleCache
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


#: ``AdapterSpec.ref`` of the suite's own reference adapter: the only one whose results the oracle cache keeps.
SUITE_REFERENCE_REFS = frozenset({"gru4rec_conformance.implementations.reference:ReferenceAdapter"})


@pytest.fixture(scope="session")
def oracle_cache(pytestconfig: pytest.Config) -> Iterator[OracleCache]:
    """The disk cache of the reference's oracle results (:mod:`.oracle_cache`): in ``--oracle-cache-dir`` (default
    the user's cache folder), disabled with ``--no-oracle-cache``. Checks store only what the suite computed from
    the reference's outputs, looked up by :func:`is_suite_reference`. Its counts end up in the terminal summary."""
    o = state_of(pytestconfig).options
    cache = OracleCache(o.oracle_cache_dir, int(o.oracle_cache_mb * (1 << 20)))
    yield cache
    if cache.hits or cache.misses or cache.writes or not cache.enabled:
        state_of(pytestconfig).notes.append(cache.summary())


def is_suite_reference(view: Impl) -> bool:
    """Whether ``view`` drives the suite's own reference adapter (not a mutant, a variant or a registered
    replacement): only its results may enter the oracle cache."""
    spec = view.handle.spec
    return spec.ref in SUITE_REFERENCE_REFS and not spec.init_kwargs and spec.role == "reference"


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


#: The comparisons ``expect`` takes as keywords, with their symbols for the default rule text.
BOUNDS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "gt": (">", lambda v, b: v > b),
    "ge": (">=", lambda v, b: v >= b),
    "lt": ("<", lambda v, b: v < b),
    "le": ("<=", lambda v, b: v <= b),
}


def _fmt(x: float) -> str:
    return f"{x:.6g}"


@dataclasses.dataclass(frozen=True)
class Threshold:
    """What a check's figure must satisfy: one-sided bounds (``gt``/``ge``/``lt``/``le``, all must hold) or,
    without bounds, the band ``|value - reference| <= tolerance``.

    Built by :func:`threshold_of`; :meth:`holds` judges a value, :meth:`record_fields` and :meth:`rule` give the
    ``reference``/``tolerance`` and the ``rule`` the metric record carries.
    """

    bounds: tuple[tuple[str, float], ...]
    reference: float | None
    tolerance: float | None

    def holds(self, value: float | None) -> bool:
        """Whether ``value`` meets the threshold; ``None``, NaN and infinities never do."""
        if value is None or not math.isfinite(value):
            return False
        if self.bounds:
            return all(BOUNDS[op][1](value, b) for op, b in self.bounds)
        assert self.reference is not None and self.tolerance is not None  # threshold_of guarantees it
        return abs(value - self.reference) <= self.tolerance

    def rule(self) -> str | None:
        """The default rule text of the bounds (``"pass if in [0.99, 1.0001]"``, ``"pass if < 0.0001"``); None
        for a band, whose reference and tolerance say it."""
        if not self.bounds:
            return None
        ops = dict(self.bounds)
        lo = next(((op, ops[op]) for op in ("ge", "gt") if op in ops), None)
        hi = next(((op, ops[op]) for op in ("le", "lt") if op in ops), None)
        if lo and hi and len(ops) == 2:
            left, right = "[" if lo[0] == "ge" else "(", "]" if hi[0] == "le" else ")"
            return f"pass if in {left}{_fmt(lo[1])}, {_fmt(hi[1])}{right}"
        return "pass if " + " and ".join(f"{BOUNDS[op][0]} {_fmt(b)}" for op, b in self.bounds)

    def record_fields(self) -> tuple[float | None, float | None]:
        """``(reference, tolerance)`` of the record: as given; with bounds and a reference but no tolerance, the
        tolerance is the largest distance from the reference to a bound (12 significant digits, so that
        ``reference=1.0, ge=0.9`` records 0.1). The record's ``within`` then agrees with the bound where the
        figure cannot pass the reference (a recall against 1, a count against 0); where it can, give no
        reference, or give the tolerance."""
        if self.tolerance is not None or self.reference is None or not self.bounds:
            return self.reference, self.tolerance
        far = max(abs(b - self.reference) for _, b in self.bounds)
        return self.reference, float(f"{far:.12g}")


def threshold_of(reference: float | None, tolerance: float | None, bounds: dict[str, float | None]) -> Threshold:
    """The :class:`Threshold` of an ``expect`` call.

    Raises:
        TypeError: no threshold at all (neither a bound nor both ``reference`` and ``tolerance``; an ``expect``
            that cannot fail is a mistake — use ``record_metric`` to record a figure that is not judged), an
            unknown bound keyword, or a bound that is not a finite number.
    """
    given: list[tuple[str, float]] = []
    for op, b in bounds.items():
        if op not in BOUNDS:
            raise TypeError(f"expect(): unknown bound {op!r} (use {', '.join(BOUNDS)})")
        if b is None:
            continue
        try:
            f = float(b)
        except (TypeError, ValueError):
            raise TypeError(f"expect(): bound {op}={b!r} is not a number") from None
        if not math.isfinite(f):
            raise TypeError(f"expect(): bound {op}={b!r} is not finite")
        given.append((op, f))
    if not given and (reference is None or tolerance is None):
        raise TypeError("expect() needs a threshold: gt/ge/lt/le, or both reference and tolerance")
    return Threshold(tuple(given), reference, tolerance)


class Expect:
    """The ``expect`` fixture's value: a check states a measured figure, its threshold and its failure message
    once; the metric record (as :func:`record_metric` writes it) and the verdict both come from that statement.

    ``expect(name, value, *, reference=None, tolerance=None, gt=None, ge=None, lt=None, le=None, rule=None,
    message, problems=None, **context) -> bool``:

    - the threshold: the bounds given (all must hold), or, without bounds, ``|value - reference| <= tolerance``.
      A value that is None, NaN or infinite never meets it.
    - the record: ``name``, ``value``, ``reference`` and ``tolerance`` as given (with bounds and a reference
      but no tolerance: the largest distance from the reference to a bound), ``rule`` as given or else derived
      from the bounds (``"pass if >= 0.9"``), ``context`` as for ``record_metric``. Written once per call.
    - the verdict: when the threshold is not met, raises ``AssertionError(message)`` (a failure of the check,
      ``fails_as = "assertion"``), or, with ``problems`` (a list), appends the message to it and returns False,
      so that a check can gather several findings before it fails. ``message`` is a string or a callable
      returning one, called only on failure (for text that is only defined then). Returns True when met.

    ``expect.holds(...)`` takes the same arguments but ``message``/``problems``: it records and returns whether
    the threshold is met, for a check whose finding combines the figure with something else.

    Raises:
        TypeError: no threshold (see :func:`threshold_of`), or a value that is not a number (as record_metric).
    """

    def __init__(self, record: RecordMetric) -> None:
        self._record = record

    def holds(self, name: str, value: float | None, *, reference: float | None = None,
              tolerance: float | None = None, gt: float | None = None, ge: float | None = None,
              lt: float | None = None, le: float | None = None, rule: str | None = None,
              **context: object) -> bool:  # fmt: skip
        """Record the figure with its threshold; whether the threshold is met (see :class:`Expect`)."""
        th = threshold_of(reference, tolerance, {"gt": gt, "ge": ge, "lt": lt, "le": le})
        ref, tol = th.record_fields()
        entry = self._record(name, value, reference=ref, tolerance=tol, rule=rule if rule is not None else th.rule(),
                             **context)  # fmt: skip
        return th.holds(entry["value"])

    def __call__(self, name: str, value: float | None, *, message: str | Callable[[], str],
                 problems: list[str] | None = None, reference: float | None = None, tolerance: float | None = None,
                 gt: float | None = None, ge: float | None = None, lt: float | None = None, le: float | None = None,
                 rule: str | None = None, **context: object) -> bool:  # fmt: skip
        __tracebackhide__ = True  # the failure points at the check's line
        if self.holds(name, value, reference=reference, tolerance=tolerance, gt=gt, ge=ge, lt=lt, le=le, rule=rule,
                      **context):  # fmt: skip
            return True
        text = message() if callable(message) else message
        if problems is None:
            raise AssertionError(text)
        problems.append(text)
        return False


@pytest.fixture
def expect(record_metric: RecordMetric) -> Expect:
    """State a check's figure, threshold and message once: records the metric and fails the check when the
    threshold is not met (see :class:`Expect`)."""
    return Expect(record_metric)


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
