"""K10 runnability (docs/checks.md, K10): every advertised option trains and scores, on every declared
device. Checks RN-1 (option smoke matrix) and RN-2 (device parity, GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from gru4rec_conformance.conformance.gru4rec._common import ADAGRAD, build, embedding_mode, lag1_test_pairs, recall_at
from gru4rec_conformance.implementations.base import Unsupported

_FINAL_ACT_VALUES = {
    "linear": "linear",
    "elu": "elu-1",
    "tanh": "tanh",
    "relu": "relu",
    "leaky": "leaky-0.1",
    "selu": "selu-1.05-1.67",
    "softmax": "softmax",
    "softmax_logit": "softmax_logit",
}


def _options():
    out = []
    for loss in ("cross-entropy", "bpr-max", "top1", "top1-max", "bpr"):
        out.append(pytest.param({"loss": loss}, marks=pytest.mark.loss(loss), id=f"loss:{loss}"))
    modes = {
        "none": {"embedding": 0, "constrained_embedding": False},
        "separate": {"embedding": 16, "constrained_embedding": False},
        "shared": {"constrained_embedding": True},
    }
    for mode, cfg in modes.items():
        out.append(pytest.param(cfg, marks=pytest.mark.embedding(mode), id=f"embedding:{mode}"))
    # sizes: embedding ≠ hidden, unequal and odd layer sizes (a model tied to "embedding = hidden" or to one
    # layer size only crashes here, not with the 16/16 above)
    sizes = {
        "separate-13-hidden-16": ({"embedding": 13, "constrained_embedding": False, "layers": [16]}, "separate"),
        "separate-7-layers-15-9": ({"embedding": 7, "constrained_embedding": False, "layers": [15, 9]}, "separate"),
        "none-layers-17-11": ({"embedding": 0, "constrained_embedding": False, "layers": [17, 11]}, "none"),
        "shared-layers-13-7": ({"constrained_embedding": True, "layers": [13, 7]}, "shared"),
    }
    for name, (cfg, mode) in sizes.items():
        out.append(pytest.param(cfg, marks=pytest.mark.embedding(mode), id=f"sizes:{name}"))
    for fam, value in _FINAL_ACT_VALUES.items():
        loss = "cross-entropy" if fam.startswith("softmax") else "bpr-max"
        out.append(
            pytest.param(
                {"final_act": value, "loss": loss},
                marks=[pytest.mark.final_act(fam), pytest.mark.loss(loss)],
                id=f"final_act:{fam}",
            )
        )
    return out


@pytest.mark.check("RN-1", kind="K10")
@pytest.mark.parametrize("option", _options())
def test_rn1_option_smoke(impl, d_lag1, option, record_metric):
    """Every declared loss, embedding mode and final activation trains and scores, with finite scores.

    Every declared loss, embedding mode and final activation trains one epoch on D-LAG1 and scores 10
    prefixes without an exception and with finite scores; so do unequal sizes (separate embedding 13 with
    hidden 16, embedding 7 with layers [15, 9], no embedding with layers [17, 11], shared with [13, 7]). A
    failure names the configuration and the call (fit or score_prefixes) that raised."""
    req, opt = embedding_mode({**option, "n_epochs": 1})
    opt = dict(layers=[16], batch_size=32, n_sample=8, learning_rate=0.05, **opt)
    config = ", ".join(f"{k}={v!r}" for k, v in {**opt, **req}.items() if k in (*option, "layers", "n_epochs"))
    model = build(impl, req, opt)
    prefixes, _ = lag1_test_pairs(d_lag1.test)
    stage = "fit"
    try:
        rep = model.fit(d_lag1.train)
        stage = "score_prefixes"
        s = np.asarray(model.score_prefixes(prefixes[:10]), dtype=np.float64)
    except Unsupported:
        raise
    except Exception as exc:
        pytest.fail(f"configuration ({config}): {stage} raised {type(exc).__name__}: {exc}".rstrip(), pytrace=False)
    record_metric("final epoch loss", float(rep.epoch_losses[-1]) if rep.epoch_losses else None)
    assert s.shape[0] == 10 and np.isfinite(s).all(), f"configuration ({config}): non-finite or missing scores"
    assert rep.epoch_losses, (
        f"configuration ({config}): fit reported no training epoch (1 was asked for; EB-3 checks the count)"
    )
    assert np.isfinite(rep.epoch_losses).all(), f"configuration ({config}): non-finite training loss {rep.epoch_losses}"


@pytest.mark.check("RN-2", kind="K10")
@pytest.mark.gpu
@pytest.mark.feature("device:cpu", "device:cuda")
def test_rn2_device_parity(impl, d_lag1, expect):
    """CPU and GPU runs both complete and agree on Recall@1 and Recall@5 within 2% relative.

    Training, scoring and the own evaluator run on both devices (D-LAG1, 3 epochs)."""
    from gru4rec_conformance.conformance._harness.handle import Impl, ImplHandle

    cpu = Impl(
        ImplHandle(
            impl.spec, device="cpu", seeds=impl.seeds, isolation=impl.handle.isolation, settings=impl.handle.settings
        ),
        kind="K10",
    )
    try:
        prefixes, targets = lag1_test_pairs(d_lag1.test)
        req, opt = dict(n_epochs=3), dict(layers=[32], batch_size=32, n_sample=16, **ADAGRAD, learning_rate=0.1)
        results = {}
        for device, factory in (("cpu", cpu), ("cuda", impl)):
            model = build(factory, req, opt, seed=1)
            model.fit(d_lag1.train)
            results[device] = {k: recall_at(model, prefixes, targets, k) for k in (1, 5)}
            if factory.supports("hook:evaluate"):
                model.evaluate(d_lag1.test, cutoffs=(1, 5), batch_size=7)
        for k in (1, 5):
            a, b = results["cpu"][k], results["cuda"][k]
            expect(
                f"recall@{k} cuda",
                b,
                reference=a,
                tolerance=0.02 * max(a, 1e-12),
                message=f"recall@{k}: CPU {a:.4f} vs CUDA {b:.4f} (> 2% relative)",
            )
    finally:
        cpu.close()
