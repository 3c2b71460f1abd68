#!/usr/bin/env python3
"""oneDNN Graph: neg → permute(dims=(1, 0)) → add(1.0) on float32: crash

fuzzfuse signature: crash|torchscript:onednn|backward-run|RuntimeError|torch/autograd/__init__.py:_make_grads|Boolean value of Tensor with more than one value is ambiguous
found with: onednn Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd69a3df32adcccb623b12cd7baa22), torch 2.13.0+cpu

Exits 1 while the bug is present, 0 once it is fixed; the last line it prints is its verdict.
"""
import json
import math
import os
import re
import sys
import traceback

import torch

nan, inf = math.nan, math.inf
DEVICE = 'cpu'
BACKEND = 'torchscript:onednn'


def fn(x0: torch.Tensor, x1: torch.Tensor):
    v0 = torch.neg(x0)
    v1 = x1.permute([1, 0])
    v2 = torch.add(v0, 1.0)
    return (v1, v2,)


fn_float64 = fn  # no cast to undo


def make_inputs():
    x0 = torch.zeros([], dtype=torch.float32, device=DEVICE)
    x1 = torch.zeros([1, 2], dtype=torch.float32, device=DEVICE)
    return [x0, x1]


def run_fused(inputs, grad_outputs):
    """torchscript:onednn: script `fn`.
    Warm up forward and backward through the profiling executor, then profile the forward and the
    backward call apart: each must run fused kernels (LlgaPartition_*) and no fallback."""
    torch._C._jit_set_profiling_executor(True)
    torch._C._get_graph_executor_optimize(True)
    torch._C._jit_set_texpr_fuser_enabled(False)
    torch._C._jit_override_can_fuse_on_cpu(True)
    torch._C._jit_override_can_fuse_on_gpu(False)
    torch._C._jit_set_llga_enabled(True)
    compiled = torch.jit.script(fn)
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


REDUCED = [1, 1]  # terms a reduction folds into an element


TOLERANCE = {torch.float32: (1.3e-06, 1e-05)}  # (rtol, atol) by dtype, scaled by sqrt(reduction size)


def compare(actual, expected, fp64_ref, reduced=1):
    """As torch._dynamo.utils.same(expected, actual, fp64_ref) takes it: wrong only where further
    from float64 than eager is. None, or (mismatch kind, the wrong positions or None)."""
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape or actual.dtype != expected.dtype:
        return ("shape" if isinstance(actual, torch.Tensor) and actual.shape != expected.shape else "dtype"), None
    actual, expected, fp64_ref = (t.detach().cpu() for t in (actual, expected, fp64_ref))
    if not expected.is_floating_point():  # exact, except where eager itself disagrees with float64
        ref = fp64_ref.to(expected.dtype)
        bad = (actual != expected) & (expected == ref) & (actual != ref)
        return ("values", bad) if bad.any() else None
    a, e, r = actual.double(), expected.double(), fp64_ref.double()
    special = lambda t: torch.isnan(t) + 2 * (t == inf) + 3 * (t == -inf)
    bad = (special(a) != special(e)) & (special(e) == special(r)) & (special(a) != special(r))
    if bad.any():
        return "nan-inf", bad
    finite = (special(a) == 0) & (special(e) == 0) & (special(r) == 0)
    rtol, atol = (tol * max(1.0, math.sqrt(reduced)) for tol in TOLERANCE[expected.dtype])
    close = torch.isclose(a, e, rtol=rtol, atol=atol) | ~finite
    rmse = lambda x: (x[finite] - r[finite]).pow(2).mean().sqrt().item()
    return None if close.all() or rmse(a) <= 3.0 * rmse(e) + atol else ("values", ~close)


def location(message, tb):
    """Where it failed: the first C++ file:line of the message, else of the traceback, from csrc/
    (aten/, torch/, c10/) on; else the innermost torch frame as file:function."""
    for text in (message, tb):
        m = re.search(r"""(?:at|from \w+ at) [\"']?([^\s\"']+?\.(?:cpp|cc|h|hpp|cu|cuh))[\"']?:(\d+)""", text)
        if m:
            path = m[1]
            anchor = next((a for a in ("csrc/", "aten/", "torch/", "c10/") if a in path), None)
            return (path[path.index(anchor):] if anchor else "/".join(path.split("/")[-2:])) + ":" + m[2]
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', tb)
    torch_frames = [f"{p[p.rindex('/torch/') + 1:]}:{f}" for p, f in frames if "/torch/" in p]
    return torch_frames[-1] if torch_frames else ""


def verdict(outcome, kind="", location="", stage="", **detail):
    """The last line printed, for machines (fuzzfuse's pytest plugin and export read it, nothing
    else); the exit status: 1 while the bug is present, 0 once fixed, 125 when it cannot run here."""
    print("fuzzfuse-verdict: " + json.dumps(dict(outcome=outcome, kind=kind, location=location, stage=stage,
                                                 **detail)), flush=True)
    return {"pass": 0, "skip": 125}.get(outcome, 1)


def crashed(error):
    """The fuser raised: its exception (dynamo's BackendCompilerFailed unwrapped) and where."""
    if type(error).__name__ == "BackendCompilerFailed":
        error = error.inner_exception
    tb = "".join(traceback.format_exception(error))
    print(tb, file=sys.stderr)
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep  # TorchScript names this file: same text anywhere
    lines = f"{type(error).__name__}: {error}".replace(here, "").strip().splitlines()
    print(f"expected: {BACKEND} compiles and runs fn, and its outputs match eager's")
    print("actual: " + "\n".join(lines[:30]) + (f"\n[... {len(lines) - 30} more lines]" if len(lines) > 30 else ""))
    headline = next((ln.strip() for keys in (("INTERNAL ASSERT FAILED", "Expected"), ("error:", "Error:"))
                     for ln in str(error).splitlines() if any(k in ln for k in keys)), lines[0])
    return verdict("crash", type(error).__name__, location(str(error), tb), message=headline)


def judged(problems, fused, stage="run"):
    """Print what was expected and what came out, then the verdict (of the first problem)."""
    shown = [show(*p) for p in problems]
    for expected, _, _ in shown:
        print(expected)
    for _, actual, _ in shown:
        print(actual)
    if problems:
        what, (kind, _), _, expected, _ = problems[0]
        dtype_class = "bool" if expected.dtype == torch.bool else "float" if expected.is_floating_point() else "int"
        return verdict("mismatch", kind, dtype_class, "backward-run" if what.startswith("grad") else stage,
                       **shown[0][2])
    if not fused:
        print(f"expected: {BACKEND} runs fused code")
        print("actual: nothing was fused (the fallback path ran)")
        return verdict("unfused", stage=stage)
    print(f"{BACKEND} ran fused code and matches eager")
    return verdict("pass")


def show(what, problem, actual, expected, fp64_ref):
    """(expected line, actual line, the first wrong element for the verdict) of one problem."""
    kind, bad = problem
    if bad is None:
        got = f"{actual.dtype} {tuple(actual.shape)}" if isinstance(actual, torch.Tensor) else type(actual).__name__
        return f"expected {what}: {expected.dtype} {tuple(expected.shape)}", f"actual {what}: {got}", {}
    at = tuple(bad.nonzero()[0].tolist())
    value = lambda t: (lambda v: f"{v:.8g}" if isinstance(v, float) else repr(v))(t.detach().cpu()[at].item())
    where = what + (f"[{', '.join(map(str, at))}]" if at else "")
    count = f", wrong at {int(bad.sum())} of {bad.numel()} positions" if bad.numel() > 1 else ""
    return (f"expected {where}: {value(expected)} (eager; float64 gives {value(fp64_ref)})",
            f"actual {where}: {value(actual)} ({BACKEND}{count})",
            {"expected": value(expected), "actual": value(actual)})


REQUIRES_GRAD = [True, True]
GRAD_SEED = 272673038
GRAD_REDUCED = [2, 1]


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
        return []  # a fused output of the wrong shape: the forward comparison reports it
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
    fp64_ref = [o.detach() for o in outs]
    fp64_grads = gradients(outs, xs, [None if g is None else g.double() for g in grad_outputs])
    try:
        actual, grads, fused = run_fused(inputs, grad_outputs)
    except Exception as e:
        return crashed(e)
    problems = [(f"output {i}", p, a, e, r) for i, (a, e, r) in enumerate(zip(actual, expected, fp64_ref))
                if (p := compare(a, e, r, REDUCED[i]))]
    problems += [(f"gradient {j}", p, grads[j] if j < len(grads) else None, e, r)
                 for j, (e, r) in enumerate(zip(expected_grads, fp64_grads))
                 if (p := compare(grads[j] if j < len(grads) else None, e, r, GRAD_REDUCED[j]))]
    return judged(problems, fused)


if __name__ == "__main__":
    sys.exit(main())
