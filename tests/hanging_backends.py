"""A backend that hangs on every case, loaded as `custom:tests.hanging_backends:HangAlways`: a
campaign against it must still end at its --time (issue 32)."""
from __future__ import annotations

import time

from fuzzfuse.backends.base import RunResult
from fuzzfuse.backends.eager import EagerBackend
from fuzzfuse.ir import Graph


class HangAlways(EagerBackend):
    """Sleeps far past any per-case timeout on every graph, as a fuser stuck in its compiler does."""
    name = "custom:tests.hanging_backends:HangAlways"
    supports_backward = False

    def run(self, graph: Graph, inputs: list) -> RunResult:
        time.sleep(3600)
        raise AssertionError("unreachable: the worker is killed first")
