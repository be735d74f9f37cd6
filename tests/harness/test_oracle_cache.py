"""The disk cache of the reference's oracle results: a later run reads what an earlier one fitted (counted
fits), a torn or corrupt entry is recomputed, the key follows the data, configuration and seed, only the suite's
own reference is stored, ``--no-oracle-cache`` bypasses it, the size limit evicts the oldest entries, and its
options are validated when the session starts."""

from __future__ import annotations

import json
import os
import types

import pytest
from test_selection import BASIC

from gru4rec_conformance.conformance._harness import oracle_cache as oc
from gru4rec_conformance.conformance.gru4rec import conftest as gru_conftest
from gru4rec_conformance.conformance.gru4rec import test_metric_conformance as tmc

CFG = {"loss": "cross-entropy", "layers": [4], "n_epochs": 1}


class CountingFactory:
    """A reference stand-in that counts its fits; its 'metrics' depend on the seed only."""

    device = "cpu"

    def __init__(self) -> None:
        self.fits = 0

    def build(self, seed: int, **cfg):
        factory = self

        class Model:
            def fit(self, train):
                factory.fits += 1
                return types.SimpleNamespace(epoch_seconds=[0.5])

        model = Model()
        model.seed = seed
        return model


@pytest.fixture
def fake_metrics(monkeypatch):
    def suite_metrics(model, test, cutoffs, mode):
        return {**dict.fromkeys(tmc.METRICS, 0.1 + 0.01 * model.seed), "n_events": 100}

    monkeypatch.setattr(tmc, "suite_metrics", suite_metrics)


def _data(name: str = "d", digest: str = "h1") -> dict:
    return {"name": name, "hash": digest, "train": None, "test": None}


def _fit(factory, cache, data=None, cfg=CFG, seed=1, memory=None):
    """One reference fit through the checks' ``_run``, as a fresh session (empty in-memory cache) by default."""
    return tmc._run(
        factory, "reference", cfg, seed, data or _data(), {} if memory is None else memory, False, disk=cache
    )


def test_a_second_session_reuses_the_fits_of_the_first(tmp_path, fake_metrics):
    factory, cache = CountingFactory(), oc.OracleCache(tmp_path / "oracle")
    first = _fit(factory, cache)
    again = _fit(factory, oc.OracleCache(tmp_path / "oracle"))  # another run: new objects, same folder
    assert factory.fits == 1
    assert again == json.loads(json.dumps(first))
    assert len(cache.entries()) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"data": _data(digest="h2")},
        {"data": _data(name="other")},
        {"cfg": {**CFG, "n_epochs": 2}},
        {"seed": 2},
    ],
    ids=["data-hash", "data-name", "config", "seed"],
)
def test_the_key_follows_data_configuration_and_seed(tmp_path, fake_metrics, change):
    factory, cache = CountingFactory(), oc.OracleCache(tmp_path / "oracle")
    _fit(factory, cache)
    _fit(factory, cache, **change)
    assert factory.fits == 2
    assert len(cache.entries()) == 2


def test_the_key_follows_the_suites_sources(tmp_path, fake_metrics, monkeypatch):
    factory, cache = CountingFactory(), oc.OracleCache(tmp_path / "oracle")
    _fit(factory, cache)
    monkeypatch.setattr(oc, "suite_fingerprint", lambda: "an edited reference")
    _fit(factory, cache)
    assert factory.fits == 2


@pytest.mark.parametrize(
    "damage",
    [b"", b'{"schema": 1, "key": ', b"\xff\xfe not json", b"[1, 2]", b'{"schema": 1, "key": {}, "value": {}}'],
    ids=["empty", "torn", "not-utf8", "not-an-object", "another-key"],
)
def test_a_corrupt_entry_is_recomputed_and_rewritten(tmp_path, fake_metrics, damage):
    factory, cache = CountingFactory(), oc.OracleCache(tmp_path / "oracle")
    first = _fit(factory, cache)
    ((_, _, path),) = cache.entries()
    path.write_bytes(damage)
    assert _fit(factory, cache) == first
    assert factory.fits == 2
    assert _fit(factory, oc.OracleCache(tmp_path / "oracle")) == json.loads(json.dumps(first))
    assert factory.fits == 2, "the recomputed entry was not written back"


def test_an_entry_without_the_checked_fields_is_recomputed(tmp_path, fake_metrics):
    factory, cache = CountingFactory(), oc.OracleCache(tmp_path / "oracle")
    key = tmc._fit_key("reference", CFG, 1, _data(), False, "cpu")
    assert cache.put(key, {"suite": {"recall@20": 0.5}, "own": None, "epoch_seconds": []})
    _fit(factory, cache)
    assert factory.fits == 1


def test_no_oracle_cache_bypasses_it(tmp_path, fake_metrics):
    factory = CountingFactory()
    disabled = oc.OracleCache(None)
    _fit(factory, disabled)
    _fit(factory, disabled)
    assert factory.fits == 2 and not disabled.enabled and disabled.get({"a": 1}) is None
    assert not disabled.put({"a": 1}, {"b": 2})


def test_only_the_suites_reference_is_stored(tmp_path, fake_metrics):
    """The implementation's runs never go through the disk (the checks pass ``disk`` for the reference only), and
    ``is_suite_reference`` refuses mutants and variants of the reference adapter."""
    from gru4rec_conformance.conformance._harness.fixtures import is_suite_reference
    from gru4rec_conformance.implementations.mutants import mutant_classes
    from gru4rec_conformance.implementations.reference import ReferenceAdapter
    from gru4rec_conformance.implementations.registry import AdapterSpec

    def view(cls, **kw):
        return types.SimpleNamespace(handle=types.SimpleNamespace(spec=AdapterSpec("x", "gru4rec", cls, kw)))

    assert is_suite_reference(view(ReferenceAdapter))
    assert not is_suite_reference(view(ReferenceAdapter, some_variant=1))
    assert not any(is_suite_reference(view(m)) for m in mutant_classes())
    factory, cache = CountingFactory(), oc.OracleCache(tmp_path / "oracle")
    tmc._run(factory, "impl:x@1", CFG, 42, _data(), {}, False)
    assert not cache.entries()


def test_values_that_are_not_plain_finite_json_are_not_stored(tmp_path):
    cache = oc.OracleCache(tmp_path / "oracle")
    assert not cache.put({"k": 1}, {"v": float("nan")})
    assert not cache.put({"k": 1}, {"v": object()})
    assert cache.put({"k": 1}, {"v": [1, 2.5, "x", None, True]})
    assert cache.get({"k": 1}) == {"v": [1, 2.5, "x", None, True]}
    assert not [p for p in os.listdir(tmp_path / "oracle") if p.startswith(".tmp-")], "a temporary file remained"


def test_the_size_limit_evicts_the_oldest_entries(tmp_path):
    cache = oc.OracleCache(tmp_path / "oracle", max_bytes=2000)
    for i in range(8):
        assert cache.put({"k": i}, {"pad": "x" * 300})
        os.utime(cache.path_of({"k": i}), (1000 + i, 1000 + i))  # distinct ages on coarse file-system clocks
    assert sum(size for _, size, _ in cache.entries()) <= 2000
    assert cache.get({"k": 7}) is not None and cache.get({"k": 0}) is None


def test_frames_hash_follows_the_rows():
    import pandas as pd

    a = pd.DataFrame({"SessionId": [1, 1], "ItemId": [3, 4], "Time": [0.0, 1.0]})
    b = a.copy()
    b.loc[1, "ItemId"] = 5
    assert gru_conftest.frames_hash(a, a) == gru_conftest.frames_hash(a.copy(), a.copy())
    assert gru_conftest.frames_hash(a, a) != gru_conftest.frames_hash(a, b)
    assert gru_conftest.frames_hash(a, b) != gru_conftest.frames_hash(b, a)


def test_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv(oc.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert oc.default_dir() == tmp_path / "gru4rec-conformance" / "oracle"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # ignored, as the XDG specification asks
    assert oc.default_dir().parts[-3:] == (".cache", "gru4rec-conformance", "oracle")
    monkeypatch.setenv(oc.ENV_DIR, str(tmp_path / "mine"))
    assert oc.default_dir() == tmp_path / "mine"


OPTIONS_CHECK = '''
@pytest.mark.check("T-1", kind="K10")
def test_cache_state(impl, oracle_cache):
    """Writes what the oracle cache fixture is."""
    import os

    with open(os.environ["ORACLE_PROBE"], "w") as f:
        f.write(str(oracle_cache.folder))
'''


def test_options_select_disable_and_are_validated(project, tmp_path, monkeypatch):
    probe = tmp_path / "probe.txt"
    monkeypatch.setenv("ORACLE_PROBE", str(probe))
    project.checks(OPTIONS_CHECK)
    folder = tmp_path / "mine"
    project.run("conformance", "--impl", "good", "--oracle-cache-dir", str(folder)).assert_outcomes(passed=1)
    assert probe.read_text() == str(folder) and folder.is_dir(), "the folder is made at session start"
    project.run("conformance", "--impl", "good", "--no-oracle-cache").assert_outcomes(passed=1)
    assert probe.read_text() == "None"

    (tmp_path / "afile").write_text("x")
    for args, fragment in [
        (("--oracle-cache-dir", str(tmp_path / "afile" / "sub")), "afile is not a folder"),
        (("--oracle-cache-mb", "0"), "--oracle-cache-mb / GRU4REC_ORACLE_CACHE_MB 0: the size limit"),
        (("--oracle-cache-mb", "lots"), "invalid float value: 'lots'"),
    ]:
        project.checks(BASIC)
        result = project.run("conformance", "--impl", "good", *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        assert fragment in result.stderr.str()
