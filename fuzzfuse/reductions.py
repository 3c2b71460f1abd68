"""A campaign's reductions: reduce, then dedup, beside the fuzzing, on a share of its workers.

A coarse signature is what the reducer keeps while it shrinks; the root cause is what a campaign
counts (fuzzfuse.dedup, fuzzfuse.rootcause). An anchored crash (a C++ assert of the fuser) has its
root cause at once: one case of each new root cause is reduced into `minimized/`. A mismatch or a
weakly located crash has none until a reduction names it, so its hits wait, pending, in the book,
the hits most likely to hide a new cause reduced first. A reduced hit whose root cause is new
becomes a repro; one that a --known repro or an earlier reduction already holds only counts.

Each reduction runs in a thread of its own, its queries on the campaign's workers (pool.SharedPool):
while the campaign fuzzes, the reductions' queries take up to `reduce_share` of the workers, as they
free up, ahead of the queued cases, and the other workers go on fuzzing. No worker waits for the
others to drain, and a hang being reduced holds only the workers its queries run on. Several
reductions run at once (as many as the workers they may take): an Inductor campaign finds hits
faster than one reduction at a time keeps up with. The bookkeeping (the book of root causes, the
signature records, steering) is the campaign thread's alone: a thread reduces, writes the repro
and returns, and the campaign's thread files the result.

A known anchored bug hit through a graph that holds none of the campaign's triggers is reduced to
learn a trigger generation steers around: at most LEARN_PER_CAUSE times per bug, only when no other
reduction waits, within LEARN_BUDGET queries and LEARN_SHARE of the workers' time, and never after
fuzzing stops. A campaign that starts by meeting a dozen known bugs fuzzes on meanwhile.

When fuzzing stops, the reductions may take every worker: the anchored root causes still without
a repro, then the pending hits that hold no trigger their bucket has shown; the other pending hits
stay pending (reported as such, never as known), and `fuzzfuse fuzz --resume` goes on with them.
"""
from __future__ import annotations

import collections
import dataclasses
import math
import sys
import threading
import time
import traceback
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .corpus import load_case, save_case
from .dedup import PendingHit, RootCause, RootCauseBook, counts
from .identity import root_cause_key
from .known import KnownBugs
from .minimize import CaseReduction, reduce_case, save_minimized
from .repro_dir import repro_slug
from .pool import PoolClosed, SharedPool
from .reduce import NotInteresting, ReductionStats
from .rootcause import anchored
from .verdict import HarnessError, MinimizedRepro, SignatureRecord

if TYPE_CHECKING:
    from .campaign import Campaign
    from .pool import PoolLease

# The share of a campaign's workers that reductions may take while it fuzzes.
REDUCE_SHARE = 0.25
# Hits of one known bug reduced to learn a trigger beyond its repro's (fuzzfuse.steering), the
# queries one such reduction may ask, and the share of the workers' time all of them may take.
LEARN_PER_CAUSE = 1
LEARN_BUDGET = 100
LEARN_SHARE = 0.05


class OutOfTime(PoolClosed):
    """The run's --time is spent: the reductions under way stop where they are (the smallest
    failing graph of each stays in OUT/reducing/, where `--resume` picks it up)."""


class Interrupted(PoolClosed):
    """Ctrl-C: the reductions under way stop where they are, as at the end of --time."""


@dataclass
class Reducing:
    """A reduction under way, for the live display: what it reduces, the reducer's counters (None
    until its first query is answered), and whether its repro is being verified."""

    what: str
    stats: ReductionStats | None = None
    verifying: bool = False


class _Task:
    """One reduction in a thread of its own: `work()` runs there; `finish(future)` runs in the
    campaign's thread once it is done. Daemon threads: a run that ends at its --time does not
    wait for a repro being verified in fresh processes (its staging folder is hidden)."""

    def __init__(self, view: Reducing, work: Callable[[], object], finish: Callable[[Future], None],
                 wake: Callable[[], None], taken: str, learning: bool = False, queries: bool = True) -> None:
        """wake: called once it is done (SharedPool.wake: the campaign's loop files it at once);
        taken: what no other task may take (a coarse key, a hit's case, a root cause);
        queries: whether it asks the workers (a repro's verification runs in fresh processes)."""
        self.view, self.finish, self.taken = view, finish, taken
        self.learning, self.queries = learning, queries
        self.future: Future = Future()
        threading.Thread(target=self._run, args=(work, wake), name=f"reduce {view.what[:40]}", daemon=True).start()

    def _run(self, work: Callable[[], object], wake: Callable[[], None]) -> None:
        try:
            self.future.set_result(work())
        except BaseException as e:  # handed to finish, in the campaign's thread
            self.future.set_exception(e)
        wake()


class CampaignReductions:
    """The reducer side of a campaign: its book of root causes and the reductions it runs."""

    def __init__(self, campaign: "Campaign", known: KnownBugs, share: float = REDUCE_SHARE):
        if not 0 <= share <= 1:
            raise ValueError(f"--reduce-share must be a fraction of the workers from 0 to 1, not {share}")
        self.campaign, self.known, self.share = campaign, known, share
        self.book = RootCauseBook(known, campaign.features.device)
        self.tasks: list[_Task] = []
        self._saving: set[str] = set()  # root-cause keys whose repro a thread writes now
        self._wake: Callable[[], None] = lambda: None  # the SharedPool's, once step() has it
        # Hits of known anchored root causes whose graphs hold none of the campaign's triggers:
        # (root-cause key, saved case), reduced to learn a trigger generation should steer around.
        self.to_learn: list[tuple[str, str]] = []
        self.learned: collections.Counter = collections.Counter()  # root-cause key -> triggers learned

    # ---- hits ------------------------------------------------------------------------------
    def offer(self, entry: SignatureRecord, graph, case: str | None) -> None:
        """A failing hit of `entry`'s signature, saved as `case` (None when not saved). A fuser that
        declined a whole graph is coverage, not a bug: it has no root cause to find."""
        if entry.signature.kind == "no-fusion":
            return
        cause = self.book.offer(entry.signature, graph, case)
        if cause is not None and entry.known is None:
            entry.known = cause.known
        if cause is not None and cause.known and case is not None and self._worth_learning(cause.key, graph):
            self.to_learn.append((cause.key, case))

    def settled(self, coarse_key: str) -> None:
        """The re-runs of a signature's first case are judged. A root cause anchored by its message
        alone (a crash keyed as it is seen) whose every signature turned out flaky is unconfirmed:
        a crash that did not happen again (a full device, a race) is not counted new, as a repro
        that fails in none of its fresh processes is not."""
        for cause in self.book.causes.values():
            if coarse_key in cause.coarse_keys and cause.minimized is None:
                cause.unconfirmed = all(self._flaky(k) for k in cause.coarse_keys)

    def _flaky(self, coarse_key: str) -> bool:
        entry = self.campaign.stats.signatures.get(coarse_key)
        return entry is not None and entry.confirmed is False

    def _worth_learning(self, key: str, graph) -> bool:
        """A known bug hit through a graph that holds none of the triggers the campaign steers by:
        its triggers miss a form of it (oneDNN's "IValue is not a Scalar" comes of clamp with tensor
        bounds and of clamp_min with one), so one such hit is reduced to learn another, up to
        LEARN_PER_CAUSE of them."""
        waiting = sum(k == key for k, _ in self.to_learn) + sum(t.learning and t.taken == key for t in self.tasks)
        return (self.campaign.reduce and not waiting and self.learned[key] < LEARN_PER_CAUSE
                and not self.campaign.steering.holds(graph))

    def _confirmed(self, coarse_key: str) -> bool:
        entry = self.campaign.stats.signatures.get(coarse_key)
        return entry is not None and entry.confirmed is True

    def anchored_queue(self) -> list[str]:
        """Coarse keys of reproducible anchored crashes whose root cause has no repro yet."""
        out, roots = [], set()
        for key, entry in self.campaign.stats.signatures.items():
            if not (entry.awaits_reduction and anchored(entry.signature)):
                continue
            root = root_cause_key(entry.signature)
            cause = self.book.causes.get(root)
            if root in roots or root in self._saving or (cause is not None and (cause.known or cause.minimized)):
                continue
            roots.add(root)
            out.append(key)
        return out

    def next_pending(self, novel_only: bool = False) -> PendingHit | None:
        """The pending hit to reduce next, among those of reproducible signatures that no reduction
        under way holds."""
        taken = {t.taken for t in self.tasks}
        return self.book.next_to_reduce(lambda hit: self._confirmed(hit.coarse_key) and hit.case not in taken,
                                        novel_only)

    # ---- scheduling ----------------------------------------------------------------------------
    def workers(self, fuzzing: bool) -> int:
        """How many workers the reductions may hold: their share while the campaign fuzzes (at least
        one, unless the share is 0), all of them once it has stopped."""
        c = self.campaign
        if not c.reduce:
            return 0
        if not fuzzing:
            return c.workers
        return max(1, math.ceil(self.share * c.workers)) if self.share else 0

    def step(self, shared: SharedPool, fuzzing: bool, limit: int) -> None:
        """File the reductions that are done, then start reductions while fewer than `limit` run."""
        self._wake = shared.wake
        for task in [t for t in self.tasks if t.future.done()]:
            self.tasks.remove(task)
            task.finish(task.future)
        while sum(t.queries for t in self.tasks) < limit and self._start_next(shared, fuzzing, batch=limit):
            pass

    def busy(self) -> bool:
        return bool(self.tasks)

    def stop(self, shared: SharedPool, why: PoolClosed, grace: float) -> None:
        """Stop lending workers; file what the reductions under way did within `grace` seconds
        (a repro being verified may finish; a reduction stops at its next query)."""
        shared.close(why)
        end = time.time() + grace
        while self.tasks and time.time() < end:  # filing a reduction may start its repro's verification
            task = self.tasks[0]
            try:
                task.future.exception(timeout=max(0.0, end - time.time()))
            except TimeoutError:
                break
            self.tasks.remove(task)
            task.finish(task.future)

    def _start_next(self, shared: SharedPool, fuzzing: bool, batch: int) -> bool:
        """Start the next reduction in its own thread; False when none waits. While fuzzing: a
        known bug's new form to learn, when nothing else waits and the learning spent little."""
        taken = {t.taken for t in self.tasks}
        queue = [k for k in self.anchored_queue() if k not in taken]
        if queue:
            self.tasks.append(self._anchored(shared, queue[0], batch))
            return True
        hit = self.next_pending(novel_only=not fuzzing)
        if hit is not None:
            self.tasks.append(self._pending(shared, hit, batch))
            return True
        if fuzzing and self.to_learn and self._may_learn(shared):
            self.tasks.append(self._to_learn(shared, *self.to_learn.pop(0), batch))
            return True
        return False

    def _may_learn(self, shared: SharedPool) -> bool:
        if any(t.learning for t in self.tasks):
            return False
        spent = shared.pool.time_by_use()
        return spent.get("learn", 0.0) < LEARN_SHARE * sum(spent.values())

    # ---- reductions (work: in a thread; finish: in the campaign's thread) -----------------------
    def _reduce(self, lease: "PoolLease", case_path: str, label: str, view: Reducing, batch: int,
                budget: int | None):
        """Reduce the case at `case_path`: (case, its progress file, its CaseReduction or the
        NotInteresting that says it no longer fails)."""
        c = self.campaign
        case = load_case(c.out / case_path)
        progress = c.out / "reducing" / f"{label}.json"

        def show(stats: ReductionStats) -> None:
            view.stats = stats

        start = time.time()
        try:
            reduction = reduce_case(case, c.backend_name, workers=batch, timeout=c.timeout, pool=lease,
                                    max_queries=budget, checkpoint=progress, progress=show)
            reduction.stats.seconds = round(time.time() - start, 2)
            return case, progress, reduction
        except (NotInteresting, HarnessError) as e:  # a harness error is fuzzfuse's, never the bug: it stops
            error = e  # this reduction, not the campaign
        except PoolClosed:
            raise
        except Exception as e:  # fuzzfuse's own defect in a pass: the traceback for its bug report, and
            traceback.print_exc()  # the campaign goes on (a long GPU job must not end on one reduction)
            error = HarnessError(f"fuzzfuse failed reducing it ({type(e).__name__}: {e}): a fuzzfuse bug")
        print(f"not minimized {view.what}: {error}", file=sys.stderr)
        return case, progress, error

    def _anchored(self, shared: SharedPool, key: str, batch: int) -> _Task:
        entry = self.campaign.stats.signatures[key]
        root = root_cause_key(entry.signature)
        view, case_path = Reducing(key), entry.case

        def work():
            return self._reduce(shared.lease(), case_path, entry.slug, view, batch, self.campaign.reduce_budget)

        def finish(future: Future) -> None:
            if isinstance(future.exception(), PoolClosed):
                return
            case, progress, result = future.result()
            if isinstance(result, Exception):
                entry.unreduced = str(result)
                return
            self.campaign.steering.learn(result.graph, result.generalisation)

            def saved(repro: MinimizedRepro) -> None:
                entry.minimized = repro
                self.book.causes[root].record(repro)
            self._save_task(view, case, result, progress, repro_slug(entry.signature, root), key, root, saved)
        return _Task(view, work, finish, shared.wake, taken=key)

    def _to_learn(self, shared: SharedPool, key: str, case_path: str, batch: int) -> _Task:
        view = Reducing(f"{key} (a known bug's new form: {case_path})")
        self.learned[key] += 1

        def work():
            case, progress, result = self._reduce(shared.lease("learn"), case_path,
                                                  f"learn-{Path(case_path).stem}", view, batch,
                                                  min(LEARN_BUDGET, self.campaign.reduce_budget))
            progress.unlink(missing_ok=True)
            return case, result

        def finish(future: Future) -> None:
            if isinstance(future.exception(), PoolClosed):
                return
            case, result = future.result()
            if not isinstance(result, Exception):
                self.campaign.steering.learn(result.graph, result.generalisation)
                print(f"learned a trigger of {key[:80]}: {case.graph.size} -> {result.graph.size} ops",
                      file=sys.stderr)
        return _Task(view, work, finish, shared.wake, taken=key, learning=True)

    def _pending(self, shared: SharedPool, hit: PendingHit, batch: int) -> _Task:
        entry = self.campaign.stats.signatures[hit.coarse_key]
        view = Reducing(f"{hit.coarse_key} ({hit.case})")
        label = f"{entry.slug}-{Path(hit.case).stem}"

        def work():
            return self._reduce(shared.lease(), hit.case, label, view, batch, self.campaign.reduce_budget)

        def finish(future: Future) -> None:
            if isinstance(future.exception(), PoolClosed):
                return  # the hit stays pending, its progress in OUT/reducing/
            case, progress, result = future.result()
            self._settle(entry, hit, case, progress, result)
        return _Task(view, work, finish, shared.wake, taken=hit.case)

    def _settle(self, entry: SignatureRecord, hit: PendingHit, case, progress: Path, result) -> None:
        """File a pending hit's reduction in the book; a new root cause's repro is written (and
        verified) in a thread of its own."""
        if isinstance(result, Exception):  # this hit no longer fails: flaky, never guessed
            self.book.settle(hit, entry.signature, None)
            entry.unreduced = str(result)
            return
        signature = result.signature
        # The reduced case records the failure the reduction kept (a hit reduced on an extra input
        # set, or re-targeted at a wrong dtype, fails otherwise than the case it came from), so
        # that `fuzzfuse reduce` of it is interesting again.
        reduced_path = save_case(self.campaign.out / "reduced", dataclasses.replace(
            case, graph=result.graph, options=result.options, generalisation=result.generalisation,
            signature=signature))
        cause = self.book.settle(hit, signature, result.graph,
                                 str(reduced_path.relative_to(self.campaign.out)), result.generalisation)
        self.campaign.steering.learn(result.graph, result.generalisation)
        if cause.new and cause.minimized is None and cause.key not in self._saving:
            cause.writing_from = hit

            def saved(repro: MinimizedRepro) -> None:
                cause.record(repro)
                if entry.minimized is None:  # the coarse record points at the first repro made from it
                    entry.minimized = repro
            self._save_task(Reducing(f"{hit.coarse_key} ({hit.case})", result.stats), case, result, progress,
                            repro_slug(signature, cause.key), cause.key, cause.key, saved)
        else:
            progress.unlink(missing_ok=True)
            print(f"reduced {hit.case}: {case.graph.size} -> {result.graph.size} ops, "
                  f"{'known: ' + cause.known if cause.known else 'as ' + str(cause.minimized or 'another')}",
                  file=sys.stderr)

    def _save_task(self, view: Reducing, case, result: "CaseReduction", progress: Path, slug: str, what: str,
                   root: str, saved: Callable[[MinimizedRepro], None]) -> None:
        """Write and verify a new root cause's repro in a thread of its own (fresh processes, not
        the workers: the next reduction need not wait), then `saved(repro)` in the campaign's thread."""
        self._saving.add(root)

        def finish(future: Future) -> None:
            self._saving.discard(root)
            saved(future.result())
        self.tasks.append(_Task(view, lambda: self._save(case, result, progress, slug, what, view), finish,
                                self._wake, taken=f"save {root}", queries=False))

    def _save(self, case, result: "CaseReduction", progress: Path, slug: str, what: str,
              view: Reducing) -> MinimizedRepro:
        """Write and verify the repro (in a reduction's thread)."""
        c = self.campaign
        view.verifying = True
        directory = save_minimized(c.out / "minimized", case, result, c.backend_name, timeout=c.timeout, slug=slug)
        progress.unlink(missing_ok=True)
        stats = result.stats
        print(f"minimized {what}: {case.graph.size} -> {result.graph.size} ops, {stats.queries} queries, "
              f"{stats.seconds:.0f}s -> {directory}", file=sys.stderr)
        verification = load_case(directory / "case.json").verification
        return MinimizedRepro(str(directory.relative_to(c.out)), case.graph.size, result.graph.size,
                              stats.queries, stats.seconds, verification.status if verification else None)

    # ---- what the files say ------------------------------------------------------------------
    def summary(self) -> dict:
        causes = list(self.book.causes.values())
        n = counts(causes)
        return {"root_causes": [c.to_json() for c in causes], "root_causes_new": n["new"],
                "root_causes_known": n["known"], "root_causes_unconfirmed": n["unconfirmed"],
                "pending": self.book.pending_by_bucket(), "pending_hits": len(self.book.pending),
                "reduce_share": self.share, "learned": dict(self.learned)}

    def restore(self, book: RootCauseBook, learned: dict[str, int]) -> None:
        """Go on with a stopped run's book (CampaignState.root_causes) and the known bugs it learned
        triggers of, this run's --known taken."""
        book.know(self.known)
        book.device = self.book.device  # the device is the campaign's, not a record of the book's
        book.requeue_unwritten()
        self.book = book
        self.learned.update(learned)

    def causes(self) -> list[RootCause]:
        return list(self.book.causes.values())
