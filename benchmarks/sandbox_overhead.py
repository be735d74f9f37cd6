"""What running the reference in a sandboxed worker costs: CPU time in-process vs in a bubblewrap worker.

``python -m gru4rec_conformance.benchmarks.sandbox_overhead [--files K1,K7] [-k EXPR] [--all] [--rounds 2]
[--warmup 1] [--unsandboxed] [--json PATH]``

Each round runs the same inner pytest of the reference twice: once in the suite's own process
(``--isolation never``) and once in a worker under the sandbox (``--isolation always --sandbox bwrap``), alternating
which goes first, after ``--warmup`` untimed runs. The figure is the CPU time (user + system) of the inner pytest
and every process below it (workers, bwrap, their children), summed from ``/proc/P/stat`` of each process as last
seen by a sampler every 50 ms: ``RUSAGE_CHILDREN`` was seen to miss most of a sandboxed worker's time (9.8 CPU
seconds for a run of 99 s; its workers end inside their PID namespace, killed with it, and are not waited for by a
parent that would add their time), so it is not used. A process's last 50 ms or less are missed, the same way in
every leg. The printed ratio is sandboxed / in-process of the summed rounds (the target is at most 1.05). ``--unsandboxed`` adds a third leg, a worker without the sandbox (``--sandbox none``), which
separates the price of the process boundary (a worker start imports the adapter's libraries again) from that of
the sandbox; its ratio sandboxed / unsandboxed is printed too. CPU time, not wall time: the machine this
was written for is shared.

What is measured, honestly: a representative subset, not a whole ``-m "not slow"`` run, which takes too long to
repeat on a 2-core shared machine. By default the K1 (state reset: many short calls, the worker's per-call cost)
and K7 (epoch batching: training, the bulk of a run's CPU) check modules; ``--all`` runs every non-slow module.
Outcomes must not depend on where the adapter runs: a round whose passed/failed counts differ is reported.
Nothing is asserted; the output is a table and, with ``--json``, a JSON object of seconds and ratios. Where the
sandbox cannot run here, the script says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gru4rec_conformance import CHECKOUT_ROOT, child_pythonpath
from gru4rec_conformance.benchmarks.diagnosis_overhead import _COUNTS, MARKS, _module_paths
from gru4rec_conformance.conformance._harness.isolation import sandbox_probe

DEFAULT_FILES = ("K1", "K7")
#: pytest options of each leg
LEGS = {
    "in-process": ("--isolation", "never"),
    "sandboxed": ("--isolation", "always", "--sandbox", "bwrap"),
    "unsandboxed": ("--isolation", "always", "--sandbox", "none", "--allow-unsandboxed"),
}


_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int, float] | None:
    """``(parent pid, start time in ticks, own CPU seconds of all its threads)`` of ``pid``, None once gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / _TICK


def _tree_cpu_sampler(root_pid: int, seen: dict[tuple[int, int], float], stop: threading.Event) -> None:
    """Every 50 ms, the own CPU seconds of ``root_pid`` and of every descendant, kept per (pid, start time)."""
    while not stop.wait(0.05):
        table = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (st := _stat(int(name))) is not None:
                table[int(name)] = st
        tree, grew = {root_pid}, True
        while grew:
            more = {pid for pid, st in table.items() if st[0] in tree} - tree
            grew, tree = bool(more), tree | more
        for pid in tree:
            if pid in table:
                seen[(pid, table[pid][1])] = table[pid][2]


def _run(root: Path, paths: list[str], extra: Sequence[str], tmp: Path) -> dict[str, Any]:
    """One inner pytest run of the reference; ``{"cpu_s", "wall_s", "counts", "rc"}``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["PYTHONPATH"] = child_pythonpath(env.get("PYTHONPATH"))
    cmd = [sys.executable, "-m", "pytest", *paths, "--impl", "reference", "-m", MARKS, "-q", "-p", "no:cacheprovider",
           "--basetemp", str(tmp / "pt"), "--report-dir", str(tmp / "reports"), "--no-report-plots", *extra]  # fmt: skip
    seen: dict[tuple[int, int], float] = {}
    stop = threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = threading.Thread(target=_tree_cpu_sampler, args=(proc.pid, seen, stop), daemon=True)
    sampler.start()
    out, _ = proc.communicate(timeout=4 * 3600)
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    tail = out.strip().splitlines()[-3:] if out.strip() else []
    counts = {k: int(n) for line in tail for n, k in _COUNTS.findall(line)}
    return {"cpu_s": sum(seen.values()), "wall_s": wall, "counts": counts, "rc": proc.returncode}


def measure(root: Path, paths: list[str], legs: Sequence[str], rounds: int, extra: Sequence[str], tmp: Path,
            warmup: int = 1) -> dict[str, Any]:  # fmt: skip
    """``warmup`` untimed runs of each leg, then ``rounds`` rounds of every leg (their order rotates per round);
    per leg the summed CPU and wall seconds, per round the CPU seconds, and each leg's CPU ratio to in-process."""
    for k in range(warmup):
        for leg in legs:
            _run(root, paths, (*LEGS[leg], *extra), tmp / f"warmup{k}-{leg}")
    runs: dict[str, list[dict[str, Any]]] = {leg: [] for leg in legs}
    for k in range(rounds):
        order = list(legs[k % len(legs):]) + list(legs[: k % len(legs)])  # fmt: skip
        for leg in order:
            runs[leg].append(_run(root, paths, (*LEGS[leg], *extra), tmp / f"round{k}-{leg}"))
    base = sum(r["cpu_s"] for r in runs["in-process"])
    out: dict[str, Any] = {"paths": paths, "extra": list(extra), "rounds": rounds, "legs": {}}
    for leg, rs in runs.items():
        cpu = sum(r["cpu_s"] for r in rs)
        out["legs"][leg] = {
            "cpu_s": cpu,
            "wall_s": sum(r["wall_s"] for r in rs),
            "round_cpu_s": [r["cpu_s"] for r in rs],
            "counts": [r["counts"] for r in rs],
            "rc": [r["rc"] for r in rs],
            "ratio_cpu": cpu / base if base > 0 else float("nan"),
        }
    if "unsandboxed" in runs:  # the sandbox's own price: the same worker with and without it
        plain = out["legs"]["unsandboxed"]["cpu_s"]
        out["sandbox_vs_unsandboxed_cpu"] = out["legs"]["sandboxed"]["cpu_s"] / plain if plain > 0 else float("nan")
    counts = {json.dumps(c, sort_keys=True) for rs in runs.values() for r in rs for c in [r["counts"]]}
    out["outcomes_differ"] = len(counts) > 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurement and print the table; 2 without a checkout or without a working sandbox, else 0."""
    ap = argparse.ArgumentParser(prog="python -m gru4rec_conformance.benchmarks.sandbox_overhead",
                                 description=(__doc__ or "").split("\n\n")[0])  # fmt: skip
    ap.add_argument("--files", default=",".join(DEFAULT_FILES), help="kinds of the check modules (K1,K7,...)")
    ap.add_argument("-k", dest="keyword", default=None, help="a pytest -k expression narrowing the checks")
    ap.add_argument("--all", action="store_true", help="every non-slow check module (slow on a shared machine)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of every leg (default 2)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of every leg before the rounds (default 1)")
    ap.add_argument("--unsandboxed", action="store_true", help="also a worker without the sandbox")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    ap.add_argument("--tmp", type=Path, default=Path("/tmp") / f"sandbox-overhead-{os.getpid()}")
    args = ap.parse_args(argv)
    if CHECKOUT_ROOT is None:
        print("needs a checkout (conformance/gru4rec/ with its check modules)", file=sys.stderr)
        return 2
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    probe = sandbox_probe()
    if not probe.available:
        print(f"the bubblewrap sandbox cannot run here: {probe.reason}", file=sys.stderr)
        return 2
    root = Path(CHECKOUT_ROOT)
    kinds = None if args.all else [k.strip() for k in args.files.split(",") if k.strip()]
    legs = ["in-process", "sandboxed"] + (["unsandboxed"] if args.unsandboxed else [])
    extra = ("-k", args.keyword) if args.keyword else ()
    m = measure(root, _module_paths(root, kinds), legs, args.rounds, extra, args.tmp, args.warmup)
    print(f"reference, {', '.join(m['paths'])} (-m {MARKS!r}{' -k ' + args.keyword if args.keyword else ''}), "
          f"{args.rounds} round(s):")  # fmt: skip
    for leg, f in m["legs"].items():
        print(f"  {leg:<12} CPU {f['cpu_s']:8.1f} s  ratio {f['ratio_cpu']:.3f}  (wall {f['wall_s']:.0f} s; per "
              f"round {', '.join(f'{c:.1f}' for c in f['round_cpu_s'])}; outcomes {f['counts'][0]})")  # fmt: skip
    if "sandbox_vs_unsandboxed_cpu" in m:
        print(f"  sandboxed / unsandboxed worker CPU: {m['sandbox_vs_unsandboxed_cpu']:.3f}")
    if m["outcomes_differ"]:
        print("  OTHER OUTCOMES between legs or rounds: see --json")
    if args.json is not None:
        args.json.write_text(json.dumps(m, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
