"""Detection power (issue 17): compile once and judge many input sets, narrow-trigger value
distributions, (op, dtype, layout) triple coverage and steering, and the stride oracle. Real
fusers (NNC, dynamo) and the seeded bugs of benchmarks/seeded_bugs.py (real FX passes)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from fuzzfuse.backends import get_backend
from fuzzfuse.checkpoint import Stats
from fuzzfuse.ir import Graph, Layout, Values, make_inputs
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.ops import ALGEBRAIC_FOLDS, OPS
from fuzzfuse.ir.values import input_set, with_exact_values
from fuzzfuse.job import run_case
from fuzzfuse.oracle import strides_defined
from fuzzfuse.strategies import Features, GenConfig, admitted_triples, generate, graph_triples, steer

SEEDED = "dynamo:benchmarks.seeded_bugs:"


def _maximum_graph() -> Graph:
    """maximum(x, y) on plain normal values: no NaN on its own inputs."""
    b = GraphBuilder()
    x = b.tensor([4, 8], "float32", values=Values("normal", 0.0, 11))
    y = b.tensor([4, 8], "float32", values=Values("normal", 0.0, 12))
    return b.build([b.add("maximum", x, y)])


def test_a_graph_that_passes_on_nnc_is_judged_on_extra_input_sets_of_its_compiled_kernel():
    b = GraphBuilder()
    x = b.tensor([3, 4], "float32")
    graph = b.build([b.add("mul", b.add("add", x, x), x)])
    once = run_case(graph, get_backend("torchscript:nnc"))
    many = run_case(graph, get_backend("torchscript:nnc"), extra_sets=True)
    assert once.input_sets == 1 and once.outcome.value == "pass"
    assert many.outcome.value == "pass" and many.input_sets > 1, many.detail


def test_a_bug_that_needs_a_nan_is_found_on_an_extra_input_set_and_the_failing_set_replays():
    graph = _maximum_graph()
    backend = get_backend(SEEDED + "special_op")
    assert run_case(graph, backend).outcome.value == "pass"  # its own inputs hold no NaN
    found = run_case(graph, backend, extra_sets=True)
    assert found.outcome.value == "mismatch", found.detail
    assert found.graph is not None and found.graph.inputs != graph.inputs
    replay = run_case(found.graph, get_backend(SEEDED + "special_op"))
    assert replay.key == found.key
    assert run_case(found.graph, get_backend("dynamo:eager")).outcome.value == "pass"


def test_extra_input_sets_keep_the_graph_and_pinned_values_and_change_seeded_ones():
    b = GraphBuilder()
    x = b.tensor([2, 3], "float32", values=Values("normal", 0.05, 5))
    y = b.tensor([1, 3], "float32", values=Values("normal", 0.0, 6))
    graph = b.build([b.add("add", x, y)])
    sets = [input_set(graph, k) for k in range(1, 7)]
    assert all(s.nodes == graph.nodes and s.outputs == graph.outputs for s in sets)
    assert len({s.inputs[0].values for s in sets}) == 6
    assert {s.inputs[0].values.dist for s in sets} >= {"normal", "lone_special", "specials", "halves", "denormals"}
    pinned = Graph(tuple(with_exact_values(i, make_inputs(graph)[k]) for k, i in enumerate(graph.inputs)),
                   graph.nodes, graph.outputs)
    assert input_set(pinned, 3).inputs == pinned.inputs


def test_new_sizes_keep_broadcasts_lined_up_and_fall_back_to_values_when_an_attribute_holds_a_size():
    b = GraphBuilder()
    x = b.tensor([2, 3], "float32")
    y = b.tensor([1, 3], "float32")
    graph = b.build([b.add("add", x, y)])
    resized = input_set(graph, 2, resized=True)
    assert [i.shape for i in resized.inputs] == [(3, 4), (1, 4)]
    b = GraphBuilder()
    x = b.tensor([2, 3], "float32")
    fixed = b.build([b.add("reshape", x, shape=[6])])
    assert [i.shape for i in input_set(fixed, 2, resized=True).inputs] == [(2, 3)]


def test_the_narrow_trigger_distributions_are_what_they_say():
    def values(dist: str, dtype: str = "float32") -> torch.Tensor:
        b = GraphBuilder()
        b.tensor([64], dtype, values=Values(dist, 0.0, 3))
        return make_inputs(b.build(["x0"]))[0]
    lone = values("lone_special")
    assert (~torch.isfinite(lone) | (lone.abs() > 1e3) | (lone.abs() < 1e-30)).sum() <= 1
    halves = values("halves")
    assert torch.equal(halves - halves.floor(), torch.full_like(halves, 0.5))
    tiny = values("denormals", "float16").abs()
    assert bool((tiny < torch.finfo(torch.float16).smallest_normal).all()) and bool((tiny > 0).any())


def test_stride_checks_skip_outputs_whose_layout_eager_leaves_free():
    x = torch.randn(2, 3, 4, 5)
    assert strides_defined(x) and strides_defined(x.contiguous(memory_format=torch.channels_last))
    assert not strides_defined(torch.randn(3, 1).expand(3, 4))  # an expanded view of an input
    assert not strides_defined(x[:, ::2])  # a slice with gaps


def test_an_output_stride_bug_is_caught_by_default_on_a_backend_that_promises_eager_strides():
    backend = get_backend(SEEDED + "output_stride")
    assert backend.promises_strides
    b = GraphBuilder()
    x = b.tensor([2, 3, 4, 5], "float32", Layout("channels_last"))
    graph = b.build([b.add("add", x, x)])
    assert run_case(graph, backend, check_strides=backend.promises_strides).outcome.value == "mismatch"
    assert run_case(graph, get_backend("dynamo:eager"), check_strides=True).outcome.value == "pass"


def test_triples_name_each_op_with_its_operand_dtype_and_input_layout():
    b = GraphBuilder()
    x = b.tensor([2, 3], "float16", Layout("permuted", perm=(1, 0)))
    graph = b.build([b.add("exp", b.add("neg", x))])
    assert graph_triples(graph) == ["exp|float16|contiguous", "neg|float16|permuted"]


def test_steering_aims_at_admitted_triples_only_and_reaches_each_of_them():
    base = Features(ops=("exp", "bitwise_not"), dtypes=("float32", "int32"), layouts=("contiguous", "sliced"))
    admitted = admitted_triples(base)
    assert ("bitwise_not", "float32", "contiguous") not in admitted and ("bitwise_not", "int32", "sliced") in admitted
    aimed = [steer(base, random.Random(k)) for k in range(200)]
    reached = {(f.ops[0], d, lay) for f in aimed for d in f.dtypes for lay in f.layouts} & set(admitted)
    assert reached == set(admitted)
    assert all(len(f.ops) == 2 and len(f.dtypes) <= 2 and len(f.layouts) <= 2 for f in aimed)


def _fold_pairs(graph: Graph) -> list[tuple[str, str]]:
    producer = {n.name: n.op for n in graph.nodes}
    return [(producer[n.args[0]], n.op) for n in graph.nodes
            if n.args and n.args[0] in producer and producer[n.args[0]] in OPS[n.op].folds_after]


def test_fold_bait_puts_the_ops_a_simplifier_rewrites_next_to_each_other():
    """exp after log, and the other ALGEBRAIC_FOLDS pairs: drawn adjacent in most bait graphs,
    where two random ops in a row rarely are."""
    assert all(p in OPS for consumer, ps in ALGEBRAIC_FOLDS.items() for p in (consumer, *ps))
    ops = ("log", "exp", "neg", "abs", "add", "mul", "sum", "relu")
    counts = {}
    for bait in (False, True):
        # No patterns: a round trip's cast pair is a fold pair of its own, with or without bait.
        config = GenConfig(features=Features(ops=ops, fold_bait=bait, patterns=()), max_ops=4)
        counts[bait] = [_fold_pairs(generate(seed, config)) for seed in range(150)]
    with_pair = {bait: sum(bool(p) for p in pairs) for bait, pairs in counts.items()}
    assert with_pair[True] >= 75 and with_pair[True] >= 2 * with_pair[False]
    assert any(("log", "exp") in p for p in counts[True])


def test_stats_keep_input_sets_and_triples_across_a_resume():
    stats = Stats()
    stats.count_inputs(5, ["exp|float32|contiguous"])
    again = Stats.from_json(stats.to_json())
    assert again.input_sets == 5 and again.triples == {"exp|float32|contiguous": 1}


@pytest.mark.parametrize("bug", ["dtype_op", "layout_reduction", "op_pair", "three_reductions"])
def test_each_seeded_bug_fails_only_on_its_trigger(bug):
    b = GraphBuilder()
    if bug == "dtype_op":
        x = b.tensor([4, 5], "float16", values=Values("uniform", 0, 1))
        out = b.add("rsqrt", x)
    elif bug == "layout_reduction":
        x = b.tensor([3, 4], "float32", Layout("permuted", perm=(1, 0)))
        out = b.add("sum", x, dims=[-1], keepdim=False)
    elif bug == "op_pair":
        out = b.add("exp", b.add("log", b.tensor([8], "float32")))
    else:
        r = b.add("sum", b.tensor([3, 4, 5], "float32"), dims=[0], keepdim=True)
        out = b.add("sum", b.add("amax", r, dims=[1], keepdim=True), dims=[2], keepdim=True)
    graph = b.build([out])
    assert run_case(graph, get_backend(SEEDED + bug)).outcome.value == "mismatch"
    assert run_case(graph, get_backend("dynamo:eager")).outcome.value == "pass"


def test_an_nvfuser_definition_serves_new_sizes_only_when_its_code_is_unchanged():
    """The CPU-testable half of nvFuser's new-size reruns (NvFuserCompiled.accepts): symbolic
    sizes emit the same definition for a resized graph; static sizes, or a size held in an
    attribute, do not (executing the resized inputs on the GPU is the lead's GPU run)."""
    from fuzzfuse.backends.nvfuser import definition_code
    from fuzzfuse.backends.nvfuser_emit import emit

    def code(graph: Graph, static: bool) -> str:
        strides = [tuple(t.stride()) for t in make_inputs(graph)]
        return definition_code(emit(graph, "direct", strides, static).source)
    b = GraphBuilder()
    x = b.tensor([2, 3], "float32", Layout("permuted", perm=(1, 0)))
    y = b.tensor([1, 3], "float32")
    graph = b.build([b.add("sum", b.add("add", x, y), dims=[1], keepdim=False)])
    resized = input_set(graph, 2, resized=True)
    assert [i.shape for i in resized.inputs] == [(3, 4), (1, 4)]
    assert code(graph, False) == code(resized, False)
    assert code(graph, True) != code(resized, True)


@pytest.mark.gpu
def test_an_nvfuser_graph_is_judged_on_extra_input_sets_and_new_sizes_of_its_definition():
    """nvFuser's compile once, run many on the GPU: the definition is executed again on extra
    input sets, new sizes among them (the lead's GPU run; skipped without nvfuser_direct)."""
    from fuzzfuse.backends import Unavailable
    from fuzzfuse.backends.nvfuser import NvFuserBackend
    backend = NvFuserBackend()
    try:
        backend.check_available()
    except Unavailable as e:
        pytest.skip(str(e))
    b = GraphBuilder()
    x = b.tensor([4, 8], "float32")
    y = b.tensor([1, 8], "float32")
    graph = b.build([b.add("sum", b.add("mul", b.add("add", x, y), x), dims=[1], keepdim=False)])
    compiled = backend.compile(graph)
    first = compiled.run(make_inputs(graph, "cuda"))
    assert first.fused
    resized = input_set(graph, 2, resized=True)
    inputs = make_inputs(resized, "cuda")
    assert compiled.accepts(resized, inputs)
    assert tuple(compiled.run(inputs).outputs[0].shape) == (5,)
    result = run_case(graph, backend, extra_sets=True)
    assert result.outcome.value == "pass" and result.input_sets > 1, result.detail


def test_new_strides_keep_the_memory_order_and_dense_dims_and_serve_the_same_nvfuser_definition():
    """restrided_layout: a slice takes the other step, which keeps nvFuser's descriptor
    (contiguity, stride order), so the definition serves the new strides (NvFuserCompiled.accepts
    compares exactly this code); a static-size definition, whose code changes, falls back to new
    values (job._input_set)."""
    from fuzzfuse.backends.nvfuser import definition_code
    from fuzzfuse.backends.nvfuser_emit import emit
    from fuzzfuse.ir.values import restrided_layout

    def code(graph: Graph) -> str:
        return definition_code(emit(graph, "direct", [tuple(t.stride()) for t in make_inputs(graph)]).source)
    assert restrided_layout(Layout("sliced", dim=1, step=2)) == Layout("sliced", dim=1, step=3)
    assert restrided_layout(Layout("sliced", dim=0, step=3)) == Layout("sliced", dim=0, step=2)
    assert restrided_layout(Layout("permuted", perm=(1, 0))) == Layout("permuted", perm=(1, 0))
    b = GraphBuilder()
    x = b.tensor([3, 4], "float32", Layout("sliced", dim=0, step=2))
    y = b.tensor([3, 1, 4], "float32")
    graph = b.build([b.add("add", b.add("unsqueeze", x, dim=1), y)])
    variant = input_set(graph, 3, restrided=True)
    strides = [tuple(t.stride()) for t in make_inputs(variant)]
    assert [tuple(t.stride()) for t in make_inputs(graph)] == [(8, 1), (4, 4, 1)] and strides == [(12, 1), (4, 4, 1)]
    assert code(variant) == code(graph)
    static = lambda g: definition_code(emit(g, "direct", [tuple(t.stride()) for t in make_inputs(g)],  # noqa: E731
                                            static_sizes=True).source)
    assert static(input_set(graph, 6, resized=True, restrided=True)) != static(graph)


def test_a_failure_on_new_strides_is_saved_as_its_own_case_holding_the_inputs_that_failed():
    b = GraphBuilder()
    x = b.tensor([3, 4], "float32", Layout("sliced", dim=1, step=2), Values("normal", 0.0, 3))
    graph = b.build([b.add("mul", x, 2.0)])
    backend = get_backend("custom:tests.buggy_backends:StaleStrides")
    assert run_case(graph, backend).outcome.value == "pass"
    found = run_case(graph, backend, extra_sets=True)
    assert found.outcome.value == "mismatch", found.detail
    assert found.graph.inputs[0].layout == Layout("sliced", dim=1, step=3) and found.reshaped_sets >= 1
    assert "extra input set 3 of a graph" in found.detail
    assert run_case(found.graph, get_backend("eager")).outcome.value == "pass"


@pytest.mark.gpu
def test_an_nvfuser_definition_reruns_a_slice_of_another_step_and_gets_it_right():
    """nvFuser's executor cache on new strides of the declared contiguity (the lead's GPU run;
    skipped without nvfuser_direct): the definition compiled for a step-2 slice runs a step-3 one."""
    from fuzzfuse.backends import Unavailable
    from fuzzfuse.backends.nvfuser import NvFuserBackend
    from fuzzfuse.ir import run_eager
    backend = NvFuserBackend()
    try:
        backend.check_available()
    except Unavailable as e:
        pytest.skip(str(e))
    b = GraphBuilder()
    x = b.tensor([4, 129], "float32", Layout("sliced", dim=1, step=2))
    graph = b.build([b.add("sum", b.add("mul", x, x), dims=[1], keepdim=False)])
    compiled = backend.compile(graph)
    assert compiled.run(make_inputs(graph, "cuda")).fused
    variant = input_set(graph, 3, restrided=True)
    inputs = make_inputs(variant, "cuda")
    assert variant.inputs[0].layout.step == 3 and compiled.accepts(variant, inputs)
    torch.testing.assert_close(compiled.run(inputs).outputs[0], run_eager(variant, inputs)[0][0])
    result = run_case(graph, backend, extra_sets=True)
    assert result.outcome.value == "pass" and result.reshaped_sets >= 1, result.detail


@pytest.mark.slow
def test_the_op_pair_bug_hit_through_an_int32_input_reduces_to_its_two_op_trigger():
    """The detection benchmark's first op_pair hit at cc6e745 (seed 0, 840 cases): exp(log(x)) of a
    sliced int32 input among nine more ops, a NaN/inf mismatch. While the reducer kept integer
    inputs integer, log -> exp of the int32 input came back int32 from the buggy backend (a dtype
    mismatch: another signature), so the reduction kept neg and log10 to make the output float
    again, 4 ops at its fixpoint (54 queries). Now the input moves to float32 and the trigger is all
    that is left."""
    from fuzzfuse.corpus import load_case
    from fuzzfuse.minimize import reduce_case

    case = load_case(Path(__file__).parent / "data" / "op_pair_int32_case.json")
    assert case.graph.size == 11 and case.signature.kind == "nan-inf"
    result = reduce_case(case, SEEDED + "op_pair", workers=2, max_queries=150, generalise=False)
    assert [n.op for n in result.graph.nodes] == ["log", "exp"], result.graph.nodes
    assert result.stats.stopped == "fixpoint"
