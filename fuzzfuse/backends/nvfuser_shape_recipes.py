"""nvFuser recipes of the ops in `ir/ops_shape.py`: resize (slice, pad, cat), indexing, matmul,
argmax/argmin, cumsum and var_mean, written with nvfuser_direct's own ops (`fd.ops.slice`,
`pad`, `cat`, `index_select`, `gather`, `take_along_axis`, `scatter`, `matmul`, `linear`,
`cumsum`, `var_mean`, `iota`; names and signatures from python/python_direct/ops.cpp).

Where nvFuser's op differs from PyTorch's, the recipe says how it bridges the gap:
- `fd.ops.slice` takes unit steps only ("Unsupported step (must be 1 or null)"): a stepped slice
  takes its span, pads it to a multiple of the step, splits the dim and keeps the first of each step;
- `fd.ops.pad` assumes non-negative widths ("Currently there's no validation"): a negative width (a
  crop in F.pad) is a slice first;
- nvfuser_direct has no argmax: it is max (min), the first position holding it (a NaN wins, as in
  PyTorch) found as the min of an iota where the value is the peak;
- gather, take_along_axis and scatter document an Int (int64) index: an int32 one is cast.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.graph import Node
from ..ir.ops_shape import VAR_MEAN_OUTPUTS
from ..ir.types import INT_DTYPES, ValueType, is_float, normalize_dims
from .findings import Unsupported
from .nvfuser_dtypes import DT, HALF, Val, scalar_dtype
from .nvfuser_recipes import recipe

if TYPE_CHECKING:
    from .nvfuser_emit import NvFuserEmitter


def _dim(node: Node, rank: int) -> int:
    return normalize_dims([node.attrs["dim"]], rank)[0]


def _unit_slice(e: NvFuserEmitter, x: Val, bounds: dict[int, tuple[int, int]]) -> Val:
    """x[start:end] along each dim in `bounds` (normalized, unit steps)."""
    starts = [bounds.get(d, (0, s))[0] for d, s in enumerate(x.shape)]
    ends = [bounds.get(d, (0, s))[1] for d, s in enumerate(x.shape)]
    if starts == [0] * len(x.shape) and ends == list(x.shape):
        return x
    shape = tuple(b - a for a, b in zip(starts, ends))
    return e.op("slice", x, shape=shape, nv_dtype=x.dtype, start_indices=starts, end_indices=ends)


def _pad_end(e: NvFuserEmitter, x: Val, dim: int, extra: int, value: Val | None = None) -> Val:
    """x with `extra` elements after the end of `dim` (fd.ops.pad lists the innermost dim first)."""
    widths = [0, 0] * (len(x.shape) - 1 - dim) + [0, extra]
    shape = tuple(s + extra if d == dim else s for d, s in enumerate(x.shape))
    return e.op("pad", x, widths, shape=shape, nv_dtype=x.dtype, **({"value": value} if value is not None else {}))


@recipe("slice")
def _slice(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    x, at = args[0], node.attrs
    d = _dim(node, len(x.shape))
    picked = range(*slice(at["start"], at["end"], at["step"]).indices(x.shape[d]))
    n, step = len(picked), at["step"]
    if n == 0:
        return _unit_slice(e, x, {d: (0, 0)})
    if step == 1 or n == 1:
        return _unit_slice(e, x, {d: (picked.start, picked.start + n)})
    span = _unit_slice(e, x, {d: (picked.start, min(x.shape[d], picked.start + n * step))})
    if span.shape[d] < n * step:
        span = _pad_end(e, span, d, n * step - span.shape[d])
    split = span.shape[:d] + (n, step) + span.shape[d + 1:]
    v = e.op("reshape", span, shape=split, new_shape=list(split))
    v = _unit_slice(e, v, {d + 1: (0, 1)})
    return e.op("squeeze", v, shape=out.shape, dims=[d + 1])


@recipe("pad")
def _pad(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """Negative widths crop (a slice), then fd.ops.pad with the non-negative ones."""
    x, pads = args[0], list(node.attrs["pads"])
    rank = len(x.shape)
    crop = {}
    for k in range(len(pads) // 2):
        d, lo, hi = rank - 1 - k, pads[2 * k], pads[2 * k + 1]
        if lo < 0 or hi < 0:
            crop[d] = (max(-lo, 0), x.shape[d] - max(-hi, 0))
    x = _unit_slice(e, x, crop)
    widths = [max(p, 0) for p in pads]
    if not any(widths):
        return x if x.name != args[0].name else e.op("set", x, shape=out.shape)
    value = e.const(node.attrs["value"], scalar_dtype(out.dtype))
    return e.op("pad", x, widths, shape=out.shape, nv_dtype=out.dtype, value=value)


@recipe("cat")
def _cat(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """Operands cast to the promoted dtype first (torch.cat promotes, fd.ops.cat does not)."""
    tensors = [e.cast(a, out.dtype) for a in args]
    return e.op("cat", tensors, shape=out.shape, nv_dtype=out.dtype, dim=_dim(node, len(out.shape)))


@recipe("index_select")
def _index_select(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    x, index = args
    return e.op("index_select", x, index, shape=out.shape, nv_dtype=x.dtype, dim=_dim(node, len(x.shape)))


def _int64_index(e: NvFuserEmitter, index: Val) -> Val:
    return e.cast(index, "int64")


@recipe("gather")
def _gather(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """take_along_axis where the index has x's sizes off the dim (its contract), else gather."""
    x, index = args
    d = _dim(node, len(x.shape))
    same = all(i == s for k, (i, s) in enumerate(zip(index.shape, x.shape)) if k != d)
    return e.op("take_along_axis" if same else "gather", x, _int64_index(e, index), shape=out.shape,
                nv_dtype=x.dtype, dim=d)


@recipe("scatter")
def _scatter(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    x, index = args
    value = e.const(node.attrs["value"], scalar_dtype(x.dtype))
    return e.op("scatter", x, _int64_index(e, index), value, shape=out.shape, nv_dtype=x.dtype,
                dim=_dim(node, len(x.shape)))


def _no_integer_matmul(node: Node, dtype: str) -> None:
    if dtype in INT_DTYPES:  # eager CUDA has no integer matmul either: nothing to compare with
        raise Unsupported(f"{node.op} on {dtype}: CUDA has no integer matmul")


@recipe("matmul")
def _matmul(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """matmul and bmm (fd.ops.matmul follows torch.matmul's ranks and broadcasting)."""
    a, b = args
    _no_integer_matmul(node, a.dtype)
    return e.op("matmul", a, b, shape=out.shape, nv_dtype=a.dtype)


@recipe("linear")
def _linear(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    x, weight, bias = args
    _no_integer_matmul(node, x.dtype)
    return e.op("linear", x, weight, bias, shape=out.shape, nv_dtype=x.dtype)


def _arg_reduction(e: NvFuserEmitter, node: Node, args: list, out: ValueType, peak_op: str) -> Val:
    """The first position along the dim that holds the max (min), or the first NaN: min over
    where(x == peak or isnan(x), position, size)."""
    x = e.upcast(args[0], node.op)
    rank = len(x.shape)
    d = _dim(node, rank)
    kept = tuple(s for i, s in enumerate(x.shape) if i != d)
    peak = e.keepdim(e.op(peak_op, x, shape=kept, dims=[d]), [d], rank)
    hit = e.op("eq", x, peak, shape=x.shape)
    if is_float(x.dtype):
        hit = e.op("logical_or", hit, e.op("isnan", x, shape=x.shape), shape=x.shape)
    size = x.shape[d]
    position = e.op("iota", shape=(size,), nv_dtype="int64", length=size, start=0, step=1, dtype=DT("int64"))
    position = e.op("broadcast", position, shape=tuple(size if i == d else 1 for i in range(rank)),
                    is_broadcast_dim=[i != d for i in range(rank)])
    candidates = e.op("where", hit, position, e.const(size, "int64"), shape=x.shape, nv_dtype="int64")
    index = e.op("min", candidates, shape=kept, nv_dtype="int64", dims=[d])
    return e.keepdim(index, [d], rank) if node.attrs["keepdim"] else index


@recipe("argmax")
def _argmax(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    return _arg_reduction(e, node, args, out, "max")


@recipe("argmin")
def _argmin(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    return _arg_reduction(e, node, args, out, "min")


@recipe("cumsum")
def _cumsum(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """Integers and bools accumulate in int64, half/bfloat16 in float32 (ATen's accumulate type),
    each partial sum rounded once, at the end."""
    x = args[0]
    compute = out.dtype if out.dtype not in HALF else "float32"
    x = e.cast(x, compute)
    return e.result(e.op("cumsum", x, shape=x.shape, nv_dtype=compute, dim=_dim(node, len(x.shape))), out.dtype)


@recipe("var_mean")
def _var_mean(e: NvFuserEmitter, node: Node, args: list, out: ValueType) -> Val:
    """One fd.ops.var_mean (Welford) gives both; the node's selected output is taken from the pair."""
    x = e.upcast(args[0], "var")
    at = node.attrs
    dims = normalize_dims(list(at["dims"]), len(x.shape))
    call = (f"fd.ops.var_mean({x.name}, dims={dims}, correction={int(at['correction'])}, "
            f"keepdim={bool(at['keepdim'])})[{VAR_MEAN_OUTPUTS.index(at['output'])}]")
    v = e.assign(call, x.dtype, out.shape, reduced=out.shape == ())
    return e.result(v, out.dtype)


__all__: list[str] = []
