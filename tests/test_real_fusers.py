"""Real fusers, end to end: campaigns find real bugs in NNC, oneDNN Graph and Inductor on this CPU
build, reduce them, and write repros that fail on their own. No fixtures here."""
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fuzzfuse.campaign import Campaign
from fuzzfuse.corpus import Case, load_case
from fuzzfuse.ir import Values
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.job import backend_for, run_case
from fuzzfuse.minimize import reduce_case, save_minimized
from fuzzfuse.verdict import Outcome


@pytest.mark.slow
def test_nnc_campaign_finds_reduces_and_saves_real_bugs(tmp_path):
    summary = Campaign("torchscript:nnc", tmp_path, seed=3, workers=2, max_cases=300, reduce_budget=150).run()
    assert summary["cases"] == 300
    crashes = [s for s in summary["signatures"] if s["outcome"] == "crash" and s["confirmed"]]
    assert crashes, summary["signatures"]
    # One repro per root cause: a crash whose root cause another signature's repro holds has none.
    reduced = [e for e in crashes if "minimized" in e]
    assert reduced, crashes
    for entry in reduced:
        minimized = entry["minimized"]
        assert minimized["ops_after"] <= minimized["ops_before"]
        case = load_case(tmp_path / minimized["path"] / "case.json")
        assert case.verification.status == "reproduces"
        assert case.signature.to_json() == entry["signature"]
    causes = summary["root_causes"]
    assert causes and all(c["minimized"] for c in causes)  # no --known here: every root cause is new
    assert len({c["minimized"] for c in causes}) == len(causes)


@pytest.mark.slow
@pytest.mark.upstream_bug("torchscript-nnc-crash-runtimeerror-662c8eb0")
def test_nnc_integer_round_crash_reduces_to_one_op(tmp_path):
    """NNC cannot compile round() of an integer tensor ("Invalid integral op_type")."""
    b = GraphBuilder()
    x = b.tensor((3, 4), "int32", values=Values(seed=1))
    y = b.tensor((3, 4), "float32", values=Values(seed=2))
    v = b.add("mul", b.add("round", b.add("add", x, 1)), 2)
    graph = b.build([b.add("add", b.add("sigmoid", y), v), b.add("neg", y)])
    result = run_case(graph, backend_for("torchscript:nnc"))
    assert result.outcome == "crash" and "integral op_type" in result.signature.message
    case = Case(graph, "torchscript:nnc", outcome=Outcome.CRASH, signature=result.signature, detail=result.detail)
    reduced = reduce_case(case, "torchscript:nnc", workers=2)
    # NNC fuses groups of two ops or more, so two ops is minimal; the reducer may swap round for
    # floor, a simpler op that hits the same bug.
    ops = [n.op for n in reduced.graph.nodes]
    assert len(ops) == 2 and {"round", "floor", "ceil", "trunc"} & set(ops), ops
    directory = save_minimized(tmp_path, case, reduced, "torchscript:nnc")
    assert load_case(directory / "case.json").verification.status == "reproduces"
    source = (directory / "repro.py").read_text()
    assert "import fuzzfuse" not in source and "from fuzzfuse" not in source


@pytest.mark.upstream_bug("torchscript-nnc-crash-runtimeerror-662c8eb0")
def test_big_inputs_collapse_first_on_a_real_nnc_crash():
    """The same crash on 16,384 input elements: the reducer's first queries make the inputs zeros
    and halve every dim while NNC still crashes, before any op pass runs."""
    b = GraphBuilder()
    x = b.tensor((64, 128), "int32", values=Values(seed=1))
    y = b.tensor((64, 128), "float32", values=Values(seed=2))
    v = b.add("mul", b.add("round", b.add("add", x, 1)), 2)
    graph = b.build([b.add("add", b.add("sigmoid", y), v), b.add("neg", y)])
    result = run_case(graph, backend_for("torchscript:nnc"))
    assert result.outcome == "crash" and "integral op_type" in result.signature.message
    case = Case(graph, "torchscript:nnc", outcome=Outcome.CRASH, signature=result.signature, detail=result.detail)
    reduced = reduce_case(case, "torchscript:nnc", workers=2)
    assert reduced.stats.passes["collapse"].successes >= 2  # zeros, then at least one halving
    assert all(i.values == Values("zeros") and math.prod(i.shape) <= 32 * 64 for i in reduced.graph.inputs)
    assert len(reduced.graph.nodes) == 2


@pytest.mark.slow
def test_reduce_gives_two_nnc_value_bugs_of_one_coarse_signature_two_repros_and_one_bug_one(tmp_path):
    """Reduce, then dedup: NNC's round-half error (round -> neg) and its lost -0 (neg -> atan2)
    shared the coarse signature mismatch|torchscript:nnc|run|values|float, which once let one of
    them stand for both (the lost -0's now carries its rule's message). Each is reduced and lands in the directory of its own reduced root cause; the
    same bug given twice (round -> neg under a third op) lands in one."""
    from fuzzfuse.corpus import save_case
    from fuzzfuse.minimize import minimize_files

    repros = Path(__file__).parent.parent / "minimized"
    round_neg = load_case(repros / "torchscript-nnc-mismatch-values-float-d13b663f" / "case.json")
    lost_zero = load_case(repros / "torchscript-nnc-mismatch-nan-inf-float-860d91da" / "case.json")  # neg -> rsqrt
    atan2 = next(v for v in lost_zero.also_seen_as if v.directory == "torchscript-nnc-mismatch-values-float-c215ad76")
    neg_atan2 = Case(atan2.graph, "torchscript:nnc", outcome=Outcome.MISMATCH, signature=atan2.signature)
    b = GraphBuilder()  # the committed repro's half, under ops that do not matter
    x = b.tensor((), "float32", values=round_neg.graph.inputs[0].values)
    round_neg_again = b.build([b.add("neg", b.add("round", b.add("abs", x))), b.add("exp", x)])
    again = run_case(round_neg_again, backend_for("torchscript:nnc"))
    # Today the lost -0 is named by its rule (fuzzfuse.explain: the sign neg loses): its key
    # differs from round's by that message alone.
    assert again.signature.key() == round_neg.signature.key() == replace(neg_atan2.signature, message="").key()
    for case in (round_neg, neg_atan2, Case(round_neg_again, "torchscript:nnc", outcome=again.outcome,
                                            signature=again.signature, detail=again.detail)):
        save_case(tmp_path / "corpus", case)
    results = list(minimize_files([tmp_path / "corpus"], tmp_path / "min", workers=2, max_queries=40))
    assert len(results) == 3 and all(isinstance(d, Path) for _, d in results), results
    directories = {d for _, d in results}
    assert len(directories) == 2
    for d in directories:
        saved = load_case(d / "case.json")
        assert saved.verification.status == "reproduces"
    ops = sorted(tuple(sorted(n.op for n in load_case(d / "case.json").graph.nodes)) for d in directories)
    assert ops == [("atan2", "neg"), ("neg", "round")]


@pytest.mark.slow
@pytest.mark.upstream_bug("torchscript-nnc-crash-runtimeerror-662c8eb0")
def test_reduce_skips_a_case_that_no_longer_fails_on_nnc_and_reduces_the_next_smallest(tmp_path):
    """A corpus holding two cases of NNC's integer round() crash, the smaller one of which passes
    today (as a case does once the fuser is fixed or the failure was flaky): the smaller is skipped
    as not interesting, the other reduced."""

    from fuzzfuse.corpus import save_case
    from fuzzfuse.minimize import minimize_files
    from fuzzfuse.reduce import NotInteresting

    b = GraphBuilder()
    x = b.tensor((3, 4), "int32", values=Values(seed=1))
    failing = b.build([b.add("mul", b.add("round", b.add("add", x, 1)), 2), b.add("neg", x)])
    result = run_case(failing, backend_for("torchscript:nnc"))
    assert result.outcome == "crash" and "integral op_type" in result.signature.message
    case = Case(failing, "torchscript:nnc", outcome=Outcome.CRASH, signature=result.signature, detail=result.detail)
    b = GraphBuilder()
    passing = b.build([b.add("neg", b.add("add", b.tensor((3, 4), "int32", values=Values(seed=1)), 1))])
    assert run_case(passing, backend_for("torchscript:nnc")).outcome == "pass"
    for graph in (failing, passing):
        save_case(tmp_path / "corpus", replace(case, graph=graph))
    (skipped, smaller), (reduced, directory) = minimize_files([tmp_path / "corpus"], tmp_path / "min", workers=2,
                                                             max_queries=20)
    assert skipped.name == passing.digest() + ".json" and isinstance(smaller, NotInteresting)
    assert reduced.name == failing.digest() + ".json"
    assert load_case(directory / "case.json").verification.status == "reproduces"


def test_onednn_multiplies_int_by_float_scalar_in_integers():
    """oneDNN Graph's scalar rewrite keeps int dtype: mul(int tensor, 2.5) comes back int64."""
    b = GraphBuilder()
    x = b.tensor((2, 3), "int64", values=Values("arange"))
    graph = b.build([b.add("relu", b.add("mul", b.add("relu", x), 2.5))])
    result = run_case(graph, backend_for("torchscript:onednn"))
    assert result.outcome == "mismatch", result
    assert result.signature.kind == "dtype"


@pytest.mark.slow
@pytest.mark.upstream_bug("inductor-mismatch-nan-inf-float-daed7bbd")
def test_inductor_var_of_single_nan_is_zero():
    """Inductor (CPU) returns 0 for var over a size-1 dim holding NaN; eager returns NaN."""
    b = GraphBuilder()
    x = b.tensor((1,), "float32", values=Values("zeros"))
    graph = b.build([b.add("var", x, dims=[0], correction=0, keepdim=True)])
    nan = graph.inputs[0]

    from fuzzfuse.ir.values import encode_exact
    graph = replace(graph, inputs=(replace(nan, values=Values(exact=encode_exact(torch.tensor([float("nan")])))),))
    result = run_case(graph, backend_for("inductor"))
    assert result.outcome == "mismatch" and result.signature.kind == "nan-inf", result
