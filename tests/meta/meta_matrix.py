"""Run the GRU4Rec conformance checks on the mutants (and the reference) and build the mutant × check matrix.

One inner pytest process (``python -m pytest conformance/gru4rec --impl <all> -p meta_select -n 2``) runs every
selected (implementation, check) pair; the harness writes one results.jsonl per implementation into a private
report folder, which :func:`run_suite` reads back. :func:`assess` compares each mutant's verdicts with its
declaration (``caught_by`` / ``also_fails``, implementations/mutants/__init__.py); :func:`write_matrix` writes
``mutant_matrix.md`` and ``mutant_matrix.json`` under ``reports/out/meta/<UTC timestamp>/`` (atomically, never
over an earlier run).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CHECKS_DIR = REPO / "conformance" / "gru4rec"
KIND_ORDER = [f"K{i}" for i in range(1, 12)] + ["metric"]
#: cheap checks, one per kind, run on every mutant in the default meta-test besides the checks of its kind
CROSS_SECTION = ("SR-2", "LF-2", "SO-1", "DO-4", "OP-1", "HP-2", "EB-3", "EV-2", "SC-2", "IN-1")
FAIL_OUTCOMES = ("failed", "error")
SKIP_OUTCOMES = ("skipped", "skipped-unsupported")


def declared_checks() -> dict[str, str]:
    """Check id → kind of every check under conformance/gru4rec/ (from the ``check`` markers in the source)."""
    pat = re.compile(r"""pytest\.mark\.check\(\s*["']([A-Z]+-\d+)["']\s*,\s*kind\s*=\s*["'](\w+)["']""")
    out: dict[str, str] = {}
    for path in sorted(CHECKS_DIR.glob("test_*.py")):
        for cid, kind in pat.findall(path.read_text(encoding="utf-8")):
            out[cid] = kind
    return out


def order_checks(ids: list[str], kinds: dict[str, str]) -> list[str]:
    def key(cid: str):
        kind = kinds.get(cid, "metric")
        prefix, _, num = cid.partition("-")
        return (KIND_ORDER.index(kind) if kind in KIND_ORDER else 99, prefix, int(num) if num.isdigit() else 0)

    return sorted(ids, key=key)


@dataclasses.dataclass
class InnerRun:
    returncode: int
    seconds: float
    output_tail: str
    records: dict[str, list[dict]]


def run_suite(
    selection: dict[str, dict],
    markexpr: str,
    workdir: Path,
    workers: int = 2,
    timeout: float = 3600,
    extra_args: tuple[str, ...] = (),
) -> InnerRun:
    """Run the selected checks in a subprocess; returns the per-implementation result records."""
    workdir.mkdir(parents=True, exist_ok=True)
    sel_path = workdir / "selection.json"
    sel_path.write_text(json.dumps(selection, indent=1), encoding="utf-8")
    report_dir = workdir / "reports"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "conformance/gru4rec",
        "--impl",
        ",".join(selection),
        "-p",
        "meta_select",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rN",
        "--report-dir",
        str(report_dir),
        "--no-report-plots",
        "-m",
        markexpr,
        *extra_args,
    ]
    if workers > 1:
        cmd += ["-n", str(workers)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).parent), str(REPO / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env["GRU4REC_META_SELECTION"] = str(sel_path)
    env.pop("GRU4REC_CONFORMANCE_IMPL", None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - t0
    records: dict[str, list[dict]] = {}
    for results in report_dir.glob("*/*/results.jsonl"):
        for line in results.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec.get("type") == "result":
                records.setdefault(rec["impl"], []).append(rec)
    tail = (proc.stdout + proc.stderr)[-6000:]
    return InnerRun(proc.returncode, seconds, tail, records)


def verdicts(records: list[dict]) -> dict[str, str]:
    """Check id → ``F`` (a parametrization failed or errored), ``P`` (passed, possibly with skipped
    parametrizations), ``S`` (every parametrization skipped), ``X`` (xfail/xpass)."""
    by: dict[str, list[str]] = {}
    for r in records:
        cid = (r.get("check") or {}).get("id") or "?"
        by.setdefault(cid, []).append(r["outcome"])
    out = {}
    for cid, outcomes in by.items():
        if any(o in FAIL_OUTCOMES for o in outcomes):
            out[cid] = "F"
        elif any(o in ("xfail", "xpass") for o in outcomes):
            out[cid] = "X"
        elif any(o == "passed" for o in outcomes):
            out[cid] = "P"
        else:
            out[cid] = "S"
    return out


def failure_reasons(records: list[dict]) -> dict[str, str]:
    """Check id → first failure reason (one line)."""
    out: dict[str, str] = {}
    for r in records:
        cid = (r.get("check") or {}).get("id") or "?"
        if r["outcome"] in FAIL_OUTCOMES and cid not in out:
            out[cid] = (r.get("reason") or "").splitlines()[0][:240] if r.get("reason") else r["outcome"]
    return out


#: How a failure message accounts for its cause (conformance/_harness/diagnosis.py): a probe isolated one, the
#: diagnosis ran and isolated none, or the check states one measured finding (it declares no candidate causes).
ISOLATED, NOT_ISOLATED, FINDING = "isolated", "not isolated", "finding"


def cause_table(record: dict) -> tuple:
    """The cause table (``diagnosis.causes``) of the check function that produced ``record`` (empty: none)."""
    import importlib

    from gru4rec_conformance.conformance._harness import diagnosis

    module = str(record.get("module") or "")
    m = re.search(r"(conformance/gru4rec/test_\w+)\.py$", module)
    test = str(record.get("test") or "").split("[")[0]
    if not m or not test:
        return ()
    mod = importlib.import_module("gru4rec_conformance." + m.group(1).replace("/", "."))
    return diagnosis.table_of(getattr(mod, test, None))


def diagnosis_class(reason: str) -> str:
    """:data:`ISOLATED`, :data:`NOT_ISOLATED` or :data:`FINDING` for a failure message (the prefixes are
    diagnosis.py's; hand-written messages use the same "cause not isolated" words)."""
    from gru4rec_conformance.conformance._harness import diagnosis

    if diagnosis.NOT_ISOLATED.split(";")[0] in reason:
        return NOT_ISOLATED
    return ISOLATED if diagnosis.ISOLATED in reason else FINDING


def diagnoses(cls: Any, records: list[dict]) -> dict[str, str]:
    """Declared catch (check id) → how its failure messages on this mutant account for the cause: the weakest
    over the check's failing parametrizations (finding < not isolated < isolated)."""
    order = {FINDING: 0, NOT_ISOLATED: 1, ISOLATED: 2}
    out: dict[str, str] = {}
    for r in records:
        cid = (r.get("check") or {}).get("id")
        if cid in cls.caught_by and r["outcome"] in FAIL_OUTCOMES:
            c = diagnosis_class(str(r.get("reason") or ""))
            out[cid] = c if cid not in out or order[c] < order[out[cid]] else out[cid]
    return out


def assess(cls: Any, v: dict[str, str], available: set[str] | None = None) -> dict[str, Any]:
    """A mutant's verdict against its declaration: ``missed`` (declared catches that did not fail), ``unexpected``
    (failures outside its own kind, caught_by and also_fails), ``caught`` (every declared catch failed). A
    declared catch that did not run is ignored when it is not in ``available`` (the checks this run could run at
    all, e.g. not slow). Any check of the mutant's own kind may fail: the meta-test's rule is "fails the checks
    of its kind, passes or skips the rest"."""
    kinds = declared_checks()
    expected = set(cls.caught_by)
    allowed = expected | set(cls.also_fails) | {c for c, k in kinds.items() if k == cls.kind}
    missed = [c for c in cls.caught_by if v.get(c) != "F" and (available is None or c in v or c in available)]
    unexpected = [] if "*" in cls.also_fails else sorted(c for c, x in v.items() if x == "F" and c not in allowed)
    return {"missed": missed, "unexpected": unexpected, "caught": not missed and any(v.get(c) == "F" for c in expected)}


def selection_default(mutants: list[Any], reference: str = "reference") -> dict[str, dict]:
    """Reference: every check; each mutant: the checks of its kind, its declared catches and the cross-section."""
    sel: dict[str, dict] = {reference: {"kinds": ["*"]}}
    for cls in mutants:
        sel[cls.name] = {"kinds": [cls.kind], "checks": sorted(set(CROSS_SECTION) | set(cls.caught_by))}
    return sel


def _out_dir() -> Path:
    from gru4rec_conformance.fileio import new_run_dir

    root = Path(os.environ.get("GRU4REC_REPORT_DIR") or REPO / "reports" / "out") / "meta"
    return new_run_dir(root, first_suffix=2)  # as the run folders of reports/: <stamp>, <stamp>-2, ...


SYMBOL = {"F": "✗", "P": "✓", "S": "s", "X": "x"}


def write_matrix(mode: str, markexpr: str, run: InnerRun, mutants: list[Any], reference: str = "reference") -> Path:
    """Write mutant_matrix.md / .json (atomically) into a new ``reports/out/meta/<timestamp>/``; returns the folder."""
    from gru4rec_conformance.fileio import atomic_write_json, atomic_write_text

    kinds = declared_checks()
    rows = []
    seen: set[str] = set()
    available = set(verdicts(run.records.get(reference, [])))
    for name, cls in [(reference, None)] + [(m.name, m) for m in mutants]:
        recs = run.records.get(name, [])
        v = verdicts(recs)
        seen |= set(v)
        row = {
            "impl": name,
            "kind": getattr(cls, "kind", "—"),
            "defect": getattr(cls, "defect", "—"),
            "caught_by": list(getattr(cls, "caught_by", ())),
            "also_fails": list(getattr(cls, "also_fails", ())),
            "cells": v,
            "reasons": failure_reasons(recs),
            "n_checks_run": len(recs),
        }
        if cls is None:
            bad = sorted(c for c, x in v.items() if x in ("F", "X"))
            row.update(missed=[], unexpected=bad, caught=None, diagnosis={})
        else:
            row.update(assess(cls, v, available), diagnosis=diagnoses(cls, recs))
        rows.append(row)
    cols = order_checks(sorted(seen), kinds)
    data = {
        "mode": mode,
        "markexpr": markexpr,
        "seconds": round(run.seconds, 1),
        "returncode": run.returncode,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "checks": [{"id": c, "kind": kinds.get(c)} for c in cols],
        "rows": rows,
    }
    lines = [
        f"# Mutant × check matrix ({mode} run)",
        "",
        f'Inner run: `pytest conformance/gru4rec -m "{markexpr}"` over {len(rows)} implementations, '
        f"{run.seconds:.0f} s, exit status {run.returncode}. Cells: ✗ failed (expected where the mutant "
        "declares it), **✗!** failed unexpectedly, ✓ passed, s skipped, · not run.",
        "",
    ]
    caught = [r for r in rows if r["caught"]]
    missed = [r for r in rows if r["caught"] is False]
    unexpected = [r for r in rows if r["unexpected"]]
    told = [x for r in rows for x in r["diagnosis"].values()]
    lines += [
        f"- mutants caught by every declared check: {len(caught)} of {len(rows) - 1}",
        f"- declared catches that failed ({len(told)}): the message isolates a cause by a probe in "
        f"{told.count(ISOLATED)}, says 'cause not isolated' with its candidates in {told.count(NOT_ISOLATED)}, "
        f"states one measured finding (a check without candidate causes) in {told.count(FINDING)}",
        f"- mutants with a declared check that did not fail: {', '.join(r['impl'] for r in missed) or 'none'}",
        f"- implementations with failures outside their declaration: "
        f"{', '.join(r['impl'] for r in unexpected) or 'none'}",
        "",
    ]
    header = "| implementation | kind | defect | " + " | ".join(cols) + " | verdict |"
    lines += [header, "|" + "---|" * (len(cols) + 4)]
    for r in rows:
        cells = []
        for c in cols:
            x = r["cells"].get(c)
            sym = SYMBOL.get(x, "·")
            if x == "F" and (r["caught"] is None or c in r["unexpected"]):
                sym = "**✗!**"
            cells.append(sym)
        if r["caught"] is None:
            verdict = "no failure" if not r["unexpected"] else "FAILS " + ", ".join(r["unexpected"])
        else:
            verdict = ("caught" if r["caught"] else "MISSED " + ", ".join(r["missed"])) + (
                "; unexpected " + ", ".join(r["unexpected"]) if r["unexpected"] else ""
            )
        lines.append(f"| {r['impl']} | {r['kind']} | {r['defect']} | " + " | ".join(cells) + f" | {verdict} |")
    lines += ["", "## Declared catches and first failure reasons", ""]
    for r in rows[1:]:
        lines.append(
            f"- **{r['impl']}** ({r['defect']}): caught by {', '.join(r['caught_by'])}"
            + (f"; may also fail {', '.join(r['also_fails'])}" if r["also_fails"] else "")
        )
        for c in r["caught_by"]:
            if c in r["reasons"]:
                told_c = f" ({r['diagnosis'][c]})" if c in r["diagnosis"] else ""
                lines.append(f"  - {c}{told_c}: {r['reasons'][c]}")
    out = _out_dir()
    atomic_write_json(out / "mutant_matrix.json", data, default=str)
    atomic_write_text(out / "mutant_matrix.md", "\n".join(lines) + "\n")
    return out
