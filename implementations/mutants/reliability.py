"""Reliability mutants: the reference GRU4Rec made to crash, hang or leak memory.

They test the harness, not the checks: each runs isolated (``isolated = True``, the worker-process mechanism of
third-party adapters, ``conformance/_harness/isolation.py``) and must turn into failed checks with the reason and
the worker's stderr tail in the report while the run goes on and completes. ``tests/reliability/`` runs them:

- ``mutant:crash`` — the first training step dereferences a NULL pointer (``ctypes.string_at(0)``): the worker
  dies by SIGSEGV in ``fit``; faulthandler prints the Python stack to the worker's stderr;
- ``mutant:hang`` — ``score_prefixes`` never returns (waits on an event nobody sets): the per-call timeout
  (``--call-timeout``) kills the worker;
- ``mutant:leak`` — every training step keeps another 64 MiB block alive, as a step that appends its tensors to
  a list would: the worker's resident memory passes ``--worker-memory-mb`` and the watchdog kills it.

Each defect is switched on through an extension point of ``reference.gru4rec.GRU4Rec`` (``_step`` and
``score_prefixes``, reference/gru4rec/README.md), so everything else is the reference. Outside a worker (e.g.
``--isolation never``) the defect is refused with a RuntimeError instead: in-process it would take the suite's
own process down (crash), stop the run for good (hang: in-process calls have no timeout) or exhaust the machine's
memory (leak). Like every mutant they are selected by name only (``--impl mutant:crash``), never by ``all``.

The meta-tests' "caught_by" contract does not apply (``kind = "reliability"``): these mutants fail every check
that reaches the defective call, by design.
"""

from __future__ import annotations

import os
import sys
from typing import Any, ClassVar

from gru4rec_conformance.implementations.mutants import MutantAdapter, mutant

#: Memory kept alive per training step by ``mutant:leak`` (MiB).
LEAK_MIB_PER_STEP = 64


def _require_worker(name: str, what: str) -> None:
    """Refuse to switch the defect on outside a worker process (env ``GRU4REC_WORKER=1``, set by the harness)."""
    if os.environ.get("GRU4REC_WORKER") != "1":
        raise RuntimeError(
            f"{name}: refusing to {what} outside a worker process; this mutant tests worker "
            "isolation and must run isolated (do not use --isolation never)"
        )


class ReliabilityMutant(MutantAdapter):
    """Base of the reliability mutants: isolated, kind ``reliability``, no ``caught_by`` contract."""

    isolated = True
    kind: ClassVar[str] = "reliability"
    defect = "harness reliability"


@mutant("mutant:crash", description="reference GRU4Rec whose first training step crashes the interpreter (SIGSEGV)")
class CrashInFit(ReliabilityMutant):
    """The first training step segfaults (NULL-pointer read through ctypes): the worker dies by SIGSEGV in fit."""

    @classmethod
    def gru_overrides(cls) -> dict[str, Any]:
        def _step(self, *args: Any, **kwargs: Any) -> Any:
            _require_worker(cls.name, "crash the interpreter")
            import ctypes

            print(f"{cls.name}: reading address 0 in the first training step", file=sys.stderr, flush=True)
            ctypes.string_at(0)  # SIGSEGV
            raise AssertionError("unreachable: reading address 0 did not crash")

        return {"_step": _step}


@mutant("mutant:hang", description="reference GRU4Rec whose score_prefixes never returns (deadlock)")
class HangInScorePrefixes(ReliabilityMutant):
    """``score_prefixes`` waits forever on an event that is never set (a deadlock): the call times out."""

    @classmethod
    def gru_overrides(cls) -> dict[str, Any]:
        def score_prefixes(self, prefixes: Any, batch_size: int = 512) -> Any:
            _require_worker(cls.name, "hang")
            import threading

            print(f"{cls.name}: score_prefixes waits for an event nobody sets", file=sys.stderr, flush=True)
            threading.Event().wait()
            raise AssertionError("unreachable: the event was set")

        return {"score_prefixes": score_prefixes}


@mutant("mutant:leak", description=f"reference GRU4Rec whose training steps leak {LEAK_MIB_PER_STEP} MiB each")
class LeakInFit(ReliabilityMutant):
    """Every training step keeps another ``LEAK_MIB_PER_STEP`` MiB alive: fit grows until the memory limit."""

    @classmethod
    def gru_overrides(cls) -> dict[str, Any]:
        from gru4rec_conformance.reference.gru4rec import GRU4Rec

        def _step(self, *args: Any, **kwargs: Any) -> Any:
            _require_worker(cls.name, "leak memory")
            import numpy as np

            kept = self.__dict__.setdefault("_leaked_blocks", [])
            if not kept:
                print(f"{cls.name}: keeping {LEAK_MIB_PER_STEP} MiB per training step", file=sys.stderr, flush=True)
            kept.append(np.ones(LEAK_MIB_PER_STEP * 2**20 // 8))  # ones, not zeros: the pages are touched (RSS)
            return GRU4Rec._step(self, *args, **kwargs)

        return {"_step": _step}
