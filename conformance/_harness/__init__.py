"""The conformance harness: pytest plugin, implementation handles, worker isolation, xfail registry, recording.

Modules: :mod:`.plugin` (the pytest plugin: gathers the hooks and fixtures of :mod:`.options`,
:mod:`.session`, :mod:`.collection`, :mod:`.running`, :mod:`.fixtures`, :mod:`.reporting` and :mod:`.gate`;
:mod:`.state` is what they share), :mod:`.handle` (the ``impl`` fixture's value), :mod:`.isolation` /
:mod:`.worker` / :mod:`.codec` (adapters in worker processes), :mod:`.validation` (adapter results checked
against the protocol), :mod:`.xfails` (registry format and matching), :mod:`.records` (the typed result records
and results.json's schema, ``results.schema.json``), :mod:`.recording` (per-check records from pytest's
reports), :mod:`.runinfo` (versions, metadata).
"""
