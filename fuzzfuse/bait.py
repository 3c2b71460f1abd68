"""Fold bait: in a share of swarm batches (Features.fold_bait), op pairs that fusers get wrong and
that random choice of two ops in a row rarely draws are put next to each other.

Each pair is a kind of rewrite a fuser makes across two ops, named by what the registry says of
the ops, never by their names:
- an algebraic fold (ir.ops.ALGEBRAIC_FOLDS: exp(log x));
- a new bool or integer value accumulated (cumsum of a bool cast is int64: a fuser kept bool), or
  an integer value, newly typed or put through integer arithmetic that may wrap (x * 3, x ** 3),
  read by a float math call (cos of an int8 pow computed in float32 loses the wrap);
- a reduction after a reduction (nvFuser's schedulers asserted on consecutive reductions);
- a value scaled by a constant, then reduced or normalized: a simplifier moves the scale through
  (softmax(c * x) as exp(c * (x - max x)), right only for c > 0; amax(c * x) = c * amax(x) too);
  the scale is put in where the op before took no constant;
- an identity operation (x + 0, x * 1: found by running the ops, `identity_constants`), folded to
  x, read through an op that reads a zero's sign: -0.0 + 0 is +0.0, x keeps -0.0;
- a float value read through such an op (1/x) at all;
- a math call no standard rounds correctly (sin, exp: `Op.libm_rounded`) read by a step function
  (floor, round, sign: `step_readers`), which turns a one-ulp error into a whole unit: a fuser's
  vectorized cos(0) one ulp below 1 floors to 0.

`strategies` calls `bait` after each op of a bait batch; what it adds is drawn like any op.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from hypothesis import strategies as st

from .ir import OPS, GraphError
from .ir.builder import GraphBuilder
from .ir.ops import choice, ints
from .ir.types import INT_DTYPES, ValueType, is_float, scalar_kind

# What `strategies._try_op` is: add an op with its first operand among some values.
TryOp = Callable[..., "str | None"]
# Constants tried as an op's identity operand (`identity_constants`).
IDENTITY_CANDIDATES = (0.0, 1.0, -1.0)


def bait(draw: Callable, b: GraphBuilder, cfg: Any, producer: str, out: str, tensors: list[str],
         scalars: list[str], try_op: TryOp) -> None:
    """After `producer`'s value `out`, one op of a pair (the module's docstring), taking `out`
    first (`cfg`: the batch's strategies.GenConfig, which `try_op` draws with): the algebraic fold
    wherever there is one, else, for half the ops, one of `bait_pairs`; a pair that needs an op
    with a constant between (`middle_ops`: x + 0 before 1/x, x * c before softmax, an int8 x * 3
    before cos) adds it where `producer` was none. A cast's fold is another cast: a cast to bool
    or an integer is half the time followed by one that retypes it instead."""
    folds = [o for o in cfg.features.ops if producer in OPS[o].folds_after]
    made = next(n for n in b.nodes if n.name == out)
    pairs = bait_pairs(cfg.features.ops, producer, b.types[out], [b.types[r] for r in made.refs()])
    if folds and "retype" in pairs and draw(st.booleans()):
        followers = pairs["retype"]
    elif folds:
        try_op(draw, b, choice(draw, folds), cfg, [out], tensors, scalars)
        return
    elif pairs and draw(st.booleans()):  # half the ops: the batch's other draws stay as they were
        # A pair that this producer makes possible (a reduction's, a new integer's, a math
        # call's) half the time, before those every float value has.
        specific = [k for k in pairs if k in ("retype", "wrap", "reduction", "step")]
        kind = choice(draw, specific if specific and draw(st.booleans()) else list(pairs))
        followers = pairs[kind]
        if kind == "zero sign" and draw(ints(0, 2)):  # any float op has them: fewer
            return
        constants = [a for a in made.args[1:] if not isinstance(a, str)]
        if kind in MIDDLE and not (kind != "identity" and constants and OPS[producer].kind == "binary"):
            out = _middle_op(draw, b, kind, cfg.features.ops, out)
            if out is None:
                return
    else:
        return
    for _ in range(3):  # a follower whose type check turns `out` down: another
        if try_op(draw, b, choice(draw, followers), cfg, [out], tensors, scalars):
            return


# The pairs whose first op is one with a constant, put between `out` and the follower: the
# constants it takes, given an op's identity constants (`identity_constants`).
MIDDLE = {
    "identity": lambda identities: list(identities),  # x + 0, x * 1: folded to x
    "scale": lambda identities: [-1.0, -2.0, 0.5, 3.0, -10000.0] if 1.0 in identities else [],  # x * c
    "wrap": lambda identities: [3, 2, 7] if identities else [],  # int8 x * 3, x ** 3, x + 7 wrap
}


def middle_ops(kind: str, ops: tuple[str, ...]) -> list[str]:
    """The ops a MIDDLE pair of `kind` may put between: binary ops with identity constants (the
    arithmetic ones: add, sub, mul, div, pow), a scale's the multiplicative ones that are no math
    call (mul, div)."""
    return [o for o in ops if MIDDLE[kind](identity_constants(o)) and not (kind == "scale" and OPS[o].math_call)]


def _middle_op(draw: Callable, b: GraphBuilder, kind: str, ops: tuple[str, ...], out: str) -> str | None:
    """`op(out, c)` for a drawn middle op of `kind` and one of its constants; None where there is
    none or the type check turns it down (an integer's division is a float)."""
    candidates = middle_ops(kind, ops)
    if not candidates:
        return None
    op = choice(draw, candidates)
    constant = choice(draw, MIDDLE[kind](identity_constants(op)))
    try:
        typed = OPS[op].infer([b.types[out], ValueType(None, scalar_kind(constant))], {})
        if kind == "wrap" and typed.dtype != b.types[out].dtype:  # an integer stays one (x / 3 is float)
            return None
        return b.add(op, out, constant)
    except (GraphError, ValueError, KeyError):
        return None


def bait_pairs(ops: tuple[str, ...], producer: str, made: ValueType, read: list[ValueType]) -> dict[str, list[str]]:
    """The followers of each kind of pair (the module's docstring) that applies after `producer`
    made a value of type `made` from operands of types `read`."""
    pairs = {}
    retyped = all(t.dtype != made.dtype for t in read if t.dtype)
    if made.dtype in ("bool",) + INT_DTYPES and retyped:
        pairs["retype"] = [o for o in ops if OPS[o].accumulates
                           or (OPS[o].math_call and OPS[o].arity == 1 and made.dtype != "bool")]
    elif made.dtype in INT_DTYPES and middle_ops("wrap", ops):
        pairs["wrap"] = [o for o in ops if OPS[o].math_call and OPS[o].arity == 1]
    if OPS[producer].kind == "reduction":
        pairs["reduction"] = [o for o in ops if OPS[o].kind == "reduction"]
    if made.dtype and is_float(made.dtype) and OPS[producer].libm_rounded:
        pairs["step"] = [o for o in ops if o in step_readers()]
    if made.dtype and is_float(made.dtype):
        pairs["zero sign"] = [o for o in ops if o in zero_sign_readers()]
        if pairs["zero sign"] and middle_ops("identity", ops):
            pairs["identity"] = pairs["zero sign"]
        if middle_ops("scale", ops):
            # As often a normalization as a reduction: softmax(x * scale) is attention's every layer.
            normalizations = [o for o in ops if OPS[o].kind == "normalization"]
            reductions = [o for o in ops if OPS[o].kind == "reduction"]
            pairs["scale"] = normalizations * max(1, len(reductions) // max(1, len(normalizations))) + reductions
    return {kind: followers for kind, followers in pairs.items() if followers}


def _unary_ops_where(holds) -> frozenset[str]:
    """The one-operand unary ops for which `holds(op)` is true; an op whose eager form refuses the
    probe values is left out."""
    readers = set()
    for name, op in OPS.items():
        if op.kind != "unary" or op.arity != 1:
            continue
        try:
            if holds(op):
                readers.add(name)
        except (RuntimeError, TypeError):
            continue
    return frozenset(readers)


@functools.cache
def zero_sign_readers() -> frozenset[str]:
    """The unary ops whose value differs for -0.0 and +0.0 (reciprocal, rsqrt), found by running
    their eager forms."""
    import torch

    def reads_the_sign(op) -> bool:
        minus, plus = op.eager(torch.tensor([-0.0])), op.eager(torch.tensor([0.0]))
        return minus.is_floating_point() and not bool((minus == plus).all() | (minus.isnan() & plus.isnan()).all())
    return _unary_ops_where(reads_the_sign)


@functools.cache
def step_readers() -> frozenset[str]:
    """The unary float ops that are step functions: integral results that jump between a value and
    its neighbour one ulp away (floor, ceil, round, trunc, sign), found by running their eager
    forms."""
    import torch
    at = torch.tensor([1.0, 0.0, 0.5, 1.5])
    neighbours = (torch.nextafter(at, torch.tensor(-2.0)), torch.nextafter(at, torch.tensor(2.0)))

    def steps(op) -> bool:
        values = [op.eager(x) for x in (at, *neighbours)]
        integral = all(v.is_floating_point() and bool((v == v.round()).all()) for v in values)
        return integral and any(bool((v != values[0]).any()) for v in values[1:])
    return _unary_ops_where(steps)


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
