"""``--first-run``: gating a new implementation for the first time.

A first run of a new adapter should report every problem quickly and end with something the maintainer can work
from. Under ``--first-run``:

- every worker call times out after :data:`~.options.FIRST_RUN_CALL_TIMEOUT_S` seconds unless ``--call-timeout``
  is given (:func:`~.options.read_options`); a timed-out worker first dumps its threads' Python stacks, which the
  failed check's details carry (:class:`~.isolation.WorkerTimeout`). In-process adapters have no call timeout;
- the checks run fast ones first (:func:`reorder`): not-slow before slow, non-metric before metric checks, then by
  the cost the harness assumes for the check's kind (its default call timeout);
- at the end, one DRAFT xfail file per implementation with failures is written next to its report
  (``<run dir>/xfails.draft.toml``, atomically; :func:`draft_text`), and its path is the last line of the output.
  It lists every failed or errored check under its check id (``SR-3``, ``SR-3[bpr-max]``; the node id where the
  check id would name more than the failed test), the way it failed (``fails_as``) and a reason from the failure
  message (the isolated cause when a probe isolated one). Its ``kind`` and ``link`` are the placeholder
  :data:`~.xfails.PLACEHOLDER`, which the xfail registry refuses: the draft cannot back a gate until a person has
  decided, entry by entry, whether the failure is a bug, a design difference or numerical, and where it is
  documented.

:func:`register` adds the :class:`FirstRun` plugin object of a session (in xdist workers too: they collect and
run the checks; only the controller writes drafts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Sequence
from pathlib import Path

import pytest

from gru4rec_conformance.conformance._harness.isolation import DEFAULT_TIMEOUTS_S
from gru4rec_conformance.conformance._harness.options import FIRST_RUN_CALL_TIMEOUT_S
from gru4rec_conformance.conformance._harness.recording import decode_properties
from gru4rec_conformance.conformance._harness.running import failure_way, static_info
from gru4rec_conformance.conformance._harness.state import State
from gru4rec_conformance.conformance._records.records import NotRunEntry, ResultRecord, utc_now
from gru4rec_conformance.conformance._records.verdict import rerun_command
from gru4rec_conformance.conformance._records.xfails import (
    FAILS_AS,
    KINDS,
    PLACEHOLDER,
    check_key_forms,
    pattern_matches,
    strip_impl_param,
)
from gru4rec_conformance.fileio import atomic_write_text

#: The report property that carries how a check failed (:func:`~.running.failure_way`) to the controller.
PROP_FAILS_AS = "gru4rec_conformance.conformance.first_run.fails_as"
#: The draft's file name in the run directory (``xfails.draft-2.toml`` ... when a resumed run already has one).
DRAFT_NAME = "xfails.draft.toml"
#: Most characters of a draft entry's reason.
REASON_CHARS = 300
#: A confirmed cause in a failure message (:mod:`.diagnosis`): ``isolated: <cause>``, not ``cause not isolated``.
_ISOLATED = re.compile(r"(?<!not )\bisolated: ")
#: What ends one isolated cause: the next finding of the diagnosis, or the measured figures after it.
_CAUSE_END = re.compile(r"; (?:isolated|not decided|ruled out|measured): ")


def order_key(item: pytest.Item) -> tuple[int, int, int, float]:
    """Sort key of :func:`reorder`: xfail-registry items first, then not-slow before ``slow``, non-metric before
    ``metric`` checks, then by the kind's default call timeout (the check's own ``timeout`` when it has one), the
    harness's estimate of what a check of that kind costs. Items that are no checks sort with the cheapest."""
    info = static_info(item)
    if info is None:
        return (1, 0, 0, 0.0)
    if info.get("registry_error"):
        return (0, 0, 0, 0.0)
    check = info["check"]
    markers = set(info["markers"])
    kind = check.get("kind") or "default"
    cost = check.get("timeout") or DEFAULT_TIMEOUTS_S.get(kind, DEFAULT_TIMEOUTS_S["default"])
    return (1, int("slow" in markers), int("metric" in markers or kind == "metric"), float(cost))


def reorder(items: list[pytest.Item]) -> None:
    """Put ``items`` in first-run order (:func:`order_key`), in place; stable, so checks of one cost keep the
    order pytest collected them in (and every xdist worker computes the same order)."""
    items[:] = sorted(items, key=order_key)


def isolated_causes(message: str) -> list[str]:
    """The causes a failure message names as isolated (``"...: isolated: A (evidence); ruled out: B"`` → ``["A
    (evidence)"]``); empty when it names none (``cause not isolated; candidates: ...`` included)."""
    out = []
    for m in _ISOLATED.finditer(message):
        rest = message[m.end() :]
        end = _CAUSE_END.search(rest)
        cause = (rest[: end.start()] if end else rest).strip()
        if cause:
            out.append(cause)
    return out


def draft_reason(record: ResultRecord) -> str:
    """A draft entry's reason: the isolated cause(s) of the failure message when it has any, else the message's
    first line; at most :data:`REASON_CHARS` characters."""
    first = (str(record.get("reason") or "").strip().splitlines() or [""])[0].strip()
    causes = isolated_causes(first)
    text = ("isolated: " + "; isolated: ".join(causes)) if causes else first
    worker = record.get("worker")
    if not causes and worker and worker.get("kind") == "timeout":
        # the harness's advice on timeouts is no reason; where the worker was stuck is
        frame = stuck_at(str(worker.get("stacks") or ""))
        text = text.split("; ", 1)[0] + (f" (stuck at {frame})" if frame else "")
    text = text or f"{record['outcome']} without a message"
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def stuck_at(stacks: str) -> str:
    """The innermost frame of the first thread in a worker's faulthandler dump (``dummies.py:53 in fit``), ""
    when the dump has none."""
    m = re.search(r'File "([^"]*)", line (\d+) in (\S+)', stacks)
    return f"{Path(m.group(1)).name}:{m.group(2)} in {m.group(3)}" if m else ""


def _check_id(record: ResultRecord) -> str | None:
    check = record.get("check")
    return check.get("id") if check else None


def _own_id(test: str, impl: str) -> str:
    """``test_x[<impl>-bpr-max]`` → ``test_x[bpr-max]``: the test part as xfail entries name it."""
    return strip_impl_param(test, impl)


def _module_id(module: str) -> str:
    """A record's module as xfail files name it: from its last ``conformance/`` on (an installed wheel's node ids
    point into site-packages)."""
    i = module.rfind("conformance/")
    return module[i:] if i >= 0 else module


def draft_key(record: ResultRecord, planned: dict[str, NotRunEntry]) -> str:
    """The id of a failed check's draft entry: its check id with the test's parameters (``SR-3``,
    ``SR-3[bpr-max]``) when that names this test alone among the implementation's collected checks
    (``planned``), else the node id without the implementation (``conformance/<family>/<file>.py::<test>``)."""
    impl = record["impl"]
    own = _own_id(record["test"], impl)
    node_key = f"{_module_id(record['module'])}::{own}"
    cid = _check_id(record)
    if not cid:
        return node_key
    key = check_key_forms(cid, [own])[0]
    others = 0
    for nodeid, entry in planned.items():
        check = entry.get("check")
        other_id = check.get("id") if check else None
        if not other_id:
            continue
        form = check_key_forms(other_id, [_own_id(nodeid.partition("::")[2] or nodeid, impl)])[0]
        others += pattern_matches(key, form)
    return key if others <= 1 else node_key


def _toml_str(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's; DEL, which JSON leaves, is escaped too)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _comment(text: str) -> str:
    """``text`` on one comment line (no line breaks or control characters)."""
    return "".join(ch if ch.isprintable() else " " for ch in text)


def draft_text(impl: str, records: Sequence[ResultRecord], planned: dict[str, NotRunEntry],
               command: Sequence[str], ways: dict[str, str], run_dir: Path | None) -> str:  # fmt: skip
    """The draft xfail file (TOML) of implementation ``impl``: one ``[[xfail]]`` entry per failed or errored check
    of ``records`` (registry problems and XPASSes are left out: they are no failures of the implementation),
    with its check id (:func:`draft_key`), ``fails_as`` (from ``ways``, node id → ``assertion``/``crash``; left
    out when unknown), the reason (:func:`draft_reason`), and ``kind``/``link`` set to the placeholder. Comments
    say what to do, and give each entry's node id, full message line and rerun command. Entries whose key would
    repeat an earlier one are merged into it (their node ids listed)."""
    lines = [
        f"# DRAFT xfail file for implementation {impl!r}, written by --first-run on {utc_now()}"
        + (f" (run {run_dir})" if run_dir else "")
        + ".",
        f'# Not usable as it is: every kind and link is the placeholder "{PLACEHOLDER}", which the xfail registry',
        "# refuses. Review each entry: fix the implementation and delete the entry, or set",
        f"#   kind = one of {' | '.join(KINDS)} (bug: a defect of the implementation; design-difference: it",
        "#          differs from GRU4Rec on purpose; numerical: a tolerance matter), and",
        '#   link = the upstream issue or evidence ("none" if there is none),',
        "# and check the reason. A crash that is a worker timeout may only be slowness under --first-run's short",
        f"# call timeout ({FIRST_RUN_CALL_TIMEOUT_S:g}s unless --call-timeout was given): rerun that check with a "
        "larger --call-timeout first.",
        "# Then keep the file in your repository and pass it with --xfails (format: conformance/xfails/README.md).",
        f"implementation = {_toml_str(impl)}",
    ]
    entries: dict[str, list[ResultRecord]] = {}
    for r in records:
        if r["impl"] != impl or r["outcome"] not in ("failed", "error"):
            continue
        if _check_id(r) == "XFAIL-REGISTRY":
            continue
        entries.setdefault(draft_key(r, planned), []).append(r)
    for key, group in entries.items():
        first = group[0]
        group_ways = {ways.get(r["nodeid"]) for r in group}
        way = group_ways.pop() if len(group_ways) == 1 else None
        lines.append("")
        lines.append("[[xfail]]")
        for r in group:
            message = (str(r.get("reason") or "").strip().splitlines() or [""])[0]
            lines.append(f"# {r['outcome']}: {_comment(r['nodeid'])}")
            lines.append(f"#   message: {_comment(message[:1000])}")
            lines.append(f"#   rerun: {_comment(rerun_command(command, r['nodeid'], impl))}")
        lines.append(f"id = {_toml_str(key)}")
        lines.append(f"reason = {_toml_str(draft_reason(first))}")
        lines.append(f'kind = "{PLACEHOLDER}"            # {" | ".join(KINDS)}')
        lines.append(f'link = "{PLACEHOLDER}"            # upstream issue or evidence; "none" if there is none')
        if way in FAILS_AS:
            lines.append(f"fails_as = {_toml_str(way)}" + ("   # the implementation raised, its worker died or timed "
                                                            "out" if way == "crash" else "   # the check's own finding"))  # fmt: skip
    text = "\n".join(lines) + "\n"
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    tomllib.loads(text)  # what is written must parse: a bug here must not leave the maintainer a broken file
    return text


def _free_path(directory: Path) -> Path:
    """``directory/xfails.draft.toml``, or ``xfails.draft-N.toml`` when a resumed run already has one."""
    path = directory / DRAFT_NAME
    n = 2
    while path.exists():
        path = directory / DRAFT_NAME.replace(".draft.", f".draft-{n}.")
        n += 1
    return path


class FirstRun:
    """The plugin object of a ``--first-run`` session: orders the checks, carries each failure's way to the
    controller, and writes the drafts at the end."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.ways: dict[str, str] = {}  # node id -> assertion | crash (first failing phase)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # last: after -k/-m and pytest's own reordering by higher-scoped fixtures, so the order holds
        reorder(items)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, object, object]:  # fmt: skip
        report = yield
        exc = call.excinfo.value if call.excinfo is not None else None
        skipped = isinstance(exc, (pytest.skip.Exception, pytest.xfail.Exception))
        if isinstance(report, pytest.TestReport) and exc is not None and not skipped and static_info(item):
            # inside running's outermost wrapper, which encodes the harness's properties for xdist
            report.user_properties = [*report.user_properties, (PROP_FAILS_AS, failure_way(exc))]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid in self.ways:
            return
        for key, value in decode_properties(report.user_properties):
            if key == PROP_FAILS_AS and isinstance(value, str):
                self.ways[report.nodeid] = value

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # a plain hook: inside reporting's wrapper that prints state.draft_lines as the output's last lines
        state = self.state
        if state.options.is_xdist_worker or state.recorder is None:
            return
        records = state.recorder.records
        command = ["pytest", *state.config.invocation_params.args]
        for (family, name), _handle in state.handles.items():
            mine = [r for r in records if r["impl"] == name and r.get("family") in (family, None)
                    and r["outcome"] in ("failed", "error") and _check_id(r) != "XFAIL-REGISTRY"]  # fmt: skip
            if not mine:
                if any(r["impl"] == name for r in records):
                    state.draft_lines.append(f"first run: {name}: no failure to declare, no draft xfail file written")
                continue
            writer = state.writers.get((family, name))
            if writer is None:
                state.draft_lines.append(f"first run: {name}: {len(mine)} failure(s), but no draft xfail file: "
                                         "it is written next to the report, and this run writes none (--no-report)")  # fmt: skip
                continue
            planned = state.planned.get((family, name), {})
            try:
                text = draft_text(name, mine, planned, command, self.ways, writer.directory)
                path = atomic_write_text(_free_path(writer.directory), text)
            except (OSError, ValueError) as exc:
                state.draft_lines.append(f"first run: {name}: draft xfail file not written ({type(exc).__name__}: "
                                         f"{exc})")  # fmt: skip
                continue
            state.draft_lines.append(f"first run: DRAFT xfail file of {name} ({len(mine)} failure(s); review it, "
                                     f"then pass it with --xfails): {path}")  # fmt: skip


def _name(state: State) -> str:
    return f"conformance-first-run-{id(state.config)}"


def register(state: State) -> None:
    """Register the session's :class:`FirstRun` plugin object (``--first-run``)."""
    state.config.pluginmanager.register(FirstRun(state), _name(state))


def unregister(state: State) -> None:
    """Unregister it again (at unconfigure; nothing when it was never registered)."""
    plugin = state.config.pluginmanager.get_plugin(_name(state))
    if plugin is not None:
        state.config.pluginmanager.unregister(plugin)


__all__ = ["DRAFT_NAME", "PROP_FAILS_AS", "FirstRun", "draft_key", "draft_reason", "draft_text",
           "isolated_causes", "order_key", "register", "reorder", "stuck_at", "unregister"]  # fmt: skip
