"""Offline-operation checks (FT-23 and FT-25, docs/checks.md): no network, no process-wide side effects."""

from __future__ import annotations

import os

import pytest

from gru4rec_conformance.conformance.finetuner.support import fresh, network_guard

KIND = "offline"
CFG = dict(max_epochs=1, batch_size=8)


@pytest.mark.check("FT-23", kind=KIND)
def test_no_network_access(impl, tiny_bert, slices, monkeypatch):
    """Build, fit, predict and evaluate with HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1 and every socket
    refused: nothing tries to connect."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    with network_guard() as attempts:
        try:
            a = fresh(impl)
            a.run(
                slices.train.head(16),
                slices.val.head(8),
                slices.test.head(8),
                CFG,
                seed=0,
                model_spec=tiny_bert,
                num_labels=5,
            )
            a.predict(["a movie"])
        except OSError as e:
            pytest.fail(f"network use broke the run: {e}; attempts {attempts}")
    if impl.supports("hook:network_attempts"):  # attempts made in the implementation's own workers
        attempts = attempts + list(a.network_attempts())
    assert not attempts, f"network access attempted: {attempts}"


@pytest.mark.check("FT-25", kind=KIND)
def test_no_environment_side_effects(impl, tiny_bert, slices, monkeypatch):
    """A run leaves the process environment as it found it (e.g. no CUDA_LAUNCH_BLOCKING=1)."""
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)
    before = dict(os.environ)
    a = fresh(impl)
    try:
        a.run(
            slices.train.head(16),
            slices.val.head(8),
            slices.test.head(8),
            CFG,
            seed=0,
            model_spec=tiny_bert,
            num_labels=5,
        )
        after = dict(os.environ)
        changed = {k: after.get(k) for k in set(before) | set(after) if before.get(k) != after.get(k)}
        if impl.supports("hook:environment_changes"):  # changes inside the implementation's own workers
            changed.update(a.environment_changes())
    finally:
        for k in set(os.environ) - set(before):
            monkeypatch.delenv(k, raising=False)
        for k, v in before.items():
            if os.environ.get(k) != v:
                monkeypatch.setenv(k, v)
    assert not changed, f"the run changed environment variables: {changed}"
