"""What a backend says of a run besides its outputs: the `Stage` that failed, `Unsupported` for a
graph it cannot express, the `Difference`s it documents (and the `FlushStyle` of its denormal
flush), and the `Evidence` that fused code ran.

These are the backends' own words, so they sit beneath every backend (and beneath `options`, which
the emitters feed); `fuzzfuse.verdict`, which judges a run, takes them from here and re-exports them.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field


class Difference(str, enum.Enum):
    """A semantic a fuser changes by design, for speed, and documents (the signature's kind of a
    DOCUMENTED outcome). The sign of a zero is never a bug (no fuser promises it); a flush of
    denormals is documented only where a backend declares it for the case's configuration
    (`Backend.documented_differences`), and a bug anywhere else."""

    DENORMAL_FLUSH = "denormal-flush"  # fp32 denormal inputs or results read as (signed) zero
    SIGNED_ZERO = "signed-zero"  # a zero of the other sign (fast-math's -fno-signed-zeros)
    # fp16/bf16 intermediates kept in float32 and rounded once at the output, where eager rounds
    # after every op (Inductor unless emulate_precision_casts): it decides only where the output is
    # ill-conditioned (sin of a bf16 expm1(19)), else float32 is the nearer to float64.
    FP32_INTERMEDIATES = "fp32-intermediates"
    # With FP32_INTERMEDIATES, an explicit cast to fp16/bf16 is elided too (x.half().float() is x):
    # Inductor on CPU (its to_dtype cache) and on CUDA (compute types in Triton), unless
    # emulate_precision_casts: pytorch#185337 was fixed under that flag only, pull 185847: "Default-
    # config behavior is unchanged"; on CUDA, pytorch#183761: "By default Inductor may elide
    # fp16/bf16 downcast-upcast pairs across fused pointwise ops". Judged by the same
    # float32-intermediates run with such casts read as float32 (fuzzfuse.ir.interp.run_fp32_compute).
    LOWP_CASTS_ELIDED = "lowp-casts-elided"
    # Any result of a graph whose eager run holds a NaN or an infinity, under gcc's
    # -funsafe-math-optimizations (CPU Inductor's cpp.enable_unsafe_math_opt_flag), which "assume[s]
    # that arguments and results are valid": sqrt of a negative number may give 0.
    UNSAFE_MATH = "unsafe-math"
    # Values only the type of is defined (fuzzfuse.ir.interp taints them): downstream of a float->int
    # cast of NaN, inf or an out-of-range value, or of a float reduction that overflows or cancels
    # in some order of its terms.
    UNDEFINED_BEHAVIOUR = "undefined-behaviour"
    REDUCTION_ORDER = "reduction-order"
    # Wrong values only where an intermediate overflows in some evaluation order the op leaves open
    # (addcmul's products, lerp's, a matmul's terms) or in eager's unfused product that a fused
    # multiply-add does not round (fuzzfuse.ir.interp.order_dependent_positions).
    EVALUATION_ORDER = "evaluation-order"
    # Transcendental functions by approximate instructions (Inductor's use_fast_math on CUDA: exp as
    # ex2.approx of x * log2(e), whose relative error grows with |x|): a float value within
    # oracle.APPROXIMATE_RTOL of float64 is the flag's design, not a bug.
    APPROXIMATE_MATH = "approximate-math"
    # An output that eager's precision cannot decide: runs of the graph at eager's precision that
    # round other ways than eager (each op's result to its dtype, up or down: another libm, another
    # order of a sum's terms) land as far from float64 as the fuser (tan of an expm1 near 1e7,
    # whose float32 ulp is a radian). Never a fuser's design: the oracle's limit, for every fuser.
    ILL_CONDITIONED = "ill-conditioned"

    def __str__(self) -> str:
        return self.value


class FlushStyle(str, enum.Enum):
    """How a fuser flushes denormals where it declares Difference.DENORMAL_FLUSH: what the flushed
    reference it is judged by must do (fuzzfuse.job.flushed_references). A backend declares one per
    device (`Backend.flush_style`)."""

    NONE = "none"  # it never flushes: a flushed result is a mismatch
    # x86's FTZ/DAZ (CPU Inductor's C++ kernels under -funsafe-math-optimizations, gcc < 13): every
    # denormal read or written, float32 and float64 alike, is zero.
    DAZ_FTZ = "daz-ftz"
    # Triton's: float32 denormals flushed where arithmetic reads and writes them, not where
    # comparisons read them; float64 never.
    TRITON_FP32 = "triton-fp32"

    def __str__(self) -> str:
        return self.value


class Stage(str, enum.Enum):
    """Which part of a case failed: eager itself, the fuser's compile or run, forward or backward."""

    EAGER = "eager"
    COMPILE = "compile"
    RUN = "run"
    BACKWARD_COMPILE = "backward-compile"
    BACKWARD_RUN = "backward-run"

    def __str__(self) -> str:
        return self.value

    def __hash__(self) -> int:  # as its value's: a member and its string are one dict key
        return str.__hash__(self)


class Unsupported(Exception):
    """The fuser (or the aten-to-IR translation in front of it) cannot express this graph: an op
    or dtype it lacks. Outcome `unsupported`, never a crash. `stage` says which graph failed to
    compile ("backward-compile" for the backward one of a training step)."""

    def __init__(self, message: str, *, stage: Stage | str = Stage.COMPILE):
        super().__init__(message)
        self.stage = Stage(stage)


FUSED_OUTPUT = "a fused kernel"
AN_INPUT = "an input"


@dataclass(frozen=True)
class FailedGuard:
    """A rejected guarded value: the property that differs from the profile ("dtype", "sizes",
    "strides") and what made the value (`FUSED_OUTPUT`, `AN_INPUT`, or the aten op the interpreter
    ran unfused). Not which dimensions differ: NNC's identity cast of a sliced input falls back
    for a [1] and a [3] alike (its fused output is contiguous, the profile eager's alias), and a
    reduction that may not shrink the [3] to a [1] would leave one fault two bugs."""

    property: str
    made_by: str

    def message(self) -> str:
        """The signature's message of the fallback: what names its bug."""
        return f"a type guard rejects the {self.property} of the output of {self.made_by}"

    @staticmethod
    def parse(message: str) -> FailedGuard | None:
        m = _MESSAGE.fullmatch(message)
        return FailedGuard(m["property"], m["made_by"]) if m else None


_MESSAGE = re.compile(r"a type guard rejects the (?P<property>\w+) of the output of (?P<made_by>.+)")


@dataclass
class Evidence:
    """What a backend saw of the code that ran: whether fused code ran (`fused`; None where the
    backend cannot tell), how many kernels (or fusion groups) it generated, the scheduler of each
    segment (nvFuser's coverage), whether a fallback ran although something fused, the backward's
    own evidence, and `details`: the backend's own record (kernel names, groups, emission style),
    for people reading a report. The typed fields are what other modules read; `details` never is."""

    fused: bool | None = None
    kernels: int = 0
    schedulers: tuple[str, ...] = ()
    fallback: bool = False
    backward: Evidence | None = None
    details: dict = field(default_factory=dict)
    failed_guard: FailedGuard | None = None  # where a fallback ran: the guard that sent it there

    def to_json(self) -> dict:
        return {"fused": self.fused, "kernels": self.kernels, "schedulers": list(self.schedulers),
                "fallback": self.fallback, "backward": self.backward.to_json() if self.backward else None,
                "details": self.details,
                "failed_guard": self.failed_guard.message() if self.failed_guard else None}

    @staticmethod
    def from_json(d: dict) -> Evidence:
        return Evidence(d.get("fused"), int(d.get("kernels") or 0), tuple(str(s) for s in d.get("schedulers") or ()),
                        bool(d.get("fallback")), Evidence.from_json(d["backward"]) if d.get("backward") else None,
                        dict(d.get("details") or {}), FailedGuard.parse(str(d.get("failed_guard") or "")))
