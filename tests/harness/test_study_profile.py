"""``--profile study``: the metric checks train with the study's published best hyperparameters per dataset and loss
(layer size and 10 epochs included); the option is validated at session start and recorded in the run header,
and a study-profile run gets a verdict key of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_option_validation import _usage_error
from test_selection import BASIC

from gru4rec_conformance.datasets.sessions.registry import mc_config
from gru4rec_conformance.reports.compact import run_profile, verdict_key
from gru4rec_conformance.reports.results import RunData

# The study's best settings (docs/study.md, 'Best hyperparameters'), typed in from the published table:
# dataset, loss, elu_param (None for cross-entropy), layers, batch, drop. embed, drop. hidden, lr, momentum,
# sample_alpha, bpreg (bpr-max) or logq (cross-entropy).
PUBLISHED = [
    ("coveo", "bpr-max", 1.0, 512, 144, 0.35, 0.0, 0.05, 0.4, 0.2, 1.85),
    ("coveo", "cross-entropy", None, 512, 32, 0.4, 0.15, 0.03, 0.0, 0.0, 1.0),
    ("diginetica", "bpr-max", 1.0, 512, 128, 0.5, 0.3, 0.05, 0.15, 0.3, 0.9),
    ("diginetica", "cross-entropy", None, 192, 128, 0.45, 0.15, 0.1, 0.0, 0.0, 1.0),
    ("retailrocket", "bpr-max", 0.5, 224, 80, 0.5, 0.05, 0.05, 0.4, 0.4, 1.95),
    ("retailrocket", "cross-entropy", None, 192, 240, 0.5, 0.05, 0.085, 0.3, 0.3, 1.0),
    ("yoochoose", "bpr-max", 0.0, 448, 48, 0.25, 0.0, 0.075, 0.1, 0.2, 0.5),
    ("yoochoose", "cross-entropy", None, 480, 48, 0.0, 0.2, 0.07, 0.0, 0.2, 1.0),
    ("rees46", "bpr-max", 0.5, 512, 32, 0.1, 0.0, 0.03, 0.55, 0.2, 0.75),
    ("rees46", "cross-entropy", None, 512, 240, 0.45, 0.0, 0.065, 0.0, 0.5, 1.0),
]


@pytest.mark.parametrize(("key", "loss", "elu", "layers", "batch", "de", "dh", "lr", "mom", "alpha", "extra"),
                         PUBLISHED, ids=[f"{p[0]}-{p[1]}" for p in PUBLISHED])  # fmt: skip
def test_study_profile_sets_the_published_hyperparameters(key, loss, elu, layers, batch, de, dh, lr, mom, alpha, extra):
    cfg = mc_config(key, loss, "study")
    expected = {"loss": loss, "layers": [layers], "batch_size": batch, "dropout_p_embed": de, "dropout_p_hidden": dh,
                "learning_rate": lr, "momentum": mom, "n_sample": 2048, "sample_alpha": alpha,
                "constrained_embedding": True, "embedding": 0, "n_epochs": 10}  # fmt: skip
    expected.update({"bpreg": extra, "elu_param": elu} if loss == "bpr-max" else {"logq": extra})
    assert cfg == expected
    # the default profile changes only the layer size and the epochs
    assert mc_config(key, loss, "cpu") == {**expected, "layers": [100], "n_epochs": 3}


def test_mistyped_profile_is_a_usage_error_with_the_close_name(project):
    err = _usage_error(project, "--impl", "good", "--profile", "studdy")
    first = err.strip().splitlines()[0]
    assert "--profile 'studdy': unknown profile; known: cpu, study (did you mean 'study'?)" in first


def test_profile_is_recorded_in_the_run_header(project):
    project.checks(BASIC)
    result = project.run("conformance", "--impl", "good", "--profile", "study")
    assert result.ret == 0, result.stdout.str()
    assert project.results("good")["run"]["options"]["profile"] == "study"


def _run(options: dict, env: dict, dataset: str | None = "all") -> RunData:
    header = {"impl": {"name": "gp:oob", "role": "implementation", "version": "o/r@abcdef0123"}, "options": options,
              "env": env, "dataset": dataset}  # fmt: skip
    return RunData(directory=Path("/nonexistent"), header=header, results=[], resumes=[], end=None)


def test_a_study_profile_run_has_a_verdict_key_of_its_own():
    assert run_profile(_run({}, {})) == "cpu"  # runs older than the option
    assert run_profile(_run({}, {"GRU4REC_MC_SCALE": "study"})) == "study"
    assert run_profile(_run({"profile": "cpu"}, {"GRU4REC_MC_SCALE": "study"})) == "cpu"  # the option wins
    assert str(verdict_key(_run({"profile": "study"}, {}))).endswith("+datasets-all+study")
    assert str(verdict_key(_run({"profile": None}, {}))).endswith("+datasets-all")
