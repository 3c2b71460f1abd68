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
(`nvfuser_recipes`, where every recipe lives). The model of the dtypes nvFuser gives and of what it
cannot compile is `nvfuser_dtypes`. What these modules add is the PyTorch semantics nvFuser does not
give for free:

- nvFuser computes half/bfloat16 in float32 and returns float32, and its type promotion treats
  Python scalars by their own dtype (a double scalar turns an int tensor into float64, where
  PyTorch gives float32). The emitter models the dtype nvFuser gives every value
  (`nvfuser_dtypes.model`) and casts each op's result to the dtype `Graph.infer_types()` says
  PyTorch gives, so every value rounds where eager rounds. Constants are defined with PyTorch's
  compute dtype (float32 for half/bfloat16/float32 math, float64 for double, int64 for integers).
- A reduction's output keeps its reduced axes in nvFuser (IterType::Reduction), and nvFuser's type
  promotion counts them as dims: a full reduction, 0-dim in PyTorch, then outranks a tensor of
  its category (int32 x + sum(int32 y) is int32 in PyTorch, int64 in nvFuser). Such operands are
  cast to the compute dtype first, as TensorIterator converts them (`Val.reduced`).
- PyTorch's `div` is true division (`truediv`), `div(rounding_mode="floor")` follows ATen's
  `div_floor_floating` / `div_floor_integer` step by step, mean is sum then division by the
  reduced numel, keepdim reductions reduce then broadcast back, softmax subtracts the max.

Three styles (a per-case choice): "direct" applies each op to its operands' own dtypes; "upcast"
(Thunder's) casts half/bfloat16 operands to float32 first. Both work around what nvFuser cannot
compile (`nvfuser_dtypes.NO_HALF`, `INT_IDENTITY`), so that campaigns reach deeper graphs.
"faithful" is "direct" without the workarounds: every op on its native dtype, so that the class
of defects they hide is reported (once: `rootcause` keys an NVRTC error by its first compiler
error with op names folded out). All cast results back.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Union

import torch

from ..ir.graph import Graph, Node, ScalarInput, TensorInput
from ..ir.ops import OPS, reduced_dims
from ..ir.types import DTYPES, INT_DTYPES, ValueType, is_float
from ..ir.values import apply_layout
from .findings import Unsupported
from .nvfuser_dtypes import (DT, FLOAT_BINARY, FLOAT_UNARY, HALF, INT_IDENTITY, NO_HALF, NV_DTYPE, REDUCE, Val, model,
                             scalar_dtype)
from .nvfuser_recipes import RECIPES
from . import nvfuser_shape_recipes  # noqa: F401  (registers the resize/index/matmul/scan recipes in RECIPES)

STYLES = ("direct", "upcast", "faithful")
# Runtime scalar inputs are defined with the dtype of their Python kind (what fd.execute gets).
SCALAR_INPUT_DTYPE = {"float": "float64", "int": "int64", "bool": "bool"}


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


# ---- the emitter ---------------------------------------------------------------------------------
Arg = Union[Val, DT, bool, int, float, list, tuple, str]


def _src(x: Arg) -> str:
    if isinstance(x, Val):
        return x.name
    if isinstance(x, DT):
        if x.dtype not in NV_DTYPE:
            raise Unsupported(f"nvfuser_direct has no DataType for {x.dtype}")
        return f"DataType.{NV_DTYPE[x.dtype]}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_src(v) for v in x) + "]"
    if isinstance(x, float) and not math.isfinite(x):
        return f"float('{x}')"  # aten graphs carry inf constants; the script must run standalone
    return repr(x)


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
        # The direct and upcast styles work around what nvFuser cannot compile; faithful does not.
        self.workarounds = style != "faithful"
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
            nv_dtype = model(name, [a for a in args if isinstance(a, Val)])
        text = ", ".join([_src(a) for a in args] + [f"{k}={_src(v)}" for k, v in kwargs.items()])
        return self.assign(f"fd.ops.{name}({text})", nv_dtype, shape, reduced=name in REDUCE and shape == ())

    def cast(self, v: Val, dtype: str) -> Val:
        """v as `dtype`; casts are shared, so an upcast operand used twice is cast once."""
        if v.dtype == dtype:
            return v
        key = ("cast", v.name, dtype)
        if key not in self._cache:
            self._cache[key] = self.op("cast", v, nv_dtype=dtype, shape=v.shape, dtype=DT(dtype))
        return self._cache[key]

    def const(self, value: bool | int | float, dtype: str) -> Val:
        value = _literal(value, dtype)
        key = ("const", repr(value), dtype)
        if key not in self._cache:
            self._cache[key] = self.assign(f"fd.define_scalar({_src(value)}, dtype={_src(DT(dtype))})", dtype, None)
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
            elif x.reduced and (is_float(compute) or op not in FLOAT_UNARY | FLOAT_BINARY):
                x = self.cast(x, compute)
            return self.upcast(x, op)
        return self.scalar(x, compute)

    def upcast(self, v: Val, op: str = "") -> Val:
        if v.dtype in HALF and (self.style == "upcast" or (op in NO_HALF and self.workarounds)):
            return self.cast(v, "float32")
        return v

    def result(self, v: Val, dtype: str) -> Val:
        """Cast an op's result to PyTorch's result dtype (always when nvFuser's is not modelled)."""
        if v.dtype == dtype:
            return v
        return self.op("cast", v, nv_dtype=dtype, shape=v.shape, dtype=DT(dtype))

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
                v = self.assign(f"fd.define_scalar(dtype={_src(DT(dt))})", dt, None)
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
        if spec.dtype not in NV_DTYPE:
            raise Unsupported(f"{spec.name}: nvfuser_direct has no DataType for {spec.dtype}")
        contiguity, stride_order = tensor_descriptor(spec.shape, strides)
        shape = [1 if s == 1 else (s if self.static_sizes else -1) for s in spec.shape]
        # As nvFuser's own repro scripts: stride_order only when it is not the row-major default.
        order = "" if stride_order == list(range(len(shape) - 1, -1, -1)) else f", stride_order={stride_order}"
        expr = (f"fd.define_tensor(shape={shape}, contiguity={contiguity}, dtype={_src(DT(spec.dtype))}, "
                f"is_cpu=False{order})")
        return self.assign(expr, spec.dtype, tuple(spec.shape))

    def node(self, node: Node) -> Val:
        op = OPS[node.op]
        spec = getattr(op, "nvfuser", None)
        if not spec:
            raise Unsupported(f"{node.op}: the op registry declares no nvFuser lowering")
        out = self.types[node.name]
        args = [self.env[a] if isinstance(a, str) else a for a in node.args]
        if spec.startswith("@"):
            recipe = RECIPES.get(spec[1:])
            if recipe is None:
                raise Unsupported(f"{node.op}: unknown nvFuser recipe {spec!r}")
            return recipe(self, node, args, out)
        if op.kind in ("unary", "binary", "ternary"):
            return self.elementwise(spec, args, out)
        if op.kind == "reduction":
            return self.reduction(spec, node, args[0], out)
        raise Unsupported(f"{node.op}: no generic lowering for kind {op.kind!r}; declare a recipe")

    def elementwise(self, name: str, args: list, out: ValueType) -> Val:
        compute = _compute_dtype(args)
        if name in INT_IDENTITY and args[0].dtype in INT_DTYPES and self.workarounds:
            return self.op("set", args[0], shape=out.shape)
        operands = [self.operand(a, compute, name) for a in args]
        return self.result(self.op(name, *operands, shape=out.shape), out.dtype)

    def reduction(self, name: str, node: Node, x: Val, out: ValueType) -> Val:
        at = node.attrs
        rank = len(x.shape)
        dims = reduced_dims(at, rank)
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


__all__ = ["STYLES", "Unsupported", "Emission", "NvFuserEmitter", "emit", "tensor_descriptor", "layout_strides",
           "lowering_problems"]
