"""Benchmarks of GRU4Rec implementations against the reference, the study's published epoch times beside them,
and Optuna tuning (``python -m gru4rec_conformance.benchmarks.tune``). See benchmarks/README.md.

Modules: ``workload`` (dataset shapes, the study's parameters, synthetic training data), ``runners`` (the
reference, the official port from a checkout, any registered adapter, timed the same way), ``report``
(pytest-benchmark JSON → Markdown + PNG), ``tune`` (Optuna over the study's search space), ``search_space``.
"""
