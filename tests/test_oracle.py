"""The oracle: rounding noise that eager itself shows is never reported; real divergence is; one
bug gives one signature."""
import math
from pathlib import Path

import pytest
import torch

from fuzzfuse.oracle import compare_output, cpp_location, exception_signature, normalize, python_location

NVFUSER_ERROR_A = """INTERNAL ASSERT FAILED at /workspace/Fuser/csrc/expr_evaluator.cpp:443, please report a bug with repro script to NVFuser at https://github.com/NVIDIA/Fuser/issues.
Expected T12_l_float[iS4{i3}] to be bound, size: 5, address 0x7f3a2c001234
Exception raised from handlePropagateError at /workspace/Fuser/csrc/expr_evaluator.cpp:443 (most recent call first):"""
NVFUSER_ERROR_B = NVFUSER_ERROR_A.replace("T12_l_float[iS4{i3}]", "T7_g_half[iS9{i11}]").replace(
    "size: 5", "size: 1025").replace("0x7f3a2c001234", "0x55aa00ff")


def test_same_bug_same_signature_across_names_numbers_addresses():
    a = exception_signature("nvfuser", "run", "RuntimeError", NVFUSER_ERROR_A)
    b = exception_signature("nvfuser", "run", "RuntimeError", NVFUSER_ERROR_B)
    assert a == b
    assert a.location == "csrc/expr_evaluator.cpp:443"
    assert "T12" not in a.message and "0x" not in a.message and "443" not in a.message


def test_nvfuser_iter_domains_and_frames_are_normalized():
    a = ("Expected squeeze_expanded || !id->hasExpandedExtent() . Refusing to squeeze expanded IterDomain "
         "bS103{1 ex i1}. Exception raised from squeeze at /workspace/Fuser/csrc/ops/alias.cpp:333")
    b = a.replace("bS103{1 ex i1}", "bS2{1 ex 7}")
    assert exception_signature("nvfuser", "compile", "RuntimeError", a) == \
        exception_signature("nvfuser", "compile", "RuntimeError", b)
    framed = ("shape '[2, -1]' is invalid for input of size 3\nException raised from infer_size_impl at "
              "/pytorch/aten/src/ATen/InferSize.h:99 (most recent call first):\nframe #0: c10::Error::Error("
              "c10::SourceLocation) + 0x98 (0x7f in libc10.so)")
    sig = exception_signature("nvfuser", "run", "RuntimeError", framed)
    assert sig.message == "shape 'S' is invalid for input of size N" and sig.location == "aten/src/ATen/InferSize.h:99"


def test_temporaries_of_generated_code_are_normalized():
    """Triton names the loop-carried variable after the kernel's op count: a reducer that removed an
    op changed `_tmp11` to `_tmp8`, read it as another failure, and kept an identity op it needed not."""
    said = ("Triton compile error: AssertionError: Loop-carried variable {} has initial type <['2', '2'], uint8> but "
            "is re-assigned to <['2', '2'], int32> in loop!")
    a, b = (exception_signature("inductor", "compile", "InductorError", said.format(t)) for t in ("_tmp11", "_tmp8"))
    assert a == b and "_tmpN" in a.message
    assert normalize("error: 'tmp3' was not declared") == normalize("error: 'tmp12' was not declared")


def test_one_bug_at_different_ranks_is_one_signature():
    """The oneDNN backward campaign counted one expand bug about 15 times, once per rank."""
    def expand(shape, size):
        return exception_signature("aot:onednn", "backward-run", "RuntimeError",
                                   f"expand(torch.FloatTensor{{{shape}}}, size={size}): the number of sizes provided "
                                   f"({len(size)}) must be greater or equal to the number of dimensions in the tensor")
    assert expand([2, 3, 4, 5], [3, 4, 5]) == expand([7, 1], [1])
    assert "{[N...]}, size=[N...])" in expand([2, 3], [3]).message
    assert normalize("at (1, 2) and (3,)") == "at (N...) and (N,)"  # a 1-tuple is not a list of sizes


def test_different_assert_or_stage_gives_different_signature():
    a = exception_signature("nvfuser", "run", "RuntimeError", NVFUSER_ERROR_A)
    other = NVFUSER_ERROR_A.replace("expr_evaluator.cpp:443", "scheduler/utils.cpp:101")
    assert exception_signature("nvfuser", "run", "RuntimeError", other) != a
    assert exception_signature("nvfuser", "compile", "RuntimeError", NVFUSER_ERROR_A) != a
    assert a.slug().startswith("nvfuser-crash-runtimeerror-csrc-expr-evaluator-cpp-443-")


def test_python_and_cpp_locations():
    tb = ('Traceback (most recent call last):\n  File "/x/site-packages/torch/_inductor/lowering.py", line 10, in '
          'make_reduction\n  File "/x/site-packages/torch/_inductor/ir.py", line 99, in create\nAssertionError')
    assert python_location(tb) == "torch/_inductor/ir.py:create"


def test_python_location_reads_paths_from_site_packages_on():
    """The H200's torch lives in /opt/torch/.venv: its sympy and triton frames are not torch's."""
    venv = "/opt/torch/.venv/lib/python3.12/site-packages"
    tb = (f'Traceback (most recent call last):\n  File "{venv}/torch/_inductor/sizevars.py", line 9, in simplify\n'
          f'    x\n  File "{venv}/sympy/functions/elementary/miscellaneous.py", line 7, in _new_args_filter\n'
          f'    raise ValueError\nValueError: The argument is not comparable.')
    assert python_location(tb) == "torch/_inductor/sizevars.py:simplify"
    assert python_location(tb.replace(venv, "/usr/lib/python3/dist-packages")) == "torch/_inductor/sizevars.py:simplify"
    checkout = 'Traceback (most recent call last):\n  File "/home/me/pytorch/torch/fx/graph.py", line 3, in lint\nX: y'
    assert python_location(checkout) == "torch/fx/graph.py:lint"
    assert python_location(f'  File "{venv}/triton/compiler/compiler.py", line 1, in make_ir\n') == ""
    assert cpp_location("Exception raised from run at /pytorch/torch/csrc/jit/tensorexpr/eval.cpp:1234") \
        == "csrc/jit/tensorexpr/eval.cpp:1234"
    assert cpp_location('!failed INTERNAL ASSERT FAILED at "/pytorch/torch/csrc/jit/codegen/onednn/graph_helper.cpp":'
                        '261, please report a bug') == "csrc/jit/codegen/onednn/graph_helper.cpp:261"
    assert normalize("shape '[2, 3]' is invalid for input of size 7 at v3") == "shape 'S' is invalid for input of size N at V"


def _triple(x16: torch.Tensor, fn):
    eager = fn(x16)
    upcast = fn(x16.float()).half()  # how nvFuser and Inductor compute half: in fp32, rounded once
    ref = fn(x16.double())
    return upcast, eager, ref


def test_half_rounding_noise_is_not_reported():
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)).half()
    fused, eager, ref = _triple(x, lambda t: t.exp() * t.sigmoid() + t)
    assert not torch.equal(fused, eager)  # they do differ...
    assert compare_output(0, fused, eager, ref) is None  # ...but only by rounding
    fused, eager, ref = _triple(x.reshape(64, 64), lambda t: (t.exp() * t.sigmoid() + t).sum(0, keepdim=True))
    assert compare_output(0, fused, eager, ref, reduced=64) is None


def test_wrong_values_are_reported():
    x = torch.randn(64, generator=torch.Generator().manual_seed(1))
    eager, ref = x.exp(), x.double().exp()
    m = compare_output(0, eager * 1.001, eager, ref)
    assert m is not None and m.kind == "values" and m.dtype_class == "float"
    one_element = eager.clone()
    one_element[5] += 0.5
    assert compare_output(0, one_element, eager, ref).kind == "values"


def test_nan_positions_dtype_and_shape():
    x = torch.randn(16, generator=torch.Generator().manual_seed(2))
    eager, ref = x.sigmoid(), x.double().sigmoid()
    nan = eager.clone()
    nan[3] = float("nan")
    assert compare_output(0, nan, eager, ref).kind == "nan-inf"
    assert compare_output(0, eager.double(), eager, ref).kind == "dtype"
    assert compare_output(0, eager[:8], eager, ref).kind == "shape"
    # Eager overflows in half where fp64 does not: a fuser computing in fp32 is right, not wrong.
    big = torch.tensor([60000.0, 1.0], dtype=torch.float16)
    eager16, ref64, fused = big * 2 / 4, big.double() * 2 / 4, (big.float() * 2 / 4).half()
    assert torch.isinf(eager16[0]) and not torch.isinf(fused[0])
    assert compare_output(0, fused, eager16, ref64) is None


def test_discrete_outputs_at_rounding_boundaries_are_excused():
    a = torch.tensor([0.1, 0.7, 2.0], dtype=torch.float32)
    eager = (a * 3) > 0.3  # float32 rounding decides element 0
    ref = (a.double() * 3) > 0.3
    fused = eager.clone()
    fused[0] = ref[0] if eager[0] != ref[0] else ~eager[0]
    verdict = compare_output(0, fused, eager, ref)
    assert verdict is None or verdict.kind == "values"
    wrong = eager.clone()
    wrong[2] = ~wrong[2]  # 6.0 > 0.3 is not a rounding question
    assert compare_output(0, wrong, eager, ref).kind == "values"
    ints = torch.tensor([1, 2, 3])
    assert compare_output(0, ints + 1, ints, ints.double()).dtype_class == "int"


def test_strides_checked_only_on_request():
    x = torch.randn(2, 3, 4, 5)
    cl = x.contiguous(memory_format=torch.channels_last)
    assert compare_output(0, x.clone(), cl, cl.double()) is None
    assert compare_output(0, x.clone(), cl, cl.double(), check_strides=True).kind == "strides"


def test_an_empty_output_has_no_strides_to_compare():
    """Seen in a CPU Inductor campaign: neg -> a slice of size 0 -> x[None] 'returned the wrong
    strides'; no element sits where a stride would place it."""
    empty = torch.zeros(1, 1, 1, 2, 0)
    other = torch.empty_strided(empty.shape, (5, 5, 5, 3, 1))
    assert empty.stride() != other.stride()
    assert compare_output(0, other, empty, empty.double(), check_strides=True) is None


def test_an_empty_error_message_is_named_by_the_op_torchscript_points_at():
    """NNC raises some errors with no message: the op under TorchScript's "<--- HERE" keeps two
    such failures apart (the text is from a real aot:nnc crash)."""
    def message(op: str) -> str:
        return ("The following operation failed in the TorchScript interpreter.\n"
                "Traceback of TorchScript (most recent call last):\n"
                '  File "<eval_with_key>.17525", line 15, in forward\n'
                "    mul = torch.ops.aten.mul(alias_1, log);  alias_1 = log = None\n"
                f"    {op} = torch.ops.aten.{op}(logical_and, scalar_tensor, mul);  logical_and = None\n"
                "            ~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
                "    return (pow_1, where)\n"
                "RuntimeError: \n")
    assert normalize(message("where")) == "RuntimeError: (in aten.where)"
    assert normalize(message("lerp")) == "RuntimeError: (in aten.lerp)"
    assert normalize("RuntimeError: Invalid integral op_type: 23") == "RuntimeError: Invalid integral op_type: N"


def test_an_nvrtc_message_is_a_fixed_point_of_the_normalizer():
    """Committed signatures are checked to be fixed points (so that --known matches them): the
    NVRTC headline keeps its function and the types of the call, and loses its quotes, file and
    line."""
    log = ('INTERNAL ASSERT FAILED at /workspace/Fuser/csrc/runtime/compiled_kernel.cpp:187, please report a bug.\n'
           '// Codegen generated code\n__global__ void kernel() {}\n\n'
           'CUDA NVRTC compile error: __tmp_nvfuser_reduction_f0_c1_r0_g2.cu(8551): error: no instance of '
           'overloaded function "fmax" matches the argument list\n            argument types are: (nvf::__half, '
           'nvf::__half)\n\nException raised from invoke at /workspace/Fuser/csrc/runtime/compiled_kernel.cpp:187')
    message = normalize(log)
    assert message == ("CUDA NVRTC compile error: no instance of overloaded function fmax matches the argument list "
                       "[nvf::__half, nvf::__half]")
    assert normalize(message) == message
    assert cpp_location(log) == "csrc/runtime/compiled_kernel.cpp:187"


# ---- order-dependent reductions: kept out of the bug set (docs/documented-differences.md) ----------
from fuzzfuse.ir.builder import GraphBuilder  # noqa: E402
from fuzzfuse.ir.graph import Values  # noqa: E402
from fuzzfuse.ir.interp import run_eager  # noqa: E402
from fuzzfuse.ir.types import DTYPES  # noqa: E402
from fuzzfuse.ir.values import encode_exact, make_inputs  # noqa: E402
from fuzzfuse.verdict import Outcome  # noqa: E402


def _reduction_graph(op: str, values: list, **attrs):
    b = GraphBuilder()
    x = b.tensor((len(values),), "float32", values=Values(exact=encode_exact(torch.tensor(values))))
    return b.build([b.add(op, x, **attrs)])


def _sequential(op: str, values: list) -> float:
    """The same reduction in float32, term by term in the given order: one order a fuser may pick."""
    acc = torch.tensor(values[0], dtype=torch.float32)
    for v in values[1:]:
        acc = acc + v if op == "sum" else acc * v
    return acc.item()


@pytest.mark.parametrize("op, values, attrs", [
    ("sum", [3.3895e38, 1.0, 1.0, -3.3895e38, 1.0, 1.0], {"dims": (0,), "keepdim": False}),  # cancellation
    ("sum", [3.4e38, 3.4e38, -3.4e38, -3.4e38], {"dims": (0,), "keepdim": False}),  # overflow in one order
    ("mean", [math.inf, -3e38, -3e38], {"dims": (0,), "keepdim": False}),  # -inf + inf = nan in one order
    ("prod", [3e37, 3e37, 1e-37], {"dim": 0, "keepdim": False}),  # partial product overflows
])
def test_order_dependent_reductions_compare_only_their_type(op, values, attrs):
    """Two orders of the same float32 reduction disagree beyond any tolerance (shown by computing
    both), so neither is a bug: the output is tainted, and a fuser's value from the other order is
    a documented difference (counted, not reported)."""
    graph = _reduction_graph(op, values, **attrs)
    inputs = make_inputs(graph)
    (eager,), tainted = run_eager(graph, inputs)
    seq = "sum" if op in ("sum", "mean") else "prod"
    forward, backward = _sequential(seq, values), _sequential(seq, values[::-1])
    assert not (forward == backward or (math.isnan(forward) and math.isnan(backward)))
    assert tainted == {graph.outputs[0]: "reduction-order"}
    # and a fused value from the other order is then not a mismatch where the job judges outputs
    from fuzzfuse.job import _judge_outputs
    from fuzzfuse.backends.eager import EagerBackend
    from fuzzfuse.backends.base import RunResult
    scale = len(values) if op == "mean" else 1
    differs = [v / scale for v in (forward, backward) if not torch.equal(torch.tensor(v / scale), eager.cpu())]
    other = torch.tensor(differs[0], dtype=torch.float32)  # the order eager did not take
    result = RunResult(outputs=[other])
    ref64, _ = run_eager(graph, inputs, upcast=True)
    verdict = _judge_outputs(graph, graph.infer_types(), EagerBackend(), result, [eager], ref64, tainted, False)
    untainted = _judge_outputs(graph, graph.infer_types(), EagerBackend(), result, [eager], ref64, {}, False)
    # Where the value alone would be reported, it is a documented difference instead; where the
    # oracle already lets it through (eager's own value disagrees with float64), it stays a pass.
    if untainted is None:
        assert verdict is None
    else:
        assert untainted.outcome == Outcome.MISMATCH
        assert verdict.outcome == Outcome.DOCUMENTED and verdict.signature.kind == "reduction-order"


def test_the_running_mean_of_an_infinite_term_depends_on_the_algorithm_and_an_ordinary_one_is_judged():
    """The H200's var_mean over [2.25, -1.08, -inf, -0.2, 0.8]: eager's Welford mean is nan (float64
    too: -inf, then a finite term, gives -inf + inf), a two-pass mean -inf (nvFuser's, torch.mean's).
    Both are what their algorithm gives, so only the type is compared; without an infinity the
    mean is judged."""
    values = [2.2483248710632324, -1.075045108795166, -math.inf, -0.20050707459449768, 0.8039999008178711]
    graph = _reduction_graph("var_mean", values, dims=(0,), keepdim=True, correction=0, output="mean")
    (eager,), tainted = run_eager(graph, make_inputs(graph))
    assert math.isnan(eager.item()) and torch.tensor(values).mean().item() == -math.inf
    assert tainted == {graph.outputs[0]: "reduction-order"}
    finite = _reduction_graph("var_mean", [v if math.isfinite(v) else 1.0 for v in values], dims=(0,),
                              keepdim=True, correction=0, output="mean")
    assert run_eager(finite, make_inputs(finite))[1] == {}


def test_int32_overflow_is_undefined_behaviour_and_ordinary_int32_math_is_judged():
    """neg of INT32_MIN wraps in eager; nvFuser computed it wider (the H200's neg -> atan2 gave 0
    against eager's pi): signed overflow is undefined in C++, so only the type is compared."""
    def graph_of(op, dtype, values, *more):
        b = GraphBuilder()
        x = b.tensor((len(values),), dtype, values=Values(exact=encode_exact(torch.tensor(values, dtype=DTYPES[dtype]))))
        return b.build([b.add(op, x, *more)])
    for graph in (graph_of("neg", "int32", [-2**31, 5]), graph_of("abs", "int32", [-2**31]),
                  graph_of("add", "int32", [2**31 - 1], 1)):
        assert run_eager(graph, make_inputs(graph))[1] == {graph.outputs[0]: "undefined-behaviour"}, graph
    for graph in (graph_of("neg", "int32", [-2**31 + 1, 7]), graph_of("add", "int32", [2**30], 2**30 - 1),
                  graph_of("sub", "uint8", [0], 1)):  # unsigned wraparound is defined
        assert run_eager(graph, make_inputs(graph))[1] == {}, graph


def test_signed_overflow_of_every_width_is_undefined_behaviour_and_unsigned_wrap_is_judged():
    """A CPU Inductor campaign reported add(x, x) -> argmax of int64 [[INT64_MAX, 1]] as a new bug:
    signed int64 overflow is as undefined in C++ as int32's. So is int8's and int16's: NNC keeps
    sub(x, -1) of an int8 127 in a wider register and compares 128 where eager's int8 wrapped to
    -128, Inductor negates an int16 -32768 to 32768; a fuser may compute any of them wider. Values
    that do not overflow, and unsigned wraparound (defined), stay judged."""
    def graph_of(op, input_dtype, values, *more, **attrs):
        b = GraphBuilder()
        x = b.tensor((len(values),), input_dtype,
                     values=Values(exact=encode_exact(torch.tensor(values, dtype=DTYPES[input_dtype]))))
        return b.build([b.add(op, x, *more, **attrs)])
    for graph in (graph_of("add", "int64", [2**63 - 1, 1], 1), graph_of("neg", "int64", [-2**63, 3]),
                  graph_of("neg", "int16", [-2**15, 3]), graph_of("add", "int8", [127], 1),
                  graph_of("sub", "int8", [127], -1), graph_of("abs", "int16", [-2**15])):
        assert run_eager(graph, make_inputs(graph))[1] == {graph.outputs[0]: "undefined-behaviour"}, graph
    for graph in (graph_of("add", "int64", [2**61, 5], 2**61), graph_of("neg", "int16", [-2**15 + 1, 3]),
                  graph_of("add", "int8", [126], 1), graph_of("sub", "uint8", [0], 1),
                  graph_of("cast", "int16", [300], dtype="int8")):  # a narrowing cast is modular: defined
        assert run_eager(graph, make_inputs(graph))[1] == {}, graph


def test_the_sign_of_a_sum_of_zeros_is_the_accumulators_choice():
    """Seen on the H200: rsqrt(sum([-0.])) is inf in eager (its sum starts from +0) and -inf in
    nvFuser (-0, the only term). Both identities are IEEE sums of the same terms, so the sum is
    tainted and the fused -inf downstream a documented difference; a sum with a nonzero term is not."""
    assert math.copysign(1, (torch.tensor(0.0) + -0.0).item()) == 1  # identity +0: +0
    assert math.copysign(1, (torch.tensor(-0.0) + -0.0).item()) == -1  # identity -0: -0
    b = GraphBuilder()
    x = b.tensor((1,), "float32", values=Values(exact=encode_exact(torch.tensor([-0.0]))))
    graph = b.build([b.add("rsqrt", b.add("sum", x, dims=(0,), keepdim=True))])
    inputs = make_inputs(graph)
    (eager,), tainted = run_eager(graph, inputs)
    assert tainted == {graph.outputs[0]: "reduction-order"}
    from fuzzfuse.job import _judge_outputs
    from fuzzfuse.backends.eager import EagerBackend
    from fuzzfuse.backends.base import RunResult
    ref64, _ = run_eager(graph, inputs, upcast=True)
    result = RunResult(outputs=[-eager])  # the other identity's zero, through rsqrt
    assert _judge_outputs(graph, graph.infer_types(), EagerBackend(), result, [eager], ref64, {}, False).outcome \
        == Outcome.MISMATCH
    verdict = _judge_outputs(graph, graph.infer_types(), EagerBackend(), result, [eager], ref64, tainted, False)
    assert verdict.outcome == Outcome.DOCUMENTED and verdict.signature.kind == "reduction-order"
    ordinary = _reduction_graph("sum", [-0.0, 1e-30], dims=(0,), keepdim=False)
    assert run_eager(ordinary, make_inputs(ordinary))[1] == {}


@pytest.mark.parametrize("op, values, attrs", [
    ("sum", [1.0, -1.0], {"dims": (0,), "keepdim": False}),  # exact in any order
    ("sum", [float(v) for v in torch.randn(4096, generator=torch.Generator().manual_seed(0))],
     {"dims": (0,), "keepdim": False}),
    ("var", [1e3, 1e3 + 1, 1e3 - 1, 1e3], {"dims": (0,), "keepdim": False, "correction": 1}),
    ("prod", [2.0, -0.5, 3.0, 1e-3], {"dim": 0, "keepdim": False}),
    ("amax", [3.4e38, 3.4e38, -3.4e38], {"dims": (0,), "keepdim": False}),  # exact: no order
])
def test_ordinary_reductions_are_judged(op, values, attrs):
    graph = _reduction_graph(op, values, **attrs)
    _, tainted = run_eager(graph, make_inputs(graph))
    assert tainted == {}


def _tan_of_an_amplified_sum(seed: int):
    """tan(sum(x, 1) * 3e5) over 40 float32 terms a row: one float32 ulp of a row's sum moves the
    tangent's argument by about 0.14 rad, so the order the terms are summed in decides the output."""
    b = GraphBuilder()
    x = b.tensor((4, 40), values=Values(seed=seed))
    return b.build([b.add("tan", b.add("mul", b.add("sum", x, dims=[1], keepdim=False), 3e5))])


def _judged(graph, fused: list, rounded: bool):
    from fuzzfuse.backends.base import RunResult
    from fuzzfuse.backends.eager import EagerBackend
    from fuzzfuse.job import _judge_outputs, rounding_runs

    inputs = make_inputs(graph)
    eager, _ = run_eager(graph, inputs)
    ref64, _ = run_eager(graph, inputs, upcast=True)
    runs = (lambda: rounding_runs(graph, inputs, eager)) if rounded else None
    return _judge_outputs(graph, graph.infer_types(), EagerBackend(), RunResult(outputs=fused), eager, ref64, {},
                          False, rounded=runs)


def test_a_sum_in_another_order_that_float32_cannot_decide_is_ill_conditioned():
    """The same float32 terms summed in the reverse order (real float32 arithmetic, as a fuser's
    vectorized order sums them) differ from eager's sum by ulps, which tan amplifies: the plain
    oracle reports some of these rows as wrong values; runs that round and order the sum other
    ways than eager land as far from float64, so they are the documented ill-conditioning."""
    flagged, classified = [], []
    for seed in range(100):
        graph = _tan_of_an_amplified_sum(seed)
        x = make_inputs(graph)[0]
        other_order = [torch.tan(x.flip(1).sum(1) * 3e5)]
        plain = _judged(graph, other_order, rounded=False)
        if plain is None:
            continue
        assert plain.outcome == Outcome.MISMATCH and plain.signature.kind == "values"
        flagged.append(seed)
        judged = _judged(graph, other_order, rounded=True)
        assert judged.outcome in (Outcome.MISMATCH, Outcome.DOCUMENTED)
        if judged.outcome == Outcome.DOCUMENTED:
            assert judged.signature.kind == "ill-conditioned"
            classified.append(seed)
    assert len(flagged) >= 5, flagged
    assert len(classified) >= 0.8 * len(flagged), (flagged, classified)


def test_a_libm_result_an_ulp_off_the_nearest_then_amplified_is_ill_conditioned():
    """A 10-minute H100 campaign keyed pow(pow(x, x), y) as Inductor CUDA's pow bug: Triton's
    float32 pow(1.19e-7, 1.19e-7) is an ulp below the nearest float32 (eager CUDA's), and
    pow(., 10000) makes it 0.98052 where eager gives 0.98111 and float64 0.98118. Another math
    library may round so (CUDA documents powf within 4 ulps): ill-conditioned. An exact libm result
    (pow(1.5, 2)) is never moved, and a value far from any rounding stays wrong."""
    b = GraphBuilder()
    x = b.tensor((2,), "float32", values=Values(exact=encode_exact(torch.tensor([1.1920928955078125e-07, 1.5]))))
    y = b.tensor((2,), "float32", values=Values(exact=encode_exact(torch.tensor([10000.0, 2.0]))))
    graph = b.build([b.add("pow", b.add("pow", x, x), y)])
    eager, _ = run_eager(graph, make_inputs(graph))
    assert abs(eager[0][0].item() - 0.981107) < 1e-6
    fused = eager[0].clone()
    fused[0] = 0.9805225729942322
    judged = _judged(graph, [fused], rounded=True)
    assert judged.outcome == Outcome.DOCUMENTED and judged.signature.kind == "ill-conditioned", judged.detail
    fused[1] = eager[0][1] * 1.001  # pow(pow(1.5, 1.5), 2) = 3.375, well off
    assert _judged(graph, [fused], rounded=True).outcome == Outcome.MISMATCH


def test_a_wrong_value_no_rounding_explains_stays_a_mismatch():
    """The H200's Inductor gives 2^127 for pow(7.58e-39, -1) (once committed as a60c841b: Triton's
    flush of the subnormal base, which the oracle's unflushed run now shows), where eager and
    float64 give 1.319e38; and a fused exp of a sum 1% off. Runs that round other ways than
    eager stay within ulps of both, so each is still reported."""
    b = GraphBuilder()
    e = b.tensor((2,), "int32", values=Values(exact=encode_exact(torch.tensor([0, -1], dtype=torch.int32))))
    x = b.tensor((2,), "float32", values=Values(exact=encode_exact(
        torch.tensor([6.672267223599509e-39, 7.581529159444417e-39]))))
    power = b.build([b.add("pow", x, e)])
    judged = _judged(power, [torch.tensor([1.0, 1.7014118e38])], rounded=True)
    assert judged.outcome == Outcome.MISMATCH and judged.signature.kind == "values"
    b = GraphBuilder()
    exp_sum = b.build([b.add("exp", b.add("sum", b.tensor((4, 40), values=Values(seed=1)), dims=[1], keepdim=False))])
    eager, _ = run_eager(exp_sum, make_inputs(exp_sum))
    judged = _judged(exp_sum, [eager[0] * 1.01], rounded=True)
    assert judged.outcome == Outcome.MISMATCH and judged.signature.kind == "values"


def test_an_infinity_one_ulp_decides_is_ill_conditioned_on_a_real_fuser():
    """A 300-s NNC campaign (2026-12-03) reported tanh -> eq(v, x) -> log2 as new: NNC's tanh of
    -0.00050034304 is x itself, 0.72 ulp from float64 (eager's is the neighbour, 0.28 ulp), so eq
    is True and log2 gives 0 where eager gives -inf. Runs that round tanh the other way give 0
    too: an infinity one ulp decides is as ill-conditioned as a value it decides."""
    from fuzzfuse.backends import Unavailable, get_backend
    from fuzzfuse.job import run_case

    try:
        nnc = get_backend("torchscript:nnc")
    except Unavailable as e:
        pytest.skip(str(e))
    b = GraphBuilder()
    x = b.tensor((2,), "float32", values=Values(exact=encode_exact(torch.tensor([-0.0005003430414944887, 0.5]))))
    graph = b.build([b.add("log2", b.add("eq", b.add("tanh", x), x))])
    judged = run_case(graph, nnc)
    assert judged.outcome == Outcome.DOCUMENTED and judged.signature.kind == "ill-conditioned", judged.detail
    # far from any rounding: eq(x, x) -> log2 is 0 everywhere, and a fused -inf there is wrong
    fused_wrong = _judged(b.build([b.add("log2", b.add("eq", x, x))]), [torch.tensor([0.0, -math.inf])], rounded=True)
    assert fused_wrong.outcome == Outcome.MISMATCH and fused_wrong.signature.kind == "nan-inf"


def test_a_run_that_rounds_other_ways_computes_an_op_its_dtype_defines_in_that_dtype():
    """nextafter(inf, 1) in bfloat16 is its largest finite value: computed in float64 and rounded
    up, it would be inf, and Inductor CPU's inf (minimized/...-3994f8c3, a real bug: it computes
    bfloat16's nextafter in float32) would pass as ill-conditioned."""
    from fuzzfuse.job import rounding_runs

    b = GraphBuilder()
    x = b.tensor((1,), "bfloat16", values=Values(exact=encode_exact(torch.tensor([math.inf], dtype=torch.bfloat16))))
    y = b.tensor((1,), "bfloat16", values=Values(exact=encode_exact(torch.tensor([1.0], dtype=torch.bfloat16))))
    graph = b.build([b.add("nextafter", x, y)])
    inputs = make_inputs(graph)
    eager, _ = run_eager(graph, inputs)
    assert eager[0].item() == torch.finfo(torch.bfloat16).max
    assert {r[0].item() for r in rounding_runs(graph, inputs, eager)} == {eager[0].item()}
    judged = _judged(graph, [torch.tensor([math.inf], dtype=torch.bfloat16)], rounded=True)
    assert judged.outcome == Outcome.MISMATCH, judged.detail


def test_positions_that_overflow_in_some_order_of_evaluation_are_found_and_only_they():
    """x1 - x0 * x0 of float64 3.6e307 and inf: eager's product overflows and the result is nan,
    an fma (nvFuser's on the H200) gives inf; lerp's (end - start) * (1 - w) overflows where
    eager's fma does not; a matmul term past float32's range. Ordinary positions stay judged."""
    from fuzzfuse.ir.graph import Graph, Node, TensorInput
    from fuzzfuse.ir.interp import order_dependent_positions
    from fuzzfuse.job import only_where
    fma = Graph((TensorInput("x0", (2,), "float64"), TensorInput("x1", (2,), "float32")),
                (Node("p", "mul", ("x0", "x0")), Node("d", "sub", ("x1", "p")), Node("n", "neg", ("d",))), ("n",))
    x0, x1 = torch.tensor([3.5953862697246315e+307, 2.0], dtype=torch.float64), torch.tensor([math.inf, 1.0])
    masks = order_dependent_positions(fma, [x0, x1])
    assert masks["n"].tolist() == [True, False] and "p" not in masks
    eager = torch.tensor([math.nan, 3.0], dtype=torch.float64)
    assert only_where(torch.tensor([-math.inf, 3.0], dtype=torch.float64), eager, masks["n"])
    assert not only_where(torch.tensor([-math.inf, 2.0], dtype=torch.float64), eager, masks["n"])
    lerp = Graph((TensorInput("s", (3,), "float32"), TensorInput("e", (3,), "float32")),
                 (Node("l", "lerp", ("s", "e", -1.0)),), ("l",))
    masks = order_dependent_positions(lerp, [torch.zeros(3), torch.tensor([-3.4e38, 1.0, -2.5])])
    assert masks["l"].tolist() == [True, False, False]
    mm = Graph((TensorInput("a", (2, 2), "float32"), TensorInput("b", (2, 3), "float32")),
               (Node("m", "matmul", ("a", "b")),), ("m",))
    a, b = torch.tensor([[3e38, 0.0], [1.0, 1.0]]), torch.tensor([[2.0, 0.5, 0.0], [1.0, 1.0, 1.0]])
    assert order_dependent_positions(mm, [a, b])["m"].tolist() == [[True, False, False], [False, False, False]]
    ordinary = Graph((TensorInput("a", (2, 2), "float32"),), (Node("m", "matmul", ("a", "a")),), ("m",))
    assert order_dependent_positions(ordinary, [torch.ones(2, 2)]) == {}


@pytest.mark.parametrize("case", ["nnc-addcmul-overflow-order.json", "nnc-addcmul-cat-overflow-order.json"])
def test_nnc_addcmul_overflowing_where_eagers_fma_does_not_is_an_evaluation_order_difference(case):
    """Real NNC on CPU: addcmul(x1, x1, x0) of 1.7e38 and -2.5 then neg is inf, eager's fmadd
    keeps 2.55e38 (a repro once committed as NNC's bug, e9a836df): x1 + x1 * x0 without an fma
    is IEEE's own answer. Documented as evaluation order, never reported; also where a cat then
    moves the position (a 300-s campaign here reported that form as new)."""
    from fuzzfuse.backends import Unavailable, get_backend
    from fuzzfuse.corpus import load_case
    from fuzzfuse.job import run_case
    from fuzzfuse.verdict import Outcome
    case = load_case(Path(__file__).parent / "data" / case)
    backend = get_backend("torchscript:nnc")
    try:
        backend.check_available()
    except Unavailable as e:
        pytest.skip(str(e))
    result = run_case(case.graph, backend, options=case.options)
    assert result.outcome is Outcome.DOCUMENTED and result.signature.kind == "evaluation-order", result


def test_a_matmuls_sum_of_zero_terms_with_a_minus_zero_has_the_accumulators_sign():
    """A K=1 matmul of -0.0 and 1.0 is -0 or +0 as the accumulator starts (eager +0, nvFuser -0 on
    the H200, read by rsqrt then amax): its sign is an order's, as a reduction's sum of zeros. A
    nonzero term or bias decides the value, and a position reduced from a masked one is masked."""
    from fuzzfuse.ir.graph import Graph, Node, TensorInput
    from fuzzfuse.ir.interp import order_dependent_positions
    graph = Graph((TensorInput("a", (3, 1), "float32"), TensorInput("b", (1, 2), "float32")),
                  (Node("m", "matmul", ("a", "b")), Node("r", "rsqrt", ("m",)),
                   Node("x", "amax", ("r",), {"dims": [1], "keepdim": False})), ("x",))
    a, b = torch.tensor([[-0.0], [0.0], [2.0]]), torch.tensor([[1.0, 0.0]])
    masks = order_dependent_positions(graph, [a, b])
    assert masks["m"].tolist() == [[True, True], [False, False], [False, False]]
    assert masks["x"].tolist() == [True, False, False]
    from fuzzfuse.job import only_where
    ordered = torch.tensor([True, False, False])
    assert only_where(torch.tensor([False, True, True]), torch.tensor([True, True, True]), ordered)
    assert not only_where(torch.tensor([False, False, True]), torch.tensor([True, True, True]), ordered)
    linear = Graph((TensorInput("x", (2, 1), "float32"), TensorInput("w", (1, 1), "float32"),
                    TensorInput("bias", (1,), "float32")), (Node("l", "linear", ("x", "w", "bias")),), ("l",))
    assert order_dependent_positions(linear, [torch.tensor([[-0.0], [1.0]]), torch.ones(1, 1),
                                              torch.tensor([1.0])]) == {}
    assert order_dependent_positions(linear, [torch.tensor([[-0.0], [1.0]]), torch.ones(1, 1),
                                              torch.tensor([0.0])])["l"].tolist() == [[True], [False]]


def test_a_position_where_eager_is_the_wrong_one_needs_no_order_to_explain_it():
    """Inductor CUDA and aot_eager on the H100, linear of rows holding inf and 1e4 against a weight
    of -3.4e38: a row's terms overflow, so its sum is inf or nan as the gemm orders them (masked);
    in another row eager's cuBLAS call returned 0.00098 for 1.19e-7 * 1e4 + 1e4 * (0.5 - 0.5), and
    the fused float64's 0.00119. That row differs from eager, yet the fused value is right: the
    difference is the order's alone. A wrong fused value outside the mask is still a mismatch."""
    from fuzzfuse.ir.graph import Graph, Node, TensorInput
    from fuzzfuse.ir.interp import interpret, order_dependent_positions
    from fuzzfuse.job import only_where
    from fuzzfuse.oracle import compare_output
    graph = Graph((TensorInput("x", (2, 4), "float32"), TensorInput("w", (2, 4), "float32"),
                   TensorInput("bias", (2,), "float32")), (Node("l", "linear", ("x", "w", "bias")),), ("l",))
    x = torch.tensor([[-5.877471754111438e-39, -math.inf, 2.938735877055719e-39, 10000.0],
                      [1.1920928955078125e-07, 1.1754943508222875e-38, -0.5, 0.5]])
    w = torch.tensor([[-3.4028234663852886e+38] * 4, [10000.0] * 4])
    inputs = [x, w, torch.zeros(2)]
    mask = order_dependent_positions(graph, inputs)["l"]
    assert mask[0, 0] and not mask[1, 1]
    env, _ = interpret(graph, [t.double() for t in inputs])
    ref64 = env["l"]
    eager = torch.nn.functional.linear(*inputs)
    eager[0, 0], eager[1, 1] = math.inf, 0.0009765625  # CUDA eager's
    fused = eager.clone()
    fused[0, 0], fused[1, 1] = math.nan, ref64[1, 1].item()
    assert abs(ref64[1, 1].item() - 0.0011920928955078125) < 1e-12

    def judged(patched):
        return compare_output(0, patched, eager, ref64) is None
    assert only_where(fused, eager, mask, judged=judged)
    assert not only_where(fused, eager, mask)  # without the oracle's test: a difference outside
    fused[1, 1] = math.inf
    assert not only_where(fused, eager, mask, judged=judged)


def test_a_matmul_or_a_scan_of_an_order_dependent_position_depends_on_the_order():
    """matmul(x0, x1) of terms that overflow is nan or inf as it is summed (eager nan; Inductor CUDA
    on the H100 inf, which hardtanh clamps to -1 and a second matmul turns to a number where eager
    keeps nan): a position a matmul or a cumsum sums from such a position is the order's too, and
    only it, row by row and prefix by prefix."""
    from fuzzfuse.ir.graph import Graph, Node, TensorInput
    from fuzzfuse.ir.interp import order_dependent_positions
    huge = torch.finfo(torch.float64).max
    graph = Graph((TensorInput("x0", (2, 3), "float64"), TensorInput("x1", (3,), "float64"),
                   TensorInput("x2", (1, 2), "float64")),
                  (Node("v0", "matmul", ("x0", "x1")),
                   Node("v1", "hardtanh", ("v0",), {"min_val": -3.0, "max_val": -1.0}),
                   Node("u", "unsqueeze", ("v1",), {"dim": 1}), Node("v2", "matmul", ("u", "x2")),
                   Node("c", "cumsum", ("v1",), {"dim": 0})), ("v2", "c"))
    x0 = torch.tensor([[1.5, -2.5, 9e307], [1e-300, 2e-300, 3e-300]], dtype=torch.float64)
    x1 = torch.tensor([huge, huge, huge], dtype=torch.float64)
    masks = order_dependent_positions(graph, [x0, x1, torch.ones(1, 2, dtype=torch.float64)])
    assert masks["v1"].tolist() == [True, False]
    assert masks["v2"].tolist() == [[True, True], [False, False]]
    assert masks["c"].tolist() == [True, True]
    ordinary = torch.tensor([[1.5, -2.5, 3.0], [1.0, 2.0, 3.0]], dtype=torch.float64)
    assert order_dependent_positions(graph, [ordinary, torch.ones(3, dtype=torch.float64),
                                             torch.ones(1, 2, dtype=torch.float64)]) == {}


def test_a_cumsums_prefix_of_zeros_with_a_minus_zero_has_the_accumulators_sign():
    """Eager's cumsum starts from +0, so a prefix of zeros with a -0 in it is +0; Triton's scan
    (Inductor CUDA, H100) keeps a leading -0, and rsqrt reads it as -inf. Only such a prefix is an
    order's; a nonzero term decides every position after it, and a cumsum of +0s alone has one sign."""
    from fuzzfuse.ir.graph import Graph, Node, TensorInput
    from fuzzfuse.ir.interp import order_dependent_positions
    from fuzzfuse.job import only_where
    graph = Graph((TensorInput("x", (3, 2), "float32"),),
                  (Node("c", "cumsum", ("x",), {"dim": 0}), Node("r", "rsqrt", ("c",))), ("r",))
    x = torch.tensor([[-0.0, 0.5], [0.0, 1.5], [-3.4e38, -0.0]])
    masks = order_dependent_positions(graph, [x])
    assert masks["c"].tolist() == [[True, False], [True, False], [False, False]]
    assert masks["r"].tolist() == masks["c"].tolist()
    eager = torch.rsqrt(torch.cumsum(x, 0))
    triton_like = eager.clone()
    triton_like[0, 0] = -math.inf
    assert only_where(triton_like, eager, masks["r"])
    triton_like[2, 1] = 7.0
    assert not only_where(triton_like, eager, masks["r"])
    assert order_dependent_positions(graph, [torch.tensor([[0.0, 1.0], [0.0, -0.0], [1.0, 2.0]])]) == {}


@pytest.mark.slow  # Inductor's C++ compiles
def test_an_error_whose_message_starts_on_its_second_line_is_named_by_it():
    """sympy raises "TypeError: " with its message on the next lines. Keyed by "TypeError:" alone,
    Inductor's value-range crash on a bool eq/ne (pytorch#188231) had no specific message, so
    each graph reaching it was its own bug: an H200 campaign reported isnan -> ne -> eq of a bool
    and isnan -> bitwise_not -> ne of an int32 as two. The paragraph below names it; a bare
    assert (only Dynamo's hint below) stays as it was."""
    from fuzzfuse.backends import Unavailable, get_backend
    from fuzzfuse.identity import Anchor, identify, same_bug
    from fuzzfuse.job import run_case

    try:
        inductor = get_backend("inductor:cpu")
    except Unavailable as e:
        pytest.skip(str(e))
    forms = []
    for dtype, ops in (("bool", [("isnan", "x0"), ("ne", "v0", 1.0), ("eq", "v0", "v1")]),
                       ("int32", [("isnan", "x0"), ("bitwise_not", "v0"), ("ne", "v1", "v0")])):
        b = GraphBuilder()
        env = {"x0": b.tensor((), dtype)}
        for k, (op, *args) in enumerate(ops):
            env[f"v{k}"] = b.add(op, *(env.get(a, a) if isinstance(a, str) else a for a in args))
        forms.append(b.build([env[f"v{len(ops) - 1}"]]))
    results = [run_case(g, inductor) for g in forms]
    assert all(r.signature.outcome == "crash" for r in results), [r.detail for r in results]
    assert {r.signature.message for r in results} == {
        "TypeError: A Boolean argument can only be used in Eq and Ne; all other relationals expect real expressions."}
    identities = [identify(r.signature, g, device="cpu") for r, g in zip(results, forms)]
    assert identities[0].anchor is Anchor.MESSAGE and same_bug(*identities)
    assert normalize("AssertionError: \n\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace") == "AssertionError:"


def test_a_float64_libm_ulp_amplified_by_an_ill_conditioned_op_is_no_fusers_bug():
    """A CPU NNC campaign reported exp -> sin of float64 0..31 as new: NNC's exp(22) and exp(25)
    are an ulp above eager's, both within a libm's last bit, and sin of exp(31) = 2.9e13 (ulp
    0.004) shows it. float64 has no wider arbiter, so the rounding runs now move a float64 result
    of an op no standard rounds correctly by an ulp either way. Real NNC: documented, not a bug;
    the same graph with sin's result visibly wrong (a sign flipped) stays a mismatch."""
    from fuzzfuse.backends import get_backend
    from fuzzfuse.job import run_case

    b = GraphBuilder()
    x = b.tensor((2, 4, 4), "float64", values=Values("arange"))
    graph = b.build([b.add("sin", b.add("exp", x))])
    assert float(make_inputs(graph)[0].max()) == 31.0
    nnc = get_backend("torchscript:nnc")
    result = run_case(graph, nnc)
    inputs = make_inputs(graph)
    eager = run_eager(graph, inputs)[0][0]
    from fuzzfuse.job import rounding_runs
    from fuzzfuse.oracle import nearest_run
    runs = rounding_runs(graph, inputs, [eager])
    ref64 = run_eager(graph, inputs, upcast=True)[0][0]
    if torch.equal(nnc.run(graph, inputs).outputs[0], eager):
        # NNC's exp is eager's on this CPU (an AVX2 AMD EPYC): judge the value an exp an ulp
        # above eager's at 22 and 25 gives, as NNC's on the CPU of the report
        assert result.outcome is Outcome.PASS, result.detail
        x = inputs[0]
        moved = torch.where((x == 22) | (x == 25), torch.nextafter(torch.exp(x), torch.tensor(math.inf,
                                                                     dtype=torch.float64)), torch.exp(x))
        assert not torch.equal(torch.sin(moved), eager)
        assert compare_output(0, torch.sin(moved), nearest_run(torch.sin(moved), [eager, *(r[0] for r in runs)]),
                              ref64, 1) is None
    else:
        assert result.outcome is Outcome.DOCUMENTED and result.signature.kind == "ill-conditioned", result.detail
    assert any(not torch.equal(run[0], eager) for run in runs)  # the ulp moved somewhere
    assert all(bool((run[0].abs() <= 1).all()) for run in runs)  # and sin stayed a sine
    flipped = torch.where(eager.abs() > 0.1, -eager, eager)  # wrong where a last bit cannot reach
    assert compare_output(0, flipped, nearest_run(flipped, [eager, *(run[0] for run in runs)]), ref64, 1) is not None


def test_an_op_that_names_a_product_and_a_sum_may_round_the_product_first():
    """A CPU NNC campaign (AVX2) reported addcmul(x, t, x, value=-2) -> reciprocal -> sin as new:
    at x = -5.05e-4, t = 1.5 the sum x - 3x keeps an ulp of the product's rounding, eager's AVX2 kernel
    computes it with one rounding (a fused multiply-add) and NNC rounds the product first; the
    reciprocal and the sine show the difference. Neither is wrong: the rounding runs now try both
    (Op.stepwise), and real NNC's value is judged no bug."""
    from fuzzfuse.backends import get_backend
    from fuzzfuse.job import rounding_runs, run_case

    x = torch.tensor([[[-0.00011497121158754453, -0.00036445489968173206, 0.0007643334101885557]],
                      [[0.0005294213187880814, -0.000505093892570585, -0.0007675179513171315]]])
    t = torch.tensor([[[-479.63006591796875, 1.0, 1.0]], [[-663.3212890625, 1.5, 1.0]]])
    b = GraphBuilder()
    x0 = b.tensor((2, 1, 3), "float32", values=Values(exact=encode_exact(x)))
    x1 = b.tensor((2, 1, 3), "float32", values=Values(exact=encode_exact(t)))
    graph = b.build([b.add("sin", b.add("reciprocal", b.add("addcmul", x0, x1, x0, value=-2.0)))])
    inputs = make_inputs(graph)
    product_first = x + (-2.0 * t) * x  # float32, each step rounded
    fused_multiply_add = (x.double() + (-2.0 * t.double()) * x.double()).float()
    assert product_first[1, 0, 1] != fused_multiply_add[1, 0, 1]
    sub = b.build([b.add("addcmul", x0, x1, x0, value=-2.0)])
    runs = [run[0][1, 0, 1] for run in rounding_runs(sub, make_inputs(sub), run_eager(sub, make_inputs(sub))[0])]
    assert any(r == product_first[1, 0, 1] for r in runs) and any(r == fused_multiply_add[1, 0, 1] for r in runs)
    assert run_case(graph, get_backend("torchscript:nnc")).outcome is not Outcome.MISMATCH


def test_the_arbiter_rounds_where_the_graph_casts_to_a_narrower_float_and_nowhere_else():
    """x.half().float() asks for a half-precision rounding (pytorch#185337: a fuser that removed the
    pair was wrong): the float64 reference honours it, and so does each rounding run (to nearest:
    only the operand may differ), so the unrounded value is nearer neither. A widening cast, and
    an op's own float16 result, stay unrounded in float64."""
    from fuzzfuse.job import rounding_runs
    from fuzzfuse.oracle import nearest_run

    b = GraphBuilder()
    x = b.tensor((20,), "float32")
    graph = b.build([b.add("cast", b.add("cast", x, dtype="float16"), dtype="float32")])
    inputs = [torch.arange(20.0) / 7]
    ref64, eager = run_eager(graph, inputs, upcast=True)[0][0], run_eager(graph, inputs)[0][0]
    assert torch.equal(ref64, inputs[0].half().double()) and torch.equal(eager, inputs[0].half().float())
    elided = inputs[0].clone()
    assert compare_output(0, elided, eager, ref64, 1) is not None
    runs = rounding_runs(graph, inputs, [eager])
    assert compare_output(0, elided, nearest_run(elided, [eager, *(r[0] for r in runs)]), ref64, 1) is not None
    assert compare_output(0, eager, eager, ref64, 1) is None

    b = GraphBuilder()
    x = b.tensor((20,), "float16")
    widened = b.build([b.add("cast", b.add("mul", x, 3.0), dtype="float32")])
    halves = [(torch.arange(20.0) / 7).half()]
    assert torch.equal(run_eager(widened, halves, upcast=True)[0][0], halves[0].double() * 3)


def test_a_mean_read_by_a_sub_may_be_contracted_with_it_as_a_product():
    """An H200 Inductor campaign reported mean -> sub -> mul as new: x - mean(x) of five ones times
    1.7e38 gave -2.5e30, eager 0. Triton's mean is sum * (1/5) with 1/5 rounded to float32, and the
    sub reads that product unrounded in one fused multiply-add: fma(-5, 0.2f, 1) = -1.49e-8,
    right under C's default contraction as eager's 0 is. The rounding runs now read a mean (and a
    mul) unrounded where an add or sub takes it; a value no contraction gives stays wrong."""
    from fuzzfuse.job import rounding_runs
    from fuzzfuse.oracle import nearest_run

    b = GraphBuilder()
    x, scale = b.tensor((5,), "float32"), b.tensor((5,), "float32")
    graph = b.build([b.add("mul", b.add("sub", x, b.add("mean", x, dims=[0], keepdim=False)), scale)])
    inputs = [torch.ones(5), torch.tensor([2.9e-39, 1.5, 1.2e-38, -0.5, 1.7014117e38])]
    eager, ref64 = run_eager(graph, inputs)[0][0], run_eager(graph, inputs, upcast=True)[0][0]
    assert bool((eager == 0).all()) and bool((ref64 == 0).all())
    residual = torch.ones(1, dtype=torch.float64) - 5 * float(torch.tensor(0.2))
    fused = (residual * inputs[1].double()).float()  # Triton's: the fma's residual, scaled
    assert float(fused[4]) < -1e30
    assert compare_output(0, fused, eager, ref64, 1) is not None  # without the runs: a mismatch
    runs = rounding_runs(graph, inputs, [eager])
    assert compare_output(0, fused, nearest_run(fused, [eager, *(r[0] for r in runs)]), ref64, 1) is None
    wrong = fused.clone()
    wrong[4] = 3e30  # of the other sign: no contraction gives it
    assert compare_output(0, wrong, nearest_run(wrong, [eager, *(r[0] for r in runs)]), ref64, 1) is not None


def test_a_product_read_twice_by_a_sub_may_be_contracted_in_one_read_only():
    """The H100 Inductor campaign of 2026-12-07 reported mul(x, 1e-05) - itself -> reciprocal as
    new: Triton gave -1.1477098e+15 where eager gives inf. Triton's sub reads one operand as the
    product in a fused multiply-add and the other as the stored, rounded product: fma(x, 1e-05,
    -(x * 1e-05)) is the product's rounding error, not 0. The rounding runs read a product
    unrounded per read, so one of them gives that value; before, one value read twice always
    gave 0. A value no contraction gives (of either rounding of the product: the runs round each
    op up or down) stays wrong."""
    from fuzzfuse.job import rounding_runs
    from fuzzfuse.oracle import nearest_run

    b = GraphBuilder()
    x = b.tensor((), "float32")
    product = b.add("mul", x, 1e-05)
    graph = b.build([b.add("reciprocal", b.add("sub", product, product))])
    inputs = [torch.tensor(0.003921568859368563)]
    eager, ref64 = run_eager(graph, inputs)[0][0], run_eager(graph, inputs, upcast=True)[0][0]
    assert float(eager) == float(ref64) == float("inf")
    fused = torch.tensor(-1.1477098e+15)  # the H100's Triton value (minimized/...-0491da1e before it was dropped)
    exact = inputs[0].double() * torch.tensor(1e-05, dtype=torch.float32).double()
    assert float(fused) == float((1 / (exact - exact.float().double())).float())  # the fma's residual
    assert compare_output(0, fused, eager, ref64, 1) is not None  # without the runs: a mismatch
    runs = rounding_runs(graph, inputs, [eager])
    assert compare_output(0, fused, nearest_run(fused, [eager, *(r[0] for r in runs)]), ref64, 1) is None
    wrong = torch.tensor(float("-inf"))  # no contraction of either rounding of the product gives it
    assert compare_output(0, wrong, nearest_run(wrong, [eager, *(r[0] for r in runs)]), ref64, 1) is not None


def test_a_wider_operand_converted_to_the_results_dtype_is_no_overflow_and_a_wrapping_op_is():
    """Eager converts a 0-d int64 beside an int32 tensor to int32 (a defined, modular conversion)
    before it adds; only the add itself can overflow. Real NNC computes that add in int64 (the
    committed 3d730db3), which the taint rule once forgave as an overflow."""
    from fuzzfuse.ir.interp import interpret

    b = GraphBuilder()
    x, big = b.tensor((1,), "int32"), b.tensor((), "int64")
    graph = b.build([b.add("eq", b.add("add", big, x), big)])
    converted = [torch.zeros(1, dtype=torch.int32), torch.tensor(2**63 - 1)]
    assert interpret(graph, converted)[1] == {}
    b = GraphBuilder()
    x, y = b.tensor((1,), "int32"), b.tensor((1,), "int32")
    graph = b.build([b.add("add", x, y)])
    wrapping = [torch.tensor([2**31 - 1], dtype=torch.int32), torch.tensor([1], dtype=torch.int32)]
    assert interpret(graph, wrapping)[1] == {"v0": "undefined-behaviour"}
