"""Writing a run directory: crash-safe appends while the run goes, atomic summaries at the end.

``RunWriter.create`` makes a new, unique ``<root>/<impl>/<UTC timestamp>/`` (``gru4rec_conformance.fileio``:
``mkdir`` fails rather than reuse a folder, so an earlier run is never overwritten); ``RunWriter.resume`` continues
an existing one (``--resume``). Every record is one JSON line, flushed and fsynced before the next check starts.
:func:`finalize` (re)writes ``results.json``, ``summary.md``, ``summary.html`` and ``plots/*.png``
atomically from ``results.jsonl``; ``python -m gru4rec_conformance.reports render RUN_DIR`` calls it for a killed run.

Crash safety of a resume: a process killed in the middle of an append leaves a torn last line. ``RunWriter.resume``
cuts it off (:func:`repair_torn_tail`) before appending, so the next record never joins it, and notes the cut in
the resume record (``truncated: {line, bytes}``); it also removes the summaries of the earlier sessions, which no
longer describe the run, so a resumed run that dies leaves no stale verdict behind (``render`` rewrites them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gru4rec_conformance.conformance._records.records import RESULTS_SCHEMA_VERSION, Truncation, utc_now
from gru4rec_conformance.conformance._records.verdict import assess
from gru4rec_conformance.fileio import atomic_write_json, atomic_write_text, new_run_dir
from gru4rec_conformance.reports.files import REPORT_DIR_MODE, REPORT_FILE_MODE
from gru4rec_conformance.reports.plots import write_plots
from gru4rec_conformance.reports.render import render_html, render_markdown
from gru4rec_conformance.reports.results import SCHEMA, RunData, load_run
from gru4rec_conformance.reports.summary import build_summary

__all__ = ["RunWriter", "finalize", "utc_now", "safe_name", "repair_torn_tail", "SummaryWriteError", "DERIVED"]

#: The files :func:`finalize` derives from results.jsonl (plots/ aside).
DERIVED = ("results.json", "summary.md", "summary.html")


class SummaryWriteError(OSError):
    """One or more summaries of a run directory could not be written; the message names each file and why."""


def safe_name(name: str) -> str:
    """A folder name for an implementation name (``gru4rec_pytorch:inference_fix`` → ``gru4rec_pytorch.inference_fix``)."""
    return re.sub(r"[^A-Za-z0-9_.@-]", ".", name).strip(".") or "unnamed"


def _dumps(record: Mapping[str, Any]) -> str:
    return json.dumps(record, allow_nan=True, default=str, separators=(",", ":"))


class RunWriter:
    """Appends records to ``results.jsonl`` of one run directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / "results.jsonl"
        self._fh = open(self.path, "a", encoding="utf-8")
        os.chmod(self.path, REPORT_FILE_MODE)
        self.n_results = 0
        self.truncated: Truncation | None = None

    @classmethod
    def create(cls, root: Path | str, impl_name: str, header: Mapping[str, Any]) -> RunWriter:
        """New run directory ``<root>/<impl>/<timestamp>[-N]/`` with the header as the first line."""
        # the second run within one second is <stamp>-2, the third <stamp>-3, ...
        candidate = new_run_dir(Path(root) / safe_name(impl_name), first_suffix=2, attempts=9_999)
        os.chmod(candidate, REPORT_DIR_MODE)
        writer = cls(candidate)
        writer.append({"type": "run", "schema": SCHEMA, "run_id": f"{safe_name(impl_name)}/{candidate.name}", **header})
        return writer

    @classmethod
    def resume(cls, directory: Path | str, record: Mapping[str, Any]) -> RunWriter:
        """Continue an existing run directory: cut off a torn last line of results.jsonl
        (:func:`repair_torn_tail`; the cut is kept as ``truncated`` in the resume record and in
        ``writer.truncated``), remove the now stale :data:`DERIVED` summaries, append a ``resume`` record."""
        directory = Path(directory)
        truncated = repair_torn_tail(directory / "results.jsonl")
        for name in DERIVED:
            with contextlib.suppress(OSError):  # one that cannot be removed is overwritten, or named, by finalize
                (directory / name).unlink(missing_ok=True)
        writer = cls(directory)
        writer.truncated = truncated
        writer.append({"type": "resume", **record, "truncated": truncated})
        return writer

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record and make it durable (flush + fsync) before returning."""
        self._fh.write(_dumps(record) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        if record.get("type") == "result":
            self.n_results += 1

    def finish(
        self, status: str, exitstatus: int, extra: Mapping[str, Any] | None = None, plots: bool = True
    ) -> RunData:
        """Write the ``end`` record, close the file and write the summaries (see :func:`finalize`)."""
        self.append(
            {"type": "end", "status": status, "exitstatus": int(exitstatus), "finished": utc_now(), **(extra or {})}
        )
        self._fh.close()
        return finalize(self.directory, plots=plots)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


def repair_torn_tail(path: Path) -> Truncation | None:
    """Make results.jsonl end with a complete record before anything is appended to it.

    Bytes after the last newline are a record torn by a kill during its write: they are cut off (the file is
    truncated to the end of the last complete line and fsynced) and ``{"line": <1-based line number>, "bytes":
    <bytes removed>}`` is returned. A tail that is a whole JSON object (only its newline was lost) is kept and
    gets its newline; then, and for a file that ends with a newline, None is returned.

    Raises:
        OSError: the file cannot be read or written.
    """
    with open(path, "r+b") as fh:
        data = fh.read()
        if not data or data.endswith(b"\n"):
            return None
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        try:
            whole = isinstance(json.loads(tail), dict)
        except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
            whole = False
        if whole:
            fh.write(b"\n")
        else:
            fh.truncate(cut)
        fh.flush()
        os.fsync(fh.fileno())
    return None if whole else {"line": data.count(b"\n", 0, cut) + 1, "bytes": len(tail)}


def finalize(directory: Path | str, plots: bool = True) -> RunData:
    """(Re)write results.json, summary.md, summary.html and (unless ``plots`` is False) plots/ of a run
    directory, atomically.

    Works on partial runs too (status ``incomplete``). A plotting failure is recorded in the summaries
    instead of aborting them. Each of the three files is attempted even when another fails.

    Raises:
        RunDirError: results.jsonl cannot be read (the message names the file and the line).
        SummaryWriteError: a summary could not be rendered or written (the message names each such file).
    """
    run = load_run(directory)
    directory = Path(directory)
    written: dict[str, str] = {}
    plot_error = None if plots else "disabled (--no-report-plots)"
    if plots:
        try:
            written = write_plots(run, directory / "plots")
        except Exception as exc:  # plots are a convenience; the tables must still be written
            plot_error = f"{type(exc).__name__}: {exc}"
    if written:
        _publish((directory / "plots").iterdir(), directory / "plots")
    conformance = assess(run.header, run.results, run.end)
    built: list[dict[str, Any]] = []

    def summary() -> dict[str, Any]:  # built once, on first use (a failure is reported for each file using it)
        if not built:
            built.append(build_summary(run, plots=written, plot_error=plot_error, conformance=conformance))
        return built[0]

    payload = {
        "schema": SCHEMA,
        "schema_version": RESULTS_SCHEMA_VERSION,
        "status": run.status,
        "run": run.header,
        "resumes": run.resumes,
        "end": run.end,
        "counts": run.counts(),
        "results": run.results,
        "conformance": conformance.to_json(),
    }
    failures = []
    for name, write in (
        ("results.json", lambda p: atomic_write_json(p, payload, default=str, mode=REPORT_FILE_MODE)),
        ("summary.md", lambda p: atomic_write_text(p, render_markdown(summary()), mode=REPORT_FILE_MODE)),
        ("summary.html", lambda p: atomic_write_text(p, render_html(summary()), mode=REPORT_FILE_MODE)),
    ):
        try:
            write(directory / name)
        except Exception as exc:  # every summary is attempted; the error names each one that is missing
            failures.append(f"{directory / name}: not written ({type(exc).__name__}: {exc})")
    if failures:
        raise SummaryWriteError("; ".join(failures))
    return run


def _publish(files: Iterable[Path], folder: Path) -> None:
    """Give ``folder`` and the regular ``files`` in it the report modes (0755 / 0644), whatever the umask."""
    os.chmod(folder, REPORT_DIR_MODE)
    for f in files:
        if f.is_file() and not f.is_symlink():
            os.chmod(f, REPORT_FILE_MODE)
