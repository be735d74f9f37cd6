"""Strict xfail registry: ``conformance/xfails/<impl>.toml`` (format: conformance/xfails/README.md).

Each entry names checks by node-id pattern and says why they are expected to fail. The plugin applies the
active entries as ``xfail(strict=True)`` (an XPASS fails the run) or, with ``--xfail-mark=skip``, as skips;
an entry that matches no collected check is an error, and the reference must have no entries at all.

An entry names checks by node-id pattern or by check id: ``SR-3`` (every test of check SR-3, all parameters),
``SR-3[bpr-max]`` (one parameter), ``MC-*[cross-entropy]`` (wildcards as below). A check id is resolved to the
tests that carry it in their ``@pytest.mark.check`` marker (:func:`check_key_forms`); the parameters after it
are those of the node id, matched as below.

Node-id patterns are matched against the node id without the implementation's parameter (``test_sr1[recpack]`` is
matched as ``test_sr1``; ``test_lf1[recpack-bpr-max]`` as ``test_lf1[bpr-max]``) and against the full node
id. ``*`` matches any text and ``?`` one character; everything else is literal (brackets included). A
pattern without wildcards also matches as a prefix ending at ``::``, ``[`` or ``/`` (a file, a class, a
test with all its parameters).

Integrity (a run's xfail files must be the committed ones): :func:`file_provenance` hashes an xfail file and asks git whether the file is tracked and
unmodified; :func:`provenance_problem` says why ``--gate`` must not trust a file the run picked up implicitly
(untracked, modified, or unverifiable). A file named with ``--xfails`` is trusted as given: the person who
started the run chose it, and the header records its hash.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gru4rec_conformance import CHECKOUT_ROOT
from gru4rec_conformance.conformance._records.records import XfailFileInfo

__all__ = ["XfailEntry", "XfailFile", "XfailRegistryError", "load_xfail_file", "default_xfail_path",
           "is_check_id_pattern", "check_key_forms", "strip_impl_param", "strip_dataset_param", "pattern_matches", "xfail_label", "KINDS", "FIX_LEVELS", "FAILS_AS", "PLACEHOLDER", "file_provenance", "provenance_problem",
           "git_state"]  # fmt: skip

KINDS = ("bug", "design-difference", "numerical")
FIX_LEVELS = ("OOB", "INF", "MIN", "MAJ", "NEVER", "NOT-IN-STUDY")
FAILS_AS = ("assertion", "crash")
#: The value a generated draft xfail file (``--first-run``) gives ``kind`` and ``link``: refused by the registry, so
#: a draft cannot back a gate until a person has chosen every entry's kind and link.
PLACEHOLDER = "TODO"
ENTRY_KEYS = {"id", "reason", "kind", "link", "defect", "fix_level", "since", "fails_as", "when"}
WHEN_KEYS_EXACT = {"device", "platform"}
WHEN_KEYS_VERSION = {"python", "impl_version"}  # plus installed distribution names (numpy, pandas, torch, ...)


class XfailRegistryError(ValueError):
    """An xfail file is malformed; the message names the file, the entry and the key."""


@dataclasses.dataclass(frozen=True)
class XfailEntry:
    """One expected failure.

    Attributes:
        index: 1-based position in the file (used in messages).
        pattern: node-id pattern (see module docstring).
        reason: why it fails (printed in reports).
        kind: one of :data:`KINDS`.
        link: upstream issue / evidence URL, or ``"none"``.
        defect: defect id of the study (docs/study.md, 'Implementations and their ids'; e.g. ``"RP-7"``), optional.
        fix_level: study fix level (:data:`FIX_LEVELS`) at which the defect is fixed, optional.
        since: implementation version since which the failure is known, optional.
        fails_as: how the declared failure shows, optional (:data:`FAILS_AS`): ``"assertion"``, the check's own
            finding (an ``assert`` or ``pytest.fail``: a figure out of its band); ``"crash"``, any other exception
            (the implementation raised, its worker died or timed out). A failure of the other way is not held by
            this entry: a crash where a metric gap was declared is reported as the failure it is. None: either.
        when: conditions (device, platform, python / impl_version / distribution version specifiers).
    """

    index: int
    pattern: str
    reason: str
    kind: str
    link: str
    defect: str | None = None
    fix_level: str | None = None
    since: str | None = None
    fails_as: str | None = None
    when: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        return f"entry {self.index} (id = {self.pattern!r})"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["when"] = dict(self.when)
        return d

    def active(self, context: Mapping[str, str]) -> bool:
        """Whether the ``when`` conditions hold in ``context`` (device, platform, python, impl_version,
        and installed distribution versions). An unknown version never satisfies a specifier."""
        for key, cond in self.when.items():
            if key in WHEN_KEYS_EXACT:
                allowed = [cond] if isinstance(cond, str) else list(cond)
                if context.get(key) not in allowed:
                    return False
                continue
            version = context.get(key)
            if version is None or version == "unknown":
                return False
            from packaging.specifiers import SpecifierSet
            from packaging.version import InvalidVersion, Version

            try:
                if Version(version) not in SpecifierSet(cond):
                    return False
            except InvalidVersion:
                return False
        return True


@dataclasses.dataclass(frozen=True)
class XfailFile:
    path: Path
    implementation: str
    entries: tuple[XfailEntry, ...]


def xfail_label(entry: Mapping[str, Any]) -> str:
    """How an entry (:meth:`XfailEntry.to_dict`) reads as an xfail reason: ``[bug, GP-1] reason (link)``."""
    defect = f", {entry['defect']}" if entry.get("defect") else ""
    return f"[{entry.get('kind')}{defect}] {entry.get('reason')} ({entry.get('link')})"


def default_xfail_path(root: Path, impl_name: str) -> Path:
    """``<root>/conformance/xfails/<name>.toml``; a ``:`` in variant names becomes ``.``."""
    return root / "conformance" / "xfails" / (re.sub(r"[^A-Za-z0-9_.@-]", ".", impl_name) + ".toml")


def _toml_load(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise XfailRegistryError(f"{path}: not valid TOML: {exc}") from exc


def load_xfail_file(path: Path, expected_impl: str | None = None) -> XfailFile:
    """Load and validate one xfail file.

    Args:
        path: the TOML file.
        expected_impl: implementation the file must belong to (its ``implementation`` key, when present,
            must equal it).

    Raises:
        XfailRegistryError: naming the file, the entry and the key, for unknown keys, missing ``id`` /
            ``reason`` / ``kind`` / ``link``, a kind or fix level outside the vocabulary, or bad ``when``.
    """
    data = _toml_load(path)
    unknown_top = sorted(set(data) - {"implementation", "xfail"})
    if unknown_top:
        raise XfailRegistryError(
            f"{path}: unknown top-level key(s) {unknown_top}; expected 'implementation' and [[xfail]] entries"
        )
    impl = data.get("implementation", expected_impl)
    if not isinstance(impl, str) or not impl:
        raise XfailRegistryError(f"{path}: 'implementation = \"<name>\"' is required in this file")
    if expected_impl is not None and impl != expected_impl:
        raise XfailRegistryError(f"{path}: file is for implementation {impl!r}, not {expected_impl!r}")
    raw_entries = data.get("xfail", [])
    if not isinstance(raw_entries, list):
        raise XfailRegistryError(f"{path}: 'xfail' must be an array of tables ([[xfail]])")
    entries = []
    for i, raw in enumerate(raw_entries, start=1):
        where = f"{path}: entry {i}"
        if not isinstance(raw, dict):
            raise XfailRegistryError(f"{where}: must be a table")
        unknown = sorted(set(raw) - ENTRY_KEYS)
        if unknown:
            raise XfailRegistryError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(ENTRY_KEYS)}")
        for key in ("id", "reason", "kind", "link"):
            if not isinstance(raw.get(key), str) or not raw[key].strip():
                raise XfailRegistryError(f"{where}: '{key}' is required (a non-empty string)")
        for key in ("kind", "link"):
            if raw[key].strip() == PLACEHOLDER:
                choose = f"one of {list(KINDS)}" if key == "kind" else "the upstream issue or evidence, or 'none'"
                raise XfailRegistryError(f"{where}: {key} {PLACEHOLDER!r} is a placeholder of a generated draft "
                                         f"(--first-run); review the entry and set its {key} to {choose}")  # fmt: skip
        if raw["kind"] not in KINDS:
            raise XfailRegistryError(f"{where}: kind {raw['kind']!r} is not one of {list(KINDS)}")
        if raw.get("fix_level") is not None and raw["fix_level"] not in FIX_LEVELS:
            raise XfailRegistryError(f"{where}: fix_level {raw['fix_level']!r} is not one of {list(FIX_LEVELS)}")
        if raw.get("fails_as") is not None and raw["fails_as"] not in FAILS_AS:
            raise XfailRegistryError(f"{where}: fails_as {raw['fails_as']!r} is not one of {list(FAILS_AS)}")
        when = raw.get("when", {})
        if not isinstance(when, dict):
            raise XfailRegistryError(f"{where}: 'when' must be a table")
        for key, cond in when.items():
            if key in WHEN_KEYS_EXACT:
                if not (isinstance(cond, str) or (isinstance(cond, list) and all(isinstance(c, str) for c in cond))):
                    raise XfailRegistryError(f"{where}: when.{key} must be a string or a list of strings")
                continue
            if not isinstance(cond, str):
                raise XfailRegistryError(f"{where}: when.{key} must be a version specifier string such as '>=2,<3'")
            from packaging.specifiers import InvalidSpecifier, SpecifierSet

            try:
                SpecifierSet(cond)
            except InvalidSpecifier as exc:
                raise XfailRegistryError(f"{where}: when.{key} = {cond!r} is not a version specifier ({exc})") from exc
        entries.append(
            XfailEntry(
                index=i, pattern=raw["id"].strip(), reason=raw["reason"].strip(), kind=raw["kind"],
                link=raw["link"].strip(), defect=raw.get("defect"), fix_level=raw.get("fix_level"),
                since=raw.get("since"), fails_as=raw.get("fails_as"), when=dict(when),
            )
        )  # fmt: skip
    return XfailFile(path=path, implementation=impl, entries=tuple(entries))


def strip_impl_param(nodeid: str, impl_id: str) -> str:
    """The node id without the implementation's parametrization id (see module docstring)."""
    if "[" not in nodeid:
        return nodeid
    head, _, params = nodeid.partition("[")
    params = params[:-1] if params.endswith("]") else params
    if params == impl_id:
        return head
    for old, _new in ((f"{impl_id}-", ""),):
        if params.startswith(old):
            return f"{head}[{params[len(old) :]}]"
    if params.endswith(f"-{impl_id}"):
        return f"{head}[{params[: -len(impl_id) - 1]}]"
    if f"-{impl_id}-" in params:
        return f"{head}[{params.replace(f'-{impl_id}-', '-', 1)}]"
    return nodeid


def strip_dataset_param(nodeid: str, dataset_id: str) -> str:
    """The node id without the metric dataset's parametrization id (``--dataset all`` adds it to the metric
    checks: ``test_mc1[cross-entropy-rees46]`` → ``test_mc1[cross-entropy]``), so an xfail entry written for the
    check holds on every dataset; an entry naming the dataset matches the full id and holds on that one only."""
    if "[" not in nodeid or not dataset_id:
        return nodeid
    head, _, params = nodeid.partition("[")
    params = params[:-1] if params.endswith("]") else params
    parts = params.split("-")
    want = dataset_id.split("-")
    for i in range(len(parts) - len(want) + 1):  # pytest puts it first (the fixture parametrized by the hook)
        if parts[i : i + len(want)] == want:
            rest = parts[:i] + parts[i + len(want) :]
            return f"{head}[{'-'.join(rest)}]" if rest else head
    return nodeid


#: An entry id that names a check by its id, with optional parameters: ``SR-3``, ``SR-3[bpr-max]``, ``MC-*``.
#: Node-id patterns always name a file (``/``, ``.py``) or start in lower case (``test_mc*``), so never match.
_CHECK_ID_PATTERN = re.compile(r"[A-Z][A-Z0-9]*-[A-Za-z0-9*?]+(\[[^/]*\])?\Z")


def is_check_id_pattern(pattern: str) -> bool:
    """Whether an entry id names a check id (``SR-3``, ``SR-3[bpr-max]``, ``MC-*[cross-entropy]``) rather than a
    node-id pattern (``conformance/gru4rec/test_k1_state_reset.py::test_sr3_long_range_dependency``)."""
    return "::" not in pattern and ".py" not in pattern and bool(_CHECK_ID_PATTERN.match(pattern))


def check_key_forms(check: str | None, nodeids: Iterable[str]) -> tuple[str, ...]:
    """The ids a check-id entry is matched against: each node id's function part replaced by the check's id
    (``conformance/gru4rec/test_k2.py::test_lf1[bpr-max]`` of check LF-1 → ``LF-1[bpr-max]``; without
    parameters ``LF-1``), so that the node id's parameters — without the implementation, without the dataset,
    as for node-id patterns — follow the check id. Empty for an item without a check id."""
    if not check:
        return ()
    forms = []
    for n in nodeids:
        test = n.partition("::")[2] or n
        forms.append(check + (test[test.index("[") :] if "[" in test else ""))
    return tuple(dict.fromkeys(forms))


def _glob_regex(pattern: str) -> re.Pattern[str]:
    parts = []
    for ch in pattern:
        parts.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


def pattern_matches(pattern: str, *nodeids: str) -> bool:
    """Whether ``pattern`` matches any of ``nodeids`` (glob with ``*``/``?``, or prefix without them)."""
    if "*" in pattern or "?" in pattern:
        rx = _glob_regex(pattern)
        return any(rx.match(n) for n in nodeids)
    for n in nodeids:
        if n == pattern or (n.startswith(pattern) and n[len(pattern)] in ":[/"):
            return True
    return False


def pattern_file_part(pattern: str) -> str:
    """The file part of a pattern (before ``::``), used to tell out-of-scope entries from typos."""
    return pattern.split("::", 1)[0].split("[", 1)[0]


def files_matching(root: Path, file_pattern: str) -> list[Path]:
    """Existing files under ``root`` matching the file part of a pattern (glob wildcards allowed)."""
    if "*" in file_pattern or "?" in file_pattern:
        return [p for p in root.glob(file_pattern.replace("**", "*")) if p.is_file()] or [
            p for p in root.rglob("*.py") if _glob_regex(file_pattern).match(p.relative_to(root).as_posix())
        ]
    target = root / file_pattern
    return [target] if target.exists() else []


def when_context(device: str, impl_version: str, distributions: Iterable[str] = ()) -> dict[str, str]:
    """Values the ``when`` conditions are evaluated against."""
    import importlib.metadata

    ctx = {
        "device": device,
        "platform": sys.platform,
        "python": platform.python_version(),
        "impl_version": impl_version,
    }
    for dist in distributions:
        try:
            ctx[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ctx


# ---------------------------------------------------------------------------------------------------------
# integrity of the registry files
# ---------------------------------------------------------------------------------------------------------
#: The suite's distribution, whose RECORD (the wheel's list of files with their sha256) vouches for the xfail
#: files of an installed suite, where there is no git checkout to ask.
DISTRIBUTION = "gru4rec-conformance"


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE ... of the caller would point git at another repository; no optional
    # locks: a status must not take the index lock from someone committing in that checkout meanwhile
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "--no-optional-locks", "-C", str(cwd), *args], capture_output=True, text=True,
                          timeout=20, env=env)  # fmt: skip


def git_state(path: Path) -> str:
    """How git sees ``path``: ``"tracked"`` (in the index and unchanged against HEAD, staged or not),
    ``"modified"`` (tracked, with staged or unstaged changes), ``"untracked"`` (in a work tree but not tracked,
    ignored files included) or ``"no git"`` (not inside a git work tree, or git is not installed or fails)."""
    path = Path(path).resolve()
    try:
        if _git(path.parent, "rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
            return "no git"
        if _git(path.parent, "ls-files", "--error-unmatch", "--", path.name).returncode != 0:
            return "untracked"
        status = _git(path.parent, "status", "--porcelain", "--untracked-files=no", "--", path.name)
    except (OSError, subprocess.SubprocessError):
        return "no git"
    if status.returncode != 0:
        return "no git"
    return "modified" if status.stdout.strip() else "tracked"


def package_state(path: Path, data: bytes) -> str | None:
    """How the installed suite's RECORD sees ``path`` (contents ``data``): ``"pristine"`` (listed, same sha256),
    ``"modified"`` (listed, another hash), ``"unlisted"`` (not a file of the installed distribution); None when
    the suite is not installed from a wheel (no RECORD with hashes)."""
    try:
        files = importlib.metadata.files(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    if not files or not any(f.hash for f in files):
        return None  # an editable install's RECORD does not list the package data
    target = Path(path).resolve()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    for f in files:
        if f.hash is not None and Path(str(f.locate())).resolve() == target:
            return "pristine" if f.hash.mode == "sha256" and f.hash.value == digest else "modified"
    return "unlisted"


def file_provenance(path: Path, explicit: bool) -> XfailFileInfo:
    """Hash and provenance of one xfail file the run uses.

    Args:
        path: the file (it must exist).
        explicit: named on the command line with ``--xfails``.

    Returns:
        ``{"path", "sha256" (hex of the bytes read), "git" (:func:`git_state`), "explicit", "package"}``;
        ``package`` is :func:`package_state` when the suite runs installed (not from a checkout), else None.

    Raises:
        OSError: the file cannot be read.
    """
    path = Path(path).resolve()
    data = path.read_bytes()
    # an installed suite's own files are vouched for by its RECORD, also when its venv lies in some git work tree
    package = package_state(path, data) if CHECKOUT_ROOT is None else None
    return {"path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "git": git_state(path),
            "explicit": explicit, "package": package}  # fmt: skip


def provenance_problem(info: XfailFileInfo) -> str | None:
    """Why ``--gate`` must not trust an xfail file, or None when it may.

    Trusted: a file named with ``--xfails`` (whatever git says: the caller chose it; its hash is recorded), a file
    git tracks unmodified, and, when the suite runs installed, a file the installed wheel's RECORD lists with the
    same sha256 (package data of the wheel: ``site-packages/gru4rec_conformance/conformance/xfails/``). Anything
    else is a file the run found by its place in a folder, which anyone who could write there (the code under
    test included) may have put or changed there.
    """
    package = info.get("package")
    if info["explicit"] or info["git"] == "tracked" or package == "pristine":
        return None
    if package == "modified":
        how = "differs from the installed suite's RECORD"
    elif info["git"] in ("untracked", "modified"):
        how = "is not tracked by git" if info["git"] == "untracked" else "has changes git has not committed"
    elif package == "unlisted":
        how = "is not a file of the installed suite (RECORD) and not in a git checkout"
    else:
        how = "cannot be verified (not in a git checkout, no installed RECORD lists it)"
    return f"xfail file {info['path']} {how}; commit it, or name it with --xfails to use it deliberately"
