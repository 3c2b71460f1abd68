#!/usr/bin/env python3
"""fuzzfuse repro: crash on aot:onednn

signature: crash|aot:onednn|compile|RuntimeError|torch/nn/modules/module.py:_call_impl|RuntimeError: partition compile failed
versions: {'onednn': 'Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd69a3df32adcccb623b12cd7baa22)', 'torch': '2.13.0+cpu'}

Exits 1 while the bug is present, 0 once it is fixed.
"""
import math
import sys
import traceback
from pathlib import Path

import torch

nan, inf = math.nan, math.inf
DEVICE = 'cpu'

def fn(x0: torch.Tensor, x1: torch.Tensor):
    v0 = torch.nn.functional.gelu(x0)
    v1 = torch.add(v0, x1)
    return (v1,)

def fn_float64(x0: torch.Tensor, x1: torch.Tensor):
    v0 = torch.nn.functional.gelu(x0)
    v1 = torch.add(v0, x1)
    return (v1,)

def make_inputs():
    x0 = torch.tensor(0.0, dtype=torch.float32, device=DEVICE).reshape([])
    x1 = torch.tensor(False, dtype=torch.bool, device=DEVICE).reshape([])
    return [x0, x1]

def run_fused(inputs):
    """aot:onednn: aot_autograd (functorch's memory_efficient_fusion, ts_compile) over `fn`.
    Warm up through the profiling executor, then run under the profiler to see whether fused
    kernels ran (LlgaPartition_*) and the fallback did not."""
    torch._C._jit_set_profiling_executor(True)
    torch._C._get_graph_executor_optimize(True)
    torch._C._jit_set_texpr_fuser_enabled(False)
    torch._C._jit_override_can_fuse_on_cpu(True)
    torch._C._jit_override_can_fuse_on_gpu(False)
    torch._C._jit_set_llga_enabled(True)
    from functorch.compile import memory_efficient_fusion
    aot = memory_efficient_fusion(lambda *t: fn(t[0], t[1]))
    compiled = lambda *xs: aot(*[xs[k] for k in [0, 1]])
    for _ in range(torch._C._jit_get_num_profiled_runs() + 1):
        compiled(*inputs)
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        out = compiled(*inputs)
    names = [e.name for e in prof.function_events]
    return list(out), any(n.startswith('LlgaPartition_') for n in names) and 'fallback_function' not in names

REDUCED = [1.0]
RTOL = {torch.float64: 1e-07, torch.float32: 1.3e-06, torch.float16: 0.001, torch.bfloat16: 0.016}
ATOL = {torch.float64: 1e-07, torch.float32: 1e-05, torch.float16: 1e-05, torch.bfloat16: 1e-05}


def differs(i, fused, expected, ref, k=None, what="output"):
    """fuzzfuse's oracle, compactly: beyond dtype tolerances AND further from float64 than eager."""
    if not isinstance(fused, torch.Tensor) or fused.shape != expected.shape or fused.dtype != expected.dtype:
        return f"{what} {i}: got {getattr(fused, 'dtype', type(fused))} {tuple(getattr(fused, 'shape', ()))}, " \
               f"expected {expected.dtype} {tuple(expected.shape)}"
    f, e, r = (t.detach().cpu().double() for t in (fused, expected, ref))
    if not expected.is_floating_point():
        bad = (f != e) & (e == r) & (f != r)
        return f"{what} {i}: {int(bad.sum())} elements differ" if bad.any() else None
    cls = lambda t: torch.isnan(t) * 1 + (t == math.inf) * 2 + (t == -math.inf) * 3
    bad = (cls(f) != cls(e)) & (cls(e) == cls(r)) & (cls(f) != cls(r))
    if bad.any():
        return f"{what} {i}: NaN/Inf at {int(bad.sum())} positions where eager and float64 agree"
    ok = (cls(f) == 0) & (cls(e) == 0) & (cls(r) == 0)
    f, e, r = f[ok], e[ok], r[ok]
    k = REDUCED[i] if k is None else k
    if f.numel() == 0 or torch.allclose(f, e, rtol=RTOL[expected.dtype] * k, atol=ATOL[expected.dtype] * k):
        return None
    rmse = lambda a, b: math.sqrt(torch.mean((a - b) ** 2).item())
    if rmse(f, r) <= 3.0 * rmse(e, r) + ATOL[expected.dtype] * k:
        return None
    return f"{what} {i}: rmse vs float64 {rmse(f, r):.3g} (eager {rmse(e, r):.3g}); max |fused - eager| " \
           f"{(f - e).abs().max().item():.3g}"


def main():
    inputs = make_inputs()
    expected = fn(*inputs)
    ref = fn_float64(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs])
    try:
        actual, fused = run_fused(inputs)
    except Exception:
        traceback.print_exc()
        print("FAIL: the fuser raised (crash expected)")
        return 1
    problems = [p for i, (a, e, r) in enumerate(zip(actual, expected, ref)) if (p := differs(i, a, e, r))]
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    if not fused:
        print("FAIL: nothing was fused (the fallback path ran)")
        return 1
    print("OK: fused code ran and matches eager")
    return 0


if __name__ == "__main__":
    sys.exit(main())
