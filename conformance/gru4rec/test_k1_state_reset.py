"""K1 state reset (docs/checks.md, K1): the hidden state is zeroed exactly at session boundaries, in
training and in inference. Checks SR-1..SR-5."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.conformance.gru4rec._common import (
    ADAGRAD,
    build,
    fresh_scores,
    lag1_model,
    lag1_test_pairs,
    not_session_parallel_means,
    ranks,
    recall_at,
    session_parallel,
    target_columns,
)
from gru4rec_conformance.conformance.gru4rec._probes import STREAM_TABLE, stream_causes


def _stream_vs_fresh(adapter, test_df: pd.DataFrame, batch_size: int) -> dict:
    """Compare the implementation's own inference loop with fresh-state scoring of the same prefixes."""
    sessions = {
        sid: g.sort_values("Time", kind="stable")["ItemId"].tolist()
        for sid, g in test_df.groupby("SessionId", sort=False)
    }
    known = set(np.asarray(adapter.item_ids()).tolist())
    rows = list(adapter.score_stream(test_df, batch_size))
    assert rows, f"score_stream(batch_size={batch_size}) yielded nothing"
    prefixes, targets, stream = [], [], []
    for sid, pos, target, row in rows:
        items = [i for i in sessions[sid] if i in known]
        assert 0 < pos < len(items) and items[pos] == target, (
            f"score_stream row (session {sid}, position {pos}, target {target}) does not match the session's "
            f"known items {items}"
        )
        prefixes.append(items[:pos])
        targets.append(target)
        stream.append(row)
    fresh = fresh_scores(adapter, prefixes)
    cols = target_columns(adapter, targets)
    fresh_rank = ranks(fresh, cols)
    worst_rel, rank_mismatch = 0.0, 0
    for j, row in enumerate(stream):
        if np.ndim(row) == 0:  # the implementation reports target ranks only
            rank_mismatch += int(float(row) != fresh_rank[j])
            continue
        row = np.asarray(row, dtype=np.float64)
        scale = max(float(np.abs(fresh[j]).max()), 1e-12)
        worst_rel = max(worst_rel, float(np.abs(row - fresh[j]).max()) / scale)
        rank_mismatch += int(ranks(row[None, :], cols[j : j + 1])[0] != fresh_rank[j])
    return {"n": len(rows), "max_rel_diff": worst_rel, "rank_mismatches": rank_mismatch}


@pytest.mark.check("SR-1", kind="K1")
@pytest.mark.hook("score_stream")
@diagnosis.causes(*STREAM_TABLE)
def test_sr1_stream_equals_fresh(impl, d_lag1, expect):
    """The own inference loop scores every test event exactly like fresh-state scoring of its prefix.

    The implementation's own inference loop scores every test event exactly as fresh-state scoring of its
    prefix, for evaluation batch sizes 1, 3 and 7 (no state leak, no false reset)."""
    model = lag1_model(impl, d_lag1)
    problems = []
    for b in (1, 3, 7):
        r = _stream_vs_fresh(model, d_lag1.test, b)
        close = expect.holds(
            f"max relative score difference (batch {b})",
            r["max_rel_diff"],
            lt=1e-4,
            reference=0.0,
            rule="stream vs fresh-state scores: < 1e-4 relative, ranks identical",
            events=r["n"],
        )
        if not close or r["rank_mismatches"]:
            problems.append(
                f"batch {b}: max relative difference {r['max_rel_diff']:.3g}, "
                f"{r['rank_mismatches']}/{r['n']} target ranks differ"
            )
    if problems:
        # the loop's rows differ: the state, or an evaluator that alters the scores before ranking (probes)
        diagnosis.fail("score_stream differs from fresh-state scoring", stream_causes(model, d_lag1.test),
                       "; ".join(problems))  # fmt: skip


@pytest.mark.check("SR-2", kind="K1")
@pytest.mark.hook("score_stream")
@diagnosis.causes(*STREAM_TABLE)
def test_sr2_first_event_after_switch(impl, d_lag1):
    """A session entering a used lane starts from a zero state (first prediction = fresh scoring).

    After session A ends in a lane, the first prediction of session B in that lane equals fresh-state
    scoring of [b1] (one lane, evaluation batch size 1; two test sessions). Which of the two runs second is read
    from the order in which ``score_stream`` yields them, not predicted from start times or ids: an implementation
    that fills lanes in session-id order would otherwise be checked on the session it ran first."""
    model = lag1_model(impl, d_lag1)
    ids = d_lag1.test.groupby("SessionId")["Time"].min().sort_values(kind="stable").index[:2].tolist()
    test = d_lag1.test[d_lag1.test["SessionId"].isin(ids)]
    stream = list(model.score_stream(test, 1))
    order = list(dict.fromkeys(r[0] for r in stream))  # sessions in the order the one lane took them
    assert sorted(order) == sorted(ids), (
        f"score_stream of sessions {ids} with one lane yielded predictions for sessions {order}"
    )
    first, second = order
    b_items = test[test["SessionId"] == second].sort_values("Time")["ItemId"].tolist()
    rows = [r for r in stream if r[0] == second and r[1] == 1]
    assert len(rows) == 1, f"score_stream yielded {len(rows)} rows for the first prediction of session {second}"
    row = rows[0][3]
    fresh = fresh_scores(model, [[b_items[0]]])[0]
    if np.ndim(row) == 0:
        want = ranks(fresh[None, :], target_columns(model, [b_items[1]]))[0]
        assert float(row) == want, f"first-event rank {row} after a session switch, fresh-state rank {want}"
        return
    rel = float(np.abs(np.asarray(row, dtype=np.float64) - fresh).max() / max(np.abs(fresh).max(), 1e-12))
    if not rel < 1e-4:
        diagnosis.fail(
            f"first event of session {second} (after session {first} in the same lane) differs from "
            f"fresh-state scoring of [{b_items[0]}] by {rel:.3g} relative",
            stream_causes(model, test, batch_size=1),
        )


def _dlong_diagnosis(model, d_long) -> dict:
    """Recall@1 of t_k after [a_k, n1, n2, n3] and what the eight predictions look like."""
    prefixes, answers = d_long.meta["prefixes"], d_long.meta["answers"]
    s = fresh_scores(model, prefixes)
    cols = target_columns(model, answers)
    r = ranks(s, cols)
    top = np.asarray(model.item_ids())[np.argmax(s, axis=1)]
    return {
        "recall": float(np.mean(r <= 1)),
        "distinct_top1": len(set(top.tolist())),
        "top1_is_answer": int(np.isin(top, answers).sum()),
        "top1_is_filler": int(np.isin(top, d_long.meta["filler_items"]).sum()),
        "n": len(prefixes),
    }


@pytest.mark.check("SR-3", kind="K1")
def test_sr3_long_range_dependency(impl, d_long, d_lag1, expect):
    """A dependency three steps back is learnt from equal-length sessions (no false resets in training).

    A dependency three steps back is learnt from equal-length sessions (D-LONG, B=8, no extra samples,
    20 epochs, Adagrad lr 0.1 where the implementation has Adagrad, else its own optimizer at its defaults):
    fresh-state Recall@1 of t_k after [a_k, n1, n2, n3] >= 0.9 (a last-item model gets 1/8).

    Control (scaled down from the spec's "same settings" to 5 epochs for CPU time): the same settings reach
    Recall@1 >= 0.9 on D-LAG1, else the verdict is "inconclusive" (reported as a failure)."""
    req = dict(layers=[32], batch_size=8, n_epochs=20)
    opt = dict(
        **ADAGRAD,
        learning_rate=0.1,
        n_sample=0,
        dropout_p_embed=0.0,
        dropout_p_hidden=0.0,
        momentum=0.0,
        loss="cross-entropy",
    )
    model = build(impl, req, opt)
    model.fit(d_long.train)
    diag = _dlong_diagnosis(model, d_long)
    recall = diag["recall"]
    learnt = expect.holds(
        "D-LONG recall@1",
        recall,
        ge=0.9,
        reference=1.0,
        rule="pass if >= 0.9 (chance 0.125)",
        distinct_top1_predictions=diag["distinct_top1"],
        keys=diag["n"],
    )
    control = build(impl, {**req, "n_epochs": 5}, opt)
    control.fit(d_lag1.train)
    p, t = lag1_test_pairs(d_lag1.test)
    control_recall = recall_at(control, p, t, 1)
    if not expect.holds("D-LAG1 control recall@1", control_recall, ge=0.9, reference=1.0, rule="control >= 0.9"):
        why = (
            "the implementation does not learn a first-order sequence at these settings (the optimizer and "
            "learning rate used are listed in this check's report; see also OP-*, LF-5)"
        )
        if not session_parallel(impl):
            why += "; " + not_session_parallel_means(
                impl,
                f"nothing about state resets either (on D-LONG {diag['top1_is_filler']} of the {diag['n']} top-1 "
                f"items are the fillers n1..n3, which are in every session; D-LONG Recall@1 {recall:.3f}); cause "
                "not isolated; candidates: negatives that exclude the session's own items (so those are never "
                "pushed down), too little training at these settings",
            )
        pytest.fail(
            f"inconclusive: the control (same settings, 5 epochs on D-LAG1) reaches Recall@1 "
            f"{control_recall:.3f} < 0.9, so nothing can be concluded about state resets: {why}"
        )
    if learnt:
        return
    measured = (
        f"D-LONG Recall@1 {recall:.3f} (expected >= 0.9; chance and a last-item model 0.125), with the D-LAG1 "
        f"control at {control_recall:.3f}; the top-1 items after the {diag['n']} prefixes [a_k, n1, n2, n3] are "
        f"{diag['distinct_top1']} distinct item(s), {diag['top1_is_answer']} of the {diag['n']} are answer items "
        "t_j"
    )
    if not session_parallel(impl):
        # no lanes and no resets inside a sequence: the lane/reset causes below do not apply
        cause = not_session_parallel_means(
            impl,
            "that the sequence model does not carry a_k to the fourth position (there are no lanes to reset): "
            f"{diag['top1_is_filler']} of the {diag['n']} top-1 items are the fillers n1..n3, which are in every "
            "session; cause not isolated; candidates: negatives that exclude the session's own items (fillers "
            "never pushed down), a history cut to the last items, padding/masking that hides the first item "
            "(SR-5 tells whether the first item reaches the prediction at all)",
        )
    elif diag["distinct_top1"] <= 1:
        cause = (
            "the prediction after the fillers does not depend on a_k at all: the state carrying a_k is lost "
            "before the prediction; cause not isolated; candidates: a reset in training at every step of "
            "equal-length runs (a stale reset mask: SR-4 traces resets), a reset or unused state in fresh-state "
            "scoring (SR-5 tells)"
        )
    elif diag["top1_is_answer"] == diag["n"]:
        cause = (
            "the predictions depend on a_k and are answer items, but often the wrong one: the state carries "
            "something of a_k and the dependency is learnt only partly; cause not isolated; candidates: state "
            "resets in part of the training steps (some lanes or runs: SR-4 traces resets), too little training "
            "for a three-step dependency at these settings"
        )
    else:
        cause = (
            "the predictions depend on a_k but are mostly not answer items: the three-step dependency is not "
            "learnt although the first-order control is; cause not isolated; candidates: state resets in part "
            "of the training steps (SR-4 traces resets), too little training for a three-step dependency"
        )
    pytest.fail(f"{measured}: {cause}")


@pytest.mark.check("SR-4", kind="K1")
@pytest.mark.hook("trace")
def test_sr4_hidden_state_trace(impl, d_long, expect):
    """In training the hidden state is zero exactly for lanes at the first event of their session.

    Trace of ‖h_in‖ per lane and step over one epoch (D-LONG, B=8, so runs span whole sessions)."""
    model = build(
        impl,
        dict(layers=[32], batch_size=8, n_epochs=1),
        dict(n_sample=0, learning_rate=0.1, dropout_p_embed=0.0, dropout_p_hidden=0.0),
    )
    model.trace(True)
    rep = model.fit(d_long.train)
    assert rep.trace, "trace(True) was set but FitReport.trace is empty"
    leaks = false_resets = lanes = 0
    for t in rep.trace:
        sid = np.asarray(t.session_ids)
        pos = np.asarray(t.positions)
        norm = np.asarray(t.h_in_norms, dtype=np.float64)
        active = sid != -1
        lanes += int(active.sum())
        leaks += int(((pos == 0) & (norm != 0) & active).sum())
        false_resets += int(((pos > 0) & (norm == 0) & active).sum())
    no_leak = expect.holds(
        "lane-steps with state at a session start", leaks, reference=0, tolerance=0, lane_steps=lanes
    )
    no_false_reset = expect.holds("lane-steps with zero state inside a session", false_resets, reference=0, tolerance=0)
    meaning = (
        "(leak) and {f} continue a session from a zero state (false reset)"
        if session_parallel(impl)
        else "and {f} continue a session from a zero state; "
        + not_session_parallel_means(
            impl,
            "that padding or another row reaches a sequence's first event (non-zero there), or that the history "
            "is cut (zero later): rows are not lanes, there is no reset between sessions to blame",
        )
    )
    assert no_leak and no_false_reset, (
        f"of {lanes} lane-steps, {leaks} start a session with a non-zero state " + meaning.format(f=false_resets)
    )


@pytest.mark.check("SR-5", kind="K1")
def test_sr5_state_is_used(impl, d_long, expect):
    """Predictions depend on items before the last one (the state is carried, also in inference).

    Fresh-state scores after [a_k, n1, n2, n3] differ between the eight keys a_k: the state carries the
    first item through three steps (no reset at every step, also not in inference)."""
    model = build(impl, dict(layers=[32], batch_size=8, n_epochs=1), dict(n_sample=0, learning_rate=0.1))
    model.fit(d_long.train)
    s = fresh_scores(model, d_long.meta["prefixes"])
    scale = np.linalg.norm(s, axis=1).max()
    gaps = [np.linalg.norm(s[i] - s[j]) / scale for i in range(len(s)) for j in range(i + 1, len(s))]
    cause = (
        "the first item does not reach the prediction; cause not isolated; candidates: the state is reset, the "
        "state is not used"
        if session_parallel(impl)
        else not_session_parallel_means(
            impl,
            "that the first item does not reach the prediction (there are no lanes to reset); cause not isolated; "
            "candidates: the history is cut to the last item(s), padding/masking hides the first item",
        )
    )
    expect(
        "min pairwise relative score gap",
        min(gaps),
        gt=1e-4,
        message=f"scores after [a_k, n1, n2, n3] are identical for some keys (min relative gap {min(gaps):.3g}): "
        f"{cause}",
    )
