"""The study comparison computed from the metric runs on the five datasets (``--dataset all``; :mod:`reports.matrix`).

Per implementation × dataset × loss: our Δ (MC-2: ours against the full-featured reference on the same data and
settings) and the study's published Δ (the implementation's declared study row against the official code's "Best
params" row of the same dataset and loss, ``datasets/study/study_results.csv``) of recall@20 and MRR@20, whether
their signs agree and ``|ours − study|`` in percentage points (Δ × 100). A *pair* is one metric of one row where
both Δ exist; the summary gives per dataset, per data source (real slice, stand-in, prepared) and over all pairs the
number of pairs, the median ``|ours − study|`` and the sign agreement.

Where a row's gap exceeds :data:`GAP_PP` points on either metric, :func:`differences` lists what the suite measured
that differs from the study, read from the records only: the data (source, train and test events against the
study's published sizes, ``datasets/sessions/study_stats.json``), the epochs and layer size of the run's profile
(:func:`reports.compact.run_profile`, through ``datasets.sessions.registry.mc_config``), hyperparameters
the study set that the adapter does not declare (they ran at the implementation's defaults), values the
implementation refused at run time (the checks' "optional hyperparameter dropped" notes) and values of the study's
own row for the implementation that differ from ours.
"""

from __future__ import annotations

import functools
import json
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gru4rec_conformance.datasets import study
from gru4rec_conformance.datasets.sessions import registry
from gru4rec_conformance.reports.compact import run_profile
from gru4rec_conformance.reports.matrix import matrix_rows
from gru4rec_conformance.reports.render import md_table
from gru4rec_conformance.reports.results import RunData

__all__ = ["GAP_PP", "METRICS", "comparison_rows", "summary", "differences", "mc2_not_measured", "render_markdown"]

#: Gap (percentage points of relative Δ) above which a row says what the suite measured that differs.
GAP_PP = 10.0
METRICS = ("recall@20", "mrr@20")
#: Hyperparameters of the study's rows compared with ours (the study table's column names).
_HPARAMS = ("layers", "batch_size", "dropout_p_embed", "dropout_p_hidden", "learning_rate", "momentum", "n_sample",
            "sample_alpha", "bpreg", "logq")  # fmt: skip
_STATS = Path(registry.__file__).resolve().parent / "study_stats.json"


@functools.lru_cache(maxsize=1)
def _published_sizes() -> dict[str, Any]:
    """The study's dataset sizes (``{key: {"train": {"events", ...}, "test": {...}, "items"}}``)."""
    with open(_STATS, encoding="utf-8") as fh:
        return dict(json.load(fh).get("published") or {})


def _key(dataset: str) -> str | None:
    return next((k for k in registry.KEYS if str(dataset).startswith(k)), None)


def _facts(run: RunData) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (dataset label, loss): what the MC-2 records say of the run (test events, the notice, epochs when
    recorded, the hyperparameters the implementation refused)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in run.results:
        if (r.get("check") or {}).get("id") != "MC-2":
            continue
        refused: list[str] = []
        facts: dict[str, Any] = {}
        for m in r.get("metrics") or ():
            ctx = m.get("context") or {}
            if ctx.get("dataset") and ctx.get("loss"):
                facts.update(dataset=str(ctx["dataset"]), loss=str(ctx["loss"]))
                for k in ("n_events", "notice", "n_epochs"):
                    if ctx.get(k) is not None:
                        facts.setdefault(k, ctx[k])
            if str(m.get("name") or "").startswith("optional hyperparameter dropped:"):
                refused.append(str(m["name"]).split(":", 1)[1].strip())
        if "dataset" in facts:
            facts["refused"] = refused
            out[(facts["dataset"], facts["loss"])] = facts
    return out


def mc2_not_measured(run: RunData, dataset: str, loss: str) -> str | None:
    """Why MC-2 measured nothing on ``dataset`` and ``loss``: ``"crash (IndexError)"``, ``"n/a (loss:bpr-max)"``,
    the outcome otherwise; None when the run has no such record."""
    key = _key(dataset)
    for r in run.results:
        if (r.get("check") or {}).get("id") != "MC-2":
            continue
        params = re.search(r"\[(.*)\]$", str(r.get("nodeid") or ""))
        ps = params.group(1) if params else ""
        if key is None or not re.search(rf"(^|-){key}($|-)", ps) or ("bpr-max" in ps) != (loss == "bpr-max"):
            continue
        outcome, reason = str(r.get("outcome") or ""), str(r.get("reason") or "")
        if outcome == "skipped-unsupported":
            return f"n/a ({', '.join(str(x) for x in r.get('missing') or ()) or 'feature absent'})"
        exc = re.search(r"raised (\w+)", reason) or re.match(r"(\w+(?:Error|Exception))\b", reason)
        crash = outcome == "error" or (r.get("xfail") or {}).get("fails_as") == "crash"
        return f"{'crash' if crash else outcome}" + (f" ({exc.group(1)})" if exc else "")
    return None


def _num(x: Any) -> float | None:
    try:
        return float(x) if x not in (None, "", "N/A") else None
    except (TypeError, ValueError):
        return None


def _fmt(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def differences(run: RunData, dataset: str, loss: str, facts: dict[str, Any] | None = None) -> list[str]:
    """What the run measured differently from the study on ``dataset`` and ``loss`` (see the module docstring);
    each item one short clause, e.g. ``"data: stand-in, 37,810 train / 492 test events (study 67,575,203 /
    1,054,210)"``, ``"epochs 3 (study 10)"``, ``"not settable: n_sample, logq"``, ``"refused at run time:
    optimizer='adagrad'"``. Empty when nothing is known (an unknown dataset)."""
    key = _key(dataset)
    if key is None:
        return []
    facts = facts or {}
    out: list[str] = []
    notice = str(facts.get("notice") or "")
    m = re.search(r"([\d,]+) train / ([\d,]+) test events", notice)
    train = m.group(1) if m else None
    test = f"{int(facts['n_events']):,}" if facts.get("n_events") else (m.group(2) if m else None)
    pub = _published_sizes().get(key) or {}
    src = "stand-in" if dataset.endswith("_standin") or "stand-in" in notice else (
        "prepared" if "prepared" in notice else "real slice")  # fmt: skip
    p_train, p_test = (pub.get("train") or {}).get("events"), (pub.get("test") or {}).get("events")
    if train:
        size = f"{train} train / {test or '?'} test events (study {p_train or 0:,} / {p_test or 0:,})"
    else:
        size = f"{test or '?'} test events (study {p_test or 0:,})"
    out.append(f"data: {src}, {size}")
    try:
        cfg = registry.mc_config(key, loss, run_profile(run))
    except ValueError:
        cfg = {}
    epochs = facts.get("n_epochs") or cfg.get("n_epochs")
    impl_row = study.find(key, str((run.impl.get("study") or {}).get("implementation") or ""),
                          str((run.impl.get("study") or {}).get("variant") or ""), loss)  # fmt: skip
    best = study.find(key, study.OFFICIAL, study.BEST, loss) or {}
    row = impl_row or best
    if epochs is not None and int(epochs) != registry.STUDY_EPOCHS:
        out.append(f"epochs {int(epochs)} (study {registry.STUDY_EPOCHS})")
    if cfg.get("layers") and _num(row.get("layers")) is not None and cfg["layers"][0] != int(float(row["layers"])):
        out.append(f"layers {cfg['layers'][0]} (study {int(float(row['layers']))})")
    declared = set(((run.impl.get("capabilities") or {}).get("hyperparameters") or {}).keys())
    unsettable = [k for k in _HPARAMS if k in cfg and declared and k not in declared and k != "layers"]
    if unsettable:
        out.append("not settable: " + ", ".join(unsettable))
    if facts.get("refused"):
        out.append("refused at run time: " + ", ".join(facts["refused"]))
    if impl_row:
        own = []
        for k in _HPARAMS:
            theirs_v, ours_v = _num(impl_row.get(k)), cfg.get(k)
            if k == "layers" or theirs_v is None or ours_v is None or k not in declared:
                continue
            if abs(float(ours_v) - theirs_v) > 1e-9:
                own.append(f"{k} {_fmt(theirs_v)} (ours {_fmt(float(ours_v))})")
        if own:
            out.append(f"the study's {impl_row['implementation']} row: " + ", ".join(own))
    return out


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def comparison_rows(runs: Iterable[RunData]) -> list[dict[str, Any]]:
    """One row per matrix run, dataset and loss that the study has a row for (its declared study row on that
    dataset and loss), in :func:`reports.matrix.matrix_rows` order; the reference's runs are left out (its
    study row is the official code itself, Δ 0 by definition).

    Each row: ``impl``, ``dataset``, ``loss``, ``source``, ``checks`` (MC outcome words), and per metric of
    :data:`METRICS` ``{"ours", "study", "sign_agrees", "gap_pp"}`` (fractions; ``sign_agrees`` bool and ``gap_pp``
    ``|ours − study| × 100`` only when both exist, else None), ``max_gap_pp`` (the larger gap, None when no pair),
    ``differs`` (:func:`differences` when ``max_gap_pp`` > :data:`GAP_PP`, else empty) and ``not_measured`` (why
    ours is missing: the MC-2 outcome, e.g. ``"MC-2 xfail (crash)"``, else None).
    """
    out: list[dict[str, Any]] = []
    for run in runs:
        facts = _facts(run)
        if run.impl.get("role") == "reference":
            continue
        decl = run.impl.get("study")
        for r in matrix_rows([run]):
            for m in METRICS:  # also where ours crashed before measuring (no metric recorded)
                if r[m]["study"] is None:
                    pub = study.published(m, r["dataset"], r["loss"], decl)
                    r[m] = {**r[m], "study": pub["delta_rel"] if pub else None}
            if all(r[m]["study"] is None for m in METRICS):
                continue
            row: dict[str, Any] = {k: r[k] for k in ("impl", "dataset", "loss", "source", "checks")}
            gaps = []
            for m in METRICS:
                ours, theirs = r[m]["ours"], r[m]["study"]
                both = ours is not None and theirs is not None
                gap = abs(ours - theirs) * 100 if both else None
                row[m] = {"ours": ours, "study": theirs, "sign_agrees": _sign(ours) == _sign(theirs) if both else None,
                          "gap_pp": gap}  # fmt: skip
                if gap is not None:
                    gaps.append(gap)
            row["max_gap_pp"] = max(gaps) if gaps else None
            mc2 = r["checks"].get("MC-2")
            why = None if gaps else mc2_not_measured(run, r["dataset"], r["loss"])
            row["not_measured"] = None if gaps else f"MC-2 {why or mc2 or 'not in the run'}"
            big = row["max_gap_pp"] is not None and row["max_gap_pp"] > GAP_PP
            row["differs"] = (
                differences(run, r["dataset"], r["loss"], facts.get((r["dataset"], r["loss"]))) if big else []
            )
            out.append(row)
    return out


def _group(pairs: Sequence[tuple[float, bool]]) -> dict[str, Any]:
    n = len(pairs)
    agree = sum(1 for _, s in pairs if s)
    return {"pairs": n, "median_gap_pp": statistics.median(g for g, _ in pairs) if n else None,
            "sign_agree": agree, "sign_agree_pct": 100.0 * agree / n if n else None}  # fmt: skip


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Summary figures over the pairs of ``rows`` (:func:`comparison_rows`): ``{"overall": g, "by_dataset": {key:
    g}, "by_source": {source: g}}``, each ``g`` = ``{"pairs", "median_gap_pp", "sign_agree", "sign_agree_pct"}``
    (median and percentage None without pairs). Datasets by their study key (``yoochoose``, ...)."""
    pairs: list[tuple[str, str, float, bool]] = []
    for r in rows:
        for m in METRICS:
            c = r[m]
            if c["gap_pp"] is not None:
                pairs.append((_key(r["dataset"]) or r["dataset"], r["source"], c["gap_pp"], bool(c["sign_agrees"])))
    by_ds = {k: _group([(g, s) for d, _, g, s in pairs if d == k]) for k in dict.fromkeys(p[0] for p in pairs)}
    by_src = {k: _group([(g, s) for _, src, g, s in pairs if src == k]) for k in dict.fromkeys(p[1] for p in pairs)}
    return {"overall": _group([(g, s) for _, _, g, s in pairs]), "by_dataset": by_ds, "by_source": by_src}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.1f}%"


def _pp(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def _sign_word(x: bool | None) -> str:
    return "–" if x is None else ("yes" if x else "NO")


def _group_cells(g: dict[str, Any]) -> list[str]:
    pct = "–" if g["sign_agree_pct"] is None else f"{g['sign_agree']}/{g['pairs']} ({g['sign_agree_pct']:.0f}%)"
    return [str(g["pairs"]), _pp(g["median_gap_pp"]), pct]


def render_markdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The scoreboard section (Markdown lines; empty without rows)."""
    if not rows:
        return []
    s = summary(rows)
    lines = ["## The study's Δ against ours, computed", "",
             "Per implementation, dataset and loss: our Δ (MC-2, against the full-featured reference on the same data "
             "and settings) and the study's published Δ (its row for the implementation against the official code's "
             "best parameters), recall@20 and MRR@20. A pair is one metric where both exist; gap: |ours − study| in "
             f"percentage points. Where a gap exceeds {GAP_PP:g} points, 'measured differently' lists what the "
             "records say differs from the study (data, epochs, layers, hyperparameters not settable or refused, "
             "values of the study's own row).", ""]  # fmt: skip
    head = ["", "pairs", "median gap (pp)", "sign agrees"]
    body = [["all", *_group_cells(s["overall"])]]
    body += [[f"dataset {k}", *_group_cells(g)] for k, g in s["by_dataset"].items()]
    body += [[f"data {k}", *_group_cells(g)] for k, g in s["by_source"].items()]
    lines += md_table(head, body) + [""]
    head = ["implementation", "dataset", "loss", "data", "recall@20 ours", "study", "sign", "gap",
            "MRR@20 ours", "study", "sign", "gap", "measured differently"]  # fmt: skip
    body = []
    for r in rows:
        cells = [r["impl"], r["dataset"], r["loss"], r["source"]]
        for m in METRICS:
            c = r[m]
            cells += [_pct(c["ours"]), _pct(c["study"]), _sign_word(c["sign_agrees"]), _pp(c["gap_pp"])]
        cells.append("; ".join(r["differs"]) or (f"not measured: {r['not_measured']}" if r["not_measured"] else "–"))
        body.append(cells)
    return lines + md_table(head, body) + [""]
