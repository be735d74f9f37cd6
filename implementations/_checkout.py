"""Locating pinned checkouts of GitHub-only implementations (docs/implementations.md, 'Code bases from GitHub').

Third-party code is never part of this repository. An adapter of a GitHub-only implementation finds the
code it wraps at one pinned commit, in this order:

1. an environment variable naming a checkout folder (e.g. ``GRU4REC_PYTORCH_PATH``), used as it is;
2. the cache folder ``implementations.base.cache_dir() / "<name>@<commit12>"``
   (``~/.cache/gru4rec-conformance/...`` unless ``GRU4REC_CACHE_DIR`` says otherwise);
3. populating that cache folder from a local git mirror that holds the commit: ``GRU4REC_MIRROR_DIR`` is
   either a git directory or a folder of mirrors laid out as ``<owner>+<repo>/repo`` (the layout the
   workplace's fetch tool uses); the tree of the pinned commit is exported with ``git archive``;
4. populating it from GitHub's archive of the commit when ``GRU4REC_ALLOW_DOWNLOAD=1`` and the network
   allows it.

When none works, :class:`~implementations.base.ImplementationUnavailable` is raised with one line saying how
to provide the checkout, so the implementation's checks are skipped with that line.

Nothing here changes the code it exports: no patch, no build step.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from gru4rec_conformance.implementations.base import ImplementationUnavailable, cache_dir

__all__ = ["Checkout", "CHECKOUTS", "locate", "located_version", "import_path"]


@dataclasses.dataclass(frozen=True)
class Checkout:
    """One pinned GitHub repository.

    Attributes:
        key: short name used in the cache folder (``<key>@<commit[:12]>``).
        repo: ``owner/name`` on GitHub.
        commit: full 40-hex commit id that the suite judges.
        env: environment variable that may name a checkout folder instead of the cache.
        markers: files (relative paths) that must exist in a usable checkout.
    """

    key: str
    repo: str
    commit: str
    env: str
    markers: tuple[str, ...]

    @property
    def short(self) -> str:
        return self.commit[:7]

    @property
    def cache_path(self) -> Path:
        return cache_dir() / f"{self.key}@{self.commit[:12]}"

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}"

    def how_to_provide(self) -> str:
        """One line: how a user provides this checkout."""
        return (
            f"{self.repo}@{self.short} not found: set {self.env}=<checkout of {self.url} at {self.commit}> or "
            f"extract that commit into {self.cache_path} (or point GRU4REC_MIRROR_DIR at a git mirror of it, or "
            f"set GRU4REC_ALLOW_DOWNLOAD=1 to download the pinned archive from GitHub)"
        )


CHECKOUTS: dict[str, Checkout] = {
    c.key: c
    for c in (
        Checkout("gru4rec_pytorch_official", "hidasib/GRU4Rec_PyTorch_Official",
                 "d1fc31105577665d2f105de1c8d9a38d223a9a22", "OFFICIAL_GRU4REC_PATH",
                 ("gru4rec_pytorch.py", "evaluation.py")),
        Checkout("gru4rec_pytorch", "hungpthanh/GRU4REC-pytorch",
                 "666b84264c4afae757fe55c6997dcf0a4da1d44e", "GRU4REC_PYTORCH_PATH",
                 ("lib/model.py", "lib/dataset.py", "lib/trainer.py")),
        Checkout("gru4rec_pytorch_fork", "czappi44/GRU4REC-pytorch",
                 "eaad3eb1ce79cc323326cb9d496233086024d750", "GRU4REC_PYTORCH_FORK_PATH",
                 ("lib/model.py", "lib/dataset.py", "lib/trainer.py")),
        Checkout("torch_gru4rec", "yeganegi-reza/Torch-GRU4Rec",
                 "744f6b332a809f9da25fa04658c8c3bc0d192595", "TORCH_GRU4REC_PATH",
                 ("Modules/Model.py", "Modules/Dataset.py", "Modules/Trainer.py")),
        Checkout("torch_gru4rec_fork", "czappi44/Torch-GRU4Rec",
                 "d183c13b20f8694d37c0b1487c421d96a175e264", "TORCH_GRU4REC_FORK_PATH",
                 ("Modules/Model.py", "Modules/Dataset.py", "Modules/Trainer.py")),
        Checkout("gru4rec_tensorflow", "Songweiping/GRU4Rec_TensorFlow",
                 "d53fd9e7d02d980d6e71ff05acc710c43fff2042", "GRU4REC_TENSORFLOW_PATH",
                 ("gru4rec_BP/model.py", "gru4rec_BP/evaluation.py")),
        Checkout("gru4rec_tensorflow_fork", "czappi44/GRU4Rec_TensorFlow",
                 "f3ba65f6f6aa8810a3a8acc632fee8e867f347a3", "GRU4REC_TENSORFLOW_FORK_PATH",
                 ("gru4rec_BP/model.py", "gru4rec_BP/evaluation.py")),
        Checkout("keras_gru4rec", "paxcema/KerasGRU4Rec",
                 "5f52c60654079e0448f7889da417784fcc0e6f1c", "KERAS_GRU4REC_PATH",
                 ("model/gru4rec.py",)),
        Checkout("keras_gru4rec_fork", "czappi44/KerasGRU4Rec",
                 "bf4b7c85f424b7e7cfc4fcf23c431be8e8efa1c4", "KERAS_GRU4REC_FORK_PATH",
                 ("model/gru4rec.py",)),
        # the Theano original: newest commit on master (2023-08-24, "Paropt + readme extension")
        Checkout("gru4rec_theano", "hidasib/GRU4Rec",
                 "a4ed5fbdba35bcc18bf1d4a9b76692ef462bb284", "GRU4REC_THEANO_PATH",
                 ("gru4rec.py", "evaluation.py", "gpu_ops.py", "custom_opt.py")),
    )
}  # fmt: skip


def _usable(path: Path, checkout: Checkout) -> bool:
    return path.is_dir() and all((path / m).is_file() for m in checkout.markers)


def _mirror_candidates(checkout: Checkout) -> list[Path]:
    root = os.environ.get("GRU4REC_MIRROR_DIR")
    if not root:
        return []
    base = Path(root)
    owner, name = checkout.repo.split("/")
    return [base, base / f"{owner}+{name}" / "repo", base / f"{owner}+{name}"]


def _has_commit(gitdir: Path, commit: str) -> bool:
    try:
        out = subprocess.run(
            ["git", "--git-dir", str(gitdir), "cat-file", "-e", f"{commit}^{{commit}}"],
            capture_output=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def _git_dir(path: Path) -> Path | None:
    if (path / "objects").is_dir() and (path / "HEAD").is_file():
        return path
    if (path / ".git").exists():
        return path / ".git"
    return None


def _install(tmp: Path, checkout: Checkout) -> Path:
    """Move an extracted tree into the cache atomically (a concurrent worker may win the race)."""
    target = checkout.cache_path
    if not _usable(tmp, checkout):
        raise ImplementationUnavailable(f"{checkout.repo}@{checkout.short}: extracted tree lacks {checkout.markers}")
    try:
        os.replace(tmp, target)
    except OSError:
        if not _usable(target, checkout):
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _safe_extract(archive: tarfile.TarFile, dest: Path, strip_first: bool) -> None:
    for member in archive.getmembers():
        parts = Path(member.name).parts[1:] if strip_first else Path(member.name).parts
        if not parts or member.issym() or member.islnk() or ".." in parts or Path(member.name).is_absolute():
            continue
        out = dest.joinpath(*parts)
        if member.isdir():
            out.mkdir(parents=True, exist_ok=True)
        elif member.isfile():
            out.parent.mkdir(parents=True, exist_ok=True)
            src = archive.extractfile(member)
            if src is not None:
                out.write_bytes(src.read())


def _from_mirror(checkout: Checkout) -> Path | None:
    for candidate in _mirror_candidates(checkout):
        gitdir = _git_dir(candidate)
        if gitdir is None or not _has_commit(gitdir, checkout.commit):
            continue
        checkout.cache_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{checkout.key}-", dir=checkout.cache_path.parent))
        data = subprocess.run(
            ["git", "--git-dir", str(gitdir), "archive", "--format=tar", checkout.commit],
            capture_output=True, timeout=300, check=True,
        ).stdout  # fmt: skip
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            _safe_extract(archive, tmp, strip_first=False)
        return _install(tmp, checkout)
    return None


def _from_download(checkout: Checkout) -> Path | None:
    if os.environ.get("GRU4REC_ALLOW_DOWNLOAD") != "1":
        return None
    import urllib.request

    url = f"https://codeload.github.com/{checkout.repo}/tar.gz/{checkout.commit}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (fixed https URL)
            data = response.read()
    except OSError:
        return None
    checkout.cache_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{checkout.key}-", dir=checkout.cache_path.parent))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        _safe_extract(archive, tmp, strip_first=True)
    return _install(tmp, checkout)


def locate(key: str) -> Path:
    """Folder of the pinned checkout ``CHECKOUTS[key]``.

    Raises:
        ImplementationUnavailable: with one line saying how to provide it, when no source works.
        KeyError: for an unknown key (a bug in an adapter).
    """
    checkout = CHECKOUTS[key]
    env = os.environ.get(checkout.env)
    if env:
        path = Path(env).expanduser()
        if not _usable(path, checkout):
            raise ImplementationUnavailable(
                f"{checkout.env}={env} is not a checkout of {checkout.repo} (missing one of {list(checkout.markers)})"
            )
        return path
    if _usable(checkout.cache_path, checkout):
        return checkout.cache_path
    for source in (_from_mirror, _from_download):
        try:
            found = source(checkout)
        except (OSError, subprocess.SubprocessError, tarfile.TarError):
            found = None
        if found is not None:
            return found
    raise ImplementationUnavailable(checkout.how_to_provide())


def located_version(key: str) -> str:
    """``"<owner/name>@<commit[:7]>"`` of the pinned checkout ``CHECKOUTS[key]``, once :func:`locate` found it (an
    adapter's ``version()``).

    Raises:
        ImplementationUnavailable: as :func:`locate`, when the checkout cannot be provided.
    """
    locate(key)
    c = CHECKOUTS[key]
    return f"{c.repo}@{c.short}"


_PREPARED: set[str] = set()


def prepare(keys: tuple[str, ...]) -> None:
    """Make the pinned checkouts ``keys`` present in the cache, from the controller, before an isolated worker
    starts: the worker sees the cache read-only, so it cannot populate it itself (nor alter another
    implementation's checkout). Each key is tried once per process; a checkout that cannot be provided is left
    to the worker's own ``locate()``, which then raises :class:`ImplementationUnavailable` with the how-to line.
    """
    for key in keys:
        if key in _PREPARED:
            continue
        _PREPARED.add(key)
        try:
            locate(key)
        except ImplementationUnavailable:
            pass


def import_path(root: Path, package_names: tuple[str, ...]) -> None:
    """Put ``root`` first on ``sys.path`` and forget earlier imports of ``package_names`` from elsewhere.

    The implementations use generic top-level names (``lib``, ``Modules``, ``model``); an upstream and a
    fork loaded in one interpreter (``--isolation never``) must not see each other's modules.
    """
    root_s = str(root)
    for name in list(sys.modules):
        top = name.split(".")[0]
        if top in package_names:
            mod_file = getattr(sys.modules[name], "__file__", None) or ""
            if not mod_file.startswith(root_s):
                del sys.modules[name]
    if root_s in sys.path:
        sys.path.remove(root_s)
    sys.path.insert(0, root_s)
