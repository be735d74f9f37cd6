"""The five-dataset registry of the metric checks : sources (prepared folder, real slice, stand-in)
with a notice saying which, the study's best hyperparameters per dataset and loss, the study's Δ, ``--dataset all``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gru4rec_conformance import child_pythonpath
from gru4rec_conformance.datasets.sessions import registry, standins
from gru4rec_conformance.datasets.sessions.pipeline import prepare

ROOT = Path(__file__).resolve().parents[2]


def test_parse_selection(tmp_path):
    assert registry.parse_selection(None) == [("yoochoose_100k", None)]
    assert [n for n, _ in registry.parse_selection("all")] == list(registry.KEYS)
    assert registry.parse_selection("rees46, coveo,rees46") == [("rees46", None), ("coveo", None)]
    sel = registry.parse_selection(f"all,diginetica={tmp_path}")
    assert len(sel) == 5 and dict(sel)["diginetica"] == str(tmp_path) and dict(sel)["coveo"] is None
    (tmp_path / "manifest.json").write_text('{"dataset": "coveo"}')
    assert registry.parse_selection(str(tmp_path)) == [("coveo", str(tmp_path))]
    for bad in ("rsc15", "movielens=/x"):
        with pytest.raises(ValueError, match="--dataset"):
            registry.parse_selection(bad)
    # a missing prepared folder is named as a folder, not as an unknown dataset name
    with pytest.raises(ValueError, match=r"--dataset '\./nodir': no such folder \(/"):
        registry.parse_selection("./nodir")


def test_mc_config_is_the_study_best_scaled():
    from gru4rec_conformance.conformance.gru4rec.test_metric_conformance import CONFIGS

    for loss, cfg in CONFIGS.items():  # Yoochoose's settings are what the check always used
        assert registry.mc_config("yoochoose", loss) == cfg
    coveo = registry.mc_config("coveo", "bpr-max")
    assert (coveo["batch_size"], coveo["bpreg"], coveo["elu_param"], coveo["momentum"]) == (144, 1.85, 1.0, 0.4)
    rr = registry.mc_config("retailrocket", "cross-entropy")
    assert (rr["batch_size"], rr["learning_rate"], rr["logq"], rr["sample_alpha"]) == (240, 0.085, 1.0, 0.3)
    for key in registry.KEYS:
        for loss in ("cross-entropy", "bpr-max"):
            cfg = registry.mc_config(key, loss)
            assert cfg["layers"] == [registry.MC_LAYERS] and cfg["n_epochs"] == registry.MC_EPOCHS
            assert cfg["n_sample"] == 2048 and cfg["constrained_embedding"] is True
    with pytest.raises(ValueError, match="loss"):
        registry.mc_config("coveo", "top1")


def test_study_delta_is_the_published_relative_change():
    d = registry.study_delta("rees46", "bpr-max", {"implementation": "Recpack", "variant": "OOB"})
    assert d is not None and d["row"] == "Recpack / OOB" and d["delta_rel"] == pytest.approx(0.4624 / 0.5206 - 1)
    ref = registry.study_delta("diginetica", "cross-entropy", {"implementation": "GRU4Rec Official",
                                                                "variant": "Best params"})  # fmt: skip
    assert ref is not None and ref["delta_rel"] == 0.0
    assert registry.study_delta("coveo", "bpr-max", None) is None


def test_without_shared_data_every_dataset_has_a_standin(monkeypatch, tmp_path):
    monkeypatch.setenv("GRU4REC_SHARED_DATA", str(tmp_path / "absent"))
    for key in registry.KEYS:
        m = registry.metric_frames(key)
        assert m.source == "stand-in" and m.label.startswith(key), m
        n_test = standins.evaluable_sessions(m.train, m.test)
        assert len(m.train) >= 5_000 and n_test >= registry.MIN_TEST_SESSIONS, (key, len(m.train), n_test)
        assert ("redistributed" if key == "coveo" else "absent") in m.notice, m.notice
        assert list(m.train.columns) == ["SessionId", "ItemId", "Time"]


def test_real_slices_too_small_say_why(shared_sessions):
    m = registry.metric_frames("diginetica")
    assert m.source == "stand-in" and "707 train_full events (at least 5,000 needed)" in m.notice
    assert "19 evaluable test sessions (at least 2,000 needed)" in m.notice
    assert registry.metric_frames("yoochoose").label == "yoochoose_100k"
    assert "0 evaluable test sessions" in registry.metric_frames("rees46").notice


def test_prepared_folder_is_used_as_given(tmp_path):
    from gru4rec_conformance.datasets.sessions.synthetic import generate_raw

    generate_raw("retailrocket", tmp_path / "raw", 3e-3, seed=5)
    res = prepare("retailrocket", tmp_path / "raw", tmp_path / "rr")
    ((name, folder),) = registry.parse_selection(str(tmp_path / "rr"))
    m = registry.metric_frames(name, folder)
    assert (m.key, m.source, m.label) == ("retailrocket", "prepared", "retailrocket@rr")
    assert len(m.train) == len(res.load("train_full")) and len(m.test) == len(res.load("test"))


def test_dataset_all_parametrizes_the_metric_checks(tmp_path):
    env = {**os.environ, "PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH")),
           "GRU4REC_SHARED_DATA": str(tmp_path / "absent"), "HF_HUB_OFFLINE": "1"}  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance/gru4rec/test_metric_conformance.py", "--impl", "reference",
         "--dataset", "all", "--collect-only", "-q", "-p", "no:cacheprovider", "--no-report"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    ids = [ln for ln in r.stdout.splitlines() if "::test_mc" in ln]
    per_dataset = 7  # MC-1..3 × two losses, plus the fast one-epoch BPR-max MC-1
    assert len(ids) == per_dataset * len(registry.KEYS), r.stdout[-3000:] + r.stderr[-3000:]
    for key in registry.KEYS:
        assert sum(f"[{key}-" in i for i in ids) == per_dataset
    bad = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance/gru4rec/test_metric_conformance.py", "--impl", "reference",
         "--dataset", "movielens", "-k", "test_mc1_same_features and cross", "-q", "-p", "no:cacheprovider",
         "--no-report"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    # validated when the session starts: a usage error (exit 4), not a check failure
    assert bad.returncode == 4 and "--dataset 'movielens'" in bad.stdout + bad.stderr, bad.stderr[-2000:]


def test_study_scale_keeps_the_published_layers_and_epochs(monkeypatch):
    monkeypatch.setenv(registry.SCALE_ENV, "study")
    cfg = registry.mc_config("rees46", "cross-entropy")
    assert (cfg["layers"], cfg["n_epochs"], cfg["batch_size"]) == ([512], 10, 240)
    assert registry.mc_config("retailrocket", "bpr-max", scale="cpu")["layers"] == [registry.MC_LAYERS]
    monkeypatch.setenv(registry.SCALE_ENV, "huge")
    with pytest.raises(ValueError, match="GRU4REC_MC_SCALE"):
        registry.mc_config("coveo", "bpr-max")


def test_mc_band_has_a_sampling_floor_for_small_test_sets():
    from gru4rec_conformance.conformance.gru4rec.test_metric_conformance import ABS_FLOOR, BINOM_Z, REL_FLOOR, band

    seeds = [0.3958, 0.3985, 0.4001]  # three seeds that landed close (SD 0.0022)
    mean, tol_no_n = band(seeds)
    assert tol_no_n == pytest.approx(max(4.0 * float(np.std(seeds, ddof=1)), REL_FLOOR * mean))
    _, tol_small = band(seeds, n_events=1000)  # a small test set: the sampling floor decides
    assert BINOM_Z == 3.0  # seeds spread about 1.5× the binomial SD (the constant's comment)
    assert tol_small == pytest.approx(BINOM_Z * (mean * (1 - mean) / 1000) ** 0.5)
    assert abs(0.4143 - mean) <= tol_small and abs(0.4143 - mean) > tol_no_n
    _, tol_big = band(seeds, n_events=1_000_000)  # a large test set: the floor vanishes, the SD rule decides again
    assert tol_big == pytest.approx(tol_no_n)
    assert band([0.0, 0.0, 0.0], n_events=10)[1] == ABS_FLOOR  # no spread, p = 0: only the absolute floor
    assert abs(0.30 - band(seeds, n_events=1000)[0]) > tol_small  # a 25% drop still fails
    with pytest.raises(ValueError, match="at least one"):
        band([])
