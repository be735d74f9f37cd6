"""Inputs of the golden comparisons with the official port (used by make_golden_fixtures.py).

Everything here is our own synthetic data and configuration; the recorded official outputs are in
tests/reference/fixtures/ (see its README). Every input is also stored in the fixtures, so the golden tests
read only the fixtures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# ------------------------------------------------------------------------------------------------ iterator
#: (case name, batch size, n_sample)
ITERATOR_CASES = [(f"b{B}_s{S}", B, S) for B in (1, 3, 8) for S in (0, 4)]


def iterator_data() -> pd.DataFrame:
    """14 sessions of lengths 1…7 (twice), rows shuffled, start times not in session-id order, 10 items."""
    rng = np.random.default_rng(20261129)
    lengths = [1, 2, 3, 4, 5, 6, 7, 7, 6, 5, 4, 3, 2, 1]
    starts = rng.permutation(len(lengths)) * 1000
    rows = []
    for s, L in enumerate(lengths):
        for j in range(L):
            rows.append((100 + 7 * s, int(500 + rng.integers(0, 10)), int(starts[s] + 10 * j)))
    df = pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"])
    return df.sample(frac=1.0, random_state=3).reset_index(drop=True)


# ------------------------------------------------------------------------------------------------ one step
N_ITEMS = 12


def step_data() -> pd.DataFrame:
    """10 sessions over 12 items with uneven supports (all items present)."""
    rng = np.random.default_rng(7)
    rows = []
    t = 0
    items = list(range(N_ITEMS)) + list(rng.integers(0, 4, size=20)) + list(rng.integers(0, N_ITEMS, size=18))
    for i, it in enumerate(items):
        rows.append((i % 10, 2000 + int(it), t))
        t += 1
    return pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"])


def _shapes(hp: dict) -> dict:
    """Parameter shapes of the port's model for ``hp`` (our names; By as (N, 1))."""
    layers = hp["layers"]
    N = N_ITEMS
    s = {}
    shared = hp.get("constrained_embedding", True)
    emb = 0 if shared else hp.get("embedding", 0)
    start = 0
    if shared:
        n_in = layers[-1]
    elif emb:
        n_in = emb
        s["E"] = (N, emb)
    else:
        start = 1
        d0 = layers[0]
        s.update({"GE.Wx0": (N, 3 * d0), "GE.Wrz0": (d0, 2 * d0), "GE.Wh0": (d0, d0), "GE.Bh0": (3 * d0,)})
    for l in range(start, len(layers)):
        d = layers[l]
        i = n_in if l == 0 else layers[l - 1]
        s.update(
            {
                f"G.{l}.weight_ih": (3 * d, i),
                f"G.{l}.weight_hh": (3 * d, d),
                f"G.{l}.bias_ih": (3 * d,),
                f"G.{l}.bias_hh": (3 * d,),
            }
        )
    s["Wy"] = (N, layers[-1])
    s["By"] = (N, 1)
    return s


def _case(name, hp, seed, n_steps=1, b=None, S=5, masks=False):
    rng = np.random.default_rng(seed)
    B = hp["batch_size"]
    b = B if b is None else b
    weights = {}
    for k, shp in sorted(_shapes(hp).items()):
        if len(shp) == 1 or k == "By":
            weights[k] = rng.normal(0, 0.1, size=shp).astype(np.float32)
        else:
            weights[k] = rng.uniform(-0.6, 0.6, size=shp).astype(np.float32)
    hidden = [rng.normal(0, 0.5, size=(b, d)).astype(np.float32) for d in hp["layers"]]
    steps = []
    for _j in range(n_steps):
        targets = rng.choice(N_ITEMS, size=b, replace=False).astype(np.int64)
        inp = rng.integers(0, N_ITEMS, size=b).astype(np.int64)
        inp[0] = targets[1]  # an input item that is also a target (merged rows in constrained mode)
        if S:
            samples = rng.integers(0, N_ITEMS, size=S).astype(np.int64)
            samples[0] = samples[1]  # a repeated sample
            samples[2] = targets[0]  # an accidental hit
        else:
            samples = np.zeros(0, dtype=np.int64)
        st = {"in": inp, "targets": targets, "samples": samples}
        if masks:
            shared = hp.get("constrained_embedding", True)
            emb = 0 if shared else hp.get("embedding", 0)
            start = 1 if (not shared and not emb) else 0
            n_in = hp["layers"][-1] if shared else (emb if emb else hp["layers"][0])
            pe, ph = hp["dropout_p_embed"], hp["dropout_p_hidden"]
            m = {"embed": (rng.random((b, n_in)) >= pe).astype(np.float32) / (1 - pe)}
            for l in range(start, len(hp["layers"])):
                m[f"hidden.{l}"] = (rng.random((b, hp["layers"][l])) >= ph).astype(np.float32) / (1 - ph)
            st["masks"] = m
        steps.append(st)
    return {"name": name, "hp": hp, "weights": weights, "hidden": hidden, "steps": steps}


def _hp(**kw):
    base = dict(
        layers=[6],
        loss="cross-entropy",
        batch_size=4,
        learning_rate=0.05,
        momentum=0.0,
        n_sample=5,
        sample_alpha=0.5,
        constrained_embedding=True,
        embedding=0,
        elu_param=0.5,
        bpreg=1.0,
        logq=0.0,
        dropout_p_embed=0.0,
        dropout_p_hidden=0.0,
    )
    base.update(kw)
    return base


XE, BPR = "cross-entropy", "bpr-max"
NONE = dict(constrained_embedding=False, embedding=0)


def _separate(k):
    return dict(constrained_embedding=False, embedding=k)


STEP_CASES = [
    _case("xe_shared_logq0", _hp(loss=XE), 1),
    _case("xe_shared_logq1", _hp(loss=XE, logq=1.0), 2),
    _case("xe_shared_logq1_mom", _hp(loss=XE, logq=1.0, momentum=0.4), 3, n_steps=2),
    _case("xe_shared_nsample0_logq1", _hp(loss=XE, logq=1.0, n_sample=0), 4, S=0),
    _case("bprmax_shared_elu0", _hp(loss=BPR, elu_param=0.0, bpreg=0.6), 5),
    _case("bprmax_shared_elu05", _hp(loss=BPR, elu_param=0.5, bpreg=0.6), 6),
    _case("bprmax_shared_elu1_mom", _hp(loss=BPR, elu_param=1.0, bpreg=1.2, momentum=0.4), 7, n_steps=2),
    _case("xe_separate_logq1", _hp(loss=XE, logq=1.0, **_separate(5)), 8),
    _case("bprmax_separate_mom", _hp(loss=BPR, elu_param=0.5, bpreg=0.8, momentum=0.4, **_separate(7)), 9, n_steps=2),
    _case("xe_none", _hp(loss=XE, **NONE), 10),
    _case("bprmax_none_mom", _hp(loss=BPR, elu_param=0.5, bpreg=0.5, momentum=0.4, **NONE), 11, n_steps=2),
    _case("xe_shared_2layers", _hp(loss=XE, layers=[7, 5], logq=1.0), 12),
    _case("bprmax_separate_2layers_mom", _hp(loss=BPR, layers=[6, 4], momentum=0.4, **_separate(3)), 13, n_steps=2),
    _case(
        "xe_shared_dropout_masks", _hp(loss=XE, logq=1.0, dropout_p_embed=0.3, dropout_p_hidden=0.25), 14, masks=True
    ),
    _case(
        "bprmax_separate_2layers_dropout_masks",
        _hp(loss=BPR, layers=[6, 4], dropout_p_embed=0.4, dropout_p_hidden=0.2, **_separate(5)),
        15,
        masks=True,
    ),
    _case(
        "bprmax_none_dropout_masks", _hp(loss=BPR, dropout_p_embed=0.3, dropout_p_hidden=0.5, **NONE), 16, masks=True
    ),
    _case("xe_shared_tail_logq0", _hp(loss=XE), 17, b=3),
    _case("bprmax_shared_tail", _hp(loss=BPR, bpreg=0.7), 18, b=3),
]
# The tail with logQ: the port passes the nominal B as the in-batch/sample split, we use the actual b. The
# fixture records the port's loss function called both ways (M = B as in its training loop, and M = b).
_tail = _case("xe_shared_tail_logq1", _hp(loss=XE, logq=1.0), 19, b=3)
STEP_CASES.append(_tail)
_tail_b = _case("xe_shared_tail_logq1_actual_b", _hp(loss=XE, logq=1.0), 19, b=3)
_tail_b["steps"][0]["M"] = 3
STEP_CASES.append(_tail_b)

# ------------------------------------------------------------------------------------------------ evaluation
EVAL_CASE = {"n_sample": 2048, "cutoffs": [1, 2, 3, 5, 10], "batch_sizes": [1, 3, 8]}


def eval_data():
    """A (N × N) score table with many ties (row = scores after that last input item), a training frame that
    fixes the item order, and a test frame with unknown items and length-1 sessions."""
    rng = np.random.default_rng(99)
    N = 15
    ids = 700 + rng.permutation(40)[:N]
    table = rng.integers(0, 4, size=(N, N)).astype(np.float32)
    table[3] = 1.0  # a row of identical scores
    table[5, :7] = 2.5  # a block of ties
    table[7] = rng.normal(size=N).astype(np.float32)  # no ties
    train = pd.DataFrame(
        {"SessionId": np.repeat(np.arange(N), 2), "ItemId": np.repeat(ids, 2), "Time": np.arange(2 * N)}
    )
    rows = []
    t = 0
    for s in range(12):
        L = int(rng.integers(1, 6))
        for _j in range(L):
            it = int(rng.choice(ids)) if rng.random() > 0.15 else 9000 + int(rng.integers(0, 5))  # unknown
            rows.append((s, it, t))
            t += 1
    test = pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"])
    pairs = [(int(ids[i]), int(ids[j])) for i in range(N) for j in range(N) if (i + 2 * j) % 4 == 0]
    EVAL_CASE["pairs"] = pairs
    return table, train, test


eval_data()  # fills EVAL_CASE["pairs"]

# ------------------------------------------------------------------------------------------------ end to end
#: The study's Yoochoose best parameters (docs/study.md, 'Best hyperparameters'), layers scaled to [100], 3 epochs.
E2E_PARAMS = {
    "cross-entropy": dict(
        loss="cross-entropy",
        constrained_embedding=True,
        embedding=0,
        elu_param=0.0,
        layers=[100],
        n_epochs=3,
        batch_size=48,
        dropout_p_embed=0.0,
        dropout_p_hidden=0.2,
        learning_rate=0.07,
        momentum=0.0,
        n_sample=2048,
        sample_alpha=0.2,
        bpreg=0.0,
        logq=1.0,
    ),
    "bpr-max": dict(
        loss="bpr-max",
        constrained_embedding=True,
        embedding=0,
        elu_param=0.0,
        layers=[100],
        n_epochs=3,
        batch_size=48,
        dropout_p_embed=0.25,
        dropout_p_hidden=0.0,
        learning_rate=0.075,
        momentum=0.1,
        n_sample=2048,
        sample_alpha=0.2,
        bpreg=0.5,
        logq=0.0,
    ),
}
#: A one-epoch variant of the cross-entropy run, for the quick real-data test of the default test run.
E2E_PARAMS["cross-entropy-1epoch"] = {**E2E_PARAMS["cross-entropy"], "n_epochs": 1}
