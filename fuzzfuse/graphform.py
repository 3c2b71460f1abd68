"""The canonical form of a reduced graph, what a root-cause key (fuzzfuse.rootcause) says of a
failure that only its graph can name: the graph's own form (graph_form), or, for a wrong value, the
op that first computes it on the operands it received (culprit_form)."""
from __future__ import annotations

from dataclasses import replace

import torch

from .ir import OPS, Graph, TensorInput
from .ir.types import category
from .ir.values import logical_values
from .reduce.generalise import Generalisation, computed_operands

# Magnitudes from which fp16/bf16 products overflow and no fraction survives; integers beyond
# float32's exact range.
HUGE_FLOAT = 1e4
HUGE_INT = 2 ** 24


def special_classes(t: torch.Tensor) -> tuple[str, ...]:
    """The classes of special values a tensor holds: nan, +inf, -inf, -0, denormal, half (an exact
    .5 fraction: rounding ties), huge."""
    if t.dtype == torch.bool or t.numel() == 0:
        return ()
    if not t.is_floating_point():
        return ("huge",) if bool(((t > HUGE_INT) | (t < -HUGE_INT)).any()) else ()
    x = t.double()
    finite = torch.isfinite(x)
    mag = x.abs()
    found = {
        "nan": torch.isnan(x), "+inf": x == float("inf"), "-inf": x == float("-inf"),
        "-0": (x == 0) & torch.signbit(x), "denormal": (x != 0) & (mag < torch.finfo(t.dtype).tiny),
        "half": finite & (mag - mag.floor() == 0.5), "huge": finite & (mag >= HUGE_FLOAT),
    }
    return tuple(name for name, mask in found.items() if bool(mask.any()))


def _dtype(dtype: str, policy: str) -> str:
    if policy == "exact":
        return dtype
    if policy == "category":
        return ("bool", "int", "float")[category(dtype)]
    return ""


def _rank(rank: int) -> str:
    """0-d or not: a reduced graph keeps whatever rank its ops allow, but a 0-d tensor is a case
    of its own for a fuser (a scalar operand becomes one)."""
    return "0d" if rank == 0 else "nd"


def _op_attrs(node, shape: tuple[int, ...], out_rank: int, policy: str) -> str:
    """The attributes that make an op's behaviour: for reductions and normalizations the reduced
    dims (non-negative; "all" when they cover every dim of size above 1: the reducer shrinks the
    others to 1), keepdim and correction; a cast's dtype; whether a view or broadcast gives a 0-d
    tensor. Sizes and other attrs stay in the graph, not the key."""
    kind, attrs, rank = OPS[node.op].kind, node.attrs, len(shape)
    if kind in ("reduction", "normalization", "scan"):
        dims = sorted({d % max(rank, 1) for d in (attrs["dims"] if "dims" in attrs else (attrs["dim"],))})
        full = {d for d in range(rank) if shape[d] > 1} <= set(dims)
        parts = ["all" if kind == "reduction" and full else "dims=" + ",".join(map(str, dims))]
        parts += [f"{k}={attrs[k]}" for k in ("keepdim", "correction", "output") if k in attrs]
        return "[" + " ".join(parts) + "]"
    if kind == "cast":
        return f"[{_dtype(attrs['dtype'], policy) or 'cast'}]"
    if kind in ("view", "broadcast", "resize", "index", "matmul"):
        return f"[{_rank(out_rank)}]"
    return ""


# The kinds of mismatch whose key is the culprit on its operands: wrong numbers (a wrong shape,
# dtype or stride keeps the graph's form).
VALUE_KINDS = ("values", "nan-inf")


def _wildcards(graph: Graph, generalisation: Generalisation) -> tuple[dict[str, str], dict[str, str]]:
    """The filler ops (name -> `*kind`) and free input dtypes (name -> category) of a
    generalisation found on this graph."""
    return ({graph.nodes[k].name: f"*{kind}" for k, kind in generalisation.ops if k < len(graph.nodes)},
            {graph.inputs[k].name: c for k, c in generalisation.dtypes if k < len(graph.inputs)})


def _input(label: str, spec, dtypes: str, wild_dtypes: dict[str, str], rank: bool = True) -> str:
    """An input as a key writes it: dtype (by policy, a free one as its category), rank, layout
    kind, the special-value classes of its values, grad; a scalar by its dtype."""
    if not isinstance(spec, TensorInput):
        return f"{label}:scalar {_dtype(spec.dtype, dtypes)}"
    specials = ",".join(special_classes(logical_values(spec)))
    dtype = wild_dtypes.get(spec.name, spec.dtype) if dtypes == "exact" else _dtype(spec.dtype, dtypes)
    return (f"{label}:{dtype}/{_rank(len(spec.shape)) + '/' if rank else ''}{spec.layout.kind}"
            f"{'/' + specials if specials else ''}{'/grad' if spec.requires_grad else ''}")


def _arg(a, label: dict[str, str], dtypes: str) -> str:
    if isinstance(a, str):
        return label[a]
    # Shape rules read no values: a wrong shape is one bug whatever the constant.
    return "const" if dtypes == "none" else f"{type(a).__name__}:{a!r}"


def _op(node, types: dict, dtypes: str, name: str, args: list[str]) -> str:
    """An op as a key writes it: `name` (the op's, or its wildcard) with the attributes that make
    its behaviour, on `args`."""
    shape = types[node.args[0]].shape or () if node.args and isinstance(node.args[0], str) else ()
    return f"{name}{_op_attrs(node, shape, types[node.name].rank, dtypes)}({','.join(args)})"


def culprit_form(graph: Graph, position: int, dtypes: str, generalisation: Generalisation) -> str | None:
    """A wrong value's canonical form: the op that first computes it (its culprit, at `position`)
    on the operands it received. Each operand is described as graph_form describes an input:
    dtype, rank, layout kind, and the classes of special values in it, computed on the case's
    inputs (a value the ops before made, they made right: they are not the culprit). What came
    before the culprit only made those operands: NNC's frac of a negative value is one key whether
    sin, elu, cos or a cat fed it. A single-op graph keys as graph_form keys it. None where the
    graph cannot be interpreted here, or where the culprit is itself a wildcard (graph_form keys it
    then). `generalisation` was found on `graph`."""
    node = graph.nodes[position]
    wild_ops, wild_dtypes = _wildcards(graph, generalisation)
    if node.name in wild_ops:
        return None  # any op there fails: it observes a wrong value the probes missed, it is not the cause
    values = computed_operands(graph, position)
    if values is None:
        return None
    inputs = {i.name: i for i in graph.inputs}
    refs = list(dict.fromkeys(node.refs()))
    # Input operands in the graph's input order (as graph_form labels them), computed ones after.
    ordered = [i.name for i in graph.inputs if i.name in refs] + list(values)
    label = {name: f"i{k}" for k, name in enumerate(ordered)}
    types = graph.infer_types()
    described = []
    for name in ordered:
        if name in inputs:
            described.append(_input(label[name], inputs[name], dtypes, wild_dtypes))
            continue
        value = values[name]
        specials = ",".join(special_classes(value)) if isinstance(value, torch.Tensor) else ""
        # Its dtype is as free as the inputs it was made from; made in the kernel, it is laid out
        # as a contiguous input would be.
        free = dtypes == "exact" and bool(_made_from(graph, name) & set(wild_dtypes))
        dtype = _dtype(types[name].dtype, "category" if free else dtypes)
        described.append(f"{label[name]}:{dtype}/{_rank(types[name].rank)}/contiguous"
                         f"{'/' + specials if specials else ''}")
    op = _op(node, types, dtypes, node.op, [_arg(a, label, dtypes) for a in node.args])
    return "in:" + " ".join(described) + f" ops:n0={op}"


def _made_from(graph: Graph, name: str) -> set[str]:
    """The graph inputs a value is computed from."""
    producers = {n.name: n for n in graph.nodes}
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in producers:
            todo.extend(r for r in producers[current].refs() if r not in seen)
        seen.add(current)
    return seen - set(producers)


def graph_form(graph: Graph, dtypes: str = "exact", focus: bool = False,
               generalisation: Generalisation | None = None) -> str:
    """The canonical form of a (reduced) graph: its inputs (dtype by `dtypes`: exact, category or
    none; rank; layout kind; the special-value classes of their values; grad) and its ops in order,
    each with the attributes that make its behaviour and its arguments as positions or constants.
    A filler op of `generalisation` is written as a wildcard of its kind (`*unary`), a free dtype as
    its category, and the graph ends at its culprit (the first op whose value is wrong), when the
    generalisation was found on this graph.

    focus: for a failure seen downstream of its cause (a crash whose text comes from the kernel
    that received a bad value), the ops that feed no other op are folded into "consumer" of the
    values they read: the oneDNN rewrite of `x + 0` on a bool tensor is one bug whether relu, abs,
    neg or mean then rejects the bool. Inputs only a consumer reads are left out."""
    found = generalisation is not None and generalisation.applies_to(graph)
    wild_ops, wild_dtypes = _wildcards(graph, generalisation) if found else ({}, {})
    if found and generalisation.culprit and generalisation.culprit[0] < len(graph.nodes):
        graph = replace(graph, outputs=(graph.nodes[generalisation.culprit[0]].name,))
    g = graph.without_dead_code()
    types = g.infer_types()
    read = {r for n in g.nodes for r in n.refs()}
    producers = [n for n in g.nodes if n.name in read]
    kept = producers if focus and producers else list(g.nodes)
    sinks = [n for n in g.nodes if n not in kept]
    kept_names = {n.name for n in kept}
    needed = {r for n in kept for r in n.refs()}
    inputs = [i for i in g.inputs if i.name in needed or not (focus and producers)]
    label = {i.name: f"i{k}" for k, i in enumerate(inputs)}
    # A unary filler that feeds another op is only how the value reached it (NNC fuses only graphs
    # of two ops or more): the key reads through it, so that round of a half is one key whether a
    # filler came before it or an observer after it.
    through = [] if focus else [n for n in kept if wild_ops.get(n.name) == "*unary" and n.name in read
                                and len(n.refs()) == 1 and n.name not in g.outputs]
    kept = [n for n in kept if n not in through]
    label.update({n.name: f"n{k}" for k, n in enumerate(kept)})
    for n in through:  # in graph order: what it reads is labelled already
        label[n.name] = label[n.refs()[0]]

    # A downstream failure's inputs keep whatever rank its consumer needed (mean needs one).
    described = [_input(label[i.name], i, dtypes, wild_dtypes, rank=not (focus and producers)) for i in inputs]
    ops = []
    for n in kept:
        args = [_arg(a, label, dtypes) for a in n.args]
        # A wildcard stands for every op of its kind, the mirrored ones (lt for gt) among them:
        # its operands' order says nothing.
        name = wild_ops.get(n.name, n.op)
        ops.append(f"{label[n.name]}={_op(n, types, dtypes, name, sorted(args) if n.name in wild_ops else args)}")
    consumers = sorted({"consumer(" + ",".join(sorted({_arg(a, label, dtypes) for a in n.args
                                                       if not isinstance(a, str) or a in label})) + ")"
                        for n in sinks if set(n.refs()) & kept_names})
    return "in:" + " ".join(described) + " ops:" + "; ".join(ops + consumers)
