"""The distribution as a maintainer gets it: ``pip install`` of the wheel, then gating from their own repository.

What this proves, on a wheel built from this checkout and installed into a fresh virtual environment with the
base dependencies only (pinned by requirements.lock as constraints; no transformers):

- pyproject's explicit package list names every package folder of the design card's layout, and the wheel
  carries the data the harness reads at run time (committed xfail files, report templates, study results);
- the ``pytest11`` entry point registers the harness: ``pytest --pyargs gru4rec_conformance.conformance`` runs
  from a temporary folder outside the checkout, with nothing of the checkout on ``sys.path``;
- the template adapter (copied into an outside package, as implementations/template.py tells maintainers) is
  gated clean on the fast checks; an outside adapter with a known defect fails the gate, and passes once an
  outside xfail file declares it (ids as in a checkout, ``conformance/gru4rec/...``);
- the fine-tuner family is neither collected nor imported without the ``[finetuner]`` extra, and asking for a
  fine-tuner says which extra to install.

Building needs pip's build isolation (setuptools from the package index); the module skips, saying so, when the
wheel cannot be built here. About 2-3 minutes, most of it installing torch into the fresh environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SELECT_BUGGY = "test_sr2_first_event_after_switch or test_sr5_state_is_used"


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def test_package_list_names_every_package_folder():
    """Every folder with Python modules under a mapped folder is in ``[tool.setuptools] packages`` (``datasets/``
    is an implicit namespace package: no ``__init__.py``, see datasets/paths.py)."""
    cfg = PYPROJECT["tool"]["setuptools"]
    listed = set(cfg["packages"])
    missing = []
    for pkg, folder in cfg["package-dir"].items():
        for module in (REPO / folder).rglob("*.py"):
            if "__pycache__" in module.parts:
                continue
            rel = module.parent.relative_to(REPO / folder)
            name = ".".join([pkg, *rel.parts]) if rel.parts else pkg
            if name not in listed:
                missing.append(name)
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {sorted(missing)}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)], timeout=600)
    wheels = list(out.glob("gru4rec_conformance-*.whl"))
    if r.returncode != 0 or not wheels:
        pytest.skip(f"could not build the wheel here (pip wheel exit {r.returncode}): {r.stderr[-1500:]}")
    shutil.rmtree(REPO / "build", ignore_errors=True)  # setuptools' scratch folder in the checkout
    return wheels[0]


def test_wheel_carries_the_packages_and_run_time_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "gru4rec_conformance/__init__.py",
        "gru4rec_conformance/conformance/_harness/plugin.py",
        "gru4rec_conformance/conformance/_records/results.schema.json",
        "gru4rec_conformance/conformance/gru4rec/test_k1_state_reset.py",
        "gru4rec_conformance/conformance/xfails/torch_gru4rec.toml",
        "gru4rec_conformance/reports/templates/summary.html.j2",
        "gru4rec_conformance/datasets/study/study_results.csv",
        "gru4rec_conformance/datasets/sessions/study_stats.json",
        "gru4rec_conformance/datasets/paths.py",
        "gru4rec_conformance/implementations/template.py",
        "gru4rec_conformance/benchmarks/ci_baseline.json",  # the CI benchmark's ratio baseline
    ):
        assert required in names, f"{wheel.name} lacks {required}"
    assert not [n for n in names if n.startswith(("tests/", "datasets/", "conftest.py"))], "stray top-level files"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert re.search(r"\[pytest11\]\s*\n\s*gru4rec_conformance\.conformance\._harness\.plugin\s*=", text), text


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel and its base dependencies (versions of requirements.lock)."""
    root = tmp_path_factory.mktemp("venv") / "env"
    r = _run([sys.executable, "-m", "venv", str(root)], timeout=300)
    assert r.returncode == 0, r.stderr
    r = _run(
        [str(root / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(REPO / "requirements.lock"), str(wheel)],
        timeout=1200,
    )
    assert r.returncode == 0, f"pip install {wheel.name} failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return root


@pytest.fixture
def maintainer_repo(tmp_path) -> Path:
    """A maintainer's repository outside the checkout: the template adapter copied in, plus a defective one."""
    repo = tmp_path / "their_repo"
    (repo / "mypkg").mkdir(parents=True)
    (repo / "mypkg" / "__init__.py").write_text("")
    shutil.copy(REPO / "implementations" / "template.py", repo / "mypkg" / "conformance.py")
    (repo / "mypkg" / "buggy.py").write_text(
        "from gru4rec_conformance.implementations.mutants.k1_state_reset import NoEvalReset\n\n\n"
        "class Buggy(NoEvalReset):\n    name = 'buggy'\n    role = 'implementation'\n    isolated = True\n"
    )
    return repo


def _gate(venv: Path, repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "GRU4REC_", "VIRTUAL_ENV"))}
    # PYTHONPATH=. run from the maintainer's repository, exactly as the README's gating command has it
    env.update(PYTHONPATH=".", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return _run(
        [
            str(venv / "bin" / "pytest"),
            "--pyargs",
            "gru4rec_conformance.conformance",
            "-p",
            "no:cacheprovider",
            "--no-report-plots",
            *args,
        ],
        cwd=repo,
        env=env,
        timeout=900,
    )


def test_installed_wheel_has_no_transformers_and_no_checkout_on_its_path(venv):
    code = (
        "import importlib.util, json, sys, gru4rec_conformance as g; print(json.dumps({'tf': importlib.util."
        "find_spec('transformers') is not None, 'file': g.__file__, 'checkout': str(g.CHECKOUT_ROOT)}))"
    )
    r = _run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=str(venv),
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert r.returncode == 0, r.stderr
    assert '"tf": false' in r.stdout, "the base install pulled in transformers"
    assert str(venv) in r.stdout and '"checkout": "None"' in r.stdout, r.stdout


def test_template_adapter_gates_clean_from_outside_the_checkout(venv, maintainer_repo):
    r = _gate(venv, maintainer_repo, "--impl", "mypkg.conformance:TemplateAdapter", "--gate", "-m", "not slow")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "GATE PASSED" in out, out[-3000:]
    assert "finetuner checks not collected" in out, out[-3000:]
    assert re.search(r"\b[1-9]\d* passed", out), out[-2000:]
    assert list((maintainer_repo / "reports" / "out" / "template").glob("*/results.json")), "no report written"


def test_outside_adapter_fails_the_gate_until_an_outside_xfail_declares_it(venv, maintainer_repo):
    r = _gate(venv, maintainer_repo, "--impl", "mypkg.buggy:Buggy", "--gate", "-k", SELECT_BUGGY)
    assert r.returncode == 1, (r.stdout + r.stderr)[-3000:]
    assert "GATE FAILED: 1 failed" in r.stdout, r.stdout[-3000:]
    xfails = maintainer_repo / "buggy_xfails.toml"
    xfails.write_text(
        'implementation = "buggy"\n\n[[xfail]]\n'
        'id = "conformance/gru4rec/test_k1_state_reset.py::test_sr2_first_event_after_switch"\n'
        'reason = "our evaluation loop keeps the hidden state across sessions"\n'
        'kind = "bug"\nlink = "none"\n',
        encoding="utf-8",
    )
    r = _gate(
        venv, maintainer_repo, "--impl", "mypkg.buggy:Buggy", "--gate", "--xfails", str(xfails), "-k", SELECT_BUGGY
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "GATE PASSED" in r.stdout and "1 xfailed" in r.stdout, r.stdout[-3000:]


def test_finetuner_without_its_extra_names_the_extra(venv, maintainer_repo):
    r = _gate(venv, maintainer_repo, "--impl", "hf_trainer")
    assert r.returncode == 4, (r.stdout + r.stderr)[-3000:]  # pytest's usage error
    assert "pip install 'gru4rec-conformance[finetuner]'" in r.stderr, r.stderr[-2000:]


def test_installed_xfail_files_are_vouched_for_by_the_wheel_record(venv):
    """Outside a checkout, the wheel's RECORD (sha256 of every installed file) stands in for git: a committed
    xfail file is pristine and trusted by --gate; the same file changed is not (conformance/xfails/README.md)."""
    code = (
        "import json; from gru4rec_conformance.conformance._harness.options import SUITE_CHECKS_ROOT as R; "
        "from gru4rec_conformance.conformance._records.xfails import file_provenance as fp, provenance_problem as pp; "
        "p = R / 'conformance' / 'xfails' / 'cornac.toml'; a = fp(p, False); "
        "b = dict(a, package='modified'); print(json.dumps([a['package'], pp(a), pp(b)]))"
    )
    r = _run([str(venv / "bin" / "python"), "-c", code], cwd=str(venv), timeout=120,
             env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})  # fmt: skip
    assert r.returncode == 0, r.stderr
    package, trusted, changed = json.loads(r.stdout)
    assert package == "pristine" and trusted is None, r.stdout
    assert "differs from the installed suite's RECORD" in changed


def test_readme_gating_command_works_verbatim_and_leaves_no_benchmark_storage(venv, maintainer_repo):
    """The README's gating command, copied as written (only the adapter's name filled in and one fast check
    selected), from the maintainer's repository with nothing on PYTHONPATH: it finds their package, and the
    installed suite turns on no pytest-benchmark storage there (no ``.benchmarks/``)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Gating your reimplementation, without a clone", 1)[1].split("\n## ", 1)[0]
    (command,) = [ln.strip() for ln in section.splitlines() if "pytest --pyargs" in ln]
    command = command.replace("your_pkg.conformance:YourAdapter", "mypkg.conformance:TemplateAdapter")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "GRU4REC_", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    r = _run(["bash", "-c", f"{command} -p no:cacheprovider --no-report-plots -k test_sr2_first_event_after_switch"], cwd=maintainer_repo,
             env=env, timeout=900)  # fmt: skip
    out = r.stdout + r.stderr
    assert "ModuleNotFoundError" not in out and r.returncode == 0, out[-3000:]
    assert "GATE PASSED" in out, out[-3000:]
    assert not (maintainer_repo / ".benchmarks").exists(), "the installed suite made .benchmarks/ in their repository"
