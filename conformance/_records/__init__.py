"""The run records: what a conformance run writes and what its verdict is read from.

Modules: :mod:`.records` (the typed result records and results.json's schema, ``results.schema.json``),
:mod:`.runinfo` (suite version, environment metadata), :mod:`.xfails` (the xfail registry's format, provenance
and matching) and :mod:`.verdict` (the conformance status computed from a run's records).

This layer sits below the harness (``conformance/_harness/``), the reports (``reports/``) and the benchmarks,
which all import it; it imports none of them (pyproject.toml ``[tool.importlinter]`` holds that contract).
"""
