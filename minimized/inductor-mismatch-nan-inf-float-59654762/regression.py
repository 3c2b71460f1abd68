#!/usr/bin/env python3
"""Inductor: lerp → rsqrt on float32: mismatch nan-inf

Found by fuzzfuse (signature mismatch|inductor|run|nan-inf|float|an op gives a zero of the other sign, and an op after it reads the sign: lerp) with cuda 13.0, driver 580.159.04, gpu NVIDIA H200, torch 2.11.0+cu130, triton 3.6.0.
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
BACKEND = 'inductor'


def fn(x0: torch.Tensor, x1: torch.Tensor):
    v0 = torch.lerp(x0, x0, x1)
    v1 = torch.rsqrt(v0)
    return (v1,)


def make_inputs():
    x0 = torch.tensor(-0.0, dtype=torch.float32, device=DEVICE).reshape([])
    x1 = torch.ones([], dtype=torch.float32, device=DEVICE)
    return [x0, x1]


# The configuration the case ran under (fuzzfuse drew it: defaults).
INDUCTOR_CONFIG = {}  # torch._inductor.config flags
COMPILE = dict(backend="inductor", fullgraph=True, dynamic=False, mode=None)
MARK_DYNAMIC = []  # (input, dim): torch._dynamo.maybe_mark_dynamic


def compiled_fn(inputs):
    """torch.compile(fn) with errors not suppressed, the inputs' dims marked dynamic."""
    import torch._dynamo
    torch._dynamo.config.suppress_errors = False
    for i, dim in MARK_DYNAMIC:
        torch._dynamo.maybe_mark_dynamic(inputs[i], dim)
    return torch.compile(fn, **COMPILE)


def run_fused(inputs):
    """Inductor: kernels must be generated; the second call's outputs are judged."""
    import torch._inductor.config
    import torch._inductor.metrics as metrics
    with torch._inductor.config.patch(INDUCTOR_CONFIG):
        compiled = compiled_fn(inputs)
        before = metrics.generated_kernel_count
        compiled(*inputs)
        kernels = metrics.generated_kernel_count - before
        return [o for o in compiled(*inputs)], kernels > 0


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
