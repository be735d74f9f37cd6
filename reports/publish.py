"""``python -m gru4rec_conformance.reports render ROOT [ROOT ...] --out DIR``: every page from the results alone.

For each implementation and judged version found under the roots (the newest run of each verdict key,
:func:`reports.compact.verdict_key`; complete runs first), writes into ``DIR/<key>/`` its verdict card
(``card.md``, ``card.html``), its summary (``summary.md``, ``summary.html``) and ``plots/``; then
``DIR/study.png`` (the study figure), ``DIR/study_datasets.png`` (the same per dataset, from the runs on
several metric datasets, :mod:`reports.matrix`) and ``DIR/scoreboard.md`` / ``.html`` linking the cards. Nothing is
written into the roots. A folder that cannot be read is named (file and line) and makes the command exit 2;
the other folders are still rendered.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gru4rec_conformance.fileio import atomic_write_text
from gru4rec_conformance.reports.card import build_card
from gru4rec_conformance.reports.card import render_html as card_html
from gru4rec_conformance.reports.card import render_markdown as card_md
from gru4rec_conformance.reports.files import REPORT_DIR_MODE
from gru4rec_conformance.reports.files import REPORT_FILE_MODE as MODE
from gru4rec_conformance.reports.plots import write_plots, write_study_figure
from gru4rec_conformance.reports.render import render_html, render_markdown
from gru4rec_conformance.reports.results import RunData, RunDirError, iter_run_dirs, load_run
from gru4rec_conformance.reports.scoreboard import build_scoreboard
from gru4rec_conformance.reports.scoreboard import render_html as board_html
from gru4rec_conformance.reports.scoreboard import render_markdown as board_md
from gru4rec_conformance.reports.selection import is_matrix, newest_per_key
from gru4rec_conformance.reports.summary import build_summary

__all__ = ["render_tree", "readme_for"]


def _folder(path: Path, top: Path) -> Path:
    """Make ``path`` (below ``top``) and give it and its parents up to ``top`` the report mode 0755."""
    path.mkdir(parents=True, exist_ok=True)
    for p in [path, *path.parents]:
        os.chmod(p, REPORT_DIR_MODE)
        if p == top:
            break
    return path


def readme_for(run: RunData, roots: Sequence[Path]) -> Path | None:
    """The hand-written README of the implementation's verdict folder (``<root>/<impl>/README.md``), if any."""
    base = str(run.impl.get("name") or "").split(":")[0]
    for root in roots:
        candidate = Path(root) / base / "README.md"
        if base and candidate.is_file():
            return candidate
    return None


def render_tree(roots: Sequence[Path], out: Path, plots: bool = True) -> tuple[list[Path], list[str]]:
    """Render every verdict key under ``roots`` into ``out``.

    Returns:
        ``(folders written, errors)``: one ``DIR/<key>/`` per key, then ``"<folder>: <error>"`` per folder that
        could not be read (the error names the file and line) or rendered.
    """
    out = Path(out)
    _folder(out, out)
    errors: list[str] = []
    runs: list[RunData] = []
    for root in roots:
        if not Path(root).is_dir():
            errors.append(f"{root}: not a folder")
            continue
        for directory in iter_run_dirs(Path(root)):
            try:
                run = load_run(directory)
            except (RunDirError, OSError) as exc:
                errors.append(str(exc) if str(directory) in str(exc) else f"{directory}: {exc}")
                continue
            if run.header and run.impl:
                runs.append(run)
    chosen = newest_per_key(runs)
    written, cards = [], {}
    for key, run in sorted(chosen.items()):
        folder = _folder(out / key, out)
        try:
            drawn: dict[str, str] = {}
            plot_error = None if plots else "disabled"
            if plots:
                try:
                    drawn = write_plots(run, _folder(folder / "plots", out))
                except Exception as exc:  # the tables must still be written
                    plot_error = f"{type(exc).__name__}: {exc}"
            readme = readme_for(run, roots)
            link = os.path.relpath(readme, folder) if readme else None
            card = build_card(run, readme, link)
            atomic_write_text(folder / "card.md", card_md(card), mode=MODE)
            atomic_write_text(folder / "card.html", card_html(card), mode=MODE)
            summary = build_summary(run, plots=drawn, plot_error=plot_error, conformance=run.conformance())
            atomic_write_text(folder / "summary.md", render_markdown(summary), mode=MODE)
            atomic_write_text(folder / "summary.html", render_html(summary), mode=MODE)
        except (RunDirError, OSError, KeyError, TypeError, ValueError) as exc:
            errors.append(f"{run.directory}: cannot render: {type(exc).__name__}: {exc}")
            continue
        cards[str(key)] = f"{key.as_posix()}/card.html"
        written.append(folder)
    board = build_scoreboard([Path(r) for r in roots], link_base=out, cards=cards, runs=runs)
    if plots:
        verdict_runs = [r for r in chosen.values() if not is_matrix(r)]
        if write_study_figure(verdict_runs, out / "study.png"):
            board["study_figure"] = "study.png"
        matrix_runs = [r for r in chosen.values() if is_matrix(r)]
        if write_study_figure(matrix_runs, out / "study_datasets.png", per_dataset=True):
            board["matrix_figure"] = "study_datasets.png"
    board["unreadable"] = errors
    md_cards = {k: v.replace(".html", ".md") for k, v in cards.items()}
    atomic_write_text(out / "scoreboard.html", board_html(board), mode=MODE)
    for r in board["rows"] + board["apart"]:
        r["card"] = md_cards.get(r["key"])
    atomic_write_text(out / "scoreboard.md", board_md(board), mode=MODE)
    return written, errors
