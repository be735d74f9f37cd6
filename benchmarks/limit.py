"""A per-epoch CPU-time limit for slow implementations (benchmarks only; never used by the checks).

An epoch benchmark of an implementation that scores the whole catalogue can take hours on a large catalogue. With
a limit, the fit is stopped at the first optimizer step after the process has spent ``cpu_limit_s`` CPU seconds in
it, and the benchmark reports "> limit" with the steps (minibatches) reached instead of leaving the case out.

How: the training step of each framework already imported by the process is counted from outside the
implementation's code, and :class:`EpochLimitReached` is raised after the first step past the CPU budget:

- PyTorch: a global optimizer step post-hook (``torch.optim.optimizer.register_optimizer_step_post_hook``; it runs
  after every ``step()`` of every ``torch.optim.Optimizer`` subclass, the official port's own Adagrad included);
- TensorFlow 1 graphs (``tf.compat.v1.Session``): ``Session.run`` wrapped on the class that defines it; a call with
  a ``feed_dict`` is one step (GRU4Rec_TensorFlow runs one per minibatch; its variable initialisation has none);
- Keras (``tf.keras``/``tf_keras`` and Keras 3 when imported): ``Model.train_on_batch`` wrapped on the class that
  defines it (KerasGRU4Rec calls it once per minibatch).

The wrappers are class attributes set for the duration of the fit and restored after it; only frameworks already in
``sys.modules`` are touched (a torch worker never imports TensorFlow for this). An implementation whose training goes
through none of these (a Theano function, a Keras ``fit`` over a whole epoch) is never stopped: its epoch runs to the
end, under the worker's wall-clock timeout.

- In this process: :func:`limited_fit` around ``adapter.fit``;
- in an adapter's worker process: the worker builds :class:`TimeLimited` (its ``ref``), which creates the
  registered adapter class and wraps that instance's ``fit``. The limit then reaches the parent as the worker's
  ``WorkerCallError`` (``remote_type`` ``EpochLimitReached``) whose message carries the JSON payload;
  :func:`limit_payload` reads it back from either form.

The payload (``dict``): ``steps`` (int, optimizer steps of the busiest optimizer: an implementation with one
optimizer per parameter group counts once per minibatch), ``events`` (int, only where each step's input is
visible: the rows fed to ``Session.run``/``train_on_batch``, i.e. minibatch lanes), ``cpu_s`` and ``wall_s``
(float seconds of the fit up to the stop, process CPU time user + system, all threads), ``limit_s`` (the limit in
CPU seconds).

This module imports only the standard library at import time (the worker may run an older numpy/torch).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import sys
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
        self.events: dict[Any, int] = {}  # rows fed per counter, where a step's input is visible (TF, Keras)
        self.cpu0 = _cpu()
        self.wall0 = time.perf_counter()
        self.reached: dict[str, Any] | None = None

    @property
    def steps(self) -> int:
        """Steps of the optimizer that stepped most (0 before the first step)."""
        return max(self.counts.values(), default=0)

    def hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """The torch optimizer step post-hook: one step of ``optimizer``."""
        self.tick(id(optimizer))

    def tick(self, key: Any, rows: int | None = None) -> None:
        """One training step of the counter ``key`` (an optimizer, a session, a model) that fed ``rows`` examples
        (None: not visible from outside); raises :class:`EpochLimitReached` once, at the first step after the CPU
        budget is spent."""
        self.counts[key] = self.counts.get(key, 0) + 1
        if rows is not None:
            self.events[key] = self.events.get(key, 0) + int(rows)
        cpu = _cpu() - self.cpu0
        if self.cpu_limit_s is not None and cpu > self.cpu_limit_s and self.reached is None:
            self.reached = {
                "steps": self.steps,
                "cpu_s": cpu,
                "wall_s": time.perf_counter() - self.wall0,
                "limit_s": float(self.cpu_limit_s),
            }
            busiest = max(self.counts, key=self.counts.__getitem__)
            if self.events.get(busiest):
                self.reached["events"] = self.events[busiest]
            raise EpochLimitReached(self.reached)


def _owner(cls: type, name: str) -> type | None:
    """The class of ``cls``'s MRO that defines ``name`` (where a wrapper must go so every subclass sees it)."""
    return next((k for k in cls.__mro__ if name in vars(k)), None)


def _wrap_method(stack: contextlib.ExitStack, cls: type, name: str, after: Any) -> None:
    """Set ``cls.name`` (on its defining class) to a wrapper that calls the original, then ``after(self, args,
    kwargs)``; the original is restored when ``stack`` closes. Wrapping the same owner twice is a no-op."""
    owner = _owner(cls, name)
    if owner is None or getattr(vars(owner)[name], "_gru4rec_limit", False):
        return
    original = vars(owner)[name]

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        after(self, args, kwargs)
        return out

    wrapper._gru4rec_limit = True  # type: ignore[attr-defined]
    setattr(owner, name, wrapper)
    stack.callback(setattr, owner, name, original)


def _rows(batch: Any) -> int | None:
    """The number of examples in one fed input (its first dimension); None when it has none."""
    shape = getattr(batch, "shape", None)
    if shape is not None and len(shape) > 0 and shape[0] is not None:
        return int(shape[0])
    try:
        return len(batch)
    except TypeError:
        return None


def _session_classes() -> list[type]:
    tf = sys.modules.get("tensorflow")
    v1 = getattr(getattr(tf, "compat", None), "v1", None)
    session = getattr(v1, "Session", None) or getattr(tf, "Session", None)
    return [session] if isinstance(session, type) else []


def _keras_model_classes() -> list[type]:
    found: list[type] = []
    tf = sys.modules.get("tensorflow")
    with contextlib.suppress(Exception):  # tf.keras is a lazy loader; it may fail without Keras installed
        found.append(tf.keras.Model)  # type: ignore[union-attr]
    for name in ("tf_keras", "keras"):
        module = sys.modules.get(name)
        with contextlib.suppress(Exception):
            found.append(module.Model)  # type: ignore[union-attr]
    return [k for k in found if isinstance(k, type)]


@contextlib.contextmanager
def step_limit(cpu_limit_s: float | None) -> Iterator[StepLimit]:
    """Count (and, with a limit, stop) the training steps inside the block: torch optimizer steps, TF1
    ``Session.run`` calls with a ``feed_dict``, Keras ``train_on_batch`` calls (module docstring). Raises
    ImportError when none of torch, TensorFlow or Keras is imported or importable. Everything is restored on exit."""
    state = StepLimit(cpu_limit_s)
    with contextlib.ExitStack() as stack:
        hooked = False
        if "torch" in sys.modules or not any(m in sys.modules for m in ("tensorflow", "keras", "tf_keras")):
            from torch.optim.optimizer import register_optimizer_step_post_hook

            stack.callback(register_optimizer_step_post_hook(state.hook).remove)
            hooked = True

        def session_step(session: Any, args: Any, kwargs: Any) -> None:
            feed = kwargs.get("feed_dict", args[1] if len(args) > 1 else None)
            if feed:
                state.tick(id(session), _rows(next(iter(feed.values()))))

        for cls in _session_classes():
            _wrap_method(stack, cls, "run", session_step)
            hooked = True
        for cls in _keras_model_classes():
            _wrap_method(
                stack, cls, "train_on_batch", lambda model, args, kwargs: state.tick(id(model), _rows(args[0]))
            )
            hooked = True
        if not hooked:  # TensorFlow/Keras imported, yet no Session or Model class found to wrap
            raise ImportError("step_limit: no torch optimizer, TF1 Session or Keras Model to count steps of")
        yield state


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
