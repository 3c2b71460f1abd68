"""TorchInductor through `torch.compile(fullgraph=True)`, with dynamo's fallback to eager disabled.

Stages: the first call traces and compiles, then runs the compiled code. An exception from the
compiler stack (dynamo tracing, AOT autograd, Inductor codegen, the C++/Triton compile) arrives as a
`TorchDynamoException` (BackendCompilerFailed, InductorError, Unsupported, TorchRuntimeError...) and
is staged "compile"; anything else the first call raises came from running the generated code and is
staged "run", as is any exception from the second call, whose outputs are the ones that count.
"""
from __future__ import annotations

import time

import torch

from ..ir import Graph, compile_source
from ..strategies import ShapeConfig
from .base import BackendError, RunResult, Unavailable


class InductorBackend:
    name = "inductor"
    # Every case is a new graph: the FX graph cache only grows, and on re-checks it would replay a
    # cached artifact instead of compiling again.
    env = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}

    def __init__(self, device: str | None = None):
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        # Each case is a C++ (CPU) or Triton (GPU) compile; tensor size matters little for compile
        # time, but CPU campaigns run many cases, so keep CPU tensors moderate. GPU shapes cross
        # block and vectorization boundaries.
        self.shapes = (ShapeConfig(max_dim=8, max_numel=4096) if self.device == "cpu"
                       else ShapeConfig(max_dim=8, large_dims=(127, 128, 1023, 4099), large_prob=0.1,
                                        max_numel=1 << 20))

    def check_available(self) -> None:
        try:
            import torch._dynamo  # noqa: F401
            import torch._inductor.config  # noqa: F401
        except ImportError as e:
            raise Unavailable(f"torch {torch.__version__} has no Inductor: {e}") from e
        if self.device == "cuda" and not torch.cuda.is_available():
            raise Unavailable("Inductor on CUDA needs a GPU")

    def run(self, graph: Graph, inputs: list) -> RunResult:
        import torch._dynamo
        import torch._inductor.config
        import torch._inductor.metrics as metrics

        torch._dynamo.config.suppress_errors = False
        # Workers already run in parallel; a pool of compile subprocesses per worker only adds
        # processes (measured: no per-case speed-up with 2 cores).
        torch._inductor.config.compile_threads = 1
        # A fresh dynamo state per graph: caches and recompile limits must not grow over a campaign.
        torch._dynamo.reset()
        compiled = torch.compile(compile_source(graph), backend="inductor", fullgraph=True, dynamic=False)
        kernels_before = metrics.generated_kernel_count
        start = time.perf_counter()
        try:
            compiled(*inputs)
        except torch._dynamo.exc.TorchDynamoException as e:
            raise BackendError("compile", e) from e
        except Exception as e:
            raise BackendError("run", e) from e
        compile_seconds = time.perf_counter() - start
        kernels = metrics.generated_kernel_count - kernels_before
        try:
            out = compiled(*inputs)
        except Exception as e:
            raise BackendError("run", e) from e
        evidence = {"kernels": kernels, "compile_seconds": round(compile_seconds, 3)}
        return RunResult(list(out), kernels > 0, evidence, compile_seconds)

    def repro_code(self, graph: Graph) -> str:
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
        versions = {"torch": torch.__version__}
        if self.device == "cuda":
            try:
                import triton
                versions["triton"] = triton.__version__
            except ImportError:
                pass
        return versions
