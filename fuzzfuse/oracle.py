"""Judge a fused run against eager, with float64 as the arbiter, and name every failure by a
signature that is stable across cases: one bug, one signature.

Tolerances follow the prior art: `torch._dynamo.utils.same` (RMSE against an fp64 reference,
compared with eager's own RMSE) and nvFuser's validator (dtype- and reduction-size-scaled bounds).
A fused result is only wrong when it is further from float64 than eager's own rounding explains.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import asdict, dataclass

import torch

from .ir.types import dtype_name
from .tracebacks import cpp_location, error_location, innermost_error, python_location  # noqa: F401 (re-exported)
from .ir.untrusted import record, take


# Relative tolerance per dtype for the quick elementwise check, before fp64 arbitration.
# fp8: two epsilons, as bfloat16's; an absolute tolerance of about its smallest subnormal.
RTOL = {torch.float64: 1e-7, torch.float32: 1.3e-6, torch.float16: 1e-3, torch.bfloat16: 1.6e-2,
        torch.float8_e4m3fn: 0.25, torch.float8_e5m2: 0.5}
ATOL = {torch.float64: 1e-7, torch.float32: 1e-5, torch.float16: 1e-5, torch.bfloat16: 1e-5,
        torch.float8_e4m3fn: 2e-3, torch.float8_e5m2: 2e-5}
# How much further from fp64 than eager a fused result may be (dynamo's `same` uses 2-3).
RMSE_MULTIPLIER = 3.0
# How far from float64 a float value of a fuser that declares Difference.APPROXIMATE_MATH may be:
# exp(29) by ex2.approx of 29 * log2(e) is 1.5e-6 off in float32 (observed on the H200), 12 ulp.
APPROXIMATE_RTOL = 1e-5


@dataclass(frozen=True)
class Signature:
    """outcome|backend|stage|kind|location|message. `kind` is the exception type, the signal, or
    the mismatch kind; `location` the C++ assert location or, for mismatches, the dtype class."""

    outcome: str
    backend: str
    stage: str = ""
    kind: str = ""
    location: str = ""
    message: str = ""

    def key(self) -> str:
        return "|".join((self.outcome, self.backend, self.stage, self.kind, self.location, self.message))

    def slug(self) -> str:
        """A directory name: readable prefix plus a hash of the whole key."""
        words = re.sub(r"[^A-Za-z0-9]+", "-", f"{self.backend}-{self.outcome}-{self.kind}-{self.location}")
        words = words.strip("-").lower()[:60].strip("-")
        return f"{words}-{hashlib.sha1(self.key().encode()).hexdigest()[:8]}"

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> "Signature":
        """Validated: a case file or a summary is untrusted input (a field absent is empty)."""
        d = record(d, "signature", Signature.__dataclass_fields__)
        return Signature(**{k: take(d, k, str, "signature", "") for k in Signature.__dataclass_fields__})


# ---- exception signatures --------------------------------------------------------------------
_NORMALIZERS = [
    (re.compile(r"0x[0-9a-fA-F]+"), "ADDR"),
    (re.compile(r"\bT\d+_[a-z]_\w+(\[[^\]]*\])?"), "T"),  # nvFuser tensor views: T12_l_float[iS4{i3}]
    (re.compile(r"\b[a-zA-Z]{1,3}\d+\{[^}]*\}"), "ID"),  # nvFuser IterDomains: bS103{1 ex i1}, rS2{i0}
    (re.compile(r"%[\w.]+"), "%V"),  # TorchScript values
    (re.compile(r"\b(_?tmp(?:_acc)?)\d+\b"), r"\1N"),  # temporaries of generated code: Triton's _tmp11, C++'s tmp3
    (re.compile(r"\b(?:v|x|s)\d+\b"), "V"),  # fuzzfuse value names
    (re.compile(r"<fuzzfuse:[0-9a-f]+>"), "<graph>"),
    (re.compile(r"/tmp/\S+"), "TMP"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "'S'"),
    (re.compile(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b"), "N"),
    # Shapes and size lists: one bug at different ranks is one signature.
    (re.compile(r"\[N(?:, ?N)*\]"), "[N...]"),
    (re.compile(r"\(N(?:, ?N)+,?\)"), "(N...)"),
    (re.compile(r"\s+"), " "),
]


EMPTY_ERROR = re.compile(r"^[\w.]*(?:Error|Exception):?$")
# The op TorchScript's interpreter marks with "<--- HERE" (the line above the marker).
_FAILED_OP = re.compile(r"^\s*(?:\w+ = )?(?:torch\.ops\.)?((?:aten|prim|torch)[.:]+\w+)\(", re.M)


_NVRTC = "CUDA NVRTC compile error:"
_NVRTC_ERROR = re.compile(r"\)?: error: *(.*)")
# The line nvcc adds under an overload error: "argument types are: (nvf::__half)", "operand types
# are: nvf::__half + nvf::__half".
_NVRTC_TYPES = re.compile(r"^\s*(?:argument|operand) types are: *\(?(.*?)\)?\s*$", re.M)


def nvrtc_error(message: str) -> str:
    """The first compiler error of an NVRTC log, quotes dropped, and for an overload error the
    types it was called with, in brackets (its names are functions and types of the generated
    kernel: fuzzfuse.rootcause folds the function's name out and keeps the types' classes, which
    tell two compile bugs apart); "" for any other message."""
    at = message.find(_NVRTC)
    if at < 0:
        return ""
    log = message[at + len(_NVRTC):]
    m = _NVRTC_ERROR.search(log)
    first = m.group(1) if m else log.strip().split("\n", 1)[0]
    following = _NVRTC_ERROR.search(log, m.end()) if m else None
    types = _NVRTC_TYPES.search(log[m.end():following.start() if following else len(log)]) if m else None
    called = f" [{types.group(1).strip()}]" if types else ""
    return f"{_NVRTC} {first.replace(chr(34), '').strip()}{called}"


_CPP_COMPILE = "C++ compile error"
_CPP_ERROR = re.compile(r"^\S+?:\d+:\d+: error: *(.*)$", re.M)


def cpp_compile_error(message: str) -> str:
    """Inductor's C++ compile error named by the compiler's first error, without its file and
    position or the quotes around names ("C++ compile error: no matching function for call to
    max_propagate_nan(int&, short int&)"): which call or conversion the generated code got wrong
    tells two compile bugs apart; "" for any other message."""
    if _CPP_COMPILE not in message or not (m := _CPP_ERROR.search(message)):
        return ""
    return f"{_CPP_COMPILE}: {re.sub('[‘’]', '', m.group(1)).strip()}"


# Triton's CompilationError: "at LINE:COL:", the kernel's source around it, then the error raised
# while compiling it, alone on the last line ("NameError('block_ptr1 is not defined')").
_TRITON_COMPILE = re.compile(r"CompilationError: at \d+:\d+:")
_TRITON_CAUSE = re.compile(r"^(\w+(?:Error|Exception))\((.*)\)$")


def triton_compile_error(message: str) -> str:
    """Inductor's Triton compile error named by the error its kernel raised ("Triton compile
    error: NameError: block_ptr1 is not defined"): the line and column only say where in one
    kernel, and a log_softmax's and a cumsum's kernels that store through a block pointer they
    never defined are one bug; "" for any other message."""
    if not _TRITON_COMPILE.search(message):
        return ""
    text = message.split("Set TORCHDYNAMO_VERBOSE")[0]
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines or not (m := _TRITON_CAUSE.match(lines[-1])):
        return ""
    return f"Triton compile error: {m.group(1)}: {m.group(2).strip(chr(39) + chr(34))}"


def headline(message: str) -> str:
    """The line of an error message that names the failure (C++ errors put it after a preamble).
    An NVRTC or C++ compile failure is named by its first compiler error. An error with an empty message
    (NNC raises some) is named by the op TorchScript's traceback points at, so that different
    failures keep different signatures."""
    if nvrtc_error(message):
        return nvrtc_error(message)
    if cpp_compile_error(message):
        return cpp_compile_error(message)
    if triton_compile_error(message):
        return triton_compile_error(message)
    lines = [ln.strip() for ln in message.strip().splitlines()
             if ln.strip() and not ln.strip().startswith(("frame #", "Exception raised from"))]
    for keys in (("INTERNAL ASSERT FAILED", "Expected"), ("error:", "Error:")):
        for ln in lines:
            if any(k in ln for k in keys):
                if EMPTY_ERROR.match(ln):
                    at = message[:message.find("<--- HERE")].rstrip().rsplit("\n", 1)[0]
                    op = _FAILED_OP.findall(at)
                    if "<--- HERE" in message and op:
                        return f"{ln} (in {op[-1].replace('::', '.')})"
                    if said := _said_below(message, ln):
                        return f"{ln} {said}"
                return ln
    return lines[0] if lines else ""


def _said_below(message: str, line: str) -> str:
    """The paragraph an exception's message starts on the line below its empty-looking first one
    (sympy's "TypeError: " then "A Boolean argument can only be used in Eq and Ne; ..."), joined
    into one line; "" where nothing but Dynamo's hint follows (a bare assert)."""
    rest = message[message.find(line) + len(line):].lstrip(" \t").removeprefix("\n")
    paragraph = " ".join(rest.split("\n\n", 1)[0].split())
    return "" if paragraph.startswith("Set TORCHDYNAMO_VERBOSE") else paragraph


# What a backend appends to a crash's error text (aot:nvfuser: the failing fusion as a standalone
# script): context, not the error.
FAILING_CONTEXT = "\n\nThe failing "


def normalize(message: str) -> str:
    """The innermost error's headline with names, numbers, paths and sizes folded out."""
    text = re.sub(r"\s*(Exception raised from|at /|Please report).*", "", headline(innermost_error(message)))
    for pattern, repl in _NORMALIZERS:
        text = pattern.sub(repl, text)
    return text.strip()[:160]


def exception_signature(backend: str, stage: str, exc_type: str, message: str, tb: str = "",
                        outcome: str = "crash") -> Signature:
    return Signature(outcome, backend, stage, exc_type, error_location(message, tb), normalize(message))


# ---- comparing outputs -----------------------------------------------------------------------
MISMATCH_KINDS = ("shape", "dtype", "nan-inf", "values", "strides")


@dataclass(frozen=True)
class Mismatch:
    output: int
    kind: str  # one of MISMATCH_KINDS
    detail: str
    dtype_class: str

    def signature(self, backend: str, stage: str = "run") -> Signature:
        """stage "run" for outputs, "backward-run" for the gradients of a backward case."""
        return Signature("mismatch", backend, stage, self.kind, self.dtype_class)


def dtype_class(t: torch.Tensor) -> str:
    if t.dtype == torch.bool:
        return "bool"
    return "float" if t.is_floating_point() else "int"


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return math.sqrt(torch.mean((a - b) ** 2).item()) if a.numel() else 0.0


def reduction_factor(reduced: int) -> float:
    """Rounding error of a K-term reduction grows like sqrt(K) in practice (nvFuser's validator
    scales by the reduction size the same way)."""
    return max(1.0, math.sqrt(max(reduced, 1)))


def compare_output(i: int, fused: torch.Tensor, eager: torch.Tensor, ref64: torch.Tensor,
                   reduced: int = 1, check_strides: bool = False) -> Mismatch | None:
    """None when `fused` is as good as eager; else what is wrong with it."""
    cls = dtype_class(eager)
    if not isinstance(fused, torch.Tensor):
        return Mismatch(i, "dtype", f"got {type(fused).__name__}, expected a tensor", cls)
    if tuple(fused.shape) != tuple(eager.shape):
        return Mismatch(i, "shape", f"{tuple(fused.shape)} != {tuple(eager.shape)}", cls)
    if fused.dtype != eager.dtype:
        return Mismatch(i, "dtype", f"{dtype_name(fused.dtype)} != {dtype_name(eager.dtype)}", cls)
    if check_strides:
        mismatch = _stride_mismatch(i, fused, eager, cls)
        if mismatch:
            return mismatch
    # Compared where eager ran: on a GPU, copying every output to the host would cost the CPU
    # time that the fuser's compiles need.
    fused, eager, ref64 = fused.detach().to(eager.device), eager.detach(), ref64.detach().to(eager.device)
    if cls == "float":
        return _compare_float(i, fused, eager, ref64, reduced, cls)
    return _compare_discrete(i, fused, eager, ref64, cls)


def strides_defined(eager: torch.Tensor) -> bool:
    """Whether eager's output strides are a layout a fuser must reproduce: a dense, non-overlapping
    tensor. An output that is a view with stride-0 (expanded) dims or gaps (a slice of an input)
    is eager aliasing its input, and a fuser may return it materialized; an empty one has no
    element a stride could place."""
    if eager.numel() == 0:
        return False
    expected = 1
    dims = sorted((eager.stride(d), eager.shape[d]) for d in range(eager.dim()) if eager.shape[d] > 1)
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def _stride_mismatch(i: int, fused: torch.Tensor, eager: torch.Tensor, cls: str) -> Mismatch | None:
    """Strides compared where eager's are defined (strides_defined), in dims of size above 1 (the
    stride of a size-1 dim is arbitrary)."""
    if not strides_defined(eager):
        return None
    significant = [d for d in range(eager.dim()) if eager.shape[d] > 1]
    fs, es = [fused.stride(d) for d in significant], [eager.stride(d) for d in significant]
    if fs != es:
        return Mismatch(i, "strides", f"strides {fused.stride()} != {eager.stride()}", cls)
    return None


def _classes(t: torch.Tensor) -> torch.Tensor:
    """0 finite, 1 NaN, 2 +inf, 3 -inf."""
    return torch.isnan(t).to(torch.int8) + 2 * (t == math.inf).to(torch.int8) + 3 * (t == -math.inf).to(torch.int8)


def _compare_float(i: int, fused: torch.Tensor, eager: torch.Tensor, ref64: torch.Tensor, reduced: int,
                   cls: str) -> Mismatch | None:
    f, e, r = fused.double(), eager.double(), ref64.double()
    fc, ec, rc = _classes(f), _classes(e), _classes(r)
    # A NaN/inf disagreement counts only where eager agrees with fp64 (the position is not one where
    # eager's own precision decides) and the fused value agrees with neither.
    bad = (fc != ec) & (ec == rc) & (fc != rc)
    if bad.any():
        idx = tuple(bad.nonzero()[0].tolist())
        return Mismatch(i, "nan-inf", f"{int(bad.sum())} positions, e.g. {idx}: fused {f[idx].item()} "
                        f"eager {e[idx].item()} fp64 {r[idx].item()}", cls)
    finite = (fc == 0) & (ec == 0) & (rc == 0)
    if not finite.any():
        return None
    fv, ev, rv = f[finite], e[finite], r[finite]
    rtol = RTOL[eager.dtype] * reduction_factor(reduced)
    atol = ATOL[eager.dtype] * reduction_factor(reduced)
    if torch.allclose(fv, ev, rtol=rtol, atol=atol):
        return None
    fused_err, eager_err = _rmse(fv, rv), _rmse(ev, rv)
    if fused_err <= RMSE_MULTIPLIER * eager_err + atol:
        return None
    worst = int(torch.argmax((fv - ev).abs()))
    return Mismatch(i, "values", f"rmse vs fp64: fused {fused_err:.3g} eager {eager_err:.3g}; worst element "
                    f"fused {fv[worst].item():.6g} eager {ev[worst].item():.6g} fp64 {rv[worst].item():.6g}", cls)


def _compare_discrete(i: int, fused: torch.Tensor, eager: torch.Tensor, ref64: torch.Tensor,
                      cls: str) -> Mismatch | None:
    """Integers and bools compare exactly, except where eager itself disagrees with the fp64
    arbiter (a float comparison or cast at a rounding boundary) or the fused value equals it."""
    differ = fused != eager
    if not differ.any():
        return None
    ref = ref64.to(eager.dtype) if ref64.dtype != eager.dtype else ref64
    bad = differ & (eager == ref) & (fused != ref)
    if not bad.any():
        return None
    idx = tuple(bad.nonzero()[0].tolist())
    return Mismatch(i, "values", f"{int(bad.sum())} of {bad.numel()} elements differ, e.g. {idx}: fused "
                    f"{fused[idx].item()} eager {eager[idx].item()}", cls)


def signed_zero_difference(fused: torch.Tensor, eager: torch.Tensor, ref64: torch.Tensor) -> str | None:
    """Where an output that passed differs from eager only in the sign of zeros (where eager's
    sign is float64's): what, for the record, else None. Values compare equal, so without this the
    difference would pass unseen (docs/documented-differences.md: counted, not reported)."""
    if not (isinstance(fused, torch.Tensor) and fused.is_floating_point() and fused.shape == eager.shape):
        return None
    # float32 holds every fp8 and 16-bit value with its sign (CUDA has no fp8 signbit).
    fused, eager, ref64 = (t.detach().to(eager.device).float() for t in (fused, eager, ref64))
    zeros = (fused == 0) & (eager == 0)
    flipped = zeros & (torch.signbit(fused) != torch.signbit(eager)) & (torch.signbit(eager) == torch.signbit(ref64))
    if not flipped.any():
        return None
    idx = tuple(flipped.nonzero()[0].tolist())
    return f"{int(flipped.sum())} zeros of the other sign, e.g. {idx}: fused {fused[idx].item()} eager {eager[idx].item()}"


def nearer_references(fused, eager, ref64, flushed_runs: list[tuple]):
    """(eager, float64) references taken per element from the flushed run (`flushed_runs`: (eager,
    float64) pairs, one per way the fuser may flush) whose eager gives the fused value exactly
    (under FTZ/DAZ on CPU), else whose float64 is nearest it, else from the plain run. A fuser that
    flushes by design flushes what some ops read or write and not others (Inductor's Triton
    flushes an elu's denormal result, not a denormal that passes through `where`), so one output
    can hold elements of each kind."""
    runs = [(eager, ref64)] + [(e, r) for e, r in flushed_runs if isinstance(e, torch.Tensor)
                               and isinstance(r, torch.Tensor) and e.shape == eager.shape and r.shape == ref64.shape]
    if not all(isinstance(t, torch.Tensor) for t in (fused, eager, ref64)) or fused.shape != eager.shape \
            or ref64.shape != eager.shape:
        return flushed_runs[0] if flushed_runs else (eager, ref64)
    value = fused.double()
    # What eager gives flushed wins where float64 cannot tell (a bool or integer of a flushed
    # result: eq(0, silu(FLT_MIN)) is True under FTZ, and float64's silu(FLT_MIN) is no denormal);
    # ties go to the first run, the plain one.
    score = torch.stack([torch.where(_distance(value, e.double()) == 0, -1.0, _distance(value, r.double()))
                         for e, r in runs])
    pick = score.argmin(0, keepdim=True)
    chosen = lambda i: torch.stack([run[i].to(runs[0][i].dtype) for run in runs]).gather(0, pick)[0]  # noqa: E731
    return chosen(0), chosen(1)


def nearest_run(fused, runs: list):
    """Per element, the value of the run in `runs` (eager's and other evaluations of the same
    outputs, each of its dtype and shape) nearest the fused value."""
    if not isinstance(fused, torch.Tensor) or any(tuple(r.shape) != tuple(fused.shape) for r in runs):
        return runs[0]
    value = fused.double()
    distances = torch.stack([_distance(value, r.double()) for r in runs])
    return torch.stack(list(runs)).gather(0, distances.argmin(0, keepdim=True))[0]


def _distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a - b|, with equal values (infinities of one sign too) and two NaNs at 0, and a NaN
    against a number at infinity: a flushed operand often turns a number into an infinity (rsqrt
    of a denormal) or a NaN into one (log of a flushed negative denormal), and `inf - inf` or
    `x - nan` would make the run that the fused value matches look no nearer."""
    same = (a == b) | (a.isnan() & b.isnan())
    return torch.where(same, torch.zeros_like(a), (a - b).abs().nan_to_num(nan=math.inf))


def gradient_reduction_sizes(graph, types) -> dict[str, int]:
    """For each requires_grad input, a bound on the terms summed into one element of its gradient:
    the chain rule sums over every output element it reaches (a broadcast's backward is a
    reduction) and every reduction upstream multiplies in."""
    reduced = reduction_sizes(graph, types)
    widest = max([types[n.name].numel() for n in graph.nodes] + [1])
    fold = max([reduced[o] for o in graph.outputs] + [1])
    return {i.name: fold * max(1, widest // max(types[i.name].numel(), 1))
            for i in graph.inputs if getattr(i, "requires_grad", False)}


def reduction_sizes(graph, types) -> dict[str, int]:
    """For each value, the largest number of elements folded into one of its elements by an
    upstream reduction (1 if none): the K that scales rounding-error bounds."""
    from .ir import OPS

    k: dict[str, int] = {i.name: 1 for i in graph.inputs}
    for n in graph.nodes:
        upstream = max([k[a] for a in n.refs()] or [1])
        op = OPS[n.op]
        if op.kind in ("reduction", "normalization", "scan", "matmul"):
            src, out = types[n.args[0]], types[n.name]
            if op.kind == "reduction":
                here = src.numel() // max(out.numel(), 1)
            else:  # a normalization's or scan's dim; a matmul's K
                here = src.shape[n.attrs["dim"]] if op.kind != "matmul" else (src.shape[-1] if src.shape else 1)
            upstream *= max(here, 1)
        k[n.name] = upstream
    return k
