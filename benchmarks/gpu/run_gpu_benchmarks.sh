#!/usr/bin/env bash
# The GPU check of the GRU4Rec benchmarks, in two passes, so that one GPU loan (15 minutes, machine start included)
# leaves room to fix and rerun after a failed first pass:
#
#   bash benchmarks/gpu/run_gpu_benchmarks.sh validate   # <= 150 s: does everything work on this machine?
#   bash benchmarks/gpu/run_gpu_benchmarks.sh measure    # <= 300 s: the figures
#
# validate (GPU_BUDGET 150 s, kill graces included):
#   0. preflight (benchmarks/gpu/preflight.py): imports and versions into env.txt; missing pure-Python packages
#      installed from the wheels carried in benchmarks/gpu/wheels; stops the run when one is missing;
#   1. CUDA present, static step vs standard step on the device (benchmarks/gpu/check_static_step.py): agreement
#      of the trained weights and the CUDA-graph capture; stops the run, loudly, when there is no CUDA or the
#      capture fell back to the eager step;
#   2. one golden training step (tests/reference, the cross-entropy/logQ case) on the device;
#   3. one tiny benchmark case: one epoch of the reference and of the official port, Coveo cross-entropy,
#      GPU_TINY_MINIBATCHES (50; raised until every item occurs), one warm-up and one timed round;
#   and the report.
# measure (GPU_BUDGET 300 s):
#   0. preflight;
#   1. the headline: one epoch of the reference and of the official port at the study's Coveo cross-entropy
#      parameters (B=32, hidden 512, n_sample 2048) on data with Coveo's item count;
#   2. all golden training steps on the device, so the speed-up comes with the port's step results;
#   3. the other nine (dataset, loss) epochs: Yoochoose, Rees46, Coveo, RetailRocket, Diginetica at their real
#      catalogue sizes (docs/datasets.md, 'Published statistics'), both losses, cheapest first;
#   4. full-catalogue evaluation throughput of both on the five catalogues;
#   5. the catalogue-size sweep (10^4 .. 10^6 items), the largest first;
#   6. (GPU_SPEED_SESSIONS > 0) standard / eager static / graph static step speed, with what budget is left;
#   and the report.
# Every stage has its own limit and also stops where the pass's budget would run out (keeping the report's share).
# Within a stage, pytest runs with benchmarks/gpu/timebox.py: a case (both implementations of one dataset and
# loss) whose estimated time, from the cases already run, would pass the stage's end is dropped before it starts
# and recorded with the reason in results.jsonl; the report lists the dropped cases. Every epoch benchmark: one
# warm-up round and GPU_ROUNDS (3) timed rounds of a fresh model; each finished case is appended to
# $OUT/results.jsonl at once, so a stage killed at its limit loses only the case it was in.
#
# Usage (repository root; python3 with torch, pandas, pyarrow, pytest, pytest-benchmark, matplotlib):
#   OFFICIAL_GRU4REC_PATH=/path/to/GRU4Rec_PyTorch_Official OUT=/some/folder bash benchmarks/gpu/run_gpu_benchmarks.sh PASS
# Through this workplace's device tool (benchmarks/README.md, "The GPU check"): extract the official port at its
# pinned commit into an ignored folder, fill benchmarks/gpu/wheels, carry both, and run the commands given there.
#
# Environment: OUT (default reports/out/gpu/<UTC timestamp>-PASS); GPU_DEVICE (cuda); GPU_SCALE (1: the real item
# counts and minibatch numbers; the CPU dry run of tests/benchmarks/test_gpu_script.py uses a tiny fraction);
# GPU_TINY_MINIBATCHES (50), GPU_HEADLINE_MINIBATCHES (1500) and GPU_MINIBATCHES (400): minibatches per epoch of
# the tiny case, the headline and the other epochs and evaluations at scale 1 (more where every item must occur
# once: Rees46 / BPR-max, B=32, has 172,756 items: ~4,600); GPU_ROUNDS (3); GPU_BUDGET (150 / 300);
# GPU_KILL_GRACE (3); GPU_STAGE_LIMITS (seconds of the pass's stages and its report; validate "10 35 30 35 15",
# measure "10 60 25 115 25 25 15"); GPU_SWEEP_GRID (gpu; ci for the dry run); GPU_SPEED_SESSIONS (0: measure's
# stage 6 skipped); GPU_SUITE_COMMIT (recorded in env.txt: the copy the device tool runs has no .git); PYTHON
# (python3).
# Output under $OUT, at most 8 files (the device tool's limit): env.txt, log.txt, static_step.json (validate),
# golden_steps.xml, results.jsonl, report.md, plots/epoch_minibatches_per_s.png, plots/sweep_n_items.png (measure).
# Exit status: 0 when every stage passed (dropped cases are listed, not failures); 1 when a later stage failed or
# ran out of time (the report says which); 2 on a usage error; 4 when the checkout folder vanished during the run
# (removed from outside: nothing after that can run); the failing stage's status when a critical stage (preflight,
# the CUDA/graph check) stops the run on its own verdict.
set -euo pipefail
PASS=${1:-}
case $PASS in
  validate) DEFAULT_LIMITS="10 35 30 35 15" DEFAULT_BUDGET=150 ;;
  measure) DEFAULT_LIMITS="10 60 25 115 25 25 15" DEFAULT_BUDGET=300 ;;
  *) echo "usage: bash benchmarks/gpu/run_gpu_benchmarks.sh validate|measure (got '${PASS}')" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-reports/out/gpu/$STAMP-$PASS}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/log.txt"
DEVICE=${GPU_DEVICE:-cuda}
SCALE=${GPU_SCALE:-1}
BUDGET=${GPU_BUDGET:-$DEFAULT_BUDGET}
GRACE=${GPU_KILL_GRACE:-3}
GRID=${GPU_SWEEP_GRID:-gpu}
read -r -a LIMITS <<<"${GPU_STAGE_LIMITS:-$DEFAULT_LIMITS}"
N_DEFAULT=$(wc -w <<<"$DEFAULT_LIMITS")
if ((${#LIMITS[@]} != N_DEFAULT)); then
  echo "GPU_STAGE_LIMITS='${LIMITS[*]}': the $PASS pass needs $N_DEFAULT numbers (its stages and the report)" \
    | tee -a "$LOG" >&2
  exit 2
fi
TOTAL=0
for l in "${LIMITS[@]}"; do TOTAL=$((TOTAL + l + GRACE)); done
LR=${LIMITS[-1]}  # the report's share
if ((TOTAL > BUDGET)); then
  echo "GPU_STAGE_LIMITS add up to $TOTAL s with the kill graces, over GPU_BUDGET=$BUDGET s" | tee -a "$LOG" >&2
  exit 2
fi
case $GRID in
  gpu) SWEEP_ITEMS="1000000 10000 100000 300000 30000" ;;  # test_scalability.GRIDS, the largest first
  ci) SWEEP_ITEMS="20000 2000" ;;
  *) echo "GPU_SWEEP_GRID=$GRID: gpu or ci" | tee -a "$LOG" >&2; exit 2 ;;
esac
SITE="$ROOT/.cache/gpu-site"
export PYTHONPATH="$ROOT/src:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 GRU4REC_BENCH_NO_REPORT=1 GRU4REC_BENCH_DEVICE=$DEVICE \
  GRU4REC_BENCH_THREADS=${GRU4REC_BENCH_THREADS:-1} GRU4REC_BENCH_DATA=catalogue GRU4REC_BENCH_SCALE=$SCALE \
  GRU4REC_BENCH_ROUNDS=${GPU_ROUNDS:-3} GRU4REC_BENCH_WARMUP=1 GRU4REC_BENCH_REQUIRE_GRAPH=1 \
  GRU4REC_BENCH_RESULTS_JSONL="$OUT/results.jsonl" GRU4REC_BENCH_SWEEPS=$GRID GRU4REC_BENCH_SWEEP_ROUNDS=1
# hypothesis: seconds of import, unused; timebox: a stage's cases fitted to its time (benchmarks/gpu/timebox.py)
PYTEST=("$PY" -m pytest -p no:cacheprovider -p no:hypothesispytest -p gru4rec_conformance.benchmarks.gpu.timebox
  -q -rfE)

if [ -z "${OFFICIAL_GRU4REC_PATH:-}" ] || [ ! -f "${OFFICIAL_GRU4REC_PATH}/gru4rec_pytorch.py" ]; then
  echo "OFFICIAL_GRU4REC_PATH must point to a checkout of hidasib/GRU4Rec_PyTorch_Official (gru4rec_pytorch.py)" \
    | tee -a "$LOG" >&2
  exit 2
fi
OFFICIAL_GRU4REC_PATH=$(cd "$OFFICIAL_GRU4REC_PATH" && pwd)
export OFFICIAL_GRU4REC_PATH

{
  echo "run $STAMP, pass $PASS: device $DEVICE, scale $SCALE, budget $BUDGET s, stage limits ${LIMITS[*]} s" \
    "(kill grace $GRACE s), minibatches tiny/headline/other" \
    "${GPU_TINY_MINIBATCHES:-50}/${GPU_HEADLINE_MINIBATCHES:-1500}/${GPU_MINIBATCHES:-400}, rounds ${GPU_ROUNDS:-3} after 1 warm-up," \
    "sweep grid $GRID"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || echo "nvidia-smi: none"
  echo "suite: $(git rev-parse HEAD 2>/dev/null || echo "${GPU_SUITE_COMMIT:-no .git, GPU_SUITE_COMMIT unset}")"
  echo "official: $OFFICIAL_GRU4REC_PATH, $(git -C "$OFFICIAL_GRU4REC_PATH" rev-parse HEAD 2>/dev/null \
    || echo "no .git: the commit pinned in implementations/_checkout.py, below")"
  echo "official gru4rec_pytorch.py sha256 $(sha256sum "$OFFICIAL_GRU4REC_PATH/gru4rec_pytorch.py" | cut -d' ' -f1)"
} >"$OUT/env.txt" 2>&1

FAILED=()
STAGE_NO=0
# stage NAME CRITICAL COMMAND...: runs COMMAND under min(its limit, what the budget leaves after the report's
# share), with GPU_STAGE_DEADLINE (the timebox plugin's) a few seconds before that end; appends its output to
# log.txt; a CRITICAL stage that fails (other than by time) ends the run after the report.
stage() {
  local name="$STAGE_NO. $1" critical=$2 limit=${LIMITS[$STAGE_NO]} rc=0 left
  shift 2
  STAGE_NO=$((STAGE_NO + 1))
  left=$((BUDGET - SECONDS - LR - 2 * GRACE))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    echo "== $name: skipped, the budget is spent (${SECONDS} s of $BUDGET)" | tee -a "$LOG"
    FAILED+=("$name: skipped (budget spent)")
    return 0
  fi
  echo "== $name (limit $limit s, at $SECONDS s)" | tee -a "$LOG"
  # pytest's exit and teardown take a few seconds after the last case: the deadline leaves them room
  GPU_STAGE_DEADLINE=$(($(date +%s) + limit - (limit > 40 ? 6 : 3))) \
    timeout -s INT -k "$GRACE" "$limit" "$@" 2>&1 | tee -a "$LOG" || rc=$?
  if [ ! -d "$ROOT/src" ]; then
    # pytest then fails at its exit (os.chdir back to its start folder: FileNotFoundError), every later stage too
    echo "== $name: the checkout folder $ROOT vanished during the stage (removed from outside this run)" \
      | tee -a "$LOG" >&2
    exit 4
  fi
  if ((rc != 0)); then
    local why="exit status $rc"
    ((rc == 124 || rc == 137)) && why="ran out of its $limit s"
    echo "== $name: FAILED ($why)" | tee -a "$LOG"
    FAILED+=("$name: $why")
    # a critical stage's own verdict (a missing package, no CUDA, no CUDA graph) ends the run; its running out of
    # time does not: the reference's benchmark fits still refuse a fit without a graph (GRU4REC_BENCH_REQUIRE_GRAPH)
    if [ "$critical" = critical ] && ((rc != 124 && rc != 137)); then
      report
      exit "$rc"
    fi
  fi
}
report() {
  echo "== report (at $SECONDS s)" | tee -a "$LOG"
  {
    echo "stages failed or skipped: ${#FAILED[@]}"
    for f in "${FAILED[@]+"${FAILED[@]}"}"; do echo "  - $f"; done
  } | tee -a "$OUT/env.txt" "$LOG"
  timeout -k "$GRACE" "$LR" "$PY" benchmarks/gpu/gpu_report.py "$OUT" 2>&1 | tee -a "$LOG" || true
}
epochs() {  # node ids of test_epoch for "dataset/loss" cases, the reference before the official port
  local c
  for c in "$@"; do
    for impl in reference official; do echo "benchmarks/test_epoch.py::test_epoch[impl=$impl-${c%/*}-${c#*/}-best]"; done
  done
}
GOLDEN="tests/reference/test_ref_golden.py::test_training_step_matches_official"
GOLDEN_K=cpu
[[ $DEVICE == cuda* ]] && GOLDEN_K=cuda

stage "preflight" critical "$PY" benchmarks/gpu/preflight.py --env-out "$OUT/env.txt" --site "$SITE"
"$PY" -c "from gru4rec_conformance.implementations._checkout import CHECKOUTS as C
print('official pinned:', C['gru4rec_pytorch_official'].commit)" >>"$OUT/env.txt" 2>&1 || true

if [ "$PASS" = validate ]; then
  stage "CUDA, static step vs standard step, CUDA-graph capture" critical "$PY" benchmarks/gpu/check_static_step.py \
    --device "$DEVICE" --out "$OUT/static_step.json" --speed-sessions 0 --require-graph

  stage "one golden training step on $DEVICE" no "${PYTEST[@]}" "$GOLDEN[xe_shared_logq1-$GOLDEN_K]" \
    --junitxml="$OUT/golden_steps.xml"

  mapfile -t TINY_IDS < <(epochs coveo/cross-entropy)
  GRU4REC_BENCH_MINIBATCHES=${GPU_TINY_MINIBATCHES:-50} GRU4REC_BENCH_ROUNDS=1 \
    stage "one tiny benchmark case: Coveo cross-entropy, reference vs official" no "${PYTEST[@]}" "${TINY_IDS[@]}"
else
  mapfile -t HEAD_IDS < <(epochs coveo/cross-entropy)
  GRU4REC_BENCH_MINIBATCHES=${GPU_HEADLINE_MINIBATCHES:-1500} \
    stage "headline: Coveo cross-entropy, reference vs official" no "${PYTEST[@]}" "${HEAD_IDS[@]}"

  stage "golden training steps on $DEVICE" no "${PYTEST[@]}" "$GOLDEN" -k "$GOLDEN_K" \
    --junitxml="$OUT/golden_steps.xml"

  # cheapest first: the Rees46 / BPR-max case (~4,600 minibatches at scale 1) is the one the time box drops first
  mapfile -t EPOCH_IDS < <(epochs diginetica/cross-entropy diginetica/bpr-max retailrocket/cross-entropy \
    retailrocket/bpr-max coveo/bpr-max yoochoose/cross-entropy yoochoose/bpr-max rees46/cross-entropy rees46/bpr-max)
  GRU4REC_BENCH_MINIBATCHES=${GPU_MINIBATCHES:-400} \
    stage "the other nine epochs, five catalogues" no "${PYTEST[@]}" "${EPOCH_IDS[@]}"

  EVAL_IDS=()
  for d in coveo diginetica retailrocket yoochoose rees46; do
    for impl in reference official; do EVAL_IDS+=("benchmarks/test_epoch.py::test_evaluation[impl=$impl-$d]"); done
  done
  GRU4REC_BENCH_MINIBATCHES=${GPU_MINIBATCHES:-400} \
    stage "evaluation throughput, five catalogues" no "${PYTEST[@]}" "${EVAL_IDS[@]}"

  SWEEP_IDS=()
  for n in $SWEEP_ITEMS; do
    for impl in reference official; do SWEEP_IDS+=("benchmarks/test_scalability.py::test_sweep[n_items=$n-impl=$impl]"); done
  done
  stage "catalogue-size sweep" no "${PYTEST[@]}" "${SWEEP_IDS[@]}"

  if ((${GPU_SPEED_SESSIONS:-0} > 0)); then
    LIMITS[STAGE_NO]=$BUDGET  # what the budget leaves (stage() caps it; the report keeps its share, LR)
    stage "step variants' speed" no "$PY" benchmarks/gpu/check_static_step.py --device "$DEVICE" \
      --out "$OUT/static_step.json" --update --no-agreement --speed-sessions "$GPU_SPEED_SESSIONS" --require-graph
  fi
fi

report
echo "done ($PASS) in $SECONDS s: $OUT" | tee -a "$LOG"
((${#FAILED[@]} == 0)) || exit 1
