"""The reducer's pass over a case's per-case backend choices (Inductor's configuration): after the
graph is reduced, drop every choice the failure does not need, so that a repro runs the backend's
defaults except for what the bug needs. The backend proposes (`Backend.simpler_options`: one
flag dropped, the mode or dynamic turned off...), the failure disposes, as for graphs: a
candidate is kept when it still fails with the same signature, and the search restarts from it
until no candidate is kept."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from ..backends.options import Options


def reduce_options(options: Options, simpler: Callable[[Options], Iterator[Options]],
                   is_interesting: Callable[[list[Options]], list[bool]]) -> tuple[Options, int]:
    """(the simplest options that still fail, the candidates asked). Each round asks all of its
    candidates at once (they run in parallel on the workers) and keeps the first that fails."""
    queries = 0
    while True:
        candidates = list(simpler(options))
        if not candidates:
            return options, queries
        queries += len(candidates)
        kept = next((c for c, ok in zip(candidates, is_interesting(candidates)) if ok), None)
        if kept is None:
            return options, queries
        options = kept
