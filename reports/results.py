"""Result records of a run and how they are read back (complete, interrupted or killed half-way).

A run directory ``reports/out/<impl>/<UTC timestamp>/`` holds ``results.jsonl``, appended line by line
while the run goes (crash-safe), and, once the run ends, ``results.json``, ``summary.md``,
``summary.html`` and ``plots/*.png`` (results.json follows ``conformance/_records/results.schema.json``). The
JSON lines are:

- ``{"type": "run", ...}``: run metadata (implementation, capabilities, suite version, frameworks, ...);
- ``{"type": "result", ...}``: one per finished check (see :data:`OUTCOMES`; typed as
  ``conformance._records.records.ResultRecord``);
- ``{"type": "resume", ...}``: a later ``--resume`` session continuing this run (``truncated``: the torn last
  line it cut off, if any);
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

from gru4rec_conformance.conformance._records import verdict

# The record format and the outcomes are the records layer's (conformance/_records/records.py); re-exported for readers.
from gru4rec_conformance.conformance._records.records import BAD_OUTCOMES as BAD_OUTCOMES
from gru4rec_conformance.conformance._records.records import OUTCOMES as OUTCOMES
from gru4rec_conformance.conformance._records.records import SCHEMA as SCHEMA


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
        stored_conformance: the ``conformance`` object of a results.json that has one (written by the harness),
            else None; :meth:`conformance` prefers it.
        torn: ``{"line", "bytes"}`` of a torn last line of results.jsonl that reading ignored, else None.
    """

    directory: Path
    header: dict[str, Any]
    results: list[dict[str, Any]]
    resumes: list[dict[str, Any]]
    end: dict[str, Any] | None
    stored_conformance: dict[str, Any] | None = None
    torn: dict[str, int] | None = None

    def conformance(self) -> Any:
        """The conformance status of the run (``conformance._records.verdict.Conformance``): the stored one when
        it is readable, else computed from the records with ``verdict.assess`` (runs written before the harness
        stored it)."""
        if self.stored_conformance:
            try:
                stored = verdict.Conformance.from_json(self.stored_conformance)
            except (KeyError, ValueError, TypeError):
                pass  # an older or damaged form: recompute
            else:
                if "features" in self.stored_conformance:
                    return stored
                # stored before the feature coverage was: it follows from the header alone
                return dataclasses.replace(stored, features=verdict.feature_coverage(self.header))
        return verdict.assess(self.header, self.results, self.end)

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


#: Names a run's records may have, in the order :func:`load_run` tries them (the gzipped ones are committed verdicts).
RESULT_FILES = ("results.jsonl", "results.jsonl.gz", "results.json", "results.json.gz")


def _read_bytes(path: Path) -> bytes:
    if path.name.endswith(".gz"):
        import gzip

        try:
            return gzip.decompress(path.read_bytes())
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
            raise RunDirError(f"{path}: not a readable gzip file ({exc})") from None
    return path.read_bytes()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a results.jsonl (or results.jsonl.gz); a torn last line (the process died mid-write) is ignored.

    Raises:
        RunDirError: naming the file and the 1-based line when any other line is not valid JSON, not a record (an
            object with a ``type``), or a result without a ``nodeid``.
    """
    return _read_jsonl(path)[0]


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
    """:func:`read_jsonl`, and ``{"line", "bytes"}`` of the torn last line it ignored (None when there was none)."""
    records = []
    torn = None
    lines = _read_bytes(Path(path)).split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            if i == len(lines) - 1:  # only an unterminated last line is torn (a write is one call, newline last)
                torn = {"line": i + 1, "bytes": len(line)}
                continue
            raise RunDirError(f"{path}: line {i + 1} is not valid JSON (the run folder is damaged)") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            raise RunDirError(f"{path}: line {i + 1} is not a record (a JSON object with a 'type')")
        if rec["type"] == "result" and not isinstance(rec.get("nodeid"), str):
            raise RunDirError(f"{path}: line {i + 1}: a result record without a 'nodeid'")
        records.append(rec)
    return records, torn


def read_results_json(path: Path) -> dict[str, Any]:
    """The object of a results.json (or results.json.gz).

    Raises:
        RunDirError: naming the file, line and column when it is not valid JSON, or when it is not an object.
    """
    try:
        data = json.loads(_read_bytes(Path(path)))
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path}: line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{path}: not UTF-8 text ({exc.reason})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: line 1: expected a JSON object, found {type(data).__name__}")
    return data


def results_file(directory: Path | str) -> Path | None:
    """The file :func:`load_run` reads in ``directory`` (see :data:`RESULT_FILES`), or None."""
    for name in RESULT_FILES:
        if (Path(directory) / name).is_file():
            return Path(directory) / name
    return None


def load_run(directory: Path | str) -> RunData:
    """Read a run directory from ``results.jsonl`` (the source of truth; results.json is derived).

    A folder without results.jsonl is read from results.jsonl.gz, results.json or results.json.gz, in that order
    (committed verdicts keep one gzipped results.json).

    Raises:
        RunDirError: when the folder has none of these files, a file is not valid JSON (the message names the file
            and the line), or the first record of a results.jsonl is not a run header.
    """
    directory = Path(directory)
    path = results_file(directory)
    if path is None:
        raise RunDirError(f"{directory}: not a run directory (no results.jsonl)")
    if path.name.startswith("results.json") and not path.name.startswith("results.jsonl"):
        data = read_results_json(path)
        return RunData(
            directory,
            data.get("run", {}),
            data.get("results", []),
            data.get("resumes", []),
            data.get("end"),
            stored_conformance=data.get("conformance") if isinstance(data.get("conformance"), dict) else None,
        )
    records, torn = _read_jsonl(path)
    if not records or records[0].get("type") != "run":
        raise RunDirError(f"{path}: line 1: the first record must be the run header")
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
    return RunData(directory, header, list(results.values()), resumes, end, torn=torn)


def iter_run_dirs(root: Path) -> Iterable[Path]:
    """Run directories under ``root`` (``<impl>/<timestamp>/`` of a report folder, ``<impl>/[<level>/]<version>/`` of
    committed verdicts, a run directory itself): every folder holding one of :data:`RESULT_FILES`, sorted by path."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = {p.parent for name in RESULT_FILES for p in root.rglob(name) if p.is_file()}
    return sorted(found)
