"""Running checks: skips for what the implementation does not declare or cannot provide, and the translation
of adapter exceptions.

:func:`pytest_runtest_setup` skips checks whose features/hooks/device are not declared ("unsupported by ...",
outcome ``skipped-unsupported``) and every check of an unavailable implementation (outcome ``skipped``, detail
``unavailable``); :func:`pytest_runtest_call` turns :class:`~implementations.base.Unsupported` raised by the
adapter into such a skip (or into a failure when the thing was declared), turns an exception that says the
environment is wrong into a skip with outcome detail ``environment`` (:mod:`.environment`) and records worker
failures.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import NoReturn, cast

import pytest
from _pytest.outcomes import Skipped  # pytest.skip.Exception, importable as a class (for the subclass below)

from gru4rec_conformance.conformance._harness import environment
from gru4rec_conformance.conformance._harness.collection import impl_param
from gru4rec_conformance.conformance._harness.handle import UNSUPPORTED_PREFIX, HarnessError, ImplHandle
from gru4rec_conformance.conformance._harness.isolation import WorkerCallError, WorkerError
from gru4rec_conformance.conformance._harness.recording import (
    PROP_DECLARED,
    PROP_INFO,
    PROP_MISSING,
    PROP_SKIP,
    PROP_UNAVAILABLE,
    PROP_WORKER,
    PROP_XFAIL,
    XFAIL_ENTRIES_KEY,
    encode_properties,
)
from gru4rec_conformance.conformance._harness.state import state_of
from gru4rec_conformance.conformance._records.records import UNAVAILABLE_MARKER, StaticInfo
from gru4rec_conformance.conformance._records.xfails import xfail_label
from gru4rec_conformance.implementations.base import RemoteException, Unsupported


class NotApplicableHere(Skipped):
    """A skip because the check cannot apply to this run's setup, not to the implementation: ``cause`` ``data``
    (a real-data check on a run that has only the synthetic stand-in). Recorded with ``outcome_detail`` = cause
    and not counted in the coverage (like a ``gpu`` check of a CPU run). Raise it with :func:`skip_for_this_run`;
    it may come from a session-scoped fixture (pytest re-raises the same exception for every check)."""

    def __init__(self, reason: str, cause: str) -> None:
        super().__init__(reason, _use_item_location=True)
        self.cause = cause


def skip_for_this_run(reason: str, cause: str = "data") -> NoReturn:
    """Skip the check as not applicable to this run (see :class:`NotApplicableHere`); ``reason`` says what the run
    lacks and how to provide it."""
    raise NotApplicableHere(reason, cause)


def static_info(item: pytest.Item) -> StaticInfo | None:
    """The :class:`~.records.StaticInfo` collection attached to a check item (None for other items)."""
    return cast("StaticInfo | None", next((v for k, v in item.user_properties if k == PROP_INFO), None))


def mark_unsupported(item: pytest.Item, missing: Sequence[str] = ()) -> None:
    """Record that ``item`` is skipped because the implementation does not declare what it needs: ``missing``, the
    undeclared requirements (the record's ``missing``, hooks as ``hook:<name>``; the first call's list is kept)."""
    if (PROP_SKIP, "unsupported") not in item.user_properties:
        item.user_properties.append((PROP_SKIP, "unsupported"))
    handle = _item_handle(item)
    names = [handle.requirement_name(m) for m in missing] if handle is not None else list(missing)
    if names and not any(k == PROP_MISSING for k, _v in item.user_properties):
        item.user_properties.append((PROP_MISSING, names))


#: Exceptions the call and setup wrappers look at: the adapter's own, and those that may say the environment is wrong.
_ADAPTER_EXCEPTIONS = (Unsupported, WorkerError, RemoteException, ImportError, AttributeError)


def _environment_problem(exc: BaseException) -> str | None:
    """What :mod:`.environment` says is wrong with the environment when ``exc`` is an adapter exception that says
    so (a failure of the harness's worker or of a process the adapter runs, an import or module-attribute error
    raised here); None otherwise."""
    if isinstance(exc, (WorkerCallError, RemoteException)):
        return environment.environment_problem(exc.remote_type, exc.remote_message)
    if isinstance(exc, (ImportError, AttributeError)):
        return environment.environment_problem_of(exc)
    return None


def _handle_adapter_exception(item: pytest.Item, handle: ImplHandle | None, exc: BaseException) -> None:
    """Unsupported → skip (undeclared: outcome detail ``refused``, refused by the implementation at run time) or
    failure (declared); an environment problem (a missing module, a module
    of another version: :mod:`.environment`, also from a process the adapter runs itself,
    :class:`~implementations.base.RemoteException`) → a skip with outcome detail ``environment`` naming the tox environment
    to use; other worker failures → recorded details. Anything else is left to propagate unchanged."""
    problem = _environment_problem(exc)
    if problem is not None and handle is not None:
        how = exc.how if isinstance(exc, RemoteException) else None
        item.user_properties.append((PROP_SKIP, "environment"))
        raise pytest.skip.Exception(
            environment.message(handle.name, problem, how=how), _use_item_location=True
        ) from None
    if isinstance(exc, Unsupported) and handle is not None:
        if handle.declares(exc.name):
            item.user_properties.append((PROP_DECLARED, exc.name))
            raise AssertionError(
                f"{handle.name} declares {exc.name!r} but raised Unsupported({exc}): the declaration is not honoured"
            ) from exc
        # refused at run time: the check's declared requirements were met (setup skips the others), so this is
        # not an absent feature but a value the implementation would not take; the verdict counts it not tested
        item.user_properties.append((PROP_SKIP, "refused"))
        mark_unsupported(item, [exc.name])
        raise pytest.skip.Exception(f"{UNSUPPORTED_PREFIX}{handle.name}: {exc}", _use_item_location=True) from None
    if isinstance(exc, WorkerError):
        failure = {"kind": exc.kind, "message": str(exc).split("\n", 1)[0], "stderr_tail": exc.stderr_tail}
        if exc.details.get("stacks"):
            failure["stacks"] = str(exc.details["stacks"])  # the worker's own dump before a timeout kill
        item.user_properties.append((PROP_WORKER, failure))


def _item_handle(item: pytest.Item) -> ImplHandle | None:
    param = impl_param(item)
    if param is None or param.name is None:
        return None
    return state_of(item.config).handles.get((param.family, param.name))


def _skip(reason: str) -> NoReturn:
    raise pytest.skip.Exception(reason, _use_item_location=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # A plain (non-wrapper) hook, like pytest's own skip markers, so every wrapper's setup has run.
    handle = _item_handle(item)
    if handle is None:
        return
    info = static_info(item)
    problems = info.get("problems") if info else None
    if problems:
        raise HarnessError(f"{item.nodeid}: " + "; ".join(problems))
    d = handle.describe()
    if d.unavailable:
        item.user_properties.append((PROP_UNAVAILABLE, d.unavailable))
        _skip(f"implementation {handle.name}{UNAVAILABLE_MARKER}{d.unavailable}")
    if d.error:
        raise HarnessError(f"{handle.name}: the adapter cannot be described: {d.error}")
    state = state_of(item.config)
    if item.get_closest_marker("gpu") is not None and state.options.device != "cuda":
        item.user_properties.append((PROP_SKIP, "device"))
        _skip("needs a GPU: run with --device cuda")
    missing = handle.unmet(info["features"] if info else [])
    if missing:
        mark_unsupported(item, missing)
        _skip(f"{UNSUPPORTED_PREFIX}{handle.name}: needs {', '.join(missing)} (not declared)")
    if state.options.device not in handle.capabilities.devices:
        mark_unsupported(item, [f"device:{state.options.device}"])
        _skip(f"{UNSUPPORTED_PREFIX}{handle.name}: device {state.options.device!r} is not declared")


# Not a registered hook: pytest collects only ``pytest_``-prefixed names, whatever ``specname`` says (kept as it
# was; registering it would change how Unsupported raised in a fixture's setup is reported).
@pytest.hookimpl(wrapper=True, specname="pytest_runtest_setup")
def _translate_setup_exceptions(item: pytest.Item) -> Generator[None, object, object]:
    handle = _item_handle(item)
    try:
        return (yield)
    except _ADAPTER_EXCEPTIONS as exc:
        _handle_adapter_exception(item, handle, exc)
        raise


def failure_way(exc: BaseException) -> str:
    """``"assertion"`` when ``exc`` is a check's own finding (``assert``, ``pytest.fail``), else ``"crash"`` (the
    implementation raised, its worker died or timed out, a fixture broke): the vocabulary of an xfail entry's
    ``fails_as``."""
    return "assertion" if isinstance(exc, (AssertionError, pytest.fail.Exception)) else "crash"


def _settle_xfail(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    """Put on the report the xfail entry that holds its outcome, and hold a failure as expected only by an entry
    that declared it this way (``fails_as``).

    pytest has marked a failure xfailed (every entry matching the check gave it a marker). Among the matching
    entries, the first whose ``fails_as`` is unset or equals the way the check failed (:func:`failure_way`) is
    the one recorded; when none does (a crash where only a metric gap was declared), the report becomes the
    failure it is, its message naming the entries that did not hold it. A passing call (XPASS) records the
    first entry."""
    entries = item.stash.get(XFAIL_ENTRIES_KEY, None)
    if not entries:
        return
    if not hasattr(report, "wasxfail") or call.excinfo is None:
        if report.when == "call":
            report.user_properties = [*report.user_properties, (PROP_XFAIL, entries[0])]
        return
    way = failure_way(call.excinfo.value)
    chosen = next((e for e in entries if e.get("fails_as") in (None, way)), None)
    if chosen is not None:
        report.user_properties = [*report.user_properties, (PROP_XFAIL, chosen)]
        report.wasxfail = xfail_label(chosen)
        return
    report.outcome = "failed"
    del report.wasxfail
    declared = "; ".join(f"entry {e.get('index')} of {e.get('file')}: fails_as = {e.get('fails_as')}" for e in entries)
    note = f"not the declared failure: the check failed as a {way}, its xfail entries expect another way ({declared})"
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None) is not None:
        crash.message = f"{note}: {crash.message}"
    else:
        report.longrepr = f"{note}\n{report.longrepr}"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    """The harness's ``user_properties`` of a report as JSON text: xdist carries them from its workers as they are,
    and JUnit XML writes ``str(value)`` of each, which is then JSON rather than a Python repr. The item keeps the
    values (the harness reads them there); :class:`~.recording.Recorder` decodes the reports'. Outermost
    (``tryfirst``), so it sees pytest's xfail verdict and can check it against the entries (:func:`_settle_xfail`)."""
    report = yield
    if isinstance(report, pytest.TestReport):
        if call.excinfo is not None and isinstance(call.excinfo.value, NotApplicableHere):
            report.user_properties.append((PROP_SKIP, call.excinfo.value.cause))
        _settle_xfail(item, report, call)
        report.user_properties = encode_properties(report.user_properties)
    return report


def _environment_cause(exc: BaseException) -> BaseException | None:
    """The adapter exception that says the environment is wrong, when a check caught one and failed with its own
    message (``pytest.fail`` inside ``except``): found on ``exc``'s ``__cause__``/``__context__`` chain."""
    seen: set[int] = set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if _environment_problem(cause) is not None:
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    handle = _item_handle(item)
    try:
        return (yield)
    except _ADAPTER_EXCEPTIONS as exc:
        _handle_adapter_exception(item, handle, exc)
        raise
    except (AssertionError, pytest.fail.Exception) as exc:
        # A check that wraps the adapter's exception in a message of its own still must not turn a missing module
        # into a finding; any other failure is left as it is.
        cause = _environment_cause(exc)
        if cause is not None:
            _handle_adapter_exception(item, handle, cause)
        raise
