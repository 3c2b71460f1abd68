"""The vector ISA of the host CPU itself, read without torch (the pytest plugin imports no torch).

ATEN_CPU_CAPABILITY pins the kernels ATen dispatches to, but not the code the host's ISA chooses
elsewhere: glibc's libm picks an FMA variant of exp, oneDNN its AVX-512 bf16 kernels, Inductor's
C++ compiles with -march=native. Four CPU repros recorded on an AVX-512 host pinned to `default`
passed on an AVX2 one (2026-12-03), so a case records its host's ISA beside the capability, and a
repro recorded on another host's ISA skips rather than passes.
"""
from __future__ import annotations

import functools
from pathlib import Path

# The flags each ISA level needs, as torch's own cpuinfo checks them, highest first.
LEVELS = (("avx512", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}), ("avx2", {"avx2", "fma"}))


@functools.cache  # read once a process: the plugin asks for every repro, a campaign for every case
def host_isa() -> str:
    """"avx512", "avx2" or "default" for this x86 host; "" where it cannot be read (no
    /proc/cpuinfo, another architecture): unknown, which nothing is skipped for."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    flags_line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    if not flags_line:
        return ""
    flags = set(flags_line.partition(":")[2].split())
    return next((level for level, needs in LEVELS if needs <= flags), "default")
