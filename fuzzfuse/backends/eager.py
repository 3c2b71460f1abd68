"""The reference backend: the graph interpreted op by op in eager PyTorch."""
from __future__ import annotations

from ..ir import Graph, run_autograd, run_eager
from .base import Backend, RunResult


class EagerBackend(Backend):
    name = "eager"
    component = "eager"
    display_name = "eager"
    supports_backward = True

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        if grad_outputs is None:
            return RunResult(run_eager(graph, inputs)[0], fused=None)
        outputs, _, _, grads = run_autograd(graph, inputs, grad_outputs)
        return RunResult(outputs, fused=None, grads=grads)
