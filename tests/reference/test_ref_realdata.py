"""End to end on real data: the reference against the official port's recorded Recall@20 / MRR@20.

Data: ../shared/data/sessions/yoochoose/rsc15_100k_prepared (train_full → test; skipped when absent). The official
numbers were recorded by make_golden_fixtures.py (fixtures/e2e_yoochoose_100k.json: the study's Yoochoose
cross-entropy and BPR-max parameters with layers=[100], 3 epochs, seeds 1, 2, 3, conservative ranking); only the
reference is trained here.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from gru4rec_conformance.reference.gru4rec import GRU4Rec

E2E_PATH = Path(__file__).parent / "fixtures" / "e2e_yoochoose_100k.json"
E2E = json.loads(E2E_PATH.read_text())
METRICS = ("recall@20", "mrr@20")


def _train_eval(data, config: str, seed: int) -> dict:
    g = GRU4Rec(seed=seed, **E2E["runs"][config]["params"])
    g.fit(data["train_full"])
    return g.evaluate(data["test"], cutoffs=E2E["cutoffs"], batch_size=E2E["eval_batch_size"], mode=E2E["mode"])


def test_one_epoch_cross_entropy_single_seed(yoochoose_100k):
    """Quick check of the default run: one seed, one epoch, within 3% relative of the official mean (the
    full protocol, 2% on the mean of three seeds, is the slow test below)."""
    m = _train_eval(yoochoose_100k, "cross-entropy-1epoch", seed=1)
    off = E2E["runs"]["cross-entropy-1epoch"]["official_mean"]
    assert m["n_events"] == E2E["runs"]["cross-entropy-1epoch"]["n_events"]
    for k in METRICS:
        assert abs(m[k] / off[k] - 1) <= 0.03, f"{k}: reference {m[k]:.4f} vs official mean {off[k]:.4f}"


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["cross-entropy", "bpr-max"])
def test_three_seeds_match_official_within_2_percent(yoochoose_100k, loss):
    """The issue's protocol: 3 epochs, seeds 1–3, mean Recall@20 and MRR@20 within 2% relative."""
    runs = [_train_eval(yoochoose_100k, loss, seed) for seed in E2E["seeds"]]
    off = E2E["runs"][loss]["official_mean"]
    for k in METRICS:
        ours = float(np.mean([r[k] for r in runs]))
        spread = float(np.std([r[k] for r in runs], ddof=1))
        assert abs(ours / off[k] - 1) <= 0.02, (
            f"{loss} {k}: reference mean {ours:.4f} (sd {spread:.4f}) vs official mean {off[k]:.4f}"
        )


def test_recorded_official_and_reference_runs_agree():
    """The fixture itself: both sides recorded in the same run agree within 2% on the mean of three seeds."""
    for loss in ("cross-entropy", "bpr-max"):
        r = E2E["runs"][loss]
        assert len(r["official"]) == len(r["reference"]) == 3
        for k in METRICS:
            assert abs(r["reference_mean"][k] / r["official_mean"][k] - 1) <= 0.02, (loss, k)
