#!/usr/bin/env python3
"""nvFuser: argmin(dim=-3, keepdim=False) → neg → pad(pads=(1, -1), value=1.0) on int32: hard-crash SIGSEGV

Found by fuzzfuse (signature hard-crash|nvfuser|run|SIGSEGV||) with cuda 13.0, driver 580.159.04, gpu NVIDIA H100 80GB HBM3, nvfuser_direct 0.2.36+git7e04d26, torch 2.11.0+cu130.
Prints what eager gives (float64 arbitrating) and what the fuser gives, then its verdict line;
exits 1 while the bug is present, 0 once it is fixed.
"""
import json
import math
import os
import sys
import traceback

import torch

nan, inf = math.nan, math.inf
DEVICE = 'cuda'
BACKEND = 'nvfuser'


def fn(x0: torch.Tensor):
    v0 = torch.argmin(x0, -3, keepdim=False)
    v1 = torch.neg(x0)
    v2 = torch.nn.functional.pad(v1, [1, -1], value=1.0)
    return (v0, v2,)


def make_inputs():
    x0 = torch.zeros([2, 2, 3], dtype=torch.int32, device=DEVICE)
    return [x0]


import os  # noqa: E402
os.environ.setdefault('NVFUSER_ENABLE', 'fuse_matmul')  # noqa: E402
os.environ.setdefault('NVFUSER_DISABLE', 'parallel_compile')  # noqa: E402
from nvfuser_direct import FusionDefinition, DataType  # noqa: E402


def nvfuser_fusion(fd: FusionDefinition) -> None:
    # fuzzfuse graph 0c33c7177d3e8c2f, style=upcast
    T0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Int32, is_cpu=False)
    T1 = fd.ops.min(T0, dims=[0])
    T2 = fd.ops.broadcast(T1, is_broadcast_dim=[True, False, False])
    T3 = fd.ops.eq(T0, T2)
    T4 = fd.ops.iota(length=2, start=0, step=1, dtype=DataType.Int)
    T5 = fd.ops.broadcast(T4, is_broadcast_dim=[False, True, True])
    S6 = fd.define_scalar(2, dtype=DataType.Int)
    T7 = fd.ops.where(T3, T5, S6)
    T8 = fd.ops.min(T7, dims=[0])
    T9 = fd.ops.neg(T0)
    T10 = fd.ops.slice(T9, start_indices=[0, 0, 0], end_indices=[2, 2, 2])
    S11 = fd.define_scalar(1, dtype=DataType.Int)
    T12 = fd.ops.pad(T10, [1, 0], value=S11)
    fd.add_output(T8)
    fd.add_output(T12)


def run_fused(inputs):
    """nvFuser through nvfuser_direct (upcast style): define, then execute (which compiles)."""
    with FusionDefinition() as fd:
        nvfuser_fusion(fd)
    outputs = fd.execute(list(inputs))
    torch.cuda.synchronize()  # a kernel's fault (misaligned address...) is raised here, by its fusion
    return outputs, True


TOLERANCE = [(0.0, 0.0), (0.0, 0.0)]  # (rtol, atol) of each output: fuzzfuse's, times sqrt(terms a reduction sums)


def check(what, actual, expected, fp64_ref, rtol, atol, stage="run"):
    """Assert that `actual` is as good as eager: no further from float64 than eager is (as
    torch._dynamo.utils.same takes fp64_ref). Before failing, print its first wrong element beside
    eager's and float64's, and the verdict."""
    a, e, r = (t.detach().cpu() if isinstance(t, torch.Tensor) else t for t in (actual, expected, fp64_ref))
    if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
        kind, bad = ("shape" if isinstance(a, torch.Tensor) and a.shape != e.shape else "dtype"), None
    elif not e.is_floating_point():  # exact, except where eager itself is off from float64
        kind, bad = "values", (a != e) & (e == r.to(e.dtype)) & (a != r.to(e.dtype))
    else:
        special = lambda t: (lambda d: d.isnan() + 2 * d.isposinf() + 3 * d.isneginf())(t.double())  # noqa: E731 (fp8 has no isposinf)
        kind, bad = "nan-inf", (special(a) != special(e)) & (special(e) == special(r)) & (special(a) != special(r))
        finite = (special(a) == 0) & (special(e) == 0) & (special(r) == 0)
        rmse = lambda t: (t.double()[finite] - r.double()[finite]).pow(2).mean().sqrt().item()  # noqa: E731
        if not bad.any() and rmse(a) > 3.0 * rmse(e) + atol:
            kind, bad = "values", ~torch.isclose(a.double(), e.double(), rtol=rtol, atol=atol) & finite
    if bad is not None and not bad.any():
        return
    at = None if bad is None else tuple(bad.nonzero()[0].tolist())

    def show(t):  # its dtype and shape, or its element at `at`
        if at is None:
            return f"{t.dtype} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
        return (lambda v: f"{v:.8g}" if isinstance(v, float) else repr(v))(t[at].item())
    where = what + (f"[{', '.join(map(str, at))}]" if at else "")
    count = f", wrong at {int(bad.sum())} of {bad.numel()} positions" if bad is not None and bad.numel() > 1 else ""
    print(f"expected {where}: {show(e)} (eager" + ("" if at is None else f"; float64 gives {show(r)}") + ")")
    print(f"actual {where}: {show(a)} ({BACKEND}{count})")
    cls = "bool" if e.dtype == torch.bool else "float" if e.is_floating_point() else "int"
    verdict("mismatch", kind=kind, location=cls, stage=stage, expected=show(e), actual=show(a), at=list(at or ()))
    raise AssertionError(f"{where}: {BACKEND} gives {show(a)}, eager {show(e)}")


def crashed(error):
    """The fuser raised: print it and the verdict, then exit at once, before a fuser object that a
    kernel fault left behind can abort in its destructor."""
    if type(error).__name__ == "BackendCompilerFailed":  # torch.compile's wrapper around the fuser's error
        error = error.inner_exception
    traceback.print_exception(error)
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep  # TorchScript quotes this file: same text anywhere
    print(f"expected: {BACKEND} compiles and runs fn")
    message = str(error).split("\nframe #0:")[0]  # C++ frames (nvFuser's): their addresses change every run
    print(f"actual: {type(error).__name__}: {message}".replace(here, "").rstrip())
    sys.stderr.flush()
    os._exit(verdict("crash", kind=type(error).__name__))


def verdict(outcome, **detail):
    """Print the line fuzzfuse's regression corpus reads, last; the exit status: 1 while the bug
    is present, 0 once it is fixed, 125 where it cannot run as the bug needs (git bisect's skip)."""
    print("fuzzfuse-verdict: " + json.dumps(dict(outcome=outcome, **detail)), flush=True)
    return {"pass": 0, "skip": 125}.get(outcome, 1)


def main():
    if not torch.cuda.is_available():
        sys.exit(verdict("skip", reason="the bug needs a CUDA GPU; this machine has none"))
    inputs = make_inputs()
    expected = fn(*inputs)
    fp64_ref = fn(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs])
    try:
        actual, fused = run_fused(inputs)
    except Exception as e:
        crashed(e)
    for i, (a, e, r) in enumerate(zip(actual, expected, fp64_ref)):
        check(f"output {i}", a, e, r, *TOLERANCE[i])
    return fused


if __name__ == "__main__":
    if not main():
        print(f"expected: {BACKEND} runs fused code")
        print("actual: nothing was fused (the fallback path ran)")
        sys.exit(verdict("unfused"))
    print(f"{BACKEND} ran fused code and matches eager")
    sys.exit(verdict("pass"))
