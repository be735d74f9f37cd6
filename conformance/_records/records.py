"""The records a conformance run writes, typed: run header, one result per check, resume and end records.

The harness owns these shapes; :mod:`gru4rec_conformance.reports` reads them (and imports the types from here,
never the reverse). They are ``TypedDict``s because they are JSON lines on disk (``results.jsonl``) and plain
dicts in memory; ``results.json`` (:class:`ResultsDocument`) gathers them and is described by the JSON Schema
:data:`RESULTS_SCHEMA_PATH` (``results.schema.json`` beside this module), whose version every results.json
carries as ``schema_version``.

This module imports nothing beyond the standard library, so reports can use it without pytest.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:  # annotations only (postponed): the runtime stays standard-library only on Python 3.10
    from typing_extensions import NotRequired

#: Version of the record format (the ``schema`` field of the run header and of results.json); readers of the
#: records accept every file with this number.
SCHEMA = 1
#: Version of :data:`RESULTS_SCHEMA_PATH` (the ``schema_version`` field of results.json). Its major number is
#: :data:`SCHEMA`; the minor one counts additions (1.1: ``schema_version``, ``outcome_detail``, ``unavailable``;
#: 1.2: the optional ``conformance``, a result's ``missing``, outcome detail ``device``/``data``, the end record's
#: ``not_run`` and ``nondeterminism``, the header's ``sandbox`` and ``xfail_files``, resume ``truncated``).
RESULTS_SCHEMA_VERSION = "1.2"
#: The JSON Schema (draft 2020-12) of results.json, shipped in the package.
RESULTS_SCHEMA_PATH = Path(__file__).resolve().with_name("results.schema.json")

Outcome = Literal["passed", "failed", "error", "xpass", "xfail", "skipped-unsupported", "skipped"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "failed", "error", "xpass", "xfail", "skipped-unsupported", "skipped")
"""Outcome of one check. ``failed``: the check caught a deviation; ``error``: the check could not run
(setup error, harness or registry problem); ``xpass``: listed as expected failure but passed (strict:
fails the run); ``xfail``: failed as declared in the xfail registry; ``skipped-unsupported``: needs a
capability the implementation does not declare; ``skipped``: any other skip (missing data, no GPU)."""
BAD_OUTCOMES: tuple[Outcome, ...] = ("failed", "error", "xpass")

OutcomeDetail = Literal["unavailable", "unsupported", "refused", "device", "data", "environment"]
"""Why a check was skipped, when the harness knows: ``unsupported`` (outcome ``skipped-unsupported``: the
implementation does not declare what the check needs; the record's ``missing`` says what), ``refused`` (outcome
``skipped-unsupported``: the check's declared requirements were met but the implementation refused a value at run
time, raising ``Unsupported``; ``missing`` names it, e.g. ``layers:[24, 12]``; not tested, never n/a), ``unavailable``
(outcome ``skipped``: the implementation is not installed or located here; the record's ``unavailable`` says how to
provide it), ``device`` (outcome ``skipped``: the check needs a device the run does not use, a ``gpu`` check of a
CPU run) or ``data`` (outcome ``skipped``: the check needs data the run does not have, e.g. the real SST-5 where
only the synthetic stand-in is present; ``running.skip_for_this_run``) or ``environment`` (outcome ``skipped``: the
implementation raised an environment error, a missing module or a module of another version; the reason names the
tox environment to use, :mod:`.environment`)."""

#: The phrase of the skip reason of every check of an unavailable implementation: the harness writes
#: ``implementation <name> is not available here: <how to provide it>``.
UNAVAILABLE_MARKER = " is not available here: "


def utc_now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ`` (the records' timestamps, second resolution)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- pieces of a result record ------------------------------------------------------------------------------
class CheckInfo(TypedDict):
    """The ``@pytest.mark.check`` declaration of a check, plus the first docstring line as ``title``."""

    id: str | None
    kind: str | None
    title: str | None
    card: str | None
    timeout: float | None


class _StaticInfoBase(TypedDict):
    impl: str
    family: str
    check: CheckInfo
    features: list[str]
    markers: list[str]


class StaticInfo(_StaticInfoBase, total=False):
    """What the harness knows of a check before it runs (attached to the item, travels with its reports).

    ``problems``: declaration errors of a collected check (its setup then errors); ``registry_error``: set on
    the items standing for xfail-registry problems (their failure is an ``error``)."""

    problems: list[str]
    registry_error: bool


class _MetricEntryBase(TypedDict):
    name: str
    value: float | None
    reference: float | None
    tolerance: float | None
    rule: str | None
    context: dict[str, int | float | str | bool | None]
    within: bool | None


class MetricEntry(_MetricEntryBase, total=False):
    """One ``record_metric`` (or value-less ``impl.note``) entry; ``nan`` is set when the value was NaN."""

    nan: bool


class XfailRecord(TypedDict):
    """The xfail-registry entry applied to a check (``XfailEntry.to_dict()``) and the file it came from."""

    index: int
    pattern: str
    reason: str
    kind: str
    link: str
    defect: str | None
    fix_level: str | None
    since: str | None
    fails_as: NotRequired[str | None]  # absent in records written before the key existed
    when: dict[str, object]
    file: str


class WorkerFailure(TypedDict):
    """How a worker process failed during a check (``WorkerError``); ``stacks`` (optional): the worker's Python
    stacks dumped just before a timeout killed it (faulthandler text)."""

    kind: str
    message: str
    stderr_tail: str
    stacks: NotRequired[str]


class ResultRecord(TypedDict):
    """One finished check (a ``{"type": "result"}`` line of results.jsonl)."""

    type: Literal["result"]
    nodeid: str
    impl: str
    family: str | None
    impl_version: str
    suite_version: str
    check: CheckInfo | None
    test: str
    module: str
    features: list[str]
    markers: list[str]
    outcome: Outcome
    outcome_detail: OutcomeDetail | None
    unavailable: str | None
    reason: str
    details: str
    xfail: XfailRecord | None
    metrics: list[MetricEntry]
    duration: float
    worker: WorkerFailure | None
    node: str | None
    finished: str
    #: (schema 1.2) the requirements the implementation does not declare, for a skipped-unsupported check: feature
    #: names, hooks as ``hook:<name>`` (a check lacking only hooks is applicable but not testable); else None
    missing: list[str] | None
    #: ``--refresh``: the earlier run this result was taken over from (``{"run_id", "suite_version"}``); absent
    #: for a check that ran in this run
    reused_from: NotRequired[dict[str, str]]


# -- the run header ---------------------------------------------------------------------------------------
class SuiteVersion(TypedDict):
    """``runinfo.suite_version()``: pyproject version, git SHA, dirty flag and ``<version>+g<sha7>``."""

    version: str
    git_sha: str
    dirty: bool
    string: str


class ImplHeader(TypedDict):
    """The implementation of a run: its registry entry and declaration (``capabilities`` None when the
    adapter could not be described; ``error`` / ``unavailable`` say why)."""

    name: str
    family: str
    role: str
    version: str
    source: str
    ref: str
    isolated: bool
    isolation: str
    description: str | None
    homepage: str | None
    study: dict[str, object] | None
    reproducibility: dict[str, object]
    init_kwargs: dict[str, object]
    capabilities: dict[str, object] | None
    features: dict[str, bool]
    hooks: list[str]
    error: str | None
    unavailable: str | None
    hooks_absent: NotRequired[dict[str, str]]


class RunOptions(TypedDict):
    isolation: str
    xfail_mark: str
    call_timeout: float | None
    worker_network: str
    profile: NotRequired[str | None]  # --profile; absent in records written before the option existed


class XfailHeader(TypedDict):
    """The implementation's xfail file (None when it has none) and its entries (``XfailEntry.to_dict()``)."""

    file: str | None
    entries: list[dict[str, object]]


class XfailFileInfo(TypedDict):
    """An xfail file a run uses (``xfails.file_provenance``): absolute path, sha256 (hex) of its bytes, ``git``
    (``tracked`` / ``untracked`` / ``modified`` / ``no git``), ``explicit`` (named with ``--xfails``) and
    ``package`` (an installed suite only: ``pristine`` / ``modified`` / ``unlisted`` against the installed
    wheel's RECORD; None from a checkout or without a RECORD)."""

    path: str
    sha256: str
    git: str
    explicit: bool
    package: str | None


class Truncation(TypedDict):
    """A torn last line of results.jsonl that ``--resume`` cut off: its 1-based line number and its bytes."""

    line: int
    bytes: int


class Nondeterminism(TypedDict):
    """A failed determinism check (``determinism`` marker): ``check`` (its node id), and ``may_flap``, the node
    ids of the checks whose outcome may differ in another run (see :func:`nondeterminism`)."""

    detected: bool
    check: str
    may_flap: list[str]
    xfails_may_flap: list[str]


class _RunHeaderOptional(TypedDict, total=False):
    """Keys added after schema 1 was fixed; absent in older runs."""

    sandbox: str  # what confined the worker processes (bubblewrap, unshare or nothing)
    #: ``--refresh``: the earlier run whose unchanged results this run took over (``{"run_id", "directory"}``)
    refresh: dict[str, str]


class RunHeader(_RunHeaderOptional):
    """What the harness writes at the top of a run (``RunWriter.create`` adds ``type``, ``schema``, ``run_id``)."""

    impl: ImplHeader
    suite: SuiteVersion
    frameworks: dict[str, str]
    platform: dict[str, str]
    device: str
    dataset: str | None
    seeds: list[int]
    env: dict[str, str]
    command: list[str]
    started: str
    kinds: dict[str, str]
    xdist_workers: object
    gate: bool
    options: RunOptions
    xfail: XfailHeader
    xfail_files: NotRequired[list[XfailFileInfo]]


class ResumeRecord(TypedDict):
    """A ``--resume`` session continuing a run (``reused`` is filled in from its end record on reading)."""

    started: str
    reused: int | None
    suite: str
    impl_version: str
    command: list[str]
    xfail_files: NotRequired[list[XfailFileInfo]]
    truncated: NotRequired[Truncation | None]


class GateResult(TypedDict):
    """``--gate``'s evaluation: passed when ``problems`` is empty."""

    passed: bool
    problems: list[str]


class NotRunEntry(TypedDict):
    """(schema 1.2) A check of the implementation that was collected but gave no result record: deselected
    (``reason`` ``not selected``: ``-k``, ``-m``, ``--deselect``) or not reached (``not reached``: the run was
    interrupted, or stopped by ``-x`` / ``--maxfail``). ``missing`` and ``markers`` tell whether it is applicable
    (``verdict.assess``)."""

    reason: str
    check: CheckInfo | None
    missing: list[str]
    markers: list[str]


class EndExtra(TypedDict):
    """What the harness adds to a run's end record (``RunWriter.finish`` writes type, status, exitstatus,
    finished)."""

    gate: GateResult | None
    reused: int
    nondeterminism: NotRequired[Nondeterminism | None]
    #: (schema 1.2) node id → the checks collected for the implementation that gave no result this session
    not_run: dict[str, NotRunEntry]


class ResultsDocument(TypedDict):
    """results.json: the run read back from results.jsonl (see ``reports.results.load_run``)."""

    schema: int
    schema_version: str
    status: str
    run: dict[str, object]
    resumes: list[dict[str, object]]
    end: dict[str, object] | None
    counts: dict[str, int]
    results: list[dict[str, object]]
    #: (schema 1.2) ``verdict.Conformance.to_json()`` of the run
    conformance: dict[str, object]


# -- reading records back ---------------------------------------------------------------------------------
def record_unavailable(record: Mapping[str, object]) -> str | None:
    """How to provide the implementation, when ``record`` is a check skipped because its implementation is not
    available here; None for any other record.

    Records of schema 1.1 say so in ``outcome_detail`` / ``unavailable``; older ones (committed verdicts) are
    read with :func:`_legacy_unavailable_why`.
    """
    if "outcome_detail" in record:
        why = record.get("unavailable")
        return str(why) if record["outcome_detail"] == "unavailable" and why is not None else None
    return _legacy_unavailable_why(record)


def _legacy_unavailable_why(record: Mapping[str, object]) -> str | None:
    """LEGACY (results written before schema 1.1, without ``outcome_detail``): the part after
    :data:`UNAVAILABLE_MARKER` of a skipped check's reason text. The only place that parses reason texts."""
    reason = str(record.get("reason") or "")
    if record.get("outcome") != "skipped" or UNAVAILABLE_MARKER not in reason:
        return None
    return reason.split(UNAVAILABLE_MARKER, 1)[1]


#: The marker of determinism checks: two runs with the same seed must give the same results.
DETERMINISM_MARKER = "determinism"
#: Outcomes that mean a check ran the implementation to a verdict (a skipped check cannot flap).
_VERDICT_OUTCOMES = ("passed", "failed", "xfail", "xpass")


def nondeterminism(results: list[dict[str, object]] | list[ResultRecord]) -> Nondeterminism | None:
    """Whether a determinism check of these result records failed, and which checks may then flap.

    A determinism check (records whose ``markers`` hold :data:`DETERMINISM_MARKER`) has failed when its outcome
    is ``failed`` or ``xfail`` (a declared failure is a known non-determinism). Then every other check that ran
    the implementation to a verdict (outcome passed, failed, xfail or xpass; registry items error) may flap:
    same-seed runs differ, and the suite does not trace which of the implementation's outputs a verdict used, so
    any verdict computed from them may change in another run. ``xfails_may_flap`` are those of them that are
    strict xfails or XPASSes (an xfail that flips to XPASS fails a strict run, and the reverse).

    Returns None when no determinism check failed (also when none ran).
    """
    recs = [dict(r) for r in results]
    failed = [r for r in recs if DETERMINISM_MARKER in _str_list(r.get("markers"))
              and r.get("outcome") in ("failed", "xfail")]  # fmt: skip
    if not failed:
        return None
    check = str(failed[0].get("nodeid"))
    ran = [
        r
        for r in recs
        if r.get("outcome") in _VERDICT_OUTCOMES and DETERMINISM_MARKER not in _str_list(r.get("markers"))
    ]
    flap = [str(r.get("nodeid")) for r in ran]
    xf = [str(r.get("nodeid")) for r in ran if r.get("outcome") in ("xfail", "xpass")]
    return {"detected": True, "check": check, "may_flap": flap, "xfails_may_flap": xf}


def _str_list(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []
