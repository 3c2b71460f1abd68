"""Generalisation after reduction: a reduced graph's filler ops are left out of its bug identity
(fuzzfuse.identity), so one bug reduced with different fillers is one key; a wrong value is keyed
by its culprit op. The NNC tests run the committed repros' graphs on the real fuser."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from fuzzfuse.corpus import Case, CorpusError, load_case
from fuzzfuse.ir import Graph
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.graph import Values
from fuzzfuse.rekey import Pools, generalise_case
from fuzzfuse.oracle import Signature
from fuzzfuse.reduce.generalise import ALTERNATIVES_PER_OP, Generalisation, generalise
from fuzzfuse.identity import root_cause_key
from fuzzfuse.known import known_repros
from fuzzfuse.verdict import Outcome

ROOT = Path(__file__).resolve().parent.parent

MINIMIZED = Path(__file__).parent.parent / "minimized"
FRAC = MINIMIZED / "aot-nnc-mismatch-values-float-d3a22038"
MISMATCH = Signature("mismatch", "torchscript:nnc", "run", "values", "float")
NNC_OPS = ("abs", "neg", "relu", "frac", "exp", "log", "sqrt", "add", "mul", "sub", "eq", "lt")


def frac_then(op: str, *rest) -> Graph:
    b = GraphBuilder()
    x = b.tensor((3,), "float32", values=Values(seed=1))
    return b.build([b.add(op, b.add("frac", x), *rest)]).renamed()


def needs(op: str):
    """A stand-in for a fuser bug in one op: a candidate is interesting when it still has `op`."""
    asked = []

    def is_interesting(graphs: list[Graph]) -> list[bool]:
        asked.extend(graphs)
        return [any(n.op == op for n in g.nodes) for g in graphs]
    return is_interesting, asked


def test_a_filler_is_left_out_and_the_op_the_failure_needs_is_its_culprit():
    """frac -> neg and frac -> abs, where only frac matters: generalisation finds the second op a
    filler, and the wrong value is then frac's, one key. Without it, a mismatch of two ops has no
    culprit and keys by its graph: two keys."""
    neg, abs_ = frac_then("neg"), frac_then("abs")
    keys = set()
    for graph in (neg, abs_):
        is_interesting, asked = needs("frac")
        general = generalise(graph, is_interesting, NNC_OPS)
        assert general.ops == ((1, "unary"),) and general.applies_to(graph)
        assert all(n.op != "frac" for g in asked[:2] for n in g.nodes[:1])  # frac's alternatives were asked
        keys.add(root_cause_key(MISMATCH, graph, general))
    assert keys == {"culprit|nnc||wrong-value|forward|frac|float"}
    assert root_cause_key(MISMATCH, neg) != root_cause_key(MISMATCH, abs_)  # by names, two keys
    assert root_cause_key(MISMATCH, neg) == \
        "graph|nnc||wrong-value|forward|in:i0:float/nd/contiguous ops:n0=frac(i0); n1=neg(n0)|"


def test_generalisation_asks_a_handful_of_queries_per_op_within_its_budget():
    graph = frac_then("add", 1.0)
    is_interesting, asked = needs("nothing")  # every op matters: no alternative survives
    general = generalise(graph, is_interesting, NNC_OPS, dtypes=("float32", "float64"))
    assert general.ops == () and general.dtypes == ()
    # frac: its four alternatives (two survivors of four were possible until the last pair); add
    # of a constant: the two siblings of its output type here (mul, sub); the input: float64.
    assert len(asked) == general.queries == 4 + 2 + 1
    is_interesting, asked = needs("frac")
    assert generalise(graph, is_interesting, NNC_OPS, max_queries=3).queries == len(asked) == 3
    assert ALTERNATIVES_PER_OP >= 2


def test_no_dtype_is_generalised_since_an_identity_names_the_dtype_class():
    """Dtype generalisation is gone from the reducer (minimize.generalised asks for none): an
    identity names the class of dtype an op computes in, so a float32 and a float64 twin are one
    key with no free dtype recorded, and a free dtype that an old case recorded changes nothing."""
    from fuzzfuse.minimize import generalised

    def frac_neg(dtype: str) -> Graph:
        b = GraphBuilder()
        x = b.tensor((3,), dtype, values=Values(seed=1))
        return b.build([b.add("neg", b.add("frac", x))]).renamed()
    crash = Signature("crash", "torchscript:nnc", "run", "RuntimeError", "", "")
    keys = set()
    for dtype in ("float32", "float64"):
        graph = frac_neg(dtype)
        general = generalised(graph, MISMATCH, "torchscript:nnc", needs("frac")[0])
        assert general.dtypes == () and general.ops == ((1, "unary"),), general
        old = replace(general, dtypes=((0, "float"),))
        for sig in (MISMATCH, crash):
            assert root_cause_key(sig, graph, old) == root_cause_key(sig, graph, general)
            keys.add(root_cause_key(sig, graph, general))
    assert keys == {"culprit|nnc||wrong-value|forward|frac|float", "graph|nnc||crash||frac:float|"}


def test_a_generalisation_found_on_another_graph_is_ignored_and_old_cases_key_by_their_graph(tmp_path):
    """A generalisation applies to the graph it was found on only; a case recorded without one
    (frac -> add, two ops, no probed culprit) keys by its graph's form, dtypes by class."""
    graph, other = frac_then("neg"), frac_then("abs")
    general = generalise(graph, needs("frac")[0], NNC_OPS)
    assert root_cause_key(MISMATCH, other, general) == root_cause_key(MISMATCH, other)
    # The case file: one JSON codec, validated; a case without the field loads as before.
    case = Case(graph, "torchscript:nnc", outcome=Outcome.MISMATCH, signature=MISMATCH, generalisation=general)
    assert Case.from_json(json.loads(json.dumps(case.to_json()))).generalisation == general
    assert "generalisation" not in replace(case, generalisation=None).to_json()
    bad = case.to_json()
    bad["generalisation"]["ops"] = [[1, "__import__"]]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(CorpusError):
        load_case(tmp_path / "bad.json")
    old = load_case(FRAC / "case.json")
    sig = old.signature
    assert root_cause_key(sig, old.graph, None) == \
        "graph|nnc||wrong-value|forward|in:i0:float/0d/contiguous ops:n0=frac(i0); n1=add(n0,i0)|"


def _variant(case: Case, directory: str) -> Case:
    v = next(v for v in case.also_seen_as if v.directory == directory)
    return replace(case, graph=v.graph, backend=v.backend, signature=v.signature, detail="")


@pytest.mark.slow
@pytest.mark.upstream_bug(FRAC.name)  # generalisation probes the real bug: gone, nothing to key
def test_one_nnc_bug_reduced_with_two_fillers_or_a_producer_gets_one_key():
    """NNC's frac of negative values, committed as frac -> add (aot:nnc) and folded by hand with
    frac -> eq (aot:nnc): both lose their filler. neg -> frac (torchscript:nnc), where neg makes
    the negative values frac gets wrong, keys as frac on the operand neg gave it: the same bug,
    one key, frac's on float (by their graphs alone, three)."""
    kept = load_case(FRAC / "case.json")
    with_eq = _variant(kept, "aot-nnc-mismatch-values-bool-76879027")
    neg_frac = _variant(kept, "torchscript-nnc-mismatch-values-float-cad304ad")
    with Pools(2, 60.0) as pools:
        keys = []
        for case in (kept, with_eq, neg_frac):
            sig = case.signature
            _, general, _ = generalise_case(case, pools(case.backend))
            keys.append((root_cause_key(sig, case.graph), root_cause_key(sig, case.graph, general)))
    assert len({before for before, _ in keys}) == 3
    assert {after for _, after in keys} == {"culprit|nnc||wrong-value|forward|frac|float"}, keys


@pytest.mark.slow
@pytest.mark.upstream_bug("torchscript-onednn-mismatch-values-float-4e0135ad")
def test_a_fused_pair_whose_second_op_is_right_on_its_own_is_keyed_by_its_first_op():
    """oneDNN Graph's log then add (committed, 4e0135ad): add's value is the first wrong one, but
    add on log's values given as inputs is right (not `alone`). The culprit is then the first op
    that is no filler, log; a key of add would file every later oneDNN add mismatch as known."""
    case = load_case(MINIMIZED / "torchscript-onednn-mismatch-values-float-4e0135ad" / "case.json")
    with Pools(1, 60.0) as pools:
        _, general, _ = generalise_case(case, pools(case.backend))
    assert general.probed and not general.alone and general.culprit is None, general
    assert root_cause_key(case.signature, case.graph, general) == "culprit|onednn||wrong-value|forward|log|float"


def test_known_repros_hold_a_repros_generalised_key_beside_its_named_one(tmp_path):
    kept = load_case(FRAC / "case.json")
    graph = kept.graph
    general = Generalisation(graph.renamed().digest(), ((1, "binary"),), ((0, "float"),))
    directory = tmp_path / "frac"
    directory.mkdir()
    (directory / "case.json").write_text(json.dumps(replace(kept, generalisation=general).to_json()))
    keys = known_repros([str(tmp_path)])
    sig = kept.signature
    assert root_cause_key(sig, graph, general) != root_cause_key(sig, graph)
    assert keys.find(root_cause_key(sig, graph, general)) == keys.find(root_cause_key(sig, graph)) == str(directory)


def test_a_generalised_crash_keeps_the_message_its_wildcards_were_tried_under():
    """Two oneDNN Graph crashes of the corpus, one with an empty error after neg, one with
    "partition compile failed" after sqrt: both ops are fillers, so the ops they need are none and
    the key names the set of their kinds ("*unary"); the folded message, part of an unanchored crash's
    identity, keeps them apart, with their fillers or without."""
    graph = frac_then("neg")
    general = Generalisation(graph.renamed().digest(), ((0, "unary"), (1, "unary")))
    empty = Signature("crash", "torchscript:onednn", "run", "RuntimeError", "", "RuntimeError:")
    failed = replace(empty, message="RuntimeError: partition compile failed")
    assert root_cause_key(empty, graph) != root_cause_key(failed, graph)
    # An empty message refuses nothing: the neg after frac stays among the ops it needs.
    assert root_cause_key(empty, graph) == "graph|onednn||crash||frac:float neg:float|"
    keys = {root_cause_key(s, graph, general) for s in (empty, failed)}
    assert keys == {"graph|onednn||crash||*unary|", "graph|onednn||crash||*unary|partition compile failed"}


def test_the_culprit_is_the_first_op_whose_own_value_is_wrong_and_the_key_is_it():
    """A stand-in fuser whose exp is wrong: with each op's value put first among the outputs, the
    first probe whose first output is wrong names exp; the key and the codec keep it, and the key
    is exp on float whatever observes exp's value (a nan-inf or a values mismatch there: both are
    wrong values) and whatever made its operand."""
    def graph_of(observer: str, *rest) -> Graph:
        b = GraphBuilder()
        x = b.tensor((3,), "float32", values=Values(seed=1))
        return b.build([b.add(observer, b.add("exp", b.add("neg", x)), *rest)]).renamed()

    probed = []

    def first_wrong(graphs: list[Graph]) -> list[str | None]:
        probed.extend(graphs)
        first = [next(n for n in g.nodes if n.name == g.outputs[0]) for g in graphs]
        return ["values" if n.op == "exp" else None for n in first]

    keys = set()
    for observer, rest, kind in (("log", (), "nan-inf"), ("lt", (1.0,), "values")):
        graph = graph_of(observer, *rest)
        general = generalise(graph, lambda gs: [False] * len(gs), NNC_OPS, first_wrong=first_wrong)
        assert general.culprit == (1, "values"), general
        assert Generalisation.from_json(json.loads(json.dumps(general.to_json()))) == general
        sig = Signature("mismatch", "torchscript:nnc", "run", kind, "float" if observer == "log" else "bool")
        keys.add(root_cause_key(sig, graph, general))
        assert root_cause_key(sig, graph) != root_cause_key(sig, graph, general)
    assert keys == {"culprit|nnc||wrong-value|forward|exp|float"}, keys
    # One probe per op before the last, then exp on its operand pinned as an input (and read by a neg).
    assert [len(g.outputs) for g in probed] == [2, 2, 2] * 2
    assert [n.op for n in probed[2].nodes] == ["exp", "neg"] and general.alone
    with pytest.raises(Exception, match="bad culprit"):
        Generalisation.from_json({**general.to_json(), "culprit": [0, "os.system"]})


@pytest.mark.slow
def test_nncs_round_of_a_half_is_one_key_whatever_observes_it_or_comes_before_it():
    """NNC rounds 0.5 to 1 (eager, half to even: 0). Seen through rsqrt it is a nan-inf mismatch,
    through le a bool one, through exp a float one: three coarse signatures, one bug. On the real
    fuser the culprit is round, and the three keys are one. Reached through a filler before it
    (abs -> round, where round is the output and so its own culprit), it is the same key: the
    filler is left out."""
    from fuzzfuse.ir.values import encode_exact
    from fuzzfuse.job import run_case
    from fuzzfuse.backends import get_backend
    import torch

    keys, kinds = set(), set()
    with Pools(1, 60.0) as pools:
        for observer, rest in (("rsqrt", ()), ("le", (0.5,)), ("exp", ())):
            b = GraphBuilder()
            x = b.tensor((2,), "float32", values=Values(exact=encode_exact(torch.tensor([0.5, 2.5]))))
            graph = b.build([b.add(observer, b.add("round", x), *rest)])
            result = run_case(graph, get_backend("torchscript:nnc"))
            assert result.outcome == Outcome.MISMATCH, result
            kinds.add((result.signature.kind, result.signature.location))
            case = Case(graph, "torchscript:nnc", outcome=result.outcome, signature=result.signature)
            _, general, _ = generalise_case(case, pools("torchscript:nnc"))
            assert general.culprit == (0, "values"), general
            keys.add(root_cause_key(result.signature, graph, general))
        b = GraphBuilder()
        x = b.tensor((2,), "float32", values=Values(exact=encode_exact(torch.tensor([0.5, 2.5]))))
        graph = b.build([b.add("round", b.add("abs", x))])
        result = run_case(graph, get_backend("torchscript:nnc"))
        case = Case(graph, "torchscript:nnc", outcome=result.outcome, signature=result.signature)
        _, general, _ = generalise_case(case, pools("torchscript:nnc"))
        assert general.ops == ((0, "unary"),), general
        filler_first = root_cause_key(result.signature, graph, general)
    assert len(kinds) == 3
    assert keys == {filler_first} == {"culprit|nnc||wrong-value|forward|round|float"}, \
        (keys, filler_first)


def test_an_operand_computed_from_an_expanded_input_stays_expanded_when_the_culprit_is_probed_alone():
    """nvFuser's var over an expanded dim is wrong only where that dim is still a broadcast. An H200
    campaign reduced cos -> var of an expanded input to those two ops, and the probe of var on
    eager's value of cos (pinned dense) passed: var was not alone, the key fell to cos, and the
    committed var bug (5aac8374) was reported new. Pinned with the expansion its values keep, var
    fails alone, and the key is var's, as the var-only repro's is."""
    from fuzzfuse.ir.graph import Layout

    def var_of(*unary: str) -> Graph:
        b = GraphBuilder()
        v = b.tensor((2, 3), "float32", layout=Layout("expanded", dims=(0,)), values=Values(seed=1))
        for op in unary:
            v = b.add(op, v)
        return b.build([b.add("var", v, dims=[0], keepdim=False, correction=0)]).renamed()

    def first_wrong(graphs: list[Graph]) -> list[str | None]:  # var of a broadcast dim is wrong
        def wrong(g: Graph) -> bool:
            node = next(n for n in g.nodes if n.name == g.outputs[0])
            source = {i.name: i for i in g.inputs}.get(node.refs()[0])
            seen_from = source or next(i for i in g.inputs)  # cos(x): its expansion comes from x
            return node.op == "var" and seen_from.layout.kind == "expanded"
        return ["values" if wrong(g) else None for g in graphs]

    sig = Signature("mismatch", "nvfuser", "run", "values", "float")
    keys = set()
    for graph in (var_of(), var_of("cos"), var_of("cos", "exp")):
        general = generalise(graph, lambda gs: [False] * len(gs), ("cos", "exp", "var"), first_wrong=first_wrong)
        assert general.culprit is None and general.alone, general
        keys.add(root_cause_key(sig, graph, general, "cuda"))
    assert keys == {"culprit|nvfuser|cuda|wrong-value|forward|var|float"}, keys


def test_with_several_outputs_the_output_op_whose_value_is_wrong_is_the_culprit():
    """An H200 campaign's nvFuser gather whose lookup tensor another output also reads (gather and
    eq(x0, x1) as outputs) had its gather output wrong. Only ops that were no outputs were probed,
    so no culprit was found and the whole graph was the key: a new bug beside the committed
    gather -> eq one. Probed with each op's value first among the outputs, gather is the culprit,
    and both forms have one key."""
    def model(g: Graph) -> str | None:  # the bug: gather is wrong where another op reads its lookup tensor
        gather = next((n for n in g.nodes if n.op == "gather"), None)
        if gather is None or g.outputs[0] != gather.name:
            return None
        shared = any(gather.refs()[0] in n.refs() for n in g.nodes if n is not gather)
        return "values" if shared else None

    b = GraphBuilder()
    x0, x1 = b.tensor((1, 2, 2, 1), "int32", values=Values("arange")), b.tensor((1, 2, 2, 1), "int32", values=Values("zeros"))
    two_outputs = b.build([b.add("gather", x0, x1, dim=-3), b.add("eq", x0, x1)]).renamed()
    b = GraphBuilder()
    x0, x1 = b.tensor((2, 2), "float32", values=Values("arange")), b.tensor((2, 2), "int32", values=Values("ones"))
    gathered = b.add("gather", x0, x1, dim=-1)
    observed = b.build([b.add("eq", gathered, x0)]).renamed()
    keys = set()
    for graph, symptom in ((two_outputs, "int"), (observed, "bool")):
        general = generalise(graph, lambda gs: [False] * len(gs), ("gather", "eq"), first_wrong=lambda gs: [model(g) for g in gs])
        assert general.culprit == (0, "values"), general
        keys.add(root_cause_key(Signature("mismatch", "nvfuser", "run", "values", symptom), graph, general, "cuda"))
    assert keys == {"culprit|nvfuser|cuda|wrong-value|forward|gather|"}, keys


def test_an_operand_that_is_a_strided_view_stays_one_when_the_culprit_is_probed_alone():
    """nvFuser's pad of a step-3 view is wrong (the committed 26d98a48: pad of a sliced input). An
    H200 campaign reduced slice(step 3) -> pad to those two ops; pad alone on eager's value of the
    slice, pinned dense, passed, and the key fell to slice: a new bug beside 26d98a48 (52306c75).
    Pinned as the view it is, pad fails alone, and both forms key as pad."""
    import torch

    from fuzzfuse.ir.graph import Layout
    from fuzzfuse.reduce.generalise import operands_as_inputs
    from fuzzfuse.reduce.passes import pinned

    x = torch.arange(40.0).reshape(4, 10)
    assert pinned("v", x[:, ::3]).layout == Layout("sliced", dim=1, step=3)
    assert pinned("v", x[:, 1:5]).layout == Layout() and pinned("v", x.t()).layout.kind == "permuted"

    def pad_of(sliced_input: bool) -> Graph:
        b = GraphBuilder()
        layout = Layout("sliced", dim=1, step=3) if sliced_input else Layout()
        v = b.tensor((4, 10) if not sliced_input else (4, 4), "float32", layout=layout, values=Values(seed=1))
        if not sliced_input:
            v = b.add("slice", v, dim=1, start=0, end=None, step=3)
        return b.build([b.add("pad", v, pads=[1, 1], value=0.0)]).renamed()

    def first_wrong(graphs: list[Graph]) -> list[str | None]:  # pad of a step-3 view is wrong
        def wrong(g: Graph) -> bool:
            node = next(n for n in g.nodes if n.name == g.outputs[0])
            source = {i.name: i for i in g.inputs}.get(node.refs()[0])
            return node.op == "pad" and (source is None or source.layout.kind == "sliced")
        return ["values" if wrong(g) else None for g in graphs]

    probe = operands_as_inputs(pad_of(False), 1, {"v0": x[:, ::3]})
    assert probe.inputs[-1].layout == Layout("sliced", dim=1, step=3)
    sig = Signature("mismatch", "nvfuser", "run", "values", "float")
    keys = set()
    for graph in (pad_of(False), pad_of(True)):
        general = generalise(graph, lambda gs: [False] * len(gs), ("slice", "pad", "neg"), first_wrong=first_wrong)
        keys.add(root_cause_key(sig, graph, general, "cuda"))
    assert keys == {"culprit|nvfuser|cuda|wrong-value|forward|pad|"}, keys


def test_a_cast_to_its_own_dtype_is_never_the_key_of_an_amplified_wrong_value():
    """NNC's log_softmax of a single element is -1.2e-38 (eager: 0), within the tolerance on its
    own and nan through pow(v, v). A CPU campaign reduced cast(float32 -> float32) ->
    log_softmax -> pow: no op was wrong alone, pow was not wrong alone on eager's 0, and the key
    fell to the first op, the cast: a new bug beside the committed log_softmax -> eq (3a2f9386).
    Generalised on NNC here, it is keyed by log_softmax, as 3a2f9386 is."""
    from fuzzfuse.identity import case_identity, identify, same_bug

    case = load_case(Path(__file__).parent / "data" / "nnc_log_softmax_pow_case.json")
    assert [n.op for n in case.graph.nodes] == ["cast", "log_softmax", "pow"]
    with Pools(1, 120.0) as pools:
        signature, general, _ = generalise_case(case, pools(case.backend))
    found = identify(signature, case.graph, general, device="cpu")
    committed = case_identity(load_case(ROOT / "minimized" / "torchscript-nnc-mismatch-values-bool-3a2f9386" / "case.json"))
    assert found.where == "log_softmax" and same_bug(found, committed), (found, committed)


@pytest.mark.slow  # real NNC in worker processes, two of its runs abort the worker
def test_a_crash_that_needs_a_folded_constant_is_one_bug_however_the_constant_was_made():
    """NNC corrupts the heap computing abs of an int16 or int8 value its simplifier proved zero:
    sub(x, x) -> abs (the committed 13207297) and isnan(x) * x -> abs (found later by a campaign)
    aborted with two glibc messages and were keyed by their producers as two bugs. Given as inputs
    holding the zeros, neither fails: each needs the fold; and each is the narrow store the fold
    feeds, one bug."""
    from fuzzfuse.explain import NARROW_STORE

    home = Path(__file__).resolve().parent.parent / "minimized" / "torchscript-nnc-hard-crash-sigabrt-13207297"
    case = load_case(home / "case.json")
    [variant] = [v for v in case.also_seen_as if v.graph is not None and "isnan" in v.ops]
    from fuzzfuse.pool import case_pool

    # glibc notices the corruption on most runs, not all (on a loaded machine, fewer): the graph
    # itself may run clean once, or an alternative of abs that crashed on one run may not on the
    # next, and abs then stays named beside the fold. Up to three tries for both keys to agree.
    from fuzzfuse.reduce import NotInteresting

    tries = []
    with case_pool(case.backend, 2, 60.0) as pool:
        for attempt in range(3):
            keys = []
            try:
                for graph in (case.graph, variant.graph):
                    signature, general, _ = generalise_case(replace(case, graph=graph), pool)
                    assert general.folded, graph.to_json()
                    keys.append(root_cause_key(signature, graph, general, "cpu"))
            except NotInteresting as e:  # the repro ran clean this once
                tries.append(str(e))
                continue
            tries.append(keys)
            if keys[0] == keys[1]:
                break
    # Both are named by the store the fold feeds (fuzzfuse.explain.NARROW_STORE), which each
    # graph shows on int64 inputs: one bug.
    assert keys and keys[0] == keys[1] == f"culprit|nnc|cpu|wrong-value|forward|{NARROW_STORE}|", tries


def test_a_fold_names_a_killed_process_never_an_exceptions_typed_op():
    """A second CPU NNC campaign found TorchScript's add(x, True) -> where of a bool raising "where
    expected condition to be a boolean tensor, but got ... Long": add(bool, True) is typed Long. Given
    as a bool input the add, and the error, are gone, so the probe recorded a fold; keyed by it, the
    committed 2606b043 (add:bool) no longer matched. A fold names only a crash by a signal."""
    b = GraphBuilder()
    x0 = b.tensor((), "bool", values=Values("zeros"))
    added = b.add("add", x0, True)
    graph = b.build([b.add("where", added, added, x0)]).renamed()
    general = Generalisation(graph.digest(), folded=(0,))
    raised = Signature("crash", "torchscript:frontend", "compile", "RuntimeError", "",
                       "where expected condition to be a boolean tensor, but got a tensor with dtype Long")
    killed = Signature("hard-crash", "torchscript:nnc", "run", "SIGABRT", "", "")
    assert "add:bool" in root_cause_key(raised, graph, general, "cpu")
    assert "folded-constant:bool" in root_cause_key(killed, graph, general, "cpu")


def test_a_flaky_failure_gets_a_second_ask_before_an_alternative_counts_against_a_filler():
    """A heap corruption that glibc notices on most runs, not all: with abs's alternatives failing
    only on their second run, abs stays named beside frac unless the generalisation asks again
    (as it does for a process killed by a signal: minimize.generalised)."""
    graph = frac_then("abs")
    asked_before: set[str] = set()

    def second_time_only(candidates: list[Graph]) -> list[bool]:
        said = []
        for g in candidates:
            fails = any(n.op == "frac" for n in g.nodes) and (g.nodes[1].op == "abs" or g.digest() in asked_before)
            asked_before.add(g.digest())
            said.append(fails)
        return said
    assert generalise(graph, second_time_only, NNC_OPS).ops == ()
    asked_before.clear()
    assert generalise(graph, second_time_only, NNC_OPS, by_signal=True).ops == ((1, "unary"),)


def test_a_directory_that_no_longer_fails_as_recorded_says_what_it_gives_today():
    """`corpus refresh --generalise` leaves such a directory as it was and says why: that its graph
    passes under today's oracle (a rule that forgives it now, or a fix), or the key it has now.
    Real NNC: round of 0.5 and 2.5 is a mismatch (halves away from zero); of 0.25 and 3.0 none."""
    from fuzzfuse.ir.values import encode_exact
    from fuzzfuse.job import run_case
    from fuzzfuse.backends import get_backend
    from fuzzfuse.oracle import Signature
    from fuzzfuse.reduce import NotInteresting
    import torch

    def rounded(values):
        b = GraphBuilder()
        x = b.tensor((2,), "float32", values=Values(exact=encode_exact(torch.tensor(values))))
        return b.build([b.add("rsqrt", b.add("round", x))])

    failing = run_case(rounded([0.5, 2.5]), get_backend("torchscript:nnc"))
    assert failing.outcome == Outcome.MISMATCH
    with Pools(1, 60.0) as pools:
        passing = Case(rounded([0.25, 3.0]), "torchscript:nnc", outcome=failing.outcome, signature=failing.signature)
        with pytest.raises(NotInteresting, match="does not fail as recorded now: it passes"):
            generalise_case(passing, pools("torchscript:nnc"))
        crash = Signature("crash", "torchscript:nnc", "compile", "RuntimeError", "x.cpp:1", "")
        other = Case(rounded([0.5, 2.5]), "torchscript:nnc", outcome=Outcome.CRASH, signature=crash)
        with pytest.raises(NotInteresting, match=r"it gives mismatch\|torchscript:nnc\|run\|"):
            generalise_case(other, pools("torchscript:nnc"))


def _expm1_seen_by_eq(upstream_exact: bool, before=None):
    """expm1 -> eq with a second output, judged by a stand-in fuser whose eq is wrong in the graph
    and right on eager's operands; its expm1 is eager's bit for bit or not (`upstream_exact`)."""
    b = GraphBuilder()
    x = b.tensor((3,), "float32", values=Values(seed=1))
    z = b.tensor((3,), "float32", values=Values(seed=2))
    source = b.add(before, x) if before else x
    graph = b.build([b.add("eq", z, b.add("expm1", source)), b.add("add", z, z)]).renamed()

    def first_of(g: Graph):
        return next((n for n in g.nodes if n.name == g.outputs[0]), None)

    def first_wrong(graphs: list[Graph]) -> list[str | None]:
        # eq is wrong only where expm1 feeds it inside the graph, not on operands given as inputs
        return ["values" if (n := first_of(g)) is not None and n.op == "eq" and any(m.op == "expm1" for m in g.nodes)
                else None for g in graphs]

    def exact_first(graphs: list[Graph]) -> list[bool]:
        return [not ((n := first_of(g)) is not None and n.op == "expm1" and not upstream_exact) for g in graphs]

    return graph, generalise(graph, lambda gs: [False] * len(gs), NNC_OPS + ("expm1",), first_wrong=first_wrong,
                             exact_first=exact_first)


def test_a_culprit_right_on_eagers_operands_is_the_inexact_op_it_reads():
    """Inductor CPU's vectorized expm1 of 2.9e-39 is 0, within the tolerance as an output; eq(0, it)
    is True where eager's is False. eq, right on eager's operands, only showed it: the culprit is
    the first op before it whose value is not eager's bit for bit on exact operands (an exact neg
    before it changes nothing). Where that op is exact (a fused pair), the culprit stays."""
    graph, general = _expm1_seen_by_eq(upstream_exact=False)
    assert [n.op for n in graph.nodes][general.culprit[0]] == "expm1" and general.alone, general
    sig = Signature("mismatch", "inductor", "run", "values", "bool")
    assert root_cause_key(sig, graph, general, "cpu") == "culprit|inductor|cpu|wrong-value|forward|expm1|float"
    graph, general = _expm1_seen_by_eq(upstream_exact=True)
    assert [n.op for n in graph.nodes][general.culprit[0]] == "eq" and not general.alone, general
    graph, general = _expm1_seen_by_eq(upstream_exact=False, before="neg")  # neg's value: exact (the stand-in)
    assert [n.op for n in graph.nodes][general.culprit[0]] == "expm1", general


@pytest.mark.slow
@pytest.mark.upstream_bug("inductor-mismatch-values-float-e69a2bcf")
def test_inductor_cpus_expm1_of_a_subnormal_seen_through_eq_is_the_committed_expm1_bug():
    """The 300-s CPU Inductor campaign's expm1 -> eq (one of four ops, two outputs) was keyed by its
    whole graph and reported new; generalised again on the real fuser its culprit is expm1, the
    committed e69a2bcf (its case, re-generalised so, is a known form)."""
    from fuzzfuse.job import run_case
    from fuzzfuse.backends import get_backend
    from fuzzfuse.identity import same_bug, case_identity

    data = Path(__file__).parent / "data" / "known_forms" / "inductor-mismatch-values-bool-44c8823d" / "case.json"
    found = load_case(data)
    graph = found.graph
    result = run_case(graph, get_backend("inductor"))
    assert result.outcome == Outcome.MISMATCH, result
    with Pools(1, 120.0) as pools:
        case = replace(found, signature=result.signature, generalisation=None)
        _, general, _ = generalise_case(case, pools("inductor"))
    assert graph.nodes[general.culprit[0]].op == "expm1", general
    committed = load_case(Path(__file__).parent.parent / "minimized" / "inductor-mismatch-values-float-e69a2bcf" / "case.json")
    assert same_bug(case_identity(replace(case, generalisation=general)), case_identity(committed))


@pytest.mark.slow
@pytest.mark.upstream_bug("inductor-mismatch-nan-inf-float-c6f475f2")
def test_a_culprit_right_alone_on_two_elements_is_asked_on_a_vector_loops_worth():
    """A 300-s CPU Inductor campaign's bfloat16 pow(0, 0) -> neg -> remainder by [2.9e-39, 1] (inf,
    eager -0) was keyed as pow's, a new bug: the remainder alone on the -1 eager computes is right
    on two elements, which Inductor's scalar tail computes; its vectorized remainder, which the
    fused kernel ran, gives inf for that quotient (c6f475f2, pytorch#198057). Asked again on the
    divisors repeated to 64 (`tiled`), it is inf. Real Inductor CPU, in a worker as a campaign's
    (one thread, this machine's capability) and under the capability the case was recorded with."""
    from fuzzfuse.identity import case_identity, same_bug
    from fuzzfuse.rekey import stale

    data = Path(__file__).parent / "data" / "known_forms" / "inductor-mismatch-nan-inf-float-58783996" / "case.json"
    found = load_case(data)
    as_campaign_keyed = replace(found, generalisation=replace(found.generalisation, alone=False),
                                reduction=replace(found.reduction, reducer=7))
    assert case_identity(as_campaign_keyed).where == "pow" and "repeated" in stale(as_campaign_keyed)
    committed = load_case(Path(__file__).parent.parent / "minimized" / "inductor-mismatch-nan-inf-float-c6f475f2" / "case.json")
    unpinned = replace(found, versions={}, generalisation=None)
    with Pools(1, 120.0) as pools:
        for case in (unpinned, replace(found, generalisation=None)):
            _, general, _ = generalise_case(case, pools("inductor", case))
            assert general.alone and general.culprit is None, general
            now = case_identity(replace(found, generalisation=general))
            assert now.where == "remainder" and same_bug(now, case_identity(committed))


def test_a_probe_is_tiled_along_its_innermost_dim_and_keeps_what_broadcasts():
    """The probe's inputs that span the result's innermost dim repeat along it; a 0-d operand stays
    broadcast; each repeat of the result is the original's."""
    from fuzzfuse.ir import make_inputs
    from fuzzfuse.ir.graph import Node, TensorInput
    from fuzzfuse.reduce.generalise import VECTOR_ELEMENTS, tiled
    from fuzzfuse.ir.interp import interpret
    import torch

    probe = Graph((TensorInput("x1", (2,), "float32"), TensorInput("v1", (), "bfloat16")),
                  (Node("v2", "remainder", ("v1", "x1")), Node("v2_seen", "neg", ("v2",))), ("v2", "v2_seen"))
    long = tiled(probe)
    assert [tuple(i.shape) for i in long.inputs] == [(VECTOR_ELEMENTS,), ()]
    short_out = interpret(probe, make_inputs(probe))[0]["v2"]
    long_out = interpret(long, make_inputs(long))[0]["v2"]
    assert torch.equal(long_out, short_out.repeat(VECTOR_ELEMENTS // 2))
    assert tiled(long) is None
    reduction = Graph((TensorInput("x", (2, 3), "float32"),), (Node("s", "sum", ("x",), {"dims": [1], "keepdim": False}),
                                                              Node("n", "neg", ("s",))), ("s", "n"))
    assert tiled(reduction) is None


def test_rekeys_pools_pin_the_cpu_capability_each_case_was_recorded_with():
    """Generalisation of a committed repro ran under the host's capability while its repro pins the
    recorded one (Inductor CPU writes other loops for AVX2 and AVX-512, and its bugs may show under
    one only). Pools keep one pool per (backend, capability)."""
    recorded = replace(load_case(Path(__file__).parent / "data" / "known_forms"
                                 / "inductor-mismatch-nan-inf-float-58783996" / "case.json"), versions={"cpu_capability": "default"})
    with Pools(1, 60.0) as pools:
        pinned, unpinned = pools("torchscript:nnc", recorded), pools("torchscript:nnc")
        assert pinned.env_of(0)["ATEN_CPU_CAPABILITY"] == "default"
        assert "ATEN_CPU_CAPABILITY" not in unpinned.env_of(0) and pinned is pools("torchscript:nnc", recorded)


def _pad_of_neg(outputs_pad_first: bool) -> Graph:
    b = GraphBuilder()
    x = b.tensor((1,), "float32", values=Values("zeros"))
    negated = b.add("neg", x)
    padded = b.add("pad", negated, pads=[1, -1], value=1.0)
    return b.build([padded, negated] if outputs_pad_first else [negated, padded]).renamed()


@pytest.mark.parametrize("pad_wrong_first", [True, False])
def test_a_filler_found_wrong_first_gives_way_to_a_later_op_wrong_too(pad_wrong_first):
    """Inductor CUDA's neg -> pad(1, -1) of one element, both outputs, was wrong (on the H100) as
    pad's output and as neg's when each was put first. neg, probed first, was the culprit, but any
    unary op did it (a filler): the key named no op, and a form of the committed one-element pad
    bug (fa9ada42, whose member is the graph with its outputs the other way round, keyed as pad's)
    was reported new. pad, wrong too when first, is now the culprit, and both forms are one key.
    Where pad's own value is right (the control), the outputs stay the bug: no op is blamed for
    what it did not compute."""
    from fuzzfuse.identity import WRONG_AMONG_OUTPUTS, identify

    def is_interesting(graphs):  # any unary op before the pad keeps the failure; the pad is needed
        return [any(n.op == "pad" for n in g.nodes) and len(g.nodes) == 2 for g in graphs]

    def first_wrong(graphs):
        def wrong(g):
            first = next(n for n in g.nodes if n.name == g.outputs[0])
            return "values" if first.op != "pad" or pad_wrong_first else None
        return [wrong(g) for g in graphs]

    wrong = Signature("mismatch", "inductor", "run", "values", "float")
    identities = []
    for graph in (_pad_of_neg(True), _pad_of_neg(False)):
        general = generalise(graph, is_interesting, ("neg", "abs", "relu", "exp", "pad"), first_wrong=first_wrong)
        assert general.ops == ((0, "unary"),), general
        identities.append(identify(wrong, graph, general, "cuda"))
    if pad_wrong_first:
        assert {i.key() for i in identities} == {"culprit|inductor|cuda|wrong-value|forward|pad|"}
    else:
        assert identities[0].where == WRONG_AMONG_OUTPUTS, identities[0]
