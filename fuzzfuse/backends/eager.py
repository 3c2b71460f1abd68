"""The reference backend: the graph interpreted op by op in eager PyTorch."""
from __future__ import annotations

import torch

from ..ir import Graph, run_eager
from ..strategies import ShapeConfig


class EagerBackend:
    name = "eager"
    shapes = ShapeConfig()
    device = "cpu"

    def check_available(self) -> None:
        pass

    def run(self, graph: Graph, inputs: list):
        from .base import RunResult
        return RunResult(run_eager(graph, inputs)[0], fused=None)

    def versions(self) -> dict[str, str]:
        return {"torch": torch.__version__}
