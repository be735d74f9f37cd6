"""K2 loss formula (docs/checks.md, K2): the implementation's loss (after its own output transform) on
given score matrices equals the reference formulas of docs/algorithm.md, 'Losses'. Checks LF-1..LF-6.

The reference formulas are the oracle's (``reference.gru4rec.losses.loss_on_scores``, float64, mean over rows).
An implementation may normalise differently (sum over lanes, division by the nominal B): LF-1 fits the scale
factor c on the gradients (least squares of ∂L/∂R against the reference's), reports it, and requires the gradient
and the value to be c times the reference's, so a pure rescaling is visible but not confused with a wrong equation
(docs/study.md, 'Notes on single defects'), and a value term without gradient is not absorbed into c. LF-3 and LF-6 derive c from values (their
subject is a value identity).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.conformance.gru4rec._common import ADAGRAD, build
from gru4rec_conformance.reference.gru4rec.losses import loss_on_scores as oracle_loss

B, S = 5, 3
REL_TOL = 1e-5


def _matrix(seed: int = 0, b: int = B, s: int = S) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 2.0, size=(b, b + s))


def _column_q(seed: int = 1, k: int = B + S) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, 500, size=k).astype(np.float64)


def _built(impl, loss: str):
    return build(impl, dict(loss=loss))


LF1_CASES = [
    pytest.param("cross-entropy", {}, marks=pytest.mark.loss("cross-entropy"), id="cross-entropy"),
    pytest.param(
        "cross-entropy",
        {"logq": 1.0, "column_q": "q"},
        marks=[pytest.mark.loss("cross-entropy"), pytest.mark.feature("logq")],
        id="cross-entropy-logq",
    ),
    pytest.param("bpr-max", {"bpreg": 0.0, "elu_param": 0.0}, marks=pytest.mark.loss("bpr-max"), id="bpr-max-bpreg0"),
    pytest.param(
        "bpr-max",
        {"bpreg": 0.5, "elu_param": 0.0},
        marks=[pytest.mark.loss("bpr-max"), pytest.mark.feature("bpreg")],
        id="bpr-max-bpreg0.5",
    ),
    pytest.param(
        "bpr-max",
        {"bpreg": 0.5, "elu_param": 1.0},
        marks=[pytest.mark.loss("bpr-max"), pytest.mark.feature("bpreg"), pytest.mark.final_act("elu")],
        id="bpr-max-bpreg0.5-elu1",
    ),
    pytest.param("top1", {"final_act": "linear"}, marks=pytest.mark.loss("top1"), id="top1"),
    pytest.param("top1-max", {"final_act": "linear"}, marks=pytest.mark.loss("top1-max"), id="top1-max"),
    pytest.param("bpr", {"final_act": "linear"}, marks=pytest.mark.loss("bpr"), id="bpr"),
]


def _gradient_scale(grad: np.ndarray, ref_grad: np.ndarray) -> float:
    """Least-squares c of grad ≈ c·ref_grad (∂L/∂R over every entry of R)."""
    return float(np.sum(grad * ref_grad) / max(float(np.sum(ref_grad * ref_grad)), 1e-300))


#: LF-1's causes (meta-tests match them): of a gradient that is no positive multiple of the reference's, then of a
#: loss value that misses c·L_ref while the gradient matches.
LF1_SIGN = "the loss is maximised: its sign is flipped"
LF1_EQUATION = "the loss equation differs from the reference's, not only its normalisation"
LF1_CONSTANT = (
    "the value is offset by a constant, a term that does not depend on the scores added or left out (e.g. the "
    "j = i term of BPR)"
)
LF1_NORMALISED = "the value is normalised differently from its gradient (a constant factor between them)"
LF1_DETACHED = "the value has a score-dependent term without gradient (detached / stop-gradient)"
#: Relative agreement that counts as "the same" across the three score matrices (float32 implementations).
LF1_SAME = 1e-4
LF1_TABLE = (
    diagnosis.Candidate(
        LF1_SIGN,
        "the scale c fitted on the gradients: confirmed when c < 0 and ∂L/∂R = c·∂L_ref/∂R (1e-5 relative), ruled "
        "out when c > 0",
    ),
    diagnosis.Candidate(
        LF1_EQUATION,
        "the same fit: confirmed when ∂L/∂R differs from c·∂L_ref/∂R by more than 1e-5 (relative) for the best c, "
        "ruled out when it does not",
    ),
    diagnosis.Candidate(
        LF1_CONSTANT,
        "the value on two more random score matrices of the same shape: confirmed when L − c·L_ref is the same on "
        "all three (1e-4 relative to c·L_ref), ruled out when it differs",
    ),
    diagnosis.Candidate(
        LF1_NORMALISED,
        "the same three matrices: confirmed when L / (c·L_ref) is the same on all three while L − c·L_ref is not, "
        "ruled out when the ratio differs",
    ),
    diagnosis.Candidate(
        LF1_DETACHED,
        "the same three matrices, by elimination: the gradient is c times the reference's, so a difference that "
        "changes with the scores and is neither a constant offset nor a constant factor comes from a term without "
        "gradient; confirmed when both readings above are ruled out",
    ),
)


def _lf1_value_probes(
    model, loss: str, kw: dict, c: float, first: tuple[float, float]
) -> tuple[diagnosis.Cause, diagnosis.Cause, diagnosis.Cause]:
    """LF-1's three value probes, sharing one measurement: (L, c·L_ref) on score matrices 0 (``first``), 1, 2."""
    memo: list[list[tuple[float, float]]] = []

    def pairs() -> list[tuple[float, float]]:
        if not memo:
            got = [first]
            for seed in (1, 2):
                R = _matrix(seed)
                ref_value, _ = oracle_loss(R, loss, **kw)
                value, _ = model.loss_on_scores(R.copy(), loss, **kw)
                got.append((float(value), c * float(ref_value)))
            memo.append(got)
        return memo[0]

    def same(xs: list[float], scale: float) -> bool:
        return max(xs) - min(xs) <= LF1_SAME * scale

    def offsets() -> tuple[list[float], float, str]:
        p = pairs()
        off = [v - r for v, r in p]
        return off, max(abs(r) for _, r in p), "L − c·L_ref = " + ", ".join(f"{o:.6g}" for o in off)

    def ratios() -> tuple[list[float], str]:
        rat = [v / r if r else float("nan") for v, r in pairs()]
        return rat, "L / (c·L_ref) = " + ", ".join(f"{q:.6g}" for q in rat)

    def constant() -> diagnosis.Finding:
        off, scale, ev = offsets()
        return diagnosis.decide(same(off, scale), ev)

    def normalised() -> diagnosis.Finding:
        off, scale, _ = offsets()
        rat, ev = ratios()
        if not all(math.isfinite(q) for q in rat) or not same(rat, 1.0):
            return diagnosis.ruled_out(ev)
        return diagnosis.decide(not same(off, scale), ev)

    def detached() -> diagnosis.Finding:
        off, scale, ev_off = offsets()
        rat, ev_rat = ratios()
        ratio_same = all(math.isfinite(q) for q in rat) and same(rat, 1.0)
        if same(off, scale) or ratio_same:
            return diagnosis.ruled_out("a constant offset or factor explains the difference")
        return diagnosis.confirmed(f"{ev_off}; {ev_rat}")

    return LF1_TABLE[2].cause(constant), LF1_TABLE[3].cause(normalised), LF1_TABLE[4].cause(detached)


@pytest.mark.check("LF-1", kind="K2")
@pytest.mark.hook("loss_on_scores")
@pytest.mark.parametrize("loss,kw", LF1_CASES)
@diagnosis.causes(*LF1_TABLE)
def test_lf1_fixed_score_matrix(impl, loss, kw, record_metric, expect):
    """Loss value and gradient on a fixed score matrix equal the reference formula (up to a scale).

    On a fixed random B×(B+S) score matrix (B=5, S=3, N(0, 2²)) ∂L/∂R equals the reference gradient up to one
    positive scale factor c, fitted on the gradients (least squares), and the loss value equals c times the
    reference value (both 1e-5 relative). The scale is fitted on gradients, not on values: a rescaled loss shows in
    its gradient, while a term whose gradient is stopped (detached) or missing changes the value only.

    Diagnosis (:data:`LF1_TABLE`): a gradient that is no positive multiple of the reference's is a flipped sign
    (c < 0, the gradients agree up to it) or another equation; of a value that misses while the gradient matches,
    two more score matrices tell a constant offset (a gradient-free constant term) from a constant factor (the
    value normalised apart from its gradient) from a score-dependent term without gradient."""
    kw = {k: (_column_q() if v == "q" else v) for k, v in kw.items()}
    R = _matrix()
    ref_value, ref_grad = oracle_loss(R, loss, **kw)
    model = _built(impl, loss)
    value, grad = model.loss_on_scores(R.copy(), loss, **kw)
    value = float(value)
    grad = np.asarray(grad, dtype=np.float64)
    what = f"loss {loss} {kw}"
    assert grad.shape == ref_grad.shape, f"{what}: gradient shape {grad.shape}, expected {ref_grad.shape}"
    assert math.isfinite(value) and np.isfinite(grad).all(), f"{what}: non-finite loss or gradient ({value})"
    c = _gradient_scale(grad, ref_grad)
    g_err = float(np.abs(grad - c * ref_grad).max() / max(np.abs(c * ref_grad).max(), 1e-300))
    v_err = abs(value - c * ref_value) / max(abs(c * ref_value), 1e-300)
    record_metric(
        "scale factor c fitted on ∂L/∂R (1 = mean over rows)",
        c,
        rule="reported; any c > 0 is a pure rescaling",
        value_ratio=value / ref_value if ref_value else None,
    )
    grad_ok = expect.holds(
        "gradient error after scaling",
        g_err,
        reference=0.0,
        tolerance=REL_TOL,
        rule="|∂L/∂R − c·∂L_ref/∂R| ≤ 1e-5 · max|c·∂L_ref/∂R|",
    )
    value_ok = expect.holds(
        "loss value error after scaling",
        v_err,
        reference=0.0,
        tolerance=REL_TOL,
        rule="|L − c·L_ref| ≤ 1e-5 · |c·L_ref|, c from the gradients",
    )
    if c <= 0 or not grad_ok:
        sign = diagnosis.decide(
            None if c < 0 and not grad_ok else c < 0, f"c = {c:.6g}, gradient error after it {g_err:.3g}"
        )
        equation = diagnosis.decide(not grad_ok, f"gradient error {g_err:.3g} after the best c = {c:.6g}")
        diagnosis.fail(
            f"{what}: ∂L/∂R is not a positive multiple of the reference's (best scale c = {c:.6g} fitted on the "
            f"gradients, {g_err:.3g} relative error after it; loss {value:.6g} vs reference {ref_value:.6g})",
            [LF1_TABLE[0].cause(lambda: sign), LF1_TABLE[1].cause(lambda: equation)],
        )
    if not value_ok:
        diagnosis.fail(
            f"{what}: the gradient matches the reference up to c = {c:.6g}, but the loss value {value:.6g} differs "
            f"from c·L_ref = {c * ref_value:.6g} by {v_err:.3g} (relative)",
            _lf1_value_probes(model, loss, kw, c, (value, c * ref_value)),
        )


LOSSES = [
    pytest.param(name, marks=pytest.mark.loss(name), id=name)
    for name in ("cross-entropy", "bpr-max", "top1", "top1-max", "bpr")
]
# LF-2 and LF-4 need only the loss: no bpreg (the implementation's own applies; the regulariser is LF-6's), so an
# implementation without it keeps these checks
DEFAULT_KW = {
    "cross-entropy": {},
    "bpr-max": {"elu_param": 0.0},
    "top1": {"final_act": "linear"},
    "top1-max": {"final_act": "linear"},
    "bpr": {"final_act": "linear"},
}


@pytest.mark.check("LF-2", kind="K2")
@pytest.mark.hook("loss_on_scores")
@pytest.mark.parametrize("loss", LOSSES)
def test_lf2_row_separability(impl, loss):
    """Rows of the score matrix are independent examples (the loss does not couple lanes).

    Rows are independent examples: perturbing row j of the score matrix leaves ∂L/∂R of every other row
    unchanged."""
    model = _built(impl, loss)
    kw = dict(DEFAULT_KW[loss])
    R = _matrix(2)
    _, g0 = model.loss_on_scores(R.copy(), loss, **kw)
    R2 = R.copy()
    R2[3] += np.random.default_rng(3).normal(0.0, 1.0, size=R.shape[1])
    _, g1 = model.loss_on_scores(R2, loss, **kw)
    g0, g1 = np.asarray(g0, dtype=np.float64), np.asarray(g1, dtype=np.float64)
    others = [i for i in range(R.shape[0]) if i != 3]
    change = float(np.abs(g1[others] - g0[others]).max() / max(np.abs(g0).max(), 1e-300))
    assert change <= 1e-6, (
        f"loss {loss}: perturbing row 3 changed the gradient of other rows by {change:.3g} "
        "(relative): the loss couples lanes (e.g. a mean over the whole matrix inside the log)"
    )


@pytest.mark.check("LF-3", kind="K2")
@pytest.mark.hook("loss_on_scores")
@pytest.mark.loss("bpr-max")
def test_lf3_bprmax_softmax_excludes_target(impl):
    """BPR-max weights negatives by a softmax over the negatives only (the target is masked).

    With all negatives of a row equal (score c_i) and bpreg 0, the loss is −log σ(r_i − c_i) and
    ∂L/∂R_ii = −(1 − σ(r_i − c_i)) per row, whatever R_ii is."""
    rng = np.random.default_rng(4)
    b, k = 4, 7
    r = rng.normal(0.0, 2.0, size=b)
    cneg = rng.normal(0.0, 1.0, size=b)
    R = np.repeat(cneg[:, None], k, axis=1)
    R[np.arange(b), np.arange(b)] = r
    bpreg = 0.0  # the regulariser is LF-6's business; here only the target masking
    kw = {"bpreg": bpreg, "elu_param": 0.0}
    value, grad = _built(impl, "bpr-max").loss_on_scores(R.copy(), "bpr-max", **kw)
    sig = 1.0 / (1.0 + np.exp(-(r - cneg)))
    want_value = float(np.mean(-np.log(sig + 1e-24) + bpreg * cneg**2))
    want_diag = -(1.0 - sig) / b
    c = float(value) / want_value
    diag = np.diag(np.asarray(grad, dtype=np.float64))
    err = float(np.abs(diag - c * want_diag).max() / np.abs(c * want_diag).max())
    assert c > 0 and err <= REL_TOL, (
        f"with equal negatives the target-score gradient is {diag.tolist()}, expected c·{want_diag.tolist()} "
        f"(c = {c:.6g}): cause not isolated; candidates: the negative-softmax weights depend on the target score "
        "(target not masked), another deviation of the BPR-max equation (LF-1), another normalisation of the value"
    )


def _extreme_matrices() -> dict[str, np.ndarray]:
    a = np.full((4, 7), 1e3)
    np.fill_diagonal(a, -1e3)
    ties = _matrix(5, 4, 3)
    ties[2] = 5.0
    return {"target -1e3, negatives +1e3": a, "target +1e3, negatives -1e3": -a, "one row of identical scores": ties}


@pytest.mark.check("LF-4", kind="K2")
@pytest.mark.hook("loss_on_scores")
@pytest.mark.parametrize("loss", LOSSES)
def test_lf4_finite_under_extreme_scores(impl, loss):
    """Loss and gradient stay finite under extreme scores (no log 0, no overflow).

    Loss and gradient stay finite for scores of ±1e3 (target far below or above every negative) and for a
    row of identical scores (no log 0, no overflow)."""
    model = _built(impl, loss)
    bad = []
    for name, R in _extreme_matrices().items():
        value, grad = model.loss_on_scores(R.copy(), loss, **DEFAULT_KW[loss])
        if not (math.isfinite(float(value)) and np.isfinite(np.asarray(grad, dtype=np.float64)).all()):
            bad.append(
                f"{name}: loss {value}, {int((~np.isfinite(np.asarray(grad, dtype=np.float64))).sum())} "
                "non-finite gradient entries"
            )
    assert not bad, f"loss {loss}: " + "; ".join(bad)


@pytest.mark.check("LF-5", kind="K2")
@pytest.mark.loss("cross-entropy")
def test_lf5_xe_loss_floor(impl, d_lag1, expect):
    """Cross-entropy training goes below the loss floor of a doubly normalised softmax.

    Cross-entropy training on D-LAG1 (B=32, no extra samples, 20 epochs) ends below log(1 + (B−1)/e) − 0.5
    ≈ 2.0 per example, the floor of a doubly normalised loss (softmax fed into softmax-CE)."""
    B_ = 32
    model = build(
        impl,
        dict(loss="cross-entropy", batch_size=B_, n_epochs=20),
        dict(
            layers=[32],
            n_sample=0,
            **ADAGRAD,
            learning_rate=0.1,
            dropout_p_embed=0.0,
            dropout_p_hidden=0.0,
            momentum=0.0,
            logq=0.0,
        ),
    )
    rep = model.fit(d_lag1.train)
    bound = math.log(1 + (B_ - 1) / math.e) - 0.5
    final = float(rep.epoch_losses[-1])
    expect(
        "final epoch loss (per example)",
        final,
        lt=bound,
        double_softmax_floor=round(bound + 0.5, 3),
        message=f"final cross-entropy loss {final:.3f} is not below {bound:.3f} (a double softmax cannot go below "
        f"{bound + 0.5:.3f}): cause not isolated; candidates: a double softmax, scores normalised over the catalogue "
        "before sampling, too little training at these settings",
    )


def _softmax_neg(O: np.ndarray) -> np.ndarray:
    b = O.shape[0]
    mask = np.ones_like(O)
    mask[np.arange(b), np.arange(b)] = 0.0
    X = O * mask
    e = np.exp(X - X.max(axis=1, keepdims=True)) * mask
    return e / e.sum(axis=1, keepdims=True)


#: LF-6's causes of a regulariser term that misses mean_i Σ_j s_ij·Ô_ij² (meta-tests match them).
LF6_IGNORED = "bpreg is ignored: the loss value does not change with it"
LF6_WEIGHT = "the term follows bpreg with another weight (a constant factor k ≠ 1 on the reference's term)"
LF6_FORM = "the term is another function of the scores than mean_i Σ_j s_ij·Ô_ij², or not linear in bpreg"
LF6_TABLE = (
    diagnosis.Candidate(
        LF6_IGNORED,
        "loss(bpreg=1) − loss(bpreg=0): confirmed when it is 0 (1e-5 relative to the term), ruled out otherwise",
    ),
    diagnosis.Candidate(
        LF6_WEIGHT,
        "loss(bpreg=2) − loss(bpreg=0) on the same scores and the term on a second score matrix: confirmed when the "
        "term doubles with bpreg and its ratio k to the reference's term is the same on both matrices (1e-4 "
        "relative), ruled out otherwise",
    ),
    diagnosis.Candidate(
        LF6_FORM,
        "the same two measurements: confirmed when the term does not double with bpreg or k differs "
        "between the matrices, ruled out when neither",
    ),
)


def _lf6_term(model, R: np.ndarray, bpreg: float, elu_param: float, c: float) -> tuple[float, float]:
    """(measured term (loss(bpreg) − loss(0)) / c, the reference's bpreg·mean_i Σ_j s_ij·Ô_ij²) on ``R``."""
    v0, _ = model.loss_on_scores(R.copy(), "bpr-max", bpreg=0.0, elu_param=elu_param)
    vb, _ = model.loss_on_scores(R.copy(), "bpr-max", bpreg=bpreg, elu_param=elu_param)
    O = np.where(R >= 0, R, elu_param * (np.exp(R) - 1)) if elu_param > 0 else R
    return (float(vb) - float(v0)) / c, bpreg * float(np.mean(np.sum(_softmax_neg(O) * O**2, axis=1)))


@pytest.mark.check("LF-6", kind="K2")
@pytest.mark.hook("loss_on_scores")
@pytest.mark.loss("bpr-max")
@pytest.mark.feature("bpreg")
@pytest.mark.parametrize(
    "elu_param", [pytest.param(0.0, id="linear"), pytest.param(1.0, id="elu1", marks=pytest.mark.final_act("elu"))]
)
@diagnosis.causes(*LF6_TABLE)
def test_lf6_bpreg_term(impl, elu_param, expect):
    """The BPR-max score regulariser is present and weighted by bpreg.

    The BPR-max score regulariser is there and weighted by bpreg: loss(bpreg=1) − loss(bpreg=0) equals the
    mean over rows of Σ_j s_ij·Ô_ij² (negative-softmax weights s, activated scores Ô).

    Diagnosis (:data:`LF6_TABLE`): a term of 0 is an ignored bpreg; bpreg=2 and a second score matrix tell a
    term weighted by another constant from a term of another form."""
    model = _built(impl, "bpr-max")
    R = _matrix(6)
    v0, _ = model.loss_on_scores(R.copy(), "bpr-max", bpreg=0.0, elu_param=elu_param)
    ref0, _ = oracle_loss(R, "bpr-max", bpreg=0.0, elu_param=elu_param)
    c = float(v0) / ref0
    got, want = _lf6_term(model, R, 1.0, elu_param, c)
    if expect.holds(
        "regulariser term (bpreg=1)",
        got,
        reference=want,
        tolerance=REL_TOL * abs(want),
        rule="mean_i Σ_j s_ij·Ô_ij², 1e-5 relative",
    ):
        return
    memo: list[tuple[float, float, float]] = []

    def more() -> tuple[float, float, float]:
        if not memo:
            twice, _ = _lf6_term(model, R, 2.0, elu_param, c)
            other, other_want = _lf6_term(model, _matrix(7), 1.0, elu_param, c)
            memo.append((twice, other / other_want, got / want))
        return memo[0]

    def ignored() -> diagnosis.Finding:
        return diagnosis.decide(abs(got) <= REL_TOL * abs(want), f"term {got:.6g}")

    def linear_and_constant() -> tuple[bool, str]:
        twice, k2, k1 = more()
        doubles = abs(twice - 2 * got) <= 1e-4 * max(abs(twice), abs(want))
        same_k = abs(k2 - k1) <= 1e-4 * max(abs(k1), 1.0)
        evidence = f"bpreg=2 gives {twice:.6g} (2 × {got:.6g}); k = {k1:.6g} on these scores, {k2:.6g} on others"
        return doubles and same_k, evidence

    def weight() -> diagnosis.Finding:
        if abs(got) <= REL_TOL * abs(want):
            return diagnosis.ruled_out("no term at all")
        ok, evidence = linear_and_constant()
        return diagnosis.decide(ok, evidence)

    def form() -> diagnosis.Finding:
        if abs(got) <= REL_TOL * abs(want):
            return diagnosis.ruled_out("no term at all")
        ok, evidence = linear_and_constant()
        return diagnosis.decide(not ok, evidence)

    diagnosis.fail(
        f"loss(bpreg=1) − loss(bpreg=0) = {got:.6g} (after scale c = {c:.4g}), expected {want:.6g}",
        [LF6_TABLE[0].cause(ignored), LF6_TABLE[1].cause(weight), LF6_TABLE[2].cause(form)],
    )
