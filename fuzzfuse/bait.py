"""Fold bait: in a share of swarm batches (Features.fold_bait), op pairs that fusers get wrong and
that random choice of two ops in a row rarely draws are put next to each other.

Each pair is a kind of rewrite a fuser makes across two ops, named by what the registry says of
the ops, never by their names:
- an algebraic fold (ir.ops.ALGEBRAIC_FOLDS: exp(log x));
- a new bool or integer value accumulated (cumsum of a bool cast is int64: a fuser kept bool), or
  an integer value, newly typed or computed by integer arithmetic that may wrap, read by a float
  math call (cos of an int8 pow computed in float32 loses the wrap);
- a reduction after a reduction (nvFuser's schedulers asserted on consecutive reductions);
- a value scaled by a constant, then reduced or normalized: a simplifier moves the scale through
  (softmax(c * x) as exp(c * (x - max x)), right only for c > 0; amax(c * x) = c * amax(x) too);
- an identity operation (x + 0, x * 1: found by running the ops, `identity_constants`), folded to
  x, read through an op that reads a zero's sign: -0.0 + 0 is +0.0, x keeps -0.0;
- a float value read through such an op (1/x) at all.

`strategies` calls `bait` after each op of a bait batch; what it adds is drawn like any op.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from hypothesis import strategies as st

from .ir import OPS, GraphError
from .ir.builder import GraphBuilder
from .ir.ops import choice, ints
from .ir.types import INT_DTYPES, ValueType, is_float

# What `strategies._try_op` is: add an op with its first operand among some values.
TryOp = Callable[..., "str | None"]
# Constants tried as an op's identity operand (`identity_constants`).
IDENTITY_CANDIDATES = (0.0, 1.0, -1.0)


def bait(draw: Callable, b: GraphBuilder, cfg: Any, producer: str, out: str, tensors: list[str],
         scalars: list[str], try_op: TryOp) -> None:
    """After `producer`'s value `out`, one op of a pair (the module's docstring), taking `out`
    first (`cfg`: the batch's strategies.GenConfig, which `try_op` draws with): the algebraic fold wherever there is one, else, for half the ops, one of `bait_pairs`
    (an identity pair adds its identity op and the reader). A cast's fold is another cast: a cast
    to bool or an integer is half the time followed by one that retypes it instead."""
    folds = [o for o in cfg.features.ops if producer in OPS[o].folds_after]
    made = next(n for n in b.nodes if n.name == out)
    pairs = bait_pairs(cfg.features.ops, producer, b.types[out], [b.types[r] for r in made.refs()],
                       scaled=any(not isinstance(a, str) for a in made.args[1:]))
    if folds and "retype" in pairs and draw(st.booleans()):
        followers = pairs["retype"]
    elif folds:
        try_op(draw, b, choice(draw, folds), cfg, [out], tensors, scalars)
        return
    elif pairs and draw(st.booleans()):  # half the ops: the batch's other draws stay as they were
        kind = choice(draw, list(pairs))
        followers = pairs[kind]
        if kind in ("zero sign", "identity") and draw(ints(0, 2)):  # any float op has them: fewer
            return
        if kind == "identity":
            out = _identity_op(draw, b, followers, out)
            followers = pairs["zero sign"]
            if out is None:
                return
    else:
        return
    for _ in range(3):  # a follower whose type check turns `out` down: another
        if try_op(draw, b, choice(draw, followers), cfg, [out], tensors, scalars):
            return


def _identity_op(draw: Callable, b: GraphBuilder, ops: list[str], out: str) -> str | None:
    """`op(out, c)` for a drawn op of `ops` and one of its identity constants; None where the
    type check turns it down."""
    op = choice(draw, ops)
    try:
        return b.add(op, out, choice(draw, identity_constants(op)))
    except GraphError:
        return None


def bait_pairs(ops: tuple[str, ...], producer: str, made: ValueType, read: list[ValueType],
               scaled: bool = False) -> dict[str, list[str]]:
    """The followers of each kind of pair (the module's docstring) that applies after `producer`
    made a value of type `made` from operands of types `read` (`scaled`: and a constant)."""
    pairs = {}
    retyped = all(t.dtype != made.dtype for t in read if t.dtype)
    arithmetic = OPS[producer].kind in ("unary", "binary", "ternary") and not OPS[producer].compares
    if made.dtype in ("bool",) + INT_DTYPES and retyped:
        pairs["retype"] = [o for o in ops if OPS[o].accumulates
                           or (OPS[o].math_call and OPS[o].arity == 1 and made.dtype != "bool")]
    elif made.dtype in INT_DTYPES and arithmetic:
        pairs["wrap"] = [o for o in ops if OPS[o].math_call and OPS[o].arity == 1]
    if OPS[producer].kind == "reduction":
        pairs["reduction"] = [o for o in ops if OPS[o].kind == "reduction"]
    if scaled and arithmetic and OPS[producer].kind == "binary":
        pairs["scaled"] = [o for o in ops if OPS[o].kind in ("reduction", "normalization")]
    if made.dtype and is_float(made.dtype):
        pairs["zero sign"] = [o for o in ops if o in zero_sign_readers()]
        if pairs["zero sign"]:
            pairs["identity"] = [o for o in ops if identity_constants(o)]
    return {kind: followers for kind, followers in pairs.items() if followers}


@functools.cache
def zero_sign_readers() -> frozenset[str]:
    """The unary ops whose value differs for -0.0 and +0.0 (reciprocal, rsqrt), found by running
    their eager forms."""
    import torch
    readers = set()
    for name, op in OPS.items():
        if op.kind != "unary" or op.arity != 1:
            continue
        try:
            minus, plus = op.eager(torch.tensor([-0.0])), op.eager(torch.tensor([0.0]))
        except (RuntimeError, TypeError):
            continue
        if minus.is_floating_point() and not bool((minus == plus).all() | (minus.isnan() & plus.isnan()).all()):
            readers.add(name)
    return frozenset(readers)


@functools.cache
def identity_constants(name: str) -> tuple[float, ...]:
    """The constants c of IDENTITY_CANDIDATES for which the binary op `name` gives back its float
    operand unchanged, NaN and infinities included (x + 0, x - 0, x * 1, x / 1, x ** 1), found by
    running its eager form; x + 0 is no identity of -0.0 (it gives +0.0), and that is the point:
    a simplifier that folds it keeps -0.0."""
    import torch
    op = OPS[name]
    if op.kind != "binary" or 1 not in op.scalar_positions or op.compares:
        return ()
    x = torch.tensor([1.5, -2.0, 3e38, float("inf"), float("-inf"), float("nan"), 7.0])
    found = []
    for c in IDENTITY_CANDIDATES:
        try:
            y = op.eager(x, c)
        except (RuntimeError, TypeError):
            continue
        if isinstance(y, torch.Tensor) and y.dtype == x.dtype and bool(((y == x) | (y.isnan() & x.isnan())).all()):
            found.append(c)
    return tuple(found)
