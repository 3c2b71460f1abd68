"""nvFuser (CUDA): argmin(dim=-3, keepdim=False) → neg → pad(pads=(1, -1), value=1.0) on int32 kills the process (SIGSEGV)

Exits 1 while the bug is present (the fused call, run in a child process, dies by SIGSEGV), 0 once it is fixed."""
import os
import signal, subprocess, sys  # the bug kills the process: the fused call runs in a child
if "REPRO_CHILD" not in os.environ:
    ended = subprocess.run([sys.executable, __file__], env={**os.environ, "REPRO_CHILD": "1"}).returncode
    print(f"the child process running fn {'died by ' + signal.Signals(-ended).name if ended < 0 else f'exited {ended}'}")
    raise SystemExit(ended != 0)
os.environ.setdefault("NVFUSER_ENABLE", 'fuse_matmul')
import faulthandler
faulthandler.enable(all_threads=False)
import torch
from nvfuser_direct import FusionDefinition, DataType

with FusionDefinition() as fd:
    T0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Int32, is_cpu=False)
    T1 = fd.ops.min(T0, dims=[0])
    T2 = fd.ops.broadcast(T1, is_broadcast_dim=[True, False, False])
    T3 = fd.ops.eq(T0, T2)
    T4 = fd.ops.iota(length=2, start=0, step=1, dtype=DataType.Int)
    T5 = fd.ops.broadcast(T4, is_broadcast_dim=[False, True, True])
    S6 = fd.define_scalar(2, dtype=DataType.Int)
    T7 = fd.ops.where(T3, T5, S6)
    T8 = fd.ops.min(T7, dims=[0])
    T9 = fd.ops.neg(T0)
    T10 = fd.ops.slice(T9, start_indices=[0, 0, 0], end_indices=[2, 2, 2])
    S11 = fd.define_scalar(1, dtype=DataType.Int)
    T12 = fd.ops.pad(T10, [1, 0], value=S11)
    fd.add_output(T8)
    fd.add_output(T12)

x0 = torch.zeros([2, 2, 3], dtype=torch.int32, device='cuda')
out = fd.execute([x0])
