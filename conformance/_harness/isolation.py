"""Run an adapter in a worker subprocess: the parent-side proxy.

:class:`WorkerProxy` looks like an adapter: every protocol method (``version``, the family's ``REQUIRED``
and ``HOOKS``) is forwarded to a child process (:mod:`conformance._harness.worker`) that runs the real
adapter, with the same or another interpreter. Only JSON and ``.npy`` files cross (see
:mod:`conformance._harness.codec`); nothing from the implementation is unpickled here.

Failure containment, per call:

- an exception in the adapter becomes :class:`WorkerCallError` (type, message, remote traceback, stderr
  tail), or :class:`~implementations.base.Unsupported` again when the adapter raised that;
- a crash (segfault, ``os._exit``, a kill from outside) becomes :class:`WorkerCrashed` (exit code or signal);
- a call running past its timeout becomes :class:`WorkerTimeout` (the worker's process group is killed); shortly
  before the deadline the worker dumps every thread's Python stack to its stderr (faulthandler), and the timeout
  carries that dump (``stacks``), read back from the stderr capture the parent owns;
- a worker whose resident memory (its whole process tree) passes the limit becomes :class:`WorkerMemoryExceeded`;
- a reply over the frame limit, unreadable JSON or a refused exchange value becomes :class:`WorkerProtocolError`.

The watchdog (worker alive, memory of the tree, the call's deadline) runs on every iteration of the send and
receive loops, whatever the pipe does, so a worker trickling bytes cannot outlive its timeout.

After a crash, timeout, memory kill or oversized frame the model state is gone; the next call starts a fresh
worker (``build``, ``capabilities`` and ``version`` work on it; anything else raises :class:`WorkerStateLost`).

Sandbox: where bubblewrap works (:func:`sandbox_probe`), the worker runs under ``bwrap``: the whole
filesystem read-only except its private directory, empty ``/tmp``, ``/var/tmp``, ``/run`` and ``/dev/shm``, a
fresh ``/dev`` and ``/proc``, its own PID, IPC, UTS, network (unless allowed) and user namespaces (uid 65534),
no new privileges, a new session, and killed with the suite (``--die-with-parent``). Killing the ``bwrap``
process ends the whole PID namespace, so no process of the worker outlives a close or a timeout. Without the
sandbox (``--sandbox none`` or no bwrap) the worker only gets the weaker protections: a private directory, a
filtered environment, its own session (killed as a group, with every descendant seen by the watchdog or alive
at the close; the worker is the subreaper of its descendants, so orphans stay in its tree while it lives), and no
network when ``unshare -n`` (or ``unshare -r -n`` without root) works; it can then write wherever its user can,
and a daemon it leaves when the suite is SIGKILLed survives.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from gru4rec_conformance import CHECKOUT_ROOT, child_pythonpath, import_root
from gru4rec_conformance.conformance._harness.codec import DEFAULT_MAX_BYTES, Codec, ExchangeError, dumps, loads
from gru4rec_conformance.conformance._harness.worker import _HEADER
from gru4rec_conformance.implementations.base import BaseCapabilities, ImplementationUnavailable, Unsupported

__all__ = [
    "tree_pids",
    "IsolationSettings",
    "WorkerProxy",
    "WorkerError",
    "WorkerCallError",
    "WorkerCrashed",
    "WorkerTimeout",
    "WorkerMemoryExceeded",
    "WorkerStateLost",
    "WorkerProtocolError",
    "stack_dump",
    "SandboxInfo",
    "network_isolation",
    "sandbox_probe",
    "sandbox_for",
    "DEFAULT_TIMEOUTS_S",
    "MAX_FRAME_BYTES",
]


# Per-call timeouts in seconds. "light" calls only move data; the others by the kind of the running check.
DEFAULT_TIMEOUTS_S: dict[str, float] = {
    "startup": 180.0,
    "light": 180.0,
    "default": 900.0,
    "K9": 3600.0,
    "K10": 1800.0,
    "metric": 7200.0,
}
# get_params/set_params: the deprecated names of get_weights/set_weights (kept for one release)
LIGHT_METHODS = frozenset({"version", "capabilities", "item_ids", "get_weights", "set_weights", "optimizer_info",
                           "trace", "loss_on_scores", "close", "get_params", "set_params"})  # fmt: skip

#: Variables of the suite's environment that every worker sees, when set (by exact name: nothing passes by prefix).
ENV_ALLOW = frozenset({
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_COLLATE", "LC_MESSAGES", "LC_TIME", "TZ",
    "TERM", "LD_LIBRARY_PATH", "PYTHONHASHSEED", "SOURCE_DATE_EPOCH",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_VISIBLE_DEVICES", "TF_CPP_MIN_LOG_LEVEL",
    # the suite's own settings that code in a worker reads: data location and scale, checkout sources
    "GRU4REC_SHARED_DATA", "GRU4REC_MC_SCALE", "GRU4REC_MIRROR_DIR", "GRU4REC_ALLOW_DOWNLOAD",
})  # fmt: skip
#: Folders named by these variables are bound read-only into the sandbox (when they are plain folders holding no
#: socket): the data, the mirror of the pinned repositories, and each pinned checkout's own variable.
ENV_BIND = ("GRU4REC_SHARED_DATA", "GRU4REC_MIRROR_DIR")
#: Library settings an adapter may add through ``worker_env`` (threads, offline flags, a compiler's flags).
WORKER_ENV_SETTINGS = frozenset({
    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "THEANO_FLAGS", "TORCH_NUM_THREADS",
    "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE",
})  # fmt: skip


def worker_env_allowed() -> frozenset[str]:
    """Every name an adapter's ``worker_env`` may list: :data:`ENV_ALLOW`, :data:`WORKER_ENV_SETTINGS` and the
    variable of each pinned checkout (``implementations._checkout.CHECKOUTS``, e.g. ``GRU4REC_PYTORCH_PATH``)."""
    from gru4rec_conformance.implementations._checkout import CHECKOUTS

    return ENV_ALLOW | WORKER_ENV_SETTINGS | {c.env for c in CHECKOUTS.values()}


def check_worker_env(names: tuple[str, ...], label: str) -> tuple[str, ...]:
    """``names`` when each is in :func:`worker_env_allowed`; raises ValueError naming the others (a worker never
    sees a variable of the suite's environment outside that list, e.g. a credential)."""
    refused = sorted({str(n) for n in names} - worker_env_allowed())
    if refused:
        raise ValueError(f"{label}: worker_env names {', '.join(refused)}, which a worker may not see: worker_env "
                         "may only name the suite's thread, seed, offline and data settings and the pinned "
                         "checkouts' variables (conformance/README.md, 'Isolation')")  # fmt: skip
    return tuple(names)


#: Thread-count variables of OpenMP / MKL / OpenBLAS set in every worker (:meth:`WorkerProxy._environment`).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: The worker's torch intra-op thread count (read by :mod:`conformance._harness.worker`).
WORKER_THREADS_ENV = "GRU4REC_WORKER_THREADS"
STDERR_TAIL_CHARS = 4000
#: A watchdog pass later than its poll period by more than this many seconds means this process was frozen.
FROZEN_GAP_S = 1.0
#: Most characters of the worker's stack dump a timeout carries (the innermost frames of each thread come first).
STACKS_CHARS = 12000
#: How long before its deadline a call's worker dumps its stacks: a tenth of the timeout, at most this many seconds.
STACK_DUMP_LEAD_S = 2.0
#: faulthandler's first line of a dump_traceback_later dump (worker._arm_stack_dump).
_STACK_DUMP_HEAD = re.compile(r"^Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!$", re.MULTILINE)
#: What a timeout message suggests (docs/gating.md recommends a short --call-timeout for a first run).
TIMEOUT_HINT = (
    "if the call is stuck, the worker's Python stacks just before the kill show where (below); if it is only slow, "
    "give it more time with --call-timeout SECONDS (a first run of a new adapter: a short --call-timeout, e.g. 120, "
    "shows a hang in minutes, see docs/gating.md)"
)
#: Largest JSON frame (one reply) accepted from a worker, in bytes; arrays travel in .npy files (own budget).
MAX_FRAME_BYTES = 64 << 20
#: Values of ``--sandbox`` (env ``GRU4REC_SANDBOX``).
SANDBOX_MODES = ("auto", "bwrap", "none")
#: Directories replaced by an empty tmpfs inside the sandbox: where Unix sockets and other programs' scratch files
#: live (the worker's own directory and the suite's import paths are bound back on top).
HIDDEN_DIRS = ("/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm")
#: Default most processes of one worker's tree.
MAX_PROCESSES = 512
#: Sandbox tmpfs folders that the worker may fill (sized, and counted against the memory limit).
WRITABLE_TMPFS = ("/tmp", "/var/tmp", "/dev/shm")
#: Environment variable by which the worker learns its process limit (worker.main applies it as RLIMIT_NPROC).
WORKER_NPROC_ENV = "GRU4REC_WORKER_MAX_PROCS"
#: A reply's JSON may cost at most this many times its size once parsed (estimated from its bytes first) ...
JSON_DECODE_FACTOR = 24
#: ... or this many bytes, whichever is larger.
JSON_DECODE_FLOOR = 256 << 20
#: The unprivileged user (nobody) the worker runs as inside the sandbox's user namespace.
SANDBOX_UID = 65534


class WorkerError(Exception):
    """Base of worker failures; ``stderr_tail`` holds the end of the worker's stderr, ``kind`` a short tag."""

    kind = "worker-error"

    def __init__(self, message: str, *, stderr_tail: str = "", details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.stderr_tail = stderr_tail
        self.details = dict(details or {})

    def __str__(self) -> str:
        text = super().__str__()
        if self.stderr_tail.strip():
            text += "\n--- worker stderr (tail) ---\n" + self.stderr_tail.rstrip()
        return text


class WorkerCallError(WorkerError):
    """The adapter raised inside the worker; ``remote_type`` and ``remote_traceback`` describe it."""

    kind = "exception"

    def __init__(self, message: str, *, remote_type: str, remote_traceback: str, stderr_tail: str = "",
                 remote_message: str = "") -> None:  # fmt: skip
        super().__init__(message, stderr_tail=stderr_tail, details={"remote_type": remote_type})
        self.remote_type = remote_type
        self.remote_traceback = remote_traceback
        self.remote_message = remote_message  # the adapter's exception text alone (environment errors read it)

    def __str__(self) -> str:
        return super().__str__() + (
            "\n--- remote traceback ---\n" + self.remote_traceback.rstrip() if self.remote_traceback else ""
        )


class WorkerCrashed(WorkerError):
    """The worker process died (signal or exit) during a call."""

    kind = "crash"


class WorkerTimeout(WorkerError):
    """A call ran past its timeout; the worker was killed. ``stacks`` is the worker's own dump of its threads'
    Python stacks shortly before the kill (faulthandler text, at most :data:`STACKS_CHARS`), ``""`` when none
    arrived (the call was not a forwarded method, or the worker was stuck where faulthandler cannot write)."""

    kind = "timeout"

    def __init__(self, message: str, *, stderr_tail: str = "", details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, stderr_tail=stderr_tail, details=details)
        self.stacks = str(self.details.get("stacks") or "")

    def __str__(self) -> str:
        text = Exception.__str__(self)
        tail = self.stderr_tail
        if self.stacks and (cut := tail.find(self.stacks[:200])) >= 0:
            tail = tail[:cut]  # the dump is shown once, in full, below
        if tail.strip():
            text += "\n--- worker stderr (tail) ---\n" + tail.rstrip()
        if self.stacks:
            text += "\n--- worker Python stacks before the kill (faulthandler) ---\n" + self.stacks.rstrip()
        return text


def _dump_after(timeout: float) -> float:
    """When a worker dumps its stacks within a call of ``timeout`` seconds: a little before the parent's deadline."""
    return max(timeout - min(STACK_DUMP_LEAD_S, 0.1 * timeout), 0.01)


def stack_dump(stderr_text: str, limit: int = STACKS_CHARS) -> str:
    """The last faulthandler ``dump_traceback_later`` dump in a worker's stderr text (from its ``Timeout (...)!``
    line to the end, at most ``limit`` characters), or ``""`` when there is none."""
    heads = list(_STACK_DUMP_HEAD.finditer(stderr_text))
    if not heads:
        return ""
    dump = stderr_text[heads[-1].start() :]
    return dump if len(dump) <= limit else dump[:limit] + "\n[... stack dump cut]"


class WorkerMemoryExceeded(WorkerError):
    """The worker's resident memory passed the limit; the worker was killed."""

    kind = "memory"


class WorkerStateLost(WorkerError):
    """The previous worker died, so the model it held is gone; call ``build`` again."""

    kind = "state-lost"


class WorkerProtocolError(WorkerError):
    """The worker's reply broke the protocol (frame over the limit, bad JSON, a refused value or file)."""

    kind = "protocol"


@dataclasses.dataclass
class IsolationSettings:
    """How workers are started. Built by the plugin from the command line (``--worker-*`` options).

    Attributes:
        python: interpreter of the worker; None = this interpreter (or the adapter's ``worker_python``).
        timeouts: per-kind defaults (see :data:`DEFAULT_TIMEOUTS_S`).
        call_timeout: if set, overrides every per-call timeout (``--call-timeout``).
        memory_limit_mb: kill a worker whose RSS (with children) exceeds this; None = 80% of physical memory.
        network: "deny" (no network namespace of its own, or ``unshare -n`` without the sandbox) or "allow".
        sandbox: "auto" (bubblewrap where it works, else none), "bwrap" (required) or "none" (``--sandbox``).
        max_frame_bytes: largest JSON reply accepted (bytes); a larger announced frame kills the worker.
        max_reply_bytes: budget of the ``.npy`` payloads of one reply (bytes), checked from each file's header.
        tmpfs_mb: size (MiB) of each of the sandbox's own ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (bwrap
            ``--size``); what they hold counts against the memory limit. None = a quarter of the memory limit, at
            most 1024 MiB.
        max_processes: most processes of the worker's tree (the watchdog kills a tree above it; also the worker's
            ``RLIMIT_NPROC`` where the kernel applies it, i.e. when the suite does not run as root).
        between_calls_s: period of the watch of memory and process count while no call runs (a thread).
        tmp_root: parent folder of the worker directories (None = system temp).
        hidden_paths: folders the sandboxed worker sees as empty (an empty tmpfs over each existing one): the
            run folders' root and the xfail registries, so the worker has no path to either.
        keep_dirs: keep worker directories after close (debugging).
        poll_s: watchdog period.
        threads: thread count of the worker's numeric libraries (``--worker-threads``): sets
            ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and torch's intra-op threads.
            None = each of those variables as set in this process, else 1 (the check models are tiny; on a
            2-core machine oversubscribed BLAS/torch threads slow them down many times).
    """

    python: str | None = None
    timeouts: dict[str, float] = dataclasses.field(default_factory=lambda: dict(DEFAULT_TIMEOUTS_S))
    call_timeout: float | None = None
    memory_limit_mb: float | None = None
    network: str = "deny"
    tmp_root: str | None = None
    keep_dirs: bool = False
    poll_s: float = 0.05
    threads: int | None = None
    sandbox: str = "auto"
    hidden_paths: tuple[str, ...] = ()
    max_frame_bytes: int = MAX_FRAME_BYTES
    max_reply_bytes: int = DEFAULT_MAX_BYTES
    tmpfs_mb: float | None = None
    max_processes: int = MAX_PROCESSES
    between_calls_s: float = 0.5

    def timeout_for(self, method: str, kind: str | None, override: float | None = None) -> float:
        """Timeout of one call: --call-timeout > the check's own ``timeout`` > light/kind defaults."""
        if self.call_timeout is not None:
            return float(self.call_timeout)
        if override is not None:
            return float(override)
        if method in LIGHT_METHODS:
            return self.timeouts.get("light", DEFAULT_TIMEOUTS_S["light"])
        return self.timeouts.get(kind or "default", self.timeouts.get("default", DEFAULT_TIMEOUTS_S["default"]))

    def effective_memory_limit_mb(self) -> float | None:
        if self.memory_limit_mb is not None:
            return self.memory_limit_mb if self.memory_limit_mb > 0 else None
        total = _physical_memory_mb()
        return 0.8 * total if total else None

    def effective_tmpfs_bytes(self) -> int:
        """Byte size of each of the sandbox's writable tmpfs folders (see ``tmpfs_mb``)."""
        if self.tmpfs_mb is not None:
            return int(self.tmpfs_mb * 2**20)
        limit = self.effective_memory_limit_mb()
        return int(min(1024.0, limit / 4 if limit else 1024.0) * 2**20)


def _physical_memory_mb() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError, AttributeError):
        return None


_NETWORK_CACHE: tuple[list[str], str] | None = None


def network_isolation() -> tuple[list[str], str]:
    """(command prefix, description) that cuts the worker off the network, probed once per process.

    Tries ``unshare --net`` (root) then ``unshare --user --map-root-user --net`` (unprivileged user
    namespaces). Returns ``([], reason)`` when neither works (no util-linux, containers without
    namespaces, non-Linux), in which case workers keep the network.
    """
    global _NETWORK_CACHE
    if _NETWORK_CACHE is not None:
        return _NETWORK_CACHE
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        _NETWORK_CACHE = ([], "not isolated: 'unshare' is not available on this platform")
        return _NETWORK_CACHE
    reasons = []
    for prefix in ([exe, "--net"], [exe, "--user", "--map-root-user", "--net"]):
        try:
            probe = subprocess.run(prefix + ["--", "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(str(exc))
            continue
        if probe.returncode == 0:
            _NETWORK_CACHE = (prefix + ["--"], "isolated: " + " ".join(["unshare"] + prefix[1:]))
            return _NETWORK_CACHE
        reasons.append(probe.stderr.decode(errors="replace").strip() or f"exit {probe.returncode}")
    _NETWORK_CACHE = ([], "not isolated: unshare failed (" + "; ".join(reasons) + ")")
    return _NETWORK_CACHE


@dataclasses.dataclass(frozen=True)
class SandboxInfo:
    """What :func:`sandbox_probe` found: whether bubblewrap runs here, its version, whether it can also switch to
    an unprivileged user (user namespace), and why not when it cannot run."""

    available: bool
    exe: str = ""
    version: str = ""
    user_namespace: bool = False
    reason: str = ""

    def describe(self, network: bool = False) -> str:
        """``bubblewrap 0.8.0 (pid, ipc, net, uts, user namespaces; ...)`` or ``none (why)``; ``network``: the
        worker keeps the network (no network namespace)."""
        if not self.available:
            return f"none ({self.reason})"
        spaces = ["pid", "ipc"] + ([] if network else ["net"]) + ["uts"] + (["user"] if self.user_namespace else [])
        who = f"uid {SANDBOX_UID}" if self.user_namespace else "uid unchanged (no user namespace here)"
        return (f"{self.version} ({', '.join(spaces)} namespaces; {who}; fs read-only except worker dir; "
                f"private /tmp; dies with the suite)")  # fmt: skip


_SANDBOX_CACHE: SandboxInfo | None = None


def _bwrap_base(exe: str) -> list[str]:
    return [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-all",
            "--die-with-parent", "--new-session"]  # fmt: skip


def sandbox_probe() -> SandboxInfo:
    """Whether bubblewrap can sandbox workers here, probed once per process (``bwrap ... true``, a few ms).

    Tries the full sandbox with an unprivileged user first (``--unshare-user --uid 65534``), then without the
    user namespace (kernels or containers that forbid it). Never raises: the reason is in the result.
    """
    global _SANDBOX_CACHE
    if _SANDBOX_CACHE is not None:
        return _SANDBOX_CACHE
    exe = shutil.which("bwrap")
    if not sys.platform.startswith("linux"):
        _SANDBOX_CACHE = SandboxInfo(False, reason=f"bubblewrap needs Linux namespaces; this is {sys.platform}")
        return _SANDBOX_CACHE
    if exe is None:
        _SANDBOX_CACHE = SandboxInfo(False, reason="bubblewrap is not installed (apt-get install bubblewrap)")
        return _SANDBOX_CACHE
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
        version = out.stdout.strip() or "bubblewrap (unknown version)"
    except (OSError, subprocess.TimeoutExpired) as exc:
        _SANDBOX_CACHE = SandboxInfo(False, exe=exe, reason=f"bwrap --version failed: {exc}")
        return _SANDBOX_CACHE
    reasons = []
    user = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    for extra in (user, []):
        try:
            probe = subprocess.run(_bwrap_base(exe) + extra + ["true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(str(exc))
            continue
        if probe.returncode == 0:
            _SANDBOX_CACHE = SandboxInfo(True, exe=exe, version=version, user_namespace=bool(extra))
            return _SANDBOX_CACHE
        reasons.append(probe.stderr.decode(errors="replace").strip() or f"exit {probe.returncode}")
    _SANDBOX_CACHE = SandboxInfo(False, exe=exe, version=version,
                                 reason="bwrap cannot create its namespaces here: " + "; ".join(dict.fromkeys(reasons)))  # fmt: skip
    return _SANDBOX_CACHE


def sandbox_for(mode: str) -> SandboxInfo:
    """The sandbox workers get under ``--sandbox mode``: the probe's result for ``auto`` and ``bwrap`` (the
    caller refuses ``bwrap`` when it is unavailable), an unavailable one for ``none``."""
    if mode == "none":
        return SandboxInfo(False, reason="--sandbox none")
    return sandbox_probe()


def _start_time(pid: int) -> str | None:
    """The start time of ``pid`` (field 22 of /proc/PID/stat), telling a process from a later one with its pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _tree(pid: int) -> tuple[float, list[int]]:
    """Resident memory of ``pid`` and its descendants in MiB, and their pids (Linux /proc; 0 and [] elsewhere).

    Under the sandbox ``pid`` is bwrap's: orphans of the worker (a double-forked ``setsid`` daemon) are
    re-parented to the PID namespace's init, a descendant of bwrap, so they are counted too."""
    total_kb, stack, seen = 0, [pid], []
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.append(p)
        try:
            with open(f"/proc/{p}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"VmRSS:"):
                        total_kb += int(line.split()[1])
                        break
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children", "rb") as fh:
                    stack.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return total_kb / 1024.0, seen


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class _TreeCpu(NamedTuple):
    """One :func:`_tree_cpu_seconds` reading, in seconds: the tick clock and the nanosecond clock."""

    ticks_s: float
    precise_s: float


def _tree_cpu_seconds(pid: int) -> _TreeCpu | None:
    """CPU time (user + system) of ``pid`` and its live descendants, read from /proc by this process: the
    suite's own measurement of a worker, which the worker cannot alter (None where /proc cannot tell).

    Two clocks per process (:func:`_cpu_between` takes the larger difference): ``/proc/P/task/T/schedstat``
    (nanoseconds, live threads only) and ``/proc/P/stat`` utime + stime + cutime + cstime (clock ticks, also
    threads that ended and children that were waited for). Under the sandbox ``pid`` is bwrap's, so the worker,
    its threads and its children are all below it."""
    _, pids = _tree(pid)
    if not pids:
        return None
    ticks, nanos = 0, 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            ticks += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime (fields 14-17)
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/schedstat", "rb") as fh:
                    nanos += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a process or thread that ended between the walk and the read
    return _TreeCpu(ticks / _CLK_TCK, nanos / 1e9)


def _cpu_between(before: _TreeCpu, after: _TreeCpu) -> float:
    """CPU seconds between two readings: the nanosecond clock's difference, unless the tick clock saw more (work
    in threads or children that ended in between, which the live-thread clock loses) by over two ticks."""
    return max(after.precise_s - before.precise_s, after.ticks_s - before.ticks_s - 2.0 / _CLK_TCK, 0.0)


def tree_pids(pid: int) -> list[int]:
    """``pid`` and its live descendants (Linux /proc; [] elsewhere or when ``pid`` is gone). Under the sandbox a
    :class:`WorkerProxy`'s ``worker_pid`` is bwrap's, and the Python worker is one of these."""
    return _tree(pid)[1]


def _json_cost(raw: bytes) -> int:
    """An upper estimate of the memory (bytes) that ``json.loads(raw)`` and the decoder's copy take: every ``[``
    or ``{`` a container, every ``,`` or ``:`` one more value (C-speed byte counts, no parsing)."""
    containers = raw.count(b"[") + raw.count(b"{")
    values = raw.count(b",") + raw.count(b":") + containers + 1
    return 2 * len(raw) + 128 * containers + 64 * values


def _tmpfs_mib(pids: list[int], size_bytes: int) -> float:
    """MiB held by the sandbox's writable tmpfs folders (``/tmp``, ``/var/tmp``, ``/dev/shm``), seen through
    ``/proc/<pid>/root`` of a process inside the sandbox (``pids[0]`` is bwrap, outside); 0 when none can be read.

    Only a folder that the process's own mount table (``/proc/<pid>/mounts``, kernel-written, read with a bound)
    shows as a tmpfs, and whose file system has the size the sandbox gave its tmpfs (``size_bytes``, bwrap
    ``--size``; the kernel rounds it up to whole pages), is counted: while bwrap is still setting up (its own
    staging tmpfs, the host's root seen through a half-built one), or for a folder the sandbox does not replace,
    the path is another file system, whose usage is not the worker's."""
    page = os.sysconf("SC_PAGE_SIZE")
    want_blocks = -(-size_bytes // page)  # the tmpfs's size in pages
    for pid in pids[1:]:
        try:
            with open(f"/proc/{pid}/mounts", "rb") as f:
                table = f.read(1 << 20).decode(errors="replace")
        except OSError:
            continue
        fstype = {}
        for line in table.splitlines():
            parts = line.split()
            if len(parts) >= 3:
                fstype[parts[1]] = parts[2]  # the last mount on a point is the visible one
        tmpfs = [d for d in WRITABLE_TMPFS if fstype.get(d) == "tmpfs"]
        if "/tmp" not in tmpfs:
            continue  # not switched to the sandbox's root yet (or not inside it)
        used = 0
        for d in tmpfs:
            inside = f"/proc/{pid}/root{d}"
            try:
                if os.path.exists(d) and os.stat(inside).st_dev == os.stat(d).st_dev:
                    continue  # the host's own folder (a host whose /tmp is a tmpfs too), not the sandbox's
                st = os.statvfs(inside)
            except OSError:
                continue
            if st.f_blocks * st.f_frsize != want_blocks * page:
                continue  # not the sandbox's own sized tmpfs (mid set-up, a host file system)
            used += (st.f_blocks - st.f_bfree) * st.f_frsize
        return used / 2**20
    return 0.0


_UNPRIVILEGED_CACHE: dict[str, str] = {}


def unprivileged_python_problem(python: str) -> str:
    """Why :data:`SANDBOX_UID` cannot run ``python`` with the suite's package and numpy (``""`` when it can),
    probed once per interpreter by running it as that user (the suite must be root to ask)."""
    if python not in _UNPRIVILEGED_CACHE:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(import_root())}
        code = "import ctypes, json, numpy, gru4rec_conformance.conformance._harness.codec"
        try:
            probe = subprocess.run([python, "-c", code], user=SANDBOX_UID, group=SANDBOX_UID, extra_groups=[],
                                   cwd="/", env=env, capture_output=True, timeout=120)  # fmt: skip
            text = probe.stderr.decode(errors="replace").strip().splitlines()
            _UNPRIVILEGED_CACHE[python] = "" if probe.returncode == 0 else (text[-1] if text else "failed")
        except (OSError, subprocess.SubprocessError) as exc:
            _UNPRIVILEGED_CACHE[python] = str(exc)
    return _UNPRIVILEGED_CACHE[python]


def _bindable(value: str) -> str:
    """``value`` when it names a folder the sandbox may show read-only: an absolute path to a directory (not a
    socket, device or file), neither ``/`` nor one of :data:`HIDDEN_DIRS` or a folder above one, with no socket
    among its entries; else ``""``."""
    if not value or not os.path.isabs(value):
        return ""
    real = os.path.realpath(value)
    if not os.path.isdir(real) or real == "/" or any(_under(d, (real,)) for d in HIDDEN_DIRS):
        return ""
    try:
        with os.scandir(real) as entries:
            if any(stat.S_ISSOCK(e.stat(follow_symlinks=False).st_mode) for e in entries):
                return ""
    except OSError:
        return ""
    return value


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _describe_exit(returncode: int, sandboxed: bool = False) -> str:
    """``was killed by SIGSEGV`` / ``exited with status 3``; under the sandbox bwrap reports a command killed by
    signal N as exit status 128 + N."""
    if sandboxed and 128 < returncode < 128 + 65:
        returncode = 128 - returncode
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (killed: out of memory or from outside)" if -returncode == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with status {returncode}"


def _positive_int(text: str, default: int) -> str:
    """``text`` if it is a positive integer (OMP_NUM_THREADS may also hold a list such as ``4,2``), else
    ``default``, as a string."""
    try:
        return str(int(text)) if int(text) > 0 else str(default)
    except ValueError:
        return str(default)


class WorkerProxy:
    """An adapter living in a worker process; forwards protocol calls and contains failures.

    Args:
        ref: ``module:QualName`` of the adapter class (importable in the worker's interpreter).
        methods: the protocol methods to forward (``cls.protocol_methods()``).
        init_kwargs: JSON-able keyword arguments of the registry entry.
        device: passed to the adapter's constructor.
        settings: :class:`IsolationSettings`.
        extra_env: names of environment variables the adapter may additionally see.
        python: interpreter for this adapter (overrides ``settings.python``).
        pythonpath: extra ``sys.path`` entries for the worker (the adapter module's root).
        needs_network: the adapter declared that it needs the network (then it is not cut).
        timeout_kind: callable returning ``(kind, override)`` of the running check, for the timeout.
        label: name used in messages.
        capabilities_cls: the family's capability class, to rebuild ``capabilities()`` results.
        describe_only: the worker only imports ``ref`` and describes the class (``worker.describe_class``), in
            :attr:`hello` after :meth:`describe_class`; no adapter is created.
        compile_cache: a folder the worker may write and later workers of the same implementation read (code the
            implementation compiles at run time, e.g. Theano's C modules); the worker finds it in
            ``GRU4REC_COMPILE_CACHE``. The only writable path besides the worker's own directory; the suite never
            reads it. None (default): no such folder.
    """

    def __init__(
        self,
        ref: str,
        methods: tuple[str, ...],
        *,
        init_kwargs: Mapping[str, Any] | None = None,
        device: str = "cpu",
        settings: IsolationSettings | None = None,
        extra_env: tuple[str, ...] = (),
        python: str | None = None,
        pythonpath: tuple[str, ...] = (),
        needs_network: bool = False,
        timeout_kind: Callable[[], tuple[str | None, float | None]] | None = None,
        label: str = "",
        capabilities_cls: type[BaseCapabilities] | None = None,
        compile_cache: Path | None = None,
        describe_only: bool = False,
    ) -> None:
        self._ref = ref
        self._describe_only = describe_only
        self._compile_cache = Path(compile_cache) if compile_cache is not None else None
        self._methods = tuple(methods)
        self._init_kwargs = dict(init_kwargs or {})
        self.device = device
        self._settings = settings or IsolationSettings()
        self._extra_env = check_worker_env(tuple(extra_env), label or ref)
        self._python = python or self._settings.python or sys.executable
        self._pythonpath = tuple(pythonpath)
        self._needs_network = needs_network
        self._timeout_kind = timeout_kind or (lambda: (None, None))
        self._label = label or ref
        self._capabilities_cls = capabilities_cls
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._codec: Codec | None = None
        self._to_child = self._from_child = -1
        self._parent_fd = self._xchg_fd = self._stderr_fd = -1
        self._in_call = False
        self._between_calls: tuple[type[WorkerError], str] | None = None
        self._watch: tuple[threading.Thread, threading.Event] | None = None
        self._lost = False
        self._closed = False
        self.hello: dict[str, Any] = {}
        self.starts = 0
        self.isolation_info = ""
        self.sandboxed = False
        self._seen: dict[int, str | None] = {}  # pid -> start time of every process of the tree the watchdog saw
        self._next_memory_check = 0.0
        #: CPU seconds of the last successful call, measured by this process from /proc over the worker's whole
        #: process tree (the worker's request handling included; its own report where /proc cannot tell; None
        #: before a call and after a failed one)
        self.last_cpu_s: float | None = None
        #: the CPU seconds the worker itself reported for the adapter's method in the last call (diagnostics only)
        self.last_cpu_s_reported: float | None = None
        #: seconds this process was seen frozen (stopped by a signal, or starved) during the last call: its
        #: watchdog could not run, so the call's wall-clock time is disturbed (its CPU time, read from the worker's
        #: own clocks in /proc, still counts); 0.0 when undisturbed, None before a call
        self.last_call_frozen_s: float | None = None
        #: seconds this process was seen frozen since the worker started, calls and the time between them
        self.frozen_s = 0.0
        self._last_tick = 0.0

    # -- public ----------------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self.__dict__.get("_methods", ()):
            raise AttributeError(
                f"{type(self).__name__} for {self.__dict__.get('_label', '?')!r} has no attribute {name!r}"
            )
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def capabilities(self) -> Any:
        value = self.call("capabilities")
        if self._capabilities_cls is not None and not isinstance(value, self._capabilities_cls):
            value = self._capabilities_cls.from_mapping(value, source=f"{self._label}.capabilities() (worker)")
        return value

    def implemented_hooks(self) -> frozenset[str]:
        if not self.hello:
            self._start()
        return frozenset(self.hello.get("hooks", ()))

    def describe_class(self) -> dict[str, Any]:
        """The worker's unvalidated description of the adapter class (a ``describe_only`` proxy); raises as a
        worker start does (:class:`WorkerCallError` when the class cannot be imported or is no adapter)."""
        if not self.hello:
            self._start()
        return dict(self.hello)

    @property
    def worker_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def route_through(self, factory_ref: str, **init_kwargs: Any) -> None:
        """Build the adapter in the worker through ``factory_ref`` (``module:callable``), called with
        ``target=<this proxy's adapter ref>`` plus ``init_kwargs`` and the registry entry's keyword arguments (the
        benchmarks' per-epoch CPU limit wraps an adapter this way). Raises RuntimeError once the worker started."""
        if self._proc is not None or self.hello:
            raise RuntimeError(f"{self._label}: route_through() after the worker started")
        self._init_kwargs = {"target": self._ref, **init_kwargs, **self._init_kwargs}
        self._ref = factory_ref

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Forward ``method(*args, **kwargs)``; see the module docstring for the failures raised."""
        if self._closed:
            raise WorkerError(f"{self._label}: worker proxy is closed")
        if method not in self._methods:
            raise AttributeError(f"{method!r} is not a protocol method of {self._label}")
        if self._proc is None:
            if self._lost and method not in ("build", "capabilities", "version"):
                raise WorkerStateLost(
                    f"{self._label}.{method}(): the previous worker died and its model state is lost; call build() again"
                )
            self._start()
        kind, override = self._timeout_kind()
        timeout = self._settings.timeout_for(method, kind, override)
        assert self._codec is not None
        if self._between_calls is not None:  # the watch killed it while no call ran
            cls, text = self._between_calls
            self._fail(cls, f"{self._label}.{method}(): {text}")
        if self._proc is not None and self._proc.poll() is not None:  # killed between calls: its tree is going
            self._fail(WorkerCrashed, f"{self._label}.{method}(): the worker {self._exit_text()} before the call")
        request = {
            "op": "call",
            "method": method,
            "args": self._codec.encode(list(args), where=f"{method}() arguments"),
            "kwargs": self._codec.encode(dict(kwargs), where=f"{method}() keyword arguments"),
            # the worker dumps its stacks just before the deadline: what a timeout then shows
            "dump_stacks_after_s": _dump_after(timeout),
        }
        self.last_cpu_s = self.last_cpu_s_reported = None
        self.last_call_frozen_s = 0.0
        self._last_tick = time.monotonic()
        cpu_before = _tree_cpu_seconds(self._proc.pid) if self._proc is not None else None
        reply = self._roundtrip(request, timeout, f"{self._label}.{method}()")
        cpu_after = _tree_cpu_seconds(self._proc.pid) if self._proc is not None else None
        cpu_s = reply.get("cpu_s")
        self.last_cpu_s_reported = float(cpu_s) if isinstance(cpu_s, (int, float)) and cpu_s >= 0 else None
        if not reply.get("ok"):
            self.last_cpu_s = self.last_cpu_s_reported = None  # a failed call has no CPU time
        elif cpu_before is not None and cpu_after is not None:
            # measured here, from outside: a worker that under- or over-states its CPU time cannot move SC-1
            self.last_cpu_s = _cpu_between(cpu_before, cpu_after)
        else:  # no /proc: the worker's own word, the only figure there is
            self.last_cpu_s = self.last_cpu_s_reported
        if self.last_call_frozen_s:
            warnings.warn(f"{self._label}.{method}(): this process was frozen for {self.last_call_frozen_s:.1f} s "
                          "during the call (stopped or starved): its wall-clock timing is disturbed; its CPU time "
                          "is the worker's own", RuntimeWarning, stacklevel=2)  # fmt: skip
        problem: Exception | None = None
        try:
            if not reply.get("ok"):
                self._raise_remote(reply.get("error"), method)
            try:
                value = self._codec.decode(reply.get("result"))
            except (ExchangeError, ValueError, KeyError, TypeError) as exc:
                problem = exc
        finally:
            self._codec.clear()
        if problem is not None:  # a worker that sends what the protocol refuses is not trusted further
            self._fail(WorkerProtocolError, f"{self._label}.{method}(): refused the worker's reply: {problem}")
        if method == "build":
            self._lost = False
        return value

    def close(self) -> None:
        """Shut the worker down (politely, then by force) and remove its directory."""
        if self._closed:
            return
        self._closed = True
        self._stop(polite=True)

    def __del__(self) -> None:  # last resort; the harness closes proxies explicitly at teardown
        try:
            if not self._closed and self._proc is not None:
                self._kill()
        except Exception:
            pass

    # -- process management ----------------------------------------------------------------------------
    def _environment(self, workdir: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
        env.update({k: os.environ[k] for k in self._extra_env if k in os.environ})  # checked in __init__
        # The suite's import root (src/ of a checkout) first; never the checkout itself (its folders would
        # become top-level names, `datasets/` shadowing Hugging Face's).
        path_entries = [str(import_root()), *self._pythonpath]
        path_entries += child_pythonpath(os.environ.get("PYTHONPATH")).split(os.pathsep)[1:]
        from gru4rec_conformance.implementations.base import cache_dir

        env.update(
            {
                "PYTHONPATH": os.pathsep.join(dict.fromkeys(path_entries)),
                "HOME": str(workdir / "home"),
                "TMPDIR": str(workdir / "tmp"),
                "MPLCONFIGDIR": str(workdir / "tmp"),
                "GRU4REC_CACHE_DIR": str(cache_dir()),
                **({"GRU4REC_COMPILE_CACHE": str(self._compile_cache)} if self._compile_cache else {}),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "HF_DATASETS_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                "GRU4REC_WORKER": "1",
            }
        )
        n = self._settings.threads
        for var in THREAD_VARS:
            if n is not None:
                env[var] = str(int(n))
            elif var not in os.environ:
                env[var] = "1"
        env[WORKER_NPROC_ENV] = str(int(self._settings.max_processes))
        env[WORKER_THREADS_ENV] = str(int(n)) if n is not None else _positive_int(env["OMP_NUM_THREADS"], 1)
        return env

    def _start(self) -> None:
        if not sandbox_for(self._settings.sandbox).available and os.geteuid() == 0:
            problem = unprivileged_python_problem(self._python)
            if problem:  # adapter code never runs as root: refuse rather than run it unsandboxed as root
                raise WorkerCrashed(
                    f"{self._label}: the suite runs as root without the sandbox, and its worker would drop to uid "
                    f"{SANDBOX_UID} before any adapter code runs, but that user cannot run {self._python} here "
                    f"({problem}): install bubblewrap (--sandbox bwrap), run the suite as an unprivileged user, or "
                    "use an interpreter every user may read"
                )
        base = self._settings.tmp_root
        if base:
            os.makedirs(base, exist_ok=True)
        self._dir = Path(tempfile.mkdtemp(prefix="gru4rec-worker-", dir=base))
        # Everything below the worker's directory is the worker's to change. The suite holds descriptors it opened
        # before the worker existed (the folder's parent, the exchange folder, the stderr file) and never reaches
        # those again by path: a link, FIFO or device planted under a known name is never followed or waited on.
        self._parent_fd = os.open(self._dir.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for sub in ("home", "tmp", "xchg"):
            (self._dir / sub).mkdir()
        self._xchg_fd = os.open(self._dir / "xchg", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._codec = Codec(self._dir / "xchg", prefix="p", max_bytes=self._settings.max_reply_bytes,
                            dir_fd=self._xchg_fd)  # fmt: skip
        create = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_APPEND
        self._stderr_fd = os.open(self._dir / "stderr.log", os.O_RDWR | create, 0o644)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        allow_net = self._settings.network != "deny" or self._needs_network
        net_text = "network allowed" + (" (adapter needs it)" if self._needs_network else "")
        env = self._environment(self._dir)
        sandbox = sandbox_for(self._settings.sandbox)
        prefix: list[str] = []
        if sandbox.available:
            prefix = self._bwrap_prefix(sandbox, self._dir, env, allow_net)
            self.sandboxed = True
            self.isolation_info = f"sandbox: {sandbox.describe(network=allow_net)}" + (
                f"; {net_text}" if allow_net else ""
            )
        else:
            if os.geteuid() == 0:  # unsandboxed as root: the worker drops to nobody before adapter code runs
                self._hand_to_unprivileged(env)
            if not allow_net:
                prefix, net_info = network_isolation()
                self.isolation_info = f"sandbox: {sandbox.describe()}; network {net_info}{self._unprivileged_text}"
            else:
                self.isolation_info = (
                    f"sandbox: {sandbox.describe()}; not isolated: {net_text}{self._unprivileged_text}"
                )
        cmd = prefix + [self._python, "-m", "gru4rec_conformance.conformance._harness.worker", str(to_child_r), str(from_child_w),
                        str(self._dir / "xchg")]  # fmt: skip
        stdout_fd = os.open(self._dir / "stdout.log", os.O_WRONLY | create, 0o644)
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=stdout_fd,
                stderr=self._stderr_fd,
                cwd=self._dir,
                env=env,
                pass_fds=(to_child_r, from_child_w),
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
                os.close(fd)
            self._cleanup_dir()
            raise WorkerCrashed(f"{self._label}: cannot start worker {cmd!r}: {exc}") from exc
        finally:
            os.close(stdout_fd)  # the worker's; the suite never reads it
        os.close(to_child_r)
        os.close(from_child_w)
        self._to_child, self._from_child = to_child_w, from_child_r
        os.set_blocking(self._to_child, False)  # a hung worker must never block a write past the deadline
        self.starts += 1
        startup = self._settings.timeouts.get("startup", DEFAULT_TIMEOUTS_S["startup"])
        request = {"op": "init", "ref": self._ref, "init_kwargs": self._init_kwargs, "device": self.device,
                   "dump_stacks_after_s": _dump_after(startup)}  # fmt: skip
        if self._describe_only:
            request = {"op": "describe", "ref": self._ref, "dump_stacks_after_s": _dump_after(startup)}
        reply = self._roundtrip(request, startup, f"{self._label} worker start")
        if not reply.get("ok"):
            tail = self._stderr_tail()
            err = reply["error"]
            self._kill()
            self._cleanup_dir()
            self._proc = None
            if err.get("type") == "ImplementationUnavailable":
                raise ImplementationUnavailable(str(err.get("message", "")))
            raise WorkerCallError(
                f"{self._label}: the worker could not create the adapter: {err['type']}: {err['message']}",
                remote_type=err["type"], remote_traceback=err.get("traceback", ""), stderr_tail=tail,
                remote_message=str(err.get("message", "")),
            )  # fmt: skip
        self.hello = reply["result"]
        stop = threading.Event()
        thread = threading.Thread(target=self._watch_between_calls, args=(self._proc, stop), daemon=True,
                                  name=f"worker-watch-{self._label}")  # fmt: skip
        thread.start()
        self._watch = (thread, stop)

    def _bwrap_prefix(self, sandbox: SandboxInfo, workdir: Path, env: Mapping[str, str], allow_net: bool) -> list[str]:
        """The ``bwrap`` command line that runs the worker: everything read-only, the hidden directories empty,
        what the worker must read under them (interpreter, import paths, cache) bound back read-only, its own
        directory writable."""
        cmd = [sandbox.exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        hidden = tuple(d for d in HIDDEN_DIRS if os.path.isdir(d) and not os.path.islink(d))
        size = self._settings.effective_tmpfs_bytes()
        for d in hidden:  # sized: a worker filling its /dev/shm or /tmp cannot take the machine's memory
            cmd += ["--size", str(size if d in WRITABLE_TMPFS else 16 << 20), "--tmpfs", d]
        exe = Path(self._python)
        venv = str(exe.parent.parent) if exe.parent.name == "bin" else ""  # the interpreter's environment
        # the suite's checkout (src/ holds symlinks into it), when the suite runs from one under a hidden folder
        needed = [self._python, venv, sys.prefix, sys.base_prefix, str(CHECKOUT_ROOT or "")]
        needed += [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if not os.path.isdir(e) or _bindable(e)]
        # folders named by the suite's own path variables (data, mirror, pinned checkouts), never any other value
        needed += [p for p in (_bindable(env.get(k, "")) for k in self._bind_vars()) if p]
        for raw in dict.fromkeys(needed):
            for path in dict.fromkeys((os.path.abspath(raw), os.path.realpath(raw)) if raw else ()):
                if _under(path, hidden) and os.path.exists(path) and not _under(path, (str(workdir),)):
                    cmd += ["--ro-bind", path, path]
        cache = env.get("GRU4REC_CACHE_DIR")
        if cache and os.path.isdir(cache):  # read-only: the controller fills it (handle.new_adapter, _checkout.prepare)
            cmd += ["--ro-bind", cache, cache]
        for d in dict.fromkeys(self._settings.hidden_paths):  # after the binds above: they may lie inside them
            if os.path.isdir(d) and not _under(str(workdir), (d,)) and not _under(os.path.realpath(self._python), (d,)):
                cmd += ["--size", str(1 << 20), "--tmpfs", d, "--remount-ro", d]
        cmd += ["--bind", str(workdir), str(workdir)]
        if self._compile_cache is not None:  # after the read-only cache: it may lie inside it
            self._compile_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
            cmd += ["--bind", str(self._compile_cache), str(self._compile_cache)]
        if self.device.startswith("cuda"):  # the GPU device nodes (the fresh /dev has none)
            for dev in sorted(glob.glob("/dev/nvidia*")):
                cmd += ["--dev-bind", dev, dev]
        cmd += ["--unshare-all"] + (["--share-net"] if allow_net else [])
        if sandbox.user_namespace:
            cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        return cmd + ["--die-with-parent", "--new-session", "--chdir", str(workdir), "--"]

    _unprivileged_text = ""

    def _hand_to_unprivileged(self, env: dict[str, str]) -> None:
        """Unsandboxed under root: give the worker's directory (and compile cache) to :data:`SANDBOX_UID` and tell
        the worker to switch to it (``worker._drop_root``), so that adapter code never runs as root."""
        assert self._dir is not None
        targets = [self._dir, *(self._dir / sub for sub in ("home", "tmp", "xchg"))]
        if self._compile_cache is not None:
            self._compile_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
            targets.append(self._compile_cache)
        for path in targets:
            os.chown(path, SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)
        env["GRU4REC_WORKER_DROP_TO"] = f"{SANDBOX_UID}:{SANDBOX_UID}"
        self._unprivileged_text = f"; runs as uid {SANDBOX_UID} (the suite is root), no capabilities"

    def _bind_vars(self) -> tuple[str, ...]:
        from gru4rec_conformance.implementations._checkout import CHECKOUTS

        return ENV_BIND + tuple(c.env for c in CHECKOUTS.values())

    def _roundtrip(self, request: dict[str, Any], timeout: float, what: str) -> dict[str, Any]:
        self._in_call = True
        try:
            return self._roundtrip_now(request, timeout, what)
        finally:
            self._in_call = False

    def _roundtrip_now(self, request: dict[str, Any], timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        body = dumps(request)
        try:
            self._send(_HEADER.pack(len(body)) + body, deadline, what, timeout)
            header = self._recv(_HEADER.size, deadline, what, timeout)
            (length,) = _HEADER.unpack(header)
            cap = self._settings.max_frame_bytes
            if length > cap:
                self._fail(WorkerProtocolError, f"{what}: the worker announced a reply of {length} bytes, over the "
                                                f"frame limit of {cap} bytes ({cap / 2**20:g} MiB)")  # fmt: skip
            raw = self._recv(length, deadline, what, timeout)
            cost, budget = _json_cost(raw), max(JSON_DECODE_FACTOR * len(raw), JSON_DECODE_FLOOR)
            if cost > budget:  # refused before a Python object of it exists
                self._fail(WorkerProtocolError, f"{what}: the worker's reply of {len(raw)} bytes would take about "
                                                f"{cost >> 20} MiB to decode, over the budget of {budget >> 20} MiB "
                                                "(arrays travel as .npy files)")  # fmt: skip
            try:
                reply: dict[str, Any] = loads(raw)
            except (ValueError, RecursionError) as exc:
                self._fail(WorkerProtocolError, f"{what}: the worker's reply is not valid JSON ({exc})")
            if not isinstance(reply, dict):
                self._fail(WorkerProtocolError, f"{what}: the worker's reply is not a JSON object")
            return reply
        except WorkerError:
            raise
        except OSError as exc:  # broken pipe: the worker died while we were writing
            self._fail(WorkerCrashed, f"{what}: the worker {self._exit_text()} ({exc})")
            raise AssertionError("unreachable") from exc  # _fail raises

    def _send(self, data: bytes, deadline: float, what: str, timeout: float) -> None:
        view = memoryview(data)
        while view:
            self._watchdog(deadline, what, timeout)
            _, writable, _ = select.select([], [self._to_child], [], self._settings.poll_s)
            if writable:
                try:
                    n = os.write(self._to_child, view[: 1 << 16])
                except BlockingIOError:
                    continue
                view = view[n:]

    def _recv(self, n: int, deadline: float, what: str, timeout: float) -> bytes:
        chunks, got = [], 0
        while got < n:
            # every iteration, whether bytes arrive or not: a trickling worker must not outlive its deadline
            self._watchdog(deadline, what, timeout)
            readable, _, _ = select.select([self._from_child], [], [], self._settings.poll_s)
            if readable:
                chunk = os.read(self._from_child, min(n - got, 1 << 20))
                if not chunk:
                    self._fail(WorkerCrashed, f"{what}: the worker {self._exit_text(wait=True)}")
                chunks.append(chunk)
                got += len(chunk)
        return b"".join(chunks)

    def _watchdog(self, deadline: float, what: str, timeout: float) -> None:
        assert self._proc is not None
        if self._proc.poll() is not None:
            self._fail(WorkerCrashed, f"{what}: the worker {_describe_exit(self._proc.returncode, self.sandboxed)}")
        now = time.monotonic()
        self._tick(now)
        if now > deadline:
            frozen = self.last_call_frozen_s or 0.0
            note = (f" (this process was frozen for {frozen:.1f} s of it, stopped or starved: the wall-clock timing "
                    "is disturbed)" if frozen else "")  # fmt: skip
            self._fail(WorkerTimeout, f"{what}: no answer within the timeout of {timeout:g} s{note}; {TIMEOUT_HINT}")
        if now < self._next_memory_check:
            return  # the /proc walk once per poll period, however fast bytes arrive
        self._next_memory_check = now + self._settings.poll_s
        problem = self._over_limits(*self._remember_tree())
        if problem is not None:
            self._fail(problem[0], f"{what}: {problem[1]}")

    def _tick(self, now: float) -> None:
        """Count a gap since the previous watchdog pass longer than a poll period plus :data:`FROZEN_GAP_S` as time
        this process was frozen (a SIGSTOP from a worker that may signal it, or a starved machine)."""
        gap = now - self._last_tick - self._settings.poll_s
        self._last_tick = now
        if gap > FROZEN_GAP_S:
            self.last_call_frozen_s = (self.last_call_frozen_s or 0.0) + gap
            self.frozen_s += gap

    def _over_limits(self, rss: float, pids: list[int]) -> tuple[type[WorkerError], str] | None:
        """Which limit the worker's tree passes now, if any: its memory (resident, plus what its sandbox's tmpfs
        folders hold) or its process count."""
        shm = _tmpfs_mib(pids, self._settings.effective_tmpfs_bytes()) if self.sandboxed else 0.0
        limit = self._settings.effective_memory_limit_mb()
        if limit is not None and rss + shm > limit:
            held = f" + {shm:.0f} MiB in its /tmp and /dev/shm" if shm >= 1 else ""
            return WorkerMemoryExceeded, (f"worker memory {rss:.0f} MiB{held} (process tree of {len(pids)}) "
                                          f"exceeded the limit of {limit:.0f} MiB")  # fmt: skip
        if len(pids) > self._settings.max_processes + 1:  # bwrap itself is not the worker's
            return WorkerMemoryExceeded, (f"the worker's process tree has {len(pids)} processes, over the limit of "
                                          f"{self._settings.max_processes}")  # fmt: skip
        return None

    def _watch_between_calls(self, proc: subprocess.Popen[bytes], stop: threading.Event) -> None:
        """While no call runs, walk the worker's tree every ``between_calls_s``: a tree over a limit is killed at
        once, and the next call fails with what was found (:attr:`_between_calls`)."""
        period = self._settings.between_calls_s
        before = time.monotonic()
        while not stop.wait(period):
            now = time.monotonic()
            late, before = now - before - period, now
            if self._in_call or proc.poll() is not None:
                continue
            if late > FROZEN_GAP_S:  # the calls' own watchdog counts the frozen time within calls
                self.frozen_s += late
            rss, pids = _tree(proc.pid)
            problem = self._over_limits(rss, pids)
            if problem is None:
                continue
            self._between_calls = (problem[0], f"between calls: {problem[1]}")
            for pid in reversed(pids):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            return

    def _exit_text(self, wait: bool = False) -> str:
        if self._proc is None:
            return "is gone"
        if wait:
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        rc = self._proc.poll()
        return "closed its pipe" if rc is None else _describe_exit(rc, self.sandboxed)

    def _fail(self, cls: type[WorkerError], message: str) -> NoReturn:
        self._kill()
        tail = self._stderr_tail()
        details: dict[str, Any] = {"starts": self.starts}
        if cls is WorkerTimeout:
            details["stacks"] = stack_dump(self._stderr_tail(STACKS_CHARS + STDERR_TAIL_CHARS))
        self._cleanup_dir()
        self._proc = None
        self._lost = True
        raise cls(message, stderr_tail=tail, details=details)

    def _raise_remote(self, err: Any, method: str) -> None:
        if not isinstance(err, Mapping):
            self._fail(WorkerProtocolError, f"{self._label}.{method}(): the worker's error reply is malformed")
        if err.get("type") == "Unsupported":
            raise Unsupported(err.get("name") or method, err.get("detail") or "")
        if err.get("type") == "ImplementationUnavailable":
            raise ImplementationUnavailable(str(err.get("message", "")))
        raise WorkerCallError(
            f"{self._label}.{method}() raised {err.get('type')}: {err.get('message')}",
            remote_type=str(err.get("type")),
            remote_traceback=str(err.get("traceback", "")),
            stderr_tail=self._stderr_tail(),
            remote_message=str(err.get("message", "")),
        )

    def _stderr_tail(self, chars: int = STDERR_TAIL_CHARS) -> str:
        """The last ``chars`` bytes of the worker's stderr, read through the descriptor the suite opened (the file
        itself, whatever the worker did to its name), at most ``chars`` bytes whatever its size."""
        if self._stderr_fd < 0:
            return ""
        try:
            size = os.fstat(self._stderr_fd).st_size
            return os.pread(self._stderr_fd, chars, max(0, size - chars)).decode("utf-8", errors="replace")
        except OSError:
            return ""

    def _remember_tree(self) -> tuple[float, list[int]]:
        """Walk the worker's process tree now (memory in MiB, pids) and remember its processes for :meth:`_kill`."""
        assert self._proc is not None
        rss, pids = _tree(self._proc.pid)
        for pid in pids:
            if pid not in self._seen:
                self._seen[pid] = _start_time(pid)
        return rss, pids

    def _kill(self) -> None:
        """End the worker's whole process tree: its session's group, every descendant alive now or seen by the
        watchdog (same pid and start time), and under the sandbox bwrap itself, which ends its PID namespace."""
        if self._watch is not None:
            thread, stop = self._watch
            stop.set()
            if thread is not threading.current_thread():
                thread.join(timeout=5)
            self._watch = None
        self._between_calls = None
        if self._proc is not None:
            victims = dict(self._seen)
            if self._proc.poll() is None:
                for pid in _tree(self._proc.pid)[1]:
                    victims.setdefault(pid, _start_time(pid))
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            for pid, started in victims.items():
                if pid != self._proc.pid and started is not None and _start_time(pid) == started:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            if self._proc.poll() is None:
                self._proc.kill()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self._seen.clear()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_child = self._from_child = -1

    def _stop(self, polite: bool) -> None:
        if self._proc is not None and self._proc.poll() is None and polite:
            self._remember_tree()  # the worker's children, before a clean exit orphans them
            try:
                self._roundtrip({"op": "shutdown"}, 10.0, f"{self._label} shutdown")
                self._proc.wait(timeout=5)
            except (WorkerError, subprocess.TimeoutExpired, OSError):
                pass
        self._kill()
        self._cleanup_dir()
        self._proc = None

    def _cleanup_dir(self) -> None:
        """Close the suite's descriptors into the worker's directory and, unless ``keep_dirs``, remove the
        directory (after the worker is gone) by its name in the parent folder the suite opened at the start; the
        removal never follows a link (``shutil.rmtree`` works through descriptors)."""
        if self._codec is not None:
            self._codec.closed = True
        for attr in ("_xchg_fd", "_stderr_fd"):
            fd = getattr(self, attr)
            if fd >= 0:
                os.close(fd)
                setattr(self, attr, -1)
        if self._dir is not None and not self._settings.keep_dirs:
            if self._parent_fd >= 0:
                shutil.rmtree(self._dir.name, ignore_errors=True, dir_fd=self._parent_fd)
        if self._parent_fd >= 0:
            os.close(self._parent_fd)
            self._parent_fd = -1
        if not self._settings.keep_dirs:
            self._dir = None
