"""The nvFuser backend: graphs run through the standalone `nvfuser_direct` package.

Each graph is emitted as nvfuser_direct source (`nvfuser_emit`), executed in a namespace that
holds only nvfuser_direct names, and run with `fd.execute`. nvFuser compiles inside the first
execute; a failure there is stage "compile" when `fd.fec.is_compiled(inputs)` says no kernel
runtime was completed, else "run". Errors raised while the definition itself is built (nvFuser's
checks run as each op is added) are "compile" too. The nvFuser error text is kept whole in the
cause, so signatures can cite the C++ assert location.

Fusion evidence: each generated kernel is named nvfuser_<scheduler>_f<N>_c<N>_r<N>_g<segment>
(`fd.fec.get_cuda_kernel(inputs)` returns their code), and a segmented fusion's scheduled IR
(`fd.fec.get_most_recent_scheduled_ir()`, about a millisecond) lists every segment with its
scheduler, those that run no kernel (expr_eval: views, squeezes) included. nvFuser's segmenter log
(`NVFUSER_DUMP=segmenter_logging`) would say as much, and more ambiguously (it logs
`***Accepted*** as:` for every candidate group it tries), at a price: with 16 workers on an H200,
60-s campaigns ran 22.4 cases/s with it and 31.2/s without.

fused is True when at least one generated kernel ran. It is None when no kernel ran and the graph
has nothing to fuse (only views and broadcasts, reductions over size-1 dims, or nothing bigger
than one element), False otherwise.
"""
from __future__ import annotations

import copy
import os
import re
import time
from dataclasses import replace
from types import MappingProxyType
from typing import Iterator

import torch

from ..ir import OPS, Graph, TensorInput
from ..ir.ops import reduced_dims
from ..ir.types import DTYPES, INT_DTYPES
from ..strategies import Features, ShapeConfig
from .base import Backend, BackendError, Compiled, Evidence, RunResult, Unavailable, is_cuda_fault, machine_versions
from .nvfuser_dtypes import INT_IDENTITY, NV_DTYPE
from .nvfuser_emit import STYLES, Emission, Unsupported, emit
from .options import DISABLE_CHOICES, Options, checked_disable, execute_switches

_KERNEL = re.compile(r"__global__ void nvfuser_([a-z_]+?)_f\d+_c\d+_r\d+_g(\d+)\(")
# A segmented fusion's dump lists its groups as `  <scheduler>{<expr ids>}`, between "groups:" and "edges:".
_SEGMENT = re.compile(r"^\s+([a-z_]+)\{[\d, ]*\}\s*$", re.M)
# Fusions whose kernels faulted stay referenced until their worker is replaced (a sticky CUDA error
# replaces it): nvFuser's ~CudaExecutable checks cuModuleUnload, which reports the sticky error, and
# aborts the process, so that freeing such a fusion turned its fault into a SIGABRT blamed on no
# message of its own (campaigns saw `hard-crash|SIGABRT` where the cause was a misaligned address).
_FAULTED: list = []
# A matmul that no scheduler takes with matmul_expr_eval off (options.DISABLE_CHOICES says why).
_NO_SCHEDULER = "Can not find a scheduler to schedule fusion segment"


class EmitterError(AssertionError):
    """The emitted fusion returned outputs of another dtype than PyTorch's: a fuzzfuse (emitter)
    defect, never reported as an nvFuser bug. (Wrong shapes and values are nvFuser's: the oracle
    judges those.)"""


def _import_nvfuser():
    import nvfuser_direct  # noqa: F401  (raises ImportError when absent)
    return nvfuser_direct


def segment_schedulers(scheduled_ir: str) -> list[str]:
    """The scheduler of every segment of a segmented fusion, in the order nvFuser lists them, from
    its scheduled IR; [] when the fusion was not segmented."""
    start = scheduled_ir.find("Segmented_Fusion{")
    if start < 0:
        return []
    end = scheduled_ir.find("edges:", start)
    return _SEGMENT.findall(scheduled_ir[start:end if end >= 0 else len(scheduled_ir)])


def fusion_evidence(kernel_code: str, scheduled_ir: str) -> Evidence:
    """The schedulers, one per segment ("expr_eval" for an unsegmented fusion that ran no kernel),
    and the kernels, from the generated kernels' names and the scheduled IR."""
    kernels = {int(g): sched for sched, g in _KERNEL.findall(kernel_code)}
    schedulers = segment_schedulers(scheduled_ir) or [kernels[g] for g in sorted(kernels)] or ["expr_eval"]
    return Evidence(kernels=len(kernels), schedulers=tuple(schedulers), details={"segments": len(schedulers)})


def _ops_of(*kinds: str) -> tuple[str, ...]:
    return tuple(name for name, op in OPS.items() if op.kind in kinds)


def nothing_to_fuse(graph: Graph) -> bool:
    """Only views/broadcasts, identities (same-dtype casts, rounding integers), reductions over
    size-1 dims, and values of at most one element."""
    types = graph.infer_types()
    for n in graph.nodes:
        op = OPS[n.op]
        if op.kind in ("view", "broadcast") or types[n.name].numel() <= 1:
            continue
        first = types[n.args[0]] if isinstance(n.args[0], str) else None
        if first is not None and first.dtype == types[n.name].dtype and (
                op.kind == "cast" or (n.op in INT_IDENTITY and first.dtype in INT_DTYPES)):
            continue  # emitted as a `set`: nvFuser aliases it, no kernel needed
        if op.kind == "reduction":
            shape = types[n.args[0]].shape
            dims = reduced_dims(n.attrs, len(shape))
            if all(shape[d] == 1 for d in dims):
                continue
        return False
    return True


def _aten_alone(graph: Graph, evidence: Evidence) -> bool:
    """One op (views aside) that nvFuser's expr_eval scheduler ran through ATen: it does so by
    design for a lone matmul, linear, bmm, gather, scatter, cumsum or slice, so nothing was left to
    fuse (with other ops beside it, ATen taking all of them is reported as unfused)."""
    computing = [n for n in graph.nodes if OPS[n.op].kind not in ("view", "broadcast")]
    return len(computing) <= 1 and set(evidence.schedulers) <= {"expr_eval", "no_op"}


class NvFuserBackend(Backend):
    name = "nvfuser"
    component = "nvfuser"
    display_name = "nvFuser"
    device = "cuda"
    # Campaigns run one worker per core, so each compiles single-threaded: nvFuser's default pool
    # of 8 compile threads per process would oversubscribe the cores 8-fold.
    # fuse_matmul: nvFuser hands a lone matmul/linear to ATen (expr_eval) and fuses one with its
    # prologue and epilogue only with this option (csrc/scheduler/matmul_utils.cpp); without it the
    # matmul scheduler is never reached. parallel_compile off: a fusion of several segments
    # compiles them one by one, so an error is raised as itself, not wrapped in the thread pool's
    # RuntimeError (scatter -> scatter raised IndexError "unordered_map::at" alone, and a
    # RuntimeError with any op before it that made a second segment, which the reducer then had to
    # keep: softmax -> scatter -> scatter was reported new beside the committed scatter -> scatter).
    # The judging repros set both too (`repro_environment`); the short one keeps the default.
    env = {"NVFUSER_NUM_THREADS": os.environ.get("NVFUSER_NUM_THREADS", "1"),
           "NVFUSER_ENABLE": os.environ.get("NVFUSER_ENABLE", "fuse_matmul"),
           "NVFUSER_DISABLE": os.environ.get("NVFUSER_DISABLE", "parallel_compile")}
    # What a repro must set for nvFuser to take the paths a case took (the thread count is speed).
    repro_variables = ("NVFUSER_ENABLE", "NVFUSER_DISABLE")
    # Campaigns draw one per case (recorded in the case's options).
    styles = STYLES
    option_fields: tuple[str, ...] = ("style", "disable")
    # The dtypes nvfuser_direct defines tensors of: fp8 too, no 8/16-bit integers (nvfuser_dtypes).
    features = Features(dtypes=tuple(d for d in DTYPES if d in NV_DTYPE), device="cuda")
    reference_route: str | None = None  # fuzzfuse.attribution: nothing beneath it to blame
    # clamp(min=) is emitted as ops.maximum, and minimum's runtime helper is maximum's with the
    # comparison turned round (runtime/helpers.cu: fmin and fmax resolve a tie of +0.0 and -0.0
    # by their operands' order): a wrong value of either is maximum's bug.
    computes_from = MappingProxyType({"clamp_min": "maximum", "minimum": "maximum"})
    # A FusionDefinition executes again for microseconds, on new sizes too (NvFuserCompiled).
    reuses_compiled = True
    reruns_new_sizes = True
    reruns_new_strides = True
    # Sizes that cross nvFuser's vectorization (inner dims not multiples of 2/4/8: 7, 127, 129,
    # 1025), block (>1024) and persistence limits (an inner reduction of 65539 fp32 values does
    # not fit registers or shared memory), mixed with the generator's small dims (1 = broadcast).
    shapes = ShapeConfig(max_rank=4, max_dim=8, large_dims=(127, 129, 255, 1023, 1025, 2049, 4099, 65539),
                         large_prob=0.1, max_numel=1 << 24)

    # The generator features that lead nvFuser to each scheduler: campaigns steer every other batch
    # toward the least-covered one (views alone give expr_eval; the rest mostly give pointwise).
    # Small op lists, so that the ops that matter are drawn often.
    coverage_focus = {
        "reduction": {"ops": _ops_of("reduction") + ("add", "mul", "exp", "abs", "neg", "cast"), "patterns": ()},
        "inner_persistent": {"ops": _ops_of("normalization") + ("sum", "amax", "mean", "var", "sub", "mul", "exp",
                                                                "div", "rsqrt", "add", "unsqueeze", "expand"),
                             "patterns": ("layer_norm",)},
        "outer_persistent": {"ops": ("sum", "mean", "var", "amax", "sub", "mul", "add", "rsqrt", "sigmoid",
                                     "unsqueeze", "expand"),
                             "patterns": ("batch_norm", "squeeze_excite"),
                             "layouts": ("contiguous", "channels_last", "channels_last_3d")},
        # Layer norm's backward: reductions over the normalized dim and over all the others, of the
        # same tensors, with rows long enough to keep in registers (dims above 1024 included).
        "inner_outer_persistent": {"ops": ("add", "cast"), "patterns": ("layer_norm_backward",),
                                   "dtypes": ("float32", "float16", "bfloat16"), "layouts": ("contiguous",),
                                   "shapes": {"min_rank": 2, "large_dims": (256, 1000, 1024, 2048, 4096),
                                              "large_prob": 0.6}},
        # The transpose scheduler wants two groups of large tensors with different innermost dims
        # (a 4-minute campaign steered here with small shapes reached it in 112 of 6,533 cases).
        "transpose": {"ops": ("permute", "transpose", "add", "mul", "sigmoid", "neg", "cast", "where"),
                      "patterns": (), "layouts": ("permuted", "channels_last", "channels_last_3d"),
                      "shapes": {"large_dims": (32, 33, 64, 127, 129, 255, 1025), "large_prob": 0.6}},
        # Slices, pads and cats among pointwise ops (a resize op alone is a view or expr_eval).
        "resize": {"ops": _ops_of("resize") + ("add", "mul", "exp", "neg", "cast", "sigmoid"), "patterns": ()},
        # The matmul scheduler (with matmul_expr_eval off: half the cases) takes fp16/bf16
        # matrix-matrix products of fusion inputs with a pointwise epilogue: a dense layer's tail
        # (strategies' matmul_epilogue pattern), grown by unary ops (a binary one would often take
        # a value another segment computes: the known runtime_info.h:69 again).
        "matmul": {"ops": ("relu", "cast", "tanh", "sigmoid"), "patterns": ("matmul_epilogue",),
                   "dtypes": ("float16", "bfloat16"), "layouts": ("contiguous",)},
    }

    # The nvFuser switches campaigns turn off per case, half the time (`DISABLE_CHOICES`).
    disable_choices: tuple[str, ...] = DISABLE_CHOICES

    def __init__(self, style: str | None = None, static_sizes: bool = False, disable: tuple[str, ...] = ()):
        style = style or os.environ.get("FUZZFUSE_NVFUSER_STYLE", "direct")
        if style not in STYLES:
            raise ValueError(f"unknown nvFuser emission style {style!r}; one of {STYLES}")
        self.style = style
        self.static_sizes = static_sizes
        self.disable = checked_disable(disable)
        self._nvf = None

    # ---- per-case choices ---------------------------------------------------------------------
    def draw_options(self, seed: int) -> Options:
        options = super().draw_options(seed)
        if self.disable_choices and (seed // len(self.styles)) % 2:
            options = replace(options, disable=tuple(self.disable_choices))
        return options

    def focus_options(self, focus: str, options: Options) -> Options:
        """Batches aimed at the matmul scheduler turn matmul_expr_eval off in every case: with it
        on, ATen takes every matmul segment first."""
        return replace(options, disable=tuple(self.disable_choices)) if focus == "matmul" else options

    def describe_options(self, options: Options) -> list[str]:
        return super().describe_options(options) + [f"disable={name}" for name in options.disable or ()]

    def simpler_options(self, options: Options) -> Iterator[Options]:
        if options.disable:
            yield replace(options, disable=None)

    def for_case(self, options: Options) -> "NvFuserBackend":
        case = copy.copy(self)  # Options checked the style and the switches against STYLES, DISABLE_CHOICES
        case.style = options.style or self.style
        case.disable = options.disable or ()
        return case

    # ---- Backend protocol ---------------------------------------------------------------------
    def check_available(self) -> None:
        try:
            self._nvf = _import_nvfuser()
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise Unavailable(f"nvfuser_direct is not importable ({type(e).__name__}: {first[:200]})") from e
        if not torch.cuda.is_available():
            raise Unavailable(f"no CUDA device (torch {torch.__version__}, CUDA build {torch.version.cuda})")

    def versions(self) -> dict[str, str]:
        out = {"torch": torch.__version__, **machine_versions("cuda")}
        try:
            nvf = self._nvf or _import_nvfuser()
            out["nvfuser_direct"] = str(getattr(nvf, "__version__", "unknown"))
        except Exception as e:
            out["nvfuser_direct"] = f"unavailable: {type(e).__name__}"
        return out

    def emit(self, graph: Graph, inputs: list | None = None, style: str | None = None) -> Emission:
        """The source this backend runs for `graph` (strides taken from `inputs` when given)."""
        strides = None
        if inputs is not None:
            strides = [tuple(t.stride()) for t, spec in zip(inputs, graph.inputs) if isinstance(spec, TensorInput)]
        return emit(graph, style or self.style, strides, self.static_sizes)

    def define(self, source: str, graph: Graph | None = None):
        """Build the FusionDefinition by running the emitted source (nvfuser_direct names only)."""
        nvf = self._nvf or _import_nvfuser()
        namespace = {"FusionDefinition": nvf.FusionDefinition, "DataType": nvf.DataType}
        tag = graph.digest() if graph is not None else "source"
        exec(compile(source, f"<fuzzfuse:{tag}>", "exec"), namespace)
        with nvf.FusionDefinition() as fd:
            namespace["nvfuser_fusion"](fd)
        return fd

    def compile(self, graph: Graph, options: Options = Options()) -> "NvFuserCompiled":
        return NvFuserCompiled(self, graph, options)

    def run(self, graph: Graph, inputs: list, *, style: str | None = None,
            disable: tuple[str, ...] | None = None) -> RunResult:
        return self.compile(graph, Options(style=style, disable=disable)).run(inputs)

    def define_and_run(self, graph: Graph, inputs: list, *, style: str | None = None,
                       disable: tuple[str, ...] | None = None):
        """The first run of a graph: its RunResult, the FusionDefinition, and the emitted source."""
        style = style or self.style
        disable = self.disable if disable is None else checked_disable(disable)
        emission = self.emit(graph, inputs, style)  # Unsupported propagates: not a crash
        start = time.perf_counter()
        try:
            fd = self.define(emission.source, graph)
        except Exception as e:
            raise BackendError("compile", e) from e
        args = list(inputs)
        try:
            outputs = execute(fd, args, disable)
        except Exception as e:
            if disable and _NO_SCHEDULER in str(e):
                raise Unsupported(f"no scheduler takes a segment with {', '.join(disable)} off") from e
            raise fusion_failure(_stage(fd, args, e), e, fd) from e
        compile_seconds = time.perf_counter() - start
        evidence, fused = first_run_evidence(fd, graph, args, outputs)
        evidence.details["style"] = style
        if disable:
            evidence.details["disable"] = list(disable)
        if emission.notes:
            evidence.details["notes"] = emission.notes
        return RunResult(list(outputs), fused, evidence, compile_seconds), fd, emission.source

    def repro_environment(self) -> list[str]:
        """The lines a standalone repro begins with, before nvFuser reads its options."""
        return ["import os"] + [f"os.environ.setdefault({k!r}, {self.env[k]!r})" for k in self.repro_variables]

    def repro_code(self, graph: Graph) -> str:
        """`run_fused(inputs) -> (outputs, fused)` for a standalone repro: the nvfuser_direct
        definition this backend runs, in the backend's current style."""
        source = self.emit(graph).source
        disable = "".join(f", {k}={v!r}" for k, v in execute_switches(self.disable).items())
        environment = "\n".join(f"{line}  # noqa: E402" for line in self.repro_environment())
        return f'''
{environment}
from nvfuser_direct import FusionDefinition, DataType  # noqa: E402


{source}

def run_fused(inputs):
    """nvFuser through nvfuser_direct ({self.style} style): define, then execute (which compiles)."""
    with FusionDefinition() as fd:
        nvfuser_fusion(fd)
    outputs = fd.execute(list(inputs){disable})
    torch.cuda.synchronize()  # a kernel's fault (misaligned address...) is raised here, by its fusion
    return outputs, True
'''


class NvFuserCompiled(Compiled):
    """One FusionDefinition, executed again on each input set: nvFuser caches its kernels per
    input shape class (~13 us an execute), and its tensors have symbolic sizes, so a graph whose
    emitted source is the same (same contiguity and stride order, sizes not baked in) runs on new
    sizes of the same rank too."""
    def __init__(self, backend: NvFuserBackend, graph: Graph, options: Options):
        super().__init__(backend, graph, options)
        self._fd, self._source, self._fused = None, "", None

    def run(self, inputs: list, grad_outputs: list | None = None) -> RunResult:
        if self._fd is None:
            result, self._fd, self._source = self.backend.define_and_run(self.graph, inputs, style=self.options.style,
                                                                         disable=self.options.disable)
            self._fused = result.fused
            return result
        args = list(inputs)
        try:
            outputs = execute(self._fd, args, self.options.disable or self.backend.disable)
        except Exception as e:
            raise fusion_failure(_stage(self._fd, args, e), e, self._fd) from e
        return RunResult(list(outputs), self._fused, {"rerun": True})

    def accepts(self, graph: Graph, inputs: list) -> bool:
        if self._fd is None:
            return False
        return definition_code(self.backend.emit(graph, inputs, self.options.style).source) \
            == definition_code(self._source)


def definition_code(source: str) -> str:
    """The emitted definition without its comments (they name the graph's digest): what decides
    whether one FusionDefinition serves another graph."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))


def _stage(fd, args: list, error: BaseException) -> str:
    """compile: definition, segmentation, scheduling, lowering, NVRTC; run: after a complete kernel
    runtime exists (launch, execution, output allocation)."""
    try:
        compiled = bool(fd.fec.is_compiled(args))
    except Exception:
        compiled = False
    if compiled or is_cuda_fault(error):
        return "run"
    return "compile"


def execute(fd, args: list, disable: tuple[str, ...] = ()) -> list:
    """fd.execute, synchronized: a kernel's fault is raised here, by the fusion that caused it, and
    not by whatever touches the GPU next (kernels run asynchronously)."""
    outputs = fd.execute(args, **execute_switches(disable))
    if any(isinstance(o, torch.Tensor) and o.is_cuda for o in outputs):
        torch.cuda.synchronize()
    return outputs


def fusion_failure(stage: str, cause: BaseException, fd=None, context: str = "") -> BackendError:
    """The BackendError for a failed fusion; sticky on a CUDA error (the context may be unusable
    now, so the worker must be replaced, and `fd` must never be freed before: see _FAULTED)."""
    err = BackendError(stage, cause, context=context)
    if err.sticky and fd is not None:
        _FAULTED.append(fd)
    return err


def first_run_evidence(fd, graph: Graph, args: list, outputs: list) -> tuple[Evidence, bool | None]:
    """After a fusion's first execute: the emitter's output dtypes checked, the segments and
    schedulers that ran, and whether fused code ran (see the module docstring)."""
    _check_dtypes(graph, outputs)
    try:
        code = fd.fec.get_cuda_kernel(args)
    except Exception:  # no kernel at all (expr_eval only)
        code = ""
    try:
        scheduled_ir = fd.fec.get_most_recent_scheduled_ir() or ""
    except Exception:  # nothing scheduled: evidence from the kernels alone
        scheduled_ir = ""
    evidence = fusion_evidence(code, scheduled_ir)
    evidence.fused = True if evidence.kernels else (None if nothing_to_fuse(graph) or _aten_alone(graph, evidence)
                                                    else False)
    return evidence, evidence.fused


def _check_dtypes(graph: Graph, outputs: list) -> None:
    """Output dtypes are the emitter's responsibility (it casts to PyTorch's); shapes and values
    are nvFuser's, judged by the oracle."""
    types = graph.infer_types()
    if len(outputs) != len(graph.outputs):
        raise EmitterError(f"{len(outputs)} outputs for {len(graph.outputs)} graph outputs")
    for name, out in zip(graph.outputs, outputs):
        want = types[name].dtype
        if out.dtype != DTYPES[want]:
            raise EmitterError(f"output {name}: nvFuser gave {out.dtype}, PyTorch gives {want}: the emitter's "
                               f"dtype model is wrong here")


__all__ = ["DISABLE_CHOICES", "checked_disable", "NvFuserBackend", "NvFuserCompiled", "definition_code", "EmitterError", "Unsupported", "fusion_evidence",
           "segment_schedulers", "execute", "fusion_failure", "first_run_evidence", "nothing_to_fuse"]
