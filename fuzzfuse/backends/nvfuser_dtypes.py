"""nvFuser's dtype behaviour: a model of its type promotion and of what it cannot compile.

nvFuser's result dtypes differ from PyTorch's (half/bfloat16 math returns float32, Python scalars
keep their own dtype, a full reduction still counts its reduced axes as dims), and some ops do not
compile on some dtypes. The emitter (`nvfuser_emit`) uses this model to know the dtype nvFuser
gives every value, and casts it to PyTorch's. It is a model, not nvFuser's code: tests/test_nvfuser.py
checks it op by op on the GPU (and says when a workaround here is no longer needed).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from ..ir.types import DTYPES, INT_DTYPES, is_float

# fuzzfuse dtype name -> nvfuser_direct DataType member.
# nvfuser_direct has no 8- or 16-bit integer DataType (python_direct/enum.cpp): int8, int16 and
# uint8 tensors cannot enter a fusion, so the nvFuser backends do not draw them.
NV_DTYPE = {"float32": "Float", "float16": "Half", "bfloat16": "BFloat16", "float64": "Double",
            "int32": "Int32", "int64": "Int", "bool": "Bool",
            "float8_e4m3fn": "Float8_e4m3fn", "float8_e5m2": "Float8_e5m2"}
HALF = ("float16", "bfloat16")


@dataclass(frozen=True)
class Val:
    """A value in the emitted source: its variable name, the dtype nvFuser gives it (None when
    not modelled), and its shape (None for a scalar). `reduced`: the output of a full reduction
    (0-dim in PyTorch) whose nvFuser logical domain still holds the reduced axes, which nvFuser's
    type promotion counts as dims (`getValueType` in csrc/type_promotion.cpp)."""

    name: str
    dtype: str | None
    shape: tuple[int, ...] | None
    reduced: bool = False


@dataclass(frozen=True)
class DT:
    """A DataType argument in the source."""

    dtype: str


def scalar_dtype(compute: str) -> str:
    """The dtype a Python constant takes in an op whose PyTorch compute dtype is `compute`:
    PyTorch converts wrapped numbers to the op's math type (float32 for half/bfloat16/float32)."""
    if compute == "float64":
        return "float64"
    if is_float(compute):
        return "float32"
    if compute in INT_DTYPES:
        return "int64"
    return "bool"


def _promote(a: str | None, b: str) -> str:
    if a is None:
        return b
    return str(torch.promote_types(DTYPES[a], DTYPES[b])).removeprefix("torch.")


def _combine(higher: str | None, lower: str | None) -> str | None:
    """c10::combine_categories."""
    if higher is not None and is_float(higher):
        return higher
    if higher == "bool" or (lower is not None and is_float(lower)):
        if higher is None:
            return lower
        return higher if lower is None else _promote(higher, lower)
    return higher if higher is not None else lower


def _result_type(vals: list[Val], reduced_as_dims: tuple[bool, ...], float_op: bool, half_to_float: bool) -> str:
    dim = zero = wrapped = None
    flags = iter(reduced_as_dims)
    for v in vals:
        if v.shape is None:
            wrapped = _promote(wrapped, "float32" if v.dtype in HALF else v.dtype)
        elif len(v.shape) == 0 and not (v.reduced and next(flags)):
            zero = _promote(zero, v.dtype)
        else:
            dim = _promote(dim, v.dtype)
    dtypes = {v.dtype for v in vals}
    common = dtypes.pop() if len(dtypes) == 1 else _combine(dim, _combine(zero, wrapped))
    if float_op and not is_float(common):
        common = "float32"
    if half_to_float and common in HALF:
        common = "float32"
    return common


def nv_common_dtype(vals: list[Val], float_op: bool = False, half_to_float: bool = True) -> str | None:
    """nvFuser's `computeTypes` (csrc/type_promotion.cpp): PyTorch's result_type where a scalar keeps
    its own dtype (only a half/bfloat16 scalar becomes float32), then int->float32 for float ops,
    then half->float32. A tensor counts as dimensioned when its logical domain is not empty, and a
    full reduction's still holds its reduced axes (unless they were all broadcasts, which nvFuser
    squeezes): None (not modelled) when that decides the dtype."""
    if any(v.dtype is None for v in vals):
        return None
    ambiguous = sum(1 for v in vals if v.reduced and v.shape == ())
    ways = {_result_type(vals, flags, float_op, half_to_float)
            for flags in itertools.product((False, True), repeat=ambiguous)}
    return ways.pop() if len(ways) == 1 else None


# The workarounds below hold for the "direct" and "upcast" styles; the "faithful" style uses none
# (nvfuser_emit.STYLES), so that this defect class is reported, once per root cause.
# Measured on nvfuser_direct 0.2.36 (H200): ops that nvFuser accepts on Half/BFloat16 tensors but
# cannot compile (NVRTC: "no instance of overloaded function relu matches (__half)", "no operator +
# matches __half + __half" in the reduction). PyTorch computes these in float32 and rounds once, so even the
# "direct" style casts their half operands to float32 (nvFuser's own frontends do too).
# tests/test_nvfuser.py::test_workarounds_are_still_needed says when one of them starts to compile.
NO_HALF = {"relu", "floor", "ceil", "round", "trunc", "frac", "silu", "isnan", "isinf", "clamp",
           "sum", "prod", "min", "var", "argmax", "argmin"}
# Ops nvFuser cannot compile on integer tensors (NVRTC: "more than one instance of overloaded
# function floor"); PyTorch defines them as the identity on integers, so that is what is emitted.
INT_IDENTITY = {"floor", "ceil", "round", "trunc"}

# nvFuser op name -> how its result dtype follows from its operands'.
_SAME = {"abs", "relu", "floor", "ceil", "round", "trunc", "frac", "bitwise_not", "sign", "set",
         "permute", "reshape", "broadcast", "expand", "squeeze", "segment_set", "max", "min"}
FLOAT_UNARY = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
               "cos", "tan", "tanh", "sigmoid", "erf", "silu"}
_BOOL = {"isnan", "isinf", "isfinite", "signbit", "logical_not", "eq", "ne", "lt", "le", "gt", "ge",
         "logical_and", "logical_or"}
_PROMOTE = {"neg", "add", "sub", "mul", "pow", "maximum", "minimum", "remainder", "fmod", "bitwise_and",
            "bitwise_or", "bitwise_xor", "div", "bitwise_left_shift", "bitwise_right_shift"}  # neg: Half in, Float out
FLOAT_BINARY = {"truediv", "atan2", "nextafter"}
_ACCUMULATE = {"sum", "prod"}  # integers accumulate in int64, half in float32
# Reductions whose output keeps the reduced axes (see Val.reduced).
REDUCE = {"sum", "prod", "max", "min", "var"}


def model(op: str, operands: list[Val]) -> str | None:
    """The dtype nvFuser gives `fd.ops.<op>` on these operands; None when not modelled."""
    tensors = [v for v in operands if v.shape is not None] or operands
    if op in _SAME:
        return tensors[0].dtype
    if op in FLOAT_UNARY:
        return nv_common_dtype(tensors[:1], float_op=True)
    if op in _BOOL:
        return "bool"
    if op in _PROMOTE:
        return nv_common_dtype(operands)
    if op in FLOAT_BINARY:
        return nv_common_dtype(operands, float_op=True)
    if op in _ACCUMULATE:
        d = tensors[0].dtype
        return None if d is None else ("int64" if not is_float(d) else "float32" if d in HALF else d)
    return None  # where, clamp, lerp, addcmul, var...: not modelled, so always cast


__all__ = ["NV_DTYPE", "HALF", "NO_HALF", "INT_IDENTITY", "FLOAT_UNARY", "FLOAT_BINARY", "REDUCE", "Val", "DT",
           "scalar_dtype", "nv_common_dtype", "model"]
