"""New memory filled with a byte pattern, so that the bytes a fused kernel never writes show.

glibc's malloc hands out memory as the last owner left it: often zeros, sometimes stale data. An
output a kernel writes only part of is then right on one run and wrong on the next (NNC's abs of a
folded int64 zero came back 0 in two fresh processes of three, and 0x7f0200000000 in the third).
glibc's M_PERTURB fills every new allocation with one byte (0x5A here) instead, so such an output
is wrong on every run, and the bytes left unwritten read the same each time.

Only where such a store is looked for or judged (a job that asks, fuzzfuse.pool.Job.poison_heap;
the repros of such a bug, first thing): a worker that poisoned every job stopped dying of NNC's
int16 overrun (13207297), the crash this fill was meant to explain.
"""
from __future__ import annotations

import ctypes
import functools
import platform
from collections.abc import Iterator
from contextlib import contextmanager

M_PERTURB = -6  # glibc's mallopt parameter
# glibc fills new memory with the complement of this byte (0x5A) and freed memory with it.
PERTURB_BYTE = 0xA5
# The same, as a repro's two lines (the repro imports no fuzzfuse).
REPRO_LINES = ("import ctypes",
               "ctypes.CDLL(None).mallopt(-6, 0xA5)  # glibc fills new memory with 0x5A bytes: bytes never written show")


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    return ctypes.CDLL(None) if platform.libc_ver()[0] == "glibc" else None


@contextmanager
def new_memory_poisoned(enabled: bool = True) -> Iterator[None]:
    """Within it, every allocation of this process is filled with the pattern (where `enabled`,
    and where the C library is glibc: nothing changes elsewhere)."""
    libc = _glibc() if enabled else None
    if libc is None:
        yield
        return
    libc.mallopt(M_PERTURB, PERTURB_BYTE)
    try:
        yield
    finally:
        libc.mallopt(M_PERTURB, 0)
