#!/usr/bin/env bash
# One GPU check of the GRU4Rec benchmarks, sized to finish in under 10 minutes on one H200:
#   1. the static (CUDA-graph) training step against the standard step on CUDA: agreement of the trained weights
#      and the speed of standard / eager static / graph static (benchmarks/gpu/check_static_step.py);
#   2. one epoch of the official PyTorch port and of the reference side by side at the study's best parameters on
#      synthetic Coveo, Diginetica and RetailRocket data, both losses (benchmarks/test_epoch.py::test_epoch);
#   3. the catalogue-size sweep (10^4 .. 10^6 items) of both (benchmarks/test_scalability.py, n_items);
#   4. full-catalogue evaluation throughput of both on the same three datasets.
# Each stage has its own time limit; a stage that runs out leaves what it finished.
#
# Usage (repository root; python3 with torch+CUDA, pandas, pyarrow, pytest, pytest-benchmark, matplotlib):
#   OFFICIAL_GRU4REC_PATH=/path/to/GRU4Rec_PyTorch_Official OUT=/some/folder benchmarks/gpu/run_gpu_benchmarks.sh
# Through this workplace's device tool: the official checkout is not part of the repository (it is never committed):
# extract it into an ignored folder and carry it, e.g. here
#   git -C /work/.mirror/hidasib+GRU4Rec_PyTorch_Official/repo archive --prefix=official/ HEAD | tar -x -C .cache
# then run with carry [".cache/official"] and the command
#   OFFICIAL_GRU4REC_PATH=.cache/official bash benchmarks/gpu/run_gpu_benchmarks.sh
#
# Environment: OUT (where the results go; default reports/out/gpu/<UTC timestamp>), GPU_SCALE (fraction of the full
# §1.6a data of the epoch benchmarks; default 0.25 so that the official port's six epochs take about 80 s),
# GPU_STAGE_LIMITS (seconds of the four stages, default "100 330 100 45"), GPU_SPEED_SESSIONS (sessions of stage 1's
# speed data, default 8000). A smoke test of the script's logic on a CPU machine (tiny sizes, no CUDA graph):
#   PYTHON=/work/venv/bin/python GPU_DEVICE=cpu GPU_SCALE='ci*0.3' GPU_SWEEP_GRID=ci GPU_SPEED_SESSIONS=300 \
#     OUT=/tmp/gpu-smoke \
#     OFFICIAL_GRU4REC_PATH=... bash benchmarks/gpu/run_gpu_benchmarks.sh
# Output (at most 8 files, for the device tool): env.txt, log.txt, static_step.json, benchmark.json (the three
# pytest-benchmark runs merged), report.md, plots/*.png (epoch rates, n_items sweep, evaluation).
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-reports/out/gpu/$STAMP}
mkdir -p "$OUT"
SCALE=${GPU_SCALE:-0.25}
DEVICE=${GPU_DEVICE:-cuda}
GRID=${GPU_SWEEP_GRID:-gpu}
read -r L1 L2 L3 L4 <<<"${GPU_STAGE_LIMITS:-100 330 100 45}"
WORK=$(mktemp -d)
export PYTHONUNBUFFERED=1 GRU4REC_BENCH_DEVICE=$DEVICE GRU4REC_BENCH_CACHE=${GRU4REC_BENCH_CACHE:-$WORK/cache} \
       GRU4REC_BENCH_THREADS=${GRU4REC_BENCH_THREADS:-1} GRU4REC_BENCH_NO_REPORT=1 HF_HUB_OFFLINE=1
LOG="$OUT/log.txt"
{
  echo "run $STAMP, device $DEVICE, scale $SCALE, sweep grid $GRID, stage limits $L1 $L2 $L3 $L4 s"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  $PY -c "import torch, numpy, pandas, platform; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.get_device_name() if torch.cuda.is_available() else None, 'numpy', numpy.__version__, 'pandas', pandas.__version__, 'python', platform.python_version())"
  git rev-parse HEAD 2>/dev/null || echo "no git"
  echo "OFFICIAL_GRU4REC_PATH=${OFFICIAL_GRU4REC_PATH:-unset}"
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if [ -z "${OFFICIAL_GRU4REC_PATH:-}" ] || [ ! -f "${OFFICIAL_GRU4REC_PATH}/gru4rec_pytorch.py" ]; then
  echo "OFFICIAL_GRU4REC_PATH must point to a checkout of hidasib/GRU4Rec_PyTorch_Official (gru4rec_pytorch.py)" | tee -a "$LOG"
  exit 2
fi
export OFFICIAL_GRU4REC_PATH

echo "== 1. static step vs standard step on CUDA" | tee -a "$LOG"
timeout -s INT -k 20 "$L1" $PY benchmarks/gpu/check_static_step.py --device "$DEVICE" --out "$OUT/static_step.json" \
  --speed-sessions "${GPU_SPEED_SESSIONS:-8000}" 2>&1 | tee -a "$LOG"

echo "== 2. one epoch, official vs reference (scale $SCALE)" | tee -a "$LOG"
GRU4REC_BENCH_SCALE=$SCALE GRU4REC_BENCH_DATASETS=coveo,diginetica,retailrocket GRU4REC_BENCH_ROUNDS=1 \
GRU4REC_BENCH_WARMUP=0 timeout -s INT -k 20 "$L2" $PY -m pytest benchmarks/test_epoch.py -k test_epoch -p no:cacheprovider -q \
  --benchmark-json="$WORK/epoch.json" 2>&1 | tee -a "$LOG"

echo "== 3. catalogue-size sweep" | tee -a "$LOG"
GRU4REC_BENCH_SWEEPS=$GRID GRU4REC_BENCH_SWEEP_ROUNDS=1 GRU4REC_BENCH_WARMUP=0 timeout -s INT -k 20 "$L3" \
  $PY -m pytest benchmarks/test_scalability.py -k "n_items" -p no:cacheprovider -q \
  --benchmark-json="$WORK/sweep.json" 2>&1 | tee -a "$LOG"

echo "== 4. evaluation throughput" | tee -a "$LOG"
GRU4REC_BENCH_SCALE=$SCALE GRU4REC_BENCH_DATASETS=coveo,diginetica,retailrocket GRU4REC_BENCH_ROUNDS=1 \
GRU4REC_BENCH_WARMUP=0 timeout -s INT -k 20 "$L4" $PY -m pytest benchmarks/test_epoch.py -k test_evaluation -p no:cacheprovider \
  -q --benchmark-json="$WORK/eval.json" 2>&1 | tee -a "$LOG"

echo "== report" | tee -a "$LOG"
$PY - "$WORK" "$OUT" <<'PYEOF' 2>&1 | tee -a "$LOG"
import json, os, shutil, sys
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
parts = []
for p in (work / "epoch.json", work / "sweep.json", work / "eval.json"):
    try:
        parts.append(json.loads(p.read_text()))
    except (OSError, ValueError):
        print(f"{p.name}: no benchmark results (the stage failed or ran out of time)")
if not parts:
    sys.exit("no benchmark JSON was written")
merged = dict(parts[0])
merged["benchmarks"] = [b for p in parts for b in p["benchmarks"]]
for b in merged["benchmarks"]:
    (b.get("stats") or {}).pop("data", None)
(out / "benchmark.json").write_text(json.dumps(merged, indent=1))
sys.path.insert(0, os.getcwd())
from benchmarks.report import write_report
folder = write_report(out / "benchmark.json", work / "report", title="GRU4Rec benchmarks on GPU")
shutil.copyfile(folder / "report.md", out / "report.md")
(out / "plots").mkdir(exist_ok=True)
for png in sorted((folder / "plots").glob("*.png")):
    if png.name in ("epoch_minibatches_per_s.png", "sweep_n_items.png", "eval_events_per_s.png"):
        shutil.copyfile(png, out / "plots" / png.name)
print("report:", out / "report.md")
PYEOF
rm -rf "$WORK"
