"""The reference backend: the graph interpreted op by op in eager PyTorch."""
from __future__ import annotations

import torch

from ..ir import Graph, run_autograd, run_eager
from ..strategies import ShapeConfig
from .base import machine_versions


class EagerBackend:
    name = "eager"
    shapes = ShapeConfig()
    device = "cpu"
    env: dict[str, str] = {}

    def check_available(self) -> None:
        pass

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None):
        from .base import RunResult
        if grad_outputs is None:
            return RunResult(run_eager(graph, inputs)[0], fused=None)
        outputs, _, _, grads = run_autograd(graph, inputs, grad_outputs)
        return RunResult(outputs, fused=None, grads=grads)

    def repro_code(self, graph: Graph) -> str:
        from .base import generic_repro_code
        return generic_repro_code(self.name, graph)

    def versions(self) -> dict[str, str]:
        return {"torch": torch.__version__, **machine_versions(self.device)}
