"""Inductor (CUDA): lerp → rsqrt on float32 holding -0.0, float32 returns inf (eager: -inf)

Exits 1 while the bug is present, 0 once it is fixed."""
import torch


def fn(x0, x1):
    v0 = torch.lerp(x0, x0, x1)
    v1 = torch.rsqrt(v0)
    return v1,


x0 = torch.tensor(-0.0, dtype=torch.float32, device='cuda')
x1 = torch.ones([], dtype=torch.float32, device='cuda')
compiled = torch.compile(fn, fullgraph=True)
out = compiled(x0, x1)
got = out[0].item()
print(f"output 0: expected -inf (eager), got {got}")
raise SystemExit(got != float('-inf'))
