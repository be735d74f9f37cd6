"""Pages generated from results: the verdict card, the scoreboard (subset runs apart, negative controls marked,
several roots merged), ``reports render`` (a damaged folder named with file and line), the plots, and the compact
committed verdicts (``reports compact``)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gru4rec_conformance import child_pythonpath
from gru4rec_conformance.reports.card import build_card, render_html, render_markdown
from gru4rec_conformance.reports.compact import VERDICT_FILE, compact, verdict_key
from gru4rec_conformance.reports.results import load_run
from gru4rec_conformance.reports.scoreboard import build_scoreboard
from gru4rec_conformance.reports.scoreboard import render_markdown as board_markdown

METRIC_RULE = "pass if |impl − mean_ref| ≤ max(4·sd_ref, 2%·mean_ref, 0.002)"


def _metrics(comparison: str, recall20: float, mrr20: float) -> list[dict[str, Any]]:
    ctx = {"dataset": "yoochoose_100k", "loss": "cross-entropy", "comparison": comparison}
    out = []
    for n in (5, 20):
        for name, value, ref in (("recall", recall20, 0.69), ("mrr", mrr20, 0.37)):
            out.append({"name": f"{name}@{n}", "value": value, "reference": ref, "tolerance": 0.014,
                        "rule": METRIC_RULE, "context": ctx, "within": abs(value - ref) <= 0.014})  # fmt: skip
    return out


def _result(nodeid: str, check: str, kind: str, outcome: str, **extra: Any) -> dict[str, Any]:
    return {"type": "result", "nodeid": nodeid, "impl": extra.pop("impl", "gp:oob"), "outcome": outcome,
            "check": {"id": check, "kind": kind, "title": ""}, "reason": extra.pop("reason", ""),
            "metrics": extra.pop("metrics", []), "features": [], "xfail": extra.pop("xfail", None), **extra}  # fmt: skip


def _write_run(folder: Path, name: str = "gp:oob", *, command: tuple[str, ...] = ("pytest", "conformance"),
               started: str = "2026-12-01T10:00:00Z", status: str | None = "complete", description: str = "",
               suite: dict[str, Any] | None = None, results: list[dict[str, Any]] | None = None,
               dataset: str | None = None) -> Path:  # fmt: skip
    """A run directory with results.jsonl: a GRU4REC-pytorch OOB-like implementation with a declared SR-1 bug, a
    passing EV-1 and the metric checks MC-1/MC-2, unless ``results`` are given."""
    header = {
        "type": "run", "schema": 1, "run_id": f"{name}/{folder.name}", "started": started, "command": list(command),
        "impl": {"name": name, "family": "gru4rec", "role": "implementation", "version": "owner/repo@abcdef0123",
                 "description": description, "features": {"loss:cross-entropy": True, "logq": False},
                 "study": {"implementation": "GRU4REC-pytorch", "variant": "OOB"}},
        "suite": suite or {"version": "2026.11.0", "string": "2026.11.0+gdeadbee", "git_sha": ""},
        "kinds": {"K1": "state reset", "K8": "evaluation", "metric": "metric conformance"},
        "frameworks": {"python": "3.11"}, "device": "cpu", "dataset": dataset,
    }  # fmt: skip
    xfail = {"index": 1, "kind": "bug", "defect": "GP-1", "fix_level": "INF", "reason": "no reset", "link": "none"}
    records = results if results is not None else [
        _result("conformance/gru4rec/test_k1.py::test_sr1[gp:oob]", "SR-1", "K1", "xfail", xfail=xfail,
                metrics=[{"name": "ranks differing", "value": 27, "reference": 0, "context": {}}]),
        _result("conformance/gru4rec/test_k8.py::test_ev1[gp:oob]", "EV-1", "K8", "passed"),
        _result("conformance/gru4rec/test_k1.py::test_logq[gp:oob]", "SR-9", "K1", "skipped-unsupported",
                reason=f"unsupported by {name}: needs logq (not declared)"),
        _result("conformance/gru4rec/test_mc.py::test_mc1[gp:oob]", "MC-1", "metric", "failed",
                metrics=_metrics("matching features: no logQ", 0.27, 0.21)),
        _result("conformance/gru4rec/test_mc.py::test_mc2[gp:oob]", "MC-2", "metric", "failed",
                metrics=_metrics("all features", 0.27, 0.21)),
    ]  # fmt: skip
    lines = [header, *records]
    if status is not None:
        lines.append({"type": "end", "status": status, "exitstatus": 0, "finished": started})
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return folder


def test_card_names_status_defects_metrics_and_the_study_side_by_side(tmp_path):
    run = load_run(_write_run(tmp_path / "gp.oob" / "20261201T100000Z"))
    card = build_card(run)
    assert card["status"] == "NOT CONFORMANT" and card["judged"] == "abcdef0"
    sr1 = next(d for d in card["defects"] if d["check_id"] == "SR-1")
    assert (sr1["kind"], sr1["ids"], sr1["fix_level"], sr1["figure"]) == (
        "bug",
        "GP-1",
        "INF",
        "ranks differing 27 vs 0",
    )
    assert {d["kind"] for d in card["defects"] if d["check_id"] == "MC-2"} == {"undeclared"}
    assert {"feature": "logq", "how": "declared absent", "checks": 1} in card["missing"]
    mc2 = next(m for m in card["metrics"] if m["check"] == "MC-2" and m["name"] == "recall@20")
    assert mc2["dataset"] == "yoochoose_100k" and mc2["loss"] == "cross-entropy"
    assert mc2["delta_rel"] == pytest.approx(0.27 / 0.69 - 1)
    assert mc2["study_delta_rel"] is not None and mc2["study_delta_rel"] < -0.5  # GRU4REC-pytorch OOB vs best
    b3 = {r["checks"]: (r["expected"], r["ours"], r["agreement"]) for r in card["study_rows"]}
    assert b3["SR-1"] == ("FAIL", "xfail", "agree")
    assert b3["EV-1"] == ("pass", "pass", "agree")
    assert b3["SO-1"] == ("FAIL", "not run", "not tested")
    from gru4rec_conformance.datasets import study

    assert study.check_ids("EB-1/2", "EB-4") == ["EB-1", "EB-2", "EB-4"]  # the note names the check to watch
    assert study.check_ids("EB-1/2", "see KG-4") == ["EB-1", "EB-2"]  # a defect id is not a check
    md = render_markdown(card)
    assert "**NOT CONFORMANT**" in md and "| SR-1 | bug | GP-1 | INF | ranks differing 27 vs 0 |" in md
    assert "| SR-1 | FAIL | leak and false reset | xfail |" in md
    html = render_html(card)
    assert 'class="status st-NOT-CONFORMANT"' in html and "GRU4REC-pytorch / OOB" in html


def test_a_cards_defect_row_shows_the_metric_that_failed(tmp_path):
    # recall inside its band, MRR outside it: the "Defects found" row must not show the passing recall@20
    mc1 = _result("conformance/gru4rec/test_mc.py::test_mc1[gp:oob]", "MC-1", "metric", "failed",
                  metrics=_metrics("matching features: no logQ", 0.68, 0.25))  # fmt: skip
    card = build_card(load_run(_write_run(tmp_path / "gp.oob" / "20261201T100000Z", results=[mc1])))
    (row,) = card["defects"]
    assert row["figure"] == "mrr@5 0.25 vs 0.37 (-32.4%); mrr@20 0.25 vs 0.37 (-32.4%)"
    assert "recall@20" not in render_markdown(card).split("## Defects found")[1].split("##")[0]


def test_features_plot_labels_declared_hyperparameters_as_declared(tmp_path):
    from gru4rec_conformance.reports.plots import feature_rows

    feats = [["loss:cross-entropy", "hparam:momentum"], ["logq", "hparam:bpreg"], ["hparam:n_sample"]]
    results = [_result(f"conformance/gru4rec/test_k1.py::test_{i}[gp:oob]", f"SR-{i}", "K1", "passed", features=f)
               for i, f in enumerate(feats)]  # fmt: skip
    run = load_run(_write_run(tmp_path / "gp.oob" / "20261201T100000Z", results=results))
    run.header["impl"]["capabilities"] = {"hyperparameters": {"momentum": 0.0, "bpreg": 1.0}}
    assert feature_rows(run) == [
        ("loss:cross-entropy", "loss:cross-entropy"),
        ("logq", "logq (declared absent)"),
        ("hparam:bpreg", "hparam:bpreg"),
        ("hparam:momentum", "hparam:momentum"),
        ("hparam:n_sample", "hparam:n_sample (undeclared)"),
    ]


def test_scoreboard_sets_subset_and_stale_runs_apart_marks_negative_controls_and_merges_roots(tmp_path):
    a, b = tmp_path / "machine-a", tmp_path / "machine-b"
    _write_run(a / "gp.oob" / "20261201T100000Z", started="2026-12-01T10:00:00Z")
    _write_run(a / "gp.oob" / "20261201T110000Z", started="2026-12-01T11:00:00Z",
               command=("pytest", "conformance", "-k", "sr1"))  # fmt: skip
    _write_run(b / "rechub" / "20261201T100000Z", name="rechub", description="a retriever (negative control)")
    _write_run(b / "old" / "20261201T100000Z", name="old", suite={"version": "2000.1.0", "string": "2000.1.0"})
    board = build_scoreboard([a, b])
    rows = {r["name"]: r for r in board["rows"]}
    apart = {r["name"]: r for r in board["apart"]}
    assert set(rows) == {"gp:oob", "rechub"}  # one row per implementation, from both roots
    assert rows["gp:oob"]["started"] == "2026-12-01T10:00:00Z"  # the full run, not the newer -k subset
    assert "a subset run (-k 'sr1')" in apart["gp:oob"]["apart"]
    assert apart["old"]["apart"] == ["stale: suite 2000.1.0 is older than this suite " + apart["old"]["apart"][0][-9:]]
    assert rows["rechub"]["negative_control"] and rows["gp:oob"]["negative_control"] is None
    m = rows["gp:oob"]["metrics"][0]
    assert (m["name"], m["check"], m["dataset"]) == ("recall@20", "MC-2", "yoochoose_100k")
    md = board_markdown(board)
    assert "| rechub (negative control: not a GRU4Rec) | NOT CONFORMANT |" in md
    assert "Shown apart (not a verdict of the current checks):" in md and "a subset run (-k 'sr1')" in md
    assert "recall@20 -60.9% (study " in md
    assert (
        rows["gp:oob"]["study_b3"] == "2 agree / 0 disagree / 11 not tested"
    )  # the expected-outcome tally (reports.agreement)


def test_the_scoreboard_tables_fit_the_window_scrolling_in_their_own_container(tmp_path):
    import html.parser
    import re

    from gru4rec_conformance.reports.scoreboard import render_html as board_html

    _write_run(tmp_path / "gp.oob" / "20261201T100000Z")
    _write_run(tmp_path / "gp.oob" / "20261201T110000Z", started="2026-12-01T11:00:00Z",
               command=("pytest", "conformance", "-k", "sr1"))  # fmt: skip
    page = board_html(build_scoreboard([tmp_path]))

    class Tables(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.stack: list[tuple[str, str]] = []
            self.parents: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "table":
                self.parents.append(self.stack[-1][1] if self.stack else "")
            if tag not in ("br", "img", "meta"):
                self.stack.append((tag, dict(attrs).get("class") or ""))

        def handle_endtag(self, tag: str) -> None:
            while self.stack and self.stack.pop()[0] != tag:
                pass

    tables = Tables()
    tables.feed(page)
    assert len(tables.parents) == 2 and all(p == "table-wrap" for p in tables.parents)  # verdicts, shown apart
    style = re.sub(r"/\*.*?\*/", "", page.split("<style>")[1].split("</style>")[0], flags=re.S)
    css = {sel.strip(): body for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", style)}
    wrap = css[".table-wrap"].replace(" ", "")
    assert "overflow-x:auto" in wrap and "max-width:100%" in wrap
    cells = css["th, td"].replace(" ", "")
    assert "overflow-wrap:anywhere" in cells and "nowrap" not in cells and "nowrap" not in css["th"]
    # ... but a header, a verdict pill or the gate word is never cut inside a word ("CONFORMA|NT", "FAIL|ED")
    for sel in ("th", ".st", "td.word"):
        assert "overflow-wrap:normal" in css[sel].replace(" ", ""), sel
    assert '<td class="word">' in page


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH"))}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gru4rec_conformance.reports", *args], capture_output=True,
                          text=True, timeout=300, env=_env())  # fmt: skip


def test_render_writes_cards_plots_study_figure_and_scoreboard(tmp_path):
    root = tmp_path / "verdicts"
    _write_run(root / "gp" / "oob" / "abcdef0")
    (root / "gp" / "README.md").write_text("Interpretation.\n")
    done = subprocess.run(
        [sys.executable, "-m", "gru4rec_conformance.reports", "render", str(root), "--out", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=300, preexec_fn=lambda: os.umask(0o077), env=_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    modes = {oct(p.stat().st_mode & 0o777) for p in (tmp_path / "site").rglob("*")}
    assert modes == {"0o644", "0o755"}, modes  # readable pages whatever the umask
    page = tmp_path / "site" / "gp" / "oob" / "abcdef0"
    assert {p.name for p in page.iterdir()} >= {"card.md", "card.html", "summary.md", "summary.html", "plots"}
    assert (page / "plots" / "metrics.png").stat().st_size > 1000
    assert (tmp_path / "site" / "study.png").stat().st_size > 1000
    assert "](../../../../verdicts/gp/README.md)" in (page / "card.md").read_text()
    board = (tmp_path / "site" / "scoreboard.html").read_text()
    assert 'href="gp/oob/abcdef0/card.html"' in board and 'src="study.png"' in board
    assert not any(p.name.startswith(("card", "summary")) for p in root.rglob("*"))  # nothing written into roots


def test_render_of_a_damaged_folder_names_file_and_line_and_exits_nonzero(tmp_path):
    root = tmp_path / "runs"
    good = _write_run(root / "gp.oob" / "20261201T100000Z")
    bad = _write_run(root / "gp.oob" / "20261201T110000Z")
    lines = (bad / "results.jsonl").read_text().splitlines()
    lines[2] = lines[2][:40]  # a torn line in the middle: not a crash at the end
    (bad / "results.jsonl").write_text("\n".join(lines) + "\n")
    done = _cli("render", str(root), "--out", str(tmp_path / "site"))
    assert done.returncode == 2
    assert f"{bad / 'results.jsonl'}: line 3 is not valid JSON" in done.stderr
    assert (tmp_path / "site" / "gp" / "oob" / "abcdef0" / "card.html").is_file()  # the readable one still rendered
    assert load_run(good).status == "complete"
    gz = tmp_path / "broken" / "x" / "1.0"
    gz.mkdir(parents=True)
    (gz / VERDICT_FILE).write_bytes(gzip.compress(b'{"run": {\n  "impl": \n}', mtime=0))
    done = _cli("render", str(tmp_path / "broken"), "--out", str(tmp_path / "site2"))
    assert done.returncode == 2 and f"{gz / VERDICT_FILE}: line 3, column 1" in done.stderr


def test_compact_keeps_the_newest_complete_run_per_judged_version(tmp_path):
    out = tmp_path / "out"
    _write_run(out / "gp.oob" / "20261201T100000Z", started="2026-12-01T10:00:00Z")
    _write_run(out / "gp.oob" / "20261201T110000Z", started="2026-12-01T11:00:00Z")
    _write_run(out / "gp.oob" / "20261201T120000Z", started="2026-12-01T12:00:00Z", status="interrupted")
    skipped: list[str] = []
    written = compact([out], tmp_path / "verdicts", skipped)
    assert [(s.name, t.relative_to(tmp_path / "verdicts").as_posix()) for s, t in written] == [
        ("20261201T110000Z", "gp/oob/abcdef0/results.json.gz")
    ]
    assert any("20261201T120000Z: interrupted run" in s for s in skipped)
    run = load_run(tmp_path / "verdicts" / "gp" / "oob" / "abcdef0")
    assert run.header["started"] == "2026-12-01T11:00:00Z" and verdict_key(run) == Path("gp/oob/abcdef0")
    assert compact([out], tmp_path / "verdicts") == []  # same bytes: nothing rewritten


def test_compact_leaves_out_mutant_runs_and_runs_that_recorded_no_check(tmp_path):
    """A mutant's run (the meta-tests' material) and a run with no check records (a bad --dataset value, an empty
    selection) are never filed as verdicts; `skipped` says why for each."""
    out = tmp_path / "out"
    mutant = _write_run(out / "mutant.sr" / "20261201T100000Z")
    lines = (mutant / "results.jsonl").read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["impl"]["role"] = "mutant"
    (mutant / "results.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    _write_run(out / "gp.oob" / "20261201T110000Z", dataset="bogus", results=[])
    skipped: list[str] = []
    assert compact([out], tmp_path / "verdicts", skipped) == []
    assert any("mutant.sr/20261201T100000Z: a mutant's run" in s for s in skipped)
    assert any("20261201T110000Z: no check recorded" in s for s in skipped)
    assert not (tmp_path / "verdicts").exists()


def test_compact_and_the_pages_never_let_a_newer_subset_replace_a_full_run(tmp_path):
    """A later `-k` run (complete, but of a few checks) neither replaces the committed full verdict nor stands for
    the key on the rendered pages; it is kept only where no full run exists."""
    from gru4rec_conformance.reports.selection import newest_per_key

    first, later = tmp_path / "first", tmp_path / "later"
    _write_run(first / "gp.oob" / "20261201T100000Z", started="2026-12-01T10:00:00Z")
    verdicts = tmp_path / "verdicts"
    assert len(compact([first], verdicts)) == 1
    _write_run(later / "gp.oob" / "20261201T110000Z", started="2026-12-01T11:00:00Z",
               command=("pytest", "conformance", "-k", "sr1"))  # fmt: skip
    assert compact([later], verdicts) == []  # the committed full run stands
    assert load_run(verdicts / "gp" / "oob" / "abcdef0").header["started"] == "2026-12-01T10:00:00Z"
    both = [load_run(d) for d in (first / "gp.oob" / "20261201T100000Z", later / "gp.oob" / "20261201T110000Z")]
    (chosen,) = newest_per_key(both).values()
    assert chosen.header["started"] == "2026-12-01T10:00:00Z"
    assert len(compact([later], tmp_path / "fresh")) == 1  # no full run there: the subset is all there is


def _matrix_results() -> list[dict[str, Any]]:
    """MC-1/MC-2 of a `--dataset all` run on two datasets: Rees46 measured, Coveo's MC-2 crashed (no metrics)."""
    out = []
    for ds in ("rees46", "coveo"):
        for check, comparison in (("MC-1", "matching features: no logQ"), ("MC-2", "all features")):
            metrics = _metrics(comparison, 0.62, 0.30)
            for m in metrics:
                label = ds if ds == "rees46" else f"{ds}_standin"  # Coveo: the stand-in, named by its label
                notice = f"{ds}: the real slice of ../shared" if ds == "rees46" else None
                m["context"] = {**m["context"], "dataset": label, **({"notice": notice} if notice else {})}
            crashed = ds == "coveo" and check == "MC-2"
            out.append(_result(f"conformance/gru4rec/test_mc.py::test_{check.lower()}[gp:oob-cross-entropy-{ds}]",
                               check, "metric", "error" if crashed else "failed",
                               metrics=[] if crashed else metrics))  # fmt: skip
    return out


def test_a_run_on_several_datasets_is_kept_beside_the_verdict_and_shown_per_dataset(tmp_path):
    """`--dataset all -k MC` is a metric matrix, not a subset verdict: its own compact key, never a scoreboard row
    nor a row shown apart; the scoreboard's matrix section has one row per dataset and loss with ours and the
    study's Δ, and places a crashed check (no metrics) by its parameter id."""
    from gru4rec_conformance.reports.matrix import matrix_rows

    out = tmp_path / "out"
    _write_run(out / "gp.oob" / "20261201T100000Z", started="2026-12-01T10:00:00Z")
    _write_run(out / "gp.oob" / "20261201T110000Z", started="2026-12-01T11:00:00Z", dataset="all",
               command=("pytest", "conformance", "--dataset", "all", "-k", "MC"), results=_matrix_results())  # fmt: skip
    written = compact([out], tmp_path / "verdicts")
    keys = sorted(t.relative_to(tmp_path / "verdicts").parent.as_posix() for _, t in written)
    assert keys == ["gp/oob/abcdef0", "gp/oob/abcdef0+datasets-all"]
    board = build_scoreboard([tmp_path / "verdicts"])
    assert [r["key"] for r in board["rows"]] == ["gp/oob/abcdef0"] and board["apart"] == []
    rows = {(r["dataset"], r["loss"]): r for r in board["matrix"]}
    assert set(rows) == {("rees46", "cross-entropy"), ("coveo_standin", "cross-entropy")}  # crash: same row
    rees = rows[("rees46", "cross-entropy")]
    assert rees["checks"] == {"MC-1": "FAIL", "MC-2": "FAIL"} and rees["source"] == "real slice"
    assert rees["recall@20"]["ours"] == pytest.approx(0.62 / 0.69 - 1)
    assert rees["recall@20"]["study"] is not None  # GRU4REC-pytorch OOB has a published Rees46 row
    coveo = rows[("coveo_standin", "cross-entropy")]
    assert coveo["checks"] == {"MC-1": "FAIL", "MC-2": "ERROR"} and coveo["recall@20"]["ours"] is None
    assert coveo["source"] == "stand-in"
    text = board_markdown(board)
    assert "## Metric conformance across datasets" in text and "| gp:oob | rees46 | cross-entropy |" in text
    assert matrix_rows([]) == []
    # a crash declared as one (xfail entry fails_as = "crash") says so in its cell: no metric was measured there
    crash = _result("conformance/gru4rec/test_mc.py::test_mc1[gp:oob-cross-entropy-coveo]", "MC-1", "metric", "xfail",
                    xfail={"fails_as": "crash"})  # fmt: skip
    gap = _result("conformance/gru4rec/test_mc.py::test_mc2[gp:oob-cross-entropy-coveo]", "MC-2", "metric", "xfail",
                  xfail={"fails_as": "assertion"})  # fmt: skip
    _write_run(out / "gp.oob" / "20261201T120000Z", started="2026-12-01T12:00:00Z", dataset="all",
               command=("pytest", "conformance", "--dataset", "all", "-k", "MC"), results=[crash, gap])  # fmt: skip
    compact([out], tmp_path / "verdicts")
    rows = {(r["dataset"], r["loss"]): r for r in build_scoreboard([tmp_path / "verdicts"])["matrix"]}
    assert rows[("coveo", "cross-entropy")]["checks"] == {"MC-1": "xfail (crash)", "MC-2": "xfail"}, rows
    card = render_markdown(build_card(load_run(tmp_path / "verdicts" / "gp" / "oob" / "abcdef0+datasets-all")))
    assert "datasets all" in card.splitlines()[0] and "a metric matrix, not a verdict" in card


def test_the_dataset_tag_of_a_run(tmp_path):
    from gru4rec_conformance.reports.compact import dataset_matrix

    tags = {}
    for i, option in enumerate((None, "yoochoose_100k", "all", "rees46,coveo", "rees46=/data/r46", "/data/prep")):
        tags[option] = dataset_matrix(load_run(_write_run(tmp_path / f"r{i}", dataset=option)))
    assert tags == {None: None, "yoochoose_100k": None, "all": "all", "rees46,coveo": "rees46-coveo",
                    "rees46=/data/r46": "rees46", "/data/prep": "prepared"}  # fmt: skip


def test_an_unavailable_implementation_is_not_shown_apart_as_a_subset_run(tmp_path):
    """A run of an unavailable implementation ran nothing: its ``-m 'not slow'`` says nothing about it."""
    unavailable = [
        _result(f"conformance/gru4rec/test_k1.py::test_sr{i}[gp:oob]", f"SR-{i}", "K1", "skipped",
                outcome_detail="unavailable", unavailable="needs Python 3.9")
        for i in range(3)
    ]  # fmt: skip
    folder = _write_run(tmp_path / "gp.oob" / "20261201T100000Z", command=("pytest", "conformance", "-m", "not slow"),
                        results=unavailable)  # fmt: skip
    run = load_run(folder)
    assert run.conformance().status == "UNAVAILABLE"
    from gru4rec_conformance.reports.scoreboard import apart_reasons

    assert not any("subset" in r for r in apart_reasons(run))


def test_the_report_header_says_when_the_data_were_synthetic_stand_ins(tmp_path):
    from gru4rec_conformance.reports.render import render_html, render_markdown
    from gru4rec_conformance.reports.summary import build_summary

    real = load_run(_write_run(tmp_path / "real" / "20261201T100000Z"))
    assert build_summary(real)["standin"] == ""
    mc = _metrics("all features", 0.27, 0.21)
    for m in mc:
        m["context"] = {**m["context"], "dataset": "yoochoose_100k_standin"}
    records = [_result("conformance/gru4rec/test_mc.py::test_mc2[gp:oob]", "MC-2", "metric", "passed", metrics=mc)]
    fake = load_run(_write_run(tmp_path / "fake" / "20261201T100000Z", results=records))
    s = build_summary(fake)
    assert s["standin"].startswith("synthetic stand-ins: yoochoose_100k_standin")
    assert "**Data: synthetic stand-ins: yoochoose_100k_standin" in render_markdown(s).split("**Conformance")[0]
    header = render_html(s).split("<header>", 1)[1].split("</header>", 1)[0]
    assert "Data: synthetic stand-ins: yoochoose_100k_standin" in header
    assert "Data:" not in render_html(build_summary(real)).split("</header>", 1)[0]
