"""Our data package must never shadow Hugging Face ``datasets`` (docs/architecture.md, "datasets").

Why the package is called ``suite_datasets``: the suite always runs with the repository root first on sys.path,
and transformers' ``is_datasets_available()`` only asks ``importlib.util.find_spec("datasets")``. Any top-level
``datasets`` in the repository would therefore be reported as Hugging Face's and imported by
``transformers.trainer`` (which then calls ``datasets.Dataset``), whether or not HF datasets is installed.
``test_control_a_repo_level_datasets_package_would_be_detected`` shows that this check bites.

Each test runs a fresh interpreter with the repository root first on sys.path, as pytest and ``python -m`` do.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_py(code: str, *, python: str = sys.executable, path_after_root: list[Path] = (), timeout: int = 180,
           root: Path = ROOT) -> dict:
    """Run ``code`` with ``root`` (then ``path_after_root``) first on sys.path; the code prints one JSON line."""
    prologue = "import sys\n" + "".join(f"sys.path.insert(0, {str(p)!r})\n" for p in reversed(path_after_root))
    prologue += f"sys.path.insert(0, {str(root)!r})\n"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    r = subprocess.run([python, "-c", prologue + textwrap.dedent(code)], cwd=str(root), env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _has_transformers() -> bool:
    return importlib.util.find_spec("transformers") is not None


def _hf_datasets_installed() -> bool:
    try:
        importlib.metadata.distribution("datasets")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def test_repository_has_no_top_level_datasets_module():
    assert importlib.machinery.PathFinder.find_spec("datasets", [str(ROOT)]) is None
    assert not (ROOT / "datasets").exists() and not (ROOT / "datasets.py").exists()
    assert importlib.machinery.PathFinder.find_spec("suite_datasets", [str(ROOT)]) is not None


PROBE = """
import importlib.util, json
import suite_datasets.sessions.pipeline  # our package is importable and imported
from transformers.utils import is_datasets_available
spec = importlib.util.find_spec("datasets")
print(json.dumps({"available": bool(is_datasets_available()),
                  "origin": None if spec is None else spec.origin}))
"""


@pytest.mark.skipif(not _has_transformers(), reason="transformers is not installed in this environment")
@pytest.mark.skipif(_hf_datasets_installed(), reason="HF datasets is installed here; this test needs it absent")
def test_transformers_probe_does_not_report_our_package():
    out = run_py(PROBE)
    assert out == {"available": False, "origin": None}


@pytest.mark.skipif(not _has_transformers(), reason="transformers is not installed in this environment")
@pytest.mark.skipif(_hf_datasets_installed(), reason="HF datasets is installed here; this test needs it absent")
def test_control_a_repo_level_datasets_package_would_be_detected(tmp_path):
    """The probe test bites: a checkout with a top-level ``datasets`` package is reported as HF datasets."""
    fake_root = tmp_path / "checkout"
    shutil.copytree(ROOT / "suite_datasets", fake_root / "suite_datasets",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (fake_root / "datasets").mkdir()
    (fake_root / "datasets" / "__init__.py").write_text('"""a repo-level package named like HF datasets"""\n')
    out = run_py(PROBE, root=fake_root)
    assert out["available"] is True and out["origin"] == str(fake_root / "datasets" / "__init__.py")


def _fake_hf_site(tmp_path: Path) -> Path:
    """A minimal installed-looking HF-style distribution: datasets-9.9.9.dist-info + a datasets package."""
    site = tmp_path / "site"
    pkg = site / "datasets"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        __version__ = "9.9.9"
        from .arrow_dataset import Dataset
        def load_dataset(path, *a, **k):
            return "fake-hf:" + path
    """))
    (pkg / "arrow_dataset.py").write_text("class Dataset:\n    pass\n")
    info = site / "datasets-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: datasets\nVersion: 9.9.9\n")
    (info / "top_level.txt").write_text("datasets\n")
    (info / "RECORD").write_text("datasets/__init__.py,,\ndatasets/arrow_dataset.py,,\n")
    return site


def test_fake_hf_distribution_is_not_shadowed(tmp_path):
    site = _fake_hf_site(tmp_path)
    code = f"""
    import importlib.metadata, json
    import datasets
    from datasets import Dataset, load_dataset
    import suite_datasets, suite_datasets.sessions.checks as checks
    out = {{"file": datasets.__file__, "version": importlib.metadata.version("datasets"),
            "load": load_dataset("x"), "dataset_cls": Dataset.__module__,
            "ours": len(checks.d_lag1(0).train)}}
    try:
        from transformers.utils import is_datasets_available
        import transformers.utils.import_utils as iu
        out["probe"] = bool(is_datasets_available())
        out["probe_version"] = iu._is_package_available("datasets", return_version=True)[1]
    except ImportError:
        pass
    print(json.dumps(out))
    """
    out = run_py(code, path_after_root=[site])
    assert out["file"] == str(site / "datasets" / "__init__.py")
    assert out["version"] == "9.9.9" and out["load"] == "fake-hf:x" and out["dataset_cls"] == "datasets.arrow_dataset"
    assert out["ours"] == 2406
    if "probe" in out:
        assert out["probe"] is True and out["probe_version"] == "9.9.9"


def test_cli_works_next_to_fake_hf_distribution(tmp_path):
    site = _fake_hf_site(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site)}
    r = subprocess.run([sys.executable, "-m", "suite_datasets", "info", "coveo"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "1,411,113" in r.stdout, r.stderr


def _python_with_hf_datasets() -> str | None:
    if _hf_datasets_installed():
        return sys.executable
    cand = os.environ.get("GRU4REC_HF_DATASETS_PYTHON", "")
    return cand if cand and Path(cand).exists() else None


@pytest.mark.skipif(_python_with_hf_datasets() is None,
                    reason="HF datasets not installed here and GRU4REC_HF_DATASETS_PYTHON not set to an interpreter "
                           "that has it")
def test_real_hf_datasets_is_not_shadowed():
    code = """
    import json
    import datasets
    ds = datasets.Dataset.from_dict({"SessionId": [1, 1], "ItemId": [5, 6]})
    from suite_datasets.sessions.checks import d_long
    print(json.dumps({"file": datasets.__file__, "version": datasets.__version__, "rows": len(ds),
                      "has_load": callable(datasets.load_dataset), "ours": len(d_long(0).train)}))
    """
    out = run_py(code, python=_python_with_hf_datasets())
    assert "site-packages" in out["file"] and not out["file"].startswith(str(ROOT))
    assert out["rows"] == 2 and out["has_load"] and out["ours"] == 2000
