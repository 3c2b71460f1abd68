#!/usr/bin/env bash
# One fresh-seed campaign on the GPU machine and the reductions of what it leaves pending, sized for
# a lease whose commands run at most 10 minutes each (start it detached, collect OUT in the next
# call):
#
#   setsid nohup bash benchmarks/gpu_campaign.sh BACKEND OUT [CAMPAIGN_SECONDS] [REDUCE_SECONDS] &
#
# (WORKERS=N in the environment: N workers, where two campaigns share the machine; else all cores)
# 1. `fuzzfuse fuzz --backend BACKEND` on all cores for CAMPAIGN_SECONDS (default 600), --known
#    minimized, reducing as it fuzzes (the default --reduce-share);
# 2. `--resume` with one more case (the least --max-cases takes): the novel pending hits reduced
#    for REDUCE_SECONDS (default 300; hangs last, fuzzfuse.dedup);
# 3. the figures a note needs in OUT/figures.txt: rate against the compile-bound limit, outcomes,
#    documented differences, the configurations drawn, every root cause and what stayed pending,
#    and where the campaign's and then the reductions' wall and worker time went
#    (benchmarks/reduce_campaign_figures.py; the campaign's own summary is kept as
#    OUT/campaign-summary.json, since the resume rewrites summary.json).
# OUT/done appears at the end. Everything else lands in OUT as it is made, so a lease that ends
# early still returns the steps before.
set -u
BACKEND=${1:?usage: gpu_campaign.sh BACKEND OUT [CAMPAIGN_SECONDS] [REDUCE_SECONDS]}
OUT=${2:?usage: gpu_campaign.sh BACKEND OUT [CAMPAIGN_SECONDS] [REDUCE_SECONDS]}
FUZZ=${3:-600}
REDUCE=${4:-300}
# A lease's machine may keep /tmp from an earlier one.
if [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "gpu_campaign.sh: $OUT already holds files (an earlier run's?): give a new or empty directory" >&2
  exit 2
fi
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
stamp() { echo "$(date +%T) $*" | tee -a "$OUT/steps.log"; }

stamp "$BACKEND campaign ${FUZZ}s"
timeout $((FUZZ + 180)) python3 -m fuzzfuse fuzz --backend "$BACKEND" --time "$FUZZ" --known minimized \
  ${WORKERS:+--workers "$WORKERS"} --out "$OUT/campaign" > "$OUT/campaign.log" 2>&1 < /dev/null
stamp "campaign exit $?"
# The resume below rewrites summary.json with its own wall time: keep the campaign's for its rates.
cp "$OUT/campaign/summary.json" "$OUT/campaign-summary.json" 2>/dev/null

stamp "reducing what it left pending (${REDUCE}s)"
timeout $((REDUCE + 120)) python3 -m fuzzfuse fuzz --resume "$OUT/campaign" --max-cases 1 --reduce-share 0 \
  --time "$REDUCE" > "$OUT/reduce.log" 2>&1 < /dev/null
stamp "reductions exit $?"

python3 - "$OUT/campaign/summary.json" <<'PY' | tee "$OUT/figures.txt"
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{s['backend']}: {s['cases']} cases in {s['seconds']:.0f}s of fuzzing, {s['cases_per_second']:.1f}/s "
      f"against a compile-bound limit of {s['compile_bound_cases_per_second']:.1f}/s (workers {s['workers']}, "
      f"compile median {s['median_compile_seconds']}s, mean {s['mean_compile_seconds']}s)")
print(f"  worker seconds {s['worker_seconds']}, input sets {s['input_sets']} (reshaped {s['reshaped_input_sets']}), "
      f"fused share {s['fused_share']}")
print(f"  outcomes {s['outcomes']}")
print(f"  documented differences {s['differences']}")
print(f"  configurations drawn {s['choices']}")
print(f"  root causes: {s['root_causes_new']} new, {s['root_causes_known']} known; pending {s['pending']}")
for cause in s["root_causes"]:
    print(f"  {cause['hits']:4}x {cause.get('minimized') or cause.get('known') or 'not minimized'}  {cause['key'][:160]}")
PY
for summary in "$OUT/campaign-summary.json" "$OUT/campaign/summary.json"; do
  [ -f "$summary" ] && python3 benchmarks/reduce_campaign_figures.py "$summary" | tee -a "$OUT/figures.txt"
done
touch "$OUT/done"
stamp "done"
