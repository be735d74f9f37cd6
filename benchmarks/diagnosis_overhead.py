"""What the differential-diagnosis probes add to a conformance run: CPU time with the probes on and off.

``python -m gru4rec_conformance.benchmarks.diagnosis_overhead [--files K1,K3,K6,K8] [--all] [--rounds 2]
[--warmup 1] [--mutant mutant:eval_masks_session] [--json PATH]``

The probes of conformance/_harness/diagnosis.py run only after a check has failed, so on an implementation that
passes they cost nothing but the import of the cause tables; this measures that claim instead of asserting it.
Each round runs the same inner pytest of the reference twice, once as usual and once with ``GRU4REC_DIAGNOSIS=0``
(every probe skipped), alternating which goes first, after one untimed warm-up run (``--warmup``); the figure is the process CPU time (user + system) of the inner
pytest and its children (``resource.getrusage(RUSAGE_CHILDREN)`` around it), and the printed ratio is
on / off of the summed rounds. CPU time, not wall time, because the machine this was written for is shared.

What is measured, honestly:

- **reference** (the ratio the suite promises to keep near 1): by default a representative subset of a
  ``-m "not slow and not metric and not gpu"`` run, the check modules whose checks use the diagnosis layer
  (K1 state reset, K3 sampling, K6 hyperparameters, K8 evaluation); the whole run takes too long to repeat on a
  2-core shared machine. ``--all`` runs every non-slow module.
- **mutant** (what a failure costs, for information): the diagnosed checks (SR-1, SR-2, EV-1) on a mutant that
  fails them (default ``mutant:eval_masks_session``), with and without probes: the probes' own price per failure.
  ``--mutant ""`` skips it.

Outcomes must not depend on the switch: a round whose passed/failed counts differ between on and off is reported
(the probes never change a verdict, only a message). Nothing is asserted; the output is a table and, with
``--json``, a JSON object ``{"reference": {...}, "mutant": {...}}`` of seconds and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gru4rec_conformance import CHECKOUT_ROOT, child_pythonpath
from gru4rec_conformance.conformance._harness.diagnosis import SWITCH

#: The check modules of the default subset: those whose checks use the diagnosis layer.
DEFAULT_FILES = ("K1", "K3", "K6", "K8")
MARKS = "not slow and not metric and not gpu"
_COUNTS = re.compile(r"(\d+) (passed|failed|skipped|error|errors)\b")


def _module_paths(root: Path, kinds: Sequence[str] | None) -> list[str]:
    """``conformance/gru4rec/test_k<N>_*.py`` of the given kinds (``None``: the whole folder)."""
    folder = root / "conformance" / "gru4rec"
    if kinds is None:
        return [str(folder.relative_to(root))]
    out = []
    for k in kinds:
        hits = sorted(folder.glob(f"test_{k.lower()}_*.py"))
        if not hits:
            raise SystemExit(f"--files: no check module for kind {k!r} under {folder}")
        out += [str(p.relative_to(root)) for p in hits]
    return out


def _run(root: Path, paths: list[str], impl: str, diagnosis_on: bool, extra: Sequence[str], tmp: Path) -> dict:
    """One inner pytest run; returns ``{"cpu_s", "wall_s", "counts", "rc"}`` (seconds of the child processes)."""
    env = {**os.environ, SWITCH: "1" if diagnosis_on else "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["PYTHONPATH"] = child_pythonpath(env.get("PYTHONPATH"))
    tag = "on" if diagnosis_on else "off"
    cmd = [sys.executable, "-m", "pytest", *paths, "--impl", impl, "-m", MARKS, "-q", "-p", "no:cacheprovider",
           "--basetemp", str(tmp / f"pt-{tag}"), "--report-dir", str(tmp / f"reports-{tag}"), "--no-report-plots",
           *extra]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=4 * 3600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tail = r.stdout.strip().splitlines()[-3:] if r.stdout.strip() else []
    counts = {k: int(n) for line in tail for n, k in _COUNTS.findall(line)}
    return {"cpu_s": cpu, "wall_s": wall, "counts": counts, "rc": r.returncode}


def measure(
    root: Path, paths: list[str], impl: str, rounds: int, extra: Sequence[str], tmp: Path, warmup: int = 1
) -> dict[str, Any]:
    """``warmup`` untimed runs (byte-code compiled, data generated, file cache warm), then ``rounds`` interleaved
    on/off pairs (the first of a pair alternates); sums, ratio on/off, count mismatches."""
    for k in range(warmup):
        _run(root, paths, impl, False, extra, tmp / f"warmup{k}")
    on: list[dict] = []
    off: list[dict] = []
    for k in range(rounds):
        order = (True, False) if k % 2 == 0 else (False, True)
        for flag in order:
            (on if flag else off).append(_run(root, paths, impl, flag, extra, tmp / f"round{k}"))
    cpu_on, cpu_off = sum(r["cpu_s"] for r in on), sum(r["cpu_s"] for r in off)
    mismatched = [k for k, (a, b) in enumerate(zip(on, off)) if a["counts"] != b["counts"]]
    return {
        "impl": impl,
        "paths": paths,
        "rounds": rounds,
        "cpu_s_on": cpu_on,
        "cpu_s_off": cpu_off,
        "wall_s_on": sum(r["wall_s"] for r in on),
        "wall_s_off": sum(r["wall_s"] for r in off),
        "ratio_cpu": cpu_on / cpu_off if cpu_off > 0 else float("nan"),
        # per round, to show the spread of a shared machine (a probe that never runs cannot cost anything)
        "round_cpu_s": [[a["cpu_s"], b["cpu_s"]] for a, b in zip(on, off)],
        "counts_on": on[0]["counts"] if on else {},
        "counts_off": off[0]["counts"] if off else {},
        "rounds_with_other_outcomes": mismatched,
    }


def _line(name: str, m: dict[str, Any]) -> str:
    return (
        f"{name:<10} {m['impl']:<28} CPU on {m['cpu_s_on']:8.1f} s  off {m['cpu_s_off']:8.1f} s  ratio "
        f"{m['ratio_cpu']:.3f}  (wall on {m['wall_s_on']:.0f} s / off {m['wall_s_off']:.0f} s; outcomes "
        f"{m['counts_on']}{'; OTHER OUTCOMES in rounds ' + str(m['rounds_with_other_outcomes']) if m['rounds_with_other_outcomes'] else ''})"
        + "\n           per round on/off CPU s: "
        + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in m["round_cpu_s"])
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurement and print the table; 0 unless the checkout is missing (2)."""
    ap = argparse.ArgumentParser(prog="python -m gru4rec_conformance.benchmarks.diagnosis_overhead",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("--files", default=",".join(DEFAULT_FILES), help="kinds of the check modules (K1,K3,...)")
    ap.add_argument("--all", action="store_true", help="every non-slow check module (slow on a shared machine)")
    ap.add_argument("--rounds", type=int, default=2, help="on/off pairs per measurement (default 2)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs before the rounds (default 1)")
    ap.add_argument("--mutant", default="mutant:eval_masks_session", help='a failing mutant; "" to skip')
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    ap.add_argument("--tmp", type=Path, default=Path("/tmp") / f"diagnosis-overhead-{os.getpid()}")
    args = ap.parse_args(argv)
    if CHECKOUT_ROOT is None:
        print("needs a checkout (conformance/gru4rec/ with its check modules)", file=sys.stderr)
        return 2
    root = Path(CHECKOUT_ROOT)
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    kinds = None if args.all else [k.strip() for k in args.files.split(",") if k.strip()]
    out: dict[str, Any] = {}
    out["reference"] = measure(
        root, _module_paths(root, kinds), "reference", args.rounds, (), args.tmp / "ref", args.warmup
    )
    print(_line("reference", out["reference"]), flush=True)
    if args.mutant:
        paths = _module_paths(root, ["K1", "K8"])
        extra = ("-k", "sr1 or sr2 or ev1")
        out["mutant"] = measure(root, paths, args.mutant, args.rounds, extra, args.tmp / "mutant", args.warmup)
        print(_line("mutant", out["mutant"]), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
