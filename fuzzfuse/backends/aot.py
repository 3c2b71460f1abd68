"""aot_autograd (functorch) with a TorchScript fuser compiling the forward and backward graphs.

This is the route training code took to NNC and nvFuser before torch.compile:
`functorch.compile.memory_efficient_fusion` traces the function into aten FX graphs, splits the
joint graph into a forward and a backward (min-cut rematerialization, with functorch's default
decompositions of the `*_backward` ops into pointwise aten ops), and hands each to `ts_compile`,
which strips overloads, scripts the FX graph, freezes it and runs it once. The fuser flags are set
process-wide first, so the profiling executor fuses those scripted graphs. The backward graph is
what a training step runs: saved activations, broadcast gradients, reductions of gradients.

Evidence comes from the profiler as for TorchScript: the fused kernels must appear during the
forward call and, separately, during the backward call.

nvFuser (the lead's `nvfuser` backend) can join this route with a compiler that translates the
aten FX graphs into a FusionDefinition: register it as `aot:nvfuser`, a subclass of `_AotBackend`
whose `compiler()` returns that translator.
"""
from __future__ import annotations

import torch

from ..ir import Graph, ScalarInput, compile_source
from .base import Unavailable
from .findings import AN_INPUT
from .guards import output_makers
from .torchscript import NNCBackend, OneDNNBackend, TorchScriptFrontendBackend


def _tensor_function(graph: Graph, fn):
    """`fn` taking only the tensor inputs, the graph's scalar inputs bound to their values:
    aot_autograd traces tensors, and the scalars are constants of the case anyway."""
    scalars = {k: i.value for k, i in enumerate(graph.inputs) if isinstance(i, ScalarInput)}

    def tensors_only(*tensors):
        it = iter(tensors)
        return fn(*[scalars[k] if k in scalars else next(it) for k in range(len(graph.inputs))])
    return tensors_only


class _AotScripted:
    """A graph through memory_efficient_fusion with `compiler` for its forward and backward, which
    records what naming a backward's failed guard needs (fuzzfuse.backends.guards): the inputs of
    the last backward call, and the forward's outputs of the last call with what made each in its
    specialized graph (a backward guard rejects a value the forward saved, most often one a fused
    kernel of the forward made otherwise than the profile)."""

    def __init__(self, graph: Graph, compiler):
        from functorch.compile import memory_efficient_fusion

        self._forward_outputs: list = []
        self._forward_graph = None  # the forward's specialized graph as its last call ran it
        self._backward_inputs: list | None = None
        self._compiled = memory_efficient_fusion(_tensor_function(graph, compile_source(graph)),
                                                 fw_compiler=self._recording(compiler, forward=True),
                                                 bw_compiler=self._recording(compiler, forward=False))
        self._tensors = [k for k, i in enumerate(graph.inputs) if not isinstance(i, ScalarInput)]

    def __call__(self, *inputs):
        return self._compiled(*[inputs[k] for k in self._tensors])

    def _recording(self, compiler, forward: bool):
        from functorch.compile import make_boxed_func

        def compile_and_record(gm, example_inputs):
            compiled = compiler(gm, example_inputs)
            # aot_autograd's calling convention: a boxed function takes its arguments as one list.
            boxed = compiled if getattr(compiled, "_boxed_call", False) else make_boxed_func(compiled)

            def run(args):
                if not forward:
                    self._backward_inputs = list(args)
                outs = boxed(args)
                if forward:  # read only where a backward falls back: `backward_guard_inputs`
                    self._forward_graph = torch.jit.last_executed_optimized_graph()
                    self._forward_outputs = list(outs)
                return outs
            run._boxed_call = True
            return run
        return compile_and_record

    def backward_guard_inputs(self) -> tuple[list, list[str]] | None:
        """The last backward call's inputs, and what made each: the forward's kernel or op, for a
        value the forward saved (the same tensor as one of its outputs), else an input."""
        if self._backward_inputs is None:
            return None
        makers = output_makers(self._forward_graph) if self._forward_graph is not None else []
        made = zip(self._forward_outputs, makers) if len(makers) == len(self._forward_outputs) else ()
        saved = {_identity(out): maker for out, maker in made if isinstance(out, torch.Tensor)}
        return self._backward_inputs, [saved.get(_identity(x), AN_INPUT) if isinstance(x, torch.Tensor) else AN_INPUT
                                       for x in self._backward_inputs]


def _identity(t) -> tuple:
    """A tensor's identity across the Python objects autograd wraps a saved tensor in."""
    return t.data_ptr(), t.dtype, tuple(t.shape), t.stride(), t.storage_offset()


class _AotBackend:
    """Mixin over a TorchScript backend: same flags, shapes, evidence; the graph goes through
    aot_autograd first."""

    repro_doc = "aot_autograd (functorch's memory_efficient_fusion, ts_compile) over `fn`."
    # The same aot_autograd graphs scripted without a fuser (fuzzfuse.attribution).
    reference_route: str | None = "aot:frontend"
    # What the repro imports beside memory_efficient_fusion, and its compiler arguments (none:
    # ts_compile, its default).
    repro_compilers = ("", "")
    # aot_autograd's functionalized graph may pick other output layouts: no evidence either way.
    promises_strides = False

    def check_available(self) -> None:
        super().check_available()
        try:
            import functorch.compile  # noqa: F401
        except ImportError as e:
            raise Unavailable(f"this torch build has no functorch aot_autograd: {e}") from e

    def compiler(self):
        """The forward and backward compiler: functorch's TorchScript one."""
        from functorch.compile import ts_compile
        return ts_compile

    def script(self, graph: Graph) -> "_AotScripted":
        return _AotScripted(graph, self.compiler())

    def backward_guard_inputs(self, fn: "_AotScripted") -> tuple[list, list[str]] | None:
        return fn.backward_guard_inputs()

    def repro_compile(self, graph: Graph) -> str:
        scalars = {k: i.value for k, i in enumerate(graph.inputs) if isinstance(i, ScalarInput)}
        tensors = [k for k in range(len(graph.inputs)) if k not in scalars]
        args = ", ".join(f"{scalars[k]!r}" if k in scalars else f"t[{tensors.index(k)}]"
                         for k in range(len(graph.inputs)))
        imports, keywords = self.repro_compilers
        return (f"from functorch.compile import memory_efficient_fusion{imports}\n"
                f"    aot = memory_efficient_fusion(lambda *t: fn({args}){keywords})\n"
                f"    compiled = lambda *xs: aot(*[xs[k] for k in {tensors}])")


class AotNNCBackend(_AotBackend, NNCBackend):
    name = "aot:nnc"
    component = "nnc"
    display_name = "NNC (aot_autograd)"


class AotOneDNNBackend(_AotBackend, OneDNNBackend):
    name = "aot:onednn"
    component = "onednn"
    display_name = "oneDNN Graph (aot_autograd)"


class AotFrontendBackend(_AotBackend, TorchScriptFrontendBackend):
    """The aot routes with no fuser: aot_autograd's forward and backward graphs scripted by
    ts_compile and run by the profiling executor. A failure it shares with aot:nnc or aot:onednn
    is TorchScript's handling of those graphs, or aot_autograd's own (see aot:eager)."""

    name = "aot:frontend"
    component = "aot:frontend"  # no fuser: the frontend is the component
    display_name = "aot_autograd (no fuser)"
    reference_route = "aot:eager"


class AotEagerBackend(_AotBackend, TorchScriptFrontendBackend):
    """aot_autograd alone: memory_efficient_fusion's decompositions and partitioning, with functorch's
    no-op compiler running the FX graphs as they are. A failure it shares is aot_autograd's."""

    name = "aot:eager"
    component = "aot:eager"
    display_name = "aot_autograd's decompositions (aot_eager)"
    reference_route = None
    repro_doc = "aot_autograd (functorch's memory_efficient_fusion, with the nop compiler) over `fn`."
    repro_compilers = (", nop", ", fw_compiler=nop, bw_compiler=nop")

    def compiler(self):
        from functorch.compile import nop
        return nop
