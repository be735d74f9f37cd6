"""The check catalogue ``docs/checks.md``, generated from the checks themselves.

``python -m gru4rec_conformance.reports checks [--out docs/checks.md] [--check]`` imports the check modules of
each family (``conformance/<family>/test_*.py``) and reads, for every check function, its
``@pytest.mark.check(ID, kind=...)`` marker, the capability markers (``feature``, ``hook``, ``hparam`` and the
family's prefixed markers such as ``loss`` or ``embedding``; ``parametrize`` cases with marks of their own), the
run markers (``slow``, ``gpu``, ``metric``) and the first paragraph of its docstring. Kind titles come from the
family's :class:`~gru4rec_conformance.implementations.base.FamilySpec`; the mutants that prove a check bites
come from the mutant classes: ``caught_by`` of the GRU4Rec mutants (``implementations/mutants/``), the defect row
of the fine-tuner mutants (``implementations/finetuner/mutants/``: row ``N`` must be caught by check ``FT-N``, as
``tests/finetuner/test_meta_mutants.py`` proves).

A family whose modules are not installed (``FamilySpec.requires``; the fine-tuner needs transformers) is left out
of the text, which says so. The output is deterministic: families in :data:`FAMILIES` order, kinds in the family
spec's order, check ids in natural order (``SR-2`` before ``SR-10``), functions by file and name, everything else
sorted. Nothing is run: importing a check module executes only its module-level code.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import importlib
import inspect
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gru4rec_conformance import CHECKOUT_ROOT
from gru4rec_conformance.fileio import atomic_write_text

__all__ = ["COMMAND", "DEFAULT_OUT", "FAMILIES", "CheckFunction", "Mutant", "collect", "render", "main"]

#: The command that writes the catalogue (named in its header).
COMMAND = "python -m gru4rec_conformance.reports checks"
#: Families in catalogue order; each has ``implementations/.../base.py`` with its FamilySpec.
FAMILIES = ("gru4rec", "finetuner")
_FAMILY_BASES = {
    "gru4rec": "gru4rec_conformance.implementations.base",
    "finetuner": "gru4rec_conformance.implementations.finetuner.base",
}
#: ``docs/checks.md`` of the checkout (relative to the working folder for an installed wheel).
DEFAULT_OUT = (CHECKOUT_ROOT / "docs" / "checks.md") if CHECKOUT_ROOT is not None else Path("docs") / "checks.md"
_RUN_MARKERS = ("slow", "gpu", "metric")


@dataclasses.dataclass(frozen=True)
class Case:
    """One ``parametrize`` case that carries marks: its pytest id, the features and run markers it adds."""

    id: str
    features: tuple[str, ...]
    markers: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class CheckFunction:
    """One check function as the catalogue shows it.

    Attributes:
        family, check_id, kind: from ``@pytest.mark.check(ID, kind=KIND)``.
        where: ``conformance/<family>/<file>.py::<function>`` (the form xfail files use, without case ids).
        proves: the first paragraph of the docstring, on one line ("" without a docstring).
        features: feature names it needs (``hook:`` ones included), sorted.
        markers: run markers (``slow``, ``gpu``, ``metric``), sorted.
        options: other ``check`` arguments (``card``, ``timeout``) as ``name=value``, sorted.
        cases: ``parametrize`` cases that carry marks of their own, in declaration order.
        diagnosis: the docstring paragraph that starts with ``Diagnosis:``, on one line; "" without one (for a
            check that explains its failure in prose and does not use the diagnosis layer).
        causes: the cause table the function declares with ``@diagnosis.causes(...)``
            (conformance/_harness/diagnosis.py): ``(cause, probe that decides it)`` pairs in order; the same rows
            the check's failure message is built from.
    """

    family: str
    check_id: str
    kind: str
    where: str
    proves: str
    features: tuple[str, ...]
    markers: tuple[str, ...]
    options: tuple[str, ...]
    cases: tuple[Case, ...]
    diagnosis: str = ""
    causes: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Mutant:
    """A mutant as the catalogue shows it: name, kind, the defect it models, the checks that must fail on it."""

    family: str
    name: str
    kind: str
    defect: str
    summary: str
    caught_by: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Family:
    """One family's part of the catalogue; ``left_out`` says why its checks are missing (then all else empty)."""

    name: str
    description: str
    kinds: dict[str, str]
    checks: tuple[CheckFunction, ...]
    mutants: tuple[Mutant, ...]
    left_out: str | None = None


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders the numbers inside ids numerically: ``SR-2`` < ``SR-10``, ``FT-9`` < ``FT-10``."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p)


def _marks(obj: Any) -> list[Any]:
    """The ``Mark`` objects a function, a module or a ``pytest.param`` carries (MarkDecorators unwrapped)."""
    raw = getattr(obj, "pytestmark", None)
    if raw is None:
        raw = getattr(obj, "marks", ())
    if not isinstance(raw, (list, tuple)):
        raw = [raw]
    return [getattr(m, "mark", m) for m in raw]


def _features(marks: Iterable[Any], prefixes: dict[str, str]) -> list[str]:
    """Feature names as the harness derives them from markers (conformance/_harness, ``_static_info``)."""
    out: list[str] = []
    for m in marks:
        if m.name == "feature":
            out += [str(a) for a in m.args]
        elif m.name in ("hook", "hparam"):
            out += [f"{m.name}:{a}" for a in m.args]
        elif m.name in prefixes:
            out += [f"{prefixes[m.name]}:{a}" for a in m.args]
    return out


def _idval(value: Any, argname: str, index: int) -> str:
    """pytest's automatic id of one parameter value (strings, numbers, None, enums, classes, functions)."""
    if isinstance(value, str) and value:
        return value
    if value is None or isinstance(value, (bool, int, float, complex)):
        return str(value)
    if isinstance(value, enum.Enum):
        return str(value)
    if isinstance(getattr(value, "__name__", None), str) and (inspect.isclass(value) or inspect.isfunction(value)):
        return str(value.__name__)
    return f"{argname}{index}"


def _cases(mark: Any, prefixes: dict[str, str]) -> list[Case]:
    """The cases of one ``parametrize`` mark that carry marks (features or run markers) of their own."""
    argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
    names = [n.strip() for n in argnames.split(",")] if isinstance(argnames, str) else [str(n) for n in argnames]
    values = mark.args[1] if len(mark.args) > 1 else mark.kwargs.get("argvalues", ())
    ids = mark.kwargs.get("ids")
    out = []
    for i, value in enumerate(values):
        own = _marks(value) if hasattr(value, "marks") else []
        features = sorted(set(_features(own, prefixes)))
        markers = sorted({m.name for m in own} & set(_RUN_MARKERS))
        if not features and not markers:
            continue
        vals = (
            value.values
            if hasattr(value, "values") and hasattr(value, "marks")
            else (value if len(names) > 1 else (value,))
        )
        case_id = getattr(value, "id", None)
        if case_id is None and isinstance(ids, (list, tuple)) and i < len(ids) and ids[i] is not None:
            case_id = str(ids[i])
        if case_id is None:
            case_id = "-".join(_idval(v, n, i) for n, v in zip(names, vals))
        out.append(Case(case_id, tuple(features), tuple(markers)))
    return out


def _first_paragraph(doc: str | None) -> str:
    text = inspect.cleandoc(doc or "").strip()
    return " ".join(text.split("\n\n")[0].split()) if text else ""


def _diagnosis_paragraph(doc: str | None) -> str:
    text = inspect.cleandoc(doc or "")
    para = next((p for p in text.split("\n\n") if p.lstrip().startswith("Diagnosis:")), "")
    return " ".join(para.split()[1:]) if para else ""


_USES_DIAGNOSIS = re.compile(r"\bdiagnosis\.(fail|diagnose)\(")


def _cause_table(func: Any, where: str) -> tuple[tuple[str, str], ...]:
    """The ``(cause, probe)`` rows of the function's ``@diagnosis.causes`` table. Raises ``ValueError`` for a
    function that calls ``diagnosis.fail``/``diagnosis.diagnose`` without declaring its table (the catalogue
    would otherwise not list the causes its messages can name)."""
    # the attribute diagnosis.causes sets (TABLE_ATTR), read without importing the harness into reports
    rows = tuple((str(c.name), str(c.probe)) for c in getattr(func, "diagnosis_causes", ()))
    if not rows:
        try:
            source = inspect.getsource(func)
        except (OSError, TypeError):
            source = ""
        if _USES_DIAGNOSIS.search(source):
            raise ValueError(
                f"{where}: calls diagnosis.fail/diagnose but declares no cause table; decorate it with "
                "@diagnosis.causes(Candidate(...), ...) (conformance/_harness/diagnosis.py)"
            )
    return rows


def _check_functions(family: str, spec: Any) -> list[CheckFunction]:
    package = importlib.import_module(f"gru4rec_conformance.conformance.{family}")
    folder = Path(next(iter(package.__path__)))
    prefixes = dict(spec.marker_prefixes)
    out = []
    for path in sorted(folder.glob("test_*.py")):
        module = importlib.import_module(f"{package.__name__}.{path.stem}")
        module_marks = _marks(module)
        for name, func in sorted(vars(module).items()):
            if not (name.startswith("test") and inspect.isfunction(func)) or func.__module__ != module.__name__:
                continue
            marks = _marks(func) + module_marks
            check = next((m for m in marks if m.name == "check"), None)
            where = f"conformance/{family}/{path.name}::{name}"
            if check is None:
                raise ValueError(f"{where}: a check function without @pytest.mark.check(ID, kind=...)")
            check_id = check.args[0] if check.args else check.kwargs.get("id")
            kind = check.kwargs.get("kind")
            if not check_id or kind not in spec.kinds:
                raise ValueError(
                    f"{where}: @check({check_id!r}, kind={kind!r}): needs an id and one of the kinds {list(spec.kinds)}"
                )
            cases = [c for m in marks if m.name == "parametrize" for c in _cases(m, prefixes)]
            options = sorted(f"{k}={v}" for k, v in check.kwargs.items() if k not in ("id", "kind") and v is not None)
            out.append(
                CheckFunction(
                    family=family,
                    check_id=str(check_id),
                    kind=str(kind),
                    where=where,
                    proves=_first_paragraph(func.__doc__),
                    features=tuple(sorted(set(_features(marks, prefixes)))),
                    markers=tuple(sorted({m.name for m in marks} & set(_RUN_MARKERS))),
                    options=tuple(options),
                    cases=tuple(cases),
                    diagnosis=_diagnosis_paragraph(func.__doc__),
                    causes=_cause_table(func, where),
                )
            )
    return out


def _mutants(family: str) -> list[Mutant]:
    if family == "gru4rec":
        from gru4rec_conformance.implementations.mutants import mutant_classes

        return [
            Mutant(family, c.name, c.kind, c.defect, _first_paragraph(c.__doc__), tuple(c.caught_by))
            for c in mutant_classes()
        ]
    if family == "finetuner":
        from gru4rec_conformance.implementations.finetuner.mutants import MUTANTS

        # a fine-tuner mutant declares its defect row N; the meta-test requires a check FT-N to catch it
        classes: list[Any] = list(MUTANTS.values())
        return [
            Mutant(
                family,
                c.name,
                c.kind,
                f"row {c.defect_row}",
                str(c.defect),
                tuple(getattr(c, "caught_by", None) or (f"FT-{c.defect_row}",)),
            )
            for c in classes
        ]
    return []


def collect(families: Sequence[str] = FAMILIES) -> list[Family]:
    """Import the families' check modules and mutants; one :class:`Family` per name, in the given order.

    A family whose ``FamilySpec.requires`` modules are missing is returned with ``left_out`` set (nothing of it is
    imported beyond its base module). Raises ``ValueError`` for a check function without a ``check`` marker, id
    or known kind, ``ImportError`` when a family's base module or a check module fails to import.
    """
    out = []
    for name in families:
        importlib.import_module(_FAMILY_BASES[name])
        from gru4rec_conformance.implementations.base import get_family

        spec = get_family(name)
        if spec is None:  # pragma: no cover - the base module registers it
            raise ImportError(f"{_FAMILY_BASES[name]} did not register family {name!r}")
        missing = spec.missing_modules()
        if missing:
            how = f"`pip install 'gru4rec-conformance[{spec.extra}]'`" if spec.extra else "install them"
            out.append(
                Family(
                    name,
                    spec.description,
                    dict(spec.kinds),
                    (),
                    (),
                    left_out=f"its check modules import {', '.join(missing)}, which "
                    f"{'is' if len(missing) == 1 else 'are'} not installed here ({how})",
                )
            )
            continue
        checks = sorted(
            _check_functions(name, spec),
            key=lambda c: (list(spec.kinds).index(c.kind), natural_key(c.check_id), c.where),
        )
        mutants = sorted(_mutants(name), key=lambda m: natural_key(m.name))
        out.append(Family(name, spec.description, dict(spec.kinds), tuple(checks), tuple(mutants)))
    return out


def _code(items: Iterable[str]) -> str:
    return ", ".join(f"`{x}`" for x in items)


def _needs(features: Sequence[str]) -> str:
    hooks = [f[len("hook:") :] for f in features if f.startswith("hook:")]
    other = [f for f in features if not f.startswith("hook:")]
    parts = ([f"hooks {_code(hooks)}"] if hooks else []) + ([f"features {_code(other)}"] if other else [])
    return "; ".join(parts)


def _diagnosis_lines(c: CheckFunction) -> list[str]:
    """The catalogue lines of a check's diagnosis: its cause table (one sub-item per cause, with the probe that
    decides it), else its ``Diagnosis:`` paragraph."""
    if len(c.causes) == 1:
        ((name, probe),) = c.causes
        return [f"  - diagnosis: one cause, {name} ({'probe: ' + probe if probe else 'no probe: the finding is it'})"]
    if c.causes:
        return [
            f"  - diagnosis: {len(c.causes)} candidate causes, each decided by its probe (run only after a failure):",
            *(f"    - {name}; probe: {probe or 'none decides it'}" for name, probe in c.causes),
        ]
    if c.diagnosis:
        return [f"  - diagnosis (candidate causes, probes run after a failure): {c.diagnosis}"]
    return []


def _render_family(fam: Family) -> list[str]:
    lines = [f"## Family `{fam.name}`", ""]
    if fam.description:
        lines += [f"{fam.description}.", ""]
    if fam.left_out is not None:
        return lines + [f"**Left out of this file**: {fam.left_out}. Run `{COMMAND}` where they are installed.", ""]
    ids = {c.check_id for c in fam.checks}
    caught: dict[str, list[str]] = {}
    for m in fam.mutants:
        for cid in m.caught_by:
            caught.setdefault(cid, []).append(m.name)
    lines += [
        f"{len(ids)} checks ({len(fam.checks)} check functions) in {len(fam.kinds)} kinds; {len(fam.mutants)} mutants.",
        "",
    ]
    for kind, title in fam.kinds.items():
        funcs = [c for c in fam.checks if c.kind == kind]
        if not funcs:
            continue
        lines += [f"### {kind}: {title}", ""]
        for cid in sorted({c.check_id for c in funcs}, key=natural_key):
            lines += [
                f"#### {cid}",
                "",
                f"Kind {kind} ({title}). Mutants that must fail it: "
                f"{_code(sorted(caught.get(cid, []), key=natural_key)) or 'none'}.",
                "",
            ]
            for c in (c for c in funcs if c.check_id == cid):
                lines.append(f"- `{c.where}`: {c.proves or '(no docstring)'}")
                needs = _needs(c.features)
                if needs:
                    lines.append(f"  - needs: {needs}")
                lines += _diagnosis_lines(c)
                for case in c.cases:
                    extra = "; ".join(x for x in (_needs(case.features), _code(case.markers)) if x)
                    lines.append(f"  - case `{case.id}`: {extra}")
                if c.markers:
                    lines.append(f"  - markers: {_code(c.markers)}")
                if c.options:
                    lines.append(f"  - check options: {_code(c.options)}")
            lines.append("")
    if fam.mutants:
        lines += [
            f"### Mutants of `{fam.name}`",
            "",
            "| mutant | kind | defect | what is wrong | must fail |",
            "|---|---|---|---|---|",
        ]
        for m in fam.mutants:
            defect, summary = (x.replace("|", "\\|") for x in (m.defect, m.summary))
            lines.append(
                f"| `{m.name}` | {m.kind} | {defect} | {summary} | {', '.join(sorted(m.caught_by, key=natural_key))} |"
            )
        lines.append("")
        unknown = sorted({cid for m in fam.mutants for cid in m.caught_by} - ids, key=natural_key)
        if unknown:
            lines += [f"Named by a mutant but no check has this id: {', '.join(unknown)}.", ""]
    return lines


def render(families: Sequence[Family]) -> str:
    """The Markdown text of the catalogue (ends with one newline)."""
    left = [f.name for f in families if f.left_out is not None]
    lines = [
        "# Check catalogue",
        "",
        f"<!-- Generated by `{COMMAND}` from the check modules; do not edit by hand. "
        f"`{COMMAND} --check` exits 1 when this file is out of date. -->",
        "",
        "Generated from the checks themselves: every check function of `conformance/<family>/test_*.py` with "
        "its `@pytest.mark.check(ID, kind=...)` marker, the first paragraph of its docstring (what it proves), "
        "the features and adapter hooks its markers ask for (a check whose needs an implementation does not "
        "declare is skipped as unsupported), its run markers (`slow`, `gpu`, `metric`), and the mutants "
        "(the reference with one defect switched on) that must fail it, which is how the suite shows that a "
        "check bites. A check id may have several functions.",
        "",
    ]
    if left:
        lines += [f"Families left out of this file: {', '.join(left)} (see their sections).", ""]
    for fam in families:
        lines += _render_family(fam)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(out: Path = DEFAULT_OUT, check: bool = False) -> int:
    """Write the catalogue to ``out`` (atomically); with ``check``, write nothing and return 1 when ``out`` is
    missing or differs from the generated text (a short diff goes to stderr), 0 when it is up to date."""
    text = render(collect())
    out = Path(out)
    if not check:
        atomic_write_text(out, text)
        print(f"wrote {out}")
        return 0
    try:
        old = out.read_text(encoding="utf-8")
    except FileNotFoundError:
        print(f"{out}: missing; write it with `{COMMAND}`", file=sys.stderr)
        return 1
    if old == text:
        print(f"{out}: up to date")
        return 0
    diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(), str(out), "generated", lineterm="", n=1))
    print(f"{out}: out of date; regenerate it with `{COMMAND}`\n" + "\n".join(diff[:60]), file=sys.stderr)
    return 1
