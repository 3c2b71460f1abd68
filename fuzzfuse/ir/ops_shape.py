"""Registry ops that change shape or index: resize (slice, pad, cat), indexing (index_select,
gather, scatter), matmul (matmul, bmm, linear), arg reductions (argmax, argmin), a scan (cumsum)
and var_mean. Each is one declaration in `OPS`, like those of `ops.py` (the `fuzzfuse.ir` package
imports this module): its type rule, `accepts`, attribute and operand drawing, eager and TorchScript
forms, nvFuser lowering (a recipe in `backends/nvfuser_shape_recipes.py`) and the TorchScript fusers that take it
(measured by benchmarks/torchscript_fusible.py on torch 2.13 CPU: NNC fuses cat; oneDNN Graph fuses
cat, matmul, bmm and linear; neither fuses the others).

They lead nvFuser to the schedulers no elementwise graph reaches: resize (slice, pad, cat) and
matmul. Index operands are valid by construction: they carry an index role (`Op.index_operands`),
the generator makes them graph inputs of int64/int32, and `ir.values.make_inputs` keeps their values
in range of the dim they index.

var_mean returns two tensors; the IR's nodes have one output each, so the op selects one of them
(`output="var"` or `"mean"`), and nvFuser computes both with one `fd.ops.var_mean` (Welford).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from .ops import (Attrs, Op, Types, _float_only, choice, cumsum_zero_sign, ints, lit, matmul_overflows,
                  matmul_zero_sign, register)
from .types import DTYPES, INT_DTYPES, ValueType, is_float, normalize_dims, result_type

INDEX_DTYPES = ("int64", "int32")
# Small sizes the generator gives new operands (a matmul's M, an index's length).
_SIZES = (1, 2, 3, 4, 5, 7, 8)
# A matmul's N (a linear's out features) also takes multiples of 8: nvFuser's Hopper matmul
# scheduler loads operands with TMA, which needs 16-byte aligned rows.
_MATMUL_N = _SIZES + (16, 32, 64)


def _dim(at: Attrs, rank: int) -> int:
    return normalize_dims([at["dim"]], rank)[0]


def _identity_axes(ts: Types, at: Attrs, out: ValueType, skip: int | None = None) -> list[tuple[int, int, int]]:
    """Operand 0's axes other than `skip` carry over to the same output axis."""
    return [(0, i, i) for i in range(ts[0].rank) if i != skip]


def _tensor_rank_at_least(n: int) -> Callable[[Types, tuple], bool]:
    return lambda ts, args: all(not t.is_scalar and t.rank >= n for t in ts)


# ---- slice ---------------------------------------------------------------------------------------
def _slice_range(size: int, at: Attrs) -> range:
    """Python's (and PyTorch's) slice semantics: negative starts count from the end, bounds clamp."""
    if at["step"] < 1:
        raise ValueError("slice step must be positive")
    return range(*slice(at["start"], at["end"], at["step"]).indices(size))


def _slice_infer(ts: Types, at: Attrs) -> ValueType:
    d = _dim(at, ts[0].rank)
    shape = list(ts[0].shape)
    shape[d] = len(_slice_range(shape[d], at))
    return ValueType(tuple(shape), ts[0].dtype)


def _slice(x: torch.Tensor, dim: int, start: int, end: int | None, step: int) -> torch.Tensor:
    return x[(slice(None),) * (dim % x.dim()) + (slice(start, end, step),)]


def _slice_source(args: list[str], at: Attrs) -> str:
    """x[:, :, start:end:step] (a negative dim counts from the end: x[..., start:end:step, :])."""
    part = f"{at['start']}:{'' if at['end'] is None else at['end']}:{at['step']}"
    d = at["dim"]
    index = [":"] * d + [part] if d >= 0 else ["..."] + [part] + [":"] * (-d - 1)
    return f"{args[0]}[{', '.join(index)}]"


def _slice_attrs(draw: Callable, ts: Types) -> Attrs:
    """Starts from the front and (negative) from the back, clamped ends and empty results."""
    r = ts[0].rank
    dim = draw(ints(-r, r - 1))
    size = ts[0].shape[dim]
    start = choice(draw, [0, 0, 1, -1, -size, size, -size - 2, size // 2])
    end = choice(draw, [None, None, size, -1, 1, size + 3, size // 2])
    return {"dim": dim, "start": start, "end": end, "step": choice(draw, [1, 1, 2, 3])}


register(Op("slice", "resize", 1, _slice_infer, _slice, _slice_source, _tensor_rank_at_least(1),
            draw_attrs=_slice_attrs, nvfuser="@slice",
            axis_map=lambda ts, at, out: _identity_axes(ts, at, out, skip=_dim(at, ts[0].rank))))


# ---- constant pad --------------------------------------------------------------------------------
def _padded_dims(rank: int, pads) -> dict[int, tuple[int, int]]:
    """dim -> (before, after); F.pad lists the innermost dim first."""
    if len(pads) % 2 or len(pads) // 2 > rank or not pads:
        raise ValueError(f"bad pad widths {pads} for rank {rank}")
    return {rank - 1 - k: (pads[2 * k], pads[2 * k + 1]) for k in range(len(pads) // 2)}


def _pad_infer(ts: Types, at: Attrs) -> ValueType:
    shape = list(ts[0].shape)
    for d, (lo, hi) in _padded_dims(len(shape), at["pads"]).items():
        shape[d] += lo + hi
        if shape[d] < 0 or (lo < 0 and -lo > ts[0].shape[d]) or (hi < 0 and -hi > ts[0].shape[d]):
            raise ValueError(f"pad widths {at['pads']} crop more than {ts[0].shape}")
    if not is_float(ts[0].dtype) and ts[0].dtype != "bool":
        info = torch.iinfo(DTYPES[ts[0].dtype])
        if not (float(at["value"]).is_integer() and info.min <= at["value"] <= info.max):
            raise ValueError(f"pad value {at['value']} does not fit {ts[0].dtype}")
    return ValueType(tuple(shape), ts[0].dtype)


def _pad_attrs(draw: Callable, ts: Types) -> Attrs:
    """Widths for the innermost one or two dims, negative ones (a crop) included; a fill value
    the dtype holds (eager refuses one it cannot convert)."""
    n = draw(ints(1, min(2, ts[0].rank)))
    pads = [choice(draw, [0, 1, 1, 2, 3, -1]) for _ in range(2 * n)]
    dtype = ts[0].dtype
    value = choice(draw, [0.0, 1.0, -1.5, 0.5]) if is_float(dtype) else \
        choice(draw, [0, 1] if dtype == "bool" else [0, 1, 7] if dtype == "uint8" else [0, 1, -3, 7])
    return {"pads": pads, "value": value}


register(Op("pad", "resize", 1, _pad_infer, lambda x, pads, value: F.pad(x, list(pads), value=value),
            # TorchScript's F.pad takes a float value only (eager converts it to the tensor's dtype)
            lambda args, at: f"torch.nn.functional.pad({args[0]}, {lit(list(at['pads']))}, value={float(at['value'])!r})",
            _tensor_rank_at_least(1), draw_attrs=_pad_attrs, nvfuser="@pad",
            axis_map=lambda ts, at, out: [(0, i, i) for i in range(ts[0].rank)
                                          if _padded_dims(ts[0].rank, at["pads"]).get(i, (0, 0)) == (0, 0)]))


# ---- cat -----------------------------------------------------------------------------------------
def _cat_infer(ts: Types, at: Attrs) -> ValueType:
    if any(t.is_scalar or t.rank != ts[0].rank for t in ts) or ts[0].rank == 0:
        raise ValueError("cat takes tensors of one rank, at least 1")
    d = _dim(at, ts[0].rank)
    if any(t.shape[:d] + t.shape[d + 1:] != ts[0].shape[:d] + ts[0].shape[d + 1:] for t in ts):
        raise ValueError(f"cat along {d}: sizes differ off the cat dim")
    shape = list(ts[0].shape)
    shape[d] = sum(t.shape[d] for t in ts)
    return ValueType(tuple(shape), result_type(*ts))


def _cat_operands(arity: int) -> Callable[[Callable, ValueType], list[ValueType]]:
    """Equal sizes but along one dim (drawn again in the attributes: a mismatch is rejected by the
    type rule), mostly the first operand's dtype (cat promotes the others)."""
    def draw_operands(draw: Callable, first: ValueType) -> list[ValueType]:
        out = []
        along = draw(ints(0, max(first.rank - 1, 0)))
        for _ in range(arity - 1):
            shape = list(first.shape or ())
            if shape:
                shape[along] = choice(draw, _SIZES)
            dtype = first.dtype if draw(ints(0, 3)) else choice(draw, ["float32", "int64", "bool", "float16"])
            out.append(ValueType(tuple(shape), dtype))
        return out
    return draw_operands


# Named operands and a named dim: the reducer reads an op's attributes off its eager signature.
_CAT_EAGER = {2: lambda a, b, dim: torch.cat([a, b], dim), 3: lambda a, b, c, dim: torch.cat([a, b, c], dim)}
for _arity, _name in ((2, "cat"), (3, "cat3")):
    register(Op(_name, "resize", _arity, _cat_infer, _CAT_EAGER[_arity],
                lambda args, at: f"torch.cat([{', '.join(args)}], {at['dim']})", _tensor_rank_at_least(1),
                draw_attrs=lambda draw, ts: {"dim": draw(ints(-ts[0].rank, ts[0].rank - 1))}, nvfuser="@cat",
                draw_operands=_cat_operands(_arity), fusers=frozenset({"nnc", "onednn"}),
                anchors_for=frozenset({"onednn"}), computed_from="cat" if _name == "cat3" else None,
                axis_map=(lambda n: lambda ts, at, out: [(k, i, i) for k in range(n) for i in range(ts[0].rank)
                                                         if i != _dim(at, ts[0].rank)])(_arity)))


# ---- indexing ------------------------------------------------------------------------------------
def _is_index(t: ValueType) -> bool:
    return not t.is_scalar and t.dtype in INDEX_DTYPES


def _index_select_infer(ts: Types, at: Attrs) -> ValueType:
    x, index = ts
    d = _dim(at, x.rank)
    if index.rank > 1 or (x.shape[d] == 0 and index.numel()):
        raise ValueError(f"index_select: index of shape {index.shape} into a dim of {x.shape[d]}")
    shape = list(x.shape)
    shape[d] = index.numel()
    return ValueType(tuple(shape), x.dtype)


register(Op("index_select", "index", 2, _index_select_infer, lambda x, index, dim: torch.index_select(x, dim, index),
            lambda args, at: f"torch.index_select({args[0]}, {at['dim']}, {args[1]})",
            lambda ts, args: not ts[0].is_scalar and ts[0].rank >= 1 and _is_index(ts[1]) and ts[1].rank == 1,
            draw_attrs=lambda draw, ts: {"dim": draw(ints(-ts[0].rank, ts[0].rank - 1))}, nvfuser="@index_select",
            draw_operands=lambda draw, first: [ValueType((choice(draw, _SIZES),), choice(draw, INDEX_DTYPES))],
            index_operands=(1,), index_bound=lambda ts, at: ts[0].shape[_dim(at, ts[0].rank)],
            axis_map=lambda ts, at, out: _identity_axes(ts, at, out, skip=_dim(at, ts[0].rank))))


def _gather_like_infer(ts: Types, at: Attrs, out_shape_of_index: bool) -> ValueType:
    """torch.gather / scatter: index of x's rank, no larger than x off `dim` (nor along it, for
    gather, when x's dim is empty)."""
    x, index = ts
    d = _dim(at, x.rank)
    if index.rank != x.rank or any(i > s for k, (i, s) in enumerate(zip(index.shape, x.shape)) if k != d):
        raise ValueError(f"index of shape {index.shape} does not fit {x.shape} off dim {d}")
    if x.shape[d] == 0 and index.numel():
        raise ValueError("indexing an empty dim")
    return ValueType(index.shape if out_shape_of_index else x.shape, x.dtype)


def _index_like(draw: Callable, first: ValueType) -> list[ValueType]:
    """Mostly x's own sizes (take_along_axis's form), some smaller; any length along the dim."""
    shape = tuple(s if draw(ints(0, 3)) else draw(ints(1, max(s, 1))) for s in first.shape or ())
    return [ValueType(shape, choice(draw, INDEX_DTYPES))]


def _gather_accepts(ts: Types, args: tuple) -> bool:
    return not ts[0].is_scalar and ts[0].rank >= 1 and _is_index(ts[1])


def _index_bound(ts: Types, at: Attrs) -> int:
    return ts[0].shape[_dim(at, ts[0].rank)]


register(Op("gather", "index", 2, lambda ts, at: _gather_like_infer(ts, at, True),
            lambda x, index, dim: torch.gather(x, dim, index),
            lambda args, at: f"torch.gather({args[0]}, {at['dim']}, {args[1]})", _gather_accepts,
            draw_attrs=lambda draw, ts: {"dim": draw(ints(-ts[0].rank, ts[0].rank - 1))}, nvfuser="@gather",
            draw_operands=_index_like, index_operands=(1,), index_bound=_index_bound,
            axis_map=lambda ts, at, out: [(1, i, i) for i in range(ts[1].rank)]))


def _scatter_attrs(draw: Callable, ts: Types) -> Attrs:
    dtype = ts[0].dtype
    value = choice(draw, [2.5, -1.0, 0.0]) if is_float(dtype) else (True if dtype == "bool" else choice(draw, [3, -1]))
    return {"dim": draw(ints(-ts[0].rank, ts[0].rank - 1)), "value": value}


# A scalar source only: every write of one position then writes the same value, so duplicate
# indices are deterministic (with a tensor source the winning write is unspecified).
register(Op("scatter", "index", 2, lambda ts, at: _gather_like_infer(ts, at, False),
            lambda x, index, dim, value: torch.scatter(x, dim, index, value),
            lambda args, at: f"torch.scatter({args[0]}, {at['dim']}, {args[1]}, {at['value']!r})", _gather_accepts,
            draw_attrs=_scatter_attrs, nvfuser="@scatter", draw_operands=_index_like, index_operands=(1,),
            index_bound=_index_bound,
            axis_map=lambda ts, at, out: _identity_axes(ts, at, out)))


# ---- matmul --------------------------------------------------------------------------------------
def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """torch.matmul's: dot, matrix-vector, vector-matrix, or batched with broadcast batch dims."""
    from .types import broadcast_shapes

    if not a or not b:
        raise ValueError("matmul of a 0-dim tensor")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: {a} @ {b} do not share K")
    out = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _same_dtype_numeric(ts: Types, args: tuple) -> bool:
    return all(not t.is_scalar for t in ts) and len({t.dtype for t in ts}) == 1 and ts[0].dtype != "bool"


def _matmul_operands(draw: Callable, first: ValueType) -> list[ValueType]:
    """A right operand that shares K: a vector, a matrix, or a batch of matrices."""
    k = first.shape[-1] if first.shape else 1
    m = choice(draw, _MATMUL_N)
    form = draw(ints(0, 2))
    batch = tuple(first.shape[:-2]) if first.rank > 2 else ()
    shape = {0: (k,), 1: (k, m), 2: batch + (k, m)}[form]
    return [ValueType(shape, first.dtype)]


def _matmul_of_one_term(dtype: torch.dtype, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
    """matmul(a, b) unrounded where it sums one term (a contracted extent of 1): a product, which a
    fuser may compute as a pointwise mul (Inductor decomposes an mm of one row or column so under
    coordinate-descent tuning) and a fused multiply-add may then read unrounded (`Op.fma_product`);
    None for a sum of several terms, which is no product."""
    return torch.matmul(a, b) if a.shape[-1] == 1 else None


register(Op("matmul", "matmul", 2, lambda ts, at: ValueType(_matmul_shape(ts[0].shape, ts[1].shape), ts[0].dtype),
            torch.matmul, lambda args, at: f"torch.matmul({args[0]}, {args[1]})",
            lambda ts, args: _same_dtype_numeric(ts, args) and 1 <= ts[0].rank <= 4 and 1 <= ts[1].rank <= 4,
            nvfuser="@matmul", draw_operands=_matmul_operands, fusers=frozenset({"onednn"}),
            cuda_missing=frozenset(INT_DTYPES), overflows_in_some_order=matmul_overflows,
            zero_sum_sign=matmul_zero_sign, fma_product=_matmul_of_one_term))


def _bmm_infer(ts: Types, at: Attrs) -> ValueType:
    a, b = ts
    if a.rank != 3 or b.rank != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"bmm: {a.shape} @ {b.shape}")
    return ValueType((a.shape[0], a.shape[1], b.shape[2]), a.dtype)


register(Op("bmm", "matmul", 2, _bmm_infer, torch.bmm, lambda args, at: f"torch.bmm({args[0]}, {args[1]})",
            lambda ts, args: _same_dtype_numeric(ts, args) and ts[0].rank == 3, nvfuser="@matmul",
            overflows_in_some_order=matmul_overflows, zero_sum_sign=matmul_zero_sign, fusers=frozenset({"onednn"}),
            cuda_missing=frozenset(INT_DTYPES), anchors_for=frozenset({"onednn"}),
            draw_operands=lambda draw, first: [ValueType((first.shape[0], first.shape[-1], choice(draw, _MATMUL_N)),
                                                         first.dtype)] if first.rank == 3 else [first],
            axis_map=lambda ts, at, out: [(0, 0, 0), (1, 0, 0), (0, 1, 1), (1, 2, 2)]))


def _linear_infer(ts: Types, at: Attrs) -> ValueType:
    x, w, bias = ts
    if w.rank != 2 or bias.shape != (w.shape[0],) or x.rank < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"linear: x {x.shape}, weight {w.shape}, bias {bias.shape}")
    return ValueType(x.shape[:-1] + (w.shape[0],), x.dtype)


def _linear_operands(draw: Callable, first: ValueType) -> list[ValueType]:
    n = choice(draw, _MATMUL_N)
    k = first.shape[-1] if first.shape else 1
    return [ValueType((n, k), first.dtype), ValueType((n,), first.dtype)]


register(Op("linear", "matmul", 3, _linear_infer, F.linear, lambda args, at: f"torch.nn.functional.linear({', '.join(args)})",
            lambda ts, args: _same_dtype_numeric(ts, args) and _float_only(ts, args) and ts[0].rank >= 1,
            nvfuser="@linear", draw_operands=_linear_operands, fusers=frozenset({"onednn"}),
            cuda_missing=frozenset(INT_DTYPES),
            overflows_in_some_order=lambda limit, x, w, *bias: matmul_overflows(limit, x, w.transpose(-1, -2)
                                                                                if w.dim() > 1 else w),
            zero_sum_sign=lambda x, w, *bias: matmul_zero_sign(x, w.transpose(-1, -2) if w.dim() > 1 else w, *bias),
            anchors_for=frozenset({"onednn"}),
            axis_map=lambda ts, at, out: [(0, i, i) for i in range(ts[0].rank - 1)] + [(2, 0, out.rank - 1)]))


# ---- arg reductions, scan, var_mean --------------------------------------------------------------
def _arg_infer(ts: Types, at: Attrs) -> ValueType:
    x = ts[0]
    d = _dim(at, x.rank)
    if x.rank and x.shape[d] == 0:
        raise ValueError("arg reduction over an empty dim")
    shape = tuple(1 if i == d else s for i, s in enumerate(x.shape) if at["keepdim"] or i != d)
    return ValueType(shape, "int64")


for _name in ("argmax", "argmin"):
    register(Op(_name, "reduction", 1, _arg_infer,
                (lambda n: lambda x, dim, keepdim: getattr(torch, n)(x, dim, keepdim=keepdim))(_name),
                (lambda n: lambda args, at: f"torch.{n}({args[0]}, {at['dim']}, keepdim={at['keepdim']})")(_name),
                lambda ts, args: ts[0].rank >= 1 and ts[0].dtype != "bool",
                draw_attrs=lambda draw, ts: {"dim": draw(ints(-ts[0].rank, ts[0].rank - 1)),
                                             "keepdim": choice(draw, [False, True])},
                nvfuser=f"@{_name}"))


def _cumsum_infer(ts: Types, at: Attrs) -> ValueType:
    _dim(at, ts[0].rank)  # range check
    return ValueType(ts[0].shape, ts[0].dtype if is_float(ts[0].dtype) else "int64")


register(Op("cumsum", "scan", 1, _cumsum_infer, lambda x, dim: torch.cumsum(x, dim),
            lambda args, at: f"torch.cumsum({args[0]}, {at['dim']})", _tensor_rank_at_least(1),
            draw_attrs=lambda draw, ts: {"dim": draw(ints(-ts[0].rank, ts[0].rank - 1))}, nvfuser="@cumsum",
            accumulates="sum", zero_sum_sign=cumsum_zero_sign))

VAR_MEAN_OUTPUTS = ("var", "mean")


def _var_mean_infer(ts: Types, at: Attrs) -> ValueType:
    from .ops import _reduce_shape

    if at["output"] not in VAR_MEAN_OUTPUTS:
        raise ValueError(f"var_mean output {at['output']!r}")
    return ValueType(_reduce_shape(ts[0].shape, list(at["dims"]), at["keepdim"]), ts[0].dtype)


def _var_mean_attrs(draw: Callable, ts: Types) -> Attrs:
    from .ops import _reduce_dims

    return dict(draw(_reduce_dims(ts, correction=True)), output=choice(draw, VAR_MEAN_OUTPUTS))


register(Op("var_mean", "reduction", 1, _var_mean_infer,
            lambda x, dims, keepdim, correction, output: torch.var_mean(
                x, dims, correction=correction, keepdim=keepdim)[VAR_MEAN_OUTPUTS.index(output)],
            lambda args, at: (f"torch.var_mean({args[0]}, {lit(list(at['dims']))}, correction={at['correction']}, "
                              f"keepdim={at['keepdim']})[{VAR_MEAN_OUTPUTS.index(at['output'])}]"),
            lambda ts, args: ts[0].rank >= 1 and _float_only(ts, args),
            draw_attrs=_var_mean_attrs, nvfuser="@var_mean", accumulates="running-mean",
            output_computed_from=(("var", "var"),)))

__all__ = ["INDEX_DTYPES", "VAR_MEAN_OUTPUTS"]
