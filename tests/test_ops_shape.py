"""The ops of ir/ops_shape.py (resize, indexing, matmul, arg reductions, cumsum, var_mean): their
type rules against eager on many drawn operands, index inputs valid by construction and through
the reducer, the aten translation aot:nvfuser uses, the reducer's dim links and the root-cause
form, and real CPU fusers running graphs that hold them."""
from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from fuzzfuse.backends import get_backend
from fuzzfuse.ir import OPS, make_inputs, run_eager
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.types import dtype_name
from fuzzfuse.ir.values import index_bounds
from fuzzfuse.job import run_case
from fuzzfuse.reduce.passes import admissible, shrink_shapes, simplify_dtypes_layouts, simplify_values
from fuzzfuse.reduce.shapes import dim_classes
from fuzzfuse.graphform import graph_form
from fuzzfuse.strategies import Features, GenConfig, generate
from fuzzfuse.verdict import Outcome, Unsupported

warnings.filterwarnings("ignore", message=".*degrees of freedom.*")
NEW_OPS = ("slice", "pad", "cat", "cat3", "index_select", "gather", "scatter", "matmul", "bmm", "linear", "argmax",
           "argmin", "cumsum", "var_mean")


def _with(op: str, seeds: int, **config) -> list:
    """Generated graphs that hold `op` (drawn among a few elementwise partners)."""
    cfg = GenConfig(features=dataclasses.replace(Features(), ops=(op, "add", "exp", "mul"), patterns=()), **config)
    return [g for g in (generate(seed, cfg) for seed in range(seeds)) if any(n.op == op for n in g.nodes)]


def test_the_new_ops_are_registry_entries_of_their_own_kinds():
    kinds = {name: OPS[name].kind for name in NEW_OPS}
    assert kinds == {"slice": "resize", "pad": "resize", "cat": "resize", "cat3": "resize", "index_select": "index",
                     "gather": "index", "scatter": "index", "matmul": "matmul", "bmm": "matmul", "linear": "matmul",
                     "argmax": "reduction", "argmin": "reduction", "cumsum": "scan", "var_mean": "reduction"}
    assert all(OPS[name].index_operands == (1,) for name in ("index_select", "gather", "scatter"))


@pytest.mark.parametrize("op", NEW_OPS)
def test_type_rule_matches_eager_on_drawn_operands(op):
    """Every drawn graph holding the op runs in eager and in the float64 arbiter, with exactly the
    shapes and dtypes the registry's type rules give; the generator draws the op regularly."""
    graphs = _with(op, 120)
    assert len(graphs) >= 15, f"the generator drew {op} in {len(graphs)} of 120 graphs"
    for g in graphs:
        types = g.infer_types()
        inputs = make_inputs(g)
        outs, _ = run_eager(g, inputs)
        run_eager(g, inputs, upcast=True)
        for name, value in zip(g.outputs, outs):
            assert (tuple(value.shape), dtype_name(value.dtype)) == (types[name].shape, types[name].dtype), g.to_json()


def test_slice_pad_cat_edge_cases_match_eager():
    b = GraphBuilder()
    x = b.tensor((4, 7))
    y = b.tensor((4, 2), "int64")
    outs = [b.add("slice", x, dim=1, start=-5, end=None, step=2),    # negative start, a step
            b.add("slice", x, dim=0, start=3, end=1, step=1),        # empty
            b.add("slice", x, dim=-1, start=-99, end=99, step=3),    # clamped bounds
            b.add("pad", x, pads=[-2, 1, 1, 0], value=0.5),          # a crop and a pad
            b.add("cat", x, y, dim=1)]                               # promotes int64 to float32
    g = b.build(outs)
    types = g.infer_types()
    got, _ = run_eager(g, make_inputs(g))
    assert [tuple(v.shape) for v in got] == [types[o].shape for o in g.outputs] == \
        [(4, 3), (0, 7), (4, 3), (5, 6), (4, 9)]
    assert types[g.outputs[-1]].dtype == "float32"


def test_a_reshape_drawn_after_an_empty_slice_is_valid():
    """A slice can empty a dim: reshape's attributes are drawn for it too (they once raised, and a
    campaign that drew one died regenerating the case)."""
    drawn = []
    config = GenConfig(features=dataclasses.replace(Features(), ops=("slice", "reshape"), patterns=()), max_ops=6)
    for seed in range(300):
        graph = generate(seed, config)
        types = graph.infer_types()
        drawn += [n for n in graph.nodes if n.op == "reshape" and 0 in types[n.args[0]].shape]
        run_eager(graph, make_inputs(graph))
    assert drawn


@pytest.mark.parametrize("op", NEW_OPS)
def test_the_reducer_admits_graphs_of_the_new_ops(op):
    """admissible() reads attributes off the eager signature: a graph it refused could never shrink."""
    assert all(admissible(g) for g in _with(op, 30))


def test_index_inputs_are_drawn_as_inputs_and_kept_in_range():
    for op in ("index_select", "gather", "scatter"):
        for g in _with(op, 40):
            bounds = index_bounds(g)
            for node in g.nodes:
                if node.op == op:
                    assert node.args[1] in bounds, "an index operand is a graph input"
            values = dict(zip([i.name for i in g.inputs], make_inputs(g)))
            for name, bound in bounds.items():
                assert values[name].dtype in (torch.int64, torch.int32)
                assert bool(((values[name] >= 0) & (values[name] < bound)).all())


def test_the_reducers_candidates_keep_index_inputs_valid():
    """Shrinking the indexed dim, pinning or simplifying an index's values, retyping it: every
    admissible candidate still runs in eager (make_inputs wraps index values into the new range)."""
    checked = 0
    for op in ("index_select", "gather", "scatter"):
        for g in _with(op, 15):
            for candidate in [*shrink_shapes(g), *simplify_values(g), *simplify_dtypes_layouts(g)]:
                if candidate is not None and admissible(candidate):
                    run_eager(candidate, make_inputs(candidate))
                    checked += 1
    assert checked > 100


def test_dims_are_linked_through_the_new_ops_axis_maps():
    b = GraphBuilder()
    x, y = b.tensor((3, 5)), b.tensor((3, 4))
    g = b.build([b.add("cat", x, y, dim=1)])
    linked = [sorted(ps) for size, ps in dim_classes(g) if size == 3]
    assert linked == [[("v0", 0), ("x0", 0), ("x1", 0)]]  # the rows, never the cat dim


def test_root_cause_form_names_what_makes_each_op_behave():
    b = GraphBuilder()
    x = b.tensor((3, 5))
    g = b.build([b.add("var_mean", x, dims=[1], keepdim=False, correction=1, output="mean"),
                 b.add("cumsum", x, dim=-1), b.add("slice", x, dim=1, start=0, end=None, step=2)])
    form = graph_form(g)
    assert "var_mean[dims=1 keepdim=False correction=1 output=mean]" in form
    assert "cumsum[dims=1]" in form and "slice[nd]" in form


def test_aten_graphs_of_the_new_ops_translate_and_compute_what_the_fx_graphs_do():
    """aot:nvfuser's route: forward and backward graphs holding the new ops, translated to the IR,
    compute what the FX graphs do (exactly, but for matmuls, whose aten addmm fuses its add)."""
    from tests.test_aot_nvfuser import _aot_run, _as_fx, _via_ir
    ran, unsupported = 0, []
    for op in NEW_OPS:
        cfg = GenConfig(features=dataclasses.replace(Features(), ops=(op, "add", "mul"), patterns=(),
                                                     dtypes=("float32", "float64", "int64")), backward=True, max_ops=4)
        for seed in range(6):
            g = generate(seed, cfg)
            if not any(n.op == op for n in g.nodes):
                continue
            want = _aot_run(g, _as_fx)
            try:
                got = _aot_run(g, _via_ir)
            except Unsupported as e:  # backward ops the IR lacks: index_add, scatter_add, flip
                unsupported.append(str(e))
                continue
            ran += 1
            for a, b in zip(got, want):
                exact = OPS[op].kind != "matmul"
                torch.testing.assert_close(a, b, equal_nan=True, rtol=0 if exact else 1e-5, atol=0 if exact else 1e-5)
    assert ran >= 20 and len(unsupported) <= ran // 3, (ran, unsupported)


@pytest.mark.parametrize("backend", ["torchscript:nnc", "torchscript:onednn"])
def test_torchscript_fusers_run_graphs_with_the_new_ops(backend):
    """Graphs of the new ops run on the real fuser (the ops it fuses, cat on NNC and cat, matmul,
    bmm, linear on oneDNN Graph, inside fused kernels); none is invalid or a harness error."""
    b = get_backend(backend)
    outcomes, fused = [], 0
    for op in NEW_OPS:
        dtypes = b.features.dtypes
        cfg = GenConfig(features=dataclasses.replace(b.features, ops=(op, "add", "mul"), dtypes=dtypes, patterns=(),
                                                     layouts=("contiguous",)), shapes=b.shapes, max_ops=3)
        for seed in range(3):
            g = generate(seed, cfg)
            if not any(n.op == op for n in g.nodes):
                continue
            result = run_case(g, b)
            outcomes.append((op, result.outcome))
            fused += bool(result.fused) and backend.split(":")[1] in OPS[op].fusers
    assert outcomes and not [o for o in outcomes if o[1] in (Outcome.INVALID, Outcome.HARNESS_ERROR)], outcomes
    assert fused >= 1, outcomes


@pytest.mark.slow
def test_inductor_runs_every_new_op():
    b = get_backend("inductor")
    outcomes = {}
    for op in NEW_OPS:
        g = _with(op, 60, max_ops=3)[0]
        outcomes[op] = run_case(g, b).outcome
    assert not [op for op, o in outcomes.items() if o in (Outcome.INVALID, Outcome.HARNESS_ERROR,
                                                          Outcome.UNSUPPORTED)], outcomes
