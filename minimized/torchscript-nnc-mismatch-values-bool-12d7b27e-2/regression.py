#!/usr/bin/env python3
"""NNC: sub(x0, -1) → lt on int8: mismatch values

Found by fuzzfuse (signature mismatch|torchscript:nnc|run|values|bool|) with cpu_capability default, host_isa avx512, onednn Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd69a3df32adcccb623b12cd7baa22), torch 2.13.0+cpu.
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


def fn(x0: torch.Tensor):
    v0 = torch.sub(x0, -1)
    v1 = torch.lt(x0, v0)
    return (v1,)


def make_inputs():
    x0 = torch.tensor(127, dtype=torch.int8, device=DEVICE).reshape([])
    return [x0]


def run_fused(inputs):
    """torchscript:nnc: script `fn`.
    Warm up through the profiling executor, then run under the profiler to see whether fused
    kernels ran (fused_*) and the fallback did not."""
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
        compiled(*inputs)
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        out = compiled(*inputs)
    names = [e.name for e in prof.function_events]
    return list(out), any(n.startswith('fused_') for n in names) and 'fallback_function' not in names


TOLERANCE = [(0.0, 0.0)]  # (rtol, atol) of each output: fuzzfuse's, times sqrt(terms a reduction sums)


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
    has = {"default": True, "avx2": torch.cpu._is_avx2_supported(), "avx512": torch.cpu._is_avx512_supported()}
    if not has.get(CPU_CAPABILITY, False):
        sys.exit(verdict("skip", reason=f"the bug needs CPU capability {CPU_CAPABILITY}; this machine's CPU "
                                        f"has {[c for c in has if has[c]][-1]}"))
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
