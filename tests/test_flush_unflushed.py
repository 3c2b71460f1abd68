"""A fuser that flushes denormals by design, run again with its flush turned off: a wrong value it
then no longer computes is the flush's, a documented difference (fuzzfuse.job.unflushed_outputs).
Four Inductor CUDA finds of a 600-s campaign (tests/data/flush_cases) were this: eager on flushed
inputs did not explain them, and each repro gave eager's value with eager_numerics.disable_ftz on
the H200 (2026-12-03). The check itself has not yet run there: the last test skips without a GPU.
A fifth, atan2(x, x) -> tan -> sqrt of a bf16 subnormal (an H100 campaign, 2026-12-06), replayed
on the H100 as documented once bf16 subnormals counted (b11d6c4)."""
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fuzzfuse.backends import get_backend
from fuzzfuse.backends.inductor_config import InductorConfig
from fuzzfuse.backends.options import Options
from fuzzfuse.corpus import load_case
from fuzzfuse.ir import make_inputs, run_eager
from fuzzfuse.job import run_case, unflushed_outputs
from fuzzfuse.verdict import Outcome

CASES = sorted((Path(__file__).parent / "data" / "flush_cases").glob("*.json"))
UNSAFE = Options(inductor_config=InductorConfig(flags=(("cpp.enable_unsafe_math_opt_flag", True),)))


def test_the_flush_is_turned_off_by_the_flag_of_its_device_and_only_where_it_is_on():
    assert InductorConfig().without_flush("cuda") == InductorConfig(flags=(("eager_numerics.disable_ftz", True),))
    assert InductorConfig(flags=(("eager_numerics.disable_ftz", True),)).without_flush("cuda") is None
    assert UNSAFE.inductor_config.without_flush("cpu") == InductorConfig()
    assert InductorConfig().without_flush("cpu") is None  # CPU's C++ flushes only under unsafe math


@pytest.mark.slow  # a C++ compile
def test_the_fuser_runs_again_unflushed_only_where_a_denormal_is_there_to_flush():
    """Real CPU Inductor under -funsafe-math-optimizations, on sin(x) / x of a subnormal x: run
    again without the flag it computes eager's value; where nothing can flush, or no flag turns
    the flush off, it is not run again."""
    case = load_case(CASES[-1])
    assert case.graph.nodes[0].op == "sin"
    inductor = get_backend("inductor:cpu")
    inputs = make_inputs(case.graph, "cpu")
    (plain,) = unflushed_outputs(inductor, case.graph, UNSAFE, inputs)
    assert torch.equal(plain, run_eager(case.graph, inputs)[0][0])
    assert unflushed_outputs(inductor, case.graph, Options(), inputs) == []
    assert unflushed_outputs(inductor, case.graph, UNSAFE, [torch.ones_like(inputs[0])]) == []


@pytest.mark.slow  # a C++ compile
def test_a_bfloat16_subnormal_is_one_the_fuser_flushes_too():
    """A bf16 value is computed in float32, whose exponent range it shares: a bf16 subnormal is an
    fp32 subnormal there, which the flush reads as zero (an H100 campaign's atan2(x, x) -> tan ->
    sqrt of a bf16 subnormal was nan on Inductor CUDA, eager's value with the flush turned off). So
    the fuser runs again unflushed for it as for a float32 one."""
    case = load_case(CASES[-1])
    spec = case.graph.inputs[0]
    graph = replace(case.graph, inputs=(replace(spec, dtype="bfloat16"),))
    subnormal = torch.tensor(1e-39, dtype=torch.bfloat16)
    assert subnormal != 0 and subnormal.abs() < torch.finfo(torch.float32).tiny
    (plain,) = unflushed_outputs(get_backend("inductor:cpu"), graph, UNSAFE, [subnormal])
    assert torch.equal(plain, run_eager(graph, [subnormal])[0][0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the flush is Triton's")
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_a_cuda_wrong_value_triton_computes_only_when_it_flushes_is_documented(path):
    case = load_case(path)
    result = run_case(case.graph, get_backend("inductor:cuda"), options=case.options)
    assert result.outcome is Outcome.DOCUMENTED, result.detail
