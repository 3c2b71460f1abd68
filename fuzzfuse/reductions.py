"""A campaign's reductions: reduce, then dedup, within a share of the run.

A coarse signature is what the reducer keeps while it shrinks; the root cause is what a campaign
counts (fuzzfuse.dedup, fuzzfuse.rootcause). An anchored crash (a C++ assert of the fuser) has its
root cause at once: one case of each new root cause is reduced into `minimized/`. A mismatch or a
weakly located crash has none until a reduction names it, so its hits wait, pending, in the book;
while the campaign fuzzes, reductions of them take up to `reduce_share` of its wall time (the
workers drain, one reduction runs on all of them, fuzzing goes on), the hits most likely to hide a
new cause first. A reduced hit whose root cause is new becomes a repro; one that a --known repro or
an earlier reduction already holds only counts.

When fuzzing stops, the anchored root causes still without a repro are reduced, then the pending
hits that hold no trigger their bucket has shown; the other pending hits stay pending (reported as
such, never as known), and `fuzzfuse fuzz --resume` goes on with them.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .corpus import CorpusError, iter_cases, load_case, save_case
from .dedup import PendingHit, RootCause, RootCauseBook
from .oracle import Signature
from .reduce import ReductionStats
from .identity import KnownBugs, root_cause_key, variant_identity
from .rootcause import anchored, signature_today
from .verdict import MinimizedRepro, SignatureRecord

if TYPE_CHECKING:
    from .campaign import Campaign
    from .minimize import CaseReduction
    from .worker import WorkerPool

# The share of a campaign's wall time that reductions may take while it fuzzes.
REDUCE_SHARE = 0.25
# Hits of one known bug reduced to learn triggers it has beyond its repro's (fuzzfuse.steering).
LEARN_PER_CAUSE = 3


class OutOfTime(Exception):
    """The run's --time is spent: the reduction under way stops where it is (its smallest failing
    graph so far stays in OUT/reducing/, where `--resume` picks it up)."""


@dataclass(frozen=True)
class Reducing:
    """The reduction under way, for the live display: what it reduces, and the reducer's counters."""

    what: str
    stats: ReductionStats


def known_repros(directories: list[str]) -> KnownBugs:
    """The bugs of the minimized repros under `directories`, by identity and coarse key (a bad file
    there is bad input: CorpusError). A repro's graph is reduced, so its identity is known; the
    variants a folded repro lists count as its own."""
    keys = KnownBugs()
    for path, case in iter_cases(directories):
        if isinstance(case, CorpusError):
            raise case
        if not case.signature:
            continue
        recorded = case.signature
        sig = signature_today(recorded, case.detail)
        directory = str(path.parent)
        keys.add(recorded.key(), directory)
        keys.add(sig.key(), directory)
        # Its own graph's identity, generalised where the case records how, and without: a
        # campaign that reduced the bug without generalising it (--reduce-budget spent) still finds it.
        for general in {case.generalisation, None}:
            root = root_cause_key(sig, case.graph, general, case.device)
            if root:
                keys.add(root, directory)
        for variant in case.also_seen_as:
            identity = variant_identity(variant, case.device)
            for key in (variant.key, identity.key() if identity else None):
                if key:
                    keys.add(key, directory)
    return keys


def repro_slug(signature: Signature, root_cause: str | None) -> str:
    """A repro directory's name: the signature's readable words and a hash of the root cause, so
    that two causes found under one coarse signature get two directories."""
    if not root_cause:
        return signature.slug()
    words = signature.slug().rsplit("-", 1)[0]
    return f"{words}-{hashlib.sha1(root_cause.encode()).hexdigest()[:8]}"


class CampaignReductions:
    """The reducer side of a campaign: its book of root causes and the reductions it runs."""

    def __init__(self, campaign: "Campaign", known: KnownBugs, share: float = REDUCE_SHARE):
        if not 0 <= share <= 1:
            raise ValueError(f"--reduce-share must be a fraction of wall time from 0 to 1, not {share}")
        self.campaign, self.known, self.share = campaign, known, share
        self.book = RootCauseBook(known, campaign.features.device)
        self.draining = False  # workers finish what they hold before a reduction takes them
        self.current: Reducing | None = None
        self.verifying: str | None = None  # what a repro being verified was reduced from
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

    def _worth_learning(self, key: str, graph) -> bool:
        """A known bug hit through a graph that holds none of the triggers the campaign steers by:
        its triggers miss a form of it (oneDNN's "IValue is not a Scalar" comes of clamp with tensor
        bounds and of clamp_min with one), so one such hit is reduced to learn another, up to
        LEARN_PER_CAUSE of them."""
        waiting = sum(k == key for k, _ in self.to_learn)
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
            if root in roots or (cause is not None and (cause.known or cause.minimized)):
                continue
            roots.add(root)
            out.append(key)
        return out

    def next_pending(self, novel_only: bool = False) -> PendingHit | None:
        """The pending hit to reduce next, among those of reproducible signatures."""
        return self.book.next_to_reduce(lambda hit: self._confirmed(hit.coarse_key), novel_only)

    def has_work(self) -> bool:
        return bool(self.anchored_queue()) or bool(self.to_learn) or self.next_pending() is not None

    def due(self) -> bool:
        """Whether fuzzing should pause for a reduction: reductions took less than their share of
        this run's wall time so far, and one is waiting."""
        c = self.campaign
        if not c.reduce or not self.share or self.draining:
            return self.draining
        elapsed = time.time() - c.stats.start
        return c.stats.paused < self.share * elapsed and self.has_work()

    # ---- reductions ------------------------------------------------------------------------
    def reduce_one(self, pool: "WorkerPool", novel_only: bool = False, learn: bool = True) -> bool:
        """Run the next reduction (every worker idle); False when none is waiting. learn: reduce a
        known bug's hit to learn a trigger (worth it only while the campaign still fuzzes)."""
        queue = self.anchored_queue()
        if queue:
            self._reduce_anchored(pool, queue[0])
            return True
        if learn and self.to_learn:
            self._reduce_to_learn(pool, *self.to_learn.pop(0))
            return True
        hit = self.next_pending(novel_only)
        if hit is None:
            return False
        self._reduce_pending(pool, hit)
        return True

    def reduce_rest(self, pool: "WorkerPool") -> None:
        """After fuzzing: every anchored root cause without a repro, then the novel pending hits."""
        while not self._out_of_time() and self.reduce_one(pool, novel_only=True, learn=False):
            pass

    def _out_of_time(self) -> bool:
        deadline = self.campaign.deadline
        return deadline is not None and time.time() >= deadline

    def _reduce(self, pool: "WorkerPool", case_path: str, label: str, what: str):
        """Reduce the case at `case_path`: its Reduction, or None when it no longer fails."""
        from .minimize import reduce_case
        from .reduce import NotInteresting

        c = self.campaign
        case = load_case(c.out / case_path)
        progress = c.out / "reducing" / f"{label}.json"

        def show(stats: ReductionStats) -> None:
            self.current = Reducing(what, stats)
            if c.display:
                c.display(c, pool)
            if self._out_of_time():
                raise OutOfTime

        start = time.time()
        try:
            reduction = reduce_case(case, c.backend_name, workers=c.workers, timeout=c.timeout, pool=pool,
                                               max_queries=c.reduce_budget, checkpoint=progress, progress=show)
            reduction.stats.seconds = round(time.time() - start, 2)
            return case, progress, reduction
        except NotInteresting as e:
            print(f"not minimized {what}: {e}", file=sys.stderr)
            return case, progress, e
        finally:
            self.current = None

    def _reduce_anchored(self, pool: "WorkerPool", key: str) -> None:
        entry = self.campaign.stats.signatures[key]
        case, progress, result = self._reduce(pool, entry.case, entry.slug, key)
        if isinstance(result, Exception):
            entry.unreduced = str(result)
            return
        root = root_cause_key(entry.signature)
        self.campaign.steering.learn(result.graph, result.generalisation)
        entry.minimized = self._save(pool, case, result, progress, repro_slug(entry.signature, root), key)
        self.book.causes[root].minimized = entry.minimized.path

    def _reduce_to_learn(self, pool: "WorkerPool", key: str, case_path: str) -> None:
        case, progress, result = self._reduce(pool, case_path, f"learn-{Path(case_path).stem}",
                                              f"{key} (a known bug's new form: {case_path})")
        progress.unlink(missing_ok=True)
        self.learned[key] += 1
        if not isinstance(result, Exception):
            self.campaign.steering.learn(result.graph, result.generalisation)
            print(f"learned a trigger of {key[:80]}: {case.graph.size} -> {result.graph.size} ops", file=sys.stderr)

    def _reduce_pending(self, pool: "WorkerPool", hit: PendingHit) -> None:
        entry = self.campaign.stats.signatures[hit.coarse_key]
        label = f"{entry.slug}-{Path(hit.case).stem}"
        case, progress, result = self._reduce(pool, hit.case, label, f"{hit.coarse_key} ({hit.case})")
        if isinstance(result, Exception):  # this hit no longer fails: flaky, never guessed
            self.book.settle(hit, entry.signature, None)
            entry.unreduced = str(result)
            return
        signature = result.signature
        reduced_path = save_case(self.campaign.out / "reduced", dataclasses.replace(
            case, graph=result.graph, options=result.options, generalisation=result.generalisation))
        cause = self.book.settle(hit, signature, result.graph,
                                 str(reduced_path.relative_to(self.campaign.out)), result.generalisation)
        self.campaign.steering.learn(result.graph, result.generalisation)
        if cause.new and cause.minimized is None:
            repro = self._save(pool, case, result, progress, repro_slug(signature, cause.key), cause.key)
            cause.minimized = repro.path
            if entry.minimized is None:  # the coarse record points at the first repro made from it
                entry.minimized = repro
        else:
            progress.unlink(missing_ok=True)
            print(f"reduced {hit.case}: {case.graph.size} -> {result.graph.size} ops, "
                  f"{'known: ' + cause.known if cause.known else 'as ' + str(cause.minimized)}", file=sys.stderr)

    def _save(self, pool: "WorkerPool", case, result: "CaseReduction", progress: Path, slug: str,
              what: str) -> MinimizedRepro:
        from .minimize import save_minimized

        c = self.campaign
        self.verifying = what
        if c.display:
            c.display(c, pool)
        try:
            directory = save_minimized(c.out / "minimized", case, result, c.backend_name, timeout=c.timeout, slug=slug)
        finally:
            self.verifying = None
        progress.unlink(missing_ok=True)
        stats = result.stats
        print(f"minimized {what}: {case.graph.size} -> {result.graph.size} ops, {stats.queries} queries, "
              f"{stats.seconds:.0f}s -> {directory}", file=sys.stderr)
        return MinimizedRepro(str(directory.relative_to(c.out)), case.graph.size, result.graph.size,
                              stats.queries, stats.seconds)

    # ---- what the files say ------------------------------------------------------------------
    def summary(self) -> dict:
        causes = list(self.book.causes.values())
        return {"root_causes": [c.to_json() for c in causes],
                "root_causes_new": sum(c.new for c in causes), "root_causes_known": sum(not c.new for c in causes),
                "pending": self.book.pending_by_bucket(), "reduce_share": self.share}

    def restore(self, book: RootCauseBook) -> None:
        """Go on with a stopped run's book (CampaignState.root_causes), this run's --known taken."""
        book.know(self.known)
        self.book = book

    def causes(self) -> list[RootCause]:
        return list(self.book.causes.values())
