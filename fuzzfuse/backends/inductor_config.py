"""The Inductor configuration a case runs under, drawn per case (swarm style: each case switches a
few code paths on or off, so that a bug hiding behind one of them is reached by some cases and
isolated by others), recorded in the case, reproduced by its repro and shrunk by the reducer.

A configuration is torch.compile's `dynamic` and `mode`, which dims of the inputs are marked
dynamic, and a few `torch._inductor.config` flags chosen for the code paths they switch. A case
file is data: `from_json` accepts only the flags and values of FLAGS (a free config name could
point Inductor at another C++ compiler, `cpp.cxx`, and so choose code to run).
"""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, replace
from typing import Iterator

import torch

from ..ir.untrusted import record, take
from .findings import Difference


@dataclass(frozen=True)
class Flag:
    """An Inductor config flag worth switching: the values other than its default a case may draw,
    the devices whose code generator reads it, and the code path it switches (for people)."""

    values: tuple
    devices: tuple[str, ...]
    switches: str


FLAGS: dict[str, Flag] = {
    "split_reductions": Flag((False,), ("cpu", "cuda"), "one reduction loop instead of a two-stage split one"),
    "fallback_random": Flag((True,), ("cpu", "cuda"), "aten's RNG instead of Inductor's own random lowering"),
    "epilogue_fusion": Flag((False,), ("cpu", "cuda"), "no pointwise epilogues fused into templates"),
    "aggressive_fusion": Flag((True,), ("cpu", "cuda"), "fusing nodes that share no memory access"),
    "pattern_matcher": Flag((False,), ("cpu", "cuda"), "no pattern-replacement passes on the FX graph"),
    "loop_ordering_after_fusion": Flag((False,), ("cpu", "cuda"), "loops kept in their first order"),
    "emulate_precision_casts": Flag((True,), ("cpu", "cuda"), "fp16/bf16 rounded after each op, as eager does"),
    "unroll_reductions_threshold": Flag((1, 64), ("cpu", "cuda"), "reductions unrolled into pointwise code"),
    "realize_opcount_threshold": Flag((1,), ("cpu", "cuda"), "intermediates realized in buffers, not inlined"),
    "max_fusion_size": Flag((2,), ("cpu", "cuda"), "small fused kernels: more kernel boundaries"),
    "cpp.simdlen": Flag((1, 256), ("cpu",), "scalar code (1) or 256-bit vectors instead of the widest ISA"),
    "cpp.vec_isa_ok": Flag((False,), ("cpu",), "no vectorized C++ at all"),
    "cpp.enable_loop_tail_vec": Flag((False,), ("cpu",), "scalar tail loops instead of masked vector ones"),
    "cpp.enable_tiling_heuristics": Flag((False,), ("cpu",), "2-D tiling whatever its predicted gain"),
    "cpp.threads": Flag((2,), ("cpu",), "parallel loops and reductions split across two threads"),
    "cpp.min_chunk_size": Flag((1,), ("cpu",), "parallel chunks of one element: tiny graphs split too"),
    "cpp.dynamic_threads": Flag((True,), ("cpu",), "kernels that read the thread count at run time"),
    "cpp.enable_floating_point_contract_flag": Flag(("fast",), ("cpu",), "-ffp-contract=fast: fused multiply-adds"),
    "cpp.enable_unsafe_math_opt_flag": Flag((True,), ("cpu",), "-funsafe-math-optimizations (gcc < 13: FTZ/DAZ)"),
    "triton.persistent_reductions": Flag((False,), ("cuda",), "looped instead of persistent reductions"),
    "triton.cooperative_reductions": Flag((True,), ("cuda",), "reductions split across blocks"),
    "triton.multi_kernel": Flag((1,), ("cuda",), "persistent and looped variants chosen at run time"),
    "triton.prefer_nd_tiling": Flag((True,), ("cuda",), "2-D/3-D tiled pointwise kernels"),
    "triton.use_block_ptr": Flag((True,), ("cuda",), "block pointers instead of pointer arithmetic"),
    "triton.cudagraphs": Flag((True,), ("cuda",), "the compiled graph replayed as a CUDA graph"),
    "coordinate_descent_tuning": Flag((True,), ("cuda",), "block sizes tuned by coordinate descent"),
    "use_fast_math": Flag((True,), ("cuda",), "the flush-to-zero exp instruction"),
    "eager_numerics.division_rounding": Flag((True,), ("cuda",), "div_rn: eager's correctly rounded division"),
    "eager_numerics.disable_ftz": Flag((True,), ("cuda",), "no flush-to-zero of fp32 denormals"),
}
MODES: dict[str | None, tuple[str, ...]] = {None: ("cpu", "cuda"), "max-autotune-no-cudagraphs": ("cuda",),
                                            "reduce-overhead": ("cuda",)}
# maybe_mark_dynamic on one dim of every tensor input: none, the first or the last of size > 1.
MARKS = ("", "first", "last")
# Probabilities of a draw: most cases run Inductor's defaults (its most used configuration); the
# rest switch a few flags, so that a failure's flags are few and the reducer drops the others.
DEFAULT_SHARE = 0.4
FLAG_PROB = 0.15
MAX_FLAGS = 4


class ConfigError(ValueError):
    """A configuration a case file may not choose; the message is one line."""


@dataclass(frozen=True)
class InductorConfig:
    """torch.compile's dynamic and mode, maybe_mark_dynamic's choice, and flags: (name, value)
    pairs, sorted by name, each from FLAGS."""

    dynamic: bool = False
    mark_dynamic: str = ""
    mode: str | None = None
    flags: tuple[tuple[str, object], ...] = ()

    @staticmethod
    def draw(seed: int, device: str) -> "InductorConfig":
        """A configuration for `device`, from `seed` alone (a case's seed draws the same one again)."""
        rng = random.Random(f"inductor-config:{seed}")
        if rng.random() < DEFAULT_SHARE:
            return InductorConfig()
        names = [n for n, f in FLAGS.items() if device in f.devices and rng.random() < FLAG_PROB][:MAX_FLAGS]
        flags = tuple((n, rng.choice(FLAGS[n].values)) for n in sorted(names))
        modes = [m for m, devices in MODES.items() if device in devices]
        return InductorConfig(dynamic=rng.random() < 0.2, mark_dynamic=rng.choice(MARKS) if rng.random() < 0.3 else "",
                              mode=rng.choice(modes) if rng.random() < 0.3 else None, flags=flags)

    @property
    def patch(self) -> dict:
        """What `torch._inductor.config.patch` takes: the mode's own flags (as torch.compile(mode=...)
        sets them), then the drawn ones."""
        import torch._inductor

        mode = torch._inductor.list_mode_options(self.mode, self.dynamic) if self.mode else {}
        return {**mode, **dict(self.flags)}

    @property
    def cudagraphs(self) -> bool:
        """Whether the compiled graph replays as a CUDA graph (its outputs are then overwritten by
        the next replay, so a caller copies them)."""
        return bool(self.patch.get("triton.cudagraphs"))

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Inductor's config patched for the case, and restored after it, whatever it raised."""
        import torch._inductor.config

        with torch._inductor.config.patch(self.patch):
            yield

    def marked_dims(self, shapes: list[tuple | None]) -> list[tuple[int, int]]:
        """(input index, dim) pairs to maybe_mark_dynamic, given the inputs' shapes (None for a
        scalar): dims of size 1 or 0 are specialized by dynamo anyway."""
        marks = []
        for i, shape in enumerate(shapes):
            dims = [d for d, size in enumerate(shape or ()) if size > 1]
            if dims and self.mark_dynamic:
                marks.append((i, dims[0] if self.mark_dynamic == "first" else dims[-1]))
        return marks

    def documented_differences(self, device: str) -> frozenset[Difference]:
        """The semantics this configuration changes by design (the policy:
        docs/documented-differences.md):
        Triton flushes fp32 denormals unless eager_numerics.disable_ftz; on CPU, gcc < 13 links
        crtfastmath (FTZ/DAZ) into kernels built with -funsafe-math-optimizations, which also
        assumes valid arguments and results (no NaN or infinity); on both, fp16/bf16 intermediates
        stay in float32 unless emulate_precision_casts, and explicit casts to them are elided too;
        use_fast_math on CUDA computes exp by an approximate instruction."""
        flags = dict(self.flags)
        differences = (set() if flags.get("emulate_precision_casts")
                       else {Difference.FP32_INTERMEDIATES, Difference.LOWP_CASTS_ELIDED})
        unsafe_math = device == "cpu" and flags.get("cpp.enable_unsafe_math_opt_flag")
        if unsafe_math:
            differences.add(Difference.UNSAFE_MATH)
        if unsafe_math or (device == "cuda" and not flags.get("eager_numerics.disable_ftz")):
            differences.add(Difference.DENORMAL_FLUSH)
        if device == "cuda" and flags.get("use_fast_math"):
            differences.add(Difference.APPROXIMATE_MATH)
        return frozenset(differences)

    def without_flush(self, device: str) -> "InductorConfig | None":
        """This configuration with the flush of fp32 denormals it documents turned off, where a flag
        turns it off: Triton's by eager_numerics.disable_ftz, CPU's crtfastmath by leaving out
        cpp.enable_unsafe_math_opt_flag. None where it does not flush."""
        if Difference.DENORMAL_FLUSH not in self.documented_differences(device):
            return None
        flags = dict(self.flags)
        if device == "cuda":
            flags["eager_numerics.disable_ftz"] = True
        else:
            flags.pop("cpp.enable_unsafe_math_opt_flag", None)
        return replace(self, flags=tuple(sorted(flags.items())))

    def simpler(self) -> Iterator["InductorConfig"]:
        """Candidates one step closer to Inductor's defaults (the reducer keeps those that still
        fail the same way): each flag dropped, then the mode, the marks and dynamic."""
        for k in range(len(self.flags)):
            yield replace(self, flags=self.flags[:k] + self.flags[k + 1:])
        if self.mode is not None:
            yield replace(self, mode=None)
        if self.mark_dynamic:
            yield replace(self, mark_dynamic="")
        if self.dynamic:
            yield replace(self, dynamic=False)

    def choices(self) -> list[str]:
        """What differs from Inductor's defaults, one entry a choice ("defaults" when nothing)."""
        parts = [f"{n}={v!r}" for n, v in self.flags]
        parts += [f"mode={self.mode!r}"] * bool(self.mode) + ["dynamic=True"] * self.dynamic
        parts += [f"mark_dynamic={self.mark_dynamic}"] * bool(self.mark_dynamic)
        return parts or ["defaults"]

    def describe(self) -> str:
        """One line for people: what differs from Inductor's defaults."""
        return ", ".join(self.choices())

    def to_json(self) -> dict:
        return {"dynamic": self.dynamic, "mark_dynamic": self.mark_dynamic, "mode": self.mode,
                "flags": {n: v for n, v in self.flags}}

    @staticmethod
    def from_json(d: dict) -> "InductorConfig":
        """Validated: a case file is untrusted input. A flag's value must be one of FLAGS' of its
        own type too (JSON's true is not the threshold 1)."""
        what = "Inductor configuration"
        d = record(d, what, ("dynamic", "mark_dynamic", "mode", "flags"))
        flags = take(d, "flags", dict, what, {})
        for name, value in flags.items():
            if name not in FLAGS or not any(type(v) is type(value) and v == value for v in FLAGS[name].values):
                raise ConfigError(f"Inductor flag {name}={value!r} is not one a case may choose (fuzzfuse's FLAGS)")
        mode, mark = take(d, "mode", (str, type(None)), what, None), take(d, "mark_dynamic", str, what, "")
        if mode not in MODES or mark not in MARKS:
            raise ConfigError(f"unknown Inductor mode {mode!r} or mark_dynamic {mark!r}")
        return InductorConfig(take(d, "dynamic", bool, what, False), mark, mode, tuple(sorted(flags.items())))
