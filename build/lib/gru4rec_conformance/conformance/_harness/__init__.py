"""The conformance harness: pytest plugin, implementation handles, worker isolation, xfail registry, recording.

Modules: :mod:`.plugin` (hooks, options, fixtures), :mod:`.handle` (the ``impl`` fixture's value),
:mod:`.isolation` / :mod:`.worker` / :mod:`.codec` (adapters in worker processes), :mod:`.xfails` (registry
format and matching), :mod:`.recording` (per-check result records), :mod:`.runinfo` (versions, metadata).
"""
