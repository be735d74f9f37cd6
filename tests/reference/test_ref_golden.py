"""Golden tests: the reference against outputs recorded from the official PyTorch port (fixtures/README.md).

The official code is not needed here; its outputs were recorded by make_golden_fixtures.py.
"""
import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.reference.gru4rec import GRU4Rec, SessionParallelIterator, evaluate_prefix_scorer, rank
from gru4rec_conformance.reference.gru4rec.data import build_training_data

from ref_golden_cases import ITERATOR_CASES, STEP_CASES as _STEP_DEFS

FIXTURES = Path(__file__).parent / "fixtures"

RTOL = 1e-5


@functools.lru_cache(maxsize=None)
def _load(name):
    path = FIXTURES / name
    if not path.exists():
        pytest.fail(f"golden fixture {path} is missing; regenerate it with tests/reference/make_golden_fixtures.py")
    with np.load(path, allow_pickle=False) as z:
        return dict(z)


def _frame(fx, prefix="data"):
    return pd.DataFrame({"SessionId": fx[f"{prefix}.SessionId"], "ItemId": fx[f"{prefix}.ItemId"],
                         "Time": fx[f"{prefix}.Time"]})


def assert_close(ours, official, what, rtol=RTOL):
    """Elementwise |ours − official| ≤ rtol·|official| + rtol·0.1·max|official| (a floor for entries near 0)."""
    ours = np.asarray(ours, dtype=np.float64)
    official = np.asarray(official, dtype=np.float64)
    assert ours.shape == official.shape, f"{what}: shape {ours.shape} != {official.shape}"
    scale = max(float(np.abs(official).max(initial=0.0)), 1e-30)
    np.testing.assert_allclose(ours, official, rtol=rtol, atol=rtol * 0.1 * scale, err_msg=what)


# ------------------------------------------------------------------------------------------------ iterator
ITER_CASES = [name for name, _, _ in ITERATOR_CASES]


def _our_sequence(d, B, S):
    it = SessionParallelIterator(d, B, stop_below_two_lanes=(S == 0))
    ins, outs, resets, lanes = [], [], [], []
    for run in it:
        for i in range(run.n_steps):
            m = it.reset_mask(run, i)
            ins.append(run.in_items[i])
            outs.append(run.out_items[i])
            resets.append(np.zeros(run.n_lanes, bool) if m is None else m)
            lanes.append(run.n_lanes)
    return np.concatenate(ins), np.concatenate(outs), np.concatenate(resets), np.asarray(lanes)


@pytest.mark.parametrize("case", ITER_CASES)
def test_iterator_sequence_matches_official(case):
    fx = _load("iterator_golden.npz")
    B, S = (int(x[1:]) for x in case.split("_"))
    df = _frame(fx)
    d = build_training_data(df, "ItemId", "SessionId", "Time")
    np.testing.assert_array_equal(d.item_ids, fx[f"{case}.item_ids"])
    xin, xout, reset, lanes = _our_sequence(d, B, S)
    np.testing.assert_array_equal(lanes, fx[f"{case}.lanes"])
    np.testing.assert_array_equal(xin, fx[f"{case}.in"])
    np.testing.assert_array_equal(xout, fx[f"{case}.out"])
    np.testing.assert_array_equal(reset, fx[f"{case}.reset"])
    assert np.all(fx[f"{case}.n_samples"] == S)


@pytest.mark.parametrize("case", ITER_CASES)
def test_training_loop_follows_official_lanes_and_resets(case):
    """The real fit loop: lane counts, S negatives per step, zero input state exactly on the port's resets."""
    fx = _load("iterator_golden.npz")
    B, S = (int(x[1:]) for x in case.split("_"))
    traces = []
    g = GRU4Rec(layers=[4], batch_size=B, n_sample=S, seed=1)
    g.fit(_frame(fx), n_epochs=1, sample_cache_max_size=64, trace=traces.append)
    lanes = fx[f"{case}.lanes"]
    assert [t.n_active for t in traces] == list(lanes)
    assert all(len(t.negative_ids) == S for t in traces)
    official_reset = np.split(fx[f"{case}.reset"], np.cumsum(lanes)[:-1])
    for j, (t, r) in enumerate(zip(traces, official_reset)):
        if j == 0:
            assert np.all(t.h_in_norms == 0)  # epoch start: zero state
        else:
            np.testing.assert_array_equal(t.h_in_norms == 0, r)


# ------------------------------------------------------------------------------------------------ one step
STEP_CASES = [c["name"] for c in _STEP_DEFS]


def _run_case(name):
    fx = _load("step_golden.npz")
    assert name in json.loads(str(fx["cases_json"])), f"{name} not recorded: regenerate the step fixture"
    hp = json.loads(str(fx[f"{name}.hp_json"]))
    g = GRU4Rec(seed=0, **hp)
    g.fit(_frame(fx), n_epochs=0, sample_cache_max_size=100)
    ids = g.item_ids()
    np.testing.assert_array_equal(ids, fx[f"{name}.item_ids"])
    names = sorted(k[len(f"{name}.w0."):] for k in fx if k.startswith(f"{name}.w0."))
    assert sorted(g.get_weights()) == names
    g.set_weights({k: fx[f"{name}.w0.{k}"] for k in names})
    hidden = [fx[f"{name}.hidden.{j}"] for j in range(len(hp["layers"]))]
    results = []
    for s in range(int(fx[f"{name}.n_steps"])):
        p = f"{name}.s{s}"
        masks = {k[len(p) + 6:]: fx[k] for k in fx if k.startswith(f"{p}.mask.")}
        res = g.train_step(ids[fx[f"{p}.in"]], ids[fx[f"{p}.targets"]], ids[fx[f"{p}.samples"]], hidden=hidden,
                           dropout_masks=masks, return_grads=True)
        results.append((res, g.get_weights()))
        hidden = res.hidden
    return hp, names, results


@pytest.mark.parametrize("case", [c for c in STEP_CASES if c != "xe_shared_tail_logq1"])
def test_training_step_matches_official(case):
    """Loss, every gradient, every parameter after the update (and its delta) and the new hidden state agree
    with the port to 1e-5 relative, from the same weights, batch, hidden state, samples and dropout masks."""
    fx = _load("step_golden.npz")
    hp, names, results = _run_case(case)
    w_prev = {k: fx[f"{case}.w0.{k}"].reshape(-1) if k == "By" else fx[f"{case}.w0.{k}"] for k in names}
    for s, (res, w) in enumerate(results):
        p = f"{case}.s{s}"
        assert_close(res.loss, fx[f"{p}.loss"], f"{p} loss")
        for k in names:
            off_g = fx[f"{p}.grad.{k}"].reshape(res.grads[k].shape)
            assert_close(res.grads[k], off_g, f"{p} grad {k}")
            off_w = fx[f"{p}.w.{k}"].reshape(w[k].shape)
            assert_close(w[k], off_w, f"{p} weights {k}")
            assert_close(w[k] - w_prev[k], off_w - w_prev[k], f"{p} update of {k}", rtol=1e-4)
        for j, h in enumerate(res.hidden):
            assert_close(h, fx[f"{p}.H.{j}"], f"{p} hidden {j}")
        w_prev = {k: fx[f"{p}.w.{k}"].reshape(w[k].shape) for k in names}


def test_tail_logq_uses_actual_lane_count():
    """Deliberate difference: in a shrinking tail step (b < B) logQ treats the first b columns as in-batch.
    Our step equals the port's loss function called with M = b, and differs from the port's training loop,
    which passes M = B."""
    fx = _load("step_golden.npz")
    _, _, results = _run_case("xe_shared_tail_logq1")
    ours = results[0][0].loss
    assert int(fx["xe_shared_tail_logq1.s0.M"]) == 4 and int(fx["xe_shared_tail_logq1_actual_b.s0.M"]) == 3
    assert_close(ours, fx["xe_shared_tail_logq1_actual_b.s0.loss"], "tail loss with actual b")
    port = float(fx["xe_shared_tail_logq1.s0.loss"])
    assert abs(ours - port) > 1e-3 * abs(port)


# ------------------------------------------------------------------------------------------------ evaluation


def _table_scorer(table, ids):
    col = {v: i for i, v in enumerate(ids)}

    def score_prefixes(prefixes):
        return np.stack([table[col[p[-1]]] for p in prefixes])
    return score_prefixes


@pytest.mark.parametrize("mode", ["standard", "conservative"])
def test_ranks_and_metrics_match_official_on_planted_ties(mode):
    fx = _load("eval_golden.npz")
    table, ids = fx["table"], fx["item_ids"]
    col = {v: i for i, v in enumerate(ids)}
    pairs = fx["pairs"]
    ours = rank(table[[col[a] for a, _ in pairs]], [col[b] for _, b in pairs], mode)
    np.testing.assert_array_equal(ours, fx[f"{mode}.pair_ranks"])
    test = _frame(fx, "test")
    cutoffs = [int(c) for c in fx["cutoffs"]]
    for bs in (1, 3, 8):
        m = evaluate_prefix_scorer(_table_scorer(table, ids), ids, test, cutoffs=cutoffs, mode=mode, batch_size=bs)
        np.testing.assert_array_equal([m[f"recall@{c}"] for c in cutoffs], fx[f"{mode}.b{bs}.recall"])
        # the port sums MRR in float32
        np.testing.assert_allclose([m[f"mrr@{c}"] for c in cutoffs], fx[f"{mode}.b{bs}.mrr"], rtol=1e-6)


def test_median_tie_mode_works_where_the_port_fails():
    """Deliberate difference: the port's median branch raises; ours is 1 + #greater + (#equal − 1)/2."""
    fx = _load("eval_golden.npz")
    errors = json.loads(str(fx["errors_json"]))
    assert "median" in errors and errors["median"].startswith("TypeError")
    table, ids = fx["table"], fx["item_ids"]
    col = {v: i for i, v in enumerate(ids)}
    for a, b in fx["pairs"]:
        row, t = table[col[a]], col[b]
        want = 1 + np.sum(row > row[t]) + 0.5 * (np.sum(row == row[t]) - 1)
        assert rank(row[None], [t], "median")[0] == want
    std, cons = fx["standard.pair_ranks"], fx["conservative.pair_ranks"]
    med = rank(table[[col[a] for a, _ in fx["pairs"]]], [col[b] for _, b in fx["pairs"]], "median")
    np.testing.assert_allclose(med, (std + cons) / 2)
