"""Steering generation away from known bugs' triggers (fuzzfuse.steering): a trigger is a reduced
graph's ops as a pattern; a draw that holds one is drawn again, except one case in KEEP_EVERY."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fuzzfuse.backends import get_backend
from fuzzfuse.campaign import Campaign
from fuzzfuse.corpus import known_graphs, load_case
from fuzzfuse.ir import Graph
from fuzzfuse.steering import KEEP_EVERY, Steering, Trigger, unsteered
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


def test_a_batch_aimed_at_a_known_bugs_op_still_steers_around_it():
    """A batch of few ops, clamp among them (as `steer` aims batches at one op): nearly every draw
    holds the clamp trigger, so redrawing alone does not avoid it; the last redraw leaves clamp out."""
    fuser = get_backend("torchscript:onednn")
    features = dataclasses.replace(fuser.features, ops=("clamp", "tanh", "add"), patterns=())
    plain = GenConfig(features=features, shapes=fuser.shapes, max_ops=12)
    config = dataclasses.replace(plain, avoid=(Trigger.of(CLAMP),))
    seeds = range(60)
    held_before = [s for s in seeds if config.avoid[0].held_by(generate(s, plain))]
    assert len(held_before) > len(seeds) / 2
    held_after = [s for s in seeds if config.avoid[0].held_by(generate_steered(s, config)[0])]
    assert held_after and all(unsteered(s) for s in held_after)


def test_known_graphs_are_the_reproducing_repros_of_the_campaigns_routes_forward_only_unless_backward():
    forward = known_graphs([str(CORPUS)], {"torchscript:onednn", "torchscript:frontend"}, backward=False)
    both = known_graphs([str(CORPUS)], {"torchscript:onednn", "torchscript:frontend"}, backward=True)
    assert 0 < len(forward) < len(both)
    case = load_case(CORPUS / "torchscript-onednn-crash-runtimeerror-41c6fb10" / "case.json")
    assert Trigger.of(case.graph) in Steering(forward).current()
    assert Trigger.of(case.graph) not in Steering(known_graphs([str(CORPUS)], {"inductor"}, backward=False)).current()


@pytest.mark.slow
def test_a_onednn_campaign_that_knows_the_corpus_hits_its_known_clamp_crash_less(tmp_path):
    """Real oneDNN Graph campaigns, the same seed, with and without --known: steering discards
    draws that hold the known clamp-with-tensor-bounds trigger, and its crash's share falls."""
    def ivalue_share(out, known):
        summary = Campaign("torchscript:onednn", out, seed=1, workers=1, max_cases=100, reduce=False,
                           known=known).run()
        crashes = sum(s["count"] for s in summary["signatures"] if "IValue is not a Scalar" in s["signature"]["message"])
        return crashes / summary["cases"], summary

    blind, _ = ivalue_share(tmp_path / "blind", None)
    steered, summary = ivalue_share(tmp_path / "steered", [str(CORPUS)])
    assert summary["steered_draws"] > 0 and summary["steered_cases"] > 0
    # Not to zero: one case in ten is drawn unsteered, and forms no trigger holds yet (learned by a
    # reduction, off here) still reach the crash.
    assert steered < 0.6 * blind, (steered, blind)


def test_a_known_anchored_bug_hit_outside_every_trigger_is_queued_once_to_learn_its_new_form(tmp_path):
    """NNC's "Invalid integral op_type" is known through its repro alone (neg -> floor of an int
    tensor; the forms folded into it, round among them, left out); a hit through round, which no
    trigger holds, is worth one reduction; one through a held form is not."""
    from fuzzfuse.corpus import write_json
    from fuzzfuse.oracle import Signature
    from fuzzfuse.verdict import CaseResult, Outcome, SignatureRecord

    repro = load_case(CORPUS / "torchscript-nnc-crash-runtimeerror-662c8eb0" / "case.json")
    write_json(tmp_path / "known" / "floor" / "case.json", dataclasses.replace(repro, also_seen_as=[]).to_json())
    campaign = Campaign("torchscript:nnc", tmp_path / "run", seed=1, workers=1, max_cases=1,
                        known=[str(tmp_path / "known")])
    sig = Signature("crash", "torchscript:nnc", "compile", "RuntimeError", "", "RuntimeError: Invalid integral op_type: N")
    entry = SignatureRecord.first(CaseResult(Outcome.CRASH, sig), 0.0, 2)
    ints = [tensor("x0", [2], "int32")]
    held = graph(("v0", "neg", ["x0"]), ("v1", "floor", ["v0"]), ("v2", "add", ["v1", "x0"]), inputs=ints)
    new_form = graph(("v0", "round", ["x0"]), ("v1", "mul", ["v0", "x0"]), inputs=ints)
    assert campaign.steering.holds(held) and not campaign.steering.holds(new_form)
    campaign.reductions.offer(entry, held, "corpus/a.json")
    assert campaign.reductions.to_learn == []
    campaign.reductions.offer(entry, new_form, "corpus/b.json")
    campaign.reductions.offer(entry, new_form, "corpus/c.json")  # one waits per bug at a time
    assert campaign.reductions.to_learn == [("message|nnc||crash||Invalid integral op_type: N|", "corpus/b.json")]
    assert entry.known


def test_a_trigger_drops_the_fillers_its_generalisation_found_and_keeps_a_lone_filler_as_a_wildcard():
    """NNC fuses two ops or more, so its one-op bugs reduce with a filler: `neg -> floor` of an
    int32 where any floor of an integer tensor crashes. The filler goes, and the trigger holds
    floor of any integer tensor, an input or a computed one, and nothing else."""
    from fuzzfuse.reduce.generalise import Generalisation

    ints = [tensor("x0", [2], "int32")]
    reduced = graph(("v0", "neg", ["x0"]), ("v1", "floor", ["v0"]), inputs=ints)
    filler = Generalisation(reduced.renamed().digest(), ops=((0, "unary"),))
    trigger = Trigger.of(reduced, filler)
    assert trigger.ops == (("floor", ("t:1",)),)
    assert trigger.held_by(graph(("v0", "floor", ["x0"]), ("v1", "add", ["v0", "x0"]), inputs=ints))
    assert trigger.held_by(graph(("v0", "abs", ["x0"]), ("v1", "floor", ["v0"]), inputs=ints))
    assert not trigger.held_by(graph(("v0", "abs", ["x0"]), ("v1", "ceil", ["v0"]), inputs=ints))
    assert not trigger.held_by(graph(("v0", "floor", ["x0"]), inputs=[tensor("x0", [2])]))  # a float: no
    assert Trigger.of(reduced) == Trigger((("neg", ("t:1",)), ("floor", ("n0",))))  # no generalisation: as it was
    # Found on another graph: not applied.
    other = Generalisation(graph(("v0", "abs", ["x0"]), inputs=ints).renamed().digest(), ops=((0, "unary"),))
    assert Trigger.of(reduced, other) == Trigger.of(reduced)

    # Every op a filler (a bool operand is what fails, whatever the ops): the last stays, as its kind.
    bools = graph(("v0", "eq", ["x0", "x0"]), ("v1", "add", ["v0", "x0"]), inputs=[tensor("x0", [2])])
    both = Generalisation(bools.renamed().digest(), ops=((0, "binary"), (1, "binary")))
    wild = Trigger.of(bools, both)
    assert wild.ops == (("*binary", ("t:0", "t:2")),)
    assert wild.held_by(graph(("v0", "lt", ["x0", "x1"]), ("v1", "mul", ["v0", "x1"]),
                              inputs=[tensor("x0", [2]), tensor("x1", [2])]))
    assert not wild.held_by(graph(("v0", "lt", ["x0", "x1"]), ("v1", "neg", ["v0"]),
                                  inputs=[tensor("x0", [2]), tensor("x1", [2])]))


def test_a_trigger_most_of_a_campaigns_draws_hold_is_kept_apart_and_not_steered_around():
    """A reduced graph whose every op is a filler says nothing an op choice avoids: steering around
    `*unary` of a float tensor would redraw almost every case."""
    from fuzzfuse.reduce.generalise import Generalisation

    backend = get_backend("torchscript:nnc")
    sample = [generate(seed, GenConfig(features=backend.features, shapes=backend.shapes)) for seed in range(60)]
    floats = [tensor("x0", [2])]
    anything = graph(("v0", "add", ["x0", "x0"]), ("v1", "abs", ["v0"]), inputs=floats)
    narrow = graph(("v0", "frac", ["x0"]), ("v1", "neg", ["v0"]), inputs=floats)
    steering = Steering([(anything, Generalisation(anything.renamed().digest(), ops=((0, "binary"), (1, "unary")))),
                         (narrow, Generalisation(narrow.renamed().digest(), ops=((1, "unary"),)))],
                        sample=lambda: sample)
    assert [t.ops for t in steering.broad] == [(("*unary", ("t:2",)),)]
    assert [t.ops for t in steering.current()] == [(("frac", ("t:2",)),)]
    assert steering.breadth(steering.broad[0]) > 0.5 > 0.2 > steering.breadth(steering.current()[0])


@pytest.mark.slow
def test_an_nnc_campaign_that_knows_the_corpus_runs_fused_code_in_most_cases(tmp_path):
    """Issue 16's fused share on the real fuser: NNC's two known crashes (a rounding op of an
    integer tensor, a bool operand) took 15% of a campaign's cases before their triggers dropped
    their fillers; steered around, at least 80% of the cases run fused code, and the known crashes
    are a small share."""
    summary = Campaign("torchscript:nnc", tmp_path, seed=5, workers=1, max_cases=200, reduce=False,
                       known=[str(CORPUS)]).run()
    known_crashes = sum(s["count"] for s in summary["signatures"] if s["outcome"] == "crash")
    assert summary["fused_share"] >= 0.8, summary["outcomes"]
    assert known_crashes / summary["cases"] < 0.06, summary["outcomes"]


def test_a_wrong_values_trigger_ends_at_its_culprit():
    """round of a half is wrong on NNC whatever reads it: the trigger is round, not round -> rsqrt,
    so a draw with round -> le is steered around too."""
    from fuzzfuse.reduce.generalise import Generalisation

    floats = [tensor("x0", [2])]
    reduced = graph(("v0", "round", ["x0"]), ("v1", "rsqrt", ["v0"]), inputs=floats)
    culprit = Generalisation(reduced.renamed().digest(), culprit=(0, "values"))
    trigger = Trigger.of(reduced, culprit)
    assert trigger.ops == (("round", ("t:2",)),)
    assert trigger.held_by(graph(("v0", "round", ["x0"]), ("v1", "le", ["v0", "x0"]), inputs=floats))
    assert not Trigger.of(reduced).held_by(graph(("v0", "round", ["x0"]), ("v1", "le", ["v0", "x0"]), inputs=floats))
