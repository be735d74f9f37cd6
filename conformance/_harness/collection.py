"""Collection: which checks run for which implementation, and the strict xfail registry applied to them.

- :func:`pytest_ignore_collect`: ``conformance/<family>/`` is not even imported when no selected
  implementation is of that family;
- :func:`pytest_generate_tests`: every test using the ``impl`` fixture is parametrized over the selected
  implementations of its family (the folder ``conformance/<family>/`` or a ``family`` marker);
- :func:`pytest_collection_modifyitems`: deselects checks of families without a selected implementation (with
  a note), attaches each check's :class:`~.records.StaticInfo`, applies the xfail registry
  (:func:`apply_xfails`; unmatched entries become failing :class:`XfailRegistryItem` s), deselects checks that
  already have a verdict in the ``--resume`` run, and those whose earlier result the ``--refresh`` run holds
  (:mod:`.refresh`).
"""

from __future__ import annotations

import collections
import posixpath
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gru4rec_conformance.conformance._harness.handle import HarnessError, ImplHandle
from gru4rec_conformance.conformance._harness.options import check_roots, missing_selection_usage
from gru4rec_conformance.conformance._harness.recording import PROP_INFO, PROP_XFAIL, XFAIL_ENTRIES_KEY
from gru4rec_conformance.conformance._harness.refresh import RefreshInfo, git_changed, why_not_reusable
from gru4rec_conformance.conformance._harness.state import ImplParam, State, find_state, state_of
from gru4rec_conformance.conformance._records.records import (
    DETERMINISM_MARKER,
    CheckInfo,
    NotRunEntry,
    StaticInfo,
    XfailFileInfo,
)
from gru4rec_conformance.conformance._records.runinfo import suite_version
from gru4rec_conformance.conformance._records.xfails import (
    XfailRegistryError,
    check_key_forms,
    default_xfail_path,
    file_provenance,
    files_matching,
    is_check_id_pattern,
    load_xfail_file,
    pattern_file_part,
    pattern_matches,
    strip_dataset_param,
    strip_impl_param,
    when_context,
    xfail_label,
)
from gru4rec_conformance.implementations.base import KNOWN_FAMILY_NAMES, get_family
from gru4rec_conformance.implementations.registry import AdapterSpec, default_registry


def _known_families(state: State) -> set[str]:
    return set(KNOWN_FAMILY_NAMES) | (set(state.registry.families()) if state.registry else set())


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Do not collect (or import) ``conformance/<family>/`` when no selected implementation is of that family.

    A family's check modules may import heavy optional packages (the fine-tuner's import transformers), so
    ``--impl torch_gru4rec`` must not even import them. A note in the terminal summary says what was left out.
    """
    state = find_state(config)
    if state is None or not state.specs or collection_path.parent.name != "conformance":
        return None
    family = collection_path.name
    if family in _known_families(state) and collection_path.is_dir() and family not in {s.family for s in state.specs}:
        if family not in state.ignored_families:
            state.ignored_families.append(family)
            selected = ", ".join(s.label for s in state.specs)
            state.notes.append(
                f"{family} checks not collected: no selected implementation of family {family} (selected: {selected})"
            )
        return True
    return None


def family_of(node: pytest.Item, state: State) -> str | None:
    """Family of a check: its ``family`` marker, else the folder ``conformance/<family>/`` it lives in.

    Returns None for tests outside any ``conformance/`` folder (they are not checks; the plugin leaves
    them alone). Raises :class:`HarnessError` for a test under ``conformance/`` outside a family folder.
    """
    marker = node.get_closest_marker("family")
    if marker is not None and marker.args:
        return str(marker.args[0])
    known = _known_families(state)
    parts = Path(str(node.path)).parts
    if "conformance" not in parts:
        return None
    after = parts[len(parts) - 1 - parts[::-1].index("conformance") + 1 :]
    if after and after[0] in known:
        return after[0]
    raise HarnessError(
        f"{node.nodeid}: cannot tell the family of this check; put it under conformance/<family>/ "
        f"({', '.join(sorted(known))}) or mark it @pytest.mark.family('<name>')"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "impl" not in metafunc.fixturenames:
        return
    if any("impl" in _argnames(m) for m in metafunc.definition.iter_markers("parametrize")):
        return  # the test parametrizes its own 'impl' argument
    state = state_of(metafunc.config)
    family = family_of(metafunc.definition, state)
    if family is None:
        return
    if state.options.selection is None:
        params, ids = [ImplParam(family, None, missing_selection=True)], ["impl-missing"]
    else:
        specs = [s for s in state.specs if s.family == family]
        if specs:
            params, ids = [ImplParam(family, s.name) for s in specs], [s.name for s in specs]
        else:
            params, ids = [ImplParam(family, None)], ["no-impl"]
    metafunc.parametrize("impl", params, ids=ids, indirect=True)


def _argnames(marker: pytest.Mark) -> list[str]:
    names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
    return [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)


def impl_param(item: pytest.Item) -> ImplParam | None:
    """The ``impl`` parameter of a check item (None for items without one)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    value = callspec.params.get("impl")
    return value if isinstance(value, ImplParam) else None


def marked_check_id(item: pytest.Item) -> str | None:
    """The check id of ``@pytest.mark.check("<ID>", ...)`` on the item (None without one): the one mapping from
    tests to check ids, used by the records and by xfail entries that name a check id."""
    marker = item.get_closest_marker("check")
    if marker is None:
        return None
    cid = marker.args[0] if marker.args else marker.kwargs.get("id")
    return str(cid) if cid else None


def _static_info(item: pytest.Item, family: str, name: str) -> StaticInfo:
    """Check id/kind/title and required features of an item (recorded with every report)."""
    problems = []
    marker = item.get_closest_marker("check")
    fam = get_family(family)
    check: CheckInfo = {"id": None, "kind": None, "title": None, "card": None, "timeout": None}
    if marker is None:
        problems.append("a conformance check needs @pytest.mark.check('<ID>', kind='<kind>')")
    else:
        check["id"] = marked_check_id(item)
        check["kind"] = marker.kwargs.get("kind")
        check["card"] = marker.kwargs.get("card")
        check["timeout"] = marker.kwargs.get("timeout")
        unknown = sorted(set(marker.kwargs) - {"id", "kind", "card", "timeout"})
        if unknown:
            problems.append(f"@check got unknown argument(s) {unknown}")
        if not check["id"]:
            problems.append("@check needs a check id, e.g. @pytest.mark.check('SR-1', kind='K1')")
        if fam is not None and check["kind"] not in fam.kinds:
            problems.append(f"@check kind {check['kind']!r} is not a kind of family {family}: {list(fam.kinds)}")
    doc = getattr(getattr(item, "function", None), "__doc__", None) or ""
    check["title"] = first_sentence(doc)
    features: list[str] = []
    prefixes = dict(fam.marker_prefixes) if fam is not None else {}
    for m in item.iter_markers():
        if m.name == "feature":
            features += [str(a) for a in m.args]
        elif m.name == "hook":
            features += [f"hook:{a}" for a in m.args]
        elif m.name == "hparam":
            features += [f"hparam:{a}" for a in m.args]
        elif m.name in prefixes:
            features += [f"{prefixes[m.name]}:{a}" for a in m.args]
    features = list(dict.fromkeys(features))
    markers = sorted({m.name for m in item.iter_markers()} & {"slow", "gpu", "metric", DETERMINISM_MARKER})
    return {"impl": name, "family": family, "check": check, "features": features, "markers": markers,
            "problems": problems}  # fmt: skip


#: a full stop that ends no sentence: after an abbreviation (e.g., i.e., vs., cf., etc. before a lower-case word)
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|vs|cf|etc|approx|incl|resp|no|Fig|Eq|Sec)|\.\.)$")


def first_sentence(doc: str) -> str:
    """What a check proves, for the reports: the first sentence of the first paragraph of ``doc``, its lines joined
    (a docstring's first line often stops mid-sentence); the whole paragraph when it holds no sentence end; ""
    for an empty docstring. A sentence ends at ``.``, ``!`` or ``?`` followed by white space or the end, not after
    an abbreviation such as ``e.g.``."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    for m in re.finditer(r"[.!?](?=\s|$)", para):
        if m.group() == "." and _ABBREVIATION.search(para[: m.start()]):
            continue
        return para[: m.end()]
    return para


class XfailRegistryItem(pytest.Item):
    """A failing item standing for an xfail-registry problem (unmatched entry, entries for the reference)."""

    def __init__(self, *, message: str, impl: str, family: str, **kwargs: Any) -> None:  # kwargs: pytest.Item's
        super().__init__(**kwargs)
        self.message = message
        info: StaticInfo = {
            "impl": impl, "family": family, "registry_error": True, "features": [], "markers": [],
            "check": {"id": "XFAIL-REGISTRY", "kind": None, "title": "the xfail registry matches the collected checks",
                      "card": None, "timeout": None},
        }  # fmt: skip
        self.user_properties.append((PROP_INFO, info))

    def runtest(self) -> None:
        raise XfailRegistryError(self.message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: object = None) -> str:
        return self.message

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"xfail registry: {self.name}"


def _fully_collected_files(config: pytest.Config, collected_files: set[str]) -> set[str]:
    """Collected files whose every test was requested (no ``::`` selection), relative to rootdir."""
    root = Path(config.rootpath)
    narrowed = set()
    for arg in config.args:
        if "::" in str(arg):
            path = Path(str(arg).split("::", 1)[0])
            path = (path if path.is_absolute() else Path(config.invocation_params.dir) / path).resolve()
            try:
                narrowed.add(path.relative_to(root).as_posix())
            except ValueError:
                narrowed.add(path.as_posix())
    return {f for f in collected_files if f not in narrowed}


def check_id(item: pytest.Item) -> str:
    """The item's id as xfail files name it: ``conformance/<family>/<file>.py::<test>[<params>]``.

    Equals the node id in a checkout; for checks collected from an installed wheel (``--pyargs``), whose node
    ids are paths into site-packages, the file part is made relative to :data:`SUITE_CHECKS_ROOT`.
    """
    nodeid = item.nodeid
    path = Path(str(item.path)).resolve()
    for root in check_roots(item.config):
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            continue
        return rel + nodeid[nodeid.index("::") :] if "::" in nodeid else rel
    return nodeid


def xfail_file_for(state: State, spec: AdapterSpec) -> Path:
    """The xfail file of an implementation: its ``--xfails`` file, the adapter's ``xfails_file``, else
    ``conformance/xfails/<name>.toml`` of the first check root that has one (which need not exist)."""
    if spec.name in state.extra_xfail_files:
        return state.extra_xfail_files[spec.name]
    own = getattr(spec.cls, "xfails_file", None)
    if own:
        return Path(own)
    candidates = [default_xfail_path(root, spec.name) for root in check_roots(state.config)]
    return next((c for c in candidates if c.is_file()), candidates[0])


def xfail_file_info(state: State, spec: AdapterSpec) -> XfailFileInfo | None:
    """Hash and provenance (``xfails.file_provenance``) of the xfail file of ``spec`` as it is now; None when the
    implementation has none or it cannot be read (collection then reports that). ``explicit``: named with
    ``--xfails`` (an adapter's own ``xfails_file`` is not: the adapter is the code under test)."""
    path = xfail_file_for(state, spec)
    if not path.is_file():
        return None
    try:
        return file_provenance(path, explicit=spec.name in state.extra_xfail_files)
    except OSError:
        return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = state_of(config)
    by_impl: dict[tuple[str, str], list[pytest.Item]] = collections.defaultdict(list)
    deselected: list[pytest.Item] = []
    missing_selection = False
    no_impl: collections.Counter[str] = collections.Counter()
    for item in items:
        param = impl_param(item)
        if param is None:
            continue
        if param.missing_selection:
            missing_selection = True
        elif param.name is None:
            no_impl[param.family] += 1
            deselected.append(item)
        else:
            item.user_properties.append((PROP_INFO, _static_info(item, param.family, param.name)))
            by_impl[(param.family, param.name)].append(item)
    if missing_selection:
        raise pytest.UsageError(missing_selection_usage(state.registry or default_registry()))
    selected = ", ".join(s.label for s in state.specs)
    for family, n in sorted(no_impl.items()):
        state.notes.append(f"{n} {family} check(s) deselected: no selected implementation of family {family} "
                           f"(selected: {selected})")  # fmt: skip

    extra_items: list[pytest.Item] = []
    collected_files = {check_id(it).split("::", 1)[0] for its in by_impl.values() for it in its}
    full_files = _fully_collected_files(config, collected_files)
    for key, impl_items in by_impl.items():
        handle = state.handles[key]
        extra_items += apply_xfails(state, session, handle, impl_items, full_files)
        resume = state.resume.get(key)
        if resume is not None:
            current = (handle.version, suite_version()["string"])
            for it in impl_items:
                if resume.verdicts.get(it.nodeid) == current:
                    deselected.append(it)
                    state.reused[handle.name] += 1
            if state.reused[handle.name]:
                state.notes.append(f"--resume: {state.reused[handle.name]} {handle.name} check(s) already have a "
                                   f"verdict in {resume.directory}")  # fmt: skip
        refresh = state.refresh.get(key)
        if refresh is not None:
            deselected += _take_over(state, key, refresh, impl_items)
    if deselected:
        ids = {id(it) for it in deselected}
        items[:] = [it for it in items if id(it) not in ids]
        config.hook.pytest_deselected(items=deselected)
    ours = {d.nodeid for d in deselected}
    for key, impl_items in by_impl.items():
        plan = state.planned.setdefault(key, {})
        for it in impl_items:
            if it.nodeid not in ours:
                plan[it.nodeid] = _planned_entry(state.handles[key], it)
    items[:0] = extra_items


def _take_over(state: State, key: tuple[str, str], info: RefreshInfo, items: list[pytest.Item]) -> list[pytest.Item]:
    """``--refresh``: the items whose earlier result stands (:func:`.refresh.why_not_reusable`), recorded in
    ``state.refreshed``; a note counts them and says why the others run again."""
    taken: list[pytest.Item] = []
    again: collections.Counter[str] = collections.Counter()
    for it in items:
        record = info.results.get(it.nodeid)
        if record is None:
            again["no earlier result"] += 1
            continue
        entries: list[Any] = [*it.stash.get(XFAIL_ENTRIES_KEY, [])]
        entries += [v for k, v in it.user_properties if k == PROP_XFAIL]
        why = why_not_reusable(record, key[0], entries, git_changed)
        if why is None:
            taken.append(it)
        else:
            again[re.sub(r" \(e\.g\. .*\)$", "", why)] += 1
    state.refreshed[key] = [it.nodeid for it in taken]
    reasons = "; ".join(f"{n}: {why}" for why, n in again.most_common())
    state.notes.append(f"--refresh: {len(taken)} {key[1]} check(s) taken over from {info.directory}, "
                       f"{sum(again.values())} run again" + (f" ({reasons})" if reasons else ""))  # fmt: skip
    return taken


def _planned_entry(handle: ImplHandle, item: pytest.Item) -> NotRunEntry:
    """What ``verdict.assess`` needs of a check that may give no result (deselected or not reached): its id and
    kind, its undeclared requirements and its selection markers."""
    info = next((v for k, v in item.user_properties if k == PROP_INFO), None)
    features = list(info["features"]) if isinstance(info, dict) else []
    try:
        missing = [handle.requirement_name(f) for f in handle.unmet(features)]
        if handle.device not in handle.capabilities.devices:
            missing.append(f"device:{handle.device}")
    except Exception:  # an unavailable or undescribable adapter, a bad declaration: its checks say so when run
        missing = []
    check = info["check"] if isinstance(info, dict) else None
    markers = list(info["markers"]) if isinstance(info, dict) else []
    return {"reason": "", "check": check, "missing": missing, "markers": markers}


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    """Remember the checks ``-k`` / ``-m`` / ``--deselect`` leave out, for the coverage (the end record's
    ``not_run``); the harness's own deselections (other families, ``--resume``) are not planned checks."""
    if not items:
        return
    state = find_state(items[0].config)
    if state is not None:
        state.deselected.update(it.nodeid for it in items)


def _dataset_id(item: pytest.Item) -> str | None:
    """The id of the metric dataset an item is parametrized with (``--dataset all``), else None."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "metric_data" not in callspec.params:
        return None
    return str(callspec.params["metric_data"]).partition("=")[0]


def _single_run_dataset(config: pytest.Config) -> str | None:
    """The study dataset (one of ``registry.KEYS``) that a run without ``--dataset all`` runs its metric checks
    on: the default Yoochoose 100k slice (or its stand-in) is ``yoochoose``; a named key or a prepared folder of
    one is that key; None for anything else (a plain folder, an unparsable option)."""
    from gru4rec_conformance.datasets.sessions.registry import KEYS, parse_selection

    try:
        selection = parse_selection(config.getoption("conformance_dataset", None))
    except (ValueError, OSError):
        return None
    if len(selection) != 1:
        return None
    name = selection[0][0]
    key = "yoochoose" if name in ("yoochoose_100k", "yoochoose_100k_standin") else name
    return key if key in KEYS else None


def with_dataset_param(nodeid: str, dataset_id: str) -> str:
    """``nodeid`` with the metric dataset put first among its parameters, as ``--dataset all`` names it
    (``t[cross-entropy]`` → ``t[yoochoose-cross-entropy]``, ``t`` → ``t[yoochoose]``)."""
    head, bracket, params = nodeid.partition("[")
    return f"{head}[{dataset_id}-{params}" if bracket else f"{head}[{dataset_id}]"


def _names_unselected_dataset(pattern: str, selected: set[str]) -> bool:
    """Whether an xfail pattern names one of the study datasets in its parameters (``test_mc*[rees46-bpr-max*]``)
    that this run did not parametrize the metric checks with (``--dataset``)."""
    from gru4rec_conformance.datasets.sessions.registry import KEYS

    params = (pattern.partition("::")[2] if "::" in pattern else pattern).partition("[")[2]
    tokens = set(re.split(r"[-\[\]*?]", params))
    return any(key in tokens and key not in selected for key in KEYS)


def _unmatched_check_entry(pattern: str, items: list[pytest.Item], check_forms: dict[pytest.Item, tuple[str, ...]],
                           roots: list[Path], full_files: set[str]) -> str | None:  # fmt: skip
    """Why a check-id entry that matched nothing is an error, or None when it is out of this run's scope.

    It is an error when the check was collected (the parameter names none of its tests) or when every check file
    of the implementation's family folders was collected in full (no check of the suite has that id); otherwise
    the check may live in a file this run did not collect."""
    head = pattern.partition("[")[0]
    if any(pattern_matches(head, *forms) for forms in check_forms.values()):
        return "matches no collected test of its check (a parameter no test has)"
    folders: dict[str, set[Path]] = collections.defaultdict(set)  # folder -> the roots its collected files are in
    for it in items:
        path = Path(str(it.path)).resolve()
        root = next((r for r in roots if path.is_relative_to(r)), None)
        if root is not None:
            folders[posixpath.dirname(path.relative_to(root).as_posix())].add(root)
    for folder, where in folders.items():
        on_disk = {p.relative_to(r).as_posix() for r in where for p in (r / folder).glob("test_*.py")}
        if not on_disk <= full_files:
            return None
    return f"names no check of the collected folders {sorted(folders)} (a check id no test is marked with)"


def apply_xfails(state: State, session: pytest.Session, handle: ImplHandle, items: list[pytest.Item],
                 full_files: set[str]) -> list[pytest.Item]:  # fmt: skip
    """Mark the ``items`` of one implementation that its xfail file lists (strict xfail, or skip with
    ``--xfail-mark skip``); return failing items for entries that match no collected check of a fully
    collected file or name no file at all, and for any entry of a reference (which must have none).

    Raises ``pytest.UsageError`` for an unreadable xfail file, or a missing one that was named explicitly.
    """
    spec = handle.spec
    path = xfail_file_for(state, spec)
    if not path.is_file():
        if spec.name in state.extra_xfail_files or getattr(spec.cls, "xfails_file", None):
            raise pytest.UsageError(f"xfail file of {spec.name} not found: {path}")
        return []
    try:
        xf = load_xfail_file(path, expected_impl=spec.name)
    except XfailRegistryError as exc:
        raise pytest.UsageError(str(exc)) from None
    errors: list[pytest.Item] = []
    roots = check_roots(state.config)
    rel = path.as_posix()
    for root in roots:
        try:
            rel = path.resolve().relative_to(root).as_posix()
            break
        except ValueError:
            continue

    def error_item(entry_index: int, message: str) -> pytest.Item:
        name = f"entry-{entry_index}[{spec.name}]"
        return XfailRegistryItem.from_parent(session, name=name, nodeid=f"{rel}::{name}", path=path,
                                             message=message, impl=spec.name, family=spec.family)  # fmt: skip

    if spec.role == "reference" and xf.entries:
        return [error_item(e.index, f"{rel}: {e.describe()}: the reference must have zero xfail entries "
                                    f"(a reference failure is a bug to fix, not to declare)") for e in xf.entries]  # fmt: skip
    context = when_context(handle.device, handle.version, ("numpy", "pandas", "torch", "tensorflow", "transformers"))
    impl_id = spec.name
    selected_datasets: set[str] = set()
    # what an entry may match: without the implementation, as collected, without the dataset too
    ids: dict[pytest.Item, tuple[str, ...]] = {}
    for it in items:
        full, dataset = check_id(it), _dataset_id(it)
        own = strip_impl_param(full, impl_id)
        ids[it] = (own, full, strip_dataset_param(own, dataset or ""))
        if dataset:
            selected_datasets.add(dataset)
    # A run on one dataset leaves the metric checks' ids without it; an entry naming that dataset
    # (`test_mc1[yoochoose-bpr-max]`, a gap seen there only) must still hold, as it does under --dataset all.
    single = None if selected_datasets else _single_run_dataset(state.config)
    if single is not None:
        selected_datasets.add(single)
        for it in items:
            if "metric_data" in getattr(it, "fixturenames", ()):
                ids[it] = (*ids[it], with_dataset_param(ids[it][0], single))
    # what a check-id entry (`SR-3`, `SR-3[bpr-max]`) may match: the same ids, the test's name replaced by its check id
    check_forms = {it: check_key_forms(marked_check_id(it), ids[it]) for it in items}
    for entry in xf.entries:
        by_check = is_check_id_pattern(entry.pattern)
        matched = [it for it in items if pattern_matches(entry.pattern, *(check_forms[it] if by_check else ids[it]))]
        if not matched:
            if _names_unselected_dataset(entry.pattern, selected_datasets):
                continue  # an entry for one metric dataset, in a run that did not select it (out of scope)
            if by_check:
                problem = _unmatched_check_entry(entry.pattern, items, check_forms, roots, full_files)
                if problem:
                    errors.append(error_item(entry.index, f"{rel}: {entry.describe()} {problem}; fix or remove it"))
                continue
            file_part = pattern_file_part(entry.pattern)
            on_disk = [(r, f) for r in roots for f in (files_matching(r, file_part) if file_part else [])]
            in_scope = [f for r, f in on_disk if f.relative_to(r).as_posix() in full_files]
            if not on_disk:
                errors.append(error_item(entry.index, f"{rel}: {entry.describe()} names no existing test file "
                                                      f"({file_part!r}); fix or remove the entry"))  # fmt: skip
            elif in_scope:
                errors.append(error_item(entry.index, f"{rel}: {entry.describe()} matches no collected check of "
                                                      f"{spec.name}; fix or remove the entry"))  # fmt: skip
            continue
        if not entry.active(context):
            continue
        reason = xfail_label(entry.to_dict())
        for it in matched:
            record = {**entry.to_dict(), "file": rel}
            if state.options.xfail_mark == "skip":
                it.user_properties.append((PROP_XFAIL, record))
                it.add_marker(pytest.mark.skip(reason=f"xfail registry: {reason}"))
            else:  # the entry that held the failure goes on the report (running._settle_xfail)
                it.stash.setdefault(XFAIL_ENTRIES_KEY, []).append(record)
                it.add_marker(pytest.mark.xfail(reason=reason, strict=True))
    return errors
