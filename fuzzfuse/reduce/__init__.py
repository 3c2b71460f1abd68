"""The reducer: shrink a failing graph to a minimal one that fails the same way.

    from fuzzfuse.reduce import reduce
    result = reduce(graph, is_interesting, batch=4)
    result.graph, result.stats

`engine` runs passes to a fixpoint with a cache; `passes` holds one function per pass; `shapes` does
the dim bookkeeping the shape pass needs; `options` drops the per-case backend choices (Inductor's
configuration) that a reduced failure does not need.
"""
from .engine import NotInteresting, PassStats, Reduction, ReductionStats, cost, reduce
from .options import reduce_options
from .passes import DEFAULT_PASSES, FIRST_PASSES, LAST_PASSES, admissible

__all__ = ["reduce", "NotInteresting", "PassStats", "Reduction", "ReductionStats", "cost", "FIRST_PASSES",
           "DEFAULT_PASSES", "LAST_PASSES", "admissible",
           "reduce_options"]
