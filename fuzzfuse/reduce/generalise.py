"""Generalisation after reduction: which ops and dtypes of a reduced graph the failure does not need.

A reduced graph is minimal in size, not in what it says. NNC and oneDNN Graph fuse only graphs of
two ops or more, so a reduced graph of theirs keeps a filler beside the op that matters (`frac ->
neg` where only frac does), and another case of the same bug reduces with another filler (`frac ->
add`). A root-cause key that names the filler splits one bug into as many keys as fillers were
drawn. As C-Reduce's and Hypothesis' generalisation (and "wildcard" minimization) do, each position
of the reduced graph is tried with a few alternatives, and the positions where the failure does not
care are written as wildcards:

- an op: up to ALTERNATIVES_PER_OP other ops of the same kind and arity whose type rule gives the
  same output type, among the ops the backend draws, simplest first (the registry answers; no op
  is named here). The position is a *filler* when the failure, with its exact signature, survives
  FILLER_EVIDENCE of them: the key writes it as `*KIND` (`*unary`, `*binary`...);
- an input's dtype (only where the key keeps exact dtypes): up to ALTERNATIVES_PER_DTYPE other
  dtypes of its category that the backend draws; when the failure survives one, the key writes the
  category (`float`) instead of the dtype.

- where the failure killed the process (a signal): whether it needs a value the fuser proves
  constant (fuzzfuse.explain.constant_values: `x - x`, isnan of an integer). Each op where such a
  constant begins is given instead as an input holding its value, nothing left to fold; where that
  stops the failure, the positions of the whole constant region are *folded*: the key names them
  as one folded constant, not the ops that made it (NNC's abs of a folded int16 zero corrupts the
  heap whether the zero came as sub(x, x) or as mul(isnan(x), x) of an int8).

- where the failure is a wrong value: the first op whose own value is already wrong, its *culprit*.
  The graph is run with each op's value as an extra, first output; the earliest op whose value
  the oracle rejects is where the fuser first computes something wrong, and what comes after it
  only observes that: NNC's round of 0.5 gives 1, seen through rsqrt as a nan-inf mismatch and
  through le as a bool one, is one bug. With several outputs every op is probed so, its value
  first among them. Where no op before the last is wrong, the last op is the first wrong one (an
  algebraic rewrite across ops too shows there). The same runs say which ops' values are eager's
  bit for bit (*exact*): where no op is wrong and the last is right on eager's operands, an op
  before it passed the oracle's tolerance with a value that is not exact (NNC's remainder of
  -6.4e-40 by -1 is -0.0, which pow makes inf where eager's is nan), and an exact one (the floor
  that made the -1) is not where it starts. A wrong value's key is its
  culprit on the operands it received (fuzzfuse.graphform.culprit_form).

Queries are bounded: MAX_QUERIES over the whole graph. With `batch` > 1 (a reduction on several
workers) the alternatives of every position are asked ahead in one call, within what the budget
has left, and the positions are then judged in order from those answers exactly as one at a time:
the same result, in one round trip where a worker would otherwise idle between pairs. The result (`Generalisation`) is recorded in
the case beside the graph it was computed for (its digest), and ignored for any other graph, so a
case re-reduced since, or recorded before generalisation existed, keys by its names as before.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterable

import networkx as nx
import torch

from ..ir.graph import Graph, GraphError, Layout, Node, TensorInput
from ..ir.ops import OPS, OPS_BY_KIND
from ..ir.types import category
from ..explain import NARROW_STORE, constant_region, opaque_constant_graphs
from ..ir.values import logical_values, make_inputs, with_exact_values
from ..oracle import MISMATCH_KINDS
from .passes import admissible, expanded_like, op_rank, pinned, replaced
from .shapes import exact_values

Predicate = Callable[[list[Graph]], list[bool]]
# For each graph, the kind of mismatch its first output shows ("values", "nan-inf"...), None if right.
FirstWrong = Callable[[list[Graph]], list[str | None]]

# Alternatives an op position is tried with, asked two at a time, and how many must keep the
# failure for the position to be a filler: two, so that one lucky sibling (neg for abs on
# non-negative values) is not taken for indifference.
ALTERNATIVES_PER_OP = 4
FILLER_EVIDENCE = 2
ALTERNATIVES_PER_DTYPE = 2
MAX_QUERIES = 32
CATEGORIES = ("bool", "int", "float")
# The mismatch kinds an op's operands repeated may show as the few did (not a dtype or a shape).
WRONG_NUMBERS = ("values", "nan-inf")
# Elements an op alone is asked on where a CPU fuser's vectorized loop, not its scalar tail, must
# compute them: wider than AVX-512's 16 float32 lanes, and than an unrolled pair of them.
VECTOR_ELEMENTS = 64


@dataclass(frozen=True)
class Generalisation:
    """What a reduced graph's failure does not need: `ops`, (node position, op kind) for each
    filler; `dtypes`, (input position, dtype category) for each input whose dtype is free within its
    category; `culprit`, (node position, mismatch kind) of the first op whose own value is wrong,
    where that is not the graph's last (with several outputs, any op); `probed`, whether the
    culprit was looked for (where it was and none is found, the graph's last op is the first wrong
    one); `devices`, where its fuser's
    one lowering runs on several, those the failure showed alike on (none: not probed; its own
    device alone: probed, and the others did not fail alike).
    `as_float`: the positions of integer inputs whose failure survives them holding the same values
    as float32 (Inductor's div_floor(-1, 1e-05) on an int32 is its float32 floor(a / b), not an
    integer path: the bug is the float op's). `kept`: (node position, op) for each alternative that
    kept the failure at a position too few kept it at to make a filler (amin -> expand of an
    expanded input crashes as amax -> expand does, sum -> expand does not): a crash's key names
    the position by each op that reaches it. `folded`: the positions of a crash's constant region,
    where making the constant opaque stops it. `widened`: the rule (fuzzfuse.explain.NARROW_STORE)
    a crash's graph shows with its integer inputs widened to int64, where it shows one: the crash
    is that store overrunning a narrower output. `exact`: where the culprit was looked for, the
    positions of the ops whose fused value was eager's bit for bit (none of them is where a wrong
    value starts; a culprit right on eager's operands is moved to the first op before it that is
    not exact on exact operands). `graph`: the digest of the (renamed) graph it was
    found on; `queries`: what it cost."""

    graph: str
    ops: tuple[tuple[int, str], ...] = ()
    dtypes: tuple[tuple[int, str], ...] = ()
    queries: int = 0
    culprit: tuple[int, str] | None = None
    probed: bool = False
    alone: bool = False
    devices: tuple[str, ...] = ()
    as_float: tuple[int, ...] = ()
    kept: tuple[tuple[int, str], ...] = ()
    folded: tuple[int, ...] = ()
    widened: str = ""
    exact: tuple[int, ...] = ()

    def applies_to(self, graph: Graph) -> bool:
        return self.graph == graph.renamed().digest()

    def first_wrong_op(self, graph: Graph) -> int | None:
        """The position of the first op whose value is wrong: the culprit's, or, where it was looked
        for and none was found, the output's op."""
        return first_wrong_position(graph, self.culprit) if self.culprit or self.probed else None

    def to_json(self) -> dict:
        return {"graph": self.graph, "ops": [list(p) for p in self.ops], "dtypes": [list(p) for p in self.dtypes],
                "queries": self.queries, **({"culprit": list(self.culprit)} if self.culprit else {}),
                **({"probed": True} if self.probed else {}), **({"alone": True} if self.alone else {}),
                **({"devices": list(self.devices)} if self.devices else {}),
                **({"as_float": list(self.as_float)} if self.as_float else {}),
                **({"kept": [list(p) for p in self.kept]} if self.kept else {}),
                **({"folded": list(self.folded)} if self.folded else {}),
                **({"widened": self.widened} if self.widened else {}),
                **({"exact": list(self.exact)} if self.exact else {})}

    @staticmethod
    def from_json(d: dict) -> "Generalisation":
        """Validated: a case file is untrusted input."""
        if not isinstance(d, dict) or not isinstance(d.get("graph"), str):
            raise GraphError("generalisation: missing graph digest")

        def pairs(key: str, allowed: Iterable[str]) -> tuple[tuple[int, str], ...]:
            out = []
            for p in d.get(key) or []:
                if not (isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and p[0] >= 0
                        and p[1] in allowed):
                    raise GraphError(f"generalisation: bad {key} entry {p!r}")
                out.append((p[0], p[1]))
            return tuple(out)

        culprit = d.get("culprit")
        if culprit is not None and not (isinstance(culprit, list) and len(culprit) == 2 and isinstance(culprit[0], int)
                                        and culprit[0] >= 0 and culprit[1] in MISMATCH_KINDS):
            raise GraphError(f"generalisation: bad culprit {culprit!r}")
        devices = d.get("devices") or []
        if not (isinstance(devices, list) and all(x in ("cpu", "cuda") for x in devices)):
            raise GraphError(f"generalisation: bad devices {devices!r}")
        as_float = d.get("as_float") or []
        if not (isinstance(as_float, list) and all(isinstance(k, int) and k >= 0 for k in as_float)):
            raise GraphError(f"generalisation: bad as_float {as_float!r}")
        folded = d.get("folded") or []
        if not (isinstance(folded, list) and all(isinstance(k, int) and k >= 0 for k in folded)):
            raise GraphError(f"generalisation: bad folded {folded!r}")
        exact = d.get("exact") or []
        if not (isinstance(exact, list) and all(type(k) is int and k >= 0 for k in exact)):
            raise GraphError(f"generalisation: bad exact {exact!r}")
        widened = d.get("widened") or ""
        if widened not in ("", NARROW_STORE):
            raise GraphError(f"generalisation: bad widened {widened!r}")
        return Generalisation(d["graph"], pairs("ops", OPS_BY_KIND), pairs("dtypes", CATEGORIES),
                              int(d.get("queries", 0)), tuple(culprit) if culprit else None, d.get("probed") is True,
                              d.get("alone") is True, tuple(devices), tuple(as_float), pairs("kept", OPS),
                              tuple(folded), widened, tuple(exact))


def generalise(graph: Graph, is_interesting: Predicate, ops: Iterable[str], dtypes: Iterable[str] = (),
               max_queries: int = MAX_QUERIES, first_wrong: FirstWrong | None = None,
               batch: int = 1, by_signal: bool = False, exact_first: Predicate | None = None,
               vector_loops: bool = False) -> Generalisation:
    """The fillers, free dtypes and culprit of `graph`, a reduced graph that `is_interesting` (the
    reducer's same-signature test) holds for. `ops`: the ops the backend draws, among which
    alternatives are chosen; `dtypes`: the dtypes it draws, tried on the inputs (none: dtypes are
    not generalised); `first_wrong`: for a wrong value, how its candidates' first outputs are
    judged (none: no culprit is looked for); `exact_first`: whether each candidate's first output is
    eager's bit for bit (none: not asked); `batch`: how many queries run at once (the workers),
    above 1 the alternatives are asked ahead (see the module's docstring); `by_signal`: the failure
    killed the process: whether it needs a folded constant is probed (only such a crash's key
    names a fold: fuzzfuse.identity.needed_ops), and, since it may show on most runs, not all (a
    heap corruption glibc notices or not), an alternative that did not fail is asked once more
    before it counts against a filler. `vector_loops`: the fuser writes vectorized loops with a
    scalar tail (a CPU fuser): a culprit right alone on a few elements is asked once more on its
    operands repeated (`_alone`)."""
    drawn, budget = set(ops), [max_queries]

    def spent(candidates: list[Graph]) -> list[Graph]:
        candidates = candidates[:budget[0]]
        budget[0] -= len(candidates)
        return candidates

    answers: dict[str, bool] = {}  # by digest: asked ahead (batch > 1) or already

    def ask(candidates: list[Graph]) -> list[bool]:
        candidates = spent(candidates)
        todo = list({c.digest(): c for c in candidates if c.digest() not in answers}.items())
        if todo:
            answers.update(zip((d for d, _ in todo), map(bool, is_interesting([c for _, c in todo]))))
        return [answers[c.digest()] for c in candidates]

    def ask_ahead(candidates: list[Graph]) -> None:
        """Answers for what `ask` may be asked next, in one call, no more than the budget could ask;
        the budget is spent only when `ask` takes them."""
        if batch > 1:
            todo = list({c.digest(): c for c in candidates if c.digest() not in answers}.items())[:budget[0]]
            if todo:
                answers.update(zip((d for d, _ in todo), map(bool, is_interesting([c for _, c in todo]))))

    culprit, exact, positions, kinds = None, (), [], []
    if first_wrong is not None and len(graph.nodes) > 1:
        # Every op before the last, its value put first among the outputs, asked at once; with
        # several outputs, every op, outputs and the last included (`first_among_outputs`).
        several = len(graph.outputs) > 1
        positions = [k for k, n in enumerate(graph.nodes)
                     if several or (k < len(graph.nodes) - 1 and n.name not in graph.outputs)]
        probes = spent([first_among_outputs(graph, graph.nodes[k].name) for k in positions])
        kinds = first_wrong(probes) if probes else []
        culprit = next(((k, kind) for k, kind in zip(positions, kinds) if kind is not None), None)
        if exact_first is not None and probes:
            # The same runs' answers (the caller runs each probe once): no query is spent.
            exact = tuple(k for k, same in zip(positions, exact_first(probes)) if same)
    wrong_at = first_wrong_position(graph, culprit) if first_wrong is not None else None
    alone = _alone(graph, wrong_at, culprit, first_wrong, spent, vector_loops)
    if culprit is not None and not alone:
        # The first op found wrong is right on eager's operands: an op before it that it reads
        # gave a value the tolerance forgave but that is not eager's, and that starts it. Inductor
        # CPU's vectorized expm1 of 2.9e-39 is 0 (exp(x) - 1), within the tolerance as an output;
        # eq(0, that) is True. eq was keyed, a new bug beside the committed expm1 one.
        # Where every op before that one is eager's bit for bit, it was given eager's operands: it
        # is wrong alone.
        names = [n.name for n in graph.nodes]
        dag = graph.to_networkx()
        feeding = nx.ancestors(dag, names[culprit[0]])
        inexact = [k for k in positions if k < culprit[0] and k not in exact and names[k] in feeding]
        if inexact:
            reads = nx.ancestors(dag, names[inexact[0]])
            if all(k in exact for k, name in enumerate(names) if name in reads):
                culprit, alone = (inexact[0], culprit[1]), True
    folded = _folded(graph, ask) if by_signal else ()
    fillers, kept = [], []
    per_position = [[g for name in sorted(drawn, key=op_rank) if name != node.op
                     and (g := replaced(graph, node, name)) is not None][:ALTERNATIVES_PER_OP]
                    for node in graph.nodes]
    ask_ahead([g for alternatives in per_position for g in alternatives])
    for position, (node, alternatives) in enumerate(zip(graph.nodes, per_position)):
        reaching = []  # the alternatives that kept the failure here
        for k in range(0, len(alternatives), 2):
            pair = alternatives[k:k + 2]
            said = ask(pair)
            if by_signal and not all(said):
                missed = spent([g for g, yes in zip(pair, said) if not yes])
                again = iter(map(bool, is_interesting(missed)) if missed else ())
                said = [yes or (g in missed and next(again)) for g, yes in zip(pair, said)]
            reaching += [g.nodes[position].op for g, yes in zip(pair, said) if yes]
            # Stop as soon as the evidence is in, or can no longer come in.
            if len(reaching) >= FILLER_EVIDENCE or len(reaching) + len(alternatives) - k - 2 < FILLER_EVIDENCE:
                break
        if len(reaching) >= FILLER_EVIDENCE:
            fillers.append((position, OPS[node.op].kind))
        else:
            kept += [(position, op) for op in reaching]
    culprit, alone = _past_fillers(graph, culprit, alone, positions, kinds, {p for p, _ in fillers},
                                   lambda found: _alone(graph, found[0], found, first_wrong, spent, vector_loops))
    free, dtypes = [], list(dtypes)
    retyped = {}
    for position, spec in enumerate(graph.inputs):
        if isinstance(spec, TensorInput):
            others = [d for d in dtypes if d != spec.dtype and category(d) == category(spec.dtype)]
            retyped[position] = [g for d in others[:ALTERNATIVES_PER_DTYPE]
                                 if (g := _retyped(graph, position, d)) is not None]
    # Asked of a wrong value only: its culprit's class is what an input as float may change.
    floated = {position: g for position, spec in enumerate(graph.inputs)
               if isinstance(spec, TensorInput) and category(spec.dtype) == 1
               and (g := _as_float(graph, position)) is not None} if first_wrong is not None else {}
    ask_ahead([g for candidates in retyped.values() for g in candidates] + list(floated.values()))
    for position, candidates in retyped.items():
        spec = graph.inputs[position]
        if candidates and any(ask(candidates)):
            free.append((position, CATEGORIES[category(spec.dtype)]))
    as_float = tuple(position for position, g in floated.items() if any(ask([g])))
    return Generalisation(graph.renamed().digest(), tuple(fillers), tuple(free), max_queries - budget[0], culprit,
                          probed=first_wrong is not None, alone=alone, as_float=as_float, kept=tuple(kept),
                          folded=folded, exact=exact)


def _past_fillers(graph: Graph, culprit: tuple[int, str] | None, alone: bool, positions: list[int],
                  kinds: list[str | None], fillers: set[int],
                  alone_of: Callable[[tuple[int, str]], bool]) -> tuple[tuple[int, str] | None, bool]:
    """The culprit, where the first op found wrong is a filler (any op of its kind does it, so it
    is not the bug) among several outputs: the first later op that is no filler and whose own value
    is wrong too when it is put first, with whether it is wrong alone (`alone_of`). Where there is
    none, the culprit stays, and the outputs are the bug (`identity.wrong_among_outputs`). Inductor
    CUDA's neg -> pad(1, -1) of one element, both outputs, was wrong as pad's output and as neg's
    when each was put first; neg was the culprit, a filler, so the key named no op, and a form of
    the committed one-element pad bug (fa9ada42, whose member is the same graph with its outputs
    the other way round, keyed as pad's) was reported new."""
    if culprit is None or culprit[0] not in fillers or len(graph.outputs) < 2:
        return culprit, alone
    later = next(((k, kind) for k, kind in zip(positions, kinds)
                  if kind is not None and k > culprit[0] and k not in fillers), None)
    return (later, alone_of(later)) if later is not None else (culprit, alone)


def _alone(graph: Graph, position: int | None, culprit: tuple[int, str] | None, first_wrong: FirstWrong | None,
           spent: Callable[[list[Graph]], list[Graph]], vector_loops: bool = False) -> bool:
    """Does the op at `position` fail on its operands alone, given as inputs holding the values the
    ops before it computed? Then they only made those values, and the key is the op on them; else
    the bug needs them (a fused pair: log then add), and the key keeps them. An op that reads graph
    inputs only is alone already.
    With `vector_loops` (a fuser that writes vectorized loops with a scalar tail, on the CPU), an
    elementwise op right alone on fewer than VECTOR_ELEMENTS elements is asked once more on its
    operands repeated to that many (`tiled`): its scalar tail computed the few elements, where the
    fused kernel's vectorized body did. Inductor CPU's remainder of -1 (bfloat16 pow(0, 0) -> neg)
    by 2.9e-39 is inf in a fused kernel of two elements and right alone on two; on sixteen it is
    inf, the committed c6f475f2 (its vectorized remainder, pytorch#198057). It was keyed as pow's,
    a new bug."""
    if position is None or first_wrong is None:
        return False
    values = computed_operands(graph, position)
    if values == {}:
        return True
    if not values or (g := operands_as_inputs(graph, position, values)) is None:
        return False
    tries = [g] + ([t] if vector_loops and (t := tiled(g)) is not None else [])
    for probe in tries:
        if not (asked := spent([probe])):
            return False
        shown = first_wrong(asked)[0]
        if shown is not None and (culprit is None or shown == culprit[1]) and (probe is g or shown in WRONG_NUMBERS):
            return True
    return False


def few_for_a_vector_loop(op: str, shape: tuple[int, ...] | None) -> bool:
    """Whether an op of this result shape, alone, may run in a CPU fuser's scalar tail where a
    fused kernel ran it vectorized: an elementwise op of fewer than VECTOR_ELEMENTS elements."""
    from ..ir.interp import ELEMENTWISE

    return OPS[op].kind in ELEMENTWISE and shape is not None and math.prod(shape) < VECTOR_ELEMENTS


def tiled(probe: Graph) -> Graph | None:
    """`probe`, one elementwise op (and its observer) on pinned inputs, with each input that spans
    the result's innermost dim holding its values repeated along that dim, so that the result has
    VECTOR_ELEMENTS elements or more: a CPU fuser vectorizes the innermost loop, and an input
    broadcast along it stays broadcast (a 0-d -1 against sixteen divisors, as the fused kernel read
    it). Each repeat of the result is the original's. None where the op is not elementwise or its
    result is that long already."""
    node = probe.nodes[0]
    shape = probe.infer_types()[node.name].shape
    if not few_for_a_vector_loop(node.op, shape):
        return None
    shape = tuple(shape) or (1,)
    copies = -(-VECTOR_ELEMENTS // max(1, math.prod(shape)))
    try:
        inputs = make_inputs(probe)
    except Exception:
        return None
    specs = []
    for spec, value in zip(probe.inputs, inputs):
        if not isinstance(spec, TensorInput):
            specs.append(spec)
            continue
        value = value.detach().cpu()
        aligned = value.reshape((1,) * (len(shape) - value.dim()) + tuple(value.shape))
        if aligned.shape[-1] == shape[-1]:
            value = aligned.repeat(*[1] * (aligned.dim() - 1), copies)
        specs.append(replace(pinned(spec.name, value.contiguous()), requires_grad=False))
    candidate = replace(probe, inputs=tuple(specs))
    try:
        candidate.infer_types()
    except Exception:
        return None
    return candidate


def _folded(graph: Graph, ask: Predicate) -> tuple[int, ...]:
    """The positions of the ops of `graph` whose values are constant whatever its inputs hold, where
    the failure needs the fuser to fold them: with each op where the constant begins given as an
    input holding its value (fuzzfuse.explain.opaque_constant_graphs), it no longer fails. ()
    where nothing is constant, or the failure survives a constant made opaque."""
    try:
        inputs = make_inputs(graph)
    except Exception:  # inputs the eager CPU cannot make (a device's own dtype): nothing to tell
        return ()
    opaque = []
    for candidate, values in opaque_constant_graphs(graph, inputs):
        added = {spec.name: value for spec, value in zip(candidate.inputs, values) if spec not in graph.inputs}
        opaque.append(replace(candidate, inputs=tuple(with_exact_values(spec, added[spec.name])
                                                       if spec.name in added else spec for spec in candidate.inputs)))
    answers = ask(opaque) if opaque else []
    if len(answers) < len(opaque) or not opaque or any(answers):  # the budget ran out, or one still fails
        return ()
    region = constant_region(graph, inputs)
    return tuple(k for k, node in enumerate(graph.nodes) if node.name in region)


def first_among_outputs(graph: Graph, name: str) -> Graph:
    """`graph` with the value `name` its first output, the others after it in their order. With
    several outputs the oracle names the first wrong one, not the op that made it, and no op is
    found wrong unless the outputs too are probed: nvFuser's gather whose lookup tensor another
    output reads (gather and eq(x0, x1) as outputs) had its gather output wrong, but was keyed by
    its whole graph, a new bug beside the committed gather -> eq one (an H200 campaign)."""
    return replace(graph, outputs=(name,) + tuple(o for o in graph.outputs if o != name))


def first_wrong_position(graph: Graph, culprit: tuple[int, str] | None) -> int | None:
    """Where the first wrong value is computed: the culprit's op, or, where no op before is wrong,
    the op that computes the graph's one output (None for several outputs)."""
    if culprit:
        return culprit[0]
    names = [n.name for n in graph.nodes]
    return names.index(graph.outputs[0]) if len(graph.outputs) == 1 and graph.outputs[0] in names else None


def computed_operands(graph: Graph, position: int) -> dict[str, torch.Tensor] | None:
    """The values of the op's operands that the ops before it compute, on the case's inputs
    ({} where it reads graph inputs only; None where the graph cannot be interpreted here)."""
    from ..ir.interp import interpret
    from ..ir.values import make_inputs

    inputs = {i.name for i in graph.inputs}
    computed = [r for r in dict.fromkeys(graph.nodes[position].refs()) if r not in inputs]
    if not computed:
        return {}
    try:
        env, _ = interpret(graph, make_inputs(graph))
    except Exception:
        return None
    return {r: env[r] for r in computed}


def operands_as_inputs(graph: Graph, position: int, values: dict[str, torch.Tensor]) -> Graph | None:
    """The op at `position` on its computed operands given as graph inputs holding `values`, its
    value the first output, followed by one more op that reads it (a fuser such as NNC fuses only
    two ops or more); None where that graph cannot be made or does not type-check."""
    from ..ir.graph import Node

    node = graph.nodes[position]
    specs = {i.name: i for i in graph.inputs}
    try:
        types = graph.infer_types()
        # Pinned as the reducer pins a value: with its strides (a step-3 view stays one).
        operands = [replace(pinned(r, v.detach().cpu(), expanded_like(graph, r, v)), requires_grad=False)
                    for r, v in values.items()]
        inputs = [specs[r] for r in dict.fromkeys(node.refs()) if r in specs] + operands
        observer = Node(f"{node.name}_seen", "logical_not" if types[node.name].dtype == "bool" else "neg", (node.name,))
        probe = Graph(tuple(inputs), (node, observer), (node.name, observer.name))
        probe.infer_types()
    except Exception:
        return None
    return probe


def widened_to_int64(graph: Graph) -> Graph | None:
    """`graph` with every narrower integer dtype it names as int64: its inputs holding their very
    values, and each op's `dtype` attribute (a cast to int16 of a folded True kept NNC's round in
    int16); None where it names none, or where the graph no longer type-checks."""
    def narrow(dtype) -> bool:
        return isinstance(dtype, str) and CATEGORIES[category(dtype)] == "int" and dtype != "int64"

    widened = graph
    for position, spec in enumerate(graph.inputs):
        if isinstance(spec, TensorInput) and narrow(spec.dtype):
            widened = _retyped(widened, position, "int64", keep_values=True)
            if widened is None:
                return None
    nodes = tuple(replace(n, attrs={**n.attrs, "dtype": "int64"}) if narrow(n.attrs.get("dtype")) else n
                  for n in widened.nodes)
    if nodes != widened.nodes:
        widened = replace(widened, nodes=nodes)
        if not admissible(widened):
            return None
    return widened if widened is not graph else None


def conversion_alone(graph: Graph, position: int | None) -> Graph | None:
    """Where the op at `position` computes a float from an integer tensor it reads, that operand
    cast to the op's float dtype alone: the graph that ends at the cast. None where the op reads
    no integer tensor or gives no float, or where the graph does not type-check."""
    if position is None:
        return None
    types = graph.infer_types()
    node = graph.nodes[position]
    result = types[node.name].dtype
    operand = next((a for a in node.refs() if CATEGORIES[category(types[a].dtype)] == "int"), None)
    if CATEGORIES[category(result)] != "float" or operand is None:
        return None
    cast = Node(f"{operand}_as_{result}", "cast", (operand,), {"dtype": result})
    candidate = replace(graph, nodes=graph.nodes[:position] + (cast,), outputs=(cast.name,)).without_dead_code()
    return candidate if admissible(candidate) else None


def _as_float(graph: Graph, position: int) -> Graph | None:
    """`graph` with integer input `position` holding its very values as float32; None where one
    does not convert exactly or the graph no longer type-checks."""
    values = logical_values(graph.inputs[position])
    floated = values.to(torch.float32)
    if not torch.equal(floated.to(values.dtype), values) or bool((floated.abs() > 2 ** 24).any()):
        return None
    return _retyped(graph, position, "float32", keep_values=True)


def _retyped(graph: Graph, position: int, dtype: str, keep_values: bool = False) -> Graph | None:
    """`graph` with input `position` of `dtype` (exact values converted; with `keep_values`, drawn
    ones too, pinned), if it still type-checks."""
    spec = graph.inputs[position]
    if spec.values.exact is not None or keep_values:
        spec = replace(spec, dtype=dtype, values=exact_values(logical_values(spec).to(getattr(torch, dtype))))
    else:
        spec = replace(spec, dtype=dtype)
    candidate = replace(graph, inputs=graph.inputs[:position] + (spec,) + graph.inputs[position + 1:])
    return candidate if admissible(candidate) else None
