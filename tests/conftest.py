"""Settings for the suite's own tests."""

from __future__ import annotations

import os

from gru4rec_conformance.conformance._harness.isolation import sandbox_probe

# Where bubblewrap cannot run (no package, or user namespaces forbidden), the suites these tests start with
# --gate over isolated adapters would stop with a usage error: let them run unsandboxed, as the header then says.
# The tests of the sandbox itself skip there, and the refusal test clears this variable.
if not sandbox_probe().available:
    os.environ.setdefault("GRU4REC_ALLOW_UNSANDBOXED", "1")

# The suite's own tests never read or fill the user's oracle cache (~/.cache/gru4rec-conformance/oracle): every
# test process (and each inner run it starts) gets a temporary one, unless the caller named one (.ci/run does).
if not os.environ.get("GRU4REC_ORACLE_CACHE_DIR"):
    import atexit
    import shutil
    import tempfile

    _oracle_tmp = tempfile.mkdtemp(prefix="gru4rec-test-oracle-")
    os.environ["GRU4REC_ORACLE_CACHE_DIR"] = _oracle_tmp
    atexit.register(shutil.rmtree, _oracle_tmp, True)
