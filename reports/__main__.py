"""``python -m gru4rec_conformance.reports scoreboard`` and ``python -m gru4rec_conformance.reports render RUN_DIR``.

- ``scoreboard [--out reports/out] [--verdicts reports/verdicts]``: cross-implementation scoreboard from the
  latest run of every implementation (and committed verdicts), written to ``<out>/scoreboard.md`` + ``.html``;
- ``render RUN_DIR [RUN_DIR ...]``: rewrite results.json and the summaries of run directories from their
  results.jsonl, e.g. after a run was killed (the report is then marked incomplete).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gru4rec_conformance.reports.results import RunDirError
from gru4rec_conformance.reports.scoreboard import REPORTS_DIR, write_scoreboard
from gru4rec_conformance.reports.writer import finalize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gru4rec_conformance.reports", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sb = sub.add_parser("scoreboard", help="build the cross-implementation scoreboard")
    sb.add_argument("--out", type=Path, default=REPORTS_DIR / "out", help="run output folder (default: reports/out)")
    sb.add_argument("--verdicts", type=Path, default=REPORTS_DIR / "verdicts",
                    help="committed verdict reports (default: reports/verdicts; skipped if absent)")
    rd = sub.add_parser("render", help="(re)write the summaries of run directories from results.jsonl")
    rd.add_argument("run_dirs", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "scoreboard":
        md, html = write_scoreboard(args.out, args.verdicts if args.verdicts.is_dir() else None)
        print(f"wrote {md}\nwrote {html}")
        return 0
    status = 0
    for run_dir in args.run_dirs:
        try:
            run = finalize(run_dir)
        except (RunDirError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 2
            continue
        print(f"{run_dir}: {run.status}, {len(run.results)} checks -> summary.md, summary.html, results.json")
    return status


if __name__ == "__main__":
    sys.exit(main())
