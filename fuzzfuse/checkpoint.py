"""What a campaign keeps on disk so that a SIGKILL loses nothing and `fuzz --resume` goes on:
its counters (Stats), its position in the seed stream and what defines it (CampaignState,
CampaignArgs: state.json), and a claim on its directory so that two processes never write the
same files.

Every file is written whole or not at all (corpus.write_json: temp file + rename), and cases are
saved before the state that counts them, so a kill at any moment leaves a consistent directory:
at worst the cases that were in flight run again after the resume.
"""
from __future__ import annotations

import collections
import enum
import os
import socket
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .corpus import CorpusError, read_json, write_json
from .dedup import RootCauseBook
from .reductions import REDUCE_SHARE
from .strategies import Features
from .ir.untrusted import record, strings, take
from .verdict import SignatureRecord

STATE_SCHEMA = 1
STATE_FILE = "state.json"
LOCK_FILE = ".campaign.lock"
# Per-case samples kept for the rates and medians: enough for stable figures, bounded for campaigns
# that run for days.
MAX_SAMPLES = 20_000


@dataclass
class Stats:
    cases: int = 0
    outcomes: collections.Counter = field(default_factory=collections.Counter)
    signatures: dict[str, SignatureRecord] = field(default_factory=dict)  # by signature key
    fused_cases: int = 0
    # Cases drawn outside the backend's declared fusible space (campaign.OUTSIDE_SHARE), and how
    # many of them ran fused code all the same.
    outside_cases: int = 0
    outside_fused_cases: int = 0
    # Fuzzing seconds of earlier runs of this campaign (before a resume), and this run's start.
    elapsed_before: float = 0.0
    start: float = field(default_factory=time.time)
    # When the campaign first started, kept across resumes: summary.json's "start", the origin of
    # its timeline and never after a first-seen time (None until the first run starts).
    first_start: float | None = None
    # Per case: when its result arrived, and the fuser's own compile time (benchmarks read these).
    finished: list[float] = field(default_factory=list)
    compile_seconds: list[float] = field(default_factory=list)
    # Kernels a case compiled -> [cases, their compile seconds]: which cases make the compile tail.
    compile_by_kernels: dict[str, list] = field(default_factory=dict)
    # Worker-side seconds per phase (generate, eager, backend, compare): where a case's time goes.
    phase_seconds: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    # Which fuser schedulers/segments ran (nvFuser reports them): where the campaign has been.
    coverage: collections.Counter = field(default_factory=collections.Counter)
    # [seconds, cases, distinct signatures] at each checkpoint: the report's plots.
    timeline: list[list] = field(default_factory=list)
    focus_batches: collections.Counter = field(default_factory=collections.Counter)
    # Cases of a focused batch that reached the scheduler it aimed at: whether a recipe works.
    focus_hits: collections.Counter = field(default_factory=collections.Counter)
    # Worker seconds of all cases, and of each recipe's focused cases: the focus's time budget.
    worker_seconds: float = 0.0
    focus_seconds: collections.Counter = field(default_factory=collections.Counter)
    # Set when fuzzing stops: rates exclude the reductions that follow.
    stop: float | None = None
    # Input sets judged (a compiled graph runs on several: fuzzfuse.job), and how often each
    # "op|dtype|layout" triple was exercised: where generation steers next (strategies.steer).
    input_sets: int = 0
    triples: collections.Counter = field(default_factory=collections.Counter)
    # Draws discarded for holding a known bug's trigger, and the cases that discarded any
    # (fuzzfuse.steering).
    steered_draws: int = 0
    steered_cases: int = 0
    # Documented differences by kind (verdict.Difference): counted, not reported as bugs.
    differences: collections.Counter = field(default_factory=collections.Counter)
    # The per-case backend choices drawn (Inductor's flags, mode, dynamic: `Backend.draw_options`).
    choices: collections.Counter = field(default_factory=collections.Counter)

    def compile_bound_rate(self, workers: int) -> float | None:
        """Cases/s if the workers did nothing but compile (workers / mean compile seconds): the
        limit a campaign of a slow-compiling fuser is measured against."""
        if not self.compile_seconds:
            return None
        return workers / max(statistics.fmean(self.compile_seconds), 1e-9)
    # Of those, the sets run on new sizes or strides by code compiled for others.
    reshaped_sets: int = 0

    def count_inputs(self, input_sets: int, triples: list[str], reshaped_sets: int = 0) -> None:
        self.input_sets += input_sets
        self.reshaped_sets += reshaped_sets
        self.triples.update(triples)

    @property
    def origin(self) -> float:
        """The campaign's first start (before this field was kept: this run's start less the
        fuzzing seconds before it, which ignored reductions and stops)."""
        return self.first_start if self.first_start is not None else self.start - self.elapsed_before

    @property
    def seconds(self) -> float:
        """Fuzzing seconds over every run of the campaign."""
        return self.elapsed_before + (self.stop or time.time()) - self.start

    def add_sample(self, samples: list[float], value: float) -> None:
        samples.append(value)
        if len(samples) > 2 * MAX_SAMPLES:
            del samples[:-MAX_SAMPLES]

    def add_compile(self, seconds: float, kernels: int | None) -> None:
        self.add_sample(self.compile_seconds, seconds)
        if kernels is not None:
            entry = self.compile_by_kernels.setdefault(str(kernels), [0, 0.0])
            entry[0] += 1
            entry[1] += seconds

    def steady_rate(self, skip: int) -> float:
        """Cases per second in this run after the first `skip` results (worker start-up and
        warm-up excluded)."""
        done = self.finished[skip:]
        return (len(done) - 1) / (done[-1] - done[0]) if len(done) > 2 and done[-1] > done[0] else 0.0

    def summary(self, backend: str, versions: dict, extra: dict) -> dict:
        secs = self.seconds
        median = lambda v: round(statistics.median(v), 4)  # noqa: E731
        return {"backend": backend, "versions": versions, "cases": self.cases,
                "outcomes": _by_name(self.outcomes), "signatures": [r.to_json() for r in self.signatures.values()],
                "seconds": round(secs, 2), "cases_per_second": round(self.cases / secs, 3) if secs else 0.0,
                "input_sets": self.input_sets,
                "input_sets_per_second": round(self.input_sets / secs, 3) if secs else 0.0,
                "reshaped_input_sets": self.reshaped_sets,
                "triples_covered": len(self.triples),
                "fused_share": round(self.fused_cases / self.cases, 4) if self.cases else 0.0,
                "outside_cases": self.outside_cases,
                "outside_fused_share": (round(self.outside_fused_cases / self.outside_cases, 4)
                                        if self.outside_cases else None),
                "steered_draws": self.steered_draws, "steered_cases": self.steered_cases,
                "steady_cases_per_second": round(self.steady_rate(skip=extra.get("workers", 1)), 3),
                "median_compile_seconds": median(self.compile_seconds) if self.compile_seconds else None,
                "mean_compile_seconds": round(statistics.fmean(self.compile_seconds), 4) if self.compile_seconds else None,
                "compile_by_kernels": self._compile_by_kernels(),
                "compile_bound_cases_per_second": (round(self.compile_bound_rate(extra.get("workers", 1)), 3)
                                                   if self.compile_seconds else None),
                "differences": dict(self.differences), "choices": dict(self.choices),
                "median_phase_seconds": {k: median(v) for k, v in self.phase_seconds.items()},
                "mean_phase_seconds": {k: round(statistics.fmean(v), 4) for k, v in self.phase_seconds.items()},
                "coverage": dict(self.coverage), "focus_batches": dict(self.focus_batches),
                "focus_hits": dict(self.focus_hits),
                "focus_seconds": {k: round(v, 1) for k, v in self.focus_seconds.items()},
                "worker_seconds": round(self.worker_seconds, 1), "start": self.origin,
                "timeline": self.timeline, **extra}

    def _compile_by_kernels(self) -> dict:
        """kernels per case -> cases, mean compile seconds, and share of all compile seconds."""
        total = sum(seconds for _, seconds in self.compile_by_kernels.values()) or 1.0
        return {k: {"cases": n, "mean": round(seconds / n, 4), "share": round(seconds / total, 4)}
                for k, (n, seconds) in sorted(self.compile_by_kernels.items(), key=lambda kv: int(kv[0]))}

    def to_json(self) -> dict:
        return {"cases": self.cases, "outcomes": _by_name(self.outcomes),
                "signatures": {k: r.to_json() for k, r in self.signatures.items()},
                "fused_cases": self.fused_cases, "outside_cases": self.outside_cases,
                "outside_fused_cases": self.outside_fused_cases, "elapsed": self.seconds,
                "compile_seconds": self.compile_seconds[-MAX_SAMPLES:], "compile_by_kernels": self.compile_by_kernels,
                "phase_seconds": {k: v[-MAX_SAMPLES:] for k, v in self.phase_seconds.items()},
                "coverage": dict(self.coverage), "timeline": self.timeline, "first_start": self.origin,
                "focus_batches": dict(self.focus_batches), "focus_hits": dict(self.focus_hits),
                "worker_seconds": self.worker_seconds, "focus_seconds": dict(self.focus_seconds),
                "input_sets": self.input_sets, "triples": dict(self.triples),
                "steered_draws": self.steered_draws, "steered_cases": self.steered_cases,
                "differences": dict(self.differences), "choices": dict(self.choices),
                "reshaped_sets": self.reshaped_sets}

    @staticmethod
    def from_json(d: dict) -> "Stats":
        """Counters of a stopped run; this run's clock starts now."""
        return Stats(cases=int(d["cases"]), outcomes=collections.Counter(d["outcomes"]),
                     signatures={k: SignatureRecord.from_json(r) for k, r in d["signatures"].items()},
                     fused_cases=int(d["fused_cases"]),
                     outside_cases=int(d.get("outside_cases", 0)),  # absent before the outside share
                     outside_fused_cases=int(d.get("outside_fused_cases", 0)),
                     elapsed_before=float(d["elapsed"]), compile_seconds=list(d["compile_seconds"]),
                     phase_seconds=collections.defaultdict(list, d["phase_seconds"]),
                     coverage=collections.Counter(d["coverage"]), timeline=list(d["timeline"]),
                     focus_batches=collections.Counter(d["focus_batches"]),
                     focus_hits=collections.Counter(d.get("focus_hits", {})),  # absent before 2026-11-30
                     compile_by_kernels=dict(d.get("compile_by_kernels", {})),  # absent before 2026-12
                     worker_seconds=float(d.get("worker_seconds", 0.0)),  # these two too
                     focus_seconds=collections.Counter(d.get("focus_seconds", {})),
                     first_start=d.get("first_start"),  # absent before 2026-12-01: estimated by origin
                     input_sets=int(d.get("input_sets", d["cases"])),  # absent before issue 17
                     triples=collections.Counter(d.get("triples", {})),
                     steered_draws=int(d.get("steered_draws", 0)),  # absent before steering (2026-12)
                     steered_cases=int(d.get("steered_cases", 0)),
                     differences=collections.Counter(d.get("differences", {})),  # absent before issue 19
                     choices=collections.Counter(d.get("choices", {})),
                     reshaped_sets=int(d.get("reshaped_sets", 0)))  # absent before issue 18


class Phase(str, enum.Enum):
    """What a campaign's run does at a moment (WallClock)."""

    START_UP = "start-up"  # loading --known repros, drawing steering's sample, starting the workers
    FUZZING = "fuzzing"  # cases in flight (reductions may run beside them)
    REDUCING = "reducing"  # fuzzing done, reductions under way
    WAITING = "waiting"  # none of these: stopping, or a reduction waiting for a recheck to settle


# Worker-time uses that are work (WorkerPool.worker_time: the accounts jobs name), not idling or starting.
WORK = ("fuzz", "reduce", "learn")


class WallClock:
    """This run's wall time by phase: each moment counts in exactly one phase, so that the phases
    add up to the run's wall time, from the Campaign's construction to the last checkpoint. The
    workers' time (WorkerPool.time_by_use) is split by phase too: what reduced while it fuzzed."""

    def __init__(self) -> None:
        self.start = self.since = time.time()
        self.phase = Phase.START_UP
        self.seconds: collections.Counter = collections.Counter()
        self.work: dict[Phase, collections.Counter] = collections.defaultdict(collections.Counter)
        self._worker_time: dict[str, float] = {}  # at the last change of phase

    def enter(self, phase: Phase, worker_time: Callable[[], dict[str, float]]) -> None:
        """Go into `phase`; `worker_time()` (the pool's time by use) is read when it changes."""
        if phase == self.phase:
            return
        self._close(worker_time())
        self.phase = phase

    def _close(self, worker_time: dict[str, float]) -> None:
        now = time.time()
        self.seconds[self.phase] += now - self.since
        self.work[self.phase].update({k: v - self._worker_time.get(k, 0.0) for k, v in worker_time.items()})
        self.since, self._worker_time = now, dict(worker_time)

    def summary(self, worker_time: dict[str, float], workers: int) -> dict:
        """summary.json's "wall_seconds" (by phase, and "total"), "worker_seconds_by_use" (fuzz,
        reduce, learn, idle, starting; and by phase) and "busy_share": the workers' time at work
        over workers times the wall time."""
        self._close(worker_time)
        total = self.since - self.start
        busy = sum(worker_time.get(use, 0.0) for use in WORK)
        return {"wall_seconds": {**{p.value: round(self.seconds[p], 2) for p in Phase}, "total": round(total, 2)},
                "worker_seconds_by_use": {k: round(v, 1) for k, v in sorted(worker_time.items())},
                "worker_seconds_by_phase": {p.value: {k: round(v, 1) for k, v in sorted(self.work[p].items()) if v >= 0.05}
                                            for p in Phase if any(v >= 0.05 for v in self.work[p].values())},
                "busy_share": round(busy / (workers * total), 4) if total > 0 else 0.0}


def _by_name(outcomes: collections.Counter) -> dict[str, int]:
    """Outcome counts keyed by the outcomes' plain names, as the files hold them."""
    return {str(k): v for k, v in outcomes.items()}


@dataclass
class CampaignArgs:
    """The constructor arguments that define a campaign (Campaign.args): what --resume restores.
    Those added since the first campaigns default to Campaign's own defaults, so that a state
    written before one existed resumes as a campaign started without it."""

    backend: str
    seed: int
    shard: str | None
    workers: int
    time_limit: float | None
    max_cases: int | None
    timeout: float
    check_strides: bool
    max_ops: int
    swarm: bool
    reduce: bool
    reduce_budget: int
    backward: bool
    devices: list[str] | None
    known: list[str]
    features: Features
    focus_share: float = 0.25  # absent before 2026-11-30 (a batch count, focus_every, then)
    reduce_share: float = REDUCE_SHARE  # absent before 2026-12-01
    extra_runs: bool = True  # absent before issue 17

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> "CampaignArgs":
        """Validated: a state file is untrusted input (its backend is checked where it is resumed)."""
        what = "campaign args"
        # focus_every, a batch count, was replaced by focus_share (2026-11-30): the default share now.
        d = record({k: v for k, v in d.items() if k != "focus_every"}, what, CampaignArgs.__dataclass_fields__)
        args = {k: take(d, k, kinds, what) for k, kinds in _ARG_TYPES.items() if k in d}
        for k in ("devices", "known"):
            if d.get(k) is not None:
                args[k] = list(strings(d, k, what))
        features = take(d, "features", dict, what)
        args["features"] = Features(**{k: tuple(v) if isinstance(v, list) else v for k, v in features.items()})
        return CampaignArgs(**args)


_NONE = type(None)
_ARG_TYPES = {"backend": str, "seed": int, "shard": (str, _NONE), "workers": int, "time_limit": (float, _NONE),
              "max_cases": (int, _NONE), "timeout": float, "check_strides": bool, "max_ops": int, "swarm": bool,
              "reduce": bool, "reduce_budget": int, "backward": bool, "devices": (list, _NONE), "known": list,
              "focus_share": float, "reduce_share": float, "extra_runs": bool}


@dataclass
class CampaignState:
    """state.json: what a stopped campaign needs to go on. next_index: its position in the seed
    stream; in_flight: the indices it had handed out and not heard back about (they run again);
    saved_per_signature: case files saved, by signature key; focus: the scheduler each batch aimed
    at (None: a swarm batch); root_causes: its book of root causes (fuzzfuse.dedup); learned: the
    known root causes it reduced a hit of to learn a trigger, and how often (fuzzfuse.reductions)."""

    args: CampaignArgs
    next_index: int
    in_flight: list[int]
    stats: Stats
    saved_per_signature: dict[str, int] = field(default_factory=dict)
    focus: dict[int, str | None] = field(default_factory=dict)
    root_causes: RootCauseBook = field(default_factory=RootCauseBook)
    learned: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"schema": STATE_SCHEMA, "kind": "fuzzfuse-campaign-state", "args": self.args.to_json(),
                "next_index": self.next_index, "in_flight": self.in_flight, "stats": self.stats.to_json(),
                "saved_per_signature": self.saved_per_signature, "focus": {str(b): f for b, f in self.focus.items()},
                "root_causes": self.root_causes.to_json(), "learned": self.learned}

    @staticmethod
    def from_json(d: dict) -> "CampaignState":
        return CampaignState(CampaignArgs.from_json(d["args"]), int(d["next_index"]), [int(i) for i in d["in_flight"]],
                             Stats.from_json(d["stats"]), {str(k): int(n) for k, n in d["saved_per_signature"].items()},
                             {int(b): f for b, f in d["focus"].items()},
                             RootCauseBook.from_json(d.get("root_causes", {})),  # absent before 2026-12-01
                             {str(k): int(n) for k, n in d.get("learned", {}).items()})  # absent before issue 34


def save_state(out: Path, state: CampaignState) -> None:
    write_json(out / STATE_FILE, state.to_json())


def load_state(out: Path, admit: Callable[[str], None] | None = None) -> CampaignState:
    """The state of the campaign in `out`; CorpusError (one line) when there is none to resume.
    admit: called with the backend the state names before anything else of it is decoded, to
    refuse one there (Campaign.resume: a backend a file may not choose, or not the one asked for)."""
    path = Path(out) / STATE_FILE
    if not path.exists():
        raise CorpusError(f"{out}: no campaign to resume (no {STATE_FILE})")
    state = read_json(path, "campaign state")
    if not isinstance(state, dict) or state.get("kind") != "fuzzfuse-campaign-state":
        raise CorpusError(f"{path}: not a fuzzfuse campaign state")
    if state.get("schema") != STATE_SCHEMA:
        raise CorpusError(f"{path}: unsupported campaign state schema {state.get('schema')!r}")
    if admit is not None:
        args = state.get("args")
        recorded = args.get("backend") if isinstance(args, dict) else None
        admit(recorded if isinstance(recorded, str) else "")
    try:
        return CampaignState.from_json(state)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CorpusError(f"{path}: invalid campaign state: {e!r}") from e


class DirectoryInUse(Exception):
    """Another live campaign writes to this directory (one line for the user)."""


class DirectoryClaim:
    """An exclusive claim on a campaign directory: a lock file created with O_EXCL (which also
    holds on NFS), naming the host and pid. A claim left by a dead process on this host is taken
    over; one from another host must be removed by hand (that host may still be running)."""

    def __init__(self, out: Path):
        self.path = Path(out) / LOCK_FILE
        self.owner = f"{socket.gethostname()} {os.getpid()}"

    def __enter__(self) -> "DirectoryClaim":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if not self._stale():
                    raise DirectoryInUse(
                        f"{self.path.parent} is in use by the campaign of {self._holder()} (give each "
                        f"host or process its own --shard, or remove {self.path} if that campaign is dead)")
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(self.owner + "\n")
            return self
        raise DirectoryInUse(f"{self.path.parent}: cannot claim the directory")

    def __exit__(self, *exc) -> None:
        if self._holder() == self.owner:
            self.path.unlink(missing_ok=True)

    def _holder(self) -> str:
        try:
            return self.path.read_text().strip()
        except OSError:
            return "?"

    def _stale(self) -> bool:
        host, _, pid = self._holder().partition(" ")
        if host != socket.gethostname() or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def shard_dir(out: Path, shard: str | None) -> Path:
    """Where one host's (or one process's) campaign writes: OUT itself, or OUT/shards/NAME when
    several share OUT. `fuzzfuse triage OUT` merges the shards."""
    if not shard:
        return Path(out)
    if not shard.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ValueError(f"--shard {shard!r}: use letters, digits, '-', '_' or '.'")
    return Path(out) / "shards" / shard
