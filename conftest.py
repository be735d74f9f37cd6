"""Root pytest plugin of the conformance suite: kept thin, the logic lives in conformance/_harness/.

Loading it from the root conftest puts the repository root on sys.path (pytest's rootdir conftest rule),
so the suite runs from its checkout without being installed. ``pytester`` is loaded for the suite's own
tests of the plugin (tests/harness, tests/meta).
"""

pytest_plugins = ["conformance._harness.plugin", "pytester"]
