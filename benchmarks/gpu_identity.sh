#!/usr/bin/env bash
# Issue 31's GPU steps, for a lease whose commands run at most 10 minutes each:
#
#   bash benchmarks/gpu_identity.sh fold OUT          # split the corpus's CUDA forms out, verified there
#   setsid nohup bash benchmarks/gpu_identity.sh campaign OUT BACKEND [SECONDS] &   # one fuser, all cores
#   bash benchmarks/gpu_identity.sh collect OUT       # what each campaign called new, against minimized/
#
# fold: `fuzzfuse corpus fold minimized --split-on cuda` (every listed form of another bug gets a
# directory of its own, written and verified 3 of 3 in fresh processes on this GPU), its report in
# OUT/fold.txt, every CUDA repro's run in OUT/gpu_outputs.json and the corpus in OUT/minimized.tgz.
# campaign: a fresh-seed campaign of BACKEND with --known minimized on every core for SECONDS
# (default 600), into OUT/BACKEND; OUT/BACKEND.done at the end.
# collect: `fuzzfuse corpus bugs RUN/minimized --against minimized` for each (known or new,
# and for a new bug the nearest committed one and what differs), the summaries, all in OUT/runs.tgz.
set -u
STEP=${1:?usage: gpu_identity.sh fold|campaign|collect OUT [BACKEND [SECONDS]]}
OUT=${2:?usage: gpu_identity.sh fold|campaign|collect OUT [BACKEND [SECONDS]]}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
case "$STEP" in
  fold)
    python3 -m fuzzfuse corpus fold minimized --split-on cuda --jobs 12 > "$OUT/fold.txt" 2>&1
    echo "fold exit $?" >> "$OUT/fold.txt"
    # Every CUDA repro run once more, for the READMEs (fuzzfuse report --regenerate --outputs);
    # the hang's repro waits out its timeout, so it runs beside the others.
    PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 benchmarks/gpu_repro_outputs.py minimized --jobs 12 --out "$OUT/gpu_outputs.json" \
      > "$OUT/outputs.txt" 2>&1
    tar czf "$OUT/minimized.tgz" minimized
    ;;
  campaign)
    BACKEND=${3:?usage: gpu_identity.sh campaign OUT BACKEND [SECONDS]}
    timeout $((${4:-600} + 240)) python3 -m fuzzfuse fuzz --backend "$BACKEND" --time "${4:-600}" --known minimized \
      --out "$OUT/$BACKEND" > "$OUT/$BACKEND.log" 2>&1 < /dev/null
    touch "$OUT/$BACKEND.done"
    ;;
  collect)
    for backend in nvfuser inductor; do
      echo "== $backend" >> "$OUT/new.txt"
      tail -25 "$OUT/$backend.log" >> "$OUT/new.txt"
      python3 -m fuzzfuse corpus bugs "$OUT/$backend/minimized" --against minimized >> "$OUT/new.txt" 2>&1
    done
    tar czf "$OUT/runs.tgz" -C "$OUT" nvfuser inductor nvfuser.log inductor.log
    ;;
  *) echo "gpu_identity.sh: unknown step $STEP" >&2; exit 2 ;;
esac
