"""Child side of an isolated adapter: ``python -m gru4rec_conformance.conformance._harness.worker FD_IN FD_OUT EXCHANGE_DIR``.

Runs one adapter instance and answers the parent's requests, one at a time, over two pipes (8-byte
big-endian length + JSON). Arguments and results cross through :mod:`conformance._harness.codec` (JSON and
``.npy`` files, no pickle). The parent (:mod:`conformance._harness.isolation`) owns timeouts, memory limits
and killing; this side only disables core dumps, pins torch's intra-op threads to ``GRU4REC_WORKER_THREADS`` (set
by the parent with ``OMP_NUM_THREADS`` etc.; applied before and after every request once torch is imported,
without importing it), reports exceptions with their traceback and, when a call asks for it
(``dump_stacks_after_s``), dumps every thread's Python stack to stderr shortly before the parent's timeout.

Requests: ``{"op": "init", "ref", "init_kwargs", "device"[, "dump_stacks_after_s"]}`` → ``{"ok": true,
"result": {pid, hooks, methods, python}}``; ``{"op": "call", "method", "args", "kwargs"[, "dump_stacks_after_s"]}``
→ ``{"ok": true, "result", "cpu_s"}`` or ``{"ok": false, "error": {type, module, message, traceback, name, detail}}``;
``{"op": "describe", "ref"}`` → ``{"ok": true, "result": {...}}``: the class's declarations (:func:`describe_class`),
without creating an adapter, so that the suite builds its view of an outside adapter from a sandboxed process and
never imports the adapter's module itself; ``{"op": "shutdown"}``. ``cpu_s`` is the CPU time of the adapter's method alone (:func:`process_cpu_seconds`, before
encoding the result): timing checks (SC-1) measure where the work runs, not the parent's wall clock.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import struct
import sys
import time
import traceback
from typing import Any

_HEADER = struct.Struct(">Q")


def read_message(fd: int) -> bytes | None:
    """Read one framed message; None on EOF."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    body = _read_exact(fd, length)
    if body is None:
        raise EOFError("pipe closed in the middle of a message")
    return body


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None if got == 0 else b"".join(chunks)
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def write_message(fd: int, body: bytes) -> None:
    data = _HEADER.pack(len(body)) + body
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def process_cpu_seconds() -> float:
    """CPU seconds (user + system, float) of this process, all its threads, plus its terminated, waited-for
    children. The process part has nanosecond resolution (``time.process_time``); the children's part has the
    clock-tick resolution of ``os.times`` (0 where the platform does not count children)."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system


def _import_ref(ref: str) -> Any:
    module_name, _, qualname = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def describe_class(ref: str) -> dict[str, Any]:
    """The declarations of the adapter class ``module:QualName`` as plain JSON values: ``name``, ``family``,
    ``role``, ``isolated``, ``description``, ``xfails_file``, ``study``, ``worker_env``, ``worker_python``,
    ``worker_network``, ``compile_cache``, ``checkouts`` (keys of the pinned checkouts), ``hooks`` (implemented
    optional methods). Raises TypeError when ``ref`` is not an adapter class. The suite validates every field."""
    from gru4rec_conformance.implementations.base import AdapterBase

    module_name, _, qualname = ref.partition(":")
    try:
        cls: Any = importlib.import_module(module_name)
    except Exception as exc:  # the module's own error, named with its type
        from gru4rec_conformance.implementations.registry import import_failure

        raise ImportError(import_failure(module_name, exc)) from exc
    for part in qualname.split("."):
        if not hasattr(cls, part):
            raise AttributeError(f"module {module_name!r} has no attribute {qualname!r}")
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and issubclass(cls, AdapterBase)):
        raise TypeError(f"{ref} is not a subclass of implementations.base.AdapterBase")
    from gru4rec_conformance.implementations.registry import protocol_class_problem

    problem = protocol_class_problem(ref, cls)
    if problem:  # e.g. your_pkg.conformance:Adapter, the base class the template imports
        raise TypeError(problem)
    study = getattr(cls, "study", None)
    return {
        "name": getattr(cls, "name", None),
        "family": getattr(cls, "family", None),
        "role": getattr(cls, "role", None),
        "isolated": bool(getattr(cls, "isolated", False)),
        "description": str(getattr(cls, "description", "") or ""),
        "xfails_file": str(getattr(cls, "xfails_file", None) or "") or None,
        "study": {str(k): str(v) for k, v in dict(study).items()} if study else None,
        "worker_env": [str(v) for v in getattr(cls, "worker_env", ())],
        "worker_python": getattr(cls, "worker_python", None),
        "worker_network": bool(getattr(cls, "worker_network", False)),
        "compile_cache": bool(getattr(cls, "compile_cache", False)),
        "checkouts": [getattr(c, "key", str(c)) for c in getattr(cls, "checkouts", ())],
        "hooks": sorted(cls.implemented_hooks()),
    }


def _error_payload(exc: BaseException) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "module": type(exc).__module__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:],
        "name": getattr(exc, "name", None) if type(exc).__name__ == "Unsupported" else None,
        "detail": getattr(exc, "detail", None) if type(exc).__name__ == "Unsupported" else None,
    }


def _pin_torch_threads(done: list[bool]) -> None:
    """torch.set_num_threads(GRU4REC_WORKER_THREADS) once torch has been imported (by the adapter)."""
    torch = sys.modules.get("torch")
    if done[0] or torch is None or not hasattr(torch, "set_num_threads"):
        return
    done[0] = True
    try:
        n = int(os.environ.get("GRU4REC_WORKER_THREADS", ""))
    except ValueError:
        return
    if n > 0:
        torch.set_num_threads(n)


def _bind_to_parent() -> None:
    """Linux only: ask the kernel to SIGKILL this worker when its parent (the suite, or bwrap's init) dies, and make
    the worker the subreaper of its descendants, so that a double-forked ``setsid`` daemon stays in its process
    tree (counted against the memory limit, killed with the tree) also without the sandbox."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        ppid = os.getppid()
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        if os.getppid() != ppid:  # the parent died before the request took effect
            os._exit(1)
    except (OSError, AttributeError):
        pass


def _drop_root(text: str) -> None:
    """Unsandboxed and started as root: become ``uid:gid`` (``text``, set by the parent) with no supplementary
    groups, no capabilities (a uid change from 0 clears them) and no way back (``PR_SET_NO_NEW_PRIVS``), before any
    adapter code runs. Exits with status 71 when the switch fails: no adapter runs as root."""
    if not text or os.geteuid() != 0:
        return
    try:
        uid, gid = (int(v) for v in text.split(":"))
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        if os.geteuid() == 0 or os.getuid() == 0:
            raise OSError("still root")
    except (ValueError, OSError, AttributeError) as exc:
        sys.stderr.write(f"worker: cannot drop root privileges to {text}: {exc}\n")
        os._exit(71)


def _limit_processes(text: str) -> None:
    """RLIMIT_NPROC (soft and hard) to ``text`` processes, before any adapter code runs; the kernel applies it to
    an unprivileged user only (the parent's watchdog counts the process tree in every case). The kernel counts
    every thread of the real uid in the worker's user namespace: in the sandbox's own namespace that is the worker's
    tree; outside one (``--sandbox none``) it is all of the user's threads on the machine, so those already running
    are added to the limit (the worker's tree then gets ``text`` more, not the user's session fewer)."""
    try:
        import resource

        n = int(text)
        if n > 0:
            if os.getuid() != 0 and _in_initial_user_namespace():
                n += _threads_of_uid(os.getuid())
            resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
    except (ImportError, ValueError, OSError):
        pass


def _in_initial_user_namespace() -> bool:
    """Whether this process's uid map is the identity over all uids (the machine's own user namespace)."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            return fh.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return True  # no /proc: assume the machine's namespace, the larger limit


def _threads_of_uid(uid: int) -> int:
    """Threads of the processes ``uid`` owns, from /proc (0 where /proc cannot be read)."""
    count = 0
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry.name}").st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue  # gone meanwhile
    return count


def _arm_stack_dump(after_s: Any) -> None:
    """Dump every thread's Python stack to stderr after ``after_s`` seconds of the current call (faulthandler's
    watchdog thread, so a call stuck in C code or holding the GIL is dumped too); nothing when ``after_s`` is not a
    positive number. The dump starts with faulthandler's ``Timeout (h:mm:ss)!`` line, by which the parent finds it
    (``isolation.stack_dump``); the parent kills the worker at its deadline, just after the dump."""
    if not isinstance(after_s, (int, float)) or isinstance(after_s, bool) or not after_s > 0:
        return
    faulthandler.dump_traceback_later(float(after_s), repeat=False, file=sys.stderr, exit=False)


def main(argv: list[str]) -> int:
    fd_in, fd_out, exchange_dir = int(argv[0]), int(argv[1]), argv[2]
    _drop_root(os.environ.get("GRU4REC_WORKER_DROP_TO", ""))  # before anything else: PDEATHSIG is set after it
    _bind_to_parent()
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass  # not available on this platform; core dumps then follow the system default
    _limit_processes(os.environ.get("GRU4REC_WORKER_MAX_PROCS", ""))
    faulthandler.enable(file=sys.stderr, all_threads=True)

    from gru4rec_conformance.conformance._harness.codec import Codec, dumps, loads

    codec = Codec(exchange_dir, prefix="c")
    adapter: Any = None
    pinned = [False]
    while True:
        raw = read_message(fd_in)
        if raw is None:
            break
        request = loads(raw)
        op = request.get("op")
        try:
            _pin_torch_threads(pinned)
            if op == "describe":
                _arm_stack_dump(request.get("dump_stacks_after_s"))
                try:
                    reply = {"ok": True, "result": describe_class(request["ref"])}
                finally:
                    faulthandler.cancel_dump_traceback_later()
            elif op == "init":
                _arm_stack_dump(request.get("dump_stacks_after_s"))  # an import that hangs is diagnosable too
                try:
                    obj: Any = _import_ref(request["ref"])
                    adapter = obj(device=request.get("device", "cpu"), **request.get("init_kwargs", {}))
                finally:
                    faulthandler.cancel_dump_traceback_later()
                result: Any = {
                    "pid": os.getpid(),
                    "python": sys.version.split()[0],
                    "executable": sys.executable,
                    "hooks": sorted(obj.implemented_hooks()),
                    "methods": list(obj.protocol_methods()),
                }
                reply = {"ok": True, "result": result}
            elif op == "call":
                if adapter is None:
                    raise RuntimeError("worker received a call before init")
                method = request["method"]
                if method not in type(adapter).protocol_methods() and method != "close":
                    raise AttributeError(f"{method!r} is not a protocol method of {type(adapter).__qualname__}")
                _arm_stack_dump(request.get("dump_stacks_after_s"))  # the parent's clock runs from the request
                try:
                    args = codec.decode(request.get("args", []))
                    kwargs = codec.decode(request.get("kwargs", {"__dict__": []}))
                    cpu0 = process_cpu_seconds()
                    value = getattr(adapter, method)(*args, **kwargs)
                    cpu_s = process_cpu_seconds() - cpu0
                finally:
                    faulthandler.cancel_dump_traceback_later()
                reply = {"ok": True, "result": codec.encode(value, where=f"{method}() result"), "cpu_s": cpu_s}
            elif op == "shutdown":
                if adapter is not None:
                    adapter.close()
                write_message(fd_out, dumps({"ok": True, "result": None}))
                break
            else:
                raise ValueError(f"unknown worker op {op!r}")
        except BaseException as exc:  # every failure inside the adapter goes back to the parent
            if isinstance(exc, KeyboardInterrupt):
                raise
            reply = {"ok": False, "error": _error_payload(exc)}
        _pin_torch_threads(pinned)
        sys.stdout.flush()
        sys.stderr.flush()
        write_message(fd_out, dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
