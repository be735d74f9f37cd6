"""The hf_trainer adapter relies on the suite's ``datasets`` overlay (docs/architecture.md "datasets") and on no
shim of its own: without Hugging Face ``datasets`` it is unavailable with a reason that says what to install."""

from __future__ import annotations

import importlib.util

import pytest

import datasets
from implementations.finetuner.base import ImplementationUnavailable
from implementations.finetuner.hf_trainer import HFTrainerAdapter

needs_accelerate = pytest.mark.skipif(importlib.util.find_spec("accelerate") is None,
                                      reason="accelerate is not installed (hf_trainer checks it first)")


@needs_accelerate
def test_unavailable_without_hf_datasets(monkeypatch):
    monkeypatch.setattr(datasets, "_HF_DIR", None)
    monkeypatch.setattr(datasets, "_HF_VERSION", None)
    with pytest.raises(ImplementationUnavailable, match=r"hf_trainer.*pip install datasets==5\.2\.0"):
        HFTrainerAdapter().capabilities()


@needs_accelerate
def test_declares_no_shim_with_hf_datasets():
    try:
        datasets.require_hf_datasets("this test")
    except ImportError as e:
        pytest.skip(f"Hugging Face datasets is not installed: {e}")
    caps = HFTrainerAdapter().capabilities()
    assert not caps.get("shims"), caps.get("shims")
    assert hasattr(datasets, "Dataset"), "the overlay does not expose Hugging Face's datasets.Dataset"
