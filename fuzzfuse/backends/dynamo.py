"""Any torch.compile backend: `dynamo:NAME` (a registered one: aot_eager, eager, inductor...) or
`dynamo:package.module:function`, a user's own `(gm, example_inputs) -> callable`.

The graph runs under `torch.compile(fullgraph=True, dynamic=False)` with `suppress_errors=False`,
so a graph break or a backend failure raises instead of falling back to eager. dynamo shows no
kernels for an arbitrary backend, so the evidence is a probe wrapped around it: the backend
compiled the graph, and the callable it returned produced the outputs. The probe also stages
failures exactly: anything raised before the compiled callable starts (dynamo tracing, the
backend's compile) is "compile", anything raised inside it is "run". dynamo reports a backend's
exception as BackendCompilerFailed; the signature uses the backend's own exception instead.

Trust: naming `dynamo:package.module:function` imports that module, as `custom:` does, and so does
replaying or reducing a case that records such a backend name (the case's graph itself is still
plain data). The standalone repro imports the module the same way, and wraps the backend (for
`dynamo:NAME`, `torch._dynamo.lookup_backend(NAME)`) in the same probe.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import time

import torch

from ..ir import Graph, compile_source
from ..ir.interp import input_gradients, with_leaves
from ..strategies import ShapeConfig
from .base import Backend, BackendError, Compiled, Evidence, RunResult, Unavailable
from .options import Options

# Registered backends that need more than torch: what `check_available` requires of them.
_NEEDS_PACKAGE = {"tvm": "tvm", "openxla": "torch_xla", "openxla_eval": "torch_xla"}
_NEEDS_CUDA = {"cudagraphs"}


def listed_names() -> list[str]:
    """The `dynamo:NAME` backends worth listing: torch's non-debug backends plus eager/aot_eager,
    the cheap ones that isolate dynamo and AOT autograd from any code generator."""
    import torch._dynamo

    return [f"dynamo:{n}" for n in sorted({*torch._dynamo.list_backends(), "eager", "aot_eager"})]


def probe(backend, seen: dict):
    """Wrap a torch.compile backend so that `seen` counts the graphs it compiled ("graphs") and
    the calls of its compiled callables that returned ("calls"); "running" stays True when one of
    them raised. Self-contained: repros embed this function's source."""
    def compile_graph(gm, example_inputs):
        compiled = backend(gm, example_inputs)
        seen["graphs"] += 1

        def run(*args):
            seen["running"] = True
            out = compiled(*args)
            seen["running"] = False
            seen["calls"] += 1
            return out
        return run
    return compile_graph


class DynamoBackend(Backend):
    """torch.compile with one backend; `spec` is a registered name or "package.module:function"."""

    # Every case is a new graph: Inductor's FX graph cache only grows, and on re-checks it would
    # replay a cached artifact instead of compiling again (for Inductor and for user backends that
    # end in compile_fx).
    env = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
    supports_backward = True
    reuses_compiled = True
    # torch.compile's contract: outputs have eager's strides (Inductor enforces it on its outputs).
    promises_strides = True

    def __init__(self, spec: str, device: str | None = None):
        self.spec = spec
        self.name = f"dynamo:{spec}"
        # The same capture with less behind it (fuzzfuse.attribution): aot_autograd without a code
        # generator, then dynamo alone.
        routes = {"eager": None, "aot_eager": "dynamo:eager"}
        self.reference_route: str | None = routes.get(spec, "dynamo:aot_eager")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        # Compile time dominates and barely depends on size; keep CPU tensors moderate. GPU shapes
        # cross block and vectorization boundaries.
        self.features = dataclasses.replace(self.features, device=self.device)
        self.shapes = (ShapeConfig(max_dim=8, max_numel=4096) if self.device == "cpu"
                       else ShapeConfig(max_dim=8, large_dims=(127, 128, 1023, 4099), large_prob=0.1,
                                        max_numel=1 << 20))

    def compiler(self):
        """The backend callable (importing the user's module): Unavailable when it cannot be had."""
        import torch._dynamo

        module, _, attr = self.spec.rpartition(":")
        if module:
            try:
                fn = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as e:
                raise Unavailable(f"backend {self.name!r} cannot be loaded: {e}") from e
            if not callable(fn):
                raise Unavailable(f"backend {self.name!r}: {attr} is not callable")
            return fn
        if self.spec not in torch._dynamo.list_backends(exclude_tags=()):
            raise Unavailable(f"unknown torch.compile backend {self.spec!r}; registered: "
                              f"{', '.join(torch._dynamo.list_backends(exclude_tags=()))}")
        return torch._dynamo.lookup_backend(self.spec)

    def check_available(self) -> None:
        self.compiler()
        package = _NEEDS_PACKAGE.get(self.spec)
        if package and importlib.util.find_spec(package) is None:
            raise Unavailable(f"torch.compile backend {self.spec!r} needs the {package} package")
        if (self.spec in _NEEDS_CUDA or self.device == "cuda") and not torch.cuda.is_available():
            raise Unavailable(f"{self.name} needs a CUDA GPU")

    def compile(self, graph: Graph, options: Options = Options()) -> "DynamoCompiled":
        return DynamoCompiled(self, graph, options)

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        return self.compile(graph).run(inputs, grad_outputs)

    def compile_and_run(self, graph: Graph, inputs: list, grad_outputs: list | None = None, dynamic: bool = False):
        """The first run of a graph: (its RunResult, the compiled callable, the probe's counters).
        With grad_outputs, the first backward call (where AOT autograd compiles the backward
        graph) is staged "backward-compile", the measured one "backward-run". dynamic:
        torch.compile's (symbolic sizes from the first compile on)."""
        import torch._dynamo
        import torch._inductor.config  # dynamo imports it anyway

        torch._dynamo.config.suppress_errors = False
        # Workers already run in parallel; a pool of compile subprocesses per worker only adds
        # processes (measured for Inductor: no per-case speed-up with 2 cores).
        torch._inductor.config.compile_threads = 1
        # A fresh dynamo state per graph: caches and recompile limits must not grow over a campaign.
        torch._dynamo.reset()
        seen = {"graphs": 0, "calls": 0, "running": False}
        compiled = torch.compile(compile_source(graph), backend=probe(self.compiler(), seen),
                                 fullgraph=True, dynamic=dynamic)
        backward = grad_outputs is not None
        start = time.perf_counter()
        xs = with_leaves(graph, inputs) if backward else inputs
        try:
            out = compiled(*xs)
        except Exception as e:
            raise BackendError("run" if seen["running"] else "compile", _backend_exception(e)) from e
        backward_evidence = Evidence()
        if backward:
            try:
                _, backward_evidence = self._first_backward(lambda: input_gradients(graph, xs, list(out), grad_outputs))
            except Exception as e:
                raise BackendError("backward-compile", _backend_exception(e)) from e
        compile_seconds = time.perf_counter() - start
        calls = seen["calls"]
        xs = with_leaves(graph, inputs) if backward else inputs
        try:
            out = compiled(*xs)
        except Exception as e:
            raise BackendError("run", e) from e
        # Fused: the backend compiled the graph and its callable produced the final outputs.
        # dynamo compiles nothing when no op needs computing (outputs that are inputs): unfused.
        calls = seen["calls"] - calls
        fused = seen["graphs"] > 0 and calls > 0
        evidence = Evidence(fused=fused, details={"graphs": seen["graphs"], "calls": calls,
                                                  "compile_seconds": round(compile_seconds, 3)})
        result = RunResult([o.detach() for o in out], fused, evidence, compile_seconds)
        if backward:
            try:
                grads = input_gradients(graph, xs, list(out), grad_outputs)
            except Exception as e:
                raise BackendError("backward-run", e) from e
            evidence.backward = backward_evidence
            result.grads, result.backward_fused = [g.detach() for g in grads], backward_evidence.fused
        return result, compiled, seen

    def _first_backward(self, call) -> tuple[list, Evidence]:
        """Run the first backward (AOT autograd compiles it now): its result, and evidence that the
        backward fused (fused None: a generic backend cannot tell)."""
        return call(), Evidence(fused=None)

    def repro_code(self, graph: Graph) -> str:
        module, _, attr = self.spec.rpartition(":")
        backend = (f"getattr(importlib.import_module({module!r}), {attr!r})" if module
                   else f"torch._dynamo.lookup_backend({self.spec!r})")
        imports = "import importlib\n    " if module else ""
        where = f"\n    {module} must be importable (on PYTHONPATH)." if module else ""
        return f'''
{inspect.getsource(probe).strip()}


def run_fused(inputs):
    """{self.name}
    torch.compile(fullgraph=True) with errors not suppressed: the backend must compile the graph
    and the callable it returns must produce the outputs.{where}"""
    {imports}import torch._dynamo
    torch._dynamo.config.suppress_errors = False
    seen = {{"graphs": 0, "calls": 0, "running": False}}
    compiled = torch.compile(fn, backend=probe({backend}, seen), fullgraph=True, dynamic=False)
    compiled(*inputs)
    calls = seen["calls"]
    out = compiled(*inputs)
    return list(out), seen["graphs"] > 0 and seen["calls"] > calls
'''


class DynamoCompiled(Compiled):
    """torch.compile'd once (dynamic=False): later input sets of the same sizes and strides pass
    dynamo's guards and run the backend's compiled callable again, without compiling."""
    # torch.compile's dynamic (a subclass's per-case choice).
    dynamic = False

    def __init__(self, backend: DynamoBackend, graph: Graph, options: Options):
        super().__init__(backend, graph, options)
        self._compiled = None
        self._seen: dict = {}

    def run(self, inputs: list, grad_outputs: list | None = None) -> RunResult:
        if self._compiled is None or grad_outputs is not None:
            result, self._compiled, self._seen = self.backend.compile_and_run(self.graph, inputs, grad_outputs,
                                                                              self.dynamic)
            return result
        calls, graphs = self._seen["calls"], self._seen["graphs"]
        try:
            out = self._compiled(*inputs)
        except Exception as e:
            raise BackendError("run" if self._seen["running"] else "compile", _backend_exception(e)) from e
        calls = self._seen["calls"] - calls
        evidence = Evidence(fused=calls > 0, details={"graphs": self._seen["graphs"] - graphs, "calls": calls,
                                                      "rerun": True})
        return RunResult([o.detach() for o in out], calls > 0, evidence)


def _backend_exception(e: BaseException) -> BaseException:
    """The backend's own exception where dynamo wrapped it (BackendCompilerFailed). Subclasses stay:
    InductorError names its cause in its message, and Inductor's signatures predate this module."""
    from torch._dynamo.exc import BackendCompilerFailed

    return e.inner_exception if type(e) is BackendCompilerFailed else e
