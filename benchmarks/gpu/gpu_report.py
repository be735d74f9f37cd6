"""The GPU check's report: what benchmarks/gpu/run_gpu_benchmarks.sh left in its output folder → ``report.md``.

    python benchmarks/gpu/gpu_report.py OUT

Reads ``OUT/results.jsonl`` (one line per finished benchmark case, appended as each finished:
``GRU4REC_BENCH_RESULTS_JSONL``; a torn last line of a killed run is skipped), ``OUT/static_step.json``,
``OUT/golden_steps.xml`` (JUnit XML of the golden step tests) and ``OUT/env.txt``, and writes ``OUT/report.md``
(atomically) and at most two PNGs under ``OUT/plots/`` (minibatch rates per case, the catalogue-size sweep): the
device tool brings back at most 8 files.

The report starts with the side-by-side table the GPU check exists for: per dataset and loss, the reference's
minibatches/s against the official port's (best round each, the same data, both in one process), the speed-up
(official epoch time / reference epoch time) and the reference's rate without its one-time CUDA-graph capture;
then the cases the stages dropped for time (``benchmarks/gpu/timebox.py``; skip lines of results.jsonl), the GPU,
library versions and the official commit, the static-step and golden-step results, and the standard benchmark
sections (benchmarks/report.py). Exit status 0, or 1 when no case finished.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "src") not in sys.path:  # the gru4rec_conformance namespace (never the root itself)
    sys.path.insert(0, str(REPO / "src"))

from gru4rec_conformance.benchmarks import report as R  # noqa: E402
from gru4rec_conformance.benchmarks.gpu.timebox import DROPPED  # noqa: E402
from gru4rec_conformance.fileio import atomic_write_text  # noqa: E402

#: the PNGs kept (the device tool's file limit); report.py makes one per sweep besides
KEEP_PLOTS = {"epoch": "epoch_minibatches_per_s.png", "n_items": "sweep_n_items.png"}
#: the speed-up over the official port that the GPU step aims at (docs/performance.md, 'What one step costs')
TARGET = 3.0


def _json_rows(path: Path) -> list[dict]:
    """The JSON objects of a JSON-lines file (none when it is missing); a line that is not JSON (a run killed
    mid-write) is skipped."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else ():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def read_jsonl(path: Path) -> list[dict]:
    """The benchmark rows (``group`` and ``extra_info``) of a JSON-lines file; see :func:`_json_rows`."""
    return [row for row in _json_rows(path) if "group" in row and "extra_info" in row]


def dropped_for_time(path: Path) -> list[dict]:
    """The skip lines of ``path`` (results.jsonl) whose reason says the stage's time box dropped the case."""
    return [row for row in _json_rows(path)
            if row.get("skipped") and str(row.get("reason", "")).startswith(DROPPED)]  # fmt: skip


def dropped_section(rows: list[dict]) -> list[str]:
    """Markdown lines naming every dropped test (its node id and the estimate against the time left)."""
    if not rows:
        return ["No case was dropped for time.", ""]
    out = [f"{len(rows)} test(s) dropped before they started (estimated from the cases already run):", ""]
    out += [f"- `{r.get('nodeid') or r.get('group')}`: {r.get('reason')}" for r in rows]
    return out + [""]


def as_benchmark_json(rows: list[dict]) -> dict:
    """A pytest-benchmark-shaped document of ``rows`` (what benchmarks/report.py reads). A case measured twice
    (a stage rerun) keeps its last row."""
    last: dict = {}
    for r in rows:
        last[(r["group"], r.get("name"), r["extra_info"].get("impl"))] = r
    benches = list(last.values())
    first = benches[0]["extra_info"] if benches else {}
    impls: dict = {}
    for b in benches:
        e = b["extra_info"]
        keys = ("impl", "kind", "impl_version", "device", "in_process", "step_impl", "shims", "pinned_commit")
        impls.setdefault(e.get("impl"), {k: e[k] for k in keys if k in e})
    return {
        "benchmarks": benches,
        "gru4rec_bench": {
            "device": first.get("device"),
            "versions": first.get("versions") or {},
            "implementations": list(impls.values()),
        },
    }


def golden_summary(path: Path) -> str:
    """One line from the JUnit XML of the golden step tests (or why there is none)."""
    if not path.is_file():
        return "not run (no golden_steps.xml: the stage did not finish)"
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        return f"unreadable golden_steps.xml ({exc})"
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return "golden_steps.xml has no testsuite"
    n, fail, err, skip = (int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped"))
    passed = n - fail - err - skip
    verdict = "PASS" if n and not (fail or err) and passed else "FAIL"
    return f"{verdict}: {passed} passed, {fail} failed, {err} errors, {skip} skipped of {n}"


def static_summary(path: Path) -> list[str]:
    """Lines on the static step's agreement and CUDA-graph capture from static_step.json."""
    if not path.is_file():
        return ["- static step: no static_step.json (stage 1 did not finish)"]
    res = json.loads(path.read_text(encoding="utf-8"))
    out = [
        f"- static step vs standard step on {res.get('device')}: agreement "
        f"{'yes' if res.get('agree') else 'NO'} (tolerance {res.get('tolerance')}, relative, after 2 epochs); "
        f"CUDA-graph fallbacks: {', '.join(res.get('cuda_graph_fallbacks') or []) or 'none'}"
    ]
    for name, v in (res.get("agreement") or {}).items():
        out.append(
            f"  - {name}: max rel. weight diff {v.get('max_rel_weight_diff'):.2e}, graph "
            f"{(v.get('static_step_info') or {}).get('cuda_graph')}"
        )
    for name, v in (res.get("speed") or {}).items():
        if isinstance(v, dict):
            out.append(
                f"  - speed {name}: {v['minibatches_per_s']:.1f} mb/s, ×{v['speedup_over_standard']:.2f} vs the "
                "standard step"
            )
    return out


def _capture_free_rate(e: dict) -> float | None:
    info = e.get("step_info") or {}
    cap = info.get("capture_seconds")
    sec, mb = e.get("epoch_seconds"), e.get("minibatches")
    if cap is None or not sec or not mb or sec <= cap:
        return None
    return mb / (sec - cap)


def headline(data: dict) -> list[str]:
    """The side-by-side table: per (dataset, loss) the reference's and the official port's minibatches/s."""
    cases: dict = {}
    for b in data["benchmarks"]:
        e = b["extra_info"]
        if str(b["group"]).startswith("epoch/"):
            cases.setdefault((e.get("dataset"), e.get("loss")), {})[e.get("impl")] = e
    head = ["dataset", "loss", "items", "B", "minibatches", "reference mb/s", "official mb/s", "speed-up", "≥ 3×"]
    head += ["reference mb/s w/o capture", "graph"]
    body = []
    for (dataset, loss), per in cases.items():
        ref, off = per.get("reference") or {}, per.get("official") or {}
        speed = off.get("epoch_seconds_over_reference")
        body.append(
            [
                dataset,
                loss,
                R._f((ref.get("shape") or off.get("shape") or {}).get("n_items"), "d"),
                R._f((ref.get("hparams") or off.get("hparams") or {}).get("batch_size"), "d"),
                R._f(ref.get("minibatches") or off.get("minibatches"), "d"),
                R._f(ref.get("minibatches_per_s"), ".1f"),
                R._f(off.get("minibatches_per_s"), ".1f"),
                R._f(speed) + ("×" if speed else ""),
                "–" if speed is None else ("yes" if speed >= TARGET else "no"),
                R._f(_capture_free_rate(ref), ".1f"),
                str((ref.get("step_info") or {}).get("cuda_graph", "–")),
            ]
        )
    if not body:
        return ["No epoch case finished.", ""]
    return R._table(head, body) + [
        "",
        "Best of the timed rounds (after one warm-up round) of one epoch each, on the same data, in one process; "
        "*speed-up* = official epoch time / reference epoch time. The reference's epoch time includes the one-time "
        "capture of its CUDA graph (*w/o capture* subtracts it). Data: the study's item counts (docs/datasets.md, 'Published statistics') with a "
        "fixed number of minibatches per epoch (benchmarks.workload.catalogue_data).",
        "",
    ]


def environment(out: Path, data: dict) -> list[str]:
    v = data["gru4rec_bench"].get("versions") or {}
    lines = [
        f"- GPU: **{v.get('gpu', '?')}** (CUDA {v.get('cuda', '?')}, cuDNN {v.get('cudnn', '?')}); CPU "
        f"{v.get('cpu', '?')}, {v.get('cpus', '?')} cores",
        f"- torch {v.get('torch', '?')} ({v.get('torch_threads', '?')} thread(s)), numpy {v.get('numpy', '?')}, "
        f"pandas {v.get('pandas', '?')}, Python {v.get('python', '?')}",
    ]
    for d in data["gru4rec_bench"].get("implementations") or []:
        lines.append(
            f"- {d.get('impl')}: {d.get('impl_version')}"
            + (f", pinned commit {d['pinned_commit']}" if d.get("pinned_commit") else "")
            + (f", step_impl={d['step_impl']}" if d.get("step_impl") else "")
            + (f", shims: {', '.join(d['shims'])}" if d.get("shims") else "")
        )
    env = out / "env.txt"
    if env.is_file():
        lines.append("- env.txt (preflight, package versions against pyproject and requirements.lock):")
        lines += ["", "```", *env.read_text(encoding="utf-8").strip().splitlines(), "```"]
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = Path(args[0])
    data = as_benchmark_json(read_jsonl(out / "results.jsonl"))
    plots = {}
    if data["benchmarks"]:
        made = R._plots(data, out / "plots")
        for name, rel in made.items():
            if KEEP_PLOTS.get(name) == Path(rel).name:
                plots[name] = rel
            else:
                (out / rel).unlink(missing_ok=True)
    device = data["gru4rec_bench"].get("device") or "?"
    lines = [f"# GRU4Rec on GPU: the reference against the official PyTorch port ({device})", ""]
    lines += ["## Minibatches per second, side by side", ""] + headline(data)
    lines += ["## Cases dropped for time", ""] + dropped_section(dropped_for_time(out / "results.jsonl"))
    lines += ["## Machine, versions, correctness", ""] + environment(out, data)
    lines += static_summary(out / "static_step.json")
    lines += [f"- golden training steps (tests/reference) on the device: {golden_summary(out / 'golden_steps.xml')}"]
    lines += ["", "## Details", ""]
    if data["benchmarks"]:
        body = R.build_markdown(data, plots, title="Benchmark sections").split("\n")
        lines += body[1:]  # its own title line dropped
    atomic_write_text(out / "report.md", "\n".join(lines).rstrip() + "\n")
    print(f"report: {out / 'report.md'} ({len(data['benchmarks'])} benchmark rows)")
    return 0 if data["benchmarks"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
