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
