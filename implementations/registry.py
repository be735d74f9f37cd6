"""Registry of adapters: registration, discovery, selection by name or import path.

How an adapter registers (implementations/README.md, "Registering"):

- a module in ``implementations/`` (or a sub-package such as ``implementations/mutants/``) decorates its
  class with :func:`register`; :func:`discover` imports every such module once;
- a root ``conftest.py`` or a pytest plugin implements the hook
  ``pytest_conformance_register_adapters(registry)`` and calls ``registry.add(cls, name=...)``;
- an outside adapter needs no registration at all: ``--impl some.module:AdapterClass``.

Adapter modules must import cheaply (no third-party implementation imports at module level): the registry
imports all of them to list the available names.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import pkgutil
import re
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, overload

from gru4rec_conformance.implementations.base import KNOWN_FAMILY_NAMES, ROLES, AdapterBase, families

__all__ = ["AdapterSpec", "Registry", "RegistryError", "register", "declare", "discover", "default_registry"]

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.:@-]*$")
_SKIP_MODULES = {
    "gru4rec_conformance.implementations.base",
    "gru4rec_conformance.implementations.registry",
    "gru4rec_conformance.implementations.template",
}


class RegistryError(ValueError):
    """A registration is invalid, or a selection names no known implementation."""


@dataclasses.dataclass(frozen=True)
class AdapterSpec:
    """One selectable implementation: an adapter class plus the keyword arguments of its variant.

    Attributes:
        name: selection name (``--impl name``), unique within its family.
        family: the adapter's family.
        cls: the adapter class.
        init_kwargs: keyword arguments passed to ``cls(device=..., **init_kwargs)``; JSON-able, because a
            worker process rebuilds the adapter from ``ref`` and these.
        source: ``"registry"``, ``"plugin"`` or ``"import path"``.
    """

    name: str
    family: str
    cls: type[AdapterBase]
    init_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    source: str = "registry"

    @property
    def role(self) -> str:
        return self.cls.role

    @property
    def isolated(self) -> bool:
        return bool(self.cls.isolated)

    @property
    def ref(self) -> str:
        """``module:QualName`` of the class (how a worker process imports it)."""
        return f"{self.cls.__module__}:{self.cls.__qualname__}"

    @property
    def label(self) -> str:
        return f"{self.name} [{self.family}]"

    def create(self, device: str = "cpu") -> AdapterBase:
        """A fresh, unbuilt adapter instance in this process."""
        return self.cls(device=device, **dict(self.init_kwargs))


def _validate_class(cls: Any, where: str) -> None:
    if not isinstance(cls, type) or not issubclass(cls, AdapterBase):
        raise RegistryError(f"{where}: {cls!r} is not a subclass of implementations.base.AdapterBase")
    if not cls.family:
        raise RegistryError(f"{where}: {cls.__qualname__} declares no family (class attribute 'family')")
    known = set(KNOWN_FAMILY_NAMES) | set(families())
    if cls.family not in known:
        raise RegistryError(f"{where}: {cls.__qualname__} has unknown family {cls.family!r}; known: {sorted(known)}")
    if cls.role not in ROLES:
        raise RegistryError(f"{where}: {cls.__qualname__} has role {cls.role!r}; allowed: {list(ROLES)}")
    missing = [m for m in cls.REQUIRED if getattr(getattr(cls, m, None), "__isabstractmethod__", False)]
    if missing:
        raise RegistryError(f"{where}: {cls.__qualname__} does not implement required method(s) {missing}")


class Registry:
    """A set of :class:`AdapterSpec`, keyed by (family, name)."""

    def __init__(self, specs: Iterable[AdapterSpec] = (), problems: Iterable[str] = ()) -> None:
        self._specs: dict[tuple[str, str], AdapterSpec] = {}
        self.problems: list[str] = list(problems)
        for spec in specs:
            self._put(spec)

    def _put(self, spec: AdapterSpec) -> None:
        key = (spec.family, spec.name)
        old = self._specs.get(key)
        if old is not None and (old.cls is not spec.cls or dict(old.init_kwargs) != dict(spec.init_kwargs)):
            raise RegistryError(
                f"implementation name {spec.name!r} (family {spec.family}) registered twice: {old.ref} and {spec.ref}"
            )
        self._specs[key] = spec

    def add(
        self, cls: type[AdapterBase], name: str | None = None, *, source: str = "plugin", **init_kwargs: Any
    ) -> AdapterSpec:
        """Register ``cls`` under ``name`` (default ``cls.name``) with variant keyword arguments.

        Raises:
            RegistryError: invalid class or name, or a clash with a different registration.
        """
        where = f"register({getattr(cls, '__qualname__', cls)!r})"
        _validate_class(cls, where)
        name = name or cls.name
        if not name or not _NAME_RE.match(name):
            raise RegistryError(f"{where}: invalid implementation name {name!r} (use [a-z0-9_.:@-], lower case)")
        spec = AdapterSpec(name=name, family=cls.family, cls=cls, init_kwargs=dict(init_kwargs), source=source)
        self._put(spec)
        return spec

    def clear(self) -> None:
        """Forget every registration (a plugin that wants only its own adapters, e.g. the harness's tests)."""
        self._specs.clear()
        self.problems.clear()

    def copy(self) -> Registry:
        return Registry(self._specs.values(), self.problems)

    # -- queries ---------------------------------------------------------------------------------------
    def specs(self, family: str | None = None) -> list[AdapterSpec]:
        return sorted(
            (s for s in self._specs.values() if family is None or s.family == family),
            key=lambda s: (s.family, s.role != "reference", s.role == "mutant", s.name),
        )

    def names(self, family: str | None = None) -> list[str]:
        """Registered names (reference first, mutants last) of ``family`` or of all families."""
        return [s.name for s in self.specs(family)]

    def families(self) -> list[str]:
        return sorted({s.family for s in self._specs.values()} | set(families()) | set(KNOWN_FAMILY_NAMES))

    def get(self, name: str, family: str | None = None) -> list[AdapterSpec]:
        """All specs named ``name`` (one per family that has it), optionally of one family."""
        return [s for s in self.specs(family) if s.name == name]

    def describe(self) -> str:
        """Multi-line listing of the registered implementations per family (for usage errors)."""
        lines = ["Registered implementations:"]
        for fam in self.families():
            specs = self.specs(fam)
            main = [s.name for s in specs if s.role != "mutant"]
            mutants = [s.name for s in specs if s.role == "mutant"]
            lines.append(f"  {fam:<10} {', '.join(main) if main else '(none registered yet)'}")
            if mutants:
                lines.append(f"  {'':<10} mutants: {', '.join(mutants)}")
        lines.append("  'all' selects every reference and implementation adapter (not mutants).")
        lines.append("  An outside adapter is loaded by import path: --impl some.module:AdapterClass")
        if self.problems:
            lines.append("Adapter modules that failed to import:")
            lines.extend(f"  {p}" for p in self.problems)
        return "\n".join(lines)

    def describe_short(self) -> str:
        """Listing for a mistyped ``--impl``: the reference and implementations per family, the mutants only
        counted (their names are in docs/checks.md and in :meth:`describe`, shown without ``--impl``)."""
        lines = ["Registered implementations:"]
        n_mutants = 0
        for fam in self.families():
            specs = self.specs(fam)
            main = [s.name for s in specs if s.role != "mutant"]
            n_mutants += len(specs) - len(main)
            if main:
                lines.append(f"  {fam:<10} {', '.join(main)}")
        if n_mutants:
            lines.append(f"  and {n_mutants} mutants (--impl mutant:NAME; all names: the same command without --impl)")
        lines.append("  An outside adapter is loaded by import path: --impl some.module:AdapterClass")
        if self.problems:
            lines.append("Adapter modules that failed to import:")
            lines.extend(f"  {p}" for p in self.problems)
        return "\n".join(lines)

    def unknown_name(self, token: str) -> str:
        """The error text of ``--impl token`` naming nothing registered: one line with the closest names
        (``difflib``), then :meth:`describe_short`."""
        close = difflib.get_close_matches(token, sorted({s.name for s in self.specs()} | {"all"}), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"--impl {token!r} is not a registered implementation{hint}\n{self.describe_short()}"

    # -- selection -------------------------------------------------------------------------------------
    def resolve(self, selection: Iterable[str]) -> list[AdapterSpec]:
        """Specs selected by ``--impl`` values: names, ``all``, or ``module:Class`` import paths.

        A registered name wins over an import path (variant names such as ``gru4rec_pytorch:inference_fix``
        contain a colon). Order follows the selection; duplicates are dropped.

        Raises:
            RegistryError: listing the registered implementations, for an unknown name or a bad import path.
        """
        out: list[AdapterSpec] = []
        for raw in selection:
            token = raw.strip()
            if not token:
                continue
            if token == "all":
                found = [s for s in self.specs() if s.role in ("reference", "implementation")]
            elif self.get(token):
                found = self.get(token)
            elif ":" in token:
                found = [load_import_path(token)]
            else:
                raise RegistryError(self.unknown_name(token))
            for spec in found:
                if all((s.family, s.name) != (spec.family, spec.name) for s in out):
                    out.append(spec)
        return out


def import_failure(module_name: str, exc: BaseException) -> str:
    """The line for an adapter module that failed to import: ``cannot import module 'm': Type: message``, plus,
    when the module's own top-level package is what Python cannot find (not one of its dependencies), how to put
    it on the path (``PYTHONPATH=.`` from the repository's root), the usual slip of a first run."""
    text = f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
    top = module_name.split(".")[0]
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == top:
        text += (f" (is {top!r} installed? From your repository's root, PYTHONPATH=. makes its packages "
                 "importable: PYTHONPATH=. pytest ...)")  # fmt: skip
    return text


def protocol_class_problem(path: str, obj: Any) -> str | None:
    """Why ``module:Name`` is not an adapter when ``Name`` is one of the suite's protocol classes (``AdapterBase``
    or a family's base, such as ``implementations.base.Adapter``) that the module merely imports: the line names
    the module's own adapter classes to use instead. None for any other object."""
    protocols = {AdapterBase, *(f.adapter_base for f in families().values())}
    if not (isinstance(obj, type) and obj in protocols):
        return None
    module_name = path.partition(":")[0]
    module = importlib.import_module(module_name)  # already imported by the caller: no new code runs
    own = sorted(n for n, v in vars(module).items() if isinstance(v, type) and issubclass(v, AdapterBase)
                 and v not in protocols and v.__module__ == module_name)  # fmt: skip
    use = ", ".join(f"{module_name}:{n}" for n in own) or f"{module_name}:<your subclass of {obj.__name__}>"
    return (f"{path} is the suite's protocol class {obj.__module__}.{obj.__qualname__}, which the module "
            f"imports; name your own adapter class: --impl {use}")  # fmt: skip


def load_import_path(path: str) -> AdapterSpec:
    """Load ``some.module:AdapterClass`` (``Outer.Inner`` allowed after the colon) as an outside adapter.

    Raises:
        RegistryError: naming the path, when the module cannot be imported, the attribute is missing or
            it is not an adapter class.
    """
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname:
        raise RegistryError(f"--impl {path!r}: an import path has the form some.module:AdapterClass")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the module's own error, reported with its type
        raise RegistryError(f"--impl {path!r}: {import_failure(module_name, exc)}") from exc
    obj: Any = module
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise RegistryError(f"--impl {path!r}: module {module_name!r} has no attribute {qualname!r}")
        obj = getattr(obj, part)
    problem = protocol_class_problem(path, obj)
    if problem:
        raise RegistryError(f"--impl {path!r}: {problem}")
    _validate_class(obj, f"--impl {path!r}")
    name = obj.name or path
    if not _NAME_RE.match(name):
        raise RegistryError(f"--impl {path!r}: invalid adapter name {name!r} (class attribute 'name')")
    return AdapterSpec(name=name, family=obj.family, cls=obj, source="import path")


# -- the default registry, filled by @register at import of the adapter modules ---------------------------
_DEFAULT = Registry()
_DISCOVERED = False


_A = TypeVar("_A", bound=type[AdapterBase])


@overload
def register(cls: _A, *, name: str | None = None, **init_kwargs: Any) -> _A: ...
@overload
def register(cls: None = None, *, name: str | None = None, **init_kwargs: Any) -> Callable[[_A], _A]: ...


def register(
    cls: type[AdapterBase] | None = None, *, name: str | None = None, **init_kwargs: Any
) -> Callable[[type[AdapterBase]], type[AdapterBase]] | type[AdapterBase]:
    """Class decorator: ``@register`` or ``@register(name="x:level", level="inference_fix")``.

    Registers in the default registry (what ``--impl`` sees); returns the class unchanged.
    """

    def deco(c: type[AdapterBase]) -> type[AdapterBase]:
        _DEFAULT.add(c, name=name, source="registry", **init_kwargs)
        return c

    return deco(cls) if cls is not None else deco


def declare(name: str, **attrs: Any) -> Callable[[_A], _A]:
    """Class decorator: set the class's ``name`` and each attribute of ``attrs`` that is not None (None leaves the
    base class's value), then :func:`register` it under that name; returns the class itself. The common part of
    the mutants' one-line declarations (``mutants.mutant``, ``finetuner.mutants._common.mutant``)."""

    def deco(cls: _A) -> _A:
        cls.name = name
        for attr, value in attrs.items():
            if value is not None:
                setattr(cls, attr, value)
        return register(cls)

    return deco


def discover(package: str = "gru4rec_conformance.implementations") -> list[str]:
    """Import every adapter module under ``package`` once; returns the import problems (one line each).

    Skips ``implementations.base``, ``.registry``, ``.template`` and private (``_``) modules. A module that fails to import
    is reported, not raised, so one broken adapter does not hide the others.
    """
    global _DISCOVERED
    if _DISCOVERED:
        return list(_DEFAULT.problems)
    pkg = importlib.import_module(package)
    problems: list[str] = []

    def onerror(name: str) -> None:
        problems.append(f"{name}: {traceback.format_exc(limit=0).strip().splitlines()[-1]}")

    for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}.", onerror=onerror):
        leaf = info.name.rsplit(".", 1)[-1]
        if leaf.startswith("_") or info.name in _SKIP_MODULES or leaf in ("tests", "conftest"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # reported per module, see docstring
            problems.append(f"{info.name}: {type(exc).__name__}: {exc}")
    _DEFAULT.problems = problems
    _DISCOVERED = True
    return problems


def default_registry() -> Registry:
    """A copy of the default registry after :func:`discover` (callers may add to the copy)."""
    discover()
    return _DEFAULT.copy()
