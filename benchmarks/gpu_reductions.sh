#!/usr/bin/env bash
# Issue 34's figures on the GPU machine (16 cores, one GPU), in one run whose total time is a
# parameter. A device command runs at most 10 minutes: start it detached, collect OUT later.
#
#   source .gpu/setup.sh
#   setsid nohup bash benchmarks/gpu_reductions.sh OUT [TOTAL_SECONDS] [WORKERS] > /dev/null 2>&1 &
#   # then, until OUT/done exists:  cat OUT/steps.log OUT/figures.txt
#
# TOTAL_SECONDS (default 1800) is shared out as:
# (a) 30%: benchmarks/reduce_parallel.py on the 5 largest saved nvFuser cases (corpus/nvfuser) and
#     the 5 largest Inductor-CUDA cases (corpus/inductor_cuda) that still fail as recorded, hangs
#     left out, each reduced with 1 and with WORKERS (default 16) workers in turn: the wall ratio
#     and whether every repro is the same or smaller (target: ratio <= 0.25);
# (b) the rest: an nvFuser campaign, then an Inductor one, each `fuzz --time T --known minimized`
#     on WORKERS workers with the default --reduce-share, T = (70% of TOTAL) / 2 - 30 s (600 s at the
#     default TOTAL); from its summary: the fuzzing share of the wall, the workers' busy share, the
#     hits left pending (targets: >= 0.70, >= 0.80, <= 3) and where the wall time went.
# Everything lands in OUT as it is made (figures.txt grows step by step), so a lease that ends
# early still returns the steps before. OUT/done appears at the end.
set -u
OUT=${1:?usage: gpu_reductions.sh OUT [TOTAL_SECONDS] [WORKERS]}
TOTAL=${2:-1800}
WORKERS=${3:-16}
if [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "gpu_reductions.sh: $OUT already holds files (an earlier run's?): give a new or empty directory" >&2
  exit 2
fi
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
stamp() { echo "$(date +%T) $*" | tee -a "$OUT/steps.log"; }
REDUCE=$(( TOTAL * 30 / 100 ))
CAMPAIGN=$(( TOTAL * 70 / 100 / 2 - 30 ))

stamp "(a) parallel reduction, 1 vs $WORKERS workers, at most ${REDUCE}s"
# No case starts after 80% of its share: the one under way finishes within the rest.
timeout $(( REDUCE + 300 )) python3 benchmarks/reduce_parallel.py corpus/nvfuser corpus/inductor_cuda \
  --per-backend 5 --workers 1 "$WORKERS" --max-queries 200 --max-seconds $(( REDUCE * 80 / 100 )) \
  --json "$OUT/reduce_parallel.json" > "$OUT/reduce_parallel.log" 2>&1 < /dev/null
stamp "reduce_parallel exit $?"
tail -n 12 "$OUT/reduce_parallel.log" | tee -a "$OUT/figures.txt"

for BACKEND in nvfuser inductor; do
  stamp "(b) $BACKEND campaign ${CAMPAIGN}s on $WORKERS workers, --known minimized"
  timeout $(( CAMPAIGN + 120 )) python3 -m fuzzfuse fuzz --backend "$BACKEND" --time "$CAMPAIGN" --known minimized \
    --workers "$WORKERS" --out "$OUT/$BACKEND" > "$OUT/$BACKEND.log" 2>&1 < /dev/null
  stamp "$BACKEND campaign exit $?"
  python3 benchmarks/reduce_campaign_figures.py "$OUT/$BACKEND/summary.json" | tee -a "$OUT/figures.txt"
done
touch "$OUT/done"
stamp "done"
