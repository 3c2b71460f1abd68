"""NNC (CPU): neg → neg → std(correction=0, dims=(0,), keepdim=False) → … (5 ops) on float32 runs the unfused fallback

Exits 1 while the bug is present, 0 once it is fixed."""
import os
os.environ["ATEN_CPU_CAPABILITY"] = 'default'  # the CPU capability it was recorded with
os.environ["PYTORCH_TENSOREXPR_FALLBACK"] = "0"  # no silent fallback to the unfused graph
import torch
torch._C._jit_override_can_fuse_on_cpu(True)
torch._C._jit_set_te_must_use_llvm_cpu(False)
torch._C._jit_set_texpr_reductions_enabled(True)


def fn(x0, x1):
    v0 = torch.neg(x0)
    v1 = torch.neg(x1)
    v2 = torch.std(v1, [0], correction=0, keepdim=False)
    v3 = torch.exp2(v2)
    v4 = torch.add(v3, v0)
    return v4,


x0 = torch.zeros([], dtype=torch.float32, device='cpu')
x1 = torch.zeros([1], dtype=torch.float32, device='cpu')
x0.requires_grad_()
compiled = torch.jit.script(fn)
for i in range(4):  # the profiling executor optimizes on the third call; the fourth is profiled
    with torch.autograd.profiler_legacy.profile(enabled=i == 3) as prof:
        out = [o for o in compiled(x0, x1) if o.requires_grad]
    gen = torch.Generator().manual_seed(1164781828)
    grads = torch.autograd.grad(out, [x0], [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o) for o in out], allow_unused=True, materialize_grads=True)
ran = [e.name for e in prof.function_events if e.name.startswith(('fused_', 'fallback_function'))]
print(f"expected fused kernels and no fallback, got {ran or 'none'}")
raise SystemExit(not ran or "fallback_function" in ran)
