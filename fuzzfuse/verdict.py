"""The verdict layer: where a run becomes an outcome and a signature, and the types that carry it.

Everything that crosses a process or a module boundary about a case's fate is one of these types:
`CaseResult` (what a worker says about one case, or what its death says), `Attribution` (what the
backend's reference route did with a failure), `SignatureRecord` (a campaign's entry for one
signature: counts, rechecks, the smallest case, the repro) and `Verification` (a repro re-run in
fresh processes, with its `Reproduction` status). Each has one JSON codec, used on the worker pipe
and in summary.json, state.json and case files alike; enum values are the strings those files
always held, so files written before these types existed still load.

The worker side (`fuzzfuse.job`) reports what it saw through the constructors below (`invalid`,
`crashed`, `mismatched`...); the parent side turns a pool reply into a CaseResult with `judge`,
which also names the deaths a worker cannot report itself (hard-crash, hang).

What a backend says of its run (`Stage`, `Unsupported`, `Difference`, `Evidence`) is the backends'
own vocabulary (`fuzzfuse.backends.findings`), re-exported here beside the types that carry it.
"""
from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field, replace

from .backends.base import machine_lacks_header, machine_out_of_memory
from .backends.findings import Difference, Evidence, Stage, Unsupported
from .ir import Graph, GraphError
from .oracle import Mismatch, Signature, cpp_location, exception_signature, normalize
from .ir.untrusted import record, strings, take

MAX_MESSAGE = 20000
MAX_RECORD_DETAIL = 500


class Outcome(str, enum.Enum):
    """How a case ended. The values are the strings on disk (case files, summaries, state)."""

    PASS = "pass"
    CRASH = "crash"
    HARD_CRASH = "hard-crash"
    HANG = "hang"
    MISMATCH = "mismatch"
    UNFUSED = "unfused"
    FLAKY = "flaky"
    INVALID = "invalid"
    UNSUPPORTED = "unsupported"
    HARNESS_ERROR = "harness-error"
    # The device was full (fuzzfuse.backends.base.machine_out_of_memory): the machine's limit, not
    # a finding; the worker is replaced, which hands its cached memory back.
    OUT_OF_MEMORY = "out-of-memory"
    # The fuser differs from eager in a way it documents as a design choice (a `Difference`):
    # counted, never reported as a bug (docs/documented-differences.md: the policy table).
    DOCUMENTED = "documented-difference"

    def __str__(self) -> str:
        return self.value

    def __hash__(self) -> int:  # as its value's: a member and its string are one dict key
        return str.__hash__(self)

    @property
    def is_failure(self) -> bool:
        """A finding about the fuser (not a pass, a generator defect, a gap or a fuzzfuse bug)."""
        return self in FAILURES


FAILURES = frozenset({Outcome.CRASH, Outcome.HARD_CRASH, Outcome.HANG, Outcome.MISMATCH, Outcome.UNFUSED,
                      Outcome.FLAKY})


class HarnessError(RuntimeError):
    """A fuzzfuse defect on one case (the handler raised in the worker): never a fuser bug."""


@dataclass(frozen=True)
class Attribution:
    """What a failing case did on its backend's reference route (fuzzfuse.attribution): its
    outcome there (None: the route is unavailable here, `detail` says why), whether it failed the
    same way, and the route's own attribution in turn (`then`: routes chain)."""

    route: str
    outcome: Outcome | None
    detail: str = ""
    same_failure: bool = False
    signature: Signature | None = None
    then: Attribution | None = None

    def to_json(self) -> dict:
        if self.outcome is None:
            return {"route": self.route, "outcome": "unavailable", "detail": self.detail}
        out = {"route": self.route, "outcome": self.outcome.value, "same_failure": self.same_failure,
               "signature": self.signature.to_json() if self.signature else None, "detail": self.detail}
        return {**out, **({"then": self.then.to_json()} if self.then else {})}

    @staticmethod
    def from_json(d: dict) -> "Attribution":
        outcome = None if d["outcome"] == "unavailable" else Outcome(d["outcome"])
        return Attribution(str(d["route"]), outcome, str(d.get("detail") or ""), bool(d.get("same_failure")),
                           Signature.from_json(d["signature"]) if d.get("signature") else None,
                           Attribution.from_json(d["then"]) if d.get("then") else None)


@dataclass
class CaseResult:
    """One case's verdict and what the run measured. Optional fields stay at their defaults when
    the run never got that far (a hard crash has no timings; only a failing case carries its graph)."""

    outcome: Outcome = Outcome.PASS
    signature: Signature | None = None
    detail: str = ""
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase in the worker
    fused: bool | None = None
    evidence: Evidence = field(default_factory=Evidence)
    compile_seconds: float = 0.0
    traceback: str = ""
    restart_worker: bool = False  # the worker's process is unusable (a sticky CUDA error)
    graph: Graph | None = None
    size: int | None = None
    digest: str | None = None
    worker_seconds: float | None = None  # set by the pool: wall and CPU seconds of the job
    cpu_seconds: float | None = None
    stderr_tail: str = ""  # a dead or hung worker's log
    # What the backend's reference route did with a failing case (fuzzfuse.attribution).
    attribution: Attribution | None = None
    # Input sets the compiled graph was judged on (its own and the extra ones, fuzzfuse.job), and
    # the (op, dtype, layout) triples the graph exercised: campaign coverage.
    input_sets: int = 1
    triples: list[str] = field(default_factory=list)
    steered: int = 0  # draws discarded for holding a known bug's trigger (fuzzfuse.steering)
    # Of the extra input sets, those run on new sizes or strides (the compiled code's dynamic shapes).
    reshaped_sets: int = 0
    # A forward mismatch: the position of the output it reports (the first wrong one).
    wrong_output: int | None = None
    # Whether the fused run's first output is eager's bit for bit (None where none was compared):
    # an op whose value is exact cannot be where a wrong value starts (fuzzfuse.reduce.generalise).
    first_output_exact: bool | None = None

    def to_json(self) -> dict:
        return {"outcome": self.outcome.value, "signature": self.signature.to_json() if self.signature else None,
                "detail": self.detail, "timings": self.timings, "fused": self.fused, "evidence": self.evidence.to_json(),
                "compile_seconds": self.compile_seconds, "traceback": self.traceback,
                "restart_worker": self.restart_worker, "graph": self.graph.to_json() if self.graph else None,
                "size": self.size, "digest": self.digest, "worker_seconds": self.worker_seconds,
                "cpu_seconds": self.cpu_seconds, "stderr_tail": self.stderr_tail,
                "attribution": self.attribution.to_json() if self.attribution else None,
                "input_sets": self.input_sets, "triples": self.triples,
                "steered": self.steered, "reshaped_sets": self.reshaped_sets, "wrong_output": self.wrong_output,
                "first_output_exact": self.first_output_exact}

    @staticmethod
    def from_json(d: dict) -> "CaseResult":
        return CaseResult(
            Outcome(d["outcome"]), Signature.from_json(d["signature"]) if d.get("signature") else None,
            str(d.get("detail") or ""), {str(k): float(v) for k, v in (d.get("timings") or {}).items()},
            d.get("fused"), Evidence.from_json(d.get("evidence") or {}), float(d.get("compile_seconds") or 0.0),
            str(d.get("traceback") or ""), bool(d.get("restart_worker")),
            Graph.from_json(d["graph"]) if d.get("graph") else None, d.get("size"), d.get("digest"),
            d.get("worker_seconds"), d.get("cpu_seconds"), str(d.get("stderr_tail") or ""),
            Attribution.from_json(d["attribution"]) if d.get("attribution") else None,
            int(d.get("input_sets") or 1), [str(t) for t in d.get("triples") or []], int(d.get("steered") or 0),
            int(d.get("reshaped_sets") or 0), d.get("wrong_output"), d.get("first_output_exact"))

    @property
    def key(self) -> str | None:
        """The signature's key, None for a pass: what a recheck or a reduction query compares."""
        return self.signature.key() if self.signature else None


# ---- the worker side: what a run saw, as a verdict ----------------------------------------------
def _text(e: BaseException) -> str:
    return f"{e}"[:MAX_MESSAGE]


def invalid(backend: str, error: BaseException, tb: str, sticky: bool = False) -> CaseResult:
    """Eager itself failed: a generator defect, never a fuser bug. sticky: it failed on a CUDA
    context an earlier fault left unusable, so the worker must be replaced."""
    if machine_out_of_memory(error):
        return _out_of_memory(backend, Stage.EAGER, error, tb)
    sig = exception_signature(backend, Stage.EAGER, type(error).__name__, str(error), tb, outcome=Outcome.INVALID)
    return CaseResult(Outcome.INVALID, sig, _text(error), restart_worker=sticky)


def _out_of_memory(backend: str, stage: Stage, error: BaseException, tb: str) -> CaseResult:
    sig = exception_signature(backend, stage, type(error).__name__, str(error), tb, outcome=Outcome.OUT_OF_MEMORY)
    return CaseResult(Outcome.OUT_OF_MEMORY, sig, _text(error), restart_worker=True)


def no_backward(backend: str) -> CaseResult:
    """A training case for a backend that declares no backward."""
    sig = Signature(Outcome.UNSUPPORTED, backend, Stage.BACKWARD_COMPILE, "Unsupported", "", "no backward")
    return CaseResult(Outcome.UNSUPPORTED, sig, f"{backend} has no backward support")


def unsupported(backend: str, error: Unsupported) -> CaseResult:
    sig = Signature(Outcome.UNSUPPORTED, backend, error.stage, "Unsupported", "", normalize(str(error)))
    return CaseResult(Outcome.UNSUPPORTED, sig, _text(error))


def crashed(backend: str, stage: Stage | str, cause: BaseException, tb: str, *, context: str = "",
            sticky: bool = False) -> CaseResult:
    """The fuser raised. A sticky error (a CUDA context left unusable) asks for a fresh worker. A
    kernel this machine cannot compile for want of a header the fuser expects installed is
    unsupported here, as a graph the fuser cannot express is."""
    if machine_out_of_memory(cause):
        return _out_of_memory(backend, Stage(stage), cause, tb)
    if header := machine_lacks_header(cause):
        return unsupported(backend, Unsupported(f"this machine lacks {header}, which NVRTC includes in the fuser's "
                                                "kernel (the CUDA toolkit's headers)", stage=stage))
    sig = exception_signature(backend, Stage(stage), type(cause).__name__, str(cause), tb)
    return CaseResult(Outcome.CRASH, sig, _text(cause) + context, traceback=tb[-MAX_MESSAGE:], restart_worker=sticky)


# The backend a mismatch is recorded against where eager, not the fuser, is wrong (fuzzfuse.job's
# scalar arbiter: ATen's vectorized kernel wrong, its scalar loop and the fuser right). Its report
# goes to PyTorch, its repro runs eager (fuzzfuse.bugreport, fuzzfuse.short_repro), and its
# identity names eager's component (fuzzfuse.identity).
EAGER_FAULT = "eager"


def mismatched(backend: str, mismatch: Mismatch, what: str, context: str = "",
               stage: Stage = Stage.RUN, output: int | None = None, rule: str = "") -> CaseResult:
    """A fused output (or, at stage backward-run, a gradient) that float64 says is wrong; `what`
    names it for people ("output 0 (v3)"), `output` its position among the graph's outputs; `rule`:
    the known wrong rule that computes the fused value exactly (fuzzfuse.explain), the signature's
    message."""
    signature = replace(mismatch.signature(backend, stage), message=rule)
    said = f"; the fused values are exact where {rule}" if rule else ""
    return CaseResult(Outcome.MISMATCH, signature, f"{what}: {mismatch.kind}: {mismatch.detail}{said}" + context,
                      wrong_output=output)


def documented(backend: str, difference: Difference, what: str, detail: str) -> CaseResult:
    """An output that differs from eager only as a documented difference of the fuser explains."""
    return CaseResult(Outcome.DOCUMENTED, Signature(Outcome.DOCUMENTED, backend, Stage.RUN, difference.value),
                      f"{what}: {difference.value}: {detail}")


def not_fused(backend: str, stage: Stage, evidence: Evidence) -> CaseResult:
    """Nothing fused: a fallback that ran although something fused is a finding, a fuser that
    declined the whole graph (no-fusion) is coverage data."""
    kind = "fallback" if evidence.fallback else "no-fusion"
    which = "forward" if stage == Stage.RUN else "backward"
    # The guard that sent a fallback there names its bug (fuzzfuse.backends.guards).
    said = evidence.failed_guard.message() if evidence.failed_guard else ""
    return CaseResult(Outcome.UNFUSED, Signature(Outcome.UNFUSED, backend, stage, kind, message=said),
                      f"nothing fused ({which}): {json.dumps(evidence.to_json(), default=str)}")


# ---- the parent side: a pool reply as a verdict --------------------------------------------------
_WHAT = re.compile(r"terminate called after throwing an instance of .*?\n\s*what\(\):(.*?)(?=\nframe #|\nException raised|"
                   r"\n\n|\nFatal Python error|\Z)", re.S)


def abort_message(log: str) -> str:
    """The what() of the C++ exception that terminated a worker (std::terminate prints it before
    the abort), so that two different aborts are two signatures; "" when the log has none."""
    m = _WHAT.search(log)
    return m.group(1).strip() if m else ""


# A Python frame of fuzzfuse's eager interpreter (fuzzfuse.ir: its ops' eager callables, run by
# `interpret`), as faulthandler prints it in a dead worker's stderr.
_FRAME = re.compile(r'^\s+File "([^"]+)", line \d+ in (\S+)', re.M)


def died_in_eager(stderr_tail: str) -> bool:
    """Whether a worker died inside eager's own run of the graph: the dying thread's innermost
    Python frames are fuzzfuse.ir's, under `interpret`. Eager traps on INT_MIN / -1 in trunc
    division (pytorch#138425): such a case killed the worker in its eager run and was recorded as
    the fuser's hard crash."""
    dying = stderr_tail.rsplit("Current thread ", 1)[-1].split("(most recent call first):", 1)
    if len(dying) < 2:
        return False
    for path, function in _FRAME.findall(dying[1].split("\n\n", 1)[0]):
        if "/fuzzfuse/ir/" not in path.replace("\\", "/"):
            return False
        if path.endswith("interp.py") and function == "interpret":
            return True
    return False


def judge(backend: str, reply: dict) -> CaseResult:
    """The CaseResult of a worker pool reply: the worker's own verdict, or the death it could not
    report itself (hard-crash: by signal or exit code; hang: the pool's timeout). A handler that
    raised is a fuzzfuse defect: HarnessError, loud, never counted as a fuser's."""
    status = reply.get("status")
    timing = {"worker_seconds": reply.get("worker_seconds"), "cpu_seconds": reply.get("cpu_seconds")}
    if status == "hard-crash":
        kind = reply.get("signal") or f"exit {reply.get('exitcode')}"
        tail = str(reply.get("stderr_tail") or "")
        what = abort_message(tail)
        # Where eager itself died, the bug is eager's (its report goes to PyTorch), not the fuser's.
        sig = Signature(Outcome.HARD_CRASH, EAGER_FAULT if died_in_eager(tail) else backend, Stage.RUN, kind,
                        cpp_location(what), normalize(what) if what else "")
        return CaseResult(Outcome.HARD_CRASH, sig, stderr_tail=tail, **timing)
    if status == "hang":
        return CaseResult(Outcome.HANG, Signature(Outcome.HANG, backend, Stage.RUN, "timeout"),
                          stderr_tail=str(reply.get("stderr_tail") or ""), **timing)
    if status == "worker-error":
        raise HarnessError(f"fuzzfuse harness error: {reply.get('error_type')}: {reply.get('error')}\n"
                           f"{reply.get('traceback', '')}")
    return CaseResult.from_json(reply)


# ---- a repro re-run in fresh processes ------------------------------------------------------------
class Reproduction(str, enum.Enum):
    """Whether a minimized repro failed as recorded when it was re-run in fresh processes."""

    REPRODUCES = "reproduces"  # every run failed as recorded
    FLAKY = "flaky"  # some did
    DOES_NOT_REPRODUCE = "does not reproduce"  # none did
    SKIPPED = "skipped here"  # every run said this machine cannot run it (a CPU capability it lacks)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Verification:
    """A repro's re-runs in fresh processes (fuzzfuse.repro_dir.verify_repro): their status, each
    run's exit code ("timeout" for one killed at the timeout) and verdict, and how many ran."""

    status: Reproduction
    exit_codes: tuple[int | str, ...] = ()
    verdicts: tuple[str, ...] = ()
    runs: int = 0

    def to_json(self) -> dict:
        return {"status": self.status.value, "exit_codes": list(self.exit_codes), "verdicts": list(self.verdicts),
                "runs": self.runs}

    @staticmethod
    def from_json(d: dict) -> "Verification":
        """Validated: a case file is untrusted input."""
        what = "verification"
        d = record(d, what, ("status", "exit_codes", "verdicts", "runs"))
        codes = take(d, "exit_codes", list, what)
        if not all((isinstance(c, int) and not isinstance(c, bool)) or c == "timeout" for c in codes):
            raise GraphError(f"{what}: an exit code is an integer or \"timeout\", not {codes!r}")
        return Verification(Reproduction(take(d, "status", str, what)), tuple(codes), strings(d, "verdicts", what),
                            take(d, "runs", int, what))


# ---- a campaign's record of one signature --------------------------------------------------------
@dataclass
class MinimizedRepro:
    """Where a signature's reduction went: the repro directory (relative to the campaign) and the
    reduction's figures."""

    path: str
    ops_before: int | None = None
    ops_after: int | None = None
    queries: int | None = None
    seconds: float | None = None
    reproduction: Reproduction | None = None  # its re-runs in fresh processes, once written

    def to_json(self) -> dict:
        return {"path": self.path, "ops_before": self.ops_before, "ops_after": self.ops_after,
                "queries": self.queries, "seconds": self.seconds,
                **({"reproduction": self.reproduction.value} if self.reproduction else {})}

    @staticmethod
    def from_json(d: dict) -> "MinimizedRepro":
        status = d.get("reproduction")
        return MinimizedRepro(str(d["path"]), d.get("ops_before"), d.get("ops_after"), d.get("queries"),
                              d.get("seconds"), Reproduction(status) if status else None)


@dataclass
class SignatureRecord:
    """A campaign's entry for one signature (summary.json's "signatures", state.json's stats).

    confirmed: None until the first case's rechecks settle, then whether they all failed the same
    way. known: the --known repro directory that already holds the signature. case: the smallest
    saved case (relative to the campaign). unreduced: why its reduction found it no longer failing.
    """

    key: str
    slug: str
    signature: Signature
    outcome: Outcome
    count: int = 0
    first_seen: float | None = None
    last_seen: float | None = None
    smallest_size: int | None = None
    confirmed: bool | None = None
    detail: str = ""
    known: str | None = None
    case: str | None = None
    minimized: MinimizedRepro | None = None
    unreduced: str | None = None
    recheck_outcomes: list[str] | None = None

    @staticmethod
    def first(result: CaseResult, seen: float, size: int) -> "SignatureRecord":
        """The record of a signature at its first case."""
        sig = result.signature
        return SignatureRecord(sig.key(), sig.slug(), sig, result.outcome, first_seen=seen, smallest_size=size,
                               detail=result.detail[:MAX_RECORD_DETAIL])

    @property
    def flaky(self) -> bool:
        return self.outcome == Outcome.FLAKY or self.confirmed is False

    @property
    def awaits_reduction(self) -> bool:
        """Reproducible, not yet reduced, not held by a known repro, not found gone, and a bug
        rather than coverage (a fuser that declined the whole graph)."""
        return (self.confirmed is True and self.minimized is None and self.known is None and self.unreduced is None
                and self.signature.kind != "no-fusion")

    def settle(self, recheck_keys: list[str]) -> bool:
        """Judge the re-runs of the first case (their signature keys, "pass" for a pass): the
        signature is reproducible when every one failed the same way, else flaky from then on.
        Returns whether it turned flaky."""
        self.confirmed = all(k == self.key for k in recheck_keys)
        if not self.confirmed:
            self.outcome = Outcome.FLAKY
            self.recheck_outcomes = list(recheck_keys)
        return not self.confirmed

    def to_json(self) -> dict:
        """Optional fields are left out while unset: the files stay as readers have always known them."""
        out = {"key": self.key, "slug": self.slug, "signature": self.signature.to_json(), "outcome": self.outcome.value,
               "count": self.count, "first_seen": self.first_seen, "smallest_size": self.smallest_size,
               "confirmed": self.confirmed, "detail": self.detail}
        if self.last_seen is not None:
            out["last_seen"] = self.last_seen
        optional = {"known": self.known, "case": self.case, "unreduced": self.unreduced,
                    "minimized": self.minimized.to_json() if self.minimized else None,
                    "recheck_outcomes": self.recheck_outcomes}
        return {**out, **{k: v for k, v in optional.items() if v is not None}}

    @staticmethod
    def from_json(d: dict) -> "SignatureRecord":
        sig = Signature.from_json(d["signature"])
        return SignatureRecord(
            str(d.get("key") or sig.key()), str(d.get("slug") or sig.slug()), sig,
            Outcome(d.get("outcome") or sig.outcome), int(d.get("count", 0)), d.get("first_seen"), d.get("last_seen"),
            d.get("smallest_size"), d.get("confirmed"), str(d.get("detail") or ""), d.get("known"), d.get("case"),
            MinimizedRepro.from_json(d["minimized"]) if d.get("minimized") else None, d.get("unreduced"),
            d.get("recheck_outcomes"))
