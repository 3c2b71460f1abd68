"""Inductor as a target: a configuration drawn per case takes effect in a worker that ran other
configurations before (real CPU Inductor), a case file cannot name a flag that chooses code, the
reducer drops the flags a failure does not need, the repro runs the case's configuration, and the
semantics Inductor changes by design are classified as documented differences, not bugs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fuzzfuse.backends import get_backend
from fuzzfuse.backends.inductor_config import FLAGS, ConfigError, InductorConfig
from fuzzfuse.backends.options import Options
from fuzzfuse.corpus import Case
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.graph import Values
from fuzzfuse.ir.values import encode_exact
from fuzzfuse.job import _holds_double_denormal, _judge_outputs, design_references, run_case
from fuzzfuse.minimize import reduce_case
from fuzzfuse.oracle import Signature
from fuzzfuse.repro import repro_files
from fuzzfuse.verdict import Difference, Outcome

DENORMALS = torch.tensor([1e-40, -1e-40, 3e-39, 1.5, -2.5, 1e-39, 7.0, -1e-44, 2.0], dtype=torch.float32)
UNSAFE_MATH = Options(inductor_config=InductorConfig(flags=(("cpp.enable_unsafe_math_opt_flag", True),)))


def _exact(t: torch.Tensor) -> Values:
    return Values(exact=encode_exact(t))


def _ceil_of_denormals():
    b = GraphBuilder()
    x = b.tensor(list(DENORMALS.shape), values=_exact(DENORMALS))
    return b.build([b.add("ceil", x)])


def _options(**flags) -> Options:
    return Options(inductor_config=InductorConfig(flags=tuple(sorted(flags.items()))))


@pytest.fixture(scope="module")
def inductor():
    return get_backend("inductor")


def _assert_flush_documented_only_where_declared(inductor, graph, x, fused, eager, ref64, flushed=None):
    """`fused` (what a flushing kernel returned) is the documented flush for Inductor under the
    flag that flushes, and a mismatch for a backend that does not declare it. `flushed`: the
    flushed reference (default: the CPU's, every read flushed)."""
    from fuzzfuse.backends.findings import FlushStyle
    from fuzzfuse.job import flushed_references

    class Result:
        outputs, context = fused, ""
    flushing = inductor.for_case(UNSAFE_MATH)
    assert Difference.DENORMAL_FLUSH in flushing.documented_differences(UNSAFE_MATH)
    judged = _judge_outputs(graph, graph.infer_types(), flushing, Result, eager, ref64, {}, False,
                            flushed or (lambda: flushed_references(graph, [x], FlushStyle.DAZ_FTZ)))
    assert judged.outcome == Outcome.DOCUMENTED and judged.signature.kind == Difference.DENORMAL_FLUSH.value
    judged = _judge_outputs(graph, graph.infer_types(), inductor, Result, eager, ref64, {}, False)
    assert judged.outcome == Outcome.MISMATCH


@pytest.mark.gpu
def test_a_triton_flush_of_a_denormal_intermediate_is_the_documented_flush():
    """exp2(-128) is a denormal that Triton flushes: logical_and(x, exp2(x)) is False where eager
    CUDA, which does not flush, gives True. The H200 campaign reduced it as a bug, for its flushed
    reference ran eager CUDA on flushed inputs, whose intermediates keep denormals; it runs on CPU
    under FTZ/DAZ now. Without the flush (eager_numerics.disable_ftz) the same graph passes."""
    from fuzzfuse.backends import Unavailable
    from fuzzfuse.backends.inductor import InductorBackend

    backend = InductorBackend("cuda")
    try:
        backend.check_available()
    except Unavailable as e:
        pytest.skip(str(e))
    b = GraphBuilder()
    x = b.tensor([], values=_exact(torch.tensor(-128.0)))
    graph = b.build([b.add("logical_and", x, b.add("exp2", x))])
    flushing = run_case(graph, backend)
    assert flushing.outcome == Outcome.DOCUMENTED and flushing.signature.kind == Difference.DENORMAL_FLUSH.value
    assert run_case(graph, backend, options=_options(**{"eager_numerics.disable_ftz": True})).outcome == Outcome.PASS
    # A float64 value without denormals does not keep the reference on CUDA: atan2(1, 3.4e38) is
    # an fp32 denormal, flushed, and logical_and with a float64 one is False (the H200's 6ac3e94b).
    b = GraphBuilder()
    x, y, z = b.tensor([3], values=_exact(torch.tensor([-2.5, 1e4, 3.4028234663852886e38]))), b.tensor([3]), \
        b.tensor([3], "float64")
    graph = b.build([b.add("logical_and", z, b.add("atan2", y, x))])
    inputs = [torch.tensor([-2.5, 1e4, 3.4028234663852886e38], device="cuda"), torch.ones(3, device="cuda"),
              torch.ones(3, dtype=torch.float64, device="cuda")]
    assert not _holds_double_denormal(graph, inputs)
    flushing = run_case(graph, backend)
    assert flushing.outcome == Outcome.DOCUMENTED and flushing.signature.kind == Difference.DENORMAL_FLUSH.value
    # Triton's eq reads the denormal x that its tan flushes: tan(x) == x is False (the H200's 2a67f66b).
    b = GraphBuilder()
    x = b.tensor([2], values=_exact(torch.tensor([9.214186204124655e-39, -1.1047601674594851e-38])))
    graph = b.build([b.add("eq", x, b.add("tan", x))])
    flushing = run_case(graph, backend)
    assert flushing.outcome == Outcome.DOCUMENTED and flushing.signature.kind == Difference.DENORMAL_FLUSH.value


def test_a_flag_takes_effect_for_the_next_case_and_is_gone_after_it(inductor):
    """Vectorized C++ kernels are counted by Inductor itself: none under cpp.simdlen=1 (no ISA that wide: scalar code),
    some again for the next case with the defaults (the patch was restored, dynamo reset)."""
    import torch._inductor.metrics as metrics

    b = GraphBuilder()
    graph = b.build([b.add("sigmoid", b.add("exp", b.tensor([4, 64])))])
    counts = []
    for options in (Options(), _options(**{"cpp.simdlen": 1}), Options()):
        before = metrics.generated_cpp_vec_kernel_count
        result = run_case(graph, inductor, options=options)
        assert result.outcome == Outcome.PASS and result.fused
        counts.append(metrics.generated_cpp_vec_kernel_count - before)
    assert counts[0] > 0 and counts[1] == 0 and counts[2] > 0


def test_dynamic_and_marked_dims_compile_symbolic_sizes(inductor):
    """A case drawn dynamic runs compiled code that takes other sizes without compiling again."""
    b = GraphBuilder()
    graph = b.build([b.add("sum", b.add("exp", b.tensor([5, 33])), dims=[1], keepdim=False)])
    compiled = inductor.compile(graph, Options(inductor_config=InductorConfig(dynamic=True, mark_dynamic="last")))
    first = compiled.run([torch.randn(5, 33)])
    again = compiled.run([torch.randn(5, 33)])
    assert first.fused and again.evidence.details["graphs"] == 0 and again.evidence.details["calls"] == 1


def test_draws_take_device_flags_only_on_their_device_and_round_trip():
    for device in ("cpu", "cuda"):
        configs = [InductorConfig.draw(seed, device) for seed in range(400)]
        names = {n for c in configs for n, _ in c.flags}
        assert names and all(device in FLAGS[n].devices for n in names)
        assert all(InductorConfig.from_json(c.to_json()) == c for c in configs)
        assert any(c == InductorConfig() for c in configs) and any(c.dynamic for c in configs)
    assert {c.mode for c in (InductorConfig.draw(s, "cpu") for s in range(400))} == {None}


def test_a_case_file_cannot_name_a_flag_that_chooses_code():
    with pytest.raises(ConfigError, match="cpp.cxx"):
        InductorConfig.from_json({"flags": {"cpp.cxx": "/tmp/evil"}})
    with pytest.raises(ConfigError):
        InductorConfig.from_json({"flags": {"split_reductions": "yes"}})


def test_cpu_inductor_sign_of_zero_is_a_counted_documented_difference(inductor):
    """Inductor sums a lone -0.0 to -0.0 where eager (and float64) give +0.0: built with
    -fno-signed-zeros, its C++ does not promise the sign. Counted as documented, not a pass."""
    b = GraphBuilder()
    x = b.tensor([1], values=_exact(torch.tensor([-1.0])))
    graph = b.build([b.add("sum", b.add("mul", x, 0.0), dims=[0], keepdim=True)])
    result = run_case(graph, inductor)
    assert result.outcome == Outcome.DOCUMENTED and not result.outcome.is_failure
    assert result.signature.kind == Difference.SIGNED_ZERO.value


@pytest.mark.slow  # 7 s in CI: Inductor compiles under two configurations (over the fast budget)
def test_cpu_inductor_denormal_flush_is_documented_only_under_the_flag_that_flushes(inductor):
    """With -funsafe-math-optimizations, gcc 12 links crtfastmath into the kernel: FTZ/DAZ, and
    ceil(1e-40) is 0. Documented for that configuration (Inductor's own opt-in), a pass without
    it, and a mismatch for a fuser that does not declare the flush (the same real tensors)."""
    graph = _ceil_of_denormals()
    flushed = run_case(graph, inductor, options=UNSAFE_MATH)
    if flushed.outcome == Outcome.PASS:
        pytest.skip("this compiler does not set FTZ/DAZ under -funsafe-math-optimizations (gcc >= 13)")
    assert flushed.outcome == Outcome.DOCUMENTED and flushed.signature.kind == Difference.DENORMAL_FLUSH.value
    assert run_case(graph, inductor).outcome == Outcome.PASS
    assert torch.set_flush_denormal(False) is not None and torch.ceil(DENORMALS)[0] == 1.0  # eager unharmed

    class Result:  # the flushing fuser's outputs, judged as a backend without the declaration
        outputs = [torch.where(DENORMALS.abs() < torch.finfo(torch.float32).tiny, 0.0, DENORMALS).ceil()]
        context = ""
    eager = [torch.ceil(DENORMALS)]
    verdict = _judge_outputs(graph, graph.infer_types(), inductor, Result, eager, [torch.ceil(DENORMALS.double())],
                             set(), False)
    assert verdict.outcome == Outcome.MISMATCH


def test_a_float64_denormal_read_as_zero_on_cpu_is_the_documented_flush(inductor):
    """Seen in a 10-minute CPU campaign: eq(0.0, 5.56e-309 as float64) gave True under
    cpp.enable_unsafe_math_opt_flag. x86's DAZ, which -funsafe-math-optimizations sets (gcc < 13),
    reads double denormals as zero too: the same documented flush, not a bug; without the flag it
    passes."""
    b = GraphBuilder()
    x = b.tensor([], "float32", values=_exact(torch.tensor(0.0)))
    y = b.tensor([], "float64", values=_exact(torch.tensor(5.562684646268003e-309, dtype=torch.float64)))
    graph = b.build([b.add("eq", x, y)])
    flushed = run_case(graph, inductor, options=UNSAFE_MATH)
    if flushed.outcome == Outcome.PASS:
        pytest.skip("this compiler does not set FTZ/DAZ under -funsafe-math-optimizations (gcc >= 13)")
    assert flushed.outcome == Outcome.DOCUMENTED and flushed.signature.kind == Difference.DENORMAL_FLUSH.value
    assert run_case(graph, inductor).outcome == Outcome.PASS


def test_a_flush_is_documented_when_each_element_is_right_flushed_or_not(inductor):
    """Seen on the H200: elu(alpha=0.5) -> logical_not of [1.02e-38, -2.2e-39] gave [False, True].
    Triton flushed elu's denormal result (the second) but passed the first input through `where`
    unflushed: neither the plain nor the flushed run matches the whole output, each element matches
    one of them. A fuser that does not declare the flush still gets a mismatch."""
    x = torch.tensor([1.0179598169435058e-38, -2.2073757877491675e-39], dtype=torch.float32)
    b = GraphBuilder()
    graph = b.build([b.add("logical_not", b.add("elu", b.tensor([2], values=_exact(x)), alpha=0.5))])
    eager = [torch.logical_not(torch.nn.functional.elu(x, alpha=0.5))]
    ref64 = [torch.logical_not(torch.nn.functional.elu(x.double(), alpha=0.5))]
    assert eager[0].tolist() == [False, False]

    # what Inductor's Triton kernel returned for it on the H200
    fused = [torch.tensor([False, True])]
    _assert_flush_documented_only_where_declared(inductor, graph, x, fused, eager, ref64)


def _tan_eq(b, x):
    return b.add("eq", x, b.add("tan", x))


def _floor_halved_xor(b, x):
    return b.add("logical_xor", x, b.add("div_floor", x, -2.0))


@pytest.mark.parametrize("build, x, triton", [
    # what Inductor's Triton kernels returned for them on the H200 (3 of 3 fresh processes each)
    (_tan_eq, torch.tensor([9.214186204124655e-39, -1.1047601674594851e-38]), torch.tensor([False, False])),
    (_floor_halved_xor, torch.tensor(3.819956429331023e-39), torch.tensor(True)),
], ids=["tan-eq", "div_floor-logical_xor"])
def test_a_triton_comparison_reads_the_denormal_its_arithmetic_flushes(inductor, build, x, triton):
    """Seen on the H200, in the 10-minute campaign's hits: tan(x) == x is False for a denormal x,
    and logical_xor(x, div(x, -2.0, rounding_mode="floor")) is True (eager: True, False). Triton
    flushes what tan and div read and write, not what eq and logical_xor read. A reference that
    flushes every read, as x86's DAZ does, says True and False, so these flushes were reduced as
    bugs; with comparisons reading their operands as they are, each is the documented flush. A
    fuser that does not declare the flush still gets a mismatch."""
    from fuzzfuse.ir.interp import run_eager
    from fuzzfuse.job import flushed_run

    b = GraphBuilder()
    graph = b.build([build(b, b.tensor(list(x.shape), values=_exact(x)))])
    (eager, _), (ref64, _) = run_eager(graph, [x]), run_eager(graph, [x], upcast=True)
    assert not torch.equal(eager[0], triton)
    every_read, _ = flushed_run(graph, [x], daz=True)
    assert not torch.equal(every_read[0], triton)
    _assert_flush_documented_only_where_declared(
        inductor, graph, x, [triton], eager, ref64,
        flushed=lambda: [flushed_run(graph, [x], daz=True, as_triton=True)])


def test_a_bfloat16_denormal_flushed_is_the_same_documented_difference(inductor):
    """Seen on the H200: ceil of a bfloat16 2.9e-39 gave 0 (eager: 1). Triton computes bf16 in
    fp32, where the value is a denormal, and flushes it: the documented flush, as for an fp32
    input, where the backend declares it; a mismatch where it does not."""
    x = torch.tensor([0.5, 2.938735877055719e-39, 2.5], dtype=torch.bfloat16)
    b = GraphBuilder()
    graph = b.build([b.add("ceil", b.tensor([3], "bfloat16", values=_exact(x)))])
    eager, ref64 = [torch.ceil(x)], [torch.ceil(x.double())]
    assert eager[0].tolist() == [1.0, 1.0, 3.0]

    # what Inductor's Triton kernel returned for it on the H200
    fused = [torch.tensor([1.0, 0.0, 3.0], dtype=torch.bfloat16)]
    _assert_flush_documented_only_where_declared(inductor, graph, x, fused, eager, ref64)


def test_a_bool_of_a_flushed_result_is_the_documented_flush(inductor):
    """Seen in a 90-s CPU campaign here: eq(0, silu(FLT_MIN)) is True under
    cpp.enable_unsafe_math_opt_flag. FLT_MIN is no denormal, silu's result is, and FTZ flushes it:
    eager under FTZ/DAZ gives True as well, while float64 (no denormal there) cannot tell the runs
    apart; without the flag it passes."""
    b = GraphBuilder()
    x = b.tensor([2], values=_exact(torch.tensor([1.1754943508222875e-38, 0.5])))
    graph = b.build([b.add("eq", b.tensor([], values=_exact(torch.tensor(0.0))), b.add("silu", x))])
    flushed = run_case(graph, inductor, options=UNSAFE_MATH)
    if flushed.outcome == Outcome.PASS:
        pytest.skip("this compiler does not set FTZ/DAZ under -funsafe-math-optimizations (gcc >= 13)")
    assert flushed.outcome == Outcome.DOCUMENTED and flushed.signature.kind == Difference.DENORMAL_FLUSH.value
    assert run_case(graph, inductor).outcome == Outcome.PASS


@pytest.mark.parametrize("ops, value, fused", [
    (("rsqrt",), 2.938735877055719e-39, float("inf")),  # eager 1.8e19
    (("rsqrt",), -3.5607918835480056e-39, float("-inf")),  # eager nan
    (("floor", "log"), -3.737593710791868e-39, float("-inf")),  # eager floor -1, log nan
    (("tanh", "sqrt"), -2.9812582789556553e-39, -0.0),  # eager nan
])
def test_a_flush_that_makes_an_infinity_or_ends_a_nan_is_documented(inductor, ops, value, fused):
    """Seen on the H200 (each reduced to these ops, Triton's outputs below): a flushed operand
    turns a number into an infinity (rsqrt of a denormal) or keeps a NaN from arising (a negative
    denormal read as -0). The run on flushed inputs gives exactly the fused value; the oracle
    once measured "nearer" as |fused - reference|, which is NaN for inf - inf or against a NaN
    reference, and filed these as mismatches."""
    x = torch.tensor([1.5, value], dtype=torch.float32)
    b = GraphBuilder()
    out = b.tensor([2], values=_exact(x))
    for op in ops:
        out = b.add(op, out)
    graph = b.build([out])

    def run(t):
        for op in ops:
            t = getattr(torch, op)(t)
        return t
    eager, ref64 = [run(x)], [run(x.double())]

    # what Inductor's Triton kernel returned on the H200
    fused = [torch.tensor([run(torch.tensor(1.5)).item(), fused], dtype=torch.float32)]
    _assert_flush_documented_only_where_declared(inductor, graph, x, fused, eager, ref64)


def test_bfloat16_intermediates_kept_in_float32_are_documented_unless_emulate_precision_casts(inductor):
    """Seen on the H200 and here alike: sin(expm1(19)) in bf16 gives -0.39, eager 0.65, float64
    0.96. Inductor keeps expm1's 1.78e8 in float32 (eager rounds it to bf16), and sin of either is
    noise; a mismatch filed it as a bug before. It is what float32 intermediates give (documented);
    under emulate_precision_casts Inductor rounds as eager does, and the same output is a bug."""
    x = torch.tensor([19.0], dtype=torch.bfloat16)
    b = GraphBuilder()
    graph = b.build([b.add("sin", b.add("expm1", b.tensor([1], "bfloat16", values=_exact(x))))])
    found = run_case(graph, inductor)
    assert found.outcome == Outcome.DOCUMENTED and found.signature.kind == Difference.FP32_INTERMEDIATES.value
    emulating = _options(emulate_precision_casts=True)
    assert run_case(graph, inductor, options=emulating).outcome == Outcome.PASS

    class Result:  # the float32-intermediate output, from a configuration that promises eager's rounding
        outputs = [torch.sin(torch.expm1(x.float())).bfloat16()]
        context = ""
    eager, ref64 = [torch.sin(torch.expm1(x))], [torch.sin(torch.expm1(x.double()))]
    judged = _judge_outputs(graph, graph.infer_types(), inductor, Result, eager, ref64, {}, False,
                            *design_references(inductor, emulating, graph, [x], eager))
    assert judged.outcome == Outcome.MISMATCH


def test_a_matmul_writes_its_float16_result_before_the_float32_intermediates_after_it(inductor):
    """linear -> reciprocal -> tan -> floor -> bool of float16 (a CPU campaign reported it new):
    Inductor's linear is aten's mm, whose float16 result is written rounded; reciprocal's 5622 stays
    float32 in the kernel after it (eager rounds it to 5624), and tan of either is noise. Under
    emulate_precision_casts the repro passes. The float32-intermediate reference had kept linear's
    result unrounded too, so it did not compute the fused value and the case stood as a bug."""
    from fuzzfuse.corpus import load_case

    case = load_case(Path(__file__).parent / "data" / "inductor_f16_linear_reciprocal_tan_case.json")
    found = run_case(case.graph, inductor, options=case.options)
    assert found.outcome == Outcome.DOCUMENTED and found.signature.kind == Difference.FP32_INTERMEDIATES.value
    emulating = _options(emulate_precision_casts=True)
    assert run_case(case.graph, inductor, options=emulating).outcome == Outcome.PASS


def test_a_nan_under_unsafe_math_is_the_documented_difference(inductor):
    """Seen in a 10-minute CPU campaign here: sqrt of int64 [-10, 2, ...] gave 0 where eager gives
    nan, under cpp.enable_unsafe_math_opt_flag. gcc's -funsafe-math-optimizations assumes valid
    arguments and results: documented for a run that holds a NaN or an infinity, a pass without
    the flag."""
    b = GraphBuilder()
    x = b.tensor([8], "int64", values=_exact(torch.tensor([-10, 2, 3, -4, -3, -5, -3, -1])))
    graph = b.build([b.add("sqrt", x)])
    unsafe = run_case(graph, inductor, options=UNSAFE_MATH)
    if unsafe.outcome == Outcome.PASS:
        pytest.skip("this compiler keeps sqrt's NaN under -funsafe-math-optimizations")
    assert unsafe.outcome == Outcome.DOCUMENTED and unsafe.signature.kind == Difference.UNSAFE_MATH.value
    assert run_case(graph, inductor).outcome == Outcome.PASS


def test_an_op_whose_dtype_defines_its_result_is_no_wider_intermediate(inductor):
    """nextafter(inf, 1) in bf16 is bf16's largest value (3.39e38); CPU Inductor computes it in
    float32 (3.40e38, which rounds to inf in bf16): a committed bug
    (inductor-mismatch-nan-inf-float-3994f8c3), which the float32-intermediates reference must not
    explain away: it keeps nextafter in its own dtype (Op.exact_in_dtype)."""
    b = GraphBuilder()
    one = b.tensor([], "bfloat16", values=_exact(torch.tensor(1.0, dtype=torch.bfloat16)))
    inf = b.tensor([], "bfloat16", values=_exact(torch.tensor(float("inf"), dtype=torch.bfloat16)))
    graph = b.build([b.add("nextafter", inf, one)])
    found = run_case(graph, inductor)
    assert found.outcome == Outcome.MISMATCH and found.signature.kind == "nan-inf"


@pytest.mark.slow
def test_the_reducer_drops_the_flags_a_failure_does_not_need(inductor):
    """The denormal flush needs -funsafe-math-optimizations only: the other flags, dynamic and
    the marks go; the graph's ceil stays."""
    graph = _ceil_of_denormals()
    config = InductorConfig(dynamic=True, mark_dynamic="first", flags=(
        ("cpp.enable_unsafe_math_opt_flag", True), ("cpp.simdlen", 256), ("split_reductions", False)))
    found = run_case(graph, inductor, options=Options(inductor_config=config))
    if found.outcome == Outcome.PASS:
        pytest.skip("this compiler does not set FTZ/DAZ under -funsafe-math-optimizations (gcc >= 13)")
    case = Case(graph, "inductor", outcome=found.outcome, signature=found.signature,
                options=Options(inductor_config=config), check_strides=True)
    reduction = reduce_case(case, "inductor", workers=2, timeout=120)
    assert reduction.options == UNSAFE_MATH
    assert [n.op for n in reduction.graph.nodes] == ["ceil"]


@pytest.mark.slow
def test_the_repro_compiles_with_the_case_configuration(inductor, tmp_path):
    """The pt2-template repro of ceil on denormals: exit 1 with the flushing flag (its compare
    is eager's), exit 0 with Inductor's defaults; it prints the versions and calls torch.compile."""
    graph = _ceil_of_denormals()
    signature = Signature("mismatch", "inductor", "run", "values", "float")
    codes = []
    for options in (UNSAFE_MATH, Options()):
        source = repro_files(graph, inductor.for_case(options), signature, inductor.versions())["repro.py"]
        assert "torch.compile(fn, **COMPILE)" in source and "torch " in source
        (tmp_path / "repro.py").write_text(source)
        run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        codes.append(run.returncode)
    assert codes == [1, 0]


def _cache_listing(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.mark.slow  # 15 s: cold Inductor compiles in a pool (over the fast budget, issue 36)
def test_a_case_pool_compiles_into_a_kernel_cache_of_its_own(tmp_path, monkeypatch):
    """Whatever cache the environment names (the machine's, where an earlier run may have left the
    kernel), the pool's workers compile into the pool's own directory, which goes with the pool:
    otherwise a compile that hangs stops hanging, for the reducer too, once any process has let it
    finish."""
    from fuzzfuse.pool import case_pool, graph_job, run_jobs
    from fuzzfuse.verdict import judge

    machine = tmp_path / "machine-cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(machine))
    graph = _ceil_of_denormals()
    with case_pool("inductor", 1, 300) as pool:
        before = _cache_listing(machine)
        own = Path(pool.env_of(0)["TORCHINDUCTOR_CACHE_DIR"])
        assert judge("inductor", run_jobs(pool, [graph_job(0, "inductor", graph, 300)])[0]).outcome == Outcome.PASS
        assert any(name.endswith(".so") for name in _cache_listing(own))
        assert _cache_listing(machine) == before
    assert not own.exists()


@pytest.mark.slow  # 18 s: a cold Inductor compile in a fresh process (over the fast budget, issue 36)
def test_a_repro_run_starts_with_an_empty_kernel_cache_of_its_own(tmp_path):
    """export.run_repro (verification, the regression corpus, exported files): whatever cache the
    caller's environment names, the repro compiles into an empty one inside its work directory."""
    from fuzzfuse.export import run_repro

    machine, work = tmp_path / "machine-cache", tmp_path / "work"
    work.mkdir()
    (work / "repro.py").write_text(
        "import os, torch\n"
        "from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
        "count = lambda: sum(len(files) for *_, files in os.walk(cache_dir()))\n"
        "before = count()\n"
        "torch.compile(lambda x: x.sin() + 1)(torch.ones(8))\n"
        "print(cache_dir(), before, count())\n")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(machine), "TRITON_CACHE_DIR": str(machine / "triton")}
    code, out, err = run_repro(work, 300, env)
    assert code == 0, err
    where, before, after = out.split()
    assert Path(where).is_relative_to(work) and before == "0" and int(after) > 0
    assert not machine.exists()


def test_cpu_inductors_sum_order_amplified_past_float32_is_ill_conditioned_not_a_mismatch(inductor):
    """Real CPU Inductor sums 40 float32 terms in its vectorized order, eager in its own: the sums
    differ by ulps, which tan(sum * 3e5) amplifies to any value. The plain oracle reports some of
    these cases as wrong values; judged whole (run_case), the first two are the documented
    ill-conditioning."""
    from fuzzfuse.ir import make_inputs, run_eager
    from fuzzfuse.oracle import compare_output

    judged = []
    for seed in range(300):
        b = GraphBuilder()
        x = b.tensor((4, 40), values=Values(seed=seed))
        graph = b.build([b.add("tan", b.add("mul", b.add("sum", x, dims=[1], keepdim=False), 3e5))])
        inputs = make_inputs(graph)
        (eager,), _ = run_eager(graph, inputs)
        (ref64,), _ = run_eager(graph, inputs, upcast=True)
        fused = inductor.compile(graph).run(inputs, None).outputs[0]
        if compare_output(0, fused, eager, ref64, 40) is None:
            continue
        found = run_case(graph, inductor)
        judged.append((seed, found.outcome, found.signature.kind if found.signature else None))
        if len(judged) == 2:
            break
    assert judged and all(outcome == Outcome.DOCUMENTED and kind == "ill-conditioned" for _, outcome, kind in judged), judged


SERIAL_SUM_CHECK = """
import sys
from pathlib import Path
from fuzzfuse.backends import get_backend
from fuzzfuse.corpus import load_case
from fuzzfuse.ir import make_inputs, run_eager
from fuzzfuse.job import run_case
from fuzzfuse.oracle import compare_output
case = load_case(Path(sys.argv[1]))
inductor = get_backend(case.backend).for_case(case.options)
inputs = make_inputs(case.graph)
(eager,), _ = run_eager(case.graph, inputs)
(ref64,), _ = run_eager(case.graph, inputs, upcast=True)
fused = inductor.compile(case.graph).run(inputs, None).outputs[0]
found = run_case(case.graph, inductor)
print(compare_output(0, fused, eager, ref64, 19) is not None, found.outcome.value, found.signature.kind)
"""


@pytest.mark.slow
def test_a_sum_a_loop_accumulates_term_by_term_amplified_by_exp_is_ill_conditioned():
    """A 300-s CPU campaign (AVX-512 host, unvectorized C++ under ATEN_CPU_CAPABILITY=default)
    reported exp(sum over dim 0 of 19 copies of 1.666) as a new wrong value: Inductor's loop adds
    the rows one at a time in float32, 3 ulps from the exact sum where eager's cascade sum is 1, and
    exp multiplies that by 31.65. Rounding runs that shuffle eager's own sum of equal terms
    never differ; runs that accumulate term by term (Op.from_running_sum) do. Real Inductor CPU, in
    a process pinned to the capability the case was found under."""
    case = Path(__file__).parent / "data" / "inductor_cpu_serial_sum_exp_case.json"
    run = subprocess.run([sys.executable, "-c", SERIAL_SUM_CHECK, str(case)], capture_output=True, text=True,
                         env={**os.environ, "ATEN_CPU_CAPABILITY": "default"}, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["True", "documented-difference", "ill-conditioned"]


def test_cpu_inductor_eliding_an_explicit_half_round_trip_is_its_documented_default():
    """x.half().float() is x under CPU Inductor's default configuration: pytorch#185337 was fixed
    only under emulate_precision_casts ("Default-config behavior is unchanged", pull 185847). The
    arbiter honours the cast (so the pair elided by a fuser that promises it is a bug), and CPU
    Inductor declares the elision: a 300-s CPU campaign reported its cast pair as a new bug the
    hour the arbiter changed. Real CPU Inductor: the elided values, documented."""
    from fuzzfuse.ir import make_inputs, run_eager

    b = GraphBuilder()
    x = b.tensor((5, 4), "float32", values=Values(exact=encode_exact(torch.arange(20.0).reshape(5, 4) / 7.0)))
    y = b.add("cast", b.add("cast", x, dtype="float16"), dtype="float32")
    graph = b.build([y, b.add("sum", y, dims=[1], keepdim=False)])
    inductor = get_backend("inductor:cpu")
    inputs = make_inputs(graph)
    assert not torch.equal(inductor.run(graph, inputs).outputs[0], run_eager(graph, inputs)[0][0])  # elided
    result = run_case(graph, inductor)
    assert result.outcome is Outcome.DOCUMENTED and result.signature.kind == str(Difference.FP32_INTERMEDIATES), \
        result.detail
    for device in ("cpu", "cuda"):  # CUDA: pytorch#183761, and the H100's x.to(bfloat16).float() is x
        assert Difference.LOWP_CASTS_ELIDED in InductorConfig().documented_differences(device)
        assert Difference.LOWP_CASTS_ELIDED not in InductorConfig(
            flags=(("emulate_precision_casts", True),)).documented_differences(device)


def test_an_integer_cast_through_bfloat16_is_elided_as_a_float_one(inductor):
    """The H100 campaign of 2026-12-07 reduced int32 -2500 -> bfloat16 -> int32 to a "new" bug:
    CUDA Inductor gives -2500, eager -2496 (bfloat16 holds -2496 and -2504 there). Inductor's
    lowering gives every cast to fp16/bf16 the compute type float32, whatever its source, so the
    elided pair of an integer is its documented default as a float's is; under
    emulate_precision_casts the same output is a bug."""
    x = torch.tensor(-2500, dtype=torch.int32)
    b = GraphBuilder()
    graph = b.build([b.add("cast", b.add("cast", b.tensor((), "int32", values=_exact(x)), dtype="bfloat16"),
                           dtype="int32")])

    class Result:  # what CUDA Inductor returned on the H100
        outputs = [torch.tensor(-2500, dtype=torch.int32)]
        context = ""
    eager = [x.to(torch.bfloat16).to(torch.int32)]
    assert eager[0].item() == -2496
    for options, outcome in ((Options(), Outcome.DOCUMENTED), (_options(emulate_precision_casts=True), Outcome.MISMATCH)):
        judged = _judge_outputs(graph, graph.infer_types(), inductor, Result, eager, [eager[0].double()], {}, False,
                                *design_references(inductor, options, graph, [x], eager))
        assert judged.outcome == outcome, (options, judged.detail)


def test_a_matmul_of_one_term_read_by_an_add_is_a_product_a_fused_multiply_add_reads():
    """The H100 campaign of 2026-12-07 reduced matmul(x, x) -> neg -> add(., v0) of a 1x1 -632.786
    under max-autotune to a "new" bug: CUDA Inductor gives 0.0068686157, eager 0. Under
    coordinate-descent tuning Inductor computes an mm of one row as a pointwise mul, and Triton
    contracts the add that reads it into a fused multiply-add: x * x unrounded minus x * x rounded
    is 0.0068686157, the documented contraction (ill-conditioned) as a mul's is. A matmul that sums
    two terms is no product: the same kind of wrong value stays a bug."""
    from fuzzfuse.backends.inductor import InductorBackend
    from fuzzfuse.corpus import load_case
    from fuzzfuse.ir import run_eager
    from fuzzfuse.job import rounding_runs

    case = load_case(Path(__file__).parent / "data" / "inductor_matmul_one_term_fma_case.json")
    backend = InductorBackend("cuda").for_case(case.options)

    def judged(graph, x, fused):
        class Result:  # what CUDA Inductor returned on the H100 (for the one-term graph)
            outputs = [fused]
            context = ""
        eager, _ = run_eager(graph, [x])
        ref64, _ = run_eager(graph, [x], upcast=True)
        return _judge_outputs(graph, graph.infer_types(), backend, Result, eager, ref64, {}, False,
                              *design_references(backend, case.options, graph, [x], eager),
                              rounded=lambda: rounding_runs(graph, [x], eager))

    x = torch.tensor([[-632.7862548828125]])
    assert [n.op for n in case.graph.nodes] == ["matmul", "neg", "add"]
    one_term = judged(case.graph, x, torch.tensor([[0.006868615746498108]]))
    assert (one_term.outcome, one_term.signature.kind) == (Outcome.DOCUMENTED, Difference.ILL_CONDITIONED.value)
    far = judged(case.graph, x, torch.tensor([[0.5]]))
    assert far is not None and far.outcome == Outcome.MISMATCH
    two = torch.tensor([[-632.7862548828125, 1.1], [3.3, -632.7862548828125]])
    exact = (two.double() @ two.double())[0, 0]
    residual = torch.tensor([[float(exact - exact.float().double()), 0.0], [0.0, 0.0]])
    assert residual[0, 0] != 0
    two_terms = judged(case.graph, two, residual)
    assert two_terms is not None and two_terms.outcome == Outcome.MISMATCH
