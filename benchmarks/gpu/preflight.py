"""Preflight of the GPU check: are the packages it imports there, which versions, and install the missing
pure-Python ones from carried wheels.

    python benchmarks/gpu/preflight.py --env-out $OUT/env.txt [--wheels benchmarks/gpu/wheels] [--site DIR]

Checks, without importing them (seconds, not the ten a cold ``import torch`` can take), every package the script's
stages import: the suite's runtime dependencies from pyproject.toml (their version ranges) plus pytest-benchmark's
and pytest's own requirements. For each it appends to ``--env-out`` a line ``name: installed (required; lock)``.
A missing package whose wheel is in ``--wheels`` (a folder filled by the command in benchmarks/README.md, carried
to the GPU machine) is installed with pip into ``--site`` (no index, no dependencies resolved: the folder holds
them), which the script puts on ``PYTHONPATH``. Versions outside pyproject's ranges are reported, not refused:
a GPU machine's preinstalled torch, numpy and pandas differ from requirements.lock and the suite runs on them.

Exit status 0 when every package is importable (after any installation); 3 otherwise, with one line per missing
package naming the wheel to carry (or saying that it is not pure Python and must be on the machine already).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: distribution → module, for the packages the stages import (pyproject's dependencies, then the test tools')
MODULES = {
    "torch": "torch",
    "numpy": "numpy",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "scipy": "scipy",
    "safetensors": "safetensors",
    "tqdm": "tqdm",
    "matplotlib": "matplotlib",
    "jinja2": "jinja2",
    "markupsafe": "markupsafe",
    "pytest": "pytest",
    "pluggy": "pluggy",
    "iniconfig": "iniconfig",
    "pygments": "pygments",
    "packaging": "packaging",
    "pytest-benchmark": "pytest_benchmark",
    "py-cpuinfo2": "cpuinfo",
}
#: pure-Python distributions whose wheels can travel (benchmarks/README.md: the pip download command)
PURE = {"tqdm", "jinja2", "pytest", "pluggy", "iniconfig", "pygments", "packaging", "pytest-benchmark", "py-cpuinfo2"}
#: other distributions of the same module (older pytest-benchmark releases depend on py-cpuinfo)
ALIASES = {"py-cpuinfo2": ("py-cpuinfo",)}
#: in pyproject's dependencies but not imported by the GPU check
NOT_NEEDED = {"pytest-xdist", "tomli"}


def normalize(name: str) -> str:
    """PEP 503 normalised distribution name (lower case, runs of ``-_.`` as ``-``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_ranges() -> dict[str, str]:
    """normalised name → version specifier of pyproject.toml's ``[project] dependencies`` (``''``: any)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the ranges are only reported, so a missing tomli costs nothing but them
        return {}
    deps = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    out = {}
    for dep in deps:
        m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*([^;]*)", dep)
        if m:
            out[normalize(m.group(1))] = m.group(2).strip()
    return out


def lock_versions() -> dict[str, str]:
    """normalised name → the exact version pinned in requirements.lock."""
    out = {}
    path = REPO / "requirements.lock"
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else ():
        m = re.match(r"\s*([A-Za-z0-9_.-]+)==([^\s;#]+)", line)
        if m:
            out[normalize(m.group(1))] = m.group(2)
    return out


def installed(dist: str) -> str | None:
    """Installed version of ``dist`` when its module is importable, else None."""
    if importlib.util.find_spec(MODULES[dist]) is None:
        return None
    for name in (dist, *ALIASES.get(dist, ())):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return "unknown version"


def in_range(version: str | None, spec: str) -> bool | None:
    """Whether ``version`` satisfies ``spec`` (None when either is unknown or packaging is absent)."""
    if not version or not spec:
        return None
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion
    except ImportError:
        return None
    try:
        return SpecifierSet(spec).contains(version.split("+")[0], prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def wheels_of(folder: Path, dist: str) -> list[Path]:
    """Wheels of ``dist`` in ``folder`` (file names start with the name, ``-`` written ``_``)."""
    want = normalize(dist)
    return sorted(p for p in folder.glob("*.whl") if normalize(p.name.split("-", 1)[0]) == want)


def install(wheels: list[Path], site: Path) -> str:
    """pip-install ``wheels`` into ``site`` with no index and no dependency resolution; '' or pip's error."""
    site.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    cmd += ["--no-cache-dir", "--upgrade", "--target", str(site), *map(str, wheels)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return "" if proc.returncode == 0 else (proc.stderr or proc.stdout).strip()[-800:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env-out", type=Path, required=True, help="text file the lines are appended to")
    ap.add_argument("--wheels", type=Path, default=REPO / "benchmarks" / "gpu" / "wheels")
    ap.add_argument("--site", type=Path, default=REPO / ".cache" / "gpu-site", help="pip --target of installs")
    ap.add_argument("--also", nargs="*", default=[], help="more pure-Python distribution=module pairs to require")
    args = ap.parse_args(argv)
    for pair in args.also:
        dist, _, mod = pair.partition("=")
        MODULES[normalize(dist)] = mod or dist
        PURE.add(normalize(dist))
    ranges, lock = pyproject_ranges(), lock_versions()
    found = {d: installed(d) for d in MODULES}
    missing = [d for d, v in found.items() if v is None]
    lines = [f"python {sys.version.split()[0]} ({sys.executable})"]
    if missing:
        carried = [w for d in missing if d in PURE for w in wheels_of(args.wheels, d)]
        if carried:
            err = install(carried, args.site)
            lines.append(f"installed from {args.wheels} into {args.site}: {', '.join(p.name for p in carried)}")
            if err:
                lines.append(f"pip failed: {err}")
            if str(args.site) not in sys.path:
                sys.path.insert(0, str(args.site))
            importlib.invalidate_caches()
            found.update({d: installed(d) for d in missing})
    bad = []
    for dist, version in found.items():
        spec = ranges.get(dist, "")
        ok = in_range(version, spec)
        note = "" if ok is not False else "  <- outside pyproject's range (reported; the run goes on)"
        lines.append(f"{dist}: {version or 'MISSING'} (pyproject {spec or '-'}; lock {lock.get(dist, '-')}){note}")
        if version is None:
            if dist in PURE:
                bad.append(f"{dist}: missing; carry its wheel in {args.wheels} (benchmarks/README.md, pip download)")
            else:
                bad.append(f"{dist}: missing and not pure Python: needs a machine that has it installed")
    extra = sorted(set(ranges) - set(MODULES) - NOT_NEEDED)
    if extra:
        lines.append(f"not checked (not imported by the GPU check): {', '.join(extra)}")
    with args.env_out.open("a", encoding="utf-8") as f:
        f.write("\n".join(lines + [f"PREFLIGHT FAILED: {b}" for b in bad]) + "\n")
    print("\n".join(lines))
    for b in bad:
        print(f"PREFLIGHT FAILED: {b}", file=sys.stderr)
    return 3 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
