"""NNC (CPU): sub → abs on int16 kills the process (SIGABRT: free(): invalid pointer)

Exits 1 while the bug is present (the fused call, run in a child process, dies by SIGABRT), 0 once it is fixed."""
import os
import signal, subprocess, sys  # the bug kills the process: the fused call runs in a child
if "REPRO_CHILD" not in os.environ:
    ended = subprocess.run([sys.executable, __file__], env={**os.environ, "REPRO_CHILD": "1"}).returncode
    print(f"the child process running fn {'died by ' + signal.Signals(-ended).name if ended < 0 else f'exited {ended}'}")
    raise SystemExit(ended != 0)
os.environ["ATEN_CPU_CAPABILITY"] = 'default'  # the CPU capability it was recorded with
os.environ["PYTORCH_TENSOREXPR_FALLBACK"] = "0"  # no silent fallback to the unfused graph
import faulthandler
faulthandler.enable(all_threads=False)
import torch
torch._C._jit_override_can_fuse_on_cpu(True)
torch._C._jit_set_te_must_use_llvm_cpu(False)


def fn(x0):
    v0 = torch.sub(x0, x0)
    v1 = torch.abs(v0)
    return v1,


x0 = torch.ones([2, 4], dtype=torch.int16, device='cpu')
compiled = torch.jit.script(fn)
for _ in range(3):  # the profiling executor optimizes on the third call
    out = compiled(x0)
