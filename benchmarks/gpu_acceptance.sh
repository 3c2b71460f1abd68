#!/usr/bin/env bash
# The nvFuser acceptance runs in one go, sized for a ~30-minute GPU lease (16 cores, one GPU):
#
#   bash benchmarks/gpu_acceptance.sh OUT [CAMPAIGN_SECONDS] [BACKWARD_SECONDS]
#
# 1. pytest -m gpu (every op x dtype on nvFuser, random graphs, aot:nvfuser training graphs)
# 2. the seed corpus replayed on nvfuser (forward seeds) and aot:nvfuser (training seeds)
# 3. an nvFuser campaign on all cores (default 600 s), each signature not in minimized/ reduced
# 4. an aot:nvfuser --backward campaign (default 240 s), reduced likewise
# 5. the committed corpus/nvfuser cases whose signature has no minimized repro yet, reduced
# 6. two 60-s throughput runs with nvFuser's segmenter log on and off (what the coverage log costs)
# and prints the figures a note needs (rate against the compile-bound limit, outcomes, coverage).
# Steps go in order of importance: each has its own time limit, everything lands in OUT as it is
# made, so a lease that ends early still returns the steps before. (Reductions dominate: with many
# new signatures, steps 5-6 may need a second lease.) Run it from a
# checkout of the project with nvfuser_direct importable; OUT gets everything (tar it back).
set -u
OUT=${1:?usage: gpu_acceptance.sh OUT [CAMPAIGN_SECONDS] [BACKWARD_SECONDS]}
FWD=${2:-600}
BWD=${3:-240}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
stamp() { echo "$(date +%T) $*" | tee -a "$OUT/steps.log"; }

stamp "pytest -m gpu"
FUZZFUSE_GPU_RESULTS="$OUT/gpu_results.jsonl" timeout 600 python3 -m pytest -m gpu -q -rs tests/ \
  > "$OUT/pytest_gpu.log" 2>&1
stamp "pytest exit $?: $(tail -1 "$OUT/pytest_gpu.log")"

stamp "seed corpus"
timeout 300 python3 -m fuzzfuse replay $(ls corpus/seed-*.json | grep -v _train) --backend nvfuser --workers 8 \
  > "$OUT/seeds_nvfuser.log" 2>&1
timeout 300 python3 -m fuzzfuse replay corpus/seed-*_train-*.json --backend aot:nvfuser --workers 8 \
  > "$OUT/seeds_aot_nvfuser.log" 2>&1
stamp "seeds replayed"

stamp "nvfuser campaign ${FWD}s"
timeout $((FWD + 900)) python3 -m fuzzfuse fuzz --backend nvfuser --time "$FWD" --seed "$RANDOM" \
  --reduce-budget 80 --known minimized --out "$OUT/nvfuser" > "$OUT/nvfuser.log" 2>&1 < /dev/null
stamp "nvfuser campaign exit $?"

stamp "aot:nvfuser --backward campaign ${BWD}s"
timeout $((BWD + 600)) python3 -m fuzzfuse fuzz --backend aot:nvfuser --backward --time "$BWD" --seed "$RANDOM" \
  --reduce-budget 60 --known minimized --out "$OUT/aot_nvfuser" > "$OUT/aot_nvfuser.log" 2>&1 < /dev/null
stamp "aot:nvfuser campaign exit $?"

stamp "leftover corpus/nvfuser signatures"
python3 - "$OUT" > "$OUT/leftovers.txt" <<'PY'
import json, sys
from pathlib import Path
from fuzzfuse.campaign import known_signatures
from fuzzfuse.corpus import iter_cases
from fuzzfuse.oracle import Signature

out = Path(sys.argv[1])
key = lambda sig: Signature.from_json(sig).key()  # noqa: E731
done = set(known_signatures(["minimized"]))
for summary in out.glob("*/summary.json"):
    done |= {s["key"] for s in json.loads(summary.read_text())["signatures"] if s.get("minimized")}
for path, case in iter_cases(["corpus/nvfuser"]):
    if not isinstance(case, Exception) and case.signature and case.signature.get("outcome") != "hang" \
            and key(case.signature) not in done:
        print(path)
PY
if [ -s "$OUT/leftovers.txt" ]; then
  timeout 900 python3 -m fuzzfuse reduce $(cat "$OUT/leftovers.txt") --budget 80 --out "$OUT/minimized-leftovers" \
    > "$OUT/leftovers.log" 2>&1
fi
stamp "leftovers: $(wc -l < "$OUT/leftovers.txt") cases"

stamp "throughput: nvFuser's segmenter log on and off (60 s each)"
for LOG in 1 0; do
  FUZZFUSE_NVFUSER_SEGMENTER_LOG=$LOG timeout 300 python3 benchmarks/throughput.py --backends nvfuser \
    --workers "$(nproc)" --seconds 60 > "$OUT/throughput_log$LOG.txt" 2>&1
done
stamp "throughput measured"


python3 - "$OUT" <<'PY' | tee "$OUT/figures.txt"
import json, sys
from pathlib import Path
for run in sorted(Path(sys.argv[1]).glob("*/summary.json")):
    s = json.loads(run.read_text())
    median = s.get("median_compile_seconds") or 0
    limit = s["workers"] / median if median else float("nan")
    steady = s.get("steady_cases_per_second") or s["cases_per_second"]
    print(f"{run.parent.name}: {s['cases']} cases in {s['seconds']:.0f}s, steady {steady:.1f}/s, "
          f"median compile {median:.3f}s, limit {limit:.1f}/s -> {steady / limit:.0%} of it; "
          f"mean phases {s.get('mean_phase_seconds')}")
    print(f"  outcomes {s['outcomes']}")
    print(f"  coverage {s.get('coverage')}")
    for sig in s["signatures"]:
        print(f"  {sig['count']:5}x {sig['outcome']:9} confirmed={sig['confirmed']} {sig['key']} "
              f"-> {(sig.get('minimized') or {}).get('path')}")
PY
tail -n 6 "$OUT"/throughput_log*.txt 2>/dev/null | tee -a "$OUT/figures.txt"
stamp "done"
