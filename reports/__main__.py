"""``python -m gru4rec_conformance.reports scoreboard``, ``... render``, ``... compact``, ``... study-agreement`` and
``... checks``.

- ``scoreboard [ROOT ...] [--out reports/out] [--verdicts reports/verdicts]``: cross-implementation scoreboard of
  the run folders under the roots (default: ``--out`` and the committed verdicts; several roots merge the runs of
  several machines), written to ``<out>/scoreboard.md`` + ``.html`` (:mod:`reports.scoreboard`);
- ``render ROOT [ROOT ...] --out DIR [--readmes]``: verdict cards, summaries, plots, the study figure and the
  scoreboard of every implementation and judged version under the roots, written into DIR (:mod:`reports.publish`);
  exits 2 when a folder cannot be read (the message names the file and line); ``--readmes`` also rewrites the
  generated status block of each ``ROOT/<impl>/README.md`` from the records (:mod:`reports.readme_status`);
- ``render RUN_DIR [RUN_DIR ...]`` (no ``--out``): rewrite results.json and the summaries of run directories in
  place from their results.jsonl, e.g. after a run was killed (the report is then marked incomplete);
- ``compact ROOT [ROOT ...] [--into reports/verdicts]``: keep the newest complete run per implementation and
  judged version as ``<into>/<impl>/[<level>/]<version>/results.json.gz`` (:mod:`reports.compact`);
- ``study-agreement [ROOT ...] [--out reports/out]``: the study's expected outcome per check (docs/study.md) against the
  runs under the roots (default: the committed verdicts), written to ``<out>/study_agreement.csv`` and ``.md``
  (:mod:`gru4rec_conformance.reports.agreement`, which documents how outcomes map to agree / disagree);
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
    sb.add_argument("roots", nargs="*", type=Path, help="run folders to read (default: --out and --verdicts)")
    sb.add_argument("--out", type=Path, default=REPORTS_DIR / "out", help="where the board goes (default: reports/out)")
    sb.add_argument(
        "--verdicts",
        type=Path,
        default=None,
        help="committed verdicts, read besides the roots (default without roots: reports/verdicts, if present)",
    )
    rd = sub.add_parser("render", help="write cards, summaries, plots and the scoreboard of run folders")
    rd.add_argument("run_dirs", nargs="+", type=Path, help="roots of run folders (with --out), or run directories")
    rd.add_argument("--out", type=Path, default=None, help="write every page here; without it: rewrite in place")
    rd.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    rd.add_argument("--readmes", action="store_true",
                    help="also rewrite the generated status block of each ROOT/<impl>/README.md from the records")  # fmt: skip
    cp = sub.add_parser("compact", help="keep the newest complete run per implementation and judged version")
    cp.add_argument("roots", nargs="+", type=Path)
    cp.add_argument("--into", type=Path, default=REPORTS_DIR / "verdicts", help="default: reports/verdicts")
    sa = sub.add_parser(
        "study-agreement", help="the study's expected outcome per check (docs/study.md) against our verdicts"
    )
    sa.add_argument("roots", nargs="*", type=Path, help="run folders to read (default: reports/verdicts)")
    sa.add_argument("--out", type=Path, default=REPORTS_DIR / "out", help="where the table goes (default: reports/out)")
    from gru4rec_conformance.reports.checks_catalogue import DEFAULT_OUT

    ck = sub.add_parser("checks", help="write the check catalogue (docs/checks.md) from the check modules")
    ck.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the catalogue file (default: docs/checks.md)")
    ck.add_argument("--check", action="store_true", help="write nothing; exit 1 when the file is out of date")
    args = parser.parse_args(argv)
    if args.command == "checks":
        from gru4rec_conformance.reports.checks_catalogue import main as write_catalogue

        return write_catalogue(args.out, check=args.check)
    if args.command == "study-agreement":
        from gru4rec_conformance.reports.agreement import write_agreement

        csv_path, md_path, unreadable = write_agreement(args.roots or [REPORTS_DIR / "verdicts"], args.out)
        for u in unreadable:
            print(f"error: {u}", file=sys.stderr)
        print(f"wrote {csv_path}\nwrote {md_path}")
        return 2 if unreadable else 0
    if args.command == "scoreboard":
        verdicts = args.verdicts
        if verdicts is None and not args.roots and (REPORTS_DIR / "verdicts").is_dir():
            verdicts = REPORTS_DIR / "verdicts"
        roots = args.roots or [args.out]
        md, html = write_scoreboard(args.out, verdicts, roots=roots)
        print(f"wrote {md}\nwrote {html}")
        return 0
    if args.command == "compact":
        from gru4rec_conformance.reports.compact import compact

        skipped: list[str] = []
        done = compact(args.roots, args.into, skipped)
        for source, target in done:
            print(f"{source} -> {target}")
        for why in skipped:
            print(f"skipped {why}", file=sys.stderr)
        print(f"{len(done)} verdict file(s) written under {args.into}")
        return 0
    if args.out is not None:
        from gru4rec_conformance.reports.publish import render_tree

        written, errors = render_tree(args.run_dirs, args.out, plots=not args.no_plots)
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        print(f"rendered {len(written)} verdict(s) into {args.out} (scoreboard.html, */card.html)")
        if args.readmes:
            from gru4rec_conformance.reports.readme_status import update_readmes
            from gru4rec_conformance.reports.selection import collect_runs

            updated, current = update_readmes(args.run_dirs, collect_runs(args.run_dirs))
            for readme in updated:
                print(f"updated the generated status block of {readme}")
            print(f"{len(updated)} README(s) updated, {len(current)} already current")
        return 2 if errors else 0
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
