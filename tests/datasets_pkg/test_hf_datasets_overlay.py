"""Our ``datasets/`` package and Hugging Face ``datasets`` in one module (docs/architecture.md, "datasets").

The suite runs with the repository root first on ``sys.path``, so ``import datasets`` always finds our package,
and transformers 5.x's ``is_datasets_available()`` (``importlib.util.find_spec("datasets")``) always answers yes.
``datasets/__init__.py`` therefore lays our package over Hugging Face's when that is installed, and offers
``require_hf_datasets(purpose)`` for when it is not. What this module proves, each test in a fresh interpreter
with the repository root first on ``sys.path`` (as pytest and ``python -m`` have it):

(a) HF present (an interpreter with the distribution ``datasets``: ``sys.executable`` when it has it, else the one
    named by the environment variable ``GRU4REC_HF_DATASETS_PYTHON``; skipped with that reason otherwise):
    ``import datasets`` exposes HF's API and version and our subpackages; HF's multiprocessing ``map`` works;
    transformers' probe is true and a tiny ``transformers.Trainer`` trains on a torch dataset and on an HF
    ``Dataset`` (the path that calls ``datasets.Dataset``); ``python -m datasets`` is still our CLI; none of our
    submodule names collides with the installed HF file list, and HF's public names do not hide our helpers.
(b) HF absent (the distribution's metadata hidden in the child when this interpreter has it; where it is not
    installed the hiding changes nothing): our package is plain and works, ``require_hf_datasets`` raises the
    clear ``ImportError``, and -- the control showing why that function exists -- transformers' probe takes our
    package for HF's and ``transformers.trainer`` holds a ``datasets`` without ``Dataset``.
(c) A tiny fake HF distribution (dist-info + package in a temp dir) is overlaid: its attributes and submodules
    and ours are reachable, its ``__init__`` cannot replace our helpers, an ``__init__`` that fails gives an
    ``ImportError`` naming its directory, a dist-info without a package is reported by ``require_hf_datasets``.

Test folders: this folder is ``tests/datasets_pkg`` (pytest puts test folders without ``__init__.py`` on
``sys.path``). Verified here (``test_regular_package_later_on_sys_path_beats_a_datasets_folder``): a plain folder
named ``datasets`` earlier on ``sys.path`` is only a namespace portion, and the regular package ``datasets/`` of the
repository root later on ``sys.path`` still wins; without the root it would be imported as ``datasets`` (and
taken for HF's by transformers). We avoid the name anyway, so that nothing depends on that ordering rule.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUR_PKG = ROOT / "datasets"

# Hugging Face datasets 5.2.0, top-level modules and subpackages of its package directory.
HF_5_2_0_TOP_LEVEL = frozenset(
    "arrow_dataset arrow_reader arrow_writer builder combine config data_files dataset_dict distributed exceptions "
    "fingerprint hub info inspect iterable_dataset load naming search splits streaming table commands download "
    "features filesystems formatting io packaged_modules parallel utils".split())
# Our public helpers (datasets/__init__.py); they must survive HF's __init__.
OUR_HELPERS = ("require_hf_datasets", "repo_root", "shared_data_dir", "shared_data_candidate")

REQUIRE_MESSAGE = ("Hugging Face `datasets` must be installed next to transformers: the suite's own `datasets/` "
                   "package is on sys.path and transformers' availability probe would take it for Hugging Face's; "
                   "pip install datasets==5.2.0")

# Hides the distribution "datasets" from importlib.metadata in a child interpreter (HF-absent simulation).
HIDE_HF_DIST = """
import importlib.metadata as _m
_from_name = _m.Distribution.from_name.__func__
def _hidden(cls, name):
    if name == "datasets":
        raise _m.PackageNotFoundError(name)
    return _from_name(cls, name)
_m.Distribution.from_name = classmethod(_hidden)
"""


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **extra)
    return env


def run_py(code: str, *, python: str = sys.executable, path_after_root=(), prologue: str = "",
           timeout: int = 240, root: Path = ROOT, expect_ok: bool = True) -> dict | subprocess.CompletedProcess:
    """Run ``code`` with ``root`` (then ``path_after_root``) first on sys.path; it prints one JSON line last."""
    head = "import sys\n" + "".join(f"sys.path.insert(0, {str(p)!r})\n" for p in reversed(list(path_after_root)))
    head += f"sys.path.insert(0, {str(root)!r})\n" + textwrap.dedent(prologue)
    r = subprocess.run([python, "-c", head + textwrap.dedent(code)], cwd=str(root), env=_env(),
                       capture_output=True, text=True, timeout=timeout)
    if not expect_ok:
        return r
    assert r.returncode == 0, f"child failed (rc {r.returncode}):\n{r.stderr[-4000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@lru_cache(maxsize=None)
def _probe(python: str) -> dict | None:
    """What ``python`` has installed (HF datasets version, transformers, accelerate), or None if it cannot run."""
    code = textwrap.dedent("""
        import importlib.metadata as m, json
        def v(n):
            try:
                return m.version(n)
            except m.PackageNotFoundError:
                return None
        print(json.dumps({n: v(n) for n in ("datasets", "transformers", "accelerate")}))
    """)
    try:
        r = subprocess.run([python, "-I", "-c", code], cwd="/", env=_env(), capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return json.loads(r.stdout) if r.returncode == 0 else None


@pytest.fixture(scope="module")
def hf_python() -> tuple[str, dict]:
    """(interpreter, its probe) of an interpreter that has Hugging Face datasets, or skip with the reason."""
    configured = os.environ.get("GRU4REC_HF_DATASETS_PYTHON", "").strip()
    tried = []
    for cand in [sys.executable] + ([configured] if configured else []):
        info = _probe(cand)
        tried.append(f"{cand}: {'cannot run' if info is None else 'datasets ' + str(info['datasets'])}")
        if info and info["datasets"]:
            return cand, info
    pytest.skip("no interpreter with Hugging Face datasets (set GRU4REC_HF_DATASETS_PYTHON to one; tried "
                + "; ".join(tried) + ")")


# ---------------------------------------------------------------------------------------------------- (a) HF present

def test_hf_present_import_exposes_hf_api_and_our_packages(hf_python):
    python, info = hf_python
    code = """
    import importlib.metadata, json, os
    import datasets
    from datasets import Dataset, load_dataset, arrow_dataset
    import datasets.sessions.pipeline
    from datasets.sessions.checks import d_long
    ds = Dataset.from_dict({"SessionId": [1, 1, 2], "ItemId": [5, 6, 7]})
    doubled = ds.map(lambda r: {"ItemId2": r["ItemId"] * 2}, num_proc=2)
    ns = {}
    exec("from datasets import *", ns)
    os.environ["GRU4REC_SHARED_DATA"] = "/nonexistent/shared"
    print(json.dumps({
        "file": datasets.__file__, "path": list(datasets.__path__), "version": datasets.__version__,
        "dist_version": importlib.metadata.version("datasets"), "arrow_file": arrow_dataset.__file__,
        "dataset_module": Dataset.__module__, "rows": len(ds), "doubled": list(doubled["ItemId2"]),
        "load_callable": callable(load_dataset), "ours": len(d_long(0).train),
        "pipeline_file": datasets.sessions.pipeline.__file__, "required": datasets.require_hf_datasets("a test"),
        "repo_root": str(datasets.repo_root()), "candidate": str(datasets.shared_data_candidate()),
        "helpers_files": sorted({getattr(datasets, n).__code__.co_filename for n in %r}),
        "star": sorted(n for n in ("Dataset", "load_dataset", "shared_data_dir", "require_hf_datasets") if n in ns),
    }))
    """ % (OUR_HELPERS,)
    out = run_py(code, python=python)
    hf_dir = Path(out["path"][1])
    assert out["file"] == str(OUR_PKG / "__init__.py")
    assert out["path"] == [str(OUR_PKG), str(hf_dir)] and (hf_dir / "arrow_dataset.py").is_file()
    assert out["version"] == out["dist_version"] == info["datasets"] == out["required"]
    assert out["arrow_file"] == str(hf_dir / "arrow_dataset.py") and out["dataset_module"] == "datasets.arrow_dataset"
    assert out["rows"] == 3 and out["doubled"] == [10, 12, 14] and out["load_callable"]
    assert out["ours"] == 2000 and out["pipeline_file"] == str(OUR_PKG / "sessions" / "pipeline.py")
    assert out["repo_root"] == str(ROOT) and out["candidate"] == "/nonexistent/shared"
    assert out["helpers_files"] == [str(OUR_PKG / "__init__.py")]
    assert out["star"] == ["Dataset", "load_dataset", "require_hf_datasets", "shared_data_dir"]


def test_hf_present_transformers_probe_and_trainer_on_torch_and_hf_datasets(hf_python, tmp_path):
    python, info = hf_python
    if not (info["transformers"] and info["accelerate"]):
        pytest.skip(f"{python} lacks transformers or accelerate (transformers.Trainer needs both): {info}")
    code = """
    import json, torch
    import datasets
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
    from transformers.utils import is_datasets_available
    import transformers.trainer

    torch.manual_seed(0)
    n, length = 16, 8
    ids = torch.randint(5, 50, (n, length))
    labels = torch.randint(0, 3, (n,))

    class TorchSet(torch.utils.data.Dataset):
        def __len__(self):
            return n
        def __getitem__(self, i):
            return {"input_ids": ids[i], "attention_mask": torch.ones(length, dtype=torch.long), "labels": labels[i]}

    # The "text" column is unused by the model: only Trainer's datasets.Dataset path removes it before collation.
    hf_set = datasets.Dataset.from_dict({"input_ids": ids.tolist(), "attention_mask": [[1] * length] * n,
                                         "labels": labels.tolist(), "text": ["unused"] * n})
    out = {"probe": bool(is_datasets_available()), "trainer_sees_ours": transformers.trainer.datasets is datasets}
    for name, train_set in (("torch", TorchSet()), ("hf", hf_set)):
        cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=16, num_labels=3)
        args = TrainingArguments(output_dir=%r + "/" + name, max_steps=3, per_device_train_batch_size=4,
                                 learning_rate=1e-2, report_to=[], save_strategy="no", logging_strategy="no",
                                 use_cpu=True, disable_tqdm=True, seed=0)
        result = Trainer(model=BertForSequenceClassification(cfg), args=args, train_dataset=train_set).train()
        out[name] = {"steps": result.global_step, "loss": result.training_loss}
    print(json.dumps(out))
    """ % (str(tmp_path),)
    out = run_py(code, python=python, timeout=400)
    assert out["probe"] is True and out["trainer_sees_ours"] is True
    for name in ("torch", "hf"):
        assert out[name]["steps"] == 3, out
        assert 0.5 < out[name]["loss"] < 2.5, out  # cross-entropy over 3 classes starts near ln 3 = 1.10


def test_hf_present_no_module_name_collision_with_installed_hf(hf_python):
    """Every top-level module of ours differs from every top-level module of the installed HF package (also
    after stripping leading underscores), and HF's public names do not include our helpers."""
    python, _ = hf_python
    code = """
    import importlib.metadata, json
    dist = importlib.metadata.distribution("datasets")
    names = set()
    for f in dist.files or ():
        parts = f.parts
        if len(parts) >= 2 and parts[0] == "datasets" and parts[1] != "__pycache__":
            names.add(parts[1][:-3] if len(parts) == 2 and parts[1].endswith(".py") else parts[1])
    import datasets  # HF's own package: the repository root is not on sys.path here
    print(json.dumps({"modules": sorted(names), "public": sorted(n for n in dir(datasets) if not n.startswith("_")),
                      "file": datasets.__file__}))
    """
    r = subprocess.run([python, "-I", "-c", textwrap.dedent(code)], cwd="/", env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    hf = json.loads(r.stdout.strip().splitlines()[-1])
    assert not Path(hf["file"]).resolve().is_relative_to((ROOT / "datasets").resolve()), hf["file"]  # a venv may live in ROOT
    assert "arrow_dataset" in hf["modules"] and "__init__" in hf["modules"]  # the file list was read
    hf_modules = set(hf["modules"]) - {"__init__"}
    ours = _our_top_level_names()
    assert ours & hf_modules == set()
    assert {n.lstrip("_") for n in ours} & {n.lstrip("_") for n in hf_modules} == set()
    # __main__: HF 5.2.0 has none; if HF ever ships one, ours (first on __path__) runs -- keep it visible here.
    assert "__main__" not in hf_modules, "HF datasets now ships datasets/__main__.py; ours shadows it"
    assert set(OUR_HELPERS) & set(hf["public"]) == set()


def test_hf_present_cli_is_ours(hf_python):
    python, _ = hf_python
    r = subprocess.run([python, "-m", "datasets", "info", "coveo"], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "1,411,113" in r.stdout, r.stderr[-3000:]


# ----------------------------------------------------------------------------------------------------- (b) HF absent

def test_hf_absent_package_is_plain_and_require_hf_datasets_is_clear():
    code = """
    import json
    import datasets
    from datasets.sessions.checks import d_lag1
    try:
        datasets.require_hf_datasets("the reference fine-tuner")
        err = None
    except ImportError as e:
        err = str(e)
    print(json.dumps({"path": list(datasets.__path__), "has_dataset": hasattr(datasets, "Dataset"),
                      "all": datasets.__all__, "ours": len(d_lag1(0).train), "err": err}))
    """
    out = run_py(code, prologue=HIDE_HF_DIST)
    assert out["path"] == [str(OUR_PKG)] and out["has_dataset"] is False
    assert out["all"] == list(OUR_HELPERS) and out["ours"] == 2406
    assert out["err"] == "the reference fine-tuner needs Hugging Face `datasets`: " + REQUIRE_MESSAGE


def test_control_hf_absent_transformers_takes_our_package_for_hf():
    """Why require_hf_datasets exists: without HF datasets, transformers' probe reports our package, and
    transformers.trainer then holds a `datasets` module without `Dataset` (an AttributeError in Trainer)."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip(f"transformers is not installed in {sys.executable}")
    code = """
    import json
    from transformers.utils import is_datasets_available
    import transformers.trainer as trainer
    print(json.dumps({"probe": bool(is_datasets_available()), "file": trainer.datasets.__file__,
                      "has_dataset": hasattr(trainer.datasets, "Dataset")}))
    """
    out = run_py(code, prologue=HIDE_HF_DIST)
    assert out == {"probe": True, "file": str(OUR_PKG / "__init__.py"), "has_dataset": False}


# ---------------------------------------------------------------------------------------- (c) fake HF distribution

def _fake_hf_site(tmp_path: Path, init: str | None = None, with_package: bool = True) -> Path:
    """A minimal installed-looking HF-style distribution: datasets-9.9.9.dist-info (+ a datasets package)."""
    site = tmp_path / "site"
    info = site / "datasets-9.9.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: datasets\nVersion: 9.9.9\n")
    (info / "top_level.txt").write_text("datasets\n")
    (info / "RECORD").write_text("datasets/__init__.py,,\ndatasets/arrow_dataset.py,,\n")
    if with_package:
        pkg = site / "datasets"
        pkg.mkdir()
        (pkg / "__init__.py").write_text(textwrap.dedent(init if init is not None else """
            __version__ = "9.9.9"
            from .arrow_dataset import Dataset
            def load_dataset(path, *a, **k):
                return "fake-hf:" + path
            # an HF __init__ must not be able to replace our helpers
            shared_data_dir = repo_root = "clobbered by fake HF"
        """))
        (pkg / "arrow_dataset.py").write_text("class Dataset:\n    pass\n")
    return site


def test_fake_hf_distribution_is_overlaid(tmp_path):
    site = _fake_hf_site(tmp_path)
    code = """
    import json
    import datasets
    from datasets import Dataset, load_dataset
    import datasets.sessions.checks as checks
    print(json.dumps({"file": datasets.__file__, "path": list(datasets.__path__), "version": datasets.__version__,
                      "load": load_dataset("x"), "dataset_module": Dataset.__module__,
                      "arrow_file": datasets.arrow_dataset.__file__, "ours": len(checks.d_lag1(0).train),
                      "repo_root": str(datasets.repo_root()), "shared_is_fn": callable(datasets.shared_data_dir),
                      "required": datasets.require_hf_datasets("a test"), "doc": datasets.__doc__[:40]}))
    """
    out = run_py(code, path_after_root=[site])
    assert out["file"] == str(OUR_PKG / "__init__.py")
    assert out["path"] == [str(OUR_PKG), str(site / "datasets")]
    assert out["version"] == out["required"] == "9.9.9" and out["load"] == "fake-hf:x"
    assert out["dataset_module"] == "datasets.arrow_dataset"
    assert out["arrow_file"] == str(site / "datasets" / "arrow_dataset.py")
    assert out["ours"] == 2406 and out["repo_root"] == str(ROOT) and out["shared_is_fn"] is True
    assert out["doc"].startswith("Data for the conformance suite")


def test_fake_hf_whose_init_fails_gives_an_import_error_naming_it(tmp_path):
    site = _fake_hf_site(tmp_path, init="raise RuntimeError('broken install')\n")
    r = run_py("import datasets\n", path_after_root=[site], expect_ok=False)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: Hugging Face datasets 9.9.9 at " + str(site / "datasets")), r.stderr
    assert "RuntimeError: broken install" in last and "overlay" in last
    assert str(site / "datasets" / "__init__.py") in r.stderr  # traceback points at HF's file (compiled under it)


def test_fake_hf_metadata_without_package_is_reported(tmp_path):
    site = _fake_hf_site(tmp_path, with_package=False)
    code = """
    import json
    import datasets
    try:
        datasets.require_hf_datasets("the fine-tuner")
        err = None
    except ImportError as e:
        err = str(e)
    print(json.dumps({"path": list(datasets.__path__), "err": err}))
    """
    out = run_py(code, path_after_root=[site])
    assert out["path"] == [str(OUR_PKG)]
    assert out["err"].startswith("the fine-tuner needs Hugging Face `datasets`: the distribution datasets 9.9.9 is "
                                 "installed but its package directory was not found")
    assert out["err"].endswith(REQUIRE_MESSAGE)


def test_cli_works_next_to_fake_hf_distribution(tmp_path):
    site = _fake_hf_site(tmp_path)
    r = subprocess.run([sys.executable, "-m", "datasets", "info", "coveo"], cwd=ROOT,
                       env=_env(PYTHONPATH=str(site)), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "1,411,113" in r.stdout, r.stderr


# ------------------------------------------------------------------------------------------- names and sys.path rules

def _our_top_level_names() -> set[str]:
    """Our top-level modules and subpackages (what ``datasets.<name>`` resolves in our folder), without
    ``__init__`` and ``__main__`` (the CLI, which HF 5.2.0 does not have)."""
    names = set()
    for p in OUR_PKG.iterdir():
        if p.name in ("__pycache__", "__init__.py", "__main__.py"):
            continue
        if p.is_dir():
            names.add(p.name)
        elif p.suffix == ".py":
            names.add(p.stem)
    return names


def test_our_module_names_avoid_hf_5_2_0_names():
    """Runs without HF: no module of ours equals an HF 5.2.0 top-level module, even modulo leading underscores
    (so ``_io`` next to HF's ``io`` is out: our private modules carry the ``_suite_`` prefix)."""
    ours = _our_top_level_names()
    assert "sessions" in ours  # the listing works
    assert {n.lstrip("_") for n in ours} & HF_5_2_0_TOP_LEVEL == set()
    assert all(n.startswith("_suite_") for n in ours if n.startswith("_")), sorted(ours)


def test_regular_package_later_on_sys_path_beats_a_datasets_folder(tmp_path):
    """A plain ``datasets`` folder earlier on sys.path (as pytest inserts test folders) is a namespace portion
    only: the repository's regular package later on sys.path wins. Control: without the root, the folder is
    imported as a namespace package ``datasets`` (no __file__), which transformers would take for HF's."""
    (tmp_path / "tests" / "datasets").mkdir(parents=True)
    # Other regular `datasets` packages (an installed HF one) are taken off sys.path, except the root under test.
    code = """
    import json, os, sys
    sys.path[:] = [p for p in sys.path if p == sys.path[0] or not os.path.isfile(os.path.join(p or ".", "datasets",
                                                                                              "__init__.py"))]
    sys.path.insert(0, %r)
    import datasets
    print(json.dumps({"file": getattr(datasets, "__file__", None), "path": [str(p) for p in datasets.__path__]}))
    """ % (str(tmp_path / "tests"),)
    out = run_py(code, prologue=HIDE_HF_DIST)
    assert out == {"file": str(OUR_PKG / "__init__.py"), "path": [str(OUR_PKG)]}
    bare = tmp_path / "bare"
    bare.mkdir()
    control = run_py(code, root=bare, prologue=HIDE_HF_DIST)
    assert control == {"file": None, "path": [str(tmp_path / "tests" / "datasets")]}
