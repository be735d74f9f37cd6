"""pytest plugin of the meta-tests' inner conformance runs: keeps, per implementation, only the checks a
selection file names (``-p meta_select`` with env ``GRU4REC_META_SELECTION`` = path of a JSON file
``{impl: {"kinds": [...], "checks": [...]}}``; ``"*"`` in ``kinds`` keeps every check of that implementation).

It runs after the conformance plugin has parametrized the checks over ``--impl`` and deselects the rest, so one
pytest process (and one pytest-xdist pool) serves every mutant.
"""

from __future__ import annotations

import json
import os

import pytest

ENV = "GRU4REC_META_SELECTION"


def _impl_name(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    param = callspec.params.get("impl") if callspec is not None else None
    return getattr(param, "name", None)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    path = os.environ.get(ENV)
    if not path:
        raise pytest.UsageError(f"-p meta_select needs the environment variable {ENV} (a JSON selection file)")
    with open(path, encoding="utf-8") as fh:
        selection = json.load(fh)
    keep, drop = [], []
    for item in items:
        impl = _impl_name(item)
        marker = item.get_closest_marker("check")
        spec = selection.get(impl) if impl else None
        if spec is None or marker is None:
            drop.append(item)
            continue
        kinds, checks = set(spec.get("kinds", [])), set(spec.get("checks", []))
        cid, kind = (marker.args[0] if marker.args else None), marker.kwargs.get("kind")
        (keep if "*" in kinds or kind in kinds or cid in checks else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
