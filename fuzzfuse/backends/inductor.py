"""TorchInductor: the dynamo backend (`dynamo.DynamoBackend`: fullgraph, dynamo's fallback to
eager disabled, failures staged "compile" or "run" by where they were raised) with stronger fusion
evidence: Inductor must report generated kernels.
"""
from __future__ import annotations

import torch

from ..ir import Graph
from .base import Unavailable, machine_versions
from .dynamo import DynamoBackend


class InductorBackend(DynamoBackend):
    """`dynamo:inductor` that also counts the kernels Inductor generated: none means unfused."""

    # dynamo and aot_autograd without Inductor (fuzzfuse.attribution).
    reference_route = "dynamo:aot_eager"

    def __init__(self, device: str | None = None):
        super().__init__("inductor", device)
        self.name = "inductor"

    def check_available(self) -> None:
        try:
            import torch._dynamo  # noqa: F401
            import torch._inductor.config  # noqa: F401
        except ImportError as e:
            raise Unavailable(f"torch {torch.__version__} has no Inductor: {e}") from e
        if self.device == "cuda" and not torch.cuda.is_available():
            raise Unavailable("Inductor on CUDA needs a GPU")

    def compile_and_run(self, graph: Graph, inputs: list, grad_outputs: list | None = None):
        import torch._inductor.metrics as metrics

        kernels_before = metrics.generated_kernel_count
        result, compiled, seen = super().compile_and_run(graph, inputs, grad_outputs)
        kernels = metrics.generated_kernel_count - kernels_before
        kernels -= result.evidence.get("backward", {}).get("kernels", 0)  # the forward's own
        result.evidence["kernels"] = kernels
        result.fused = kernels > 0
        return result, compiled, seen

    def _first_backward(self, call) -> tuple[list, dict]:
        """The backward graph compiles at the first backward call: it must generate kernels too."""
        import torch._inductor.metrics as metrics

        before = metrics.generated_kernel_count
        grads = call()
        kernels = metrics.generated_kernel_count - before
        return grads, {"kernels": kernels, "fused": kernels > 0}

    def repro_code(self, graph: Graph) -> str:
        if graph.requires_grad:
            return '''
def run_fused(inputs, grad_outputs):
    """inductor: torch.compile(fullgraph=True) with errors not suppressed; the forward and, at the
    first backward call, the backward graph must generate kernels."""
    import torch._dynamo
    import torch._inductor.metrics as metrics
    torch._dynamo.config.suppress_errors = False
    compiled = torch.compile(fn, backend="inductor", fullgraph=True, dynamic=False)
    before = metrics.generated_kernel_count
    xs = leaves(inputs)
    out = compiled(*xs)
    forward = metrics.generated_kernel_count - before
    gradients(out, xs, grad_outputs)
    backward = metrics.generated_kernel_count - before - forward
    xs = leaves(inputs)
    out = compiled(*xs)
    grads = gradients(out, xs, grad_outputs)
    if not backward:
        print("the backward generated no kernel")
    return [o.detach() for o in out], grads, forward > 0 and backward > 0
'''
        return '''
def run_fused(inputs):
    """inductor: torch.compile(fullgraph=True) with errors not suppressed; kernels must be generated."""
    import torch._dynamo
    import torch._inductor.metrics as metrics
    torch._dynamo.config.suppress_errors = False
    compiled = torch.compile(fn, backend="inductor", fullgraph=True, dynamic=False)
    before = metrics.generated_kernel_count
    compiled(*inputs)
    kernels = metrics.generated_kernel_count - before
    return list(compiled(*inputs)), kernels > 0
'''

    def versions(self) -> dict[str, str]:
        versions = {"torch": torch.__version__, **machine_versions(self.device)}
        if self.device == "cuda":
            try:
                import triton
                versions["triton"] = triton.__version__
            except ImportError:
                pass
        return versions
