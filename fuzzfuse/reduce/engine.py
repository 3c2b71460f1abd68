"""The reducer's fixpoint loop: run passes cheap first, accept the first interesting candidate that is
strictly smaller, restart that pass on the new graph (C-Reduce style), and stop when a whole round
over all passes makes no progress.

Termination: a candidate is accepted only when `cost(candidate) < cost(current)` in a lexicographic
order over tuples of non-negative integers of fixed length. That order is well-founded, so no
sequence of accepted candidates is infinite, whatever the passes yield.

Determinism: candidates are judged in the order a pass yields them and the first interesting one
wins. Asking `is_interesting` for a batch only prefetches the answers for the candidates that follow,
so the final graph does not depend on `batch` (the counters do).

Parallelism: a batch is the next `batch` candidates in the order a sequential reduction would ask
them, across passes: when a pass has fewer left than the batch holds, the next passes' candidates
on the same graph fill it (they are what comes next if this pass finds nothing). A reduced graph of
a few ops gives each pass a few candidates, and the workers would otherwise idle on exactly the
reductions a campaign runs most.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Iterator

from ..ir.graph import Graph, Layout, Node, TensorInput, Values
from ..ir.ops import OPS
from ..ir.values import logical_values
from .passes import DEFAULT_PASSES, FIRST_PASSES, LAST_PASSES, admissible, op_rank
from .shapes import irregular

Predicate = Callable[[list[Graph]], list[bool]]
Pass = Callable[[Graph], Iterator[Graph]]

# Lower is simpler. Only the moves the passes make need to go downhill: bf16/fp16/fp64 -> fp32,
# int64 -> int32.
DTYPE_RANK = {"float32": 0, "int32": 1, "bool": 1, "int64": 2, "float64": 2, "float16": 3, "bfloat16": 3,
              "int8": 2, "int16": 2, "uint8": 2, "float8_e4m3fn": 3, "float8_e5m2": 3}
# zeros < ones < arange < a seeded distribution < exact bytes < anything with special values mixed in.
VALUES_RANK = {"zeros": 0, "ones": 1, "arange": 2, "uniform": 3, "normal": 3, "halves": 3, "denormals": 4,
               "lone_special": 6, "specials": 6}
EXACT_RANK, SPECIALS_RANK = 5, 6


def constant_cost(value: float | int | bool) -> int:
    """0 and 1 (and False/True) are the simplest constants; everything else is one step up."""
    return 0 if value == 0 else 1 if value == 1 else 2


def attrs_cost(node: Node) -> int:
    """Fewer reduction dims, keepdim off, correction 0 and a unit addcmul value are simpler."""
    a = node.attrs
    dims = len(a.get("dims", ())) if OPS[node.op].kind == "reduction" else 0
    return dims + int(bool(a.get("keepdim"))) + int(a.get("correction", 0)) \
        + (constant_cost(a["value"]) if "value" in a else 0)


def layout_cost(layout: Layout) -> int:
    return 0 if layout.kind == "contiguous" else 1


def values_cost(values: Values) -> int:
    if values.exact is not None:
        return EXACT_RANK
    if values.specials > 0:
        return SPECIALS_RANK
    return VALUES_RANK[values.dist] + int(values.scale != 1.0)


def cost(graph: Graph) -> tuple[int, ...]:
    """The order the reducer descends, most important first:

    1. op count;  2. number of inputs;  3. number of outputs;  4. total input numel;
    5. sum of input ranks;  6. op simplicity (sum of `op_rank`, lower for add/mul/neg);
    7. dtype complexity (inputs and cast targets);  8. non-contiguous inputs and gradient targets;
    9. attribute and scalar complexity (reduction dims, keepdim, correction, constants, scalar inputs);
    10. value complexity (zeros < ones < arange < random < exact < specials);
    11. elements of exact inputs other than 0 and 1;  12. total numel of all intermediate values.

    Input sizes come before attributes, intermediate sizes last, so that "fewer reduction dims"
    (which grows the reduction's output) still counts as simpler.
    """
    tensors = [i for i in graph.inputs if isinstance(i, TensorInput)]
    scalars = [i for i in graph.inputs if not isinstance(i, TensorInput)]
    types = graph.infer_types()
    return (
        len(graph.nodes),
        len(graph.inputs),
        len(graph.outputs),
        sum(math.prod(i.shape) for i in tensors),
        sum(len(i.shape) for i in tensors),
        sum(op_rank(n.op) for n in graph.nodes),
        sum(DTYPE_RANK[i.dtype] for i in tensors) + sum(DTYPE_RANK[n.attrs["dtype"]] for n in graph.nodes
                                                          if n.op == "cast"),
        sum(layout_cost(i.layout) + i.requires_grad for i in tensors),
        sum(attrs_cost(n) + sum(constant_cost(a) for a in n.args if not isinstance(a, str)) for n in graph.nodes)
        + sum(constant_cost(s.value) for s in scalars),
        sum(values_cost(i.values) for i in tensors),
        sum(int(irregular(logical_values(i)).sum()) for i in tensors if i.values.exact is not None),
        sum(types[n.name].numel() for n in graph.nodes),
    )


@dataclass
class PassStats:
    """A pass's counters (and the whole reduction's): queries (candidates sent to `is_interesting`;
    the whole reduction's include the original), cache_hits, successes, rejected (candidates dropped
    unasked: ill-typed or not smaller), and seconds."""

    queries: int = 0
    cache_hits: int = 0
    successes: int = 0
    rejected: int = 0
    seconds: float = 0.0


@dataclass
class ReductionStats(PassStats):
    """A reduction's counters, live (what `progress` is shown) and final: besides PassStats', the
    rounds, the pass running now (`current_pass`) and the graph's size, why it stopped ("fixpoint" or
    "max_queries"), ops/inputs/cost before and after, and `passes`: each pass's own counters."""

    rounds: int = 0
    passes: dict[str, PassStats] = field(default_factory=dict)
    current_pass: str | None = None
    size: int | None = None
    stopped: str = "fixpoint"
    ops_before: int | None = None
    inputs_before: int | None = None
    cost_before: tuple | None = None
    ops_after: int | None = None
    inputs_after: int | None = None
    cost_after: tuple | None = None

    def to_json(self) -> dict:
        """For benchmark records (benchmarks/reduce.py)."""
        return asdict(self)


@dataclass
class Reduction:
    """The reduced graph and the reduction's counters."""

    graph: Graph
    stats: ReductionStats


class _Engine:
    """One reduction's cache and counters."""

    def __init__(self, is_interesting: Predicate, batch: int, progress, max_queries: int | None) -> None:
        self.is_interesting, self.batch = is_interesting, max(1, batch)
        self.progress, self.max_queries = progress, max_queries
        self.start = time.perf_counter()
        self.cache: dict[str, bool] = {}
        self.stats = ReductionStats()

    def out_of_queries(self) -> bool:
        return self.max_queries is not None and self.stats.queries >= self.max_queries

    def ask(self, graphs: list[Graph], digests: list[str], per_pass: list[PassStats | None]) -> None:
        """Query the uncached graphs in one call and cache the answers; each counts as a query of
        its pass (per_pass: one for each graph), which is charged its share of the call's seconds."""
        todo = {d: (g, p) for g, d, p in zip(graphs, digests, per_pass) if d not in self.cache}
        if not todo:
            return
        start = time.perf_counter()
        answers = self.is_interesting([g for g, _ in todo.values()])
        if len(answers) != len(todo):
            raise ValueError(f"is_interesting answered {len(answers)} times for {len(todo)} candidates")
        self.cache.update(zip(todo, map(bool, answers)))
        spent = (time.perf_counter() - start) / len(todo)
        for _, stats in todo.values():
            self.count(stats, "queries")
            if stats is not None:
                stats.seconds += spent
        self.stats.seconds = time.perf_counter() - self.start
        if self.progress is not None:
            self.progress(self.stats)

    def count(self, per_pass: PassStats | None, counter: str, n: int = 1) -> None:
        """Add n to one of PassStats' counters, of the reduction and of the pass running."""
        for stats in (self.stats, per_pass) if per_pass is not None else (self.stats,):
            setattr(stats, counter, getattr(stats, counter) + n)

    def run_passes(self, passes: list[Pass], graph: Graph, current: tuple,
                   skip: int = 0) -> tuple[Graph, tuple, int, int] | None:
        """The first interesting, strictly smaller candidate over `graph` of passes[0] after its
        first `skip` ones, else of passes[1], and so on: (candidate, its cost, the index of its pass
        in `passes`, its position in that pass); or None."""
        def stream():
            for k, pass_ in enumerate(passes):
                name = getattr(pass_, "__name__", repr(pass_))
                per_pass = self.stats.passes.setdefault(name, PassStats())
                candidates = enumerate(self._smaller(pass_(graph), current, per_pass))
                for i, (g, d, c) in itertools.islice(candidates, skip if k == 0 else 0, None):
                    yield g, d, c, (k, i, name, per_pass)

        for chunk in _chunks(stream(), self.batch):
            known = {d for _, d, _, _ in chunk if d in self.cache}
            if len(known) < len(chunk) and self.out_of_queries():
                self.stats.stopped = "max_queries"
                return None
            self.stats.current_pass = chunk[0][3][2]
            self.ask([g for g, _, _, _ in chunk], [d for _, d, _, _ in chunk], [w[3] for *_, w in chunk])
            for candidate, digest, c, (k, position, _, per_pass) in chunk:
                # Answers past the winner were prefetched for nothing and are not counted, so
                # that hits do not depend on the batch size more than they must.
                self.count(per_pass, "cache_hits", int(digest in known))
                known.add(digest)
                if self.cache[digest]:
                    self.count(per_pass, "successes")
                    return candidate, c, k, position
        return None

    def _smaller(self, candidates: Iterable[Graph], current: tuple, per_pass: PassStats):
        """Admissible candidates strictly below `current`, with digest and cost."""
        for g in candidates:
            c = cost(g) if admissible(g) else None
            if c is None or c >= current:
                self.count(per_pass, "rejected")
                continue
            yield g, g.digest(), c


def _chunks(items: Iterable, n: int) -> Iterator[list]:
    chunk: list = []
    for x in items:
        chunk.append(x)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _fixpoint(engine: _Engine, passes: list[Pass], graph: Graph, current: tuple) -> tuple[Graph, tuple]:
    """Run `passes` in order until a whole round makes no progress."""
    progressed = True
    while progressed:
        progressed = False
        engine.stats.rounds += 1
        # After a success a pass resumes where it was (C-Reduce keeps a pass's position): the
        # candidates before it just failed on a graph one step larger. The next round starts
        # every pass from the top, so the fixpoint still holds.
        k, position = 0, 0
        while k < len(passes) and (found := engine.run_passes(passes[k:], graph, current, skip=position)):
            graph, current, offset, position = found
            k += offset
            engine.stats.size = graph.size
            progressed = True
    return graph, current


class NotInteresting(ValueError):
    """The graph handed to the reducer does not fail as recorded (a flaky or environment-bound
    failure): another case of the same signature may still."""


def reduce(graph: Graph, is_interesting: Predicate, *, first_passes: Iterable[Pass] = FIRST_PASSES,
           passes: Iterable[Pass] = DEFAULT_PASSES, last_passes: Iterable[Pass] = LAST_PASSES, batch: int = 1,
           progress: Callable[[ReductionStats], None] | None = None, max_queries: int | None = None) -> Reduction:
    """Shrink `graph` while `is_interesting` holds, to a fixpoint of `passes` (or `max_queries`).

    `is_interesting(candidates) -> [bool]` must be True exactly when a candidate fails the way the
    original does; it gets up to `batch` candidates per call (run them in parallel). It is asked
    about the original first: reducing a graph that is not interesting would return a meaningless
    result, so that raises NotInteresting. `progress(stats)` is called after each call to it. Once
    `max_queries` candidates have been sent, the reduction stops where it is. `first_passes` run
    before `passes`, and `last_passes` after them, each group to a fixpoint of its own (C-Reduce's
    "first" and "last" groups).
    """
    engine = _Engine(is_interesting, batch, progress, max_queries)
    if not admissible(graph):
        raise ValueError("the graph to reduce does not type-check")
    current = cost(graph)
    stats = engine.stats
    stats.size = stats.ops_before = graph.size
    stats.inputs_before, stats.cost_before = len(graph.inputs), current
    engine.ask([graph], [graph.digest()], [None])
    if not engine.cache[graph.digest()]:
        raise NotInteresting("the original graph is not interesting (it does not fail as recorded now)")
    for group in (list(first_passes), list(passes), list(last_passes)):
        graph, current = _fixpoint(engine, group, graph, current)
    stats.ops_after, stats.inputs_after, stats.cost_after = graph.size, len(graph.inputs), current
    stats.seconds = time.perf_counter() - engine.start
    return Reduction(graph, stats)
