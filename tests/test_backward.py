"""Backward (autograd) fuzzing: generation of requires_grad cases, gradient judging against eager
autograd with float64 arbitration, the reducer keeping a backward failure a backward failure,
repros that backpropagate, and real fusers' backward graphs (TorchScript autodiff, aot_autograd,
Inductor) running fused."""
import json
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from fuzzfuse.campaign import Campaign
from fuzzfuse.corpus import Case, iter_cases, load_case
from fuzzfuse.ir import Graph, GraphError, Values, make_inputs, run_autograd
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.export import read_verdict
from fuzzfuse.job import backend_for, run_case
from fuzzfuse.minimize import CaseReduction, reduce_case, save_minimized
from fuzzfuse.pool import case_pool, graph_job, run_jobs
from fuzzfuse.reduce import ReductionStats, cost, reduce
from fuzzfuse.reduce.passes import ddmin_ops, drop_requires_grad
from fuzzfuse.seeds import training_seed_cases
from fuzzfuse.strategies import GenConfig, generate, grad_reach
from fuzzfuse.verdict import Outcome, judge

WRONG_GRAD = "custom:tests.buggy_backends:WrongGradOnSigmoid"


def training(graph: Graph, grad: tuple[int, ...] | None = None, seed: int = 5) -> Graph:
    """`graph` with the inputs at positions `grad` (all when None) requiring grad."""
    inputs = tuple(replace(i, requires_grad=grad is None or k in grad) for k, i in enumerate(graph.inputs))
    return replace(graph, inputs=inputs, grad_seed=seed)


def sigmoid_chain() -> Graph:
    b = GraphBuilder()
    x = b.tensor((3, 4), values=Values(seed=1))
    w = b.tensor((3, 4), values=Values(seed=2))
    y = b.add("tanh", b.add("add", b.add("sigmoid", b.add("mul", x, w)), w))
    return training(b.build([y, b.add("exp", w)]))


def clamp_by_tensors() -> Graph:
    """exp(clamp(x, lo, hi)) with tensor bounds: NNC's backward drops the bounds' gradients."""
    b = GraphBuilder()
    x, lo = b.tensor((3, 4), values=Values(seed=1)), b.tensor((3, 4), values=Values(seed=2))
    hi = b.tensor((3, 4), values=Values(seed=3, scale=0.5))
    return training(b.build([b.add("exp", b.add("clamp", x, lo, hi))]))


# ---- generation and the IR ------------------------------------------------------------------------
def test_backward_generation_marks_only_differentiable_float_inputs():
    marked = 0
    for seed in range(120):
        graph = generate(seed, GenConfig(backward=True, max_ops=8))
        assert Graph.from_json(json.loads(json.dumps(graph.to_json()))) == graph
        for spec in graph.inputs:
            if getattr(spec, "requires_grad", False):
                marked += 1
                assert spec.dtype.startswith(("float", "bfloat")) and grad_reach(graph, spec.name) == (True, True)
        if graph.requires_grad:  # eager's backward runs on every generated case, in float64 too
            outs, _, grad_outputs, grads = run_autograd(graph, make_inputs(graph))
            run_autograd(graph, make_inputs(graph), grad_outputs, upcast=True)
            assert len(grads) == sum(getattr(i, "requires_grad", False) for i in graph.inputs)
    assert marked > 30
    # Forward-only generation draws exactly what it drew before the backward switch existed.
    assert not any(generate(seed, GenConfig()).requires_grad for seed in range(30))


def test_grad_seed_round_trips_and_only_float_inputs_require_grad():
    graph = clamp_by_tensors()
    data = graph.to_json()
    assert data["grad_seed"] == 5 and all(i["requires_grad"] for i in data["inputs"])
    assert "grad_seed" not in replace(graph, inputs=tuple(replace(i, requires_grad=False)
                                                          for i in graph.inputs)).to_json()
    bad = json.loads(json.dumps(data))
    bad["inputs"][0]["dtype"] = "int32"
    with pytest.raises(GraphError, match="requires grad"):
        Graph.from_json(bad)
    # The upstream gradient is a function of the seed: a different seed, a different gradient.
    grads = [run_autograd(training(graph, seed=s), make_inputs(graph))[3][0] for s in (5, 5, 6)]
    assert torch.equal(grads[0], grads[1]) and not torch.equal(grads[0], grads[2])


# ---- oracle, reducer and repro on a deliberately wrong backward --------------------------------------
@pytest.mark.slow
def test_wrong_backward_is_caught_reduced_and_reproduced(tmp_path):
    graph = sigmoid_chain()
    fixture = backend_for(WRONG_GRAD)
    result = run_case(graph, fixture)
    assert result.outcome == "mismatch", result
    assert result.signature.stage == "backward-run" and "gradient of input" in result.detail
    # Its forward is right: the same graph with no gradient targets passes.
    assert run_case(training(graph, grad=()), fixture).outcome == "pass"
    case = Case(graph, WRONG_GRAD, outcome=Outcome.MISMATCH, signature=result.signature, detail=result.detail)
    reduced = reduce_case(case, WRONG_GRAD, workers=1)
    assert [n.op for n in reduced.graph.nodes] == ["sigmoid"], reduced.graph.to_json()
    assert [i.requires_grad for i in reduced.graph.inputs] == [True]
    assert run_case(reduced.graph, fixture).signature == result.signature  # still the backward bug
    directory = save_minimized(tmp_path, case, reduced, WRONG_GRAD, verify_runs=1)
    assert load_case(directory / "case.json").verification.status == "reproduces"
    assert "torch.autograd.grad" in (directory / "repro.py").read_text()


def test_a_wrong_forward_shape_in_training_is_a_forward_mismatch():
    """Not the autograd error backward() raises on it: the aot:nvfuser GPU campaign's `_make_grads`
    crashes were forward shape bugs, misfiled as backward-compile crashes."""
    b = GraphBuilder()
    x = b.tensor((3, 4), values=Values(seed=1))
    graph = training(b.build([b.add("amax", b.add("sigmoid", x), dims=[1], keepdim=False)]))
    result = run_case(graph, backend_for("custom:tests.buggy_backends:WrongShapeOnAmax"))
    assert result.outcome == "mismatch", result
    assert (result.signature.stage, result.signature.kind) == ("run", "shape")


@pytest.mark.slow
def test_onednns_0_dim_output_of_shape_1_is_a_forward_mismatch_and_its_repro_says_so(tmp_path):
    """A real instance: aot:onednn (torch 2.13) returns `x * 0.0` of a 0-dim x with shape (1,). The
    regression repro (the full oracle) reports that shape too, instead of crashing in its own
    backward call. (The short repro.py still reaches its backward call and crashes there: open.)"""
    b = GraphBuilder()
    graph = training(b.build([b.add("mul", b.tensor(()), 0.0)]))
    result = run_case(graph, backend_for("aot:onednn"))
    assert result.outcome == "mismatch", result
    assert (result.signature.stage, result.signature.kind) == ("run", "shape")
    case = Case(graph, "aot:onednn", outcome=Outcome.MISMATCH, signature=result.signature, detail=result.detail)
    unreduced = CaseReduction(graph, ReductionStats(), case.signature, case.options)
    directory = save_minimized(tmp_path, case, unreduced, "aot:onednn", verify_runs=1)
    run = subprocess.run([sys.executable, "regression.py"], cwd=directory, capture_output=True, text=True)
    verdict = read_verdict(run.stdout) or {}
    assert run.returncode == 1 and (verdict.get("outcome"), verdict.get("kind")) == ("mismatch", "shape"), \
        run.stdout + run.stderr[-2000:]


def test_drop_requires_grad_pass_and_pinned_values_keep_gradients():
    graph = sigmoid_chain()
    candidates = list(drop_requires_grad(graph))
    assert not candidates[0].requires_grad and len(candidates) == 3
    assert all(cost(c) < cost(graph) for c in candidates)
    # ddmin pins a removed op as an input; a value that carried a gradient stays a gradient target.
    pinned = [g for g in ddmin_ops(graph) if g.size < graph.size]
    assert any(i.requires_grad and i.values.exact for g in pinned for i in g.inputs)
    # In-process: a failure needing the gradient of w only keeps just that target.
    needs_w = lambda gs: [any(i.requires_grad and i.name == "x1" for i in g.inputs) for g in gs]  # noqa: E731
    reduced = reduce(graph, needs_w).graph
    assert [i.name for i in reduced.inputs if i.requires_grad] == ["x1"]


# ---- real fusers -----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend,seed", [("torchscript:nnc", "layernorm_channels_train-float32-channels_last"),
                                          ("aot:nnc", "efficientnet_bn_se_train-float32-channels_last"),
                                          ("aot:onednn", "layernorm_channels_train-float32-contiguous"),
                                          ("inductor", "layernorm_channels_train-bfloat16-channels_last")])
@pytest.mark.slow
def test_training_seed_passes_with_a_fused_backward(backend, seed):
    graph = training_seed_cases()[seed].graph
    # In a worker: it has the backend's environment (Inductor's caches off, so the backward compiles).
    with case_pool(backend, 1, 300) as pool:
        result = judge(backend, run_jobs(pool, [graph_job(0, backend, graph, 300)])[0])
    assert result.outcome == "pass", result
    backward = result.evidence.backward
    assert backward.kernels and backward.fused and not backward.fallback, backward


def test_onednn_autodiff_fails_on_every_training_graph():
    """TorchScript's oneDNN Graph pass breaks autodiff's forward graph ("Schema not found for node
    prim::Return"); aot_autograd's route (above) works."""
    graph = training_seed_cases()["efficientnet_bn_se_train-float32-contiguous"].graph
    result = run_case(graph, backend_for("torchscript:onednn"))
    assert result.outcome == "crash" and "Schema not found" in result.detail, result


@pytest.mark.slow
def test_nnc_drops_gradients_of_tensor_clamp_bounds(tmp_path):
    graph = clamp_by_tensors()
    result = run_case(graph, backend_for("torchscript:nnc"))
    assert result.outcome == "mismatch" and result.signature.stage == "backward-run", result
    assert result.evidence.backward.kernels
    case = Case(graph, "torchscript:nnc", outcome=Outcome.MISMATCH, signature=result.signature, detail=result.detail)
    reduced = reduce_case(case, "torchscript:nnc", workers=2)
    assert {n.op for n in reduced.graph.nodes} >= {"clamp"} and reduced.graph.requires_grad
    directory = save_minimized(tmp_path, case, reduced, "torchscript:nnc", verify_runs=1)
    assert load_case(directory / "case.json").verification.status == "reproduces"
    assert "import fuzzfuse" not in (directory / "repro.py").read_text()


def test_backward_campaign_on_nnc(tmp_path):
    summary = Campaign("torchscript:nnc", tmp_path, seed=7, workers=1, max_cases=40, backward=True,
                       reduce=False).run()
    assert summary["cases"] == 40 and sum(summary["outcomes"].values()) == 40
    assert summary["outcomes"].get("invalid", 0) == 0, summary["outcomes"]
    saved = [c for _, c in iter_cases([tmp_path / "corpus"])]
    assert saved and any(c.graph.requires_grad for c in saved)
    assert any(s["signature"]["stage"].startswith("backward") for s in summary["signatures"]), summary["signatures"]


def test_committed_training_seeds_match_the_generator():
    from pathlib import Path

    corpus = Path(__file__).parent.parent / "corpus"
    cases = training_seed_cases()
    assert len(cases) == 8
    for name, case in cases.items():
        committed = load_case(corpus / f"seed-{name}.json")
        assert committed.graph == case.graph and committed.graph.requires_grad, name
        assert all(i.requires_grad for i in committed.graph.inputs)
