"""A per-epoch CPU-time limit for slow implementations (benchmarks only; never used by the checks).

An epoch benchmark of an implementation that scores the whole catalogue can take hours on a large catalogue. With
a limit, the fit is stopped at the first optimizer step after the process has spent ``cpu_limit_s`` CPU seconds in
it, and the benchmark reports "> limit" with the steps (minibatches) reached instead of leaving the case out.

How: a global torch optimizer step post-hook (``torch.optim.optimizer.register_optimizer_step_post_hook``; it runs
after every ``step()`` of every ``torch.optim.Optimizer`` subclass, the official port's own Adagrad included)
counts the steps of each optimizer and raises :class:`EpochLimitReached` once the CPU budget is spent. The
implementation's code is not touched. An implementation whose training does not go through a torch optimizer is
never stopped (its epoch runs to the end, under the worker's wall-clock timeout).

- In this process: :func:`limited_fit` around ``adapter.fit``;
- in an adapter's worker process: the worker builds :class:`TimeLimited` (its ``ref``), which creates the
  registered adapter class and wraps that instance's ``fit``. The limit then reaches the parent as the worker's
  ``WorkerCallError`` (``remote_type`` ``EpochLimitReached``) whose message carries the JSON payload;
  :func:`limit_payload` reads it back from either form.

The payload (``dict``): ``steps`` (int, optimizer steps of the busiest optimizer: an implementation with one
optimizer per parameter group counts once per minibatch), ``cpu_s`` and ``wall_s`` (float seconds of the fit up to
the stop, process CPU time user + system, all threads), ``limit_s`` (the limit in CPU seconds).

This module imports only the standard library at import time (the worker may run an older numpy/torch).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import time
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["LIMIT_REF", "EpochLimitReached", "StepLimit", "TimeLimited", "limit_payload", "limited_fit", "step_limit"]

#: ``module:QualName`` of :class:`TimeLimited`, as a worker imports it
LIMIT_REF = "gru4rec_conformance.benchmarks.limit:TimeLimited"
_MARK = "EPOCH_LIMIT"
_PAYLOAD = re.compile(_MARK + r"(\{[^{}]*\})")


def _cpu() -> float:
    return time.process_time()


class EpochLimitReached(Exception):
    """The fit was stopped at the per-epoch CPU-time limit; ``payload`` as in the module docstring. Its text is
    ``EPOCH_LIMIT{json}`` (what crosses the worker's pipe)."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(_MARK + json.dumps(payload, sort_keys=True))
        self.payload = dict(payload)


class StepLimit:
    """State of one limited fit: per-optimizer step counts, CPU and wall clock at the start, ``reached`` once the
    hook raised. ``cpu_limit_s`` None counts steps without stopping."""

    def __init__(self, cpu_limit_s: float | None) -> None:
        self.cpu_limit_s = cpu_limit_s
        self.counts: dict[int, int] = {}
        self.cpu0 = _cpu()
        self.wall0 = time.perf_counter()
        self.reached: dict[str, Any] | None = None

    @property
    def steps(self) -> int:
        """Steps of the optimizer that stepped most (0 before the first step)."""
        return max(self.counts.values(), default=0)

    def hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.counts[id(optimizer)] = self.counts.get(id(optimizer), 0) + 1
        cpu = _cpu() - self.cpu0
        if self.cpu_limit_s is not None and cpu > self.cpu_limit_s and self.reached is None:
            self.reached = {
                "steps": self.steps,
                "cpu_s": cpu,
                "wall_s": time.perf_counter() - self.wall0,
                "limit_s": float(self.cpu_limit_s),
            }
            raise EpochLimitReached(self.reached)


@contextlib.contextmanager
def step_limit(cpu_limit_s: float | None) -> Iterator[StepLimit]:
    """Count (and, with a limit, stop) the torch optimizer steps inside the block; see the module docstring.
    Raises ImportError when torch is not importable. The hook is removed on exit."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    state = StepLimit(cpu_limit_s)
    handle = register_optimizer_step_post_hook(state.hook)
    try:
        yield state
    finally:
        handle.remove()


def limited_fit(fit: Any, cpu_limit_s: float | None, *args: Any, **kwargs: Any) -> Any:
    """``fit(*args, **kwargs)`` under :func:`step_limit`; raises :class:`EpochLimitReached` (even when the
    implementation wrapped the hook's exception in one of its own) once the limit was reached."""
    with step_limit(cpu_limit_s) as state:
        try:
            return fit(*args, **kwargs)
        except BaseException:
            if state.reached is not None:
                raise EpochLimitReached(state.reached) from None
            raise


def limit_payload(exc: BaseException) -> dict[str, Any] | None:
    """The payload of a fit stopped at the limit: an :class:`EpochLimitReached`, or a worker's error about one
    (its text holds ``EPOCH_LIMIT{json}``); None for any other exception."""
    if isinstance(exc, EpochLimitReached):
        return dict(exc.payload)
    if getattr(exc, "remote_type", None) != "EpochLimitReached":
        return None
    hit = _PAYLOAD.search(str(getattr(exc, "remote_message", "") or exc))
    return json.loads(hit.group(1)) if hit else None


def _import_ref(ref: str) -> Any:
    module_name, _, qualname = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class TimeLimited:
    """Worker-side factory: ``TimeLimited(device=..., target="module:Class", cpu_limit_s=L, **init_kwargs)``
    returns an instance of the target adapter class (not of this class) whose ``fit`` runs under
    :func:`limited_fit`. ``implemented_hooks``/``protocol_methods`` answer for the last target built (a worker
    holds one adapter). Raises what importing or constructing the target raises."""

    _target: Any = None

    def __new__(cls, device: str = "cpu", *, target: str, cpu_limit_s: float | None, **init_kwargs: Any) -> Any:
        target_cls = _import_ref(target)
        cls._target = target_cls
        adapter = target_cls(device=device, **init_kwargs)
        original = adapter.fit

        def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
            return limited_fit(original, cpu_limit_s, *args, **kwargs)

        adapter.fit = types.MethodType(fit, adapter)
        return adapter

    @classmethod
    def implemented_hooks(cls) -> frozenset[str]:
        return frozenset(cls._target.implemented_hooks())

    @classmethod
    def protocol_methods(cls) -> tuple[str, ...]:
        return tuple(cls._target.protocol_methods())
