"""The golden step comparison still bites: every mutant that changes a training step fails it.

The comparison and its float32 tolerance are those of test_ref_golden.py (ref_golden_step.compare_step). The
tolerance is always the reference's own sensitivity, never the mutant's. Each mutant of
implementations/mutants/ is either run on the step cases its change reaches (STEP_MUTANTS) or left out with
the reason its GRU4Rec computes the same step from the given weights, states, samples and masks (LEFT_OUT).
A left-out mutant that can run a step must pass the comparison, which checks that reason.
"""

from __future__ import annotations

import pytest
from ref_golden_cases import STEP_CASES
from ref_golden_step import build, run_steps, step_mismatches

from gru4rec_conformance.implementations.mutants import mutant_classes

MUTANTS = {c.name: c for c in mutant_classes()}
CASES = {c["name"]: c for c in STEP_CASES if c["name"] != "xe_shared_tail_logq1"}  # that one differs by design


def _xe(c):
    return c["hp"]["loss"] == "cross-entropy"


def _bprmax(c):
    return c["hp"]["loss"] == "bpr-max"


def _any(c):
    return True


def _second_momentum_step(c):
    return c["hp"]["momentum"] > 0 and len(c["steps"]) > 1


#: mutant → which step cases its change reaches
STEP_MUTANTS = {
    "mutant:xe_double_softmax": _xe,
    "mutant:bprmax_matrix_mean": _bprmax,
    "mutant:bprmax_softmax_with_target": _bprmax,
    "mutant:bpreg_ignored": lambda c: _bprmax(c) and c["hp"]["bpreg"] > 0,
    "mutant:score_all_then_sample": _any,  # normalises over the catalogue whatever the loss
    "mutant:adagrad_initial_accumulator": _any,
    "mutant:adam": _any,
    # the first step from a zero momentum buffer is the same with or without momentum
    "mutant:momentum_ignored": _second_momentum_step,
    # scores through the dense Wy/By: their dense update moves rows that step 1 touched and step 2 does not
    # by μ·V (the port's lazy update leaves them), so only a second momentum step differs
    "mutant:full_catalogue_scoring": _second_momentum_step,
    "mutant:full_catalogue_scoring_blackbox": _second_momentum_step,  # the same GRU4Rec, train_step hook hidden
    "mutant:full_catalogue_scoring_default_sizes": _second_momentum_step,  # the same, sizes not declared either
    "mutant:full_catalogue_scoring_fixed_width": _second_momentum_step,  # the same, train_step of 64 lanes only
    "mutant:weight_decay": _any,
    "mutant:gradient_noise": _any,
}

#: mutant → why its GRU4Rec computes the same golden step (given weights, hidden states, samples, masks)
LEFT_OUT = {
    "mutant:no_eval_reset": "evaluator only",
    "mutant:no_eval_reset_id_order": "evaluator only (its lanes in session-id order, no reset)",
    "mutant:reset_every_step": "inference forward (forward_eval) only",
    "mutant:stale_train_mask": "iterator's reset masks only; the step gets its hidden state",
    "mutant:n_sample_clamped": "sampler only (n_sample capped at 1024); the step is given its samples",
    "mutant:bpr_value_without_diagonal": "'bpr' loss only; no golden case uses it",
    "mutant:bpr_value_doubled": "'bpr' loss value only (not its gradient); no golden case uses it",
    "mutant:bprmax_no_log_eps": "the 1e-24 only matters once Σ s·σ underflows; it is lost in float32 here",
    "mutant:sample_alpha_ignored": "sampler weights only; the samples are given",
    "mutant:dropout_keep_prob": "draws masks only when none are given; the golden step injects the port's",
    "mutant:no_hidden_dropout_single_layer": "draws masks only when none are given",
    "mutant:shared_dropout": "dropout rates only; the given masks are used as they are",
    "mutant:lr_decay": "first decay after 1,000 updates; a golden case runs at most 2",
    "mutant:batch_size_hardcoded": "iterator (lanes of fit) only",
    "mutant:batch_size_capped_at_catalogue": "fit's batch size only (capped at the catalogue); the step is given its lanes",
    "mutant:undeclared_momentum_accepted": "adapter's build() only; its GRU4Rec is the reference",
    "mutant:epoch_ends_early": "iterator only",
    "mutant:row_order_trusted": "iterator only (the order rows are read in)",
    "mutant:lanes_by_session_id": "iterator only (the order sessions enter lanes)",
    "mutant:grad_norm_clipping": "clips only global gradient norms above 1; the golden steps' norms are below 1",
    "mutant:epochs_off_by_one": "fit's epoch count only",
    "mutant:padded_batches": "iterator only",
    "mutant:eval_batch_dependent": "evaluator only",
    "mutant:eval_drops_tail": "evaluator only",
    "mutant:eval_optimistic_ties": "evaluator only",
    "mutant:eval_masks_session": "evaluator only (masks the session's items before ranking)",
    "mutant:eval_removes_input_item": "evaluator only (removes the input item from the ranking)",
    "mutant:recall_cutoff_off_by_one": "evaluator only",
    "mutant:unknown_item_crash": "evaluator only",
    "mutant:item_map_misaligned": "item_ids() sorted by id; the step data's items first appear in id order",
    "mutant:cuda_eval_crash": "evaluator on CUDA only",
    "mutant:declared_loss_crashes": "'top1' loss only; no golden case uses it",
    "mutant:small_uniform_init": "initialisation only; the golden step injects the weights",
    "mutant:dense_item_table_update": "a dense pass over the item tables with the reference's values (zero-gradient "
    "rows get a zero step; with momentum the touched rows are then updated lazily): only the cost differs",
    # cannot run a golden step at all (so there is nothing to compare):
    "mutant:hidden_size_hardcoded": "100 units whatever layers says: set_weights refuses the recorded weights",
    "mutant:per_row_negatives": "expects per-lane samples; train_step with one shared sample vector fails",
    "mutant:fresh_per_example_negatives": "per-lane samples as per_row_negatives: train_step with one shared "
    "sample vector fails",
    "mutant:embedding_size_tied_to_hidden": "first layer sized for the hidden size: set_weights refuses the recorded "
    "weights of a separate embedding of another size",
}
#: mutant → a golden case on which it cannot run a step
CANNOT_RUN = {
    "mutant:hidden_size_hardcoded": "xe_shared_logq0",
    "mutant:per_row_negatives": "xe_shared_logq0",
    "mutant:fresh_per_example_negatives": "xe_shared_logq0",
    "mutant:embedding_size_tied_to_hidden": "bprmax_separate_2layers_mom",
}

#: cases for the left-out check, covering both losses, the three embedding modes, two layers, logQ, no
#: samples, a second momentum step, injected masks and a shrunk tail batch (all 19 would triple its time)
LEFT_OUT_CASES = [
    "xe_shared_logq1_mom",
    "xe_shared_nsample0_logq1",
    "xe_shared_dropout_masks",
    "xe_none",
    "bprmax_separate_2layers_mom",
    "bprmax_none_dropout_masks",
    "bprmax_shared_tail",
]

PAIRS = [(m, c) for m, reaches in STEP_MUTANTS.items() for c, d in CASES.items() if reaches(d)]


def test_every_mutant_is_classified():
    """A new mutant must be sorted into STEP_MUTANTS or LEFT_OUT (with its reason)."""
    assert not set(STEP_MUTANTS) & set(LEFT_OUT)
    assert set(STEP_MUTANTS) | set(LEFT_OUT) == set(MUTANTS)
    assert set(CANNOT_RUN) <= set(LEFT_OUT)
    assert all(any(m == p for p, _ in PAIRS) for m in STEP_MUTANTS), "a step mutant reaches no case"
    assert set(LEFT_OUT_CASES) <= set(CASES)


@pytest.mark.parametrize("mutant,case", PAIRS, ids=[f"{m[len('mutant:') :]}-{c}" for m, c in PAIRS])
def test_step_changing_mutant_fails_golden_step(mutant, case):
    """The mutant's step, from the recorded inputs, differs from the port by more than the tolerance."""
    gru = build(case, MUTANTS[mutant].make_gru_class())
    bad = step_mismatches(case, run_steps(case, gru))
    assert bad, f"{mutant} on {case}: the golden step comparison found no mismatch"


@pytest.mark.parametrize("mutant", sorted(set(LEFT_OUT) - set(CANNOT_RUN)))
def test_left_out_mutant_leaves_golden_step_unchanged(mutant):
    """The reason for leaving a mutant out holds: on each of LEFT_OUT_CASES its step matches the port."""
    cls = MUTANTS[mutant].make_gru_class()
    for case in LEFT_OUT_CASES:
        bad = step_mismatches(case, run_steps(case, build(case, cls)))
        assert not bad, f"{mutant} changes the step of {case}: move it to STEP_MUTANTS\n" + "\n".join(map(str, bad))


@pytest.mark.parametrize("mutant", sorted(CANNOT_RUN))
def test_mutant_that_cannot_run_a_golden_step_says_so(mutant):
    """The reason holds: the mutant raises instead of computing a step from the recorded inputs."""
    case = CANNOT_RUN[mutant]
    with pytest.raises((ValueError, RuntimeError)):
        run_steps(case, build(case, MUTANTS[mutant].make_gru_class()))
