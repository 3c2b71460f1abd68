"""Public Hypothesis strategies for fuser graphs; usable in your own `@given` tests.

    from fuzzfuse.strategies import graphs
    @given(graphs(max_ops=8))
    def test_my_fuser(graph): ...

Graphs are valid by construction: operands are chosen by the registry's `accepts` and type rules,
so every generated graph runs in eager PyTorch. `generate(seed, ...)` draws one graph
deterministically from an integer seed (through Hypothesis' `fuzz_one_input`), which is how
campaigns make reproducible cases without Hypothesis' test runner.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import random
from dataclasses import dataclass, field
from typing import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .ir import OPS, Graph, GraphError, Layout, TensorInput, Values
from .ir.ops import choice, ints, permutations
from .ir.builder import (GraphBuilder, batch_norm, layer_norm, layer_norm_backward, mask_count, matmul_epilogue,
                         scaled_softmax, squeeze_excite)
from .ir.types import (COMPUTE_DTYPES, FLOAT_DTYPES, FP8_DTYPES, INT_DTYPES, ValueType, broadcast_shapes, is_float,
                       scalar_kind)
from .bait import bait, zero_sign_readers
from .seedgraphs import CONSTANTS, mutated_seed
from .steering import MAX_REDRAWS, Trigger, unsteered

ALL_LAYOUTS = ("contiguous", "channels_last", "channels_last_3d", "permuted", "sliced", "expanded")
# round_trip: a value cast to another drawn dtype and, half the time, back (what mixed precision does).
# mask_count: a bool mask counted along a dim (position ids); scaled_softmax: softmax(x * c).
PATTERNS = ("layer_norm", "batch_norm", "squeeze_excite", "round_trip", "mask_count", "scaled_softmax")
# Two-op idioms, taken whenever drawn (a larger pattern one time in four): each is a pair of ops
# real code writes together and a random graph seldom puts side by side.
IDIOMS = ("round_trip", "mask_count", "scaled_softmax")
# Drawn only where a backend's coverage recipe asks for them (the default stream stays as it was).
FOCUS_PATTERNS = ("layer_norm_backward", "matmul_epilogue")
# A dense layer's sizes: mostly multiples of 8 (Hopper's TMA loads need 16-byte aligned rows of
# fp16/bf16), some not (the scheduler must then refuse the matmul at run time, not miscompile it).
MATMUL_SIZES = (8, 16, 24, 64, 128, 256, 7, 33)
MATMUL_ACTIVATIONS = ("relu", "gelu", "sigmoid", "silu", "tanh")
# Ops drawn beside the one a steered batch aims at (strategies.steer).
STEER_PARTNERS = 3
# Value distributions aimed at narrow triggers (ir/values.py), taken by one input in NARROW_EVERY;
# those made of special values only where specials are allowed.
NARROW_DISTS = ("specials", "lone_special", "halves", "denormals")
SPECIAL_DISTS = ("specials", "lone_special")
NARROW_EVERY = 5
# Where a batch's cases come from (Features.source): drawn from scratch, mutated from the seed corpus
# (seedgraphs.mutated_seed), or each case one or the other with even odds ("mixed").
SOURCES = ("scratch", "seeds", "mixed")
# One operand in this many (past the first) is a new input shaped to broadcast against the first,
# either way (narrower: some dims 1, leading dims dropped; wider: a size-1 dim of the first grown),
# and some first operands a new input of the same type in a drawn layout (_try_op): broadcasts in
# every operand position, and expanded or strided operands meeting in one op.
FRESH_OPERAND_EVERY = 4
# The most dims a drawn value has, whatever makes it (unsqueeze, a reshape's split, a wider
# broadcast partner of such a value): the generator's one bound on rank. It is no IR type rule
# (reshape takes any rank, as eager does: aot_autograd's backwards reshape every value the forward
# made); the shape policy's max_rank bounds the inputs drawn from scratch.
MAX_VALUE_RANK = 6
IDIOM_WEIGHT = 1
# The share of swarm batches whose dtypes are integers only (where the backend takes integers):
# with float32 always in the batch, integer values mostly meet floats and promote, so integer
# arithmetic (uint8 wrap-around, a negated or raised integer read by another op) stays rare.
INTEGER_BATCH_SHARE = 0.2


@dataclass(frozen=True)
class Features:
    """What a batch of cases may use. Swarm testing draws a random subset per batch: leaving ops out
    lets the remaining ones combine more deeply (Groce et al., 'Swarm Testing', ISSTA 2012)."""

    ops: tuple[str, ...] = tuple(OPS)
    # fp8 only where a backend declares it (types.FP8_DTYPES).
    dtypes: tuple[str, ...] = COMPUTE_DTYPES
    layouts: tuple[str, ...] = ALL_LAYOUTS
    patterns: tuple[str, ...] = PATTERNS
    special_values: bool = True
    # The fewest ops a graph gets: NNC and oneDNN Graph never fuse a lone op.
    min_ops: int = 1
    # Each computed value feeds one op at most, and no used value is also an output: oneDNN Graph
    # fuses an op into its producer only when it is the producer's one use.
    chains: bool = False
    # Every op after the first takes a computed value as its first operand, so the graph is one
    # connected whole: TorchScript's fusers merge a producer into its consumer, so ops that share
    # no value stay apart, each a lone op, which they never fuse.
    connected: bool = False
    # The ops a fusion group forms around (oneDNN Graph's: `ir.ops.fusion_anchors`): where any are
    # declared, an op outside them never takes another such op's result as its first operand, since
    # such a pair is never fused together.
    anchors: tuple[str, ...] = ()
    # After an op, one that an algebraic simplifier folds with it (ir.ops.ALGEBRAIC_FOLDS), where
    # `ops` holds one, takes its result: a simplifier's rewrite is tested only on such adjacent pairs.
    fold_bait: bool = False
    # The device the cases run on: an op whose eager form has no kernel there for the operands'
    # dtype (Op.cuda_missing) is not drawn.
    device: str = "cpu"
    # Where cases come from: one of SOURCES.
    source: str = "scratch"


@dataclass(frozen=True)
class ShapeConfig:
    """Per-backend shape policy: NNC runs an interpreter on CPU, so it wants small tensors; a GPU
    fuser wants sizes that cross vectorization and block boundaries."""

    max_rank: int = 4
    min_rank: int = 0
    max_dim: int = 6
    large_dims: tuple[int, ...] = ()
    large_prob: float = 0.0
    max_numel: int = 2048
    # The fewest dims of every graph input (and of the shape they broadcast to): an input drops
    # leading dims to broadcast, down to this many.
    min_input_rank: int = 0


@dataclass(frozen=True)
class GenConfig:
    features: Features = field(default_factory=Features)
    shapes: ShapeConfig = field(default_factory=ShapeConfig)
    max_ops: int = 12
    max_inputs: int = 3
    # Training-mode cases: float inputs may be marked requires_grad, and the oracle then compares
    # their gradients too (campaign switch --backward).
    backward: bool = False
    # Known bugs' triggers that a draw steers away from (fuzzfuse.steering).
    avoid: tuple[Trigger, ...] = ()


def swarm(rng: random.Random, base: Features = Features(), integer_batches: bool = True) -> Features:
    """A random non-empty subset of each feature axis, always keeping float32 and contiguous so
    every batch can still build graphs; or, one batch in INTEGER_BATCH_SHARE (unless not
    `integer_batches`: a training campaign's cases need float inputs), integer dtypes only."""
    def subset(items: tuple[str, ...], keep: tuple[str, ...] = (), p: float = 0.6) -> tuple[str, ...]:
        chosen = tuple(x for x in items if x in keep or rng.random() < p)
        return chosen or (rng.choice(items),)
    features = dataclasses.replace(
        base,
        ops=_with_anchor(rng, subset(base.ops, p=0.5), base),
        dtypes=subset(base.dtypes, keep=tuple(d for d in ("float32",) if d in base.dtypes)),
        layouts=subset(base.layouts, keep=tuple(k for k in ("contiguous",) if k in base.layouts)),
        patterns=subset(base.patterns, p=0.4) if base.patterns else (),
        special_values=base.special_values and rng.random() < 0.6,
    )
    # Drawn last: the other batches stay as they were.
    integers = tuple(d for d in base.dtypes if d in INT_DTYPES)
    if integer_batches and integers and rng.random() < INTEGER_BATCH_SHARE:
        features = dataclasses.replace(features, dtypes=subset(integers))
    return features


def _with_anchor(rng: random.Random, ops: tuple[str, ...], base: Features) -> tuple[str, ...]:
    """`ops`, with one of the base's binary anchors added where it declares anchors and `ops` holds
    no binary one: without an anchor such a fuser forms no fusion group, and only a binary one
    takes values of any rank (softmax, cat and matmul take no 0-d tensor)."""
    binary = [a for a in base.anchors if a in base.ops and OPS[a].kind == "binary"]
    if not binary or any(o in binary for o in ops):
        return ops
    return (*ops, rng.choice(binary))


# ---- leaf strategies -----------------------------------------------------------------------------
@st.composite
def shapes(draw: Callable, config: ShapeConfig = ShapeConfig(), min_rank: int = 0) -> tuple[int, ...]:
    """Mostly small dims, with size-1 and odd sizes common; occasionally a large dim."""
    rank = draw(ints(max(min_rank, config.min_rank, config.min_input_rank), config.max_rank))
    small = [min(d, config.max_dim) for d in (1, 1, 2, 3, 4, 5, 7, 8)]
    dims = []
    for _ in range(rank):
        if config.large_dims and draw(st.floats(0, 1)) < config.large_prob:
            dims.append(choice(draw, config.large_dims))
        else:
            dims.append(choice(draw, small))
    return tuple(dims)


@st.composite
def values(draw: Callable, special_values: bool = True) -> Values:
    dist = choice(draw, ["normal", "normal", "normal", "uniform", "arange", "ones"])
    specials = choice(draw, [0.0, 0.0, 0.05, 0.25]) if special_values else 0.0
    scale = choice(draw, [1.0, 1.0, 1.0, 1e-3, 1e3])
    seed = draw(ints(0, 2**31 - 1))
    # One input in NARROW_EVERY takes a narrow-trigger distribution, chosen by its seed rather than
    # by another draw, so that every other draw of a graph (its ops, dtypes, shapes) stays as it was.
    narrow = NARROW_DISTS if special_values else tuple(d for d in NARROW_DISTS if d not in SPECIAL_DISTS)
    if seed % NARROW_EVERY == 0:
        dist, specials = narrow[(seed // NARROW_EVERY) % len(narrow)], 0.0
    return Values(dist, specials, seed, scale)


@st.composite
def layouts(draw: Callable, shape: tuple[int, ...], allowed: tuple[str, ...] = ALL_LAYOUTS) -> Layout:
    rank = len(shape)
    fits = [k for k in allowed if k == "contiguous"
            or (k == "channels_last" and rank == 4) or (k == "channels_last_3d" and rank == 5)
            or (k in ("permuted", "sliced") and rank >= 1)
            or (k == "expanded" and any(s > 1 for s in shape))]
    kind = choice(draw, fits or ["contiguous"])
    if kind == "permuted":
        return Layout(kind, perm=tuple(draw(permutations(rank))))
    if kind == "sliced":
        return Layout(kind, dim=draw(ints(0, rank - 1)), step=draw(ints(2, 3)))
    if kind == "expanded":
        wide = [i for i, s in enumerate(shape) if s > 1]
        dims = tuple(d for d in wide if draw(st.booleans())) or (choice(draw, wide),)
        return Layout(kind, dims=dims)
    return Layout(kind)


@st.composite
def scalar_constants(draw: Callable, kind: str | None = None) -> float | int | bool:
    """Mostly the small exact constants real code uses (CONSTANTS), some others; of `kind`
    ("float", "int" or "bool") where given."""
    kind = kind or choice(draw, ["float"] * 6 + ["int"] * 3 + ["bool"])
    if kind == "float":
        return choice(draw, [*CONSTANTS, -1.5, -0.25, 1e4])
    if kind == "int":
        return choice(draw, [0, 1, 2, -1, 3, -2, 7])
    return draw(st.booleans())


# ---- graphs --------------------------------------------------------------------------------------
def _pick(draw: Callable, names: list[str]) -> str:
    """Favour the newest values, so graphs grow deep chains (what fusers fuse) rather than fans."""
    if draw(ints(0, 4)) > 0:
        return names[-1 - draw(ints(0, min(2, len(names) - 1)))]
    return choice(draw, names)


def _try_op(draw: Callable, b: GraphBuilder, op_name: str, cfg: GenConfig, firsts: list[str], tensors: list[str],
            scalars: list[str]) -> str | None:
    """Add `op_name` with its first operand among `firsts` and the others among `tensors`."""
    op = OPS[op_name]
    first = _pick(draw, firsts)
    # A reduction reads a new input (in a drawn layout) twice as often as another op: reductions on
    # every layout, while chains (what fusers fuse) stay deep. Not where the first operand must be
    # computed (a connected graph, chains, fusion anchors).
    fresh_every = FRESH_OPERAND_EVERY if op.kind == "reduction" else 2 * FRESH_OPERAND_EVERY
    feats = cfg.features
    free_first = not (feats.connected or feats.chains or feats.anchors)
    if free_first and not draw(ints(0, fresh_every - 1)) and b.types[first].rank and \
            b.types[first].dtype in feats.dtypes:
        shape = b.types[first].shape
        shape = _broadcast_partner(draw, shape, cfg.shapes) if op.arity > 1 and draw(st.booleans()) else shape
        first = _new_input(draw, b, cfg, shape, b.types[first].dtype)
    if free_first and op_name == "where" and b.types[first].dtype != "bool":  # a mask, often of a broadcast shape
        masks = [t for t in firsts if b.types[t].dtype == "bool"]
        first = _pick(draw, masks) if masks and draw(st.booleans()) else \
            _new_input(draw, b, cfg, _broadcast_partner(draw, b.types[first].shape, cfg.shapes, narrow=True), "bool")
    args: list = [first]
    if op.draw_operands is not None:
        args += [_operand(draw, b, cfg, tensors, want, index=pos in op.index_operands)
                 for pos, want in enumerate(op.draw_operands(draw, b.types[first]), start=1)]
    for pos in range(len(args), op.arity):
        # A constant operand one time in four, in a fold-bait batch one in two (x * c then a
        # reduction, x + 0: bait), and always where the op takes no tensor of the first's type
        # there (an integer's pow or floor division takes a constant: eager raises on 1 // 0).
        refused = pos == 1 and op.arity == 2 and not op.accepts([b.types[first]] * 2, (first, first))
        if pos in op.scalar_positions and (refused or draw(ints(0, 1 if feats.fold_bait else 3)) == 0):
            use_input = scalars and not refused and draw(st.booleans())
            # Where a tensor was refused, an integer's constant is an integer (a float one makes
            # another op: pow of an int8 by 2.0 is a float pow).
            kind = "int" if refused and not is_float(b.types[first].dtype) else None
            args.append(choice(draw, scalars) if use_input else draw(scalar_constants(kind)))
            continue
        target = b.types[first].shape
        if not draw(ints(0, FRESH_OPERAND_EVERY - 1)):
            # Of the first's dtype where anchors are declared: oneDNN Graph left mixed-dtype pairs unfused.
            dtype = b.types[first].dtype if cfg.features.anchors else \
                choice(draw, [b.types[first].dtype, *cfg.features.dtypes])
            args.append(_new_input(draw, b, cfg, _broadcast_partner(draw, target, cfg.shapes), dtype))
            continue
        fits = [t for t in tensors if _broadcastable(b.types[t].shape, target)]
        args.append(_pick(draw, fits) if fits else first)
    types = [b.types[a] if isinstance(a, str) else ValueType(None, scalar_kind(a)) for a in args]
    if not op.accepts(types, tuple(args)) or (cfg.features.device == "cuda" and types[0].dtype in op.cuda_missing):
        return None
    attrs = op.draw_attrs(draw, types) if op.draw_attrs else {}
    if op_name == "cast" and attrs["dtype"] not in cfg.features.dtypes:
        return None
    try:
        out = op.infer(types, attrs)
    except (ValueError, KeyError, IndexError):
        return None
    if out.numel() > cfg.shapes.max_numel or out.rank > MAX_VALUE_RANK:
        return None
    return b.add(op_name, *args, **attrs)


def _operand(draw: Callable, b: GraphBuilder, cfg: GenConfig, tensors: list[str], want: ValueType,
             index: bool) -> str:
    """A value of type `want`: an existing one (mostly) or a new input. An index operand is always a
    new input, whose values `make_inputs` keeps in range."""
    same = [t for t in tensors if b.types[t] == want] if not index else []
    if same and draw(ints(0, 3)):
        return _pick(draw, same)
    feats = cfg.features
    dtype = want.dtype if index or want.dtype in feats.dtypes else choice(draw, feats.dtypes)
    # Never fewer dims than the shape policy's (a 0-d value's partner too): where that is not the
    # type the op wants, the op's type check turns the draw down.
    shape = tuple(want.shape) if index else (1,) * (cfg.shapes.min_input_rank - len(want.shape)) + tuple(want.shape)
    return _new_input(draw, b, cfg, shape, dtype)


def _new_input(draw: Callable, b: GraphBuilder, cfg: GenConfig, shape: tuple[int, ...] | list[int], dtype: str) -> str:
    """A new input of `shape` and `dtype` in a layout and with values the batch's features allow."""
    return b.tensor(shape, dtype, draw(layouts(tuple(shape), cfg.features.layouts)),
                    draw(values(cfg.features.special_values)))


def _broadcast_partner(draw: Callable, shape: tuple[int, ...], config: ShapeConfig,
                       narrow: bool = False) -> tuple[int, ...]:
    """A shape that broadcasts with `shape`: narrower (dims set to 1, leading dims dropped), so that
    this operand is the one broadcast, or (unless `narrow`) wider (size-1 dims grown, or a leading
    dim added), so that the other is."""
    if narrow or draw(st.booleans()):
        ones = [1 if draw(ints(0, 1)) else s for s in shape]
        ones = ones[draw(ints(0, max(0, len(ones) - config.min_input_rank))):] if draw(ints(0, 2)) == 0 else ones
        return (1,) * (config.min_input_rank - len(ones)) + tuple(ones)  # never fewer dims than the policy's
    wide = [choice(draw, [2, 3, 4, 5]) if s == 1 else s for s in shape]
    if len(wide) < config.max_rank and draw(ints(0, 2)) == 0:
        wide.insert(0, choice(draw, [2, 3]))
    return (1,) * (config.min_input_rank - len(wide)) + tuple(wide)  # a 0-d value's partner too


def _broadcastable(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def _try_pattern(draw: Callable, b: GraphBuilder, name: str, firsts: list[str],
                 dtypes: tuple[str, ...] = (), ops: tuple[str, ...] = tuple(OPS)) -> str | None:
    if name == "matmul_epilogue":  # new inputs of its own; one layer a graph (see _matmul_layer)
        if any(OPS[n.op].kind == "matmul" for n in b.nodes):
            return None
        try:
            return _matmul_layer(draw, b, b.types[firsts[-1]].dtype)
        except GraphError:
            return None
    if name == "round_trip":
        return _round_trip(draw, b, _pick(draw, firsts), dtypes)
    if name == "mask_count":
        return _mask_count(draw, b, _pick(draw, [t for t in firsts if b.types[t].rank >= 1] or firsts), dtypes, ops)
    floats = [t for t in firsts if is_float(b.types[t].dtype) and b.types[t].rank >= 1]
    if not floats:
        return None
    x = _pick(draw, floats)
    t = b.types[x]

    def normalized_dim() -> tuple[int, list[int]]:
        """A dim to normalize over, and the shape of a per-feature weight along it."""
        dim = draw(ints(-t.rank, t.rank - 1))
        affine = [1] * t.rank
        affine[dim] = t.shape[dim]
        return dim, affine

    def seeded(shape) -> str:
        return b.tensor(shape, t.dtype, values=Values(seed=draw(ints(0, 2**31 - 1))))

    try:
        if name == "layer_norm":
            dim, affine = normalized_dim()
            return layer_norm(b, x, dim, seeded(affine), seeded(affine), variance=choice(draw, ["var", "moments"]))
        if name == "layer_norm_backward" and t.rank >= 2:  # needs dims to reduce on both sides
            dim, affine = normalized_dim()
            grad = seeded(t.shape)
            return layer_norm_backward(b, x, grad, dim, seeded(affine))[0]
        if name == "batch_norm" and t.rank == 4:
            return batch_norm(b, x, b.tensor([t.shape[1]], t.dtype), b.tensor([t.shape[1]], t.dtype))
        if name == "squeeze_excite" and t.rank == 4:
            return squeeze_excite(b, x, residual=x if draw(st.booleans()) else None)
        softmaxes = [o for o in ("softmax", "log_softmax") if o in ops]
        if name == "scaled_softmax" and softmaxes:
            return scaled_softmax(b, x, choice(draw, CONSTANTS), draw(ints(-t.rank, t.rank - 1)),
                                  log=choice(draw, softmaxes) == "log_softmax")
    except GraphError:
        return None
    return None


def _round_trip(draw: Callable, b: GraphBuilder, x: str, dtypes: tuple[str, ...]) -> str | None:
    """x cast to another of the batch's dtypes (any pair of them) and, half the time, back."""
    source = b.types[x].dtype
    others = [d for d in dtypes if d != source]
    if not others or source in FP8_DTYPES:
        return None
    y = b.add("cast", x, dtype=choice(draw, others))
    return b.add("cast", y, dtype=source) if draw(st.booleans()) else y


def _mask_count(draw: Callable, b: GraphBuilder, x: str, dtypes: tuple[str, ...], ops: tuple[str, ...]) -> str | None:
    """x's mask (cast to bool where the batch has bool, else x != 0) counted along a dim by one of
    the batch's cumsum and sum."""
    counts = [o for o in ("cumsum", "sum") if o in ops]
    rank = b.types[x].rank
    if not counts or not rank or b.types[x].dtype in FP8_DTYPES:
        return None
    mask = choice(draw, ["cast", "ne"]) if "bool" in dtypes and b.types[x].dtype != "bool" else "ne"
    try:
        return mask_count(b, x, draw(ints(-rank, rank - 1)), mask, choice(draw, counts))
    except GraphError:
        return None


def _matmul_layer(draw: Callable, b: GraphBuilder, dtype: str) -> str:
    """A matmul or linear of new fp16/bf16 inputs (batched or not, the weight transposed or not)
    with a drawn epilogue (builder.matmul_epilogue). One a graph: a second layer fed by the first
    makes a segment whose operand another segment computes, which nvFuser 0.2.36's Hopper matmul
    check cannot size (runtime_info.h:69, a known root cause) in nearly every such case."""
    dtype = dtype if dtype in ("float16", "bfloat16") else choice(draw, ["float16", "bfloat16"])
    m, n, k = (choice(draw, MATMUL_SIZES) for _ in range(3))
    batch = (choice(draw, [2, 3]),) if draw(ints(0, 3)) == 0 else ()
    linear = draw(ints(0, 2)) == 0

    def operand(shape: tuple[int, ...], transposed: bool = False) -> str:
        rank = len(shape)
        layout = Layout("permuted", perm=tuple(range(rank - 2)) + (rank - 1, rank - 2)) if transposed else None
        return b.tensor(shape, dtype, layout or "contiguous", draw(values(False)))

    a = operand(batch + (m, k))
    if linear:  # weight (N, K): a transposed (K, N) in memory when drawn so
        w, bias = operand((n, k), draw(st.booleans())), operand((n,))
    else:
        w, bias = operand(batch + (k, n), draw(st.booleans())), operand((n,)) if draw(st.booleans()) else None
    activation = choice(draw, MATMUL_ACTIVATIONS) if draw(st.booleans()) else None
    residual = operand(batch + (m, n)) if draw(ints(0, 2)) == 0 else None
    return matmul_epilogue(b, a, w, bias, linear, activation, residual)


@st.composite
def graphs(draw: Callable, config: GenConfig = GenConfig()) -> Graph:
    """A random valid graph of pointwise, broadcast, reduction and view ops over mixed dtypes and
    memory layouts, with one or more outputs."""
    feats = config.features
    b = GraphBuilder()
    base = draw(shapes(config.shapes))
    while math.prod(base) > config.shapes.max_numel:  # large dims are drawn per dim: cap inputs
        i = max(range(len(base)), key=lambda k: base[k])
        base = base[:i] + (max(1, base[i] // 2),) + base[i + 1:]
    for _ in range(draw(ints(1, config.max_inputs))):
        # Inputs share a broadcast-compatible shape: some dims set to 1, some leading dims dropped.
        shape = [1 if draw(ints(0, 4)) == 0 else s for s in base]
        shape = shape[draw(ints(0, len(shape) - config.shapes.min_input_rank)) if draw(ints(0, 3)) == 0 else 0:]
        _new_input(draw, b, config, shape, choice(draw, feats.dtypes))
    scalars = [b.scalar(choice(draw, [0.5, -2.0, 3.0])) for _ in range(draw(ints(0, 1)))]
    n_ops = draw(ints(min(feats.min_ops, config.max_ops), config.max_ops))
    # No round trips where anchors are declared: casts are no anchors, and oneDNN Graph left a graph
    # of two or three ops ending in a round trip unfused.
    patterns = tuple(p for p in feats.patterns if p != "round_trip" or not feats.anchors)
    choices = [("op", o) for o in feats.ops] + [("pattern", p) for p in patterns]
    # A focus pattern is what its coverage recipe exists for: drawn as often as all the ops together.
    choices += [("pattern", p) for p in feats.patterns if p in FOCUS_PATTERNS for _ in feats.ops[1:]]
    # Idioms as often as a few ops together: mixed precision casts at every layer boundary.
    choices += [("pattern", p) for p in patterns if p in IDIOMS for _ in range(IDIOM_WEIGHT)]
    attempts = 0
    while len(b.nodes) < n_ops and attempts < 4 * n_ops:
        attempts += 1
        tensors = [n for n, t in b.types.items() if not t.is_scalar]
        if feats.chains:
            used = {r for n in b.nodes for r in n.refs()} - {i.name for i in b.inputs}
            tensors = [n for n in tensors if n not in used] or tensors
        # Where anchors are declared and no value may feed a non-anchor, the next op is an anchor.
        after_any = _first_operands(b, feats, tensors, after_anchor_only=True)
        pool = choices if after_any or not feats.anchors else \
            [c for c in choices if c[0] == "pattern" or c[1] in feats.anchors] or choices
        kind, name = choice(draw, pool)
        joins_any = kind == "pattern" or name in feats.anchors or not feats.anchors
        firsts = _first_operands(b, feats, tensors, after_anchor_only=not joins_any)
        if not firsts:
            continue
        if kind == "pattern":
            # A focus pattern is drawn only where a coverage recipe asks for it: always take it.
            if name in FOCUS_PATTERNS or name in IDIOMS or draw(ints(0, 3)) == 0:
                _try_pattern(draw, b, name, firsts, feats.dtypes, feats.ops)
        else:
            out = _try_op(draw, b, name, config, firsts, tensors, scalars)
            if out and feats.fold_bait and len(b.nodes) < n_ops:
                bait(draw, b, config, name, out, tensors + [out], scalars, _try_op)
    if not b.nodes:  # one op that takes x0, whatever its dtype (fp8 takes only casts and views)
        dtype = b.types["x0"].dtype
        if dtype in FP8_DTYPES:
            b.add("cast", "x0", dtype="float32")
        else:
            b.add("neg" if dtype != "bool" else "logical_not", "x0")
    _read_integers_as_floats(draw, b, feats)
    used = {r for n in b.nodes for r in n.refs()}
    sinks = [n.name for n in b.nodes if n.name not in used]
    extra = [n.name for n in b.nodes if n.name in used and not feats.chains and draw(ints(0, 9)) == 0]
    graph = b.build(sinks + extra)
    return draw(requires_grad(graph)) if config.backward else graph


def _read_integers_as_floats(draw: Callable, b: GraphBuilder, feats: Features) -> None:
    """Half the integer results no op reads are cast to a float dtype of the batch (float32 in an
    all-integer batch), as a model reads counts, indices and integer arithmetic into its float
    math: what an integer op computed is then read by a float op, not only returned. Not where
    fusion anchors are declared: a cast is none, and would read a value no anchor made."""
    if feats.anchors:
        return
    floats = [d for d in feats.dtypes if d in FLOAT_DTYPES] or ["float32"]
    used = {r for n in b.nodes for r in n.refs()}
    for node in list(b.nodes):
        dtype = b.types[node.name].dtype
        if node.name not in used and dtype in INT_DTYPES and draw(st.booleans()):
            b.add("cast", node.name, dtype=choice(draw, floats))


def _first_operands(b: GraphBuilder, feats: Features, tensors: list[str], after_anchor_only: bool) -> list[str]:
    """The values the next op may take as its first operand: any of `tensors`, but only computed
    ones in a connected graph (once there are any), and with `after_anchor_only` (an op outside
    `feats.anchors`, where some are declared) none that an op outside them computed."""
    producer = {n.name: n.op for n in b.nodes}
    if feats.connected and b.nodes:
        tensors = [t for t in tensors if t in producer]
    if after_anchor_only and feats.anchors:
        tensors = [t for t in tensors if t not in producer or producer[t] in feats.anchors]
    return tensors


def grad_reach(graph: Graph, name: str) -> tuple[bool, bool]:
    """(does a graph output carry a gradient from input `name`, is eager's backward from it safe):
    autograd tracks every float value computed from a tracked one; a comparison, a bool result or
    a cast to an integer cuts the path, and an op the registry marks not differentiable for its
    operands would raise once the backward reaches it."""
    types = graph.infer_types()
    tracked, safe = {name}, True
    for n in graph.nodes:
        if set(n.refs()) & tracked and is_float(types[n.name].dtype):
            tracked.add(n.name)
            arg_types = [types[a] if isinstance(a, str) else ValueType(None, scalar_kind(a)) for a in n.args]
            safe = safe and OPS[n.op].differentiable(arg_types, n.args)
    return bool(tracked & set(graph.outputs)), safe


@st.composite
def requires_grad(draw: Callable, graph: Graph) -> Graph:
    """A backward case of `graph`: some or all of its float inputs (drawn) marked requires_grad,
    those that reach an output through differentiable ops, and a seed for the upstream gradients.
    A graph where none qualifies stays forward-only."""
    every = draw(st.booleans())
    marked = []
    for spec in graph.inputs:
        if isinstance(spec, TensorInput) and spec.dtype in FLOAT_DTYPES and (every or draw(st.booleans())):
            reaches, safe = grad_reach(graph, spec.name)
            spec = dataclasses.replace(spec, requires_grad=reaches and safe)
        marked.append(spec)
    graph = dataclasses.replace(graph, inputs=tuple(marked))
    return dataclasses.replace(graph, grad_seed=draw(ints(0, 2**31 - 1))) if graph.requires_grad else graph


def _training(graph: Graph, rng: random.Random) -> Graph:
    """A mutated seed as a backward case: every float input whose gradient reaches an output safely
    requires grad, as in the seeds' training mode."""
    marked = tuple(dataclasses.replace(i, requires_grad=all(grad_reach(graph, i.name)))
                   if isinstance(i, TensorInput) and i.dtype in FLOAT_DTYPES else i for i in graph.inputs)
    graph = dataclasses.replace(graph, inputs=marked)
    return dataclasses.replace(graph, grad_seed=rng.randrange(2**31)) if graph.requires_grad else graph


@functools.lru_cache(maxsize=64)
def _drawer(config: GenConfig) -> Callable[[bytes], object]:
    """A Hypothesis test that records the graph it is given; built once per config because
    wrapping a test with @given is far costlier than one draw."""
    drawn: list[Graph] = []

    @settings(database=None, suppress_health_check=list(HealthCheck), deadline=None)
    @given(graphs(config))
    def capture(graph: Graph) -> None:
        drawn.append(graph)

    def draw_from(buffer: bytes) -> Graph | None:
        drawn.clear()
        capture.hypothesis.fuzz_one_input(buffer)
        return drawn[-1] if drawn else None
    return draw_from


def generate(seed: int, config: GenConfig = GenConfig()) -> Graph:
    """Deterministically draw one graph from an integer seed: the same seed gives the same graph."""
    return generate_steered(seed, config)[0]


def generate_steered(seed: int, config: GenConfig = GenConfig()) -> tuple[Graph, int]:
    """generate(), and how many draws it discarded because they held a trigger of
    `config.avoid` (fuzzfuse.steering): the graph is drawn again, from the seed, up to MAX_REDRAWS
    times, except for the cases drawn unsteered. The last redraw leaves out the op that ends each
    trigger the draws still held (where other ops, an anchor among them, remain): in a batch aimed
    at that op (`steer`), or one of few ops, every redraw would hold it again."""
    plain = dataclasses.replace(config, avoid=())  # one drawer, however many triggers are known
    graph = _draw(seed, plain)
    if not config.avoid or unsteered(seed):
        return graph, 0
    for redraw in range(1, MAX_REDRAWS + 1):
        types = graph.infer_types()
        held = [t for t in config.avoid if t.held_by(graph, types)]
        if not held:
            return graph, redraw - 1
        if redraw == MAX_REDRAWS:
            feats = plain.features
            ops = tuple(o for o in feats.ops if o not in {t.ops[-1][0] for t in held})
            if ops and _with_anchor(random.Random(0), ops, feats) == ops:  # no op left, or no anchor: keep them
                plain = dataclasses.replace(plain, features=dataclasses.replace(feats, ops=ops))
        graph = _draw(f"{seed}:steered{redraw}", plain)
    return graph, MAX_REDRAWS


def _draw(seed: int | str, config: GenConfig) -> Graph:
    source = config.features.source
    if source not in SOURCES:
        raise ValueError(f"unknown case source {source!r}; one of {', '.join(SOURCES)}")
    rng = random.Random(f"{seed}:source")
    if source == "seeds" or (source == "mixed" and rng.random() < 0.5):
        graph = mutated_seed(rng, config.features)
        return _training(graph, rng) if config.backward else graph
    for attempt in range(8):
        graph = _drawer(config)(random.Random(f"{seed}:{attempt}").randbytes(8192))
        if graph is not None:
            return graph
    raise GraphError(f"seed {seed} did not yield a graph")


def config_to_json(config: GenConfig) -> dict:
    return {**dataclasses.asdict(config), "avoid": [t.to_json() for t in config.avoid]}


def config_from_json(d: dict) -> GenConfig:
    feats = {k: tuple(v) if isinstance(v, list) else v for k, v in d.get("features", {}).items()}
    shapes_ = {k: tuple(v) if isinstance(v, list) else v for k, v in d.get("shapes", {}).items()}
    rest = {k: v for k, v in d.items() if k not in ("features", "shapes", "avoid")}
    return GenConfig(features=Features(**feats), shapes=ShapeConfig(**shapes_),
                     avoid=tuple(Trigger.from_json(t) for t in d.get("avoid") or ()), **rest)


# ---- narrow triggers (issue 17) --------------------------------------------------------------------
def graph_triples(graph: Graph) -> list[str]:
    """The "op|dtype|layout" triples a graph exercises: each op with its first tensor operand's
    dtype and memory layout (a graph input's layout kind; a computed value counts as contiguous)."""
    types = graph.infer_types()
    layouts = {i.name: i.layout.kind for i in graph.inputs if isinstance(i, TensorInput)}
    out = []
    for n in graph.nodes:
        first = next((a for a in n.args if isinstance(a, str) and not types[a].is_scalar), None)
        if first is not None:
            out.append(f"{n.op}|{types[first].dtype}|{layouts.get(first, 'contiguous')}")
    return sorted(set(out))


@functools.lru_cache(maxsize=16)
def admitted_triples(base: Features) -> tuple[tuple[str, str, str], ...]:
    """Every (op, dtype, layout) of `base` the registry admits: the op accepts operands of that
    dtype (all of them, rank 4; where's condition makes its triples bool ones, as graph_triples
    names an op by its first operand), and the layout can hold a rank-4 tensor."""
    out = []
    for name in base.ops:
        op = OPS[name]
        for dtype in base.dtypes:
            if not op.accepts([ValueType((2, 3, 4, 5), dtype)] * op.arity, tuple(f"x{k}" for k in range(op.arity))):
                continue
            out.extend((name, dtype, layout) for layout in base.layouts if layout != "channels_last_3d")
    return tuple(out)


def steer(base: Features, rng: random.Random) -> Features:
    """A feature set aimed at one admitted triple, drawn uniformly (so every triple is reached
    regularly, however rare the swarm makes it): its op among STEER_PARTNERS others (a fuser may
    not fuse an op alone), its dtype and layout, with float32 and contiguous beside them. Drawn from the batch's rng, not from the
    coverage so far, so that a campaign's cases stay a function of (seed, index) (resume and
    shards rely on it); the stats' triple counts show how even the coverage is."""
    triples = admitted_triples(base)
    if not triples:
        return base
    op, dtype, layout = rng.choice(triples)
    partners = rng.sample([o for o in base.ops if o != op], min(STEER_PARTNERS, len(base.ops) - 1))

    def keep(items: tuple[str, ...], aimed: str) -> tuple[str, ...]:
        return tuple(x for x in items if x == aimed or x in ("float32", "contiguous")) or (aimed,)
    return dataclasses.replace(base, ops=_with_anchor(rng, (op, *partners), base), dtypes=keep(base.dtypes, dtype),
                               layouts=keep(base.layouts, layout), patterns=())


def swarm_max_ops(rng: random.Random, max_ops: int) -> int:
    """Graph size swarmed per batch too: a quarter of the batches make graphs of 1-3 ops, where a
    narrow bug shows unmasked, the rest up to max_ops. Not more: a fuser that fuses two ops or
    more (TorchScript's) leaves a one-op graph unfused."""
    return min(max_ops, rng.randint(2, 3)) if rng.random() < 0.25 else max_ops


def batch_features(campaign_seed: int, batch: int, base: Features = Features(),
                   integer_batches: bool = True) -> Features:
    """The swarm feature set of one batch of cases, a pure function of the campaign seed."""
    return swarm(random.Random(f"{campaign_seed}:{batch}"), base, integer_batches)


__all__ = ["Features", "ShapeConfig", "GenConfig", "swarm", "shapes", "values", "layouts", "graphs",
           "generate", "batch_features", "config_to_json", "config_from_json", "scalar_constants", "PATTERNS",
           "FOCUS_PATTERNS", "ALL_LAYOUTS", "requires_grad", "grad_reach", "graph_triples", "admitted_triples",
           "steer", "swarm_max_ops", "NARROW_DISTS", "SPECIAL_DISTS", "SOURCES"]
