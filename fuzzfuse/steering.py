"""Steering generation away from known bugs' triggers.

A campaign that knows a root cause (a `--known` repro, or one it reduced itself) gains little from
drawing it again: on oneDNN Graph, two known crashes (clamp with tensor bounds, a 0-d operand) took
over half of a campaign's cases. Each known root cause's reduced graph gives a `Trigger`: its ops
in order, each argument by what it is (an earlier op of the trigger, a tensor of a dtype category,
a scalar input, a constant of a Python kind). A drawn graph that holds the trigger as a subgraph is
most likely to fail the known way again, so `strategies.generate` draws again, up to
MAX_REDRAWS times. One case in KEEP_EVERY is drawn unsteered, so that a known bug's hits go on
(at a tenth of their rate): a fix or a regression of it is still noticed.

The triggers: each `--known` repro's reduced graph and those of the variants folded into it
(`also_seen_as`), of the campaign's routes; then every graph the campaign reduces. A repro holds
one form of its bug, and a campaign meets others (oneDNN's "IValue is not a Scalar" comes of clamp
with tensor bounds, of clamp_min with one, of clamp with scalar inputs): a known anchored bug hit
through a graph that holds no trigger is reduced, a few times per bug, to learn its other forms
(fuzzfuse.reductions).

What a trigger leaves out, on purpose:
- sizes and ranks, except that a reduced graph mixing 0-d and n-d tensors keeps which is which
  (the reducer makes every tensor 0-d that it can: a 0-d tensor alone says nothing of the bug,
  one kept beside an n-d one does);
- the exact float dtype (the reducer moves every dtype toward float32 where the failure allows),
  input values, constants' values and op attributes: a trigger over-approximates, and KEEP_EVERY
  bounds what that costs.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterable

from .ir import Graph, ScalarInput
from .ir.ops import OPS
from .ir.types import category

if TYPE_CHECKING:  # a reduction's finding, read here, never computed: the reducer sits above generation
    from .reduce.generalise import Generalisation

# One case in KEEP_EVERY is drawn as if nothing were known (see the module's docstring).
KEEP_EVERY = 10
MAX_REDRAWS = 8
# The largest share of a campaign's own draws a trigger may hold and still be steered around
# (Steering). A one-op trigger holds a few percent (NNC's frac of a float tensor: 3%), one whose
# ops were all fillers most (`*unary` of a float tensor: 88% on oneDNN Graph).
MAX_BREADTH = 0.2


@dataclass(frozen=True)
class Trigger:
    """A reduced graph's ops as a pattern: ((op, (arg, ...)), ...), where an op is a name or, for a
    filler the generalisation found, a wildcard of its kind (`*unary`: any op of that kind), and an
    arg is "n<k>" (the trigger's k-th op), "t:<category>" or "t0:<category>"/"tn:<category>" (a
    tensor, 0-d or n-d where the trigger keeps ranks), "s:<category>" (a scalar input) or
    "c:<python kind>"."""

    ops: tuple[tuple[str, tuple[str, ...]], ...]

    @staticmethod
    def of(graph: Graph, generalisation: Generalisation | None = None) -> "Trigger":
        """The trigger of a reduced graph. Its fillers (`generalisation`, when found on this graph)
        are what the failure does not need: NNC and oneDNN Graph fuse two ops or more, so the
        reduced graph of a one-op bug keeps a filler beside that op (`neg -> floor` of an int32
        where any floor of an integer tensor crashes). A filler is dropped while another op
        remains, those fed by inputs alone first (each only made a value of its category, which a
        tensor argument of the trigger matches anyway), then those that consume the others; a
        filler that is the last op left stays, as a wildcard of its kind. A wrong value's trigger
        ends at its culprit, the first op whose value is wrong."""
        g = graph.renamed()
        found = generalisation is not None and generalisation.applies_to(graph)
        fillers = {g.nodes[k].name: kind for k, kind in generalisation.ops if k < len(g.nodes)} if found else {}
        if found and generalisation.culprit and generalisation.culprit[0] < len(g.nodes):
            g = replace(g, outputs=(g.nodes[generalisation.culprit[0]].name,))  # what follows only observes it
        g = g.without_dead_code()
        types = g.infer_types()
        ranks = {types[i.name].rank for i in g.inputs if not isinstance(i, ScalarInput)}
        ranked = 0 in ranks and len(ranks) > 1
        kept, computed = list(g.nodes), {n.name for n in g.nodes}
        for leading in (True, False):
            for n in list(kept):
                fed_by_inputs = not any(a in computed for a in n.args if isinstance(a, str))
                if n.name in fillers and len(kept) > 1 and fed_by_inputs == leading:
                    kept.remove(n)
        index = {n.name: k for k, n in enumerate(kept)}

        def arg(a) -> str:
            if not isinstance(a, str):
                return f"c:{type(a).__name__}"
            if a in index:
                return f"n{index[a]}"
            t = types[a]
            if t.is_scalar:
                return f"s:{category(t.dtype)}"
            return f"{('tn', 't0')[t.rank == 0] if ranked else 't'}:{category(t.dtype)}"
        return Trigger(tuple((f"*{fillers[n.name]}" if n.name in fillers else n.op, tuple(arg(a) for a in n.args))
                             for n in kept))

    def held_by(self, graph: Graph, types: dict | None = None) -> bool:
        """Whether `graph` holds this trigger: distinct ops of the same names (or, for a wildcard,
        of its kind) whose arguments are what the trigger's are (a tensor argument of the trigger
        may be any value of the graph, a computed one too: the reducer turned whatever computed it
        into an input)."""
        types = types or graph.infer_types()

        def fits(pattern: str, a, chosen: list[str]) -> bool:
            kind, _, what = pattern.partition(":")
            if kind.startswith("n") and not what:
                return a == chosen[int(kind[1:])]
            if kind == "c":
                return not isinstance(a, str) and type(a).__name__ == what
            if not isinstance(a, str) or str(category(types[a].dtype)) != what:
                return False
            t = types[a]
            return t.is_scalar if kind == "s" else not t.is_scalar and (
                kind == "t" or (kind == "t0") == (t.rank == 0))

        def is_op(name: str, pattern: str) -> bool:
            return name == pattern or pattern.startswith("*") and OPS[name].kind == pattern[1:]

        def search(k: int, chosen: list[str]) -> bool:
            if k == len(self.ops):
                return True
            op, args = self.ops[k]
            return any(is_op(n.op, op) and n.name not in chosen and len(n.args) == len(args)
                       and all(fits(p, a, chosen) for p, a in zip(args, n.args))
                       and search(k + 1, chosen + [n.name]) for n in graph.nodes)
        return search(0, [])

    def to_json(self) -> list:
        return [[op, list(args)] for op, args in self.ops]

    @staticmethod
    def from_json(d: list) -> "Trigger":
        return Trigger(tuple((str(op), tuple(str(a) for a in args)) for op, args in d))


def unsteered(seed: int | str) -> bool:
    """Whether the case of `seed` is one of the KEEP_EVERY drawn as if nothing were known."""
    return random.Random(f"{seed}:unsteered").randrange(KEEP_EVERY) == 0


def avoided_by(graph: Graph, triggers: Iterable[Trigger]) -> bool:
    triggers = list(triggers)
    if not triggers:
        return False
    types = graph.infer_types()
    return any(t.held_by(graph, types) for t in triggers)


class Steering:
    """The triggers a campaign steers away from: its known repros', then those it reduces.

    `sample`: draws graphs as the campaign draws them, unsteered (called once, when the first
    trigger is learned: a campaign that knows none pays nothing). A trigger that more than
    MAX_BREADTH of them hold is not steered around but kept in `broad`: every op of its reduced
    graph was a filler (a bug of values, sizes or layout, not of an op: `*binary` of two float
    tensors), so avoiding it would redraw most cases and bend the whole campaign away from the
    ops it is meant to test, for a bug no op choice avoids."""

    def __init__(self, graphs: Iterable[tuple[Graph, Generalisation | None]] = (),
                 sample: Callable[[], Iterable[Graph]] = tuple):
        self.triggers: list[Trigger] = []
        self.broad: list[Trigger] = []
        self._draw_sample, self._sample = sample, None
        for graph, generalisation in graphs:
            self.learn(graph, generalisation)

    def learn(self, graph: Graph, generalisation: Generalisation | None = None) -> None:
        trigger = Trigger.of(graph, generalisation)
        if not trigger.ops or trigger in self.triggers or trigger in self.broad:
            return
        if self.breadth(trigger) > MAX_BREADTH:
            self.broad.append(trigger)
        else:
            self.triggers.append(trigger)

    def breadth(self, trigger: Trigger) -> float:
        """The share of the sample that holds `trigger` (0 without a sample)."""
        if self._sample is None:
            self._sample = [(g, g.infer_types()) for g in self._draw_sample()]
        return sum(trigger.held_by(g, types) for g, types in self._sample) / len(self._sample) if self._sample else 0.0

    def current(self) -> tuple[Trigger, ...]:
        return tuple(self.triggers)

    def holds(self, graph: Graph) -> bool:
        return avoided_by(graph, self.triggers)
