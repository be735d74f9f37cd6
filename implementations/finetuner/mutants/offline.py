"""Offline-operation mutants (caught by FT-23 and FT-25, docs/checks.md)."""

from __future__ import annotations

import os
import urllib.request

from gru4rec_conformance.reference.finetuner import ReferenceFineTuner

from ._common import tuned_mutant

#: pytreebank 0.2.7's SST download (what the studied code fetches at import time when the trees are missing).
SST_URL = "http://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip"


class _Downloads(ReferenceFineTuner):
    def build(self, seed, init_seed=None):
        try:
            urllib.request.urlopen(SST_URL, timeout=2).close()
        except OSError:
            pass  # offline: carry on with local data, as pytreebank would not
        super().build(seed, init_seed)


MutantDownloadsData = tuned_mutant(_Downloads, "mutant_ft23_downloads_data",
                                   defect="tries to download the SST trees when building (network at run time)")  # fmt: skip


class _LaunchBlocking(ReferenceFineTuner):
    def fit(self, train, val, config=None):
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
        return super().fit(train, val, config)


MutantCudaLaunchBlocking = tuned_mutant(_LaunchBlocking, "mutant_ft25_cuda_launch_blocking",
                                        defect="sets CUDA_LAUNCH_BLOCKING=1 for the whole process")  # fmt: skip


MUTANTS = [MutantDownloadsData, MutantCudaLaunchBlocking]
