"""Emit a fuzzfuse Graph as nvfuser_direct Python source, following PyTorch semantics explicitly.

The output is one function in the style of nvFuser's own repro scripts::

    def nvfuser_fusion(fd: FusionDefinition) -> None:
        T0 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Half, is_cpu=False)
        T1 = fd.ops.exp(T0)
        T2 = fd.ops.cast(T1, dtype=DataType.Half)
        fd.add_output(T2)

The same text is what the backend executes, what CPU tests compile, and what a bug report
prints. This module imports nothing from nvFuser.

How a registry op lowers is declared with the op (`Op.nvfuser` in `fuzzfuse.ir.ops`): the name of
the `fd.ops` function it maps to one-to-one, or `"@recipe"` naming a composite in `RECIPES`
below. What this module adds is the PyTorch semantics nvFuser does not give for free:

- nvFuser computes half/bfloat16 in float32 and returns float32, and its type promotion treats
  Python scalars by their own dtype (a double scalar turns an int tensor into float64, where
  PyTorch gives float32). The emitter models the dtype nvFuser gives every value (`_model`) and
  casts each op's result to the dtype `Graph.infer_types()` says PyTorch gives, so every value
  rounds where eager rounds. Constants are defined with PyTorch's compute dtype (float32 for
  half/bfloat16/float32 math, float64 for double, int64 for integers).
- A reduction's output keeps its reduced axes in nvFuser (IterType::Reduction), and nvFuser's type
  promotion counts them as dims: a full reduction, 0-dim in PyTorch, then outranks a tensor of
  its category (int32 x + sum(int32 y) is int32 in PyTorch, int64 in nvFuser). Such operands are
  cast to the compute dtype first, as TensorIterator converts them (`Val.reduced`).
- PyTorch's `div` is true division (`truediv`), `div(rounding_mode="floor")` follows ATen's
  `div_floor_floating` / `div_floor_integer` step by step, mean is sum then division by the
  reduced numel, keepdim reductions reduce then broadcast back, softmax subtracts the max.

Two styles (a per-case choice): "direct" applies each op to its operands' own dtypes; "upcast"
(Thunder's) casts half/bfloat16 operands to float32 first. Both cast results back.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Union

import torch

from ..ir.graph import Graph, Node, ScalarInput, TensorInput
from ..ir.ops import OPS
from ..ir.types import DTYPES, INT_DTYPES, ValueType, is_float, normalize_dims
from ..ir.values import apply_layout
from . import base

STYLES = ("direct", "upcast")
# fuzzfuse dtype name -> nvfuser_direct DataType member.
NV_DTYPE = {"float32": "Float", "float16": "Half", "bfloat16": "BFloat16", "float64": "Double",
            "int32": "Int32", "int64": "Int", "bool": "Bool"}
HALF = ("float16", "bfloat16")
# Runtime scalar inputs are defined with the dtype of their Python kind (what fd.execute gets).
SCALAR_INPUT_DTYPE = {"float": "float64", "int": "int64", "bool": "bool"}


class Unsupported(base.Unsupported):
    """An op (or an op on these dtypes) that nvFuser cannot express; the backend reports the case
    as outcome "unsupported" instead of a crash."""

    def __init__(self, op: str, reason: str):
        super().__init__(f"{op}: {reason}")
        self.op = op
        self.reason = reason


# ---- input descriptors ---------------------------------------------------------------------------
def tensor_descriptor(sizes: tuple[int, ...] | list[int],
                      strides: tuple[int, ...] | list[int]) -> tuple[list[bool | None], list[int]]:
    """(contiguity, stride_order) exactly as nvFuser's `computeTensorDescriptor` (what
    `fd.from_pytorch` uses) derives them from a tensor's sizes and strides.

    Dims with stride 0 keep their logical position; the others are sorted by decreasing stride
    (stable). stride_order[i] is then rank-1 minus dim i's position in that order. Contiguity is
    listed in that allocation order: None for broadcast dims (size 1 or stride 0), otherwise
    whether the stride equals size*stride of the next non-broadcast dim inward (1 innermost).
    """
    sizes, strides = list(sizes), list(strides)
    if len(sizes) != len(strides):
        raise ValueError("sizes and strides differ in length")
    if any(s < 0 for s in strides):
        raise ValueError("negative strides are not supported by nvFuser")
    rank = len(sizes)
    ordered = sorted((i for i in range(rank) if strides[i] != 0), key=lambda i: -strides[i])
    for i in range(rank):  # stride-0 dims go back to their logical positions, in order
        if strides[i] == 0:
            ordered.insert(i, i)
    broadcast = [strides[i] == 0 or sizes[i] == 1 for i in ordered]
    contiguity: list[bool | None] = [None] * rank
    for pos, dim in enumerate(ordered):
        if broadcast[pos]:
            continue
        expected = 1
        for inner in range(pos + 1, rank):
            if not broadcast[inner]:
                expected = strides[ordered[inner]] * sizes[ordered[inner]]
                break
        contiguity[pos] = strides[dim] == expected
    stride_order = [0] * rank
    for pos, dim in enumerate(ordered):
        stride_order[dim] = rank - 1 - pos
    return contiguity, stride_order


def layout_strides(spec: TensorInput) -> tuple[int, ...]:
    """The strides `make_input` gives this input, computed on the meta device (no data)."""
    meta = torch.empty(spec.shape, dtype=DTYPES[spec.dtype], device="meta")
    return tuple(apply_layout(meta, spec.layout).stride())


# ---- nvFuser's dtype behaviour (a model, checked op by op on the GPU by tests/test_nvfuser.py) ----
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


def _result_type(vals: list["Val"], reduced_as_dims: tuple[bool, ...], float_op: bool, half_to_float: bool) -> str:
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


def nv_common_dtype(vals: list["Val"], float_op: bool = False, half_to_float: bool = True) -> str | None:
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


# Measured on nvfuser_direct 0.2.36 (H200): ops that nvFuser accepts on Half/BFloat16 tensors but
# cannot compile (NVRTC: "no instance of overloaded function relu matches (__half)", "no operator +
# matches __half + __half" in the reduction). PyTorch computes these in float32 and rounds once, so even the
# "direct" style casts their half operands to float32 (nvFuser's own frontends do too).
# tests/test_nvfuser.py::test_workarounds_are_still_needed says when one of them starts to compile.
NO_HALF = {"relu", "floor", "ceil", "round", "trunc", "frac", "silu", "isnan", "isinf", "clamp",
           "sum", "prod", "min", "var"}
# Ops nvFuser cannot compile on integer tensors (NVRTC: "more than one instance of overloaded
# function floor"); PyTorch defines them as the identity on integers, so that is what is emitted.
INT_IDENTITY = {"floor", "ceil", "round", "trunc"}

# nvFuser op name -> how its result dtype follows from its operands'.
_SAME = {"abs", "relu", "floor", "ceil", "round", "trunc", "frac", "bitwise_not", "sign", "set",
         "permute", "reshape", "broadcast", "expand", "squeeze", "segment_set", "max", "min"}
_FLOAT_UNARY = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
                "cos", "tan", "tanh", "sigmoid", "erf", "silu"}
_BOOL = {"isnan", "isinf", "isfinite", "signbit", "logical_not", "eq", "ne", "lt", "le", "gt", "ge",
         "logical_and", "logical_or"}
_PROMOTE = {"neg", "add", "sub", "mul", "pow", "maximum", "minimum", "remainder", "fmod", "bitwise_and",
            "bitwise_or", "bitwise_xor", "div"}  # neg: Half in, Float out
_FLOAT_BINARY = {"truediv", "atan2"}
_ACCUMULATE = {"sum", "prod"}  # integers accumulate in int64, half in float32
# Ops whose result dtype the emitter does not model: their result is always cast (a same-dtype
# cast is a `set` in nvFuser, harmless).
_UNMODELED = {"where", "clamp", "lerp", "addcmul", "var"}
# Reductions whose output keeps the reduced axes (see Val.reduced).
_REDUCE = {"sum", "prod", "max", "min", "var"}


def _model(op: str, operands: list["Val"]) -> str | None:
    tensors = [v for v in operands if v.shape is not None] or operands
    if op in _SAME:
        return tensors[0].dtype
    if op in _FLOAT_UNARY:
        return nv_common_dtype(tensors[:1], float_op=True)
    if op in _BOOL:
        return "bool"
    if op in _PROMOTE:
        return nv_common_dtype(operands)
    if op in _FLOAT_BINARY:
        return nv_common_dtype(operands, float_op=True)
    if op in _ACCUMULATE:
        d = tensors[0].dtype
        return None if d is None else ("int64" if not is_float(d) else "float32" if d in HALF else d)
    return None


# ---- the emitter ---------------------------------------------------------------------------------
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
class _DT:
    """A DataType argument in the source."""

    dtype: str


Arg = Union[Val, _DT, bool, int, float, list, tuple, str]


def _src(x: Arg) -> str:
    if isinstance(x, Val):
        return x.name
    if isinstance(x, _DT):
        return f"DataType.{NV_DTYPE[x.dtype]}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_src(v) for v in x) + "]"
    if isinstance(x, float):
        return repr(x)  # finite: graph constants are validated finite
    return repr(x)


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


def _literal(value: bool | int | float, dtype: str) -> bool | int | float:
    if is_float(dtype):
        return float(value)
    if dtype == "bool":
        return bool(value)
    return int(value)


@dataclass
class Emission:
    """The emitted fusion: `source` defines `nvfuser_fusion(fd)`; `input_names` lists the graph
    inputs in the order `fd.execute` takes them."""

    source: str
    style: str
    input_names: list[str]
    notes: list[str] = field(default_factory=list)

    def script(self, graph: Graph, strides: list[tuple[int, ...]] | None = None) -> str:
        """A standalone repro in the style of nvFuser's `repro_script_for`: the fusion, inputs with
        the exact shapes, dtypes and strides (random values: pin exact values separately), and
        a comparison with the eager expression it came from."""
        lines = ["import torch", "from nvfuser_direct import FusionDefinition, DataType", "", "",
                 self.source.rstrip(), "", "", "with FusionDefinition() as fd:", "    nvfuser_fusion(fd)",
                 "", "inputs = ["]
        tensor_specs = [i for i in graph.inputs if isinstance(i, TensorInput)]
        strides = strides or [layout_strides(i) for i in tensor_specs]
        k = 0
        for spec in graph.inputs:
            if isinstance(spec, ScalarInput):
                lines.append(f"    {spec.value!r},  # {spec.name}")
                continue
            st = tuple(strides[k])
            k += 1
            extent = 1 + sum((s - 1) * d for s, d in zip(spec.shape, st)) if all(spec.shape) else 0
            make = (f"torch.testing.make_tensor(({extent},), dtype=torch.{spec.dtype}, device='cuda')"
                    f".as_strided({tuple(spec.shape)}, {st})")
            lines.append(f"    {make},  # {spec.name}")
        lines += ["]", "outputs = fd.execute(inputs)", "for o in outputs:", "    print(o.dtype, tuple(o.shape))", ""]
        return "\n".join(lines)


class NvFuserEmitter:
    def __init__(self, graph: Graph, style: str = "direct", strides: list[tuple[int, ...]] | None = None,
                 static_sizes: bool = False):
        if style not in STYLES:
            raise ValueError(f"unknown emission style {style!r}; one of {STYLES}")
        self.graph = graph
        self.style = style
        self.static_sizes = static_sizes
        self.strides = strides
        self.types = graph.infer_types()
        self.lines: list[str] = []
        self.env: dict[str, Val] = {}
        self.inputs: set[str] = set()
        self.notes: list[str] = []
        self._cache: dict[tuple, Val] = {}
        self._count = 0

    # ---- source building ----------------------------------------------------------------------
    def assign(self, expr: str, dtype: str | None, shape: tuple[int, ...] | None, reduced: bool = False) -> Val:
        name = f"{'S' if shape is None else 'T'}{self._count}"
        self._count += 1
        self.lines.append(f"{name} = {expr}")
        return Val(name, dtype, shape, reduced)

    def op(self, name: str, *args: Arg, shape: tuple[int, ...] | None, nv_dtype: str | None = "model",
           **kwargs: Arg) -> Val:
        """`fd.ops.<name>(args, kwargs)`; nvFuser's result dtype is modelled unless `nv_dtype` says."""
        if nv_dtype == "model":
            nv_dtype = _model(name, [a for a in args if isinstance(a, Val)])
        text = ", ".join([_src(a) for a in args] + [f"{k}={_src(v)}" for k, v in kwargs.items()])
        return self.assign(f"fd.ops.{name}({text})", nv_dtype, shape, reduced=name in _REDUCE and shape == ())

    def cast(self, v: Val, dtype: str) -> Val:
        """v as `dtype`; casts are shared, so an upcast operand used twice is cast once."""
        if v.dtype == dtype:
            return v
        key = ("cast", v.name, dtype)
        if key not in self._cache:
            self._cache[key] = self.op("cast", v, nv_dtype=dtype, shape=v.shape, dtype=_DT(dtype))
        return self._cache[key]

    def const(self, value: bool | int | float, dtype: str) -> Val:
        value = _literal(value, dtype)
        key = ("const", repr(value), dtype)
        if key not in self._cache:
            self._cache[key] = self.assign(f"fd.define_scalar({value!r}, dtype={_src(_DT(dtype))})", dtype, None)
        return self._cache[key]

    def scalar(self, x: Val | bool | int | float, compute: str) -> Val:
        """A scalar operand (constant or runtime input) in the dtype PyTorch computes with."""
        dt = scalar_dtype(compute)
        if isinstance(x, Val):
            return self.cast(x, dt)
        return self.const(x, dt)

    def operand(self, x: Val | bool | int | float, compute: str, op: str = "") -> Val:
        """An op operand: a tensor (upcast from half/bfloat16 in the upcast style, and for ops in
        NO_HALF) or a scalar.

        When PyTorch computes in half/bfloat16, TensorIterator first converts every tensor operand
        to that dtype (an int32 2049 becomes 2048.0), then does the math in float32. nvFuser would
        convert an int32 or float32 operand straight to float32, so such operands are cast to the
        half dtype first. (Python scalars go to float32 directly in both.)

        A full reduction's output (`Val.reduced`) is cast to the compute dtype too: nvFuser ranks it
        by its reduced axes and would promote differently. (Not in float ops on integers: nvFuser
        turns every integer operand into float32 there, as PyTorch does.)"""
        if isinstance(x, Val) and x.shape is not None:
            if compute in HALF and x.dtype != compute:
                x = self.cast(x, compute)
            elif x.reduced and (is_float(compute) or op not in _FLOAT_UNARY | _FLOAT_BINARY):
                x = self.cast(x, compute)
            return self.upcast(x, op)
        return self.scalar(x, compute)

    def upcast(self, v: Val, op: str = "") -> Val:
        if v.dtype in HALF and (self.style == "upcast" or op in NO_HALF):
            return self.cast(v, "float32")
        return v

    def result(self, v: Val, dtype: str) -> Val:
        """Cast an op's result to PyTorch's result dtype (always when nvFuser's is not modelled)."""
        if v.dtype == dtype:
            return v
        return self.op("cast", v, nv_dtype=dtype, shape=v.shape, dtype=_DT(dtype))

    def keepdim(self, v: Val, dims: list[int], rank: int) -> Val:
        flags = [i in dims for i in range(rank)]
        shape = list(v.shape)
        for i in dims:
            shape.insert(i, 1)
        return self.op("broadcast", v, shape=tuple(shape), is_broadcast_dim=flags)

    # ---- the graph ----------------------------------------------------------------------------
    def emit(self) -> Emission:
        tensor_inputs = [i for i in self.graph.inputs if isinstance(i, TensorInput)]
        strides = self.strides or [layout_strides(i) for i in tensor_inputs]
        if len(strides) != len(tensor_inputs):
            raise ValueError("one stride tuple per tensor input is needed")
        k = 0
        for spec in self.graph.inputs:
            if isinstance(spec, TensorInput):
                v = self.define_tensor(spec, strides[k])
                k += 1
            else:
                dt = SCALAR_INPUT_DTYPE[spec.dtype]
                v = self.assign(f"fd.define_scalar(dtype={_src(_DT(dt))})", dt, None)
                self.notes.append(f"{spec.name}: runtime scalar input ({spec.dtype}, {NV_DTYPE[dt]})")
            self.env[spec.name] = v
            self.inputs.add(v.name)
        for node in self.graph.nodes:
            self.env[node.name] = self.node(node)
        added: set[str] = set()
        for name in self.graph.outputs:
            v = self.env[name]
            if v.name in self.inputs or v.name in added:
                v = self.op("set", v, shape=v.shape)  # outputs are fresh tensors, as eager's are
            added.add(v.name)
            self.lines.append(f"fd.add_output({v.name})")
        header = (f"# fuzzfuse graph {self.graph.digest()}, style={self.style}"
                  + (", static sizes" if self.static_sizes else ""))
        body = "\n".join("    " + line for line in [header] + self.lines)
        source = f"def nvfuser_fusion(fd: FusionDefinition) -> None:\n{body}\n"
        return Emission(source, self.style, [i.name for i in self.graph.inputs], self.notes)

    def define_tensor(self, spec: TensorInput, strides: tuple[int, ...]) -> Val:
        contiguity, stride_order = tensor_descriptor(spec.shape, strides)
        shape = [1 if s == 1 else (s if self.static_sizes else -1) for s in spec.shape]
        # As nvFuser's own repro scripts: stride_order only when it is not the row-major default.
        order = "" if stride_order == list(range(len(shape) - 1, -1, -1)) else f", stride_order={stride_order}"
        expr = (f"fd.define_tensor(shape={shape}, contiguity={contiguity}, dtype={_src(_DT(spec.dtype))}, "
                f"is_cpu=False{order})")
        return self.assign(expr, spec.dtype, tuple(spec.shape))

    def node(self, node: Node) -> Val:
        op = OPS[node.op]
        spec = getattr(op, "nvfuser", None)
        if not spec:
            raise Unsupported(node.op, "the op registry declares no nvFuser lowering")
        out = self.types[node.name]
        args = [self.env[a] if isinstance(a, str) else a for a in node.args]
        if spec.startswith("@"):
            recipe = RECIPES.get(spec[1:])
            if recipe is None:
                raise Unsupported(node.op, f"unknown nvFuser recipe {spec!r}")
            return recipe(self, node, args, out)
        if op.kind in ("unary", "binary", "ternary"):
            return self.elementwise(spec, args, out)
        if op.kind == "reduction":
            return self.reduction(spec, node, args[0], out)
        raise Unsupported(node.op, f"no generic lowering for kind {op.kind!r}; declare a recipe")

    def elementwise(self, name: str, args: list, out: ValueType) -> Val:
        compute = _compute_dtype(args)
        if name in INT_IDENTITY and args[0].dtype in INT_DTYPES:
            return self.op("set", args[0], shape=out.shape)
        operands = [self.operand(a, compute, name) for a in args]
        return self.result(self.op(name, *operands, shape=out.shape), out.dtype)

    def reduction(self, name: str, node: Node, x: Val, out: ValueType) -> Val:
        at = node.attrs
        rank = len(x.shape)
        dims = normalize_dims(list(at["dims"]) if "dims" in at else [at["dim"]], rank)
        x = self.upcast(x, name)
        kept = tuple(s for i, s in enumerate(x.shape) if i not in dims)
        extra = {"correction": int(at["correction"])} if "correction" in at else {}
        v = self.result(self.op(name, x, shape=kept, dims=dims, **extra), out.dtype)
        return self.keepdim(v, dims, rank) if at["keepdim"] else v


def _compute_dtype(args: list) -> str:
    """PyTorch's result_type over the operands (what TensorIterator computes in)."""
    from ..ir.types import result_type, scalar_kind

    types = [ValueType(a.shape, a.dtype if a.shape is not None else _kind(a.dtype)) if isinstance(a, Val)
             else ValueType(None, scalar_kind(a)) for a in args]
    return result_type(*types)


def _kind(scalar_dtype_name: str) -> str:
    return "float" if is_float(scalar_dtype_name) else "bool" if scalar_dtype_name == "bool" else "int"


# ---- recipes: composites and ops with attributes ---------------------------------------------
Recipe = Callable[[NvFuserEmitter, Node, list, ValueType], Val]
RECIPES: dict[str, Recipe] = {}


def recipe(name: str) -> Callable[[Recipe], Recipe]:
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
    return e.op("cast", x, nv_dtype=out.dtype, shape=out.shape, dtype=_DT(out.dtype))


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


def emit(graph: Graph, style: str = "direct", strides: list[tuple[int, ...]] | None = None,
         static_sizes: bool = False) -> Emission:
    """The graph as nvfuser_direct source. `strides`: one tuple per tensor input (default: what
    the inputs' layouts give). Raises Unsupported for an op nvFuser cannot express."""
    return NvFuserEmitter(graph, style, strides, static_sizes).emit()


def lowering_problems() -> dict[str, str]:
    """Registry ops whose declared lowering this module cannot use: op -> why (empty when all lower)."""
    problems = {}
    for name, op in OPS.items():
        spec = getattr(op, "nvfuser", None)
        if not spec:
            problems[name] = "no nvfuser lowering declared"
        elif spec.startswith("@") and spec[1:] not in RECIPES:
            problems[name] = f"unknown recipe {spec}"
        elif not spec.startswith("@") and op.kind not in ("unary", "binary", "ternary", "reduction"):
            problems[name] = f"kind {op.kind} needs a recipe"
    return problems


__all__ = ["STYLES", "NV_DTYPE", "Unsupported", "Emission", "NvFuserEmitter", "emit", "tensor_descriptor",
           "layout_strides", "RECIPES", "lowering_problems", "nv_common_dtype", "scalar_dtype"]
