"""An adapter for the worker thread-pinning test (tests/harness/test_isolation.py): imported by the worker
process through its PYTHONPATH; ``build`` imports torch (as a real adapter would), ``optimizer_info`` reports the
thread variables the worker sees and torch's intra-op thread count."""

from __future__ import annotations

import os
import sys

from gru4rec_conformance.conformance._harness.isolation import THREAD_VARS, WORKER_THREADS_ENV
from gru4rec_conformance.implementations.template import TemplateAdapter


class ThreadProbe(TemplateAdapter):
    """TemplateAdapter that imports torch in ``build`` and reports thread settings in ``optimizer_info``."""

    def build(self, seed: int, **hparams):
        import torch  # noqa: F401  (imported inside a call, as adapters do)

        return super().build(seed=seed, **hparams)

    def optimizer_info(self) -> dict:
        torch = sys.modules.get("torch")
        return {
            "env": {v: os.environ.get(v) for v in (*THREAD_VARS, WORKER_THREADS_ENV)},
            "torch_threads": torch.get_num_threads() if torch is not None else None,
        }
