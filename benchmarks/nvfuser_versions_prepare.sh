#!/usr/bin/env bash
# Run HERE (a CPU machine with pip), from the project root: downloads the nvFuser builds that the
# GPU machine does not have (it has no network) into .whl/, one zip per build, stripped as
# /work/shared/gpu/prepare.sh strips the build in use (no bundled NVRTC, headers or tools: the GPU
# machine has its own NVRTC, which that setup.sh links in).
#
#   bash benchmarks/nvfuser_versions_prepare.sh [VERSION...]   (default: 0.2.35.dev20260215)
#
# The CUDA 13 wheels are `nvfuser-cu130-torch210` (PyPI's `nvfuser-cu130` is a source stub that
# refuses to build); on 2026-12-03 the registry had 0.2.35.dev20260215 and 0.2.36.dev20260301, the
# latter being the build in use there (.gpu/nvfuser.zip). Each zip is about 35 MB: a GPU command
# carries at most 64 MiB, so carry one build per command (benchmarks/nvfuser_versions.sh says how).
set -euo pipefail
VERSIONS=("${@:-0.2.35.dev20260215}")
mkdir -p .whl
for v in "${VERSIONS[@]}"; do
  out=.whl/nvfuser-$v.zip
  [ -f "$out" ] && continue
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$tmp" "nvfuser-cu130-torch210==$v"
  python3 - "$tmp"/*.whl "$out" <<'PY'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zo:
    for info in zi.infolist():
        n = info.filename
        if "libnvrtc" in n or "/include/" in n or n.startswith("tools/"):
            continue
        zo.writestr(info, zi.read(n), compress_type=zipfile.ZIP_DEFLATED)
PY
  rm -rf "$tmp"
  du -h "$out"
done
