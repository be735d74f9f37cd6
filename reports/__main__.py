"""``python -m gru4rec_conformance.reports scoreboard``, ``... render RUN_DIR`` and ``... checks``.

- ``scoreboard [--out reports/out] [--verdicts reports/verdicts]``: cross-implementation scoreboard from the
  latest run of every implementation (and committed verdicts), written to ``<out>/scoreboard.md`` + ``.html``;
- ``render RUN_DIR [RUN_DIR ...]``: rewrite results.json and the summaries of run directories from their
  results.jsonl, e.g. after a run was killed (the report is then marked incomplete);
- ``checks [--out docs/checks.md] [--check]``: write the check catalogue from the check modules
  (:mod:`gru4rec_conformance.reports.checks_catalogue`); ``--check`` writes nothing and exits 1 when the file
  differs from what the checks say (for CI).
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
    sb.add_argument(
        "--verdicts",
        type=Path,
        default=REPORTS_DIR / "verdicts",
        help="committed verdict reports (default: reports/verdicts; skipped if absent)",
    )
    rd = sub.add_parser("render", help="(re)write the summaries of run directories from results.jsonl")
    rd.add_argument("run_dirs", nargs="+", type=Path)
    from gru4rec_conformance.reports.checks_catalogue import DEFAULT_OUT

    ck = sub.add_parser("checks", help="write the check catalogue (docs/checks.md) from the check modules")
    ck.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the catalogue file (default: docs/checks.md)")
    ck.add_argument("--check", action="store_true", help="write nothing; exit 1 when the file is out of date")
    args = parser.parse_args(argv)
    if args.command == "checks":
        from gru4rec_conformance.reports.checks_catalogue import main as write_catalogue

        return write_catalogue(args.out, check=args.check)
    if args.command == "scoreboard":
        md, html = write_scoreboard(args.out, args.verdicts if args.verdicts.is_dir() else None)
        print(f"wrote {md}\nwrote {html}")
        return 0
    status = 0
    for run_dir in args.run_dirs:
        try:
            run = finalize(run_dir)
        except (RunDirError, OSError) as exc:  # the message names the file (and the line of a damaged record)
            print(f"error: {exc}", file=sys.stderr)
            status = 2
            continue
        except Exception as exc:  # records of an unexpected shape: say which run, never a bare traceback
            print(f"error: {run_dir}: cannot render: {type(exc).__name__}: {exc}", file=sys.stderr)
            status = 2
            continue
        print(f"{run_dir}: {run.status}, {len(run.results)} checks -> summary.md, summary.html, results.json")
    return status


if __name__ == "__main__":
    sys.exit(main())
