"""Run a graph eagerly (the reference), in float64 (the arbiter), and emit it as Python/TorchScript
source (what TorchScript scripts, what dynamo traces, and what a repro prints)."""
from __future__ import annotations

import torch

from .graph import Graph, Node, ScalarInput, TensorInput
from .ops import OPS, lit
from .types import DTYPES, is_float


def _upcast_attrs(node: Node) -> dict:
    attrs = dict(node.attrs)
    if node.op == "cast" and is_float(attrs["dtype"]):
        attrs["dtype"] = "float64"
    return attrs


def _casts_out_of_range(node: Node, x: torch.Tensor) -> bool:
    """Float -> integer casts of NaN, inf or out-of-range values are undefined behaviour in C++:
    fusers may legally produce anything there, so values derived from them are not compared."""
    if node.op != "cast" or not x.is_floating_point() or is_float(node.attrs["dtype"]) or node.attrs["dtype"] == "bool":
        return False
    info = torch.iinfo(DTYPES[node.attrs["dtype"]])
    xd = x.double()
    return bool((~torch.isfinite(xd) | (xd < info.min) | (xd > info.max)).any())


def interpret(graph: Graph, inputs: list, *, upcast: bool = False) -> tuple[dict, set[str]]:
    """All values of the graph by name, and the names tainted by undefined behaviour.

    upcast=True runs every floating computation in float64: the arbiter that tells a fuser's error
    from the rounding eager itself shows.
    """
    env: dict = {}
    for spec, value in zip(graph.inputs, inputs):
        if upcast and isinstance(value, torch.Tensor) and value.is_floating_point():
            value = value.double()
        env[spec.name] = value
    tainted: set[str] = set()
    for node in graph.nodes:
        args = [env[a] if isinstance(a, str) else a for a in node.args]
        attrs = _upcast_attrs(node) if upcast else node.attrs
        if _casts_out_of_range(node, args[0]) or any(a in tainted for a in node.refs()):
            tainted.add(node.name)
        out = OPS[node.op].eager(*args, **{k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()})
        if upcast and out.is_floating_point():
            out = out.double()  # ops that make the default float from ints/bools (exp of a bool...)
        env[node.name] = out
    return env, tainted


def run_eager(graph: Graph, inputs: list, *, upcast: bool = False) -> tuple[list[torch.Tensor], set[str]]:
    env, tainted = interpret(graph, inputs, upcast=upcast)
    return [env[o] for o in graph.outputs], {o for o in graph.outputs if o in tainted}


def _annotation(spec) -> str:
    return "torch.Tensor" if isinstance(spec, TensorInput) else spec.dtype


def node_source(node: Node) -> str:
    return OPS[node.op].source([a if isinstance(a, str) else lit(a) for a in node.args], dict(node.attrs))


def to_source(graph: Graph, name: str = "fn") -> str:
    """The graph as one Python function that TorchScript can script and dynamo can trace."""
    params = ", ".join(f"{i.name}: {_annotation(i)}" for i in graph.inputs)
    lines = [f"def {name}({params}):"]
    lines += [f"    {n.name} = {node_source(n)}" for n in graph.nodes]
    lines.append(f"    return ({', '.join(graph.outputs)},)")
    return "\n".join(lines) + "\n"


def compile_source(graph: Graph, name: str = "fn"):
    """A Python function from the graph's source. The source is built from registry templates and
    validated attributes only, never from text read out of a file."""
    namespace: dict = {"torch": torch}
    exec(compile(to_source(graph, name), f"<fuzzfuse:{graph.digest()}>", "exec"), namespace)
    return namespace[name]


__all__ = ["interpret", "run_eager", "to_source", "compile_source", "node_source", "ScalarInput"]
