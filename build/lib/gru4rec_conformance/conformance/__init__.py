"""Conformance checks (``conformance/<family>/``), the strict xfail registry (``conformance/xfails/``) and the
pytest plugin that runs them (``conformance/_harness/``). See conformance/README.md."""
