"""A fallback is named by the type guard that sent it there (fuzzfuse.backends.guards), on the real
fusers: two graphs that reach one guard through different ops are one bug before either is
reduced, and another fuser's guard is another bug."""
from dataclasses import replace

import pytest

from fuzzfuse.backends.findings import AN_INPUT, FUSED_OUTPUT, FailedGuard
from fuzzfuse.corpus import Case, ReductionFigures, load_case
from fuzzfuse.fold import fold
from fuzzfuse.identity import identify, same_bug
from fuzzfuse.ir import Layout, Values
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.job import backend_for, run_case
from fuzzfuse.rekey import stale
from fuzzfuse.repro_dir import write_minimized

SLICED = Layout("sliced", dim=0, step=2)


def _nnc_through_mean(layout=SLICED, shape=(1, 1)):
    """The identity cast of a [1, 1] slice is a fused kernel's output, and NNC leaves the mean out
    of its groups, so a second group reads the cast's output."""
    b = GraphBuilder()
    x = b.tensor(shape, "float32", layout, Values("zeros"))
    v0 = b.add("cast", x, dtype="float32")
    v1 = b.add("neg", v0)
    v2 = b.add("mean", v1, dims=[1], keepdim=False)
    return b.build([b.add("add", b.add("add", v1, v2), v0)])


def _nnc_through_remainder():
    """The same cast, its output read past a remainder by an int32 tensor (a committed repro's
    graph)."""
    b = GraphBuilder()
    x = b.tensor((1,), "float32", SLICED, Values("zeros"))
    y = b.tensor((), "int32", values=Values("zeros"))
    v0 = b.add("cast", x, dtype="float32")
    v2 = b.add("remainder", b.add("neg", v0), y)
    return b.build([b.add("addcmul", v0, b.add("trunc", v0), v2, value=1.0)])


def _onednn(op: str, layout: Layout):
    """float32 + a non-contiguous bfloat16: oneDNN Graph casts the bfloat16 in front of its
    partition."""
    b = GraphBuilder()
    x = b.tensor((2,), "float32", values=Values("zeros"))
    y = b.tensor((2,), "bfloat16", layout, Values("zeros"))
    return b.build([b.add(op, b.add("add", x, y))])


def test_failed_guard_message_reads_back():
    for guard in (FailedGuard("strides", FUSED_OUTPUT), FailedGuard("dtype", AN_INPUT),
                  FailedGuard("sizes", "aten::to")):
        assert FailedGuard.parse(guard.message()) == guard
    assert FailedGuard.parse("") is None
    assert FailedGuard.parse("a type guard rejects everything") is None


def test_nnc_fallbacks_through_one_guard_are_one_bug_before_reduction():
    """Graphs that share only the cast of a sliced input: the guard rejects the strides of a
    fused output, whichever op split the groups and however long the sliced dimension."""
    nnc = backend_for("torchscript:nnc")
    graphs = (_nnc_through_mean(), _nnc_through_remainder(), _nnc_through_mean(shape=(3, 1)))
    results = [run_case(graph, nnc) for graph in graphs]
    assert [r.outcome for r in results] == ["unfused"] * 3, [r.detail for r in results]
    guards = [FailedGuard.parse(r.signature.message) for r in results]
    assert guards == [FailedGuard("strides", FUSED_OUTPUT)] * 3
    identities = [identify(r.signature) for r in results]  # no graph: not reduced
    assert identities[0] is not None and same_bug(*identities[:2]) and same_bug(*identities[1:])


def test_nnc_fuses_the_same_graph_on_a_contiguous_input():
    """The control: without the slice every guard holds."""
    result = run_case(_nnc_through_mean(Layout("contiguous")), backend_for("torchscript:nnc"))
    assert result.outcome == "pass", result.detail


@pytest.mark.slow
def test_onednn_fallbacks_name_the_cast_before_the_partition_on_both_routes_and_differ_from_nncs():
    """Another op after the add, another layout, and aot_autograd's route (its scripted forward
    takes its module first): one guard, one bug."""
    onednn = backend_for("torchscript:onednn")
    results = [run_case(_onednn("tanh", Layout("expanded", dims=(0,))), onednn),
               run_case(_onednn("round", SLICED), onednn),
               run_case(_onednn("gelu", Layout("expanded", dims=(0,))), backend_for("aot:onednn"))]
    assert [r.outcome for r in results] == ["unfused"] * 3, [r.detail for r in results]
    assert {FailedGuard.parse(r.signature.message) for r in results} == {FailedGuard("strides", "aten::to")}
    assert same_bug(identify(results[0].signature), identify(results[1].signature))
    assert same_bug(identify(results[0].signature), identify(results[2].signature))
    nnc = run_case(_nnc_through_mean(), backend_for("torchscript:nnc"))
    assert not same_bug(identify(results[0].signature), identify(nnc.signature))


def _as_revision_5_left_it(root, name: str, graph) -> None:
    """A directory as the reducer before revision 6 left an NNC fallback: no guard in its
    signature, keyed by its graph's ops."""
    found = run_case(graph, backend_for("torchscript:nnc"))
    assert found.outcome == "unfused"
    signature = replace(found.signature, message="")
    case = Case(graph, "torchscript:nnc", outcome=found.outcome, signature=signature, detail="nothing fused (forward)",
                reduction=ReductionFigures(ops_after=graph.size, reducer=5))
    written = write_minimized(root / name, case, verify_runs=1)
    assert stale(written)


@pytest.mark.slow
def test_fold_names_two_committed_fallbacks_by_their_guard_and_keeps_one_directory(tmp_path):
    """Two directories the older reducer kept apart (the cast's output read past a mean, and past
    a remainder): fold reduces each again by itself, both name the same guard, and one directory
    stays, listing the other under the name it was committed with."""
    root = tmp_path / "minimized"
    _as_revision_5_left_it(root, "torchscript-nnc-unfused-fallback-mean", _nnc_through_mean())
    _as_revision_5_left_it(root, "torchscript-nnc-unfused-fallback-remainder", _nnc_through_remainder())
    report = fold(root, verify_runs=1)
    (kept,) = list(root.iterdir())
    case = load_case(kept / "case.json")
    assert FailedGuard.parse(case.signature.message) == FailedGuard("strides", FUSED_OUTPUT), report.lines()
    listed = {v.directory for v in case.also_seen_as}
    assert listed & {"torchscript-nnc-unfused-fallback-mean", "torchscript-nnc-unfused-fallback-remainder"}, listed
    assert not {v.directory for v in case.also_seen_as} & {kept.name}
    assert fold(root, dry_run=True).reduced_again == []


def _with_grad(builder: GraphBuilder, position: int) -> None:
    builder.inputs[position] = replace(builder.inputs[position], requires_grad=True)


def _aot_nnc_backward(layout: Layout = SLICED):
    """pow of the cast of a sliced int32 [1]: the backward reads the cast's output, which the
    forward saved from its NNC kernel (contiguous, where the profile saw the slice's stride)."""
    b = GraphBuilder()
    x = b.tensor((1,), "int32", layout, Values("zeros"))
    y = b.tensor((3,), "float32", values=Values("zeros"))
    _with_grad(b, 1)
    v0 = b.add("cast", x, dtype="float32")
    return b.build([b.add("pow", v0, y), v0])


@pytest.mark.slow
def test_an_aot_backward_fallback_is_the_forward_guards_bug_named_by_the_kernel_that_saved_its_value():
    """aot_autograd's backward guard rejects a value its forward saved: what made that value is
    the forward's fused kernel, so the bug is the one NNC's forward fallbacks show."""
    backward = run_case(_aot_nnc_backward(), backend_for("aot:nnc"))
    assert (backward.outcome, backward.signature.stage) == ("unfused", "backward-run"), backward.detail
    assert FailedGuard.parse(backward.signature.message) == FailedGuard("strides", FUSED_OUTPUT)
    forward = run_case(_nnc_through_mean(), backend_for("torchscript:nnc"))
    assert same_bug(identify(backward.signature), identify(forward.signature))
    control = run_case(_aot_nnc_backward(Layout("contiguous")), backend_for("aot:nnc"))
    assert control.outcome == "pass", control.detail


@pytest.mark.slow
def test_an_aot_backward_fallback_of_onednn_names_the_cast_before_its_partition():
    """The backward of pow by an expanded bfloat16 exponent: oneDNN's cast in front of its
    backward partition is guarded with the expanded strides, as in the forward graphs."""
    b = GraphBuilder()
    x = b.tensor((2,), "bfloat16", Layout("expanded", dims=(0,)), Values("zeros"))
    y = b.tensor((2,), "float32", values=Values("zeros"))
    _with_grad(b, 1)
    graph = b.build([b.add("pow", y, x), b.add("abs", b.add("add", y, y))])
    backward = run_case(graph, backend_for("aot:onednn"))
    assert (backward.outcome, backward.signature.stage) == ("unfused", "backward-run"), backward.detail
    assert FailedGuard.parse(backward.signature.message) == FailedGuard("strides", "aten::to")
    forward = run_case(_onednn("tanh", Layout("expanded", dims=(0,))), backend_for("torchscript:onednn"))
    assert same_bug(identify(backward.signature), identify(forward.signature))
