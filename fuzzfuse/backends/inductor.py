"""TorchInductor: the dynamo backend (`dynamo.DynamoBackend`: fullgraph, dynamo's fallback to
eager disabled, failures staged "compile" or "run" by where they were raised) with stronger fusion
evidence: Inductor must report generated kernels (C++ on CPU, Triton on CUDA).

Each case runs under its own drawn configuration (`inductor_config.InductorConfig`: dynamic,
mode, marked dims, config flags), recorded in the case's options (`Options.inductor_config`).

What Inductor keeps between the cases of one worker, and what that means for what is tested:
- dynamo's code cache and guards: reset before every graph (DynamoBackend), so every case compiles;
- the FX graph and AOT autograd caches: off (DynamoBackend.env), so a recheck compiles again;
- `torch._inductor.config`: patched for the case and restored after it, whatever it raised;
- compiled kernels, in memory and on disk, keyed by their source and compile command: a kernel
  whose source another case already produced is loaded, not compiled again. What is skipped is the
  C++/Triton compiler run on identical source, never Inductor's own lowering and scheduling. The
  disk cache is the worker pool's own (pool.case_pool), removed with it, and a repro's runs each
  have their own (export.run_repro): a kernel whose compile hangs is compiled by every run that
  meets it, not loaded once some process outside the run let it finish;
- Triton's autotuning results, keyed by kernel source (CUDA): a kernel tuned once keeps the block
  sizes it chose then, so coordinate descent tuning explores each kernel source only once;
- the thread's FTZ/DAZ bits, which a C++ kernel built with -funsafe-math-optimizations sets when
  its library is first loaded (gcc < 13), and only then: a case under that flag runs with them set
  (InductorCompiled), every eager run with them clear (fuzzfuse.job).
"""
from __future__ import annotations

import copy
from dataclasses import replace
from types import MappingProxyType
from typing import Iterator

import torch

from ..ir import Graph, TensorInput
from .findings import Difference, FlushStyle
from .base import Evidence, RunResult, Unavailable, machine_versions
from .dynamo import DynamoBackend, DynamoCompiled
from .inductor_config import InductorConfig
from .options import Options
from ..strategies import ShapeConfig


class InductorBackend(DynamoBackend):
    """`dynamo:inductor` that also counts the kernels Inductor generated: none means unfused."""

    component = "inductor"
    display_name = "Inductor"
    # Its documented flush (InductorConfig.documented_differences): on CPU, that of the C++
    # kernels gcc < 13 links crtfastmath into; on CUDA, Triton's.
    flush_style = MappingProxyType({"cpu": FlushStyle.DAZ_FTZ, "cuda": FlushStyle.TRITON_FP32})
    # dynamo and aot_autograd without Inductor (fuzzfuse.attribution).
    reference_route = "dynamo:aot_eager"
    # Its C++ kernels: at::vec loops over the innermost dim, a scalar loop for the tail.
    vector_loops_on = frozenset({"cpu"})
    # torch._decomp's elu is where(x > 0, x * scale, expm1(x * input_scale) * alpha * scale), and
    # torch._refs' div(rounding_mode="trunc") of floats is trunc(a / b): Triton's division is its.
    # argmin and minimum are argmax's and maximum's code with the comparison turned round (Triton:
    # triton_helpers.min_with_index / minimum beside max_with_index / maximum, one tl.where on a < b
    # or a > b; C++: min_propagate_nan beside max_propagate_nan): a wrong value of one is a bug of both.
    # clamp, clamp(min=) and hardtanh (torch._refs: clamp) lower to ops.maximum and ops.minimum:
    # the C++ of all three is at::vec::maximum(x, min).
    computes_from = MappingProxyType({"elu": "expm1", "div_trunc": "div", "argmin": "argmax",
                                      "minimum": "maximum", "clamp": "maximum", "clamp_min": "maximum",
                                      "hardtanh": "maximum"})
    # TritonOverrides.relu is ops.maximum(ops.constant(0, torch.int32), x); the C++ one is its own.
    # The C++ amin and amax are one loop: a masked tail load into tmp_acc0_vec, then
    # vec_reduce_all over at::vec::minimum / maximum (pytorch#191499: int8 amin of ones is 0, amax
    # of zeros 1, on AVX2 and AVX-512 alike); Triton's are tl.min and tl.max.
    computes_from_on = MappingProxyType({"cuda": MappingProxyType({"relu": "maximum"}),
                                         "cpu": MappingProxyType({"amin": "amax"})})
    device_routes = MappingProxyType({"cpu": "inductor:cpu", "cuda": "inductor:cuda"})
    # maximum is Triton's triton_helpers.maximum and C++'s at::vec::maximum / max_propagate_nan: the
    # signed-zero fault of the first was fixed alone (pytorch#186933), the second's is still open
    # (pytorch#194347).
    per_device_code = frozenset({"maximum"})
    # fx_passes/joint_graph.py's mul_softmax_pattern and div_softmax_pattern match the
    # sub(scaled, amax(scaled)) that softmax and log_softmax decompose to, scaled = x * c or x / c,
    # and compute (x * sign - amax(x * sign)) * (sign * c).
    rewrites_pairs = MappingProxyType({"scaled softmax rewrite": (frozenset({"mul", "div"}),
                                                                  frozenset({"softmax", "log_softmax"}))})
    # CppVecOverrides.fmod is f"{a}.fmod({b})".
    eager_kernels = MappingProxyType({"cpu": frozenset({"fmod"})})

    def __init__(self, device: str | None = None):
        super().__init__("inductor", device)
        self.name = "inductor"
        # The configuration `repro_code` writes (`for_case`).
        self.config = InductorConfig()
        if self.device == "cpu":
            # Inductor's C++ codegen: sizes around the vector widths (8, 16, 32, 64 lanes) and
            # one off them, for its masked tail loops; reductions long enough to be split
            # across threads (cpp.threads) or into two stages.
            self.shapes = ShapeConfig(max_dim=8, max_numel=4096, large_dims=(7, 9, 15, 17, 31, 33, 63, 65, 1025),
                                      large_prob=0.2)

    def check_available(self) -> None:
        try:
            import torch._dynamo  # noqa: F401
            import torch._inductor.config  # noqa: F401
        except ImportError as e:
            raise Unavailable(f"torch {torch.__version__} has no Inductor: {e}") from e
        if self.device == "cuda" and not torch.cuda.is_available():
            raise Unavailable("Inductor on CUDA needs a GPU")

    # ---- per-case configuration ---------------------------------------------------------------
    def options_without_flush(self, options: Options) -> Options | None:
        config = config_of(options).without_flush(self.device)
        return replace(options, inductor_config=config) if config is not None else None

    def draw_options(self, seed: int) -> Options:
        return Options(inductor_config=InductorConfig.draw(seed, self.device))

    def describe_options(self, options: Options) -> list[str]:
        return config_of(options).choices()

    def simpler_options(self, options: Options) -> Iterator[Options]:
        for config in config_of(options).simpler():
            yield replace(options, inductor_config=config)

    def documented_differences(self, options: Options) -> frozenset[Difference]:
        return config_of(options).documented_differences(self.device)

    def for_case(self, options: Options) -> "InductorBackend":
        case = copy.copy(self)
        case.config = config_of(options)
        return case

    def compile(self, graph: Graph, options: Options = Options()) -> "InductorCompiled":
        return InductorCompiled(self, graph, options)

    def compile_and_run(self, graph: Graph, inputs: list, grad_outputs: list | None = None, dynamic: bool = False):
        import torch._inductor.metrics as metrics

        kernels_before = metrics.generated_kernel_count
        result, compiled, seen = super().compile_and_run(graph, inputs, grad_outputs, dynamic)
        kernels = metrics.generated_kernel_count - kernels_before
        kernels -= result.evidence.backward.kernels if result.evidence.backward else 0  # the forward's own
        result.evidence.kernels = kernels
        result.fused = result.evidence.fused = kernels > 0
        return result, compiled, seen

    def _first_backward(self, call) -> tuple[list, Evidence]:
        """The backward graph compiles at the first backward call: it must generate kernels too."""
        import torch._inductor.metrics as metrics

        before = metrics.generated_kernel_count
        grads = call()
        kernels = metrics.generated_kernel_count - before
        return grads, Evidence(fused=kernels > 0, kernels=kernels)

    # ---- the standalone repro: PyTorch's pt2 bug template ----------------------------------------
    def repro_code(self, graph: Graph) -> str:
        config = self.config
        shapes = [tuple(i.shape) if isinstance(i, TensorInput) else None for i in graph.inputs]
        setup = f'''
# The configuration the case ran under (fuzzfuse drew it: {config.describe()}).
INDUCTOR_CONFIG = {dict(config.flags)!r}  # torch._inductor.config flags
COMPILE = dict(backend="inductor", fullgraph=True, dynamic={config.dynamic!r}, mode={config.mode!r})
MARK_DYNAMIC = {config.marked_dims(shapes)!r}  # (input, dim): torch._dynamo.maybe_mark_dynamic


def compiled_fn(inputs):
    """torch.compile(fn) with errors not suppressed, the inputs' dims marked dynamic."""
    import torch._dynamo
    torch._dynamo.config.suppress_errors = False
    for i, dim in MARK_DYNAMIC:
        torch._dynamo.maybe_mark_dynamic(inputs[i], dim)
    return torch.compile(fn, **COMPILE)
'''
        copy = ".clone()" if config.cudagraphs else ""
        if graph.requires_grad:
            return setup + f'''

def run_fused(inputs, grad_outputs):
    """Inductor: the forward and, at the first backward call, the backward graph must generate
    kernels."""
    import torch._inductor.config
    import torch._inductor.metrics as metrics
    with torch._inductor.config.patch(INDUCTOR_CONFIG):
        compiled = compiled_fn(inputs)
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
    return [o.detach(){copy} for o in out], [g{copy} for g in grads], forward > 0 and backward > 0
'''
        return setup + f'''

def run_fused(inputs):
    """Inductor: kernels must be generated; the second call's outputs are judged."""
    import torch._inductor.config
    import torch._inductor.metrics as metrics
    with torch._inductor.config.patch(INDUCTOR_CONFIG):
        compiled = compiled_fn(inputs)
        before = metrics.generated_kernel_count
        compiled(*inputs)
        kernels = metrics.generated_kernel_count - before
        return [o{copy} for o in compiled(*inputs)], kernels > 0
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


class InductorCompiled(DynamoCompiled):
    """A graph compiled under its case's configuration: Inductor's config patched around every
    call (a rerun may recompile), the inputs' chosen dims marked dynamic, and outputs copied where
    CUDA graphs replay (the next replay overwrites them)."""

    def __init__(self, backend: InductorBackend, graph: Graph, options: Options):
        super().__init__(backend, graph, options)
        self.config = config_of(options)
        self.dynamic = self.config.dynamic

    def run(self, inputs: list, grad_outputs: list | None = None) -> RunResult:
        import torch._dynamo

        shapes = [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs]
        for i, dim in self.config.marked_dims(shapes):
            torch._dynamo.maybe_mark_dynamic(inputs[i], dim)
        # A kernel built with -funsafe-math-optimizations sets FTZ/DAZ (gcc < 13: crtfastmath)
        # only when its library is first loaded in a process, and Inductor loads a library once per
        # process: every run under that flag gets the state the first load left, as a user's
        # process would have it, whether or not this worker loaded that kernel before.
        flushes = (self.backend.flush_style.get(self.backend.device) == FlushStyle.DAZ_FTZ
                   and Difference.DENORMAL_FLUSH in self.config.documented_differences(self.backend.device))
        with self.config.applied():
            torch.set_flush_denormal(flushes)
            try:
                result = super().run(inputs, grad_outputs)
            finally:
                torch.set_flush_denormal(False)
        if self.config.cudagraphs:
            result.outputs = [o.clone() for o in result.outputs]
            result.grads = [g.clone() if g is not None else g for g in result.grads] if result.grads else result.grads
        return result


class InductorOnCPU(InductorBackend):
    """Inductor's C++ code, also where a GPU is: the CPU route of a bug found on CUDA."""

    def __init__(self):
        super().__init__("cpu")


class InductorOnCUDA(InductorBackend):
    """Inductor's Triton code: the CUDA route of a bug found on CPU."""

    def __init__(self):
        super().__init__("cuda")


def config_of(options: Options) -> InductorConfig:
    """A case's configuration (Inductor's defaults when it records none: cases found before
    configurations were drawn)."""
    return options.inductor_config if options.inductor_config is not None else InductorConfig()

