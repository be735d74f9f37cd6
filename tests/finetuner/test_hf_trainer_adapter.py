"""The hf_trainer adapter declares no shim of its own. Hugging Face ``datasets`` is optional for it: nothing in the
suite imports as a bare ``datasets`` any more, so transformers' availability probe sees only Hugging Face's."""

from __future__ import annotations

import importlib.util

import pytest

from gru4rec_conformance.implementations.finetuner.hf_trainer import HFTrainerAdapter

needs_accelerate = pytest.mark.skipif(
    importlib.util.find_spec("accelerate") is None, reason="accelerate is not installed (hf_trainer checks it first)"
)


@needs_accelerate
def test_declares_no_shim():
    caps = HFTrainerAdapter().capabilities()
    assert not caps.get("shims"), caps.get("shims")


def test_datasets_probe_never_finds_the_suite():
    """transformers decides "datasets is available" from ``find_spec("datasets")``: that must never be ours."""
    spec = importlib.util.find_spec("datasets")
    if spec is not None:
        assert "gru4rec_conformance" not in (spec.origin or ""), spec.origin
        from gru4rec_conformance import CHECKOUT_ROOT

        if CHECKOUT_ROOT is not None:
            assert spec.origin != str(CHECKOUT_ROOT / "datasets" / "__init__.py"), spec.origin
