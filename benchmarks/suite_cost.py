"""The suite's own cost: the CPU time of its main job, cold (an empty oracle cache) and warm (the cache the cold
run filled), and the checks that cost the most CPU.

    python -m gru4rec_conformance.benchmarks.suite_cost run --out DIR [--top N] [-- PYTEST ARGS...]

runs ``pytest`` with the main job's arguments (default :data:`MAIN_JOB`: the fast GRU4Rec checks on the reference)
twice, one after the other, in child processes with a fresh oracle cache ``DIR/oracle-cache`` and their reports
under ``DIR/reports``, and writes ``DIR/suite_cost.json`` (:func:`measure`) and ``DIR/suite_cost.md``
(:func:`render`). Each run's CPU time is the user + system time of the pytest process and every child it waited
for (``os.wait4``), one run at a time, so other load on the machine changes it little (unlike its wall time,
which is recorded beside it). Each check's CPU time comes from this module loaded as a pytest plugin in the
child (``-p gru4rec_conformance.benchmarks.suite_cost``): user + system time of the process and of its waited-for
children across the check's setup, call and teardown (what pytest's ``--durations`` shows in wall time).

    python -m gru4rec_conformance.benchmarks.suite_cost render DIR/suite_cost.json

prints the Markdown again from the JSON (the benchmark report includes it with ``--suite-cost PATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

#: The main job: the fast GRU4Rec checks on the reference (README, "Judging an implementation"), one process.
MAIN_JOB = ("conformance/gru4rec", "--impl", "reference", "-m", "not slow", "-q", "-p", "no:cacheprovider")
#: The child's per-check records (JSON lines), named by the parent.
ENV_RECORDS = "GRU4REC_SUITE_COST_JSONL"
PLUGIN = "gru4rec_conformance.benchmarks.suite_cost"
DEFAULT_TOP = 12


def _cpu_now() -> float:
    """User + system CPU seconds of this process and its waited-for children."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """As a plugin in the measured run: append ``{nodeid, cpu_s, wall_s, outcome}`` of each test to
    ``$GRU4REC_SUITE_COST_JSONL`` (nothing when unset)."""
    path = os.environ.get(ENV_RECORDS)
    cpu0, wall0 = _cpu_now(), time.perf_counter()
    outcomes: list[str] = []
    item.stash[_OUTCOMES] = outcomes
    yield
    if not path:
        return
    outcome = "failed" if "failed" in outcomes else "skipped" if "skipped" in outcomes else "passed"
    line = {"nodeid": item.nodeid, "cpu_s": round(_cpu_now() - cpu0, 3), "wall_s": round(time.perf_counter() - wall0, 3),
            "outcome": outcome}  # fmt: skip
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


_OUTCOMES = pytest.StashKey[list]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome: Any = yield
    report = outcome.get_result()
    if item.stash.get(_OUTCOMES, None) is not None and report.outcome != "passed":
        item.stash[_OUTCOMES].append(report.outcome)


def _run_once(args: Sequence[str], env: dict[str, str], records: Path, cwd: Path) -> dict[str, Any]:
    """One measured pytest run in a child: its CPU (process + waited-for children) and wall seconds, exit code and
    per-check records."""
    records.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", *args, "-p", PLUGIN]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env={**env, ENV_RECORDS: str(records)})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    checks = []
    if records.exists():
        for raw in records.read_text(encoding="utf-8").splitlines():
            try:
                checks.append(json.loads(raw))
            except ValueError:  # a torn last line of a killed run
                continue
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "wall_s": round(wall, 2),
            "returncode": proc.returncode, "checks": checks}  # fmt: skip


def measure(out: Path, args: Sequence[str] = MAIN_JOB, cwd: Path | None = None) -> dict[str, Any]:
    """Run the main job cold then warm (see the module's text) and return the JSON written to
    ``out/suite_cost.json``. Raises FileExistsError when ``out/oracle-cache`` already holds entries (the cold run
    would not be cold)."""
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "oracle-cache"
    if cache.exists() and any(cache.iterdir()):
        raise FileExistsError(f"{cache} is not empty: the cold run needs a fresh oracle cache (choose another --out)")
    cache.mkdir(exist_ok=True)
    here = Path(cwd or Path.cwd())
    # the children import this same suite (its package folder first on the path), whatever else is installed
    import gru4rec_conformance

    package_parent = str(Path(gru4rec_conformance.__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "GRU4REC_ORACLE_CACHE_DIR": str(cache.resolve()), "PYTHONPATH": path}
    full = [*args, "--report-dir", str((out / "reports").resolve())]
    runs = []
    for label in ("cold", "warm"):
        run = _run_once(full, env, out / f"checks-{label}.jsonl", here)
        runs.append({"label": label, **run})
    data = {
        "command": ["pytest", *args],
        "cwd": str(here),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },  # fmt: skip
        "oracle_cache_entries": len([p for p in cache.iterdir() if p.suffix == ".json"]),
        "runs": runs,
    }
    (out / "suite_cost.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


def _short(nodeid: str) -> str:
    return nodeid.split("/")[-1]


def render(data: dict[str, Any], top: int = DEFAULT_TOP) -> str:
    """Markdown of :func:`measure`'s JSON: the command, cold and warm CPU (and wall) seconds with warm/cold, and
    the ``top`` checks of the cold run by CPU time with their warm CPU time beside it."""
    runs = {r["label"]: r for r in data["runs"]}
    cold, warm = runs.get("cold"), runs.get("warm")
    lines = ["## The suite's own cost (main job)", "",
             f"`{shlex.join(data['command'])}`, run twice in one checkout with a fresh oracle cache: **cold** (empty "
             "cache: the reference's metric-band fits run) and **warm** (the cache the cold run filled). CPU = user + "
             "system seconds of pytest and the children it waited for; wall seconds beside it (other load on the "
             "machine changes them).", "",
             "| run | CPU s | wall s | exit | checks |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    for r in data["runs"]:
        lines.append(
            f"| {r['label']} | {r['cpu_s']:.1f} | {r['wall_s']:.1f} | {r['returncode']} | {len(r['checks'])} |"
        )
    if cold and warm and cold["cpu_s"] > 0:
        lines += ["", f"warm / cold CPU: **{warm['cpu_s'] / cold['cpu_s']:.2f}** "
                  f"({data.get('oracle_cache_entries', '?')} oracle-cache entries written by the cold run)."]  # fmt: skip
    if cold and cold["checks"]:
        warm_by = {c["nodeid"]: c for c in (warm or {}).get("checks", [])}
        total = sum(c["cpu_s"] for c in cold["checks"])
        lines += ["", f"The {min(top, len(cold['checks']))} slowest checks of the cold run by CPU time (setup + call + "
                  "teardown; session fixtures are paid by the first check that uses them):", "",
                  "| check | cold CPU s | share | warm CPU s | outcome |", "|---|---:|---:|---:|---|"]  # fmt: skip
        for c in sorted(cold["checks"], key=lambda c: -c["cpu_s"])[:top]:
            w = warm_by.get(c["nodeid"])
            share = c["cpu_s"] / total if total else 0.0
            lines.append(f"| `{_short(c['nodeid'])}` | {c['cpu_s']:.1f} | {share:.0%} | "
                         f"{'–' if w is None else format(w['cpu_s'], '.1f')} | {c['outcome']} |")  # fmt: skip
    m = data.get("machine") or {}
    lines += ["", f"Measured {data.get('started_utc', '?')} on {m.get('platform', '?')}, {m.get('cpus', '?')} CPUs, "
              f"load average {m.get('load_avg', '?')} at the end."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gru4rec_conformance.benchmarks.suite_cost", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="measure the main job cold and warm")
    r.add_argument("--out", type=Path, required=True, help="folder of the JSON, the Markdown, the cache and reports")
    r.add_argument("--top", type=int, default=DEFAULT_TOP, help="slowest checks listed")
    r.add_argument("pytest_args", nargs="*", help=f"the job's pytest arguments after -- (default {' '.join(MAIN_JOB)})")
    v = sub.add_parser("render", help="print the Markdown of a suite_cost.json")
    v.add_argument("json", type=Path)
    v.add_argument("--top", type=int, default=DEFAULT_TOP)
    a = ap.parse_args(argv)
    if a.cmd == "run":
        try:
            data = measure(a.out, a.pytest_args or MAIN_JOB)
        except FileExistsError as exc:
            ap.error(str(exc))
        text = render(data, a.top)
        (a.out / "suite_cost.md").write_text(text, encoding="utf-8")
    else:
        try:
            data = json.loads(a.json.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            ap.error(f"{a.json}: {exc}")
        text = render(data, a.top)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
