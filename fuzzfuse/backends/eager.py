"""The reference backend: the graph interpreted op by op in eager PyTorch; and its scalar loop on
each device, the routes that tell whether a fault of eager's kernel is one device's or both's."""
from __future__ import annotations

from types import MappingProxyType

import torch

from ..ir import Graph, run_autograd, run_eager
from ..ir.interp import scalar_reference
from .base import Backend, RunResult, Unavailable, Unsupported


class EagerBackend(Backend):
    name = "eager"
    component = "eager"
    display_name = "eager"
    supports_backward = True
    # ATen's CPU remainder vectorizes as `a.fmod(b)`, then adds b where the signs differ
    # (BinaryOpsKernel.cpp): the AVX2 fmod's nan for a dividend near the float64 maximum is
    # remainder's too, one bug (a 300-s NNC campaign's eager remainder -> neg, 0772db8d's fmod).
    # On CUDA, eager's remainder is a kernel of its own; no fault of it has been seen there, and
    # one would be named fmod's.
    computes_from = MappingProxyType({"remainder": "fmod"})
    # ATen's kernels for one op on CPU and CUDA are two files, but the shortcuts they take for a
    # number operand are one policy (pow(x, 0.5) is sqrt on both: pow(-inf, 0.5) is nan on CUDA and
    # CPU alike, pytorch#127163's -0 is its other face). Where a fault of eager's that a fuser's run
    # on one device showed fails alike on the other (ScalarLoop), it is one bug on both
    # (fuzzfuse.minimize.devices_failing_alike); where the other device's eager is right (CUDA's
    # div_trunc rounding, pytorch#186618), it stays that device's.
    device_routes = MappingProxyType({"cpu": "scalar:cpu", "cuda": "scalar:cuda"})

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        if grad_outputs is None:
            return RunResult(run_eager(graph, inputs)[0], fused=None)
        outputs, _, _, grads = run_autograd(graph, inputs, grad_outputs)
        return RunResult(outputs, fused=None, grads=grads)


class ScalarLoop(Backend):
    """Each floating output computed one element at a time, as the scalar arbiter does
    (ir.interp.scalar_reference: float64 from one-element operands, without ATen's shortcuts for a
    number operand), for inputs on `device`. Judged against eager on that device, a graph whose
    eager kernel is wrong there fails as eager's fault (verdict.EAGER_FAULT), with the signature a
    fuser's right value gave it; where eager's kernel is right, it passes. That makes it eager's
    route to a device (`EagerBackend.device_routes`). Integer and bool outputs, which the arbiter
    never judges, are eager's own."""

    component = "eager"
    display_name = "eager's scalar loop"
    # The most elements an output may have: each is an interpretation of the graph of its own, and
    # the graphs it is asked about are reduced ones.
    MAX_ELEMENTS = 4096

    def __init__(self, device: str):
        self.device = device
        self.name = f"scalar:{device}"

    def check_available(self) -> None:
        if self.device == "cuda" and not torch.cuda.is_available():
            raise Unavailable("eager's CUDA kernels need a GPU")

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        if grad_outputs is not None:
            raise Unsupported("the scalar loop computes forward values only")
        outputs = []
        for i, eager in enumerate(run_eager(graph, inputs)[0]):
            if not (isinstance(eager, torch.Tensor) and eager.is_floating_point()):
                outputs.append(eager)
                continue
            if eager.numel() > self.MAX_ELEMENTS:
                raise Unsupported(f"output {i} has {eager.numel()} elements, more than the scalar loop computes")
            values = scalar_reference(graph, inputs, i, list(range(eager.numel())))
            if values is None:
                raise Unsupported(f"output {i} reads other positions than its own: no scalar loop computes it")
            flat = torch.stack([v.reshape(()) for v in values]) if values else torch.empty(0, dtype=torch.float64)
            out = torch.empty_strided(eager.shape, eager.stride(), dtype=eager.dtype, device=eager.device)
            outputs.append(out.copy_(flat.reshape(eager.shape)))
        return RunResult(outputs, fused=None)


class ScalarLoopOnCPU(ScalarLoop):
    def __init__(self):
        super().__init__("cpu")


class ScalarLoopOnCUDA(ScalarLoop):
    def __init__(self):
        super().__init__("cuda")
