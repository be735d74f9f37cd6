"""Attacks by the code under test, each by an adversarial adapter (``sandbox_attackers``), each contained with a clear
message: forged verdicts and xfail files, code run in the suite through the reply decoder, limits bypassed by a
trickling or oversized reply, processes escaping the worker or outliving the suite, and reads of the suite's
environment or of a Unix socket. Tests that need the bubblewrap sandbox skip, saying why, where it cannot run;
the protocol and process-tree ones run either way."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from reliability_support import REPO, describe, jsonl_records, results_json, run_dirs, run_suite, suite_env
from sandbox_attackers import attacker_proxy, processes_with, tiny_train, wait_until

from gru4rec_conformance import import_root
from gru4rec_conformance.conformance._harness.isolation import (
    WorkerCallError,
    WorkerCrashed,
    WorkerMemoryExceeded,
    WorkerProtocolError,
    WorkerTimeout,
    _tmpfs_mib,
    sandbox_probe,
    unprivileged_python_problem,
)  # fmt: skip

SANDBOX = sandbox_probe()
requires_sandbox = pytest.mark.skipif(not SANDBOX.available, reason=f"the bubblewrap sandbox cannot run here: "
                                                                    f"{SANDBOX.reason}")  # fmt: skip
GONE_WITHIN_S = 10.0
#: a root suite refuses to run workers unsandboxed when the unprivileged user cannot run the interpreter
ROOT_REFUSES = bool(os.geteuid() == 0 and unprivileged_python_problem(sys.executable))
#: the protocol and process-tree defences hold with and without the sandbox
MODES = pytest.mark.parametrize(
    "sandbox",
    ["auto", pytest.param("none", id="unsandboxed", marks=pytest.mark.skipif(
        ROOT_REFUSES, reason="the suite is root and uid 65534 cannot run this interpreter: --sandbox none is refused "
                             "(test_an_unsandboxed_worker_of_a_root_suite_is_not_root)"))],
    ids=lambda m: "sandboxed" if m == "auto" else m,
)  # fmt: skip


@pytest.fixture
def marker():
    tag = f"sbx-attack-{uuid.uuid4().hex[:12]}"
    yield tag
    for pid in processes_with(tag):  # never leave an escaped process behind, whatever the test found
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- forged verdicts -----------------------------------------------------------------------------------------
@requires_sandbox
def test_worker_cannot_forge_results_nor_write_an_xfail_file():
    """The worker tries to append a passing record to every results.jsonl of the report folder, to create a file
    there, to write conformance/xfails/attack-forger.toml and a module into the suite's import root: it finds no
    run folder (the report root and the registries are empty and read-only inside), every write fails on the
    read-only filesystem, the run's record is its own, and --gate fails."""
    report_dir = REPO / "reports" / "out" / f"_sandbox_attack_{uuid.uuid4().hex[:8]}"  # in the repo: visible, read-only
    victim = report_dir / "earlier" / "results.jsonl"
    victim.parent.mkdir(parents=True)
    victim.write_text('{"type": "run"}\n')
    toml = REPO / "conformance" / "xfails" / "attack-forger.toml"
    try:
        proc = run_suite(report_dir, "conformance/gru4rec/test_k7_epoch_batching.py", "-k", "eb3_epoch_count",
                         "--impl", "sandbox_attackers:Forger", "--gate", "--call-timeout", "60")  # fmt: skip
        assert proc.returncode == 1, describe(proc)
        assert "sandbox: bubblewrap" in proc.stdout and "GATE FAILED" in proc.stdout, describe(proc)
        assert not toml.exists(), "the worker wrote an xfail file"
        assert not (import_root() / "conformance_pwn.py").exists()
        assert victim.read_text() == '{"type": "run"}\n' and not (report_dir / "forged.txt").exists()
        (run_dir,) = run_dirs(report_dir, "attack-forger")
        assert not any(r.get("forged") for r in jsonl_records(run_dir))
        data = results_json(run_dir)
        assert data["run"]["sandbox"].startswith("bubblewrap"), data["run"]["sandbox"]
        (record,) = data["results"]
        assert record["outcome"] == "failed" and "attack report:" in record["reason"], record
        # the run folders are hidden (an empty read-only tmpfs): no results.jsonl to find, the 3 other writes fail
        assert "results.jsonl" not in record["reason"], record["reason"]
        assert record["reason"].count("Read-only file system") == 3, record["reason"]
        assert "WRITTEN" not in record["reason"]
        assert "**Conformance: NOT CONFORMANT**" in (run_dir / "summary.md").read_text(encoding="utf-8")
    finally:
        toml.unlink(missing_ok=True)
        (import_root() / "conformance_pwn.py").unlink(missing_ok=True)
        shutil.rmtree(report_dir, ignore_errors=True)


def test_gate_refuses_isolated_adapters_without_the_sandbox(tmp_path):
    """--gate with --sandbox none stops before any check, naming --allow-unsandboxed and why."""
    proc = run_suite(
        tmp_path,
        "conformance/gru4rec",
        "--impl",
        "gru4rec_conformance.implementations.template:TemplateAdapter",
        "--gate",
        "--sandbox",
        "none",
        GRU4REC_ALLOW_UNSANDBOXED="",
    )
    assert proc.returncode == 4, describe(proc)
    assert "--allow-unsandboxed" in proc.stderr and "--sandbox none" in proc.stderr, describe(proc)
    assert "can forge its verdict" in proc.stderr


@requires_sandbox
def test_the_checkout_cache_is_read_only_for_the_worker(tmp_path, monkeypatch):
    """The worker cannot alter a cached checkout that another implementation's worker will run: the cache is bound
    read-only (the controller exports checkouts into it before workers start)."""
    cache = tmp_path / "cache"
    victim = cache / "victim@000000000000" / "model.py"
    victim.parent.mkdir(parents=True)
    victim.write_text("GOOD = True\n")
    monkeypatch.setenv("GRU4REC_CACHE_DIR", str(cache))
    proxy = attacker_proxy("poison_cache")
    try:
        proxy.build(seed=1)
        proxy.fit(tiny_train())
        found = proxy.optimizer_info()["found"]
    finally:
        proxy.close()
    assert found["cache_write"].endswith("Read-only file system"), found
    assert victim.read_text() == "GOOD = True\n"


@requires_sandbox
def test_a_compile_cache_is_shared_by_one_implementations_workers_and_nothing_else(tmp_path, monkeypatch):
    """An adapter declaring ``compile_cache`` (Theano) gets one writable folder that its next worker finds again;
    the checkout cache around it stays read-only, and a worker without the declaration has no such folder."""
    from gru4rec_conformance.implementations.base import compile_cache_dir

    monkeypatch.setenv("GRU4REC_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    folder = compile_cache_dir("theano_official")
    assert folder == tmp_path / "cache" / "compiled" / "theano_official"
    found = []
    for token, cache in (("first", folder), ("second", folder), ("other", None)):
        proxy = attacker_proxy("compile_cache", compile_cache=cache, token=token)
        try:
            proxy.build(seed=1)
            proxy.fit(tiny_train())
            found.append(proxy.optimizer_info()["found"])
        finally:
            proxy.close()
    first, second, other = found
    assert first["compile_cache"] == str(folder) and first["cache_write"].endswith("WRITTEN"), first
    assert second["cache_before"] == "first\n", second  # what the first worker compiled, the second finds
    assert (folder / "log").read_text() == "first\nsecond\n"
    assert other["compile_cache"] is None, other  # not declared: no writable folder at all
    for f in found:
        assert f["cache_root_write"].endswith("Read-only file system"), f
    assert not (tmp_path / "cache" / "planted.txt").exists()
    with pytest.raises(ValueError, match="not a registry name"):
        compile_cache_dir("../escape")


# -- code execution in the suite ------------------------------------------------------------------------------
@MODES
def test_a_dataclass_named_in_a_reply_is_never_imported(tmp_path, sandbox):
    """The worker writes conformance_pwn.py where it can and names it in a ``__dataclass__``: the decoder refuses the
    name (exact registry, nothing imported), the worker is killed, and the module's code never ran here."""
    flag = tmp_path / "pwned"
    proxy = attacker_proxy("pwn_import", settings={"sandbox": sandbox}, marker=str(flag))
    try:
        proxy.build(seed=1)
        with pytest.raises(WorkerProtocolError, match="refusing to rebuild 'gru4rec_conformance.conformance_pwn:Pwn'"):
            proxy.fit(tiny_train())
    finally:
        proxy.close()
        for folder in (import_root(), import_root() / "gru4rec_conformance"):
            (folder / "conformance_pwn.py").unlink(missing_ok=True)
    assert not flag.exists() and "gru4rec_conformance.conformance_pwn" not in sys.modules


# -- forged measurements ------------------------------------------------------------------------------------
@MODES
def test_a_worker_cannot_understate_its_cpu_time(sandbox):
    """The worker freezes its own CPU clock and burns 2 x 0.4 s (half in a thread that ends before the reply):
    it reports about 0 s, the suite's measurement from /proc sees the burn (the figure SC-1 and the benchmarks
    read through cpu_call)."""
    from gru4rec_conformance.conformance._harness.cputime import cpu_call

    proxy = attacker_proxy("cpu_lie", settings={"call_timeout": 60, "sandbox": sandbox}, burn_s=0.4)
    try:
        proxy.build(seed=1)
        _, cpu = cpu_call(proxy, "fit", tiny_train())
        assert proxy.last_cpu_s_reported is not None and proxy.last_cpu_s_reported < 0.05, proxy.last_cpu_s_reported
        assert cpu >= 0.7, f"measured {cpu:.3f} CPU s for 0.8 s of burn (the worker said {proxy.last_cpu_s_reported})"
    finally:
        proxy.close()


# -- limits ---------------------------------------------------------------------------------------------------
@MODES
def test_a_trickling_reply_is_stopped_at_the_call_timeout(sandbox):
    proxy = attacker_proxy("trickle", settings={"call_timeout": 3, "sandbox": sandbox})
    try:
        proxy.build(seed=1)
        start = time.monotonic()
        with pytest.raises(WorkerTimeout, match="no answer within the timeout of 3 s"):
            proxy.fit(tiny_train())
        assert time.monotonic() - start < 6
    finally:
        proxy.close()


def test_memory_growing_while_trickling_is_stopped_at_the_limit():
    proxy = attacker_proxy("trickle", settings={"call_timeout": 30, "memory_limit_mb": 350}, grow_mib=20)
    try:
        proxy.build(seed=1)
        start = time.monotonic()
        with pytest.raises(WorkerMemoryExceeded, match="exceeded the limit of 350 MiB"):
            proxy.fit(tiny_train())
        assert time.monotonic() - start < 20
    finally:
        proxy.close()


def test_an_oversized_frame_is_refused_before_it_is_read():
    proxy = attacker_proxy("huge_frame", bytes=1 << 31)
    try:
        proxy.build(seed=1)
        with pytest.raises(WorkerProtocolError, match=r"reply of 2147483648 bytes, over the frame limit of "
                                                      r"67108864 bytes \(64 MiB\)"):  # fmt: skip
            proxy.fit(tiny_train())
    finally:
        proxy.close()


@pytest.mark.parametrize(
    "kind,message",
    [("object", "dtype object is refused"), ("huge", r"shape \(1099511627776,\) and dtype float64 .* exceeds the "
                                                     "reply budget")],
)  # fmt: skip
def test_a_crafted_npy_file_is_refused_from_its_header(kind, message):
    proxy = attacker_proxy("npy", kind=kind)
    try:
        proxy.build(seed=1)
        with pytest.raises(WorkerProtocolError, match=message):
            proxy.fit(tiny_train())
    finally:
        proxy.close()


# -- escaping processes ---------------------------------------------------------------------------------------
@MODES
def test_children_of_the_worker_do_not_survive_close(marker, sandbox):
    """A plain child and a double-forked setsid grandchild, both alive when the call returns, end with close()."""
    proxy = attacker_proxy("fork_child", settings={"sandbox": sandbox}, marker=marker)
    try:
        proxy.build(seed=1)
        proxy.fit(tiny_train())
        assert wait_until(lambda: len(processes_with(marker)) == 2, 10), processes_with(marker)
    finally:
        proxy.close()
    assert wait_until(lambda: not processes_with(marker), GONE_WITHIN_S), "a child of the worker survived close()"


@MODES
def test_a_setsid_grandchild_is_counted_against_the_memory_limit_and_killed(marker, sandbox):
    """The grandchild leaves the worker's session and is orphaned, yet stays in the worker's tree (the PID
    namespace's init under bwrap, the worker as subreaper without): its 400 MiB count against the 350 MiB limit,
    and it dies with the worker."""
    settings = {"memory_limit_mb": 350, "call_timeout": 60, "sandbox": sandbox}
    proxy = attacker_proxy("fork_child", settings=settings, marker=marker,
                           grandchild_mib=400, hold_s=60)  # fmt: skip
    try:
        proxy.build(seed=1)
        with pytest.raises(WorkerMemoryExceeded, match="exceeded the limit of 350 MiB"):
            proxy.fit(tiny_train())
    finally:
        proxy.close()
    assert wait_until(lambda: not processes_with(marker), GONE_WITHIN_S), "the setsid grandchild survived"


@requires_sandbox
def test_workers_and_their_children_do_not_outlive_a_killed_suite(marker, tmp_path):
    """SIGKILL the suite's process while a worker call runs: the worker, its child and its setsid grandchild end."""
    script = tmp_path / "suite.py"
    script.write_text(
        "from sandbox_attackers import attacker_proxy, tiny_train\n"
        f"proxy = attacker_proxy('fork_child', marker={marker!r}, hold_s=600)\n"
        "proxy.build(seed=1)\n"
        "print('worker', proxy.worker_pid, flush=True)\n"
        "proxy.fit(tiny_train())\n"
    )
    suite = subprocess.Popen([sys.executable, str(script)], env=suite_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert suite.stdout is not None
        worker = int(suite.stdout.readline().split()[1])
        assert wait_until(lambda: len(processes_with(marker)) == 2, 30), "the attack did not start"
        suite.kill()
        suite.wait()
        assert wait_until(lambda: not processes_with(marker) and not _alive(worker), GONE_WITHIN_S), (
            f"survivors: {processes_with(marker)}, worker alive: {_alive(worker)}"
        )
    finally:
        if suite.poll() is None:
            suite.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return "zombie" not in fh.read()
    except OSError:
        return False


# -- reading what it should not -------------------------------------------------------------------------------
@requires_sandbox
def test_the_suite_environment_and_unix_sockets_are_out_of_reach(tmp_path, monkeypatch):
    """/proc/<suite pid>/environ does not exist in the worker's PID namespace (no visible process holds the secret);
    a Unix socket by path under /tmp and an abstract one cannot be reached."""
    secret = f"secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("SANDBOX_TEST_SECRET", secret)
    path = str(tmp_path / "suite.sock")
    abstract = f"@sbx-test-{uuid.uuid4().hex[:8]}"
    servers = []
    for address in (path, "\0" + abstract[1:]):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(address)
        server.listen(1)
        servers.append(server)
    proxy = attacker_proxy("snoop", pid=os.getpid(), secret=secret, sockets=[path, abstract])
    try:
        proxy.build(seed=1)
        proxy.fit(tiny_train())
        found = proxy.optimizer_info()["found"]
    finally:
        proxy.close()
        for server in servers:
            server.close()
    assert found["secret_seen_in"] == [], found
    assert found["parent_environ"] is not True, found
    assert max(found["visible_pids"]) < 100, found["visible_pids"]  # its own PID namespace: a handful of pids
    assert found["sockets"][path].startswith("FileNotFoundError"), found["sockets"]
    assert found["sockets"][abstract].startswith(("ConnectionRefusedError", "FileNotFoundError")), found["sockets"]


# -- worker-writable paths ------------------------------------------------------------------------------------
@MODES
def test_an_exchange_folder_replaced_by_a_link_redirects_nothing(tmp_path, sandbox):
    """The worker swaps its exchange folder for a symbolic link to a folder of the suite's: the suite's cleaning
    after the call, its next call's argument files and the removal at close all stay in the folder it opened, so
    the victim's files are untouched and nothing is written there."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for i in range(3):
        (victim / f"keep{i}.toml").write_text(f"n = {i}\n")
    (victim / "c0.npy").write_bytes(b"not mine to delete")
    proxy = attacker_proxy("swap_xchg", settings={"sandbox": sandbox, "call_timeout": 60}, victim=str(victim))
    try:
        proxy.build(seed=1)
        proxy.fit(tiny_train())  # the suite cleans the exchange folder after this call
        proxy.score_prefixes([[3, 4]] * 40)  # arguments packed into .npy files by the suite
    except Exception:
        pass  # the reply may be refused or the call fail; what matters is the victim folder
    finally:
        proxy.close()
    assert sorted(p.name for p in victim.iterdir()) == ["c0.npy", "keep0.toml", "keep1.toml", "keep2.toml"]
    assert (victim / "c0.npy").read_bytes() == b"not mine to delete"


@MODES
@pytest.mark.parametrize("kind", ["link", "fifo", "zero"])
def test_a_replaced_stderr_log_is_never_followed_nor_waited_on(tmp_path, sandbox, kind):
    """The worker replaces its stderr.log by a link to a secret file of the suite's, by a FIFO, or by a link to
    /dev/zero, then raises: the error arrives within seconds, carries the worker's real stderr (the file the suite
    opened before the worker started) and neither the secret nor an unbounded read of zeros."""
    import threading

    secret = f"secret-{uuid.uuid4().hex}"
    target = tmp_path / "environ"
    target.write_text(f"SANDBOX_TEST_SECRET={secret}\n")
    proxy = attacker_proxy("swap_stderr", settings={"sandbox": sandbox, "call_timeout": 30}, kind=kind,
                           target=str(target))  # fmt: skip
    caught: list[BaseException] = []

    def attack() -> None:
        try:
            proxy.build(seed=1)
            proxy.fit(tiny_train())
        except BaseException as exc:  # noqa: BLE001 - the test inspects whatever came back
            caught.append(exc)

    thread = threading.Thread(target=attack, daemon=True)
    thread.start()
    thread.join(45)
    try:
        assert not thread.is_alive(), f"the suite blocked on the worker's stderr.log ({kind})"
        (exc,) = caught
        assert "stderr.log replaced" in str(exc), exc
        text = str(exc) + getattr(exc, "stderr_tail", "")
        assert secret not in text and "\0" * 64 not in text, text[-500:]
        assert len(getattr(exc, "stderr_tail", "")) <= 4000
    finally:
        proxy.close()


# -- the worker's environment ---------------------------------------------------------------------------------
def test_worker_env_is_an_allow_list(monkeypatch):
    """An adapter's worker_env naming a secret or a cloud key is refused, naming them; a GRU4REC_* variable of the
    suite's environment that is not on the list no longer reaches the worker (no prefix pass-through)."""
    from gru4rec_conformance.conformance._harness.isolation import check_worker_env

    with pytest.raises(ValueError, match="AWS_SECRET_ACCESS_KEY, SANDBOX_TEST_SECRET, which a worker may not see"):
        attacker_proxy("env", extra_env=("SANDBOX_TEST_SECRET", "AWS_SECRET_ACCESS_KEY", "OMP_NUM_THREADS"), names=[])
    assert check_worker_env(("GRU4REC_PYTORCH_PATH", "THEANO_FLAGS", "TF_NUM_INTRAOP_THREADS"), "x")
    monkeypatch.setenv("GRU4REC_PLANTED_SECRET", "s3cr3t")
    monkeypatch.setenv("LC_PLANTED", "s3cr3t")
    monkeypatch.setenv("GRU4REC_MC_SCALE", "cpu")
    proxy = attacker_proxy("env", names=["GRU4REC_PLANTED_SECRET", "LC_PLANTED", "GRU4REC_MC_SCALE"])
    try:
        proxy.build(seed=1)
        proxy.fit(tiny_train())
        found = proxy.optimizer_info()["found"]
    finally:
        proxy.close()
    assert found["env"] == {"GRU4REC_PLANTED_SECRET": None, "LC_PLANTED": None, "GRU4REC_MC_SCALE": "cpu"}, found


@requires_sandbox
def test_a_socket_named_by_an_allowed_variable_is_not_bound_into_the_sandbox(tmp_path, monkeypatch):
    """A checkout variable pointing at a folder that holds a Unix socket (or at the socket itself): the folder is
    not bound back into the sandbox, so the worker cannot connect."""
    folder = tmp_path / "sockdir"
    folder.mkdir()
    path = str(folder / "agent.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    monkeypatch.setenv("GRU4REC_MIRROR_DIR", str(folder))
    monkeypatch.setenv("GRU4REC_PYTORCH_PATH", path)
    proxy = attacker_proxy("snoop", extra_env=("GRU4REC_PYTORCH_PATH",), pid=os.getpid(), secret="-", sockets=[path])
    try:
        proxy.build(seed=1)
        proxy.fit(tiny_train())
        found = proxy.optimizer_info()["found"]
    finally:
        proxy.close()
        server.close()
    assert found["sockets"][path].startswith("FileNotFoundError"), found["sockets"]


# -- the adapter's module and the in-process route ------------------------------------------------------------
@requires_sandbox
@pytest.mark.parametrize("gate", [True, False], ids=["gate", "no-gate"])
def test_an_outside_adapter_module_is_imported_only_in_a_worker(tmp_path, gate):
    """``--impl sandbox_module_attacker:ModuleAttacker``: the module's top-level code never runs in the suite's
    process (its description, capabilities and hooks come from a sandboxed worker), and the check still runs."""
    marker = tmp_path / "imported-in-suite"
    proc = run_suite(tmp_path / "reports", "conformance/gru4rec/test_k7_epoch_batching.py", "-k", "eb3_epoch_count",
                     "--impl", "sandbox_module_attacker:ModuleAttacker", "--call-timeout", "60",
                     *(["--gate"] if gate else []), SBX_MODULE_MARKER=str(marker))  # fmt: skip
    assert not marker.exists(), marker.read_text()
    assert proc.returncode in (0, 1), describe(proc)
    assert "sandbox: bubblewrap" in proc.stdout, describe(proc)
    (run_dir,) = run_dirs(tmp_path / "reports", "attack-module")
    data = results_json(run_dir)
    assert data["run"]["impl"]["ref"] == "sandbox_module_attacker:ModuleAttacker", data["run"]["impl"]
    assert data["run"]["impl"]["isolated"] is True and data["run"]["impl"]["source"] == "import path"
    assert len(data["results"]) == 1 and data["results"][0]["outcome"] != "error", data["results"]


@requires_sandbox
def test_gate_refuses_an_outside_adapter_that_wants_the_suites_process(tmp_path):
    """An outside adapter declaring ``isolated = False`` under --gate: refused before any check, naming the way out,
    and its module never imported here; a plugin-free import path is the only route in."""
    marker = tmp_path / "imported-in-suite"
    proc = run_suite(tmp_path / "reports", "conformance/gru4rec/test_k7_epoch_batching.py", "-k", "eb3_epoch_count",
                     "--impl", "sandbox_module_attacker:InProcess", "--gate", SBX_MODULE_MARKER=str(marker))  # fmt: skip
    assert proc.returncode == 4, describe(proc)
    assert "isolated = False" in proc.stderr and "--isolation always" in proc.stderr, describe(proc)
    assert not marker.exists(), marker.read_text()
    never = run_suite(tmp_path / "reports", "conformance/gru4rec/test_k7_epoch_batching.py", "-k", "eb3_epoch_count",
                      "--impl", "sandbox_module_attacker:ModuleAttacker", "--gate", "--isolation", "never",
                      SBX_MODULE_MARKER=str(marker))  # fmt: skip
    assert never.returncode == 4 and "would run in the suite's process" in never.stderr, describe(never)


# -- limits of the whole sandbox, all the time ------------------------------------------------------------------
@requires_sandbox
def test_the_sandbox_tmpfs_is_sized_and_counted_against_the_memory_limit():
    """/dev/shm inside the sandbox is sized (a quarter of the memory limit by default: writing past it fails with
    ENOSPC) and what it holds counts against the limit (a larger tmpfs filled past the limit kills the worker)."""
    proxy = attacker_proxy("fill_shm", settings={"memory_limit_mb": 400, "call_timeout": 60}, mib=300)
    try:
        proxy.build(seed=1)
        proxy.fit(tiny_train())
        found = proxy.optimizer_info()["found"]
    finally:
        proxy.close()
    assert found["shm"].startswith("No space left on device after"), found
    proxy = attacker_proxy("fill_shm", settings={"memory_limit_mb": 300, "tmpfs_mb": 600, "call_timeout": 60},
                           mib=480, hold_s=30)  # fmt: skip
    try:
        proxy.build(seed=1)
        with pytest.raises(WorkerMemoryExceeded, match=r"in its /tmp and /dev/shm .* exceeded the limit of 300 MiB"):
            proxy.fit(tiny_train())
    finally:
        proxy.close()


@requires_sandbox
def test_only_the_sandbox_own_sized_tmpfs_is_counted(tmp_path):
    """A tmpfs of another size at /tmp (bwrap's unsized staging tmpfs while it sets up, a host file system) is not
    the worker's: the watchdog counts a folder only when its size is the one the sandbox gave (a CI run once read
    41 GiB 'in its /tmp and /dev/shm' of a worker at start-up and killed it)."""
    size = 64 << 20
    procs = {}
    for label, extra in (("sized", ["--size", str(size)]), ("unsized", [])):
        cmd = [SANDBOX.exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *extra, "--tmpfs", "/tmp",
               "--die-with-parent", "sh", "-c", "head -c 5242880 /dev/zero > /tmp/f && echo ready && sleep 60"]  # fmt: skip
        procs[label] = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        used = {}
        for label, proc in procs.items():
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            child = [int(c) for c in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
            used[label] = _tmpfs_mib([proc.pid, *child], size)
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    assert 4.9 <= used["sized"] <= 6, used
    assert used["unsized"] == 0.0, used


@MODES
def test_memory_taken_between_calls_is_seen_and_the_worker_killed(sandbox):
    """The worker returns, then a thread of it allocates 500 MiB while the suite does something else: the watch
    between calls kills it within seconds and the next call says why."""
    proxy = attacker_proxy("hoard_later", settings={"memory_limit_mb": 350, "sandbox": sandbox}, mib=500)
    try:
        proxy.build(seed=1)
        proxy.fit(tiny_train())
        assert wait_until(lambda: proxy._proc is None or proxy._proc.poll() is not None, 15), "never killed"
        with pytest.raises(WorkerMemoryExceeded, match="between calls: worker memory .* exceeded the limit of 350"):
            proxy.optimizer_info()
    finally:
        proxy.close()


@MODES
def test_the_process_count_is_limited(marker, sandbox):
    """40 children against a limit of 20 processes: the worker's tree is killed, saying how many it had; where the
    kernel applies the limit (the worker is not root: a suite that is not, or --sandbox none as root) a fork past
    it is refused first, and the call fails with that."""
    proxy = attacker_proxy("fork_many", settings={"max_processes": 20, "call_timeout": 60, "sandbox": sandbox},
                           marker=marker, n=40, hold_s=30)  # fmt: skip
    try:
        proxy.build(seed=1)
        with pytest.raises((WorkerMemoryExceeded, WorkerCallError),
                           match=r"processes, over the limit of 20|BlockingIOError: \[Errno 11\]"):  # fmt: skip
            proxy.fit(tiny_train())
        assert len(processes_with(marker)) <= 20
    finally:
        proxy.close()
    assert wait_until(lambda: not processes_with(marker), GONE_WITHIN_S), processes_with(marker)


def test_a_reply_costly_to_decode_is_refused_before_it_is_parsed():
    """8 MiB of empty JSON lists (hundreds of MiB once parsed) is refused from its byte counts, unparsed."""
    proxy = attacker_proxy("json_bomb", settings={"call_timeout": 60}, mib=8)
    try:
        proxy.build(seed=1)
        with pytest.raises(WorkerProtocolError, match=r"would take about \d+ MiB to decode, over the budget"):
            proxy.fit(tiny_train())
    finally:
        proxy.close()


# -- unsandboxed is unprivileged ----------------------------------------------------------------------------------
@pytest.mark.skipif(os.geteuid() != 0, reason="the suite does not run as root here")
def test_an_unsandboxed_worker_of_a_root_suite_is_not_root(tmp_path):
    """--sandbox none with the suite as root: the worker runs as nobody with no capabilities and no supplementary
    groups, cannot signal (stop) the suite, nor write a folder only root may write; where nobody cannot run the
    interpreter, the worker is refused with the ways out instead of running as root."""
    probe = tmp_path / "root-only"
    probe.mkdir(mode=0o755)
    proxy = attacker_proxy("whoami", settings={"sandbox": "none"}, pid=os.getpid(), probe=str(probe))
    try:
        if ROOT_REFUSES:
            with pytest.raises(WorkerCrashed, match="the suite runs as root without the sandbox.*install bubblewrap"):
                proxy.build(seed=1)
            return
        proxy.build(seed=1)
        proxy.fit(tiny_train())
        found = proxy.optimizer_info()["found"]
        assert "runs as uid 65534" in proxy.isolation_info, proxy.isolation_info
    finally:
        proxy.close()
    who = found["who"]
    assert who["uid"] == who["euid"] == 65534 and who["gid"] == 65534 and who["groups"] == [], who
    assert int(who["cap_eff"], 16) == 0, who
    assert found["signal_suite"] == "PermissionError", found
    assert found["probe_write"].endswith("Permission denied") and not (probe / "planted.txt").exists(), found


@MODES
def test_a_frozen_suite_flags_the_timing_and_still_counts_the_workers_cpu(sandbox):
    """A worker that may signal the suite (same uid, unsandboxed) can SIGSTOP it: the suite's watchdog cannot run
    then, so wall-clock time is disturbed. Here a helper freezes this process for 3 s during a call: the call's
    frozen time is counted and warned about, and its CPU time is still the worker's own (read from /proc)."""
    proxy = attacker_proxy("busy", settings={"sandbox": sandbox}, seconds=4.0)
    try:
        proxy.build(seed=1)
        freezer = subprocess.Popen(
            ["sh", "-c", f"sleep 1; kill -STOP {os.getpid()}; sleep 3; kill -CONT {os.getpid()}"]
        )
        try:
            with pytest.warns(RuntimeWarning, match=r"frozen for \d+\.\d s during the call.*timing is disturbed"):
                proxy.fit(tiny_train())
        finally:
            freezer.wait(timeout=30)
        assert proxy.last_call_frozen_s is not None and 2.0 < proxy.last_call_frozen_s < 4.5, proxy.last_call_frozen_s
        assert proxy.frozen_s >= proxy.last_call_frozen_s
        assert proxy.last_cpu_s is not None and proxy.last_cpu_s >= 3.5, proxy.last_cpu_s
        proxy.optimizer_info()  # an undisturbed call: nothing flagged
        assert proxy.last_call_frozen_s == 0.0
    finally:
        proxy.close()
