"""``--refresh RUN_DIR``: a new run that takes over, from an earlier run of the same implementation, the results of
the checks whose code has not changed since they were recorded, and runs only the others.

A check module edited in the suite makes every committed verdict that ran it stale (``reports.facts``); rerunning
a whole verdict for one changed module costs the hours of every other module. With ``--refresh`` a maintainer
reruns what changed and keeps the rest, and the new run is a complete run of the current suite.

A recorded result is taken over (copied into the new run, marked ``reused_from``) only when all of these hold,
else its check runs again:

- the earlier run is complete and of the same implementation, version, declaration (features, hooks,
  capabilities but their free-text shims), frameworks, device, ``--dataset``, ``--seeds``, profile and
  ``GRU4REC_*`` variables but the location-only ones (:data:`LOCATION_ONLY`) (a difference is a usage error
  naming it, since nothing could be reused);
- between the commit the result was recorded at and this checkout's HEAD, git shows no change in the family's
  check paths (``reports.facts.CHECK_PATHS_BY_FAMILY``: the check modules, their helpers, the reference, the
  data readers) that can affect its module (``reports.facts.affects``: not documentation, not another check
  module, not a helper only other modules import; a result from a dirty tree is judged by its commit, as
  ``reports.facts.suite_currency`` judges runs);
- its outcome is ``passed``, ``xfail`` or ``skipped-unsupported`` (a failure, an error, an XPASS or a plain skip
  runs again: the gate must see it measured now);
- the xfail registry still says the same of it: an ``xfail`` was held by an entry that still applies to the check
  unchanged (pattern, reason, kind, ...), and a check without one still has none.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from gru4rec_conformance import CHECKOUT_ROOT
from gru4rec_conformance.conformance._harness.state import State
from gru4rec_conformance.conformance._records.records import ResultRecord
from gru4rec_conformance.reports.facts import CHECK_PATHS, CHECK_PATHS_BY_FAMILY, affects, changed_files
from gru4rec_conformance.reports.results import RunDirError, load_run

__all__ = ["REUSABLE_OUTCOMES", "RefreshInfo", "prepare_refresh", "header_mismatch", "why_not_reusable"]

#: Outcomes a refresh takes over; any other runs again.
REUSABLE_OUTCOMES = ("passed", "xfail", "skipped-unsupported")
_SHA = re.compile(r"\+g([0-9a-f]{7,40})")
#: Free-text parts of a declaration that do not change what a check measures.
_TEXT_ONLY = ("shims",)


@dataclasses.dataclass
class RefreshInfo:
    """A ``--refresh`` run: its folder, header and results by node id."""

    directory: Path
    header: dict[str, Any]
    results: dict[str, dict[str, Any]]

    @property
    def run_id(self) -> str:
        return str(self.header.get("run_id") or self.directory)


def prepare_refresh(state: State) -> None:
    """Read every ``--refresh`` run into ``state.refresh``.

    Raises:
        pytest.UsageError: naming the folder, for one that cannot be read, did not complete, is of an
            implementation ``--impl`` does not select (or one already given ``--refresh`` or ``--resume``).
    """
    for raw in state.options.refresh:
        try:
            run = load_run(Path(raw).resolve())
        except (RunDirError, OSError) as exc:
            raise pytest.UsageError(f"--refresh {raw}: {exc}") from None
        name, family = run.impl.get("name"), run.impl.get("family")
        if not isinstance(name, str) or not isinstance(family, str) or (family, name) not in state.handles:
            raise pytest.UsageError(f"--refresh {raw}: that run is of implementation {name!r} ({family}), which is "
                                    "not selected by --impl")  # fmt: skip
        if (family, name) in state.refresh or (family, name) in state.resume:
            raise pytest.UsageError(f"--refresh {raw}: {name} already has a --refresh or --resume run")
        if run.status != "complete":
            raise pytest.UsageError(f"--refresh {raw}: that run is {run.status}, not complete (use --resume to "
                                    "continue it)")  # fmt: skip
        state.refresh[(family, name)] = RefreshInfo(run.directory, run.header, {r["nodeid"]: r for r in run.results})


def _declaration(impl: Mapping[str, Any]) -> dict[str, Any]:
    caps = {k: v for k, v in (impl.get("capabilities") or {}).items() if k not in _TEXT_ONLY}
    return {"version": impl.get("version"), "init_kwargs": impl.get("init_kwargs"), "features": impl.get("features"),
            "hooks": impl.get("hooks"), "capabilities": caps}  # fmt: skip


#: ``GRU4REC_*`` variables that say only where something is found, not what is measured: a local git mirror that
#: holds the pinned commits and the cache folder of checkouts and oracle fits (a checkout's commit is compared as
#: the implementation's version). ``GRU4REC_SHARED_DATA``, ``GRU4REC_WORKER_PYTHON`` and the rest still count.
LOCATION_ONLY = frozenset({"GRU4REC_MIRROR_DIR", "GRU4REC_CACHE_DIR"})


def _measured_env(header: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (header.get("env") or {}).items() if k not in LOCATION_ONLY}


def header_mismatch(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between the earlier run's header and this run's in what decides a check's result (empty:
    results may be reused). Both are run headers (``reporting.run_header``)."""
    out = []
    a, b = _declaration(old.get("impl") or {}), _declaration(new.get("impl") or {})
    for key in a:
        if a[key] != b[key]:
            out.append(f"the implementation's {key}")
    if (old.get("frameworks") or {}) != (new.get("frameworks") or {}):
        diff = sorted(k for k in {*(old.get("frameworks") or {}), *(new.get("frameworks") or {})}
                      if (old.get("frameworks") or {}).get(k) != (new.get("frameworks") or {}).get(k))  # fmt: skip
        out.append(f"framework versions ({', '.join(diff)})")
    for key in ("device", "dataset", "seeds"):
        if (old.get(key) or None) != (new.get(key) or None):
            out.append(key)
    a_env, b_env = _measured_env(old), _measured_env(new)
    if a_env != b_env:
        diff = sorted(k for k in {*a_env, *b_env} if a_env.get(k) != b_env.get(k))
        out.append(f"GRU4REC_* variables ({', '.join(diff)})")
    if (old.get("options") or {}).get("profile") != (new.get("options") or {}).get("profile"):
        out.append("profile")
    return out


def suite_commit(record: Mapping[str, Any]) -> str | None:
    """The commit a result was recorded at, from its ``suite_version`` (``2026.11.0+ge8f189b[.dirty]``)."""
    m = _SHA.search(str(record.get("suite_version") or ""))
    return m.group(1) if m else None


def _entry(e: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if e is None else {k: v for k, v in e.items() if k not in ("index", "file")}


def why_not_reusable(
    record: Mapping[str, Any],
    family: str,
    entries: Sequence[Mapping[str, Any]],
    changed: Callable[[str, tuple[str, ...]], tuple[tuple[str, str], ...] | None],
) -> str | None:
    """None when ``record`` (an earlier result) may stand for its check in this run, else why not.

    Args:
        record: the earlier result record.
        family: the check's family (its check paths: ``CHECK_PATHS_BY_FAMILY``).
        entries: the xfail entries that apply to the check now (``XfailRecord`` dicts).
        changed: ``(commit, paths) -> ((status, path), ...)`` of the files that differ between the commit and
            HEAD (``reports.facts.changed_files``), None when git cannot tell.
    """
    if record.get("outcome") not in REUSABLE_OUTCOMES:
        return f"outcome {record.get('outcome')}"
    sha = suite_commit(record)
    if sha is None:
        return "no suite commit recorded"
    files = changed(sha, CHECK_PATHS_BY_FAMILY.get(family, CHECK_PATHS))
    if files is None:
        return f"git cannot compare commit {sha} with HEAD"
    module = str(record.get("module") or "")
    touched = [p for _, p in files if affects(p, module)]
    if touched:
        return f"{len(touched)} files of its checks changed since {sha} (e.g. {touched[0]})"
    now = [_entry(e) for e in entries]
    if record.get("outcome") == "xfail":
        if _entry(record.get("xfail")) not in now:
            return "the xfail entry that held it changed or no longer applies"
    elif now:
        return "an xfail entry applies to it now"
    return None


def git_changed(sha: str, paths: tuple[str, ...]) -> tuple[tuple[str, str], ...] | None:
    """:func:`reports.facts.changed_files` on this checkout."""
    return changed_files(sha, str(CHECKOUT_ROOT), paths)


def reused_record(record: Mapping[str, Any], info: RefreshInfo) -> ResultRecord:
    """The copy of an earlier result that the new run records (``reused_from`` names where it comes from)."""
    copy = dict(record)
    copy["reused_from"] = {"run_id": info.run_id, "suite_version": str(record.get("suite_version") or "")}
    return copy  # type: ignore[return-value]
