#!/usr/bin/env bash
# The GPU acceptance of the nvFuser and backward issues in one go, sized for one ~30-minute lease
# (16 cores, one GPU):
#
#   bash benchmarks/gpu_acceptance.sh OUT [BUDGET_SECONDS] [CAMPAIGN_SECONDS] [BACKWARD_SECONDS]
#
# 1. pytest -m gpu (every op x dtype on nvFuser, random graphs, aot:nvfuser training graphs)
# 2. the seed corpus replayed on nvfuser (forward seeds) and aot:nvfuser (training seeds), at once
# 3. where an nvFuser case's seconds go (benchmarks/nvfuser_cost.py, 90 s): by phase, recipe and
#    kernels per case
# 4. an nvFuser campaign on all cores (default 600 s)
# 5. an aot:nvfuser --backward campaign (default 180 s)
# 6. the corpus's nvFuser aborts replayed through the harness; every committed nvFuser repro
#    recorded as "does not reproduce": its case replayed through the harness twice, and its script
#    run as written and under the setting the workers use and the script does not
#    (NVFUSER_NUM_THREADS=1)
# 7. every confirmed signature of 4 that no committed repro holds, and every corpus/nvfuser case
#    whose signature has none, reduced; then the same for 5 and corpus/aot_nvfuser; then hangs;
#    then committed nvFuser repros of over 1 MB, again from their own case
# and prints the figures a note needs (rate against the compile-bound limit, outcomes, coverage).
# Campaigns do not reduce as they end: the reductions of 7 share what time is left before
# BUDGET_SECONDS (default 1500) so that the backward campaign always runs. Everything lands in OUT
# as it is made (tar it back), so a lease that ends early still returns the steps before.
# Run it from a checkout of the project with nvfuser_direct importable.
set -u
OUT=${1:?usage: gpu_acceptance.sh OUT [BUDGET_SECONDS] [CAMPAIGN_SECONDS] [BACKWARD_SECONDS]}
END=$(( $(date +%s) + ${2:-1500} ))
FWD=${3:-600}
BWD=${4:-180}
# A lease's machine may keep /tmp from an earlier one: old minimized-* folders in OUT would read as
# this run's.
if [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "gpu_acceptance.sh: $OUT already holds files (an earlier run's?): give a new or empty directory" >&2
  exit 2
fi
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
stamp() { echo "$(date +%T) $*" | tee -a "$OUT/steps.log"; }
# Seconds before the budget ends; writing an epoch time to OUT/end moves the end (the lease may
# have started later or sooner than planned).
left() { local end=$END; [ -s "$OUT/end" ] && end=$(cat "$OUT/end"); echo $(( end - $(date +%s) )); }

stamp "pytest -m gpu"
FUZZFUSE_GPU_RESULTS="$OUT/gpu_results.jsonl" timeout 300 python3 -m pytest -m gpu -q -rs tests/ \
  > "$OUT/pytest_gpu.log" 2>&1
stamp "pytest exit $?: $(tail -1 "$OUT/pytest_gpu.log")"

stamp "seed corpus"
timeout 150 python3 -m fuzzfuse replay $(ls corpus/seed-*.json | grep -v _train) --backend nvfuser --workers 8 \
  > "$OUT/seeds_nvfuser.log" 2>&1 &
timeout 150 python3 -m fuzzfuse replay corpus/seed-*_train-*.json --backend aot:nvfuser --workers 8 \
  > "$OUT/seeds_aot_nvfuser.log" 2>&1
wait
stamp "seeds replayed"

stamp "where a case's seconds go (90 s)"
timeout 200 python3 benchmarks/nvfuser_cost.py --cases 40 --seconds 90 --out "$OUT/cost" > "$OUT/cost.txt" 2>&1
stamp "cost measured: $(sed -n 2p "$OUT/cost.txt")"

if [ "$FWD" -gt 0 ]; then  # 0: no campaign (a lease that only reduces the corpus's leftovers)
  stamp "nvfuser campaign ${FWD}s"
  timeout $((FWD + 120)) python3 -m fuzzfuse fuzz --backend nvfuser --time "$FWD" --seed "$RANDOM" --no-reduce \
    --known minimized --out "$OUT/nvfuser" > "$OUT/nvfuser.log" 2>&1 < /dev/null
  stamp "nvfuser campaign exit $?"
fi

if [ "$BWD" -gt 0 ]; then
  stamp "aot:nvfuser --backward campaign ${BWD}s"
  timeout $((BWD + 120)) python3 -m fuzzfuse fuzz --backend aot:nvfuser --backward --time "$BWD" --seed "$RANDOM" \
    --no-reduce --known minimized --out "$OUT/aot_nvfuser" > "$OUT/aot_nvfuser.log" 2>&1 < /dev/null
  stamp "aot:nvfuser campaign exit $?"
fi

stamp "repros that did not reproduce: their cases through the harness, their scripts under the workers' settings"
# The corpus's nvFuser aborts first: fusions are now synchronized and a faulted one is never freed,
# so an abort that was a kernel's fault should show as that fault (a run crash) here.
for CASE in $(grep -l '"outcome": "hard-crash"' corpus/nvfuser/*.json); do
  echo "$CASE through the harness:" >> "$OUT/unreproduced.txt"
  timeout 120 python3 -m fuzzfuse replay "$CASE" --workers 1 2>&1 | tail -3 >> "$OUT/unreproduced.txt"
done
for DIR in $(grep -l '"status": "does not reproduce"' minimized/*nvfuser*/case.json | xargs -r -n1 dirname); do
  [ "$(left)" -gt 60 ] || break
  for RUN in 1 2; do
    echo "$(basename "$DIR") through the harness, run $RUN:" >> "$OUT/unreproduced.txt"
    timeout 120 python3 -m fuzzfuse replay "$DIR/case.json" --workers 1 2>&1 | tail -3 >> "$OUT/unreproduced.txt"
  done
  for SETTING in "" NVFUSER_NUM_THREADS=1; do
    (cd "$DIR" && env $SETTING timeout 60 python3 repro.py > /dev/null 2>&1)
    STATUS=$?  # before any $(...) below resets it
    echo "$(basename "$DIR") repro.py [${SETTING:-as written}]: exit $STATUS" | tee -a "$OUT/unreproduced.txt"
  done
done

# What to reduce, nvFuser's own signatures first: the smallest case of each confirmed campaign
# signature that no committed repro holds, then the committed corpus/nvfuser (corpus/aot_nvfuser)
# cases whose signature has no repro yet. Hangs go last, with a short query timeout (a hanging query
# costs the whole timeout).
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
from fuzzfuse.corpus import iter_cases
from fuzzfuse.identity import known_repros

out = Path(sys.argv[1])
known = set(known_repros(["minimized"]))
hangs = []
for name, run, corpus in (("1-nvfuser", "nvfuser", "corpus/nvfuser"),
                          ("2-aot_nvfuser", "aot_nvfuser", "corpus/aot_nvfuser")):
    todo = []
    summary = out / run / "summary.json"
    for s in json.loads(summary.read_text())["signatures"] if summary.exists() else []:
        if s["confirmed"] and s["key"] not in known and s["signature"]["kind"] != "no-fusion":
            (hangs if s["outcome"] == "hang" else todo).append(str(summary.parent / s["case"]))
            known.add(s["key"])
    for path, case in iter_cases([corpus]):
        if not isinstance(case, Exception) and case.signature:
            key = case.signature.key()
            if key not in known:
                (hangs if case.signature.outcome == "hang" else todo).append(str(path))
                known.add(key)
    (out / f"reduce_{name}.txt").write_text("".join(p + "\n" for p in todo))
(out / "reduce_3-hang.txt").write_text("".join(p + "\n" for p in hangs))
# Repros of over 1 MB (megabytes of pinned values the reducer ran out of budget on): reduced again
# from their own case. The device copies at most 64 MiB of working tree: a lease may carry only
# their case.json.
big = [d / "case.json" for d in sorted(Path("minimized").glob("*nvfuser*"))
       if sum(f.stat().st_size for f in d.iterdir()) > 1 << 20 and (d / "case.json").exists()]
(out / "reduce_4-big.txt").write_text("".join(f"{p}\n" for p in big))
PY
for LIST in 1-nvfuser 2-aot_nvfuser 3-hang 4-big; do
  if [ -s "$OUT/reduce_$LIST.txt" ] && [ "$(left)" -gt 60 ]; then
    stamp "reducing $(wc -l < "$OUT/reduce_$LIST.txt") $LIST signatures ($(left)s left)"
    QUERY_TIMEOUT=60; [ $LIST = 3-hang ] && QUERY_TIMEOUT=20
    timeout "$(left)" python3 -m fuzzfuse reduce $(cat "$OUT/reduce_$LIST.txt") --budget 80 \
      --timeout $QUERY_TIMEOUT --out "$OUT/minimized-$LIST" > "$OUT/reduce_$LIST.log" 2>&1 < /dev/null
    stamp "reduce $LIST exit $?: $(ls "$OUT/minimized-$LIST" 2>/dev/null | wc -l) minimized"
  fi
done

python3 - "$OUT" <<'PY' | tee "$OUT/figures.txt"
import json, sys
from pathlib import Path
for run in sorted(Path(sys.argv[1]).glob("*/summary.json")):
    s = json.loads(run.read_text())
    median = s.get("median_compile_seconds") or 0
    limit = s["workers"] / median if median else float("nan")
    steady = s.get("steady_cases_per_second") or s["cases_per_second"]
    print(f"{run.parent.name}: {s['cases']} cases in {s['seconds']:.0f}s, steady {steady:.1f}/s, "
          f"median compile {median:.3f}s, limit {limit:.1f}/s -> {steady / limit:.0%} of it")
    mean = s.get("mean_compile_seconds")
    if mean:  # the bound if every case cost the mean compile, not the median one
        print(f"  mean compile {mean:.3f}s, workers / mean compile {s['workers'] / mean:.1f}/s -> "
              f"{steady * mean / s['workers']:.0%} of it")
    print(f"  focus: batches {s.get('focus_batches')}, hits {s.get('focus_hits')}, worker seconds "
          f"{s.get('focus_seconds')} of {s.get('worker_seconds')}")
    print(f"  mean phases {s.get('mean_phase_seconds')}")
    print(f"  median phases {s.get('median_phase_seconds')}")
    print(f"  outcomes {s['outcomes']}")
    print(f"  coverage {s.get('coverage')}")
    print(f"  compile by kernels per case {s.get('compile_by_kernels')}")
    for sig in s["signatures"]:
        print(f"  {sig['count']:5}x {sig['outcome']:9} confirmed={sig['confirmed']} known={sig.get('known')} "
              f"{sig['key']}")
PY
cat "$OUT/cost.txt" 2>/dev/null | tee -a "$OUT/figures.txt"
stamp "done"
