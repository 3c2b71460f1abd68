"""The Backend base class, and what a backend returns and raises (RunResult, BackendError...).

A backend turns a Graph plus concrete inputs into outputs under one fuser, with that fuser's
fallback disabled, and reports evidence that fused code really ran. It raises `BackendError` with the
stage ("compile" or "run") so that signatures can tell a codegen crash from a runtime one, and
`Unsupported` (backends/findings.py's, re-exported here) for a graph it cannot express.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterator

import torch

from ..hostcpu import host_isa
from ..ir import Graph
from ..strategies import Features, ShapeConfig
from .findings import Difference, Evidence, FlushStyle, Stage, Unsupported
from .options import Options


# What a CUDA kernel fault says, whichever library reports it: the process's CUDA context is left
# unusable, so every later case in it would fail in eager (an Inductor campaign's one poisoned
# worker once turned thousands of cases "invalid").
CUDA_FAULT = re.compile(r"CUDA error|CUDA driver error|illegal memory access|misaligned address|"
                        r"unspecified launch failure|cudaErrorLaunch|CUDA_ERROR_|device-side assert")


def is_cuda_fault(error: BaseException) -> bool:
    return bool(CUDA_FAULT.search(str(error)))


# What the CUDA caching allocator and the driver say when the device is full.
_OUT_OF_MEMORY = re.compile(r"CUDA out of memory|CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY")
_REQUEST = re.compile(r"Tried to allocate ([\d.]+) ([KMGT]i?B).*?total capacity of ([\d.]+) ([KMGT]i?B)", re.S)
_UNITS = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}


def machine_out_of_memory(error: BaseException) -> bool:
    """The device ran out of memory for a request it could hold: the workers sharing it (or one that
    keeps a large cache) filled it, which says nothing about the fuser. A request larger than the
    whole device is not the machine's limit but a size the fuser computed: that stays a crash."""
    text = str(error)
    if not _OUT_OF_MEMORY.search(text):
        return False
    sizes = _REQUEST.search(text)
    if sizes is None:
        return True
    asked, capacity = (float(n) * _UNITS[u[0]] for n, u in (sizes.group(1, 2), sizes.group(3, 4)))
    return asked <= capacity


# NVRTC could not find a header the generated kernel includes. nvFuser's scan, argsort and topk
# kernels include CUB's headers, searched for in /usr/local/cuda/include(/cccl), which it adds "as
# a temporary measure" (csrc/runtime/compiled_kernel.cpp); NVRTC drops a directory that does not
# exist and then reports an empty search list.
_MISSING_HEADER = re.compile(r'NVRTC compile error: [^\n]*could not open source file "([^"]+)"')


def machine_lacks_header(error: BaseException) -> str:
    """The header a fuser's kernel includes and this machine lacks (the CUDA toolkit's headers are
    not where the fuser looks): the machine's limit, not the fuser's bug; "" where none."""
    m = _MISSING_HEADER.search(str(error))
    return m.group(1) if m else ""


class BackendError(Exception):
    """A fuser failed at `stage`; `cause` is the original exception. sticky: the process is left
    unusable (a CUDA error poisons the context), so its worker must be replaced; a cause that is a
    CUDA fault is always sticky, whichever backend raised it. context: appended to the case's
    detail, never to the signature (e.g. the failing fusion's script)."""

    def __init__(self, stage: Stage | str, cause: BaseException, *, sticky: bool = False, context: str = ""):
        super().__init__(f"{stage}: {type(cause).__name__}: {cause}")
        self.stage = Stage(stage)
        self.cause = cause
        self.sticky = sticky or is_cuda_fault(cause)
        self.context = context


class Unavailable(Exception):
    """The backend cannot run here; the message says why (one line, shown to users)."""


@dataclass
class RunResult:
    outputs: list[torch.Tensor]
    # Did fused code run? None when the backend cannot tell (eager).
    fused: bool | None = None
    # What the evidence was: kernels, schedulers, and the backend's own record.
    evidence: Evidence = field(default_factory=Evidence)
    compile_seconds: float = 0.0
    # Backward cases only: the gradient of each requires_grad input (in input order), and whether
    # the backward ran fused code (evidence.backward says why).
    grads: list[torch.Tensor] | None = None
    backward_fused: bool | None = None
    # Appended to a mismatch's detail, as BackendError.context is to a crash's: what an upstream
    # report needs beside the numbers (aot:nvfuser: the fusions that ran, as standalone scripts).
    context: str = ""


class Compiled:
    """A graph compiled once, to run on many input sets (`Backend.compile`).

    `run(inputs)` the first time compiles and runs, as `Backend.run` does (compile seconds and
    fusion evidence in its RunResult); each later call runs the same compiled code on other
    inputs of the same graph. This default compiles again on every call: the form for a backend
    that cannot reuse what it compiled (`Backend.reuses_compiled` False)."""

    def __init__(self, backend: "Backend", graph: Graph, options: Options = Options()):
        self.backend, self.graph, self.options = backend, graph, options

    def run(self, inputs: list, grad_outputs: list | None = None) -> RunResult:
        keywords = self.options.keywords(self.backend.option_fields)
        if grad_outputs is not None:
            return self.backend.run(self.graph, inputs, grad_outputs=grad_outputs, **keywords)
        return self.backend.run(self.graph, inputs, **keywords)

    def accepts(self, graph: Graph, inputs: list) -> bool:
        """Whether this compiled code may run `graph` (the compiled graph with other input sizes,
        `Backend.reruns_new_sizes`): only a backend that knows what its code depends on says yes."""
        return False


class Backend:
    """A fuser behind one public name. A backend declares what it can do as class attributes;
    callers read them, they never probe for methods or arguments. Subclasses set `name` and
    implement `run`; everything else has a default that suits a CPU backend without options."""

    name: str = ""
    # The fuser this route reaches: routes to one fuser are one component, so that one assert
    # reached through aot_autograd is one bug (fuzzfuse.rootcause, fuzzfuse.identity). "": the
    # backend's own name.
    component: str = ""
    # What reports and repro headers call it ("NNC", "oneDNN Graph (aot_autograd)"); "": its name.
    display_name: str = ""
    device: str = "cpu"
    # How the fuser flushes fp32 denormals on each device, where it declares Difference.DENORMAL_FLUSH
    # (`documented_differences`): what its flushed reference does (fuzzfuse.job.flushed_references).
    # A device not listed: FlushStyle.NONE.
    flush_style: Mapping[str, FlushStyle] = MappingProxyType({})
    # Shape policy for cases generated for this backend.
    shapes: ShapeConfig = ShapeConfig()
    # The ops/dtypes/layouts worth generating for this fuser (default: all).
    features: Features = Features()
    # What the fuser takes but is not declared to fuse, where `features` (and `shapes`) narrow what
    # it is given to the space it fuses: campaigns draw a share of their cases from here (campaign.
    # OUTSIDE_SHARE; summary.json's outside_fused_share), so that a fuser that starts fusing more,
    # or a silent fallback there, is still seen. None: `features` already is all it takes.
    outside_features: Features | None = None
    outside_shapes: ShapeConfig | None = None  # None: `shapes`
    # Variables the worker needs before it imports torch (libtorch reads some once).
    env: Mapping[str, str] = MappingProxyType({})
    # Whether `run` takes grad_outputs (training cases); without it they are reported unsupported.
    supports_backward: bool = False
    # The devices on which its code runs an elementwise loop vectorized, with a scalar tail for the
    # elements left over: a wrong value of its vector code shows on a long tensor, not on a few
    # elements (fuzzfuse.reduce.generalise asks a culprit on both).
    vector_loops_on: frozenset[str] = frozenset()
    # Per-case lowering choices a campaign draws among (nvFuser's "direct"/"upcast"); `run` takes
    # the chosen one as its `style` keyword.
    styles: tuple[str, ...] = ()
    # The fields of a case's Options (backends/options.py) that `run` takes as keywords: the
    # default `Compiled` passes those the case sets, and no others (an Inductor case replayed on
    # another backend runs there without Inductor's configuration).
    option_fields: tuple[str, ...] = ()
    # scheduler -> a generation recipe (Features fields, ShapeConfig fields under "shapes") that
    # reaches it: campaigns aim batches at the least-covered scheduler (see Campaign.focus_for).
    coverage_focus: Mapping[str, dict] = MappingProxyType({})
    # The built-in backend that runs the same frontend without this fuser (fuzzfuse.attribution):
    # failures it shares are not this fuser's.
    reference_route: str | None = None
    # Whether `compile(graph)` returns code that runs again on new input values without compiling
    # again: the worker then judges each compiled graph on extra input sets, as many as the
    # compile/run cost ratio it measures pays for (fuzzfuse.job).
    reuses_compiled: bool = False
    # Whether that code also runs on new sizes of the same rank (symbolic sizes, as nvFuser's
    # definitions have); `Compiled.accepts` decides per graph.
    reruns_new_sizes: bool = False
    # Whether it also runs on inputs of other strides of the same memory order and dense dims (a
    # slice of another step: values.restrided_layout); `Compiled.accepts` decides per input set.
    reruns_new_strides: bool = False
    # Whether the fuser promises eager's output strides (torch.compile does): campaigns then check
    # strides by default, where eager's own layout is not arbitrary (oracle.strides_defined).
    promises_strides: bool = False
    # Ops this fuser computes from another op of the registry, beyond those every fuser does
    # (ir.Op.computed_from): where such an op comes out wrong, its bug is the other op's, and a
    # bug's identity (fuzzfuse.identity) names that op. Inductor's elu is its decomposition
    # through expm1; NNC computes elu from exp, so there an elu is its own.
    computes_from: Mapping[str, str] = MappingProxyType({})
    # The same, by device, for an op computed from another on one device only (Inductor's Triton
    # relu is ops.maximum(0, x); its C++ relu is std::max or at::vec::clamp_min).
    computes_from_on: Mapping[str, Mapping[str, str]] = MappingProxyType({})
    # Ops whose code this fuser emits, by device, as a call of eager's own kernel (Inductor's C++
    # `a.fmod(b)` is ATen's at::vec::Vectorized::fmod, the loop eager's fmod vectorizes with): a
    # wrong value of one there is eager's bug, the one eager shows where its vectorized loop runs
    # (fuzzfuse.job's scalar arbiter), and its identity names eager (fuzzfuse.identity).
    eager_kernels: Mapping[str, frozenset[str]] = MappingProxyType({})
    # The backends that run this fuser's own lowering on each device, by device (Inductor's C++ and
    # Triton code share one lowering): a reduced wrong value that fails alike on another device is
    # that lowering's bug, one bug on both (fuzzfuse.minimize.devices_failing_alike).
    device_routes: Mapping[str, str] = MappingProxyType({})
    # Ops whose code each device writes for itself, not the shared lowering (Inductor's maximum is
    # Triton's triton_helpers.maximum and C++'s at::vec::maximum): a wrong value of one that fails
    # alike on two devices is two bugs, one per device, as upstream fixes them one at a time.
    per_device_code: frozenset[str] = frozenset()
    # Pairs of ops this fuser rewrites as one pattern, by the pattern's name: (the first ops, the
    # ops that read them). A wrong value that needs such a pair, neither op wrong on eager's
    # operands, is the pattern's bug, whichever of its ops the graph holds (Inductor's scaled
    # softmax rewrite of softmax(x * c) and softmax(x / c)); named by its first op, it took any
    # other bug of that op.
    rewrites_pairs: Mapping[str, tuple[frozenset[str], frozenset[str]]] = MappingProxyType({})
    # Whether the fuser types a unary op's result on an integer or bool value as that dtype where
    # it converts a float scalar the result meets (NNC's sqrt of a bool, then lt(.., 1e-05): the
    # scalar becomes 0): fuzzfuse.explain's scalar-conversion rule then reaches through unary ops.
    # Elsewhere it must not: Inductor's log10 of a bool is float32, and a div_floor of it by 0.5
    # that the rule "explained" (0.5 truncated to 0) was its own div_floor bug, reported new.
    unary_keeps_integral_dtype: bool = False

    def options_without_flush(self, options: Options) -> Options | None:
        """`options` with the fuser's documented flush of denormals turned off, where a setting of
        the fuser's own turns it off (Inductor's flags); None where none does. A wrong value that
        the fuser itself no longer computes so is the flush's (fuzzfuse.job)."""
        return None

    def check_available(self) -> None:
        """Raise Unavailable(reason) when this backend cannot run in this process."""

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        """Compile and run the graph; raise BackendError on a fuser failure, Unsupported for a graph
        the fuser cannot express. With grad_outputs (supports_backward: one upstream gradient per
        output, None where an output is not differentiable), also backpropagate them to the graph's
        requires_grad inputs through the fuser (stages "backward-compile", "backward-run") and
        return RunResult.grads."""
        raise NotImplementedError(f"{type(self).__name__}.run")

    def compile(self, graph: Graph, options: Options = Options()) -> Compiled:
        """The graph compiled once under a case's choices; compiling may be deferred to the first
        `Compiled.run`, which raises BackendError as `run` does."""
        return Compiled(self, graph, options)

    def versions(self) -> dict[str, str]:
        """Versions that a bug report needs (torch, the fuser package...) and the machine's (CPU
        capability, or GPU and driver)."""
        return {"torch": torch.__version__, **machine_versions(self.device)}

    def repro_code(self, graph: Graph) -> str:
        """Source of `run_fused(inputs) -> (outputs, fused)` for a standalone repro that imports
        torch only (and the fuser's package); `fn` is defined there as the graph's function. For a
        backward case (graph.requires_grad): `run_fused(inputs, grad_outputs) -> (outputs, grads,
        fused)`, with the repro's `leaves(inputs)` and `gradients(outputs, leaves, grad_outputs)`.
        By default, through fuzzfuse itself (`generic_repro_code`)."""
        return generic_repro_code(self.name, graph)

    def draw_options(self, seed: int) -> Options:
        """The per-case choices a campaign records in a case and `compile` takes, drawn from the
        case's seed: one of `styles` (nvFuser's lowering), if any."""
        return Options(style=self.styles[seed % len(self.styles)]) if self.styles else Options()

    def focus_options(self, focus: str, options: Options) -> Options:
        """A case's choices in a batch aimed at scheduler `focus` (`coverage_focus`): those drawn,
        or what that scheduler needs to be reached at all."""
        return options

    def describe_options(self, options: Options) -> list[str]:
        """The per-case choices of `options` by name, for the campaign's counts of what it drew."""
        return [f"style={options.style}"] if options.style is not None else []

    def simpler_options(self, options: Options) -> Iterator[Options]:
        """Per-case choices one step closer to the backend's defaults, for the reducer to try
        (fuzzfuse.reduce.options); none by default."""
        return iter(())

    def documented_differences(self, options: Options) -> frozenset[Difference]:
        """The semantics this fuser changes by design under the case's choices
        (docs/documented-differences.md): a difference explained by one is counted as documented,
        not reported. None by default."""
        return frozenset()

    def for_case(self, options: Options) -> "Backend":
        """This backend set to a case's per-case choices, for what takes no options (its
        `repro_code`); itself by default."""
        return self

    def repro_prelude(self) -> str:
        """Source the repro runs before anything else (the fuser's switches); none by default."""
        return ""


def machine_versions(device: str) -> dict[str, str]:
    """What a bug may depend on besides the packages: on CPU, the capability ATen dispatches to and
    Inductor generates C++ for (ATEN_CPU_CAPABILITY; a repro pins it) and the host's own ISA (which
    nothing pins), on a GPU its name, driver and CUDA."""
    if device == "cpu":
        isa = host_isa()  # what ATEN_CPU_CAPABILITY does not pin (fuzzfuse.hostcpu)
        return {"cpu_capability": torch.backends.cpu.get_cpu_capability().lower(), **({"host_isa": isa} if isa else {})}
    out = {"cuda": str(torch.version.cuda)}
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
        out["driver"] = _nvidia_driver()
    return out


def _nvidia_driver() -> str:
    """The NVIDIA driver's version as nvidia-smi reports it (torch exposes only the CUDA API level)."""
    import subprocess
    try:
        run = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return run.stdout.splitlines()[0].strip() if run.returncode == 0 and run.stdout.strip() else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def generic_repro_code(name: str, graph: Graph, **keywords) -> str:
    """run_fused through fuzzfuse itself: for backends that are not a public fuser (eager, custom).
    `keywords` are the backend's per-case choices (aot:nvfuser's emission style), passed to its run
    as the case ran: without them the script runs another lowering than the one that failed."""
    options = "".join(f", {k}={v!r}" for k, v in keywords.items())
    return f'''
def run_fused(inputs, grad_outputs=None):
    """{name}, run through fuzzfuse (no standalone form). What the backend says beside its result
    (aot:nvfuser: the fusions it ran, as nvfuser_direct scripts) is printed; the fuser's own
    exception is raised, not fuzzfuse's BackendError around it, as the campaign names it."""
    import json
    from fuzzfuse.backends import get_backend
    from fuzzfuse.backends.base import BackendError
    from fuzzfuse.ir import Graph
    graph = Graph.from_json(json.loads({json.dumps(graph.to_json())!r}))
    backward = {{"grad_outputs": grad_outputs}} if graph.requires_grad else {{}}
    try:
        result = get_backend({name!r}).run(graph, inputs{options}, **backward)
    except BackendError as e:
        if e.context.strip():
            print(e.context.strip())
        raise e.cause from None
    if result.context.strip():
        print(result.context.strip())
    if graph.requires_grad:
        return result.outputs, result.grads, result.fused is not False and result.backward_fused is not False
    return result.outputs, result.fused is not False
'''
