"""Fixtures of the fine-tuner conformance checks.

Until the shared harness plugin (root conftest.py) is merged, this file also provides ``--impl`` and the
``impl`` parametrisation for the fine-tuner family, and registers the ``check`` / ``feature`` markers.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Offline, quiet transformers for every check (spec §3 row 23).
for _k, _v in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
               "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402

# Tiny models gain nothing from intra-op threads; one thread avoids oversubscribing a 2-core CI machine.
torch.set_num_threads(1)

from conformance.finetuner.support import make_slices  # noqa: E402
from conformance.finetuner.tiny_models import FAMILIES, make_tiny_model  # noqa: E402


def pytest_addoption(parser):
    try:
        parser.addoption("--impl", action="append", default=[],
                         help="implementation(s) to check (repeatable); default: reference")
    except ValueError:
        pass  # the shared harness plugin defines --impl
    group = parser.getgroup("finetuner", "fine-tuner conformance")
    group.addoption("--ft-results", default=None,
                    help="append one JSON line per fine-tuner check result (nodeid, impl, check, kind, outcome)")
    group.addoption("--ft-mutant-scope", choices=("all", "kind", "row"), default="all",
                    help="for mutant implementations, keep only the checks of the mutant's kind or defect row")


def pytest_configure(config):
    config.addinivalue_line("markers", "check(id, kind): the spec check a test implements, and its kind")
    config.addinivalue_line("markers", "feature(name): adapter feature the check needs (skipped if undeclared)")
    config.addinivalue_line("markers", "slow: long-running (real model or full protocol)")


def _selected(config) -> list[str]:
    from implementations.finetuner import names

    chosen = config.getoption("--impl") or os.environ.get("GRU4REC_CONFORMANCE_IMPL", "reference").split(",")
    out = []
    for n in chosen:
        if n == "all":
            out += [x for x in names() if not x.startswith("mutant_")]
        else:
            out.append(n)
    return out


def pytest_generate_tests(metafunc):
    if "impl" in metafunc.fixturenames and "impl" not in getattr(metafunc, "_ft_done", ()):
        from implementations.finetuner import load

        selected = _selected(metafunc.config)
        metafunc.parametrize("impl", [load(n) for n in selected], ids=selected, scope="session")


@pytest.fixture(autouse=True)
def _feature_skip(request):
    """Skip a check whose ``feature`` markers name something the implementation does not declare."""
    if "impl" not in request.fixturenames:
        return
    impl = request.getfixturevalue("impl")
    caps = (impl() if isinstance(impl, type) else impl).capabilities()
    for m in request.node.iter_markers("feature"):
        for f in m.args:
            if f not in caps.get("features", set()):
                pytest.skip(f"{getattr(impl, 'name', impl)} does not declare feature {f!r}")


@pytest.fixture(autouse=True)
def _no_network():
    """Every check runs with outgoing connections refused (they are recorded; FT-23 asserts on its own)."""
    from conformance.finetuner.support import network_guard

    with network_guard() as attempts:
        yield attempts


@pytest.fixture(scope="session")
def sst5_full():
    """The full fine-grained SST-5 splits (skip when the shared data are absent)."""
    from datasets.sst5 import load_sst5, sst5_dir

    d = sst5_dir()
    if d is None:
        pytest.skip("SST-5 not found: set GRU4REC_SHARED_DATA to the folder holding sst5/stsa.fine.* "
                    f"(default {ROOT.parent / 'shared' / 'data'})")
    return load_sst5(d)


@pytest.fixture(scope="session")
def slices(sst5_full):
    return make_slices(sst5_full)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, sst5_full, slices):
    """family -> ModelSpec of a tiny random model whose vocabulary covers every SST-5 word (so sentences
    tokenize to about as many ids as with a real uncased BERT vocabulary)."""
    from reference.finetuner import ModelSpec

    texts = [t for split in ("train", "dev", "test") for t in sst5_full[split].texts]
    base = tmp_path_factory.mktemp("tiny_models")
    return {f: ModelSpec(path=str(make_tiny_model(f, base / f, texts, vocab_size=24000)), name=f"tiny-{f}")
            for f in FAMILIES}


@pytest.fixture(scope="session")
def tiny_bert(tiny_models):
    return tiny_models["bert"]


#: Configuration of the shared quick run: 2 epochs of a tiny model, no warmup, no early stopping.
BASE_CONFIG = dict(max_epochs=2, batch_size=8, eval_batch_size=64, learning_rate=1e-3, warmup_ratio=0.0,
                   patience=None)


@pytest.fixture(scope="session")
def base_run(impl, tiny_bert, slices):
    """(adapter, fit record) of one quick run on tiny BERT, shared by read-only checks."""
    from conformance.finetuner.support import fresh

    adapter = fresh(impl)
    adapter.build(tiny_bert, 5, 0)
    record = adapter.fit(slices.train, slices.val, BASE_CONFIG)
    return adapter, record


def _impl_name(item) -> str | None:
    cs = getattr(item, "callspec", None)
    if cs is None or "impl" not in cs.params:
        return None
    impl = cs.params["impl"]
    return getattr(impl, "name", None)


def pytest_collection_modifyitems(config, items):
    scope = config.getoption("--ft-mutant-scope")
    if scope == "all":
        return
    keep, drop = [], []
    for item in items:
        cs = getattr(item, "callspec", None)
        impl = cs.params.get("impl") if cs is not None else None
        mark = item.get_closest_marker("check")
        if impl is None or not getattr(impl, "name", "").startswith("mutant_") or mark is None:
            keep.append(item)
            continue
        same = (mark.kwargs.get("kind") == impl.kind) if scope == "kind" else \
            (mark.args[0] == f"FT-{impl.defect_row}")
        (keep if same else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_runtest_logreport(report):
    path = getattr(pytest_runtest_logreport, "path", None)
    if path is None or (report.when != "call" and report.outcome == "passed"):
        return
    if report.when == "teardown" and report.outcome != "failed":
        return
    import json

    rec = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
           **getattr(report, "ft_meta", {})}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    mark = item.get_closest_marker("check")
    report.ft_meta = {"impl": _impl_name(item), "check": mark.args[0] if mark else None,
                      "kind": mark.kwargs.get("kind") if mark else None}


def pytest_sessionstart(session):
    pytest_runtest_logreport.path = session.config.getoption("--ft-results")
