#!/usr/bin/env python3
"""nvFuser: mean(dims=(0,), keepdim=False) → unsqueeze(dim=0) → silu → … (5 ops) on bfloat16: crash

fuzzfuse signature: crash|nvfuser|run|RuntimeError|aten/src/ATen/InferSize.h:99|Error from segmentation group N: shape 'S' is invalid for input of size N
found with: cuda 13.0, device NVIDIA H200, nvfuser_direct 0.2.36+git7e04d26, torch 2.11.0+cu130

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
DEVICE = 'cuda'
BACKEND = 'nvfuser'


def fn(x0: torch.Tensor):
    v0 = torch.mean(x0, [0], keepdim=False)
    v1 = torch.unsqueeze(v0, 0)
    v2 = torch.nn.functional.silu(v1)
    v3 = torch.unsqueeze(v2, -1)
    v4 = torch.le(v3, v2)
    return (v4,)


fn_float64 = fn  # no cast to undo


def make_inputs():
    x0 = torch.zeros([2], dtype=torch.bfloat16, device=DEVICE)
    x0 = x0[0:1].expand([2])
    return [x0]


from nvfuser_direct import FusionDefinition, DataType  # noqa: E402


def nvfuser_fusion(fd: FusionDefinition) -> None:
    # fuzzfuse graph 0e97ec503fce3b91, style=upcast
    T0 = fd.define_tensor(shape=[-1], contiguity=[None], dtype=DataType.BFloat16, is_cpu=False)
    T1 = fd.ops.cast(T0, dtype=DataType.Float)
    T2 = fd.ops.sum(T1, dims=[0])
    S3 = fd.define_scalar(2.0, dtype=DataType.Float)
    T4 = fd.ops.truediv(T2, S3)
    T5 = fd.ops.cast(T4, dtype=DataType.BFloat16)
    T6 = fd.ops.broadcast(T5, is_broadcast_dim=[True])
    T7 = fd.ops.cast(T6, dtype=DataType.Float)
    T8 = fd.ops.silu(T7)
    T9 = fd.ops.cast(T8, dtype=DataType.BFloat16)
    T10 = fd.ops.broadcast(T9, is_broadcast_dim=[False, True])
    T11 = fd.ops.cast(T10, dtype=DataType.Float)
    T12 = fd.ops.cast(T9, dtype=DataType.Float)
    T13 = fd.ops.le(T11, T12)
    fd.add_output(T13)


def run_fused(inputs):
    """nvFuser through nvfuser_direct (upcast style): define, then execute (which compiles)."""
    with FusionDefinition() as fd:
        nvfuser_fusion(fd)
    outputs = fd.execute(list(inputs))
    torch.cuda.synchronize()  # a kernel's fault (misaligned address...) is raised here, by its fusion
    return outputs, True


REDUCED = [2]  # terms a reduction folds into an element


TOLERANCE = {}  # (rtol, atol) by dtype, scaled by sqrt(reduction size)


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


def main():
    inputs = make_inputs()
    expected = fn(*inputs)
    fp64_ref = fn_float64(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs])
    try:
        actual, fused = run_fused(inputs)
    except Exception as e:
        return crashed(e)
    return judged([(f"output {i}", p, a, e, r) for i, (a, e, r) in enumerate(zip(actual, expected, fp64_ref))
                   if (p := compare(a, e, r, REDUCED[i]))], fused)


if __name__ == "__main__":
    sys.exit(main())
