"""Command line: ``python -m gru4rec_conformance.datasets prepare|info|synth`` (see ``--help``). With Hugging Face ``datasets`` installed
this is still our CLI: our folder comes first on the overlaid package's ``__path__`` (HF 5.2.0 has no ``__main__``)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path


def _info(name: str) -> int:
    from .sessions.pipeline import DATASETS, SPLIT_PARAMS, STUDY_PREFIX, TIME_UNIT

    stats = json.loads((Path(__file__).parent / "sessions" / "study_stats.json").read_text())
    names = DATASETS if name == "all" else [name]
    for n in names:
        pub = stats["published"][n]
        tday, tsplit = SPLIT_PARAMS[n]
        print(f"== {n}")
        print("download:")
        for page in stats["download_pages"][n]:
            print(f"  {page}")
        raw = stats["raw_inputs"][n]
        print(f"raw files: {', '.join(raw['files'])} (plain, .gz, .bz2, .zip or inside a .zip)")
        print(f"raw size: {raw['known_size']}")
        print(
            f"Time unit: {TIME_UNIT[n]}; test period: {tday} {TIME_UNIT[n]}; tsplit: "
            f"{'max Time of the full data' if tsplit is None else tsplit}; study prefix: {STUDY_PREFIX[n]}"
        )
        print("expected statistics (published, train_full / test):")
        print(f"  {'':6} {'events':>12} {'sessions':>11} {'days':>5} {'ev/sess':>8}")
        for part in ("train", "test"):
            p = pub[part]
            print(f"  {part:6} {p['events']:>12,} {p['sessions']:>11,} {p['days']:>5} {p['events_per_session']:>8.2f}")
        print(f"  items  {pub['items']:>12,}")
        acc = stats["reference_accuracy_official_best_params"][n]
        print(
            f"reference accuracy (official GRU4Rec, best params): Recall@20 {acc['recall@20']}, MRR@20 {acc['mrr@20']}"
        )
    print(f"source: {stats['source']}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gru4rec_conformance.datasets",
        description="The study's session datasets: prepare raw files, show expected "
        "statistics, write synthetic raw files.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    names = ["yoochoose", "rees46", "coveo", "retailrocket", "diginetica"]
    p = sub.add_parser("prepare", help="run the study's preprocessing on raw files (Parquet + stats + manifest)")
    p.add_argument("name", choices=names)
    p.add_argument(
        "--raw",
        type=Path,
        default=None,
        help="folder with the raw files (found by original name, else by header/columns, e.g. shipped samples)",
    )
    p.add_argument(
        "--file",
        dest="files",
        action="append",
        type=Path,
        default=[],
        metavar="PATH",
        help="one raw input file, identified by its content (repeatable: one per input the dataset needs)",
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="run without an input where a documented deviation exists (Yoochoose without yoochoose-test.dat, "
        "Rees46 without 2019-Oct.csv); recorded in the manifest",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="write the outputs even when a step leaves no events (tiny slices for pipeline tests)",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--tsv", action="store_true", help="also write the study's TSV files")
    p.add_argument("--force", action="store_true", help="recompute even when the cache is valid")
    p.add_argument(
        "--no-index-quirk",
        action="store_true",
        help="Yoochoose: row-wise removal instead of the study's removal by duplicated index label",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    i = sub.add_parser(
        "info", help="download pages and the published statistics (docs/datasets.md, 'Published statistics')"
    )
    i.add_argument("name", choices=names + ["all"])
    s = sub.add_parser("synth", help="write synthetic raw files in a dataset's raw format")
    s.add_argument("name", choices=names)
    s.add_argument("--out", required=True, type=Path)
    s.add_argument("--scale", type=float, default=None, help="fraction of the full raw size (default: CI size)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--compression", choices=["gzip", "bz2"], default=None)
    args = ap.parse_args(argv)

    if args.cmd == "info":
        return _info(args.name)
    if args.cmd == "synth":
        from .sessions.synthetic import CI_SCALE, generate_raw

        paths = generate_raw(
            args.name, args.out, args.scale or CI_SCALE[args.name], args.seed, compression=args.compression
        )
        for _f, path in paths.items():
            print(path)
        return 0
    if args.raw is None and not args.files:
        ap.error("prepare: give --raw DIR, --file PATH (repeatable), or both")
    from ._suite_io import RawFormatError
    from .sessions.inputs import InputError
    from .sessions.pipeline import EmptyResultError, prepare

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.formatwarning = lambda m, c, *a, **k: f"warning: {m}\n"
        try:
            res = prepare(
                args.name,
                args.raw,
                args.out,
                files=args.files,
                allow_missing=args.allow_missing,
                allow_empty=args.allow_empty,
                index_quirk=not args.no_index_quirk,
                tsv=args.tsv,
                force=args.force,
                progress=not args.quiet,
            )
        except (RawFormatError, InputError, EmptyResultError, FileNotFoundError) as e:
            print(f"error: {e}", file=sys.stderr)  # the bar is closed: the message starts on its own line
            return 2
    m = res.manifest
    for inp in m["inputs"]:
        print(f"input {inp['file']}: {inp['path']} ({inp['bytes']:,} bytes, sha256 {inp['sha256'][:12]}…)")
    for f in m.get("missing_inputs", []):
        print(f"input {f}: missing (--allow-missing)")
    if res.cached:
        print(f"{args.out}: up to date (cache key {m['cache_key'][:12]}); nothing done")
    print(f"filter rounds: {m['filter_rounds']}")
    for st in m["steps"]:
        print("  " + ", ".join(f"{k}={v}" for k, v in st.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
