"""A mismatch that a known wrong rule computes exactly is named by the rule (fuzzfuse.explain), on
real fusers: NNC and oneDNN Graph convert a float scalar to the dtype of the integer or bool tensor
it meets, whichever op reads it, and each is one bug however the campaign reached it."""
import shutil
from dataclasses import replace
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fuzzfuse.backends import Unavailable, get_backend
from fuzzfuse.corpus import load_case
from fuzzfuse.explain import (FOLDED_CONSTANT, NAN_COMPARED, ROUNDING_DROPPED, SCALAR_CAST, ZERO_DIM_WIDER, ZERO_SIGN,
                              constant_values, explaining_rule, nan_comparison_is_the_fault, nan_number_graphs,
                              scalar_cast_graphs, zero_dim_wider_graphs, zero_sign_graphs)
from fuzzfuse.identity import Anchor, case_identity, identify, same_bug
from fuzzfuse.ir import Graph, make_inputs, run_eager
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.graph import Values
from fuzzfuse.ir.values import encode_exact, with_exact_values
from fuzzfuse.job import run_case
from fuzzfuse.verdict import Outcome

ROOT = Path(__file__).resolve().parent.parent


def graph(dtype: str, dist: str, *nodes: tuple, scalar: float | None = None, shape: tuple = (4,)) -> Graph:
    """x0 (of `shape`, four elements by default, of `dtype`, all `dist`; and s0, a runtime float
    `scalar`, where given), then each (op, args..., {attrs} where it has some) node in turn as v0,
    v1..."""
    runtime = [{"kind": "scalar", "name": "s0", "dtype": "float", "value": scalar}] if scalar is not None else []
    split = [(op, args[:-1], args[-1]) if args and isinstance(args[-1], dict) else (op, args, {})
             for op, *args in nodes]
    return Graph.from_json({"schema": 1, "outputs": [f"v{len(nodes) - 1}"], "inputs": [
        {"kind": "tensor", "name": "x0", "shape": list(shape), "dtype": dtype, "layout": {"kind": "contiguous"},
         "values": {"dist": dist}}] + runtime,
        "nodes": [{"name": f"v{k}", "op": op, "args": list(args), "attrs": attrs}
                  for k, (op, args, attrs) in enumerate(split)]})


def backend(name: str):
    try:
        return get_backend(name)
    except Unavailable as e:
        pytest.skip(str(e))


def test_a_constant_the_conversion_leaves_alone_gives_no_graph_to_explain_with():
    assert scalar_cast_graphs(graph("int32", "zeros", ("add", "x0", 2.0)), []) == []
    assert scalar_cast_graphs(graph("float32", "zeros", ("ge", "x0", 1e-05)), []) == []
    converted = scalar_cast_graphs(graph("int32", "zeros", ("ge", "x0", 1e-05)), [])
    assert [g.nodes[0].args for g, _ in converted] == [("x0", 0.0)]
    # To bool, PyTorch's way (nonzero is True) and NNC's (truncation) are both tried.
    on_bool = scalar_cast_graphs(graph("bool", "ones", ("div", "x0", -2.5)), [])
    assert sorted(g.nodes[0].args[1] for g, _ in on_bool) == [-2.0, 1.0]
    # Out of the integer's range, the conversion keeps the low bits: -10000.0 on int8 is -16.
    wrapped = scalar_cast_graphs(graph("int8", "zeros", ("clamp_min", "x0", -10000.0)), [])
    assert [g.nodes[0].args[1] for g, _ in wrapped] == [-16.0]


NNC_FORMS = [  # one bug, reached through three ops, two dtypes, another op before it or between
    graph("int32", "zeros", ("sub", "x0", "x0"), ("ge", "v0", 1e-05)),
    graph("int32", "zeros", ("neg", "x0"), ("clamp_min", "v0", 0.5)),
    graph("int32", "zeros", ("isnan", "x0"), ("lt", "v0", 0.5)),
    # NNC types sqrt of a bool as a bool when it converts the scalar (the sqrt itself is right)
    graph("int32", "zeros", ("ne", "x0", "x0"), ("sqrt", "v0"), ("lt", "v1", 1e-05)),
    # a runtime scalar argument is converted as a constant is
    graph("int32", "zeros", ("clamp_min", "x0", "s0"), ("reciprocal", "v0"), scalar=0.5),
    # ...where it meets the integer tensor only: the add reads s0 = 0.5 unconverted (a campaign's
    # clamp_min -> log -> add, -inf where eager gives -0.19, was reported new)
    graph("int32", "arange", ("clamp_min", "x0", "s0"), ("log", "v0"), ("add", "v1", "s0"), scalar=0.5),
    # a bound out of the int8 range wraps (-10000.0 is -16: x below it is clamped there): the
    # README's 60-s NNC campaign reported clamp(int8 -128, -10000.0, 0) -> add(1.0) new
    graph("int8", "arange", ("neg", "x0"), ("clamp", "v0", -10000.0, 0), ("add", "v1", 1.0), shape=(40,)),
]


def test_nncs_scalar_conversion_is_one_bug_through_every_op_that_shows_it():
    nnc = backend("torchscript:nnc")
    identities = []
    for form in NNC_FORMS:
        result = run_case(form, nnc)
        assert result.outcome is Outcome.MISMATCH, result.detail
        assert result.signature.message == SCALAR_CAST and SCALAR_CAST in result.detail
        identities.append(identify(result.signature, form, device="cpu"))
    assert all(i.anchor is Anchor.CULPRIT and i.where == SCALAR_CAST for i in identities)
    assert all(same_bug(identities[0], other) for other in identities[1:])
    # NNC's round of 0.5 is wrong too, but no scalar explains it: its own op's bug.
    rounded = run_case(graph("float32", "zeros", ("add", "x0", 0.5), ("round", "v0")), nnc)
    assert rounded.outcome is Outcome.MISMATCH and rounded.signature.message == ""
    assert not same_bug(identities[0], identify(rounded.signature, rounded.graph or graph("float32", "zeros",
                                                                                       ("add", "x0", 0.5),
                                                                                       ("round", "v0")),
                                                device="cpu"))


def test_onednn_graphs_scalar_conversion_is_one_bug_on_both_routes_and_not_nncs():
    graphs = (graph("int32", "zeros", ("add", "x0", 0.5), ("eq", "x0", "v0")), graph("bool", "ones", ("div", "x0", -2.0)))
    scripted = run_case(graphs[0], backend("torchscript:onednn"))
    traced = run_case(graphs[1], backend("aot:onednn"))
    assert scripted.outcome is traced.outcome is Outcome.MISMATCH, (scripted.detail, traced.detail)
    ours = [identify(r.signature, g, device="cpu") for r, g in zip((scripted, traced), graphs)]
    assert scripted.signature.message == traced.signature.message == SCALAR_CAST
    assert same_bug(*ours)
    nnc = identify(run_case(NNC_FORMS[0], backend("torchscript:nnc")).signature, NNC_FORMS[0], device="cpu")
    assert not same_bug(ours[0], nnc)  # the same rule in two fusers is two bugs


def test_onednn_graphs_dropped_rounding_is_one_bug_whichever_op_sits_beside_the_division():
    """A oneDNN Graph campaign reported gelu -> div_trunc and round -> div_floor new, each named by
    the op before the division (a lone division is not fused, so the probe finds no op wrong
    alone), beside seven committed directories of the same fault: the quotient comes back
    unrounded. The rule names it through each, and no other wrong value."""
    graphs = (graph("float32", "ones", ("tanh", "x0"), ("div_floor", "v0", 1.0)),
              graph("float32", "ones", ("gelu", "x0"), ("div_trunc", "v0", "x0")))
    runs = [run_case(g, backend("torchscript:onednn")) for g in graphs]
    assert [r.outcome for r in runs] == [Outcome.MISMATCH] * 2, [r.detail for r in runs]
    assert {r.signature.message for r in runs} == {ROUNDING_DROPPED}
    assert same_bug(*(identify(r.signature, g, device="cpu") for r, g in zip(runs, graphs)))
    inputs = make_inputs(graphs[0])
    unrounded = torch.tanh(inputs[0]) / 1.0
    assert explaining_rule(graphs[0], inputs, 0, unrounded) == ROUNDING_DROPPED
    assert explaining_rule(graphs[0], inputs, 0, unrounded / 2) == ""


def test_nncs_wider_zero_dim_integer_is_one_bug_through_the_ops_that_read_it():
    """Two reduced cases of a 300-s NNC campaign (seed 2705073095): neg(int8) > a 0-d int32
    INT_MAX, and cast(int32) < a 0-d int64 INT64_MAX. PyTorch converts the 0-d operand to the
    tensor's dtype (-1); NNC computes in the wider dtype. One bug, whichever op reads the pair."""
    nnc = backend("torchscript:nnc")
    identities = []
    for name in ("nnc-zero-dim-gt.json", "nnc-zero-dim-lt-after-cast.json"):
        case = load_case(ROOT / "tests" / "data" / "explain_cases" / name)
        assert len(zero_dim_wider_graphs(case.graph)) == 1
        result = run_case(case.graph, nnc)
        assert result.outcome is Outcome.MISMATCH and result.signature.message == ZERO_DIM_WIDER, result.detail
        identities.append(identify(result.signature, case.graph, device="cpu"))
    assert same_bug(*identities)
    # Until reduced, a wrong value is pending, a rule's too: a campaign reduces a new one once.
    assert identify(result.signature, device="cpu") is None
    assert zero_dim_wider_graphs(graph("int32", "zeros", ("add", "x0", "x0"))) == []


def test_a_rule_that_explains_the_fused_value_comes_before_blaming_eager():
    """lt of a 0-d int32 INT_MAX and an int8 [0] (a 300-s NNC campaign, 2026-12-03): PyTorch
    converts INT_MAX to int8 (-1 < 0: True); NNC compares in int32 (False). The scalar arbiter
    ranks the 0-d operand like NNC, so the campaign blamed eager; the rule is NNC's."""
    case = load_case(ROOT / "tests" / "data" / "explain_cases" / "nnc-zero-dim-lt-once-blamed-on-eager.json")
    result = run_case(case.graph, backend("torchscript:nnc"))
    assert result.outcome is Outcome.MISMATCH, result.detail
    assert (result.signature.backend, result.signature.message) == ("torchscript:nnc", ZERO_DIM_WIDER)


def test_a_constant_is_made_opaque_where_it_begins_and_past_each_op_its_dtypes_decide():
    form = NNC_FOLDS[-1]
    assert list(constant_values(form, make_inputs(form))) == ["v0", "v1"]  # not reciprocal(False): 1 or inf
    assert list(constant_values(NNC_FOLDS[1], make_inputs(NNC_FOLDS[1]))) == ["v0"]


def test_an_op_is_constant_only_where_no_values_of_its_operands_change_it():
    def constant(*nodes, dtype="int32", shape=(4,)):
        g = graph(dtype, "zeros", *nodes, ("add", f"v{len(nodes) - 1}", "x0"), shape=shape)
        return sorted(constant_values(g, make_inputs(g)))
    assert constant(("sub", "x0", "x0")) == constant(("lt", "x0", "x0")) == constant(("isnan", "x0")) == ["v0"]
    assert constant(("sub", "x0", "x0"), ("exp", "v0")) == ["v0"]  # where the constant begins
    assert constant(("neg", "x0"), ("eq", "v0", "v0"), ("exp", "v1")) == ["v1"]
    assert constant(("add", "x0", "x0")) == constant(("isnan", "x0"), dtype="float32") == []
    assert constant(("sub", "x0", "x0"), dtype="float32") == []  # inf - inf is nan
    # zero on every finite value, nan on an infinity: no fuser proves it constant
    assert constant(("log_softmax", "x0", {"dim": 0}), dtype="float32", shape=(1,)) == []


NNC_FOLDS = [  # NNC folds an op of a tensor with itself, or a test its dtype decides, then compares wrong
    graph("int32", "zeros", ("lt", "x0", "x0"), ("log10", "v0"), ("eq", "v1", "v1")),
    graph("int32", "zeros", ("sub", "x0", "x0"), ("reciprocal", "v0"), ("eq", "v1", "v1")),
    graph("bool", "zeros", ("isnan", "x0"), ("rsqrt", "v0"), ("gt", "v1", "v0")),
    graph("int32", "zeros", ("eq", "x0", "x0"), ("tanh", "v0"), ("add", "v1", "v1"), ("le", "v2", "v1")),
    # a constant that begins past the inputs (a 300-s campaign's neg -> eq(v, v) -> cos -> lt)
    graph("int32", "zeros", ("neg", "x0"), ("eq", "v0", "v0"), ("cos", "v1"), ("lt", "v2", "v1"), shape=()),
    # a constant past another its dtype decides: NNC folds isnan of the bool isnan made as well,
    # so only with both opaque is NNC right (a 300-s campaign's "new" isnan -> isnan -> reciprocal)
    graph("int32", "zeros", ("isnan", "x0"), ("isnan", "v0"), ("reciprocal", "v1"), ("relu", "v2"), shape=()),
]


def test_nncs_fold_of_a_constant_is_one_bug_through_every_op_that_shows_it():
    """Four committed NNC directories (cc70e056, 12d7b27e, 43cfe4ff, eba927e5) and two campaign
    finds: each right once the constant reaches NNC as an input, or its x - x as x - (a copy of
    x), so one bug; a precision fault with a constant-looking op (log_softmax over one element,
    18ba1744) stays its own."""
    nnc = backend("torchscript:nnc")
    identities = []
    for form in NNC_FOLDS:
        result = run_case(form, nnc)
        assert result.outcome is Outcome.MISMATCH and result.signature.message == FOLDED_CONSTANT, result.detail
        identities.append(identify(result.signature, form, device="cpu"))
    assert all(same_bug(identities[0], other) for other in identities[1:])
    precision = graph("float32", "zeros", ("log_softmax", "x0", {"dim": 0}), ("rsqrt", "v0"), ("isnan", "v1"),
                      shape=(1,))
    own = run_case(precision, nnc)
    assert own.outcome is Outcome.MISMATCH and own.signature.message == "", own.detail


def test_a_fold_read_beside_an_output_and_one_a_sign_flip_also_explains_are_the_fold():
    """Two of a 300-s NNC campaign's six "new" bugs (2026-12-03): lt(x, x) kept as an output, and
    isnan of an int32, whose relu(rsqrt(log1p(False))) NNC computes as 0, as a -0.0 would give.
    NNC's own values show no op losing a sign, and given the constant as an input it computes
    eager's value: the fold, 12d7b27e's bug."""
    nnc = backend("torchscript:nnc")
    beside = graph("int32", "zeros", ("lt", "x0", "x0"), ("rsqrt", "v0"), ("eq", "v1", "v1"), shape=())
    beside = Graph.from_json({**beside.to_json(), "outputs": ["v2", "v0"]})
    flipped = graph("int32", "zeros", ("isnan", "x0"), ("log1p", "v0"), ("rsqrt", "v1"), ("relu", "v2"), shape=())
    for form in (beside, flipped):
        result = run_case(form, nnc)
        assert result.outcome is Outcome.MISMATCH and result.signature.message == FOLDED_CONSTANT, result.detail


def test_a_zero_whose_operand_the_fuser_already_got_wrong_lost_no_sign():
    """NNC's frac is x - floor(x), positive for x < 0, so its trunc(frac(-0.69)) is +0.0 and the
    rsqrt after it inf, where eager's are -0.0 and -inf. Flipping trunc's zero explains the output,
    but trunc read a wrong operand: no rule, and the culprit is frac's (d3a22038)."""
    g = graph("float32", "zeros", ("frac", "x0"), ("trunc", "v0"), ("rsqrt", "v1"), shape=())
    g = replace(g, inputs=(with_exact_values(g.inputs[0], torch.tensor(-0.6931471824645996)),))
    result = run_case(g, backend("torchscript:nnc"))
    assert result.outcome is Outcome.MISMATCH and result.signature.message == "", result.detail


def test_each_zero_an_op_reads_is_given_either_sign_and_nothing_else_changes():
    g = graph("float32", "zeros", ("exp", "x0"), ("sub", "v0", "v0"), ("reciprocal", "v1"))
    candidates = zero_sign_graphs(g, make_inputs(g))
    assert len(candidates) == 2  # sub's zeros, both ways; exp holds none and reciprocal is read by none
    assert [node.op for node, _ in candidates] == ["sub", "sub"]
    values = [run_eager(c, make_inputs(c))[0][0] for _, c in candidates]
    assert [bool(torch.signbit(v).all()) for v in values] == [False, True]  # 1/+0 and 1/-0
    assert zero_sign_graphs(graph("int32", "zeros", ("neg", "x0"), ("neg", "v0")), []) == []


@pytest.mark.slow  # Inductor's C++ compiles
def test_a_zero_of_the_other_sign_is_one_bug_per_op_that_loses_it_whichever_reads_it():
    """Inductor CPU's clamp_min(-0.0, 0.0) is +0.0 (eager keeps -0.0): reciprocal gives inf and
    atan2 0 where eager gives -inf and -pi. clamp's +0.0 is the same code: both lower to
    at::vec::maximum(x, 0) (pytorch#194347), so all three are one bug, maximum's on CPU."""
    inductor = backend("inductor:cpu")
    forms = [graph("float32", "zeros", ("neg", "x0"), ("clamp_min", "v0", 0.0), ("reciprocal", "v1")),
             graph("float32", "zeros", ("neg", "x0"), ("clamp_min", "v0", 0.0), ("atan2", "v1", "v1")),
             graph("float32", "zeros", ("neg", "x0"), ("clamp", "v0", 0.0, 1.0), ("rsqrt", "v1"))]
    results = [run_case(form, inductor) for form in forms]
    identities = []
    for form, result in zip(forms, results):
        assert result.outcome is Outcome.MISMATCH and result.signature.message.startswith(ZERO_SIGN), result.detail
        identities.append(identify(result.signature, form, device="cpu"))
    # the op that loses the sign is the culprit, as for any wrong value of it; the fuser run with
    # neg's and clamp_min's values as outputs shows which (flipping either explains the output)
    assert [result.signature.message for result in results] == [f"{ZERO_SIGN}: clamp_min"] * 2 + [f"{ZERO_SIGN}: clamp"]
    assert [i.where for i in identities] == ["maximum"] * 3 and all(i.device == "cpu" for i in identities)
    assert all(same_bug(identities[0], other) for other in identities[1:])
    # the CUDA one of the committed b325c4b9 (Triton's maximum, fixed upstream alone) is another bug,
    # though its graph fails on both devices
    cuda = case_identity(load_case(ROOT / "minimized/inductor-mismatch-nan-inf-float-b325c4b9/case.json"))
    assert cuda.where == "maximum" and cuda.device == "cuda" and not same_bug(identities[0], cuda)


@pytest.mark.slow  # Inductor's C++ compiles
def test_the_scalar_rule_reaches_through_unary_ops_only_where_the_fuser_keeps_their_dtype():
    """An H200 campaign reported Inductor's log10(False) -> div_floor(.., 0.5) = -inf (eager nan)
    as new, "explained" by the scalar rule: NNC types a unary op of a bool as bool and truncates
    the 0.5 it meets, and div_floor(-inf, 0) is -inf. Inductor's log10 is float32: the -inf is its
    div_floor of an infinity, the committed 62c90d20, and it is keyed so."""
    form = graph("bool", "zeros", ("log10", "x0"), ("div_floor", "v0", 0.5), shape=())
    converted = scalar_cast_graphs(form, [], through_unary=True)  # to bool both ways: 1.0 and 0.0
    assert sorted(g.nodes[1].args[1] for g, _ in converted) == [0.0, 1.0] and scalar_cast_graphs(form, []) == []
    result = run_case(form, backend("inductor:cpu"))
    assert result.outcome is Outcome.MISMATCH and result.signature.message == "", result.detail
    from fuzzfuse.corpus import Case
    from fuzzfuse.rekey import Pools, generalise_case
    with Pools(1, 120.0) as pools:
        _, general, _ = generalise_case(Case(form, "inductor:cpu", outcome=result.outcome, signature=result.signature),
                                     pools("inductor:cpu"))
    found = identify(result.signature, form, general, device="cpu")
    committed = case_identity(load_case(ROOT / "minimized/inductor-mismatch-nan-inf-float-62c90d20/case.json"))
    assert found.where == "div_floor" and same_bug(found, committed), (found, committed)


def test_the_op_that_loses_the_sign_is_found_by_the_fusers_own_values():
    """NNC's neg of +0.0 is +0.0 (a 300-s campaign, 2026-12-03, reported neg -> atan2, neg -> sqrt ->
    reciprocal and neg -> tan -> atan2 as three new bugs): flipping sqrt's or tan's zero explains
    the output as well as flipping neg's, and NNC's own value of neg says neg lost it."""
    nnc = backend("torchscript:nnc")
    forms = [graph("float32", "zeros", ("neg", "x0"), ("atan2", "v0", "v0")),
             graph("float32", "zeros", ("neg", "x0"), ("sqrt", "v0"), ("reciprocal", "v1")),
             graph("float32", "zeros", ("neg", "x0"), ("tan", "v0"), ("atan2", "v1", "v1"))]
    identities = []
    for form in forms:
        result = run_case(form, nnc)
        assert result.outcome is Outcome.MISMATCH and result.signature.message == f"{ZERO_SIGN}: neg", result.detail
        identities.append(identify(result.signature, form, device="cpu"))
    assert identities[0].where == "neg" and all(same_bug(identities[0], other) for other in identities[1:])


@pytest.mark.slow
def test_a_committed_repro_refreshed_takes_the_rule_and_folds_with_its_twin(tmp_path):
    """`fuzzfuse corpus refresh --generalise` records today's signature (the rule), and fold then
    puts two directories that held one bug by two ops into one."""
    backend("torchscript:nnc")
    corpus = tmp_path / "minimized"
    for name in ("torchscript-nnc-mismatch-values-bool-3679f569", "torchscript-nnc-mismatch-values-float-260224ff"):
        shutil.copytree(ROOT / "tests" / "data" / "scalar_cast_corpus" / name, corpus / name)
    dirs = sorted(str(d) for d in corpus.iterdir())
    run = subprocess.run([sys.executable, "-m", "fuzzfuse", "corpus", "refresh", "--generalise", *dirs],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert all(load_case(Path(d) / "case.json").signature.message == SCALAR_CAST for d in dirs)
    run = subprocess.run([sys.executable, "-m", "fuzzfuse", "corpus", "fold", str(corpus)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    holders = [d for d in corpus.iterdir() if (d / "case.json").exists()
               and load_case(d / "case.json").signature.message == SCALAR_CAST]
    assert len(holders) == 1
    listed = [v.directory for v in load_case(holders[0] / "case.json").also_seen_as]
    assert {Path(d).name for d in dirs} - {holders[0].name} <= set(listed)
    # 3679f569 listed a form that reads no scalar (NNC's reciprocal of an int zero): another bug,
    # which the fold gave a directory of its own.
    others = [load_case(d / "case.json") for d in corpus.iterdir() if (d / "case.json").exists() and d != holders[0]]
    assert all(o.signature.message != SCALAR_CAST for o in others)


# Inductor CUDA (torch 2.11, H200) computed both True where eager's compared value is NaN (their
# committed case.json records it): two campaigns reported them as two new bugs, by their first op.
# The second is a copy of its case file as found: the corpus folds it into the first since this rule.
NAN_RANGE_FORMS = [ROOT / "minimized" / "inductor-mismatch-values-bool-5a223804",  # exp2(x) > -1
                   ROOT / "tests" / "data" / "nan_compared" / "inductor-mismatch-values-bool-6060a6d3"]  # abs(x) >= -2.0


def _fused_as_recorded(case, output: int = 0):
    """Eager's outputs with output `output` True wherever its comparison read a NaN: what the
    fuser computed, as the case's symptom records it (fused True, eager False)."""
    inputs = make_inputs(case.graph)
    eager, _ = run_eager(case.graph, inputs)
    compared = [n for n in case.graph.nodes if n.name == case.graph.outputs[output]][0]
    x = run_eager(replace(case.graph, outputs=(compared.args[0],)), inputs)[0][0]
    return inputs, eager[output] | x.isnan()


@pytest.mark.parametrize("home", NAN_RANGE_FORMS, ids=lambda p: p.name)
def test_a_comparison_folded_by_a_range_that_ignores_nan_is_named_by_the_rule(home):
    case = load_case(home / "case.json")
    assert case.symptom.fused == "True" and case.symptom.eager == "False"
    inputs, fused = _fused_as_recorded(case)
    assert not torch.equal(fused, run_eager(case.graph, inputs)[0][0])  # the recorded value is wrong
    assert explaining_rule(case.graph, inputs, 0, fused) == NAN_COMPARED
    # the fuser's own exp2 / abs still held eager's NaN: the comparison read it as a number
    kept = lambda g, x: run_eager(g, x)[0]  # noqa: E731  (eager's values: every NaN kept)
    assert explaining_rule(case.graph, inputs, 0, fused, run_fused=kept) == NAN_COMPARED
    # where the op before had lost the NaN (a fused abs of NaN giving 0), that op is the bug
    lost = lambda g, x: [torch.nan_to_num(v, nan=0.0) if v.is_floating_point() else v  # noqa: E731
                         for v in run_eager(g, x)[0]]
    assert explaining_rule(case.graph, inputs, 0, fused, run_fused=lost) != NAN_COMPARED


def test_the_nan_rule_tries_each_number_a_range_may_hold_and_nothing_else():
    form = graph("float32", "specials", ("abs", "x0"), ("gt", "v0", -1.0), shape=(64,))
    inputs = make_inputs(form)
    found = nan_number_graphs(form, inputs)
    assert [g.nodes[1].args for _, g, _ in found] == [("v0_nan_as_0", -1.0), ("v0_nan_as_1", -1.0),
                                                     ("v0_nan_as_2", -1.0)]
    assert all(not v[-1].isnan().any() for _, _, v in found) and found[0][0].op == "abs"
    # no NaN compared, nothing to try; a wrong value that no number explains is no rule's
    assert nan_number_graphs(graph("float32", "normal", ("abs", "x0"), ("gt", "v0", -1.0)),
                             make_inputs(graph("float32", "normal", ("abs", "x0"), ("gt", "v0", -1.0)))) == []
    eager = run_eager(form, inputs)[0][0]
    assert explaining_rule(form, inputs, 0, ~eager) == ""


def test_the_two_forms_of_the_nan_range_fold_are_one_bug_once_named():
    identities = []
    for home in NAN_RANGE_FORMS:
        case = load_case(home / "case.json")
        named = replace(case.signature, message=NAN_COMPARED)
        identities.append(identify(named, case.graph, case.generalisation, device="cuda"))
    assert identities[0].anchor is Anchor.CULPRIT and same_bug(*identities)
    first = load_case(NAN_RANGE_FORMS[0] / "case.json")
    # its signature as first recorded: no rule named (the refreshed one names it)
    assert not same_bug(identify(replace(first.signature, message=""), first.graph, device="cuda"), identities[1])


def test_a_nan_read_as_a_number_is_not_the_fault_where_handing_in_the_comparison_changes_nothing():
    """A 300-s NNC campaign (seed 1642998713) reported eq(nan, 0.0) -> sin -> add 2.5 -> round (NNC
    3, eager 2) as new, named by the NaN rule: eq read as True gives round(3.34), 3. With eq's
    False handed in, NNC still gives 3: its round of a half, the committed d13b663f."""
    nnc = backend("torchscript:nnc")
    form = graph("float32", "normal", ("eq", "x0", 0.0), ("sin", "v0"), ("add", "v1", 2.5), ("round", "v2"),
                 shape=(1,))
    form = replace(form, inputs=(with_exact_values(form.inputs[0], torch.tensor([float("nan")])),))
    inputs = make_inputs(form)
    result = run_case(form, nnc)
    assert result.outcome is Outcome.MISMATCH and result.signature.message == "", result.detail
    # the NaN rule's model alone computes NNC's value; the fuser's run is what takes it back
    fused = torch.tensor([3.0])
    assert explaining_rule(form, inputs, 0, fused) == NAN_COMPARED
    from fuzzfuse.backends.options import Options
    from fuzzfuse.job import fused_outputs
    assert not nan_comparison_is_the_fault(form, inputs, 0, {"v0"}, lambda g, x: fused_outputs(nnc, Options(), g, x))
    from fuzzfuse.corpus import Case
    from fuzzfuse.rekey import Pools, generalise_case
    with Pools(1, 120.0) as pools:
        _, general, _ = generalise_case(Case(form, "torchscript:nnc", outcome=result.outcome,
                                             signature=result.signature), pools("torchscript:nnc"))
    found = identify(result.signature, form, general, device="cpu")
    committed = case_identity(load_case(ROOT / "minimized/torchscript-nnc-mismatch-values-float-d13b663f/case.json"))
    assert found.where == "round" and same_bug(found, committed), (found, committed)


def _divide_as_triton(graph: Graph, inputs: list) -> list:
    """The graph's outputs with true division as x * (1 / x) in float32, as Triton's approximate
    division rounds it (41 / 41 is 0.99999994): a stand-in for the H200 run, whose case recorded
    only the final value."""
    env = {spec.name: value for spec, value in zip(graph.inputs, inputs)}
    for node in graph.nodes:
        a, b = (env[x] if isinstance(x, str) else x for x in node.args)
        env[node.name] = a.float() * (1.0 / b.float()) if node.op == "div" else \
            torch.div(a, b, rounding_mode="floor")
    return [env[name] for name in graph.outputs]


def test_a_constant_the_fuser_computes_inexactly_is_that_ops_bug_not_a_fold():
    """An H200 Inductor campaign reported div(x, x) -> div_floor(v, 1.0) of an int32 (fused 0, eager
    1) as new, named by the fold rule: with x / x given as an input holding 1.0 the fuser is right.
    But Triton computed x / x, approximately, and div_floor floored 0.99999994: the committed
    822488ae (Triton's approximate division). The fold rule now asks the constant's own fused value:
    a fold gives it exactly."""
    b = GraphBuilder()
    x0 = b.tensor((1,), "int32", values=Values(exact=encode_exact(torch.tensor([41], dtype=torch.int32))))
    x1 = b.tensor((1,), "float32", values=Values("ones"))
    form = b.build([b.add("div_floor", b.add("div", x0, x0), x1)])
    inputs = make_inputs(form)
    assert _divide_as_triton(form, inputs)[0].item() == 0 and run_eager(form, inputs)[0][0].item() == 1
    fused = _divide_as_triton(form, inputs)[0]
    assert explaining_rule(form, inputs, 0, fused, run_fused=_divide_as_triton) == ""
    # where the fuser's x / x is exact (it folded it), the same wrong floor is the fold's
    def folds(g: Graph, x: list) -> list:
        if not any(n.op == "div" for n in g.nodes):  # x / x given as an input: nothing to fold, right
            return run_eager(g, x)[0]
        return [torch.ones(1) if name == form.nodes[0].name else fused for name in g.outputs]
    assert explaining_rule(form, inputs, 0, fused, run_fused=folds) == FOLDED_CONSTANT


def test_a_zero_sign_lost_after_a_flush_is_named_on_the_values_the_fuser_reads():
    """An H200 Inductor campaign reported ceil -> neg -> rsqrt of a bfloat16 subnormal as a new
    bug keyed by ceil: Triton flushes the subnormal (ceil gives 0, documented), then its neg of
    +0.0 is +0.0 and rsqrt gives inf, where eager on flushed inputs gives -inf: the committed
    neg -> reciprocal bug (6368c04a). On eager's own values ceil is 1 and no zero's sign
    explains the inf; on the flushed inputs the rule names neg. (A fixture that flushes and loses
    neg's sign: the H200 run is the real evidence, noted in the session's note.)"""
    import torch
    from fuzzfuse.backends import get_backend
    from fuzzfuse.explain import ZERO_SIGN
    from fuzzfuse.ir.values import encode_exact
    from fuzzfuse.job import run_case
    from fuzzfuse.oracle import normalize

    b = GraphBuilder()
    x = b.tensor((2,), "float32", values=Values(exact=encode_exact(torch.tensor([2.9e-39, 2.5]))))
    graph = b.build([b.add("rsqrt", b.add("neg", b.add("ceil", x)))])
    result = run_case(graph, get_backend("custom:tests.buggy_backends:FlushesAndLosesNegZeroSign"))
    assert result.outcome is Outcome.MISMATCH, result.detail
    assert result.signature.message == normalize(f"{ZERO_SIGN}: neg"), result.signature
