"""NNC (CPU): sub(x0, -1) → lt on int8 holding 127 returns True (eager: False)

Exits 1 while the bug is present, 0 once it is fixed."""
import os
os.environ["ATEN_CPU_CAPABILITY"] = 'default'  # the CPU capability it was recorded with
os.environ["PYTORCH_TENSOREXPR_FALLBACK"] = "0"  # no silent fallback to the unfused graph
import torch
torch._C._jit_override_can_fuse_on_cpu(True)
torch._C._jit_set_te_must_use_llvm_cpu(False)


def fn(x0):
    v0 = torch.sub(x0, -1)
    v1 = torch.lt(x0, v0)
    return v1,


x0 = torch.tensor(127, dtype=torch.int8, device='cpu')
compiled = torch.jit.script(fn)
for _ in range(3):  # the profiling executor optimizes on the third call
    out = compiled(x0)
got = out[0].item()
print(f"output 0: expected False (eager), got {got}")
raise SystemExit(got != False)
