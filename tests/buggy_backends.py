"""Deliberately buggy backends: test fixtures for the campaign and the reducer, loaded as
`custom:tests.buggy_backends:<Class>`. Each misbehaves on a known pattern, so tests know the
minimal trigger a reduction must end at. They are never the only evidence that something works:
the real fusers are tested beside them."""
from __future__ import annotations

import ctypes
import dataclasses
import os
import time

import torch

from fuzzfuse.backends.base import BackendError, Compiled, RunResult
from fuzzfuse.backends.eager import EagerBackend
from fuzzfuse.backends.findings import FlushStyle
from fuzzfuse.backends.options import Options
from fuzzfuse.ir import OPS, Graph, flush_denormals, run_eager
from fuzzfuse.verdict import Difference


def _has_sum_into_sigmoid(graph: Graph) -> bool:
    sums = {n.name for n in graph.nodes if n.op == "sum"}
    return any(n.op == "sigmoid" and set(n.refs()) & sums for n in graph.nodes)


class _Buggy(EagerBackend):
    supports_backward = False

    def run(self, graph: Graph, inputs: list) -> RunResult:
        self.misbehave(graph)
        return RunResult(run_eager(graph, inputs)[0], fused=True)

    def misbehave(self, graph: Graph) -> None:
        pass


class CrashOnSumSigmoid(_Buggy):
    """Compile-stage crash, with a C++-style assert location, when a sum feeds a sigmoid."""
    name = "custom:tests.buggy_backends:CrashOnSumSigmoid"

    def misbehave(self, graph: Graph) -> None:
        if _has_sum_into_sigmoid(graph):
            raise BackendError("compile", RuntimeError(
                "INTERNAL ASSERT FAILED at /src/fuser/csrc/reduction_sched.cpp:77, reduction T3_l_float[iS2{7}] "
                "feeds a transcendental"))


class CrashOnSumSigmoidUntilFixed(CrashOnSumSigmoid):
    """CrashOnSumSigmoid until the file named by $FUZZFUSE_TEST_FIXED exists: a failure that a
    campaign confirms and that is gone when its reduction starts."""
    name = "custom:tests.buggy_backends:CrashOnSumSigmoidUntilFixed"

    def misbehave(self, graph: Graph) -> None:
        if not os.path.exists(os.environ["FUZZFUSE_TEST_FIXED"]):
            super().misbehave(graph)


class CrashOnceOnSumSigmoid(_Buggy):
    """A crash with a message of its own (no assert location) on the first sum feeding a sigmoid
    a process runs, never again: what a full device or a race does, which re-runs do not show."""
    name = "custom:tests.buggy_backends:CrashOnceOnSumSigmoid"
    crashed = False

    def misbehave(self, graph: Graph) -> None:
        if _has_sum_into_sigmoid(graph) and not CrashOnceOnSumSigmoid.crashed:
            CrashOnceOnSumSigmoid.crashed = True
            raise BackendError("run", RuntimeError("the reduction kernel raced its neighbour and lost"))


class OutOfMemoryOnExp(_Buggy):
    """What the CUDA caching allocator raises when other processes fill the device, on exp."""
    name = "custom:tests.buggy_backends:OutOfMemoryOnExp"

    def misbehave(self, graph: Graph) -> None:
        if any(n.op == "exp" for n in graph.nodes):
            raise BackendError("run", torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of 79.18 GiB of which "
                "9.94 MiB is free. Process 720 has 14.34 GiB memory in use. Process 718 has 17.14 GiB memory in use."))


class SlowCrashOnSumSigmoid(CrashOnSumSigmoid):
    """CrashOnSumSigmoid that takes a second to crash: a reduction (dozens of failing candidates)
    then needs far more time than a short campaign has left (tests of --time's bound on the whole
    run), while fuzzing stays fast."""
    name = "custom:tests.buggy_backends:SlowCrashOnSumSigmoid"

    def misbehave(self, graph: Graph) -> None:
        if _has_sum_into_sigmoid(graph):
            time.sleep(1.0)
        super().misbehave(graph)


class CrashOnCast(_Buggy):
    """A second, different crash, for no-slippage tests: any cast to int32."""
    name = "custom:tests.buggy_backends:CrashOnCast"

    def misbehave(self, graph: Graph) -> None:
        if _has_sum_into_sigmoid(graph):
            CrashOnSumSigmoid.misbehave(self, graph)
        if any(n.op == "cast" and n.attrs.get("dtype") == "int32" for n in graph.nodes):
            raise BackendError("run", RuntimeError("INTERNAL ASSERT FAILED at /src/fuser/csrc/cast.cpp:12: bad cast"))


class WrongOnExp(_Buggy):
    """Silently wrong values: every float output downstream of `exp` is off by 1%."""
    name = "custom:tests.buggy_backends:WrongOnExp"

    def run(self, graph: Graph, inputs: list) -> RunResult:
        outs = run_eager(graph, inputs)[0]
        if any(n.op == "exp" for n in graph.nodes):
            outs = [o * 1.01 if o.is_floating_point() else o for o in outs]
        return RunResult(outs, fused=True)


class WrongOnExpAndOnCos(_Buggy):
    """Two bugs behind one coarse signature (a float value mismatch): float outputs downstream of
    `exp` are 1% too large, those downstream of `cos` 1% too small."""
    name = "custom:tests.buggy_backends:WrongOnExpAndOnCos"

    def run(self, graph: Graph, inputs: list) -> RunResult:
        outs = run_eager(graph, inputs)[0]
        for op, factor in (("exp", 1.01), ("cos", 0.99)):
            if any(n.op == op for n in graph.nodes):
                outs = [o * factor if o.is_floating_point() else o for o in outs]
        return RunResult(outs, fused=True)


class SegfaultOnTanh(_Buggy):
    """Kills the process (SIGSEGV) on any tanh."""
    name = "custom:tests.buggy_backends:SegfaultOnTanh"

    def misbehave(self, graph: Graph) -> None:
        if any(n.op == "tanh" for n in graph.nodes):
            ctypes.string_at(0)


class HangOnCos(_Buggy):
    """Never returns on any cos."""
    name = "custom:tests.buggy_backends:HangOnCos"

    def misbehave(self, graph: Graph) -> None:
        if any(n.op == "cos" for n in graph.nodes):
            time.sleep(3600)




class _SigmoidWrongGrad(torch.autograd.Function):
    """sigmoid with a wrong backward: grad * y instead of grad * y * (1 - y)."""

    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class _WrongEagerForm(EagerBackend):
    """Eager PyTorch with one op's eager form swapped for a wrong one (`op`, `wrong`), marked fused."""
    op: str
    wrong: staticmethod

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        original = OPS[self.op]
        OPS[self.op] = dataclasses.replace(original, eager=self.wrong)
        try:
            result = super().run(graph, inputs, grad_outputs)
        finally:
            OPS[self.op] = original
        result.fused = result.backward_fused = True
        return result


class WrongGradOnSigmoid(_WrongEagerForm):
    """Forward right, backward wrong: the gradient through every sigmoid misses its (1 - y) factor."""
    name = "custom:tests.buggy_backends:WrongGradOnSigmoid"
    op, wrong = "sigmoid", staticmethod(_SigmoidWrongGrad.apply)


class WrongShapeOnAmax(_WrongEagerForm):
    """Every amax keeps its reduced dims (the shape bug of fusers that drop a squeeze): in training
    mode the fused output no longer fits its upstream gradient."""
    name = "custom:tests.buggy_backends:WrongShapeOnAmax"
    op, wrong = "amax", staticmethod(lambda x, dims, keepdim: torch.amax(x, dims, keepdim=True))


class StaleStrides(EagerBackend):
    """Compiles once and reruns on new strides, but reads every later input with the strides of
    the first (a kernel that baked its input strides in): right on the inputs it was compiled
    for, wrong on a slice of another step."""
    reuses_compiled = reruns_new_strides = True

    def compile(self, graph: Graph, options: Options = Options()) -> "Compiled":
        return _StaleStridesCompiled(self, graph, options)


class _StaleStridesCompiled(Compiled):
    first: list | None = None

    def run(self, inputs: list, grad_outputs: list | None = None) -> RunResult:
        compile_seconds = 0.0
        if self.first is None:  # a compile that costs what a real one does: extra sets pay off
            self.first, compile_seconds = [t.stride() for t in inputs], 0.1
            time.sleep(compile_seconds)
        read = [torch.as_strided(t, t.shape, s) for t, s in zip(inputs, self.first)]
        return RunResult(run_eager(self.graph, read)[0], fused=True, compile_seconds=compile_seconds)

    def accepts(self, graph: Graph, inputs: list) -> bool:
        return [t.dim() for t in inputs] == [len(s) for s in self.first or []]


class FlushesAndLosesNegZeroSign(_WrongEagerForm):
    """A fuser that flushes float32 denormals by design (it declares DENORMAL_FLUSH, x86's FTZ/DAZ
    style) and whose neg of +0.0 is +0.0 (`0 - x`): Inductor's on the H200, where ceil of a
    bfloat16 subnormal flushes to 0 before neg and rsqrt show the lost sign."""
    name = "custom:tests.buggy_backends:FlushesAndLosesNegZeroSign"
    supports_backward = False
    flush_style = {"cpu": FlushStyle.DAZ_FTZ}
    op, wrong = "neg", staticmethod(lambda x: torch.zeros_like(x) - x)

    def documented_differences(self, options: Options) -> frozenset:
        return frozenset({Difference.DENORMAL_FLUSH})

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        return super().run(graph, [flush_denormals(x) for x in inputs], grad_outputs)
