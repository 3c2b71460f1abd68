"""TorchScript fusers: NNC (TensorExpr), oneDNN Graph (LLGA), and TorchScript's nvFuser (old torch only).

The graph is emitted as source, scripted, and called through the profiling executor: the first
`num_profiled_runs` calls record types, the next one specializes and compiles fusion groups, and the
call after that is the one whose outputs count.

Fusion evidence comes from the profiler, not from graph text: `last_executed_optimized_graph()`
shows `prim::TensorExprGroup` even when a type guard failed and the unfused `fallback_function` ran.
The final call runs under the legacy (non-Kineto) autograd profiler: it sees the same RecordFunction
events (the fused kernel's name, `fallback_function`, every aten op the interpreter still ran) but
costs ~1 ms a call, where Kineto's profiler costs ~2.5 s once per process and ~2 ms a call.

Backward cases (inputs that require grad): the profiling runs call the function and backpropagate
the case's upstream gradients, so that autodiff's backward graph is profiled and fused as well;
the measured forward and backward calls are profiled apart, and each must show fused kernels.

Fuser flags are process-global. Each backend sets the whole fuser state at the start of every run,
so the backend owns the process (workers are dedicated to one backend; tests may alternate backends).
"""
from __future__ import annotations

import dataclasses
import os
import time

import torch

from ..ir import OPS, Graph, to_source
from ..ir.ops import fused_by, fusion_anchors
from ..ir.interp import input_gradients, with_leaves
from ..strategies import Features, ShapeConfig
from .base import Backend, BackendError, Compiled, Evidence, RunResult, Unavailable, machine_versions
from .guards import failed_guard
from .options import Options

# Read once by libtorch (a static), so it must be in the environment before the first fusion group
# compiles; workers get it from `env` too. "0": a fusion group that fails to compile raises instead
# of silently running its unfused subgraph.
NNC_ENV = {"PYTORCH_TENSOREXPR_FALLBACK": "0"}
NVFUSER_ENV = {"PYTORCH_NVFUSER_DISABLE": "fallback"}


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


# What a fused kernel may call through aten without having fallen back: allocating its outputs.
_ALLOCATIONS = {"aten::empty", "aten::empty_strided"}


def _ancestors(event) -> tuple[str, ...]:
    names = []
    while (event := event.cpu_parent) is not None:
        names.append(event.name)
    return tuple(reversed(names))


def _group_count(kind: str) -> int:
    graph = torch.jit.last_executed_optimized_graph()
    return len(graph.findAllNodes(kind, True)) if graph is not None else 0


class _ScriptedBackend(Backend):
    """Script, warm up, and run the final call under the profiler; subclasses pick the fuser."""

    supports_backward = True
    reuses_compiled = True
    # A fused kernel's profiler event starts with this; the optimized graph holds `group_kind` nodes.
    kernel_prefix = ""
    group_kind = ""
    repro_doc = "script `fn`."
    # The same frontend, executor and warm-up without this fuser: a failure that reproduces there is
    # TorchScript's, not the fuser's (fuzzfuse.attribution).
    reference_route: str | None = "torchscript:frontend"
    # NNC and oneDNN compile into interpreters/JITs on CPU that are slow on large tensors.
    shapes = ShapeConfig(max_rank=4, max_dim=5, max_numel=256)

    def flags(self) -> list[tuple[str, bool]]:
        """(torch._C setter, value) pairs: the whole fuser state, set before every run. Data, so that
        the standalone repro sets exactly the same state."""
        raise NotImplementedError

    def _configure(self) -> None:
        for setter, value in self.flags():
            getattr(torch._C, setter)(value)

    def repro_prelude(self) -> str:
        """Environment the fuser reads once, before torch is imported."""
        return "".join(f"import os\nos.environ[{k!r}] = {v!r}\n" for k, v in self.env.items())

    def repro_compile(self, graph: Graph) -> str:
        """Repro source (inside run_fused) that binds `compiled`, the fused form of `fn`."""
        return "compiled = torch.jit.script(fn)"

    def repro_code(self, graph: Graph) -> str:
        flags = "\n".join(f"    torch._C.{setter}({value})" for setter, value in self.flags())
        fused = (f"any(n.startswith({self.kernel_prefix!r}) for n in names) "
                 f"and 'fallback_function' not in names")
        if not graph.requires_grad:
            return f'''
def run_fused(inputs):
    """{self.name}: {self.repro_doc}
    Warm up through the profiling executor, then run under the profiler to see whether fused
    kernels ran ({self.kernel_prefix}*) and the fallback did not."""
{flags}
    {self.repro_compile(graph)}
    for _ in range(torch._C._jit_get_num_profiled_runs() + 1):
        compiled(*inputs)
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        out = compiled(*inputs)
    names = [e.name for e in prof.function_events]
    return list(out), {fused}
'''
        return f'''
def run_fused(inputs, grad_outputs):
    """{self.name}: {self.repro_doc}
    Warm up forward and backward through the profiling executor, then profile the forward and the
    backward call apart: each must run fused kernels ({self.kernel_prefix}*) and no fallback."""
{flags}
    {self.repro_compile(graph)}
    for _ in range(torch._C._jit_get_num_profiled_runs() + 1):
        xs = leaves(inputs)
        gradients(compiled(*xs), xs, grad_outputs)
    xs = leaves(inputs)
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        out = compiled(*xs)
    names = [e.name for e in prof.function_events]
    fused = {fused}
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        grads = gradients(out, xs, grad_outputs)
    names = [e.name for e in prof.function_events]
    if not ({fused}):
        print("the backward ran no fused kernel (or its fallback)")
        fused = False
    return [o.detach() for o in out], grads, fused
'''

    def _events(self, call) -> tuple[object, list[tuple[str, tuple[str, ...]]]]:
        """What `call()` returns, and (name, names of its ancestors) of every profiler event."""
        with torch.autograd.profiler.profile(use_kineto=False) as prof:
            out = call()
        return out, [(e.name, _ancestors(e)) for e in prof.function_events]

    def script(self, graph: Graph):
        """The fused form of the graph's function (positional inputs, a tuple of outputs)."""
        return torch.jit.CompilationUnit(to_source(graph)).fn

    def compile(self, graph: Graph, options: Options = Options()) -> "ScriptedCompiled":
        return ScriptedCompiled(self, graph, options)

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        return self.compile(graph).run(inputs, grad_outputs)

    def script_and_run(self, graph: Graph, inputs: list, grad_outputs: list | None = None):
        """The first run of a graph: its RunResult and the scripted function, warmed up."""
        os.environ.update(self.env)
        self._configure()
        backward = grad_outputs is not None
        start = time.perf_counter()
        try:
            fn = self.script(graph)
        except Exception as e:
            raise BackendError("compile", e) from e
        # Profiling runs: the executor records types, then specializes and fuses; a backward case
        # warms the backward graph (autodiff's, or aot_autograd's) the same way.
        for _ in range(torch._C._jit_get_num_profiled_runs() + 1):
            xs = with_leaves(graph, inputs) if backward else inputs
            try:
                out = fn(*xs)
            except Exception as e:
                raise BackendError("compile", e) from e
            if backward:
                try:
                    input_gradients(graph, xs, list(out), grad_outputs)
                except Exception as e:
                    raise BackendError("backward-compile", e) from e
        compile_seconds = time.perf_counter() - start
        xs = with_leaves(graph, inputs) if backward else inputs
        try:
            out, events = self._events(lambda: fn(*xs))
        except Exception as e:
            raise BackendError("run", e) from e
        evidence = self._evidence(events, xs)
        result = RunResult([o.detach() for o in out], evidence.fused, evidence, compile_seconds)
        if backward:
            try:
                grads, events = self._events(lambda: input_gradients(graph, xs, list(out), grad_outputs))
            except Exception as e:
                raise BackendError("backward-run", e) from e
            evidence.backward = self._evidence(events, *(self.backward_guard_inputs(fn) or ()))
            result.grads, result.backward_fused = [g.detach() for g in grads], evidence.backward.fused
        return result, fn

    def backward_guard_inputs(self, fn) -> tuple[list, list[str]] | None:
        """The inputs of the backward graph `fn` last ran, and what made each, to find the guard
        that sent a backward fallback there; None: autodiff runs its backward graph inside the
        autograd engine on values fuzzfuse never sees (aot_autograd's route records them)."""
        return None

    def _evidence(self, events: list[tuple[str, tuple[str, ...]]], inputs: list | None = None,
                  input_makers: list[str] | None = None) -> Evidence:
        """What the profiler saw of one call; `inputs`: the call's (and what made each, where
        another graph did), read again to find the guard that sent a fallback there
        (fuzzfuse.backends.guards)."""
        kernels = [n for n, _ in events if n.startswith(self.kernel_prefix)]
        # A kernel that fails to compile may run its subgraph op by op inside the kernel's event
        # (NNC with PYTORCH_TENSOREXPR_FALLBACK=1); a failed type guard runs `fallback_function`.
        in_kernels = [n for n, up in events if n.startswith("aten::") and n not in _ALLOCATIONS
                      and any(a.startswith(self.kernel_prefix) for a in up)]
        fallback = bool(in_kernels) or any(n == "fallback_function" for n, _ in events)
        evidence = Evidence(fused=bool(kernels) and not fallback, kernels=len(kernels), fallback=fallback, details={
            "kernels": kernels,
            "ops_inside_kernels": in_kernels,
            "fusion_groups": _group_count(self.group_kind),
            # aten ops the interpreter ran itself (direct children of the scripted function's event).
            "unfused_ops": [n for n, up in events if up == ("fn",) and n.startswith("aten::")],
        })
        if fallback and inputs is not None:  # last: it runs the graph again
            evidence.failed_guard = failed_guard(inputs, input_makers)
        return evidence

    def versions(self) -> dict[str, str]:
        return {"torch": torch.__version__, "onednn": _onednn_version(), **machine_versions(self.device)}


class ScriptedCompiled(Compiled):
    """Scripted and warmed up once: the profiling executor's specialized graph guards on dtypes,
    shapes and strides, so new values of the same input specs run the same fused kernels. Each
    later run is profiled too, so its evidence is its own (a failed guard shows as fallback)."""
    def __init__(self, backend: _ScriptedBackend, graph: Graph, options: Options):
        super().__init__(backend, graph, options)
        self._fn = None

    def run(self, inputs: list, grad_outputs: list | None = None) -> RunResult:
        if self._fn is None or grad_outputs is not None:
            result, self._fn = self.backend.script_and_run(self.graph, inputs, grad_outputs)
            return result
        try:
            out, events = self.backend._events(lambda: self._fn(*inputs))
        except Exception as e:
            raise BackendError("run", e) from e
        evidence = self.backend._evidence(events, inputs)
        evidence.details["rerun"] = True
        return RunResult([o.detach() for o in out], evidence.fused, evidence)


def _onednn_version() -> str:
    if not torch.backends.mkldnn.is_available():
        return "unavailable"
    for line in torch.__config__.show().splitlines():
        if "MKL-DNN" in line or "oneDNN" in line:
            return line.strip(" -")
    return "available"


class NNCBackend(_ScriptedBackend):
    """NNC (TensorExpr) with fallback off. Without LLVM (the CPU wheels) NNC runs its IR through the
    SimpleIREval interpreter: correct semantics, slow on big tensors.

    Reductions are fused on CPU only: on CUDA (torch 2.11) NNC accepts them and then crashes while
    compiling (`exp` then `sum`: SIGSEGV; `sum` then `exp`: "Global alloc not supported yet"),
    which would turn every reduction case of a GPU campaign into the same hard crash."""

    name = "torchscript:nnc"
    component = "nnc"
    display_name = "NNC"
    env = NNC_ENV
    kernel_prefix = "fused_"
    group_kind = "prim::TensorExprGroup"
    # NNC allocates a fused kernel's outputs with the strides the profiling runs recorded: eager's.
    # Measured: 63 of 63 passing CPU graphs (7 with permuted or channels_last outputs) matched.
    promises_strides = True
    unary_keeps_integral_dtype = True

    def __init__(self, device: str | None = None):
        self.device = device or _default_device()
        # Cases NNC declines wholesale test nothing: draw the ops it fuses, two at least, connected
        # (it merges a producer into its consumer; ops that share no value stay lone ops), and on CPU
        # no fp16/bf16 (NNC declines both there; on CUDA it fuses them) and no uint8 (measured on
        # torch 2.13 CPU: no chain of add, mul, abs, sum or casts over uint8 fused; int8/int16 do).
        dtypes = Features().dtypes
        if self.device == "cpu":
            dtypes = tuple(d for d in dtypes if d not in ("float16", "bfloat16", "uint8"))
        self.features = Features(ops=fused_by("nnc"), dtypes=dtypes, min_ops=2, connected=True, device=self.device)
        # Every op and dtype, still connected: where NNC starts fusing more, it shows here.
        self.outside_features = dataclasses.replace(self.features, ops=tuple(OPS), dtypes=Features().dtypes)

    def check_available(self) -> None:
        if not hasattr(torch._C, "_jit_set_texpr_fuser_enabled"):
            raise Unavailable("this torch build has no TensorExpr fuser")

    def flags(self) -> list[tuple[str, bool]]:
        cpu = self.device == "cpu"
        return [("_jit_set_profiling_executor", True), ("_get_graph_executor_optimize", True),
                ("_jit_set_llga_enabled", False), ("_jit_set_texpr_fuser_enabled", True),
                ("_jit_set_texpr_reductions_enabled", cpu), ("_jit_texpr_set_fallback_allowed", False),
                ("_jit_set_te_must_use_llvm_cpu", False), ("_jit_override_can_fuse_on_cpu", cpu),
                ("_jit_override_can_fuse_on_gpu", not cpu)]


class OneDNNBackend(_ScriptedBackend):
    """oneDNN Graph (LLGA), CPU only. `torch.jit.fuser("fuser3")` also turns NNC on; here NNC is off
    so that every fused kernel (`LlgaPartition_N`) and every mismatch is oneDNN's."""

    name = "torchscript:onednn"
    component = "onednn"
    display_name = "oneDNN Graph"
    device = "cpu"
    # oneDNN Graph takes float32/bfloat16 tensors only, and partitions only around a few anchors
    # (the registry's FUSION_ANCHORS) whose result has no other use (TORCHSCRIPT_FUSIBLE): with every
    # dtype and op allowed and values used freely, almost no graph fuses.
    features = Features(ops=fused_by("onednn"), dtypes=("float32", "bfloat16"), min_ops=2, chains=True,
                        connected=True, anchors=fusion_anchors("onednn"))
    # No 0-d inputs: a fusion group with a 0-d tensor fails to compile (torch 2.13; the known root
    # cause of minimized/aot-onednn-crash-runtimeerror-torch-nn-modules-module-py-cal-c4070a84 and
    # the forms folded into it, by every op: a trigger, which names ops, cannot steer around it), and
    # those cases, a third of them, tested nothing else. The cases drawn outside still have them, so
    # its fix is noticed.
    shapes = dataclasses.replace(_ScriptedBackend.shapes, min_input_rank=1)
    # Every op, dtype and rank, with no anchor needed: where oneDNN Graph starts fusing more, it shows here.
    outside_features = dataclasses.replace(features, ops=tuple(OPS), dtypes=Features().dtypes, anchors=())
    outside_shapes = _ScriptedBackend.shapes
    kernel_prefix = "LlgaPartition_"
    group_kind = "prim::oneDNNFusionGroup"

    def __init__(self):
        # oneDNN has bf16 kernels only where the CPU has AVX-512 (`_is_mkldnn_bf16_supported`);
        # elsewhere (an AVX2 machine) oneDNN Graph declines every bf16 graph: a quarter of the
        # cases would test nothing. The cases drawn outside keep bf16, so that is still seen.
        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            self.features = dataclasses.replace(self.features, dtypes=("float32",))

    def check_available(self) -> None:
        if not torch.backends.mkldnn.is_available() or not hasattr(torch._C, "_jit_set_llga_enabled"):
            raise Unavailable("this torch build has no oneDNN Graph (LLGA) fuser")

    def flags(self) -> list[tuple[str, bool]]:
        return [("_jit_set_profiling_executor", True), ("_get_graph_executor_optimize", True),
                ("_jit_set_texpr_fuser_enabled", False), ("_jit_override_can_fuse_on_cpu", True),
                ("_jit_override_can_fuse_on_gpu", False), ("_jit_set_llga_enabled", True)]


class TorchScriptNvFuserBackend(_ScriptedBackend):
    """TorchScript's own nvFuser (`prim::CudaFusionGroup`). It was removed in PyTorch 2.2; later
    builds keep `_jit_set_nvfuser_enabled` only as a no-op that warns, so it is unavailable there.
    (The standalone nvFuser package is the `nvfuser` backend.)"""

    name = "torchscript:nvfuser"
    component = "nvfuser"
    display_name = "nvFuser (TorchScript)"
    device = "cuda"
    env = NVFUSER_ENV
    kernel_prefix = "CudaCodeGen::kernel"
    group_kind = "prim::CudaFusionGroup"
    shapes = ShapeConfig()

    def check_available(self) -> None:
        major, minor = (int(p) for p in torch.__version__.split(".")[:2])
        if (major, minor) >= (2, 2):
            raise Unavailable(f"TorchScript nvFuser was removed in PyTorch 2.2; torch {torch.__version__} "
                              "keeps _jit_set_nvfuser_enabled only as a no-op")
        if not torch.cuda.is_available():
            raise Unavailable("TorchScript nvFuser needs CUDA")
        if torch._C._jit_nvfuser_can_be_enabled() is not True:
            raise Unavailable("this torch build cannot enable TorchScript nvFuser")

    def flags(self) -> list[tuple[str, bool]]:
        return [("_jit_set_profiling_executor", True), ("_get_graph_executor_optimize", True),
                ("_jit_set_texpr_fuser_enabled", False), ("_jit_set_llga_enabled", False),
                ("_jit_override_can_fuse_on_gpu", False), ("_jit_set_nvfuser_enabled", True)]

    def _events(self, call) -> tuple[object, list[tuple[str, tuple[str, ...]]]]:
        """nvFuser kernels are CUDA kernels (`CudaCodeGen::kernelN`): only Kineto sees them."""
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            out = call()
            torch.cuda.synchronize()
        return out, [(e.name, _ancestors(e)) for e in prof.events()]


class TorchScriptFrontendBackend(_ScriptedBackend):
    """TorchScript with every fuser off: the profiling executor, its peephole passes and autodiff,
    warmed up as the fusers are. The reference route of the fusers' cases: a failure it shares is a
    frontend bug. It fuses nothing, so it reports no fusion evidence (fused: None)."""

    name = "torchscript:frontend"
    component = "torchscript:frontend"  # no fuser: the frontend is the component
    display_name = "TorchScript (no fuser)"
    reference_route = None

    def __init__(self, device: str | None = None):
        self.device = device or _default_device()

    def check_available(self) -> None:
        pass

    def flags(self) -> list[tuple[str, bool]]:
        return [("_jit_set_profiling_executor", True), ("_get_graph_executor_optimize", True),
                ("_jit_set_texpr_fuser_enabled", False), ("_jit_set_llga_enabled", False),
                ("_jit_override_can_fuse_on_cpu", False), ("_jit_override_can_fuse_on_gpu", False)]

    def _evidence(self, events: list[tuple[str, tuple[str, ...]]], inputs: list | None = None,
                  input_makers: list[str] | None = None) -> Evidence:
        return Evidence(fused=None)
