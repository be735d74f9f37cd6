"""Small synthetic session data for the reference GRU4Rec tests."""

from __future__ import annotations

import numpy as np
import pandas as pd


def lag1_sessions(
    seed: int = 0,
    n_sessions: int = 400,
    n_items: int = 20,
    min_len: int = 4,
    max_len: int = 8,
    first_session: int = 0,
    t0: float = 0.0,
) -> pd.DataFrame:
    """D-LAG1-like data: items in a deterministic cycle i → (i+1) mod K, random start items and lengths."""
    rng = np.random.default_rng(seed)
    rows = []
    t = t0
    for s in range(n_sessions):
        L = int(rng.integers(min_len, max_len + 1))
        start = int(rng.integers(n_items))
        for j in range(L):
            rows.append((first_session + s, 1000 + (start + j) % n_items, t))
            t += 1.0
    return pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"])
