"""Build graphs op by op, type-checked as they grow, and the composite patterns users write
(layer norm over any dim and its hand-written backward, batch norm over N/H/W, squeeze-excite, a
matmul with a layer's epilogue, a mask counted along a dim, a scaled softmax) as subgraphs of registry ops.

Composites are macros over primitive ops rather than ops of their own: a fuser sees exactly the
primitive sequence a user's module produces, and the reducer can take them apart.
"""
from __future__ import annotations

from .graph import Graph, GraphError, Input, Layout, Node, ScalarInput, TensorInput, Values
from .types import ValueType, scalar_kind


class GraphBuilder:
    def __init__(self) -> None:
        self.inputs: list[Input] = []
        self.nodes: list[Node] = []
        self.types: dict[str, ValueType] = {}

    def tensor(self, shape, dtype: str = "float32", layout: Layout | str = "contiguous",
               values: Values | None = None, name: str | None = None) -> str:
        name = name or f"x{sum(isinstance(i, TensorInput) for i in self.inputs)}"
        layout = Layout(layout) if isinstance(layout, str) else layout
        layout.check(len(shape))
        spec = TensorInput(name, tuple(shape), dtype, layout, values or Values(seed=len(self.inputs)))
        self.inputs.append(spec)
        self.types[name] = spec.type
        return name

    def scalar(self, value: float | int | bool, name: str | None = None) -> str:
        name = name or f"s{sum(isinstance(i, ScalarInput) for i in self.inputs)}"
        spec = ScalarInput(name, scalar_kind(value), value)
        self.inputs.append(spec)
        self.types[name] = spec.type
        return name

    def add(self, op: str, *args, **attrs) -> str:
        """Append `op(*args, **attrs)`; raises GraphError when the registry's type rule rejects it."""
        from .ops import OPS

        name = f"v{len(self.nodes)}"
        arg_types = [self.types[a] if isinstance(a, str) else ValueType(None, scalar_kind(a)) for a in args]
        if not OPS[op].accepts(arg_types, args):
            raise GraphError(f"{op} does not accept {arg_types}")
        try:
            self.types[name] = OPS[op].infer(arg_types, attrs)
        except (ValueError, KeyError, IndexError) as e:
            raise GraphError(f"{op}: {e}") from e
        self.nodes.append(Node(name, op, tuple(args), {k: tuple(v) if isinstance(v, list) else v
                                                        for k, v in attrs.items()}))
        return name

    def build(self, outputs: list[str]) -> Graph:
        return Graph(tuple(self.inputs), tuple(self.nodes), tuple(outputs)).without_dead_code().validate()


# ---- composites ------------------------------------------------------------------------------
def standardize(b: GraphBuilder, x: str, dims: list[int], variance: str = "var",
                eps: float = 1e-5) -> tuple[str, str]:
    """(x - mean) * rstd over `dims`, and rstd: the core every normalization shares.

    variance: "var" uses x.var(unbiased=False); "moments" uses E[x^2] - E[x]^2 clamped at 0, the form
    from the report this project grew from."""
    u = b.add("mean", x, dims=dims, keepdim=True)
    if variance == "moments":
        sq = b.add("mul", x, x)
        ex2 = b.add("mean", sq, dims=dims, keepdim=True)
        s = b.add("clamp_min", b.add("sub", ex2, b.add("mul", u, u)), 0.0)
    else:
        s = b.add("var", x, dims=dims, correction=0, keepdim=True)
    centered = b.add("sub", x, u)
    rstd = b.add("rsqrt", b.add("add", s, eps))
    return b.add("mul", centered, rstd), rstd


def layer_norm(b: GraphBuilder, x: str, dim: int, weight: str | None = None, bias: str | None = None,
               variance: str = "var", eps: float = 1e-5) -> str:
    """Normalize over one dim the way users hand-write it (e.g. over channels of NCHW)."""
    y, _ = standardize(b, x, [dim], variance, eps)
    if weight is not None:
        y = b.add("mul", y, weight)
    if bias is not None:
        y = b.add("add", y, bias)
    return y


def layer_norm_backward(b: GraphBuilder, x: str, grad: str, dim: int, weight: str,
                        eps: float = 1e-5) -> tuple[str, str, str]:
    """Layer norm's backward over one dim, as hand-written training kernels compute it: (dx, dw, db).
    dx needs reductions over `dim` (inner) and dw, db over every other dim (outer), all of the same
    tensors: the graph shape nvFuser's inner-outer persistent scheduler exists for."""
    rank = b.types[x].rank
    dim = dim % rank
    outer = [d for d in range(rank) if d != dim]
    xhat, rstd = standardize(b, x, [dim], eps=eps)
    wg = b.add("mul", grad, weight)
    c1 = b.add("mean", b.add("mul", wg, xhat), dims=[dim], keepdim=True)
    c2 = b.add("mean", wg, dims=[dim], keepdim=True)
    dx = b.add("mul", b.add("sub", b.add("sub", wg, c2), b.add("mul", xhat, c1)), rstd)
    dw = b.add("sum", b.add("mul", grad, xhat), dims=outer, keepdim=False)
    db = b.add("sum", grad, dims=outer, keepdim=False)
    return dx, dw, db


def batch_norm(b: GraphBuilder, x: str, weight: str | None = None, bias: str | None = None,
               eps: float = 1e-5) -> str:
    """Training-mode batch norm over (N, H, W) of an NCHW tensor, as primitive ops."""
    y, _ = standardize(b, x, [0] + list(range(2, b.types[x].rank)), eps=eps)
    if weight is not None:
        y = b.add("mul", y, b.add("index_none", weight, spec=[":", "None", "None"]))
    if bias is not None:
        y = b.add("add", y, b.add("index_none", bias, spec=[":", "None", "None"]))
    return y


def squeeze_excite(b: GraphBuilder, x: str, residual: str | None = None) -> str:
    """EfficientNet block tail: SiLU, squeeze (mean over H and W), sigmoid gate, residual add."""
    a = b.add("silu", x)
    squeezed = b.add("mean", a, dims=[2, 3], keepdim=True)
    y = b.add("mul", a, b.add("sigmoid", squeezed))
    return b.add("add", y, residual) if residual is not None else y


def mask_count(b: GraphBuilder, x: str, dim: int, mask: str = "cast", count: str = "cumsum") -> str:
    """A bool mask of x (`mask`: x cast to bool, or x != 0) counted along `dim` (`count`: cumsum or
    sum): the position ids and lengths models derive from an attention or padding mask
    (`mask.cumsum(-1)`, `mask.sum(-1)`), where a bool becomes an integer without a cast."""
    flags = b.add("cast", x, dtype="bool") if mask == "cast" else b.add("ne", x, 0)
    if count == "cumsum":
        return b.add("cumsum", flags, dim=dim)
    return b.add("sum", flags, dims=[dim], keepdim=False)


def scaled_softmax(b: GraphBuilder, x: str, scale: float, dim: int, log: bool = False) -> str:
    """softmax(x * scale) (or log_softmax): attention's 1/sqrt(d) scale, a temperature, or a
    negative one (softmin, a soft argmin over distances)."""
    return b.add("log_softmax" if log else "softmax", b.add("mul", x, scale), dim=dim)


def matmul_epilogue(b: GraphBuilder, a: str, w: str, bias: str | None = None, linear: bool = False,
                    activation: str | None = None, residual: str | None = None) -> str:
    """A dense layer's tail: a matmul (or linear, which takes the bias itself) of two graph inputs,
    then the pointwise epilogue a layer puts after it (bias, activation, residual). This is the
    shape nvFuser's matmul scheduler fuses: on Hopper it takes only operands that are fusion inputs
    and an epilogue whose every other input is an epilogue input."""
    y = b.add("linear", a, w, bias) if linear else b.add("matmul", a, w)
    if bias is not None and not linear:
        y = b.add("add", y, bias)
    if activation is not None:
        y = b.add(activation, y)
    if residual is not None:
        y = b.add("add", y, residual)
    return y
