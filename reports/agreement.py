"""The study's expected outcome per check (docs/study.md, 'Expected outcome per check') computed against our committed verdicts.

``python -m gru4rec_conformance.reports study-agreement [ROOT ...] [--out DIR]`` reads the runs under the roots
(default: ``reports/verdicts``), keeps the newest run per verdict key (complete runs first, as ``reports render``
does), and writes ``DIR/study_agreement.csv`` and ``DIR/study_agreement.md``: for every implementation and fix level
of that table (``datasets/study/study_expected.csv``) and every column of its row, the study's expectation, our outcome and
whether they agree. A table row without any verdict is listed with every cell ``not run (no verdict)``. The same
cells feed the verdict cards (:func:`cells`) and the scoreboard's study column (:func:`tally`).

Our outcome of one cell comes from the run's result records of the cell's check ids (:func:`study.check_ids`:
``LF-1/2`` is LF-1 and LF-2, plus a check its note names). Each record counts as

- ``fail``: the check failed (outcome ``failed``), an undeclared defect;
- ``xfail``: the check failed as the xfail registry declares (the defect's catalogue ids are named);
- ``pass``: the check passed (``passed``, or ``xpass``: a declared defect that did not reproduce);
- ``n/a``: skipped because the implementation declares the feature absent (the reason names the feature);
- ``not run``: skipped for any other reason — the adapter lacks a hook the check needs, the implementation refused
  a value at run time, a GPU or ``slow`` check outside the run, an error (no measurement) — or no record at all
  (the check was not in this run).

and the cell takes, in this order: ``fail`` if any record failed, else ``xfail`` if any xfailed, else ``pass`` if any
passed (*complete* when no applicable record was left not run), else ``n/a`` if every record is n/a, else ``not run``.

Agreement (:func:`agreement`), per the study's expectation:

=================  =========  =========  ===============  ===============  ==========  ==========
study expects      fail       xfail      pass (complete)  pass (partial)   n/a         not run
=================  =========  =========  ===============  ===============  ==========  ==========
``FAIL``           agree      agree      disagree         not tested       not tested  not tested
``pass`` / ``n/a`` disagree   disagree   agree            agree            not tested  not tested
=================  =========  =========  ===============  ===============  ==========  ==========

A cell is agree or disagree only when a check of it ran. A partial pass cannot refute an expected failure (the part
that did not run may be the one that fails); a declared-absent feature is not tested whatever the study expects (no
check of the cell ran, so nothing was measured to agree with). Every "not tested" cell says why
(:func:`not_tested_reason`): ``absent feature``, ``missing hook``, ``refused`` (by the implementation at run time),
``could not run`` (an error, a GPU or slow check outside the run, no record) or ``partial`` (an expected failure
whose checks passed only in part).
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gru4rec_conformance.datasets import study
from gru4rec_conformance.fileio import atomic_write_text
from gru4rec_conformance.reports.compact import judged_version
from gru4rec_conformance.reports.files import REPORT_FILE_MODE
from gru4rec_conformance.reports.render import md_cell
from gru4rec_conformance.reports.results import RunData
from gru4rec_conformance.reports.selection import collect_runs, is_matrix, newest_per_key

__all__ = ["FAIL", "XFAIL", "PASS", "NA", "NOT_RUN", "Ours", "classify", "our_outcome", "agreement",
           "not_tested_reason", "not_run_category", "cells", "tally", "agreement_table", "render_csv", "render_markdown",
           "write_agreement", "CSV_FIELDS"]  # fmt: skip

FAIL, XFAIL, PASS, NA, NOT_RUN = "fail", "xfail", "pass", "n/a", "not run"
#: Columns of study_agreement.csv, in order.
CSV_FIELDS = ("study_implementation", "fix_level", "implementation", "judged", "checks", "check_ids", "expected",
              "study_note", "ours", "complete", "our_note", "agreement", "why_not_tested")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Ours:
    """Our outcome of one cell of the expected-outcome table.

    Attributes:
        outcome: :data:`FAIL`, :data:`XFAIL`, :data:`PASS`, :data:`NA` or :data:`NOT_RUN`.
        note: what the records say, e.g. ``"2/3 xfail (GP-1)"``, ``"3 passed, 1 not run (hook:train_step)"``.
        complete: for :data:`PASS`, whether every applicable record ran (False: some were not run).
        untested: why the records that did not run did not run, by category (``"absent feature (logq)"``,
            ``"missing hook (hook:train_step)"``, ``"refused (n_sample)"``, ``"could not run (error)"``), joined
            by ``"; "``; empty when every record ran.
    """

    outcome: str
    note: str
    complete: bool = True
    untested: str = ""


def _missing(record: dict[str, Any]) -> list[str]:
    """What an n/a record lacks, from its ``missing`` list or, for records without one, its reason's
    ``needs ... (not declared)``."""
    missing = record.get("missing")
    if missing is None:
        m = re.search(r": needs (.+?) \(not declared\)", str(record.get("reason") or ""))
        missing = [x.strip() for x in m.group(1).split(",")] if m else []
    return [str(x) for x in missing]


def classify(record: dict[str, Any]) -> tuple[str, str]:
    """One result record as ``(outcome, why)``: the outcome one of :data:`FAIL` … :data:`NOT_RUN` (module
    docstring), ``why`` a few words for skipped records (the missing hook or feature, the skip reason)."""
    outcome = record.get("outcome")
    if outcome == "failed":
        return FAIL, ""
    if outcome == "xfail":
        return XFAIL, ""
    if outcome in ("passed", "xpass"):
        return PASS, "xpass" if outcome == "xpass" else ""
    if outcome == "skipped-unsupported":
        missing = _missing(record)
        if record.get("outcome_detail") == "refused":  # requirements met, a value refused at run time: not absent
            return NOT_RUN, "refused: " + (", ".join(missing) or "(unnamed)")
        if missing and all(m.startswith("hook:") for m in missing):
            return NOT_RUN, ", ".join(missing)
        return NA, ", ".join(missing) or str(record.get("reason") or "feature absent")
    reason = str(record.get("reason") or outcome or "")
    return NOT_RUN, ("error" if outcome == "error" else reason.split(":")[0].strip()) or "skipped"


def not_run_category(outcome: str, why: str) -> str:
    """The not-tested category of one record that did not run, from :func:`classify`'s ``(outcome, why)``:
    ``absent feature (...)``, ``missing hook (...)``, ``refused (...)`` or ``could not run (...)``."""
    if outcome == NA:
        return f"absent feature ({why})"
    if why.startswith("hook:"):
        return f"missing hook ({why})"
    if why.startswith("refused: "):
        return f"refused ({why.removeprefix('refused: ')})"
    return f"could not run ({why or 'skipped'})"


def _why(counter: collections.Counter[str]) -> str:
    return "; ".join(f"{w} ({n}×)" if n > 1 else w for w, n in counter.most_common(3)) + (
        "; …" if len(counter) > 3 else ""
    )


def our_outcome(results: Sequence[dict[str, Any]], ids: Sequence[str], conformance: Any = None) -> Ours:
    """Our outcome over every record of the check ``ids`` in ``results`` (the rule is in the module docstring).

    Args:
        results: the run's result records (``RunData.results``).
        ids: check ids (``["LF-1", "LF-2"]``).
        conformance: the run's ``Conformance`` (``RunData.conformance()``), whose defects name the catalogue ids of an
            xfail or failure; None leaves them out of the note.
    """
    rs = [r for r in results if (r.get("check") or {}).get("id") in ids]
    if not rs:
        return Ours(NOT_RUN, "not in this run", untested="could not run (not in this run)")
    kinds = [classify(r) for r in rs]
    count = collections.Counter(k for k, _ in kinds)
    n = len(rs)
    defects = sorted({i for d in (conformance.defects if conformance is not None else ()) if d.check_id in ids
                      for i in d.defect_ids})  # fmt: skip
    named = f" ({', '.join(defects)})" if defects else ""
    not_run = collections.Counter(w for k, w in kinds if k == NOT_RUN)
    untested = "; ".join(dict.fromkeys(not_run_category(k, w) for k, w in kinds if k in (NA, NOT_RUN)))
    if count[FAIL]:
        extra = f", {count[XFAIL]} xfail" if count[XFAIL] else ""
        return Ours(FAIL, f"{count[FAIL]}/{n} failed{extra}{named}")
    if count[XFAIL]:
        return Ours(XFAIL, f"{count[XFAIL]}/{n} xfail{named}")
    if count[PASS]:
        parts = [f"{count[PASS]} passed"]
        if any(w == "xpass" for k, w in kinds if k == PASS):
            parts[0] += " (xpass among them)"
        if count[NA]:
            parts.append(f"{count[NA]} n/a")
        if not_run:
            parts.append(f"{count[NOT_RUN]} not run ({_why(not_run)})")
        return Ours(PASS, ", ".join(parts), complete=not count[NOT_RUN], untested=untested)
    if count[NA] == n:
        return Ours(NA, "feature absent: " + _why(collections.Counter(w for _, w in kinds)), untested=untested)
    return Ours(NOT_RUN, _why(not_run) + (f" ({count[NA]} n/a)" if count[NA] else ""), untested=untested)


def agreement(expected: str, ours: Ours) -> str:
    """:data:`study.AGREE`, :data:`study.DISAGREE` or :data:`study.NOT_TESTED` for the study's ``expected``
    (``FAIL``, ``pass`` or ``n/a``) against our outcome (the table in the module docstring)."""
    if ours.outcome in (NOT_RUN, NA):  # no check of the cell ran: nothing measured to agree or disagree with
        return study.NOT_TESTED
    flagged = ours.outcome in (FAIL, XFAIL)
    if expected == "FAIL":
        if flagged:
            return study.AGREE
        return study.DISAGREE if ours.outcome == PASS and ours.complete else study.NOT_TESTED
    return study.DISAGREE if flagged else study.AGREE


def not_tested_reason(expected: str, ours: Ours) -> str:
    """Why a cell is "not tested" (:func:`agreement`), empty when it is agree or disagree: the categories of the
    records that did not run (``absent feature (...)``, ``missing hook (...)``, ``refused (...)``, ``could not run
    (...)``), prefixed ``partial:`` for an expected failure whose checks passed only in part."""
    if agreement(expected, ours) != study.NOT_TESTED:
        return ""
    why = ours.untested or f"could not run ({ours.note or 'no record'})"
    return f"partial: {why}" if ours.outcome == PASS else why


def _ours_label(ours: Ours) -> str:
    return "pass (partial)" if ours.outcome == PASS and not ours.complete else ours.outcome


def cells(run: RunData, conformance: Any = None) -> list[dict[str, str]]:
    """The expected-outcome cells of one run, in the table's column order (empty when the table has no row for it).

    Each cell: ``checks`` (the column, ``LF-1/2``), ``check_ids`` (``LF-1 LF-2``), ``expected`` (``FAIL`` / ``pass`` /
    ``n/a``), ``study_note``, ``ours`` (``fail`` / ``xfail`` / ``pass`` / ``pass (partial)`` / ``n/a`` / ``not run``),
    ``complete`` (``yes`` / ``no``), ``our_note``, ``agreement`` and ``why_not_tested`` (:func:`not_tested_reason`;
    empty unless the cell is not tested).
    """
    conf = conformance if conformance is not None else run.conformance()
    out = []
    for row in study.expected(str(run.impl.get("name") or ""), run.impl.get("study")):
        ids = study.check_ids(row["checks"], row["note"])
        ours = our_outcome(run.results, ids, conf)
        out.append({"checks": row["checks"], "check_ids": " ".join(ids), "expected": row["expected"],
                    "study_note": row["note"], "ours": _ours_label(ours), "complete": "yes" if ours.complete else "no",
                    "our_note": ours.note, "agreement": agreement(row["expected"], ours),
                    "why_not_tested": not_tested_reason(row["expected"], ours)})  # fmt: skip
    return out


def tally(rows: Iterable[dict[str, str]]) -> dict[str, int]:
    """``{"agree": n, "disagree": n, "not tested": n}`` over cells."""
    count = collections.Counter(r["agreement"] for r in rows)
    return {k: count.get(k, 0) for k in (study.AGREE, study.DISAGREE, study.NOT_TESTED)}


def agreement_table(runs: Sequence[RunData]) -> list[dict[str, str]]:
    """Every expected-outcome cell of every run that has a table row, then the cells of the rows no run covers.

    Args:
        runs: one run per verdict key (see :func:`gru4rec_conformance.reports.selection.newest_per_key`).

    Returns:
        Rows with the keys :data:`CSV_FIELDS` (strings), grouped by table row in the table's order and, within one,
        by implementation name.
    """
    by_key: dict[tuple[str, str], list[dict[str, str]]] = {}
    for run in sorted(runs, key=lambda r: str(r.impl.get("name") or "")):
        key = study.table_key(str(run.impl.get("name") or ""), run.impl.get("study"))
        if key is None:
            continue
        for cell in cells(run):
            by_key.setdefault(key, []).append({"study_implementation": key[0], "fix_level": key[1],
                                               "implementation": str(run.impl.get("name") or "?"),
                                               "judged": judged_version(run), **cell})  # fmt: skip
    out: list[dict[str, str]] = []
    for key in dict.fromkeys((r["implementation"], r["fix_level"]) for r in study.expected_rows()):
        if key in by_key:
            out += by_key[key]
            continue
        for row in study.expected_rows():
            if (row["implementation"], row["fix_level"]) == key:
                ids = study.check_ids(row["checks"], row["note"])
                out.append({"study_implementation": key[0], "fix_level": key[1], "implementation": "–",
                            "judged": "–", "checks": row["checks"], "check_ids": " ".join(ids),
                            "expected": row["expected"], "study_note": row["note"], "ours": NOT_RUN, "complete": "yes",
                            "our_note": "no verdict", "agreement": study.NOT_TESTED,
                            "why_not_tested": "could not run (no verdict)"})  # fmt: skip
    return out


def render_csv(rows: Sequence[dict[str, str]]) -> str:
    """study_agreement.csv: a header of :data:`CSV_FIELDS`, one line per cell."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: r.get(k, "") for k in CSV_FIELDS} for r in rows)
    return buf.getvalue()


def agreement_text(cell: dict[str, str]) -> str:
    """A cell's agreement as printed: ``agree``, ``disagree`` or ``not tested: <why>``."""
    why = cell.get("why_not_tested") or ""
    return f"{cell['agreement']}: {why}" if why else cell["agreement"]


def _md(text: Any) -> str:
    return md_cell(text) or "–"


def _level(level: str) -> str:
    return level or "official"


def render_markdown(rows: Sequence[dict[str, str]]) -> str:
    """study_agreement.md: the tally per implementation and level, then every cell, then how outcomes map."""
    groups: dict[tuple[str, str, str, str], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((r["study_implementation"], r["fix_level"], r["implementation"], r["judged"]), []).append(r)
    lines = ["# The study's expected outcomes (docs/study.md) against our verdicts", "",
             "Generated by `python -m gru4rec_conformance.reports study-agreement`; the expectations are "
             "`datasets/study/study_expected.csv`, our outcomes the committed verdicts' result records.", "",
             "| study row | level | implementation | judged | agree | disagree | not tested |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for (simpl, level, impl, judged), group in groups.items():
        t = tally(group)
        lines.append(f"| {_md(simpl)} | {_level(level)} | {_md(impl)} | {_md(judged)} | {t['agree']} | "
                     f"{t['disagree']} | {t['not tested']} |")  # fmt: skip
    total = tally(rows)
    lines += ["", f"All cells: {total['agree']} agree, {total['disagree']} disagree, {total['not tested']} not tested.",
              ""]  # fmt: skip
    for (simpl, level, impl, judged), group in groups.items():
        lines += [f"## {simpl} ({_level(level)}): {impl} @ {judged}", "",
                  "| checks | study expects | study note | ours | our note | agreement |", "|---|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| {_md(r['checks'])} | {_md(r['expected'])} | {_md(r['study_note'])} | {_md(r['ours'])} | "
                  f"{_md(r['our_note'])} | {_md(agreement_text(r))} |" for r in group]  # fmt: skip
        lines.append("")
    lines += ["## How our outcome and the agreement are computed", "",
              "Per result record of the cell's checks: failed → fail; xfail (declared defect) → xfail; passed or "
              "xpass → pass; skipped because the feature is declared absent → n/a; any other skip (a missing hook, "
              "a GPU or slow check outside the run, an error) or no record → not run. The cell is fail if any "
              "record failed, else xfail, else pass (partial when some applicable record did not run), else n/a "
              "when every record is n/a, else not run.", "",
              "Study expects FAIL: fail or xfail agree; a complete pass disagrees; a partial pass, n/a or not run is "
              "not tested. Study expects pass or n/a: fail or xfail disagree; pass or partial pass agree; n/a or "
              "not run is not tested (a cell agrees or disagrees only when one of its checks ran). A not-tested "
              "cell names why: absent feature, missing hook, refused (by the implementation at run time), could "
              "not run, or partial.", ""]  # fmt: skip
    return "\n".join(lines)


def write_agreement(roots: Sequence[Path], out: Path) -> tuple[Path, Path, list[str]]:
    """Write ``out/study_agreement.csv`` and ``.md`` from the runs under ``roots`` (atomically).

    Returns:
        ``(csv path, md path, unreadable)``: ``unreadable`` lists ``"<folder>: <error>"`` per run folder left out.
    """
    unreadable: list[str] = []
    # runs on several metric datasets hold the metric checks only: the verdict run is the implementation's row
    runs = [r for r in newest_per_key(collect_runs([Path(r) for r in roots], unreadable)).values() if not is_matrix(r)]
    rows = agreement_table(runs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "study_agreement.csv", out / "study_agreement.md"
    atomic_write_text(csv_path, render_csv(rows), mode=REPORT_FILE_MODE)
    atomic_write_text(md_path, render_markdown(rows), mode=REPORT_FILE_MODE)
    return csv_path, md_path, unreadable
