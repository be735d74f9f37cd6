"""benchmarks/runners.py and the timing helper of benchmarks/conftest.py, on tiny data (no timing asserted)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.benchmarks import runners as R
from gru4rec_conformance.benchmarks.timing import BenchConfig, time_epochs, time_eval
from gru4rec_conformance.benchmarks.workload import sweep_frame, trained_events
from gru4rec_conformance.conformance._harness.handle import ImplHandle
from gru4rec_conformance.implementations.registry import AdapterSpec
from gru4rec_conformance.implementations.template import TemplateAdapter

HP = dict(
    loss="cross-entropy",
    layers=[16],
    batch_size=8,
    n_sample=16,
    logq=1.0,
    sample_alpha=0.5,
    learning_rate=0.05,
    constrained_embedding=True,
    embedding=0,
)


@pytest.fixture(scope="module")
def tiny():
    df = sweep_frame(60, 50, seed=1)
    test = sweep_frame(20, 50, seed=2, pad_catalogue=False)
    test["SessionId"] += 10_000
    return df, test


class FakeBenchmark:
    """What time_epochs uses of pytest-benchmark's fixture: group, extra_info and pedantic (setup/target/
    teardown called per warm-up and timed round, as pytest-benchmark does)."""

    def __init__(self):
        self.group, self.extra_info, self.calls = None, {}, 0

    def pedantic(self, target, setup, teardown, rounds, iterations, warmup_rounds):
        for _ in range(warmup_rounds + rounds):
            args, kwargs = setup()
            self.calls += 1
            out = target(*args, **kwargs)
            teardown(*args, **kwargs)
        return out


def cfg():
    c = BenchConfig.__new__(BenchConfig)
    c.device, c.cuda, c.scale, c.rounds, c.warmup, c.threads, c.sweeps, c.seed = "cpu", False, "ci", 2, 1, 1, "ci", 1
    return c


def test_reference_runner_epoch(tiny):
    df, _ = tiny
    r = R.ReferenceRunner("cpu")
    res = r.run(r.prepare(df, HP, seed=1))
    assert res.n_events == trained_events(df) and res.n_steps > 0
    assert 0 < res.epoch_seconds <= res.fit_seconds and res.cpu_seconds > 0
    assert res.info["step_impl"] == "standard"
    if res.peak_rss_mb is not None:
        assert res.peak_rss_mb >= res.base_rss_mb > 0


def test_time_epochs_records_best_round_and_ratio(tiny):
    df, _ = tiny
    bm_ref, bm_other = FakeBenchmark(), FakeBenchmark()
    ref = R.ReferenceRunner("cpu")
    other = R.ReferenceRunner("cpu", step_impl="static")
    other.name = "reference-static"
    s_ref = time_epochs(
        bm_ref, ref, cfg(), group="sweep/test", case="x=1", train=df, hp=HP, extra={"sweep": "x"}, rounds=2, warmup=1
    )
    s = time_epochs(
        bm_other, other, cfg(), group="sweep/test", case="x=1", train=df, hp=HP, extra={}, rounds=2, warmup=1
    )
    assert bm_ref.calls == 3 and len(s_ref["rounds_epoch_seconds"]) == 2
    assert s_ref["epoch_seconds"] == min(s_ref["rounds_epoch_seconds"])
    assert s["epoch_seconds_over_reference"] == pytest.approx(s["epoch_seconds"] / s_ref["epoch_seconds"])
    assert s["events"] == s_ref["events"] == trained_events(df)
    info = bm_other.extra_info
    assert info["impl"] == "reference-static" and info["step_impl"] == "static" and bm_other.group == "sweep/test"
    assert info["hparams"] == HP and info["versions"]["torch"] and info["step_info"]["step_impl"] == "static"


class MarkovWithHparams(TemplateAdapter):
    """The template's Markov chain, in process, declaring the two hyperparameters the test passes."""

    name = "markov-test"
    isolated = False

    def capabilities(self):
        return {**super().capabilities(), "hyperparameters": {"n_epochs": 1, "batch_size": 8}}


def test_adapter_runner_in_process(tiny):
    df, test = tiny
    handle = ImplHandle(AdapterSpec("markov-test", "gru4rec", MarkovWithHparams), isolation="never")
    r = R.AdapterRunner(handle)
    st = r.prepare(df, {"batch_size": 8}, seed=1)
    res = r.run(st)
    r.close(st)
    assert res.n_events == trained_events(df) and res.cpu_seconds is not None
    ev = r.run_eval(r.prepare_eval(df, test, {"batch_size": 8}, seed=1))
    assert ev.n_events == R.eval_events(test, df["ItemId"].unique()) > 0
    assert 0 <= ev.metrics["recall@20"] <= 1


def test_unsupported_hyperparameter_skips(tiny):
    df, _ = tiny
    handle = ImplHandle(AdapterSpec("template", "gru4rec", TemplateAdapter), isolation="never")
    with pytest.raises(pytest.skip.Exception, match="unsupported by template: loss .*does not declare hyperparameter"):
        time_epochs(
            FakeBenchmark(),
            R.AdapterRunner(handle),
            cfg(),
            group="epoch/x/y",
            case="x",
            train=df,
            hp=HP,
            extra={},
            rounds=1,
            warmup=0,
        )


def test_reference_evaluation_counts_every_prediction_point(tiny):
    df, test = tiny
    bm = FakeBenchmark()
    s = time_eval(
        bm,
        R.ReferenceRunner("cpu"),
        cfg(),
        group="eval/tiny",
        case="tiny",
        train=df,
        test=test,
        hp=HP,
        extra={},
        rounds=1,
        warmup=0,
    )
    assert s["eval_events"] == R.eval_events(test, df["ItemId"].unique())
    assert R.eval_batch(test) == min(512, test["SessionId"].nunique())


def test_official_runner_needs_a_checkout(tmp_path):
    with pytest.raises(FileNotFoundError, match="OFFICIAL_GRU4REC_PATH.*gru4rec_pytorch.py"):
        R.OfficialRunner(tmp_path)


def test_official_port_import_applies_the_declared_shim(tmp_path, monkeypatch):
    """import_official_port: the port's module sees a torch whose ``tensor`` takes a pandas Series (a stand-in
    checkout; the one place the shim is defined, shared by the runner, the side-by-side benchmark and the golden
    fixtures' script)."""
    import sys

    import pandas as pd

    (tmp_path / "gru4rec_pytorch.py").write_text("import torch\n\ndef make(x):\n    return torch.tensor(x)\n")
    (tmp_path / "evaluation.py").write_text("NAME = 'evaluation stand-in'\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("gru4rec_pytorch", "evaluation"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        gp, ev = R.import_official_port(tmp_path)
        assert sys.path[0] == str(tmp_path) and ev.NAME == "evaluation stand-in"
        assert gp.make(pd.Series([1.5, 2.5])).tolist() == [1.5, 2.5]
        assert gp.torch.float32 is R.torch.float32  # everything else is torch itself
        assert R.import_official_port(tmp_path)[0] is gp and sys.path.count(str(tmp_path)) == 1
    finally:
        for name in ("gru4rec_pytorch", "evaluation"):
            sys.modules.pop(name, None)


def test_peak_rss_reset_is_harmless():
    R.reset_peak_rss()
    hwm = R._status_mb("VmHWM")
    assert hwm is None or hwm > 0
    assert isinstance(R.versions("cpu")["torch"], str) and np.isfinite(R.versions("cpu")["torch_threads"])


def test_epoch_sample_cache_is_the_epochs_steps_without_slack():
    """The timed epochs' sample cache holds exactly the rows one epoch consumes: n_sample × the reference's own step
    count (which the official port shares), never batch_size × n_sample extra ids; the reference then needs no
    second generation of samples."""
    from gru4rec_conformance.reference.gru4rec import GRU4Rec

    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 9, size=60)
    train = pd.DataFrame({"SessionId": np.repeat(np.arange(60), lengths),
                          "ItemId": rng.integers(0, 40, size=int(lengths.sum())),
                          "Time": np.arange(int(lengths.sum()), dtype=np.float64)})  # fmt: skip
    hp = {"n_sample": 16, "batch_size": 8}
    steps = R.epoch_steps(train, 8)
    g = GRU4Rec(layers=[8], batch_size=8, n_sample=16, n_epochs=1, seed=1)
    rep = g.fit(train, sample_cache_max_size=R.epoch_sample_cache(hp, train))
    assert rep.n_steps == [steps] and R.epoch_sample_cache(hp, train) == 16 * steps
    assert g.sampler.n_refreshes == 1, "the epoch needed a second generation of samples"
    assert R.epoch_sample_cache({"n_sample": 0, "batch_size": 8}, train) == 1
