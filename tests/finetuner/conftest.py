"""Fixtures of the fine-tuner unit and meta tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:  # the gru4rec_conformance namespace (never the root itself)
    sys.path.insert(0, str(ROOT / "src"))

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402

# Tiny models gain nothing from intra-op threads; one thread avoids oversubscribing a 2-core CI machine.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def sst5_full():
    """The real SST-5 splits, for the tests that assert facts of the real files (split and class counts, file
    hashes, MiniLM's accuracy on the real test split); skipped when they are absent. The conformance checks and
    the meta-test run on the synthetic stand-in instead (``datasets.sst5.load_sst5_or_standin``)."""
    from gru4rec_conformance.datasets.paths import shared_data_candidate
    from gru4rec_conformance.datasets.sst5 import load_sst5, sst5_dir

    d = sst5_dir()
    if d is None:
        pytest.skip(
            f"real SST-5 not found in {shared_data_candidate() / 'sst5'} (asserts facts of the real files, "
            "which the synthetic stand-in does not have): set GRU4REC_SHARED_DATA to the folder holding "
            "sst5/stsa.fine.*"
        )
    return load_sst5(d)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A tiny random BERT whose vocabulary covers a few hand-written sentences (no shared data needed)."""
    from gru4rec_conformance.conformance.finetuner.tiny_models import make_tiny_model

    texts = [
        "a stirring , funny and finally transporting movie",
        "it 's not a bad film at all",
        "the plot is dull and the acting is worse",
        "one of the best movies of the year",
        "a mess of a movie",
        "wo n't sit still for it",
    ]
    return make_tiny_model("bert", tmp_path_factory.mktemp("tiny") / "bert", texts)


def pytest_collection_modifyitems(config, items):
    """Keep this folder's slow tests out of the default run unless asked for (-m selecting 'slow', or
    GRU4REC_RUN_SLOW=1); a faster test covers the same behaviour by default."""
    if os.environ.get("GRU4REC_RUN_SLOW") == "1" or "slow" in (config.getoption("markexpr", "") or ""):
        return
    skip = pytest.mark.skip(reason="slow test: run with GRU4REC_RUN_SLOW=1 or -m slow")
    for item in items:
        if item.get_closest_marker("slow") is not None and "tests/finetuner" in item.nodeid:
            item.add_marker(skip)
