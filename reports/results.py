"""Result records of a run and how they are read back (complete, interrupted or killed half-way).

A run directory ``reports/out/<impl>/<UTC timestamp>/`` holds ``results.jsonl``, appended line by line
while the run goes (crash-safe), and, once the run ends, ``results.json``, ``summary.md``,
``summary.html`` and ``plots/*.png`` (results.json follows ``conformance/_harness/results.schema.json``). The
JSON lines are:

- ``{"type": "run", ...}``: run metadata (implementation, capabilities, suite version, frameworks, ...);
- ``{"type": "result", ...}``: one per finished check (see :data:`OUTCOMES`; typed as
  ``conformance._harness.records.ResultRecord``);
- ``{"type": "resume", ...}``: a later ``--resume`` session continuing this run;
- ``{"type": "end", "status": "complete" | "interrupted", "reused": n, ...}``: the session ended (``reused``:
  checks it skipped because they had a verdict; copied into the preceding ``resume`` record on reading).

A file without a final ``end`` line belongs to a run that was killed: :func:`load_run` marks it
``incomplete``. When a check appears more than once (a resumed run re-ran it), the last line wins.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The record format and the outcomes are the harness's (conformance/_harness/records.py); re-exported for readers.
from gru4rec_conformance.conformance._harness.records import BAD_OUTCOMES as BAD_OUTCOMES
from gru4rec_conformance.conformance._harness.records import OUTCOMES as OUTCOMES
from gru4rec_conformance.conformance._harness.records import SCHEMA as SCHEMA


class RunDirError(ValueError):
    """A folder is not a readable run directory (message names the path)."""


@dataclasses.dataclass
class RunData:
    """A run read back from its directory.

    Attributes:
        directory: the run directory.
        header: the ``run`` record.
        results: the last ``result`` record per node id, in first-seen order.
        resumes: the ``resume`` records.
        end: the last ``end`` record after the last resume, or None.
        status: ``complete``, ``interrupted`` or ``incomplete`` (no end record: the run was killed).
    """

    directory: Path
    header: dict[str, Any]
    results: list[dict[str, Any]]
    resumes: list[dict[str, Any]]
    end: dict[str, Any] | None

    @property
    def status(self) -> str:
        return self.end.get("status", "incomplete") if self.end else "incomplete"

    @property
    def impl(self) -> dict[str, Any]:
        return self.header.get("impl", {})

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        for r in self.results:
            out[r.get("outcome", "error")] = out.get(r.get("outcome", "error"), 0) + 1
        out["total"] = len(self.results)
        return out

    def verdict_keys(self) -> dict[str, tuple[str, str]]:
        """``{node id: (impl_version, suite_version)}`` of every recorded verdict (for ``--resume``)."""
        return {r["nodeid"]: (r.get("impl_version", ""), r.get("suite_version", "")) for r in self.results}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a results.jsonl; a torn last line (the process died mid-write) is ignored."""
    records = []
    with open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if i >= len(lines) - 2:  # only the last line may be torn
                continue
            raise RunDirError(f"{path}: line {i + 1} is not valid JSON") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            raise RunDirError(f"{path}: line {i + 1} is not a record (a JSON object with a 'type')")
        if rec["type"] == "result" and not isinstance(rec.get("nodeid"), str):
            raise RunDirError(f"{path}: line {i + 1}: a result record without a 'nodeid'")
        records.append(rec)
    return records


def load_run(directory: Path | str) -> RunData:
    """Read a run directory from ``results.jsonl`` (the source of truth; results.json is derived).

    Raises:
        RunDirError: when the folder has no results.jsonl or its first record is not a run header.
    """
    directory = Path(directory)
    path = directory / "results.jsonl"
    if not path.is_file():
        json_path = directory / "results.json"
        if json_path.is_file():  # committed verdicts may keep only the final JSON
            data = json.loads(json_path.read_text(encoding="utf-8"))
            return RunData(
                directory, data.get("run", {}), data.get("results", []), data.get("resumes", []), data.get("end")
            )
        raise RunDirError(f"{directory}: not a run directory (no results.jsonl)")
    records = read_jsonl(path)
    if not records or records[0].get("type") != "run":
        raise RunDirError(f"{path}: the first record must be the run header")
    header = records[0]
    results: dict[str, dict[str, Any]] = {}
    resumes: list[dict[str, Any]] = []
    end = None
    open_resume: dict[str, Any] | None = None
    for rec in records[1:]:
        kind = rec.get("type")
        if kind == "result":
            results[rec["nodeid"]] = rec
        elif kind == "resume":
            resumes.append(rec)
            open_resume = rec
            end = None
        elif kind == "end":
            end = rec
            if open_resume is not None and rec.get("reused") is not None:
                # the resumed session's count of checks kept from earlier sessions, known only at its end
                open_resume["reused"] = rec["reused"]
            open_resume = None
    return RunData(directory, header, list(results.values()), resumes, end)


def iter_run_dirs(root: Path) -> Iterable[Path]:
    """Run directories under ``root`` (``<impl>/<timestamp>/``), any depth up to two."""
    root = Path(root)
    if not root.is_dir():
        return []
    out = []
    for impl_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for run_dir in sorted(p for p in impl_dir.iterdir() if p.is_dir()):
            if (run_dir / "results.jsonl").is_file() or (run_dir / "results.json").is_file():
                out.append(run_dir)
    return out
