"""The conformance status of one implementation in one run: CONFORMANT, NOT CONFORMANT, INCOMPLETE or UNAVAILABLE,
with the defects found and the coverage (checks run / checks applicable).

The status answers "does this implementation behave as the reference?", and is kept apart from the gate
(:mod:`.gate`: PASSED / FAILED, "did the run measure what was declared?"): a run whose only failures are declared
xfails passes the gate and is NOT CONFORMANT.

Rules (:func:`assess`), over the applicable checks of a run:

- **UNAVAILABLE**: the implementation is not installed / located here, or its adapter cannot be described;
- **NOT CONFORMANT**: some applicable check failed, xfailed or xpassed (an xpass still carries a declared defect:
  the registry says the implementation deviates; the gate fails it as a stale entry). Coverage is still given,
  and ``reasons`` say how many checks were not tested. When a prerequisite check failed (:data:`PREREQUISITES`:
  runnability, epoch count, determinism), the defects of other groups carry ``may_follow_from`` and the reports
  group them under it (:meth:`Conformance.root_causes`);
- **INCOMPLETE**: no defect, but some applicable check did not run to an outcome: the adapter lacks a hook the check
  needs, the implementation refused at run time a value the check passed (``Unsupported``: "refused by the
  implementation at run time", never an absent feature), the run was a subset (``-k`` / ``-m`` / ``--deselect`` / node ids), it was interrupted or killed, or the
  check was skipped or errored for another reason (no data, a setup error, an environment error: a missing module
  or a module of another version, whose record says which ``tox -e`` environment to use);
- **CONFORMANT**: every applicable check ran and passed, none under an xfail.

Applicable: a check whose requirements (``feature`` markers) the implementation declares, hooks aside. A check that
needs an undeclared feature (``loss:bpr-max``, ``device:cuda``, ``hparam:x``) is n/a, "feature absent (declared)",
and is not counted. A check whose every undeclared requirement is a hook (``hook:trace``) is applicable but not
testable: the adapter lacks the hook, and the check counts against coverage. A ``gpu`` check of a CPU run is
n/a for the run (``not_applicable``), as is a check that needs data the run does not have (``outcome_detail``
``data``: the real SST-5 where only the stand-in is present); so are the items standing for xfail-registry problems
(the gate's business).

Inputs are the plain records of a run (the run header, the result records, the end record, as in results.jsonl,
:mod:`.records`). The harness marks what ``assess`` needs machine-readably: a skipped check's ``missing`` (its
undeclared requirements), ``outcome_detail`` (``unsupported``, ``unavailable``, ``device``) and the end record's
``not_run`` (applicable-or-not checks that were deselected or never reached). Records written before schema 1.2
lack them; they are read from the reason texts and the command line (:func:`_legacy_missing`).

This module imports nothing beyond the standard library (reports use it without pytest).
"""

from __future__ import annotations

import collections
import dataclasses
import re
import shlex
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from gru4rec_conformance.conformance._records.xfails import strip_impl_param

__all__ = ["CONFORMANT", "NOT_CONFORMANT", "INCOMPLETE", "UNAVAILABLE", "STATUSES", "DEFECT_KINDS", "Coverage",
           "Defect", "Conformance", "assess", "NOT_SELECTED", "NOT_REACHED", "REGISTRY_CHECK_ID",
           "PREREQUISITES", "attribute_root_causes", "REFERENCE_FEATURES", "FeatureCoverage",
           "feature_coverage", "rerun_command"]  # fmt: skip

CONFORMANT = "CONFORMANT"
NOT_CONFORMANT = "NOT CONFORMANT"
INCOMPLETE = "INCOMPLETE"
UNAVAILABLE = "UNAVAILABLE"
STATUSES = (CONFORMANT, NOT_CONFORMANT, INCOMPLETE, UNAVAILABLE)
#: Defect kinds: the xfail registry's kinds, and ``undeclared`` for a plain failure (no registry entry).
DEFECT_KINDS = ("bug", "design-difference", "numerical", "undeclared")
#: ``not_run`` reasons of the end record: deselected (``-k``, ``-m``, ``--deselect``, node ids), or selected but
#: not reached because the run was interrupted.
NOT_SELECTED = "not selected"
NOT_REACHED = "not reached"
_INTERRUPTED = "the run was interrupted"
#: The check id of the items standing for xfail-registry problems (``collection.XfailRegistryItem``).
REGISTRY_CHECK_ID = "XFAIL-REGISTRY"
#: The study's defect ids (docs/study.md, 'Implementations and their ids': GP, TG, TF, KG, RP, MS) quoted in an xfail's reason or link.
_DEFECT_ID = re.compile(r"\b(?:GP|TG|TF|KG|RP|MS)-\d+\b")
_RAN = ("passed", "failed", "xfail", "xpass")
#: Prerequisite checks, most fundamental first: ``{check id: what it establishes}``. When one failed (every recorded
#: instance of it: a check parametrized over options counts only when no option works), the failures of checks of
#: other kinds *may follow from* it: a model that does not run, trains a wrong number of epochs or is not
#: deterministic fails checks that are about something else (root-cause attribution).
PREREQUISITES: Mapping[str, str] = MappingProxyType(
    {"RN-1": "runnability", "EB-3": "epoch count", "DO-1": "determinism"}
)
#: The features the reference implementation of each family declares, in the family's closed vocabulary
#: (``implementations.base.Capabilities``, ``FinetunerCapabilities``): what a verdict's "features N/M" counts.
#: Devices are left out (the device is the run's, its header's ``device``). A test keeps these equal to the
#: reference adapters' declarations.
REFERENCE_FEATURES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "gru4rec": (
        "loss:bpr", "loss:bpr-max", "loss:cross-entropy", "loss:top1", "loss:top1-max",
        "embedding:none", "embedding:separate", "embedding:shared", "session_parallel", "in_batch_negatives",
        "extra_shared_negatives", "sample_alpha", "logq", "adagrad_momentum", "dropout_embed", "dropout_hidden",
        "separate_dropouts", "final_act:elu", "final_act:leaky", "final_act:linear", "final_act:relu",
        "final_act:selu", "final_act:softmax", "final_act:tanh", "bpreg", "full_ranking",
    ),
    "finetuner": (
        "model:albert", "model:bert", "model:distilbert", "model:roberta", "encode_max_length", "early_stopping",
        "save_pretrained", "lr_trace", "manifest", "seed", "configurable_optimizer",
    ),
})  # fmt: skip
#: Options that make a run a subset of the collected checks (read from the command of a pre-1.2 run).
_SUBSET_OPTIONS = ("-k", "-m", "--deselect", "--lf", "--last-failed", "--sw", "--stepwise")


def _frozen(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


@dataclasses.dataclass(frozen=True)
class Coverage:
    """How much of an implementation a run examined.

    Attributes:
        ran: applicable checks that ran to an outcome (passed, failed, xfail, xpass).
        applicable: checks the implementation's declared features make applicable: ``ran`` plus the not-testable
            (``missing_hook``), ``not_selected`` and ``other_not_run`` ones.
        by_kind: check group (``K1`` .. ``K11``, ``metric``, the fine-tuner's kinds) → ``(ran, applicable)``.
        feature_absent: n/a checks: they need a feature the implementation declares absent (not in ``applicable``).
        missing_hook: hook name → applicable checks not testable because the adapter lacks that hook (a check
            lacking two hooks counts under the first).
        not_selected: applicable checks deselected (``-k`` / ``-m`` / ``--deselect``) or never reached (interrupt).
        other_not_run: reason → applicable checks skipped or errored before they ran (no data, setup error, ...).
        not_applicable: reason → checks n/a for this run other than absent features (``gpu`` checks of a CPU run);
            not in ``applicable``.
        unknown_not_run: why an unknown number of applicable checks is missing, or None: the run was killed (no
            end record), or it predates the end record's ``not_run`` and was a subset (``applicable`` is then a
            lower bound).
        hooks_absent: hook name → the adapter's declared reason why the implementation cannot express it
            (``HOOKS_ABSENT``), for hooks in ``missing_hook``.
        refused: what the implementation refused at run time (``Unsupported``, outcome detail ``refused``: a
            value such as ``layers:[24, 12]`` or ``n_sample``) → applicable checks not tested because of it. Never
            n/a and never counted as ran: the checks' declared requirements were met.
    """

    ran: int
    applicable: int
    by_kind: Mapping[str, tuple[int, int]]
    feature_absent: int
    missing_hook: Mapping[str, int]
    not_selected: int
    other_not_run: Mapping[str, int]
    not_applicable: Mapping[str, int] = dataclasses.field(default_factory=lambda: _frozen({}))
    unknown_not_run: str | None = None
    hooks_absent: Mapping[str, str] = dataclasses.field(default_factory=lambda: _frozen({}))
    refused: Mapping[str, int] = dataclasses.field(default_factory=lambda: _frozen({}))

    @property
    def percent(self) -> float | None:
        """``100 * ran / applicable`` (None when nothing is applicable)."""
        return 100.0 * self.ran / self.applicable if self.applicable else None

    @property
    def not_tested(self) -> int:
        """Applicable checks that did not run to an outcome."""
        return self.applicable - self.ran

    def figure(self) -> str:
        """``61/88 (69%)`` (``0/0`` when nothing is applicable); a ``+`` marks an unknown number not reached."""
        pct = self.percent
        plus = "+" if self.unknown_not_run is not None else ""
        return f"{self.ran}/{self.applicable}{plus}" + (f" ({pct:.0f}%)" if pct is not None else "")

    def why_not_tested(self) -> list[str]:
        """The not-tested applicable checks by cause, e.g. ``["10 not selected", "2 adapter lacks hook trace"]``."""
        out = [
            f"{n} adapter lacks hook {h}"
            + (f" (cannot be expressed: {self.hooks_absent[h]})" if h in self.hooks_absent else "")
            for h, n in sorted(self.missing_hook.items())
        ]
        if self.refused:
            names = ", ".join(self.refused)
            out.append(f"{sum(self.refused.values())} refused by the implementation at run time ({names})")
        if self.not_selected:
            out.append(f"{self.not_selected} not selected or not reached")
        out += [f"{n} {why}" for why, n in sorted(self.other_not_run.items())]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "ran": self.ran, "applicable": self.applicable, "percent": self.percent,
            "by_kind": {k: list(v) for k, v in self.by_kind.items()}, "feature_absent": self.feature_absent,
            "missing_hook": dict(self.missing_hook), "not_selected": self.not_selected,
            "other_not_run": dict(self.other_not_run), "not_applicable": dict(self.not_applicable),
            "unknown_not_run": self.unknown_not_run, "hooks_absent": dict(self.hooks_absent),
            "refused": dict(self.refused),
        }  # fmt: skip

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Coverage:
        return cls(
            ran=int(d["ran"]), applicable=int(d["applicable"]),
            by_kind=_frozen({k: (int(v[0]), int(v[1])) for k, v in (d.get("by_kind") or {}).items()}),
            feature_absent=int(d.get("feature_absent", 0)), missing_hook=_frozen(d.get("missing_hook") or {}),
            not_selected=int(d.get("not_selected", 0)), other_not_run=_frozen(d.get("other_not_run") or {}),
            not_applicable=_frozen(d.get("not_applicable") or {}), unknown_not_run=d.get("unknown_not_run"),
            hooks_absent=_frozen(d.get("hooks_absent") or {}),
            refused=_frozen({str(k): int(v) for k, v in (d.get("refused") or {}).items()}),
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class FeatureCoverage:
    """Which of the reference's features (:data:`REFERENCE_FEATURES`) an implementation declares.

    Attributes:
        family: the implementation's family.
        has: the reference's features it declares, in vocabulary order.
        lacks: those it does not declare (its checks are n/a: never tested, so never part of a CONFORMANT).
    """

    family: str
    has: tuple[str, ...]
    lacks: tuple[str, ...]

    @property
    def total(self) -> int:
        return len(self.has) + len(self.lacks)

    def figure(self) -> str:
        """``9/26``: features declared / the reference's."""
        return f"{len(self.has)}/{self.total}"

    def lacks_text(self, max_names: int | None = 6) -> str:
        """The lacking features, e.g. ``loss:bpr, loss:bpr-max, +13 more`` (all of them with ``max_names=None``)."""
        names = list(self.lacks)
        if max_names is None or len(names) <= max_names:
            return ", ".join(names)
        return ", ".join(names[:max_names]) + f", +{len(names) - max_names} more"

    def text(self, max_names: int | None = 6) -> str:
        """``features 9/26 (lacks loss:bpr, ..., +13 more)``, or ``features 26/26``."""
        return f"features {self.figure()}" + (f" (lacks {self.lacks_text(max_names)})" if self.lacks else "")

    def report_text(self) -> str:
        """The reports' line, every lacking feature named: ``features 9/26 of the reference's declared; lacks
        loss:bpr, ... (their checks are n/a: never tested)``."""
        text = f"features {self.figure()} of the reference's declared"
        return text + (f"; lacks {self.lacks_text(None)} (their checks are n/a: never tested)" if self.lacks
                       else "")  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "has": list(self.has), "lacks": list(self.lacks)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FeatureCoverage:
        return cls(family=str(d["family"]), has=tuple(str(x) for x in d.get("has") or ()),
                   lacks=tuple(str(x) for x in d.get("lacks") or ()))  # fmt: skip


def feature_coverage(header: Mapping[str, Any]) -> FeatureCoverage | None:
    """The :class:`FeatureCoverage` of a run's implementation from its header's ``impl.features``; None for the
    reference itself (the yardstick), a family without :data:`REFERENCE_FEATURES`, or an implementation whose
    declaration is unknown (no capabilities recorded)."""
    impl = header.get("impl") or {}
    ref = REFERENCE_FEATURES.get(str(impl.get("family") or ""))
    declared = impl.get("features")
    if ref is None or impl.get("role") == "reference" or not isinstance(declared, Mapping):
        return None
    if not any(f in declared for f in ref):
        return None
    return FeatureCoverage(family=str(impl["family"]), has=tuple(f for f in ref if declared.get(f) is True),
                           lacks=tuple(f for f in ref if declared.get(f) is not True))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Defect:
    """One applicable check that found a deviation.

    Attributes:
        check: the check's id as xfail files name it (node id relative to the suite's folder).
        kind: ``bug`` / ``design-difference`` / ``numerical`` (the xfail entry's kind), or ``undeclared`` (a
            failure no entry declares).
        defect_ids: the study's defect ids (docs/study.md, e.g. ``GP-12``) of the entry's ``defect`` and those quoted in its reason
            or link; empty if none.
        fix_level: the entry's study fix level (``OOB`` .. ``NEVER``, ``NOT-IN-STUDY``), or None.
        figure: the measured figure when the record has one, e.g. ``recall@20 0.633 vs 0.690 (-8.3%)``.
        check_id: the ``@check`` id (``SR-1``), or None.
        outcome: the record's outcome (``failed``, ``xfail``, ``xpass``).
        group: the check's group (``K1`` .. ``K11``, ``metric``, a fine-tuner kind).
        may_follow_from: the failed :data:`PREREQUISITES` this failure may follow from (empty when none failed or
            the check is of the prerequisite's own group); see :func:`attribute_root_causes`.
    """

    check: str
    kind: str
    defect_ids: tuple[str, ...]
    fix_level: str | None
    figure: str | None
    check_id: str | None = None
    outcome: str = "failed"
    group: str | None = None
    may_follow_from: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "kind": self.kind, "defect_ids": list(self.defect_ids),
                "fix_level": self.fix_level, "figure": self.figure, "check_id": self.check_id,
                "outcome": self.outcome, "group": self.group,
                "may_follow_from": list(self.may_follow_from)}  # fmt: skip

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Defect:
        return cls(check=str(d["check"]), kind=str(d["kind"]), defect_ids=tuple(d.get("defect_ids") or ()),
                   fix_level=d.get("fix_level"), figure=d.get("figure"), check_id=d.get("check_id"),
                   outcome=str(d.get("outcome", "failed")), group=d.get("group"),
                   may_follow_from=tuple(d.get("may_follow_from") or ()))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Conformance:
    """The conformance status of one implementation in one run (see the module docstring for the rules).

    Attributes:
        status: one of :data:`STATUSES`.
        defects: the applicable checks that found a deviation, in run order.
        counts_by_kind: defect kind (:data:`DEFECT_KINDS`) → number of defects, kinds with none left out.
        coverage: checks run / applicable.
        reasons: human text: why NOT CONFORMANT / INCOMPLETE / UNAVAILABLE (empty for CONFORMANT).
        features: which of the reference's features the implementation declares (None: unknown, or the
            reference itself); a CONFORMANT on a subset reads ``CONFORMANT on 9/26 features``
            (:meth:`status_label`).
    """

    status: str
    defects: tuple[Defect, ...]
    counts_by_kind: Mapping[str, int]
    coverage: Coverage
    reasons: tuple[str, ...]
    features: FeatureCoverage | None = None

    def status_label(self) -> str:
        """The status as reports print it: ``CONFORMANT on 9/26 features`` when the implementation lacks some of
        the reference's features (so that it cannot be read as full conformance), else :attr:`status`."""
        f = self.features
        if self.status == CONFORMANT and f is not None and f.lacks:
            return f"{CONFORMANT} on {f.figure()} features"
        return self.status

    def _features_text(self) -> str:
        """``; features 9/26 (lacks ...); 68 checks n/a (feature absent)`` for the terminal line ("" when the
        feature coverage is unknown and no check was n/a)."""
        f, cov = self.features, self.coverage
        text = ""
        if f is not None:
            text += f"; lacks {f.lacks_text()}" if self.status_label() != self.status else f"; {f.text()}"
        if cov.feature_absent:
            text += f"; {cov.feature_absent} check{'s' if cov.feature_absent != 1 else ''} n/a (feature absent)"
        return text

    @property
    def defect_ids(self) -> tuple[str, ...]:
        """The catalogue ids of all defects, sorted and without repeats."""
        return tuple(sorted({i for d in self.defects for i in d.defect_ids}, key=_id_key))

    def root_causes(self) -> dict[str, list[Defect]]:
        """``{failed prerequisite check id: the defects that may follow from it}`` (first-named prerequisite of each
        defect), in :data:`PREREQUISITES` order; empty when no prerequisite failed or nothing follows from one."""
        out: dict[str, list[Defect]] = {c: [] for c in PREREQUISITES}
        for d in self.defects:
            if d.may_follow_from:
                out.setdefault(d.may_follow_from[0], []).append(d)
        return {c: ds for c, ds in out.items() if ds}

    def root_cause_lines(self) -> list[str]:
        """One line per failed prerequisite with followers, e.g. ``"3 failure(s) may follow from EB-3 (epoch
        count): HP-1, SR-3, LF-1"`` (check ids without repeats); for the terminal summary and the reports."""
        lines = []
        for cause, ds in self.root_causes().items():
            ids = list(dict.fromkeys(d.check_id or d.check for d in ds))
            lines.append(f"{len(ds)} failure(s) may follow from {cause} ({PREREQUISITES.get(cause, 'prerequisite')}): "
                         + ", ".join(ids))  # fmt: skip
        return lines

    def line(self, impl: str, family: str | None = None, max_ids: int = 8) -> str:
        """The one terminal line, e.g. ``torch_gru4rec: NOT CONFORMANT — 3 bug, 1 design-difference (TG-3, TG-6);
        coverage 61/88 (69%)``; ``family`` (when given) follows the status in brackets (``reference: CONFORMANT
        [gru4rec] — ...``); at most ``max_ids`` defect ids are listed (then ``+N more``)."""
        head = f"{impl}: {self.status_label()}" + (f" [{family}]" if family else "") + " — "
        cov = f"coverage {self.coverage.figure()}"
        if self.status == CONFORMANT:
            na = ", ".join(f"{n} {why}" for why, n in self.coverage.not_applicable.items())
            return head + cov + self._features_text() + (f"; n/a on this run: {na}" if na else "")
        if self.status == UNAVAILABLE:
            return head + ("; ".join(self.reasons) or "not available here")
        if self.status == NOT_CONFORMANT:
            kinds = ", ".join(f"{n} {k}" for k, n in self.counts_by_kind.items())
            ids = self.defect_ids
            shown = ", ".join(ids[:max_ids]) + (f", +{len(ids) - max_ids} more" if len(ids) > max_ids else "")
            text = head + kinds + (f" ({shown})" if ids else "") + f"; {cov}" + self._features_text()
            causes = self.root_causes()
            if causes:
                text += "; " + ", ".join(f"{len(ds)} may follow from {c}" for c, ds in causes.items())
            if self.coverage.not_tested or self.coverage.unknown_not_run is not None:
                text += f"; incomplete: {self._not_tested_text()}"
            return text
        text = self._not_tested_text()
        if _INTERRUPTED in self.reasons:
            text = f"{_INTERRUPTED}; {text}"
        return head + f"{text}; {cov}" + self._features_text()

    def _not_tested_text(self) -> str:
        causes = self.coverage.why_not_tested()
        n = self.coverage.not_tested
        parts = [f"{n} not tested" + (f" ({', '.join(causes)})" if causes else "")] if n else []
        if self.coverage.unknown_not_run is not None:
            parts.append(self.coverage.unknown_not_run)
        if not parts and not self.coverage.ran:
            parts.append("nothing applicable was tested")
        return "; ".join(parts) or "all applicable checks ran"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (``results.json``'s ``conformance``); :meth:`from_json` reads it back."""
        return {
            "status": self.status,
            "defects": [d.to_json() for d in self.defects],
            "counts_by_kind": dict(self.counts_by_kind),
            "defect_ids": list(self.defect_ids),
            "coverage": self.coverage.to_json(),
            "reasons": list(self.reasons),
            "features": self.features.to_json() if self.features is not None else None,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Conformance:
        """Raises ``KeyError`` / ``ValueError`` for data that is not :meth:`to_json`'s."""
        if d["status"] not in STATUSES:
            raise ValueError(f"conformance status {d['status']!r} is not one of {list(STATUSES)}")
        return cls(
            status=str(d["status"]),
            defects=tuple(Defect.from_json(x) for x in d.get("defects") or ()),
            counts_by_kind=_frozen({str(k): int(v) for k, v in (d.get("counts_by_kind") or {}).items()}),
            coverage=Coverage.from_json(d["coverage"]),
            reasons=tuple(str(r) for r in d.get("reasons") or ()),
            features=FeatureCoverage.from_json(d["features"]) if d.get("features") else None,
        )


def _id_key(defect_id: str) -> tuple[str, int]:
    prefix, _, num = defect_id.partition("-")
    return (prefix, int(num) if num.isdigit() else 0)


# -- applicability ---------------------------------------------------------------------------------------------
def _legacy_missing(record: Mapping[str, Any]) -> list[str] | None:
    """LEGACY (records before schema 1.2, without ``missing``): the undeclared requirements named in a
    skipped-unsupported reason (``unsupported by X: needs hook:trace, loss:bpr-max (not declared)``); None when the
    reason does not list them (an ``Unsupported`` raised by the adapter: read as an absent feature)."""
    m = re.search(r": needs (.+?) \(not declared\)", str(record.get("reason") or ""))
    return [s.strip() for s in m.group(1).split(",")] if m else None


def _missing_hooks(missing: Sequence[str]) -> list[str] | None:
    """The hooks of ``missing`` when every undeclared requirement is a hook (the check is applicable but not
    testable); None when some is a feature (the check is n/a)."""
    hooks = [m.split(":", 1)[1] for m in missing if m.startswith("hook:")]
    return hooks if hooks and len(hooks) == len(missing) else None


def _needs_other_device(record: Mapping[str, Any]) -> bool:
    """Whether a skipped check needs a device the run does not use (legacy records: the reason says so)."""
    detail = record.get("outcome_detail")
    return detail == "device" or (detail is None and str(record.get("reason") or "").startswith("needs a GPU"))


def _check_path(record: Mapping[str, Any]) -> str:
    """The check's id as xfail files name it: ``conformance/<family>/<file>.py::<test>[<params>]`` without the
    implementation's parameter (node ids of a ``--pyargs`` run point into site-packages: cut before
    ``conformance/``)."""
    nodeid = str(record.get("nodeid") or "?")
    path, sep, rest = nodeid.partition("::")
    m = re.search(r"(?:^|/)(conformance/.*)$", path)
    rel = (m.group(1) if m else path) + sep + rest
    return strip_impl_param(rel, str(record.get("impl") or "")) if record.get("impl") else rel


def _is_registry_item(record: Mapping[str, Any]) -> bool:
    return ((record.get("check") or {}).get("id")) == REGISTRY_CHECK_ID


def _kind(record: Mapping[str, Any]) -> str:
    check = record.get("check") or {}
    return str(check.get("kind") or record.get("kind") or "(no kind)")


def _short_reason(record: Mapping[str, Any]) -> str:
    """The ``other_not_run`` key of a check that did not run: ``error: <first line>`` or ``skipped: <...>``."""
    text = (str(record.get("reason") or "").strip().splitlines() or [""])[0]
    text = re.sub(r"\s+", " ", text)[:80]
    return f"{'error' if record.get('outcome') == 'error' else 'skipped'}" + (f": {text}" if text else "")


def _figure(record: Mapping[str, Any]) -> str | None:
    """The measured figure of a record: the metrics outside their band (``within`` False), joined by ``; ``, when
    any is; else its recall@20 metric if any, else its first metric with a reference. A passing metric never
    stands for a check that failed on another one."""
    metrics = [m for m in record.get("metrics") or () if isinstance(m.get("value"), (int, float))]
    with_ref = [m for m in metrics if isinstance(m.get("reference"), (int, float))]
    picks = [m for m in with_ref if m.get("within") is False]
    if not picks:
        pick = next((m for m in with_ref if str(m.get("name", "")).lower() == "recall@20"), None)
        pick = pick or (with_ref[0] if with_ref else None)
        picks = [pick] if pick is not None else []
    if not picks:
        return None
    return "; ".join(_metric_text(m) for m in picks)


def _metric_text(metric: Mapping[str, Any]) -> str:
    """``name value vs reference (Δ%)`` of one metric entry with a numeric value and reference."""
    value, ref = float(metric["value"]), float(metric["reference"])
    rel = f" ({(value - ref) / abs(ref):+.1%})" if ref else ""
    return f"{metric['name']} {value:.4g} vs {ref:.4g}{rel}"


def _defect(record: Mapping[str, Any]) -> Defect:
    xf = record.get("xfail") or {}
    ids: list[str] = []
    if xf.get("defect"):
        ids.append(str(xf["defect"]))
    for text in (xf.get("reason"), xf.get("link")):
        ids += _DEFECT_ID.findall(str(text or ""))
    kind = str(xf["kind"]) if xf and record.get("outcome") in ("xfail", "xpass") and xf.get("kind") else "undeclared"
    return Defect(
        check=_check_path(record),
        kind=kind,
        defect_ids=tuple(dict.fromkeys(ids)),
        fix_level=xf.get("fix_level") if kind != "undeclared" else None,
        figure=_figure(record),
        check_id=(record.get("check") or {}).get("id"),
        outcome=str(record.get("outcome")),
        group=_kind(record),
    )


def _failed_prerequisites(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``{prerequisite check id: its group}`` of the :data:`PREREQUISITES` every recorded instance of which failed
    (``failed``, ``xfail`` or ``error``); instances that were skipped do not count either way."""
    seen: dict[str, list[bool]] = collections.defaultdict(list)
    group: dict[str, str] = {}
    for r in records:
        cid = str((r.get("check") or {}).get("id"))
        if cid in PREREQUISITES and r.get("outcome") in (*_RAN, "error"):
            seen[cid].append(r.get("outcome") in ("failed", "xfail", "error"))
            group[cid] = _kind(r)
    return {c: group[c] for c in PREREQUISITES if seen.get(c) and all(seen[c])}


def attribute_root_causes(defects: Sequence[Defect], records: Sequence[Mapping[str, Any]]) -> tuple[Defect, ...]:
    """``defects`` with ``may_follow_from`` set: each defect of another group than a failed prerequisite (and not
    that prerequisite itself, nor a prerequisite named before it) may follow from it (:data:`PREREQUISITES`).

    A prerequisite can follow from an earlier one (DO-1 from RN-1), never from a later one, and one that follows
    from an earlier one is no root cause of others. Pure function of the records, so results.json, the cards and
    the terminal group the same failures."""
    failed = _failed_prerequisites(records)
    if not failed:
        return tuple(defects)
    order = list(PREREQUISITES)
    roots: dict[str, str] = {}  # a failed prerequisite that may itself follow from an earlier one is no root
    for c, g in failed.items():
        if not any(rg != g for rg in roots.values()):
            roots[c] = g
    failed = roots
    out = []
    for d in defects:
        rank = order.index(d.check_id) if d.check_id is not None and d.check_id in PREREQUISITES else len(order)
        causes = tuple(c for c, g in failed.items() if order.index(c) < rank and d.group != g)
        out.append(dataclasses.replace(d, may_follow_from=causes) if causes else d)
    return tuple(out)


def _subset_args(command: Sequence[str]) -> list[str]:
    """The selection options of a command line (``-k EXPR``, ``-m EXPR``, ``--deselect ID``, node ids), each
    shortened to 60 characters; empty for a run of everything collected."""
    out: list[str] = []
    for i, a in enumerate(command):
        if a in _SUBSET_OPTIONS:
            takes_value = a in ("-k", "-m", "--deselect") and i + 1 < len(command)
            out.append(f"{a} {command[i + 1]!r}" if takes_value else a)
        elif a.split("=", 1)[0] in _SUBSET_OPTIONS or "::" in a:
            out.append(a)
    return [x if len(x) <= 60 else x[:57] + "..." for x in out]


#: Options of a run that a rerun of one check keeps (they change what or how it measures, or where it reports),
#: with whether they take a value; every other argument (selection, -x, xdist, --gate, --resume, --refresh,
#: output) is dropped.
_RERUN_KEEP = {"--device": True, "--dataset": True, "--xfails": True, "--isolation": True, "--seeds": True,
               "--call-timeout": True, "--worker-network": True, "--worker-memory-mb": True, "--worker-threads": True,
               "--sandbox": True, "--xfail-mark": True, "--report-dir": True, "-p": True, "-c": True,
               "--rootdir": True, "-o": True, "--override-ini": True, "--no-report": False,
               "--no-report-plots": False, "--allow-unsandboxed": False, "--keep-worker-dirs": False,
               "--first-run": False}  # fmt: skip
#: Options of pytest and its plugins that take a value and are dropped (so their value is not read as a path).
_DROP_WITH_VALUE = ("-k", "-m", "--deselect", "-n", "--numprocesses", "--dist", "--maxfail", "--junitxml",
                    "--junit-xml", "--resume", "--refresh", "--basetemp", "-W", "--tb", "-r", "--durations",
                    "--timeout", "--ignore", "--confcutdir", "--log-level", "--capture")  # fmt: skip


def rerun_command(command: Sequence[str], nodeid: str, impl: str) -> str:
    """The one shell command that reruns just the check ``nodeid`` of implementation ``impl`` as the run
    ``command`` (the header's ``command``: ``["pytest", *args]``) ran it: ``pytest '<nodeid>' --impl <spec>`` and
    the options that change how it measures (:data:`_RERUN_KEEP`: ``--device``, ``--dataset``, ``--xfails``,
    timeouts, ...). ``--impl`` keeps the run's own spelling of the implementation (an import path stays one) when
    exactly one of its comma-separated values names it or one is an import path; else ``impl``. Arguments are
    shell-quoted. Never raises."""
    args = [str(a) for a in command[1:]]
    kept: list[str] = []
    impl_values: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        name, eq, value = a.partition("=")
        if name == "--impl":
            if not eq and i + 1 < len(args):
                value, i = args[i + 1], i + 1
            impl_values += [v.strip() for v in value.split(",") if v.strip()]
        elif name in _RERUN_KEEP:
            kept.append(a)
            if _RERUN_KEEP[name] and not eq and i + 1 < len(args):
                kept.append(args[i + 1])
                i += 1
        elif name.startswith("-p") and len(name) > 2 and not name.startswith("--"):
            kept.append(a)  # -pno:cacheprovider
        elif name in _DROP_WITH_VALUE and not eq:
            i += 1
        i += 1
    named = [v for v in impl_values if v == impl] or [v for v in impl_values if ":" in v]
    spec = named[0] if len(named) == 1 else impl
    return " ".join(shlex.quote(x) for x in ["pytest", nodeid, "--impl", spec, *kept])


def assess(header: Mapping[str, Any], records: Sequence[Mapping[str, Any]],
           end: Mapping[str, Any] | None) -> Conformance:  # fmt: skip
    """The conformance status of the implementation of one run directory.

    Args:
        header: the run record (``results.jsonl``'s first line; results.json's ``run``).
        records: its result records (the last one per node id, as ``reports.results.load_run`` gives them).
        end: its end record, or None for a run that was killed (then the run is at best INCOMPLETE). The end
            record's ``not_run`` (``{nodeid: {"reason": "not selected" | "not reached", "check": {...},
            "missing": [...], "markers": [...]}}``) lists the checks that were collected but gave no record.

    Returns:
        The :class:`Conformance`; never raises for well-formed records (unknown fields are ignored).
    """
    impl = header.get("impl") or {}
    recorded = {str(r.get("nodeid")) for r in records}
    by_kind: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    missing_hook: collections.Counter[str] = collections.Counter()
    refused: collections.Counter[str] = collections.Counter()
    other: collections.Counter[str] = collections.Counter()
    not_applicable: collections.Counter[str] = collections.Counter()
    feature_absent = not_selected = ran = 0
    defects: list[Defect] = []
    unavailable_why: list[str] = []
    device = str(header.get("device") or "cpu")

    def applicable(kind: str, did_run: bool) -> None:
        nonlocal ran
        by_kind[kind][1] += 1
        if did_run:
            by_kind[kind][0] += 1
            ran += 1

    for r in records:
        outcome = r.get("outcome")
        if _is_registry_item(r):
            continue  # an xfail-registry problem, not a check of the implementation: the gate fails it
        kind = _kind(r)
        if outcome in _RAN:
            applicable(kind, True)
            if outcome != "passed":
                defects.append(_defect(r))
            continue
        if outcome == "skipped-unsupported" and r.get("outcome_detail") == "refused":
            applicable(kind, False)  # refused at run time: not tested, never an absent feature
            refused[", ".join(r.get("missing") or ()) or "(unnamed)"] += 1
            continue
        if outcome == "skipped-unsupported":
            missing = r.get("missing") if "missing" in r else _legacy_missing(r)
            hooks = _missing_hooks(missing) if missing is not None else None
            if hooks:
                applicable(kind, False)
                missing_hook[hooks[0]] += 1
            else:
                feature_absent += 1
            continue
        if outcome == "skipped" and r.get("outcome_detail") == "unavailable":
            unavailable_why.append(str(r.get("unavailable") or ""))
            applicable(kind, False)
            other["not run: implementation unavailable"] += 1
            continue
        if outcome == "skipped" and _needs_other_device(r):
            not_applicable[f"needs a GPU (run on {device})"] += 1
            continue
        if outcome == "skipped" and r.get("outcome_detail") == "data":
            not_applicable["needs data this run does not have"] += 1
            continue
        if outcome == "skipped" and r.get("outcome_detail") == "environment":
            applicable(kind, False)  # not a defect, and not tested: never CONFORMANT
            tox = re.search(r"`tox -e [^`]+`", str(r.get("reason") or ""))
            other["not run: environment error" + (f" (run {tox.group(0)})" if tox else "")] += 1
            continue
        applicable(kind, False)
        other[_short_reason(r)] += 1

    not_run = (end or {}).get("not_run")
    for nodeid, entry in (not_run or {}).items():
        if nodeid in recorded or not isinstance(entry, Mapping):
            continue
        missing = list(entry.get("missing") or ())
        if "gpu" in (entry.get("markers") or ()) and device != "cuda":
            continue  # n/a for this run whether selected or not: not counted
        if missing and _missing_hooks(missing) is None:
            continue  # n/a (feature absent); a deselected n/a check is not counted at all
        check = entry.get("check") or {}
        applicable(str(check.get("kind") or "(no kind)"), False)
        not_selected += 1

    command = [str(a) for a in header.get("command") or ()]
    subset = _subset_args(command) if not_run is None else []
    # an interrupted run whose end record lists no check as not reached did not know its plan (pytest-xdist
    # workers report what they collected only when they finish): what it did not reach is unknown
    lists_not_reached = any(isinstance(e, Mapping) and e.get("reason") == NOT_REACHED for e in (not_run or {}).values())
    unknown = (
        "the run was killed: checks it did not reach are not counted" if end is None
        else f"{_INTERRUPTED}: checks it did not reach are not counted"
        if end.get("status") == "interrupted" and not lists_not_reached
        else f"a subset run ({' '.join(subset)}): checks not selected are not counted" if subset
        else None
    )  # fmt: skip
    coverage = Coverage(
        ran=ran,
        applicable=sum(v[1] for v in by_kind.values()),
        by_kind=_frozen({k: (v[0], v[1]) for k, v in sorted(by_kind.items(), key=lambda kv: _kind_key(kv[0]))}),
        feature_absent=feature_absent,
        missing_hook=_frozen(dict(sorted(missing_hook.items()))),
        not_selected=not_selected,
        other_not_run=_frozen(dict(sorted(other.items()))),
        not_applicable=_frozen(dict(sorted(not_applicable.items()))),
        unknown_not_run=unknown,
        hooks_absent=_frozen({h: str(w) for h, w in (impl.get("hooks_absent") or {}).items() if h in missing_hook}),
        refused=_frozen(dict(sorted(refused.items()))),
    )
    defects = list(attribute_root_causes(defects, records))
    counts = collections.Counter(d.kind for d in defects)
    counts_by_kind = _frozen({k: counts[k] for k in DEFECT_KINDS if counts[k]})

    reasons: list[str] = []
    why_unavailable = impl.get("unavailable") or (unavailable_why[0] if unavailable_why else None)
    if impl.get("error") and not why_unavailable:
        reasons.append(f"the adapter cannot be described: {impl['error']}")
    elif why_unavailable and (impl.get("unavailable") or (records and len(unavailable_why) == len(records))):
        reasons.append(f"not available here: {why_unavailable}")
    features = feature_coverage(header)
    if reasons:
        return Conformance(UNAVAILABLE, tuple(defects), counts_by_kind, coverage, tuple(reasons), features)

    if defects:
        reasons.append(", ".join(f"{n} {k}" for k, n in counts_by_kind.items()) + " defect(s) found")
    if unknown is not None:
        reasons.append(unknown)
    elif end is not None and end.get("status") == "interrupted":
        reasons.append(_INTERRUPTED)
    if coverage.not_tested:
        reasons.append(f"incomplete: {coverage.not_tested} not tested ({', '.join(coverage.why_not_tested())})")
    if not records and not not_run:
        reasons.append("no check ran")
    if defects:
        status = NOT_CONFORMANT
    elif reasons:
        status = INCOMPLETE
    else:
        status = CONFORMANT
    conformance = Conformance(status, tuple(defects), counts_by_kind, coverage, tuple(reasons), features)
    follows = conformance.root_cause_lines()
    if follows:  # right after "N defect(s) found"
        reasons[1:1] = follows
        conformance = dataclasses.replace(conformance, reasons=tuple(reasons))
    return conformance


def _kind_key(kind: str) -> tuple[int, int, str]:
    """K1 < K2 < ... < K11 < other kinds (alphabetical)."""
    m = re.fullmatch(r"K(\d+)", kind)
    return (0, int(m.group(1)), "") if m else (1, 0, kind)
