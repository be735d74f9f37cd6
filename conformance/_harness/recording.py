"""Turning pytest's per-phase reports into one result record per check, in the controller process.

Works the same with and without pytest-xdist: everything a record needs travels in the reports'
``user_properties`` (check id and kind, features, xfail entry, metrics, worker failures), which xdist
serialises from its workers to the controller. Records are appended to the run's results.jsonl as soon
as a check's teardown report (or an xdist crash report) arrives. The records' shapes are in :mod:`.records`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import pytest

from gru4rec_conformance.conformance._records.records import (
    EndExtra,
    MetricEntry,
    Outcome,
    OutcomeDetail,
    ResultRecord,
    StaticInfo,
    WorkerFailure,
    XfailRecord,
    utc_now,
)

#: ``user_properties`` keys of a check's items (they travel with its reports, also from xdist workers).
PROP_INFO = "conformance"
PROP_METRIC = "gru4rec_conformance.conformance.metric"
PROP_XFAIL = "gru4rec_conformance.conformance.xfail"
#: The xfail-registry entries (``XfailRecord`` dicts) matching a check, in file order, kept on the item: the
#: makereport hook (``running._settle_xfail``) puts the one that held the failure on the report as PROP_XFAIL.
XFAIL_ENTRIES_KEY = pytest.StashKey[list[dict[str, Any]]]()
PROP_SKIP = "gru4rec_conformance.conformance.skip"
PROP_WORKER = "gru4rec_conformance.conformance.worker"
PROP_DECLARED = "gru4rec_conformance.conformance.declared_unsupported"
#: Value: why the implementation is not available (its checks are skipped); see ``ResultRecord.unavailable``.
PROP_UNAVAILABLE = "gru4rec_conformance.conformance.unavailable"
#: Value: the undeclared requirements of a skipped-unsupported check (``ResultRecord.missing``).
PROP_MISSING = "gru4rec_conformance.conformance.missing"
_PROP_PREFIX = "gru4rec_conformance.conformance."
DETAILS_CHARS = 6000


class FinishedRun(Protocol):
    """A run read back after its end (``reports.results.RunData``): what ``verdict.assess`` reads."""

    @property
    def header(self) -> Mapping[str, Any]: ...

    @property
    def results(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def end(self) -> Mapping[str, Any] | None: ...


class RunSink(Protocol):
    """Where a run's records go: ``reports.writer.RunWriter`` (the harness only needs these members)."""

    @property
    def directory(self) -> Path: ...

    def append(self, record: Mapping[str, object]) -> None: ...

    def finish(self, status: str, exitstatus: int, extra: EndExtra | None = None, plots: bool = True) -> FinishedRun:
        """Write the end record and the run's summaries (results.json, summary.md/.html, plots); return the run
        read back."""

    def close(self) -> None: ...


def _is_harness_property(key: object) -> bool:
    return key == PROP_INFO or (isinstance(key, str) and key.startswith(_PROP_PREFIX))


def encode_properties(props: Sequence[tuple[str, object]]) -> list[tuple[str, object]]:
    """``props`` with the harness's values (keys :data:`PROP_INFO` and ``gru4rec_conformance.conformance.*``) as
    JSON text; others unchanged."""
    return [(k, json.dumps(v, default=str) if _is_harness_property(k) else v) for k, v in props]


def decode_properties(props: Sequence[tuple[str, object]]) -> list[tuple[str, object]]:
    """The inverse of :func:`encode_properties` (values that are not JSON text are kept as they are)."""
    out: list[tuple[str, object]] = []
    for k, v in props:
        if _is_harness_property(k) and isinstance(v, str):
            try:
                v = json.loads(v)
            except ValueError:
                pass
        out.append((k, v))
    return out


def _skip_reason(longrepr: object) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = str(longrepr or "")
    # pytest prefixes the exception's type: "Skipped: ", or the module path of running.NotApplicableHere
    return re.sub(r"^(?:Skipped|(?:\w+\.)*NotApplicableHere): ", "", text)


def _failure_reason(report: pytest.TestReport) -> str:
    """First line of the exception message (the full text goes to ``details``)."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return str(crash.message).strip().splitlines()[0][:1000]
    text = str(getattr(report, "longreprtext", "") or report.longrepr or "")
    lines = [ln for ln in text.splitlines() if ln.startswith("E ")]
    return (lines[0][1:].strip() if lines else text.strip().splitlines()[-1] if text.strip() else "")[:1000]


@dataclasses.dataclass
class _Pending:
    phases: dict[str | None, pytest.TestReport] = dataclasses.field(default_factory=dict)
    duration: float = 0.0


class Recorder:
    """Collects phase reports per node id and writes one record per check.

    Args:
        writer_for: returns the :class:`RunSink` of an implementation ``(name, family)`` (created lazily),
            or None when no report is written (records are then only kept in memory, for ``--gate``). The
            family is None when the check's node carries no properties; two families may share a name
            (``reference``).
        versions: returns ``(impl_version, suite_version)`` of an implementation ``(name, family)``.
        impl_of_nodeid: fallback that tells the implementation from a node id (xdist crash reports carry
            no properties).
    """

    def __init__(self, writer_for: Callable[[str, str | None], RunSink | None],
                 versions: Callable[[str, str | None], tuple[str, str]],
                 impl_of_nodeid: Callable[[str], str | None]) -> None:  # fmt: skip
        self._writer_for = writer_for
        self._versions = versions
        self._impl_of_nodeid = impl_of_nodeid
        self._pending: dict[str, _Pending] = {}
        self.records: list[ResultRecord] = []

    def on_report(self, report: pytest.TestReport) -> None:
        """Take one phase report of a check (setup, call, teardown; or an xdist crash report); write the
        check's record when its last report arrives."""
        nodeid = report.nodeid
        when: str | None = getattr(report, "when", None)
        pending = self._pending.setdefault(nodeid, _Pending())
        pending.phases[when] = report
        pending.duration += float(getattr(report, "duration", 0.0) or 0.0)
        if when == "teardown" or when not in ("setup", "call"):
            self._pending.pop(nodeid, None)
            self._finish(nodeid, pending)

    def _finish(self, nodeid: str, pending: _Pending) -> None:
        phases = pending.phases
        last = phases.get("teardown") or phases.get("call") or phases.get("setup") or next(iter(phases.values()))
        props: list[tuple[str, object]] = []
        for r in phases.values():
            for kv in decode_properties(getattr(r, "user_properties", ())):
                if kv not in props:
                    props.append(kv)
        info = cast("StaticInfo | None", next((v for k, v in props if k == PROP_INFO), None))
        impl = info["impl"] if info else self._impl_of_nodeid(nodeid)
        if impl is None:
            return  # not a conformance check
        family = (info["family"] if info else None) or family_from_nodeid(nodeid)
        writer = self._writer_for(impl, family)
        outcome, reason, details = self._classify(phases, props)
        worker_failure = cast("WorkerFailure | None", next((v for k, v in props if k == PROP_WORKER), None))
        if worker_failure and outcome in ("failed", "error"):
            reason = f"worker {worker_failure['kind']}: {worker_failure['message']}"
        impl_version, suite_version = self._versions(impl, family)
        xfail = cast("XfailRecord | None", next((v for k, v in props if k == PROP_XFAIL), None))
        unavailable = next((str(v) for k, v in props if k == PROP_UNAVAILABLE), None) if outcome == "skipped" else None
        run_skip = next((v for k, v in props if k == PROP_SKIP and v in ("device", "data", "environment")), None)
        detail: OutcomeDetail | None = (
            ("refused" if (PROP_SKIP, "refused") in props else "unsupported") if outcome == "skipped-unsupported"
            else "unavailable" if unavailable is not None
            else cast(OutcomeDetail, run_skip) if outcome == "skipped" and run_skip is not None
            else None
        )  # fmt: skip
        missing = next((list(cast("list[str]", v)) for k, v in props if k == PROP_MISSING), None)
        record: ResultRecord = {
            "type": "result",
            "nodeid": nodeid,
            "impl": impl,
            "family": family,
            "impl_version": impl_version,
            "suite_version": suite_version,
            "check": info["check"] if info else None,
            "test": nodeid.split("::", 1)[-1],
            "module": nodeid.split("::", 1)[0],
            "features": info["features"] if info else [],
            "markers": info["markers"] if info else [],
            "outcome": outcome,
            "outcome_detail": detail,
            "unavailable": unavailable,
            "reason": reason,
            "details": details,
            "xfail": xfail,
            "metrics": [cast(MetricEntry, v) for k, v in props if k == PROP_METRIC],
            "duration": round(pending.duration, 4),
            "worker": worker_failure,
            "node": getattr(getattr(getattr(last, "node", None), "gateway", None), "id", None),
            "finished": utc_now(),
            "missing": missing if outcome == "skipped-unsupported" else None,
        }
        self.records.append(record)
        if writer is not None:
            writer.append(record)

    def reuse(self, record: ResultRecord) -> None:
        """Record an earlier result that ``--refresh`` took over (already marked ``reused_from``), as if its check
        had run in this session."""
        writer = self._writer_for(record["impl"], record.get("family"))
        self.records.append(record)
        if writer is not None:
            writer.append(record)

    @staticmethod
    def _classify(phases: Mapping[str | None, pytest.TestReport],
                  props: list[tuple[str, object]]) -> tuple[Outcome, str, str]:  # fmt: skip
        """(outcome, one-line reason, details) of a check from its phase reports."""
        unsupported = any(k == PROP_SKIP and v == "unsupported" for k, v in props)
        registry_error = any(k == PROP_INFO and cast(StaticInfo, v).get("registry_error") for k, v in props)
        odd = [r for w, r in phases.items() if w not in ("setup", "call", "teardown")]
        if odd:  # an xdist worker crashed while running this check
            r = odd[0]
            text = str(r.longrepr)
            return "error", text.splitlines()[0] if text else "worker crashed", text[-DETAILS_CHARS:]
        setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
        details = ""
        for rep in (setup, call, teardown):
            if rep is not None and rep.failed:
                details = (getattr(rep, "longreprtext", "") or str(rep.longrepr))[-DETAILS_CHARS:]
                break
        if setup is not None and setup.failed:
            return "error", _failure_reason(setup), details
        if setup is not None and setup.skipped:
            if hasattr(setup, "wasxfail"):
                return "xfail", str(setup.wasxfail), ""
            return ("skipped-unsupported" if unsupported else "skipped"), _skip_reason(setup.longrepr), ""
        outcome: Outcome = "error"
        reason = "no result (the check did not run to completion)"
        if call is not None:
            if call.passed:
                outcome, reason = ("xpass", str(call.wasxfail)) if hasattr(call, "wasxfail") else ("passed", "")
            elif call.failed:
                text = str(call.longrepr)
                if text.startswith("[XPASS(strict)]"):
                    outcome, reason = "xpass", text
                else:
                    outcome, reason = ("error" if registry_error else "failed"), _failure_reason(call)
            elif call.skipped:
                if hasattr(call, "wasxfail"):
                    # the measured failure, not the entry's reason (that one is in record["xfail"]): a verdict
                    # must show what was found, e.g. which figure, so a changed deviation is visible in review
                    measured = _failure_reason(call) if call.longrepr is not None else ""
                    outcome, reason = "xfail", measured or str(call.wasxfail)
                    details = (getattr(call, "longreprtext", "") or str(call.longrepr or ""))[-DETAILS_CHARS:]
                else:
                    outcome = "skipped-unsupported" if unsupported else "skipped"
                    reason = _skip_reason(call.longrepr)
        if (
            teardown is not None
            and teardown.failed
            and outcome in ("passed", "xfail", "skipped", "skipped-unsupported")
        ):
            outcome, reason = "error", f"teardown failed: {_failure_reason(teardown)}"
        return outcome, reason, details


def family_from_nodeid(nodeid: str) -> str | None:
    """The check family of a node id from its folder, ``conformance/<family>/...`` (None elsewhere)."""
    parts = nodeid.split("::", 1)[0].split("/")
    if "conformance" in parts[:-1]:
        i = parts.index("conformance")
        if i + 2 < len(parts):
            return parts[i + 1]
    return None


def impl_from_nodeid(nodeid: str, names: list[str]) -> str | None:
    """The implementation whose parametrization id appears in ``nodeid`` (longest name wins)."""
    if "[" not in nodeid:
        return None
    params = "-" + nodeid.split("[", 1)[1].rstrip("]") + "-"
    hits = [n for n in names if f"-{n}-" in params]
    return max(hits, key=len) if hits else None
