"""Recipes: how the emitter lowers registry ops that are not one `fd.ops` call.

A recipe is a function `(emitter, node, args, out) -> Val` that writes the op with the emitter's
helpers (`op`, `operand`, `upcast`, `const`, `result`, ...): composites nvFuser has no single op
for (gelu, div_floor, softmax, ...) and ops whose attributes need translating (dims, shapes). An op
in `fuzzfuse.ir.ops` whose `nvfuser` lowering is `"@name"` is lowered by the recipe registered here
as `@recipe("name")`: a new `@name` lowering gets its recipe in this module (the recipes of
`ir/ops_shape.py`'s ops live in `nvfuser_shape_recipes`, which registers them here; the emitter
imports both).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..ir.graph import Node
from ..ir.types import ValueType, is_float, normalize_dims
from .findings import Unsupported
from .nvfuser_dtypes import DT, HALF, Val, scalar_dtype

if TYPE_CHECKING:
    from .nvfuser_emit import NvFuserEmitter

Recipe = Callable[["NvFuserEmitter", Node, list, ValueType], Val]
RECIPES: dict[str, Recipe] = {}


def recipe(name: str) -> Callable[[Recipe], Recipe]:
    """Register the decorated function as the recipe for ops declared `nvfuser="@name"`."""
    def register(fn: Recipe) -> Recipe:
        RECIPES[name] = fn
        return fn
    return register


@recipe("gelu")
def _gelu(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """F.gelu(approximate='none') as ATen computes it: x * 0.5 * (1 + erf(x * M_SQRT1_2))."""
    x = e.upcast(args[0])
    c = out.dtype
    inner = e.op("erf", e.op("mul", x, e.const(0.7071067811865476, scalar_dtype(c)), shape=x.shape), shape=x.shape)
    one_plus = e.op("add", inner, e.const(1.0, scalar_dtype(c)), shape=x.shape)
    half_x = e.op("mul", x, e.const(0.5, scalar_dtype(c)), shape=x.shape)
    return e.result(e.op("mul", half_x, one_plus, shape=x.shape), c)


@recipe("logical_xor")
def _logical_xor(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """nvFuser has no logical_xor: truthiness of each side (a cast to bool: NaN is true), then ne."""
    a, b = (e.cast(x, "bool") for x in args)
    return e.result(e.op("ne", a, b, shape=out.shape), "bool")


@recipe("div_trunc")
def _div_trunc(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """Integers: C++ division (nvFuser's `div`); floats: trunc(a / b) in the math dtype."""
    c = out.dtype
    a, b = e.operand(args[0], c), e.operand(args[1], c)
    if not is_float(c):
        return e.result(e.op("div", a, b, shape=out.shape), c)
    return e.result(e.op("trunc", e.op("truediv", a, b, shape=out.shape), shape=out.shape), c)


@recipe("div_floor")
def _div_floor(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """ATen's div_floor_integer / div_floor_floating, op by op (floor(a / b) is not the same:
    1 // 0.1 is 9.0, floor(1 / 0.1) is 10.0)."""
    c, shape = out.dtype, out.shape
    a, b = e.operand(args[0], c), e.operand(args[1], c)
    if not is_float(c):
        a, b = (e.cast(x, c) if x.shape is not None else x for x in (a, b))
        zero, one = e.const(0, "int64"), e.const(1, "int64")
        quot = e.op("div", a, b, shape=shape)
        rem = e.op("sub", a, e.op("mul", quot, b, shape=shape), shape=shape)
        signs_differ = e.op("ne", e.op("lt", a, zero, shape=a.shape), e.op("lt", b, zero, shape=b.shape), shape=shape)
        adjust = e.op("logical_and", signs_differ, e.op("ne", rem, zero, shape=shape), shape=shape)
        floored = e.op("where", adjust, e.op("sub", quot, one, shape=shape), quot, shape=shape)
        return e.result(floored, c)
    k = scalar_dtype(c)
    zero, one, half = e.const(0.0, k), e.const(1.0, k), e.const(0.5, k)
    mod = e.op("fmod", a, b, shape=shape)
    div = e.op("truediv", e.op("sub", a, mod, shape=shape), b, shape=shape)
    fix = e.op("logical_and", e.op("ne", mod, zero, shape=shape),
               e.op("ne", e.op("lt", b, zero, shape=b.shape), e.op("lt", mod, zero, shape=shape), shape=shape),
               shape=shape)
    div = e.op("where", fix, e.op("sub", div, one, shape=shape), div, shape=shape)
    floor = e.op("floor", div, shape=shape)
    floor = e.op("where", e.op("gt", e.op("sub", div, floor, shape=shape), half, shape=shape),
                 e.op("add", floor, one, shape=shape), floor, shape=shape)
    quotient = e.op("truediv", a, b, shape=shape)
    signed_zero = e.op("mul", quotient, zero, shape=shape)  # copysign(0, a / b) where |a / b| < 1
    res = e.op("where", e.op("ne", div, zero, shape=shape), floor, signed_zero, shape=shape)
    res = e.op("where", e.op("eq", b, zero, shape=b.shape), quotient, res, shape=shape)
    return e.result(res, c)


def _shift(fd_op: str) -> Recipe:
    """fd.ops.bitwise_left_shift / bitwise_right_shift by the constant amount (int64, as a Python
    int is in PyTorch), on the operand's own integer dtype."""
    def lower(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
        x = args[0]
        return e.result(e.op(fd_op, x, e.const(node.attrs["shift"], "int64"), shape=out.shape), out.dtype)
    return lower


RECIPES["bitwise_left_shift"] = _shift("bitwise_left_shift")
RECIPES["bitwise_right_shift"] = _shift("bitwise_right_shift")


def _positive(e: NvFuserEmitter, x: Val, k: str) -> Val:
    return e.op("gt", x, e.const(0.0, k), shape=x.shape)


@recipe("elu")
def _elu(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """ATen's elu (scale and input_scale 1): x > 0 ? x : alpha * expm1(x); NaN takes the second
    branch and stays NaN. nvFuser has no elu (Thunder writes the same where)."""
    x, c = e.upcast(args[0]), out.dtype
    k = scalar_dtype(c)
    negative = e.op("mul", e.op("expm1", x, shape=x.shape), e.const(node.attrs["alpha"], k), shape=x.shape)
    return e.result(e.op("where", _positive(e, x, k), x, negative, shape=out.shape), c)


@recipe("leaky_relu")
def _leaky_relu(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """ATen's leaky_relu: x > 0 ? x : x * negative_slope."""
    x, c = e.upcast(args[0]), out.dtype
    k = scalar_dtype(c)
    negative = e.op("mul", x, e.const(node.attrs["negative_slope"], k), shape=x.shape)
    return e.result(e.op("where", _positive(e, x, k), x, negative, shape=out.shape), c)


@recipe("hardtanh")
def _hardtanh(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """ATen's hardtanh is clamp(x, min_val, max_val) (NaN passes through)."""
    c = out.dtype
    x = e.upcast(args[0], "clamp")
    lo, hi = (e.scalar(node.attrs[k], c) for k in ("min_val", "max_val"))
    return e.result(e.op("clamp", x, lo, hi, shape=out.shape), c)


@recipe("nextafter")
def _nextafter(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """fd.ops.nextafter on both operands in the result dtype (as TensorIterator converts them).
    nvFuser's nextafter is single/double precision only (csrc/ops/arith.h): on half it would step
    in float32 and round back, which is not PyTorch's half nextafter, so half is unsupported."""
    c = out.dtype
    if c in HALF:
        raise Unsupported(f"nextafter on {c}: nvFuser's nextafter is float32/float64 only")
    a, b = (e.cast(x, c) for x in args)
    return e.result(e.op("nextafter", a, b, shape=out.shape), c)


@recipe("where")
def _where(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """The condition takes no part in type promotion."""
    cond, a, b = args
    c = out.dtype
    return e.result(e.op("where", cond, e.operand(a, c, "where"), e.operand(b, c, "where"), shape=out.shape), c)


@recipe("clamp")
def _clamp(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """All operands in the common dtype first (PyTorch promotes the three jointly). nvFuser's clamp
    takes scalar bounds only; tensor bounds are min(max(x, lo), hi), as ATen's clamp kernel."""
    c = out.dtype
    x, lo, hi = args
    if isinstance(lo, Val) and lo.shape is not None:
        x, lo, hi = (e.upcast(e.cast(t, c)) for t in (x, lo, hi))
        return e.result(e.op("minimum", e.op("maximum", x, lo, shape=out.shape), hi, shape=out.shape), c)
    x = e.upcast(e.cast(x, c), "clamp")
    return e.result(e.op("clamp", x, e.scalar(lo, c), e.scalar(hi, c), shape=out.shape), c)


@recipe("lerp")
def _lerp(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """ATen's lerp: self + w * (end - self) when |w| < 0.5, else end - (end - self) * (1 - w).
    (fd.ops.lerp tests w < 0.5 instead: a negative weight with an infinite operand gives inf where
    PyTorch gives NaN; see test_nvfuser_lerp_still_differs.)"""
    c, shape = out.dtype, out.shape
    k = scalar_dtype(c)
    a, b, w = (e.operand(x, c) for x in args)
    diff = e.op("sub", b, a, shape=shape)
    low = lambda: e.op("add", a, e.op("mul", w, diff, shape=shape), shape=shape)  # noqa: E731
    high = lambda: e.op("sub", b, e.op("mul", diff, e.op("sub", e.const(1.0, k), w, shape=w.shape),  # noqa: E731
                                               shape=shape), shape=shape)
    if not isinstance(args[2], Val):  # a constant weight picks the formula here
        return e.result(low() if abs(args[2]) < 0.5 else high(), c)
    small = e.op("lt", e.op("abs", w, shape=w.shape), e.const(0.5, k), shape=w.shape)
    return e.result(e.op("where", small, low(), high(), shape=shape), c)


@recipe("addcmul")
def _addcmul(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    c = out.dtype
    a, b, t = (e.upcast(x) for x in args)
    value = e.const(node.attrs.get("value", 1.0), scalar_dtype(c))
    return e.result(e.op("addcmul", a, b, t, value, shape=out.shape), c)


@recipe("mean")
def _mean(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """sum, then true division by the number of reduced elements, then the keepdim broadcast."""
    x = e.upcast(args[0], "sum")
    rank = len(x.shape)
    dims = normalize_dims(list(node.attrs["dims"]), rank)
    kept = tuple(s for i, s in enumerate(x.shape) if i not in dims)
    count = 1
    for d in dims:
        count *= x.shape[d]
    total = e.op("sum", x, shape=kept, dims=dims)
    mean = e.result(e.op("truediv", total, e.const(float(count), scalar_dtype(out.dtype)), shape=kept), out.dtype)
    return e.keepdim(mean, dims, rank) if node.attrs["keepdim"] else mean


@recipe("std")
def _std(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """sqrt(var), in float32 for half/bfloat16 (one rounding, as ATen's std)."""
    x = e.upcast(args[0], "var")
    rank = len(x.shape)
    dims = normalize_dims(list(node.attrs["dims"]), rank)
    kept = tuple(s for i, s in enumerate(x.shape) if i not in dims)
    var = e.op("var", x, shape=kept, dims=dims, correction=int(node.attrs["correction"]))
    var = e.result(var, "float32" if out.dtype in HALF else out.dtype)
    std = e.result(e.op("sqrt", var, shape=kept), out.dtype)
    return e.keepdim(std, dims, rank) if node.attrs["keepdim"] else std


def _softmax_common(e: NvFuserEmitter, node: Node, args: list, out: ValueType, log: bool) -> Val:
    """exp(x - max) / sum(exp(x - max)), or (x - max) - log(sum(...)), as PyTorch computes them."""
    x = e.upcast(args[0], "sum")  # PyTorch computes half softmax in float32; sum has no half kernel
    rank = len(x.shape)
    d = normalize_dims([node.attrs["dim"]], rank)[0]
    kept = tuple(s for i, s in enumerate(x.shape) if i != d)
    shape = x.shape
    peak = e.keepdim(e.op("max", x, shape=kept, dims=[d]), [d], rank)
    shifted = e.op("sub", x, peak, shape=shape)
    exp = e.op("exp", shifted, shape=shape)
    total = e.keepdim(e.op("sum", exp, shape=kept, dims=[d]), [d], rank)
    if log:
        res = e.op("sub", shifted, e.op("log", total, shape=total.shape), shape=shape)
    else:
        res = e.op("truediv", exp, total, shape=shape)
    return e.result(res, out.dtype)


RECIPES["softmax"] = lambda e, node, args, out: _softmax_common(e, node, args, out, log=False)
RECIPES["log_softmax"] = lambda e, node, args, out: _softmax_common(e, node, args, out, log=True)


@recipe("cast")
def _cast(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """Always emitted, also to the same dtype (nvFuser makes that a `set`)."""
    x = args[0]
    return e.op("cast", x, nv_dtype=out.dtype, shape=out.shape, dtype=DT(out.dtype))


@recipe("unsqueeze")
def _unsqueeze(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    x = args[0]
    dim = node.attrs["dim"] % (len(x.shape) + 1)
    flags = [i == dim for i in range(len(x.shape) + 1)]
    return e.op("broadcast", x, shape=out.shape, is_broadcast_dim=flags)


@recipe("index_none")
def _index_none(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    x = args[0]
    flags = [s == "None" for s in node.attrs["spec"]]
    flags += [False] * (len(out.shape) - len(flags))
    return e.op("broadcast", x, shape=out.shape, is_broadcast_dim=flags)


@recipe("expand")
def _expand(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """New leading dims are broadcast first; then expand to the concrete output sizes."""
    x = args[0]
    lead = len(out.shape) - len(x.shape)
    if lead:
        x = e.op("broadcast", x, shape=(1,) * lead + x.shape, is_broadcast_dim=[True] * lead + [False] * len(x.shape))
    return e.op("expand", x, list(out.shape), shape=out.shape)  # fd.ops.expand(arg, shape)


@recipe("permute")
def _permute(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    x = args[0]
    rank = max(len(x.shape), 1)
    return e.op("permute", x, shape=out.shape, dims=[d % rank for d in node.attrs["dims"]])


@recipe("transpose")
def _transpose(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    x = args[0]
    rank = len(x.shape)
    perm = list(range(rank))
    a, b = node.attrs["dim0"] % rank, node.attrs["dim1"] % rank
    perm[a], perm[b] = perm[b], perm[a]
    return e.op("permute", x, shape=out.shape, dims=perm)


@recipe("reshape")
def _reshape(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """Concrete sizes (a -1 in the graph is resolved by the type rule)."""
    return e.op("reshape", args[0], shape=out.shape, new_shape=list(out.shape))


__all__ = ["RECIPES", "Recipe", "recipe"]
