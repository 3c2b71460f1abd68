"""THE op registry: every op is declared once, here, and everything else reads it.

A declaration gives the op's arity and which operand types it accepts, its type rule (shape and
dtype, following PyTorch), its eager form, its TorchScript source form, how to draw its attributes,
and (filled in by `fuzzfuse.backends.nvfuser`) its nvFuser lowering. Adding an op touches one place:
its declaration, here or (resize, indexing, matmul, arg and scan ops) in `ops_shape.py`, which
registers through this module and which the `fuzzfuse.ir` package imports, so that `OPS` is whole
once anything of `fuzzfuse.ir` is imported. The generator, the type checker, every backend emitter and the reducer's "replace with a
simpler op" pass all iterate over `OPS`.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from .types import (DTYPES, FLOAT_DTYPES, FP8_DTYPES, INT_DTYPES, ValueType, broadcast_shapes, category,
                    is_float, normalize_dims, result_type, to_float)

Types = list[ValueType]
Attrs = dict[str, Any]


@dataclass(frozen=True)
class Op:
    name: str
    kind: str  # unary | binary | ternary | cast | broadcast | reduction | normalization | view
    arity: int
    infer: Callable[[Types, Attrs], ValueType]
    eager: Callable[..., torch.Tensor]
    source: Callable[[list[str], Attrs], str]
    # Which operand types make a call that eager PyTorch accepts (valid-by-construction generation).
    accepts: Callable[[Types, tuple], bool] = lambda types, args: True
    # Positions that may hold a Python scalar (constant or scalar input) instead of a tensor.
    scalar_positions: tuple[int, ...] = ()
    # draw_attrs(draw, operand types) -> attrs; draw is Hypothesis' draw function.
    draw_attrs: Callable[[Callable, Types], Attrs] | None = None
    # How fuzzfuse.backends.nvfuser_emit lowers the op: the name of the `fd.ops` function it maps
    # to one-to-one ("exp" -> fd.ops.exp), or "@recipe" naming a composite in nvfuser_recipes. None: no
    # lowering (the nvFuser backend reports such cases as unsupported).
    nvfuser: str | None = None
    # Whether eager autograd can backpropagate through this call: False where its backward raises
    # (the generator then marks no input requires_grad upstream of it). Ops whose gradient is zero
    # or undefined (round, comparisons, int casts) are fine: their outputs carry no gradient.
    differentiable: Callable[[Types, tuple], bool] = lambda types, args: True
    # The TorchScript fusers ("nnc", "onednn") that put this op into a fusion group on CPU, in at
    # least one operand form (filled in from TORCHSCRIPT_FUSIBLE): a campaign on such a fuser draws
    # these ops, since a graph the fuser declines wholesale tests nothing.
    fusers: frozenset[str] = frozenset()
    # The fusers among those whose fusion groups form around this op (filled in from FUSION_ANCHORS):
    # another fused op joins a group only beside such an anchor, so the generator never chains two
    # ops that are not (strategies.Features.anchors).
    anchors_for: frozenset[str] = frozenset()
    # How a reduction combines its terms, where the order it combines them in changes a floating
    # result: "sum" (sum, mean, var, std), "running-mean" (var_mean: a sum whose mean is updated
    # term by term, Welford's m += (x - m) / n) or "product" (prod); None for exact ones (amax,
    # amin) and non-reductions. Eager and a fuser may both be right yet disagree when terms near
    # the dtype's limits overflow or cancel in one order and not in another (fuzzfuse.ir.interp).
    accumulates: str | None = None
    # The op's result from the running sum of its terms and their count (sum: the sum; mean: the
    # sum / count), where it is one: a rounding run (fuzzfuse.ir.interp) then also accumulates the
    # terms one at a time in the dtype, as a fuser's loop over an outer dim does, whose rounding
    # errors add up over the terms where eager's cascade sum keeps them small.
    from_running_sum: Callable[[torch.Tensor, int], torch.Tensor] | None = None
    # The op every fuser here computes this one from (std is sqrt(var): nvFuser's recipe and
    # Inductor's decomposition alike): a wrong result of this op is that op's bug, so a bug's
    # identity (fuzzfuse.identity) names that op as its culprit. None: the op is its own.
    computed_from: str | None = None
    # The same, per value of the op's `output` attribute (var_mean's var output is var's Welford
    # reduction, in nvFuser and Inductor alike; its mean output is its own).
    output_computed_from: tuple[tuple[str, str], ...] = ()
    # Operands that are not broadcast partners of the first (cat's equal sizes off the cat dim,
    # matmul's shared K, an index tensor): draw_operands(draw, first operand's type) -> the type of
    # each further operand. The generator reads an existing value of that type or adds an input.
    draw_operands: Callable[[Callable, ValueType], list[ValueType]] | None = None
    # Operand positions whose values index another operand (an index role): the generator makes
    # them graph inputs, and `ir.values.make_inputs` keeps their values in [0, index_bound(types,
    # attrs)), so a graph stays valid by construction and through the reducer's changes.
    index_operands: tuple[int, ...] = ()
    index_bound: Callable[[Types, Attrs], int] | None = None
    # (operand, operand axis, output axis) for every operand axis that reappears in the output
    # unchanged, where the op declares it (the reducer links those dims); None: the kind's rule.
    axis_map: Callable[[Types, Attrs, ValueType], list[tuple[int, int, int]]] | None = None
    # The ops whose result, as this op's operand, an algebraic simplifier folds away (filled in
    # from ALGEBRAIC_FOLDS): exp after log, neg after neg, abs after abs.
    folds_after: frozenset[str] = frozenset()
    # Operand dtypes eager PyTorch has no CUDA kernel for (an integer matmul: "addmm_cuda" not
    # implemented for 'Long'): with no reference to judge against, a CUDA backend draws none.
    cuda_missing: frozenset[str] = frozenset()
    # Whether the result is defined by the operands' dtype, not only by their values (nextafter:
    # the next value representable in that dtype): computing it in float32 for fp16/bf16 operands
    # is wrong, not merely more precise (fuzzfuse.ir.interp.run_fp32_compute keeps its dtype).
    exact_in_dtype: bool = False
    # (the op whose result this one rounds, the unary op that rounds it): div_floor is floor of
    # div's quotient. A fuser that drops the rounding computes the first instead (fuzzfuse.explain).
    rounds: tuple[str, str] | None = None
    # Whether the result only says how the operands compare, or whether they are nonzero (eq..ge,
    # logical_*, isnan): Triton reads a compared fp32 denormal as it is, where its arithmetic
    # flushes one (tan(x) == x is False for a denormal x), and the flushed reference does the same
    # (fuzzfuse.ir.interp.interpret, flush_as_triton).
    compares: bool = False
    # Whether CPU eager converts a Python number operand to the fp16/bf16 tensor's own dtype where
    # the result is not continuous in that number (fmod and remainder: another divisor; a
    # comparison: another threshold, x == 0.1 holds for x = fp16(0.1)). The arbiter reads such a
    # number as eager does (fuzzfuse.ir.interp); mul and div read theirs in float32 (their opmath).
    number_in_dtype_on_cpu: bool = False
    # Where a fuser may contract this op with a neighbour into one fused multiply-add (CUDA's,
    # Triton's and gcc's default floating-point contraction): "product" (mul) or "addend" (add,
    # sub: the fma adds a product operand without rounding it first). None: neither.
    fma_role: str | None = None
    # overflows_in_some_order(limit, *float64 operands, **attrs) -> a bool mask, broadcastable to
    # the result, of the positions where a value the op computes along the way, in an order its
    # definition leaves open, passes `limit` (the largest value of the dtype it computes in):
    # addcmul's value * t1, value * t2, t1 * t2; lerp's end - start and its products with w and
    # 1 - w; a matmul's terms and the sum of their magnitudes. Eager's order and a fuser's may
    # both be right there (fuzzfuse.ir.interp.order_dependent_positions). None: no such value.
    overflows_in_some_order: Callable[..., torch.Tensor] | None = None
    # zero_sum_sign(*operands, **attrs) -> a bool mask of the result positions that are a sum of
    # zero terms with a -0 among them (a matmul's a_ik * b_kj over k, a linear's bias too, a
    # cumsum's prefix): their sign is the accumulator's identity's, as a reduction's
    # (fuzzfuse.ir.interp). None: no such sum.
    zero_sum_sign: Callable[..., torch.Tensor] | None = None
    # How the float64 arbiter computes the op where float64 would change its meaning, not only its
    # precision: arbiter(*float64 operands, **attrs) for an op that computes in float32, float16
    # or bfloat16. div_trunc truncates its quotient rounded to float32 (ATen's trunc(a / b) in
    # float for these): -0.52289 / 1e-5 is -52288.998, -52289 in float32, -52288 in float64.
    # None: the op's eager function on float64 operands.
    arbiter: Callable[..., torch.Tensor] | None = None
    # The op computed without ATen's shortcuts for particular number operands, for the scalar
    # arbiter, which must not share a fault with eager (fuzzfuse.ir.interp.scalar_reference):
    # ATen computes pow(x, 0.5) and pow(x, -0.5) as sqrt and rsqrt, which keep -0's sign
    # (pow(-0.0, -0.5) is -inf where IEEE's pow gives +inf: pytorch#127163); with the exponent a
    # 0-d tensor it is std::pow. None: the op takes no such shortcut.
    unshortcut: Callable[..., torch.Tensor] | None = None
    # Whether Triton computes it by a call into CUDA's math library (libdevice, compiled with
    # denormals flushed: exp, log, sqrt, rsqrt, the trig ops, floor/ceil/trunc/round, pow, fmod)
    # rather than by plain IEEE instructions (add, mul, div, min/max, select, compare, which read
    # and write a float32 denormal as it is): Triton's x * rsqrt(x) of a denormal x is inf, the
    # product of the unflushed x and the rsqrt of the flushed one (fuzzfuse.ir.interp,
    # flush_math_calls).
    math_call: bool = False
    # Whether its result is a math library's to within an ulp, not correctly rounded (exp, log, the
    # trig ops, pow): two libms differ in the last bit even in float64, where no wider arbiter
    # tells which is nearer (fuzzfuse.ir.interp's rounding runs move float64 results by an ulp).
    libm_rounded: bool = False
    # stepwise(*operands of their own dtype, **attrs): the op as the separate operations it
    # names, each rounded in the operands' dtype (addcmul's product rounded before its sum), where
    # eager may compute it with one rounding (ATen's AVX2 addcmul is a fused multiply-add) and a
    # fuser with several, or the other way round: the rounding runs try both
    # (fuzzfuse.ir.interp). None: the op is one operation.
    stepwise: Callable[..., torch.Tensor] | None = None
    # fma_product(its dtype, *float64 operands, **attrs) -> the op's value as the product a fused
    # multiply-add reads unrounded, where an add or sub (`fma_role` "addend") takes it: mul's a * b;
    # mean's sum times the reciprocal of its count rounded to its dtype (CUDA eager and Triton
    # multiply by 1/n). Triton's x - mean(x) of five ones is fma(-5, 0.2f, 1) = -1.5e-8, eager's 0:
    # both right (the rounding runs try it: fuzzfuse.ir.interp); matmul's where it sums one term.
    # None (the field, or what it returns): no product.
    fma_product: Callable[..., torch.Tensor] | None = None

    def computed_by(self, attrs: Attrs) -> str | None:
        """The op a wrong result of this one (with `attrs`) is the bug of: `computed_from`, or the
        op its `output` is computed by; None where the op is its own."""
        return dict(self.output_computed_from).get(attrs.get("output")) or self.computed_from


def _past(limit: float, *values) -> torch.Tensor:
    """The positions where any of `values` (float64 tensors or numbers, broadcast together) passes
    `limit`."""
    masks = [torch.as_tensor(v).abs() > limit for v in values]
    return functools.reduce(torch.logical_or, torch.broadcast_tensors(*masks))


def _matmul_terms(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a_ik * b_kj with k at dim -2: [..., i, k, j] (a 1-D operand as a row or a column)."""
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    return a2.unsqueeze(-1) * b2.unsqueeze(-3)


def _matmul_result(mask: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A [..., i, j] mask in the matmul's result shape (without the dims of a 1-D operand)."""
    if b.dim() == 1:
        mask = mask.select(-1, 0)
    return mask.select(-1 if b.dim() == 1 else -2, 0) if a.dim() == 1 else mask


def matmul_zero_sign(a: torch.Tensor, b: torch.Tensor, *bias) -> torch.Tensor:
    """The positions whose terms (and bias) are all zero, one of them -0."""
    if not a.numel() or not b.numel() or not (bool((a == 0).any()) or bool((b == 0).any())):
        return torch.tensor(False)
    terms = _matmul_terms(a, b)
    zero, negative = (terms == 0).all(-2), torch.signbit(terms).any(-2)
    mask = _matmul_result(zero & negative, a, b)
    for t in bias:
        if isinstance(t, torch.Tensor):
            mask = (mask | torch.signbit(t)) & (t == 0) & _matmul_result(zero, a, b)
    return mask


def cumsum_zero_sign(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The positions whose prefix along `dim` is all zeros, one of them -0: eager's scan starts
    from +0 and gives +0 there, IEEE's sum of a lone -0 is -0 (Triton's scan on CUDA)."""
    if not x.is_floating_point() or not x.numel():
        return torch.tensor(False)
    zero = x == 0
    all_zero = torch.cumprod(zero.to(torch.int8), dim).bool()
    minus_zero_seen = torch.cumsum((zero & torch.signbit(x)).to(torch.int8), dim) > 0
    return all_zero & minus_zero_seen


def matmul_overflows(limit: float, a: torch.Tensor, b: torch.Tensor, *bias) -> torch.Tensor:
    """The result positions (i, j) where a term a_ik * b_kj, or the sum of the terms' magnitudes
    (a partial sum in some order, or an fma that does not round a term), passes `limit`. Checked
    against the bound max|a| * max|b| * k first: the terms are a k-times larger tensor."""
    if not a.numel() or not b.numel() or float(a.abs().max()) * float(b.abs().max()) * max(1, a.shape[-1]) <= limit:
        return torch.tensor(False)
    terms = _matmul_terms(a, b).abs()
    return _matmul_result((terms > limit).any(-2) | (terms.sum(-2) > limit), a, b)


OPS: dict[str, Op] = {}
# The ops of each kind, in registry order (filled in by `register`).
OPS_BY_KIND: dict[str, list[str]] = {}
# The kinds whose results are their operands' elements, moved: no arithmetic, so nothing a flush
# of denormals touches (a Triton load or store keeps them).
MOVES_DATA = frozenset({"view", "broadcast", "resize", "index"})

# What each TorchScript fuser fuses, measured on torch 2.13 CPU with every op in a two-op chain
# (float32, also float64/int/bool for NNC, bfloat16 for oneDNN). NNC (tensorexpr_fuser.cpp) has
# an elementwise set plus sum/softmax/log_softmax; it declines fp16/bf16 on CPU, views other than
# unsqueeze, and the other reductions. oneDNN Graph (LLGA) maps few aten ops and forms partitions
# only around an anchor (add, mul, div, softmax) whose result has no other use: a unary op joins
# one (before or after it), never another unary. Measured the same way for the ops of issue 18
# (NNC: float32/float64 and int8/int16/int32/int64/uint8; oneDNN: float32/bfloat16): both fuse elu,
# leaky_relu and hardtanh; NNC fuses the shifts written `x << k` (not torch.bitwise_left_shift),
# except on uint8; neither fuses nextafter.
TORCHSCRIPT_FUSIBLE = {
    "nnc": frozenset(
        "abs neg relu floor ceil round trunc frac isnan gelu silu exp expm1 log log2 log10 log1p sqrt rsqrt "
        "reciprocal sin cos tan tanh sigmoid add mul sub div pow remainder fmod atan2 eq ne lt le gt ge where "
        "clamp clamp_min lerp addcmul cast unsqueeze sum softmax log_softmax "
        "bitwise_left_shift bitwise_right_shift elu leaky_relu hardtanh".split()),
    "onednn": frozenset(
        "abs relu round gelu exp log sqrt tanh sigmoid add mul div div_trunc div_floor clamp clamp_min "
        "softmax elu leaky_relu hardtanh".split()),
}


# The ops each fuser forms a fusion group around, where it needs one: measured on torch 2.13 CPU with
# every pair of its fused ops chained (float32, bfloat16). oneDNN Graph fuses a chain of two ops
# when either is one of these, never a chain of two others (relu then tanh); bmm, linear and cat
# (ir/ops_shape.py) fuse even alone. Matmul fuses only with a 2-d weight and a 2-d or 3-d input
# (not a vector, not batched weights), so it is no anchor: it joins one. Softmax fuses only with what follows it (nothing
# before it, an add neither), which one set cannot say: it is left out, so the generator puts it
# first in a chain or after an anchor. NNC merges any producer into its consumer: it needs none.
FUSION_ANCHORS = {
    "onednn": frozenset("add mul div div_trunc div_floor".split()),
}


# Producer-consumer pairs that fusers' algebraic simplifiers rewrite (consumer: its producers):
# inverses (exp(log x) -> x), involutions (neg(neg x) -> x), idempotents (abs(abs x) -> abs x),
# strength reductions (1 / sqrt(x) -> rsqrt(x)) and cast chains (a round trip through a narrower
# dtype is not the identity). Each rewrite holds on part of the domain only (exp(log x) is NaN for x < 0, log(exp x) overflows), so a simplifier that
# forgets the rest is wrong there; the generator draws these pairs adjacent (Features.fold_bait),
# where random choice of two ops in a row rarely would.
ALGEBRAIC_FOLDS = {
    "exp": ("log",), "log": ("exp",), "exp2": ("log2",), "log2": ("exp2",), "expm1": ("log1p",),
    "log1p": ("expm1",), "neg": ("neg",), "reciprocal": ("reciprocal", "sqrt", "rsqrt"),
    "logical_not": ("logical_not", "isnan", "isinf"), "bitwise_not": ("bitwise_not",),
    "abs": ("abs", "neg", "relu"), "relu": ("relu", "abs"), "floor": ("floor", "ceil", "round", "trunc"),
    "ceil": ("ceil", "floor", "round", "trunc"), "round": ("round", "floor", "ceil", "trunc"),
    "trunc": ("trunc", "floor", "ceil", "round"), "sign": ("sign", "abs"), "cast": ("cast",),
}


# The kinds of op that take fp8 operands: eager moves fp8 tensors (casts, views) and computes nothing
# on them (types.FP8_DTYPES).
FP8_KINDS = ("cast", "view", "broadcast")


def register(op: Op) -> Op:
    assert op.name not in OPS, op.name
    fusers = op.fusers | frozenset(f for f, ops in TORCHSCRIPT_FUSIBLE.items() if op.name in ops)
    anchors_for = op.anchors_for | frozenset(f for f, ops in FUSION_ANCHORS.items() if op.name in ops)
    accepts = op.accepts
    if op.kind not in FP8_KINDS:
        accepts = lambda types, args, inner=op.accepts: (  # noqa: E731
            not any(t.dtype in FP8_DTYPES for t in types) and inner(types, args))
    folds_after = op.folds_after | frozenset(ALGEBRAIC_FOLDS.get(op.name, ()))
    OPS[op.name] = op = dataclasses.replace(op, fusers=fusers, anchors_for=anchors_for, accepts=accepts,
                                            folds_after=folds_after)
    OPS_BY_KIND.setdefault(op.kind, []).append(op.name)
    return op


def fused_by(fuser: str) -> tuple[str, ...]:
    """The ops `fuser` ("nnc", "onednn") fuses, in registry order."""
    return tuple(name for name, op in OPS.items() if fuser in op.fusers)


def fusion_anchors(fuser: str) -> tuple[str, ...]:
    """The ops `fuser` forms its fusion groups around (empty: any fused op may join any other)."""
    return tuple(name for name, op in OPS.items() if fuser in op.anchors_for)


def lit(x: Any) -> str:
    """A Python/TorchScript literal for a constant argument or attribute."""
    if isinstance(x, str):
        return f"torch.{x}" if x in DTYPES else x
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(lit(v) for v in x) + "]"
    return repr(x)


def _call(fn: str, *attr_names: str) -> Callable[[list[str], Attrs], str]:
    def render(args: list[str], attrs: Attrs) -> str:
        kw = "".join(f", {k}={lit(attrs[k])}" for k in attr_names if k in attrs)
        return f"{fn}({', '.join(args)}{kw})"
    return render


@functools.lru_cache(maxsize=4096)
def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """st.integers(lo, hi) drawn as an offset from 0: under fuzz_one_input (how campaigns draw),
    Hypothesis 6.155 rejects every buffer for some ranges, e.g. integers(2, 3) or integers(-5, -1)."""
    return st.integers(0, hi - lo).map(lambda v: v + lo)


def choice(draw: Callable, items) -> Any:
    """One of `items`, drawn as an index: cheaper than building st.sampled_from per draw, which
    Hypothesis validates anew each time."""
    items = list(items)
    return items[draw(ints(0, len(items) - 1))]


# ---- dtype predicates ----------------------------------------------------------------------------
def _tensors(types: Types) -> Types:
    return [t for t in types if not t.is_scalar]


def _no_bool(types: Types, args: tuple) -> bool:
    return all(t.dtype != "bool" for t in types)


def _float_only(types: Types, args: tuple) -> bool:
    return all(is_float(t.dtype) for t in _tensors(types))


def _integral_only(types: Types, args: tuple) -> bool:
    return all(category(t.dtype) < 2 for t in types)


def _int_division_safe(types: Types, args: tuple) -> bool:
    """Integer floor/trunc division, remainder and fmod raise on a zero divisor: when the result is
    integral the divisor must be a non-zero constant."""
    if not _no_bool(types, args):
        return False
    return is_float(result_type(*types)) or (not isinstance(args[1], str) and args[1] != 0)


def _int_trunc_division_safe(types: Types, args: tuple) -> bool:
    """As `_int_division_safe`, and no int32 or int64 division by -1: eager's trunc division of
    INT_MIN by -1 traps (SIGFPE kills the process, pytorch#138425, open in torch 2.13), so a case
    holding it would be eager's crash blamed on the fuser."""
    return _int_division_safe(types, args) and not (result_type(*types) in ("int32", "int64") and args[1] == -1)


def _int_pow_safe(types: Types, args: tuple) -> bool:
    """Integers to negative powers raise; keep integer exponents small non-negative constants."""
    if not _no_bool(types, args):
        return False
    if is_float(result_type(*types)):
        return True
    return not isinstance(args[1], str) and isinstance(args[1], int) and 0 <= args[1] <= 3


def _same_float(types: Types, args: tuple) -> bool:
    ts = _tensors(types)
    return all(is_float(t.dtype) for t in ts) and len({t.dtype for t in ts}) == 1


# ---- type rules ----------------------------------------------------------------------------------
def _elementwise(dtype_rule: Callable[[Types], str]) -> Callable[[Types, Attrs], ValueType]:
    def infer(types: Types, attrs: Attrs) -> ValueType:
        if not _tensors(types):
            raise ValueError("an elementwise op needs a tensor operand")
        return ValueType(broadcast_shapes(*(t.shape for t in types)), dtype_rule(types))
    return infer


_same = _elementwise(lambda ts: ts[0].dtype)
_promote = _elementwise(lambda ts: result_type(*ts))
_floating = _elementwise(lambda ts: to_float(result_type(*ts)))
_boolean = _elementwise(lambda ts: "bool")


# ---- unary ---------------------------------------------------------------------------------------
_UNARY = {
    # name: (eager callable, dtype rule, accepts)
    "abs": (torch.abs, _same, _no_bool), "neg": (torch.neg, _same, _no_bool),
    "relu": (torch.relu, _same, _no_bool), "floor": (torch.floor, _same, _no_bool),
    "ceil": (torch.ceil, _same, _no_bool), "round": (torch.round, _same, _no_bool),
    "trunc": (torch.trunc, _same, _no_bool), "frac": (torch.frac, _same, _float_only),
    "sign": (torch.sign, _same, None), "bitwise_not": (torch.bitwise_not, _same, _integral_only),
    "logical_not": (torch.logical_not, _boolean, None), "isnan": (torch.isnan, _boolean, None),
    "isinf": (torch.isinf, _boolean, None),
    "gelu": (F.gelu, _same, _float_only), "silu": (F.silu, _same, _float_only),
}
for _n in ("exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal sin cos tan tanh sigmoid erf").split():
    _UNARY[_n] = (getattr(torch, _n), _floating, None)
# The ops of Triton's math-library calls (Op.math_call); reciprocal is a plain division there.
_MATH_CALLS = set("floor ceil round trunc gelu silu exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan tanh "
                  "sigmoid erf pow fmod atan2 nextafter elu std softmax log_softmax".split())
# Of those, the ones no standard rounds correctly (Op.libm_rounded): not floor..trunc, sqrt, fmod.
_LIBM_ROUNDED = _MATH_CALLS - set("floor ceil round trunc sqrt fmod nextafter std".split())

# nvFuser lowerings that are not the fd.ops function of the op's own name.
_NVFUSER_UNARY = {"gelu": "@gelu"}
for _n, (_fn, _rule, _acc) in _UNARY.items():
    _src = f"torch.nn.functional.{_n}" if _n in ("gelu", "silu") else f"torch.{_n}"
    register(Op(_n, "unary", 1, _rule, _fn, _call(_src), _acc or (lambda t, a: True),
                nvfuser=_NVFUSER_UNARY.get(_n, _n), compares=_rule is _boolean, math_call=_n in _MATH_CALLS,
                libm_rounded=_n in _LIBM_ROUNDED))

# ---- binary --------------------------------------------------------------------------------------
_BINARY = {
    "add": (_promote, None), "mul": (_promote, None),
    "sub": (_promote, _no_bool), "div": (_floating, None),
    "pow": (_promote, _int_pow_safe), "maximum": (_promote, None), "minimum": (_promote, None),
    "remainder": (_promote, _int_division_safe), "fmod": (_promote, _int_division_safe),
    "atan2": (_floating, None),
    "eq": (_boolean, None), "ne": (_boolean, None), "lt": (_boolean, None),
    "le": (_boolean, None), "gt": (_boolean, None), "ge": (_boolean, None),
    "logical_and": (_boolean, None), "logical_or": (_boolean, None), "logical_xor": (_boolean, None),
    "bitwise_and": (_promote, _integral_only), "bitwise_or": (_promote, _integral_only),
    "bitwise_xor": (_promote, _integral_only), "nextafter": (_promote, _float_only),
}
# Of the ops that take a number, those whose CPU eager rounds it to fp16/bf16 first and whose
# result jumps with it (Op.number_in_dtype_on_cpu).
_NUMBER_IN_DTYPE_ON_CPU = {"fmod", "remainder", "eq", "ne", "lt", "le", "gt", "ge"}
# Which binary ops accept a Python scalar as the second operand (their aten overloads exist).
_TENSOR_ONLY = {"maximum", "minimum", "atan2", "logical_and", "logical_or", "logical_xor", "nextafter"}
# nvFuser lowerings that are not the fd.ops function of the op's own name (fd.ops.div truncates).
_NVFUSER_BINARY = {"div": "truediv", "logical_xor": "@logical_xor", "nextafter": "@nextafter"}


def _pow_without_shortcut(base, exponent):
    """pow with a number exponent given as a 0-d tensor of a float base's dtype: ATen's std::pow
    path, not its sqrt, rsqrt, reciprocal or square shortcuts for particular numbers."""
    if isinstance(base, torch.Tensor) and base.is_floating_point() and isinstance(exponent, (int, float)) \
            and not isinstance(exponent, bool):
        return torch.pow(base, torch.tensor(exponent, dtype=base.dtype, device=base.device))
    return torch.pow(base, exponent)


# atan2's backward negates the other operand: with a bool operand it raises (torch 2.13).
_BINARY_GRAD = {"atan2": _float_only}
for _n, (_rule, _acc) in _BINARY.items():
    register(Op(_n, "binary", 2, _rule, getattr(torch, _n), _call(f"torch.{_n}"),
                _acc or (lambda t, a: True), scalar_positions=() if _n in _TENSOR_ONLY else (1,),
                nvfuser=_NVFUSER_BINARY.get(_n, _n), differentiable=_BINARY_GRAD.get(_n, lambda t, a: True),
                exact_in_dtype=_n == "nextafter", compares=_rule is _boolean, math_call=_n in _MATH_CALLS,
                number_in_dtype_on_cpu=_n in _NUMBER_IN_DTYPE_ON_CPU,
                libm_rounded=_n in _LIBM_ROUNDED, fma_role={"mul": "product", "add": "addend", "sub": "addend"}.get(_n),
                fma_product=(lambda dtype, a, b: a * b) if _n == "mul" else None,
                unshortcut=_pow_without_shortcut if _n == "pow" else None))

for _mode in ("trunc", "floor"):
    register(Op(f"div_{_mode}", "binary", 2, _promote,
                (lambda m: lambda a, b: torch.div(a, b, rounding_mode=m))(_mode),
                (lambda m: lambda args, at: f"torch.div({args[0]}, {args[1]}, rounding_mode={m!r})")(_mode),
                _int_trunc_division_safe if _mode == "trunc" else _int_division_safe, scalar_positions=(1,),
                nvfuser=f"@div_{_mode}", rounds=("div", _mode),
                arbiter=(lambda a, b: torch.trunc(torch.div(a, b).float().double())) if _mode == "trunc" else None))

# ---- elementwise ops with scalar attributes -------------------------------------------------------
def _shift_amount(draw: Callable, ts: Types) -> Attrs:
    """A shift amount eager defines: PyTorch documents shifts by a negative amount or by the bit
    width of the promoted operand or more as undefined, so 0 .. bits-1, its edges drawn often."""
    bits = DTYPES[ts[0].dtype].itemsize * 8
    return {"shift": choice(draw, [0, 1, 3, bits // 2, bits - 2, bits - 1])}


def _shift_infer(ts: Types, at: Attrs) -> ValueType:
    if not 0 <= at["shift"] < DTYPES[ts[0].dtype].itemsize * 8:
        raise ValueError(f"shift by {at['shift']} is undefined for {ts[0].dtype}")
    return _same(ts, at)


def _integral_not_bool(types: Types, args: tuple) -> bool:
    return all(category(t.dtype) == 1 for t in types)


for _n in ("bitwise_left_shift", "bitwise_right_shift"):
    register(Op(_n, "unary", 1, _shift_infer, (lambda n: lambda x, shift: getattr(torch, n)(x, shift))(_n),
                # The operator form users write (aten::__lshift__): NNC fuses it, not torch.bitwise_left_shift.
                (lambda sym: lambda args, at: f"({args[0]} {sym} {at['shift']})")("<<" if "left" in _n else ">>"),
                _integral_not_bool, draw_attrs=_shift_amount, nvfuser=f"@{_n}"))

# Activations whose scalar attributes are drawn; floating only (eager has no integer elu or leaky_relu).
register(Op("elu", "unary", 1, _same, lambda x, alpha: F.elu(x, alpha), _call("torch.nn.functional.elu", "alpha"),
            _float_only, draw_attrs=lambda draw, ts: {"alpha": choice(draw, [1.0, 0.5, 1.6732632423543772, 2.0])},
            nvfuser="@elu", math_call=True, libm_rounded=True))
register(Op("leaky_relu", "unary", 1, _same, lambda x, negative_slope: F.leaky_relu(x, negative_slope),
            _call("torch.nn.functional.leaky_relu", "negative_slope"), _float_only,
            draw_attrs=lambda draw, ts: {"negative_slope": choice(draw, [0.01, 0.2, 1.5, 0.0])},
            nvfuser="@leaky_relu"))
register(Op("hardtanh", "unary", 1, _same, lambda x, min_val, max_val: F.hardtanh(x, min_val, max_val),
            _call("torch.nn.functional.hardtanh", "min_val", "max_val"), _float_only,
            draw_attrs=lambda draw, ts: dict(zip(("min_val", "max_val"),
                                                 choice(draw, [(-1.0, 1.0), (0.0, 6.0), (-0.5, 2.5), (-3.0, -1.0)]))),
            nvfuser="@hardtanh"))

# ---- ternary -------------------------------------------------------------------------------------
register(Op("where", "ternary", 3, _elementwise(lambda ts: result_type(ts[1], ts[2])), torch.where,
            _call("torch.where"), lambda t, a: t[0].dtype == "bool" and not t[0].is_scalar,
            scalar_positions=(2,), nvfuser="@where"))
register(Op("clamp", "ternary", 3, _promote, lambda x, lo, hi: torch.clamp(x, lo, hi),
            _call("torch.clamp"), lambda t, a: _no_bool(t, a) and (t[1].is_scalar == t[2].is_scalar),
            scalar_positions=(1, 2), nvfuser="@clamp",
            # Tensor bounds that broadcast x to a larger shape: eager's backward raises (torch 2.13).
            differentiable=lambda t, a: t[1].is_scalar or _promote(t, {}).shape == t[0].shape))
register(Op("clamp_min", "binary", 2, _promote, lambda x, lo: torch.clamp(x, min=lo),
            lambda args, at: f"torch.clamp({args[0]}, min={args[1]})", _no_bool, scalar_positions=(1,),
            nvfuser="maximum"))
register(Op("lerp", "ternary", 3, _same, torch.lerp, _call("torch.lerp"), _same_float,
            scalar_positions=(2,), nvfuser="@lerp",
            overflows_in_some_order=lambda limit, s, e, w: _past(limit, e - s, w * (e - s), (1 - w) * (e - s))))
register(Op("addcmul", "ternary", 3, _same,
            lambda a, b, c, value=1.0: torch.addcmul(a, b, c, value=value), _call("torch.addcmul", "value"),
            lambda t, a: _same_float(t, a) and all(not x.is_scalar for x in t),
            draw_attrs=lambda draw, ts: {"value": choice(draw, [1.0, 0.5, -2.0])}, nvfuser="@addcmul",
            stepwise=lambda a, b, c, value=1.0: a + value * b * c,
            overflows_in_some_order=lambda limit, a, b, c, value=1.0: _past(limit, value * b, value * c, b * c,
                                                                             value * b * c)))

# ---- casts ---------------------------------------------------------------------------------------
register(Op("cast", "cast", 1, lambda ts, at: ValueType(ts[0].shape, at["dtype"]),
            lambda x, dtype: x.to(DTYPES[dtype]), lambda args, at: f"{args[0]}.to({lit(at['dtype'])})",
            draw_attrs=lambda draw, ts: {"dtype": choice(draw, sorted(DTYPES))}, nvfuser="@cast"))


# ---- broadcasting --------------------------------------------------------------------------------
def _unsqueeze_infer(ts: Types, at: Attrs) -> ValueType:
    s = list(ts[0].shape)
    normalize_dims([at["dim"]], len(s) + 1)  # range check
    s.insert(at["dim"] % (len(s) + 1), 1)
    return ValueType(tuple(s), ts[0].dtype)


register(Op("unsqueeze", "broadcast", 1, _unsqueeze_infer, lambda x, dim: torch.unsqueeze(x, dim),
            lambda args, at: f"torch.unsqueeze({args[0]}, {at['dim']})",
            lambda t, a: t[0].rank < 6,
            draw_attrs=lambda draw, ts: {"dim": draw(ints(-ts[0].rank - 1, ts[0].rank))}, nvfuser="@unsqueeze"))


def _expand_infer(ts: Types, at: Attrs) -> ValueType:
    sizes, shape = tuple(at["sizes"]), ts[0].shape
    lead = len(sizes) - len(shape)
    if lead < 0:
        raise ValueError("expand cannot drop dims")
    out = tuple(shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    if any(o != s and s != 1 for o, s in zip(out[lead:], shape)) or any(s == -1 for s in sizes[:lead]):
        raise ValueError(f"cannot expand {shape} to {sizes}")
    return ValueType(out, ts[0].dtype)


@st.composite
def _expand_sizes(draw: Callable, ts: Types) -> Attrs:
    shape = ts[0].shape
    lead = draw(ints(0, max(0, 4 - len(shape))))
    sizes = [draw(ints(1, 5)) for _ in range(lead)]
    sizes += [choice(draw, [-1, 2, 3, 7]) if s == 1 else choice(draw, [-1, s]) for s in shape]
    return {"sizes": sizes}


register(Op("expand", "broadcast", 1, _expand_infer, lambda x, sizes: x.expand(list(sizes)),
            lambda args, at: f"{args[0]}.expand({lit(list(at['sizes']))})",
            draw_attrs=lambda draw, ts: draw(_expand_sizes(ts)), nvfuser="@expand"))


def _index_none_infer(ts: Types, at: Attrs) -> ValueType:
    spec = at["spec"]
    if spec.count(":") > ts[0].rank or set(spec) - {":", "None"}:
        raise ValueError(f"bad index spec {spec}")
    out, dims = [], iter(ts[0].shape)
    for s in spec:
        out.append(next(dims) if s == ":" else 1)
    return ValueType(tuple(out) + tuple(dims), ts[0].dtype)


def _index_none(x: torch.Tensor, spec: tuple[str, ...]) -> torch.Tensor:
    return x[tuple(slice(None) if s == ":" else None for s in spec)]


@st.composite
def _index_spec(draw: Callable, ts: Types) -> Attrs:
    colons = draw(ints(0, ts[0].rank))
    nones = draw(ints(1, max(1, 2 - max(0, ts[0].rank - 3))))
    spec = [":"] * colons
    for _ in range(nones):
        spec.insert(draw(ints(0, len(spec))), "None")
    return {"spec": spec}


register(Op("index_none", "broadcast", 1, _index_none_infer, _index_none,
            lambda args, at: f"{args[0]}[{', '.join(at['spec'])}]", lambda t, a: 1 <= t[0].rank <= 4,
            draw_attrs=lambda draw, ts: draw(_index_spec(ts)), nvfuser="@index_none"))


# ---- reductions ----------------------------------------------------------------------------------
def reduced_dims(attrs: Attrs, rank: int) -> list[int]:
    """The dims a reduction folds, normalized: from its `dims` list or its single `dim`."""
    return normalize_dims(list(attrs["dims"]) if "dims" in attrs else [attrs["dim"]], rank)


def _reduce_shape(shape: tuple[int, ...], dims: list[int], keepdim: bool) -> tuple[int, ...]:
    nd = normalize_dims(dims, len(shape))
    if any(d >= len(shape) for d in nd) or len(nd) != len(dims):
        raise ValueError(f"bad reduction dims {dims} for rank {len(shape)}")
    return tuple(1 if i in nd else s for i, s in enumerate(shape) if keepdim or i not in nd)


def _reduction_infer(dtype_rule: Callable[[str], str], needs_terms: bool = False) -> Callable[[Types, Attrs], ValueType]:
    """needs_terms: the reduction has no identity (amax, amin), so eager rejects an empty reduced dim."""
    def infer(ts: Types, at: Attrs) -> ValueType:
        dims = list(at["dims"]) if "dims" in at else [at["dim"]]
        out = ValueType(_reduce_shape(ts[0].shape, dims, at["keepdim"]), dtype_rule(ts[0].dtype))
        if needs_terms and any(ts[0].shape[d] == 0 for d in reduced_dims(at, ts[0].rank)):
            raise ValueError("a reduction without identity over an empty dim")
        return out
    return infer


@st.composite
def _reduce_dims(draw: Callable, ts: Types, single: bool = False, correction: bool = False) -> Attrs:
    r = ts[0].rank
    dims = draw(st.lists(ints(0, r - 1), min_size=1, max_size=1 if single else r, unique=True))
    dims = [d - r if draw(st.booleans()) else d for d in dims]
    at: Attrs = {"dim": dims[0]} if single else {"dims": dims}
    at["keepdim"] = draw(st.booleans())
    if correction:
        at["correction"] = choice(draw, [0, 1])
    return at


_int64_if_integral = lambda d: d if is_float(d) else "int64"  # noqa: E731


def _mean_as_product(dtype: torch.dtype, x: torch.Tensor, dims, keepdim: bool) -> torch.Tensor:
    """mean(x) as sum(x) * (1 / n), the reciprocal rounded to `dtype`'s accumulation dtype (float32
    for float16 and bfloat16), the product not rounded (`Op.fma_product`)."""
    count = math.prod(x.shape[d] for d in normalize_dims(dims, x.dim())) if dims else x.numel()
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    return torch.sum(x, dims, keepdim=keepdim) * float(torch.tensor(1 / max(count, 1), dtype=wide))


_REDUCTIONS = {
    # name: (eager, dtype rule, accepts, extra attrs)
    "sum": (lambda x, dims, keepdim: torch.sum(x, dims, keepdim=keepdim), _int64_if_integral, None, ()),
    "mean": (lambda x, dims, keepdim: torch.mean(x, dims, keepdim=keepdim), lambda d: d, _float_only, ()),
    "amax": (lambda x, dims, keepdim: torch.amax(x, dims, keepdim=keepdim), lambda d: d, None, ()),
    "amin": (lambda x, dims, keepdim: torch.amin(x, dims, keepdim=keepdim), lambda d: d, None, ()),
    "var": (lambda x, dims, keepdim, correction: torch.var(x, dims, correction=correction, keepdim=keepdim),
            lambda d: d, _float_only, ("correction",)),
    "std": (lambda x, dims, keepdim, correction: torch.std(x, dims, correction=correction, keepdim=keepdim),
            lambda d: d, _float_only, ("correction",)),
}
_NVFUSER_REDUCTION = {"sum": "sum", "mean": "@mean", "amax": "max", "amin": "min", "var": "var", "std": "@std"}
for _n, (_fn, _rule, _acc, _extra) in _REDUCTIONS.items():
    register(Op(_n, "reduction", 1, _reduction_infer(_rule, needs_terms=_n in ("amax", "amin")), _fn,
                (lambda n, ex: lambda args, at: f"torch.{n}({args[0]}, {lit(list(at['dims']))}"
                 + "".join(f", {k}={lit(at[k])}" for k in ex) + f", keepdim={at['keepdim']})")(_n, _extra),
                lambda t, a, acc=_acc: t[0].rank >= 1 and (acc is None or acc(t, a)),
                draw_attrs=(lambda ex: lambda draw, ts: draw(_reduce_dims(ts, correction=bool(ex))))(_extra),
                nvfuser=_NVFUSER_REDUCTION[_n], accumulates=None if _n in ("amax", "amin") else "sum",
                computed_from="var" if _n == "std" else None, math_call=_n in _MATH_CALLS,
                from_running_sum={"sum": lambda total, count: total,
                                  "mean": lambda total, count: total / count}.get(_n),
                fma_product=_mean_as_product if _n == "mean" else None))

# prod takes a single dim (aten has no multi-dim prod).
register(Op("prod", "reduction", 1, _reduction_infer(_int64_if_integral),
            lambda x, dim, keepdim: torch.prod(x, dim, keepdim=keepdim),
            lambda args, at: f"torch.prod({args[0]}, {at['dim']}, keepdim={at['keepdim']})",
            lambda t, a: t[0].rank >= 1, draw_attrs=lambda draw, ts: draw(_reduce_dims(ts, single=True)),
            nvfuser="prod", accumulates="product"))

# ---- normalizations users call as single ops -----------------------------------------------------
def _normalization_infer(ts: Types, at: Attrs) -> ValueType:
    normalize_dims([at["dim"]], ts[0].rank)  # range check
    return ValueType(ts[0].shape, ts[0].dtype)


for _n in ("softmax", "log_softmax"):
    register(Op(_n, "normalization", 1, _normalization_infer,
                (lambda n: lambda x, dim: getattr(torch, n)(x, dim))(_n),
                (lambda n: lambda args, at: f"torch.{n}({args[0]}, {at['dim']})")(_n),
                lambda t, a: t[0].rank >= 1 and is_float(t[0].dtype),
                draw_attrs=lambda draw, ts: {"dim": draw(ints(-ts[0].rank, ts[0].rank - 1))}, nvfuser=f"@{_n}",
                math_call=True, libm_rounded=True))


# ---- views ---------------------------------------------------------------------------------------
def _permute_infer(ts: Types, at: Attrs) -> ValueType:
    dims = list(at["dims"])
    if len(dims) != ts[0].rank or normalize_dims(dims, ts[0].rank) != list(range(ts[0].rank)):
        raise ValueError(f"bad permutation {dims}")
    return ValueType(tuple(ts[0].shape[d] for d in dims), ts[0].dtype)


@st.composite
def permutations(draw: Callable, n: int) -> list[int]:
    """Fisher-Yates over drawn integers. (st.permutations never succeeds under fuzz_one_input in
    Hypothesis 6.155, which is how campaigns draw graphs.)"""
    items = list(range(n))
    for i in range(n - 1, 0, -1):
        j = draw(ints(0, i))
        items[i], items[j] = items[j], items[i]
    return items


register(Op("permute", "view", 1, _permute_infer, lambda x, dims: x.permute(*dims),
            lambda args, at: f"{args[0]}.permute({lit(list(at['dims']))})", lambda t, a: t[0].rank >= 2,
            draw_attrs=lambda draw, ts: {"dims": draw(permutations(ts[0].rank))}, nvfuser="@permute"))


def _transpose_infer(ts: Types, at: Attrs) -> ValueType:
    s, r = list(ts[0].shape), ts[0].rank
    normalize_dims([at["dim0"], at["dim1"]], r)  # range check
    a, b = at["dim0"] % r, at["dim1"] % r
    s[a], s[b] = s[b], s[a]
    return ValueType(tuple(s), ts[0].dtype)


register(Op("transpose", "view", 1, _transpose_infer, lambda x, dim0, dim1: torch.transpose(x, dim0, dim1),
            lambda args, at: f"torch.transpose({args[0]}, {at['dim0']}, {at['dim1']})",
            lambda t, a: t[0].rank >= 2,
            draw_attrs=lambda draw, ts: {"dim0": draw(ints(-ts[0].rank, ts[0].rank - 1)),
                                         "dim1": draw(ints(-ts[0].rank, ts[0].rank - 1))},
            nvfuser="@transpose"))


def _reshape_infer(ts: Types, at: Attrs) -> ValueType:
    shape = tuple(at["shape"])
    n = ts[0].numel()
    if shape.count(-1) > 1:
        raise ValueError("at most one -1 in reshape")
    known = 1
    for s in shape:
        known *= s if s != -1 else 1
    if -1 in shape:
        if known == 0 or n % known:
            raise ValueError(f"cannot reshape {ts[0].shape} to {shape}")
        shape = tuple(n // known if s == -1 else s for s in shape)
    elif known != n:
        raise ValueError(f"cannot reshape {ts[0].shape} to {shape}")
    return ValueType(shape, ts[0].dtype)


@st.composite
def _reshape_shape(draw: Callable, ts: Types) -> Attrs:
    """Merge two adjacent dims, or split one dim into two factors; sometimes spell a size as -1."""
    s = list(ts[0].shape)
    if len(s) >= 2 and draw(st.booleans()):
        i = draw(ints(0, len(s) - 2))
        s[i:i + 2] = [s[i] * s[i + 1]]
    else:
        i = draw(ints(0, len(s) - 1))
        # An empty dim (a slice can make one) splits as 1 x 0.
        divisors = [d for d in range(1, s[i] + 1) if s[i] % d == 0] or [1]
        d = choice(draw, divisors)
        s[i:i + 1] = [d, s[i] // d]
    if draw(st.booleans()):
        s[draw(ints(0, len(s) - 1))] = -1
    return {"shape": s}


register(Op("reshape", "view", 1, _reshape_infer, lambda x, shape: torch.reshape(x, shape),
            lambda args, at: f"torch.reshape({args[0]}, {lit(list(at['shape']))})",
            # Eager reshapes a tensor of any rank, and aot_autograd's backwards reshape whatever the
            # forward made (a rank-6 value back to rank 5, say): no cap on rank here, the generator
            # keeps its own (strategies.MAX_VALUE_RANK). Rank 0 has no dim for _reshape_shape to
            # split (from_aten unsqueezes one first).
            lambda t, a: t[0].rank >= 1, draw_attrs=lambda draw, ts: draw(_reshape_shape(ts)),
            nvfuser="@reshape"))

ALL_DTYPES = tuple(DTYPES)

__all__ = ["OPS", "OPS_BY_KIND", "Op", "register", "fused_by", "fusion_anchors", "reduced_dims", "lit", "ALL_DTYPES", "FLOAT_DTYPES", "INT_DTYPES"]
