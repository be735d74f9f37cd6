"""Meta-tests (tests/meta/): the conformance suite run on the mutants of implementations/mutants/.

``slow`` meta-tests (the full mutant × check matrix, tens of minutes) run only when selected explicitly
(``pytest tests/meta -m slow``); the default run keeps to the checks of each mutant's kind plus a cross-section.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow meta-test: select it with -m slow")
    for item in items:
        if item.get_closest_marker("slow") is not None and "tests/meta/" in item.nodeid.replace("\\", "/"):
            item.add_marker(skip)
