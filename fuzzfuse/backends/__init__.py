"""Backends: one module per fuser. `registry.BACKENDS` maps the public names to implementations."""
from .base import Backend, BackendError, Compiled, RunResult, Unavailable, Unsupported
from .registry import (BACKENDS, availability, backend_for_file, default_backend, get_backend,
                       nameable_in_a_file)

__all__ = ["BACKENDS", "Backend", "BackendError", "Compiled", "RunResult", "Unavailable", "Unsupported",
           "availability", "backend_for_file", "default_backend", "get_backend", "nameable_in_a_file"]
