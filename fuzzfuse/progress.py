"""Live campaign progress: a rich panel on a terminal, a plain line every few seconds otherwise
(CI logs, nohup files)."""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterator

from rich.console import Console
from rich.live import Live
from rich.table import Table

from .dedup import tally


def _table(campaign, pool) -> Table:
    s = campaign.stats
    secs = max(s.seconds, 1e-9)
    t = Table(title=f"fuzzfuse · {campaign.backend_name} · seed {campaign.seed}", show_header=False)
    t.add_row("now", _time_left(campaign))
    t.add_row("cases", f"{s.cases}  ({s.cases / secs:.1f}/s, {secs:.0f}s){_limit(campaign)}")
    t.add_row("input sets", f"{s.input_sets}  ({s.input_sets / secs:.1f}/s)  op/dtype/layout triples {len(s.triples)}")
    t.add_row("outcomes", "  ".join(f"{k} {v}" for k, v in sorted(s.outcomes.items())))
    t.add_row("fused", f"{s.fused_cases / max(s.cases, 1):.0%} of cases  (steered away from known bugs: "
                       f"{s.steered_cases} cases, {s.steered_draws} draws)")
    if s.differences:
        t.add_row("documented", "  ".join(f"{k} {v}" for k, v in s.differences.most_common()))
    if s.choices:
        t.add_row("choices", "  ".join(f"{k} {v}" for k, v in s.choices.most_common(8)))
    t.add_row("root causes", _root_causes(campaign))
    t.add_row("signatures", f"{len(s.signatures)} coarse")
    for entry in list(s.signatures.values())[-5:]:
        t.add_row("", f"{entry.count}x {entry.key[:100]}")
    if s.coverage:
        t.add_row("schedulers", "  ".join(f"{k} {v}" for k, v in s.coverage.most_common()))
    t.add_row("reducer", _reducer(campaign))
    t.add_row("workers", "  ".join(pool.states()) + f"  (restarts {pool.restarts})")
    return t


def _time_left(campaign) -> str:
    """What the run is doing and how long --time leaves it: fuzzing, reducing or verifying."""
    phase = campaign.phase()
    if campaign.deadline is None:
        return f"{phase} (no --time bound)"
    left = max(0.0, campaign.deadline - time.time())
    return f"{left:.0f}s of {campaign.run_seconds:.0f}s left: {phase}"


def _limit(campaign) -> str:
    """The compile-bound limit beside the rate: what the workers would reach doing nothing but
    compile."""
    limit = campaign.stats.compile_bound_rate(campaign.workers)
    return f"  compile-bound limit {limit:.1f}/s" if limit else ""


def _root_causes(campaign) -> str:
    """Reduced buckets: the root causes found (new or known) and the hits still pending a reduction."""
    causes, pending = campaign.reductions.causes(), len(campaign.reductions.book.pending)
    return f"{tally(causes)}, {pending} hits pending"


def _reducer(campaign) -> str:
    queue, running = campaign.reducer_queue(), campaign.reducing
    done = sum(e.minimized is not None for e in campaign.stats.signatures.values())
    text = f"{len(queue)} waiting, {done} minimized"
    for now in running:
        text += f"; {'verifying' if now.verifying else 'reducing'} {now.what[:70]}"
        if now.stats is not None:
            text += f": {now.stats.size} ops after {now.stats.queries} queries"
    return text


def _line(campaign, pool) -> str:
    s = campaign.stats
    secs = max(s.seconds, 1e-9)
    outcomes = {str(k): v for k, v in s.outcomes.items()}
    return (f"[{secs:6.0f}s] {_time_left(campaign)}; cases {s.cases} ({s.cases / secs:.1f}/s{_limit(campaign)}) "
            f"input sets {s.input_sets} ({s.input_sets / secs:.1f}/s) outcomes {outcomes} "
            f"root causes {_root_causes(campaign)} "
            f"signatures {len(s.signatures)} reducer {_reducer(campaign)} restarts {pool.restarts}"
            + (f" schedulers {dict(s.coverage)}" if s.coverage else ""))


@contextlib.contextmanager
def campaign_display(console: Console | None = None, every: float = 0.25) -> Iterator:
    """Yields display(campaign, pool), cheap to call often: it redraws at most every `every` s."""
    console = console or Console(stderr=True)
    last = [0.0]
    if console.is_terminal:
        with Live(console=console, refresh_per_second=4, transient=False) as live:
            def show(campaign, pool) -> None:
                if time.time() - last[0] >= every:
                    last[0] = time.time()
                    live.update(_table(campaign, pool))
            yield show
    else:
        def show(campaign, pool) -> None:
            if time.time() - last[0] >= 10:
                last[0] = time.time()
                print(_line(campaign, pool), file=sys.stderr, flush=True)
        yield show
