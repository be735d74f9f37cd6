"""Fixtures for the harness's own tests: a temporary project with dummy adapters, run with pytester.

The dummy adapters live in the temporary project (module ``dummies``) and are registered by its root
conftest through the plugin's ``pytest_conformance_register_adapters`` hook, so these tests never touch
the real registry. The real adapter modules are imported once here, before pytester snapshots
``sys.modules``, so that in-process runs never re-import heavy frameworks.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gru4rec_conformance.implementations.registry import discover

REPO = Path(__file__).resolve().parents[2]
discover()
import numpy  # noqa: E402,F401  (imported before pytester snapshots sys.modules: no re-import per inner run)
import pandas  # noqa: E402,F401

try:  # imported once here so pytester's sys.modules snapshots keep it (plots are written at session end)
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot  # noqa: F401
except ImportError:  # matplotlib is a suite dependency; without it the reports say why plots are missing
    pass

DUMMIES = '''
"""Dummy adapters for the harness tests (family gru4rec unless stated)."""
import ctypes
import os
import sys
import time

import numpy as np

from gru4rec_conformance.implementations.base import Adapter, AdapterBase, BaseCapabilities, FitReport, ImplementationUnavailable, Unsupported

CAPS = {
    "losses": ["cross-entropy"],
    "embedding_modes": ["none"],
    "session_parallel": True,
    "in_batch_negatives": True,
    "full_ranking": True,
    "devices": ["cpu"],
    "framework": {"name": "numpy", "version": np.__version__},
    "shims": ["scores padded to nothing (dummy)"],
    "hyperparameters": {"n_epochs": 1, "layers": [4], "learning_rate": 0.1},
}


class Good(Adapter):
    """Counts items; returns constant scores."""

    name = "good"
    description = "dummy adapter that does everything right"
    reproducibility = {"installs": "yes", "offline": "yes"}

    def capabilities(self):
        return CAPS

    def version(self):
        return os.environ.get("DUMMY_VERSION", "1.0")

    def build(self, seed, **hparams):
        self.hparams = self.resolve_hparams(hparams)
        self.seed = seed

    def fit(self, train_df, n_epochs=None):
        self.items = np.unique(train_df["ItemId"].to_numpy())
        n = self.hparams["n_epochs"] if n_epochs is None else n_epochs
        return FitReport([1.0] * n, [1] * n, [len(train_df)] * n, [0.0] * n)

    def item_ids(self):
        return self.items

    def score_prefixes(self, prefixes):
        return np.zeros((len(prefixes), len(self.items)), dtype=np.float32)

    def optimizer_info(self):
        return {"type": "sgd", "env": sorted(os.environ), "cwd": os.getcwd(), "home": os.environ.get("HOME"),
                "interfaces": _interfaces(), "pid": os.getpid()}


def _interfaces():
    try:
        with open("/proc/net/dev") as fh:
            return sorted(line.split(":")[0].strip() for line in fh.readlines()[2:])
    except OSError:
        return None


class Outside(Good):
    """Not registered: loaded by import path only."""

    name = "outside"


class Isolated(Good):
    name = "isolated"
    isolated = True


class Crashing(Good):
    name = "crashing"
    isolated = True

    def fit(self, train_df, n_epochs=None):
        print("about to dereference NULL", file=sys.stderr, flush=True)
        ctypes.string_at(0)


class Exiting(Good):
    name = "exiting"
    isolated = True

    def fit(self, train_df, n_epochs=None):
        print("leaving with status 3", file=sys.stderr, flush=True)
        os._exit(3)


class Hanging(Good):
    name = "hanging"
    isolated = True

    def fit(self, train_df, n_epochs=None):
        print("going to sleep", file=sys.stderr, flush=True)
        time.sleep(600)


class Raising(Good):
    name = "raising"
    isolated = True

    def fit(self, train_df, n_epochs=None):
        raise ValueError("boom in fit")


class Leaking(Good):
    name = "leaking"
    isolated = True

    def fit(self, train_df, n_epochs=None):
        print("leaking 50 MiB per step", file=sys.stderr, flush=True)
        blocks = []
        while True:
            blocks.append(np.ones(50 * 2**20 // 8))
            time.sleep(0.01)


class BadCaps(Good):
    name = "badcaps"

    def capabilities(self):
        return {**CAPS, "logg": True}


class Liar(Good):
    """Declares bpr-max and optimizer_info, but raises Unsupported for both."""

    name = "liar"

    def capabilities(self):
        return {**CAPS, "losses": ["cross-entropy", "bpr-max"]}

    def build(self, seed, **hparams):
        if hparams.get("loss") == "bpr-max":
            raise Unsupported("loss:bpr-max", "not really")
        super().build(seed, **{k: v for k, v in hparams.items() if k != "loss"})

    def optimizer_info(self):
        raise Unsupported("optimizer_info")


class Missing(Good):
    """A GitHub-only implementation whose checkout is absent."""

    name = "missing"
    isolated = True

    def capabilities(self):
        raise ImplementationUnavailable("set MISSING_PATH to a checkout of example/missing@abc123")


class Mutant(Good):
    name = "good-mutant"
    role = "mutant"


class Reference(Good):
    name = "reference"
    role = "reference"


class ToyCapabilities(BaseCapabilities):
    pass


class ToyAdapter(AdapterBase):
    family = "toyfam"
    REQUIRED = ("capabilities", "predict")
    name = "toy"

    def capabilities(self):
        return {"devices": ["cpu"]}

    def predict(self, x):
        return x


class ToyReference(ToyAdapter):
    name = "reference"
    role = "reference"
'''

CONFTEST = """
pytest_plugins = ["gru4rec_conformance.conformance._harness.plugin"]

import dummies
from gru4rec_conformance.implementations.base import FamilySpec, get_family, register_family

if get_family("toyfam") is None:
    register_family(FamilySpec(name="toyfam", adapter_base=dummies.ToyAdapter, capabilities_cls=dummies.ToyCapabilities,
                               kinds={"T1": "toy kind"}))


def pytest_conformance_register_adapters(registry):
    registry.clear()  # only the dummies: the real adapters (a real "reference" of two families) stay out
    for cls in (dummies.Good, dummies.Isolated, dummies.Crashing, dummies.Exiting, dummies.Hanging, dummies.Raising,
                dummies.Leaking, dummies.BadCaps, dummies.Liar, dummies.Missing, dummies.Mutant, dummies.Reference,
                dummies.ToyAdapter, dummies.ToyReference):
        registry.add(cls)
"""

TRAIN_DF = "pd.DataFrame({'SessionId': [1, 1, 1, 2, 2], 'ItemId': [5, 6, 7, 5, 6], 'Time': [1, 2, 3, 4, 5]})"


class Project:
    """A temporary project: helpers to write checks and read the run directories they produce."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path = Path(pytester.path)

    def checks(self, source: str, name: str = "test_checks", family: str = "gru4rec") -> Path:
        folder = self.path / "conformance" / family
        folder.mkdir(parents=True, exist_ok=True)
        header = f"import pytest\nimport pandas as pd\n\nTRAIN = {TRAIN_DF}\n\n"
        target = folder / f"{name}.py"
        target.write_text(header + textwrap.dedent(source))
        return target

    def xfails(self, impl: str, body: str) -> Path:
        folder = self.path / "conformance" / "xfails"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{impl}.toml"
        target.write_text(textwrap.dedent(body))
        return target

    # Unrelated plugins of the environment are switched off in inner runs (they cost seconds per run).
    QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")

    def run(self, *args: str, plots: bool = False) -> pytest.RunResult:
        """In-process run (fast); plots only when asked for (they cost ~0.5 s per run)."""
        return self.pytester.runpytest(*self.QUIET, *args, *(() if plots else ("--no-report-plots",)))

    def run_subprocess(self, *args: str, timeout: float = 120, plots: bool = False) -> pytest.RunResult:
        extra = () if plots else ("--no-report-plots",)
        return self.pytester.runpytest_subprocess(*self.QUIET, *extra, *args, timeout=timeout)

    def run_dirs(self, impl: str) -> list[Path]:
        root = self.path / "reports" / "out" / impl
        return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def results(self, impl: str, index: int = -1) -> dict[str, Any]:
        return json.loads((self.run_dirs(impl)[index] / "results.json").read_text())

    def outcomes(self, impl: str, index: int = -1) -> dict[str, str]:
        return {r["test"]: r["outcome"] for r in self.results(impl, index)["results"]}


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Project:
    pytester.makeini("[pytest]\n")  # like the suite's pyproject.toml: fixes rootdir whatever paths options name
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(dummies=DUMMIES)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "src"), str(pytester.path)]))
    for var in ("GRU4REC_CONFORMANCE_IMPL", "GRU4REC_REPORT_DIR", "GRU4REC_ISOLATION", "GRU4REC_XFAIL_MARK"):
        monkeypatch.delenv(var, raising=False)
    return Project(pytester)
