"""Adapters in worker processes: crashes, hangs, exceptions and memory blow-ups become failed checks with
the worker's stderr in the report, the run completes, and the worker sees a reduced environment."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from gru4rec_conformance.conformance._harness.isolation import (
    IsolationSettings,
    WorkerCallError,
    WorkerCrashed,
    WorkerProxy,
    WorkerStateLost,
    WorkerTimeout,
    network_isolation,
)  # fmt: skip
from gru4rec_conformance.implementations.base import Capabilities, Unsupported
from gru4rec_conformance.implementations.template import TemplateAdapter

FIT_THEN_SCORE = '''
@pytest.mark.check("I-1", kind="K10")
def test_fit(impl):
    """Fitting completes."""
    model = impl.build()
    model.fit(TRAIN)

@pytest.mark.check("I-2", kind="K10")
def test_score_after_fresh_build(impl):
    """A later check gets a fresh worker and works (build and score only)."""
    model = impl.build()
    assert model.optimizer_info()["type"] == "sgd"
'''


def test_crash_hang_exception_and_memory_become_failures_and_the_run_completes(project):
    project.checks(FIT_THEN_SCORE)
    # separate runs, so that the short timeout of the hang and the memory limit cannot hit the others
    project.run("conformance", "--impl", "crashing,exiting,raising,isolated").assert_outcomes(passed=5, failed=3)
    project.run("conformance", "--impl", "hanging", "--call-timeout", "3").assert_outcomes(passed=1, failed=1)
    project.run("conformance", "--impl", "leaking", "--worker-memory-mb", "400").assert_outcomes(passed=1, failed=1)
    fit = {
        impl: next(r for r in project.results(impl)["results"] if r["test"].startswith("test_fit"))
        for impl in ("crashing", "exiting", "hanging", "raising", "leaking", "isolated")
    }
    assert fit["isolated"]["outcome"] == "passed"
    assert "killed by SIGSEGV" in fit["crashing"]["reason"]
    assert fit["crashing"]["worker"]["kind"] == "crash"
    assert "about to dereference NULL" in fit["crashing"]["worker"]["stderr_tail"]
    assert "Fatal Python error: Segmentation fault" in fit["crashing"]["worker"]["stderr_tail"]
    assert "exited with status 3" in fit["exiting"]["reason"]
    assert "leaving with status 3" in fit["exiting"]["worker"]["stderr_tail"]
    assert "no answer within the timeout of 3 s" in fit["hanging"]["reason"]
    assert fit["hanging"]["worker"]["kind"] == "timeout" and "going to sleep" in fit["hanging"]["worker"]["stderr_tail"]
    # the worker's own stack dump just before the kill says where it hung, and the message how to give it more time
    stacks = fit["hanging"]["worker"]["stacks"]
    assert stacks.startswith("Timeout (") and "dummies.py" in stacks and "in fit" in stacks, stacks
    assert "--call-timeout" in fit["hanging"]["reason"] and "in fit" in fit["hanging"]["details"]
    assert "raised ValueError: boom in fit" in fit["raising"]["reason"]
    assert "remote traceback" in fit["raising"]["details"] and "in fit" in fit["raising"]["details"]
    assert "exceeded the limit of 400 MiB" in fit["leaking"]["reason"]
    assert fit["leaking"]["worker"]["kind"] == "memory" and "leaking 50 MiB" in fit["leaking"]["worker"]["stderr_tail"]
    for impl in fit:  # every implementation's second check ran in a fresh worker and passed
        assert project.outcomes(impl)[f"test_score_after_fresh_build[{impl}]"] == "passed"
    summary = (project.run_dirs("crashing")[-1] / "summary.md").read_text()
    assert "Worker stderr (tail)" in summary and "about to dereference NULL" in summary
    summary = (project.run_dirs("hanging")[-1] / "summary.md").read_text()
    assert "Worker Python stacks before the timeout kill" in summary and "in fit" in summary


def test_isolation_always_wraps_in_process_adapters(project):
    project.checks('''
    @pytest.mark.check("I-3", kind="K10")
    def test_where(impl):
        """Runs in a worker when --isolation always."""
        import os
        info = impl.build().optimizer_info()
        assert (info["pid"] != os.getpid()) == impl.isolated
    ''')
    project.run("conformance", "--impl", "good").assert_outcomes(passed=1)
    project.run("conformance", "--impl", "good", "--isolation", "always").assert_outcomes(passed=1)
    assert "worker process" in project.results("good")["run"]["impl"]["isolation"]


def test_worker_least_privilege(project, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "do-not-leak")
    monkeypatch.setenv("GRU4REC_VISIBLE", "yes")
    project.checks('''
    @pytest.mark.check("I-4", kind="K10")
    def test_env(impl):
        """The worker sees a filtered environment, a private HOME and a temporary working directory."""
        import os
        info = impl.build().optimizer_info()
        assert "SECRET_TOKEN" not in info["env"] and "GRU4REC_VISIBLE" not in info["env"]  # no prefix pass-through
        assert info["cwd"].rsplit("/", 1)[-1].startswith("gru4rec-worker-")
        assert info["home"] == info["cwd"] + "/home" and info["cwd"] != os.getcwd()
        assert {"HF_HUB_OFFLINE", "GRU4REC_CACHE_DIR", "PYTHONPATH"} <= set(info["env"])
        print("INTERFACES", info["interfaces"])
    ''')
    result = project.run("conformance", "--impl", "isolated", "-s")
    result.assert_outcomes(passed=1)
    prefix, description = network_isolation()
    if not prefix:
        pytest.skip(f"network isolation unavailable here: {description}")
    result.stdout.fnmatch_lines(["*INTERFACES [[]'lo'[]]"])  # a fresh network namespace has only loopback


def _proxy(**settings) -> WorkerProxy:
    return WorkerProxy(
        "gru4rec_conformance.implementations.template:TemplateAdapter",
        TemplateAdapter.protocol_methods(),
        settings=IsolationSettings(**settings),
        capabilities_cls=Capabilities,
        label="template",
    )


def test_proxy_forwards_the_protocol_and_reraises_unsupported():
    import pandas as pd

    proxy = _proxy()
    try:
        caps = proxy.capabilities()
        assert isinstance(caps, Capabilities) and caps.full_ranking and proxy.version() == "0+template"
        proxy.build(seed=1)
        report = proxy.fit(pd.DataFrame({"SessionId": [1, 1, 2, 2], "ItemId": [3, 4, 3, 4], "Time": [1, 2, 3, 4]}))
        assert report.n_events_trained == [2] and list(proxy.item_ids()) == [3, 4]
        assert proxy.score_prefixes([[3], [99], []]).shape == (3, 2)
        with pytest.raises(Unsupported) as exc:
            proxy.train_step([3], [4])
        assert exc.value.name == "train_step"
        with pytest.raises(Unsupported, match="momentum"):
            proxy.build(seed=1, momentum=0.5)
        with pytest.raises(AttributeError):
            proxy.not_a_protocol_method  # noqa: B018
        pid = proxy.worker_pid
    finally:
        proxy.close()
    assert pid is not None and not os.path.exists(f"/proc/{pid}/status") or _zombie_or_gone(pid)


def test_worker_reports_the_cpu_time_of_each_call():
    """Every answered call carries the CPU time the worker spent in the adapter's method (SC-1 times with it);
    cpu_call reads it for a worker and measures an in-process adapter itself."""
    import pandas as pd

    from gru4rec_conformance.conformance._harness.cputime import cpu_call

    frame = pd.DataFrame({"SessionId": [1, 1, 2, 2], "ItemId": [3, 4, 3, 4], "Time": [1, 2, 3, 4]})
    proxy = _proxy()
    try:
        proxy.build(seed=1)
        t0 = time.perf_counter()
        report, cpu = cpu_call(proxy, "fit", frame)
        wall = time.perf_counter() - t0
        assert report.n_events_trained == [2] and cpu == proxy.last_cpu_s
        assert 0.0 <= cpu <= wall  # one worker thread: not more than the call's wall time
        with pytest.raises(Unsupported):
            cpu_call(proxy, "train_step", [3], [4])
        assert proxy.last_cpu_s is None  # a failed call has no CPU time
    finally:
        proxy.close()
    local = TemplateAdapter()
    local.build(seed=1)
    report, cpu = cpu_call(local, "fit", frame)
    assert report.n_events_trained == [2] and cpu >= 0.0


def _zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return "zombie" in fh.read()
    except OSError:
        return True


def _wait_dead(pid: int, timeout: float = 10.0) -> None:
    """Until ``pid`` is a zombie or gone (a SIGKILL is delivered asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.01)


def test_state_is_lost_after_a_crash_and_build_starts_a_fresh_worker():
    proxy = _proxy(call_timeout=2)
    try:
        proxy.build(seed=1)
        first = proxy.worker_pid
        os.kill(first, 9)  # killed from outside between calls
        _wait_dead(first)
        with pytest.raises(WorkerCrashed, match="killed by SIGKILL"):
            proxy.item_ids()
        with pytest.raises(WorkerStateLost, match="call build"):
            proxy.item_ids()
        proxy.build(seed=2)
        assert proxy.worker_pid not in (None, first) and proxy.starts == 2
    finally:
        proxy.close()


def test_worker_start_failure_is_reported():
    proxy = WorkerProxy(
        "gru4rec_conformance.implementations.template:NoSuchAdapter", ("version", "capabilities"), label="broken"
    )
    with pytest.raises(WorkerCallError, match="could not create the adapter: AttributeError"):
        proxy.capabilities()
    proxy.close()


def test_timeout_kills_the_whole_process_group(project):
    proxy = WorkerProxy(
        "dummies:Hanging",
        ("version", "capabilities", "build", "fit"),
        settings=IsolationSettings(call_timeout=1),
        pythonpath=(str(project.path),),
        label="hanging",
    )
    import pandas as pd

    try:
        proxy.build(seed=1)
        pid = proxy.worker_pid
        with pytest.raises(WorkerTimeout, match="no answer within the timeout of 1 s"):
            proxy.fit(pd.DataFrame({"SessionId": [1, 1], "ItemId": [1, 2], "Time": [1, 2]}))
        assert _zombie_or_gone(pid)
    finally:
        proxy.close()


@pytest.mark.parametrize(
    "user_env,threads,want_env,want_torch",
    [
        ({}, None, {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}, 1),
        (
            {"OMP_NUM_THREADS": "2"},
            None,
            {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
            2,
        ),
        ({"OMP_NUM_THREADS": "2"}, 3, {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3", "OPENBLAS_NUM_THREADS": "3"}, 3),
    ],
    ids=["default-1", "user-env-kept", "option-overrides"],
)
def test_worker_pins_thread_counts(monkeypatch, user_env, threads, want_env, want_torch):
    """Workers get OMP/MKL/OpenBLAS thread counts (default 1, a user's variable kept, --worker-threads wins) and
    torch's intra-op threads follow once the adapter has imported torch."""
    pytest.importorskip("torch")
    from pathlib import Path

    from thread_probe import ThreadProbe

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GRU4REC_WORKER_THREADS"):
        monkeypatch.delenv(var, raising=False)
    for k, v in user_env.items():
        monkeypatch.setenv(k, v)
    proxy = WorkerProxy(
        "thread_probe:ThreadProbe",
        ThreadProbe.protocol_methods(),
        settings=IsolationSettings(threads=threads),
        capabilities_cls=Capabilities,
        pythonpath=(str(Path(__file__).parent),),
        label="thread-probe",
    )
    try:
        proxy.build(seed=1)
        info = proxy.optimizer_info()
    finally:
        proxy.close()
    assert {k: info["env"][k] for k in want_env} == want_env
    assert info["env"]["GRU4REC_WORKER_THREADS"] == str(want_torch)
    assert info["torch_threads"] == want_torch


def test_sandbox_is_named_in_both_headers(project):
    """The terminal header and results.json's run header say what confines the workers."""
    from gru4rec_conformance.conformance._harness.isolation import sandbox_probe, unprivileged_python_problem

    project.checks(FIT_THEN_SCORE)
    result = project.run("conformance", "--impl", "isolated", "--sandbox", "none", "-k", "test_fit")
    if os.geteuid() == 0 and unprivileged_python_problem(sys.executable):  # root, and nobody cannot run python
        assert "the suite runs as root without the sandbox" in result.stdout.str()  # refused, not run as root
    else:
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["sandbox: none (--sandbox none)*"])
        assert project.results("isolated")["run"]["sandbox"] == "none (--sandbox none)"
        assert "sandbox: none (--sandbox none)" in project.results("isolated")["run"]["impl"]["isolation"]
    result = project.run("conformance", "--impl", "good", "-k", "test_fit")  # in-process: no worker, no sandbox line
    assert "sandbox:" not in result.stdout.str()
    assert project.results("good")["run"]["sandbox"].startswith("none (in-process adapter")
    if not sandbox_probe().available:
        pytest.skip(f"bubblewrap cannot run here: {sandbox_probe().reason}")
    result = project.run("conformance", "--impl", "isolated", "--sandbox", "bwrap", "-k", "test_fit")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["sandbox: bubblewrap * (pid, ipc, net, uts, * namespaces; *fs read-only except worker dir*"]
    )
    assert project.results("isolated")["run"]["sandbox"].startswith("bubblewrap")


def test_without_bubblewrap_auto_falls_back_and_gate_and_bwrap_refuse(monkeypatch):
    """No bwrap on PATH: ``auto`` gives ``none (why)``, ``--sandbox bwrap`` and an unsandboxed ``--gate`` are usage
    errors naming the way out, ``--allow-unsandboxed`` lets the gate run."""
    import dataclasses

    from gru4rec_conformance.conformance._harness import isolation
    from gru4rec_conformance.conformance._harness.options import Options, check_sandbox

    monkeypatch.setattr(isolation, "_SANDBOX_CACHE", None)
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    info = isolation.sandbox_for("auto")
    assert not info.available and info.describe() == "none (bubblewrap is not installed (apt-get install bubblewrap))"
    options = Options(selection=["x"], device="cpu", dataset=None, seeds=[1], gate=True, xfail_mark="xfail",
                      report_dir=Path("."), report_enabled=False, plots=False, isolation="auto",
                      settings=IsolationSettings(), is_xdist_worker=False, resume=[], xfail_files=[])  # fmt: skip
    with pytest.raises(pytest.UsageError, match="--allow-unsandboxed") as exc:
        check_sandbox(options, uses_workers=True)
    assert "bubblewrap is not installed" in str(exc.value)
    check_sandbox(options, uses_workers=False)  # in-process adapters only: nothing to sandbox
    check_sandbox(dataclasses.replace(options, allow_unsandboxed=True), uses_workers=True)
    check_sandbox(dataclasses.replace(options, gate=False), uses_workers=True)
    bwrap = dataclasses.replace(options, gate=False, settings=IsolationSettings(sandbox="bwrap"))
    with pytest.raises(pytest.UsageError, match="--sandbox bwrap: bubblewrap cannot sandbox the workers here"):
        check_sandbox(bwrap, uses_workers=True)


def test_a_declared_compile_cache_reaches_the_worker_proxy(tmp_path, monkeypatch):
    """``compile_cache = True`` on the adapter class gives its worker proxy the implementation's own folder under
    the cache (level included in the name); an adapter without it gets none."""
    from gru4rec_conformance.conformance._harness.handle import ImplHandle
    from gru4rec_conformance.implementations.registry import AdapterSpec
    from gru4rec_conformance.implementations.template import TemplateAdapter

    class Compiling(TemplateAdapter):
        compile_cache = True

    monkeypatch.setenv("GRU4REC_CACHE_DIR", str(tmp_path))
    proxy = ImplHandle(AdapterSpec("compiling:lvl", "gru4rec", Compiling), isolation="always").new_adapter()
    plain = ImplHandle(AdapterSpec("plain", "gru4rec", TemplateAdapter), isolation="always").new_adapter()
    try:
        assert proxy._compile_cache == tmp_path / "compiled" / "compiling.lvl"
        assert plain._compile_cache is None
    finally:
        proxy.close()
        plain.close()


def test_route_through_only_before_the_worker_starts():
    """The benchmarks' CPU limit wraps an adapter by routing its construction through a factory: allowed before
    the worker exists, refused after (the model the worker holds was built without it)."""
    proxy = _proxy()
    try:
        proxy.route_through("gru4rec_conformance.benchmarks.limit:limited", cpu_limit_s=1.0)
        assert proxy._ref == "gru4rec_conformance.benchmarks.limit:limited"
        assert proxy._init_kwargs["target"].endswith("TemplateAdapter") and proxy._init_kwargs["cpu_limit_s"] == 1.0
    finally:
        proxy.close()
    started = _proxy()
    try:
        started.build(seed=1)
        with pytest.raises(RuntimeError, match="after the worker started"):
            started.route_through("x:y")
    finally:
        started.close()
