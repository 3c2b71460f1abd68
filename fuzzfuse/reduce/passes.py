"""Reduction passes: plain functions `pass_(graph) -> Iterator[Graph]` yielding candidate graphs.

A pass proposes; the engine disposes. A pass may yield candidates that do not type-check or are not
simpler: the engine drops those (`admissible`, then `cost`) before it asks any question, so that an
ill-typed graph never reaches eager PyTorch and is never taken for the failure being reduced. Every
pass proposes its boldest change first, and yields candidates in a fixed order, which keeps the
reduction deterministic.

Removing an op keeps values where it can: the op becomes a new input of the same name holding its
exact eager value (with the same strides where a Layout can say so), so that everything downstream
computes exactly what it did before. That is what makes value-dependent failures (a NaN, a
mismatch) survive the removal of their prefix.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import math
from dataclasses import replace
from typing import Any, Callable, Iterator

import torch

from ..ir.graph import Graph, GraphError, Layout, Node, ScalarInput, TensorInput, Values
from ..ir.interp import interpret, with_leaves
from ..ir.ops import OPS
from ..ir.types import ValueType, scalar_kind
from ..ir.values import INLINE_LIMIT, apply_layout, logical_values, make_inputs
from .shapes import dim_classes, drop_axis, exact_values, irregular, resize

# Simplest first: what "replace with a simpler op" aims for. Ops not listed rank after these, in
# registry order.
SIMPLICITY = ("add", "mul", "neg", "sub", "abs", "relu", "exp", "log", "sqrt", "sigmoid", "tanh", "div",
              "maximum", "minimum", "eq", "lt", "where", "clamp", "sum", "amax", "amin", "mean", "cast",
              "softmax", "permute", "transpose", "reshape", "unsqueeze", "expand")
_RANKS = {name: i for i, name in enumerate(SIMPLICITY + tuple(n for n in OPS if n not in SIMPLICITY))}
# Every dtype moves toward float32 (engine.DTYPE_RANK's least), so that one bug found through
# inputs of different dtypes reduces to one graph, and so to one root-cause key. A failure that
# needs its dtype (an integer division, a bool mask) rejects the move: the coarse key keeps the
# output's dtype class.
SIMPLER_DTYPE = {"bfloat16": "float32", "float16": "float32", "float64": "float32", "int64": "int32",
                 "int32": "float32", "bool": "float32", "int8": "int32", "int16": "int32", "uint8": "int32",
                 "float8_e4m3fn": "float32", "float8_e5m2": "float32"}


def op_rank(op: str) -> int:
    return _RANKS[op]


# ---- admissibility ---------------------------------------------------------------------------------
@functools.cache
def _attr_params(op: str) -> tuple[frozenset, frozenset]:
    """(all, required) attribute names of an op, read off its eager callable's keyword parameters."""
    try:
        params = list(inspect.signature(OPS[op].eager).parameters.values())[OPS[op].arity:]
    except ValueError:  # a torch builtin: no attributes
        return frozenset(), frozenset()
    return (frozenset(p.name for p in params),
            frozenset(p.name for p in params if p.default is inspect.Parameter.empty))


def admissible(graph: Graph) -> bool:
    """Whether eager PyTorch accepts the graph: it type-checks by the registry's rules, every
    operand is one the op accepts (scalars only where allowed), its attributes are exactly those
    its eager form takes, and dim attributes are in range (the type rules read them modulo rank)."""
    try:
        types = graph.validate().infer_types()
    except GraphError:
        return False
    for n in graph.nodes:
        op = OPS[n.op]
        arg_types = [types[a] if isinstance(a, str) else _const_type(a) for a in n.args]
        allowed, required = _attr_params(n.op)
        if (len(n.args) != op.arity or not required <= n.attrs.keys() <= allowed
                or any(t.is_scalar and k not in op.scalar_positions for k, t in enumerate(arg_types))
                or not op.accepts(arg_types, n.args) or not _dims_in_range(n, arg_types[0].rank)):
            return False
    return True


def _dims_in_range(node: Node, rank: int) -> bool:
    a = node.attrs
    r = max(rank + (node.op == "unsqueeze"), 1)  # a 0-dim tensor takes dim 0 and -1, as in PyTorch
    dims = [a[k] for k in ("dim", "dim0", "dim1") if k in a] + list(a.get("dims", ()))
    return all(-r <= d < r for d in dims)


def _const_type(value: Any) -> ValueType:
    return ValueType(None, scalar_kind(value))


# ---- helpers ---------------------------------------------------------------------------------------
def _finish(graph: Graph) -> Graph:
    """Drop outputs that became plain inputs (nothing computes them), then dead code."""
    names = {i.name for i in graph.inputs}
    outputs = tuple(dict.fromkeys(o for o in graph.outputs if o not in names))
    return replace(graph, outputs=outputs).without_dead_code()


def _eager_values(graph: Graph) -> dict | None:
    """Every value of the graph on its own inputs; None when eager raises (then nothing is pinned).
    In a backward case, values that carry a gradient keep `requires_grad` (see `pinned`)."""
    try:
        with torch.enable_grad():
            return interpret(graph, with_leaves(graph, make_inputs(graph)))[0]
    except RuntimeError:
        return None


def _layout_of(value: torch.Tensor) -> Layout:
    """A Layout with the memory order and the stride-0 dims of `value` (ignoring size-1 dims, whose
    strides do not matter), or the step of a view that skips elements along one dim; else
    contiguous."""
    sliced = _sliced_layout(value)
    if sliced is not None:
        return sliced
    rank = value.dim()
    candidates = [Layout()] + [Layout("channels_last")] * (rank == 4) + [Layout("channels_last_3d")] * (rank == 5)
    stride0 = tuple(d for d in range(rank) if value.stride(d) == 0 and value.shape[d] > 1)
    if stride0:
        candidates.append(Layout("expanded", dims=stride0))
    if rank >= 2:
        candidates.append(Layout("permuted", perm=tuple(sorted(range(rank), key=lambda d: -value.stride(d)))))
    for layout in candidates:
        if _strides_kind(apply_layout(value.contiguous(), layout)) == _strides_kind(value):
            return layout
    return Layout()


def _sliced_layout(value: torch.Tensor) -> Layout | None:
    """The "sliced" Layout of a row-major view that skips elements along one dim (`x[:, ::3]`):
    dense inside that dim, its stride a multiple of the dense one. nvFuser's pad of a step-3 view
    is wrong; pinned dense, the view's value hid that from the probe of pad alone, and slice -> pad
    was keyed by its slice, a new bug beside the committed pad of a step-3 input (an H200
    campaign). None for any other strides."""
    dense = 1
    wide = [d for d in range(value.dim()) if value.shape[d] > 1]
    for k, d in enumerate(reversed(wide)):
        stride = value.stride(d)
        if stride == dense:
            dense *= value.shape[d]
            continue
        outer = list(reversed(wide))[k + 1:]
        bound = stride * (value.shape[d] - 1) + 1
        for e in outer:  # row-major outside the sliced dim, as a sliced Layout rebuilds it
            if value.stride(e) < bound:
                return None
            bound = value.stride(e) * (value.shape[e] - 1) + 1
        return Layout("sliced", dim=d, step=stride // dense) if stride > dense and stride % dense == 0 else None
    return None


def _strides_kind(t: torch.Tensor) -> tuple:
    wide = [d for d in range(t.dim()) if t.shape[d] > 1]
    return tuple(sorted(wide, key=lambda d: -t.stride(d))), tuple(t.stride(d) == 0 for d in wide)


def pinned(name: str, value: torch.Tensor, inherited: Layout = Layout()) -> TensorInput:
    """An input holding exactly `value`, with its strides where cheap, else the `inherited`
    layout (see `expanded_like`). A value that carried a gradient stays a gradient target, so a
    backward failure survives the removal of its prefix (drop_requires_grad takes it off where the
    failure does not need it)."""
    layout = _layout_of(value)
    if layout.kind == "contiguous":
        layout = inherited
    spec = TensorInput(name, tuple(value.shape), str(value.dtype).removeprefix("torch."), layout,
                       requires_grad=value.requires_grad)
    return replace(spec, values=exact_values(value.detach()))


def expanded_like(graph: Graph, name: str, value: torch.Tensor) -> Layout:
    """The layout a value pinned as an input keeps of the expanded inputs it is computed from:
    expanded along their expanded dims where its values repeat along them, else contiguous.
    Eager's value of cos(x) for an expanded x is dense, and nvFuser's var over an expanded dim
    is wrong only where that dim is still a broadcast. Pinned dense, cos -> var neither reduced
    to var nor had var fail alone, and it was keyed by cos: a new bug beside the committed var
    over an expanded dim (an H200 campaign). Both the reducer's pinning and generalise's probe
    use this."""
    import networkx as nx

    before = nx.ancestors(graph.to_networkx(), name)
    dims = sorted({d for spec in graph.inputs if isinstance(spec, TensorInput) and spec.name in before
                   and spec.layout.kind == "expanded" and tuple(spec.shape) == tuple(value.shape)
                   for d in spec.layout.dims})
    repeated = tuple(d for d in dims if value.shape[d] > 1 and bool((value == value.narrow(d, 0, 1)).all()))
    return Layout("expanded", dims=repeated) if repeated else Layout()


def _as_inputs(graph: Graph, names: list[str], env: dict) -> Graph:
    """Replace the named ops by inputs (same names) holding their eager values."""
    gone = set(names)
    kept = tuple(pinned(n, env[n], expanded_like(graph, n, env[n])) for n in names)
    return _finish(replace(graph, inputs=graph.inputs + kept,
                           nodes=tuple(n for n in graph.nodes if n.name not in gone)))


def _substitute(graph: Graph, old: str, new: Any) -> Graph:
    """Remove the op or input `old`; its users read `new` (a value name or a constant) instead."""
    nodes = tuple(replace(n, args=tuple(new if a == old and isinstance(a, str) else a for a in n.args))
                  for n in graph.nodes if n.name != old)
    return _finish(replace(graph, inputs=tuple(i for i in graph.inputs if i.name != old), nodes=nodes,
                           outputs=tuple(new if o == old else o for o in graph.outputs)))


def _with_input(graph: Graph, index: int, spec: TensorInput | ScalarInput) -> Graph:
    return replace(graph, inputs=graph.inputs[:index] + (spec,) + graph.inputs[index + 1:])


def _with_node(graph: Graph, node: Node) -> Graph:
    return replace(graph, nodes=tuple(node if n.name == node.name else n for n in graph.nodes))


def _tensor_inputs(graph: Graph) -> Iterator[tuple[int, TensorInput]]:
    return ((k, i) for k, i in enumerate(graph.inputs) if isinstance(i, TensorInput))


def _every_input(graph: Graph, dist: str) -> Graph:
    """Every tensor input drawn from `dist` ("zeros", "ones")."""
    for k, spec in _tensor_inputs(graph):
        graph = _with_input(graph, k, replace(spec, values=Values(dist)))
    return graph


def _every_dim(graph: Graph, size_of: Callable[[int], int]) -> Graph | None:
    """Every set of linked dims resized to `size_of(its size)`; None where that does not type-check."""
    everything: Graph | None = graph
    for size, positions in dim_classes(graph):
        if everything is not None and size_of(size) != size:
            everything = resize(everything, positions, size_of(size))
    return everything


def _chunks(items: list, granularity: int) -> list[list]:
    size = math.ceil(len(items) / granularity)
    return [items[k:k + size] for k in range(0, len(items), size)]


def _ddmin_chunks(items: list) -> Iterator[list]:
    """Zeller's ddmin schedule, complement first: halves, then quarters, ... then single items. The
    engine restarts the pass after each success, which plays the role of ddmin's shrinking step."""
    granularity = 2
    while items:
        yield from _chunks(items, granularity)
        if granularity >= len(items):
            return
        granularity = min(2 * granularity, len(items))


# ---- passes, cheap first ---------------------------------------------------------------------------
def prune_outputs(graph: Graph) -> Iterator[Graph]:
    """Drop chunks of outputs, ddmin style (and what only they needed)."""
    for chunk in _ddmin_chunks(list(graph.outputs)) if len(graph.outputs) > 1 else ():
        yield _finish(replace(graph, outputs=tuple(x for x in graph.outputs if x not in chunk)))


def ddmin_ops(graph: Graph) -> Iterator[Graph]:
    """Remove chunks of ops, each replaced by an input that holds its eager value."""
    env = _eager_values(graph) if len(graph.nodes) > 1 else None
    for chunk in _ddmin_chunks([n.name for n in graph.nodes]) if env is not None else ():
        yield _as_inputs(graph, chunk, env)


def truncate_suffix(graph: Graph) -> Iterator[Graph]:
    """Make one intermediate value the only output, dropping what only the old outputs needed
    (fx_minifier's "truncate suffix"). Positions in op order, coarse granularity first: a failing op
    buried under a chain of downstream ops goes in one step, not one bypass per op."""
    outputs = set(graph.outputs)
    names = [n.name for n in graph.nodes if n.name not in outputs]
    seen: set[int] = set()
    step = 1 << max(len(names).bit_length() - 1, 0)
    # Coarse cuts only: single-op cuts are ddmin's and bypass's work, and trying every position
    # each round cost more queries than it saved (benchmarks/reduce.py).
    finest = max(1, len(names) // 4)
    while names and step >= finest:
        for i in range(step - 1, len(names), step):
            if i not in seen:
                seen.add(i)
                yield _finish(replace(graph, outputs=(names[i],)))
        step //= 2


# Simpler sibling ops substitute_ops tries per node: each is one query on every round (a round follows
# any shape, dtype or value change), and for a bug tied to one op all of them fail.
MAX_SUBSTITUTES = 1


def bypass_ops(graph: Graph) -> Iterator[Graph]:
    """Replace an op by one of its operands (same type first)."""
    types = graph.infer_types()
    for n in graph.nodes:
        refs = list(dict.fromkeys(r for r in n.refs() if not types[r].is_scalar))
        for r in sorted(refs, key=lambda r: types[r] != types[n.name]):
            yield _substitute(graph, n.name, r)


def substitute_ops(graph: Graph) -> Iterator[Graph]:
    """Replace an op by one of the MAX_SUBSTITUTES simplest ops of the same kind and arity whose
    type rule gives the same output type. It rarely enables further reduction, so it runs among
    the last passes (as in C-Reduce), once the main passes reached their fixpoint."""
    for n in graph.nodes:
        simpler = (replaced(graph, n, name) for name in sorted(OPS, key=op_rank) if op_rank(name) < op_rank(n.op))
        yield from itertools.islice((g for g in simpler if g is not None), MAX_SUBSTITUTES)


def replaced(graph: Graph, node: Node, name: str) -> Graph | None:
    """`graph` with `node` computed by op `name` instead, when that op is of the same kind and arity
    and its type rule gives the same output type on the same operands (its attributes carried
    over), so that everything downstream type-checks as before; else None. What substitute_ops and
    generalisation (fuzzfuse.reduce.generalise) try."""
    op, other = OPS[node.op], OPS[name]
    if (other.kind, other.arity) != (op.kind, op.arity):
        return None
    types = graph.infer_types()
    arg_types = [types[a] if isinstance(a, str) else _const_type(a) for a in node.args]
    attrs = _adapt_attrs(node.attrs, name)
    try:
        if other.infer(arg_types, attrs) != types[node.name]:
            return None
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    candidate = _with_node(graph, replace(node, op=name, attrs=attrs))
    return candidate if admissible(candidate) else None


def _adapt_attrs(attrs: dict, op: str) -> dict:
    """Carry attributes over to a sibling op: `dims` <-> `dim` for prod, correction for var/std."""
    allowed, required = _attr_params(op)
    out = {k: v for k, v in attrs.items() if k in allowed}
    if "dims" in required and "dim" in attrs:
        out["dims"] = (attrs["dim"],)
    if "dim" in required and len(attrs.get("dims", ())) == 1:
        out["dim"] = attrs["dims"][0]
    if "correction" in required:
        out.setdefault("correction", 0)
    return out


def cut_prefix(graph: Graph) -> Iterator[Graph]:
    """Replace an op and its exclusive ancestors by an input holding the op's eager value, biggest
    cut first."""
    outputs = set(graph.outputs)
    names = [n.name for n in graph.nodes if n.name not in outputs]
    env = _eager_values(graph) if names else None
    if env is not None:
        yield from sorted((_as_inputs(graph, [n], env) for n in names), key=lambda g: g.size)


def dead_code(graph: Graph) -> Iterator[Graph]:
    """Drop ops no output needs and inputs nothing reads (other passes already do; a graph handed
    to `reduce` may not)."""
    yield _finish(graph)


def merge_inputs(graph: Graph) -> Iterator[Graph]:
    """Read one input where another of the same type was read: fewer inputs, same ops."""
    inputs = list(graph.inputs)
    for k, keep in enumerate(inputs):
        for other in inputs[k + 1:]:
            if other.type == keep.type:
                yield _substitute(graph, other.name, keep.name)


def shrink_shapes(graph: Graph) -> Iterator[Graph]:
    """Shrink each set of linked dims toward 1 (1 first, then by halves), then drop size-1 dims.
    The first candidate sets every dim to 1 at once: when the failure does not care about shapes,
    that is one query instead of one per dim."""
    classes = dim_classes(graph)
    if len(classes) > 1 and (everything := _every_dim(graph, lambda size: 1)) is not None:
        yield everything
    for size, positions in classes:
        for target in sorted({1, size - 1} | {size >> k for k in range(1, size.bit_length())} - {0}):
            candidate = resize(graph, positions, target)
            if candidate is not None:
                yield candidate
    for _, spec in _tensor_inputs(graph):
        for axis in range(len(spec.shape)):
            if spec.shape[axis] == 1 and (candidate := drop_axis(graph, spec.name, axis)) is not None:
                yield candidate


def simplify_dtypes_layouts(graph: Graph) -> Iterator[Graph]:
    """bf16/fp16/fp64 -> fp32 and int64 -> int32 (all at once, then one by one), and any layout ->
    contiguous, on inputs and cast targets."""
    dtype_moves = [(k, _retyped(spec)) for k, spec in _tensor_inputs(graph) if spec.dtype in SIMPLER_DTYPE]
    cast_moves = [replace(n, attrs={"dtype": SIMPLER_DTYPE[n.attrs["dtype"]]}) for n in graph.nodes
                  if n.op == "cast" and n.attrs["dtype"] in SIMPLER_DTYPE]
    layout_moves = [(k, replace(spec, layout=Layout())) for k, spec in _tensor_inputs(graph)
                    if spec.layout.kind != "contiguous"]
    for inputs, casts in ((dtype_moves, cast_moves), (layout_moves, [])):
        everything = graph
        for k, spec in inputs:
            everything = _with_input(everything, k, spec)
        for node in casts:
            everything = _with_node(everything, node)
        if len(inputs) + len(casts) > 1:
            yield everything
        yield from (_with_input(graph, k, spec) for k, spec in inputs)
        yield from (_with_node(graph, node) for node in casts)


def drop_requires_grad(graph: Graph) -> Iterator[Graph]:
    """Fewer gradient targets: every input forward-only at once (a backward failure never survives
    that, since its signature names the backward stage), then one input at a time."""
    marked = [(k, spec) for k, spec in _tensor_inputs(graph) if spec.requires_grad]
    if len(marked) > 1:
        everything = graph
        for k, spec in marked:
            everything = _with_input(everything, k, replace(spec, requires_grad=False))
        yield everything
    for k, spec in marked:
        yield _with_input(graph, k, replace(spec, requires_grad=False))


def _retyped(spec: TensorInput) -> TensorInput:
    dtype = SIMPLER_DTYPE[spec.dtype]
    if spec.values.exact is None:
        return replace(spec, dtype=dtype)
    return replace(spec, dtype=dtype, values=exact_values(logical_values(spec).to(getattr(torch, dtype))))


def simplify_attrs(graph: Graph) -> Iterator[Graph]:
    """Scalar inputs inlined as constants; constants toward 0 or 1; fewer reduction dims, keepdim
    off, correction 0, addcmul value 1."""
    for s in [i for i in graph.inputs if isinstance(i, ScalarInput)]:
        yield _substitute(graph, s.name, s.value)
        for v in _simpler_constants(s.value):
            yield _with_input(graph, graph.inputs.index(s), replace(s, value=v))
    for n in graph.nodes:
        for k, a in enumerate(n.args):
            if not isinstance(a, str):
                for v in _simpler_constants(a):
                    yield _with_node(graph, replace(n, args=n.args[:k] + (v,) + n.args[k + 1:]))
        a = n.attrs
        if OPS[n.op].kind == "reduction" and len(a.get("dims", ())) > 1:
            for d in a["dims"]:
                yield _with_node(graph, replace(n, attrs=dict(a, dims=tuple(x for x in a["dims"] if x != d))))
        if a.get("keepdim"):
            yield _with_node(graph, replace(n, attrs=dict(a, keepdim=False)))
        if a.get("correction"):
            yield _with_node(graph, replace(n, attrs=dict(a, correction=0)))
        if a.get("value", 1.0) != 1.0:
            yield _with_node(graph, replace(n, attrs=dict(a, value=1.0)))


def _simpler_constants(value: float | int | bool) -> list:
    """The 0 and 1 of the constant's own Python kind (changing kind would change type promotion)
    that are simpler than `value`: both for most constants, 0 for a 1, none for a 0."""
    simpler = (0, 1)[: 0 if value == 0 else 1 if value == 1 else 2]
    return [type(value)(v) for v in simpler]


def simplify_values(graph: Graph) -> Iterator[Graph]:
    """Inputs toward zeros, ones or arange; special values and scale off; else pin the values and
    set them to 1 (a -0.0 to +0.0) in ddmin chunks, keeping only the elements (a NaN, an inf, a
    signed zero) the failure needs.
    Every input to zeros (then ones) at once comes first: one query when values do not matter."""
    inputs = list(_tensor_inputs(graph))
    if len(inputs) > 1:
        yield from (_every_input(graph, dist) for dist in ("zeros", "ones"))
    for k, spec in inputs:
        v = spec.values
        for dist in ("zeros", "ones", "arange"):
            yield _with_input(graph, k, replace(spec, values=Values(dist)))
        if v.exact is None:
            if v.specials > 0:
                yield _with_input(graph, k, replace(spec, values=replace(v, specials=0.0)))
            if v.scale != 1.0:
                yield _with_input(graph, k, replace(spec, values=replace(v, scale=1.0)))
            if v.specials > 0:
                yield _with_input(graph, k, replace(spec, values=exact_values(logical_values(spec))))
            continue
        flat = logical_values(spec).reshape(-1)
        for chunk in _ddmin_chunks(torch.nonzero(irregular(flat)).reshape(-1).tolist()):
            simpler = flat.clone()
            simpler[chunk] = torch.where(flat[chunk] == 0, 0, 1).to(flat.dtype)
            yield _with_input(graph, k, replace(spec, values=exact_values(simpler)))


def collapse(graph: Graph) -> Iterator[Graph]:
    """The boldest moves of all, asked before any other pass: every input zeros (then ones), every
    dim halved, every dim 1. A failure that cares about neither values nor exact sizes (most
    compile crashes) then loses its big inputs in the first queries, and every later query runs on
    small, cheap ones: a 5-million-element nvFuser case cost 2.6 s a query, and its reduction ran
    out of time before the passes that shrink values and shapes (they come last in a round) were
    reached. Small inputs are left to those passes: the moves would cost queries and save none."""
    if sum(math.prod(spec.shape) for _, spec in _tensor_inputs(graph)) <= INLINE_LIMIT:
        return
    yield from (_every_input(graph, dist) for dist in ("zeros", "ones"))
    for size_of in (lambda size: max(1, size // 2), lambda size: 1):
        if (everything := _every_dim(graph, size_of)) is not None:
            yield everything


# Asked once, to their own fixpoint, before DEFAULT_PASSES (C-Reduce's "first" group).
FIRST_PASSES = (collapse,)
DEFAULT_PASSES = (prune_outputs, truncate_suffix, ddmin_ops, cut_prefix, dead_code, merge_inputs, shrink_shapes,
                  simplify_dtypes_layouts, drop_requires_grad, simplify_attrs, simplify_values)
# Run once the main passes are at their fixpoint, to a fixpoint of their own: after ddmin (which
# pins a removed op's value) and cut-prefix, they rarely shrink a graph, and each round re-asked them.
LAST_PASSES = (bypass_ops, substitute_ops)
