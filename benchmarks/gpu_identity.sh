#!/usr/bin/env bash
# Issue 31's GPU steps, for a lease whose commands run at most 10 minutes each:
#
#   bash benchmarks/gpu_identity.sh fold OUT          # split the corpus's CUDA forms out, verified there
#   bash benchmarks/gpu_identity.sh refresh OUT [SECONDS]   # today's identity of every CUDA repro
#   setsid nohup bash benchmarks/gpu_identity.sh campaign OUT BACKEND [SECONDS [WORKERS [REDUCE_SHARE]]] &
#   bash benchmarks/gpu_identity.sh wait OUT SECONDS BACKEND...   # until each campaign is done
#   bash benchmarks/gpu_identity.sh resume OUT BACKEND SECONDS     # its pending reductions, bounded
#   bash benchmarks/gpu_identity.sh collect OUT       # what each campaign called new, against minimized/
#
# A lease's call ends at its own limit and takes nothing back with it: wait for a detached step
# with `wait` (it reads OUT/BACKEND.done, with a deadline), never with `pgrep -f PATTERN`, which
# matches the calling shell's own command line whenever the pattern is in it (two sessions lost
# their device time that way).
#
# fold: `fuzzfuse corpus fold minimized --split-on cuda` (every listed form of another bug gets a
# directory of its own, written and verified 3 of 3 in fresh processes on this GPU), its report in
# OUT/fold.txt, every CUDA repro's run in OUT/gpu_outputs.json and the corpus in OUT/minimized.tgz.
# refresh: `fuzzfuse corpus refresh --generalise` of every directory of minimized/ recorded on a GPU
# (or of nvFuser),
# in 8 shards side by side, each stopped after SECONDS (default 240; a directory done is written):
# a signature recorded before a wrong rule explained it (fuzzfuse.explain: a zero's sign lost by
# one op) is keyed by its graph, and --known misses the same bug found again. The case.json files
# in OUT/refreshed.tgz, the lines in OUT/refresh.txt.
# campaign: a fresh-seed campaign of BACKEND with --known minimized for SECONDS (default 600) on
# WORKERS workers (default: every core), REDUCE_SHARE of them reducing as it goes (default: the
# CLI's), into OUT/BACKEND; OUT/BACKEND.done at the end.
# collect: `fuzzfuse corpus bugs RUN/minimized --against minimized` for each (known or new,
# and for a new bug the nearest committed one and what differs), the summaries, all in OUT/runs.tgz.
set -u
STEP=${1:?usage: gpu_identity.sh fold|refresh|campaign|wait|resume|collect OUT ...}
OUT=${2:?usage: gpu_identity.sh fold|refresh|campaign|wait|resume|collect OUT ...}
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
  refresh)
    python3 -c "import glob, json
for p in sorted(glob.glob('minimized/*/case.json')):
    case = json.load(open(p))
    if (case.get('versions') or {}).get('gpu') or 'nvfuser' in case['backend']: print(p[:-len('/case.json')])" \
      > "$OUT/gpu_dirs.txt"
    split -n r/8 "$OUT/gpu_dirs.txt" "$OUT/shard."
    for shard in "$OUT"/shard.*; do
      xargs -a "$shard" timeout "${3:-240}" python3 -m fuzzfuse corpus refresh --generalise > "$shard.out" 2>&1 &
    done
    wait
    cat "$OUT"/shard.*.out > "$OUT/refresh.txt"
    tar czf "$OUT/refreshed.tgz" $(sed 's|$|/case.json|' "$OUT/gpu_dirs.txt")
    ;;
  campaign)
    BACKEND=${3:?usage: gpu_identity.sh campaign OUT BACKEND [SECONDS [WORKERS [REDUCE_SHARE]]]}
    timeout $((${4:-600} + 240)) python3 -m fuzzfuse fuzz --backend "$BACKEND" --time "${4:-600}" --known minimized \
      ${5:+--workers "$5"} ${6:+--reduce-share "$6"} --out "$OUT/$BACKEND" > "$OUT/$BACKEND.log" 2>&1 < /dev/null
    touch "$OUT/$BACKEND.done"
    ;;
  wait)
    DEADLINE=$((SECONDS + ${3:?usage: gpu_identity.sh wait OUT SECONDS BACKEND...}))
    shift 3
    for backend in "$@"; do
      while [ ! -f "$OUT/$backend.done" ] && [ $SECONDS -lt $DEADLINE ]; do sleep 3; done
      [ -f "$OUT/$backend.done" ] || { echo "gpu_identity.sh: $backend not done by the deadline"; exit 1; }
    done
    ;;
  resume)
    BACKEND=${3:?usage: gpu_identity.sh resume OUT BACKEND SECONDS}
    cp "$OUT/$BACKEND.log" "$OUT/$BACKEND.first.log"
    timeout $((${4:?usage: gpu_identity.sh resume OUT BACKEND SECONDS} + 60)) python3 -m fuzzfuse fuzz --resume "$OUT/$BACKEND" \
      --time "$4" > "$OUT/$BACKEND.resume.log" 2>&1 < /dev/null
    cat "$OUT/$BACKEND.resume.log" >> "$OUT/$BACKEND.log"
    ;;
  collect)
    for backend in nvfuser inductor; do
      [ -d "$OUT/$backend" ] || continue
      echo "== $backend" >> "$OUT/new.txt"
      tail -25 "$OUT/$backend.log" >> "$OUT/new.txt"
      python3 -m fuzzfuse corpus bugs "$OUT/$backend/minimized" --against minimized >> "$OUT/new.txt" 2>&1
    done
    tar czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls -d nvfuser inductor ./*.log 2>/dev/null)
    ;;
  *) echo "gpu_identity.sh: unknown step $STEP" >&2; exit 2 ;;
esac
