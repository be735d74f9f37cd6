"""The implementation under test as checks see it: the ``impl`` fixture's value.

:class:`ImplHandle` (one per selected implementation and session) knows the adapter spec, the device and
seeds, and the *declaration* (capabilities, version, implemented hooks), asked once. :class:`Impl` is the
per-check view: a factory of fresh adapters (``impl.build(seed=..., **hparams)``), in this process or in a
worker process, closed automatically when the check ends.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from gru4rec_conformance import import_root
from gru4rec_conformance.conformance._harness.isolation import (
    IsolationSettings,
    WorkerCallError,
    WorkerError,
    WorkerProxy,
)
from gru4rec_conformance.conformance._harness.validation import checked
from gru4rec_conformance.implementations.base import (
    AdapterBase,
    BaseCapabilities,
    CapabilityError,
    ImplementationUnavailable,
    compile_cache_dir,
    get_family,
)  # fmt: skip
from gru4rec_conformance.implementations.registry import AdapterSpec

UNSUPPORTED_PREFIX = "unsupported by "


def adapter_class(spec: AdapterSpec) -> type[AdapterBase]:
    """The adapter class of a registry entry (the registry admits only :class:`AdapterBase` subclasses)."""
    return spec.cls


class HarnessError(Exception):
    """The harness cannot run a check (adapter cannot be described, bad check declaration)."""


@dataclasses.dataclass
class Description:
    capabilities: BaseCapabilities | None
    version: str
    hooks: frozenset[str]
    isolation: str
    error: str | None = None
    unavailable: str | None = None


class ImplHandle:
    """One selected implementation for the whole session.

    Args:
        spec: the registry entry.
        device: ``--device``.
        seeds: ``--seeds``.
        dataset: ``--dataset`` (None = each check's default).
        isolation: ``auto`` (the adapter's ``isolated`` flag decides), ``always`` or ``never``.
        settings: worker settings (timeouts, memory, network).
    """

    def __init__(
        self,
        spec: AdapterSpec,
        *,
        device: str = "cpu",
        seeds: Sequence[int] = (42,),
        dataset: str | None = None,
        isolation: str = "auto",
        settings: IsolationSettings | None = None,
    ) -> None:
        self.spec = spec
        self.device = device
        self.seeds = list(seeds)
        self.dataset = dataset
        self.isolation = isolation
        self.settings = settings or IsolationSettings()
        self._description: Description | None = None
        self._shared: dict[Any, tuple[bool, Any]] = {}
        self._session_adapters: list[Any] = []

    # -- identity --------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def family(self) -> str:
        return self.spec.family

    @property
    def uses_worker(self) -> bool:
        return self.isolation == "always" or (self.isolation == "auto" and self.spec.isolated)

    @property
    def capabilities_cls(self) -> type[BaseCapabilities]:
        fam = get_family(self.family)
        return cast("type[BaseCapabilities]", fam.capabilities_cls) if fam is not None else BaseCapabilities

    # -- adapters --------------------------------------------------------------------------------------
    def new_adapter(self, timeout_kind: Callable[[], tuple[str | None, float | None]] | None = None) -> Any:
        """A fresh, unbuilt adapter: in this process, or a :class:`WorkerProxy` when isolated."""
        if not self.uses_worker:
            return self.spec.create(self.device)
        cls = adapter_class(self.spec)
        if cls.checkouts:  # the worker sees the checkout cache read-only: fill it from here
            from gru4rec_conformance.implementations._checkout import prepare

            prepare(tuple(cls.checkouts))
        return WorkerProxy(
            self.spec.ref,
            cls.protocol_methods(),
            init_kwargs=self.spec.init_kwargs,
            device=self.device,
            settings=self.settings,
            extra_env=tuple(cls.worker_env),
            python=os.environ.get("GRU4REC_WORKER_PYTHON") or cls.worker_python,
            pythonpath=_module_root(cls),
            needs_network=bool(getattr(cls, "worker_network", False)),
            timeout_kind=timeout_kind,
            label=self.name,
            capabilities_cls=self.capabilities_cls,
            compile_cache=compile_cache_dir(self.name) if cls.compile_cache else None,
        )

    def describe(self, refresh: bool = False) -> Description:
        """Capabilities, version and hooks, asked once (in a worker for isolated adapters); ``refresh`` asks
        again (e.g. after the worker's interpreter changed).

        A failure is kept as ``error`` (every check of this implementation then errors with it) instead of
        being raised here, so one broken adapter does not stop a run over several implementations.
        """
        if refresh:
            self._description = None
        if self._description is not None:
            return self._description
        adapter = None
        try:
            adapter = self.new_adapter()
            raw = adapter.capabilities()
            caps = self.capabilities_cls.from_mapping(raw, source=f"{self.spec.ref}.capabilities()")
            version = str(adapter.version())
            if isinstance(adapter, WorkerProxy):
                hooks = adapter.implemented_hooks()
                isolation = f"worker process ({adapter.isolation_info}; python {adapter.hello.get('python', '?')})"
            else:
                hooks = adapter_class(self.spec).implemented_hooks()
                isolation = "in-process"
            self._description = Description(caps, version, frozenset(hooks), isolation)
        except ImplementationUnavailable as exc:
            version = "unknown"
            try:  # stamp the report with the installed version when the adapter can tell it
                version = str(adapter.version()) if adapter is not None else "unknown"
            except Exception:
                pass
            self._description = Description(None, version, frozenset(), "?", unavailable=str(exc))
        except (CapabilityError, WorkerError) as exc:
            self._description = Description(None, "unknown", frozenset(), "?", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # the adapter's own code failed while describing itself
            self._description = Description(None, "unknown", frozenset(), "?", f"{type(exc).__name__}: {exc}")
        finally:
            if adapter is not None:
                try:
                    adapter.close()
                except Exception:
                    pass
        return self._description

    @property
    def capabilities(self) -> BaseCapabilities:
        d = self.describe()
        if d.capabilities is None:
            raise HarnessError(f"implementation {self.name!r} cannot be described: {d.error or d.unavailable}")
        return d.capabilities

    @property
    def version(self) -> str:
        return self.describe().version

    @property
    def hooks(self) -> frozenset[str]:
        return self.describe().hooks

    # -- declarations ----------------------------------------------------------------------------------
    def _hook_name(self, name: str) -> str:
        """The current name of a hook (``get_params`` → ``get_weights``: deprecated names, one release)."""
        aliases: dict[str, str] = dict(getattr(self.spec.cls, "DEPRECATED_HOOKS", {}))
        return aliases.get(name, name)

    def check_feature_name(self, feature: str) -> None:
        """Raise :class:`HarnessError` for a feature name outside the family's vocabulary (typo guard)."""
        prefix, _, rest = feature.partition(":")
        if prefix == "hook" and rest:
            hooks = adapter_class(self.spec).HOOKS
            if self._hook_name(rest) not in hooks:
                raise HarnessError(f"unknown hook {rest!r}; hooks of family {self.family}: {list(hooks)}")
            return
        if not self.capabilities.is_known_feature(feature):
            vocab = self.capabilities_cls.feature_vocabulary()
            raise HarnessError(f"unknown feature {feature!r} for family {self.family}; vocabulary: {vocab} "
                               "plus hook:<name> and hparam:<name>")  # fmt: skip

    def requirement_name(self, name: str) -> str:
        """``name`` as the records spell a requirement: a hook of the family (bare or ``hook:``-prefixed, deprecated
        names mapped) as ``hook:<name>``, anything else unchanged (``loss:bpr-max``, ``hparam:momentum``)."""
        prefix, _, rest = name.partition(":")
        bare = rest if prefix == "hook" and rest else name
        return f"hook:{self._hook_name(bare)}" if self._hook_name(bare) in adapter_class(self.spec).HOOKS else name

    def declares(self, feature: str) -> bool:
        """Whether the adapter declares ``feature`` (also bare hook and hyperparameter names)."""
        prefix, _, rest = feature.partition(":")
        if prefix == "hook" and rest:
            return self._hook_name(rest) in self.hooks
        if self._hook_name(feature) in self.hooks:
            return True
        caps = self.describe().capabilities
        return caps is not None and caps.declares(feature)

    def unmet(self, requirements: Sequence[str]) -> list[str]:
        """The requirements (feature names) the adapter does not declare; validates the names."""
        for f in requirements:
            self.check_feature_name(f)
        return [f for f in requirements if not self.declares(f)]

    def close(self) -> None:
        """Close the adapters made for :meth:`Impl.shared` values (called at the end of the session)."""
        self._shared.clear()
        while self._session_adapters:
            adapter = self._session_adapters.pop()
            try:
                adapter.close()
            except Exception:
                pass


def _module_root(cls: type) -> tuple[str, ...]:
    """The ``sys.path`` entry from which ``cls``'s module was imported (for the worker's PYTHONPATH)."""
    described = cls.__dict__.get("_worker_pythonpath")
    if described is not None:  # an outside adapter described by a worker: its module was never imported here
        return tuple(described)
    if cls.__module__.split(".", 1)[0] == "gru4rec_conformance":
        return (str(import_root()),)
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if not path:
        return ()
    root = Path(path).resolve().parent
    depth = cls.__module__.count(".")
    if Path(path).name == "__init__.py":
        depth += 1
    for _ in range(depth):
        root = root.parent
    return (str(root),)


class Impl:
    """What a check receives as ``impl``: the implementation under test, as a factory of fresh models.

    Attributes:
        name, family, role, device, seeds, dataset: of the run.
        capabilities: the validated declaration (family capability class).
        version: the implementation's version.
        hooks: implemented optional methods.
        spec: the registry entry.

    Every adapter made through :meth:`new` or :meth:`build` is closed when the check ends (worker processes
    are shut down).
    """

    def __init__(self, handle: ImplHandle, *, kind: str | None = None, timeout: float | None = None,
                 on_unsupported: Callable[[list[str]], None] | None = None,
                 on_note: Callable[[str, dict[str, object]], None] | None = None) -> None:  # fmt: skip
        self.handle = handle
        self._on_note = on_note
        self._kind = kind
        self._timeout = timeout
        self._adapters: list[Any] = []
        self._on_unsupported = on_unsupported
        self._making_shared = False

    name = property(lambda self: self.handle.name)
    family = property(lambda self: self.handle.family)
    role = property(lambda self: self.handle.spec.role)
    device = property(lambda self: self.handle.device)
    seeds = property(lambda self: list(self.handle.seeds))
    dataset = property(lambda self: self.handle.dataset)
    capabilities = property(lambda self: self.handle.capabilities)
    version = property(lambda self: self.handle.version)
    hooks = property(lambda self: self.handle.hooks)
    spec = property(lambda self: self.handle.spec)
    isolated = property(lambda self: self.handle.uses_worker)

    def new(self) -> Any:
        """A fresh, unbuilt adapter (call ``build`` yourself, e.g. inside ``pytest.raises(Unsupported)``).

        Its results are validated against the protocol (:mod:`conformance._harness.validation`): a malformed
        result fails the check with a message naming the adapter and the method."""
        adapter = checked(
            self.handle.new_adapter(timeout_kind=lambda: (self._kind, self._timeout)), self.name, self.family
        )
        (self.handle._session_adapters if self._making_shared else self._adapters).append(adapter)
        return adapter

    def build(self, seed: int | None = None, **hparams: Any) -> Any:
        """A fresh adapter with ``build(seed, **hparams)`` called; ``seed`` defaults to the first ``--seeds``."""
        adapter = self.new()
        adapter.build(seed=self.seeds[0] if seed is None else int(seed), **hparams)
        return adapter

    def shared(self, key: Any, make: Callable[[Impl], Any]) -> Any:
        """A value made once per implementation and session, e.g. a model fitted on D-LAG1 that several
        checks score: ``model = impl.shared(("d_lag1", 2), lambda i: fitted(i.build(seed=1), d_lag1))``.

        ``key`` must identify everything ``make`` depends on (data, hyperparameters, seed). Adapters built
        inside ``make`` live until the end of the session. If ``make`` raised, later checks asking for the
        same key get the same exception (a failed 10-minute fit is not repeated). With pytest-xdist each
        worker process has its own cache. Checks must not modify a shared model.
        """
        cache = self.handle._shared
        if key not in cache:
            self._making_shared = True
            try:
                cache[key] = (True, make(self))
            except Exception as exc:
                cache[key] = (False, exc)
            finally:
                self._making_shared = False
        ok, value = cache[key]
        if not ok:
            raise value
        return value

    def supports(self, *features: str) -> bool:
        """Whether every feature (``logq``, ``loss:bpr-max``, ``hook:trace``, ``hparam:momentum``) is declared."""
        return not self.handle.unmet(features)

    def require(self, *features: str) -> None:
        """Skip the check (as unsupported, with the reason) unless every feature is declared."""
        import pytest

        missing = self.handle.unmet(features)
        if missing:
            if self._on_unsupported is not None:
                self._on_unsupported(missing)
            pytest.skip(f"{UNSUPPORTED_PREFIX}{self.name}: needs {', '.join(missing)} (not declared)")

    def note(self, name: str, **context: Any) -> None:
        """Record a fact about how the check ran in the check's report entry (e.g. an optional hyperparameter
        value the implementation refused and the check dropped); shown with the check's metrics, no value."""
        if self._on_note is not None:
            self._on_note(str(name), dict(context))

    def close(self) -> None:
        """Close every adapter made for this check (errors while closing are ignored)."""
        while self._adapters:
            adapter = self._adapters.pop()
            try:
                adapter.close()
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"<Impl {self.name} [{self.family}] device={self.device}>"


# -- outside adapters (``--impl module:Class``), described by a sandboxed worker ---------------------------------
_SUITE_PACKAGE = "gru4rec_conformance.implementations."
#: Largest text field accepted from a describe reply (characters).
_DESCRIBE_TEXT_MAX = 4000


def shipped(spec: AdapterSpec) -> bool:
    """Whether ``spec`` is one of the suite's own adapters: its class lives in the suite's ``implementations``
    package (the reference, its mutants and the shipped implementation adapters), however it was selected. Outside
    adapters may run in the suite's process under ``--gate`` only when a plugin or conftest registers them."""
    return suite_module(spec.cls.__module__)


def suite_module(module: str) -> bool:
    """Whether ``module`` is in the suite's own ``implementations`` package (trusted: imported in this process)."""
    return module.startswith(_SUITE_PACKAGE)


def import_path_root(path: str) -> tuple[str, ...]:
    """The ``sys.path`` entry holding the top-level package or module of ``module:Class``, found on the filesystem
    without importing anything (``PathFinder`` on the top-level name runs no code); ``()`` when none does (the
    worker then finds it on its own path or fails to import it, which its describe reply says)."""
    import importlib.machinery

    top = path.partition(":")[0].split(".", 1)[0]
    found = importlib.machinery.PathFinder.find_spec(top) if top else None
    if found is None:
        return ()
    if found.submodule_search_locations:
        return (str(Path(next(iter(found.submodule_search_locations))).parent),)
    return (str(Path(found.origin).parent),) if found.origin else ()


def _described_text(value: Any, field: str, path: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > _DESCRIBE_TEXT_MAX:
        raise HarnessError(f"--impl {path}: the worker's description has an invalid {field!r}: {str(value)[:200]!r}")
    return value


def described_spec(path: str, reply: Mapping[str, Any], pythonpath: tuple[str, ...]) -> AdapterSpec:
    """An :class:`AdapterSpec` for the outside adapter ``path`` built only from its worker's describe reply
    (:func:`worker.describe_class`), every field validated: a stand-in subclass of the family's protocol class
    named like the adapter (``spec.ref`` is ``path``), ``isolated`` True, role ``implementation`` or ``mutant``,
    ``worker_env`` checked against the allow-list, checkouts only among the pinned ones. The stand-in cannot be
    instantiated in this process. Raises :class:`HarnessError` naming the field."""
    from gru4rec_conformance.conformance._harness.isolation import check_worker_env
    from gru4rec_conformance.implementations._checkout import CHECKOUTS
    from gru4rec_conformance.implementations.registry import _NAME_RE

    module_name, _, qualname = path.partition(":")
    family = get_family(_described_text(reply.get("family"), "family", path))
    if family is None:
        raise HarnessError(f"--impl {path}: unknown family {reply.get('family')!r}")
    name = _described_text(reply.get("name") or path, "name", path)
    if not _NAME_RE.match(name):
        raise HarnessError(f"--impl {path}: invalid adapter name {name!r} (class attribute 'name')")
    env = reply.get("worker_env") or []
    if not isinstance(env, list) or not all(isinstance(v, str) for v in env):
        raise HarnessError(f"--impl {path}: the worker's description has an invalid 'worker_env'")
    try:
        env_names = check_worker_env(tuple(env), f"--impl {path}")
    except ValueError as exc:
        raise HarnessError(str(exc)) from None
    keys = reply.get("checkouts") or []
    if not isinstance(keys, list) or any(k not in CHECKOUTS for k in keys):
        raise HarnessError(f"--impl {path}: checkouts {keys!r} are not among the pinned ones ({sorted(CHECKOUTS)})")
    python = _described_text(reply.get("worker_python"), "worker_python", path, optional=True)
    if python is not None and not (os.path.isabs(python) and os.path.isfile(python)):
        raise HarnessError(f"--impl {path}: worker_python {python!r} is not an absolute path to an interpreter")
    study = reply.get("study")
    if study is not None and not (isinstance(study, dict) and all(isinstance(v, str) for v in study.values())):
        raise HarnessError(f"--impl {path}: the worker's description has an invalid 'study'")

    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise HarnessError(f"--impl {path} runs only in a worker process: its module is not imported by the suite")

    attrs = {
        "__module__": module_name, "__qualname__": qualname, "__init__": refuse, "name": name,
        "role": reply.get("role") if reply.get("role") in ("implementation", "mutant") else "implementation",
        "isolated": True, "description": _described_text(reply.get("description", ""), "description", path),
        "xfails_file": _described_text(reply.get("xfails_file"), "xfails_file", path, optional=True),
        "study": study, "worker_env": env_names, "worker_python": python,
        "worker_network": bool(reply.get("worker_network")), "compile_cache": bool(reply.get("compile_cache")),
        "checkouts": tuple(CHECKOUTS[k] for k in keys), "_worker_pythonpath": pythonpath,
    }  # fmt: skip
    cls = type(qualname.rsplit(".", 1)[-1], (family.adapter_base,), attrs)
    return AdapterSpec(name=name, family=family.name, cls=cls, source="import path")


def describe_import_path(path: str, settings: IsolationSettings) -> tuple[AdapterSpec | None, dict[str, Any]]:
    """Describe the outside adapter ``module:Class`` in a worker (sandboxed as ``settings`` say): the adapter's
    module is imported there, never here. Returns ``(spec, reply)``: the spec of :func:`described_spec` when the
    adapter declares ``isolated = True``, else None (the caller decides whether it may run in-process).

    Raises:
        HarnessError: the worker cannot import or describe the class, or its description is invalid.
    """
    if ":" not in path or not all(path.partition(":")[::2]):
        raise HarnessError(f"--impl {path!r}: an import path has the form some.module:AdapterClass")
    root = import_path_root(path)
    proxy = WorkerProxy(path, (), settings=settings, pythonpath=root, label=f"--impl {path}", describe_only=True)
    try:
        reply = proxy.describe_class()
    except WorkerCallError as exc:  # the adapter's module or class, as the worker found it
        raise HarnessError(f"--impl {path!r}: {exc.remote_message or exc.remote_type}") from None
    except WorkerError as exc:
        raise HarnessError(f"--impl {path!r}: the worker cannot describe the adapter: {exc}") from None
    finally:
        proxy.close()
    return (described_spec(path, reply, root) if reply.get("isolated") else None), reply
