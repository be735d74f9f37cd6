"""Fixtures of the fine-tuner conformance checks (the ``impl`` fixture, markers, selection, xfails and reports
come from the harness plugin loaded by the root conftest.py)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Offline, quiet transformers for every check (FT-23, docs/checks.md).
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

from gru4rec_conformance.conformance.finetuner.support import make_slices  # noqa: E402
from gru4rec_conformance.conformance.finetuner.tiny_models import FAMILIES, make_tiny_model  # noqa: E402


@pytest.fixture(autouse=True)
def _no_network():
    """Every check runs with outgoing connections refused (they are recorded; FT-23 asserts on its own)."""
    from gru4rec_conformance.conformance.finetuner.support import network_guard

    with network_guard() as attempts:
        yield attempts


@pytest.fixture(scope="session")
def sst5_data(pytestconfig):
    """The SST-5 data of this run (``datasets.sst5.SST5Data``): the real splits when the shared data hold them,
    else the seeded synthetic stand-in, announced by one notice written past pytest's output capture (as the
    GRU4Rec metric checks do for their stand-in)."""
    from gru4rec_conformance.datasets.sst5 import load_sst5_or_standin

    data = load_sst5_or_standin(seed=0)
    if data.notice:
        tr = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        capman = pytestconfig.pluginmanager.get_plugin("capturemanager")
        if tr is not None:
            with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
                tr.write_line(f"\nNOTICE (fine-tuner checks): {data.notice}", yellow=True, bold=True)
    return data


@pytest.fixture(scope="session")
def sst5_full(sst5_data):
    """The full fine-grained SST-5 splits (``{'train', 'dev', 'test'}`` -> ``Examples``): real or stand-in."""
    return sst5_data.splits


@pytest.fixture(scope="session")
def sst5_real(sst5_data):
    """The full fine-grained splits of the real SST-5, for checks that assert its standard split sizes; skipped
    with the reason on the synthetic stand-in."""
    if not sst5_data.real:
        from gru4rec_conformance.conformance._harness.running import skip_for_this_run

        skip_for_this_run(
            f"asserts the real SST-5 split sizes (8544/1101/2210, binary 6920/872/1821); this run uses the "
            f"synthetic stand-in ({sst5_data.name}): set GRU4REC_SHARED_DATA to the folder holding "
            "sst5/stsa.fine.*"
        )
    return sst5_data.splits


@pytest.fixture(autouse=True)
def _record_dataset(request):
    """Checks that use SST-5 record which data they ran on (``dataset=sst5`` or ``sst5_standin``) in their report
    entry, the way the GRU4Rec metric checks put ``dataset`` in their metric context."""
    if "sst5_data" in request.fixturenames and "impl" in request.fixturenames:
        data = request.getfixturevalue("sst5_data")
        request.getfixturevalue("impl").note(
            "SST-5 data", dataset=data.name, source="real" if data.real else "synthetic stand-in, seed 0"
        )
    yield


@pytest.fixture(scope="session")
def slices(sst5_full):
    return make_slices(sst5_full)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, sst5_full, slices):
    """family -> ModelSpec of a tiny random model whose vocabulary covers every SST-5 word (so sentences
    tokenize to about as many ids as with a real uncased BERT vocabulary)."""
    from gru4rec_conformance.reference.finetuner import ModelSpec

    texts = [t for split in ("train", "dev", "test") for t in sst5_full[split].texts]
    base = tmp_path_factory.mktemp("tiny_models")
    return {
        f: ModelSpec(path=str(make_tiny_model(f, base / f, texts, vocab_size=24000)), name=f"tiny-{f}")
        for f in FAMILIES
    }


@pytest.fixture(scope="session")
def tiny_bert(tiny_models):
    return tiny_models["bert"]


#: Configuration of the shared quick run: 2 epochs of a tiny model; nothing an implementation may not express.
BASE_CONFIG = dict(max_epochs=2, batch_size=8, eval_batch_size=8)


@pytest.fixture
def base_run(impl, tiny_bert, slices):
    """(adapter, fit record) of one quick run on tiny BERT, made once per implementation and shared by
    read-only checks."""

    def make(i):
        adapter = i.new()
        adapter.build(0, model_spec=tiny_bert, num_labels=5)
        return adapter, adapter.fit(slices.train, slices.val, BASE_CONFIG)

    return impl.shared(("finetuner-base-run", tiny_bert.path), make)
