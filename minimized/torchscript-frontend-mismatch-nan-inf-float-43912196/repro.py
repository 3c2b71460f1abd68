"""TorchScript (no fuser, CPU): the backward of std(correction=0, dims=(0,), keepdim=False) → clamp on float32 returns nan (eager: 0)

Exits 1 while the bug is present, 0 once it is fixed."""
import os
os.environ["ATEN_CPU_CAPABILITY"] = 'default'  # the CPU capability it was recorded with
import torch


def fn(x0):
    v0 = torch.std(x0, [0], correction=0, keepdim=False)
    v1 = torch.clamp(v0, v0, v0)
    return v1,


x0 = torch.zeros([1], dtype=torch.float32, device='cpu')
x0.requires_grad_()
compiled = torch.jit.script(fn)
for _ in range(3):  # the profiling executor optimizes on the third call
    out = [o for o in compiled(x0) if o.requires_grad]
    gen = torch.Generator().manual_seed(873507162)
    grads = torch.autograd.grad(out, [x0], [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o) for o in out], allow_unused=True, materialize_grads=True)
got = grads[0][0].item()
print(f"gradient 0[0]: expected 0 (eager), got {got}")
raise SystemExit(got != 0)
