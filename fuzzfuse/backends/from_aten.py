"""aten FX graphs (what aot_autograd hands a compiler) translated into fuzzfuse graphs.

This is how nvFuser joins the aot_autograd route: the forward and backward graphs of a training
step become IR graphs, which the nvFuser emitter already lowers with PyTorch's dtypes. Every
translated value is checked against the FX node's own shape and dtype (`meta["val"]`): a dtype
the IR's promotion rules get otherwise (all-zero-dim operands, say) is cast back, a shape that
differs is a translation defect.

Tensors an FX graph creates from nothing (`zeros_like`, `scalar_tensor`, `full`...) become extra
inputs, filled at call time: the IR has no constant-tensor op, and the fusion then reads them
like any saved activation. Python scalars where the IR op takes none become zero-dim inputs.
An aten op (or dtype) without an IR form raises Unsupported naming it. It lives with the backends,
not in `fuzzfuse.ir`, because it is the aot:nvfuser route's front half and speaks their words.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch

from ..ir.builder import GraphBuilder
from ..ir.graph import Graph, GraphError
from ..ir.ops import OPS
from ..ir.ops_shape import VAR_MEAN_OUTPUTS
from ..ir.types import DTYPES, SCALAR_TENSOR_DTYPE, ValueType, is_float, scalar_kind
from .findings import Unsupported

_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class TranslationError(AssertionError):
    """A translated value disagrees with the FX graph's own shape: a fuzzfuse defect."""


@dataclass(frozen=True)
class Constant:
    """A tensor the FX graph makes from nothing, passed to the translated graph as an input."""
    shape: tuple[int, ...]
    dtype: str
    value: float | int | bool

    def make(self, device) -> torch.Tensor:
        return torch.full(self.shape, self.value, dtype=DTYPES[self.dtype], device=device)


@dataclass(frozen=True)
class Translation:
    graph: Graph  # inputs: the FX placeholders in order, then the constants
    constants: tuple[Constant, ...]
    # One entry per FX output: the index into graph.outputs, or None where the FX output is None.
    slots: tuple[int | None, ...]

    def inputs(self, args: list) -> list:
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), "cpu")
        return list(args) + [c.make(device) for c in self.constants]

    def outputs(self, values: list) -> list:
        return [None if s is None else values[s] for s in self.slots]


def _dtype(t: torch.dtype) -> str:
    if t not in _DTYPE_NAMES:
        raise Unsupported(f"dtype {t} has no fuzzfuse IR form")
    return _DTYPE_NAMES[t]


class _Translator:
    def __init__(self) -> None:
        self.b = GraphBuilder()
        self.constants: list[Constant] = []

    # ---- values ------------------------------------------------------------------------------
    def constant(self, shape, dtype: str, value) -> str:
        self.constants.append(Constant(tuple(shape), dtype, value))
        return self.b.tensor(tuple(shape), dtype, name=f"c{len(self.constants) - 1}")

    def operand(self, x: Any, op: str, pos: int) -> Any:
        """A Python scalar where the IR op takes none becomes a zero-dim input of the dtype PyTorch
        gives that scalar (float32, int64, bool)."""
        if isinstance(x, str) or pos in OPS[op].scalar_positions:
            return x
        return self.constant((), SCALAR_TENSOR_DTYPE[scalar_kind(x)], x)

    def add(self, op: str, *args, **attrs) -> str:
        try:
            return self.b.add(op, *(self.operand(a, op, k) for k, a in enumerate(args)), **attrs)
        except GraphError as e:
            raise Unsupported(f"no IR form for this call: {e}") from e

    def cast(self, x: str, dtype: str) -> str:
        return x if self.b.types[x].dtype == dtype else self.add("cast", x, dtype=dtype)

    def type(self, x: str) -> ValueType:
        return self.b.types[x]


Handler = Callable[..., Any]
ATEN: dict[str, Handler] = {}


def aten(*names: str):
    def register(fn: Handler) -> Handler:
        for n in names:
            ATEN[n] = fn
        return fn
    return register


aten("sgn")(lambda t, x: t.add("sign", x))


@aten("gelu")
def _gelu(t, x, approximate="none"):
    if approximate != "none":
        raise Unsupported(f"gelu(approximate={approximate!r}) has no IR form")
    return t.add("gelu", x)


def _add_sub(op: str) -> Handler:
    return lambda t, a, b, alpha=1: t.add(op, a, b if alpha == 1 else t.add("mul", b, alpha))


ATEN["add"], ATEN["sub"] = _add_sub("add"), _add_sub("sub")


@aten("rsub")
def _rsub(t, a, b, alpha=1):
    """b - alpha * a, written -(alpha * a) + b: the same rounding (IEEE subtraction is symmetric)."""
    scaled = a if alpha == 1 else t.add("mul", a, alpha)
    return t.add("add", t.add("neg", scaled), b)


@aten("div")
def _div(t, a, b, rounding_mode=None):
    return t.add({None: "div", "trunc": "div_trunc", "floor": "div_floor"}[rounding_mode], a, b)


@aten("where")
def _where(t, cond, a, b):
    return t.add("where", cond, t.operand(a, "add", 0), b)


@aten("clamp", "clamp_min")
def _clamp(t, x, lo=None, hi=None):
    if hi is None:
        return t.add("clamp_min", x, lo)
    if lo is not None and isinstance(lo, str) == isinstance(hi, str):
        return t.add("clamp", x, lo, hi)
    if lo is None and not isinstance(hi, str):  # clamp(x, max=c): the IR's clamp from the type's bottom
        dtype = t.type(x).dtype
        bottom = -float("inf") if is_float(dtype) or isinstance(hi, float) else torch.iinfo(DTYPES[dtype]).min
        return t.add("clamp", x, bottom, hi)
    return t.add("minimum", x if lo is None else t.add("maximum", x, lo), hi)


ATEN["clamp_max"] = lambda t, x, hi: _clamp(t, x, None, hi)


@aten("lerp")
def _lerp(t, a, b, w):
    return t.add("lerp", a, b, w)


@aten("addcmul")
def _addcmul(t, a, b, c, value=1):
    return t.add("addcmul", a, b, c, value=float(value))


def _shift(op: str) -> Handler:
    """x << k and x >> k (aten's __lshift__/__rshift__, which `x << k` traces to, and
    bitwise_*_shift) by a constant k: the IR's shift amount is an attribute."""
    def handler(t, x, amount):
        if not isinstance(amount, int) or isinstance(amount, bool) or not isinstance(x, str):
            raise Unsupported(f"aten.{op} by {type(amount).__name__} has no IR form (a constant int amount has)")
        return t.add(op, x, shift=amount)
    return handler


ATEN["__lshift__"] = ATEN["bitwise_left_shift"] = _shift("bitwise_left_shift")
ATEN["__rshift__"] = ATEN["bitwise_right_shift"] = _shift("bitwise_right_shift")


@aten("elu")
def _elu(t, x, alpha=1.0, scale=1.0, input_scale=1.0):
    if scale != 1 or input_scale != 1:
        raise Unsupported(f"elu(scale={scale}, input_scale={input_scale}) has no IR form")
    return t.add("elu", x, alpha=float(alpha))


aten("leaky_relu")(lambda t, x, negative_slope=0.01: t.add("leaky_relu", x, negative_slope=float(negative_slope)))
aten("hardtanh")(lambda t, x, min_val=-1.0, max_val=1.0: t.add("hardtanh", x, min_val=float(min_val),
                                                                max_val=float(max_val)))


# ---- views and copies ---------------------------------------------------------------------------
@aten("alias", "clone", "detach", "lift_fresh_copy", "contiguous")
def _identity(t, x, **kwargs):
    return x


@aten("_to_copy", "to", "convert_element_type")
def _to(t, x, dtype=None, **kwargs):
    return x if dtype is None else t.cast(x, _dtype(dtype))


@aten("view", "_unsafe_view", "reshape")
def _reshape(t, x, shape):
    if t.type(x).rank == 0:  # the IR reshapes from rank 1: a zero-dim tensor goes through shape [1]
        x = t.add("unsqueeze", x, dim=0)
        if list(shape) in ([1], [-1]):
            return x
    return t.add("reshape", x, shape=list(shape))


@aten("squeeze")
def _squeeze(t, x, dims=None):
    shape = t.type(x).shape
    drop = range(len(shape)) if dims is None else [d % max(1, len(shape)) for d in
                                                   (dims if isinstance(dims, (list, tuple)) else [dims])]
    return t.add("reshape", x, shape=[s for i, s in enumerate(shape) if not (i in drop and s == 1)])


@aten("unsqueeze")
def _unsqueeze(t, x, dim):
    return t.add("unsqueeze", x, dim=dim)


@aten("permute")
def _permute(t, x, dims):
    return t.add("permute", x, dims=list(dims))


@aten("transpose")
def _transpose(t, x, dim0, dim1):
    return t.add("transpose", x, dim0=dim0, dim1=dim1)


@aten("t")
def _t(t, x):
    return x if t.type(x).rank < 2 else t.add("transpose", x, dim0=0, dim1=1)


@aten("expand")
def _expand(t, x, sizes, implicit=False):
    return t.add("expand", x, sizes=list(sizes))


# ---- reductions ---------------------------------------------------------------------------------
def _dims(t, x, dims) -> list[int]:
    rank = t.type(x).rank
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    return list(dims) if isinstance(dims, (list, tuple)) else [dims]


def _reduce(t, op, x, dims, keepdim, dtype=None, **attrs):
    if dtype is not None:
        x = t.cast(x, _dtype(dtype))
    if t.type(x).rank == 0:  # reducing a zero-dim tensor is the identity (sum's integer promotion aside)
        return t.cast(x, "int64") if op in ("sum", "prod") and not is_float(t.type(x).dtype) else x
    dims = _dims(t, x, dims)
    if op == "prod" and len(dims) > 1:
        x, dims = t.add("reshape", x, shape=[-1]), [0]
        keepdim = False
    key = {"dim": dims[0]} if op == "prod" else {"dims": dims}
    return t.add(op, x, keepdim=bool(keepdim), **key, **attrs)


for _n in ("sum", "mean", "amax", "amin"):
    ATEN[_n] = (lambda n: lambda t, x, dims=None, keepdim=False, dtype=None:
                _reduce(t, n, x, dims, keepdim, dtype))(_n)


@aten("prod")
def _prod(t, x, dim=None, keepdim=False, dtype=None):
    return _reduce(t, "prod", x, dim, keepdim, dtype)


def _var_std(op: str) -> Handler:
    def handler(t, x, dims=None, *, correction=None, keepdim=False):
        correction = 1 if correction is None else correction
        if correction not in (0, 1):
            raise Unsupported(f"{op}(correction={correction}) has no IR form")
        return _reduce(t, op, x, dims, keepdim, correction=int(correction))
    return handler


ATEN["var"], ATEN["std"] = _var_std("var"), _var_std("std")


# ---- normalizations and their backward ----------------------------------------------------------
def _softmax(op: str) -> Handler:
    def handler(t, x, dim, half_to_float):
        y = t.add(op, x, dim=dim)
        return t.cast(y, "float32") if half_to_float else y
    return handler


ATEN["_softmax"], ATEN["_log_softmax"] = _softmax("softmax"), _softmax("log_softmax")


@aten("_softmax_backward_data")
def _softmax_backward(t, grad, out, dim, input_dtype):
    """ATen's decomposition (torch._decomp): g*y - y * sum(g*y, dim, keepdim)."""
    gy = t.add("mul", grad, out)
    dx = t.add("sub", gy, t.add("mul", out, t.add("sum", gy, dims=[dim], keepdim=True)))
    return t.cast(dx, _dtype(input_dtype))


@aten("_log_softmax_backward_data")
def _log_softmax_backward(t, grad, out, dim, input_dtype):
    """ATen's decomposition: g - exp(y) * sum(g, dim, keepdim)."""
    dx = t.add("sub", grad, t.add("mul", t.add("exp", out), t.add("sum", grad, dims=[dim], keepdim=True)))
    return t.cast(dx, _dtype(input_dtype))


# ---- resize, indexing, matmul, arg reductions, scans --------------------------------------------
@aten("slice")
def _slice(t, x, dim=0, start=None, end=None, step=1):
    return t.add("slice", x, dim=dim, start=0 if start is None else start, end=end, step=step)


@aten("slice_backward")
def _slice_backward(t, grad, input_sizes, dim, start, end, step):
    """The gradient placed back into zeros of the input's size: a pad along the dim (unit steps)."""
    size = input_sizes[dim]
    picked = range(*slice(start, end, step).indices(size))
    if step != 1 and len(picked) > 1:
        raise Unsupported("slice_backward with a step has no IR form")
    begin = picked.start if len(picked) else 0
    rank = len(input_sizes)
    pads = [0, 0] * (rank - 1 - dim % rank) + [begin, size - begin - len(picked)]
    return t.add("pad", grad, pads=pads, value=0)


@aten("constant_pad_nd")
def _constant_pad(t, x, pad, value=0):
    return t.add("pad", x, pads=list(pad), value=value)


@aten("cat")
def _cat(t, tensors, dim=0):
    """Two or three tensors are one IR cat; more are cats of cats (the same values)."""
    tensors = [x for x in tensors if t.type(x).shape != (0,)]  # aten.cat skips legacy empty 1-d tensors
    if len(tensors) == 1:
        return tensors[0]
    while len(tensors) > 3:
        tensors = [t.add("cat", tensors[0], tensors[1], dim=dim)] + tensors[2:]
    return t.add("cat" if len(tensors) == 2 else "cat3", *tensors, dim=dim)


ATEN["index_select"] = lambda t, x, dim, index: t.add("index_select", x, index, dim=dim)
ATEN["gather"] = lambda t, x, dim, index, sparse_grad=False: t.add("gather", x, index, dim=dim)


@aten("scatter")
def _scatter(t, x, dim, index, value, reduce=None):
    if isinstance(value, str) or reduce is not None:
        raise Unsupported("scatter with a tensor source or a reduce mode has no IR form")
    return t.add("scatter", x, index, dim=dim, value=value)


ATEN["mm"] = ATEN["mv"] = ATEN["dot"] = ATEN["matmul"] = lambda t, a, b: t.add("matmul", a, b)
ATEN["bmm"] = lambda t, a, b: t.add("bmm", a, b)


@aten("addmm")
def _addmm(t, bias, a, b, beta=1, alpha=1):
    """bias + a @ b (beta and alpha scale each term)."""
    product = t.add("matmul", a, b)
    product = product if alpha == 1 else t.add("mul", product, alpha)
    return t.add("add", bias if beta == 1 else t.add("mul", bias, beta), product)


@aten("linear")
def _linear(t, x, weight, bias=None):
    if bias is None:
        return t.add("matmul", x, t.add("transpose", weight, dim0=0, dim1=1))
    return t.add("linear", x, weight, bias)


def _arg_reduction(op: str) -> Handler:
    def handler(t, x, dim=None, keepdim=False):
        if dim is None:  # over every element: of the flattened tensor
            x, dim, keepdim = t.add("reshape", x, shape=[-1]) if t.type(x).rank != 1 else x, 0, False
        return t.add(op, x, dim=dim, keepdim=bool(keepdim))
    return handler


ATEN["argmax"], ATEN["argmin"] = _arg_reduction("argmax"), _arg_reduction("argmin")


@aten("cumsum")
def _cumsum(t, x, dim, dtype=None):
    return t.add("cumsum", x if dtype is None else t.cast(x, _dtype(dtype)), dim=dim)


@aten("var_mean")
def _var_mean(t, x, dims=None, *, correction=None, keepdim=False):
    """(var, mean): one IR node each (the IR's nodes have one output)."""
    correction = 1 if correction is None else correction
    if correction not in (0, 1):
        raise Unsupported(f"var_mean(correction={correction}) has no IR form")
    return tuple(t.add("var_mean", x, dims=_dims(t, x, dims), keepdim=bool(keepdim), correction=int(correction),
                       output=output) for output in VAR_MEAN_OUTPUTS)


# ---- tensors made from nothing ------------------------------------------------------------------
_FILLS = {"zeros_like": 0, "ones_like": 1, "zeros": 0, "ones": 1, "new_zeros": 0, "new_ones": 1,
          # empty tensors hold no defined values: zeros stand in for them.
          "empty_like": 0, "empty": 0, "new_empty": 0, "empty_strided": 0}
_VALUE_ARG = {"scalar_tensor": 0, "full": 1, "full_like": 1, "new_full": 2, "fill": 1}


def _fill_value(name: str, args: tuple, kwargs: dict):
    if name in _FILLS:
        return _FILLS[name]
    value = args[_VALUE_ARG[name]] if len(args) > _VALUE_ARG[name] else kwargs.get("fill_value", kwargs.get("value"))
    if not isinstance(value, (bool, int, float)):
        raise Unsupported(f"aten.{name} with a tensor fill value has no IR form")
    return value


# Every other IR op of one or two operands is the aten op of its name: an op added to ir/ops.py
# translates without a line here.
for _name, _op in OPS.items():
    if _op.kind in ("unary", "binary") and _name not in ATEN and hasattr(torch.ops.aten, _name):
        ATEN[_name] = (lambda n: lambda t, *args: t.add(n, *args))(_name)


# aten ops whose handler returns a tuple of IR values, read by the FX graph's getitem nodes.
MULTI_OUTPUT = {"var_mean"}


def _check_shape(t: _Translator, name: str, node: torch.fx.Node, out: str, meta: torch.Tensor) -> None:
    if tuple(t.type(out).shape) != tuple(meta.shape):
        raise TranslationError(f"aten.{name} ({node.name}): the IR gives shape {t.type(out).shape}, "
                               f"the FX graph {tuple(meta.shape)}")


def translate(gm: torch.fx.GraphModule) -> Translation:
    """The IR form of an aten FX graph (with `meta["val"]` on its nodes, as aot_autograd's are)."""
    t = _Translator()
    env: dict[torch.fx.Node, Any] = {}
    slots: list[int | None] = []
    outputs: list[str] = []

    def value(a):
        if isinstance(a, torch.fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        return a

    for node in gm.graph.nodes:
        meta = node.meta.get("val")
        if node.op == "placeholder":
            if not isinstance(meta, torch.Tensor):
                raise Unsupported(f"non-tensor graph input {node.name}: {meta!r}")
            env[node] = t.b.tensor(tuple(meta.shape), _dtype(meta.dtype), name=f"in{len(env)}")
            continue
        if node.op == "output":
            for o in node.args[0]:
                if o is None:
                    slots.append(None)
                else:
                    slots.append(len(outputs))
                    outputs.append(env[o])
            continue
        if node.op == "call_function" and node.target is operator.getitem and isinstance(env.get(node.args[0]), tuple):
            env[node] = env[node.args[0]][node.args[1]]  # one output of an op that returns several
            continue
        if node.op != "call_function" or not hasattr(node.target, "_overloadpacket"):
            raise Unsupported(f"FX node {node.format_node()} is not an aten op")
        name = node.target._overloadpacket.__name__
        if isinstance(meta, (tuple, list)) and name in MULTI_OUTPUT and all(isinstance(m, torch.Tensor) for m in meta):
            args, kwargs = value(node.args), {k: value(v) for k, v in node.kwargs.items()}
            outs = ATEN[name](t, *args, **kwargs)
            for out, m in zip(outs, meta):
                _check_shape(t, name, node, out, m)
            env[node] = tuple(t.cast(out, _dtype(m.dtype)) for out, m in zip(outs, meta))
            continue
        if not isinstance(meta, torch.Tensor):
            raise Unsupported(f"aten.{name} does not return one tensor")
        args, kwargs = value(node.args), {k: value(v) for k, v in node.kwargs.items()}
        if name in _FILLS or name in _VALUE_ARG:
            env[node] = t.constant(tuple(meta.shape), _dtype(meta.dtype), _fill_value(name, args, kwargs))
            continue
        if name not in ATEN:
            raise Unsupported(f"aten.{name} has no fuzzfuse IR form")
        kwargs = {k: v for k, v in kwargs.items() if k not in ("layout", "device", "pin_memory", "memory_format",
                                                                "non_blocking")}
        out = ATEN[name](t, *args, **kwargs)
        if not isinstance(out, str):  # a scalar result: only tensors flow between FX nodes
            raise Unsupported(f"aten.{name} folded to a scalar")
        _check_shape(t, name, node, out, meta)
        env[node] = t.cast(out, _dtype(meta.dtype))
    graph = Graph(tuple(t.b.inputs), tuple(t.b.nodes), tuple(outputs))
    live = graph.without_dead_code()
    # Every placeholder stays (aot_autograd passes them all); constants only where used.
    used = {i.name for i in live.inputs}
    inputs = tuple(i for i in graph.inputs if i.name.startswith("in") or i.name in used)
    constants = tuple(c for k, c in enumerate(t.constants) if f"c{k}" in used)
    return Translation(replace(live, inputs=inputs).validate(), constants, tuple(slots))


__all__ = ["translate", "Translation", "Constant", "Unsupported", "TranslationError", "ATEN"]
