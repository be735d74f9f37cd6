"""Adapters of the implementations under test (one module per implementation), the protocol and the registry.

- :mod:`implementations.base`: the adapter protocol (``Adapter``, ``Capabilities``, ``Unsupported``,
  ``FitReport``), family registration;
- :mod:`implementations.registry`: ``@register``, discovery, selection by name or import path;
- :mod:`implementations.template`: a runnable adapter template for outside maintainers.

See implementations/README.md.
"""

from gru4rec_conformance.implementations.base import Adapter, Capabilities, FitReport, StepTrace, Unsupported

__all__ = ["Adapter", "Capabilities", "FitReport", "StepTrace", "Unsupported"]
