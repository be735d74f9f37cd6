"""Extra negative samples shared by a minibatch, from a pre-generated cache (docs/algorithm.md, 'Shared extra
samples' and 'Sample cache').

As the port's ``SampleCache``: P(item) ∝ support^sample_alpha by inverse-CDF sampling (cdf computed in float64,
last entry forced to 1, stored as float32; the sample is the first index whose cdf exceeds u ~ U[0,1)); the cache
holds ⌊sample_cache_max_size / n_sample⌋ rows of n_sample ids, one row per training step, and is regenerated only
when used up (not per epoch). Differences: the random numbers come from an explicit ``torch.Generator``; the rows of
a generation are drawn in blocks as they are needed rather than all at once.
"""

from __future__ import annotations

import numpy as np
import torch


class SampleCache:
    """Pre-generated rows of ``n_sample`` item columns drawn ∝ support^alpha.

    Args:
        supports: (n_items,) training event count of every item column.
        n_sample: S ≥ 1, ids per row (per training step).
        sample_alpha: exponent α (0 = uniform, 1 = popularity).
        cache_max_size: maximum number of ids held; rows = max(1, cache_max_size // S) (the port would fail
            with fewer than one row).
        generator: torch.Generator on ``device`` driving the uniform draws.
        device: torch device of the cache.

    The rows are consumed one per step and the cache is regenerated when all ``generate_length`` rows are used,
    as in the port. The rows of one generation are drawn on demand in blocks of at most ``block_ids`` ids
    (every row is an independent draw either way), so a short fit does not pay for 10^7 draws up front.

    Extension points: :meth:`weights` (the unnormalised distribution), :meth:`draw` (fresh ids of any shape).
    """

    #: largest number of ids drawn at once
    block_ids = 1 << 20

    def __init__(
        self,
        supports: np.ndarray,
        n_sample: int,
        sample_alpha: float,
        cache_max_size: int,
        generator: torch.Generator,
        device: torch.device,
    ):
        if n_sample < 1:
            raise ValueError(f"n_sample must be >= 1 for a sample cache, got {n_sample}")
        self.n_sample = int(n_sample)
        self.device = torch.device(device)
        self.generator = generator
        self.generate_length = max(1, int(cache_max_size) // self.n_sample)
        self.block_rows = max(1, min(self.generate_length, self.block_ids // self.n_sample))
        w = np.asarray(self.weights(np.asarray(supports, dtype=np.float64), sample_alpha), dtype=np.float64)
        cdf = w.cumsum() / w.sum()
        cdf[-1] = 1.0
        self.cdf = torch.tensor(cdf, dtype=torch.float32, device=self.device)
        self.n_refreshes = 0
        self._pointer = self.generate_length  # row of the current generation to hand out next
        self._block = torch.empty((0, self.n_sample), dtype=torch.int64, device=self.device)
        self._block_start = 0  # row of the current generation held in _block[0]

    @staticmethod
    def weights(supports: np.ndarray, sample_alpha: float) -> np.ndarray:
        """Unnormalised sampling weight of every item: support ** sample_alpha (float64)."""
        return supports**sample_alpha

    def draw(self, shape) -> torch.Tensor:
        """Fresh int64 item columns of the given shape, independent of the cache."""
        n = int(np.prod(shape))
        u = torch.rand(n, dtype=torch.float32, device=self.device, generator=self.generator)
        return torch.searchsorted(self.cdf, u, right=True).reshape(shape)

    def take(self, n_rows: int) -> torch.Tensor:
        """The next ``n_rows`` rows, (n_rows, S) int64, regenerating the cache whenever it is used up (rows are
        consumed exactly as the port's one-row-per-step ``get_sample``)."""
        parts = []
        need = n_rows
        while need > 0:
            if self._pointer >= self.generate_length:  # used up (or never filled): a new generation
                self._pointer = 0
                self._block_start = 0
                self._block = self._block[:0]
                self.n_refreshes += 1
            if self._pointer >= self._block_start + len(self._block):
                self._block_start = self._pointer
                self._block = self.draw((min(self.block_rows, self.generate_length - self._pointer), self.n_sample))
            lo = self._pointer - self._block_start
            k = min(need, len(self._block) - lo)
            parts.append(self._block[lo : lo + k])
            self._pointer += k
            need -= k
        if not parts:
            return torch.empty((0, self.n_sample), dtype=torch.int64, device=self.device)
        return parts[0] if len(parts) == 1 else torch.cat(parts)
