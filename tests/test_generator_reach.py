"""What the generator reaches of what real models do (issue 32): the small exact constants of
real code, broadcasts in every operand position (where's condition too), keepdim reductions of
inputs in every layout with odd and even sizes, dtype round trips, expanded and strided operands
meeting in one op. Counted over the default stream's first graphs."""
from __future__ import annotations

import functools

from fuzzfuse.ir import OPS, Graph, TensorInput
from fuzzfuse.strategies import CONSTANTS, Features, GenConfig, generate

GRAPHS = 300


@functools.lru_cache(maxsize=1)
def _stream() -> tuple[Graph, ...]:
    return tuple(generate(k, GenConfig()) for k in range(GRAPHS))


def _count(predicate) -> int:
    return sum(predicate(g, n, g.infer_types()) for g in _stream() for n in g.nodes)


def _input(graph: Graph, name) -> TensorInput | None:
    return next((i for i in graph.inputs if isinstance(i, TensorInput) and i.name == name), None)


def test_scalar_arguments_are_mostly_the_exact_constants_real_code_uses():
    constants = [a for g in _stream() for n in g.nodes for a in n.args if not isinstance(a, (str, bool))]
    assert sum(a in CONSTANTS for a in constants) >= 0.7 * len(constants)
    assert {0.0, 1.0, 2.0, -1.0, 0.5} <= set(constants) and len({1e-3, 1e-5, 1e-6, 1e-12} & set(constants)) >= 2


def test_each_operand_position_is_broadcast_against_the_others_where_condition_included():
    def broadcast_at(position: int):
        def check(g, n, types):
            tensors = [a for a in n.args if isinstance(a, str) and not types[a].is_scalar]
            return OPS[n.op].kind in ("binary", "ternary") and len(tensors) >= 2 and len(n.args) > position and \
                isinstance(n.args[position], str) and types[n.args[position]].shape != types[n.name].shape
        return check
    assert _count(broadcast_at(0)) >= 40 and _count(broadcast_at(1)) >= 40
    wheres = _count(lambda g, n, t: n.op == "where")
    assert _count(lambda g, n, t: n.op == "where" and broadcast_at(0)(g, n, t)) >= max(3, wheres / 6)


def test_keepdim_reductions_read_inputs_of_every_layout_with_odd_and_even_reduced_sizes():
    """In batches that draw reductions (a swarm subset of them, as a campaign's batches are)."""
    reductions = GenConfig(features=Features(ops=("sum", "mean", "amax", "var", "add", "mul")))
    seen = set()
    for g in (generate(k, reductions) for k in range(150)):
        types = g.infer_types()
        for n in g.nodes:
            spec = _input(g, n.args[0])
            if OPS[n.op].kind == "reduction" and n.attrs.get("keepdim") and spec is not None and "dims" in n.attrs:
                sizes = {types[n.args[0]].shape[d] % 2 for d in n.attrs["dims"]}
                seen |= {(spec.layout.kind, parity) for parity in sizes}
    layouts = {"contiguous", "channels_last", "permuted", "sliced", "expanded"}
    assert {(lay, parity) for lay in layouts for parity in (0, 1)} <= seen, sorted(seen)


def test_casts_make_round_trips_between_pairs_of_dtypes():
    trips = set()
    for g in _stream():
        types, producer = g.infer_types(), {n.name: n for n in g.nodes}
        for n in g.nodes:
            inner = producer.get(n.args[0])
            if n.op == "cast" and inner is not None and inner.op == "cast" and \
                    types[inner.args[0]].dtype == n.attrs["dtype"]:
                trips.add((n.attrs["dtype"], inner.attrs["dtype"]))
    assert len(trips) >= 10, trips


def test_expanded_and_strided_operands_meet_in_one_op():
    def meet(g, n, types):
        kinds = {spec.layout.kind for a in n.args if (spec := _input(g, a)) is not None}
        return "expanded" in kinds and bool(kinds & {"sliced", "permuted", "channels_last"})
    assert _count(meet) >= 10


def test_fold_bait_batches_draw_the_pairs_fusers_get_wrong_adjacent():
    """Pairs that random choice of two ops in a row rarely draws (issue 32's real-report
    benchmark missed cumsum of a bool cast, consecutive reductions and x + 0 read through 1/x):
    in a fold-bait batch an op is often followed by one that accumulates its new bool value,
    another reduction after a reduction, or a reader of a zero's sign after a float op. Without the
    mask_count idiom, which draws a bool's accumulation by itself in every batch."""
    from fuzzfuse.strategies import PATTERNS, zero_sign_readers
    patterns = tuple(p for p in PATTERNS if p != "mask_count")

    def pairs(bait: bool) -> dict[str, int]:
        counts = dict(bool_accumulated=0, reduction_reduced=0, zero_sign_read=0)
        for k in range(GRAPHS):
            graph = generate(k, GenConfig(features=Features(fold_bait=bait, patterns=patterns)))
            types, made_by = graph.infer_types(), {n.name: n.op for n in graph.nodes}
            for node in graph.nodes:
                first = node.refs()[0] if node.refs() else None
                if first not in made_by:
                    continue
                counts["bool_accumulated"] += types[first].dtype == "bool" and OPS[node.op].accumulates is not None
                counts["reduction_reduced"] += OPS[made_by[first]].kind == OPS[node.op].kind == "reduction"
                counts["zero_sign_read"] += node.op in zero_sign_readers() and bool(types[first].dtype) and \
                    types[first].dtype.startswith(("float", "bfloat"))
        return counts

    plain, baited = pairs(False), pairs(True)
    assert zero_sign_readers() == {"reciprocal", "rsqrt"}
    for kind in plain:
        assert baited[kind] >= max(10, 3 * plain[kind]), (kind, plain, baited)


def test_fold_bait_batches_draw_identities_scales_and_wrapping_integers_before_their_readers():
    """Three pairs issue 32's real-report benchmark missed in 2,500 cases each (none drawn in 2,000
    graphs of a campaign's stream): x + 0 read through 1/x (a folded identity keeps -0.0), a value
    scaled by a constant then reduced or normalized (softmax(c * x) folded as exp(c * (x - max))),
    and an integer op that may wrap read by a float math call (an int8 pow computed in float).
    Without the scaled_softmax idiom, which draws a scale before a softmax in every batch."""
    from fuzzfuse.bait import identity_constants, zero_sign_readers
    from fuzzfuse.strategies import PATTERNS
    patterns = tuple(p for p in PATTERNS if p != "scaled_softmax")

    assert {n: identity_constants(n) for n in OPS if identity_constants(n)} == \
        {"add": (0.0,), "sub": (0.0,), "mul": (1.0,), "div": (1.0,), "pow": (1.0,)}

    def pairs(bait: bool) -> dict[str, int]:
        counts = dict(identity_read=0, scaled_reduced=0, wrapped_read=0)
        for k in range(GRAPHS):
            graph = generate(k, GenConfig(features=Features(fold_bait=bait, patterns=patterns)))
            types, made = graph.infer_types(), {n.name: n for n in graph.nodes}
            for node in graph.nodes:
                first = node.refs()[0] if node.refs() else None
                if first not in made:
                    continue
                producer = made[first]
                constants = [a for a in producer.args[1:] if not isinstance(a, str)]
                counts["identity_read"] += node.op in zero_sign_readers() and \
                    any(c in identity_constants(producer.op) for c in constants)
                counts["scaled_reduced"] += bool(constants) and OPS[producer.op].kind == "binary" and \
                    OPS[node.op].kind in ("reduction", "normalization")
                counts["wrapped_read"] += types[first].dtype in ("int8", "int16", "int32", "int64", "uint8") and \
                    OPS[producer.op].kind == "binary" and OPS[node.op].math_call and OPS[node.op].arity == 1
        return counts

    plain, baited = pairs(False), pairs(True)
    # An integer result is read by a math call in plain batches too (casts are half the draws):
    # the bait adds half as many again, the other two pairs several times what plain draws make.
    assert baited["wrapped_read"] >= 1.5 * plain["wrapped_read"], (plain, baited)
    for kind in ("identity_read", "scaled_reduced"):
        assert baited[kind] >= max(10, 3 * plain[kind]), (kind, plain, baited)


def test_an_integer_op_that_takes_only_a_constant_there_is_given_one():
    """An integer's pow and floor or trunc division take a constant second operand only (eager
    raises on a zero divisor, an integer to a negative power): drawn with a tensor there, they were
    turned down, and an int8 pow was drawn once in 2,000 graphs. And no int32 or int64 trunc
    division by -1: eager's own INT_MIN / -1 traps (pytorch#138425), a crash that is no fuser's."""
    from fuzzfuse.ir.builder import GraphBuilder
    from fuzzfuse.ir.graph import GraphError

    counts = {"pow": 0, "div_trunc": 0, "div_floor": 0}
    for k in range(GRAPHS):
        graph = generate(k, GenConfig(features=Features(dtypes=("int8", "int32"), ops=("pow", "div_trunc",
                                                                                      "div_floor", "neg"))))
        types = graph.infer_types()
        for node in graph.nodes:
            if node.op in counts and types[node.name].dtype in ("int8", "int32"):
                counts[node.op] += 1
                assert not (node.op == "div_trunc" and types[node.name].dtype == "int32" and node.args[1] == -1)
    assert all(n >= 30 for n in counts.values()), counts
    b = GraphBuilder()
    x = b.tensor((3,), "int64")
    try:
        b.add("div_trunc", x, -1)
        raise AssertionError("int64 trunc division by -1 was accepted")
    except GraphError:
        pass
    assert b.add("div_floor", x, -1) and b.add("div_trunc", b.tensor((3,), "int8"), -1)


def test_idioms_real_code_writes_as_pairs_are_drawn_in_the_plain_stream():
    """Two-op idioms issue 32's real-report benchmark missed (cumsum of a bool cast: none in 2,000
    graphs of a campaign's stream; a negative scale before a softmax: about 1 in 1,000): a mask
    counted along a dim, by either mask and either count, and softmax(x * c), c negative too."""
    def made_by(g, name):
        return next((n for n in g.nodes if n.name == name), None)

    def mask_counted(count: str, mask: str):
        def check(g, n, types):
            producer = made_by(g, n.refs()[0]) if n.op == count else None
            return producer is not None and producer.op == mask and \
                (mask == "ne" and producer.args[1] == 0 or mask == "cast" and producer.attrs["dtype"] == "bool")
        return check

    for count in ("cumsum", "sum"):
        for mask in ("cast", "ne"):
            assert _count(mask_counted(count, mask)) >= 3, (count, mask)

    def scaled(sign: int):
        def check(g, n, types):
            producer = made_by(g, n.refs()[0]) if OPS[n.op].kind == "normalization" else None
            return producer is not None and producer.op == "mul" and not isinstance(producer.args[1], str) and \
                producer.args[1] * sign > 0
        return check
    assert _count(scaled(1)) >= 10 and _count(scaled(-1)) >= 2


def test_one_swarm_batch_in_five_is_integers_only_except_in_training_campaigns():
    """Where float32 is in every batch, an integer value mostly meets a float and promotes: an
    all-integer batch keeps integer arithmetic (uint8 wrap-around, a negated or raised integer) on
    integers. A training campaign's cases need float inputs: it draws none."""
    import random

    from fuzzfuse.ir.types import INT_DTYPES
    from fuzzfuse.strategies import swarm

    def integers_only(integer_batches: bool) -> int:
        return sum(all(d in INT_DTYPES for d in swarm(random.Random(k), integer_batches=integer_batches).dtypes)
                   for k in range(400))
    assert 40 <= integers_only(True) <= 120
    assert integers_only(False) == 0


def test_half_the_integer_results_no_op_reads_are_read_as_floats():
    """In an all-integer batch, an integer result is cast to float32 in most graphs (a model reads
    counts and integer arithmetic into its float math), so that a float op reads what the integer
    ops computed; without the cast, only a float math call on an integer made a float there."""
    from fuzzfuse.ir.types import INT_DTYPES

    graphs = [generate(k, GenConfig(features=Features(dtypes=INT_DTYPES))) for k in range(100)]
    read = sum(any(n.op == "cast" and n.name in g.outputs and g.infer_types()[n.name].dtype == "float32" and
                   g.infer_types()[n.refs()[0]].dtype in INT_DTYPES for n in g.nodes) for g in graphs)
    assert read >= 40


def test_fold_bait_batches_read_a_math_call_through_a_step_function():
    """A one-ulp error of a math call no standard rounds correctly becomes a whole unit through a
    step function (issue 32's trig_then_round: a vectorized cos(0) one ulp below 1 floors to 0),
    found in one 120-s run of two and not the next: a bait batch puts the two in a row."""
    from fuzzfuse.bait import step_readers

    assert step_readers() == {"floor", "ceil", "round", "trunc", "sign"}

    def pairs(bait: bool) -> int:
        count = 0
        for k in range(GRAPHS):
            graph = generate(k, GenConfig(features=Features(fold_bait=bait)))
            made = {n.name: n for n in graph.nodes}
            count += sum(node.op in step_readers() and bool(node.refs()) and node.refs()[0] in made and
                         OPS[made[node.refs()[0]].op].libm_rounded for node in graph.nodes)
        return count

    plain, baited = pairs(False), pairs(True)
    assert baited >= max(10, 3 * plain), (plain, baited)
