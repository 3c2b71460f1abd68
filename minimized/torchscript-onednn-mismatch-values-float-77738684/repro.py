"""oneDNN Graph (CPU): add(x1, True) → div_floor on float32 returns 1.2082043 (eager: 1)

Exits 1 while the bug is present, 0 once it is fixed."""
import os
os.environ["ATEN_CPU_CAPABILITY"] = 'default'  # the CPU capability it was recorded with
import torch
torch.jit.enable_onednn_fusion(True)


def fn(x0, x1):
    v0 = torch.add(x1, True)
    v1 = torch.div(v0, x0, rounding_mode='floor')
    return v1,


x0 = torch.ones([1], dtype=torch.float32, device='cpu')
x1 = torch.tensor([0.2082042396068573], dtype=torch.float32, device='cpu')
compiled = torch.jit.script(fn)
for _ in range(3):  # the profiling executor optimizes on the third call
    out = compiled(x0, x1)
got = out[0][0].item()
print(f"output 0[0]: expected 1 (eager), got {got}")
raise SystemExit(got != 1)
