"""The Backend protocol and the registry of backends by their fixed public names.

A backend turns a Graph plus concrete inputs into outputs under one fuser, with that fuser's
fallback disabled, and reports evidence that fused code really ran. It raises `BackendError` with the
stage ("compile" or "run") so that signatures can tell a codegen crash from a runtime one.
"""
from __future__ import annotations

import functools
import importlib
import json
from dataclasses import dataclass, field
from typing import Callable, Protocol

import torch

from ..ir import Graph
from ..strategies import ShapeConfig


class BackendError(Exception):
    """A fuser failed; `stage` is "compile" or "run", `cause` the original exception."""

    def __init__(self, stage: str, cause: BaseException):
        super().__init__(f"{stage}: {type(cause).__name__}: {cause}")
        self.stage = stage
        self.cause = cause
        # Appended to the case's detail, never to the signature (e.g. the failing fusion's script).
        self.context = ""


class Unsupported(Exception):
    """The fuser cannot express this graph (an op it lacks): outcome `unsupported`, not a crash.
    `stage` says which graph ("backward-compile" for the backward one of a training step)."""

    stage = "compile"


class Unavailable(Exception):
    """The backend cannot run here; the message says why (one line, shown to users)."""


@dataclass
class RunResult:
    outputs: list[torch.Tensor]
    # Did fused code run? None when the backend cannot tell (eager).
    fused: bool | None = None
    # What the evidence was: kernel names, fusion groups, schedulers... (JSON-able).
    evidence: dict = field(default_factory=dict)
    compile_seconds: float = 0.0
    # Backward cases only: the gradient of each requires_grad input (in input order), and whether
    # the backward ran fused code (evidence["backward"] says why).
    grads: list[torch.Tensor] | None = None
    backward_fused: bool | None = None
    # Appended to a mismatch's detail, as BackendError.context is to a crash's: what an upstream
    # report needs beside the numbers (aot:nvfuser: the fusions that ran, as standalone scripts).
    context: str = ""


class Backend(Protocol):
    name: str
    # Shape policy for cases generated for this backend.
    shapes: ShapeConfig
    device: str
    # Variables the worker needs before it imports torch (libtorch reads some once).
    env: dict[str, str]
    # Optional `features`: the ops/dtypes/layouts worth generating for this fuser (default: all).

    def check_available(self) -> None:
        """Raise Unavailable(reason) when this backend cannot run in this process."""

    def run(self, graph: Graph, inputs: list, grad_outputs: list | None = None) -> RunResult:
        """Compile and run the graph; raise BackendError on a fuser failure. With grad_outputs (one
        upstream gradient per output, None where an output is not differentiable), also backpropagate
        them to the graph's requires_grad inputs through the fuser (stages "backward-compile",
        "backward-run") and return RunResult.grads. Backends without a backward omit the argument;
        their backward cases are reported unsupported."""

    def versions(self) -> dict[str, str]:
        """Versions that a bug report needs (torch, the fuser package...)."""

    def repro_code(self, graph: Graph) -> str:
        """Source of `run_fused(inputs) -> (outputs, fused)` for a standalone repro that imports
        torch only (and the fuser's package); `fn` is defined there as the graph's function. For a
        backward case (graph.requires_grad): `run_fused(inputs, grad_outputs) -> (outputs, grads,
        fused)`, with the repro's `leaves(inputs)` and `gradients(outputs, leaves, grad_outputs)`."""


def machine_versions(device: str) -> dict[str, str]:
    """What a bug may depend on besides the packages: on CPU, the capability ATen dispatches to and
    Inductor generates C++ for (ATEN_CPU_CAPABILITY; a repro pins it), on a GPU its name, driver
    and CUDA."""
    if device == "cpu":
        return {"cpu_capability": torch.backends.cpu.get_cpu_capability().lower()}
    out = {"cuda": str(torch.version.cuda)}
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
        out["driver"] = _nvidia_driver()
    return out


def _nvidia_driver() -> str:
    """The NVIDIA driver's version as nvidia-smi reports it (torch exposes only the CUDA API level)."""
    import subprocess
    try:
        run = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return run.stdout.splitlines()[0].strip() if run.returncode == 0 and run.stdout.strip() else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def generic_repro_code(name: str, graph: Graph, options: dict | None = None) -> str:
    """run_fused through fuzzfuse itself: for backends that are not a public fuser (eager, custom).
    `options` are the backend's per-case choices (aot:nvfuser's emission style), passed to its run
    as the case ran: without them the script runs another lowering than the one that failed."""
    options = "".join(f", {k}={v!r}" for k, v in (options or {}).items())
    return f'''
def run_fused(inputs, grad_outputs=None):
    """{name}, run through fuzzfuse (a custom backend: no standalone form). The fuser's own
    exception is raised, not fuzzfuse's BackendError around it, as the campaign names it."""
    import json
    from fuzzfuse.backends import get_backend
    from fuzzfuse.backends.base import BackendError
    from fuzzfuse.ir import Graph
    graph = Graph.from_json(json.loads({json.dumps(graph.to_json())!r}))
    try:
        if graph.requires_grad:
            result = get_backend({name!r}).run(graph, inputs, grad_outputs=grad_outputs{options})
            return result.outputs, result.grads, result.fused is not False and result.backward_fused is not False
        result = get_backend({name!r}).run(graph, inputs{options})
    except BackendError as e:
        raise e.cause from None
    return result.outputs, result.fused is not False
'''


# name -> "module:factory"; factories are imported lazily so that listing backends stays cheap.
BACKENDS: dict[str, str] = {
    "eager": "fuzzfuse.backends.eager:EagerBackend",
    "torchscript:nnc": "fuzzfuse.backends.torchscript:NNCBackend",
    "torchscript:onednn": "fuzzfuse.backends.torchscript:OneDNNBackend",
    "torchscript:nvfuser": "fuzzfuse.backends.torchscript:TorchScriptNvFuserBackend",
    # aot_autograd (functorch's memory_efficient_fusion): the fuser compiles the forward and the
    # backward FX graphs a training step produces.
    "aot:nnc": "fuzzfuse.backends.aot:AotNNCBackend",
    "aot:onednn": "fuzzfuse.backends.aot:AotOneDNNBackend",
    # ... and nvFuser, through a translation of those FX graphs into the IR.
    "aot:nvfuser": "fuzzfuse.backends.aot_nvfuser:AotNvFuserBackend",
    "inductor": "fuzzfuse.backends.inductor:InductorBackend",
    "nvfuser": "fuzzfuse.backends.nvfuser:NvFuserBackend",
}
# Preference order for the default backend: the first available one wins. nvFuser is the primary
# target; without a GPU, NNC runs ~36 cases/s on 2 cores where CPU Inductor manages ~1 (a C++
# compile per graph), so NNC finds more in a short campaign.
PREFERENCE = ("nvfuser", "torchscript:nnc", "inductor", "torchscript:onednn", "eager")
# With --backward: nvFuser's forward-only backend gives way to its aot_autograd route.
BACKWARD_PREFERENCE = ("aot:nvfuser", "torchscript:nnc", "inductor", "torchscript:onednn", "eager")


def _factory(name: str) -> Callable[[], Backend]:
    """A registered name, `custom:package.module:Factory` for backends outside this package
    (the reducer's deliberately buggy test backends, say), or `dynamo:NAME` /
    `dynamo:package.module:function` for any torch.compile backend."""
    if name.startswith("dynamo:") and name.count(":") in (1, 2):
        from .dynamo import DynamoBackend
        return functools.partial(DynamoBackend, name.removeprefix("dynamo:"))
    if name.startswith("custom:") and name.count(":") == 2:
        spec = name.removeprefix("custom:")
    elif name in BACKENDS:
        spec = BACKENDS[name]
    else:
        raise Unavailable(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}, dynamo:NAME, "
                          "dynamo:package.module:function, custom:package.module:Class")
    module, attr = spec.split(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise Unavailable(f"backend {name!r} cannot be loaded: {e}") from e


def get_backend(name: str) -> Backend:
    """An available backend instance, or Unavailable with the reason."""
    backend = _factory(name)()
    backend.check_available()
    return backend


def availability() -> dict[str, str | None]:
    """name -> None when available, else the reason it is not."""
    from .dynamo import listed_names

    out: dict[str, str | None] = {}
    for name in (*BACKENDS, *listed_names()):
        try:
            get_backend(name)
            out[name] = None
        except Unavailable as e:
            out[name] = str(e)
    return out


def has_backward(backend: Backend) -> bool:
    """Whether `backend.run` takes upstream gradients (the protocol's optional argument)."""
    import inspect
    return "grad_outputs" in inspect.signature(backend.run).parameters


def default_backend(backward: bool = False) -> str:
    status = availability()
    return next(n for n in (BACKWARD_PREFERENCE if backward else PREFERENCE) if status.get(n) is None)
