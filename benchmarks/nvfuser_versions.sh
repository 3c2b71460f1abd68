#!/usr/bin/env bash
# Run THERE (the GPU machine), from the project root: every nvFuser repro under minimized/ with one
# nvFuser build, its results written for `fuzzfuse versions --fold` to draw into the tables here.
#
#   bash benchmarks/nvfuser_versions.sh ZIP RESULTS [JOBS]
#
# ZIP is a stripped build: .gpu/nvfuser.zip (the build in use, from /work/shared/gpu/prepare.sh) or
# .whl/nvfuser-V.zip (benchmarks/nvfuser_versions_prepare.sh). It is put in use the way
# .gpu/setup.sh puts the build in use (unpacked to /tmp/nvf-site, the machine's NVRTC linked in,
# the torch 2.10 -> 2.11 bridge preloaded), then `fuzzfuse versions --nvfuser installed` runs each
# nvFuser repro in a fresh process and names the build by the version it imports. One build per
# command (each zip is ~35 MB and a command carries at most 64 MiB):
#
#   carry [".gpu"]:                bash benchmarks/nvfuser_versions.sh .gpu/nvfuser.zip $OUT/results
#   carry [".gpu/setup.sh", ".whl"]: bash benchmarks/nvfuser_versions.sh .whl/nvfuser-0.2.35.dev20260215.zip $OUT/results
#
# Then, here: python3 -m fuzzfuse versions minimized --from-cache --fold FILES_AT/results
set -euo pipefail
ZIP=${1:?usage: nvfuser_versions.sh ZIP RESULTS [JOBS]}
RESULTS=${2:?usage: nvfuser_versions.sh ZIP RESULTS [JOBS]}
JOBS=${3:-8}
[ -f .gpu/setup.sh ] || { echo "nvfuser_versions.sh: .gpu/setup.sh missing: carry it" >&2; exit 2; }
stage=$(mktemp -d)
cp "$ZIP" "$stage/nvfuser.zip"
cp .gpu/setup.sh "$stage/setup.sh"
rm -rf /tmp/nvf-site  # a warm machine may hold another build there
# shellcheck disable=SC1091
source "$stage/setup.sh"
export PYTHONPATH="$PWD:$PYTHONPATH"
mkdir -p "$RESULTS"
python3 -m fuzzfuse versions minimized --device cuda --nvfuser installed --results "$RESULTS" --jobs "$JOBS" \
  --timeout 300 2>&1 | tee "$RESULTS/../nvfuser-versions-$(basename "$ZIP" .zip).log"
