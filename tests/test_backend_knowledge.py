"""What a backend knows of itself is declared by its class, as data: the component its route
reaches, its display name, how it flushes denormals on each device; the registry reads them by name
without making a backend (a case file's `backend` string), and the consumers (root causes, repro
headers, titles, the flushed reference) read nothing else."""
import sys

import pytest
import torch

from fuzzfuse.backends import BACKENDS
from fuzzfuse.backends.base import Backend
from fuzzfuse.backends.dynamo import DynamoBackend
from fuzzfuse.backends.findings import Difference, FlushStyle
from fuzzfuse.backends.options import Options
from fuzzfuse.backends.registry import _registered_class, component, computes_from, declared, display_name
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.graph import Values
from fuzzfuse.ir.values import encode_exact
from fuzzfuse.job import design_references, flushed_references, flushed_run

# What the tables these attributes replaced (rootcause.COMPONENTS, repro.BACKEND_NAMES) said: every
# output string (identity keys, repro headers, titles) stays what it was.
COMPONENTS = {
    "eager": "eager",
    "nvfuser": "nvfuser", "aot:nvfuser": "nvfuser", "torchscript:nvfuser": "nvfuser",
    "torchscript:nnc": "nnc", "aot:nnc": "nnc",
    "torchscript:onednn": "onednn", "aot:onednn": "onednn",
    "inductor": "inductor", "dynamo:inductor": "inductor",
    "torchscript:frontend": "torchscript:frontend", "aot:frontend": "aot:frontend", "aot:eager": "aot:eager",
    "dynamo:eager": "dynamo:eager", "dynamo:aot_eager": "dynamo:aot_eager",
}
DISPLAY_NAMES = {
    "eager": "eager",
    "torchscript:nnc": "NNC", "torchscript:onednn": "oneDNN Graph", "torchscript:nvfuser": "nvFuser (TorchScript)",
    "torchscript:frontend": "TorchScript (no fuser)", "aot:nnc": "NNC (aot_autograd)",
    "aot:onednn": "oneDNN Graph (aot_autograd)", "aot:nvfuser": "nvFuser (aot_autograd)",
    "aot:frontend": "aot_autograd (no fuser)", "aot:eager": "aot_autograd's decompositions (aot_eager)",
    "nvfuser": "nvFuser", "inductor": "Inductor",
    "dynamo:inductor": "dynamo:inductor", "dynamo:aot_eager": "dynamo:aot_eager",
}


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_registered_backend_declares_its_component_display_name_and_flush_style(name):
    cls = _registered_class(name)
    assert cls is not None and issubclass(cls, Backend)
    assert isinstance(cls.component, str) and cls.component
    assert isinstance(cls.display_name, str) and cls.display_name
    assert all(isinstance(s, FlushStyle) for s in cls.flush_style.values())
    assert set(cls.flush_style) <= {"cpu", "cuda"}
    # the registry reads the class as it is, without making a backend
    assert component(name) == cls.component and display_name(name) == cls.display_name
    assert declared(name, "flush_style") is cls.flush_style


@pytest.mark.parametrize("name", list(COMPONENTS))
def test_the_registry_reads_a_routes_component_by_name(name):
    assert component(name) == COMPONENTS[name]


@pytest.mark.parametrize("name", list(DISPLAY_NAMES))
def test_the_registry_reads_a_routes_display_name_by_name(name):
    assert display_name(name) == DISPLAY_NAMES[name]


def test_dynamo_names_take_the_fuser_of_a_registered_torch_compile_backend_and_keep_their_name():
    """dynamo:inductor is Inductor's fuser (InductorBackend is a DynamoBackend): its component and
    what it computes from another op; its public name is its own. dynamo:eager is torch.compile's
    eager backend, not fuzzfuse's EagerBackend: nothing of EagerBackend's."""
    assert component("dynamo:inductor") == "inductor" and computes_from("dynamo:inductor")["elu"] == "expm1"
    assert display_name("dynamo:inductor") == "dynamo:inductor"
    assert declared("dynamo:inductor", "flush_style") is DynamoBackend.flush_style
    assert component("dynamo:eager") == "dynamo:eager" and display_name("dynamo:eager") == "dynamo:eager"
    assert component("dynamo:pkg.mod:fn") == "dynamo:pkg.mod:fn" and display_name("dynamo:pkg.mod:fn") == "dynamo:pkg.mod:fn"


def test_a_name_that_would_import_code_falls_back_without_importing_it(tmp_path, monkeypatch):
    """A case file may name `custom:...` or `dynamo:package.module:function`: reading what such a
    backend declares must not import the module the name chooses."""
    (tmp_path / "knowledge_probe.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("custom:knowledge_probe:Backend", "dynamo:knowledge_probe:backend"):
        assert component(name) == name and display_name(name) == name and not computes_from(name)
        assert declared(name, "flush_style", {}) == {}
    assert "knowledge_probe" not in sys.modules
    assert declared("custom:knowledge_probe:Backend", "device", "cpu") == "cpu"
    assert component("no-such-backend") == "no-such-backend" and declared("no-such-backend", "device") is None


def test_inductor_declares_its_flush_per_device():
    from fuzzfuse.backends.inductor import InductorBackend

    assert dict(InductorBackend.flush_style) == {"cpu": FlushStyle.DAZ_FTZ, "cuda": FlushStyle.TRITON_FP32}
    assert InductorBackend.documented_differences is not Backend.documented_differences


def _tan_eq_of_denormals():
    """tan(x) == x for denormal x: True where every read flushes (x86's DAZ), False where only
    arithmetic does (Triton: eq reads x as it is)."""
    x = torch.tensor([9.214186204124655e-39, -1.1047601674594851e-38])
    b = GraphBuilder()
    t = b.tensor([2], values=Values(exact=encode_exact(x)))
    return b.build([b.add("eq", b.add("tan", t), t)]), x


def test_the_flushed_reference_follows_the_declared_style():
    graph, x = _tan_eq_of_denormals()
    [(daz, _)] = flushed_references(graph, [x], FlushStyle.DAZ_FTZ)
    (triton, _), _ = flushed_references(graph, [x], FlushStyle.TRITON_FP32)
    assert torch.equal(daz[0], flushed_run(graph, [x], daz=True)[0][0])
    assert torch.equal(triton[0], flushed_run(graph, [x], daz=True, as_triton=True)[0][0])
    assert not torch.equal(daz[0], triton[0])
    assert flushed_references(graph, [x], FlushStyle.NONE) is None


class _Flushing(Backend):
    """A backend that documents a flush, in Triton's style on CPU (no real one does)."""

    name = "custom:tests:Flushing"
    flush_style = {"cpu": FlushStyle.TRITON_FP32}

    def documented_differences(self, options):
        return frozenset({Difference.DENORMAL_FLUSH})


def test_the_job_judges_a_flush_by_the_style_the_backend_declares_for_its_device():
    """Not by the inputs' device: a backend that flushes as Triton does on CPU gets Triton's
    reference there; one that declares no style for its device gets none."""
    graph, x = _tan_eq_of_denormals()
    eager = [torch.eq(torch.tan(x), x)]
    flushed, _, _, _ = design_references(_Flushing(), Options(), graph, [x], eager)
    assert torch.equal(flushed()[0][0][0], flushed_run(graph, [x], daz=True, as_triton=True)[0][0])

    class Elsewhere(_Flushing):
        flush_style = {"cuda": FlushStyle.TRITON_FP32}
    flushed, _, _, _ = design_references(Elsewhere(), Options(), graph, [x], eager)
    assert flushed() is None  # no reference: a flush there is judged a mismatch
    flushed, _, _, _ = design_references(Backend(), Options(), graph, [x], eager)
    assert flushed is None


def test_triton_flushes_where_its_math_library_reads_a_denormal_not_where_its_arithmetic_does():
    """Seen on the H200 (Inductor CUDA, bfloat16): x * rsqrt(x) of a denormal x gave inf, eager
    1e-19. rsqrt (a libdevice call, compiled with denormals flushed) read x as 0; the product
    read x as it is. Neither the run that flushes every arithmetic read (nan) nor the plain run
    says inf, so this documented flush was reduced as a bug; the run that flushes only where a
    math-library call reads or writes (`math_call_run`) gives it. A wrong value beside it in
    the same output is still a mismatch."""
    from fuzzfuse.job import _judge_outputs, math_call_run
    from fuzzfuse.ir.interp import run_eager
    from fuzzfuse.verdict import Outcome

    x = torch.tensor([9.183549615799121e-39, 4.0], dtype=torch.bfloat16)
    assert 0 < x[0].abs() < torch.finfo(torch.float32).tiny
    b = GraphBuilder()
    t = b.tensor([2], "bfloat16", values=Values(exact=encode_exact(x)))
    graph = b.build([b.add("mul", t, b.add("rsqrt", t))])
    (eager, _), (ref64, _) = run_eager(graph, [x]), run_eager(graph, [x], upcast=True)
    assert 0 < eager[0][0] < 1e-18
    every_read = flushed_run(graph, [x], daz=True, as_triton=True)[0][0]
    assert every_read[0].isnan()
    assert math_call_run(graph, [x])[0][0][0] == float("inf")

    def judged(fused):
        class Result:
            outputs, context = [fused], ""
        flushed, _, _, _ = design_references(_Flushing(), Options(), graph, [x], eager)
        return _judge_outputs(graph, graph.infer_types(), _Flushing(), Result, eager, ref64, {}, False, flushed)

    documented = judged(torch.tensor([float("inf"), 2.0], dtype=torch.bfloat16))
    assert documented.outcome == Outcome.DOCUMENTED
    assert documented.signature.kind == Difference.DENORMAL_FLUSH.value
    assert judged(torch.tensor([float("inf"), 3.0], dtype=torch.bfloat16)).outcome == Outcome.MISMATCH
    assert judged(torch.tensor([float("-inf"), 2.0], dtype=torch.bfloat16)).outcome == Outcome.MISMATCH


def test_approximate_math_is_documented_only_where_declared_and_only_near_float64():
    """Seen on the H200: Inductor CUDA's exp(29) under use_fast_math gave 3.9313282e12 (eager
    3.9313342e12, 1.5e-6 off), and a campaign reduced it as a new bug. The flag asks for an
    approximate exp (ex2.approx of x * log2(e)): within APPROXIMATE_RTOL of float64 it is
    documented where the configuration declares it; farther, or where it does not, a mismatch."""
    from fuzzfuse.backends.inductor_config import InductorConfig
    from fuzzfuse.job import _judge_outputs
    from fuzzfuse.ir.interp import run_eager
    from fuzzfuse.verdict import Outcome

    fast = InductorConfig(flags=(("use_fast_math", True),))
    assert Difference.APPROXIMATE_MATH in fast.documented_differences("cuda")
    assert Difference.APPROXIMATE_MATH not in fast.documented_differences("cpu")
    assert Difference.APPROXIMATE_MATH not in InductorConfig().documented_differences("cuda")

    class FastMath(Backend):
        name = "custom:tests:FastMath"

        def documented_differences(self, options):
            return frozenset({Difference.APPROXIMATE_MATH})

    x = torch.tensor([1.0, 29.0])
    b = GraphBuilder()
    graph = b.build([b.add("exp", b.tensor([2], values=Values(exact=encode_exact(x))))])
    (eager, _), (ref64, _) = run_eager(graph, [x]), run_eager(graph, [x], upcast=True)

    def judged(backend, fused):
        class Result:
            outputs, context = [torch.tensor(fused)], ""
        return _judge_outputs(graph, graph.infer_types(), backend, Result, eager, ref64, {}, False,
                              *design_references(backend, Options(), graph, [x], eager))

    h200 = [2.7182817459106445, 3931328217088.0]
    documented = judged(FastMath(), h200)
    assert documented.outcome == Outcome.DOCUMENTED
    assert documented.signature.kind == Difference.APPROXIMATE_MATH.value
    assert judged(Backend(), h200).outcome == Outcome.MISMATCH
    assert judged(FastMath(), [2.7182817459106445, 3.9314e12]).outcome == Outcome.MISMATCH  # 1.7e-5 off

    # exp(89) overflows float32 in eager and in the fuser, not in float64 (4.5e38): float64's value
    # as float32 holds it is the infinity both give. An H200 campaign reduced such an arange as new.
    x = over = torch.tensor([29.0, 89.0])
    b = GraphBuilder()
    graph = b.build([b.add("exp", b.tensor([2], values=Values(exact=encode_exact(over))))])
    (eager, _), (ref64, _) = run_eager(graph, [over]), run_eager(graph, [over], upcast=True)
    assert torch.isinf(eager[0][1]) and not torch.isinf(ref64[0][1])
    assert judged(FastMath(), [3931328217088.0, float("inf")]).outcome == Outcome.DOCUMENTED
