"""Render a run summary (:func:`reports.summary.build_summary`) as Markdown and as HTML (Jinja2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).resolve().parent / "templates"


def md_cell(text: Any) -> str:
    """``text`` as one Markdown table cell: ``|`` escaped, line breaks as spaces (the one rule of every report)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table (header, rule, one line per row; cells through :func:`md_cell`), as a list of lines."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return out


def render_markdown(s: dict[str, Any]) -> str:
    """summary.md: the same sections as the HTML page, as GitHub-flavoured Markdown tables."""
    c = s["counts"]
    cf = s["conformance"]
    lines = [f"# {s['title']}", ""]
    if s.get("standin"):
        lines += [f"**Data: {s['standin']}**", ""]
    lines.append(f"**Conformance: {cf.get('status_label') or cf['status']}** — {cf['headline'].split(' — ', 1)[-1]}")
    if cf["reasons"]:
        lines += [""] + [f"- {r}" for r in cf["reasons"]]
    lines += ["", f"**Coverage: {cf['coverage']}**", ""] + [f"- {x}" for x in cf["coverage_lines"]]
    if cf["gate"] is not None:
        lines += ["", f"**Gate: {cf['gate']['text']}** (measured outcomes against the declared xfails)"]
    lines += [""]
    lines.append(
        f"Outcomes: {c['total']} checks: {c['passed']} passed, {c['failed']} failed, "
        f"{c['error']} errors, {c['xfail']} xfail, {c['xpass']} xpass, {c['not_applicable']} not applicable "
        f"(feature absent), {c['missing_hook']} not tested (adapter lacks a hook), {c['refused']} refused by the "
        f"implementation at run time, {c['skipped']} skipped."
    )
    lines += notices_markdown(s.get("notices", []))
    if s["status"] != "complete":
        lines += ["", f"> **This report is {s['status'].upper()}**: the run did not finish; checks without a "
                      "verdict are missing. Complete it with `pytest ... --resume <this folder>`."]  # fmt: skip
    lines += ["", "## Run", ""] + md_table(["", ""], [[k, v] for k, v in s["meta"]])

    lines += ["", "## Checks by kind", ""]
    lines += md_table(["kind", "title", "verdict"] + [s["short"][o] for o in s["outcomes"]],
                    [[k["kind"], k["title"], k["symbol"]] + [k["counts"].get(o, 0) for o in s["outcomes"]]
                     for k in s["kinds"]])  # fmt: skip
    for k in s["kinds"]:
        if not k["checks"]:
            continue
        lines += ["", f"### {k['kind']} — {k['title']}" if k["title"] else f"### {k['kind']}", ""]
        lines += md_table(["check", "outcome", "what it proves", "test", "reason", "s"],
                        [[ch["id"], ch["symbol"], ch["title"], ch["test"], ch["reason"][:200], f"{ch['duration']:.2f}"]
                         for ch in k["checks"]])  # fmt: skip

    lines += ["", "## Feature × outcome", ""]
    if s["features"]:
        lines += md_table(["feature", "declared", "verdict"] + [s["short"][o] for o in s["outcomes"]],
                        [[f["feature"], {True: "yes", False: "no", None: "–"}[f["declared"]], f["symbol"]]
                         + [f["counts"][o] for o in s["outcomes"]] for f in s["features"]])  # fmt: skip
    else:
        lines.append("No feature was declared or exercised.")

    lines += ["", "## Metrics against the reference", ""]
    if s["metrics"]:
        lines += md_table(["check", "metric", "context", "ours", "reference", "Δ", "Δ%", "tolerance", "rule",
                         "study Δ% (published)", "outcome"],
                        [[m["check"], m["name"], m["context"], m["value"], m["reference"], m["delta"], m["delta_rel"],
                          m["tolerance"], m["rule"], f"{m['study_delta_rel']} {m['study_row']}".strip(), m["outcome"]]
                         for m in s["metrics"]])  # fmt: skip
    else:
        lines.append("No metric was recorded in this run.")

    lines += ["", "## Capabilities", ""]
    lines.append("Hooks: " + (", ".join(s["hooks"]) or "none"))
    lines.append("")
    lines.append("Shims: " + ("; ".join(s["shims"]) or "none"))
    if s["choices"]:
        lines += [""] + [f"- {k}: {v}" for k, v in s["choices"]]
    if s["hyperparameters"]:
        lines += [""] + md_table(["hyperparameter", "default"], [[k, v] for k, v in s["hyperparameters"]])

    lines += ["", "## Reproducibility card", ""] + md_table(
        ["", "", "source"], [[r["field"], r["value"], r["source"]] for r in s["card"]]
    )

    lines += ["", "## Expected failures (xfail registry)", ""]
    if s["xfails"]:
        lines.append(f"File: `{s['xfail_file']}`")
        lines += [""] + md_table(["#", "pattern", "kind", "defect", "fix level", "reason", "link", "matched", "outcomes"],
                               [[e["index"], e["pattern"], e["kind"], e.get("defect") or "–", e.get("fix_level") or "–",
                                 e["reason"], e["link"], e["matched"], e["outcomes"]] for e in s["xfails"]])  # fmt: skip
    else:
        lines.append("None declared.")

    if s["failures"]:
        lines += ["", "## Failure details", ""]
        for f in s["failures"]:
            rerun = f" — rerun: `{f['rerun']}`" if f.get("rerun") else ""
            lines += [f"### `{f['nodeid']}` ({f['outcome']})", "", f["reason"] + rerun, ""]
            if f["details"]:
                lines += ["```", f["details"][-3000:], "```", ""]
            if f.get("worker") and f["worker"].get("stderr_tail"):
                lines += ["Worker stderr (tail):", "", "```", f["worker"]["stderr_tail"][-2000:], "```", ""]
            if f.get("worker") and f["worker"].get("stacks"):
                lines += ["Worker Python stacks before the timeout kill:", "", "```", f["worker"]["stacks"][:6000],
                          "```", ""]  # fmt: skip
    if s["plot_error"]:
        lines += ["", f"Plots were not written: {s['plot_error']}"]
    return "\n".join(lines).rstrip() + "\n"


def notices_markdown(notices: list[str]) -> list[str]:
    """The summary's warnings (``reports.notices``) as Markdown quote lines, one paragraph each."""
    return [line for n in notices for line in ("", f"> **Warning:** {md_cell(n)}")]


def render_html(s: dict[str, Any], template: str = "summary.html.j2") -> str:
    """summary.html from the Jinja2 template in reports/templates (autoescaped, self-contained CSS)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template(template).render(s=s)
