"""aot:nvfuser: nvFuser compiles the forward and backward graphs of a training step.

aot_autograd (functorch) traces the case into aten FX graphs and partitions the joint graph into
a forward and a backward, as for `aot:nnc`. Each FX graph is translated into the IR
(`backends.from_aten`) when aot_autograd compiles it, then emitted as one nvfuser_direct
FusionDefinition at its first call, when the real inputs' strides are known (the backward's
inputs are saved activations and upstream gradients). The backward fusion is what a training
step runs: saved activations, broadcast gradients, reductions of gradients.

Failures carry nvFuser's error text like the `nvfuser` backend's, with the stages "compile"/"run"
for the forward fusion and "backward-compile"/"backward-run" for the backward one. An aten op the
IR cannot express makes the case unsupported, naming the op.

A crash carries the failing fusion as a standalone nvfuser_direct script (random values, real
shapes, dtypes and strides) in its detail; a mismatch carries every fusion that ran. repro.py goes
through fuzzfuse (`generic_repro_code`): the backward fusion's exact inputs only exist inside
aot_autograd.
"""
from __future__ import annotations

import functools
from dataclasses import replace
import time

from ..ir import Graph, ScalarInput, compile_source
from ..ir.interp import input_gradients, with_leaves
from .aot import _tensor_function
from .base import BackendError, Compiled, Evidence, RunResult, Unavailable, Unsupported, generic_repro_code
from .from_aten import Translation, translate
from .nvfuser import NvFuserBackend, _stage, execute, first_run_evidence, fusion_failure
from .nvfuser_emit import emit
from .options import Options


@functools.cache
def decompositions() -> dict:
    """memory_efficient_fusion's table (the `*_backward` ops as pointwise aten ops), plus the
    softmax backwards, which the IR writes as ATen's own decomposition."""
    import torch
    from functorch.compile import default_decompositions
    from torch._decomp import get_decompositions
    aten = torch.ops.aten
    return {**default_decompositions,
            **get_decompositions([aten._softmax_backward_data, aten._log_softmax_backward_data])}


def _staged(phase: str, stage: str) -> str:
    """The stage name of the forward graph's `stage` ("compile", "run") in `phase`."""
    return stage if phase == "forward" else f"backward-{stage}"


class _Fusion:
    """One FX graph (the forward or the backward) as an nvFuser fusion."""

    def __init__(self, phase: str, translation: Translation, style: str, backend: NvFuserBackend):
        self.phase, self.translation, self.style, self.backend = phase, translation, style, backend
        self.fd = None
        self.script = ""  # the fusion as a standalone nvfuser_direct script, once emitted
        self.evidence = Evidence()
        self.compile_seconds = 0.0
        self.error: BackendError | None = None

    def __call__(self, *args) -> list:
        graph = self.translation.graph
        inputs = self.translation.inputs(list(args))
        if self.fd is not None:
            return self.translation.outputs(self.execute(inputs))
        strides = [tuple(x.stride()) for x in inputs]
        try:
            emission = emit(graph, self.style, strides, self.backend.static_sizes)
        except Unsupported as e:
            raise Unsupported(str(e), stage=_staged(self.phase, "compile")) from e
        self.script = emission.script(graph, strides)
        start = time.perf_counter()
        try:
            self.fd = self.backend.define(emission.source, graph)
        except Exception as e:
            raise self.failed("compile", e) from e
        outputs = self.execute(inputs)
        self.compile_seconds = time.perf_counter() - start
        self.evidence, _ = first_run_evidence(self.fd, graph, inputs, outputs)
        return self.translation.outputs(outputs)

    def execute(self, inputs: list) -> list:
        try:
            return execute(self.fd, inputs)
        except Exception as e:
            raise self.failed(_stage(self.fd, inputs, e), e) from e

    def failed(self, stage: str, cause: Exception) -> BackendError:
        """The error to raise, carrying the failing fusion as a standalone script (what an nvFuser
        bug report wants: the aot_autograd harness is not needed to reproduce it)."""
        self.error = fusion_failure(_staged(self.phase, stage), cause, self.fd, context=self.report(failing=True))
        return self.error

    def report(self, failing: bool = False) -> str:
        return (f"\n\nThe {'failing ' if failing else ''}{self.phase} fusion as a standalone nvfuser_direct script "
                f"(inputs with the real shapes, dtypes and strides, random values):\n\n```python\n"
                f"{self.script.rstrip()}\n```\n")


class AotNvFuserBackend(NvFuserBackend):
    name = "aot:nvfuser"
    component = "nvfuser"
    display_name = "nvFuser (aot_autograd)"
    supports_backward = True
    # The same aot_autograd graphs run as they are (fuzzfuse.attribution): a gradient aot_autograd's
    # decompositions compute wrongly is theirs, not nvFuser's. Two H200 "nvFuser" backward
    # mismatches were (prod's backward of a lone nan giving the upstream gradient, float16 rounding
    # between sigmoid's decomposed backward ops): aot:eager gives the same numbers.
    reference_route = "aot:eager"
    # One FusionDefinition per FX graph inside aot_autograd: run() compiles again each time.
    reuses_compiled = False
    reruns_new_sizes = False
    reruns_new_strides = False
    # Its FusionDefinitions execute inside aot_autograd's compiled function, with no per-case
    # switches: none drawn, and `run` takes the style alone.
    disable_choices = ()
    option_fields = ("style",)

    def compile(self, graph: Graph, options: Options = Options()) -> Compiled:
        return Compiled(self, graph, options)

    def check_available(self) -> None:
        super().check_available()
        try:
            import functorch.compile  # noqa: F401
        except ImportError as e:
            raise Unavailable(f"this torch build has no functorch aot_autograd: {e}") from e

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None, *,
            style: str | None = None) -> RunResult:
        from functorch.compile import aot_function, make_boxed_func

        style = style or self.style
        fusions: dict[str, _Fusion] = {}

        def compiler(phase: str):
            def compile_fx(gm, example_inputs):
                try:
                    translation = translate(gm)
                except Unsupported as e:  # an aten op without an IR form
                    raise Unsupported(f"{phase} graph: {e}", stage=_staged(phase, "compile")) from e
                fusions[phase] = _Fusion(phase, translation, style, self)
                return make_boxed_func(fusions[phase])
            return compile_fx

        fn = aot_function(_tensor_function(graph, compile_source(graph)), fw_compiler=compiler("forward"),
                          bw_compiler=compiler("backward"), decompositions=decompositions())
        xs = with_leaves(graph, inputs) if grad_outputs is not None else inputs
        out = self._call(fusions, lambda: fn(*[x for s, x in zip(graph.inputs, xs) if not isinstance(s, ScalarInput)]))
        forward = fusions["forward"]
        evidence = replace(forward.evidence, details={**forward.evidence.details, "style": style})
        result = RunResult([o.detach() for o in out], forward.evidence.fused, evidence, forward.compile_seconds)
        if grad_outputs is not None:
            grads = self._call(fusions, lambda: input_gradients(graph, xs, list(out), grad_outputs))
            backward = fusions.get("backward")
            # No backward fusion when no output gradient reaches an input: nothing to fuse.
            evidence.backward = backward.evidence if backward else Evidence(fused=None)
            evidence.schedulers = evidence.schedulers + evidence.backward.schedulers
            result.grads, result.backward_fused = [g.detach() for g in grads], evidence.backward.fused
            result.compile_seconds += backward.compile_seconds if backward else 0.0
        # For a mismatch's report: which fusions computed the numbers.
        result.context = "".join(f.report() for f in fusions.values() if f.script)
        return result

    @staticmethod
    def _call(fusions: dict[str, _Fusion], call):
        """`call()`, with a fusion's failure re-raised as the BackendError it recorded (autograd may
        wrap what a backward raises)."""
        try:
            return call()
        except (BackendError, Unsupported, AssertionError):
            raise
        except Exception as e:
            recorded = next((f.error for f in fusions.values() if f.error is not None), None)
            if recorded is not None:
                raise recorded from e
            raise BackendError("backward-compile" if "forward" in fusions else "compile", e) from e

    def repro_code(self, graph: Graph) -> str:
        return "\n".join(self.repro_environment()) + "\n" + generic_repro_code(self.name, graph, style=self.style)


__all__ = ["AotNvFuserBackend", "decompositions"]
