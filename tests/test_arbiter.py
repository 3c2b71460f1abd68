"""The arbiter must not share the fault it judges: a wrong value that eager's vectorized kernel
computes, and float64 computed from one-element inputs (ATen's scalar loop) does not, is eager's
bug, never the fuser's."""
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fuzzfuse.bugreport import write_repro
from fuzzfuse.corpus import load_case
from fuzzfuse.identity import case_identity, identify, same_bug
from fuzzfuse.ir import Graph
from fuzzfuse.ir.graph import Node, TensorInput
from fuzzfuse.ir.interp import run_eager, scalar_reference
from fuzzfuse.ir.values import with_exact_values
from fuzzfuse.job import EAGER_FAULT, backend_for, eager_fault, run_case
from fuzzfuse.oracle import compare_output
from fuzzfuse.verdict import Outcome

DATA = Path(__file__).parent / "data"
MINIMIZED = Path(__file__).parent.parent / "minimized"


def _fmod_graph(n: int) -> Graph:
    return Graph((TensorInput("x", (n,), "float32"), TensorInput("y", (n,), "float32")),
                 (Node("r", "fmod", ("x", "y")),), ("r",))


def test_eagers_vectorized_fmod_of_a_huge_by_a_tiny_value_is_wrong_and_the_scalar_loop_is_right():
    """fmod(3.4e38, 1.2e-38) is nan in eager's vectorized float32 kernel (16 elements take it); the
    scalar arbiter gives the exact remainder, as std::fmod does."""
    graph, x, y = _fmod_graph(16), torch.full((16,), 3.4e38), torch.full((16,), 1.2e-38)
    (eager,), _ = run_eager(graph, [x, y])
    assert torch.isnan(eager).all()
    scalar = scalar_reference(graph, [x, y], 0, [0, 7])
    exact = torch.fmod(torch.tensor(3.4e38, dtype=torch.float32).double(), torch.tensor(1.2e-38).double())
    assert all(torch.equal(v, exact) for v in scalar), scalar
    # A fused 0 (float32 has no such denormal's neighbour farther than its atol) is right; eager is not.
    assert eager_fault(torch.zeros(16), eager, lambda positions: scalar_reference(graph, [x, y], 0, positions))
    assert not eager_fault(torch.full((16,), 7.0), eager, lambda p: scalar_reference(graph, [x, y], 0, p))


def test_the_scalar_arbiter_does_not_judge_a_graph_that_reads_other_positions():
    graph = Graph((TensorInput("x", (4,), "float32"),), (Node("s", "sum", ("x",), {"dims": [0], "keepdim": False}),),
                  ("s",))
    assert scalar_reference(graph, [torch.ones(4)], 0, [0]) is None


def test_the_scalar_arbiter_reads_only_what_its_output_reads():
    """A second output's input of another shape (seen in a campaign: [3, 5] beside a [1, 5]
    output) is not broadcast to the first output's shape."""
    graph = Graph((TensorInput("x", (1, 5), "float32"), TensorInput("y", (3, 5), "float32")),
                  (Node("a", "fmod", ("x", "x")), Node("b", "neg", ("y",))), ("a", "b"))
    x, y = torch.full((1, 5), 3.0), torch.ones(3, 5)
    (first,) = scalar_reference(graph, [x, y], 0, [4])
    assert torch.equal(first, torch.tensor(0.0, dtype=torch.float64))
    (second,) = scalar_reference(graph, [x, y], 1, [14])
    assert torch.equal(second, torch.tensor(-1.0, dtype=torch.float64))


def test_a_real_nnc_case_whose_eager_fmod_is_wrong_is_attributed_to_eager():
    """Reduced by a campaign as "NNC fmod gives 0, eager nan": NNC's 0 was right, and eager's and
    the float64 run's vectorized fmod were wrong. Judged again, the mismatch is eager's."""
    case = load_case(DATA / "nnc_fmod_eager_fault_case.json")
    result = run_case(case.graph, backend_for("torchscript:nnc"), options=case.options)
    assert result.outcome is Outcome.MISMATCH
    assert result.signature.backend == EAGER_FAULT, result.signature
    assert "attributed to eager" in result.detail


def test_an_eager_fault_and_a_fusers_call_of_the_same_kernel_are_one_bug():
    """Inductor's C++ fmod is ATen's at::vec fmod (0772db8d: nan for 3.4e38 by 1.2e-38), the kernel
    eager's own vectorized fmod runs (a campaign's reduced NNC case: fmod(-1.8e308, 0.5) is nan in
    eager, NNC right): one bug,
    eager's, whichever route showed it. On CUDA, Inductor's fmod is its own."""
    eagers = case_identity(load_case(DATA / "eager_vectorized_fmod_case.json"))
    committed = load_case(MINIMIZED / "inductor-mismatch-nan-inf-float-0772db8d" / "case.json")
    inductors = case_identity(committed)
    assert eagers.component == inductors.component == "eager" and same_bug(eagers, inductors)
    on_cuda = identify(committed.signature, committed.graph, committed.generalisation, device="cuda")
    assert on_cuda.component == "inductor" and not same_bug(on_cuda, eagers)


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() == "DEFAULT", reason="eager's fault is in its AVX2 kernel")
def test_an_eager_faults_repro_runs_eager_and_expects_the_scalar_loops_value(tmp_path):
    """The repro of a mismatch that is eager's is reported to PyTorch: fn run eagerly, checked
    against the value the same op gives one element at a time, no fuser in it."""
    case = load_case(DATA / "eager_vectorized_fmod_case.json")
    source = write_repro(tmp_path, case)
    assert "torch.jit" not in source and "out = fn(x0)" in source and "expected 0 (the same op one element" in source
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "got nan" in run.stdout, run.stdout + run.stderr


def test_the_float64_arbiter_computes_an_op_that_makes_a_float_of_integers_in_float64():
    """Eager's sqrt of an int32 594 is 24.372114, not the nearest float32 (24.372116, NNC's): an
    arbiter that computed it in float32 rounded as eager does and sided with it (a 300-s NNC
    campaign reported sqrt -> exp as a new bug, 2026-12-03)."""
    graph = Graph((TensorInput("x", (3,), "int32"),), (Node("s", "sqrt", ("x",)), Node("e", "exp", ("s",))), ("e",))
    x = torch.tensor([-2147483648, -1574, 594], dtype=torch.int32)
    (ref,), _ = run_eager(graph, [x], upcast=True)
    assert ref.dtype == torch.float64 and math.isclose(ref[2].item(), math.exp(math.sqrt(594)), rel_tol=1e-15)
    # The conversion is the op's meaning and stays: int32 2147483647 is float32 2^31, whose
    # remainder by 3.0 is 2 (Inductor's 1, 4cd231b6, stays a bug).
    rem = Graph((TensorInput("x", (1,), "int32"),), (Node("r", "remainder", ("x", 3.0)),), ("r",))
    (exact,), _ = run_eager(rem, [torch.tensor([2147483647], dtype=torch.int32)], upcast=True)
    assert exact.dtype == torch.float64 and exact.item() == 2.0
    pinned = replace(graph, inputs=(with_exact_values(graph.inputs[0], x),))
    result = run_case(pinned, backend_for("torchscript:nnc"))
    assert result.outcome is not Outcome.MISMATCH, result.detail


def _div_trunc_graph(dtype: str, divisor) -> Graph:
    return Graph((TensorInput("x", (), dtype),), (Node("q", "div", ("x", divisor)), Node("t", "trunc", ("q",))),
                 ("t",))


def test_the_arbiter_reads_a_python_scalar_as_eager_does_in_the_ops_compute_dtype():
    """x / 0.001 in float32 divides by float32(0.001) = 0.0010000000475: 1 / 0.001 truncates to 999
    in CPU eager and in nvFuser on the H200, 1000 in CUDA eager. An arbiter dividing by the double
    0.001 sided with CUDA eager and reported nvFuser's 999 as a wrong value; eager's own reading of
    the scalar makes 999 the float32 program's value. In float64 the scalar stays a double."""
    one = torch.ones(())
    (cpu_eager,), _ = run_eager(_div_trunc_graph("float32", 0.001), [one])
    (ref,), _ = run_eager(_div_trunc_graph("float32", 0.001), [one], upcast=True)
    assert cpu_eager.item() == ref.item() == 999.0
    cuda_eager = torch.tensor(1000.0)  # measured on the H200 (torch 2.11)
    assert compare_output(0, cpu_eager, cuda_eager, ref) is None
    assert compare_output(0, cuda_eager, cpu_eager, ref) is not None
    (ref64,), _ = run_eager(_div_trunc_graph("float64", 0.001), [one.double()], upcast=True)
    assert ref64.item() == 1000.0


# fp16 rounds 0.1 down (0.0999755859375), bf16 up (0.10009765625): the one-sided comparisons
# that the reading turns are ge and lt in fp16, le and gt in bf16.
@pytest.mark.parametrize("op, number, dtype", [
    *[(op, number, dtype) for op, number in [("fmod", 0.1), ("remainder", 0.3), ("eq", 0.1)]
      for dtype in ("float16", "bfloat16")],
    ("ge", 0.1, "float16"), ("lt", 0.1, "float16"), ("le", 0.1, "bfloat16"), ("gt", 0.1, "bfloat16")])
def test_the_arbiter_reads_fmods_divisor_and_a_thresholds_number_in_the_fp16_operands_dtype_on_cpu(op, number, dtype):
    """CPU eager converts fmod's (remainder's, a comparison's) number to the fp16/bf16 operand's
    dtype: fmod(x, 0.1) of x = fp16(0.1) is 0, and x == 0.1 holds. An arbiter reading 0.1 in
    float32 computed fmod(0.0999755859375, 0.1) = 0.0999755859375 (and False): it sided with a
    fuser that reads the number unrounded (issue 32's fmod_lowp_scalar: forgiven as nearer
    float64). mul's number stays float32: CPU eager reads it in its opmath."""
    graph = Graph((TensorInput("x", (3,), dtype),), (Node("r", op, ("x", number)),), ("r",))
    x = torch.tensor([number, 2.5, -1.3], dtype=getattr(torch, dtype))
    (eager,), _ = run_eager(graph, [x])
    (ref,), _ = run_eager(graph, [x], upcast=True)
    assert torch.equal(ref.to(eager.dtype), eager), (eager, ref)
    unrounded = getattr(torch, op)(x.float(), float(torch.tensor(number, dtype=torch.float32)))
    assert not torch.equal(unrounded.to(eager.dtype), eager)  # what the float32 reading gave
    mul = Graph((TensorInput("x", (3,), dtype),), (Node("r", "mul", ("x", 0.1)),), ("r",))
    (ref,), _ = run_eager(mul, [x], upcast=True)
    assert torch.equal(ref, x.double() * float(torch.tensor(0.1, dtype=torch.float32)))


def test_the_arbiter_truncates_a_quotient_rounded_in_float32_as_div_trunc_does():
    """div_trunc(-0.52289, 1e-05) in float32 is trunc(-52289.0): ATen truncates the quotient
    rounded in float (CPU eager and nvFuser on the H200 give -52289). The exact quotient,
    -52288.998, truncates to -52288, which CUDA eager's reciprocal gives: an arbiter that kept the
    float64 quotient reported nvFuser's right answer as a new bug. Float64 keeps its own rounding."""
    graph = Graph((TensorInput("x", (1,), "float32"),), (Node("t", "div_trunc", ("x", 1e-05)),), ("t",))
    x = torch.tensor([-0.5228899717330933])
    (eager,), _ = run_eager(graph, [x])
    (ref,), _ = run_eager(graph, [x], upcast=True)
    assert eager.item() == ref.item() == -52289.0
    assert compare_output(0, eager, torch.tensor([-52288.0]), ref) is None
    wide = Graph((TensorInput("x", (1,), "float64"),), (Node("t", "div_trunc", ("x", 1e-05)),), ("t",))
    assert run_eager(wide, [x.double()], upcast=True)[0][0].item() == -52288.0


def test_an_eager_run_whose_every_op_is_within_an_ulp_is_not_eagers_fault():
    """Reduced by an NNC campaign as eager's bug: atan2(atan2(2.2e-16, 8.988e307)) on float64 is 0 in
    eager (AVX2) and pi/4 in NNC and one element at a time. The inner atan2 is 2^-1075 less a hair:
    eager's vectorized kernel rounds it to 0 (correctly), libm to the smallest denormal; atan2(v, v)
    then makes 0 of one and pi/4 of the other. Each op of eager is right on its own operands, so
    neither side is wrong: ill-conditioned. A vectorized fmod's nan is its own op's fault."""
    from fuzzfuse.backends.findings import Difference
    from fuzzfuse.ir.interp import ops_faithful_at

    case = load_case(DATA / "nnc_atan2_ill_conditioned_case.json")
    result = run_case(case.graph, backend_for("torchscript:nnc"), options=case.options)
    if result.outcome is Outcome.UNFUSED:
        pytest.skip("NNC did not fuse atan2 here")
    assert result.outcome is Outcome.DOCUMENTED, result.signature
    assert result.signature.kind == Difference.ILL_CONDITIONED.value

    graph, x, y = _fmod_graph(16), torch.full((16,), 3.4e38), torch.full((16,), 1.2e-38)
    assert not ops_faithful_at(graph, [x, y], 0, [0, 7])


@pytest.mark.slow  # real Inductor CPU compiles
def test_eagers_pow_of_minus_zero_by_its_rsqrt_shortcut_is_eagers_bug():
    """A 300-s CPU Inductor campaign (2026-12-07) reported pow(-0.0, -0.5) new: Inductor's inf
    against eager's and float64's -inf. ATen computes pow(x, -0.5) as rsqrt(x), which keeps -0's
    sign (IEEE's pow gives +inf; pytorch#127163, open): eager and the float64 run share the
    shortcut, so the scalar arbiter computes pow without it (`Op.unshortcut`), and no -inf is an
    ulp from +inf. Real Inductor CPU; an exponent ATen takes no shortcut for stays right."""
    from fuzzfuse.ir.interp import ops_faithful_at

    case = load_case(DATA / "eager_pow_rsqrt_shortcut_case.json")
    x = torch.tensor([-0.0, 0.0, 4.0])
    assert torch.pow(x, -0.5)[0].item() == -math.inf  # eager's shortcut, as in torch 2.13
    (scalar,) = scalar_reference(case.graph, [x[:1].reshape(())], 0, [0])
    assert scalar.item() == math.inf and not ops_faithful_at(case.graph, [x[:1].reshape(())], 0, [0])
    result = run_case(case.graph, backend_for("inductor"), options=case.options)
    assert result.outcome is Outcome.MISMATCH and result.signature.backend == EAGER_FAULT, result.detail
    assert "without its shortcuts" in result.detail
    assert case_identity(replace(case, signature=result.signature)).component == "eager"
    other = Graph(case.graph.inputs, (Node("v0", "pow", ("x0", -0.6)),), ("v0",))
    assert run_case(other, backend_for("inductor"), options=case.options).outcome is not Outcome.MISMATCH
