"""nvFuser (CUDA): pad(pads=(3, 0, 0, 1), value=1) → expand(sizes=(1, 2, 4, -1)) on float32 (expanded) raises RuntimeError: Expected out_size == in_size . Mismatch in sizes when concretizing expand. Expanded or Iteration … at csrc/dynamic_transform.cpp:492

Exits 1 while the bug is present, 0 once it is fixed."""
import os
os.environ.setdefault("NVFUSER_ENABLE", 'fuse_matmul')
import torch
from nvfuser_direct import FusionDefinition, DataType

with FusionDefinition() as fd:
    T0 = fd.define_tensor(shape=[-1, -1, 1], contiguity=[None, None, None], dtype=DataType.Float, is_cpu=False)
    S1 = fd.define_scalar(1.0, dtype=DataType.Float)
    T2 = fd.ops.pad(T0, [3, 0, 0, 1], value=S1)
    T3 = fd.ops.broadcast(T2, is_broadcast_dim=[True, False, False, False])
    T4 = fd.ops.expand(T3, [1, 2, 4, 4])
    fd.add_output(T4)

x0 = torch.zeros([2, 3, 1], dtype=torch.float32, device='cuda')[0:1, 0:1, :].expand([2, 3, 1])
out = fd.execute([x0])
torch.cuda.synchronize()
print("nvFuser ran fn without error")
