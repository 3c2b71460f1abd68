"""Triage: every failure under a directory, one bucket per signature key, most distinct first.

The directory may hold any number of campaign outputs (one `summary.json` per shard or host, at
any depth), which are merged by signature key: counts add up, first seen is the earliest, last seen
the latest, and the smallest repro of any shard wins. Cases that no summary covers (a plain
`minimized/` of repros, a `corpus/` of saved cases) are bucketed by each case's own signature.

"Most distinct first" is a sort on these keys, in order (see `Bucket.rank`):

1. real bugs before coverage: `unfused` buckets (the fuser declined the graph) come last;
2. reproducible before flaky: a bucket is flaky when any shard's re-checks disagreed
   (outcome "flaky" or confirmed False) or its minimized repro verified as flaky;
3. tier, by how precisely the failure names its bug: 0 a crash, hard crash or hang with a source
   location (a C++ assert's file:line, a Python function); 1 a process death or hang without one
   (a signal, a timeout); 2 a mismatch (wrong values, NaN/Inf, dtype or shape, per dtype class);
   3 a crash known only by exception type and message, which many unrelated bugs share;
4. rarity of the backend/kind/location combination among all buckets: a combination with a single
   bucket is one bug; ten buckets with the same empty location are likely variants of few;
5. rarity: fewer hits first (a frequent failure is found again anyway; a rare one is easy to lose);
6. the key itself, so the order is stable.
"""
from __future__ import annotations

import collections
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .corpus import CorpusError, case_files, load_case, read_json
from .oracle import Signature
from .identity import root_cause_key
from .rootcause import signature_today
from .upstream import known
from .verdict import Outcome, Reproduction, SignatureRecord
from .versions import summary_of

SUMMARY = "summary.json"
LOCATED_OUTCOMES = (Outcome.CRASH, Outcome.HARD_CRASH, Outcome.HANG)


class TriageError(ValueError):
    """Nothing to triage under the directory; the message is one line."""


@dataclass
class Bucket:
    """All failures with one signature key, from every shard."""

    key: str
    signature: Signature
    count: int = 0
    first_seen: float | None = None
    last_seen: float | None = None
    flaky: bool = False
    detail: str = ""
    shards: set[str] = field(default_factory=set)  # directories (relative to the root) that hit it
    repro: Path | None = None  # smallest minimized directory: case.json, repro.py, README.md
    repro_size: int | None = None
    case: Path | None = None  # smallest saved case, for buckets without a minimized repro
    case_size: int | None = None
    verification: Reproduction | None = None  # the minimized repro's fresh-process status
    upstream: str = ""  # the upstream issue that reports it, with its state (fuzzfuse.upstream), if found
    combo: int = 1  # buckets sharing this one's backend/kind/location (set by `order`)

    @property
    def outcome(self) -> str:
        return self.signature.outcome

    @property
    def backend(self) -> str:
        return self.signature.backend

    @property
    def tail(self) -> str:
        """The key without outcome and backend, which tables show in columns of their own."""
        s = self.signature
        return "|".join((s.stage, s.kind, s.location, s.message))

    @property
    def smallest(self) -> tuple[Path | None, int | None]:
        """The case file to show for this bucket and its op count: the minimized one if any."""
        if self.repro is not None:
            return self.repro / "case.json", self.repro_size
        return self.case, self.case_size

    @property
    def tier(self) -> int:
        located = bool(self.signature.location)
        if self.outcome in LOCATED_OUTCOMES and located:
            return 0
        if self.outcome in (Outcome.HARD_CRASH, Outcome.HANG):
            return 1
        return 2 if self.outcome == Outcome.MISMATCH else 3

    def rank(self) -> tuple:
        return (self.outcome == Outcome.UNFUSED, self.flaky, self.tier, self.combo, self.count, self.key)

    def see(self, count: int, first: float | None, last: float | None, shard: str, detail: str) -> None:
        self.count += count
        self.first_seen = _pick(min, self.first_seen, first)
        self.last_seen = _pick(max, self.last_seen, last)
        self.shards.add(shard)
        self.detail = self.detail or detail

    def offer_repro(self, directory: Path, size: int | None) -> None:
        if self.repro is None or (size is not None and (self.repro_size is None or size < self.repro_size)):
            self.repro, self.repro_size = directory, size

    def offer_case(self, path: Path, size: int | None) -> None:
        if self.case is None or (size is not None and (self.case_size is None or size < self.case_size)):
            self.case, self.case_size = path, size


@dataclass
class Run:
    """One campaign (one summary.json): what the report's plots and breakdowns draw."""

    name: str  # its directory relative to the root ("." for the root itself)
    backend: str
    start: float | None
    cases: int
    seconds: float
    outcomes: dict
    coverage: dict
    timeline: list


@dataclass
class Triage:
    root: Path
    buckets: list[Bucket]
    runs: list[Run]
    problems: list[str]  # files that could not be read, one line each
    saved: list[float] = field(default_factory=list)  # when each case outside any summary was found

    @property
    def cases(self) -> int:
        return sum(r.cases for r in self.runs)


def _pick(f, a, b):
    vals = [v for v in (a, b) if isinstance(v, (int, float))]
    return f(vals) if vals else None


def _rel(path: Path, root: Path) -> str:
    return os.path.relpath(path, root)


def _visible(path: Path, root: Path) -> bool:
    return not any(part.startswith(".") for part in path.relative_to(root).parts)


def _merge_summary(buckets: dict[str, Bucket], root: Path, path: Path, data: dict) -> Run:
    shard = _rel(path.parent, root)
    records = [SignatureRecord.from_json(e) for e in data.get("signatures") or []]
    timeline = [[float(x) for x in p[:3]] for p in data.get("timeline") or []]
    start = data.get("start")
    run = Run(shard, str(data.get("backend", "")), None if start is None else float(start), int(data.get("cases", 0)),
              float(data.get("seconds", 0.0)), dict(data.get("outcomes") or {}), dict(data.get("coverage") or {}),
              [p for p in timeline if len(p) == 3])
    for r in records:  # all read before any is merged: a bad summary merges nothing
        b = buckets.setdefault(r.key, Bucket(r.key, r.signature))
        b.see(r.count, r.first_seen, r.last_seen, shard, r.detail)
        b.flaky |= r.flaky
        if r.minimized and r.minimized.path:
            b.offer_repro(path.parent / r.minimized.path, r.minimized.ops_after)
        elif r.known and Path(r.known).is_dir():  # held by the regression corpus (--known)
            b.offer_repro(Path(r.known), None)
        if r.case:
            b.offer_case(path.parent / r.case, r.smallest_size)
    return run


def _merge_case(buckets: dict[str, Bucket], root: Path, path: Path, case) -> None:
    """A case with no summary over it: a minimized repro counts its hits, a corpus case one. Both
    are bucketed by root cause where it is known (a repro's graph is reduced; an unreduced case
    only names one by a native assert), else by their coarse signature."""
    # Keyed as today's oracle words the recorded error (an NVRTC error's call types, say).
    sig = signature_today(case.signature, case.detail)
    minimized = path.name == "case.json" and (path.parent / "repro.py").is_file()
    key = root_cause_key(sig, case.graph if minimized else None, case.generalisation, case.device) or sig.key()
    b = buckets.setdefault(key, Bucket(key, sig))
    b.see(case.hits if minimized else 1, case.found or None, case.found or None,
          _rel(path.parent.parent if minimized else path.parent, root), case.detail)
    if minimized:
        b.offer_repro(path.parent, case.graph.size)
    else:
        b.offer_case(path, case.graph.size)


def _check_repros(buckets: dict[str, Bucket], problems: list[str]) -> None:
    """The chosen repro's own verification: a repro that flakes in fresh processes flags the bucket."""
    for b in buckets.values():
        if b.repro is None:
            continue
        try:
            case = load_case(b.repro / "case.json")
        except CorpusError as e:
            problems.append(str(e))
            continue
        b.verification = case.verification.status if case.verification else None
        b.flaky |= b.verification == Reproduction.FLAKY
        b.repro_size = case.graph.size
        b.detail = b.detail or case.detail
        if same := known(case.upstream):
            b.upstream = f"{same.reference} ({same.status()})"


def order(buckets: list[Bucket]) -> list[Bucket]:
    """Most distinct first (the rules are in this module's docstring)."""
    combos = collections.Counter((b.backend, b.signature.kind, b.signature.location) for b in buckets)
    for b in buckets:
        b.combo = combos[(b.backend, b.signature.kind, b.signature.location)]
    return sorted(buckets, key=Bucket.rank)


def load(root: Path) -> Triage:
    """Every summary and uncovered case under `root`, merged into ordered buckets."""
    root = Path(root)
    if not root.is_dir():
        raise TriageError(f"{root}: not a directory")
    buckets: dict[str, Bucket] = {}
    runs: list[Run] = []
    problems: list[str] = []
    saved: list[float] = []
    summaries = sorted(p for p in root.rglob(SUMMARY) if p.is_file() and _visible(p, root))
    covered = [p.parent for p in summaries]
    for path in summaries:
        try:
            runs.append(_merge_summary(buckets, root, path, read_json(path, "summary")))
        except CorpusError as e:
            problems.append(str(e))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            problems.append(f"{path}: invalid summary: {e!r}")
    for path in case_files([root]):
        if path.name == SUMMARY or not _visible(path, root) or any(d in path.parents for d in covered):
            continue
        try:
            case = load_case(path)
        except CorpusError as e:
            problems.append(str(e))
            continue
        if case.signature:  # seed cases have none: nothing failed
            _merge_case(buckets, root, path, case)
            saved.append(case.found)
    if not buckets and not runs:
        raise TriageError(problems[0] if problems else f"{root}: no summary.json and no failing cases under it")
    _check_repros(buckets, problems)
    return Triage(root, order(list(buckets.values())), runs, problems, sorted(t for t in saved if t))


# ---- terminal table --------------------------------------------------------------------------
OUTCOME_STYLE = {"crash": "bold red", "hard-crash": "bold magenta", "hang": "magenta", "mismatch": "yellow",
                 "unfused": "dim", "flaky": "cyan"}


def when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


def print_table(t: Triage, console: Console | None = None) -> None:
    """One row a bucket, in triage order; the repro column names the minimized directory (else the
    smallest saved case) relative to the root."""
    console = console or Console(width=None if sys.stdout.isatty() else 200)
    table = Table(title=f"{len(t.buckets)} buckets under {t.root}", title_justify="left")
    for name, kw in (("#", {"justify": "right"}), ("outcome", {}), ("backend", {}), ("hits", {"justify": "right"}),
                     ("shards", {"justify": "right"}), ("first seen", {}), ("last seen", {}),
                     ("ops", {"justify": "right"}), ("stage|kind|location|message", {"overflow": "fold", "ratio": 3}),
                     ("smallest repro", {"overflow": "fold", "ratio": 2})):
        table.add_column(name, **kw)
    # What `fuzzfuse versions` found for each repro across builds, where it was run.
    versions = {b.key: summary_of(b.repro) for b in t.buckets if b.repro is not None}
    if any(versions.values()):
        table.add_column("versions", overflow="fold", ratio=2)
    for i, b in enumerate(t.buckets, 1):
        outcome = Text(b.outcome, style=OUTCOME_STYLE.get(b.outcome, ""))
        if b.flaky:
            outcome.append(" flaky", style=OUTCOME_STYLE["flaky"])
        path, size = b.smallest
        where = _rel(b.repro if b.repro is not None else path, t.root) if path is not None else "-"
        where += f"; upstream {b.upstream}" if b.upstream else ""
        row = [str(i), outcome, b.backend, str(b.count), str(len(b.shards)), when(b.first_seen),
               when(b.last_seen), "-" if size is None else str(size), Text(b.tail), where]
        table.add_row(*row, *([versions.get(b.key) or "-"] if any(versions.values()) else []))
    console.print(table)
    for p in t.problems:
        console.print(Text.assemble(("skipped ", "yellow"), p))
