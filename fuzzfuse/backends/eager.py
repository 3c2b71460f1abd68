"""The reference backend: the graph interpreted op by op in eager PyTorch."""
from __future__ import annotations

from types import MappingProxyType

from ..ir import Graph, run_autograd, run_eager
from .base import Backend, RunResult


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

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        if grad_outputs is None:
            return RunResult(run_eager(graph, inputs)[0], fused=None)
        outputs, _, _, grads = run_autograd(graph, inputs, grad_outputs)
        return RunResult(outputs, fused=None, grads=grads)
