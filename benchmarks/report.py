"""Benchmark report: pytest-benchmark JSON → Markdown tables + PNG plots, beside the study's published epoch times.

    python -m gru4rec_conformance.benchmarks.report BENCH_JSON [--out-root reports/out/benchmarks] [--title TITLE]

writes ``<out-root>/<UTC timestamp>/`` (a new folder; an earlier report is never overwritten) with ``report.md``,
``benchmark.json`` (a copy of the input) and ``plots/*.png``; every file is written atomically.

Input: the JSON that ``pytest benchmarks/ --benchmark-json=PATH`` writes (see benchmarks/conftest.py). Every
benchmark's ``extra_info`` carries the implementation, device, data shape, hyperparameters and the measured epoch
(or evaluation) time, rates, CPU time, peak memory and ratio to the reference; pytest-benchmark's own ``stats`` (wall
time of the whole timed ``fit`` call) are shown beside them when present.

Sections: one epoch per dataset shape and loss (with the study's official best-params epoch time, events/s and
minibatches/s, docs/study.md, 'Published accuracy and epoch times', and the study's "× best" ratio of the implementation's study row when it
declares one), the study's published ratios of the third-party implementations, the scalability sweeps (a table
each and a PNG of epoch time against the swept quantity, one line per implementation) and the evaluation throughput.
A skipped case (a results-JSONL skip line or ``gru4rec_bench.skipped``; benchmarks/README.md, "The results JSONL")
reads ``skipped: <reason>`` in the implementations matrix, a case with no record ``–``.
Raises ValueError naming the file when the JSON is not a pytest-benchmark report.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Any

from gru4rec_conformance.fileio import atomic_path, atomic_write_json, atomic_write_text, new_run_dir

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "reports" / "out" / "benchmarks"


# ----------------------------------------------------------------------------------------------------------------
# loading


def load(path: Path) -> dict:
    """The pytest-benchmark JSON at ``path``; ValueError naming the file when it is not one."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return _from_jsonl(path, text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ValueError(f"{path}: not a pytest-benchmark JSON report (no 'benchmarks' list)")
    for i, b in enumerate(data["benchmarks"]):
        if not isinstance(b, dict) or "extra_info" not in b or "group" not in b:
            raise ValueError(f"{path}: benchmarks[{i}] lacks 'group' or 'extra_info'")
    return data


def _from_jsonl(path: Path, text: str) -> dict:
    """A pytest-benchmark-like report from ``GRU4REC_BENCH_RESULTS_JSONL`` lines (``group``, ``name``,
    ``extra_info``; a torn last line of a killed run is skipped), so a run stopped before its end still renders.
    Skip records (``"skipped": true``, no ``extra_info``; benchmarks/timing.py ``skip_record``) go to
    ``gru4rec_bench.skipped``, present only when there is one. Raises ValueError naming the file when no line is a
    result."""
    benchmarks = []
    skipped = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "group" in row and isinstance(row.get("extra_info"), dict):
            benchmarks.append({"group": row["group"], "name": row.get("name"), "extra_info": row["extra_info"]})
        elif is_skip_record(row):
            skipped.append(row)
    if not benchmarks:
        raise ValueError(f"{path}: no benchmark result lines (group, extra_info)")
    impls = list(OrderedDict((b["extra_info"].get("impl"), b["extra_info"]) for b in benchmarks).values())
    keys = ("impl", "kind", "impl_version", "device", "in_process", "step_impl", "shims")
    info: dict = {
        "device": benchmarks[0]["extra_info"].get("device"),
        "implementations": [{k: d[k] for k in keys if k in d} for d in impls],
    }
    if skipped:
        info["skipped"] = skipped
    return {"benchmarks": benchmarks, "datetime": "(results JSONL)", "gru4rec_bench": info}


def is_skip_record(row: Any) -> bool:
    """Whether ``row`` (one parsed results-JSONL line, any JSON value) is the record of a skipped benchmark test:
    a dict with a string ``group``, ``"skipped": true`` and no ``extra_info`` (benchmarks/timing.py
    ``skip_record``). Raises nothing."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("group"), str)
        and row.get("skipped") is True
        and "extra_info" not in row
    )


def _skips(data: dict) -> list[dict]:
    """The skip records of a loaded report (``gru4rec_bench.skipped``), each flattened to its ``skip_info`` plus
    ``group``, ``case`` and ``reason``; malformed entries are passed over."""
    out = []
    for row in (data.get("gru4rec_bench") or {}).get("skipped") or []:
        if not is_skip_record(row):
            continue
        info = row.get("skip_info") if isinstance(row.get("skip_info"), dict) else {}
        out.append({**info, "group": row["group"], "case": row.get("name"), "reason": str(row.get("reason") or "")})
    return out


def _rows(data: dict, prefix: str) -> list[dict]:
    """Benchmarks of groups starting with ``prefix``, as their extra_info (+ group, stats), ordered by case (in
    order of first appearance) with the reference first within a case."""
    out = []
    for b in data["benchmarks"]:
        group = b.get("group") or ""
        if group.startswith(prefix) and b["extra_info"].get("impl"):
            out.append({**b["extra_info"], "group": group, "stats": b.get("stats") or {}})
    first: dict = {}
    for r in out:
        first.setdefault((r["group"], str(r.get("case"))), len(first))
    return sorted(out, key=lambda r: (first[(r["group"], str(r.get("case")))], r["impl"] != "reference", r["impl"]))


# ----------------------------------------------------------------------------------------------------------------
# formatting


def _f(v, spec: str = ".2f") -> str:
    if v is None or v == "":
        return "–"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return lines


def _study(dataset: str | None, loss: str | None) -> dict:
    """The study's official best-params row and the per-implementation rows of (dataset, loss), or {}."""
    if not dataset or not loss:
        return {}
    from gru4rec_conformance.benchmarks.workload import study_epoch_rows

    try:
        rows = study_epoch_rows(dataset, loss)
    except (ValueError, OSError):
        return {}
    best = next((r for r in rows if r["implementation"] == "GRU4Rec Official" and r["variant"] == "Best params"), None)
    return {"best": best, "rows": rows}


def _study_ratio(study_decl: dict | None, st: dict) -> str:
    if not study_decl or not st:
        return "–"
    for r in st["rows"]:
        if (
            r["implementation"].lower() == str(study_decl.get("implementation", "")).lower()
            and r["variant"].lower() == str(study_decl.get("variant", "")).lower()
        ):
            return _f(r["x_best"])
    return "–"


def _mem(r: dict) -> str:
    """CUDA max allocated MB, or the process's peak RSS during the fit with its growth over the RSS at the start."""
    if r.get("cuda_max_allocated_mb") is not None:
        return f"{r['cuda_max_allocated_mb']:.0f} (CUDA)"
    peak, base = r.get("peak_rss_mb"), r.get("base_rss_mb")
    if peak is not None and base is not None:
        return f"{peak:.0f} (+{max(0.0, peak - base):.0f})"
    return _f(peak, ".0f")


def _header(data: dict, title: str) -> list[str]:
    info = data.get("gru4rec_bench") or {}
    mi = data.get("machine_info") or {}
    ci = data.get("commit_info") or {}
    first: dict[str, Any] = next((b["extra_info"] for b in data["benchmarks"] if b.get("extra_info")), {})
    vers = first.get("versions") or info.get("versions") or {}  # measured during the runs (threads as set there)
    settings = first.get("settings") or {}
    device = info.get("device") or first.get("device") or "?"
    lines = [
        f"# {title}",
        "",
        f"- run: {data.get('datetime', '?')} (pytest-benchmark {data.get('version', '?')}); commit "
        f"{ci.get('id', '?')[:12]}{' (dirty)' if ci.get('dirty') else ''} on branch {ci.get('branch', '?')}",
        f"- device: **{device}**"
        + (f", GPU {vers['gpu']} (CUDA {vers.get('cuda')})" if vers.get("gpu") else "")
        + f"; CPU {vers.get('cpu', mi.get('cpu', {}).get('brand_raw', '?'))}, {vers.get('cpus', '?')} cores; "
        f"torch {vers.get('torch', '?')} with {vers.get('torch_threads', '?')} thread(s), numpy "
        f"{vers.get('numpy', '?')}, pandas {vers.get('pandas', '?')}, Python {vers.get('python', '?')}",
        f"- settings: data scale `{settings.get('scale', '?')}` (fraction of the full raw size of docs/datasets.md, 'Published statistics', or `ci` = "
        f"a few 10^4 raw rows per dataset), {settings.get('rounds', '?')} timed round(s) after "
        f"{settings.get('warmup', '?')} warm-up round(s) per epoch benchmark (best round shown), sweep grid "
        f"`{settings.get('sweeps', '?')}`",
    ]
    combos = OrderedDict.fromkeys(data_label(b["extra_info"]) for b in data["benchmarks"] if b.get("extra_info"))
    if len(combos) > 1:
        lines.append(
            "- several runs: data and per-epoch CPU limit differ between them ("
            + "; ".join(f"`{c}`" for c in combos)
            + "); the matrix below names each row's"
        )
    impls = info.get("implementations") or []
    if impls:
        lines.append(
            "- implementations: "
            + "; ".join(
                f"**{d.get('impl')}** ({d.get('kind')}, {d.get('impl_version')}"
                + (f", step_impl={d['step_impl']}" if d.get("step_impl") else "")
                + (f", {len(d['shims'])} shim(s), listed at the end" if d.get("shims") else "")
                + ")"
                for d in impls
            )
        )
    env = info.get("env") or {}
    if env:
        lines.append("- environment: " + ", ".join(f"`{k}={v}`" for k, v in sorted(env.items())))
    lines += [
        "",
        "Epoch time is each implementation's own epoch timer (the official port's printed epoch time, the "
        "reference's `FitReport.epoch_seconds`); mb/s and ev/s divide the minibatches and trained events of the "
        "epoch by it. *CPU* columns divide by the process CPU time of the whole `fit` instead (data preparation "
        "included): on a shared, loaded machine wall-clock rates vary with other load, CPU-time rates much "
        "less. Ratios are this implementation's time over the reference's in the same run (> 1: slower than the "
        "reference). The study's numbers were measured on the full datasets on the study's GPU: compare rates "
        "and ratios, not absolute times.",
        "",
    ]
    return lines


def _epoch_section(data: dict) -> list[str]:
    rows = _rows(data, "epoch/")
    if not rows:
        return []
    lines = ["## One epoch at the study's best parameters", ""]
    body = []
    for r in rows:
        st = _study(r.get("dataset"), r.get("loss"))
        best = st.get("best") or {}
        shape = r.get("shape") or {}
        body.append(
            [
                r.get("dataset"),
                r.get("loss"),
                f"**{r['impl']}**",
                _f(shape.get("train_events"), "d"),
                _f(r.get("minibatches"), "d"),
                _f(r.get("epoch_seconds")),
                _f(r.get("minibatches_per_s"), ".1f"),
                _f(r.get("events_per_s"), ".0f"),
                _f(r.get("minibatches_per_cpu_s"), ".1f"),
                _f(r.get("events_per_cpu_s"), ".0f"),
                _mem(r),
                _f(r.get("epoch_seconds_over_reference"))
                if not r.get("limited")
                else f"> {_f(r.get('epoch_seconds_over_reference_min'))}",
                _f(r.get("cpu_seconds_over_reference"))
                if not r.get("limited")
                else f"> {_f(r.get('cpu_seconds_over_reference_min'))} (limit)",
                _f(best.get("epoch_seconds")),
                _f(best.get("minibatches_per_second"), ".0f"),
                _f(best.get("events_per_second"), ".0f"),
                _study_ratio(r.get("study"), st),
            ]
        )
    lines += _table(
        [
            "dataset",
            "loss",
            "impl",
            "train events",
            "mb",
            "epoch s",
            "mb/s",
            "ev/s",
            "mb/CPU s",
            "ev/CPU s",
            "peak MB",
            "× ref",
            "× ref CPU",
            "study: official epoch s",
            "study mb/s",
            "study ev/s",
            "study × best",
        ],
        body,
    )
    lines += [
        "",
        "*peak MB*: the process's peak resident memory during the fit (its growth during the fit in "
        "brackets; CUDA: peak allocated device memory). *study*: the official implementation with the best "
        "parameters on the full dataset (docs/study.md, 'Published accuracy and epoch times'); *study × best*: the study's epoch-time ratio of the "
        "implementation's declared study row to that run.",
        "",
    ]
    return lines


def _study_section(data: dict) -> list[str]:
    pairs = OrderedDict()
    for r in _rows(data, "epoch/"):
        if r.get("dataset") and r.get("loss"):
            pairs[(r["dataset"], r["loss"])] = True
    if not pairs:
        return []
    lines = [
        "## The study's published epoch times (docs/study.md)",
        "",
        "Out-of-the-box third-party implementations against the official implementation with the best "
        "parameters, same dataset and loss (source: datasets/study/study_results.csv).",
        "",
    ]
    body = []
    for dataset, loss in pairs:
        st = _study(dataset, loss)
        best = st.get("best")
        if not best:
            continue
        oob = [
            f"{r['implementation']} {_f(r['x_best'])}×"
            for r in st["rows"]
            if r["variant"].startswith("OOB =") or r["variant"] == "OOB"
        ]
        body.append(
            [
                dataset,
                loss,
                _f(best["epoch_seconds"]),
                _f(best["events_per_second"], ".0f"),
                _f(best["minibatches_per_second"], ".0f"),
                "; ".join(oob) or "–",
            ]
        )
    lines += _table(["dataset", "loss", "official epoch s", "ev/s", "mb/s", "out of the box: epoch time × best"], body)
    return lines + [""]


def _sweep_section(data: dict, plots: dict) -> list[str]:
    rows = _rows(data, "sweep/")
    if not rows:
        return []
    lines = [
        "## Scalability sweeps",
        "",
        "Base: the study's best Diginetica cross-entropy parameters on Zipf session data; one quantity varied. "
        "Epoch time should grow with batch size × (batch size + n_sample), hidden size and sessions, and stay flat "
        "over the catalogue size for an implementation that scores only the sampled columns.",
        "",
    ]
    by: OrderedDict[str, list[dict]] = OrderedDict()
    for r in rows:
        by.setdefault(r.get("sweep") or r["group"].split("/", 1)[1], []).append(r)
    for name, rs in by.items():
        lines += [f"### {name}", ""]
        if name in plots:
            lines += [f"![{name}]({plots[name]})", ""]
        body = [
            [
                _f(r.get("value"), "d") if isinstance(r.get("value"), int) else r.get("value"),
                f"**{r['impl']}**",
                _f((r.get("shape") or {}).get("n_items"), "d"),
                _f(r.get("minibatches"), "d"),
                _f(r.get("epoch_seconds")),
                _f(r.get("events_per_s"), ".0f"),
                _f(r.get("events_per_cpu_s"), ".0f"),
                _mem(r),
                _f(r.get("cpu_seconds")),
                ratio_cell(r) if r["impl"] != "reference" else "–",
            ]
            for r in sorted(rs, key=lambda r: (r.get("value") or 0, r["impl"] != "reference", r["impl"]))
        ]
        lines += _table(
            [name, "impl", "items", "mb", "epoch s", "ev/s", "ev/CPU s", "peak MB", "CPU s", "× ref (CPU)"], body
        ) + [""]
    return lines


def _eval_section(data: dict, plots: dict) -> list[str]:
    rows = _rows(data, "eval/")
    if not rows:
        return []
    lines = ["## Evaluation throughput (full-catalogue ranking, conservative ties, cutoffs 1/5/10/20)", ""]
    if "eval" in plots:
        lines += [f"![evaluation]({plots['eval']})", ""]
    body = [
        [
            r.get("dataset"),
            f"**{r['impl']}**",
            _f((r.get("shape") or {}).get("n_items"), "d"),
            _f(r.get("eval_events"), "d"),
            _f(r.get("eval_seconds"), ".3f"),
            _f(r.get("eval_events_per_s"), ".0f"),
            _f(r.get("eval_events_per_cpu_s"), ".0f"),
            _f(r.get("eval_seconds_over_reference")),
        ]
        for r in rows
    ]
    lines += _table(["dataset", "impl", "items", "test events", "seconds", "events/s", "events/CPU s", "× ref"], body)
    return lines + ["", "(Untrained models: ranking costs the same; the metrics are not meaningful here.)", ""]


#: adapter name prefix -> the study's implementation name (datasets/study/study_results.csv)
STUDY_NAMES = {
    "official_pytorch": "GRU4Rec Official",
    "gru4rec_pytorch": "GRU4REC-pytorch",
    "torch_gru4rec": "Torch-GRU4Rec",
    "gru4rec_tensorflow": "GRU4Rec_Tensorflow",
    "keras_gru4rec": "KerasGRU4Rec",
    "recpack": "Recpack",
}


def study_name(impl: str) -> str | None:
    """The study's name of the implementation an adapter wraps (None: not in the study)."""
    base = impl.split(":", 1)[0]
    return STUDY_NAMES.get(base)


def _geomean(values: list[float | None]) -> float | None:
    import math

    vals = [v for v in values if isinstance(v, (int, float)) and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def ratio_of(r: dict) -> tuple[float | None, bool]:
    """``(CPU-time ratio to the reference, limited)`` of a recorded epoch: the measured ratio of a complete
    epoch; for one stopped at the limit the larger of its lower bound and its estimate (the estimate counts B
    trained events per step, which undercounts an implementation whose minibatch holds B whole sessions, so it
    can fall below the bound); None when nothing is recorded."""
    if r.get("limited"):
        low = r.get("cpu_seconds_over_reference_min", r.get("epoch_seconds_over_reference_min"))
        est = r.get("cpu_seconds_over_reference_est")
        vals = [v for v in (low, est) if isinstance(v, (int, float))]
        return (max(vals) if vals else None), True
    return r.get("cpu_seconds_over_reference", r.get("epoch_seconds_over_reference")), False


def _two_digits(v: Any) -> str:
    """A ratio with about two significant digits: ``324``, ``4.0``, ``0.48``, ``0.03``."""
    if not isinstance(v, (int, float)):
        return _f(v)
    return _f(v, ".0f" if v >= 10 else ".1f" if v >= 1 else ".2f")


def ratio_cell(r: dict | None) -> str:
    """One cell of the ratio matrix: ``2.31×``; stopped at the limit ``> 4.0× (≈ 12×, 37 mb)`` (the estimate only
    where it exceeds the bound); ``–`` none."""
    if r is None:
        return "–"
    if r.get("failed"):
        return f"failed ({str(r['failed']).split(':', 1)[0]})"
    if r.get("limited"):
        low = r.get("cpu_seconds_over_reference_min", r.get("epoch_seconds_over_reference_min"))
        est = r.get("cpu_seconds_over_reference_est")
        mb = _f(r.get("minibatches"), "d")
        if isinstance(est, (int, float)) and isinstance(low, (int, float)) and est > low:
            return f"> {_two_digits(low)}× (≈ {_two_digits(est)}×, {mb} mb)"
        return f"> {_two_digits(low)}× ({mb} mb)"
    ratio, _ = ratio_of(r)
    return f"{_f(ratio)}×"


def _escape_pipes(text: str) -> str:
    """``text`` with ``|`` escaped, so that it stays in one Markdown table cell."""
    return text.replace("|", "\\|")


#: the longest skip reason a matrix cell shows in full (a longer one is cut; the list below the matrix has it whole)
SKIP_CELL_CHARS = 40


def short_skip_reason(reason: str, impl: str | None = None) -> str:
    """``reason`` (a benchmark test's skip reason) shortened for a table cell: whitespace collapsed, the prefix
    naming the implementation dropped (``unsupported by <impl>: `` or ``<impl>: ``, the row names it already), cut
    to :data:`SKIP_CELL_CHARS` characters with ``…`` (at a space, where one is in its second half) and ``|``
    escaped for Markdown; ``?`` for an empty reason. Raises nothing."""
    text = " ".join(str(reason).split())
    if impl:
        for prefix in (f"unsupported by {impl}: ", f"{impl}: "):
            if text.startswith(prefix):
                text = text[len(prefix) :]
                break
    if len(text) > SKIP_CELL_CHARS:
        cut = text[: SKIP_CELL_CHARS - 1]
        space = cut.rfind(" ")
        text = (cut[:space] if space > SKIP_CELL_CHARS // 2 else cut).rstrip() + "…"
    return _escape_pipes(text) or "?"


def skipped_cell(reason: str, impl: str | None = None) -> str:
    """The matrix cell of a case whose benchmark test was skipped: ``skipped: <short reason>``
    (:func:`short_skip_reason`). A case with no record at all reads ``–`` (:func:`ratio_cell` of None)."""
    return f"skipped: {short_skip_reason(reason, impl)}"


def _study_x(impl: str, variant_name: str, dataset: str | None, loss: str | None) -> float | None:
    st = _study(dataset, loss)
    name = study_name(impl)
    for row in st.get("rows", []) if name else []:
        if row["implementation"] == name and row["variant"].lower() == variant_name.lower():
            return row["x_best"]
    return None


def data_label(r: dict) -> str:
    """How a recorded epoch's data was made and limited: ``catalogue, 10 s`` (``GRU4REC_BENCH_DATA``, the per-epoch
    CPU limit); ``?`` for records without settings."""
    st = r.get("settings") or {}
    label = str(st.get("data") or "?")
    if st.get("epoch_cpu_limit_s"):
        label += f", {_f(st['epoch_cpu_limit_s'], 'g')} s"
    return label


def _impl_rows(data: dict) -> list[dict]:
    rows = [dict(r, variant=r.get("variant") or "best") for r in _rows(data, "epoch/") + _rows(data, "epoch-oob/")]
    return [r for r in rows if r["impl"] != "reference"]


def _impl_section(data: dict, plots: dict) -> list[str]:
    """Every implementation against the reference: the ratio matrix (rows implementation x variant, columns
    dataset / loss), the study's published ratios beside ours, and the orderings compared."""
    rows = _impl_rows(data)
    if not rows:
        return []
    cases = list(OrderedDict.fromkeys((r.get("dataset"), r.get("loss")) for r in rows))
    keys = list(OrderedDict.fromkeys((r["impl"], r["variant"]) for r in rows))
    at = {(r["impl"], r["variant"], r.get("dataset"), r.get("loss")): r for r in rows}
    skips = _impl_skips(data, at)
    # a case or an implementation skipped in every run still gets its column or row (after the measured ones)
    cases += [c for c in OrderedDict.fromkeys((d, lo) for _, _, d, lo in skips) if c not in cases]
    keys += [k for k in OrderedDict.fromkeys((i, v) for i, v, _, _ in skips) if k not in keys]
    lines = [
        "## Implementations × reference (CPU time of one epoch over the reference's, same data, interleaved)",
        "",
        "Each cell: the implementation's process CPU time for one epoch over the mean of the reference epochs "
        "run just before and just after it (> 1: slower than the reference). **> L× (≈ E×, m mb)**: the epoch "
        "was stopped at the per-epoch CPU limit after m minibatches; L is the CPU spent up to the stop over the "
        "reference's whole epoch (a lower bound), E the estimate from its CPU seconds per trained event. "
        "*best*: the study's best parameters (inexpressible ones dropped, see below); *oob*: the implementation's "
        "own defaults with the loss set, against the reference at the best parameters (as the study's "
        "out-of-the-box ratios). *data, limit*: the data of the row's cases (`GRU4REC_BENCH_DATA`: `padded` — the "
        "real catalogue, few trained minibatches, one-event sessions for the other items; `catalogue` — every item "
        "in a trained session) and the per-epoch CPU limit; each ratio is to the reference on the same data.",
        "",
    ]
    header = ["implementation", "variant", "data, limit"] + [f"{d} {lo}" for d, lo in cases]
    header += ["geo. mean (complete epochs)", "cases averaged", "with stopped epochs", "study OOB geo. mean (oob rows)"]
    body = []
    order: dict = {}
    for impl, variant in keys:
        cells: list[str] = []
        measured: dict[tuple, float] = {}
        bounds: dict[tuple, float] = {}
        estimates: dict[tuple, float] = {}
        for d, lo in cases:
            r = at.get((impl, variant, d, lo))
            skip = skips.get((impl, variant, d, lo))
            cells.append(skipped_cell(skip["reason"], impl) if r is None and skip is not None else ratio_cell(r))
            if r is None or r.get("failed"):
                continue
            ratio, limited = ratio_of(r)
            if ratio is None:
                continue
            if not limited:
                measured[(d, lo)] = ratio
            else:
                bounds[(d, lo)] = stopped_bound(r) or ratio
                estimates[(d, lo)] = ratio
        theirs = [_study_x(impl, "OOB", d, lo) for d, lo in measured] if variant == "oob" else []
        g, gs = _geomean(list(measured.values())), _geomean(theirs)
        order[(impl, variant)] = {
            "mean": g,
            "study": gs,
            "cases": list(measured),
            "stopped": len(bounds),
            "bound": _geomean([*measured.values(), *bounds.values()]) if bounds else None,
            "estimate": _geomean([*measured.values(), *estimates.values()]) if bounds else None,
        }
        labels = OrderedDict.fromkeys(data_label(r) for r in rows if (r["impl"], r["variant"]) == (impl, variant))
        body.append([f"**{impl}**", variant, " / ".join(labels) or "–", *cells, _f(g), _cases_cell(list(measured), cases),
                     _stopped_cell(order[(impl, variant)]), _f(gs)])  # fmt: skip
    lines += _table(header, body) + [""]
    lines += [
        "*geo. mean (complete epochs)*: the geometric mean of the measured ratios only, over the cases named in *cases "
        "averaged* (rows average different cases: compare rows over the cells, not only their means). *with stopped "
        "epochs*: the row's k stopped epochs added, as **≥ B×** (the geometric mean with each stopped case at its lower "
        "bound: a bound on the mean over all the row's cases) and ≈ E× (each at its estimate: an extrapolation, never a "
        "measurement). *study OOB geo. mean*: the study's published ratios over the same cases as our mean.",
        "",
    ]
    lines += _table(header, body) + [""]
    lines += _skip_notes(skips)
    dropped: OrderedDict[str, set] = OrderedDict()
    for r in rows:
        if r.get("dropped_hparams"):
            dropped.setdefault(r["impl"], set()).update(r["dropped_hparams"])
    if dropped:
        lines += [
            "Best parameters an adapter cannot express, left at the implementation's default: "
            + "; ".join(f"**{k}**: {', '.join(sorted(v))}" for k, v in dropped.items()),
            "",
        ]
    if "impl_vs_study" in plots:
        lines += [f"![ours against the study]({plots['impl_vs_study']})", ""]
    lines += _study_compare(at, cases, keys)
    lines += _ordering(order)
    return lines


#: short names of the losses in the "cases averaged" cells
_LOSS_TAGS = {"cross-entropy": "XE", "bpr-max": "BPR-max"}


def _case_tag(dataset: str | None, loss: str | None) -> str:
    return f"{dataset} {_LOSS_TAGS.get(str(loss), loss)}"


def _cases_cell(measured: list, cases: list) -> str:
    """Which cases a row's mean averages: ``all 10``, ``none``, or ``3 of 10: coveo XE, …`` (every case named)."""
    if not measured:
        return "none"
    if len(measured) == len(cases):
        return f"all {len(cases)}"
    return f"{len(measured)} of {len(cases)}: " + ", ".join(_case_tag(d, lo) for d, lo in measured)


def _stopped_cell(o: dict) -> str:
    """``–`` without stopped epochs, else ``k stopped: ≥ B× (≈ E×)`` (see the matrix's note)."""
    if not o["stopped"]:
        return "–"
    est = f" (≈ {_two_digits(o['estimate'])}×)" if o["estimate"] and o["estimate"] > (o["bound"] or 0) else ""
    return f"{o['stopped']} stopped: ≥ {_two_digits(o['bound'])}×{est}"


def stopped_bound(r: dict) -> float | None:
    """The lower bound of an epoch stopped at the limit (CPU spent up to the stop over the reference's epoch), or
    None when not recorded."""
    low = r.get("cpu_seconds_over_reference_min", r.get("epoch_seconds_over_reference_min"))
    return float(low) if isinstance(low, (int, float)) else None


def _impl_skips(data: dict, at: dict) -> OrderedDict:
    """The skip records of the matrix's groups (``epoch/``, ``epoch-oob/``; not the reference's), keyed like
    ``at`` by (impl, variant, dataset, loss), the last record of a key winning; a key measured in some run (in
    ``at``) is left out: the measurement is shown. The dataset, loss and variant come from the record's
    ``skip_info``, else from its group."""
    out: OrderedDict = OrderedDict()
    for s in _skips(data):
        if not s["group"].startswith(("epoch/", "epoch-oob/")) or not s.get("impl") or s["impl"] == "reference":
            continue
        parts = s["group"].split("/")
        dataset = s.get("dataset") or (parts[1] if len(parts) == 3 else None)
        loss = s.get("loss") or (parts[2] if len(parts) == 3 else None)
        variant = s.get("variant") or ("oob" if s["group"].startswith("epoch-oob/") else "best")
        key = (s["impl"], variant, dataset, loss)
        if key not in at:
            out.pop(key, None)  # the last record wins, in the place of its run
            out[key] = s
    return out


def _skip_notes(skips: OrderedDict) -> list[str]:
    """The skipped cases below the matrix: per implementation, variant and reason, the reason in full and the
    cases. Empty without skips, so a report of records without skips reads as before."""
    if not skips:
        return []
    by: OrderedDict = OrderedDict()
    for (impl, variant, d, lo), s in skips.items():
        by.setdefault((impl, variant, " ".join(s["reason"].split()) or "?"), []).append(f"{d} {lo}")
    lines = ["Skipped cases (*skipped: reason* in the matrix; the test's reason in full here; *–*: not run):", ""]
    lines += [
        f"- **{impl}** ({variant}): {reason} — {', '.join(where)}" for (impl, variant, reason), where in by.items()
    ]
    return lines + [""]


#: the runner name of the official PyTorch port measured beside the reference (benchmarks/runners.py)
OFFICIAL_IMPLS = ("official", "official_pytorch")


def official_factor(
    at: dict, dataset: str | None, loss: str | None, data: str | None = None
) -> tuple[float | None, bool]:
    """``(official/reference CPU ratio, stopped)`` measured in this report for the case (the official port at the
    best parameters; with ``data``, only on data of that :func:`data_label`), or ``(None, False)`` when the report
    has no such epoch."""
    for name in OFFICIAL_IMPLS:
        r = at.get((name, "best", dataset, loss))
        if r is not None and not r.get("failed") and (data is None or data_label(r) == data):
            ratio, limited = ratio_of(r)
            if ratio is not None:
                return ratio, limited
    return None, False


def _study_compare(at: dict, cases: list, keys: list) -> list[str]:
    """Per case: our out-of-the-box ratio beside the study's published OOB × official-best epoch time, with the
    official/reference factor this report measured and our ratio converted to × official with it."""
    body = []
    for impl, variant in keys:
        if variant != "oob" or study_name(impl) is None:
            continue
        for d, lo in cases:
            r = at.get((impl, variant, d, lo))
            sx = _study_x(impl, "OOB", d, lo)
            if r is None:  # a loss the implementation lacks, or a case not run
                continue
            factor, factor_stopped = official_factor(at, d, lo, data_label(r))
            body.append([f"**{impl}**", d, lo, ratio_cell(r),
                         "–" if factor is None else f"{_f(factor)}×" + (" (stopped)" if factor_stopped else ""),
                         _over_official(r, factor, factor_stopped), f"{_f(sx)}×" if sx is not None else "–"])  # fmt: skip
    if not body:
        return []
    return [
        "### Out of the box: ours beside the study's (docs/study.md)",
        "",
        "Ours: CPU time, this machine, scaled-down epochs on the real catalogues; the study: GPU epoch time on the "
        "full datasets, × the official implementation with the best parameters. *official × reference*: the official "
        "port's epoch at the best parameters over the reference's, measured in this report for the same case on the same "
        "data; *ours × official* divides our ratio by it (the study's baseline): a bound stays a bound (**>**), an "
        "estimate an estimate (**≈**); *–*: no complete official epoch on that case and data.",
        "",
        *_table(
            [
                "implementation",
                "dataset",
                "loss",
                "ours × reference",
                "official × reference (this report)",
                "ours × official (derived)",
                "study × official",
            ],
            body,
        ),  # fmt: skip
        "",
    ]


def _over_official(r: dict, factor: float | None, factor_stopped: bool) -> str:
    """Our ratio to the reference divided by the measured official/reference factor; ``–`` without a complete
    official epoch or with a failed case."""
    if factor is None or factor_stopped or factor <= 0 or r.get("failed"):
        return "–"
    ratio, limited = ratio_of(r)
    if ratio is None:
        return "–"
    if not limited:
        return f"{_two_digits(ratio / factor)}×"
    low = stopped_bound(r)
    est = r.get("cpu_seconds_over_reference_est")
    text = f"> {_two_digits(low / factor)}×" if low is not None else ""
    if isinstance(est, (int, float)) and (low is None or est > low):
        text += f" (≈ {_two_digits(est / factor)}×)"
    return text.strip() or "–"


def _ordering(order: dict) -> list[str]:
    """The implementations ranked by our geometric mean over their complete epochs and by the study's over the same
    cases, with the pairs whose order differs; a row with stopped epochs carries its bound, one with only stopped
    epochs is listed apart (never ranked by an estimate)."""
    ours = sorted((k for k, o in order.items() if o["mean"] is not None), key=lambda k: order[k]["mean"])
    only_stopped = [k for k, o in order.items() if o["mean"] is None and o["stopped"]]
    if not ours and not only_stopped:
        return []

    def label(k: tuple) -> str:
        o = order[k]
        n = len(o["cases"])
        extra = f"; {o['stopped']} stopped, with them ≥ {_two_digits(o['bound'])}×" if o["stopped"] else ""
        return f"{k[0]}/{k[1]} ({o['mean']:.2f}× over {n} case{'s' if n != 1 else ''}{extra})"

    lines = ["### Ordering", ""]
    if ours:
        lines += [
            "Ours (geometric mean of the complete epochs' ratios, fastest first; rows average different cases, named "
            "in the matrix): " + " < ".join(label(k) for k in ours),
            "",
        ]
    if only_stopped:
        lines += [
            "Not ranked (every epoch stopped at the limit; lower bounds only): "
            + "; ".join(f"{i}/{v} (≥ {_two_digits(order[(i, v)]['bound'])}×)" for i, v in only_stopped),
            "",
        ]
    # one study value per study implementation: its OOB geometric mean over the cases of our mean
    ranked = [(k, order[k]["study"]) for k in ours if order[k]["study"] is not None and k[1] == "oob"]
    if len(ranked) >= 2:
        study_sorted = sorted(ranked, key=lambda t: t[1])
        lines += [
            "The study (OOB × official, geometric mean over the same cases as ours): "
            + " < ".join(f"{i}/{v} ({x:.2f}×)" for (i, v), x in study_sorted),
            "",
        ]
        pos_ours = {k: n for n, k in enumerate(k for k, _ in ranked)}
        pos_study = {k: n for n, (k, _) in enumerate(study_sorted)}
        flips = [
            (a, b)
            for a in pos_ours
            for b in pos_ours
            if pos_ours[a] < pos_ours[b] and pos_study[a] > pos_study[b] and study_name(a[0]) != study_name(b[0])
        ]
        if flips:
            lines += [
                "Pairs ordered differently (ours faster-first, the study's the other way): "
                + "; ".join(f"{a[0]} < {b[0]}" for a, b in flips)
                + ". The usual causes: CPU against GPU (a full-catalogue output layer is a large matrix product, "
                "relatively cheaper on a GPU than per-step Python overhead is), our short epochs (fixed costs of "
                "an epoch — data preparation, building the item map — weigh more than on the full datasets), and "
                "one torch thread here.",
                "",
            ]
        else:
            lines += ["The orderings agree (implementations wrapping the same study code aside).", ""]
    return lines


# ----------------------------------------------------------------------------------------------------------------
# plots


def _sweep_y(r: dict, use_cpu: bool) -> float | None:
    """CPU (else wall) seconds of one epoch; for an epoch stopped at the limit, the estimate of the whole epoch
    from the seconds per trained event so far and the reference's events of the same point."""
    sec = r.get("cpu_seconds") if use_cpu else r.get("epoch_seconds")
    if r.get("limited") and sec and r.get("events") and r.get("reference_runs"):
        ref_events = (r.get("shape") or {}).get("trained_events") or r["events"]
        return max(sec, sec / r["events"] * ref_events)
    return sec


def _plots(data: dict, folder: Path) -> dict:
    """PNG plots into ``folder``: one per sweep (epoch seconds against the value, log-log, one line per
    implementation), one of the epoch rates and one of the evaluation rates. Returns {name: relative path}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    folder.mkdir(parents=True, exist_ok=True)
    out: dict = {}

    def save(fig, name):
        try:
            with atomic_path(folder / f"{name}.png") as tmp:
                fig.savefig(tmp, dpi=110, bbox_inches="tight")
        finally:
            plt.close(fig)
        return f"plots/{name}.png"

    sweeps: OrderedDict[Any, dict[str, list[dict]]] = OrderedDict()  # sweep -> impl -> rows
    for r in _rows(data, "sweep/"):
        sweeps.setdefault(r.get("sweep"), {}).setdefault(r["impl"], []).append(r)
    for name, per in sweeps.items():
        # CPU time where every measured point has it (a failed point has no time at all)
        use_cpu = all(r.get("cpu_seconds") for rs in per.values() for r in rs if not r.get("failed"))
        fig, ax = plt.subplots(figsize=(6.2, 3.6))
        spans: list[float] = []
        for impl, rs in per.items():
            by_x: OrderedDict[float, list[tuple[float, bool]]] = OrderedDict()
            for r in sorted((r for r in rs if isinstance(r.get("value"), (int, float))), key=lambda r: r["value"]):
                y = _sweep_y(r, use_cpu)
                if y and not r.get("failed"):
                    x = max(r["value"], 1e-9) if name != "n_sample" else r["value"] + 1
                    by_x.setdefault(x, []).append((y, bool(r.get("limited"))))
            if not by_x:  # every point failed: named in the legend, nothing drawn
                ax.plot([], [], marker="x", linestyle="none", label=f"{impl} (failed at every point)")
                continue
            # points of several runs (results JSONL of several sessions): their geometric mean, one point per x
            xs = list(by_x)
            ys = [math.exp(sum(math.log(y) for y, _ in v) / len(v)) for v in by_x.values()]
            spans += ys
            line = ax.plot(xs, ys, marker="o", label=impl)[0]
            cut = [(x, y) for x, y, v in zip(xs, ys, by_x.values(), strict=True) if any(lim for _, lim in v)]
            if cut:
                ax.scatter([c[0] for c in cut], [c[1] for c in cut], marker="^", s=60, color=line.get_color())
        ax.set_xscale("log")
        ax.set_yscale("log")
        fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(fmt)
        # minor labels only where the axis spans less than two decades (else they overprint each other)
        narrow = bool(spans) and max(spans) / min(spans) < 100
        ax.yaxis.set_minor_formatter(fmt if narrow else matplotlib.ticker.NullFormatter())
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_xlabel(name + (" + 1" if name == "n_sample" else ""))
        ax.set_ylabel("CPU seconds per epoch" if use_cpu else "epoch seconds")
        ax.set_title(
            f"one epoch against {name}"
            + (
                " (^: estimated, stopped at the limit)"
                if any(r.get("limited") for rs in per.values() for r in rs)
                else ""
            ),
            fontsize=9,
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        out[name] = save(fig, f"sweep_{name}")

    epochs = _rows(data, "epoch/")
    if epochs:
        cases = list(OrderedDict.fromkeys(f"{r.get('dataset')}\n{r.get('loss')}" for r in epochs))
        impls = list(OrderedDict.fromkeys(r["impl"] for r in epochs))
        fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(cases)), 3.8))
        w = 0.8 / max(1, len(impls))
        for k, impl in enumerate(impls):
            vals = {
                f"{r.get('dataset')}\n{r.get('loss')}": r.get("minibatches_per_s") for r in epochs if r["impl"] == impl
            }
            ax.bar([i + k * w for i in range(len(cases))], [vals.get(c) or 0 for c in cases], width=w, label=impl)
        ax.set_xticks([i + w * (len(impls) - 1) / 2 for i in range(len(cases))])
        ax.set_xticklabels(cases, fontsize=7)
        ax.set_ylabel("minibatches / s")
        ax.set_title("one epoch at the study's best parameters")
        ax.legend()
        out["epoch"] = save(fig, "epoch_minibatches_per_s")

    evals = _rows(data, "eval/")
    if evals:
        datasets: list[Any] = list(OrderedDict.fromkeys(r.get("dataset") for r in evals))  # JSON values
        impls = list(OrderedDict.fromkeys(r["impl"] for r in evals))
        fig, ax = plt.subplots(figsize=(6, 3.6))
        w = 0.8 / max(1, len(impls))
        for k, impl in enumerate(impls):
            rates = {r.get("dataset"): r.get("eval_events_per_s") for r in evals if r["impl"] == impl}
            ax.bar(
                [i + k * w for i in range(len(datasets))], [rates.get(c) or 0 for c in datasets], width=w, label=impl
            )
        ax.set_xticks([i + w * (len(impls) - 1) / 2 for i in range(len(datasets))])
        ax.set_xticklabels(datasets, fontsize=8)
        ax.set_ylabel("test events / s")
        ax.set_title("full-catalogue evaluation")
        ax.legend()
        out["eval"] = save(fig, "eval_events_per_s")

    vs: list[tuple[str, float, float, bool]] = []
    for r in _impl_rows(data):
        sx = _study_x(r["impl"], "OOB", r.get("dataset"), r.get("loss")) if r["variant"] == "oob" else None
        ratio, limited = ratio_of(r)
        if sx is not None and ratio:
            vs.append((r["impl"], sx, ratio, limited))
    if vs:
        fig, ax = plt.subplots(figsize=(5.5, 4.2))
        for k, impl in enumerate(OrderedDict.fromkeys(p[0] for p in vs)):
            mine = [p for p in vs if p[0] == impl]
            color = f"C{k % 10}"
            full = [p for p in mine if not p[3]]
            stopped = [p for p in mine if p[3]]
            ax.scatter([p[1] for p in full], [p[2] for p in full], color=color, label=impl, marker="o")
            ax.scatter([p[1] for p in stopped], [p[2] for p in stopped], color=color, marker="^", facecolors="none")
        lo = min(min(p[1], p[2]) for p in vs) / 1.5
        hi = max(max(p[1], p[2]) for p in vs) * 1.5
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("study: epoch time × official best (GPU, full data)")
        ax.set_ylabel("ours: CPU time × reference")
        ax.set_title("out of the box, per dataset and loss (^: estimate, stopped at the limit)", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        out["impl_vs_study"] = save(fig, "impl_vs_study")
    return out


# ----------------------------------------------------------------------------------------------------------------
# the report


def build_markdown(
    data: dict,
    plots: dict | None = None,
    title: str = "GRU4Rec benchmarks",
    notes: str | None = None,
    suite_cost: dict | None = None,
) -> str:
    """The Markdown report of a loaded pytest-benchmark JSON (``plots``: {name: relative PNG path}; ``notes``:
    Markdown placed after the implementations section, e.g. the explanations of a committed run; ``suite_cost``: a
    ``suite_cost.json`` of ``benchmarks/suite_cost.py``, whose section — the main job's CPU time cold and warm and
    its slowest checks — ends the report)."""
    plots = plots or {}
    lines = _header(data, title)
    lines += _impl_section(data, plots)
    if notes:
        lines += [notes.rstrip(), ""]
    lines += _epoch_section(data)
    if "epoch" in plots:
        lines += [f"![epoch rates]({plots['epoch']})", ""]
    lines += _study_section(data)
    lines += _sweep_section(data, plots)
    lines += _eval_section(data, plots)
    lines += _shims_section(data)
    if suite_cost is not None:
        from gru4rec_conformance.benchmarks.suite_cost import render

        lines += ["", render(suite_cost).rstrip()]
    return "\n".join(lines).rstrip() + "\n"


def _shims_section(data: dict) -> list[str]:
    """Every implementation's declared shims (what its adapter translates), one bullet each: too long for the
    header, where only their number is."""
    impls = [d for d in (data.get("gru4rec_bench") or {}).get("implementations") or [] if d.get("shims")]
    if not impls:
        return []
    lines = ["## Shims (what each adapter translates; never a fix)", ""]
    for d in impls:
        lines += [f"**{d.get('impl')}** ({d.get('impl_version')}):", ""]
        lines += [f"- {shim}" for shim in d["shims"]] + [""]
    return lines


def write_report(
    json_path: Path,
    out_root: Path = DEFAULT_OUT,
    title: str = "GRU4Rec benchmarks",
    plots: bool = True,
    compact: bool = False,
    notes: str | None = None,
    suite_cost: dict | None = None,
) -> Path:
    """Write ``report.md``, ``benchmark.json`` and ``plots/*.png`` into a new ``<out_root>/<UTC timestamp>/``
    folder and return it. ``compact``: the copied JSON without pytest-benchmark's per-round timing arrays
    (``stats.data``), for committing. Raises ValueError (naming the file) for a JSON that is not a pytest-benchmark
    report."""
    data = load(json_path)
    folder = new_run_dir(Path(out_root))  # <stamp>, then <stamp>-1, <stamp>-2, ...
    made = _plots(data, folder / "plots") if plots else {}
    if compact:
        for b in data["benchmarks"]:
            (b.get("stats") or {}).pop("data", None)
        atomic_write_json(folder / "benchmark.json", data, trailing_newline=True)
    else:
        with atomic_path(folder / "benchmark.json") as tmp:
            shutil.copyfile(json_path, tmp)
    atomic_write_text(folder / "report.md", build_markdown(data, made, title, notes, suite_cost))
    return folder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gru4rec_conformance.benchmarks.report", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "json",
        type=Path,
        help="pytest-benchmark JSON (pytest benchmarks/ --benchmark-json=PATH) or a results JSONL "
        "(GRU4REC_BENCH_RESULTS_JSONL, one line per case; several runs concatenated)",
    )
    ap.add_argument("--out-root", type=Path, default=DEFAULT_OUT, help="parent folder of the report folder")
    ap.add_argument("--title", default="GRU4Rec benchmarks")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--compact", action="store_true", help="copy the JSON without the per-round timing arrays")
    ap.add_argument("--notes", type=Path, help="a Markdown file placed after the implementations section")
    ap.add_argument(
        "--suite-cost", type=Path, help="a suite_cost.json (benchmarks/suite_cost.py): the suite's own cost"
    )
    args = ap.parse_args(argv)
    if not args.json.is_file():
        ap.error(f"{args.json}: no such file")
    notes = args.notes.read_text(encoding="utf-8") if args.notes else None
    cost = None
    if args.suite_cost is not None:
        try:
            cost = json.loads(args.suite_cost.read_text(encoding="utf-8"))
            if not isinstance(cost, dict) or not isinstance(cost.get("runs"), list):
                raise ValueError("not a suite_cost.json (no 'runs' list)")
        except (OSError, ValueError) as exc:
            ap.error(f"--suite-cost {args.suite_cost}: {exc}")
    try:
        folder = write_report(
            args.json,
            args.out_root,
            args.title,
            plots=not args.no_plots,
            compact=args.compact,
            notes=notes,
            suite_cost=cost,
        )
    except ValueError as exc:
        ap.error(str(exc))
    print(folder / "report.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
