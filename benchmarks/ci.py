"""The CI benchmark run: a short timed run, its report, and a ratio comparison with a baseline.

    python -m gru4rec_conformance.benchmarks.ci run [--impl NAME --worker-python PATH] [--out DIR]
    python -m gru4rec_conformance.benchmarks.ci ratios BENCH_JSON RATIOS_JSON
    python -m gru4rec_conformance.benchmarks.ci compare BASELINE_JSON RATIOS_JSON [--factor 2]
    python -m gru4rec_conformance.benchmarks.ci baseline BENCH_JSON...   # rewrite benchmarks/ci_baseline.json

``run`` times one epoch and the full-catalogue evaluation (``benchmarks/test_epoch.py``) of the reference, the
official port (its pinned checkout located as the adapters locate it: ``OFFICIAL_GRU4REC_PATH``, the cache,
``GRU4REC_MIRROR_DIR``, GitHub's archive with ``GRU4REC_ALLOW_DOWNLOAD=1``; without it the run goes on and says
so) and each ``--impl`` adapter (a PyPI implementation runs in its worker process with ``--worker-python``, the
interpreter of its tox environment) on one small dataset shape, and writes into a new folder under ``--out``:
``benchmark.json`` (pytest-benchmark), the Markdown report (``report/<stamp>/report.md``, ``benchmarks/report.py``,
also printed), ``ratios.json`` and ``compare.txt``.

Only ratios to the reference are compared, never absolute times (a CI machine is not this one): ``ratios.json``
is a pytest-benchmark JSON whose "timings" are ratios — for each implementation other than the reference and each
case, the per-round times (the implementation's own epoch timer; the evaluation call's wall time) divided by the
reference's best round of the same case in the same run, so its ``min`` is the headline ratio. ``compare`` shows
``pytest-benchmark compare --between min,median BASELINE RATIOS`` and applies pytest-benchmark's own regression
check (``--benchmark-compare-fail=min:100%``, i.e. ``PercentageRegressionCheck``) to each case present in both:
exit status 1 only when a ratio grew by more than ``--factor`` (default 2x) over its baseline. A case missing from
this run (an implementation that could not be located) or new to it (no baseline yet) is reported, not failed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from gru4rec_conformance.fileio import atomic_write_json, atomic_write_text, new_run_dir

REPO = Path(__file__).resolve().parents[1]
BASELINE = Path(__file__).resolve().parent / "ci_baseline.json"
DEFAULT_OUT = REPO / "reports" / "out" / "ci-benchmark"
#: the CI run's settings (GRU4REC_BENCH_*; benchmarks/conftest.py): one small shape, one loss, two timed rounds
#: without a warm-up round (the best round is compared, and the second is warm)
SETTINGS = {
    "GRU4REC_BENCH_SCALE": "ci*0.3",
    "GRU4REC_BENCH_DATASETS": "diginetica",
    "GRU4REC_BENCH_LOSSES": "cross-entropy",
    "GRU4REC_BENCH_ROUNDS": "2",
    "GRU4REC_BENCH_WARMUP": "0",
    "GRU4REC_BENCH_THREADS": "1",
}
FIELD = "min"  # the compared statistic: the best round's ratio, the headline of the reports


# ----------------------------------------------------------------------------------------------------------------
# ratios


def _round_seconds(bench: dict) -> list[float]:
    """The per-round seconds of one benchmark: the implementation's own epoch times where recorded
    (``rounds_epoch_seconds``), else pytest-benchmark's round times (``stats.data``, or its ``min``)."""
    ei, st = bench.get("extra_info") or {}, bench.get("stats") or {}
    values = ei.get("rounds_epoch_seconds") or st.get("data") or [st.get("min")]
    return [float(v) for v in values if v]


def ratio_benchmarks(data: dict) -> list[dict]:
    """pytest-benchmark entries whose timings are ratios to the reference (see the module docstring).

    ``data``: a pytest-benchmark JSON of ``benchmarks/`` (``extra_info`` with ``impl`` and ``case``). Returns one
    entry per non-reference benchmark whose case the reference ran too, named as the benchmark (``fullname``),
    group ``ratio/<group>``; ``stats`` computed by pytest-benchmark's ``Stats`` from the ratios (unitless)."""
    from pytest_benchmark.stats import Stats

    benches = data.get("benchmarks") or []
    ref: dict[tuple, float] = {}
    for b in benches:
        ei = b.get("extra_info") or {}
        if ei.get("impl") == "reference" and _round_seconds(b):
            ref[(b.get("group"), ei.get("case"))] = min(_round_seconds(b))
    out = []
    for b in benches:
        ei = b.get("extra_info") or {}
        key = (b.get("group"), ei.get("case"))
        if ei.get("impl") in (None, "reference") or key not in ref or not _round_seconds(b):
            continue
        stats = Stats()
        for v in _round_seconds(b):
            stats.update(v / ref[key])
        out.append(
            {
                "group": f"ratio/{b.get('group')}",
                "name": b["name"],
                "fullname": b["fullname"],
                "params": b.get("params"),
                "param": b.get("param"),
                "extra_info": {
                    "impl": ei.get("impl"),
                    "impl_version": ei.get("impl_version"),
                    "case": ei.get("case"),
                    "unit": "ratio: this implementation's seconds / the reference's best round, same case and run",
                    "seconds": _round_seconds(b),
                    "reference_seconds": ref[key],
                },
                "options": b.get("options") or {},
                "stats": {**stats.as_dict(), "data": list(stats.data), "iterations": 1},
            }
        )
    return out


def ratios_json(bench_json: Path) -> dict:
    """The ratio JSON (pytest-benchmark's file format) of the pytest-benchmark JSON ``bench_json``.
    Raises ValueError naming the file when it is not a pytest-benchmark JSON."""
    try:
        data = json.loads(Path(bench_json).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{bench_json}: not a readable pytest-benchmark JSON ({exc})") from None
    if not isinstance(data, dict) or "benchmarks" not in data:
        raise ValueError(f"{bench_json}: not a pytest-benchmark JSON (no 'benchmarks')")
    return {
        "machine_info": data.get("machine_info") or {},
        "commit_info": data.get("commit_info") or {},
        "datetime": data.get("datetime"),
        "version": data.get("version"),
        "benchmarks": ratio_benchmarks(data),
        "gru4rec_ratios": {"source": Path(bench_json).name, "env": (data.get("gru4rec_bench") or {}).get("env")},
    }


def baseline_ratios(docs: list[dict], pick: str = "max") -> dict:
    """One ratio JSON from the ratio JSONs ``docs`` of several runs: per case (``fullname``) the entry of the run
    with the largest ``min`` (``pick='max'``: the slowest ratio seen, so that the load of the machine a run meets
    does not fail CI — the ratios of a loaded machine move by up to 3x, most the reference's 40 ms evaluation —
    while a 2x growth over the worst run still does) or the median one (``'median'``; the lower middle one for an
    even count); machine and commit information of the first. Raises ValueError for an empty list or another
    ``pick``."""
    if not docs:
        raise ValueError("no ratio JSON to make a baseline of")
    if pick not in ("max", "median"):
        raise ValueError(f"pick must be 'max' or 'median', got {pick!r}")
    per: dict[str, list[dict]] = {}
    for d in docs:
        for b in d.get("benchmarks") or []:
            per.setdefault(b["fullname"], []).append(b)
    chosen = []
    for entries in per.values():
        entries.sort(key=lambda b: b["stats"][FIELD])
        one = entries[-1] if pick == "max" else entries[(len(entries) - 1) // 2]
        chosen.append({**one, "runs": [e["stats"][FIELD] for e in entries]})
    info = {**docs[0]["gru4rec_ratios"], "runs": len(docs), "pick": pick}
    return {**docs[0], "benchmarks": chosen, "gru4rec_ratios": info}


# ----------------------------------------------------------------------------------------------------------------
# comparison


def check_ratios(baseline: dict, current: dict, factor: float = 2.0) -> tuple[list[str], list[str]]:
    """Compare the ratios of ``current`` with ``baseline`` (both ratio JSONs) with pytest-benchmark's regression
    check on ``min`` (``min:<(factor-1)*100>%``). Returns (lines for the log, regressions); a regression is a case
    whose ratio grew by more than ``factor``. Raises ValueError for a factor <= 1."""
    from pytest_benchmark.utils import parse_compare_fail

    if factor <= 1:
        raise ValueError(f"--factor must be > 1, got {factor}")
    check = parse_compare_fail(f"{FIELD}:{round((factor - 1) * 100)}%")
    base = {b["fullname"]: b for b in baseline.get("benchmarks") or []}
    cur = {b["fullname"]: b for b in current.get("benchmarks") or []}
    lines = [f"{'case':<34}{'impl':<14}{'baseline':>9}{'now':>9}{'now/base':>10}  verdict"]
    regressions = []
    for name in sorted(set(base) | set(cur)):
        b, c = base.get(name), cur.get(name)
        shown = c if c is not None else base[name]
        ei = shown.get("extra_info") or {}
        label = f"{str(shown.get('group', ''))[len('ratio/') :][:33]:<34}{str(ei.get('impl'))[:13]:<14}"
        if c is None:
            assert b is not None  # name comes from base or cur
            lines.append(f"{label}{b['stats'][FIELD]:>9.2f}{'-':>9}{'-':>10}  not measured in this run")
            continue
        if b is None:
            lines.append(f"{label}{'-':>9}{c['stats'][FIELD]:>9.2f}{'-':>10}  new (no baseline)")
            continue
        fail = check.fails(c["stats"], b["stats"])
        change = c["stats"][FIELD] / b["stats"][FIELD] if b["stats"][FIELD] else float("inf")
        verdict = f"REGRESSION (> {factor:g}x): {fail}" if fail else "ok"
        lines.append(f"{label}{b['stats'][FIELD]:>9.2f}{c['stats'][FIELD]:>9.2f}{change:>10.2f}  {verdict}")
        if fail:
            regressions.append(f"{name}: ratio {b['stats'][FIELD]:.2f} -> {c['stats'][FIELD]:.2f} ({fail})")
    return lines, regressions


def pytest_benchmark_compare(baseline: Path, current: Path) -> str:
    """The text of ``pytest-benchmark compare --between min,median --time-unit s BASELINE CURRENT`` (its numbers
    are ratios, shown under its time-unit label 's'); run from the folder of ``current`` so that no conftest.py of
    the working directory is imported. An empty string with the reason when the command fails."""
    cmd = [sys.executable, "-m", "pytest_benchmark", "compare", "--between", "min,median", "--time-unit", "s"]
    cmd += ["--group-by", "group", str(Path(baseline).resolve()), str(Path(current).resolve())]
    try:
        r = subprocess.run(cmd, cwd=Path(current).resolve().parent, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(pytest-benchmark compare did not run: {exc})\n"
    if r.returncode != 0:
        return f"(pytest-benchmark compare failed, exit {r.returncode}: {r.stderr.strip()[-500:]})\n"
    return r.stdout


def compare(baseline_path: Path, current_path: Path, factor: float = 2.0) -> tuple[str, int]:
    """The comparison text (pytest-benchmark's table, then the verdict per case) and the exit status: 1 when a
    ratio regressed by more than ``factor``, else 0 (also without a baseline file, which the text says). Raises
    ValueError naming a file that cannot be read."""
    if not Path(baseline_path).is_file():
        return f"no baseline at {baseline_path}: nothing compared (write one with `... ci baseline BENCH_JSON`)\n", 0
    docs = []
    for p in (baseline_path, current_path):
        try:
            docs.append(json.loads(Path(p).read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{p}: not a readable ratio JSON ({exc})") from None
    lines, regressions = check_ratios(docs[0], docs[1], factor)
    out = io.StringIO()
    out.write(f"Ratios to the reference (x the reference's best round), baseline {baseline_path} vs this run:\n")
    out.write("pytest-benchmark compare (its numbers are ratios, not seconds):\n")
    out.write(pytest_benchmark_compare(baseline_path, current_path))
    out.write(f"\nRatio check (pytest-benchmark PercentageRegressionCheck on {FIELD}, fail above {factor:g}x):\n")
    out.write("\n".join(lines) + "\n")
    if regressions:
        out.write(f"FAILED: {len(regressions)} ratio regression(s) larger than {factor:g}x:\n")
        out.write("".join(f"  {r}\n" for r in regressions))
    else:
        out.write(f"OK: no ratio regressed by more than {factor:g}x\n")
    return out.getvalue(), 1 if regressions else 0


# ----------------------------------------------------------------------------------------------------------------
# the run


def official_checkout() -> tuple[str | None, str]:
    """The official port's checkout (``OFFICIAL_GRU4REC_PATH`` or the pinned checkout the adapters locate) and a
    line saying where it came from or why it is missing."""
    env = os.environ.get("OFFICIAL_GRU4REC_PATH")
    if env:
        return env, f"official port: OFFICIAL_GRU4REC_PATH={env}"
    from gru4rec_conformance.implementations._checkout import locate
    from gru4rec_conformance.implementations.base import ImplementationUnavailable

    try:
        path = str(locate("gru4rec_pytorch_official"))
    except ImplementationUnavailable as exc:
        return None, f"official port not measured: {exc}"
    return path, f"official port: {path}"


def run(args) -> int:
    """Time, report, derive the ratios and compare them with the baseline; returns the exit status (the pytest
    run's when it failed, else the comparison's)."""
    from gru4rec_conformance.benchmarks.report import write_report

    folder = new_run_dir(Path(args.out))
    bench_json = folder / "benchmark.json"
    env = {**os.environ, **SETTINGS, "GRU4REC_BENCH_NO_REPORT": "1", "PYTHONPATH": str(REPO / "src")}
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("GRU4REC_TEST_POSTGRES_URL", None)  # a password; the benchmark JSON records every GRU4REC_* variable
    official, note = official_checkout()
    print(f"ci benchmark: {note}", flush=True)
    if official:
        env["OFFICIAL_GRU4REC_PATH"] = official
    else:
        env.pop("OFFICIAL_GRU4REC_PATH", None)
    if args.worker_python:
        # absolute, not resolved: the worker starts in its own directory, and a venv's python must stay the symlink
        env["GRU4REC_WORKER_PYTHON"] = os.path.abspath(args.worker_python)
    cmd = [sys.executable, "-m", "pytest", "benchmarks/test_epoch.py", f"--benchmark-json={bench_json}"]
    cmd += [a for impl in args.impl for a in ("--impl", impl)]
    cmd += ["--no-report", "-p", "no:cacheprovider", "-q", "-rs", "--benchmark-columns=min,median,max,rounds"]
    print("ci benchmark: " + " ".join(cmd), flush=True)
    try:
        rc = subprocess.run(cmd, cwd=REPO, env=env, timeout=args.timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"ci benchmark: the benchmark run took more than --timeout {args.timeout:g} s", file=sys.stderr)
        return 124
    if rc != 0 or not bench_json.is_file():
        print(f"ci benchmark: the benchmark run failed (exit {rc})", file=sys.stderr)
        return rc or 1
    report = write_report(bench_json, folder / "report", title="GRU4Rec CI benchmark (tiny scale)")
    print(f"\n===== {report / 'report.md'} =====\n{(report / 'report.md').read_text(encoding='utf-8')}", flush=True)
    ratios = folder / "ratios.json"
    atomic_write_json(ratios, ratios_json(bench_json), indent=2, trailing_newline=True)
    text, status = compare(Path(args.baseline), ratios, args.factor)
    atomic_write_text(folder / "compare.txt", text)
    print(text, end="", flush=True)
    print(f"ci benchmark output: {folder}")
    return status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gru4rec_conformance.benchmarks.ci", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="time, report, compare the ratios with the baseline")
    r.add_argument("--impl", action="append", default=[], help="an adapter to time beside the reference (repeatable)")
    r.add_argument("--worker-python", default=None, help="interpreter of the adapters' worker (its tox env's python)")
    r.add_argument("--out", default=str(DEFAULT_OUT), help="parent of the output folder (default: %(default)s)")
    r.add_argument("--baseline", default=str(BASELINE), help="ratio JSON to compare with (default: %(default)s)")
    r.add_argument("--factor", type=float, default=2.0, help="fail above this ratio growth (default: 2)")
    r.add_argument("--timeout", type=float, default=600, help="seconds for the benchmark run (default: 600)")
    q = sub.add_parser("ratios", help="derive the ratio JSON of a pytest-benchmark JSON")
    q.add_argument("bench_json")
    q.add_argument("ratios_json")
    c = sub.add_parser("compare", help="compare two ratio JSONs; exit 1 on a regression larger than --factor")
    c.add_argument("baseline")
    c.add_argument("current")
    c.add_argument("--factor", type=float, default=2.0)
    b = sub.add_parser("baseline", help=f"write the baseline ratios of pytest-benchmark JSONs to {BASELINE.name}")
    b.add_argument("bench_json", nargs="+", help="pytest-benchmark JSONs of runs with the CI settings")
    b.add_argument("--pick", choices=("max", "median"), default="max", help="per case: the largest or the median ratio")
    b.add_argument("--to", default=str(BASELINE))
    args = ap.parse_args(argv)
    try:
        if args.command == "run":
            return run(args)
        if args.command == "compare":
            text, status = compare(Path(args.baseline), Path(args.current), args.factor)
            print(text, end="")
            return status
        if args.command == "ratios":
            target, doc = Path(args.ratios_json), ratios_json(Path(args.bench_json))
        else:
            target, doc = Path(args.to), baseline_ratios([ratios_json(Path(p)) for p in args.bench_json], args.pick)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(target, doc, indent=2, trailing_newline=True)
        print(f"wrote {target}")
        return 0
    except ValueError as exc:
        ap.exit(2, f"{ap.prog}: error: {exc}\n")


if __name__ == "__main__":
    raise SystemExit(main())
