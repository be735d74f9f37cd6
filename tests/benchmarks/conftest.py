"""Fixtures of the tests of benchmarks/ (report, workload, runners, the pytest entry point, the tuner)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "src") not in sys.path:  # the gru4rec_conformance namespace (never the root itself)
    sys.path.insert(0, str(REPO / "src"))

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models: one intra-op thread is faster and far steadier on a loaded 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def bench_cache(tmp_path_factory) -> Path:
    """A private cache folder for generated benchmark data (also passed to subprocesses as GRU4REC_BENCH_CACHE)."""
    return tmp_path_factory.mktemp("bench_cache")


@pytest.fixture()
def subprocess_env(bench_cache) -> dict:
    env = dict(os.environ)
    env.update(
        GRU4REC_BENCH_CACHE=str(bench_cache),
        PYTHONPATH=str(REPO / "src"),
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres_unavailable(reason: str):
    """Skip with ``reason``; fail instead under GRU4REC_REQUIRE_POSTGRES=1 (CI, where .ci/run starts a server)."""
    if os.environ.get("GRU4REC_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"GRU4REC_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _major(text: str) -> int:
    return int(text) if text.isdigit() else -1


def _postgres_bin(name: str) -> str | None:
    """``name`` on PATH, else in Debian's versioned folder (``/usr/lib/postgresql/<major>/bin``, the newest), where
    ``apt-get install postgresql`` puts initdb and pg_ctl off PATH."""
    import glob
    import shutil

    found = shutil.which(name)
    if found:
        return found
    majors = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: _major(Path(p).parts[-3]))
    return majors[-1] if majors else None


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL URL for Optuna's RDB storage (tuning across machines, benchmarks/README.md).

    GRU4REC_TEST_POSTGRES_URL when set (an existing server, e.g. the one .ci/run starts; the test creates its own
    study name), checked with one connection first; otherwise a throwaway cluster started with the machine's
    ``initdb``/``pg_ctl`` (on PATH or Debian's ``/usr/lib/postgresql/<major>/bin``) on 127.0.0.1 and a free port,
    trust authentication, removed afterwards. PostgreSQL refuses to run as root, so as root the server runs as the
    ``postgres`` user (``runuser``). Skipped, with the reason, when the driver (psycopg) or the server binaries are
    missing, the named server cannot be reached or a cluster cannot be started; under GRU4REC_REQUIRE_POSTGRES=1
    these fail instead (CI must not skip it silently).
    """
    import shutil
    import subprocess
    import tempfile

    try:
        import psycopg  # (SQLAlchemy 2.1 default PostgreSQL driver, in requirements.lock)
    except ImportError:
        _postgres_unavailable("psycopg (PostgreSQL driver) is not installed (pip install -r requirements.lock)")
    url = os.environ.get("GRU4REC_TEST_POSTGRES_URL")
    if url:
        from gru4rec_conformance.benchmarks.tune import _mask

        error = None
        try:
            psycopg.connect(url, connect_timeout=10).close()
        except psycopg.Error as exc:
            error = " ".join(str(exc).split())[:300]
        if error is not None:  # outside the except block: the reason alone, without the chained traceback
            _postgres_unavailable(f"no PostgreSQL reachable at GRU4REC_TEST_POSTGRES_URL={_mask(url)}: {error}")
        yield url
        return
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        _postgres_unavailable(
            "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin (apt-get install "
            "postgresql); or set GRU4REC_TEST_POSTGRES_URL=postgresql://user:pw@host:port/db to test against a server"
        )
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            _postgres_unavailable("running as root and runuser is absent: PostgreSQL cannot be started as root")
        prefix = ["runuser", "-u", "postgres", "--"]
    base = Path(tempfile.mkdtemp(prefix="gru4rec-pg-"))
    data = base / "data"
    if prefix:
        try:
            shutil.chown(base, user="postgres")
        except LookupError:
            shutil.rmtree(base, ignore_errors=True)
            _postgres_unavailable("running as root and there is no 'postgres' user to run the server as")
    port = _free_port()

    def run(*cmd: str) -> None:
        res = subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")

    try:
        run(initdb, "-D", str(data), "-U", "optuna", "--auth=trust", "-E", "UTF8")
        run(
            pg_ctl,
            "-D",
            str(data),
            "-l",
            str(base / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {port} -k {base} -c listen_addresses=127.0.0.1",
            "start",
        )
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(base, ignore_errors=True)
        _postgres_unavailable(f"a throwaway PostgreSQL cluster could not be started here: {exc}")
    try:
        yield f"postgresql://optuna@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)
