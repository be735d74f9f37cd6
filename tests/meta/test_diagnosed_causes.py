"""The failure messages name the cause a probe isolated (conformance/_harness/diagnosis.py), and sibling mutants
whose symptoms resemble each other are told apart by their messages; the reference fails none of these checks.

One inner conformance run (SR-1, SR-2, EV-1, SO-1, SC-1, LF-1, LF-6, SO-3, OP-5) on the reference and on pairs of look-alike mutants: a
state leak vs an evaluator that masks the session's items vs one that removes the input item; an ignored tie mode
vs a `rank < N` cutoff; an evaluation loop that stops early (only the event count differs) vs a state leak; fresh per-example negatives vs a softmax over the whole catalogue; full-catalogue scoring
(through train_step, black-box through fit, and through fit where train_step refuses the probe's lanes) vs a dense
update of the whole item table; a loss value offset by a constant vs one scaled by a constant (the gradient right in
both); an ignored bpreg; draws that ignore sample_alpha (another exponent of the support, not another
distribution); three updates that are not Adagrad's alone (gradient-norm clipping vs weight decay vs gradient
noise)."""

from __future__ import annotations

import meta_matrix
import pytest

from gru4rec_conformance.conformance.gru4rec import _probes as P
from gru4rec_conformance.conformance.gru4rec import test_k2_loss_formula as K2
from gru4rec_conformance.conformance.gru4rec import test_k3_sampling_order as K3
from gru4rec_conformance.conformance.gru4rec import test_k5_optimizer as K5
from gru4rec_conformance.conformance.gru4rec.test_k3_sampling_order import SO1_FRESH_NEGATIVES, SO1_NORMALISED
from gru4rec_conformance.conformance.gru4rec.test_k8_evaluation import EV1_EVENTS
from gru4rec_conformance.conformance.gru4rec.test_k9_scalability import (
    SC1_DENSE_UPDATE,
    SC1_FULL_SCORING,
    SC1_SAMPLER,
)

ISO = "isolated: "

#: mutant → {check id: (causes its message must isolate, causes it must not)}
EXPECTED: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "mutant:no_eval_reset": {"SR-1": ((P.STATE,), (P.FUTURE_MASKED, P.SEEN_REMOVED))},
    "mutant:eval_masks_session": {
        "SR-1": ((P.FUTURE_MASKED,), (P.STATE,)),
        "SR-2": ((P.FUTURE_MASKED,), (P.STATE,)),
        "EV-1": ((P.FUTURE_MASKED,), (P.STATE, P.TIE_MODE, P.CUTOFF)),
    },
    "mutant:eval_removes_input_item": {
        "SR-1": ((P.SEEN_REMOVED,), (P.STATE, P.FUTURE_MASKED)),
        "EV-1": ((P.SEEN_REMOVED,), (P.STATE, P.TIE_MODE, P.CUTOFF)),
    },
    # stops at the first lane it cannot refill: the count differs, the metrics of what it evaluates agree, and no
    # state or masking cause may be claimed (GRU4REC-pytorch's loader at the inference fix)
    "mutant:eval_drops_tail": {
        "EV-1": ((EV1_EVENTS,), (P.STATE, P.FUTURE_MASKED, P.SEEN_REMOVED, P.TIE_MODE, P.CUTOFF))
    },
    "mutant:eval_optimistic_ties": {"EV-1": ((P.TIE_MODE,), (P.CUTOFF, P.STATE, P.FUTURE_MASKED, P.SEEN_REMOVED))},
    "mutant:recall_cutoff_off_by_one": {"EV-1": ((P.CUTOFF,), (P.TIE_MODE, P.STATE, P.FUTURE_MASKED))},
    "mutant:fresh_per_example_negatives": {"SO-1": ((SO1_FRESH_NEGATIVES,), (SO1_NORMALISED,))},
    "mutant:score_all_then_sample": {"SO-1": ((SO1_NORMALISED,), (SO1_FRESH_NEGATIVES,))},
    "mutant:full_catalogue_scoring": {"SC-1": ((SC1_FULL_SCORING,), (SC1_DENSE_UPDATE, SC1_SAMPLER))},
    "mutant:full_catalogue_scoring_blackbox": {"SC-1": ((SC1_FULL_SCORING,), (SC1_DENSE_UPDATE, SC1_SAMPLER))},
    # train_step refuses the probe's 32 lanes (a fixed batch width): measured through fit, diagnosed through
    # train_forward's score tensor, the step's probes left undecided
    "mutant:full_catalogue_scoring_fixed_width": {"SC-1": ((SC1_FULL_SCORING,), (SC1_DENSE_UPDATE, SC1_SAMPLER))},
    "mutant:dense_item_table_update": {"SC-1": ((SC1_DENSE_UPDATE,), (SC1_FULL_SCORING, SC1_SAMPLER))},
    # a loss value that misses while its gradient matches: a constant offset (the j = i term left out) vs a
    # constant factor (the value doubled for the report)
    "mutant:bpr_value_without_diagonal": {"LF-1": ((K2.LF1_CONSTANT,), (K2.LF1_NORMALISED, K2.LF1_DETACHED))},
    "mutant:bpr_value_doubled": {"LF-1": ((K2.LF1_NORMALISED,), (K2.LF1_CONSTANT, K2.LF1_DETACHED))},
    "mutant:bpreg_ignored": {"LF-6": ((K2.LF6_IGNORED,), (K2.LF6_WEIGHT, K2.LF6_FORM))},
    # uniform draws whatever sample_alpha asks: the fitted exponent is 0 in both failing cases
    "mutant:sample_alpha_ignored": {"SO-3": ((K3.SO3_EXPONENT,), (K3.SO3_NOT_A_POWER,))},
    # the update is not Adagrad's alone: only large norms rescaled (clipping), every weight pulled toward zero
    # (decay), a draw that changes with the build seed (noise)
    "mutant:grad_norm_clipping": {"OP-5": ((K5.OP5_CLIPPING,), (K5.OP5_DECAY, K5.OP5_RANDOM))},
    "mutant:weight_decay": {"OP-5": ((K5.OP5_DECAY,), (K5.OP5_CLIPPING, K5.OP5_RANDOM))},
    "mutant:gradient_noise": {"OP-5": ((K5.OP5_RANDOM,), (K5.OP5_CLIPPING, K5.OP5_DECAY))},
}
CHECKS = ("SR-1", "SR-2", "EV-1", "SO-1", "SC-1", "LF-1", "LF-6", "SO-3", "OP-5")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    sel = {"reference": {"kinds": [], "checks": list(CHECKS)}}
    sel |= {m: {"kinds": [], "checks": sorted(exp)} for m, exp in EXPECTED.items()}
    r = meta_matrix.run_suite(sel, "not slow and not metric and not gpu", tmp_path_factory.mktemp("meta-dx"),
                              workers=2, timeout=1800)  # fmt: skip
    assert r.records, f"the inner conformance run produced no results (exit {r.returncode}):\n{r.output_tail}"
    return r


def test_reference_silent(run):
    bad = {
        r["nodeid"]: r.get("reason") for r in run.records.get("reference", []) if r["outcome"] in ("failed", "error")
    }
    assert run.records.get("reference") and not bad, bad


@pytest.mark.parametrize("mutant", sorted(EXPECTED))
def test_message_names_the_isolated_cause(run, mutant):
    """Every failing parametrization of the check isolates the mutant's own cause and not its sibling's."""
    problems = []
    for cid, (named, not_named) in EXPECTED[mutant].items():
        recs = [r for r in run.records.get(mutant, []) if (r.get("check") or {}).get("id") == cid]
        failed = [r for r in recs if r["outcome"] == "failed"]
        if not failed:
            problems.append(f"{cid} did not fail ({[r['outcome'] for r in recs]})")
        for r in failed:
            reason = r.get("reason") or ""
            missing = [c for c in named if ISO + c not in reason]
            wrong = [c for c in not_named if ISO + c in reason]
            if missing or wrong:
                problems.append(f"{r['nodeid']}: not isolated {missing}, wrongly isolated {wrong}: {reason[-600:]}")
    assert not problems, "; ".join(problems)
