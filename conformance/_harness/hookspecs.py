"""Hooks the conformance plugin adds to pytest (implement them in a root conftest.py or a plugin)."""

from __future__ import annotations

from gru4rec_conformance.implementations.registry import Registry


def pytest_conformance_register_adapters(registry: Registry) -> None:
    """Add adapters to this session's registry: ``registry.add(AdapterClass, name="x", **variant_kwargs)``.

    Called once in ``pytest_configure``, before ``--impl`` is resolved. Only conftest files loaded at start
    (the root one, or those next to the paths given on the command line) and plugins can implement it.
    """
