"""The conformance pytest plugin (the ``pytest11`` entry point; loaded by the root ``conftest.py`` in a checkout).

Options (``pytest --help``, group "conformance"): ``--impl`` (repeatable, ``all``, ``module:Class``; env
``GRU4REC_CONFORMANCE_IMPL``), ``--device``, ``--dataset``, ``--seeds``, ``--gate``, ``--resume RUN_DIR``,
``--xfail-mark``, ``--xfails``, ``--report-dir``, ``--no-report``, ``--isolation``, ``--call-timeout``,
``--worker-memory-mb``, ``--worker-network``, ``--worker-threads``, ``--keep-worker-dirs``, ``--first-run``
(short call timeouts, fast checks first, a draft xfail file at the end: :mod:`.first_run`, registered as a plugin
object of its own, like the reporter).

What it does, in hook order (the module that implements each step in brackets):

1. ``pytest_configure`` [:mod:`.session`]: registers the markers, parses the options [:mod:`.options`],
   resolves ``--impl`` against the registry (a usage error lists the registered implementations per family),
   prepares ``--resume``;
2. ``pytest_generate_tests`` [:mod:`.collection`]: parametrizes every test that uses the ``impl`` fixture over
   the selected implementations of its family (the folder ``conformance/<family>/`` or a ``family`` marker);
3. ``pytest_collection_modifyitems`` [:mod:`.collection`]: deselects checks of families without a selected
   implementation (with a note), applies the strict xfail registry (unmatched entries become failing registry
   items), deselects checks that already have a verdict in the ``--resume`` run;
4. ``pytest_runtest_setup`` / ``pytest_runtest_call`` [:mod:`.running`]: skips checks whose features/hooks are
   not declared ("unsupported by ..."), and turns :class:`~implementations.base.Unsupported` raised by the
   adapter into such a skip (or into a failure when the thing was declared);
5. ``pytest_runtest_logreport`` (controller only) [:mod:`.reporting`]: appends one result per check to the
   run's results.jsonl (records: :mod:`.records`);
6. ``pytest_sessionfinish`` [:mod:`.reporting`]: writes results.json, summary.md, summary.html and plots;
   applies ``--gate`` [:mod:`.gate`].

Fixtures [:mod:`.fixtures`]: ``impl`` (:class:`~conformance._harness.handle.Impl`), ``reference_impl``,
``record_metric``, ``expect``, ``conformance_options``, ``progress``, ``oracle_cache``.

How the hooks get registered: pytest registers this module as the plugin and collects hook implementations and
fixtures by name from its namespace, so the modules' functions are imported here, one implementation per hook
name, and nothing else registers them. (Registering each module as a plugin of its own would let several
modules implement one hook, ordered only by registration order and ``tryfirst``/``trylast``; with one plugin,
``pytest_configure`` alone decides the order of setup, and ``-p no:<this module>`` still switches all of it
off.) tests/harness/test_harness_layout.py checks that every hook and fixture of the modules is here.
"""

from __future__ import annotations

import pytest

from gru4rec_conformance.conformance._harness import hookspecs
from gru4rec_conformance.conformance._harness.collection import (
    XfailRegistryItem,
    check_id,
    pytest_collection_modifyitems,
    pytest_deselected,
    pytest_generate_tests,
    pytest_ignore_collect,
)
from gru4rec_conformance.conformance._harness.fixtures import (
    ConformanceOptions,
    Expect,
    Progress,
    conformance_options,
    expect,
    impl,
    oracle_cache,
    progress,
    record_metric,
    reference_impl,
)
from gru4rec_conformance.conformance._harness.options import ENV_IMPL, MARKERS, SUITE_CHECKS_ROOT, pytest_addoption
from gru4rec_conformance.conformance._harness.reporting import (
    pytest_report_header,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
from gru4rec_conformance.conformance._harness.running import (
    pytest_runtest_call,
    pytest_runtest_makereport,
    pytest_runtest_setup,
)
from gru4rec_conformance.conformance._harness.session import pytest_configure, pytest_unconfigure
from gru4rec_conformance.conformance._harness.state import STATE_KEY, ImplParam, State


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


__all__ = [
    # hooks
    "pytest_addhooks", "pytest_addoption", "pytest_configure", "pytest_unconfigure", "pytest_ignore_collect",
    "pytest_generate_tests", "pytest_collection_modifyitems", "pytest_deselected", "pytest_runtest_setup",
    "pytest_runtest_call", "pytest_runtest_makereport",
    "pytest_report_header", "pytest_sessionfinish", "pytest_terminal_summary",
    # fixtures
    "conformance_options", "expect", "impl", "oracle_cache", "progress", "record_metric", "reference_impl",
    # for conftests and tools (benchmarks/conftest.py reads the state)
    "ENV_IMPL", "MARKERS", "STATE_KEY", "SUITE_CHECKS_ROOT", "ConformanceOptions", "Expect", "ImplParam", "Progress",
    "State", "XfailRegistryItem", "check_id",
]  # fmt: skip
