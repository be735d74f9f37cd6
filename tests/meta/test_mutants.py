"""Every mutant is caught by the checks that claim it, the other checks stay quiet on it, and the reference
fails no check (docs/checks.md; implementations/mutants/).

The default test runs each mutant on the checks of its kind, its declared catches and a cheap cross-section
(meta_matrix.CROSS_SECTION), and the reference on every non-slow, non-metric check, in one inner pytest run
(pytest-xdist, 2 workers). The slow test runs every mutant on every check, metric conformance included. Both
write the mutant × check matrix to reports/out/meta/<UTC timestamp>/mutant_matrix.{md,json}. The slow metric
meta-test runs MC-1..3 alone on the mutants that declare them and on the reference (a few minutes).
"""

from __future__ import annotations

import meta_matrix
import pytest

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.implementations.base import GRU4REC_KINDS
from gru4rec_conformance.implementations.mutants import mutant_classes

MUTANTS = mutant_classes()
CPU_MUTANTS = [m for m in MUTANTS if m.needs_device in (None, "cpu")]
DEFAULT_MARKS = "not slow and not metric and not gpu"


def test_mutant_declarations_are_consistent():
    """Every mutant names a kind, a catalogue defect and at least one catching check of its own kind; every
    check it names exists under conformance/gru4rec/."""
    checks = meta_matrix.declared_checks()
    problems = []
    names = [m.name for m in MUTANTS]
    if len(set(names)) != len(names):
        problems.append("duplicate mutant names")
    for m in MUTANTS:
        if m.kind not in GRU4REC_KINDS or not m.defect or not m.caught_by:
            problems.append(f"{m.name}: kind {m.kind!r}, defect {m.defect!r}, caught_by {m.caught_by!r}")
        unknown = [c for c in (*m.caught_by, *m.also_fails) if c != "*" and c not in checks]
        if unknown:
            problems.append(f"{m.name}: unknown check id(s) {unknown}")
        if not any(checks.get(c) == m.kind for c in m.caught_by):
            problems.append(f"{m.name}: no catching check of its own kind {m.kind}")
        if m.also_fails and not m.collateral:
            problems.append(f"{m.name}: also_fails without a collateral explanation")
    kinds_covered = {m.kind for m in MUTANTS}
    missing_kinds = [k for k in GRU4REC_KINDS if k.startswith("K") and k not in kinds_covered]
    if missing_kinds:
        problems.append(f"no mutant for kind(s) {missing_kinds}")
    uncaught_checks = sorted(set(checks) - {c for m in MUTANTS for c in m.caught_by})
    if uncaught_checks:
        problems.append(f"checks no mutant proves to bite: {uncaught_checks}")
    assert not problems, "; ".join(problems)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    sel = meta_matrix.selection_default(CPU_MUTANTS)
    run = meta_matrix.run_suite(sel, DEFAULT_MARKS, tmp_path_factory.mktemp("meta-default"), workers=2, timeout=1800)
    out = meta_matrix.write_matrix("default", DEFAULT_MARKS, run, CPU_MUTANTS)
    print(f"\nmutant matrix: {out / 'mutant_matrix.md'} ({run.seconds:.0f} s)")
    assert run.records, f"the inner conformance run produced no results (exit {run.returncode}):\n{run.output_tail}"
    return run


def test_reference_fails_no_check(default_run):
    """The reference passes (or skips) every non-slow, non-metric check."""
    recs = default_run.records.get("reference", [])
    assert len(recs) > 50, f"only {len(recs)} reference results:\n{default_run.output_tail}"
    bad = {r["nodeid"]: r["reason"] for r in recs if r["outcome"] not in ("passed", "skipped", "skipped-unsupported")}
    assert not bad, f"the reference fails {len(bad)} check(s): {bad}"


#: What each catch's message must say: mutant → {check id: text every failing record of that check contains (a
#: tuple: one of them)}. For a check with a cause table, the isolated cause ("isolated: ..."); for a check whose
#: message states one finding, that finding; for a "cause not isolated" message, the mutant's own candidate. A
#: catch missing here fails test_every_catch_states_its_expected_message: a new mutant states what it must read.
MESSAGES: dict[str, dict[str, str | tuple[str, ...]]] = {
    "mutant:adagrad_initial_accumulator": {
        "OP-1": "the first steps are smaller than η; cause not isolated; candidates: a large initial Adagrad accumulator",
        "OP-2": "steps of equal size",
    },
    "mutant:adam": {"OP-2": "steps of equal size; cause not isolated; candidates: an Adam-like optimizer"},
    "mutant:batch_size_capped_at_catalogue": {"HP-1": "isolated: the hyperparameter is silently capped or clamped"},
    "mutant:batch_size_hardcoded": {"HP-3": ("isolated: the batch size is ignored", "isolated: the value is ignored")},
    "mutant:bpr_value_doubled": {"LF-1": "isolated: the value is normalised differently from its gradient"},
    "mutant:bpr_value_without_diagonal": {"LF-1": "isolated: the value is offset by a constant"},
    "mutant:bpreg_ignored": {
        "HP-1": "isolated: the hyperparameter is ignored",
        "LF-1": "isolated: the loss equation differs from the reference's",
        "LF-6": "isolated: bpreg is ignored",
    },
    "mutant:bprmax_matrix_mean": {
        "LF-1": "isolated: the loss equation differs from the reference's",
        "LF-2": "the loss couples lanes",
    },
    "mutant:bprmax_no_log_eps": {"LF-4": "non-finite gradient entries"},
    "mutant:bprmax_softmax_with_target": {
        "LF-1": "isolated: the loss equation differs from the reference's",
        "LF-3": "candidates: the negative-softmax weights depend on the target score",
    },
    "mutant:declared_loss_crashes": {"RN-1": "fit raised NameError"},
    "mutant:dense_item_table_update": {"SC-1": "isolated: the step's gradient or optimizer update is dense"},
    "mutant:dropout_keep_prob": {
        "DO-1": "TrainingDivergedError",
        "DO-2": "TrainingDivergedError",
        "DO-3": "non-finite outputs",
    },
    "mutant:embedding_size_tied_to_hidden": {"RN-1": "inconsistent input_size"},
    "mutant:epoch_ends_early": {
        "EB-1": "transitions trained, expected",
        "EB-2": "transitions trained per epoch",
        "EB-4": "steps per epoch, expected",
    },
    "mutant:epochs_off_by_one": {"EB-3": "epochs, expected 3"},
    "mutant:eval_batch_dependent": {"EV-4": "metrics depend on the evaluation batch size"},
    "mutant:eval_drops_tail": {"EV-3": "candidates: the evaluation loop stops early"},
    "mutant:eval_masks_session": dict.fromkeys(
        ("EV-1", "SR-1", "SR-2"), "isolated: the own inference loop masks the session's future items"
    ),
    "mutant:eval_optimistic_ties": {"EV-1": "isolated: the own evaluator does not apply the declared tie mode"},
    "mutant:eval_removes_input_item": dict.fromkeys(
        ("EV-1", "SR-1", "SR-2"), "isolated: the own inference loop removes items already seen"
    ),
    "mutant:fresh_per_example_negatives": {"SO-1": "isolated: fresh negatives are drawn on every train_step"},
    "mutant:full_catalogue_scoring": {
        "SC-1": "isolated: all items are scored every step",
        "SC-2": "the step scores the whole catalogue",
    },
    "mutant:full_catalogue_scoring_blackbox": {
        "SC-1": "isolated: all items are scored every step",
        "SC-2": "the step scores the whole catalogue",
    },
    "mutant:full_catalogue_scoring_default_sizes": {"SC-1": "isolated: all items are scored every step"},
    "mutant:full_catalogue_scoring_fixed_width": {"SC-1": "isolated: all items are scored every step"},
    "mutant:grad_norm_clipping": {"OP-5": "isolated: the gradients are clipped to a maximum norm"},
    "mutant:gradient_noise": {"OP-5": "isolated: a random term in the update"},
    "mutant:hidden_size_hardcoded": {
        "HP-1": "isolated: the hyperparameter is ignored",
        "HP-2": "no GRU weight with a dimension",
    },
    "mutant:item_map_misaligned": {"EV-5": "candidates: the score columns do not follow item_ids()"},
    "mutant:lanes_by_session_id": {"EB-6": "sessions are not ordered by their first event's time"},
    "mutant:lr_decay": {"OP-3": "the traced learning rate changes during training"},
    "mutant:momentum_ignored": {
        "HP-1": "isolated: the hyperparameter is ignored",
        "OP-4": "momentum has no effect on the first two steps",
    },
    "mutant:n_sample_clamped": {
        "HP-1": "isolated: the hyperparameter is silently capped or clamped",
        "HP-2": "isolated: the value is silently capped",
    },
    "mutant:no_eval_reset": {
        "EV-4": "metrics depend on the evaluation batch size",
        "SR-1": "isolated: hidden state leaks across sessions",
        "SR-2": "isolated: hidden state leaks across sessions",
    },
    "mutant:no_eval_reset_id_order": dict.fromkeys(("SR-1", "SR-2"), "isolated: hidden state leaks across sessions"),
    "mutant:no_hidden_dropout_single_layer": {
        "DO-2": "Recall@1 unchanged",
        "DO-3": "of layer 0's output is zero",
        "HP-1": "isolated: the hyperparameter acts only in another configuration",
    },
    "mutant:padded_batches": {
        "EB-4": "finished lanes are not refilled",
        "HP-3": "isolated: the batch size acts, but finished lanes are not refilled",
    },
    "mutant:per_row_negatives": {"SO-2": "negatives are drawn per row, not shared by the minibatch"},
    "mutant:recall_cutoff_off_by_one": {"EV-1": "isolated: the own evaluator counts a hit at rank < N"},
    "mutant:reset_every_step": {
        "SR-3": "the prediction after the fillers does not depend on a_k at all",
        "SR-5": "candidates: the state is reset",
    },
    "mutant:row_order_trusted": {"EB-5": "the row order is trusted"},
    "mutant:sample_alpha_ignored": {
        "HP-1": "isolated: the hyperparameter is ignored",
        "SO-3": "isolated: the draws follow a power of the support with another exponent",
    },
    "mutant:score_all_then_sample": {
        "LF-5": "candidates: a double softmax, scores normalised over the catalogue before sampling",
        "SC-1": "isolated: all items are scored every step",
        "SC-2": "the step scores the whole catalogue",
        "SO-1": "isolated: the scores are normalised over the full catalogue before sampling",
    },
    "mutant:shared_dropout": {
        "DO-3": "0.000 of the embedding output is zero",
        "DO-4": "also zeroes",
        "HP-1": "isolated: the hyperparameter is ignored",
    },
    "mutant:small_uniform_init": {"IN-1": "initialisation is not per-gate Glorot-uniform"},
    "mutant:stale_train_mask": {
        "SR-3": "candidates: state resets in part of the training steps",
        "SR-4": "continue a session from a zero state (false reset)",
    },
    "mutant:undeclared_momentum_accepted": {
        "HP-4": "silently accepted undeclared hyperparameter(s) ['momentum']",
        "OP-4": "momentum has no effect on the first two steps",
    },
    "mutant:unknown_item_crash": {"EV-2": "evaluate() raised KeyError"},
    "mutant:weight_decay": {"OP-5": "isolated: weight decay: the update pulls every weight toward zero"},
    "mutant:xe_double_softmax": {
        "LF-1": "isolated: the loss equation differs from the reference's",
        "LF-5": "candidates: a double softmax",
    },
}


def test_every_catch_states_its_expected_message():
    """MESSAGES names, for every check each CPU mutant declares it fails, the text its message must carry (the
    metric checks MC-* run in test_metric_checks_catch_their_mutants, which asserts their verdicts only)."""
    missing = [
        f"{m.name} {c}"
        for m in CPU_MUTANTS
        for c in m.caught_by
        if not c.startswith("MC-") and c not in MESSAGES.get(m.name, {})
    ]
    declared = {m.name: set(m.caught_by) for m in CPU_MUTANTS}
    extra = [f"{n} {c}" for n, checks in MESSAGES.items() for c in checks if c not in declared.get(n, ())]
    assert not missing and not extra, f"catches without an expected message: {missing}; entries no catch has: {extra}"


@pytest.mark.parametrize("mutant", CPU_MUTANTS, ids=[m.name for m in CPU_MUTANTS])
def test_mutant_caught_by_its_checks(default_run, mutant):
    """The mutant fails every check that claims it and no check outside its declaration; a catch whose check has a
    cause table fails through its diagnosis, no catch's message names a cause no probe isolated, and each catch's
    message carries the text MESSAGES expects of it (the isolated cause, or the finding the check states)."""
    recs = default_run.records.get(mutant.name, [])
    assert recs, f"no results for {mutant.name}:\n{default_run.output_tail}"
    v = meta_matrix.verdicts(recs)
    a = meta_matrix.assess(mutant, v, set(meta_matrix.verdicts(default_run.records.get("reference", []))))
    reasons = meta_matrix.failure_reasons(recs)
    assert not a["missed"], (
        f"{mutant.name} ({mutant.defect}) is not caught by {a['missed']} "
        f"(verdicts: { {c: v.get(c, 'not run') for c in a['missed']} })"
    )
    assert not a["unexpected"], f"{mutant.name} fails checks outside its declaration: " + "; ".join(
        f"{c}: {reasons.get(c, '')}" for c in a["unexpected"]
    )
    # a check that declares candidate causes names one only through its diagnosis: never a bare assertion
    bare = [
        f"{r['nodeid']}: {str(r.get('reason') or '')[:200]}"
        for r in recs
        if (r.get("check") or {}).get("id") in mutant.caught_by
        and r["outcome"] in meta_matrix.FAIL_OUTCOMES
        and meta_matrix.cause_table(r)
        and meta_matrix.diagnosis_class(str(r.get("reason") or "")) == meta_matrix.FINDING
    ]
    assert not bare, f"{mutant.name}: failures of checks with a cause table that bypass the diagnosis: {bare}"
    # and no catch's message offers a cause its probes did not isolate (alternatives, a guess)
    guesses = [
        f"{r['nodeid']}: …{guess}…"
        for r in recs
        if (r.get("check") or {}).get("id") in mutant.caught_by
        and r["outcome"] in meta_matrix.FAIL_OUTCOMES
        and (guess := diagnosis.unisolated_guess(str(r.get("reason") or "")))
    ]
    assert not guesses, f"{mutant.name}: messages that name a cause no probe isolated: {guesses}"
    # and each catch's message says what this mutant's defect is (MESSAGES)
    wrong = []
    for cid, want in MESSAGES.get(mutant.name, {}).items():
        texts = (want,) if isinstance(want, str) else want
        for r in recs:
            reason = str(r.get("reason") or "")
            if (r.get("check") or {}).get("id") == cid and r["outcome"] in meta_matrix.FAIL_OUTCOMES:
                if not any(t in reason for t in texts):
                    wrong.append(f"{r['nodeid']}: expected {texts}, got: {reason[:400]}")
    assert not wrong, f"{mutant.name}: messages that do not state the mutant's defect: {wrong}"


#: The metric meta-test's checks and data: the fast-set cross-entropy MC-1..3 (one set of fits serves all three) on
#: the always-synthetic Yoochoose stand-in, so the outcome does not depend on whether ../shared is present.
MC_CHECKS = ("MC-1", "MC-2", "MC-3")
MC_ARGS = ("--dataset", "yoochoose_100k_standin", "-k", "cross-entropy")
MC_MUTANTS = [m for m in CPU_MUTANTS if set(m.caught_by) & set(MC_CHECKS)]


@pytest.mark.slow
def test_metric_checks_catch_their_mutants(tmp_path):
    """The metric checks bite: every mutant that declares an MC check fails it, and the reference (seed 42)
    passes MC-1..3 against the band of its seeds 1-3. One inner process (no xdist) so that the reference's
    band fits are made once and shared through the session's metric cache: five 3-epoch fits, 4-12 minutes on
    2 cores depending on load."""
    assert MC_MUTANTS, "no mutant declares a metric check (MC-1..3) in caught_by"
    sel = {"reference": {"kinds": [], "checks": list(MC_CHECKS)}}
    sel |= {m.name: {"kinds": [], "checks": [c for c in m.caught_by if c in MC_CHECKS]} for m in MC_MUTANTS}
    marks = "metric and not slow and not gpu"
    run = meta_matrix.run_suite(sel, marks, tmp_path / "meta-mc", workers=1, timeout=3600, extra_args=MC_ARGS)
    out = meta_matrix.write_matrix("metric", marks, run, MC_MUTANTS)
    print(f"\nmutant matrix: {out / 'mutant_matrix.md'} ({run.seconds:.0f} s)")
    ref_recs = run.records.get("reference", [])
    ref = meta_matrix.verdicts(ref_recs)
    assert ref == dict.fromkeys(MC_CHECKS, "P"), (
        f"the reference does not pass its own bands: {ref} {meta_matrix.failure_reasons(ref_recs)}\n{run.output_tail}"
    )
    missed = {}
    for m in MC_MUTANTS:
        v = meta_matrix.verdicts(run.records.get(m.name, []))
        lost = [c for c in m.caught_by if c in MC_CHECKS and v.get(c) != "F"]
        if lost:
            missed[m.name] = {c: v.get(c, "not run") for c in lost}
    assert not missed, f"metric checks that did not catch their mutant: {missed}\n{run.output_tail}"


@pytest.mark.slow
def test_full_mutant_matrix(tmp_path):
    """Every mutant × every check (slow and metric checks included; the default --dataset): every mutant is
    caught by its declared checks, nothing fails outside the declarations, the reference fails nothing."""
    sel = {"reference": {"kinds": ["*"]}, **{m.name: {"kinds": ["*"]} for m in CPU_MUTANTS}}
    marks = "not gpu"
    run = meta_matrix.run_suite(sel, marks, tmp_path / "meta-full", workers=2, timeout=4 * 3600)
    out = meta_matrix.write_matrix("full", marks, run, CPU_MUTANTS)
    print(f"\nmutant matrix: {out / 'mutant_matrix.md'} ({run.seconds:.0f} s)")
    problems = []
    ref = meta_matrix.verdicts(run.records.get("reference", []))
    if not ref or any(x in ("F", "X") for x in ref.values()):
        problems.append(f"reference: {ref}")
    for m in CPU_MUTANTS:
        a = meta_matrix.assess(m, meta_matrix.verdicts(run.records.get(m.name, [])))
        if a["missed"] or a["unexpected"]:
            problems.append(f"{m.name}: missed {a['missed']}, unexpected {a['unexpected']}")
    assert not problems, f"see {out / 'mutant_matrix.md'}: " + "; ".join(problems)


def test_hp1_attributes_untrained_model_to_eb3(tmp_path):
    """On a model that trains one epoch fewer than asked (nothing at n_epochs=1), HP-1 fails without blaming the
    hyperparameter: its message says the failure may follow from EB-3 (root-cause attribution). EB-3 fails
    too, and the harness groups HP-1 (another kind) under it: results.json, the verdict card and the terminal."""
    from gru4rec_conformance.reports.card import build_card, render_markdown
    from gru4rec_conformance.reports.results import load_run

    sel = {"mutant:epochs_off_by_one": {"kinds": [], "checks": ["HP-1", "EB-3"]}}
    run = meta_matrix.run_suite(
        sel, DEFAULT_MARKS, tmp_path / "hp1-eb3", workers=1, timeout=900, extra_args=("-k", "learning_rate or eb3")
    )
    recs = [r for r in run.records.get("mutant:epochs_off_by_one", []) if r["outcome"] in ("failed", "error")]
    assert recs, f"HP-1 did not fail on mutant:epochs_off_by_one:\n{run.output_tail}"
    hp1 = [r for r in recs if (r.get("check") or {}).get("id") == "HP-1"]
    reason = hp1[0].get("reason") or ""
    assert "may follow from EB-3" in reason and "has no effect" not in reason, reason
    assert meta_matrix.verdicts(recs).get("EB-3") == "F", meta_matrix.failure_reasons(recs)
    (run_dir,) = [p.parent for p in (tmp_path / "hp1-eb3" / "reports").glob("*/*/results.json")]
    conf = load_run(run_dir).conformance()
    follows = {d.check_id: d.may_follow_from for d in conf.defects}
    assert follows.get("HP-1") == ("EB-3",) and follows.get("EB-3") == (), follows
    assert conf.root_cause_lines() == ["1 failure(s) may follow from EB-3 (epoch count): HP-1"], conf.reasons
    card = render_markdown(build_card(load_run(run_dir)))
    assert "**EB-3** (epoch count) failed; 1 failure(s) of other kinds may follow from it: HP-1" in card, card
    assert "1 failure(s) may follow from EB-3 (epoch count): HP-1" in run.output_tail, run.output_tail
