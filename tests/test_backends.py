"""The TorchScript and Inductor backends against the real fusers of the installed torch (no mocks).

Compile-stage errors are triggered with real fuser bugs of torch 2.13; should a future torch fix
one, its test skips rather than fails. No real run-stage failure is known for these backends: the
warm-up runs execute the same code with the same inputs as the final run, so nothing asserts it.
"""
import collections

import pytest
import torch

from fuzzfuse.backends import BackendError, Unavailable, get_backend
from fuzzfuse.backends.torchscript import TorchScriptNvFuserBackend
from fuzzfuse.ir import OPS, Layout, make_inputs, run_eager
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.strategies import Features, GenConfig, generate

SCRIPTED = ["torchscript:nnc", "torchscript:onednn"]
POINTWISE = {"unary", "binary", "ternary"}


def _assert_matches_eager(graph, outputs):
    expected, _ = run_eager(graph, make_inputs(graph))
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6, equal_nan=True)


def _pointwise_graph():
    """A chain that both NNC and oneDNN Graph fuse: mul, add, sigmoid, tanh on float32."""
    b = GraphBuilder()
    x, y = b.tensor([4, 5]), b.tensor([4, 5])
    return b.build([b.add("tanh", b.add("sigmoid", b.add("add", b.add("mul", x, y), y)))])


def _staged_error(backend, graph) -> BackendError:
    """The BackendError a known fuser bug raises; skips when this torch no longer has the bug."""
    try:
        backend.run(graph, make_inputs(graph, backend.device))
    except BackendError as e:
        return e
    pytest.skip("this torch build no longer has the bug")


@pytest.fixture(scope="module", params=SCRIPTED)
def scripted(request):
    return get_backend(request.param)


@pytest.fixture(scope="module")
def nnc():
    return get_backend("torchscript:nnc")


def test_pointwise_chain_fuses_and_matches_eager(scripted):
    graph = _pointwise_graph()
    result = scripted.run(graph, make_inputs(graph, scripted.device))
    assert result.fused is True, result.evidence
    assert result.evidence.kernels and not result.evidence.fallback
    assert result.evidence.details["fusion_groups"] >= 1
    _assert_matches_eager(graph, result.outputs)


@pytest.mark.parametrize("ops", [["relu"], ["permute", "reshape"]], ids=["single-op", "views-only"])
def test_unfusable_graph_reports_unfused(scripted, ops):
    b = GraphBuilder()
    v = b.tensor([3, 4])
    attrs = {"relu": {}, "permute": {"dims": [1, 0]}, "reshape": {"shape": [12]}}
    for op in ops:
        v = b.add(op, v, **attrs[op])
    graph = b.build([v])
    result = scripted.run(graph, make_inputs(graph, scripted.device))
    assert result.fused is False
    assert result.evidence.kernels == 0 and result.evidence.details["kernels"] == []
    _assert_matches_eager(graph, result.outputs)


def test_nnc_fuses_reductions(nnc):
    if nnc.device != "cpu":
        pytest.skip("NNC fuses reductions on CPU only")
    b = GraphBuilder()
    x = b.tensor([4, 5])
    e = b.add("exp", x)
    total = b.add("sum", e, dims=[1], keepdim=False)
    graph = b.build([total, b.add("mean", b.add("mul", e, x), dims=[0], keepdim=True)])
    result = nnc.run(graph, make_inputs(graph, nnc.device))
    assert result.fused is True
    assert any("sum" in k or "mean" in k for k in result.evidence.details["kernels"]), result.evidence
    _assert_matches_eager(graph, result.outputs)


def test_odd_inputs_fuse_and_stay_unmodified(nnc):
    """channels_last, expanded (stride 0) and 0-dim tensors, plus a Python scalar argument."""
    b = GraphBuilder()
    x = b.tensor([2, 3, 4, 5], layout="channels_last")
    y = b.tensor([2, 3, 4, 5], layout=Layout("expanded", dims=(0, 2)))
    z = b.tensor([])
    s = b.scalar(0.5)
    graph = b.build([b.add("mul", b.add("add", b.add("mul", x, y), z), s)])
    inputs = make_inputs(graph, nnc.device)
    before = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    result = nnc.run(graph, inputs)
    assert result.fused is True
    _assert_matches_eager(graph, result.outputs)
    for now, then in zip(inputs, before):
        if isinstance(now, torch.Tensor):
            assert torch.equal(now, then)


def test_nnc_compile_failure_is_staged_compile(nnc):
    """NNC cannot lower round() of an integer tensor (CPU: "Invalid integral op_type"; CUDA: NVRTC
    finds round(int) ambiguous); with fallback disabled that surfaces while the group compiles."""
    b = GraphBuilder()
    x = b.tensor([2, 3], "int32")
    graph = b.build([b.add("mul", b.add("round", x), 2)])
    err = _staged_error(nnc, graph)
    assert err.stage == "compile"


def test_onednn_compile_failure_is_staged_compile():
    """The oneDNN Graph pass cannot take clamp with a tensor bound ("IValue is not a Scalar")."""
    b = GraphBuilder()
    v = b.add("abs", b.tensor([2, 2]))
    graph = b.build([b.add("clamp", v, v, v)])
    err = _staged_error(get_backend("torchscript:onednn"), graph)
    assert err.stage == "compile"


def test_torchscript_nvfuser_is_unavailable_with_reason():
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 2) and torch.cuda.is_available():
        pytest.skip("this torch still has TorchScript nvFuser")
    with pytest.raises(Unavailable, match="nvFuser"):
        TorchScriptNvFuserBackend().check_available()


def test_versions_name_torch(scripted):
    assert scripted.versions()["torch"] == torch.__version__


@pytest.mark.slow  # the first Inductor compile of a process: ~3 s warm cache, ~15 s cold
def test_inductor_generates_kernels_and_matches_eager():
    inductor = get_backend("inductor")
    graph = _pointwise_graph()
    result = inductor.run(graph, make_inputs(graph, inductor.device))
    assert result.fused is True and result.evidence.kernels >= 1
    assert result.compile_seconds > 0
    _assert_matches_eager(graph, result.outputs)


def test_inductor_views_only_generates_no_kernel():
    inductor = get_backend("inductor")
    b = GraphBuilder()
    graph = b.build([b.add("permute", b.tensor([3, 4]), dims=[1, 0])])
    result = inductor.run(graph, make_inputs(graph, inductor.device))
    assert result.fused is False and result.evidence.kernels == 0


def _sweep(backend, features: Features, seeds: int = 100):
    """Run generated graphs; count outcomes, and (fused?) among graphs with >= 2 pointwise ops."""
    counts, pointwise = collections.Counter(), collections.Counter()
    for seed in range(seeds):
        graph = generate(seed, GenConfig(features=features, shapes=backend.shapes))
        try:
            result = backend.run(graph, make_inputs(graph, backend.device))
        except BackendError as e:
            counts[f"error-{e.stage}"] += 1
            continue
        counts["fused" if result.fused else "unfused"] += 1
        if sum(OPS[n.op].kind in POINTWISE for n in graph.nodes) >= 2:
            pointwise[result.fused] += 1
    return counts, pointwise


@pytest.mark.slow
def test_nnc_sweep_fuses_most_float32_pointwise_graphs(nnc):
    counts, pointwise = _sweep(nnc, Features(dtypes=("float32",)))
    print(f"\nNNC sweep (float32): {dict(counts)}; >=2 pointwise ops, fused: {dict(pointwise)}")
    assert sum(counts.values()) == 100
    assert pointwise[True] > pointwise[False], (counts, pointwise)


@pytest.mark.slow
def test_nnc_sweep_over_all_features_runs(nnc):
    """Every generated graph either runs (fused or not) or fails with a staged BackendError."""
    counts, pointwise = _sweep(nnc, Features())
    print(f"\nNNC sweep (all features): {dict(counts)}; >=2 pointwise ops, fused: {dict(pointwise)}")
    assert counts["fused"] > 0 and sum(counts.values()) == 100

