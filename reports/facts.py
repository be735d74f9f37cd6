"""What the report pages say of a run from its records alone, shared by the card, the scoreboard, the
dataset matrix and the plots: its headline ranking metrics beside the study's published change
(:func:`headline_metrics`), whether its checks are this checkout's (:func:`suite_currency`) and whether the
implementation is a negative control (:func:`negative_control`).
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from pathlib import Path
from typing import Any

from gru4rec_conformance import CHECKOUT_ROOT, __version__
from gru4rec_conformance.conformance._records.verdict import _subset_args
from gru4rec_conformance.datasets import study
from gru4rec_conformance.reports import reference_fingerprint
from gru4rec_conformance.reports.results import RunData

__all__ = [
    "CHECK_PATHS",
    "CHECK_PATHS_BY_FAMILY",
    "NEGATIVE_CONTROLS",
    "suite_currency",
    "changed_files",
    "is_check_module",
    "is_documentation",
    "affects",
    "refreshed_text",
    "negative_control",
    "headline_metrics",
]

#: Folders whose content decides what a check measures: a run made at a commit where any of them differed from
#: this checkout's is stale (its checks are older than the current ones).
CHECK_PATHS = ("conformance/gru4rec", "conformance/finetuner", "reference", "datasets")
_SHARED_PATHS = ("reference/__init__.py", "datasets/__main__.py", "datasets/paths.py", "datasets/_suite_io.py")
#: The same per family (the run header's ``impl.family``): a change to the fine-tuner's checks does not make a
#: GRU4Rec verdict stale, nor the other way round. A family not listed is judged by :data:`CHECK_PATHS`.
CHECK_PATHS_BY_FAMILY = {
    "gru4rec": ("conformance/gru4rec", "reference/gru4rec", "datasets/sessions", "datasets/study", *_SHARED_PATHS),
    "finetuner": ("conformance/finetuner", "reference/finetuner", "datasets/sst5", *_SHARED_PATHS),
}
#: Implementations that are not GRU4Rec (they are run to show the checks tell them apart), beyond those whose
#: description says "negative control".
NEGATIVE_CONTROLS = {
    "torch_rechub": "not a GRU4Rec: a two-tower retriever with a GRU user tower",
    "ms_recommenders": "a different algorithm (the study leaves it out)",
}
_SEMVER = re.compile(r"^(\d+(?:\.\d+)*)")


def negative_control(impl: dict[str, Any]) -> str | None:
    """Why an implementation is a negative control (not a GRU4Rec), or None."""
    base = str(impl.get("name") or "").split(":")[0]
    if base in NEGATIVE_CONTROLS:
        return NEGATIVE_CONTROLS[base]
    if impl.get("negative_control"):
        return str(impl["negative_control"]) if isinstance(impl["negative_control"], str) else "negative control"
    return "negative control" if "negative control" in str(impl.get("description") or "").lower() else None


#: A check module (``conformance/<family>/test_*.py``): its changes matter only to runs that ran its checks.
_CHECK_MODULE = re.compile(r"conformance/[^/]+/test_[^/]+\.py")


@functools.lru_cache(maxsize=64)
def _changed_files(sha: str, root: str, paths: tuple[str, ...] = CHECK_PATHS) -> tuple[tuple[str, str], ...] | None:
    """``(status, path)`` of the files under ``paths`` that differ between commit ``sha`` and the checkout's
    ``HEAD`` at ``root`` (git's A/M/D letters, renames as a deletion and an addition; committed checks: a run from
    a work tree with uncommitted changes is judged by its commit), or None when git cannot tell (no git, not a
    repository, an unknown commit)."""
    try:
        done = subprocess.run(
            ["git", "-C", root, "diff", "--no-renames", "--name-status", sha, "HEAD", "--", *paths],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    rows = (line.split("\t", 1) for line in done.stdout.splitlines() if line.strip())
    return tuple((status[:1], path) for status, path in rows)


def changed_files(sha: str, root: str, paths: tuple[str, ...] = CHECK_PATHS) -> tuple[tuple[str, str], ...] | None:
    """``(status, path)`` of the files under ``paths`` that differ between commit ``sha`` and ``HEAD`` at
    ``root`` (cached; None when git cannot tell), less the reference's files when its outputs are the same
    (:func:`_without_same_reference`). The harness's ``--refresh`` decides with it which earlier results still
    stand (``conformance/_harness/refresh.py``)."""
    return _without_same_reference(sha, root, _changed_files(sha, root, paths))


def _without_same_reference(
    sha: str, root: str | Path, files: tuple[tuple[str, str], ...] | None
) -> tuple[tuple[str, str], ...] | None:
    """``files`` without those under ``reference/gru4rec/`` when the reference at ``sha`` computes the same bits
    as at HEAD (``reports/reference_fingerprint.py``: a speed change recorded in the fingerprint ledger)."""
    tree = reference_fingerprint.TREE + "/"
    if not files or not any(p.startswith(tree) for _, p in files):
        return files
    if not reference_fingerprint.same_outputs(sha, Path(root)):
        return files
    return tuple((st, p) for st, p in files if not p.startswith(tree))


def is_check_module(path: str) -> bool:
    """Whether ``path`` (repository-relative) is a check module, ``conformance/<family>/test_*.py``."""
    return bool(_CHECK_MODULE.fullmatch(path))


#: A private helper module of the checks (``conformance/<family>/_probes.py``): it matters only to the check
#: modules that import it, directly or through other helpers, and to every module when conftest.py imports it.
_HELPER = re.compile(r"(conformance/[^/]+)/(_[^/]+)\.py")


def _imported_helpers(source: str, folder: str) -> set[str]:
    """The sibling helper modules (``<folder>/_x.py``) one module's source imports, by name, from any import form
    (``from ...gru4rec._common import x``, ``from ...gru4rec import _data``, ``from . import _probes as P``)."""
    package = folder.replace("/", ".")
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            names = [a.name for a in node.names]
            if node.level:  # relative: from . import _x / from ._x import y
                parts = [mod] if mod else names
            elif mod.endswith(package):
                parts = names
            elif package + "." in mod:
                parts = [mod.rsplit(".", 1)[-1]]
            else:
                continue
            out.update(f"{folder}/{p.split('.')[0]}.py" for p in parts if p.startswith("_") and p != "__init__")
        elif isinstance(node, ast.Import):
            out.update(f"{folder}/{a.name.rsplit('.', 1)[-1]}.py" for a in node.names
                       if package + "._" in a.name)  # fmt: skip
    return out


@functools.lru_cache(maxsize=16)
def _helper_users(root: str, folder: str, stamp: tuple[tuple[str, int], ...]) -> dict[str, frozenset[str]]:
    """Helper path → the check modules of ``folder`` that depend on it (transitively; every check module for a
    helper conftest.py reaches). ``stamp`` (names and mtimes) keys the cache to the folder's content."""
    base = Path(root)
    edges: dict[str, set[str] | None] = {}
    for name, _ in stamp:
        path = f"{folder}/{name}"
        try:
            edges[path] = _imported_helpers((base / path).read_text(encoding="utf-8"), folder)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            edges[path] = None  # unreadable: depends on everything (conservative)
    helpers = {p for p in edges if _HELPER.fullmatch(p)}

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for h in edges.get(todo.pop()) or ():
                if h not in seen:
                    seen.add(h)
                    todo.append(h)
        return seen

    modules = [p for p in edges if is_check_module(p)]
    everywhere = reach(f"{folder}/conftest.py")
    users: dict[str, set[str]] = {h: set() for h in helpers}
    for m in modules:
        for h in helpers if edges[m] is None else reach(m) | everywhere:
            users.setdefault(h, set()).add(m)
    return {h: frozenset(ms) for h, ms in users.items()}


def affects(path: str, module: str, root: str | Path | None = CHECKOUT_ROOT) -> bool:
    """Whether a change to ``path`` can change what check module ``module`` measures (repository-relative
    paths): documentation never; a check module only itself; a private helper (``conformance/<family>/_x.py``)
    only the check modules of its folder that import it, directly or through other helpers, or all of them when
    conftest.py reaches it (the import graph of this checkout; a helper no module imports, e.g. a deleted one,
    counts for every module); anything else (conftest.py, the reference, the data readers) every module."""
    if is_documentation(path):
        return False
    if is_check_module(path):
        return path == module
    m = _HELPER.fullmatch(path)
    if m is None or root is None or not module.startswith(m.group(1) + "/"):
        return True
    folder = Path(root) / m.group(1)
    try:
        stamp = tuple(sorted((p.name, p.stat().st_mtime_ns) for p in folder.glob("*.py")))
    except OSError:
        return True
    users = _helper_users(str(root), m.group(1), stamp)
    return path not in users or module in users[path] or not users[path]


def _counted_changes(run: RunData, changed: tuple[tuple[str, str], ...], root: str | Path | None = None) -> list[str]:
    """The changed files that can make ``run`` stale: those that :func:`affects` a check module the run has
    results from (all but documentation when it has none). A changed check module whose checks left no result in
    the run (a ``-k MC`` matrix run and a hyperparameter check) cannot have changed what the run measured, nor can
    a helper only such modules import; a check module added since then counts for a run that selected nothing
    (its checks would have run) and not for a subset run."""
    ran = {str(r.get("module") or "") for r in run.results} - {""}
    subset = bool(_subset_args([str(a) for a in run.header.get("command") or ()]))
    return [
        path
        for status, path in changed
        if not is_documentation(path)
        and (
            (status == "A" and is_check_module(path) and not subset)
            or any(affects(path, m, root) for m in ran)
            or (not ran and not is_check_module(path))
        )
    ]


def is_documentation(path: str) -> bool:
    """Whether ``path`` is documentation (a Markdown file, e.g. ``conformance/gru4rec/README.md``): no check reads
    it, so its changes make no run stale."""
    return path.endswith(".md")


def _release(text: str) -> tuple[int, ...]:
    m = _SEMVER.match(text or "")
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def suite_currency(run: RunData, root: Path | None = CHECKOUT_ROOT) -> tuple[bool | None, str]:
    """Whether the run's checks are this checkout's: ``(True, note)`` current, ``(False, why)`` stale, ``(None,
    note)`` when it cannot be told.

    Stale when the run's suite commit differs from this checkout's HEAD in the check paths of the run's family
    (:data:`CHECK_PATHS_BY_FAMILY`, else :data:`CHECK_PATHS`; git), check modules whose checks the run did not
    run left out (:func:`_counted_changes`), or, without git or without that commit here, when its release is
    older than this suite's (``__version__``).
    """
    suite = run.header.get("suite") or {}
    family = str((run.header.get("impl") or {}).get("family") or "")
    paths = CHECK_PATHS_BY_FAMILY.get(family, CHECK_PATHS)
    whose = f"{family} " if family in CHECK_PATHS_BY_FAMILY else ""
    string = str(suite.get("string") or "?")
    sha = str(suite.get("git_sha") or "")
    if sha and root is not None and (Path(root) / ".git").exists():
        files = _without_same_reference(sha, root, _changed_files(sha, str(root), paths))
        if files is not None:
            counted = _counted_changes(run, files, root)
            if not counted:
                unran = f" (changed since: {len(files)} check modules it did not run)" if files else ""
                return True, f"suite {string}: same checks as this checkout{unran}"
            return False, f"stale: {len(counted)} files of the {whose}checks changed since suite {string}"
    release = str(suite.get("version") or string.split("+")[0])
    if _release(release) and _release(release) < _release(__version__):
        return False, f"stale: suite {string} is older than this suite {__version__}"
    return None, f"suite {string}: not comparable with this checkout (no git history of that commit)"


def refreshed_text(run: RunData) -> str:
    """What a ``--refresh`` run took over: how many results, from which run, recorded at which suites."""
    taken = [r for r in run.results if r.get("reused_from")]
    suites = sorted({str(r["reused_from"].get("suite_version") or "?") for r in taken})
    ran = len(run.results) - len(taken)
    return (f"{(run.header.get('refresh') or {}).get('run_id', '?')}: {len(taken)} results taken over (their check "
            f"code unchanged since suite {', '.join(suites) or '–'}), {ran} run in this run")  # fmt: skip


def _metric_kind(comparison: str) -> str:
    return "matching" if comparison.startswith(("matching", "own evaluator")) else "best"


def headline_metrics(run: RunData, names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Ranking metrics (recall@N, MRR@N) recorded with a reference: one row per check, metric and context.

    Each row: ``check``, ``name``, ``cutoff`` (N), ``dataset``, ``loss``, ``comparison``, ``value``, ``reference``,
    ``tolerance`` (half-width of the band), ``delta_rel`` (fraction), ``within``, ``outcome``, and the study's
    ``study_delta_rel`` (fraction or None) with ``study_against`` (the official row compared against).
    """
    rows = []
    for r in run.results:
        for m in r.get("metrics") or ():
            name = str(m.get("name") or "")
            value, ref = m.get("value"), m.get("reference")
            if names is not None and name not in names:
                continue
            if not re.fullmatch(r"(recall|mrr)@\d+", name) or not isinstance(value, (int, float)):
                continue
            if not isinstance(ref, (int, float)):
                continue
            ctx = m.get("context") or {}
            comparison = str(ctx.get("comparison") or "")
            dataset = ctx.get("dataset") or run.header.get("dataset")
            pub = study.published(name, dataset, ctx.get("loss"), run.impl.get("study"), _metric_kind(comparison))
            rows.append({
                "check": (r.get("check") or {}).get("id") or "–", "name": name, "cutoff": int(name.split("@")[1]),
                "dataset": dataset or "?", "loss": ctx.get("loss") or "?",
                "comparison": comparison.split(":")[0] or "–", "comparison_detail": comparison,
                "value": float(value), "reference": float(ref),
                "tolerance": float(m["tolerance"]) if isinstance(m.get("tolerance"), (int, float)) else None,
                "delta_rel": (value - ref) / abs(ref) if ref else None, "within": m.get("within"),
                "outcome": r.get("outcome"),
                "study_delta_rel": pub["delta_rel"] if pub else None,
                "study_against": f"{pub['dataset']}: {pub['row']} vs {study.OFFICIAL} / {pub['against']}" if pub else "",
            })  # fmt: skip
    return rows
