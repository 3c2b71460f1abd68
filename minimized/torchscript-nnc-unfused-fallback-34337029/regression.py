#!/usr/bin/env python3
"""NNC: neg → neg → std(correction=0, dims=(0,), keepdim=False) → … (5 ops) on float32: unfused fallback

Found by fuzzfuse (signature unfused|torchscript:nnc|run|fallback||) with cpu_capability default, onednn Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd69a3df32adcccb623b12cd7baa22), torch 2.13.0+cpu.
Prints what eager gives (float64 arbitrating) and what the fuser gives, then its verdict line;
exits 1 while the bug is present, 0 once it is fixed.
"""
import os
CPU_CAPABILITY = 'default'  # the lowest it fails under; ATen and Inductor's C++ codegen read it at import
os.environ["ATEN_CPU_CAPABILITY"] = CPU_CAPABILITY
os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"  # Inductor's caches ignore the capability
os.environ['PYTORCH_TENSOREXPR_FALLBACK'] = '0'
import json
import math
import sys
import traceback

import torch

nan, inf = math.nan, math.inf
DEVICE = 'cpu'
BACKEND = 'torchscript:nnc'


def fn(x0: torch.Tensor, x1: torch.Tensor):
    v0 = torch.neg(x0)
    v1 = torch.neg(x1)
    v2 = torch.std(v1, [0], correction=0, keepdim=False)
    v3 = torch.exp2(v2)
    v4 = torch.add(v3, v0)
    return (v4,)


def make_inputs():
    x0 = torch.zeros([], dtype=torch.float32, device=DEVICE)
    x1 = torch.zeros([1], dtype=torch.float32, device=DEVICE)
    return [x0, x1]


def run_fused(inputs, grad_outputs):
    """torchscript:nnc: script `fn`.
    Warm up forward and backward through the profiling executor, then profile the forward and the
    backward call apart: each must run fused kernels (fused_*) and no fallback."""
    torch._C._jit_set_profiling_executor(True)
    torch._C._get_graph_executor_optimize(True)
    torch._C._jit_set_llga_enabled(False)
    torch._C._jit_set_texpr_fuser_enabled(True)
    torch._C._jit_set_texpr_reductions_enabled(True)
    torch._C._jit_texpr_set_fallback_allowed(False)
    torch._C._jit_set_te_must_use_llvm_cpu(False)
    torch._C._jit_override_can_fuse_on_cpu(True)
    torch._C._jit_override_can_fuse_on_gpu(False)
    compiled = torch.jit.script(fn)
    for _ in range(torch._C._jit_get_num_profiled_runs() + 1):
        xs = leaves(inputs)
        gradients(compiled(*xs), xs, grad_outputs)
    xs = leaves(inputs)
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        out = compiled(*xs)
    names = [e.name for e in prof.function_events]
    fused = any(n.startswith('fused_') for n in names) and 'fallback_function' not in names
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        grads = gradients(out, xs, grad_outputs)
    names = [e.name for e in prof.function_events]
    if not (any(n.startswith('fused_') for n in names) and 'fallback_function' not in names):
        print("the backward ran no fused kernel (or its fallback)")
        fused = False
    return [o.detach() for o in out], grads, fused


TOLERANCE = [(1.3e-06, 1e-05)]  # (rtol, atol) of each output: fuzzfuse's, times sqrt(terms a reduction sums)


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


REQUIRES_GRAD = [True, False]
GRAD_SEED = 1164781828
GRAD_TOLERANCE = [(1.3e-06, 1e-05)]  # (rtol, atol) of each gradient, as TOLERANCE


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
    if not pairs or any(o.shape != g.shape for o, g in pairs):
        return []  # a fused output of the wrong shape: the forward check reports it
    return [g.detach() for g in torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                                    allow_unused=True, materialize_grads=True)]


def main():
    has = {"default": True, "avx2": torch.cpu._is_avx2_supported(), "avx512": torch.cpu._is_avx512_supported()}
    if not has.get(CPU_CAPABILITY, False):
        sys.exit(verdict("skip", reason=f"the bug needs CPU capability {CPU_CAPABILITY}; this machine's CPU "
                                        f"has {[c for c in has if has[c]][-1]}"))
    inputs = make_inputs()
    xs = leaves(inputs)
    outs = fn(*xs)
    grad_outputs = upstream(outs)
    expected, expected_grads = [o.detach() for o in outs], gradients(outs, xs, grad_outputs)
    xs = leaves([x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs])
    outs = fn(*xs)
    fp64_ref = [o.detach() for o in outs]
    fp64_grads = gradients(outs, xs, [None if g is None else g.double() for g in grad_outputs])
    try:
        actual, grads, fused = run_fused(inputs, grad_outputs)
    except Exception as e:
        crashed(e)
    for i, (a, e, r) in enumerate(zip(actual, expected, fp64_ref)):
        check(f"output {i}", a, e, r, *TOLERANCE[i])
    for j, (e, r) in enumerate(zip(expected_grads, fp64_grads)):
        check(f"gradient {j}", grads[j] if j < len(grads) else None, e, r, *GRAD_TOLERANCE[j], "backward-run")
    return fused


if __name__ == "__main__":
    if not main():
        print(f"expected: {BACKEND} runs fused code")
        print("actual: nothing was fused (the fallback path ran)")
        sys.exit(verdict("unfused"))
    print(f"{BACKEND} ran fused code and matches eager")
    sys.exit(verdict("pass"))
