"""The graph IR: tensor and scalar inputs, op nodes, outputs; JSON with a schema version.

A graph is plain data. Loading JSON validates every field against the op registry and never
evaluates anything, so a shared corpus file cannot run code.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Union

import networkx as nx

from .types import DTYPES, FLOAT_DTYPES, PY_KINDS, ValueType, scalar_kind
from .untrusted import GraphError, record

SCHEMA_VERSION = 1
LAYOUTS = ("contiguous", "channels_last", "channels_last_3d", "permuted", "sliced", "expanded")
# The last four aim at narrow triggers: every element a special value, one special value among
# normal ones, exact halves (rounding ties), subnormals only (ir/values.py draws them).
DISTRIBUTIONS = ("normal", "uniform", "ones", "zeros", "arange", "specials", "lone_special", "halves", "denormals")


# A bound on a case's total input elements, so that a hand-edited or hostile file (10**12 elements)
# is refused on load instead of exhausting memory, or being reported "still failing" and picked by
# triage as a bucket's smallest repro. 2**31 is far above anything generated (GPU shapes stay near a
# few million elements) and is where 32-bit indexing ends, so a real bug near it can still be kept.
MAX_INPUT_ELEMENTS = 2**31


@dataclass(frozen=True)
class Layout:
    """How an input tensor sits in memory; enough to rebuild its exact strides.

    permuted: `perm` lists dims from outermost to innermost in memory.
    sliced: the tensor is `base[..., ::step, ...]` along `dim` of a larger base.
    expanded: `dims` have stride 0 (the tensor is an expand of a size-1 dim).
    """

    kind: str = "contiguous"
    perm: tuple[int, ...] | None = None
    dim: int | None = None
    step: int | None = None
    dims: tuple[int, ...] | None = None

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items() if v is not None}

    @staticmethod
    def from_json(d: dict, rank: int) -> "Layout":
        kind = record(d, "layout", {"kind", "perm", "dim", "step", "dims"}).get("kind", "contiguous")
        if kind not in LAYOUTS:
            raise GraphError(f"unknown layout {kind!r}")
        lay = Layout(
            kind=kind,
            perm=_int_tuple(d.get("perm")),
            dim=_opt_int(d.get("dim")),
            step=_opt_int(d.get("step")),
            dims=_int_tuple(d.get("dims")),
        )
        lay.check(rank)
        return lay

    def check(self, rank: int) -> None:
        ok = {
            "contiguous": True,
            "channels_last": rank == 4,
            "channels_last_3d": rank == 5,
            "permuted": self.perm is not None and sorted(self.perm) == list(range(rank)),
            "sliced": self.dim is not None and 0 <= self.dim < rank and (self.step or 0) >= 1,
            "expanded": self.dims is not None and all(0 <= d < rank for d in self.dims),
        }[self.kind]
        if not ok:
            raise GraphError(f"layout {self.to_json()} does not fit a rank-{rank} tensor")


@dataclass(frozen=True)
class Values:
    """How an input's values are made: a seeded distribution with special values mixed in, or the
    exact little-endian bytes of the logical (contiguous) tensor, base64-encoded."""

    dist: str = "normal"
    specials: float = 0.0
    seed: int = 0
    scale: float = 1.0
    exact: str | None = None

    def to_json(self) -> dict:
        if self.exact is not None:
            return {"exact": self.exact}
        return {"dist": self.dist, "specials": self.specials, "seed": self.seed, "scale": self.scale}

    @staticmethod
    def from_json(d: dict) -> "Values":
        if "exact" in record(d, "values", {"exact"} if "exact" in d else {"dist", "specials", "seed", "scale"}):
            if not isinstance(d["exact"], str):
                raise GraphError("exact values must be a base64 string")
            return Values(exact=d["exact"])
        dist = d.get("dist", "normal")
        if dist not in DISTRIBUTIONS:
            raise GraphError(f"unknown value distribution {dist!r}")
        return Values(dist, float(d.get("specials", 0.0)), int(d.get("seed", 0)), float(d.get("scale", 1.0)))


@dataclass(frozen=True)
class TensorInput:
    name: str
    shape: tuple[int, ...]
    dtype: str
    layout: Layout = Layout()
    values: Values = Values()
    requires_grad: bool = False

    @property
    def type(self) -> ValueType:
        return ValueType(self.shape, self.dtype)

    def to_json(self) -> dict:
        d = {"kind": "tensor", "name": self.name, "shape": list(self.shape), "dtype": self.dtype,
             "layout": self.layout.to_json(), "values": self.values.to_json()}
        if self.requires_grad:
            d["requires_grad"] = True
        return d


@dataclass(frozen=True)
class ScalarInput:
    """A runtime scalar argument (a `float`/`int`/`bool` parameter of the fused function)."""

    name: str
    dtype: str
    value: float | int | bool

    @property
    def type(self) -> ValueType:
        return ValueType(None, self.dtype)

    def to_json(self) -> dict:
        return {"kind": "scalar", "name": self.name, "dtype": self.dtype, "value": self.value}


Input = Union[TensorInput, ScalarInput]
# A node argument is the name of a graph value, or a Python constant.
Arg = Union[str, float, int, bool]


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    args: tuple[Arg, ...]
    attrs: dict[str, Any] = field(default_factory=dict)

    def refs(self) -> list[str]:
        return [a for a in self.args if isinstance(a, str)]

    def to_json(self) -> dict:
        return {"name": self.name, "op": self.op, "args": list(self.args), "attrs": _jsonable(self.attrs)}


@dataclass(frozen=True)
class Graph:
    inputs: tuple[Input, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    # Seeds the upstream gradients of a backward case (inputs marked requires_grad), so that a
    # case and its repro backpropagate exactly the same values.
    grad_seed: int = 0

    # ---- structure -------------------------------------------------------------------------
    def input(self, name: str) -> Input:
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(name)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def to_networkx(self) -> nx.DiGraph:
        g = nx.DiGraph()
        for i in self.inputs:
            g.add_node(i.name)
        for n in self.nodes:
            g.add_node(n.name)
            for r in n.refs():
                g.add_edge(r, n.name)
        return g

    def users(self, name: str) -> list[Node]:
        return [n for n in self.nodes if name in n.refs()]

    def without_dead_code(self) -> "Graph":
        """Drop nodes no output depends on and inputs nothing uses."""
        g = self.to_networkx()
        live = set(self.outputs)
        for o in self.outputs:
            live |= nx.ancestors(g, o)
        return replace(self, inputs=tuple(i for i in self.inputs if i.name in live),
                       nodes=tuple(n for n in self.nodes if n.name in live))

    def renamed(self) -> "Graph":
        """Canonical names (tensors x0.., scalars s0.., ops v0.. in order): readable repros, and
        graphs that differ only in names hash alike."""
        names: dict[str, str] = {}
        counts = {"x": 0, "s": 0}
        for i in self.inputs:
            prefix = "x" if isinstance(i, TensorInput) else "s"
            names[i.name] = f"{prefix}{counts[prefix]}"
            counts[prefix] += 1
        for k, n in enumerate(self.nodes):
            names[n.name] = f"v{k}"
        inputs = tuple(replace(i, name=names[i.name]) for i in self.inputs)
        nodes = tuple(replace(n, name=names[n.name], args=tuple(names[a] if isinstance(a, str) else a for a in n.args))
                      for n in self.nodes)
        return replace(self, inputs=inputs, nodes=nodes, outputs=tuple(names[o] for o in self.outputs))

    @property
    def requires_grad(self) -> bool:
        """A backward case: some input wants its gradient compared."""
        return any(isinstance(i, TensorInput) and i.requires_grad for i in self.inputs)

    @property
    def size(self) -> int:
        """Op count: what the reducer minimizes and reports."""
        return len(self.nodes)

    # ---- typing ----------------------------------------------------------------------------
    def infer_types(self) -> dict[str, ValueType]:
        """Static shape and dtype of every value, by the registry's type rules."""
        from .ops import OPS  # the registry imports this module

        types: dict[str, ValueType] = {i.name: i.type for i in self.inputs}
        for n in self.nodes:
            if n.op not in OPS:
                raise GraphError(f"unknown op {n.op!r}")
            arg_types = [types[a] if isinstance(a, str) else ValueType(None, scalar_kind(a)) for a in n.args]
            try:
                types[n.name] = OPS[n.op].infer(arg_types, n.attrs)
            except (ValueError, KeyError, TypeError, IndexError) as e:
                raise GraphError(f"node {n.name} ({n.op}): {e}") from e
        return types

    def validate(self) -> "Graph":
        names = [i.name for i in self.inputs] + [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise GraphError("duplicate value names")
        defined: set[str] = {i.name for i in self.inputs}
        for n in self.nodes:
            for r in n.refs():
                if r not in defined:
                    raise GraphError(f"node {n.name} uses {r!r} before it is defined")
            defined.add(n.name)
        if not self.outputs or any(o not in defined for o in self.outputs):
            raise GraphError("outputs must name defined values")
        elements = sum(math.prod(i.shape) for i in self.inputs if isinstance(i, TensorInput))
        if elements > MAX_INPUT_ELEMENTS:
            raise GraphError(f"inputs of {elements:,} elements in all: more than the {MAX_INPUT_ELEMENTS:,} a case may have")
        for i in self.inputs:
            if isinstance(i, TensorInput) and i.requires_grad and i.dtype not in FLOAT_DTYPES:
                raise GraphError(f"input {i.name} requires grad but is {i.dtype}: only float tensors can")
        types = self.infer_types()
        for o in self.outputs:
            if types[o].is_scalar:
                raise GraphError(f"output {o} is a scalar")
        return self

    # ---- JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict:
        d = {"schema": SCHEMA_VERSION, "inputs": [i.to_json() for i in self.inputs],
             "nodes": [n.to_json() for n in self.nodes], "outputs": list(self.outputs)}
        if self.requires_grad:  # forward-only graphs keep the JSON (and digests) they always had
            d["grad_seed"] = self.grad_seed
        return d

    @staticmethod
    def from_json(d: Any) -> "Graph":
        try:
            if not isinstance(d, dict) or d.get("schema") != SCHEMA_VERSION:
                raise GraphError(f"unsupported graph schema {d.get('schema') if isinstance(d, dict) else d!r}")
            record(d, "graph", {"schema", "inputs", "nodes", "outputs", "grad_seed"})
            inputs = tuple(_input_from_json(i) for i in d["inputs"])
            nodes = tuple(Node(_name(n["name"]), str(n["op"]), tuple(_arg(a) for a in n["args"]),
                               _attrs(n.get("attrs", {})))
                          for n in (record(n, "node", {"name", "op", "args", "attrs"}) for n in d["nodes"]))
            outputs = tuple(_name(o) for o in d["outputs"])
            grad_seed = d.get("grad_seed", 0)
            if not isinstance(grad_seed, int) or isinstance(grad_seed, bool) or not 0 <= grad_seed < 2**63:
                raise GraphError(f"bad grad_seed {grad_seed!r}")
        except (KeyError, TypeError, AttributeError) as e:
            raise GraphError(f"malformed graph: {e!r}") from e
        return Graph(inputs, nodes, outputs, grad_seed).validate()

    def canonical(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """Stable hash of the canonical JSON: the reducer's cache key and the corpus dedup key."""
        return hashlib.sha256(self.canonical().encode()).hexdigest()[:16]


# ---- JSON validation helpers -----------------------------------------------------------------
def _name(x: Any) -> str:
    if not isinstance(x, str) or not x.isidentifier():
        raise GraphError(f"bad value name {x!r}")
    return x


def _opt_int(x: Any) -> int | None:
    return None if x is None else int(x)


def _int_tuple(x: Any) -> tuple[int, ...] | None:
    if x is None:
        return None
    if not isinstance(x, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in x):
        raise GraphError(f"expected a list of ints, got {x!r}")
    return tuple(x)


def _arg(a: Any) -> Arg:
    if isinstance(a, str):
        return _name(a)
    if isinstance(a, (bool, int)) or (isinstance(a, float) and math.isfinite(a)):
        return a
    raise GraphError(f"bad node argument {a!r}")


def _attr_value(v: Any) -> Any:
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    if isinstance(v, list):
        return tuple(_attr_value(x) for x in v)
    raise GraphError(f"bad attribute value {v!r}")


def _attrs(d: Any) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise GraphError("attrs must be an object")
    return {str(k): _attr_value(v) for k, v in d.items()}


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in sorted(v.items())}
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    return v


def _input_from_json(d: dict) -> Input:
    record(d, "input", {"kind", "name", "dtype", "value", "shape", "layout", "values", "requires_grad"})
    name = _name(d["name"])
    if d.get("kind") == "scalar":
        dtype = d["dtype"]
        if dtype not in PY_KINDS:
            raise GraphError(f"bad scalar dtype {dtype!r}")
        value = _arg(d["value"])
        if isinstance(value, str) or scalar_kind(value) != dtype:
            raise GraphError(f"scalar {name} value {value!r} is not a {dtype}")
        return ScalarInput(name, dtype, value)
    if d.get("kind") != "tensor":
        raise GraphError(f"bad input kind {d.get('kind')!r}")
    shape = _int_tuple(d["shape"]) or ()
    if any(s < 0 for s in shape):
        raise GraphError(f"negative size in {shape}")
    if d["dtype"] not in DTYPES:
        raise GraphError(f"unknown dtype {d['dtype']!r}")
    return TensorInput(name, shape, d["dtype"], Layout.from_json(d.get("layout", {}), len(shape)),
                       Values.from_json(d.get("values", {})), bool(d.get("requires_grad", False)))
