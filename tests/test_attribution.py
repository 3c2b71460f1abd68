"""Attribution on the real fusers (CPU): a failure that TorchScript's frontend shares with the fuser
is filed under the frontend, a fuser's own bug keeps the fuser's name. The graphs are the committed
repros the issue names (minimized/), as data."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fuzzfuse.backends import get_backend
from fuzzfuse.ir import Graph
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.job import run_case

pytestmark = pytest.mark.skipif(not hasattr(torch._C, "_jit_set_texpr_fuser_enabled"), reason="no NNC")


def _zeros(name: str, dtype: str, shape: list[int], **extra) -> dict:
    return {"dtype": dtype, "kind": "tensor", "layout": {"kind": "contiguous"}, "name": name, "shape": shape,
            "values": {"dist": "zeros", "scale": 1.0, "seed": 0, "specials": 0.0}, **extra}


# minimized/torchscript-frontend-mismatch-dtype-bool-681d7399 (first filed as torchscript-nnc-...-affe1301):
# where(x, x, False) returns int64.
PYTHON_FALSE_BECOMES_INT = {"inputs": [_zeros("x0", "bool", [])], "schema": 1, "outputs": ["v0"],
                            "nodes": [{"args": ["x0", "x0", False], "attrs": {}, "name": "v0", "op": "where"}]}
# minimized/torchscript-frontend-crash-runtimeerror-torch-autograd-graph-1baa8237 (first filed under
# torchscript:nnc, 76705eaf): clamp_min's gradient for a broadcast tensor bound is not summed back
# to the input's shape.
CLAMP_GRADIENT_NOT_SUMMED = {
    "grad_seed": 824582771, "schema": 1, "outputs": ["v1"],
    "inputs": [_zeros("x0", "float32", [1, 1]), _zeros("x1", "float32", [2, 3], requires_grad=True)],
    "nodes": [{"args": ["x1"], "attrs": {"correction": 0, "dims": [1], "keepdim": False}, "name": "v0", "op": "var"},
              {"args": ["v0", "x0"], "attrs": {}, "name": "v1", "op": "clamp_min"}]}
# minimized/torchscript-frontend-crash-runtimeerror-torch-autograd-graph-7337738f (first filed under
# torchscript:nnc, 653eb42c): softmax's backward gets a float64 gradient for a bfloat16 output.
SOFTMAX_BACKWARD_DTYPE = {
    "grad_seed": 58006403, "schema": 1, "outputs": ["v1"],
    "inputs": [_zeros("x0", "bfloat16", [1], requires_grad=True), _zeros("x1", "float64", [1])],
    "nodes": [{"args": ["x0"], "attrs": {"dim": 0}, "name": "v0", "op": "softmax"},
              {"args": ["v0", "x1"], "attrs": {}, "name": "v1", "op": "add"}]}

# minimized/torchscript-frontend-mismatch-nan-inf-float-3e8bb7ed (first filed under torchscript:nnc,
# 3f414f1e): the peephole pass drops add(x, 0), so -0.0 stays -0.0 and reciprocal gives -inf. The
# fuser's run names the add as losing the sign; the frontend's run, watched with the add's value
# returned too, keeps the add, and only the unwatched run may be believed.
ADD_ZERO_DROPPED = {"inputs": [{**_zeros("x0", "float32", []), "values": {"dist": "specials", "scale": 1.0,
                                                                         "seed": 1644370654, "specials": 0.0}}],
                    "schema": 1, "outputs": ["v1"],
                    "nodes": [{"args": ["x0", 0], "attrs": {}, "name": "v0", "op": "add"},
                              {"args": ["v0"], "attrs": {}, "name": "v1", "op": "reciprocal"}]}


@pytest.mark.parametrize("graph", [
    pytest.param(ADD_ZERO_DROPPED, id="add-zero-dropped",
                 marks=pytest.mark.upstream_bug("torchscript-frontend-mismatch-nan-inf-float-3e8bb7ed")),
    pytest.param(PYTHON_FALSE_BECOMES_INT, id="python-false-becomes-int",
                 marks=pytest.mark.upstream_bug("torchscript-frontend-mismatch-dtype-bool-681d7399")),
    pytest.param(CLAMP_GRADIENT_NOT_SUMMED, id="clamp-gradient-not-summed",
                 marks=pytest.mark.upstream_bug("torchscript-frontend-crash-runtimeerror-torch-autograd-graph-1baa8237")),
    pytest.param(SOFTMAX_BACKWARD_DTYPE, id="softmax-backward-dtype",
                 marks=pytest.mark.upstream_bug("torchscript-frontend-crash-runtimeerror-torch-autograd-graph-7337738f"))])
@pytest.mark.parametrize("backend", ["torchscript:nnc", "torchscript:onednn"])
def test_a_failure_torchscript_shares_without_the_fuser_is_the_frontends(graph, backend):
    result = run_case(Graph.from_json(graph), get_backend(backend))
    assert result.outcome in ("crash", "mismatch"), result
    assert result.signature.backend == "torchscript:frontend", result.signature
    assert result.attribution.route == "torchscript:frontend"
    assert result.attribution.same_failure is True
    assert "attributed to torchscript:frontend" in result.detail


@pytest.mark.upstream_bug("torchscript-nnc-crash-runtimeerror-662c8eb0")
def test_nncs_integer_round_crash_stays_nncs_because_the_frontend_passes():
    b = GraphBuilder()
    x = b.tensor((3, 4), "int32")
    graph = b.build([b.add("neg", b.add("round", x))])
    result = run_case(graph, get_backend("torchscript:nnc"))
    assert result.outcome == "crash", result
    assert result.signature.backend == "torchscript:nnc"
    attribution = result.attribution
    assert (attribution.route, attribution.outcome, attribution.same_failure) == ("torchscript:frontend", "pass", False)


def test_a_graph_nnc_declines_wholesale_is_unfused_and_not_re_run():
    """maximum and erf are outside NNC's fusible set on CPU: nothing fuses, the outputs agree."""
    b = GraphBuilder()
    x, y = b.tensor((3, 4)), b.tensor((3, 4))
    graph = b.build([b.add("erf", b.add("maximum", x, y))])
    result = run_case(graph, get_backend("torchscript:nnc"))
    assert result.outcome == "unfused" and result.signature.kind == "no-fusion", result
    assert result.attribution is None


def test_a_passing_case_pays_for_no_reference_run():
    b = GraphBuilder()
    x = b.tensor((3, 4))
    graph = b.build([b.add("mul", b.add("exp", x), x)])
    result = run_case(graph, get_backend("torchscript:nnc"))
    assert result.outcome == "pass" and result.fused is True, result
    assert result.attribution is None


@pytest.mark.parametrize("name, route", [("torchscript:nnc", "torchscript:frontend"),
                                         ("torchscript:onednn", "torchscript:frontend"),
                                         ("aot:nnc", "aot:frontend"), ("aot:frontend", "aot:eager"),
                                         ("inductor", "dynamo:aot_eager"), ("dynamo:aot_eager", "dynamo:eager")])
def test_each_route_declares_a_built_in_reference_that_can_run_here(name, route):
    assert get_backend(name).reference_route == route
    assert get_backend(route).name == route


# minimized/aot-eager-mismatch-nan-inf-float-5b864aeb (first filed under aot:onednn, c1b2f539): the
# gradient of pow(gelu(x), y) is inf
# where eager's is NaN, already in aot_autograd's decomposed backward run with the no-op compiler.
DECOMPOSED_POW_GRADIENT = {
    "grad_seed": 321047556, "schema": 1, "outputs": ["v1"],
    "inputs": [{**_zeros("x0", "float32", [2, 1]),
                "values": {"dist": "normal", "scale": 1.0, "seed": 639837485, "specials": 0.0}},
               {**_zeros("x1", "float32", [2, 1], requires_grad=True), "values": {"exact": "AACAP2De+cA="}}],
    "nodes": [{"args": ["x1"], "attrs": {}, "name": "v0", "op": "gelu"},
              {"args": ["v0", "x0"], "attrs": {}, "name": "v1", "op": "pow"}]}


@pytest.mark.upstream_bug("aot-eager-mismatch-nan-inf-float-5b864aeb")
def test_an_aot_failure_the_decomposed_graph_already_has_is_filed_under_aot_eager():
    result = run_case(Graph.from_json(DECOMPOSED_POW_GRADIENT), get_backend("aot:onednn"))
    assert result.outcome == "mismatch", result
    assert result.signature.backend == "aot:eager", result.signature
    chain = result.attribution
    assert (chain.route, chain.same_failure) == ("aot:frontend", True)
    assert (chain.then.route, chain.then.same_failure) == ("aot:eager", True)


# minimized/inductor-mismatch-nan-inf-float-daed7bbd (a form of it; first filed as 078eb419): var over
# a size-1 dim of NaN is 0 under
# Inductor (eager: NaN), seen through logical_not.
INDUCTOR_VAR_OF_NAN = {
    "schema": 1, "outputs": ["v1"],
    "inputs": [{**_zeros("x0", "float32", [1]), "values": {"exact": "AADA/w=="}}],
    "nodes": [{"args": ["x0"], "attrs": {"correction": 0, "dims": [0], "keepdim": False}, "name": "v0", "op": "var"},
              {"args": ["v0"], "attrs": {}, "name": "v1", "op": "logical_not"}]}


@pytest.mark.slow  # 7 s in CI: two Inductor compiles (over the fast budget)
@pytest.mark.upstream_bug("inductor-mismatch-nan-inf-float-daed7bbd")
def test_an_inductor_bug_that_aot_eager_does_not_share_stays_inductors():
    result = run_case(Graph.from_json(INDUCTOR_VAR_OF_NAN), get_backend("inductor"))
    assert result.outcome == "mismatch", result
    assert result.signature.backend == "inductor"
    assert (result.attribution.route, result.attribution.outcome) == ("dynamo:aot_eager", "pass")


# Two backward mismatches the H200 filed under nvFuser (aot:nvfuser), with their recorded signatures:
# prod's backward of a lone nan gives the upstream gradient; sigmoid -> mul's float16 backward is
# rounded between decomposed ops. aot_autograd's own numbers, device-independent.
AOT_NVFUSER_CASES = json.loads((Path(__file__).parent / "data" / "aot_nvfuser_decomposition_mismatches.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("case", AOT_NVFUSER_CASES, ids=[c["repro"] for c in AOT_NVFUSER_CASES])
def test_aot_nvfusers_reference_route_fails_the_way_its_decomposition_mismatches_did(case):
    """aot:nvfuser declares the route its failures are re-run on; on it (CPU, no nvFuser) each of
    the two fails exactly as recorded but for the backend, so a campaign attributes them to
    aot_autograd instead of reporting them as nvFuser's."""
    from fuzzfuse.attribution import _same_failure
    from fuzzfuse.backends.aot_nvfuser import AotNvFuserBackend
    from fuzzfuse.oracle import Signature

    route = get_backend(AotNvFuserBackend.reference_route)
    result = run_case(Graph.from_json(case["graph"]), route)
    assert result.outcome == "mismatch", result
    assert _same_failure(Signature.from_json(case["signature"]), result.signature), result.signature
