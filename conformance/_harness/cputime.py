"""CPU time of one adapter call, measured where the adapter runs (timing checks such as SC-1).

Wall clock on a shared machine measures the machine's load as much as the adapter; CPU time of the process that
does the work does not (it still varies with cache and memory-bus contention, which is why SC-1 also interleaves
and repeats its measurements). An isolated adapter runs in a worker process, which is the code under test: this
process reads the CPU time of the worker's whole process tree from /proc before and after each call
(:attr:`~conformance._harness.isolation.WorkerProxy.last_cpu_s`), so nothing the worker says about its own time
counts (its report, ``last_cpu_s_reported``, is the fallback only where /proc is absent). An in-process adapter
is measured here with :func:`~conformance._harness.worker.process_cpu_seconds`.
"""

from __future__ import annotations

from typing import Any

from gru4rec_conformance.conformance._harness.isolation import WorkerProxy
from gru4rec_conformance.conformance._harness.worker import process_cpu_seconds

__all__ = ["cpu_call"]


def cpu_call(adapter: Any, method: str, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``(adapter.<method>(*args, **kwargs), CPU seconds of that call)``.

    Args:
        adapter: an adapter as checks get it from ``impl.build`` / ``impl.new`` (a validating wrapper around an
            in-process adapter or a :class:`WorkerProxy`), or either of those unwrapped.
        method: the protocol method to call.

    Returns:
        The method's result and the CPU seconds (float, user + system, all threads of the process that ran it,
        plus its children) it took: for an isolated adapter, the worker's process tree as this process reads it
        from /proc (the worker's request decoding and reply encoding included, the parent's side excluded); for
        an in-process one, this process's.

    Raises:
        Whatever the call raises; RuntimeError when a worker answered without its CPU time (a worker of an
        older suite version).
    """
    target = getattr(adapter, "wrapped", adapter)
    if isinstance(target, WorkerProxy):
        value = getattr(adapter, method)(*args, **kwargs)
        if target.last_cpu_s is None:
            raise RuntimeError(f"the worker of {target!r} did not report the CPU time of {method}()")
        return value, target.last_cpu_s
    t0 = process_cpu_seconds()
    value = getattr(adapter, method)(*args, **kwargs)
    return value, process_cpu_seconds() - t0
