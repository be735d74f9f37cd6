"""Adapter protocol of the conformance suite: families, capabilities, `Unsupported`, `FitReport`.

An *adapter* translates between the suite and one implementation under test (implementations/README.md):
it owns I/O, id mapping and padding shims, and it never fixes a defect of the code it wraps. Two families
share this module's generic parts:

- ``gru4rec``: :class:`Adapter` (below), the GRU4Rec adapter surface with the closed feature vocabulary of
  :class:`Capabilities`;
- ``finetuner``: defined in ``implementations/finetuner/`` on top of :class:`AdapterBase` and
  :class:`BaseCapabilities`, registered with :func:`register_family`.

The harness (``conformance._harness``) is family-agnostic: it reads ``family`` from the adapter class, asks
the family's :class:`FamilySpec` for the capability class and the check kinds, and forwards only the
methods named in ``REQUIRED`` and ``HOOKS`` when it runs an adapter in a worker process.

The result records (:class:`FitReport`, :class:`StepTrace`, :class:`ExchangeRecord`) are the reference GRU4Rec's
own (``reference/gru4rec/records.py``, re-exported here): the reference and every adapter speak one vocabulary.
That module needs only the standard library, so importing this protocol imports neither torch nor numpy.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from gru4rec_conformance.reference.gru4rec.records import ExchangeRecord, FitReport, StepTrace

__all__ = [
    "Unsupported",
    "ImplementationUnavailable",
    "RemoteException",
    "require_installed",
    "CapabilityError",
    "BaseCapabilities",
    "Capabilities",
    "FitReport",
    "StepTrace",
    "ExchangeRecord",
    "AdapterBase",
    "Adapter",
    "FamilySpec",
    "register_family",
    "get_family",
    "families",
    "KNOWN_FAMILY_NAMES",
    "ROLES",
    "cache_dir",
    "installed_version",
    "flag_field",
    "set_field",
    "choice_field",
]


class Unsupported(Exception):
    """The implementation cannot express what was asked (a hook, a hyperparameter, a value, a device).

    Raised by an adapter instead of silently ignoring a request (implementations/README.md). The harness
    turns it into a *skip* with the reason when the thing named was not declared in the adapter's
    capabilities, and into a *failure* when it was declared (a declaration that the code does not honour).

    Args:
        name: what is unsupported, in the suite's vocabulary: a hook name (``"train_forward"``), a
            hyperparameter (``"momentum"``), a feature (``"logq"``) or ``"<field>:<value>"``
            (``"loss:top1"``, ``"device:cuda"``).
        detail: optional human-readable explanation (printed in the report).
    """

    def __init__(self, name: str, detail: str = "") -> None:
        super().__init__(name, detail)
        self.name = str(name)
        self.detail = str(detail)

    def __str__(self) -> str:
        return f"{self.name} ({self.detail})" if self.detail else self.name


class ImplementationUnavailable(Exception):
    """The implementation under test is not installed or not checked out here (e.g. a GitHub-only code
    base without its checkout). The message must say in one line how to provide it.

    Raise it from ``capabilities()``, ``version()`` or ``build()``: every check of that implementation is
    then skipped with the message (and ``--gate`` fails, since nothing was checked).
    """


class RemoteException(RuntimeError):
    """An exception the implementation's code raised in another process that the adapter runs itself (not the
    harness's worker), carried by its type name and message.

    The harness reads ``remote_type`` and ``remote_message`` as it reads a failure of its own worker: a missing
    module or a module of another version (``ModuleNotFoundError``, ``module 'numpy' has no attribute 'in1d'``) is
    reported as an environment error, not a check failure; anything else stays the failure it is.

    Args:
        message: the whole text shown for the failure (the adapter's words and the remote traceback's tail).
        remote_type: the remote exception's class name (``"ModuleNotFoundError"``).
        remote_message: its message (``"No module named 'pytreebank'"``).
        how: optional, how to set the environment up when it is the problem (replaces the generic tox advice).
    """

    def __init__(self, message: str, remote_type: str, remote_message: str, how: str | None = None) -> None:
        super().__init__(message)
        self.remote_type = str(remote_type)
        self.remote_message = str(remote_message)
        self.how = how

    @staticmethod
    def split(text: str) -> tuple[str, str]:
        """``("ModuleNotFoundError", "No module named 'x'")`` from one line ``"ModuleNotFoundError: No module named
        'x'"`` (a dotted type keeps its last part); ``("", text)`` when the line does not start with a type name."""
        m = re.match(
            r"^\s*(?:[\w.]+\.)?(?P<type>[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)): ?(?P<msg>.*)$", text or ""
        )
        return (m.group("type"), m.group("msg")) if m else ("", text or "")


def require_installed(module: str, dist: str, how: str) -> None:
    """Raise :class:`ImplementationUnavailable` when ``module`` cannot be found in this environment.

    For the adapters of installable implementations, called from ``capabilities()`` so that a run in an
    environment without the package gives an UNAVAILABLE verdict with the way to provide it, instead of every
    check failing with a ``ModuleNotFoundError`` from deep inside ``fit``. Only the module spec is looked up
    (the package is not imported here, so a package that is present but broken still fails its checks).

    Args:
        module: top-level import name, e.g. ``"cornac"``.
        dist: distribution name on PyPI, e.g. ``"torch-rechub"`` (for the message).
        how: how to provide it, e.g. ``"tox -e cornac"``.

    Raises:
        ImplementationUnavailable: ``"<dist> is not installed in this environment (<python>): <how>"``.
    """
    import importlib.util
    import sys

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImplementationUnavailable(f"{dist} is not installed in this environment ({sys.executable}): {how}")


def installed_version(dist: str) -> str:
    """The installed version of distribution ``dist`` (e.g. ``"torch-rechub"``), or ``"not installed"``.

    For ``version()`` and the ``framework`` capability of the adapters of installable implementations: a missing
    package is reported, not raised (:func:`require_installed` decides availability).
    """
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


_CapsT = TypeVar("_CapsT", bound="BaseCapabilities")


class CapabilityError(ValueError):
    """A capability declaration is invalid: unknown field or value, wrong type, or inconsistent."""


ROLES = ("reference", "implementation", "mutant", "example")
"""Adapter roles. ``--impl all`` selects ``reference`` and ``implementation`` adapters only."""

KNOWN_FAMILY_NAMES = ("gru4rec", "finetuner")
"""Family names the harness knows even before a family's protocol module is imported."""


def flag_field(doc: str) -> Any:
    """A boolean capability (feature name = field name), default False."""
    return dataclasses.field(default=False, metadata={"kind": "flag", "doc": doc})


def set_field(vocab: Iterable[str], prefix: str, doc: str, default: Iterable[str] = ()) -> Any:
    """A subset of a closed vocabulary (feature names ``<prefix>:<value>``)."""
    return dataclasses.field(
        default=frozenset(default),
        metadata={"kind": "set", "vocab": frozenset(vocab), "prefix": prefix, "doc": doc},
    )


def count_field(doc: str) -> Any:
    """A positive whole number, or None for "not stated" (printed in reports, not a feature)."""
    return dataclasses.field(default=None, metadata={"kind": "count", "doc": doc})


def choice_field(vocab: Iterable[Any], default: Any, doc: str) -> Any:
    """One value of a closed vocabulary (printed in reports, not a feature)."""
    return dataclasses.field(default=default, metadata={"kind": "choice", "vocab": tuple(vocab), "doc": doc})


@dataclasses.dataclass(frozen=True)
class BaseCapabilities:
    """Fields every family declares; families subclass this with their closed feature vocabulary.

    Field kinds (declared with dataclass metadata, used for validation and for the flat feature names):

    - *flag* fields (bool): the feature is available; feature name = field name;
    - *set* fields (subset of a closed vocabulary): feature names ``"<prefix>:<value>"``;
    - *choice* fields: one value of a closed vocabulary (not a feature, printed in the report);
    - *count* fields: a whole number >= 1 or None (not stated; not a feature, printed in the report).

    Common fields:
        devices: subset of {"cpu", "cuda"}; feature names ``device:cpu`` / ``device:cuda``.
        framework: ``{"name": str, "version": str}`` of the ML framework the implementation runs on.
        shims: portability shims the adapter applies (strings printed in the report; allowed only if they change no
            semantics, implementations/README.md).
        hyperparameters: declared hyperparameter names and their defaults. Families with a closed
            vocabulary list it in ``HYPERPARAMETERS``; a name outside it is an error.

    Build with :meth:`from_mapping`, which validates; unknown names raise :class:`CapabilityError`.
    """

    devices: frozenset[str] = set_field(("cpu", "cuda"), "device", "devices the implementation runs on", ("cpu",))
    framework: Mapping[str, str] = dataclasses.field(
        default_factory=lambda: {"name": "unknown", "version": "unknown"}, metadata={"kind": "framework"}
    )
    shims: tuple[str, ...] = dataclasses.field(default=(), metadata={"kind": "shims"})
    hyperparameters: Mapping[str, Any] = dataclasses.field(default_factory=dict, metadata={"kind": "hparams"})

    HYPERPARAMETERS: ClassVar[frozenset[str] | None] = None
    HOOK_PREFIX: ClassVar[str] = "hook"
    HPARAM_PREFIX: ClassVar[str] = "hparam"

    # -- construction and validation -------------------------------------------------------------
    @classmethod
    def from_mapping(
        cls: type[_CapsT], data: Mapping[str, Any] | BaseCapabilities, *, source: str = "capabilities()"
    ) -> _CapsT:
        """Validate a declaration (a mapping of field names, or an instance) and return an instance of ``cls``.

        Raises:
            CapabilityError: naming ``source`` and the offending field/value, for an unknown field, a value
                outside the closed vocabulary, a wrong type, or an inconsistent combination.
        """
        if isinstance(data, BaseCapabilities):
            if not isinstance(data, cls):
                raise CapabilityError(f"{source}: expected {cls.__name__}, got {type(data).__name__}")
            data = data.to_dict()
        if not isinstance(data, Mapping):
            raise CapabilityError(f"{source}: capabilities must be a mapping, got {type(data).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise CapabilityError(f"{source}: unknown capability field(s) {unknown}; known fields: {sorted(fields)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            values[name] = cls._validate_field(fields[name], value, source)
        instance = cls(**values)
        instance._check_consistency(source)
        return instance

    @classmethod
    def _validate_field(cls, field: dataclasses.Field[Any], value: Any, source: str) -> Any:
        kind = field.metadata.get("kind")
        where = f"{source}: field {field.name!r}"
        if kind == "flag":
            if not isinstance(value, bool):
                raise CapabilityError(f"{where} must be a bool, got {value!r}")
            return value
        if kind == "set":
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise CapabilityError(f"{where} must be a list of names, got {value!r}")
            items = list(value)
            bad = sorted(str(v) for v in items if v not in field.metadata["vocab"])
            if bad:
                raise CapabilityError(f"{where}: unknown value(s) {bad}; allowed: {sorted(field.metadata['vocab'])}")
            return frozenset(items)
        if kind == "choice":
            if value not in field.metadata["vocab"]:
                raise CapabilityError(f"{where}: {value!r} is not one of {list(field.metadata['vocab'])}")
            return value
        if kind == "count":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise CapabilityError(f"{where} must be a whole number >= 1 or None, got {value!r}")
            return value
        if kind == "framework":
            if not isinstance(value, Mapping) or set(value) - {"name", "version"} or "name" not in value:
                raise CapabilityError(f"{where} must be {{'name': str, 'version': str}}, got {value!r}")
            return {"name": str(value["name"]), "version": str(value.get("version", "unknown"))}
        if kind == "shims":
            if isinstance(value, (str, bytes)) or not all(isinstance(s, str) for s in value):
                raise CapabilityError(f"{where} must be a list of strings, got {value!r}")
            return tuple(value)
        if kind == "hparams":
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise CapabilityError(f"{where} must map hyperparameter names to defaults, got {value!r}")
            if cls.HYPERPARAMETERS is not None:
                bad = sorted(set(value) - cls.HYPERPARAMETERS)
                if bad:
                    raise CapabilityError(
                        f"{where}: unknown hyperparameter name(s) {bad}; allowed: {sorted(cls.HYPERPARAMETERS)}"
                    )
            return dict(value)
        if kind == "layout":
            return cls._validate_layout(field, value, source)
        raise CapabilityError(f"{where}: field kind {kind!r} has no validator")  # a bug in a subclass

    @classmethod
    def _validate_layout(cls, field: dataclasses.Field[Any], value: Any, source: str) -> Any:
        raise CapabilityError(f"{source}: field {field.name!r} is not supported by {cls.__name__}")

    def _check_consistency(self, source: str) -> None:
        """Subclasses add cross-field rules here (raise :class:`CapabilityError`)."""

    # -- queries -----------------------------------------------------------------------------------
    @classmethod
    def feature_vocabulary(cls) -> list[str]:
        """All flat feature names of this family, in declaration order (flags, then ``prefix:value``)."""
        names: list[str] = []
        for f in dataclasses.fields(cls):
            if f.metadata.get("kind") == "flag":
                names.append(f.name)
            elif f.metadata.get("kind") == "set":
                names.extend(f"{f.metadata['prefix']}:{v}" for v in sorted(f.metadata["vocab"]))
        return names

    @classmethod
    def set_field_for_prefix(cls, prefix: str) -> str | None:
        for f in dataclasses.fields(cls):
            if f.metadata.get("kind") == "set" and f.metadata["prefix"] == prefix:
                return f.name
        return None

    def features(self) -> dict[str, bool]:
        """Flat ``{feature name: declared?}`` over the whole vocabulary (used for the feature matrix)."""
        out: dict[str, bool] = {}
        for f in dataclasses.fields(self):
            kind = f.metadata.get("kind")
            if kind == "flag":
                out[f.name] = bool(getattr(self, f.name))
            elif kind == "set":
                chosen = getattr(self, f.name)
                for v in sorted(f.metadata["vocab"]):
                    out[f"{f.metadata['prefix']}:{v}"] = v in chosen
        return out

    def is_known_feature(self, feature: str) -> bool:
        """Whether ``feature`` belongs to the vocabulary (flags, ``prefix:value``, ``hparam:<name>``)."""
        if feature in self.features():
            return True
        prefix, _, rest = feature.partition(":")
        if prefix == self.HPARAM_PREFIX and rest:
            return self.HYPERPARAMETERS is None or rest in self.HYPERPARAMETERS
        return False

    def declares(self, feature: str) -> bool:
        """Whether ``feature`` is declared: a true flag, a chosen set value, or ``hparam:<name>``.

        Also accepts a bare hyperparameter name (``"momentum"``), as :class:`Unsupported` carries it.
        """
        feats = self.features()
        if feature in feats:
            return feats[feature]
        prefix, _, rest = feature.partition(":")
        if prefix == self.HPARAM_PREFIX:
            return rest in self.hyperparameters
        return feature in self.hyperparameters

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (sets as sorted lists)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, frozenset):
                v = sorted(v)
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, Mapping):
                v = {k: _jsonable(x) for k, x in v.items()}
            out[f.name] = v
        return out


def _jsonable(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


GRU4REC_HYPERPARAMETERS = frozenset(
    {
        # the adapter protocol's canonical names (implementations/README.md)
        "layers", "loss", "batch_size", "learning_rate", "momentum", "dropout_p_embed", "dropout_p_hidden",
        "n_sample", "sample_alpha", "bpreg", "logq", "embedding", "constrained_embedding", "final_act",
        "elu_param", "n_epochs", "optimizer",
        # further official names (docs/algorithm.md, 'Hyperparameters'; Theano-only ones included)
        "hidden_act", "lmbd", "smoothing", "adapt", "adapt_params", "grad_cap", "sigma", "init_as_normal",
        "train_random_order", "time_sort",
    }
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Capabilities(BaseCapabilities):
    """Capabilities of a GRU4Rec implementation: the closed vocabulary (implementations/README.md, "Capabilities").

    Flag features (bool): ``session_parallel``, ``in_batch_negatives``, ``extra_shared_negatives``,
    ``sample_alpha``, ``logq``, ``adagrad_momentum``, ``dropout_embed``, ``dropout_hidden``,
    ``separate_dropouts``, ``bpreg``, ``full_ranking``, ``needs_categories``, ``fixed_batch_shape``,
    ``needs_sorted_input``, ``per_example_negatives``, ``negatives_exclude_own_items`` (the last two describe
    the negatives of a model that is not session-parallel; checks name them in their diagnoses).
    Count: ``negatives_per_example`` (how many negatives each training example draws of its own, with
    ``per_example_negatives``; None = not stated).
    Set features: ``losses`` (``loss:<name>``), ``embedding_modes`` (``embedding:<mode>``), ``final_acts``
    (``final_act:<name>``), ``devices`` (``device:<name>``). Choices: ``score_semantics`` (``raw`` or
    ``post-activation``: what ``score_prefixes`` returns), ``eval_tie_mode`` (tie mode of the
    implementation's own evaluator: ``standard``/``conservative``/``median``, ``None`` without one).
    ``gate_layout``: order of the GRU gates in the weight matrices returned by ``get_weights`` (a
    permutation of ``reset``, ``update``, ``candidate``), ``None`` without that hook.
    ``hyperparameters``: official GRU4Rec names only (docs/algorithm.md, 'Hyperparameters').

    Consistency rules (implementations/README.md): ``separate_dropouts`` needs both dropouts; ``sample_alpha`` needs
    ``extra_shared_negatives``; ``bpreg`` needs ``loss:bpr-max``; ``logq`` needs ``loss:cross-entropy``.
    """

    losses: frozenset[str] = set_field(
        ("cross-entropy", "bpr-max", "top1", "top1-max", "bpr"), "loss", "training losses"
    )
    embedding_modes: frozenset[str] = set_field(("none", "separate", "shared"), "embedding", "input embedding modes")
    session_parallel: bool = flag_field("session-parallel mini-batches (lanes refilled as sessions end)")
    in_batch_negatives: bool = flag_field("the other targets of the mini-batch are negatives")
    extra_shared_negatives: bool = flag_field("n_sample extra negatives shared by all lanes")
    sample_alpha: bool = flag_field("extra negatives drawn proportional to support^sample_alpha")
    logq: bool = flag_field("logQ correction of the cross-entropy loss")
    adagrad_momentum: bool = flag_field("Adagrad with momentum (the official optimizer)")
    dropout_embed: bool = flag_field("dropout on the input embedding (dropout_p_embed)")
    dropout_hidden: bool = flag_field("dropout on the GRU outputs (dropout_p_hidden)")
    separate_dropouts: bool = flag_field("embedding and hidden dropout are independent parameters")
    final_acts: frozenset[str] = set_field(
        ("linear", "elu", "tanh", "relu", "leaky", "selu", "softmax", "softmax_logit"), "final_act",
        "final activations of the scores",
    )  # fmt: skip
    bpreg: bool = flag_field("BPR-max score regularisation (bpreg)")
    full_ranking: bool = flag_field("score_prefixes scores the whole catalogue in one call")
    needs_categories: bool = flag_field("the implementation needs item categories as input")
    fixed_batch_shape: bool = flag_field("scoring must be padded to the training batch size")
    needs_sorted_input: bool = flag_field("fit/evaluate need rows sorted by (SessionId, Time); EB-5 is n/a")
    per_example_negatives: bool = flag_field("every training example draws negatives of its own (not shared)")
    negatives_exclude_own_items: bool = flag_field("sampled negatives never include the example's own session's items")
    negatives_per_example: Any = count_field("negatives each training example draws of its own (per_example_negatives)")
    score_semantics: str = choice_field(("raw", "post-activation"), "raw", "what score_prefixes returns")
    eval_tie_mode: Any = choice_field((None, "standard", "conservative", "median"), None, "own evaluator's tie mode")
    gate_layout: Any = dataclasses.field(default=None, metadata={"kind": "layout"})

    HYPERPARAMETERS: ClassVar[frozenset[str] | None] = GRU4REC_HYPERPARAMETERS
    GATES: ClassVar[frozenset[str]] = frozenset({"reset", "update", "candidate"})

    @classmethod
    def _validate_layout(cls, field: dataclasses.Field[Any], value: Any, source: str) -> Any:
        if value is None:
            return None
        if isinstance(value, (str, bytes)) or sorted(value) != sorted(cls.GATES) or len(value) != 3:
            raise CapabilityError(
                f"{source}: field 'gate_layout' must be an ordering of {sorted(cls.GATES)}, got {value!r}"
            )
        return tuple(value)

    def _check_consistency(self, source: str) -> None:
        rules = [
            (self.separate_dropouts and not (self.dropout_embed and self.dropout_hidden),
             "separate_dropouts needs dropout_embed and dropout_hidden"),
            (self.sample_alpha and not self.extra_shared_negatives, "sample_alpha needs extra_shared_negatives"),
            (self.bpreg and "bpr-max" not in self.losses, "bpreg needs 'bpr-max' in losses"),
            (self.logq and "cross-entropy" not in self.losses, "logq needs 'cross-entropy' in losses"),
            (self.negatives_per_example is not None and not self.per_example_negatives,
             "negatives_per_example needs per_example_negatives"),
        ]  # fmt: skip
        for broken, message in rules:
            if broken:
                raise CapabilityError(f"{source}: inconsistent declaration: {message}")

    OFFICIAL_FLAGS: ClassVar[tuple[str, ...]] = (
        "session_parallel", "in_batch_negatives", "extra_shared_negatives", "sample_alpha", "logq",
        "adagrad_momentum", "dropout_embed", "dropout_hidden", "separate_dropouts", "bpreg", "full_ranking",
    )  # fmt: skip
    """The flag features of the official GRU4Rec's training and scoring (the reference's, and a faithful port's)."""

    @classmethod
    def flags(cls, *names: str) -> dict[str, bool]:
        """Every flag feature as a declaration: True for ``names``, False for all the others, in field order.

        ``**Capabilities.flags("session_parallel", "bpreg")`` in a ``capabilities()`` mapping states every flag at
        once; a flag given after it in the mapping overrides it.

        Raises:
            CapabilityError: a name that is not a flag feature (the flags are listed).
        """
        known = [f.name for f in dataclasses.fields(cls) if f.metadata.get("kind") == "flag"]
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise CapabilityError(f"Capabilities.flags: not flag feature(s) {unknown}; flags: {known}")
        return {name: name in names for name in known}


class AdapterBase(abc.ABC):
    """Family-agnostic part of every adapter.

    Class attributes (declarations read without building a model):
        name: registry name (``--impl NAME``); lower case, ``[a-z0-9_.:-]``.
        family: ``"gru4rec"`` or ``"finetuner"``.
        role: one of :data:`ROLES`.
        isolated: run in a worker subprocess (third-party code; see conformance/README.md, Isolation).
        worker_python: interpreter for the worker (path), None = the suite's own interpreter.
        worker_env: names of extra environment variables the worker may see (e.g. ``TORCH_GRU4REC_PATH``).
        checkouts: keys of ``implementations._checkout.CHECKOUTS`` the adapter may ``locate()``. The controller
            prepares them in the cache before it starts an isolated worker, because the worker sees the cache
            read-only (a worker must not be able to alter another implementation's checkout).
        worker_network: the implementation needs the network (or loopback) at run time; its worker is then
            not cut off the network (say why in the adapter's docstring).
        compile_cache: the implementation compiles code at run time (Theano's C modules): its workers share one
            writable folder, :func:`compile_cache_dir` of the registry name (env ``GRU4REC_COMPILE_CACHE`` in the
            worker), so each worker does not compile from scratch. Only this implementation's workers see it
            writable; the suite never reads it.
        description, homepage: printed in reports.
        study: ``{"implementation": ..., "variant": ...}`` naming the study's rows for this adapter
            (``datasets/study/study_results.csv``, read by ``gru4rec_conformance.datasets.study``), so reports print
            the published numbers beside ours; None if not in the study.
        reproducibility: static reproducibility-card facts (``installs``, ``offline``, ``pinned``,
            ``hyperparameters``), free-text values.
        REQUIRED, HOOKS: method names of the family's protocol (the worker proxy forwards these).
        DEPRECATED_HOOKS: old hook name → its current name in ``HOOKS``, honoured for one release: a subclass that
            overrides only the old name gets the current one forwarding to it (a ``DeprecationWarning`` once, when
            the class is defined), so the harness finds and calls the hook; the proxy forwards the old names too.
        HOOKS_ABSENT: hook name → why the implementation has no computation that hook could expose (e.g. "no
            session inference loop"). Only for hooks the adapter does not implement; the verdict prints the reason
            beside every check left not tested for that hook, so a reader can tell "cannot be expressed" from
            "not written yet".

    The constructor takes ``device`` and the registry entry's keyword arguments (variants); it must be cheap
    and must not import the implementation under test.
    """

    name: ClassVar[str] = ""
    family: ClassVar[str] = ""
    role: ClassVar[str] = "implementation"
    isolated: ClassVar[bool] = False
    worker_python: ClassVar[str | None] = None
    worker_env: ClassVar[tuple[str, ...]] = ()
    checkouts: ClassVar[tuple[str, ...]] = ()
    worker_network: ClassVar[bool] = False
    compile_cache: ClassVar[bool] = False
    description: ClassVar[str] = ""
    homepage: ClassVar[str] = ""
    study: ClassVar[Mapping[str, str] | None] = None
    reproducibility: ClassVar[Mapping[str, str]] = {}

    REQUIRED: ClassVar[tuple[str, ...]] = ("capabilities",)
    HOOKS: ClassVar[tuple[str, ...]] = ()
    DEPRECATED_HOOKS: ClassVar[Mapping[str, str]] = {}
    HOOKS_ABSENT: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for old, new in cls.DEPRECATED_HOOKS.items():
            if old in cls.__dict__ and new not in cls.__dict__:
                # frames: this method, ABCMeta.__new__, the class statement
                warnings.warn(f"{cls.__module__}.{cls.__qualname__} overrides {old}(), a deprecated hook name: rename "
                              f"it to {new}() (the old name is honoured for one release)", DeprecationWarning,
                              stacklevel=3)  # fmt: skip
                setattr(cls, new, _forward_to_legacy(cls, old, new))

    def __init__(self, device: str = "cpu", **options: Any) -> None:
        if options:
            raise TypeError(f"{type(self).__name__} takes no options, got {sorted(options)}")
        self.device = device

    def version(self) -> str:
        """Version of the implementation under test (package version or pinned commit); "unknown" if none."""
        return "unknown"

    @abc.abstractmethod
    def capabilities(self) -> BaseCapabilities | Mapping[str, Any]:
        """Declared capabilities (a mapping or an instance of the family's capability class).

        Must not depend on ``build``; it is asked once per run, before any check.
        """

    def close(self) -> None:  # noqa: B027 (optional: a no-op unless the adapter holds resources)
        """Release resources (temporary files, GPU memory). Called by the harness at test teardown."""

    @classmethod
    def implemented_hooks(cls) -> frozenset[str]:
        """The optional methods of ``HOOKS`` this class overrides (feature names ``hook:<name>``)."""
        base = _family_base(cls)
        return frozenset(h for h in cls.HOOKS if getattr(cls, h, None) is not getattr(base, h, None))

    @classmethod
    def protocol_methods(cls) -> tuple[str, ...]:
        """Methods a worker proxy forwards: ``version``, ``REQUIRED``, ``HOOKS`` and the deprecated hook names."""
        return ("version",) + tuple(cls.REQUIRED) + tuple(cls.HOOKS) + tuple(cls.DEPRECATED_HOOKS)


_LEGACY_MARK = "__legacy_hook__"


def _forward_to_legacy(cls: type, old: str, new: str) -> Callable[..., Any]:
    """The ``new`` hook of ``cls``: calls the ``old`` one that ``cls`` overrides (marked, see :func:`_is_legacy`)."""

    def hook(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, old)(*args, **kwargs)

    hook.__name__ = new
    hook.__qualname__ = f"{cls.__qualname__}.{new}"
    hook.__doc__ = f"Forwards to {old}(), the deprecated name of this hook that {cls.__qualname__} overrides."
    setattr(hook, _LEGACY_MARK, old)
    return hook


def _is_legacy(cls: type, new: str) -> bool:
    """Whether ``cls.<new>`` is a forwarder made by ``AdapterBase.__init_subclass__`` for an old hook name."""
    return getattr(getattr(cls, new, None), _LEGACY_MARK, None) is not None


def _family_base(cls: type) -> type:
    spec = _FAMILIES.get(getattr(cls, "family", ""))
    return spec.adapter_base if spec is not None else AdapterBase


class Adapter(AdapterBase):
    """GRU4Rec adapter protocol (implementations/README.md). Subclass it, declare, and register.

    Required black-box surface: :meth:`capabilities`, :meth:`build`, :meth:`fit`, :meth:`item_ids`,
    :meth:`score_prefixes`. Optional black-box+ (the implementation's own inference code):
    :meth:`score_stream`, :meth:`evaluate`. Optional white-box hooks: :meth:`loss_on_scores`,
    :meth:`train_forward`, :meth:`get_weights`, :meth:`set_weights`, :meth:`train_step`, :meth:`trace`,
    :meth:`optimizer_info`. An optional method that is not overridden raises :class:`Unsupported`; checks
    that need it are skipped with the reason. The adapter template for outside maintainers is
    ``implementations/template.py``.

    Deprecated (one release): ``get_params``/``set_params`` are the old names of :meth:`get_weights`/
    :meth:`set_weights` (model weights, not hyperparameters). An adapter that still overrides only the old names
    keeps working (see ``DEPRECATED_HOOKS``); calling the old names on any adapter warns and calls the new ones.

    Data conventions: session frames have ``SessionId`` (int64), ``ItemId`` (int64), ``Time`` (int64 or
    float64) columns, possibly unsorted; the item universe is the set of training items; score matrices are
    float32/float64 with one column per training item in the order of :meth:`item_ids`.
    """

    family: ClassVar[str] = "gru4rec"
    REQUIRED: ClassVar[tuple[str, ...]] = ("capabilities", "build", "fit", "item_ids", "score_prefixes")
    HOOKS: ClassVar[tuple[str, ...]] = (
        "score_stream", "evaluate", "loss_on_scores", "train_forward", "get_weights", "set_weights",
        "train_step", "trace", "optimizer_info",
    )  # fmt: skip
    DEPRECATED_HOOKS: ClassVar[Mapping[str, str]] = {"get_params": "get_weights", "set_params": "set_weights"}

    # -- helpers for subclasses -------------------------------------------------------------------
    def resolve_hparams(self, hparams: Mapping[str, Any]) -> dict[str, Any]:
        """Declared defaults overridden by ``hparams``; raises :class:`Unsupported` for an undeclared name.

        Use it in :meth:`build` so that an inexpressible hyperparameter is loud (HP-4), never ignored.
        """
        declared = self._declared_capabilities().hyperparameters
        for name in hparams:
            if name not in declared:
                raise Unsupported(name, f"{type(self).__name__} does not declare hyperparameter {name!r}")
        out = dict(declared)
        out.update(hparams)
        return out

    def _declared_capabilities(self) -> Capabilities:
        caps = self.capabilities()
        return caps if isinstance(caps, Capabilities) else Capabilities.from_mapping(caps, source=type(self).__name__)

    # -- required ------------------------------------------------------------------------------------
    @abc.abstractmethod
    def capabilities(self) -> Capabilities | Mapping[str, Any]:
        """Declared capabilities in the closed vocabulary of :class:`Capabilities`."""

    @abc.abstractmethod
    def build(self, seed: int, **hparams: Any) -> None:
        """Create a fresh, untrained model with official hyperparameter names.

        Args:
            seed: seeds every random generator the implementation uses.
            **hparams: official GRU4Rec names (``layers``, ``loss``, ``batch_size``, ``learning_rate``,
                ``momentum``, ``dropout_p_embed``, ``dropout_p_hidden``, ``n_sample``, ``sample_alpha``,
                ``bpreg``, ``logq``, ``embedding``, ``constrained_embedding``, ``final_act``, ``elu_param``,
                ``n_epochs``, ``optimizer``); missing ones take the declared defaults.

        Raises:
            Unsupported: for a name or value the implementation cannot express (never ignore it).
        """

    @abc.abstractmethod
    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        """Train on ``train_df`` (pandas DataFrame ``SessionId``, ``ItemId``, ``Time``; may be unsorted).

        Args:
            n_epochs: overrides the built ``n_epochs``; 0 initialises the model without training.

        Returns:
            :class:`FitReport` with one entry per epoch; fields the implementation does not report natively
            are counted by the adapter (wrapping the step function), never invented.
        """

    @abc.abstractmethod
    def item_ids(self) -> Any:
        """Training item ids in the column order of score matrices (1-D int64 array or list)."""

    @abc.abstractmethod
    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> Any:
        """Fresh-state scores of each prefix, in eval mode.

        Args:
            prefixes: item-id sequences; items unknown to training are dropped (never raise); an empty
                prefix after dropping is scored from the zero state.

        Returns:
            float array of shape (len(prefixes), n_items), columns in :meth:`item_ids` order, raw or
            post-activation scores as declared in ``score_semantics``.
        """

    # -- optional black-box+ ---------------------------------------------------------------------
    def score_stream(self, test_df: Any, batch_size: int) -> Iterator[tuple[Any, ...]]:
        """Run the implementation's own session-parallel inference loop over ``test_df``.

        Yields:
            ``(session_id, position, target_item, scores_row)`` per evaluated event, where ``scores_row`` is
            a float array (n_items,) in :meth:`item_ids` order, or an int target rank if only ranks exist.
            ``position`` is the target's index within its session after events of unknown items are dropped
            (the prefix is the session's first ``position`` known items).
        """
        raise Unsupported("score_stream")

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict[str, Any]:
        """The implementation's own evaluator: ``{"recall@N": float, "mrr@N": float, "n_events": int}``."""
        raise Unsupported("evaluate")

    # -- optional white-box hooks ------------------------------------------------------------------
    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        """The implementation's loss (after its own output transform) on a given score matrix.

        Args:
            scores: float array (B, B+S): column j < B is lane j's target (diagonal = positives), the last S
                columns are shared extra negatives.
            loss: a loss name of the vocabulary; ``hparams`` e.g. ``bpreg``, ``elu_param``, ``final_act``,
                ``logq`` with ``column_q`` (float array (B+S,): q_j of every column, already support or
                support^sample_alpha). Unknown keyword → :class:`Unsupported`.

        Returns:
            ``(value, grad)``: the loss value (float) and dL/dscores (float array, same shape).
        """
        raise Unsupported("loss_on_scores")

    def train_forward(self, prefix_batch: Any, seed: int) -> dict[str, Any]:
        """Train-mode forward pass: ``{"embedding_out", "layer_outputs": [...], "scores"}`` as arrays,
        optionally ``"score_tensor_shape"`` and ``"output_rows_touched"`` (SC-2, SO-1).

        ``prefix_batch``: b item-id sequences of one common length ≥ 2, run in training mode (dropout active,
        ``seed`` drives its masks) from the zero state; the result describes the last transition (input = the
        second-to-last item, target = the last): ``embedding_out`` (b, n_in) after embedding dropout,
        ``layer_outputs`` per GRU layer (b, d_l) after hidden dropout, ``scores`` the training score matrix
        (b, B+S) of the step's columns, optionally ``columns`` (their item ids, (B+S,) or per row (b, B+S)),
        ``score_tensor_shape`` (the widest score tensor the step computes) and ``output_rows_touched`` (rows of
        the output weights reached by the step's loss gradient). Nothing is updated."""
        raise Unsupported("train_forward")

    def get_weights(self) -> dict[str, Any]:
        """Model weights as ``{name: float array}`` (GRU gates ordered as ``gate_layout`` declares; axes of
        length n_items in :meth:`item_ids` order; biases 1-D). Hyperparameters are not weights: see :meth:`build`."""
        raise Unsupported("get_weights")

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load weights (all or a subset) in the layout of :meth:`get_weights`."""
        raise Unsupported("set_weights")

    def get_params(self) -> dict[str, Any]:
        """Deprecated name of :meth:`get_weights` (one release): warns and calls it."""
        warnings.warn("Adapter.get_params() is deprecated: call get_weights()", DeprecationWarning, stacklevel=2)
        if _is_legacy(type(self), "get_weights"):  # reached through super() from an old-style override
            raise Unsupported("get_weights")
        return self.get_weights()

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Deprecated name of :meth:`set_weights` (one release): warns and calls it."""
        warnings.warn("Adapter.set_params() is deprecated: call set_weights()", DeprecationWarning, stacklevel=2)
        if _is_legacy(type(self), "set_weights"):
            raise Unsupported("set_weights")
        self.set_weights(params)

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One optimizer step on the given input/target item ids (int arrays (B,)); returns the loss."""
        raise Unsupported("train_step")

    def trace(self, enable: bool = True) -> None:
        """Record :class:`StepTrace` records during the following ``fit`` calls (into ``FitReport.trace``)."""
        raise Unsupported("trace")

    def optimizer_info(self) -> dict[str, Any]:
        """``{"type", "lr_schedule", "initial_accumulator", "eps", "momentum", "grad_clip"}``."""
        raise Unsupported("optimizer_info")


@dataclasses.dataclass(frozen=True)
class FamilySpec:
    """How a family plugs into the harness.

    Attributes:
        name: the family name (also the folder ``conformance/<name>/`` of its checks).
        adapter_base: the family's protocol class (subclass of :class:`AdapterBase`).
        capabilities_cls: the family's :class:`BaseCapabilities` subclass.
        kinds: ordered ``{kind id: title}`` of the check kinds (``@pytest.mark.check(..., kind=...)``).
        marker_prefixes: marker name → feature prefix, e.g. ``{"loss": "loss"}`` makes
            ``@pytest.mark.loss("bpr-max")`` mean ``feature("loss:bpr-max")``.
        description: one line for reports.
        requires: top-level modules the family's check modules import (their presence is probed with
            ``importlib.util.find_spec`` before collection, never imported for the probe).
        extra: the pip extra of ``gru4rec-conformance`` that installs ``requires`` (named in the error when a
            selected implementation's family lacks them).
    """

    name: str
    adapter_base: type
    capabilities_cls: type
    kinds: Mapping[str, str]
    marker_prefixes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    description: str = ""
    requires: tuple[str, ...] = ()
    extra: str | None = None

    def missing_modules(self) -> list[str]:
        """The modules of :attr:`requires` that are not installed here (empty when all are)."""
        import importlib.util

        return [m for m in self.requires if importlib.util.find_spec(m) is None]


_FAMILIES: dict[str, FamilySpec] = {}


def register_family(spec: FamilySpec) -> FamilySpec:
    """Register a family (idempotent for the same spec). Raises ValueError on a conflicting re-registration."""
    old = _FAMILIES.get(spec.name)
    if old is not None and old.adapter_base is not spec.adapter_base:
        raise ValueError(f"family {spec.name!r} is already registered with {old.adapter_base.__qualname__}")
    _FAMILIES[spec.name] = spec
    return spec


def get_family(name: str) -> FamilySpec | None:
    """The registered :class:`FamilySpec` of ``name``, or None."""
    return _FAMILIES.get(name)


def families() -> dict[str, FamilySpec]:
    """All registered families."""
    return dict(_FAMILIES)


GRU4REC_KINDS = {
    "K1": "state reset",
    "K2": "loss formula",
    "K3": "sampling order",
    "K4": "dropout semantics",
    "K5": "optimizer",
    "K6": "hyperparameters",
    "K7": "epoch boundary / batching",
    "K8": "evaluation / ranking",
    "K9": "scalability",
    "K10": "runnability",
    "K11": "initialisation",
    "metric": "metric conformance",
}

register_family(
    FamilySpec(
        name="gru4rec",
        adapter_base=Adapter,
        capabilities_cls=Capabilities,
        kinds=GRU4REC_KINDS,
        marker_prefixes={"loss": "loss", "embedding": "embedding", "final_act": "final_act", "device": "device"},
        description="GRU4Rec session-based recommenders (docs/algorithm.md)",
    )
)


def compile_cache_dir(name: str) -> Path:
    """The compile cache of the implementation registered as ``name`` (level included: ``a:b`` → ``a.b``):
    ``cache_dir() / "compiled" / name``, writable by that implementation's workers only (see
    ``AdapterBase.compile_cache``). Raises ValueError for a name that is not a plain registry name."""
    safe = name.replace(":", ".")
    if not safe or not all(c.isalnum() or c in "._-" for c in safe) or safe.startswith("."):
        raise ValueError(f"compile_cache_dir: {name!r} is not a registry name")
    return cache_dir() / "compiled" / safe


def cache_dir() -> Path:
    """Cache of third-party checkouts and downloads: env ``GRU4REC_CACHE_DIR``, else
    ``~/.cache/gru4rec-conformance``. Workers receive the parent's value explicitly (their HOME is private)."""
    env = os.environ.get("GRU4REC_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "gru4rec-conformance"
