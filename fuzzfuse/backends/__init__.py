"""Backends: one module per fuser. `base.BACKENDS` maps the public names to implementations."""
from .base import (BACKENDS, Backend, BackendError, Compiled, RunResult, Unavailable, Unsupported, availability,
                   default_backend, get_backend)

__all__ = ["BACKENDS", "Backend", "BackendError", "Compiled", "RunResult", "Unavailable", "Unsupported", "availability",
           "default_backend", "get_backend"]
