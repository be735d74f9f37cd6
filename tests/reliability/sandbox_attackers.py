"""Adversarial adapters for the sandbox tests (test-only, never registered): each ``fit`` performs one attack of
the sandbox tests inside the worker and either reports what it could do (a dict from ``optimizer_info``, or an exception
naming every attempt) or breaks the protocol on purpose by writing raw frames to the worker's reply pipe.

``Attacker(attack=NAME, **params)``; the attacks:

- ``forge``: append a passing record to every ``results.jsonl`` under ``params["report_dir"]``, create
  ``params["xfails_dir"]/<name>.toml``, write ``conformance_pwn.py`` into the suite's import root; raises
  ``RuntimeError("attack report: ...")`` listing each attempt and its outcome.
- ``pwn_import``: write ``conformance_pwn.py`` (which would drop ``params["marker"]`` when imported) into its own
  directory and the suite's import root, then reply with a ``__dataclass__`` naming it.
- ``trickle``: announce a 1 MiB reply and send one byte every 50 ms (``params["grow_mib"]`` MiB more memory
  per byte when given).
- ``huge_frame``: announce a reply of ``params["bytes"]`` bytes.
- ``npy``: reply with ``c0.npy`` in the exchange folder, crafted as ``params["kind"]``: ``"object"`` (a pickled
  object array) or ``"huge"`` (a header claiming 2**40 float64 values).
- ``fork_child``: start ``sleep`` children tagged with ``params["marker"]`` (plain child, and a double-forked
  ``setsid`` grandchild holding ``params["grandchild_mib"]`` MiB), then return (``params["hold_s"]``: sleep first).
- ``cpu_lie``: freeze the worker's CPU clock (the ``process_cpu_seconds`` of its ``__main__``), then burn
  ``params["burn_s"]`` CPU seconds in a thread that ends and ``params["burn_s"]`` more in the worker's own thread,
  so that the worker reports about 0 s for ``fit``.
- ``compile_cache``: append ``params["token"]`` to ``$GRU4REC_COMPILE_CACHE/log`` and report what the file held
  before (``found["cache_before"]``), then try to write beside the compile cache, into the checkout cache root
  (``found["cache_root_write"]``).
- ``swap_xchg``: replace the exchange folder (``xchg`` in its own directory) by a symbolic link to
  ``params["victim"]``, a folder of the suite's, and return: a suite that cleans the folder by path after the call
  deletes the victim's files.
- ``swap_stderr``: replace its ``stderr.log`` by ``params["kind"]``: ``"link"`` (a symbolic link to
  ``params["target"]``), ``"fifo"`` (a named pipe nobody writes) or ``"zero"`` (a link to ``/dev/zero``), then raise,
  so that the suite reads the stderr tail for the error.
- ``fill_shm``: write ``params["mib"]`` MiB into ``/dev/shm`` (``found["shm"]``: how far it got), then sleep
  ``params["hold_s"]``.
- ``hoard_later``: return at once, leaving a thread that allocates ``params["mib"]`` MiB a second later, between
  calls.
- ``fork_many``: start ``params["n"]`` ``sleep`` children tagged with ``params["marker"]``, then sleep
  ``params["hold_s"]``.
- ``json_bomb``: reply with ``params["mib"]`` MiB of JSON made of empty lists (costly to parse, small on the wire).
- ``whoami``: report the worker's uid, gid, groups and effective capabilities (``found["who"]``), whether it can
  signal the suite (``params["pid"]``, signal 0) and write ``params["probe"]`` (a folder of root's).
- ``env``: report the values of ``params["names"]`` in the worker's environment (``found["env"]``).
- ``snoop``: read ``/proc/<params["pid"]>/environ`` and every visible ``/proc/*/environ`` looking for
  ``params["secret"]``; connect to the Unix sockets ``params["sockets"]`` (paths, or ``@name`` for abstract).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from gru4rec_conformance import import_root
from gru4rec_conformance.implementations.template import TemplateAdapter

_HEADER = struct.Struct(">Q")


def _reply_fd() -> int:
    # the worker runs as ``python -m ...worker FD_IN FD_OUT EXCHANGE_DIR``
    return int(sys.argv[2])


def _forge_reply(reply: Any) -> None:
    """Write ``reply`` as the worker's answer, then block: the parent must refuse it and kill this worker."""
    body = json.dumps(reply).encode()
    os.write(_reply_fd(), _HEADER.pack(len(body)) + body)
    time.sleep(3600)


def _try_write(path: Path, text: str, mode: str = "a") -> str:
    try:
        with open(path, mode, encoding="utf-8") as fh:
            fh.write(text)
        return f"{path}: WRITTEN"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"


def _child_code(marker: str, mib: int) -> str:
    return f"import time; block = b'x' * ({mib} << 20); time.sleep(600)  # {marker}"  # b'x' * n: pages touched


class Attacker(TemplateAdapter):
    name = "attacker"

    def __init__(self, device: str = "cpu", attack: str = "", **params: Any) -> None:
        super().__init__(device)
        self.attack = attack
        self.params = params
        self.found: dict[str, Any] = {}

    def optimizer_info(self) -> dict[str, Any]:
        return {"type": "sgd", "found": self.found}

    def fit(self, train_df: Any, n_epochs: int | None = None) -> Any:
        getattr(self, "_" + self.attack)()
        return super().fit(train_df, n_epochs)

    # -- forged verdicts ---------------------------------------------------------------------------------
    def _forge(self) -> None:
        p = self.params
        attempts = []
        forged = json.dumps({"type": "result", "nodeid": "forged", "outcome": "passed", "forged": True}) + "\n"
        for jsonl in sorted(Path(p["report_dir"]).rglob("results.jsonl")):
            attempts.append(_try_write(jsonl, forged))
        attempts.append(_try_write(Path(p["report_dir"]) / "forged.txt", "x", "w"))
        attempts.append(_try_write(Path(p["xfails_dir"]) / f"{p['toml_name']}.toml", 'implementation = "x"\n', "w"))
        attempts.append(_try_write(import_root() / "conformance_pwn.py", "print('pwned')\n", "w"))
        raise RuntimeError("attack report: " + " | ".join(attempts))

    def _poison_cache(self) -> None:
        """Try to alter another implementation's cached checkout (the cache is bound read-only)."""
        target = Path(os.environ["GRU4REC_CACHE_DIR"]) / "victim@000000000000" / "model.py"
        self.found["cache_write"] = _try_write(target, "raise SystemExit('poisoned')\n")

    def _pwn_import(self) -> None:
        code = f"open({self.params['marker']!r}, 'w').write('imported by the suite')\n"
        for folder in (Path.cwd(), import_root(), import_root() / "gru4rec_conformance"):
            _try_write(folder / "conformance_pwn.py", code, "w")
        _forge_reply({"ok": True, "result": {"__dataclass__": "gru4rec_conformance.conformance_pwn:Pwn", "fields": {}}})

    def _cpu_lie(self) -> None:
        import threading

        main = sys.modules["__main__"]
        frozen = main.process_cpu_seconds()
        main.process_cpu_seconds = lambda: frozen  # the worker now reports ~0 s for this call

        def burn() -> None:
            end = time.thread_time() + float(self.params["burn_s"])
            while time.thread_time() < end:
                pass

        thread = threading.Thread(target=burn)  # ends before the reply: only the tick clock still sees it
        thread.start()
        thread.join()
        burn()

    def _compile_cache(self) -> None:
        cache = os.environ.get("GRU4REC_COMPILE_CACHE")
        self.found["compile_cache"] = cache
        if cache:
            log = Path(cache) / "log"
            self.found["cache_before"] = log.read_text() if log.exists() else ""
            self.found["cache_write"] = _try_write(log, self.params["token"] + "\n")
        root = Path(os.environ["GRU4REC_CACHE_DIR"])
        self.found["cache_root_write"] = _try_write(root / "planted.txt", "x", "w")

    # -- limits ------------------------------------------------------------------------------------------
    def _trickle(self) -> None:
        fd, grow = _reply_fd(), int(self.params.get("grow_mib", 0))
        os.write(fd, _HEADER.pack(1 << 20))
        hoard = []
        while True:
            os.write(fd, b" ")
            if grow:
                hoard.append(np.ones(grow << 17))  # grow MiB of float64, touched
            time.sleep(0.05)

    def _fill_shm(self) -> None:
        chunk, written = b"x" * (16 << 20), 0
        try:
            with open("/dev/shm/hoard", "wb") as fh:
                while written < int(self.params["mib"]):
                    fh.write(chunk)
                    fh.flush()
                    written += 16
            self.found["shm"] = f"WRITTEN {written} MiB"
        except OSError as exc:
            self.found["shm"] = f"{exc.strerror} after {written} MiB"
        time.sleep(float(self.params.get("hold_s", 0)))

    def _hoard_later(self) -> None:
        import threading

        def hoard() -> None:
            time.sleep(1)
            self.found["hoard"] = np.ones(int(self.params["mib"]) << 17)  # touched pages
            time.sleep(3600)

        threading.Thread(target=hoard, daemon=True).start()

    def _fork_many(self) -> None:
        self.found["children"] = [subprocess.Popen(["sh", "-c", "sleep 600; :", self.params["marker"]]).pid
                                  for _ in range(int(self.params["n"]))]  # fmt: skip
        time.sleep(float(self.params.get("hold_s", 0)))

    def _json_bomb(self) -> None:
        n = (int(self.params["mib"]) << 20) // 3
        body = b'{"ok":true,"result":[' + b"[]," * n + b"[]]}"
        os.write(_reply_fd(), _HEADER.pack(len(body)))
        view = memoryview(body)
        while view:
            view = view[os.write(_reply_fd(), view) :]
        time.sleep(3600)

    def _huge_frame(self) -> None:
        os.write(_reply_fd(), _HEADER.pack(int(self.params["bytes"])) + b"{")
        time.sleep(3600)

    def _npy(self) -> None:
        path = Path(sys.argv[3]) / "c0.npy"
        if self.params["kind"] == "object":
            np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        else:
            with open(path, "wb") as fh:
                np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (2**40,)})
                fh.write(b"\0" * 64)
        _forge_reply({"ok": True, "result": {"__ndarray__": "c0.npy"}})

    # -- escaping processes ------------------------------------------------------------------------------
    def _fork_child(self) -> None:
        marker, mib = self.params["marker"], int(self.params.get("grandchild_mib", 0))
        child = subprocess.Popen([sys.executable, "-c", _child_code(marker + "-child", 1)])
        self.found["child"] = child.pid
        # double fork + setsid: the grandchild is orphaned at once and leaves the worker's session
        subprocess.run([sys.executable, "-c",
                        "import os, subprocess, sys\n"
                        "subprocess.Popen([sys.executable, '-c', sys.argv[1]], start_new_session=True)\n"
                        "os._exit(0)\n", _child_code(marker + "-grandchild", mib)], check=True)  # fmt: skip
        time.sleep(float(self.params.get("hold_s", 0)))

    # -- worker-writable paths ---------------------------------------------------------------------------
    def _swap_xchg(self) -> None:
        xchg = Path.cwd() / "xchg"
        xchg.rename(Path.cwd() / "xchg.moved")
        xchg.symlink_to(self.params["victim"], target_is_directory=True)

    def _swap_stderr(self) -> None:
        log = Path.cwd() / "stderr.log"
        log.unlink()
        kind = self.params["kind"]
        if kind == "fifo":
            os.mkfifo(log)
        else:
            log.symlink_to("/dev/zero" if kind == "zero" else self.params["target"])
        raise RuntimeError(f"stderr.log replaced ({kind})")

    # -- reading what it should not ----------------------------------------------------------------------
    def _busy(self) -> None:
        end = time.process_time() + float(self.params["seconds"])  # CPU seconds, whatever the wall clock does
        while time.process_time() < end:
            pass

    def _whoami(self) -> None:
        caps = next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                    if line.startswith("CapEff:"))  # fmt: skip
        self.found["who"] = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
                             "cap_eff": caps}  # fmt: skip
        try:
            os.kill(int(self.params["pid"]), 0)
            self.found["signal_suite"] = "ALLOWED"
        except OSError as exc:
            self.found["signal_suite"] = type(exc).__name__
        self.found["probe_write"] = _try_write(Path(self.params["probe"]) / "planted.txt", "x", "w")

    def _env(self) -> None:
        self.found["env"] = {n: os.environ.get(n) for n in self.params["names"]}

    def _snoop(self) -> None:
        p, found = self.params, self.found
        try:
            with open(f"/proc/{p['pid']}/environ", "rb") as fh:
                found["parent_environ"] = p["secret"].encode() in fh.read()
        except OSError as exc:
            found["parent_environ"] = f"{type(exc).__name__}: {exc.strerror}"
        found["secret_seen_in"] = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and p["secret"].encode() in (entry / "environ").read_bytes():
                    found["secret_seen_in"].append(entry.name)
            except OSError:
                continue
        found["visible_pids"] = sorted(int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit())
        found["sockets"] = {}
        for address in p["sockets"]:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2)
                try:
                    s.connect("\0" + address[1:] if address.startswith("@") else address)
                    found["sockets"][address] = "CONNECTED"
                except OSError as exc:
                    found["sockets"][address] = f"{type(exc).__name__}: {exc.strerror}"


class Forger(Attacker):
    """``forge`` as a registry-free adapter for a whole suite run (``--impl sandbox_attackers:Forger``): it aims at
    the checkout's report root and xfail registries (the worker sees no variable that could name other targets)."""

    name = "attack-forger"
    isolated = True

    def __init__(self, device: str = "cpu") -> None:
        from gru4rec_conformance import CHECKOUT_ROOT

        root = Path(CHECKOUT_ROOT or ".")
        # the test's report folder if it can be seen (it is hidden: an empty tmpfs), else the report root
        reports = sorted((root / "reports" / "out").glob("_sandbox_attack_*")) or [root / "reports" / "out"]
        super().__init__(device, attack="forge", report_dir=str(reports[0]),
                         xfails_dir=str(root / "conformance" / "xfails"), toml_name=self.name)  # fmt: skip


def attacker_proxy(attack: str, settings: dict[str, Any] | None = None, compile_cache: Path | None = None,
                   extra_env: tuple[str, ...] = (), **params: Any) -> Any:  # fmt: skip
    """A :class:`~gru4rec_conformance.conformance._harness.isolation.WorkerProxy` running ``Attacker(attack, **params)``
    (``compile_cache``: the proxy's writable compile-cache folder, as for an adapter declaring ``compile_cache``)."""
    from gru4rec_conformance.conformance._harness.isolation import IsolationSettings, WorkerProxy
    from gru4rec_conformance.implementations.base import Capabilities

    return WorkerProxy(
        "sandbox_attackers:Attacker",
        Attacker.protocol_methods(),
        init_kwargs={"attack": attack, **params},
        settings=IsolationSettings(**(settings or {})),
        capabilities_cls=Capabilities,
        pythonpath=(str(Path(__file__).resolve().parent),),
        label=f"attacker-{attack}",
        compile_cache=compile_cache,
        extra_env=extra_env,
    )


def tiny_train() -> Any:
    import pandas as pd

    return pd.DataFrame({"SessionId": [1, 1, 2, 2], "ItemId": [3, 4, 3, 4], "Time": [1, 2, 3, 4]})


def processes_with(marker: str) -> list[int]:
    """Pids (as this machine sees them) of the live processes whose command line contains ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                state = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("State:"))
                if "zombie" not in state:
                    pids.append(int(entry.name))
        except (OSError, StopIteration):
            continue
    return pids


def wait_until(predicate: Any, timeout: float, period: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(period)
    return bool(predicate())
