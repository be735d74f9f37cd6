"""Test-only pytest plugin (``-p reliability_pause_plugin``): holds a run before its (N+1)-th test, so that
tests/reliability can kill or interrupt the real suite exactly half-way.

Environment: ``RELIABILITY_PAUSE_AFTER`` = N (checks to let finish), ``RELIABILITY_PAUSE_FILE`` = a path that
is written (with N) once the run is held. The run waits there for at most ``RELIABILITY_PAUSE_MAX_S`` seconds
(default 300), then goes on; a signal ends the wait like any other Python code.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from gru4rec_conformance.fileio import atomic_write_text

_started = 0


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> None:
    global _started
    after = os.environ.get("RELIABILITY_PAUSE_AFTER")
    if after is None:
        return None
    _started += 1
    if _started == int(after) + 1:
        marker = Path(os.environ["RELIABILITY_PAUSE_FILE"])
        atomic_write_text(marker, f"{after}\n{item.nodeid}\n", durable=False)  # the waiting test polls for it
        deadline = time.monotonic() + float(os.environ.get("RELIABILITY_PAUSE_MAX_S", "300"))
        while time.monotonic() < deadline:
            time.sleep(0.05)
    return None
