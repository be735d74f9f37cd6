"""The hyperparameter checks probe the range the study and the official defaults use, and a silent cap is told
apart from a hard-coded value by the message (conformance/gru4rec/test_k6_hyperparameters.py).

One inner conformance run of the range probes (HP-1's ``n_sample``, ``layers``, ``batch_size`` and
``dropout_p_hidden`` cases, HP-2's n_sample echo, HP-3's batch-size range and step count) on the reference and on
look-alike mutants: ``n_sample`` clamped to 1024 (a cap: 16 acts, 2048 and 4096 do not), the hidden size hard-coded
to 100 and the batch hard-coded to 50 lanes (one size whatever is asked), the batch capped at the catalogue size (a
cap below the range case's own small value), hidden dropout acting only between stacked layers (no effect in HP-1's
one-layer model, an effect with two), groups of whole sessions never refilled (the batch size acts on the step
count, the lanes are not GRU4Rec's) and an epoch that ends at the first lane it cannot refill (too few steps: the
dropped tail, not the batch size). The reference fails none of them."""

from __future__ import annotations

import meta_matrix
import pytest

from gru4rec_conformance.conformance.gru4rec import test_k6_hyperparameters as K6

ISO = "isolated: "
#: mutant → {pytest id part of the failing check: (causes it must isolate, causes it must not), text it must hold}
EXPECTED = {
    "mutant:n_sample_clamped": {
        "n_sample-range": ((K6.HP1_CAPPED,), (K6.HP1_IGNORED,), "n_sample=2048 and n_sample=4096 give the same"),
        "test_hp2_n_sample_echo": ((K6.SIZE_CAPPED,), (K6.SIZE_FIXED,), "4096 → 1024; cap 1024"),
    },
    "mutant:hidden_size_hardcoded": {
        "layers-range": ((K6.HP1_IGNORED,), (K6.HP1_CAPPED,), "layers=[64]"),
        # the small pair (no range): "ignored" only because GRU4Rec has no other configuration for layers
        "-layers]": ((K6.HP1_IGNORED,), (K6.HP1_CONFIG, K6.HP1_CAPPED), "layers needs no other configuration"),
    },
    "mutant:batch_size_hardcoded": {
        "test_hp3_batch_size_range": ((K6.SIZE_FIXED,), (K6.SIZE_CAPPED,), "32 → 50, 256 → 50, 512 → 50"),
        "test_hp3_batch_size_echo": (
            (K6.HP3_IGNORED,),
            (K6.HP3_BATCHING, K6.HP3_EARLY_END, K6.HP3_MISCOUNT),
            "ratio 1.00",
        ),
    },
    # the epoch stops at the first lane it cannot refill (GRU4REC-pytorch, KerasGRU4Rec): too few steps, and the
    # diagnosis blames the dropped tail, not the batch size or the lanes
    "mutant:epoch_ends_early": {
        "test_hp3_batch_size_echo": (
            (K6.HP3_EARLY_END,),
            (K6.HP3_IGNORED, K6.HP3_BATCHING, K6.HP3_MISCOUNT),
            "1988 of 2006 transitions",
        )
    },
    # its sibling for the step count: the batch size acts (the count halves with it), the lanes are not refilled
    "mutant:padded_batches": {
        "test_hp3_batch_size_echo": (
            (K6.HP3_BATCHING,),
            (K6.HP3_IGNORED, K6.HP3_EARLY_END, K6.HP3_MISCOUNT),
            "steps of batch_size=14",
        )
    },
    # acts only between stacked layers (GP-7): not ignored, and HP-1 says where it does act
    "mutant:no_hidden_dropout_single_layer": {
        "dropout_p_hidden-range]": ((K6.HP1_CONFIG,), (K6.HP1_IGNORED, K6.HP1_CAPPED), "layers=[16, 16]"),
        "dropout_p_hidden]": ((K6.HP1_CONFIG,), (K6.HP1_IGNORED,), "layers=[16, 16]"),
    },
    # capped below the range case's own small value (at the 20 items of D-LAG1): only the small pair's 16 acts
    "mutant:batch_size_capped_at_catalogue": {
        "batch_size-range": ((K6.HP1_CAPPED,), (K6.HP1_IGNORED,), "batch_size=16 vs batch_size=128")
    },
}
CHECKS = ("HP-1", "HP-2", "HP-3")
SELECT = "n_sample or layers or batch_size_range or batch_size_echo or batch_size-range or dropout_p_hidden"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    sel = {name: {"kinds": [], "checks": list(CHECKS)} for name in ("reference", *EXPECTED)}
    r = meta_matrix.run_suite(sel, "not slow and not metric and not gpu", tmp_path_factory.mktemp("meta-hp"),
                              workers=2, timeout=1800, extra_args=("-k", SELECT))  # fmt: skip
    assert r.records, f"the inner conformance run produced no results (exit {r.returncode}):\n{r.output_tail}"
    return r


def test_reference_passes_the_range_probes(run):
    recs = run.records.get("reference", [])
    passed = {r["nodeid"].split("::")[-1] for r in recs if r["outcome"] == "passed"}
    bad = {r["nodeid"]: r.get("reason") for r in recs if r["outcome"] in ("failed", "error")}
    assert not bad, bad
    for part in (
        "n_sample-range",
        "layers-range",
        "test_hp2_n_sample_echo",
        "test_hp3_batch_size_range",
        "test_hp3_batch_size_echo",
    ):
        assert any(part in p for p in passed), f"the reference did not run {part}: {sorted(passed)}"


@pytest.mark.parametrize("mutant", sorted(EXPECTED))
def test_cap_and_hard_coded_value_are_told_apart(run, mutant):
    """Each range probe fails on its mutant, isolates the mutant's cause (cap vs one fixed size) and not the
    other, and states the measured sizes."""
    problems = []
    recs = run.records.get(mutant, [])
    for part, (named, not_named, text) in EXPECTED[mutant].items():
        failed = [r for r in recs if part in r["nodeid"] and r["outcome"] == "failed"]
        if not failed:
            problems.append(
                f"{part} did not fail ({[(r['nodeid'], r['outcome']) for r in recs if part in r['nodeid']]})"
            )
        for r in failed:
            reason = r.get("reason") or ""
            missing = [c for c in named if ISO + c not in reason]
            wrong = [c for c in not_named if ISO + c in reason]
            if missing or wrong or text not in reason:
                problems.append(f"{r['nodeid']}: not isolated {missing}, wrongly isolated {wrong}, {text!r}: {reason}")
    assert not problems, "; ".join(problems)
