"""Differential diagnosis of a failed check: a failure names its cause only when a probe isolated it.

A check that can fail for more than one reason declares its candidate causes, each with a discriminating probe
(an ablation, a controlled input, a comparison of two hooks of the same model). The probes run only after the
check has failed, so a passing check costs nothing extra::

    if not ok:
        diagnosis.fail("score_stream differs from fresh-state scoring: ...", [
            Cause("the evaluator masks the session's items", lambda: probe_masking(model)),
            Cause("hidden state leaks across sessions", lambda: probe_state(model)),
        ])

A probe returns a :class:`Finding` (:func:`confirmed`, :func:`ruled_out` or :func:`undecided`, each with the
evidence it saw). The message then reads

- ``isolated: <cause> (<evidence>)`` for every cause whose probe confirmed it, followed by
  ``ruled out: <cause> (<evidence>)`` / ``not decided: <cause> (<evidence>)`` for the others;
- ``cause not isolated; candidates: <cause> (<evidence>), ...`` when no probe confirmed a cause (every cause
  still in question is listed, with what its probe saw; the ruled-out ones follow).

The candidate causes of a check are declared once, as a table of :class:`Candidate` rows (the cause and the probe
that decides it), on the check function with :func:`causes`; the check builds its :class:`Cause` list from the same
rows (:meth:`Candidate.cause`), and ``docs/checks.md`` prints the table (:func:`table_of`)::

    LEAK = Candidate("hidden state leaks across sessions", "compare score_stream with fresh-state scores")

    @diagnosis.causes(LEAK, MASK)
    def test_sr1(...):
        ...
        diagnosis.fail("...", [LEAK.cause(probe_state), MASK.cause(probe_masking)])

A probe that raises (a hook the implementation lacks, a crash) counts as undecided with the exception named: the
diagnosis never hides the check's own failure. A probe must not call ``impl.require`` or ``pytest.skip``
(they would turn the failed check into a skip); test ``impl.supports(...)`` and return :func:`undecided` instead.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

#: The three verdicts of a probe.
CONFIRMED, RULED_OUT, UNDECIDED = "confirmed", "ruled out", "not decided"

#: Environment switch: ``GRU4REC_DIAGNOSIS=0`` runs no probe (every cause "not decided: diagnosis disabled"), so
#: that benchmarks/diagnosis_overhead.py can time a run with and without the probes. Never set it for a verdict.
SWITCH = "GRU4REC_DIAGNOSIS"


def enabled() -> bool:
    """Whether probes run (``GRU4REC_DIAGNOSIS`` unset or anything but ``"0"``)."""
    return os.environ.get(SWITCH, "1").strip() != "0"


#: The message prefixes (meta-tests match them).
ISOLATED = "isolated: "
NOT_ISOLATED = "cause not isolated; candidates: "


@dataclasses.dataclass(frozen=True)
class Finding:
    """What one probe saw: ``verdict`` (:data:`CONFIRMED`, :data:`RULED_OUT` or :data:`UNDECIDED`) and the
    ``evidence`` (one short clause with the measured figures)."""

    verdict: str
    evidence: str

    def __post_init__(self) -> None:
        if self.verdict not in (CONFIRMED, RULED_OUT, UNDECIDED):
            raise ValueError(f"Finding.verdict must be one of {CONFIRMED!r}, {RULED_OUT!r}, {UNDECIDED!r}")


def confirmed(evidence: str) -> Finding:
    """The probe saw what this cause, and no other candidate, produces."""
    return Finding(CONFIRMED, evidence)


def ruled_out(evidence: str) -> Finding:
    """The probe saw what this cause cannot produce."""
    return Finding(RULED_OUT, evidence)


def undecided(evidence: str) -> Finding:
    """The probe could not run or its result fits this cause and others alike."""
    return Finding(UNDECIDED, evidence)


def decide(condition: bool | None, evidence: str) -> Finding:
    """:func:`confirmed` when ``condition`` is True, :func:`ruled_out` when False, :func:`undecided` when None."""
    if condition is None:
        return undecided(evidence)
    return confirmed(evidence) if condition else ruled_out(evidence)


@dataclasses.dataclass(frozen=True)
class Cause:
    """A candidate cause of a check's failure: ``name`` (what the maintainer would fix, e.g. ``"the evaluator
    masks the session's future items"``) and ``probe``, a callable without arguments returning a
    :class:`Finding`, run only by :func:`diagnose`. ``probe=None`` states a candidate no probe can decide
    (listed as not decided with ``note``)."""

    name: str
    probe: Callable[[], Finding] | None = None
    note: str = "no probe decides it"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One row of a check's cause table: ``name`` (the cause, as :class:`Cause` names it) and ``probe`` (one
    clause saying what the discriminating probe does and what confirms the cause; printed in docs/checks.md).
    ``probe=""`` states a cause no probe decides (the one cause of a check whose finding is its own evidence,
    or a candidate that stays "not decided")."""

    name: str
    probe: str = ""

    def cause(self, probe: Callable[[], Finding] | None, note: str = "no probe decides it") -> Cause:
        """The :class:`Cause` of this row with the probe callable that implements it (None: listed, undecided)."""
        return Cause(self.name, probe, note)


#: Attribute of a check function that holds its cause table (set by :func:`causes`).
TABLE_ATTR = "diagnosis_causes"


def causes(*table: Candidate) -> Callable[[_F], _F]:
    """Decorator declaring a check function's cause table: the rows :func:`fail` may name for it, in order.

    The function is returned unchanged (pytest sees its signature as before); the rows are stored in its
    ``diagnosis_causes`` attribute (:func:`table_of`). Raises ``TypeError`` for a row that is not a
    :class:`Candidate` and ``ValueError`` for an empty table or a cause named twice."""
    if not table:
        raise ValueError("diagnosis.causes(): a cause table needs at least one Candidate")
    bad = [type(c).__name__ for c in table if not isinstance(c, Candidate)]
    if bad:
        raise TypeError(f"diagnosis.causes(): rows must be Candidate, got {bad}")
    names = [c.name for c in table]
    if len(set(names)) != len(names):
        raise ValueError(f"diagnosis.causes(): a cause is named twice in {names}")

    def mark(fn: _F) -> _F:
        setattr(fn, TABLE_ATTR, tuple(table))
        return fn

    return mark


def table_of(fn: Any) -> tuple[Candidate, ...]:
    """The cause table a check function declared with :func:`causes` (empty when it declared none)."""
    return tuple(getattr(fn, TABLE_ATTR, ()))


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """The probes' findings, in the order the causes were given: ``findings`` pairs each cause's name with its
    :class:`Finding`. :attr:`isolated` names the confirmed causes; :meth:`text` is the message part."""

    findings: tuple[tuple[str, Finding], ...]

    @property
    def isolated(self) -> tuple[str, ...]:
        """Names of the causes whose probe confirmed them (empty: the cause is not isolated)."""
        return tuple(name for name, f in self.findings if f.verdict == CONFIRMED)

    def text(self) -> str:
        """``"isolated: A (evidence); ruled out: B (evidence)"`` or ``"cause not isolated; candidates: A
        (evidence), B (evidence); ruled out: C (evidence)"`` (see the module docstring)."""

        def item(name: str, f: Finding) -> str:
            return f"{name} ({f.evidence})" if f.evidence else name

        conf = [item(n, f) for n, f in self.findings if f.verdict == CONFIRMED]
        open_ = [item(n, f) for n, f in self.findings if f.verdict == UNDECIDED]
        out = [item(n, f) for n, f in self.findings if f.verdict == RULED_OUT]
        if conf:
            parts = [ISOLATED + c for c in conf] + [f"{UNDECIDED}: {c}" for c in open_]
        else:
            parts = [NOT_ISOLATED + (", ".join(open_) if open_ else "none left: every listed cause was ruled out")]
        parts += [f"{RULED_OUT}: {c}" for c in out]
        return "; ".join(parts)


def diagnose(causes: Sequence[Cause]) -> Diagnosis:
    """Run every cause's probe once, in order (after a failure only), and collect the findings.

    A probe that raises is recorded as undecided with the exception's type and first line; so is a probe that
    returns something other than a :class:`Finding` (a mistake of the check, named in the evidence). With
    ``GRU4REC_DIAGNOSIS=0`` (:data:`SWITCH`) no probe runs and every cause is undecided."""
    findings = []
    off = not enabled()
    for c in causes:
        if off:
            findings.append((c.name, undecided(f"diagnosis disabled ({SWITCH}=0)")))
            continue
        if c.probe is None:
            findings.append((c.name, undecided(c.note)))
            continue
        try:
            f = c.probe()
        except Exception as exc:  # a probe never hides the check's own failure
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            f = undecided(f"probe failed: {type(exc).__name__}" + (f": {first}" if first else ""))
        if not isinstance(f, Finding):
            f = undecided(f"probe returned {type(f).__name__}, not a Finding")
        findings.append((c.name, f))
    return Diagnosis(tuple(findings))


def fail(summary: str, causes: Sequence[Cause], details: str = "") -> None:
    """Raise ``AssertionError("<summary>: <diagnosis>[; measured: <details>]")`` after running the probes of
    ``causes`` (:func:`diagnose`). ``summary`` states what failed, without a cause; long figures go in ``details``,
    after the diagnosis, so that a report that keeps only the start of a message keeps the cause."""
    __tracebackhide__ = True
    raise AssertionError(f"{summary}: {diagnose(causes).text()}" + (f"; measured: {details}" if details else ""))


#: A guessed cause ("...?") or alternatives offered as the cause ("is ignored or the distribution is wrong").
_GUESS = re.compile(r"\?|\bor\b")
#: Quoted values (parameters, ids, an exception text of the code under test), declared-capability notes and the
#: examples given for an isolated finding ("(e.g. A or B)") are not causes the check names.
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|\([^()]*\bdeclared\b[^()]*\)|\(e\.g\. [^()]*\)")


def unisolated_guess(message: str) -> str | None:
    """The part of a failed check's message that names a cause no probe isolated, or None.

    A check's message (an ``AssertionError``, or pytest's ``Failed`` of ``pytest.fail``) either carries a
    diagnosis (:data:`ISOLATED` / :data:`NOT_ISOLATED`, :meth:`Diagnosis.text`) or states one measured finding. A
    finding that offers alternatives ("A or B") or a guess ("...?") names causes nobody isolated: the check should
    have a cause table instead. Returns about 120 characters around the first such word; None for a message with a
    diagnosis, a single finding, or an exception raised by the code under test (any other type: quoted as it is,
    not the check's words). The rule is a heuristic over English text; quoted values, "(declared: ...)" notes and
    "(e.g. ...)" examples of an isolated finding are left out of it."""
    if not message.startswith(("AssertionError", "Failed")):
        return None
    if ISOLATED in message or NOT_ISOLATED in message:
        return None
    words = _QUOTED.sub("", message)
    m = _GUESS.search(words)
    return words[max(0, m.start() - 80) : m.end() + 40] if m else None
