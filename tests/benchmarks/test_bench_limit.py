"""The per-epoch CPU-time limit (benchmarks/limit.py), its handling by the runner and the timing helper, and the
interleaved ratios (benchmarks/timing.py). Tiny torch loops; no speed asserted, only what is recorded."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gru4rec_conformance.benchmarks import limit as L
from gru4rec_conformance.benchmarks import runners as R
from gru4rec_conformance.benchmarks import timing as T
from gru4rec_conformance.benchmarks.workload import padded_data, sweep_frame, trained_events
from gru4rec_conformance.conformance._harness.handle import ImplHandle
from gru4rec_conformance.conformance._harness.isolation import WorkerCallError
from gru4rec_conformance.implementations.registry import AdapterSpec

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the worker imports the test adapters as `bench_adapters` from this folder
    sys.path.insert(0, str(HERE))

import bench_adapters  # noqa: E402


def _train(n_steps: int) -> int:
    w = torch.nn.Parameter(torch.randn(32, 32))
    opt = torch.optim.SGD([w], lr=1e-3)
    x = torch.randn(32, 32)
    for _ in range(n_steps):
        opt.zero_grad()
        (x @ w).sum().backward()
        opt.step()
    return n_steps


def test_limited_fit_stops_at_the_limit_with_the_steps_reached():
    with pytest.raises(L.EpochLimitReached) as info:
        L.limited_fit(_train, 0.05, 10**7)
    p = info.value.payload
    assert 1 <= p["steps"] < 10**7 and p["cpu_s"] > 0.05 and p["limit_s"] == 0.05 and p["wall_s"] > 0
    assert L.limit_payload(info.value) == p
    # the hook is gone after the fit: a later loop runs to its end
    assert _train(50) == 50


def test_limited_fit_returns_what_a_short_fit_returns():
    assert L.limited_fit(_train, 30.0, 20) == 20
    assert L.limited_fit(_train, None, 20) == 20  # no limit: counts only


def test_limit_survives_an_implementation_that_wraps_exceptions():
    def wrapping_fit():
        try:
            _train(10**7)
        except Exception as exc:
            raise RuntimeError("training failed") from exc

    with pytest.raises(L.EpochLimitReached):
        L.limited_fit(wrapping_fit, 0.05)


def test_steps_count_the_busiest_optimizer_once_per_minibatch():
    with L.step_limit(None) as state:
        a = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
        b = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
        for _ in range(7):
            a.step()
            b.step()
        a.step()
    assert state.steps == 8 and state.reached is None


def _busy_cpu(seconds: float) -> None:
    import time

    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        pass


class _BaseSession:  # stands in for tensorflow.python.client.session.BaseSession (run defined on the base)
    def run(self, fetches, feed_dict=None):
        _busy_cpu(0.002)
        return fetches


class _Session(_BaseSession):
    pass


class _KerasModel:  # stands in for tf.keras.Model (train_on_batch defined on the base)
    def train_on_batch(self, x, y):
        _busy_cpu(0.002)
        return 0.5


class _Functional(_KerasModel):
    pass


@pytest.fixture
def fake_tensorflow(monkeypatch):
    """A ``tensorflow`` module in sys.modules with ``compat.v1.Session`` and ``keras.Model`` (the main environment
    has no TensorFlow; the real one is exercised by the TF/Keras benchmark runs)."""
    import types

    tf = types.ModuleType("tensorflow")
    tf.compat = types.SimpleNamespace(v1=types.SimpleNamespace(Session=_Session))
    tf.keras = types.SimpleNamespace(Model=_KerasModel)
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    return tf


def test_tf1_session_steps_are_counted_and_stopped(fake_tensorflow):
    def tf_fit(n):
        sess = fake_tensorflow.compat.v1.Session()
        sess.run("init")  # no feed_dict: not a step
        for i in range(n):
            sess.run(["cost", "train_op"], {"X": [i] * 4, "state": [[0.0] * 3] * 4})  # 4 lanes
        return n

    with L.step_limit(None) as state:
        assert tf_fit(7) == 7
    assert state.steps == 7
    with pytest.raises(L.EpochLimitReached) as info:
        L.limited_fit(tf_fit, 0.02, 10**6)
    p = info.value.payload
    assert 1 <= p["steps"] < 10**6 and p["events"] == 4 * p["steps"]  # the rows fed, seen from outside
    assert "run" not in vars(_Session) and not getattr(_BaseSession.run, "_gru4rec_limit", False)  # restored


def test_keras_train_on_batch_steps_are_counted_and_stopped(fake_tensorflow):
    def keras_fit(n):
        model = _Functional()
        for _ in range(n):
            model.train_on_batch(np.zeros((3, 1, 10)), np.zeros((3, 10)))
        return n

    with L.step_limit(None) as state:
        assert keras_fit(5) == 5
    assert state.steps == 5
    with pytest.raises(L.EpochLimitReached) as info:
        L.limited_fit(keras_fit, 0.02, 10**6)
    assert info.value.payload["events"] == 3 * info.value.payload["steps"]
    # torch steps feed nothing visible: no events in the payload (the runner counts steps x B)
    with pytest.raises(L.EpochLimitReached) as info:
        L.limited_fit(_train, 0.05, 10**7)
    assert "events" not in info.value.payload
    assert not getattr(_KerasModel.train_on_batch, "_gru4rec_limit", False)


def test_limit_payload_reads_a_worker_error_and_ignores_others():
    err = WorkerCallError(
        "x.fit() raised EpochLimitReached",
        remote_type="EpochLimitReached",
        remote_traceback="",
        remote_message=L.EpochLimitReached({"steps": 3, "cpu_s": 1.5, "wall_s": 2.0, "limit_s": 1.0}).args[0],
    )
    assert L.limit_payload(err) == {"steps": 3, "cpu_s": 1.5, "wall_s": 2.0, "limit_s": 1.0}
    assert L.limit_payload(RuntimeError("EPOCH_LIMIT{}")) is None
    other = WorkerCallError("boom", remote_type="ValueError", remote_traceback="", remote_message="boom")
    assert L.limit_payload(other) is None


@pytest.mark.parametrize("isolation", ["never", "always"])
def test_adapter_runner_reports_a_limited_epoch(isolation):
    """In process and in the worker (the limit's factory is the worker's ref): the fit stops, the result says
    so, with the steps reached and the CPU spent; the adapter serves the next case."""
    spec = AdapterSpec("slow-torch-markov", "gru4rec", bench_adapters.SlowTorchMarkov)
    runner = R.AdapterRunner(ImplHandle(spec, isolation=isolation), cpu_limit_s=0.3)
    df = sweep_frame(40, 30, seed=0)
    try:
        state = runner.prepare(df, {**bench_adapters.OFFICIAL, "batch_size": 8}, seed=1)
        res = runner.run(state)
        assert res.info["limited"] is True and res.info["limit_limit_s"] == 0.3
        assert 1 <= res.n_steps < bench_adapters.SlowTorchMarkov.steps
        assert res.cpu_seconds >= 0.3 and res.n_events == 8 * res.n_steps
        if isolation == "always":
            assert runner._adapter is not None and runner._adapter.worker_pid  # the worker is kept
        again = runner.run(runner.prepare(df, {**bench_adapters.OFFICIAL, "batch_size": 8}, seed=1))
        assert again.info["limited"] is True
    finally:
        runner.shutdown()


def test_adapter_runner_complete_epoch_has_the_workers_cpu_time():
    spec = AdapterSpec("lenient-markov", "gru4rec", bench_adapters.LenientMarkov)
    runner = R.AdapterRunner(ImplHandle(spec, isolation="always"), cpu_limit_s=30.0)
    df = sweep_frame(40, 30, seed=0)
    try:
        res = runner.run(runner.prepare(df, dict(bench_adapters.OFFICIAL), seed=1))
        assert not res.info.get("limited") and res.cpu_seconds is not None and res.cpu_seconds >= 0
        assert res.peak_rss_mb is None or res.peak_rss_mb > 0
    finally:
        runner.shutdown()


def test_unsupported_droppable_hyperparameters_are_dropped_and_listed():
    class NoSampling(bench_adapters.LenientMarkov):
        def build(self, seed, **hp):
            from gru4rec_conformance.implementations.base import Unsupported

            for name in ("n_sample", "logq"):
                if name in hp:
                    raise Unsupported(name, "no sampling here")
            if hp.get("constrained_embedding"):
                raise Unsupported("embedding:shared", "a separate input embedding only")
            return super().build(seed, **hp)

    runner = R.AdapterRunner(ImplHandle(AdapterSpec("no-sampling", "gru4rec", NoSampling), isolation="never"))
    state = runner.prepare(sweep_frame(30, 20, seed=0), dict(bench_adapters.OFFICIAL), seed=1)
    assert state["dropped"] == ["n_sample", "logq", "constrained_embedding"] and "n_sample" not in state["hp"]
    res = runner.run(state)
    assert res.info["dropped_hparams"] == ["n_sample", "logq", "constrained_embedding"]


def test_ratios_complete_and_limited():
    refs = [
        {"epoch_seconds": 2.0, "cpu_seconds": 2.0, "events": 1000},
        {"epoch_seconds": 4.0, "cpu_seconds": 2.0, "events": 1000},
    ]
    done = T.ratios({"epoch_seconds": 6.0, "cpu_seconds": 4.0, "events": 1000}, refs)
    assert done["epoch_seconds_over_reference"] == pytest.approx(2.0)
    assert done["cpu_seconds_over_reference"] == pytest.approx(2.0) and done["reference_runs"] == 2
    cut = T.ratios({"epoch_seconds": 9.0, "cpu_seconds": 8.0, "events": 100, "limited": True}, refs)
    assert "cpu_seconds_over_reference" not in cut
    assert cut["cpu_seconds_over_reference_min"] == pytest.approx(4.0)  # 8 CPU s spent / 2 s for the whole epoch
    assert cut["cpu_seconds_over_reference_est"] == pytest.approx(40.0)  # 0.08 s per event x 1000 events / 2 s
    assert T.ratios({"epoch_seconds": 1.0}, []) == {}


def test_interleaved_reference_runs_surround_each_implementation(monkeypatch):
    """time_epochs: the reference's own run, then after each other implementation one more reference epoch; the
    ratios of an implementation use the reference run before and the one after it."""
    from test_bench_runners import HP, FakeBenchmark, cfg

    monkeypatch.setattr(T, "RESULTS", {})
    monkeypatch.setattr(T, "REFERENCE_RUNS", {})
    df = sweep_frame(40, 30, seed=0)
    ref = R.ReferenceRunner("cpu")
    other = R.ReferenceRunner("cpu")
    other.name = "ref-copy"
    c = cfg()
    c.interleave = True
    kw = dict(group="sweep/t", case="x=1", train=df, hp=HP, extra={}, rounds=1, warmup=0, reference=ref)
    T.time_epochs(FakeBenchmark(), ref, c, **kw)
    s1 = T.time_epochs(FakeBenchmark(), other, c, **kw)
    s2 = T.time_epochs(FakeBenchmark(), other, c, **kw)
    runs = T.REFERENCE_RUNS[("sweep/t", "x=1")]
    assert len(runs) == 3 and s1["reference_runs"] == 2 and s2["reference_runs"] == 2
    mean12 = (runs[0]["cpu_seconds"] + runs[1]["cpu_seconds"]) / 2
    assert s1["cpu_seconds_over_reference"] == pytest.approx(s1["cpu_seconds"] / mean12)
    mean23 = (runs[1]["cpu_seconds"] + runs[2]["cpu_seconds"]) / 2
    assert s2["cpu_seconds_over_reference"] == pytest.approx(s2["cpu_seconds"] / mean23)


def test_padded_data_has_the_real_catalogue_and_few_minibatches():
    d = padded_data("rees46", minibatches=20, batch_size=32)
    assert d.train["ItemId"].nunique() == 172_756  # the study's item count (docs/datasets.md, 'Published statistics')
    assert abs(trained_events(d.train) - 20 * 32) < 0.35 * 20 * 32
    assert set(d.test["ItemId"]) <= set(d.train["ItemId"]) and d.test["Time"].min() > d.train["Time"].max()
    assert d.test["SessionId"].min() > d.train["SessionId"].max()
    with pytest.raises(ValueError, match="minibatches"):
        padded_data("coveo", 0, 32)


def test_a_failed_case_is_recorded_before_it_fails(monkeypatch):
    from test_bench_runners import HP, FakeBenchmark, cfg

    monkeypatch.setattr(T, "RESULTS", {})

    class Broken(R.ReferenceRunner):
        name = "broken"

        def run(self, state):
            raise KeyError("[1000023] not in index")

    bm = FakeBenchmark()
    with pytest.raises(KeyError):
        T.time_epochs(bm, Broken("cpu"), cfg(), group="g", case="c", train=sweep_frame(20, 10), hp=HP, extra={},
                      rounds=1, warmup=0)  # fmt: skip
    assert T.RESULTS[("g", "c")]["broken"] == {"failed": "KeyError: '[1000023] not in index'"}
    assert bm.extra_info["failed"].startswith("KeyError")


def test_worker_pythons_makes_relative_paths_absolute_and_names_a_missing_one(tmp_path, monkeypatch):
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").write_text("")
    monkeypatch.chdir(tmp_path)
    table = R.worker_pythons("recpack*=env/bin/python, cornac=python3")
    assert table == {"recpack*": str(tmp_path / "env" / "bin" / "python"), "cornac": "python3"}
    with pytest.raises(ValueError, match=r"keras_gru4rec=\.tox/nope/bin/python: no such file"):
        R.worker_pythons("keras_gru4rec=.tox/nope/bin/python")
    with pytest.raises(ValueError, match="expected name=python"):
        R.worker_pythons("recpack")
