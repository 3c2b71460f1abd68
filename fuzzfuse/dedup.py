"""Reduce, then dedup: the campaign's book of root causes.

A coarse signature (outcome, backend, stage, kind, location, message) is what the reducer keeps
while it shrinks a case. It is not a bug: every float value mismatch of a backend shares one, and
a crash known only by a Python frame says little more. Such a hit has no root cause until it is
reduced; its root-cause key is then the canonical form of the reduced graph (rootcause.py). A crash
with a native assert location has its root cause at once.

So a hit is one of:
- anchored: its root-cause key is known now (a crash with a C++ location);
- pending: it waits for a reduction, and is never counted as known before it has one;
- settled: reduced, and its reduced graph's key names its root cause.

The campaign asks `next_to_reduce()` for the pending hit most likely to be a new bug: one whose op
set does not hold the ops of any reduced case of its bucket (a hit that holds every op of a known
minimal trigger most likely fails through it again).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .ir import Graph
from .oracle import Signature
from .reduce.generalise import Generalisation
from .identity import root_cause_key
from .known import KnownBugs
from .verdict import MinimizedRepro, Outcome, Reproduction

# Unreduced hits kept per coarse bucket: enough to find the causes a bucket hides, bounded for
# campaigns that run for days.
PENDING_PER_BUCKET = 20


@dataclass
class PendingHit:
    """A failing case whose root cause needs a reduction."""

    coarse_key: str
    case: str  # the saved case, relative to the campaign directory
    ops: list[str]
    size: int
    # Reduced once already, its new root cause's repro cut off unwritten (the run's time ran out
    # while it was verified): reduced again from its checkpoint, not counted again.
    retry: bool = False

    def holds(self, trigger: list[str]) -> bool:
        return set(trigger) <= set(self.ops)


@dataclass
class RootCause:
    """One bug: the coarse buckets it was seen in, its hits, and where its repro is."""

    key: str
    coarse_keys: list[str] = field(default_factory=list)
    hits: int = 0
    first_seen: float = field(default_factory=time.time)
    known: str | None = None  # a --known repro directory that holds it
    minimized: str | None = None  # this campaign's repro, relative to its directory
    reduced_case: str | None = None  # the reduced case a minimized repro is written from
    trigger: list[str] = field(default_factory=list)  # the reduced graph's ops
    # Its repro failed in none of its fresh processes: a bug nobody can show yet is not counted new.
    unconfirmed: bool = False
    # The hit its repro is being written from, until it is written: a resumed run reduces it again.
    writing_from: PendingHit | None = None

    @property
    def new(self) -> bool:
        return self.known is None and not self.unconfirmed

    def whereabouts(self, out: Path) -> str:
        """Known, new or unconfirmed, and where its repro is: a crash that never failed again when its
        case was re-run is unconfirmed with no repro at all."""
        if self.known:
            return f"known: {self.known}"
        if self.unconfirmed:
            return f"unconfirmed (its repro did not fail again): {out / self.minimized}" if self.minimized \
                else "unconfirmed (its case did not fail again when re-run; no repro)"
        return f"new: {out / self.minimized}" if self.minimized else "new, not reduced yet"

    def record(self, repro: MinimizedRepro) -> None:
        """Its repro, written and re-run in fresh processes."""
        self.minimized = repro.path
        self.unconfirmed = repro.reproduction is Reproduction.DOES_NOT_REPRODUCE
        self.writing_from = None

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> "RootCause":
        cause = RootCause(**{k: d[k] for k in RootCause.__dataclass_fields__ if k in d})
        if cause.writing_from is not None:
            cause.writing_from = PendingHit(**cause.writing_from)
        return cause


def counts(causes: list[RootCause]) -> dict[str, int]:
    """How many root causes are new, known, and unconfirmed (not known, and its repro did not fail
    again): the one count the progress line, the summary and the closing lines give."""
    return {"new": sum(c.new for c in causes), "known": sum(c.known is not None for c in causes),
            "unconfirmed": sum(c.unconfirmed and c.known is None for c in causes)}


def tally(causes: list[RootCause]) -> str:
    """"2 new, 5 known" (and ", 1 unconfirmed" where one is)."""
    n = counts(causes)
    return f"{n['new']} new, {n['known']} known" + (f", {n['unconfirmed']} unconfirmed" if n["unconfirmed"] else "")


def graph_ops(graph: Graph) -> list[str]:
    return sorted({n.op for n in graph.nodes})


class RootCauseBook:
    """Root causes by key, and the hits still waiting for a reduction."""

    def __init__(self, known: KnownBugs | dict[str, str] | None = None, device: str = ""):
        self.known = known if isinstance(known, KnownBugs) else KnownBugs(known)
        self.device = device  # where the campaign's fused code runs: a wrong value's identity names it
        self.causes: dict[str, RootCause] = {}
        self.pending: list[PendingHit] = []
        # coarse key -> ops of every reduced case of that bucket (the triggers found there)
        self.triggers: dict[str, list[list[str]]] = {}

    def offer(self, signature: Signature, graph: Graph, case: str | None) -> RootCause | None:
        """A new failing hit. Returns its root cause when it is anchored, else keeps it pending
        (when it was saved and its bucket has room) and returns None."""
        key = root_cause_key(signature)
        if key is not None:
            return self._count(key, signature.key(), [])
        if case is not None and sum(h.coarse_key == signature.key() for h in self.pending) < PENDING_PER_BUCKET:
            self.pending.append(PendingHit(signature.key(), case, graph_ops(graph), graph.size))
        return None

    def novel(self, hit: PendingHit) -> bool:
        """Whether a pending hit holds no trigger its bucket has shown (likely a new cause)."""
        return not any(hit.holds(t) for t in self.triggers.get(hit.coarse_key, []))

    def next_to_reduce(self, eligible: Callable[[PendingHit], bool] = lambda hit: True,
                       novel_only: bool = False) -> PendingHit | None:
        """The eligible pending hit to reduce next: first a new cause's whose repro a stopped run
        left unwritten, then those that hold no trigger their bucket has shown (likely a new
        cause), the smallest first; then (unless novel_only) the rest, the buckets reduced least
        first. A hang goes after the other hits of its rank: each of its
        queries that still hangs costs the whole per-query timeout, and one hang's reduction can
        take what time a run has left while many mismatches wait."""
        hits = [h for h in self.pending if eligible(h) and (h.retry or self.novel(h) or not novel_only)]
        if not hits:
            return None
        return min(hits, key=lambda h: (not h.retry, not self.novel(h),
                                        h.coarse_key.startswith(f"{Outcome.HANG.value}|"),
                                        len(self.triggers.get(h.coarse_key, [])), h.size))

    def settle(self, hit: PendingHit, signature: Signature, reduced: Graph | None,
               reduced_case: str | None = None, generalisation: Generalisation | None = None) -> RootCause | None:
        """A pending hit's reduction finished: its reduced graph (its fillers written as wildcards,
        where it was generalised) names its root cause. None when the hit no longer failed
        (flaky): it is dropped, never guessed."""
        self.pending.remove(hit)
        if reduced is None:
            return None
        key = root_cause_key(signature, reduced, generalisation, self.device)
        if key is None:  # the reduced graph still says nothing more: the coarse key is all we have
            key = signature.key()
        trigger = graph_ops(reduced)
        if not hit.retry:
            self.triggers.setdefault(hit.coarse_key, []).append(trigger)
        cause = self._count(key, hit.coarse_key, trigger, counted=not hit.retry)
        if cause.reduced_case is None:
            cause.reduced_case = reduced_case
        return cause

    def _count(self, key: str, coarse_key: str, trigger: list[str], counted: bool = True) -> RootCause:
        cause = self.causes.get(key)
        if cause is None:
            cause = self.causes[key] = RootCause(key, known=self.known.find(key), trigger=trigger)
        if coarse_key not in cause.coarse_keys:
            cause.coarse_keys.append(coarse_key)
        cause.hits += counted
        return cause

    def requeue_unwritten(self) -> list[PendingHit]:
        """A stopped run's new root causes whose repro was cut off unwritten: their hits pending
        again (marked `retry`), so a resumed run reduces each from its checkpoint and writes it."""
        again = []
        for cause in self.causes.values():
            hit = cause.writing_from
            if hit is None or not cause.new or cause.minimized or any(h.case == hit.case for h in self.pending):
                continue
            again.append(PendingHit(hit.coarse_key, hit.case, hit.ops, hit.size, retry=True))
        self.pending.extend(again)
        return again

    def pending_by_bucket(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for hit in self.pending:
            counts[hit.coarse_key] = counts.get(hit.coarse_key, 0) + 1
        return counts

    def bucket_news(self, coarse_key: str) -> str | None:
        """What the root causes reduced out of one coarse bucket say of it ("1 known root cause; 5
        hits pending"), or None where none was reduced and none waits. A bucket no --known repro
        holds whole is still not new when every root cause reduced out of it is known: the closing
        lines say so rather than calling it new."""
        causes = [c for c in self.causes.values() if coarse_key in c.coarse_keys]
        waiting = self.pending_by_bucket().get(coarse_key, 0)
        if not causes and not waiting:
            return None
        parts = [f"root causes {tally(causes)} (below)"] if causes else []
        if waiting:
            parts.append(f"{waiting} hit(s) pending a reduction")
        return "; ".join(parts)

    def know(self, known: KnownBugs | dict[str, str]) -> None:
        """Take a campaign's --known repros (root-cause key -> directory): a resumed campaign may
        name other directories than its first run did, and a cause one of them holds is known."""
        self.known = known if isinstance(known, KnownBugs) else KnownBugs(known)
        for cause in self.causes.values():
            cause.known = self.known.find(cause.key) or cause.known

    def to_json(self) -> dict:
        return {"causes": [c.to_json() for c in self.causes.values()],
                "pending": [asdict(h) for h in self.pending], "triggers": self.triggers}

    @staticmethod
    def from_json(d: dict) -> "RootCauseBook":
        """A book as a campaign's state.json holds it, before the resumed campaign's --known (`know`)."""
        book = RootCauseBook()
        for c in d.get("causes", []):
            cause = RootCause.from_json(c)
            book.causes[cause.key] = cause
        book.pending = [PendingHit(**h) for h in d.get("pending", [])]
        book.triggers = {k: [list(t) for t in v] for k, v in d.get("triggers", {}).items()}
        return book
