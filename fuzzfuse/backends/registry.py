"""The registry of backends by their fixed public names: `get_backend` and the default choice.

Kept apart from `base` (the Backend class every backend module subclasses), so that the registry
may name the backends it loads without a backend module importing its own importer.
"""
from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable

from .base import Backend, Unavailable
from .dynamo import DynamoBackend, listed_names


# name -> "module:factory"; factories are imported lazily so that listing backends stays cheap.
BACKENDS: dict[str, str] = {
    "eager": "fuzzfuse.backends.eager:EagerBackend",
    "torchscript:nnc": "fuzzfuse.backends.torchscript:NNCBackend",
    "torchscript:onednn": "fuzzfuse.backends.torchscript:OneDNNBackend",
    "torchscript:nvfuser": "fuzzfuse.backends.torchscript:TorchScriptNvFuserBackend",
    # Reference routes (fuzzfuse.attribution): the TorchScript and aot routes without a fuser.
    "torchscript:frontend": "fuzzfuse.backends.torchscript:TorchScriptFrontendBackend",
    "aot:frontend": "fuzzfuse.backends.aot:AotFrontendBackend",
    "aot:eager": "fuzzfuse.backends.aot:AotEagerBackend",
    # aot_autograd (functorch's memory_efficient_fusion): the fuser compiles the forward and the
    # backward FX graphs a training step produces.
    "aot:nnc": "fuzzfuse.backends.aot:AotNNCBackend",
    "aot:onednn": "fuzzfuse.backends.aot:AotOneDNNBackend",
    # ... and nvFuser, through a translation of those FX graphs into the IR.
    "aot:nvfuser": "fuzzfuse.backends.aot_nvfuser:AotNvFuserBackend",
    "inductor": "fuzzfuse.backends.inductor:InductorBackend",
    # Inductor on one device whatever the machine has (Backend.device_routes).
    "inductor:cpu": "fuzzfuse.backends.inductor:InductorOnCPU",
    "inductor:cuda": "fuzzfuse.backends.inductor:InductorOnCUDA",
    "nvfuser": "fuzzfuse.backends.nvfuser:NvFuserBackend",
    # Eager's scalar loop on one device (EagerBackend.device_routes): is a fault of eager's both
    # devices'?
    "scalar:cpu": "fuzzfuse.backends.eager:ScalarLoopOnCPU",
    "scalar:cuda": "fuzzfuse.backends.eager:ScalarLoopOnCUDA",
}
# Preference order for the default backend: the first available one wins. nvFuser is the primary
# target; without a GPU, NNC runs 40-120 cases/s on 2 cores where CPU Inductor manages ~1 (a C++
# compile per graph), so NNC finds more in a short campaign.
PREFERENCE = ("nvfuser", "torchscript:nnc", "inductor", "torchscript:onednn", "eager")
# With --backward: nvFuser's forward-only backend gives way to its aot_autograd route.
BACKWARD_PREFERENCE = ("aot:nvfuser", "torchscript:nnc", "inductor", "torchscript:onednn", "eager")


def _factory(name: str) -> Callable[[], Backend]:
    """A registered name, `custom:package.module:Factory` for backends outside this package
    (the reducer's deliberately buggy test backends, say), or `dynamo:NAME` /
    `dynamo:package.module:function` for any torch.compile backend."""
    if name.startswith("dynamo:") and name.count(":") in (1, 2):
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


@functools.cache
def _registered_class(name: str) -> type | None:
    """The class a built-in name loads, imported but not made; None for any other name or a class
    that cannot load."""
    spec = BACKENDS.get(name)
    if not spec:
        return None
    module, attr = spec.split(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None


# What `dynamo:NAME` takes from the built-in NAME where that is a torch.compile backend itself
# (InductorBackend is `dynamo:inductor` with kernel evidence): the fuser it reaches and how that
# computes. Its public name, and all else, stay DynamoBackend's.
FUSER_ATTRIBUTES = ("component", "computes_from", "computes_from_on", "eager_kernels", "per_device_code",
                    "rewrites_pairs")


def declared(name: str, attr: str, default: Any = None) -> Any:
    """Class attribute `attr` that the backend `name` declares, read without making one: a built-in
    name's class; for `dynamo:...`, DynamoBackend's (FUSER_ATTRIBUTES: the built-in NAME's, where
    that is a DynamoBackend). `default` for `custom:...` (a file may name it: nothing it names is
    imported), an unknown name, a class that cannot load, or one without the attribute."""
    cls = _registered_class(name)
    if cls is None and name.startswith("dynamo:"):
        cls = DynamoBackend
        fuser = _registered_class(name.removeprefix("dynamo:")) if attr in FUSER_ATTRIBUTES else None
        if fuser is not None and issubclass(fuser, DynamoBackend):
            cls = fuser
    return getattr(cls, attr, default) if cls is not None else default


def computes_from(name: str, device: str = "") -> Mapping[str, str]:
    """The `Backend.computes_from` a backend declares (`declared`), with its
    `Backend.computes_from_on` for `device`; empty for a name without them."""
    on_device = declared(name, "computes_from_on", MappingProxyType({})).get(device, {})
    return MappingProxyType({**declared(name, "computes_from", MappingProxyType({})), **on_device})


def eager_kernels(name: str, device: str) -> frozenset[str]:
    """The ops whose code the backend `name` emits on `device` as eager's own kernel
    (`Backend.eager_kernels`); empty for a name without them."""
    return declared(name, "eager_kernels", MappingProxyType({})).get(device, frozenset())


def device_routes(name: str) -> Mapping[str, str]:
    """The backend running the fuser `name`'s one lowering on each device (`Backend.device_routes`);
    empty for a name without them."""
    return declared(name, "device_routes", MappingProxyType({}))


def per_device_code(name: str) -> frozenset[str]:
    """The ops whose code each device of the backend `name` writes for itself
    (`Backend.per_device_code`); empty for a name without them."""
    return declared(name, "per_device_code", frozenset())


def component(name: str) -> str:
    """The fuser a backend's route reaches (`Backend.component`): one for aot:nnc and
    torchscript:nnc, and for inductor and dynamo:inductor; its own name where it declares none."""
    return declared(name, "component", "") or name


def display_name(name: str) -> str:
    """What reports and repro headers call a backend (`Backend.display_name`); its own name where
    it declares none."""
    return declared(name, "display_name", "") or name


def nameable_in_a_file(name: str) -> bool:
    """Whether a case or campaign file may choose this backend by itself: a built-in name, or
    `dynamo:NAME` of a registered torch.compile backend. Those select code that is already part of
    fuzzfuse or torch. `custom:...` and `dynamo:package.module:function` import a module of the
    name's choosing, so they load only when the user names them on the command line: a file is
    data and never chooses code to run."""
    return name in BACKENDS or (name.startswith("dynamo:") and ":" not in name.removeprefix("dynamo:"))


def backend_for_file(recorded: str, requested: str | None, what: str) -> str:
    """The backend to run a case (or resume a campaign) with: the one named on the command line,
    else the one `what` (a file) records, if a file may choose it; else Unavailable, one line, and
    nothing of that name is imported."""
    if requested:
        return requested
    if recorded and not nameable_in_a_file(recorded):
        raise Unavailable(f"{what} names backend {recorded!r}, which imports code: a file cannot choose it; "
                          f"name it yourself with --backend {recorded} if you trust it")
    return recorded


def get_backend(name: str) -> Backend:
    """An available backend instance, or Unavailable with the reason."""
    backend = _factory(name)()
    if not isinstance(backend, Backend):
        raise Unavailable(f"backend {name!r} is a {type(backend).__name__}, not a fuzzfuse.backends.Backend")
    backend.check_available()
    return backend


def availability() -> dict[str, str | None]:
    """name -> None when available, else the reason it is not."""
    out: dict[str, str | None] = {}
    for name in (*BACKENDS, *listed_names()):
        try:
            get_backend(name)
            out[name] = None
        except Unavailable as e:
            out[name] = str(e)
    return out


def default_backend(backward: bool = False) -> str:
    status = availability()
    return next(n for n in (BACKWARD_PREFERENCE if backward else PREFERENCE) if status.get(n) is None)


def rewrites_pairs(name: str) -> Mapping[str, tuple[frozenset[str], frozenset[str]]]:
    """The pairs of ops the backend `name` rewrites as one pattern (`Backend.rewrites_pairs`);
    empty for a name without them."""
    return declared(name, "rewrites_pairs", MappingProxyType({}))
