#!/usr/bin/env bash
# Issue 31's GPU steps, for a lease whose commands run at most 10 minutes each:
#
#   bash benchmarks/gpu_identity.sh fold OUT          # split the corpus's CUDA forms out, verified there
#   setsid nohup bash benchmarks/gpu_identity.sh campaigns OUT SECONDS &   # nvFuser and Inductor at once
#   bash benchmarks/gpu_identity.sh collect OUT       # what each campaign called new, against minimized/
#
# fold: `python -m fuzzfuse.fold minimized --split-on cuda` (every listed form of another bug gets a
# directory of its own, written and verified 3 of 3 in fresh processes on this GPU), its report in
# OUT/fold.txt and the corpus in OUT/minimized.tgz.
# campaigns: a fresh-seed campaign of each fuser with --known minimized, 8 workers each, side by
# side for SECONDS, into OUT/nvfuser and OUT/inductor; OUT/campaigns.done at the end.
# collect: `python -m fuzzfuse.identity RUN/minimized --against minimized` for each (known or new,
# and for a new bug the nearest committed one and what differs), the summaries, all in OUT/runs.tgz.
set -u
STEP=${1:?usage: gpu_identity.sh fold|campaigns|collect OUT [SECONDS]}
OUT=${2:?usage: gpu_identity.sh fold|campaigns|collect OUT [SECONDS]}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
case "$STEP" in
  fold)
    python3 -m fuzzfuse.fold minimized --split-on cuda --jobs 12 > "$OUT/fold.txt" 2>&1
    echo "fold exit $?" >> "$OUT/fold.txt"
    tar czf "$OUT/minimized.tgz" minimized
    ;;
  campaigns)
    SECONDS_EACH=${3:-540}
    for backend in nvfuser inductor; do
      timeout $((SECONDS_EACH + 240)) python3 -m fuzzfuse fuzz --backend "$backend" --workers 8 \
        --time "$SECONDS_EACH" --known minimized --out "$OUT/$backend" > "$OUT/$backend.log" 2>&1 < /dev/null &
    done
    wait
    touch "$OUT/campaigns.done"
    ;;
  collect)
    for backend in nvfuser inductor; do
      echo "== $backend" >> "$OUT/new.txt"
      tail -25 "$OUT/$backend.log" >> "$OUT/new.txt"
      python3 -m fuzzfuse.identity "$OUT/$backend/minimized" --against minimized >> "$OUT/new.txt" 2>&1
    done
    tar czf "$OUT/runs.tgz" -C "$OUT" nvfuser inductor nvfuser.log inductor.log
    ;;
  *) echo "gpu_identity.sh: unknown step $STEP" >&2; exit 2 ;;
esac
