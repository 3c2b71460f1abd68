"""Steering generation away from known bugs' triggers (fuzzfuse.steering): a trigger is a reduced
graph's ops as a pattern; a draw that holds one is drawn again, except one case in KEEP_EVERY."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from fuzzfuse.backends import get_backend
from fuzzfuse.corpus import load_case
from fuzzfuse.ir import Graph
from fuzzfuse.steering import KEEP_EVERY, Steering, Trigger, known_graphs, unsteered
from fuzzfuse.strategies import GenConfig, config_from_json, config_to_json, generate, generate_steered

CORPUS = Path(__file__).parent.parent / "minimized"


def graph(*nodes, inputs) -> Graph:
    return Graph.from_json({"schema": 1, "inputs": inputs,
                            "nodes": [{"name": n, "op": op, "args": list(args), "attrs": {}} for n, op, args in nodes],
                            "outputs": [nodes[-1][0]]})


def tensor(name, shape, dtype="float32"):
    return {"kind": "tensor", "name": name, "shape": shape, "dtype": dtype, "layout": {"kind": "contiguous"},
            "values": {"dist": "zeros"}}


# oneDNN Graph's "IValue is not a Scalar": clamp with tensor bounds, as reduced (0-d).
CLAMP = graph(("v0", "clamp", ["x0", "x0", "x0"]), inputs=[tensor("x0", [])])


def test_a_trigger_is_held_by_a_bigger_graph_whatever_computes_its_tensors_and_whatever_their_rank():
    trigger = Trigger.of(CLAMP)
    bigger = graph(("v0", "exp", ["x0"]), ("v1", "neg", ["x1"]), ("v2", "clamp", ["v0", "x1", "v1"]),
                   ("v3", "add", ["v2", "x0"]), inputs=[tensor("x0", [3, 4], "float16"), tensor("x1", [4])])
    assert trigger.held_by(bigger)
    scalar_bounds = graph(("v0", "clamp", ["x0", 0.0, 1.0]), inputs=[tensor("x0", [3, 4])])
    assert not trigger.held_by(scalar_bounds)
    integer = graph(("v0", "clamp", ["x0", "x0", "x0"]), inputs=[tensor("x0", [3], "int32")])
    assert not trigger.held_by(integer)  # a dtype category the reducer could not move away from


def test_a_trigger_keeps_ranks_only_where_the_reduced_graph_mixes_0d_and_nd_tensors():
    mixed = graph(("v0", "sqrt", ["x0"]), ("v1", "add", ["v0", "x1"]), inputs=[tensor("x0", []), tensor("x1", [2])])
    trigger = Trigger.of(mixed)
    assert trigger.held_by(mixed)
    all_nd = graph(("v0", "sqrt", ["x0"]), ("v1", "add", ["v0", "x1"]), inputs=[tensor("x0", [2]), tensor("x1", [2])])
    assert not trigger.held_by(all_nd)
    assert Trigger.of(all_nd).held_by(mixed)  # no rank kept: any rank holds it


def test_ops_of_a_trigger_must_be_chained_as_in_the_reduced_graph():
    chained = graph(("v0", "neg", ["x0"]), ("v1", "abs", ["v0"]), inputs=[tensor("x0", [2])])
    apart = graph(("v0", "neg", ["x0"]), ("v1", "abs", ["x0"]), ("v2", "add", ["v0", "v1"]), inputs=[tensor("x0", [2])])
    assert Trigger.of(chained).held_by(chained) and not Trigger.of(chained).held_by(apart)


def test_a_steered_draw_avoids_the_trigger_except_for_the_unsteered_cases_and_stays_deterministic():
    fuser = get_backend("torchscript:onednn")
    plain = GenConfig(features=fuser.features, shapes=fuser.shapes, max_ops=4)
    config = dataclasses.replace(plain, avoid=(Trigger.of(CLAMP),))
    assert config_from_json(config_to_json(config)) == config
    seeds = range(120)
    held_before = [s for s in seeds if config.avoid[0].held_by(generate(s, plain))]
    assert held_before, "the oneDNN features draw clamp with tensor bounds"
    drawn = {s: generate_steered(s, config) for s in seeds}
    held_after = [s for s, (g, _) in drawn.items() if config.avoid[0].held_by(g)]
    assert all(unsteered(s) or drawn[s][1] == 8 for s in held_after)
    assert len(held_after) < len(held_before) / 2
    assert all(drawn[s][1] >= 1 for s in held_before if not unsteered(s))
    assert generate_steered(held_before[0], config) == drawn[held_before[0]]  # a seed gives one graph
    # What nothing steered is drawn as before.
    assert all(drawn[s][0] == generate(s, plain) for s in seeds if drawn[s][1] == 0)
    assert 0 < sum(unsteered(s) for s in range(1000)) / 1000 < 2 / KEEP_EVERY


def test_known_graphs_are_the_reproducing_repros_of_the_campaigns_routes_forward_only_unless_backward():
    forward = known_graphs([str(CORPUS)], {"torchscript:onednn", "torchscript:frontend"}, backward=False)
    both = known_graphs([str(CORPUS)], {"torchscript:onednn", "torchscript:frontend"}, backward=True)
    assert 0 < len(forward) < len(both)
    case = load_case(CORPUS / "torchscript-onednn-crash-runtimeerror-41c6fb10" / "case.json")
    assert Trigger.of(case.graph) in Steering(forward).current()
    assert Trigger.of(case.graph) not in Steering(known_graphs([str(CORPUS)], {"inductor"}, backward=False)).current()
