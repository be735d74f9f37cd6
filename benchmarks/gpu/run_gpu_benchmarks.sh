#!/usr/bin/env bash
# The GPU check of the GRU4Rec benchmarks: one run, at most GPU_BUDGET (480) seconds in all, kill grace included,
# the most important figure first. Stages (each has its own limit; a stage also stops where the total budget
# would run out, keeping the report's share):
#   0. preflight (10 s): imports and versions into env.txt; missing pure-Python packages installed from the
#      wheels carried in benchmarks/gpu/wheels (benchmarks/gpu/preflight.py); stops the run when one is missing;
#      (stages 0 and 1 stop the run on their own verdict, not when they merely run out of time)
#   1. static step vs standard step on the device (benchmarks/gpu/check_static_step.py): agreement of the trained
#      weights and the CUDA-graph capture; stops the run, loudly, when the capture fell back to the eager step;
#   2. the headline: one epoch of the reference and of the official port at the study's Coveo cross-entropy
#      parameters (B=32, hidden 512, n_sample 2048) on data with Coveo's item count;
#   3. the golden training steps (tests/reference) on the device, so the speed-up comes with the port's step results;
#   4. the other nine (dataset, loss) epochs: Yoochoose, Rees46, Coveo, RetailRocket, Diginetica at their real
#      catalogue sizes (datasets.md §1.6a), both losses;
#   5. full-catalogue evaluation throughput of both on the five catalogues;
#   6. the catalogue-size sweep (10^4 .. 10^6 items), the largest first;
#   7. (GPU_SPEED_SESSIONS > 0) standard / eager static / graph static step speed, with what budget is left;
#   and the report. Every epoch benchmark: one warm-up round and GPU_ROUNDS (3) timed rounds of a fresh model;
# each finished case is appended to $OUT/results.jsonl at once, so a stage killed at its limit loses only the
# case it was in.
#
# Usage (repository root; python3 with torch, pandas, pyarrow, pytest, pytest-benchmark, matplotlib):
#   OFFICIAL_GRU4REC_PATH=/path/to/GRU4Rec_PyTorch_Official OUT=/some/folder bash benchmarks/gpu/run_gpu_benchmarks.sh
# Through this workplace's device tool (benchmarks/README.md, "The GPU check"): extract the official port at its
# pinned commit into an ignored folder, fill benchmarks/gpu/wheels, carry both, and run the command given there.
#
# Environment: OUT (default reports/out/gpu/<UTC timestamp>); GPU_DEVICE (cuda); GPU_SCALE (1: the real item
# counts and minibatch numbers; the CPU dry run of tests/benchmarks/test_gpu_script.py uses a tiny fraction);
# GPU_HEADLINE_MINIBATCHES (1500) and GPU_MINIBATCHES (400): minibatches per epoch of stage 2 and of stages 4-5
# at scale 1 (more where every item must occur once: Rees46 / BPR-max, B=32, has 172,756 items: ~4,600);
# GPU_ROUNDS (3); GPU_BUDGET (480); GPU_KILL_GRACE (5); GPU_STAGE_LIMITS (seconds of stages 0-6 and the report,
# default "10 40 70 35 205 30 30 15": with 8 kill graces 475 s); GPU_SWEEP_GRID (gpu; ci for the dry run);
# GPU_SPEED_SESSIONS (0: stage 7 skipped); GPU_SUITE_COMMIT (recorded in env.txt: the copy the device tool runs
# has no .git); PYTHON (python3).
# Output under $OUT, at most 8 files (the device tool's limit): env.txt, log.txt, static_step.json,
# golden_steps.xml, results.jsonl, report.md, plots/epoch_minibatches_per_s.png, plots/sweep_n_items.png.
# Exit status: 0 when every stage passed; 1 when a later stage failed or ran out of time (the report says which);
# 2 on a usage error; the failing stage's status when stage 0 or 1 stops the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-reports/out/gpu/$STAMP}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DEVICE=${GPU_DEVICE:-cuda}
SCALE=${GPU_SCALE:-1}
BUDGET=${GPU_BUDGET:-480}
GRACE=${GPU_KILL_GRACE:-5}
GRID=${GPU_SWEEP_GRID:-gpu}
read -r L0 L1 L2 L3 L4 L5 L6 LR <<<"${GPU_STAGE_LIMITS:-10 40 70 35 205 30 30 15}"
TOTAL=$((L0 + L1 + L2 + L3 + L4 + L5 + L6 + LR + 8 * GRACE))
LOG="$OUT/log.txt"
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
PYTEST=("$PY" -m pytest -p no:cacheprovider -p no:hypothesispytest -q -rfE)  # hypothesis: seconds of import, unused

if [ -z "${OFFICIAL_GRU4REC_PATH:-}" ] || [ ! -f "${OFFICIAL_GRU4REC_PATH}/gru4rec_pytorch.py" ]; then
  echo "OFFICIAL_GRU4REC_PATH must point to a checkout of hidasib/GRU4Rec_PyTorch_Official (gru4rec_pytorch.py)" \
    | tee -a "$LOG" >&2
  exit 2
fi
OFFICIAL_GRU4REC_PATH=$(cd "$OFFICIAL_GRU4REC_PATH" && pwd)
export OFFICIAL_GRU4REC_PATH

{
  echo "run $STAMP: device $DEVICE, scale $SCALE, budget $BUDGET s, stage limits $L0 $L1 $L2 $L3 $L4 $L5 $L6 $LR s" \
    "(kill grace $GRACE s), minibatches ${GPU_HEADLINE_MINIBATCHES:-1500}/${GPU_MINIBATCHES:-400}," \
    "rounds ${GPU_ROUNDS:-3} after 1 warm-up, sweep grid $GRID"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || echo "nvidia-smi: none"
  echo "suite: $(git rev-parse HEAD 2>/dev/null || echo "${GPU_SUITE_COMMIT:-no .git, GPU_SUITE_COMMIT unset}")"
  echo "official: $OFFICIAL_GRU4REC_PATH, $(git -C "$OFFICIAL_GRU4REC_PATH" rev-parse HEAD 2>/dev/null \
    || echo "no .git: the commit pinned in implementations/_checkout.py, below")"
  echo "official gru4rec_pytorch.py sha256 $(sha256sum "$OFFICIAL_GRU4REC_PATH/gru4rec_pytorch.py" | cut -d' ' -f1)"
} >"$OUT/env.txt" 2>&1

FAILED=()
# stage NAME LIMIT CRITICAL COMMAND...: runs COMMAND under min(LIMIT, what the budget leaves after the report's
# share), appends its output to log.txt; a CRITICAL stage that fails (other than by time) ends the run after the
# report.
stage() {
  local name=$1 limit=$2 critical=$3 rc=0 left
  shift 3
  left=$((BUDGET - SECONDS - LR - 2 * GRACE))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    echo "== $name: skipped, the budget is spent (${SECONDS} s of $BUDGET)" | tee -a "$LOG"
    FAILED+=("$name: skipped (budget spent)")
    return 0
  fi
  echo "== $name (limit $limit s, at $SECONDS s)" | tee -a "$LOG"
  timeout -s INT -k "$GRACE" "$limit" "$@" 2>&1 | tee -a "$LOG" || rc=$?
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

stage "0. preflight" "$L0" critical "$PY" benchmarks/gpu/preflight.py --env-out "$OUT/env.txt" --site "$SITE"
"$PY" -c "from gru4rec_conformance.implementations._checkout import CHECKOUTS as C
print('official pinned:', C['gru4rec_pytorch_official'].commit)" >>"$OUT/env.txt" 2>&1 || true

stage "1. static step vs standard step, CUDA-graph capture" "$L1" critical "$PY" benchmarks/gpu/check_static_step.py \
  --device "$DEVICE" --out "$OUT/static_step.json" --speed-sessions 0 --require-graph

mapfile -t HEAD_IDS < <(epochs coveo/cross-entropy)
GRU4REC_BENCH_MINIBATCHES=${GPU_HEADLINE_MINIBATCHES:-1500} \
  stage "2. headline: Coveo cross-entropy, reference vs official" "$L2" no "${PYTEST[@]}" "${HEAD_IDS[@]}"

GOLDEN_K=cpu
[[ $DEVICE == cuda* ]] && GOLDEN_K=cuda
stage "3. golden training steps on $DEVICE" "$L3" no "${PYTEST[@]}" \
  "tests/reference/test_ref_golden.py::test_training_step_matches_official" -k "$GOLDEN_K" \
  --junitxml="$OUT/golden_steps.xml"

# cheapest first: the Rees46 / BPR-max case (~4,600 minibatches at scale 1) is the one a time-out would cost
mapfile -t EPOCH_IDS < <(epochs diginetica/cross-entropy diginetica/bpr-max retailrocket/cross-entropy \
  retailrocket/bpr-max coveo/bpr-max yoochoose/cross-entropy yoochoose/bpr-max rees46/cross-entropy rees46/bpr-max)
GRU4REC_BENCH_MINIBATCHES=${GPU_MINIBATCHES:-400} \
  stage "4. the other nine epochs, five catalogues" "$L4" no "${PYTEST[@]}" "${EPOCH_IDS[@]}"

EVAL_IDS=()
for d in coveo diginetica retailrocket yoochoose rees46; do
  for impl in reference official; do EVAL_IDS+=("benchmarks/test_epoch.py::test_evaluation[impl=$impl-$d]"); done
done
GRU4REC_BENCH_MINIBATCHES=${GPU_MINIBATCHES:-400} \
  stage "5. evaluation throughput, five catalogues" "$L5" no "${PYTEST[@]}" "${EVAL_IDS[@]}"

SWEEP_IDS=()
for n in $SWEEP_ITEMS; do
  for impl in reference official; do SWEEP_IDS+=("benchmarks/test_scalability.py::test_sweep[n_items=$n-impl=$impl]"); done
done
stage "6. catalogue-size sweep" "$L6" no "${PYTEST[@]}" "${SWEEP_IDS[@]}"

if ((${GPU_SPEED_SESSIONS:-0} > 0)); then
  stage "7. step variants' speed" "$BUDGET" no "$PY" benchmarks/gpu/check_static_step.py --device "$DEVICE" \
    --out "$OUT/static_step.json" --update --no-agreement --speed-sessions "$GPU_SPEED_SESSIONS" --require-graph
fi

report
echo "done in $SECONDS s: $OUT" | tee -a "$LOG"
((${#FAILED[@]} == 0)) || exit 1
