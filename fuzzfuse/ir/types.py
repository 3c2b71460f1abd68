"""Dtypes, broadcasting and PyTorch's type promotion, written out so that the IR can type a graph
without running it (the generator needs types before any tensor exists). A property test checks
every rule here against eager PyTorch.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .untrusted import GraphError

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "int8": torch.int8,
    "int16": torch.int16,
    "uint8": torch.uint8,
    "bool": torch.bool,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
INT_DTYPES = ("int32", "int64", "int8", "int16", "uint8")
# fp8 is a storage format: eager has no arithmetic on it (no add, neg or amax kernel; torch 2.13) and
# no promotion rule for it (promote_types raises), so only casts and views take it. Only a backend
# that declares it (nvFuser) draws it.
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
# The dtypes every backend takes (Features' default): all but fp8.
COMPUTE_DTYPES = tuple(d for d in DTYPES if d not in FP8_DTYPES)
# Python scalars (constants and runtime scalar inputs) are typed by their Python kind.
PY_KINDS = ("float", "int", "bool")
DEFAULT_FLOAT = "float32"
# The dtype PyTorch gives a Python scalar of each kind when it becomes a tensor (torch.tensor(2.0)).
SCALAR_TENSOR_DTYPE = {"float": DEFAULT_FLOAT, "int": "int64", "bool": "bool"}


def category(dtype: str) -> int:
    """bool < integer < floating: the order PyTorch promotes across categories."""
    if dtype in ("bool",):
        return 0
    if dtype in INT_DTYPES or dtype == "int":
        return 1
    return 2


def is_float(dtype: str) -> bool:
    return category(dtype) == 2


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class ValueType:
    """The static type of a graph value: a tensor (shape is a tuple, possibly empty for 0-dim) or a
    Python scalar (shape is None, dtype one of PY_KINDS)."""

    shape: tuple[int, ...] | None
    dtype: str

    @property
    def is_scalar(self) -> bool:
        return self.shape is None

    @property
    def rank(self) -> int:
        return len(self.shape) if self.shape is not None else 0

    def numel(self) -> int:
        n = 1
        for s in self.shape or ():
            n *= s
        return n


def scalar_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    return "float"


def _promote(a: str | None, b: str) -> str:
    if a is None:
        return b
    try:
        return dtype_name(torch.promote_types(DTYPES[a], DTYPES[b]))
    except RuntimeError as e:  # eager refuses it too (float8 with another type): no valid graph
        raise GraphError(f"{a} and {b} do not promote: {str(e).splitlines()[0]}") from None


def _combine_categories(higher: str | None, lower: str | None) -> str | None:
    # c10's combine_categories: a lower-priority class only wins when it is of a higher category.
    if higher is not None and is_float(higher):
        return higher
    if higher == "bool" or (lower is not None and is_float(lower)):
        if higher is None:
            return lower
        if lower is None:
            return higher
        return _promote(higher, lower)
    return higher if higher is not None else lower


def result_type(*operands: ValueType) -> str:
    """torch.result_type over tensors (dimensioned > zero-dim) and wrapped Python scalars."""
    dim = zero = wrapped = None
    for t in operands:
        if t.shape is None:
            kind = SCALAR_TENSOR_DTYPE[t.dtype]
            wrapped = _promote(wrapped, kind)
        elif len(t.shape) == 0:
            zero = _promote(zero, t.dtype)
        else:
            dim = _promote(dim, t.dtype)
    out = _combine_categories(dim, _combine_categories(zero, wrapped))
    assert out is not None, "result_type needs at least one operand"
    return out


def to_float(dtype: str) -> str:
    """Ops such as exp or true division turn integer and bool inputs into the default float."""
    return dtype if is_float(dtype) else DEFAULT_FLOAT


def broadcast_shapes(*shapes: tuple[int, ...] | None) -> tuple[int, ...]:
    """Broadcast tensor shapes; scalars (None) do not take part. Raises ValueError when invalid."""
    dims: list[int] = []
    for shape in shapes:
        if shape is None:
            continue
        shape = tuple(shape)
        if len(shape) > len(dims):
            dims = [1] * (len(shape) - len(dims)) + dims
        offset = len(dims) - len(shape)
        for i, s in enumerate(shape):
            d = dims[offset + i]
            if d == 1:
                dims[offset + i] = s
            elif s not in (1, d):
                raise ValueError(f"shapes {shapes} do not broadcast")
    return tuple(dims)


def normalize_dims(dims: list[int] | tuple[int, ...], rank: int) -> list[int]:
    """Negative dims count from the end, as in PyTorch; a 0-dim tensor accepts dim 0 and -1."""
    r = max(rank, 1)
    if any(not -r <= d < r for d in dims):
        raise ValueError(f"dims {list(dims)} out of range for rank {rank}")
    return sorted({d % r for d in dims})
