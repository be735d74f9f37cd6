"""K11 initialisation (docs/checks.md, K11): every weight block is Glorot-uniform U(−σ, σ) with
σ = √(6/(fan_in + fan_out)) of the block (GRU matrices split per gate), and every bias is 0 (docs/algorithm.md,
'Initialisation'). Check IN-1.

Blocks are found from shapes alone (the protocol's get_weights has no per-parameter metadata): a 2-D parameter
with an axis of 3·d (or else 2·d) for a layer size d is split into 3 (2) gate blocks along that axis; any other
2-D parameter is one block; 1-D parameters and parameters named ``*bias*`` are biases. The check builds shapes for
which this is unambiguous (20 items, layer size 24, embedding 10).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gru4rec_conformance.conformance.gru4rec._common import build, embedding_mode

LAYER, EMB = 24, 10


def _blocks(name: str, w: np.ndarray, layers: list[int]) -> list[tuple[str, np.ndarray]]:
    for g in (3, 2):
        for ax in (0, 1):
            if any(w.shape[ax] == g * d for d in layers):
                return [(f"{name}[gate {i}]", b) for i, b in enumerate(np.split(w, g, axis=ax))]
    return [(name, w)]


MODES = {
    "none": {"embedding": 0, "constrained_embedding": False},
    "separate": {"embedding": EMB, "constrained_embedding": False},
    "shared": {"constrained_embedding": True},
}


@pytest.mark.check("IN-1", kind="K11")
@pytest.mark.hook("get_weights")
@pytest.mark.parametrize("mode", [pytest.param(m, marks=pytest.mark.embedding(m), id=m) for m in MODES])
def test_in1_glorot_uniform_per_gate(impl, d_lag1, mode, record_metric):
    """Every weight block starts Glorot-uniform U(−σ, σ) per gate and every bias starts at 0.

    Right after initialisation every weight block has max|w| in [0.9σ, σ], |mean| < σ/10 (symmetric
    U(−σ, σ), σ = √(6/(rows+cols)) per gate block) and every bias is exactly 0."""
    req, opt = embedding_mode({"layers": [LAYER], **MODES[mode]})  # "not shared" is optional (embedding_mode)
    model = build(impl, req, dict(n_sample=0, loss="cross-entropy", **opt))
    model.fit(d_lag1.train, n_epochs=0)
    problems, n_blocks = [], 0
    for name, value in model.get_weights().items():
        w = np.asarray(value, dtype=np.float64)
        if w.ndim == 1 or "bias" in name.lower() or (w.ndim == 2 and 1 in w.shape):
            if np.any(w != 0):
                problems.append(f"bias {name} is not zero (max |b| = {np.abs(w).max():.3g})")
            continue
        for bname, block in _blocks(name, w, [LAYER]):
            n_blocks += 1
            sigma = math.sqrt(6.0 / (block.shape[0] + block.shape[1]))
            m, mean = float(np.abs(block).max()), float(block.mean())
            if m > sigma * (1 + 1e-6):
                problems.append(f"{bname} {block.shape}: max|w| {m:.4g} > σ {sigma:.4g}")
            elif m < 0.9 * sigma:
                problems.append(f"{bname} {block.shape}: max|w| {m:.4g} < 0.9σ ({0.9 * sigma:.4g})")
            if abs(mean) >= sigma / 10:
                problems.append(f"{bname} {block.shape}: mean {mean:.4g} (asymmetric range; σ/10 = {sigma / 10:.4g})")
    record_metric("weight blocks checked", n_blocks, problems=len(problems))
    assert n_blocks, "get_weights returned no weight matrix"
    assert not problems, "initialisation is not per-gate Glorot-uniform with zero biases: " + "; ".join(problems[:8])
