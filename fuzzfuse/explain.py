"""Wrong values that a known wrong rule computes exactly: a mismatch named by its rule, not its op.

A fuser that converts a float scalar to the dtype of the integer or bool tensor it meets is wrong
wherever the scalar has a fraction, through every op that takes one. NNC computes `x >= 1e-05` on
int32 as `x >= 0`, `x < 0.5` on bool as `x < 0`, `clamp_min(x, 0.5)` as `clamp_min(x, 0)`; oneDNN
Graph computes `x / -2.0` on bool as `x / True` and `x + 0.5` on int32 as `x + 0`. The op that reads
the scalar, the op before it (the reducer keeps one: NNC fuses two ops or more) and the observer
after it are forms; the rule is the bug. NNC keeps the integer dtype through a unary op for this:
`sqrt(x != x) < 1e-05` is False, its sqrt right (0.0) and its scalar converted as if the sqrt were
a bool.

A fuser that ranks a 0-d integer tensor like a dimensioned one computes an int8 tensor against a
0-d int32 INT_MAX in int32, where PyTorch converts the 0-d operand to int8 first (-1): NNC's gt and
Inductor CUDA's logical_xor are wrong that way, each through whichever op reads such a pair.

A fuser that drops a division's rounding mode computes the quotient unrounded: oneDNN Graph's
div_floor after a tanh, an elu, a hardtanh or an add of True returns tanh(x) / 1.0, and its
div_trunc before a sigmoid returns sigmoid(x / 1.0). The op before or after the division is a form
(the reducer keeps one: oneDNN fuses two ops or more); the rule is the bug. Each op that rounds
another's result (`Op.rounds`) is computed as that op instead; where that run gives the fused
value and the true quotient rounded does not, the rule is named. An infinite quotient is its own
rounding: Inductor's div_floor(-inf, 0.5) is -inf where eager's is nan, its own bug.

A fuser whose op gives a zero of the other sign (Inductor's clamp_min of -0.0 is +0.0, eager keeps
-0.0; Triton's amin of -0.0 and +0.0) shows it only where a later op reads the sign: 1/x is -inf
for inf. A zero's sign alone is a documented difference (docs/documented-differences.md); amplified
it is reported once per op that loses the sign: each op's zeros are given the other sign in
eager's run (x + 0.0 makes them +0.0, -((-x) + 0.0) makes them -0.0), and where that run gives the
fused value, the op that lost the sign (`sign_loser`: the fuser's own values of those ops say
which) is named with the rule, and its identity is that op's, as any wrong value of it is
(fuzzfuse.identity), whichever op amplified it. nvFuser's abs of +0.0 giving -0.0 is another bug
than its div_trunc's zero; NNC's elu of -0.0 giving +0.0 is its elu bug.

A fuser that proves a value constant folds it, and may compute what follows from the fold wrong:
NNC's simplifier folds `x - x` of an integer tensor to 0 and `x < x` to False, and then computes
`eq(v, v)` of `reciprocal(0)` or `log10(False)` as False (their infinities compared through their
difference). Each op after the fold that shows it is a form. The constant-valued op (one whose
eager value is the same on other inputs of the same types: an op of a tensor with itself, a test
that the dtype decides) is handed to the fuser as an input holding its value instead; where the
fuser, still fusing, then computes eager's value, the fold is the bug.

A fuser that folds a comparison by the range of the op that made its operand (abs and exp2 are
never below zero, so `abs(x) >= -2` is True) folds it where the operand is NaN too, which compares
False: Inductor's value ranges ignore NaN. Which op made the value and which comparison read it
are forms; the rule is the bug. The comparison is given its operand with each NaN a number
instead (0, inf, -inf: a range holds one of them); where that run gives the fused value, and the
fuser's own operand still holds eager's NaN (else the op that made it lost the NaN, its own bug),
the rule is named.

A fuser that stores an integer result in fewer bytes than its dtype (NNC stores abs, round or
floor of a folded integer constant as float32 elements, whatever the output's dtype) leaves the
rest of an int64 output as it found it, and overruns an int16 or int8 output's buffer, which
corrupts the heap. The fuzz workers fill new memory with a byte pattern (fuzzfuse.heap), so the unwritten
bytes show on every run, not only where the allocator happened to hand out dirty memory. Where the
output's bytes, read as narrower elements, begin with eager's values, and the output is not those
values widened (a result computed in int32 and sign-extended is another bug), the store is named
(`stored_narrow`); a process the overrun kills is named by it where the same graph on int64 inputs
shows it (fuzzfuse.minimize.narrow_store_when_widened).

Where a mismatching output equals, as the oracle judges it, eager's output on the same inputs with
those scalars so converted (or that op computed in the wider dtype), the mismatch's signature
carries the rule as its message (`verdict.mismatched`), its identity is the rule
(fuzzfuse.identity), and the reducer, which keeps the signature, never slips from the rule to
another bug. A precision bug of one op with a small scalar (Inductor's div_floor of int32 by
1e-05) computes no such value, and stays its op's.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import torch

from .ir import OPS, Graph, ScalarInput, TensorInput, interpret, run_eager
from .ir.graph import Node
from .ir.ops import MOVES_DATA
from .ir.types import DTYPES, category
from .oracle import compare_output, normalize

SCALAR_CAST = "a float scalar is converted to the dtype of the integer or bool tensor it meets"
# A signature's message is a fixed point of oracle.normalize (no digits), as every key's is.
ZERO_DIM_WIDER = "a zero-dim integer tensor of a wider dtype sets the dtype a binary op computes in"
# The rules a mismatch's signature may name (its message), each a bug of its own.
FOLDED_CONSTANT = "a value the fuser proves constant is folded, and what it computes from the fold is wrong"
ZERO_SIGN = "an op gives a zero of the other sign, and an op after it reads the sign"
ROUNDING_DROPPED = "a rounding division computes its quotient unrounded"
NAN_COMPARED = "a comparison reads a NaN as a number, as a value range that ignores NaN folds it"
NARROW_STORE = "an integer result is stored in fewer bytes than its dtype, and the bytes left are never written"
RULES = (SCALAR_CAST, ZERO_DIM_WIDER, ROUNDING_DROPPED, ZERO_SIGN, FOLDED_CONSTANT, NAN_COMPARED, NARROW_STORE)


def shows_on_a_poisoned_heap(message: str) -> bool:
    """Whether a failure with this message shows on every run only with new memory filled
    (fuzzfuse.heap): NARROW_STORE's bytes are never written, so they hold whatever the heap held."""
    return message == NARROW_STORE


def sign_lost_by(message: str) -> str:
    """The op a ZERO_SIGN message names as losing the sign; "" for any other message."""
    return message.removeprefix(ZERO_SIGN + ": ") if message.startswith(ZERO_SIGN + ": ") else ""


def names_a_rule(message: str) -> bool:
    """Whether a signature's message is a rule's: the rule itself, or ZERO_SIGN with the op that
    loses the sign ("...: clamp_min")."""
    return message in RULES or message.startswith(ZERO_SIGN + ": ")


def _converted(value: float, dtype: str, how: str) -> float:
    """`value` as a fuser that converts it to `dtype` computes it, written back as a float scalar so
    that eager's type promotion stays the graph's (`how`, one of CONVERSIONS): PyTorch's conversion
    to bool (nonzero is True); truncation toward zero (to an integer dtype, and NNC's way to bool);
    or truncation, then the integer's low bits kept (NNC's clamp of an int8 by -10000.0 clamps by
    -16: the conversion of a number out of the dtype's range wraps)."""
    if dtype == "bool" and how == "as_bool":
        return 1.0 if value != 0 else 0.0
    whole = math.trunc(value)
    if how == "wrapping" and dtype != "bool":
        info = torch.iinfo(DTYPES[dtype])
        whole = (whole - info.min) % (info.max - info.min + 1) + info.min
    return float(whole)


CONVERSIONS = ("as_bool", "truncating", "wrapping")


def _integral_dtypes(graph: Graph, through_unary: bool) -> dict[str, str]:
    """The integer or bool dtype each value counts as: its own where it has one; with
    `through_unary`, also a unary op's result on a value that counts as one, which keeps that
    dtype (NNC types sqrt of a bool as a bool when it converts a scalar the result meets, and
    computes the sqrt itself right)."""
    types = graph.infer_types()
    integral = {name: t.dtype for name, t in types.items() if not t.is_scalar and category(t.dtype) < 2}
    if through_unary:
        for node in graph.nodes:
            refs = node.refs()
            if node.name not in integral and OPS[node.op].kind == "unary" and refs and refs[0] in integral:
                integral[node.name] = integral[refs[0]]
    return integral


def scalar_cast_graphs(graph: Graph, inputs: list, through_unary: bool = False) -> list[tuple[Graph, list]]:
    """The graph and its inputs with every float scalar (a constant, or a runtime scalar input) of
    an op that also reads an integer or bool tensor converted to that tensor's dtype, for each way
    of converting to bool and each reach of the dtype (`_integral_dtypes`: through unary ops only
    with `through_unary`, a fuser's `Backend.unary_keeps_integral_dtype`); none where no
    conversion changes a scalar (1e-05 on int32 becomes 0.0, -2.0 on bool 1.0). A runtime scalar
    is converted where such an op reads it, not where another op does: clamp(x_int32, min=s) then
    add(log(..), s) truncates the clamp's s only (a new input holds the converted value)."""
    positions = {spec.name: k for k, spec in enumerate(graph.inputs) if isinstance(spec, ScalarInput)}
    found: dict[tuple, tuple[Graph, list]] = {}
    for reach in ((False, True) if through_unary else (False,)):
        integral = _integral_dtypes(graph, reach)
        for how in CONVERSIONS:
            nodes, specs, values = [], list(graph.inputs), list(inputs)
            for node in graph.nodes:
                dtypes = [integral[r] for r in node.refs() if r in integral]
                args = node.args
                if dtypes:
                    args = tuple(_converted(a, dtypes[0], how) if type(a) is float and math.isfinite(a) else a
                                 for a in node.args)
                    for r in node.refs():
                        value = values[positions[r]] if r in positions else None
                        if type(value) is float and math.isfinite(value) and \
                                (converted := _converted(value, dtypes[0], how)) != value:
                            name = f"{r}_as_{dtypes[0]}"
                            if name not in (spec.name for spec in specs):
                                specs.append(ScalarInput(name, graph.inputs[positions[r]].dtype, converted))
                                values.append(converted)
                            args = tuple(name if a == r else a for a in args)
                nodes.append(replace(node, args=args))
            candidate = replace(graph, inputs=tuple(specs), nodes=tuple(nodes))
            if candidate.digest() != graph.digest():
                found.setdefault((candidate.digest(), tuple(values[len(inputs):])), (candidate, values))
    return list(found.values())


def zero_dim_wider_graphs(graph: Graph) -> list[Graph]:
    """The graph with each binary op that reads a dimensioned integer tensor and a 0-d integer
    tensor of a wider dtype computing in that wider dtype, as a fuser that ranks the 0-d operand
    like a dimensioned one does (PyTorch converts the 0-d int32 INT_MAX to int8 before comparing
    it with an int8 tensor: -1; such a fuser compares in int32). None where no op has such a pair."""
    types = graph.infer_types()
    nodes, changed = [], False
    for node in graph.nodes:
        operands = [r for r in node.refs() if r in types and not types[r].is_scalar]
        if OPS[node.op].kind == "binary" and len(operands) == 2 and all(category(types[r].dtype) == 1
                                                                        for r in operands):
            narrow, wide = sorted(operands, key=lambda r: len(types[r].shape) == 0)
            a, b = types[narrow], types[wide]
            if len(a.shape) > 0 and len(b.shape) == 0 and DTYPES[b.dtype].itemsize > DTYPES[a.dtype].itemsize:
                cast = Node(f"{narrow}_as_{b.dtype}", "cast", (narrow,), {"dtype": b.dtype})
                nodes.append(cast)
                node = replace(node, args=tuple(cast.name if x == narrow else x for x in node.args))
                changed = True
        nodes.append(node)
    return [replace(graph, nodes=tuple(nodes))] if changed else []


def unrounded_graphs(graph: Graph) -> list[tuple[Graph, Graph]]:
    """(the graph with ops that round another's result (`Op.rounds`) computing that result
    unrounded, the graph with them rounding it as a separate op), for each such op and, where
    there are several, for all at once."""
    rounding = [k for k, node in enumerate(graph.nodes) if OPS[node.op].rounds]

    def changed(positions, rounded: bool) -> Graph:
        nodes = []
        for k, node in enumerate(graph.nodes):
            if k not in positions:
                nodes.append(node)
                continue
            computes, rounder = OPS[node.op].rounds
            if rounded:
                quotient = Node(f"{node.name}_unrounded", computes, node.args, node.attrs)
                nodes += [quotient, Node(node.name, rounder, (quotient.name,), {})]
            else:
                nodes.append(replace(node, op=computes))
        return replace(graph, nodes=tuple(nodes))
    sets = [{k} for k in rounding] + ([set(rounding)] if len(rounding) > 1 else [])
    return [(changed(ks, False), changed(ks, True)) for ks in sets]


def zero_sign_graphs(graph: Graph, inputs: list) -> list[tuple[Node, Graph]]:
    """For each op whose eager value holds a float zero and that another op reads, the op's node
    with the graph whose readers see those zeros as +0.0, and with the graph where they see -0.0
    (the module's docstring), nearest the output first; none where no op's value holds a zero
    another op reads."""
    try:
        values = interpret(graph, inputs)[0]
    except Exception:
        return []
    read = {r for node in graph.nodes for r in node.refs()}
    found = []
    # The op nearest the reader first, ops that only move data last (`sign_loser` says why).
    for node in sorted(reversed(graph.nodes), key=lambda n: OPS[n.op].kind in MOVES_DATA):
        value = values[node.name]
        if node.name not in read or not (isinstance(value, torch.Tensor) and value.is_floating_point()
                                         and bool((value == 0).any())):
            continue
        name = node.name
        positive = [Node(f"{name}_as_pos_zero", "add", (name, 0.0), {})]
        negative = [Node(f"{name}_negated", "neg", (name,), {}),
                    Node(f"{name}_negated_pos", "add", (f"{name}_negated", 0.0), {}),
                    Node(f"{name}_as_neg_zero", "neg", (f"{name}_negated_pos",), {})]
        for inserted in (positive, negative):
            nodes = []
            for other in graph.nodes:
                if other.name == name:
                    nodes += [other, *inserted]
                    continue
                nodes.append(replace(other, args=tuple(inserted[-1].name if a == name else a for a in other.args)))
            found.append((node, replace(graph, nodes=tuple(nodes))))
    return found


def sign_loser(graph: Graph, inputs: list, explaining: list[Node],
               run_fused: Callable[[Graph, list], list | None] | None) -> tuple[Node | None, bool]:
    """Of the ops whose zeros, given the other sign, explain a fused value (`explaining`, nearest
    the output first), the one seen losing the sign, and whether the fuser's own values were seen.
    Flipping neg's zero explains neg -> clamp_min -> reciprocal as well as flipping clamp_min's
    does, whichever of the two lost it (NNC's neg of +0.0 is +0.0; Inductor's clamp_min of -0.0 is
    +0.0): the fuser runs the graph with those ops' values and their operands' as outputs too, and
    the first op, in graph order, whose fused zeros have the other sign while its operands are
    eager's is the one. An op whose operand is already wrong lost nothing: NNC's trunc(frac(x)) is
    +0.0 for x < 0 because its frac is x - floor(x), positive. (None, False) where that cannot be
    run."""
    if run_fused is None:
        return None, False
    names = {n.name for n in graph.nodes}
    watched = [n.name for n in explaining] + [r for n in explaining for r in n.refs() if r in names]
    extra = tuple(dict.fromkeys(w for w in watched if w not in graph.outputs))
    probe = replace(graph, outputs=graph.outputs + extra)
    outputs = run_fused(probe, inputs)
    if outputs is None:
        return None, False
    eager, ref64 = interpret(graph, inputs)[0], interpret(graph, inputs, upcast=True)[0]
    fused = dict(zip(probe.outputs, outputs))

    def right(name: str) -> bool:
        value = fused[name]
        return isinstance(value, torch.Tensor) and compare_output(0, value, eager[name], ref64[name]) is None

    if all(right(name) for name in graph.outputs):
        # Watching the values changed what was run: TorchScript's peephole drops add(x, 0) only
        # where the add's own value is not returned. Such a run shows nothing.
        return None, False
    named = {e.name for e in explaining}
    for node in (n for n in graph.nodes if n.name in named):
        mine, theirs = eager[node.name].detach().cpu(), fused[node.name]
        if not isinstance(theirs, torch.Tensor) or theirs.shape != mine.shape:
            continue
        if not all(right(r) for r in node.refs() if r in names):
            continue
        theirs = theirs.detach().cpu().to(mine.dtype)
        zeros = (mine == 0) & (theirs == 0)
        if bool((zeros & (torch.signbit(mine) != torch.signbit(theirs))).any()):
            return node, True
    return None, True


def nan_number_graphs(graph: Graph, inputs: list) -> list[tuple[Node, Graph, list]]:
    """For each comparison whose float tensor operand holds a NaN in eager's run, and for each
    number a NaN may be read as (0, inf, -inf), the operand's op (None for a graph input) with the
    graph and its inputs where the comparison reads a new input holding eager's operand with its
    NaNs that number; none where no comparison reads a NaN."""
    try:
        values = interpret(graph, inputs)[0]
    except Exception:
        return []
    positions = {spec.name: k for k, spec in enumerate(graph.inputs)}
    makers = {n.name: n for n in graph.nodes}
    found = []
    for node in graph.nodes:
        if not (OPS[node.op].compares and OPS[node.op].kind == "binary"):
            continue
        for ref in dict.fromkeys(node.refs()):
            value = values[ref] if ref in values else inputs[positions[ref]] if ref in positions else None
            if not (isinstance(value, torch.Tensor) and value.is_floating_point() and bool(value.isnan().any())):
                continue
            for k, number in enumerate((0.0, math.inf, -math.inf)):
                spec = TensorInput(f"{ref}_nan_as_{k}", tuple(value.shape), str(value.dtype).removeprefix("torch."))
                reads = replace(node, args=tuple(spec.name if a == ref else a for a in node.args))
                candidate = replace(graph, inputs=graph.inputs + (spec,),
                                    nodes=tuple(reads if n.name == node.name else n for n in graph.nodes))
                found.append((makers.get(ref), candidate,
                              list(inputs) + [torch.nan_to_num(value.detach().clone(), nan=number, posinf=math.inf,
                                                               neginf=-math.inf)]))
    return found


def _readers_of_new(candidate: Graph, graph: Graph) -> list[str]:
    """The ops of `candidate` that read an input `graph` does not have."""
    new = {spec.name for spec in candidate.inputs[len(graph.inputs):]}
    return [node.name for node in candidate.nodes if new & set(node.refs())]


def nan_comparison_is_the_fault(graph: Graph, inputs: list, output: int, comparisons: set[str],
                                run_fused: Callable[[Graph, list], list | None] | None, reduced: int = 1) -> bool:
    """Whether the fuser gets output `output` right once the comparisons that read a NaN are handed
    eager's results instead of computing them: only then is a NaN read as a number the fault. A
    NaN read as a number can explain a wrong value by coincidence: NNC's eq(nan, 0) -> sin ->
    add 2.5 -> round gives 3 (eager 2), and eq read as True gives round(3.34), 3, too; with the
    comparison's False handed in NNC still gives 3, its round of a half. True where no run can tell
    (no fuser run given, the comparison is that output itself, or the fuser declines the graph)."""
    if run_fused is None or graph.outputs[output] in comparisons:
        return True
    try:
        values = interpret(graph, inputs)[0]
    except Exception:
        return True
    candidate, candidate_inputs = handed_in(graph, inputs, {name: values[name] for name in comparisons})
    outputs = run_fused(candidate, candidate_inputs)
    return outputs is None or _computes(candidate, candidate_inputs, output, outputs[output], reduced)


def handed_in(graph: Graph, inputs: list, values: dict[str, torch.Tensor]) -> tuple[Graph, list]:
    """The graph and its inputs with each named op's value an input instead, holding `values`' (an
    output keeps its op, and the ops that read it read the input): the same computation, with
    nothing of those ops left for the fuser to compute."""
    specs, nodes = list(graph.inputs), list(graph.nodes)
    for name, value in values.items():
        kept = name in graph.outputs
        spec = TensorInput(f"{name}_value" if kept else name, tuple(value.shape),
                           str(value.dtype).removeprefix("torch."))
        specs.append(spec)
        nodes = [n if n.name == name else replace(n, args=tuple(spec.name if a == name else a for a in n.args))
                 for n in nodes if kept or n.name != name]
    return replace(graph, inputs=tuple(specs), nodes=tuple(nodes)), list(inputs) + [v.clone() for v in values.values()]


def nan_kept(graph: Graph, inputs: list, makers: list[Node],
             run_fused: Callable[[Graph, list], list | None] | None) -> bool:
    """Whether the fuser's own values of the ops that made the compared NaNs (`makers`) still hold
    them; True where no run can tell (no fuser run given, the NaNs are graph inputs', or the
    fuser declines the graph with those values watched)."""
    watched = tuple(dict.fromkeys(n.name for n in makers if n.name not in graph.outputs))
    if run_fused is None or not makers:
        return True
    probe = replace(graph, outputs=graph.outputs + watched)
    outputs = run_fused(probe, inputs)
    if outputs is None:
        return True
    eager = interpret(graph, inputs)[0]
    fused = dict(zip(probe.outputs, outputs))
    for node in makers:
        mine, theirs = eager[node.name], fused.get(node.name)
        if not isinstance(theirs, torch.Tensor) or theirs.shape != mine.shape:
            continue
        if not bool(theirs.detach().cpu().isnan()[mine.detach().cpu().isnan()].all()):
            return False
    return True


# How an input's values are changed to tell an op whose value its operands' types decide:
# at random, its lowest and highest values (for a float: -inf and inf), and NaN or each element
# flipped (a bool negated, an integer's lowest bit toggled).
REDRAWS = ("random", "lowest", "highest", "flipped")


def _redrawn(x, how: str, generator: torch.Generator):
    """Input `x` with its values changed `how` (REDRAWS), its shape and dtype kept."""
    if not isinstance(x, torch.Tensor):
        return x
    x = x.detach().cpu()
    if x.dtype == torch.bool:
        return {"random": torch.rand(x.shape, generator=generator) < 0.5, "lowest": torch.zeros_like(x),
                "highest": torch.ones_like(x), "flipped": ~x}[how]
    if how == "random":
        values = torch.randn(x.shape, generator=generator) * 100
        return values.to(x.dtype) if x.is_floating_point() else values.round().to(x.dtype)
    if x.is_floating_point():
        return torch.full_like(x, {"lowest": -math.inf, "highest": math.inf, "flipped": math.nan}[how])
    info = torch.iinfo(x.dtype)
    return x ^ 1 if how == "flipped" else torch.full_like(x, info.min if how == "lowest" else info.max)


def constant_values(graph: Graph, inputs: list) -> dict[str, torch.Tensor]:
    """The ops where a constant begins: each op whose eager value is the same whatever values the
    graph's inputs hold (`x - x` and `x < x` of an integer tensor, isnan of one, `eq(v, v)` of an
    integer value), and that reads no such op's value, by name, each with that value: what a
    fuser can prove constant and fold. An op constant only on finite values (log_softmax over a
    dim of one element) is not: a fuser proves nothing of it. An output no op reads is left out:
    no fold of it computes anything after it."""
    generator = torch.Generator().manual_seed(0)
    values, constant = _constant_region(graph, inputs, generator)
    read = {r for node in graph.nodes for r in node.refs()}
    begins = [node for node in graph.nodes
              if node.name in constant and node.refs() and not constant & set(node.refs()) and node.name in read]
    # After where a constant begins, the ops whose own operands' dtypes decide them too (isnan of
    # the bool isnan of an int32 made): a fuser folds those as well, so the opaque value must be
    # past them. NNC's isnan -> isnan -> reciprocal of an int32 is 0 (eager inf); with only the
    # first isnan opaque, NNC still folds the second, and the fold went unnamed.
    chained, seen = [], {node.name for node in begins}
    for node in graph.nodes:
        if node.name in constant and node.name in read and node.name not in seen and \
                set(node.refs()) <= seen and _decided_by_dtypes(node, values, generator):
            chained.append(node)
            seen.add(node.name)
    return {node.name: values[node.name] for node in begins + chained}


def constant_region(graph: Graph, inputs: list) -> set[str]:
    """Every op whose eager value is the same whatever values the graph's inputs hold (where a
    constant begins, and each op computed only from constants: mul(isnan(x), x) of an integer x is
    0) and that another op reads: what a fuser's simplifier may fold, all of it, into one value
    that the ops after it compute from."""
    read = {r for node in graph.nodes for r in node.refs()}
    return _constant_region(graph, inputs, torch.Generator().manual_seed(0))[1] & read


def _constant_region(graph: Graph, inputs: list, generator: torch.Generator) -> tuple[dict, set[str]]:
    try:
        values = interpret(graph, inputs)[0]
        others = [interpret(graph, [_redrawn(x, how, generator) for x in inputs])[0] for how in REDRAWS]
    except Exception:  # eager refuses other values (an index out of range): nothing to tell
        return {}, set()
    return values, {node.name for node in graph.nodes if isinstance(values[node.name], torch.Tensor)
                    and all(torch.equal(o[node.name], values[node.name].cpu()) for o in others)}


def _decided_by_dtypes(node: Node, values: dict, generator: torch.Generator) -> bool:
    """Whether the op gives the same value whatever values its operands of their dtypes hold."""
    mine = values[node.name]
    attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in node.attrs.items()}
    try:
        for how in REDRAWS:
            args = [_redrawn(values[a], how, generator) if isinstance(a, str) else a for a in node.args]
            if not torch.equal(OPS[node.op].eager(*args, **attrs), mine.cpu()):
                return False
    except Exception:
        return False
    return True


def opaque_constant_graphs(graph: Graph, inputs: list,
                           constants: dict[str, torch.Tensor] | None = None) -> list[tuple[Graph, list]]:
    """For each op where a constant begins (`constant_values`), the graph and its inputs with that
    op replaced by an input of its name holding its value (an output keeps its op, and the ops
    that read it read that input instead), and, where it reads one graph input
    twice (`x - x`), with its second read of a copy of that input: the same computation, with
    nothing left for the fuser to fold. The copy keeps two ops fused where NNC fuses no lone op
    (`sub(x, x) -> abs` of int64). `constants`: `constant_values` of the graph, where the caller
    has them already."""
    found = []
    positions = {spec.name: k for k, spec in enumerate(graph.inputs)}
    for name, value in (constant_values(graph, inputs) if constants is None else constants).items():
        found.append(handed_in(graph, inputs, {name: value}))
        node = next(n for n in graph.nodes if n.name == name)
        twice = [r for r in dict.fromkeys(node.refs()) if node.refs().count(r) > 1 and r in positions]
        if twice:
            original = graph.inputs[positions[twice[0]]]
            copy = replace(original, name=f"{original.name}_copy")
            second = [k for k, a in enumerate(node.args) if a == original.name][1]
            split = replace(node, args=tuple(copy.name if k == second else a for k, a in enumerate(node.args)))
            candidate = replace(graph, inputs=graph.inputs + (copy,),
                                nodes=tuple(split if n.name == name else n for n in graph.nodes))
            found.append((candidate, list(inputs) + [inputs[positions[original.name]].clone()]))
    return found


def explaining_rule(graph: Graph, inputs: list, output: int, fused, reduced: int = 1,
                    run_fused: Callable[[Graph, list], list | None] | None = None,
                    through_unary: bool = False) -> str:
    """The known wrong rule whose eager run gives fused output `output` (the module's docstring), or
    "" where none does. `run_fused(graph, inputs)`: the fuser's outputs on another graph, None
    where it does not fuse it; the folded constant is tested only where it is given.
    `through_unary`: the fuser's `Backend.unary_keeps_integral_dtype`."""
    if _stored_narrow_output(graph, inputs, output, fused):
        return NARROW_STORE
    if any(_computes(candidate, values, output, fused, reduced) for candidate, values in
           scalar_cast_graphs(graph, inputs, through_unary)):
        return SCALAR_CAST
    for candidate in zero_dim_wider_graphs(graph):
        if _computes(candidate, inputs, output, fused, reduced):
            return ZERO_DIM_WIDER
    if any(_computes(unrounded, inputs, output, fused, reduced) and not _computes(rounded, inputs, output, fused, reduced)
           for unrounded, rounded in unrounded_graphs(graph)):
        return ROUNDING_DROPPED
    explaining = list({node.name: node for node, candidate in zero_sign_graphs(graph, inputs)
                       if _computes(candidate, inputs, output, fused, reduced)}.values())
    loser, seen = sign_loser(graph, inputs, explaining, run_fused) if explaining else (None, False)
    if loser is not None:  # a fixed point of the normalizer, as every key's message
        return normalize(f"{ZERO_SIGN}: {loser.op}")
    # A zero of the other sign explains a fold's wrong infinity too (NNC folds isnan of an int32
    # to False, and its relu of rsqrt(log1p(False)) is 0, as of -inf), and an earlier op's wrong
    # value (NNC's positive frac, truncated): where the fuser's values show no op losing a sign,
    # the fold is tried, which the fuser's own run proves; the sign is presumed only where no run
    # could show it.
    constants = constant_values(graph, inputs) if run_fused is not None else {}
    if run_fused is not None and not _constant_computed_inexactly(graph, inputs, constants, run_fused):
        for candidate, values in opaque_constant_graphs(graph, inputs, constants):
            outputs = run_fused(candidate, values)
            if outputs is not None and _computes(candidate, values, output, outputs[output], reduced):
                return FOLDED_CONSTANT
    compared = [(maker, candidate, values) for maker, candidate, values in nan_number_graphs(graph, inputs)
                if _computes(candidate, values, output, fused, reduced)]
    comparisons = {name for _, candidate, _ in compared for name in _readers_of_new(candidate, graph)}
    if compared and nan_kept(graph, inputs, [m for m, _, _ in compared if m is not None], run_fused) and \
            nan_comparison_is_the_fault(graph, inputs, output, comparisons, run_fused, reduced):
        return NAN_COMPARED
    if explaining and not seen:  # no run shows which op lost it: the op nearest the output
        return normalize(f"{ZERO_SIGN}: {explaining[0].op}")
    return ""


def stored_narrow(fused, expected) -> bool:
    """Whether integer tensor `fused` is `expected` stored in narrower elements (NARROW_STORE): its
    bytes, read as int32, int16, int8, float32 or float16, begin with `expected`'s values so
    converted, and it is neither `expected` nor those narrow values widened. A float dtype as wide
    as the integer one counts too: NNC writes round of a folded integer as float32 elements
    whatever the output's dtype, which leaves an int64's upper half unwritten, overruns an int16,
    and fills an int32 with the float's bits (1 is 1065353216): one fault, named by its int64 form."""
    if not (isinstance(fused, torch.Tensor) and isinstance(expected, torch.Tensor)) or fused.dtype != expected.dtype \
            or fused.shape != expected.shape or fused.dtype.is_floating_point or fused.dtype == torch.bool:
        return False
    flat, right = fused.detach().cpu().contiguous().reshape(-1), expected.detach().cpu().contiguous().reshape(-1)
    if torch.equal(flat, right):
        return False
    for narrow in (torch.int32, torch.int16, torch.int8, torch.float32, torch.float16):
        if narrow.itemsize > flat.element_size() or (narrow.itemsize == flat.element_size()
                                                     and not narrow.is_floating_point):
            continue
        stored = flat.view(narrow)[:flat.numel()]
        if torch.equal(stored, right.to(narrow)) and not torch.equal(flat, stored.to(flat.dtype)):
            return True
    return False


def _stored_narrow_output(graph: Graph, inputs: list, output: int, fused) -> bool:
    try:
        eager, _ = run_eager(graph, inputs)
    except Exception:  # eager refuses: nothing to compare the bytes with
        return False
    return stored_narrow(fused, eager[output])


def _constant_computed_inexactly(graph: Graph, inputs: list, constants: dict[str, torch.Tensor],
                                 run_fused: Callable[[Graph, list], list | None]) -> bool:
    """Whether the fuser computes a constant-valued op's own value other than exactly (Triton's
    approximate x / x of an int32 is 0.99999994, which div_floor then floors to 0): it did not fold
    that value, it computed it, and the wrong value after it is that op's, not a fold's. Asked
    with the op's value as the first output; a fold gives the constant bit for bit. `constants`:
    `constant_values` of the graph."""
    for name, value in constants.items():
        outputs = run_fused(replace(graph, outputs=(name,) + tuple(o for o in graph.outputs if o != name)), inputs)
        if outputs is not None and isinstance(outputs[0], torch.Tensor) and \
                not torch.equal(outputs[0].detach().cpu().to(value.dtype), value.cpu()):
            return True
    return False


def _computes(graph: Graph, inputs: list, output: int, fused, reduced: int) -> bool:
    """Whether eager's run of `graph` on `inputs` gives fused output `output`, as the oracle judges."""
    try:
        eager, _ = run_eager(graph, inputs)
        ref64, _ = run_eager(graph, inputs, upcast=True)
    except Exception:  # eager refuses the changed graph: no explanation from it
        return False
    return compare_output(output, fused, eager[output], ref64[output], reduced) is None

