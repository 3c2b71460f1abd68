"""The seed corpus's graphs, built from the IR alone: the blocks from the discussion this project
grew from, and blocks real models are built of (RMSNorm, attention scores, a bias-GELU epilogue),
in float32, float16 and bfloat16, contiguous and channels_last, and the same blocks in training
mode. fuzzfuse.seeds writes them as cases (`fuzzfuse corpus seeds corpus/`).

`mutated_seed` is the generator's second source (Features.source, `fuzz --source`): a seed graph
with one op, dtype, layout, shape, constant or value distribution changed at a time, cut to a
prefix, or read by one more op. Real model subgraphs hold what random graphs seldom do (an eps in
the dtype's rounding range, E[x^2] - E[x]^2 and its clamp, a per-channel broadcast, a scale before
a softmax), and a mutation keeps most of it.

This module sits below fuzzfuse.strategies, which draws from it: it imports only the IR, so that
the generator reaches the seeds without going through the corpus (fuzzfuse.seeds).
"""
from __future__ import annotations

import dataclasses
import functools
import random
from dataclasses import replace
from typing import TYPE_CHECKING

from .ir import OPS, Graph, GraphError, Layout, Node, TensorInput, Values
from .ir.builder import GraphBuilder, batch_norm, layer_norm, squeeze_excite
from .ir.types import FLOAT_DTYPES, ValueType, is_float, scalar_kind
from .ir.values import input_set

if TYPE_CHECKING:
    from .strategies import Features

# The small exact constants real code uses, and the eps values of real normalization layers: what
# scalar arguments are drawn from (strategies.scalar_constants) and a constant mutation writes.
CONSTANTS = (0.0, 1.0, 2.0, -1.0, 0.5, -0.5, 3.0, 0.125, 1e-5, 1e-6, 1e-12, 1e-3, 0.1, -10000.0)
DTYPES = ("float32", "float16", "bfloat16")
LAYOUTS = ("contiguous", "channels_last")


def layer_norm_over_channels(dtype: str, layout: str) -> Graph:
    """u = x.mean(1, keepdim=True); s = ((x*x).mean(1, keepdim=True) - u*u).clamp(0);
    y = (x - u) * torch.rsqrt(s + eps); y = y * w[:, None, None] + b[:, None, None]"""
    b = GraphBuilder()
    x = b.tensor((2, 8, 5, 7), dtype, layout, Values(seed=1))
    w = b.tensor((8,), dtype, values=Values(seed=2))
    bias = b.tensor((8,), dtype, values=Values(seed=3))
    y = layer_norm(b, x, 1, variance="moments", eps=1e-6)
    y = b.add("mul", y, b.add("index_none", w, spec=[":", "None", "None"]))
    y = b.add("add", y, b.add("index_none", bias, spec=[":", "None", "None"]))
    return b.build([y])


def efficientnet_block(dtype: str, layout: str) -> Graph:
    """The channels_last tail of an EfficientNet MBConv block: SiLU, squeeze-excite (mean over H
    and W, sigmoid gate), residual add."""
    b = GraphBuilder()
    x = b.tensor((2, 16, 7, 7), dtype, layout, Values(seed=4))
    residual = b.tensor((2, 16, 7, 7), dtype, layout, Values(seed=5))
    return b.build([squeeze_excite(b, x, residual)])


def efficientnet_train_block(dtype: str, layout: str) -> Graph:
    """An EfficientNet MBConv tail as trained: batch norm (batch statistics, affine weight and
    bias), SiLU, squeeze-excite, residual add."""
    b = GraphBuilder()
    x = b.tensor((2, 16, 5, 5), dtype, layout, Values(seed=6))
    residual = b.tensor((2, 16, 5, 5), dtype, layout, Values(seed=7))
    w = b.tensor((16,), dtype, values=Values(seed=8))
    bias = b.tensor((16,), dtype, values=Values(seed=9))
    return b.build([squeeze_excite(b, batch_norm(b, x, w, bias), residual)])


def rms_norm(dtype: str, layout: str) -> Graph:
    """T5/Llama RMSNorm over channels: x * rsqrt(mean(x * x, 1, keepdim=True) + 1e-6) * w[:, None, None]"""
    b = GraphBuilder()
    x = b.tensor((2, 8, 5, 6), dtype, layout, Values(seed=12))
    w = b.tensor((8,), dtype, values=Values(seed=13))
    ms = b.add("mean", b.add("mul", x, x), dims=[1], keepdim=True)
    y = b.add("mul", x, b.add("rsqrt", b.add("add", ms, 1e-6)))
    return b.build([b.add("mul", y, b.add("index_none", w, spec=[":", "None", "None"]))])


def attention_scores(dtype: str, layout: str) -> Graph:
    """Masked attention probabilities: softmax(where(mask, scores * 0.125, -10000.0), -1), the
    mask broadcast over batch and heads."""
    b = GraphBuilder()
    scores = b.tensor((2, 4, 6, 6), dtype, layout, Values(seed=14))
    mask = b.tensor((1, 1, 6, 6), "bool", values=Values(seed=15))
    masked = b.add("where", mask, b.add("mul", scores, 0.125), -10000.0)
    return b.build([b.add("softmax", masked, dim=-1)])


def bias_gelu(dtype: str, layout: str) -> Graph:
    """A conv or linear layer's epilogue: gelu(x + bias[:, None, None]), then a residual add."""
    b = GraphBuilder()
    x = b.tensor((2, 16, 5, 5), dtype, layout, Values(seed=16))
    bias = b.tensor((16,), dtype, values=Values(seed=17))
    residual = b.tensor((2, 16, 5, 5), dtype, layout, Values(seed=18))
    y = b.add("gelu", b.add("add", x, b.add("index_none", bias, spec=[":", "None", "None"])))
    return b.build([b.add("add", y, residual)])


def training(make):
    """The graph `make` builds, as a backward case: every input (activations and weights) requires
    grad, with a fixed upstream-gradient seed."""
    def build(dtype: str, layout: str) -> Graph:
        graph = make(dtype, layout)
        return replace(graph, inputs=tuple(replace(i, requires_grad=True) for i in graph.inputs), grad_seed=11)
    build.__doc__ = f"Training mode (inputs and weights require grad): {make.__doc__}"
    return build


SEEDS = {"layernorm_channels": layer_norm_over_channels, "efficientnet_se": efficientnet_block,
         "rmsnorm_channels": rms_norm, "attention_scores": attention_scores, "bias_gelu": bias_gelu}
# Backward cases in the dtypes training uses.
TRAINING_SEEDS = {"layernorm_channels_train": training(layer_norm_over_channels),
                  "efficientnet_bn_se_train": training(efficientnet_train_block)}
TRAINING_DTYPES = ("float32", "bfloat16")



# ---- mutation: the generator's second source ---------------------------------------------------
DISTRIBUTIONS = ("normal", "uniform", "arange", "ones", "specials", "lone_special", "halves", "denormals")
# Ops appended to a seed's output: each makes a small error of the op before it visible.
MULTI_DIM_REDUCTIONS = ("sum", "mean", "amax", "amin", "var", "std", "var_mean")
OBSERVERS = ("floor", "round", "reciprocal", "sign", "isnan", "exp", "rsqrt", "cast")


@functools.lru_cache(maxsize=1)
def seed_graphs() -> tuple[Graph, ...]:
    """The forward seeds (the training ones are these graphs with gradients)."""
    return tuple(make(dtype, layout) for make in SEEDS.values() for dtype in DTYPES for layout in LAYOUTS)


def mutated_seed(rng: random.Random, features: Features) -> Graph:
    """A seed graph with one to three mutations, each kept only where the graph stays valid; ops,
    dtypes and layouts come from `features` (the batch's swarm: a strategies.Features)."""
    graph = rng.choice(seed_graphs())
    for _ in range(rng.choice((1, 1, 2, 3))):
        mutate = rng.choice(MUTATIONS)
        try:
            candidate = mutate(graph, rng, features)
            if candidate is not None and _accepted(candidate.without_dead_code().validate()):
                graph = candidate.without_dead_code()
        except (GraphError, ValueError, KeyError, IndexError, TypeError):
            continue
    return graph


def _accepted(graph: Graph) -> bool:
    """Every node's operands are ones its op accepts (validate checks the type rules only): a
    constant only where the op takes one."""
    types = graph.infer_types()
    for n in graph.nodes:
        op = OPS[n.op]
        if any(not isinstance(a, str) and p not in op.scalar_positions for p, a in enumerate(n.args)):
            return False
        if not op.accepts([types[a] if isinstance(a, str) else ValueType(None, scalar_kind(a)) for a in n.args],
                          n.args):
            return False
    return True


def _tensor_inputs(graph: Graph) -> list[int]:
    return [k for k, i in enumerate(graph.inputs) if isinstance(i, TensorInput)]


def _with_input(graph: Graph, k: int, **changes) -> Graph:
    inputs = list(graph.inputs)
    inputs[k] = dataclasses.replace(inputs[k], **changes)
    return dataclasses.replace(graph, inputs=tuple(inputs))


def _with_node(graph: Graph, k: int, node: Node) -> Graph:
    nodes = list(graph.nodes)
    nodes[k] = node
    return dataclasses.replace(graph, nodes=tuple(nodes))


def _op(graph: Graph, rng: random.Random, features) -> Graph | None:
    """One op replaced by another of its kind and arity (a reduction keeps its dims)."""
    k = rng.randrange(len(graph.nodes))
    node = graph.nodes[k]
    old = OPS[node.op]
    if old.kind not in ("unary", "binary", "reduction"):
        return None
    alternatives = [o for o in features.ops if o != node.op and OPS[o].kind == old.kind and OPS[o].arity == old.arity
                    and (OPS[o].draw_attrs is None or old.kind == "reduction")]
    if not alternatives:
        return None
    new = rng.choice(alternatives)
    attrs = dict(node.attrs)
    if old.kind == "reduction":
        if "dims" not in attrs or new not in MULTI_DIM_REDUCTIONS:
            return None
        attrs = {"dims": attrs["dims"], "keepdim": attrs["keepdim"]}
        if new in ("var", "std", "var_mean"):
            attrs["correction"] = rng.choice((0, 1))
        if new == "var_mean":
            attrs["output"] = rng.choice(("var", "mean"))
    return _with_node(graph, k, dataclasses.replace(node, op=new, attrs=attrs))


def _dtype(graph: Graph, rng: random.Random, features) -> Graph | None:
    """One input in another dtype (a float one stays float: the seeds' ops are float math)."""
    k = rng.choice(_tensor_inputs(graph))
    spec = graph.inputs[k]
    dtypes = [d for d in features.dtypes if d != spec.dtype and is_float(d) == is_float(spec.dtype)
              and (d in FLOAT_DTYPES or not is_float(d))]
    return _with_input(graph, k, dtype=rng.choice(dtypes)) if dtypes else None


def _layout(graph: Graph, rng: random.Random, features) -> Graph | None:
    k = rng.choice(_tensor_inputs(graph))
    shape = graph.inputs[k].shape
    rank = len(shape)
    fits = [kind for kind in features.layouts if kind == "contiguous" or (kind == "channels_last" and rank == 4)
            or (kind in ("permuted", "sliced") and rank >= 1) or (kind == "expanded" and any(s > 1 for s in shape))]
    kind = rng.choice(fits)
    if kind == "permuted":
        layout = Layout(kind, perm=tuple(rng.sample(range(rank), rank)))
    elif kind == "sliced":
        layout = Layout(kind, dim=rng.randrange(rank), step=rng.choice((2, 3)))
    elif kind == "expanded":
        wide = [d for d, s in enumerate(shape) if s > 1]
        layout = Layout(kind, dims=tuple(sorted(rng.sample(wide, rng.randint(1, len(wide))))))
    else:
        layout = Layout(kind)
    return _with_input(graph, k, layout=layout) if layout != graph.inputs[k].layout else None


def _shape(graph: Graph, rng: random.Random, features) -> Graph | None:
    """Every dim above 1 one larger (odd sizes become even and back), broadcasts kept lined up."""
    return input_set(graph, 2 * rng.randint(1, 3), resized=True)


def _constant(graph: Graph, rng: random.Random, features) -> Graph | None:
    places = [(k, p) for k, n in enumerate(graph.nodes) for p, a in enumerate(n.args)
              if isinstance(a, (int, float)) and not isinstance(a, bool)]
    if not places:
        return None
    k, p = rng.choice(places)
    args = list(graph.nodes[k].args)
    args[p] = rng.choice([c for c in CONSTANTS if c != args[p]])
    return _with_node(graph, k, dataclasses.replace(graph.nodes[k], args=tuple(args)))


def _values(graph: Graph, rng: random.Random, features) -> Graph | None:
    k = rng.choice(_tensor_inputs(graph))
    dists = [d for d in DISTRIBUTIONS if features.special_values or d not in ("specials", "lone_special")]
    values = Values(rng.choice(dists), 0.0, rng.randrange(2**31), rng.choice((1.0, 1.0, 1e-3, 1e3)))
    return _with_input(graph, k, values=values)


def _prefix(graph: Graph, rng: random.Random, features) -> Graph | None:
    """The subgraph up to one node, which becomes the output."""
    return dataclasses.replace(graph, outputs=(rng.choice(graph.nodes).name,))


def _observer(graph: Graph, rng: random.Random, features) -> Graph | None:
    """One more op reads an output: a rounding, a reciprocal, a comparison, a cast."""
    out = graph.outputs[0]
    types = graph.infer_types()
    op = rng.choice([o for o in OBSERVERS if o in features.ops] or list(OBSERVERS))
    attrs = {"dtype": rng.choice([d for d in features.dtypes if d != types[out].dtype] or ["float32"])} \
        if op == "cast" else {}
    if not OPS[op].accepts([types[out]], (out,)):
        return None
    node = Node(f"v{len(graph.nodes)}", op, (out,), attrs)
    return dataclasses.replace(graph, nodes=graph.nodes + (node,), outputs=(node.name,) + graph.outputs[1:])


MUTATIONS = (_op, _dtype, _layout, _shape, _constant, _values, _prefix, _observer)
