#!/usr/bin/env python3
"""fuzzfuse repro: unfused on aot:onednn

signature: unfused|aot:onednn|backward-run|fallback||
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
    v0 = torch.add(x1, x1)
    v1 = torch.pow(x1, x0)
    v2 = torch.abs(v0)
    return (v1, v2,)

def fn_float64(x0: torch.Tensor, x1: torch.Tensor):
    v0 = torch.add(x1, x1)
    v1 = torch.pow(x1, x0)
    v2 = torch.abs(v0)
    return (v1, v2,)

def make_inputs():
    x0 = torch.tensor([0.0, 0.0], dtype=torch.bfloat16, device=DEVICE)
    x0 = x0[0:1].expand([2])
    x1 = torch.tensor([0.0, 0.0], dtype=torch.float32, device=DEVICE)
    return [x0, x1]

def run_fused(inputs, grad_outputs):
    """aot:onednn: aot_autograd (functorch's memory_efficient_fusion, ts_compile) over `fn`.
    Warm up forward and backward through the profiling executor, then profile the forward and the
    backward call apart: each must run fused kernels (LlgaPartition_*) and no fallback."""
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
        xs = leaves(inputs)
        gradients(compiled(*xs), xs, grad_outputs)
    xs = leaves(inputs)
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        out = compiled(*xs)
    names = [e.name for e in prof.function_events]
    fused = any(n.startswith('LlgaPartition_') for n in names) and 'fallback_function' not in names
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        grads = gradients(out, xs, grad_outputs)
    names = [e.name for e in prof.function_events]
    if not (any(n.startswith('LlgaPartition_') for n in names) and 'fallback_function' not in names):
        print("the backward ran no fused kernel (or its fallback)")
        fused = False
    return [o.detach() for o in out], grads, fused

REDUCED = [1.0, 1.0]
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


REQUIRES_GRAD = [False, True]
GRAD_SEED = 641050743
GRAD_REDUCED = [1.0]


def leaves(inputs):
    """The inputs, each requires_grad one a fresh leaf that wants its gradient."""
    return [x.detach().requires_grad_(True) if rg else x for x, rg in zip(inputs, REQUIRES_GRAD)]


def upstream(outputs):
    """The case's seeded upstream gradient for each differentiable output (None for the others)."""
    gen = torch.Generator().manual_seed(GRAD_SEED)
    return [torch.randn(tuple(o.shape), generator=gen, dtype=torch.float64).to(device=o.device, dtype=o.dtype)
            if o.requires_grad else None for o in outputs]


def gradients(outputs, xs, grad_outputs):
    """torch.autograd.grad of the outputs, weighted by grad_outputs, w.r.t. the requires_grad inputs."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if g is not None and o.requires_grad]
    wrt = [x for x, rg in zip(xs, REQUIRES_GRAD) if rg]
    if not pairs:
        return []
    return [g.detach() for g in torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                                    allow_unused=True, materialize_grads=True)]


def main():
    inputs = make_inputs()
    xs = leaves(inputs)
    outs = fn(*xs)
    grad_outputs = upstream(outs)
    expected, expected_grads = [o.detach() for o in outs], gradients(outs, xs, grad_outputs)
    xs = leaves([t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs])
    outs = fn_float64(*xs)
    ref = [o.detach() for o in outs]
    ref_grads = gradients(outs, xs, [None if g is None else g.double() for g in grad_outputs])
    try:
        actual, grads, fused = run_fused(inputs, grad_outputs)
    except Exception:
        traceback.print_exc()
        print("FAIL: the fuser raised (unfused expected)")
        return 1
    problems = [p for i, (a, e, r) in enumerate(zip(actual, expected, ref)) if (p := differs(i, a, e, r))]
    problems += [p for j, (e, r) in enumerate(zip(expected_grads, ref_grads))
                 if (p := differs(j, grads[j] if j < len(grads) else None, e, r, GRAD_REDUCED[j], "gradient"))]
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    if not fused:
        print("FAIL: nothing was fused (the fallback path ran)")
        return 1
    print("OK: fused code ran forward and backward and matches eager")
    return 0


if __name__ == "__main__":
    sys.exit(main())
