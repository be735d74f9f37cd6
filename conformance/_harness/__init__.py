"""The conformance harness: pytest plugin, implementation handles, worker isolation, xfail registry, recording.

Modules: :mod:`.plugin` (the pytest plugin: gathers the hooks and fixtures of :mod:`.options`,
:mod:`.session`, :mod:`.collection`, :mod:`.running`, :mod:`.fixtures`, :mod:`.reporting` and :mod:`.gate`;
:mod:`.state` is what they share), :mod:`.handle` (the ``impl`` fixture's value), :mod:`.isolation` /
:mod:`.worker` / :mod:`.codec` (adapters in worker processes), :mod:`.validation` (adapter results checked
against the protocol), :mod:`.recording` (per-check records from pytest's reports). The records themselves,
the xfail registry, run metadata and the verdict are the layer below, ``conformance._records``.
"""
