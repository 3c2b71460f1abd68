"""Shape surgery for the reducer: shrink a dim everywhere it must stay equal, or drop a size-1 dim of an
input, and fix up every attribute that depends on sizes or rank so that the graph still type-checks.

Dims are linked through the graph: `add(x, y)` ties x's and y's dims of the same size together, a
permute moves a dim, a reduction keeps the dims it does not reduce. `dim_classes` finds the sets of
(value, axis) positions that must change together (a union-find over how each op carries operand
axes to its output); `resize` changes one such set. Anything the fix-ups do not foresee is caught by
type inference, and the candidate is dropped.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from ..ir.graph import Graph, GraphError, Layout, Node, TensorInput, Values
from ..ir.ops import OPS
from ..ir.types import ValueType, normalize_dims, scalar_kind
from ..ir.values import encode_exact, logical_values

Pos = tuple[str, int]  # (value name, axis)
_ELEMENTWISE = ("unary", "binary", "ternary", "cast", "normalization", "scan")


def _arg_types(node: Node, types: dict[str, ValueType]) -> list[ValueType]:
    return [types[x] if isinstance(x, str) else ValueType(None, scalar_kind(x)) for x in node.args]


def _reduced(node: Node, rank: int) -> list[int]:
    a = node.attrs
    return normalize_dims(a["dims"] if "dims" in a else [a["dim"]], rank)


def axis_flow(node: Node, arg_types: list[ValueType], out: ValueType) -> list[tuple[int, int, int]]:
    """(operand index, operand axis, output axis) for each operand axis that reappears in the output."""
    op, a = OPS[node.op], node.attrs
    kind = op.kind
    if op.axis_map is not None:
        return op.axis_map(arg_types, a, out)
    if kind in _ELEMENTWISE:
        return [(k, i, i + out.rank - t.rank) for k, t in enumerate(arg_types) if not t.is_scalar
                for i in range(t.rank)]
    r = arg_types[0].rank
    if kind == "reduction":
        dims = _reduced(node, r)
        kept = [i for i in range(r) if a["keepdim"] or i not in dims]
        return [(0, i, kept.index(i)) for i in range(r) if i not in dims]
    if node.op == "unsqueeze":
        d = a["dim"] % (r + 1)
        return [(0, i, i + (i >= d)) for i in range(r)]
    if node.op == "expand":
        return [(0, i, len(a["sizes"]) - r + i) for i in range(r)]
    if node.op == "index_none":
        colons = [p for p, s in enumerate(a["spec"]) if s == ":"]
        return [(0, i, colons[i] if i < len(colons) else len(a["spec"]) + i - len(colons)) for i in range(r)]
    if node.op == "permute":
        return [(0, d % r, j) for j, d in enumerate(a["dims"])]
    if node.op == "transpose":
        d0, d1 = a["dim0"] % r, a["dim1"] % r
        return [(0, i, d1 if i == d0 else d0 if i == d1 else i) for i in range(r)]
    if node.op == "reshape":
        return [(0, i0, j0) for i0, i1, j0, j1 in _groups(arg_types[0].shape, out.shape) or ()
                if i1 - i0 == 1 and j1 - j0 == 1]
    return []


def _groups(src: tuple[int, ...], dst: tuple[int, ...]) -> list[tuple[int, int, int, int]] | None:
    """Split a reshape into runs of source dims and destination dims with equal products."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        i0, j0, pi, pj = i, j, 1, 1
        if i < len(src):
            pi, i = src[i], i + 1
        if j < len(dst):
            pj, j = dst[j], j + 1
        while pi != pj:
            if pi < pj and i < len(src):
                pi, i = pi * src[i], i + 1
            elif pj < pi and j < len(dst):
                pj, j = pj * dst[j], j + 1
            else:
                return None
        groups.append((i0, i, j0, j))
    return groups


def regroup(src: tuple[int, ...], dst: tuple[int, ...], new_src: tuple[int, ...]) -> tuple[int, ...] | None:
    """The reshape target for a resized source that keeps the old target's rank: each group of
    target dims keeps the factors that still divide its group's new size."""
    out: list[int] = []
    for i0, i1, j0, j1 in _groups(src, dst) or ():
        n = math.prod(new_src[i0:i1])
        if j0 == j1:
            if n != 1:
                return None
            continue
        for d in dst[j0:j1 - 1]:
            g = math.gcd(d, n)
            out.append(g)
            n //= g
        out.append(n)
    return tuple(out) if math.prod(out) == math.prod(new_src) and len(out) == len(dst) else None


def dim_classes(graph: Graph) -> list[tuple[int, list[Pos]]]:
    """Sets of positions of one size > 1 that must stay equal, each with its size, in order of first
    appearance (inputs first)."""
    types = graph.infer_types()
    parent: dict[Pos, Pos] = {}

    def find(p: Pos) -> Pos:
        while parent.setdefault(p, p) != p:
            p = parent[p]
        return p

    order = [(i.name, ax) for i in graph.inputs if isinstance(i, TensorInput) for ax in range(len(i.shape))]
    for n in graph.nodes:
        arg_types, out = _arg_types(n, types), types[n.name]
        order += [(n.name, ax) for ax in range(out.rank)]
        for k, i, j in axis_flow(n, arg_types, out):
            if arg_types[k].shape[i] == out.shape[j] > 1:
                parent[find((n.args[k], i))] = find((n.name, j))
    classes: dict[Pos, list[Pos]] = {}
    for p in order:
        if types[p[0]].shape[p[1]] > 1:
            classes.setdefault(find(p), []).append(p)
    return [(types[ps[0][0]].shape[ps[0][1]], ps) for ps in classes.values()]


def _checked(graph: Graph, inputs: tuple, nodes: list[Node]) -> Graph | None:
    """`graph` with new inputs and nodes (its outputs and upstream-gradient seed kept), if valid."""
    try:
        return replace(graph, inputs=inputs, nodes=tuple(nodes)).validate()
    except GraphError:
        return None


def resize(graph: Graph, positions: list[Pos], size: int) -> Graph | None:
    """Set every position in `positions` to `size`: inputs change shape (exact values are cut down
    to a slice), expand sizes follow, reshape targets are regrouped."""
    members = set(positions)
    inputs = tuple(_resize_input(i, [ax for v, ax in members if v == i.name], size)
                   if isinstance(i, TensorInput) else i for i in graph.inputs)
    old, types = graph.infer_types(), {i.name: i.type for i in inputs}
    nodes: list[Node] = []
    for n in graph.nodes:
        attrs = n.attrs
        if n.op == "expand":
            attrs = {"sizes": tuple(size if (n.name, p) in members and s != -1 else s
                                    for p, s in enumerate(attrs["sizes"]))}
        elif n.op == "reshape":
            shape = regroup(old[n.args[0]].shape, old[n.name].shape, types[n.args[0]].shape)
            if shape is None:
                return None
            attrs = {"shape": tuple(-1 if s == -1 else shape[p] for p, s in enumerate(attrs["shape"]))}
        nodes.append(replace(n, attrs=attrs))
        try:
            types[n.name] = OPS[n.op].infer(_arg_types(n, types), attrs)
        except (ValueError, KeyError, IndexError, TypeError):
            return None
    return _checked(graph, inputs, nodes)


def _resize_input(spec: TensorInput, axes: list[int], size: int) -> TensorInput:
    if not axes:
        return spec
    shape = tuple(size if ax in axes else s for ax, s in enumerate(spec.shape))
    if spec.values.exact is None:
        return replace(spec, shape=shape)
    value = logical_values(spec)
    for ax in axes:
        # Keep the window that starts at the first element other than 0 or 1 (a NaN, say): values
        # the failure may need survive shrinking better there than in a plain leading slice.
        odd = irregular(value).movedim(ax, 0).reshape(value.shape[ax], -1).any(dim=1)
        start = min(int(odd.int().argmax()), value.shape[ax] - size) if bool(odd.any()) else 0
        value = value.narrow(ax, start, size)
    return replace(spec, shape=shape, values=exact_values(value))


def irregular(values: torch.Tensor) -> torch.Tensor:
    """Where `values` is neither +0 nor 1, the values an input is simplified toward (NaN and -0.0
    are irregular: a lost zero's sign is a failure of its own, and a repro of 8,194 random signed
    zeros is not short). Elementwise, not per Python element: pinned inputs can hold millions."""
    odd = (values != 0) & (values != 1)
    if not values.is_floating_point():
        return odd
    # ATen has no signbit of float8; widening keeps every value and its sign.
    wide = values.float() if values.element_size() == 1 else values
    return odd | ((wide == 0) & torch.signbit(wide))


def exact_values(value: torch.Tensor) -> Values:
    """Values pinned to `value`. The dense copy matters: `encode_exact` cannot view a size-1 tensor
    with a stride-0 last dim (an expanded 0-dim value) as bytes."""
    return Values(exact=encode_exact(value.detach().clone(memory_format=torch.contiguous_format)))


def drop_axis(graph: Graph, name: str, axis: int) -> Graph | None:
    """Remove size-1 `axis` of input `name`, following it through the graph: each node either loses
    the same dim (attrs renumbered) or absorbs it (broadcast, reshape), checked by type inference."""
    inputs = tuple(_drop_input(i, axis) if i.name == name else i for i in graph.inputs)
    old, types = graph.infer_types(), {i.name: i.type for i in inputs}
    gone: dict[str, int] = {name: axis}
    nodes: list[Node] = []
    for n in graph.nodes:
        hits = [(k, gone[x]) for k, x in enumerate(n.args) if isinstance(x, str) and x in gone]
        arg_types = _arg_types(n, types)
        options = _drop_options(n, [old[x] if isinstance(x, str) else None for x in n.args], old[n.name],
                                hits) if hits else [(n.attrs, None)]
        for attrs, out_axis in options:
            try:
                t = OPS[n.op].infer(arg_types, attrs)
            except (ValueError, KeyError, IndexError, TypeError):
                continue
            want = old[n.name].shape if out_axis is None else _without(old[n.name].shape, out_axis)
            if t.shape == want:
                break
        else:
            return None
        types[n.name] = t
        if out_axis is not None:
            gone[n.name] = out_axis
        nodes.append(replace(n, attrs=attrs))
    return _checked(graph, inputs, nodes)


def _without(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return shape[:axis] + shape[axis + 1:]


def _drop_options(n: Node, arg_types: list, out: ValueType, hits: list[tuple[int, int]]) -> list:
    """Ways to rewrite node `n` when operand axes `hits` disappear: (attrs, output axis that
    disappears or None), tried in order."""
    kind, a = OPS[n.op].kind, n.attrs
    k, ax = hits[0]
    r = arg_types[0].rank if arg_types[0] is not None else 0
    if kind in ("unary", "binary", "ternary", "cast"):
        return [(a, None)] + [(a, x + out.rank - arg_types[k_].rank) for k_, x in hits]
    if kind in ("normalization", "scan"):
        d = a["dim"] % r
        return [] if d == ax else [({"dim": d - (d > ax)}, ax)]
    if kind == "reduction":
        dims = _reduced(n, r)
        rest = [d - (d > ax) for d in dims if d != ax]
        if not rest:
            return []
        attrs = dict(a, **({"dims": tuple(rest)} if "dims" in a else {"dim": rest[0]}))
        if ax in dims:
            return [(attrs, ax if a["keepdim"] else None)]
        return [(attrs, ax if a["keepdim"] else ax - sum(d < ax for d in dims))]
    if n.op == "unsqueeze":
        d = a["dim"] % (r + 1)
        return [({"dim": d}, ax + 1)] if d <= ax else [({"dim": d - 1}, ax)]
    if n.op == "expand":
        p = len(a["sizes"]) - r + ax
        return [({"sizes": _without(a["sizes"], p)}, p), (a, None)]
    if n.op == "index_none":
        colons = [p for p, s in enumerate(a["spec"]) if s == ":"]
        if ax >= len(colons):
            return [(a, len(a["spec"]) + ax - len(colons))]
        return [({"spec": _without(a["spec"], colons[ax])}, colons[ax])]
    if n.op == "permute":
        dims = [d % r for d in a["dims"]]
        return [({"dims": tuple(d - (d > ax) for d in dims if d != ax)}, dims.index(ax))]
    if n.op == "transpose":
        d0, d1 = a["dim0"] % r, a["dim1"] % r
        return [] if ax in (d0, d1) else [({"dim0": d0 - (d0 > ax), "dim1": d1 - (d1 > ax)}, ax)]
    return [(a, None)]  # reshape keeps its target: the element count is unchanged


def _drop_input(spec: TensorInput, axis: int) -> TensorInput:
    """The input without size-1 `axis`; its logical bytes are unchanged, so exact values carry over."""
    lay, shift = spec.layout, (lambda d: d - (d > axis))
    if lay.kind == "permuted":
        lay = Layout("permuted", perm=tuple(shift(d) for d in lay.perm if d != axis))
    elif lay.kind == "sliced" and lay.dim != axis:
        lay = Layout("sliced", dim=shift(lay.dim), step=lay.step)
    elif lay.kind == "expanded" and set(lay.dims) - {axis}:
        lay = Layout("expanded", dims=tuple(shift(d) for d in lay.dims if d != axis))
    else:
        lay = Layout() if lay.kind != "contiguous" else lay
    return replace(spec, shape=_without(spec.shape, axis), layout=lay)
