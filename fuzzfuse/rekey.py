"""Committed repros kept current with today's reducer and keys (`fuzzfuse corpus refresh
--rereduce DIR...` or `--generalise DIR...`).

A repro's root-cause key is its reduced graph's form where no native assert names the bug, so a
change to the reducer or to generalisation changes the key a fresh campaign computes for the same
bug, and --known stops recognizing it. `rereduce` reduces a repro's graph again (and rewrites the
repro only when it got simpler); `record_generalisation` records which ops and dtypes of the
graph, and of its folded variants' graphs, the failure does not need, leaving the repro itself as
it was verified.
"""
from __future__ import annotations

import enum
import itertools
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from .backends import Unavailable
from .backends.registry import declared
from .bugreport import case_device
from .corpus import Case, CorpusError, ReductionFigures, Variant, load_case, write_json
from .ir import Graph
from .minimize import (REDUCER_REVISION, first_output_exact, first_output_wrong, generalised, probed_further,
                       reduce_case, reply_key)
from .repro_dir import VERIFY_RUNS, repro_slug, write_minimized
from .explain import shows_on_a_poisoned_heap
from .oracle import Signature
from .verdict import FAILURES, HarnessError, Reproduction, judge
from .pool import answered_once, case_pool, graph_job, run_jobs
from .reduce import NotInteresting, cost
from .reduce.generalise import WRONG_NUMBERS, Generalisation, conversion_alone, few_for_a_vector_loop
from .identity import identify, root_cause_key, same_bug
from .known import variant_entry
from .rootcause import operand_fault, signature_today
from .tracebacks import PARALLEL_COMPILE_WRAPPER
from .worker import WorkerPool


# What each raise of REDUCER_REVISION changed, and the committed cases it may name otherwise.
CHANGES: tuple[tuple[int, str, Callable[[Case], bool]], ...] = (
    (2, "a crash where an op refuses its operand's dtype is reduced to the op that gave the operand a wrong "
        "dtype, where one did", lambda case: case.signature is not None and operand_fault(case.signature) == "dtype"),
    (3, "a wrong float computed from an integer is reduced to the conversion, where the conversion alone is "
        "wrong", lambda case: case.signature is not None and case.signature.outcome == "mismatch"
        and case.generalisation is not None and case.generalisation.applies_to(case.graph)
        and conversion_alone(case.graph, case.generalisation.first_wrong_op(case.graph)) is not None),
    (4, "a crash where one of ATen's size checks rejects its operand is reduced to the op that gave the operand "
        "a wrong shape, where one did", lambda case: case.signature is not None
        and operand_fault(case.signature) == "shape"),
    (5, "nvFuser compiles a fusion's segments one by one, so a crash no longer needs an op that only made a "
        "second segment", lambda case: case.signature is not None and case.signature.outcome == "crash"
        and PARALLEL_COMPILE_WRAPPER in case.detail),
    (6, "a forward fallback is named by the type guard that sent it there (fuzzfuse.backends.guards), which a "
        "run records in its signature", lambda case: case.signature is not None
        and case.signature.outcome == "unfused" and case.signature.stage == "run" and not case.signature.message),
    (7, "a backward fallback through aot_autograd is named by its guard too, and what made the value a saved "
        "forward value (the forward's kernel)", lambda case: case.signature is not None
        and case.signature.outcome == "unfused" and case.signature.stage == "backward-run"
        and case.backend.startswith("aot:") and not case.signature.message),
    (8, "a wrong value's culprit right alone on a few elements is asked again on its operands repeated, where "
        "the fuser's vectorized loop computes them", lambda case: _right_alone_on_a_few_in_vector_loops(case)),
)


def _right_alone_on_a_few_in_vector_loops(case: Case) -> bool:
    """Whether a wrong value's culprit, not found wrong alone, is an elementwise op reading a value
    an op before it computed, on fewer elements than a vectorized loop takes, of a fuser that
    writes such loops on the case's device (`Backend.vector_loops_on`)."""
    general, signature = case.generalisation, case.signature
    if signature is None or signature.outcome != "mismatch" or signature.kind not in WRONG_NUMBERS \
            or general is None or not general.applies_to(case.graph) or general.alone \
            or case_device(case) not in declared(case.backend, "vector_loops_on", frozenset()):
        return False
    position = general.first_wrong_op(case.graph)
    if position is None:
        return False
    node = case.graph.nodes[position]
    return (few_for_a_vector_loop(node.op, case.graph.infer_types()[node.name].shape)
            and any(r not in {i.name for i in case.graph.inputs} for r in node.refs()))


def stale(case: Case) -> str | None:
    """Why `case`, reduced by an earlier reducer, may name its bug otherwise when reduced today (the
    first change since that concerns it); None where none does. A case that records no revision
    was reduced before revisions were kept (revision 1)."""
    revision = (case.reduction.reducer if case.reduction else None) or 1
    return next((why for since, why, concerns in CHANGES if since > revision and concerns(case)), None)


class Pools:
    """Worker pools by backend and by the CPU capability a case was recorded with (pinned as its
    repro pins it: Inductor CPU's code for AVX2 and for AVX-512 differ, and so may their bugs),
    started when first asked for: a repro's variants may have been found on another route
    (torchscript:nnc beside aot:nnc)."""

    def __init__(self, workers: int, timeout: float):
        self.workers, self.timeout, self.pools = workers, timeout, {}

    def __call__(self, backend: str, case: Case | None = None) -> WorkerPool:
        capability = case.versions.get("cpu_capability") if case is not None else None
        if (backend, capability) not in self.pools:
            self.pools[backend, capability] = case_pool(backend, self.workers, self.timeout, cpu_capability=capability)
        return self.pools[backend, capability]

    def __enter__(self) -> "Pools":
        return self

    def __exit__(self, *exc) -> None:
        for pool in self.pools.values():
            pool.close()


def rereduce(directory: Path, pools: Pools, workers: int = 2, verify_runs: int = VERIFY_RUNS,
             timeout: float = 60.0) -> tuple[str, str, Path]:
    """Reduce a committed repro's graph again with today's reducer (its passes change: every dtype
    now moves toward float32) and generalise it, and rewrite the directory when the graph became
    simpler or names its bug otherwise (exp of an int64 become the int64 -> float32 conversion that
    is wrong alone), else record the generalisation of the graph it has, so that a fresh campaign's
    reduction of the same bug has the same root-cause key. The former form stays listed in
    `also_seen_as`, which --known counts, where its own key is today's bug's. A repro that fails otherwise now (a crash become the wrong
    dtype that caused it) moves to the directory its failure names, where that name is free, and
    lists no former form: fold would only reduce that crash again into this very bug. (the
    root-cause key before, after, the directory it is in now)."""
    directory = Path(directory)
    case = load_case(directory / "case.json")
    sig = signature_today(case.signature, case.detail)
    was = identify(sig, case.graph, case.generalisation, case.device)
    before = was.key() if was is not None else sig.key()
    reduction = reduce_case(case, case.backend, workers=workers, timeout=timeout, pool=pools(case.backend, case))
    reduced = reduction.graph.renamed()
    kept = reduction.signature
    now = identify(kept, reduced, reduction.generalisation, case.device)
    after = now.key() if now is not None else kept.key()
    figures = replace(case.reduction or ReductionFigures(), reducer=REDUCER_REVISION)
    if cost(reduced) >= cost(case.graph.renamed()) and after == before:
        return before, _record_generalisation(directory, replace(case, reduction=figures), pools, timeout), directory
    seen = list(case.also_seen_as)
    home = directory
    if after != before and kept.key() == sig.key() and was is not None and now is not None and same_bug(was, now):
        seen.append(variant_entry(directory.name, case))
    elif after != before and not (named := directory.with_name(repro_slug(kept, after))).exists():
        home = named
    write_minimized(home, replace(case, graph=reduced, signature=kept, also_seen_as=seen,
                                  generalisation=reduction.generalisation,
                                  reduction=replace(figures, ops_after=reduced.size)),
                    verify_runs, timeout)
    if home != directory:
        shutil.rmtree(directory)
    return before, after, home


class Generalised(NamedTuple):
    """What generalise_case found: the signature the graph fails with today, its generalisation, and
    the error text of today's run where that signature is a crash reworded since it was recorded
    (the case's detail must say what its message says), else ""."""

    signature: Signature
    generalisation: Generalisation | None
    reworded_detail: str = ""


def generalise_case(case: Case, pool: WorkerPool, timeout: float = 60.0) -> Generalised:
    """Generalise a reduced case's graph as it is (no reduction), with the same-signature test: the
    signature it fails with today and the generalisation. Today's signature is kept where it has
    the recorded outcome, stage, kind and location (as reduce_case keeps it): a mismatch that a
    known wrong rule explains now (fuzzfuse.explain) says so in its message, and a crash reworded
    since is re-keyed where it is still the same bug (`identity.same_bug`)."""
    recorded = replace(signature_today(case.signature, case.detail), backend=case.backend)
    ids = itertools.count()
    poison = shows_on_a_poisoned_heap(recorded.message)

    def replies(candidates: list[Graph]) -> list[dict]:
        return run_jobs(pool, [graph_job(next(ids), case.backend, g, timeout, case.options, bool(case.check_strides),
                                         poison) for g in candidates])

    probed = answered_once(replies)

    try:
        today = judge(case.backend, replies([case.graph])[0])
    except HarnessError as e:
        raise NotInteresting(f"the repro's graph could not be judged now: {e}") from e
    fresh = today.signature
    if fresh is None or (fresh.outcome, fresh.stage, fresh.kind, fresh.location) != \
            (recorded.outcome, recorded.stage, recorded.kind, recorded.location):
        raise NotInteresting(f"the repro's graph does not fail as recorded now: {_today(fresh)}")
    # A crash whose message reads otherwise today (NVRTC spells an argument [int] where an older
    # one said [nvf::int32_t]) but is the same bug by same_bug is re-keyed by today's message.
    reworded = same_bug(identify(fresh, case.graph, case.generalisation, case.device),
                        identify(recorded, case.graph, case.generalisation, case.device))
    sig = fresh if case.signature.outcome == "mismatch" or reworded else recorded
    target = sig.key()
    if fresh.key() != target:  # the same test as is_interesting's, on the run made above
        raise NotInteresting(f"the repro's graph does not fail as recorded now: {_today(fresh)}")

    def is_interesting(candidates: list[Graph]) -> list[bool]:
        return [reply_key(case.backend, reply) == target for reply in replies(candidates)]

    def first_wrong(candidates: list[Graph]) -> list[str | None]:
        return [first_output_wrong(case.backend, reply) for reply in probed(candidates)]

    def exact_first(candidates: list[Graph]) -> list[bool]:
        return [first_output_exact(case.backend, reply) for reply in probed(candidates)]

    general = generalised(case.graph, sig, case.backend, is_interesting, first_wrong, exact_first)
    if general is not None:
        general = probed_further(general, pool, case.backend, case.graph, case.options, sig, timeout,
                                 bool(case.check_strides), ids)
    crash_reworded = sig.outcome != "mismatch" and sig.message != recorded.message
    return Generalised(sig, general, today.detail if crash_reworded else "")


def _today(fresh: Signature | None) -> str:
    """What a graph gives today, said where it no longer fails as recorded: that it passes, or the
    key it has now (a documented difference names the rule of today's oracle that forgives it)."""
    return "it passes" if fresh is None else f"it gives {fresh.key()}"


def record_generalisation(directory: Path, pools: Pools, timeout: float = 60.0) -> tuple[str, str]:
    """Generalise a committed repro's graph and its variants' (also_seen_as[].graph), record them in
    its case.json (the repro itself, whose graph is unchanged, stays as verified): its root-cause
    key before and after."""
    case = load_case(Path(directory) / "case.json")
    sig = signature_today(case.signature, case.detail)
    before = root_cause_key(sig, case.graph, case.generalisation, case.device) or sig.key()
    return before, _record_generalisation(Path(directory), case, pools, timeout)


def _record_generalisation(directory: Path, case: Case, pools: Pools, timeout: float) -> str:
    signature, general, reworded_detail = generalise_case(case, pools(case.backend, case), timeout)
    seen = [_generalised_variant(variant, case, pools, timeout) for variant in case.also_seen_as]
    for before, after in zip(case.also_seen_as, seen):
        if after.verification is Reproduction.DOES_NOT_REPRODUCE and before.verification is not after.verification:
            print(f"{directory}: its form {after.directory} passed on each of {VERIFY_RUNS} runs here: recorded "
                  "as not reproducing (corpus fold drops it)", file=sys.stderr)
    case = replace(case, signature=signature, generalisation=general, also_seen_as=seen,
                   detail=reworded_detail or case.detail)
    write_json(directory / "case.json", case.to_json())
    sig = signature_today(case.signature, case.detail)
    return root_cause_key(sig, case.graph, general, case.device) or sig.key()


def _generalised_variant(variant: Variant, case: Case, pools: Pools, timeout: float) -> Variant:
    """A folded variant with its graph generalised and its root-cause key recomputed, when it kept
    its graph and still fails as its key says on its own backend; recorded as not reproducing
    where its graph passes on each of VERIFY_RUNS runs (a member of a bug that no longer shows it
    is no evidence of it); else as it was."""
    sig = variant.signature
    if variant.graph is None or variant.backend != sig.backend:
        return variant
    probe = replace(case, graph=variant.graph, backend=sig.backend, signature=sig, detail="")
    try:
        sig, general, _ = generalise_case(probe, pools(sig.backend, case), timeout)
    except NotInteresting:
        if _passes_every_time(probe, pools(probe.backend, case), timeout):
            return replace(variant, verification=Reproduction.DOES_NOT_REPRODUCE)
        return variant
    except (Unavailable, ValueError):
        return variant
    return replace(variant, key=sig.key(), root_cause=root_cause_key(sig, variant.graph, general, case.device) or sig.key(),
                   generalisation=general if general is not None else variant.generalisation)


def _a_failure(signature: Signature | None) -> bool:
    """Whether a judged run failed: a difference today's oracle documents is no failure."""
    return signature is not None and signature.outcome in FAILURES


def _passes_every_time(case: Case, pool: WorkerPool, timeout: float, runs: int = VERIFY_RUNS) -> bool:
    """Whether the case's graph gives no failure (`_a_failure`) on each of `runs` runs on its
    backend."""
    for k in range(runs):
        reply = run_jobs(pool, [graph_job(k, case.backend, case.graph, timeout, case.options,
                                          bool(case.check_strides), False)])[0]
        try:
            if _a_failure(judge(case.backend, reply).signature):
                return False
        except HarnessError:
            return False
    return True


class FormVerdict(enum.Enum):
    """What a listed form gave when replayed (`replay_forms`)."""
    SAME_BUG = "same bug"
    ANOTHER_FAILURE = "another failure"
    NOT_REPRODUCING = "passes"  # on each of VERIFY_RUNS runs: recorded as not reproducing
    NOT_JUDGED = "not judged"
    NO_GRAPH = "kept no graph of its own: not replayed"


@dataclass(frozen=True)
class FormReplay:
    """One form's replay: the form's directory name, its verdict and what it gave today."""
    form: str
    verdict: FormVerdict
    today: str = ""

    @property
    def shows_another_thing(self) -> bool:
        """Whether the form no longer fails as its directory's bug (a form without a graph was not
        asked)."""
        return self.verdict not in (FormVerdict.SAME_BUG, FormVerdict.NO_GRAPH)

    def __str__(self) -> str:
        if self.verdict is FormVerdict.NOT_REPRODUCING:
            return f"passes on each of {VERIFY_RUNS} runs ({self.today}): recorded as not reproducing"
        if self.verdict in (FormVerdict.ANOTHER_FAILURE, FormVerdict.NOT_JUDGED):
            return f"{self.verdict.value}: {self.today}"
        return self.verdict.value


def replay_forms(directory: Path, pools: Pools, timeout: float = 60.0) -> list[FormReplay]:
    """Replay each form a directory lists (`also_seen_as`, where it kept its graph) once on its own
    backend: a `FormReplay` for each, SAME_BUG where `same_bug` says its fresh failure is the form's
    recorded one. A form that passes on each of VERIFY_RUNS runs (or gives a difference today's
    oracle documents) is recorded as not reproducing, as `--generalise` records it (`corpus fold`
    drops it); one that fails as another bug stays listed and said, since moving it is fold's."""
    case = load_case(Path(directory) / "case.json")
    device = case_device(case)
    replayable = [v for v in case.also_seen_as if v.graph is not None and v.backend == v.signature.backend]
    # Each backend's first runs go to its pool together, so that --workers runs them side by side.
    replies = {}
    for backend in {v.backend for v in replayable}:
        mine = [v for v in replayable if v.backend == backend]
        jobs = [graph_job(k, backend, v.graph, timeout, case.options, bool(case.check_strides), False)
                for k, v in enumerate(mine)]
        replies.update(zip((v.directory for v in mine), run_jobs(pools(backend, case), jobs)))
    said, seen = [], []
    for variant in case.also_seen_as:
        if variant not in replayable:
            said.append(FormReplay(variant.directory, FormVerdict.NO_GRAPH))
            seen.append(variant)
            continue
        probe = replace(case, graph=variant.graph, backend=variant.backend, signature=variant.signature, detail="")
        reply = replies[variant.directory]
        try:
            fresh = judge(variant.backend, reply).signature
        except HarnessError as e:
            said.append(FormReplay(variant.directory, FormVerdict.NOT_JUDGED, str(e).splitlines()[0][:120]))
            seen.append(variant)
            continue
        if not _a_failure(fresh) and _passes_every_time(probe, pools(variant.backend, case), timeout, VERIFY_RUNS - 1):
            said.append(FormReplay(variant.directory, FormVerdict.NOT_REPRODUCING, _today(fresh)))
            seen.append(replace(variant, verification=Reproduction.DOES_NOT_REPRODUCE))
            continue
        now = identify(fresh, variant.graph, variant.generalisation, device) if fresh is not None else None
        was = identify(variant.signature, variant.graph, variant.generalisation, device)
        same = now is not None and was is not None and same_bug(now, was)
        said.append(FormReplay(variant.directory, FormVerdict.SAME_BUG) if same
                    else FormReplay(variant.directory, FormVerdict.ANOTHER_FAILURE, _today(fresh)))
        seen.append(variant)
    if seen != case.also_seen_as:
        write_json(Path(directory) / "case.json", replace(case, also_seen_as=seen).to_json())
    return said


def replay_all_forms(directories: list[Path], timeout: float, workers: int = 2) -> int:
    """One line a listed form (`replay_forms`); exit 1 where any no longer fails as its bug."""
    status = 0
    with Pools(workers, timeout) as pools:
        for directory in directories:
            try:
                said = replay_forms(directory, pools, timeout)
            except (CorpusError, OSError) as e:
                print(f"fuzzfuse: error: {directory}: {(str(e).splitlines() or [repr(e)])[0]}", file=sys.stderr)
                status = 2
                continue
            for replay in said:
                print(f"{directory}: {replay.form}: {replay}", flush=True)
                if replay.shows_another_thing:
                    status = max(status, 1)
    return status


def rekey_all(directories: list[Path], timeout: float, reduce_again: bool = True) -> int:
    """One line a directory: its root-cause key before and after, or why it was left as it was.
    reduce_again False: only generalise each repro's graph as it is (and its variants')."""
    status = 0
    by_backend: dict[str, list[Path]] = {}
    for directory in directories:
        try:
            by_backend.setdefault(load_case(directory / "case.json").backend, []).append(directory)
        except (CorpusError, OSError) as e:
            said = (str(e).splitlines() or [repr(e)])[0]  # one line, naming the directory once
            print(f"fuzzfuse: error: {said if str(directory) in said else f'{directory}: {said}'}", file=sys.stderr)
            status = 2
    with Pools(2, timeout) as pools:
        for backend, mine in sorted(by_backend.items()):
            for directory in mine:
                try:
                    before, after, *moved = (rereduce(directory, pools, timeout=timeout) if reduce_again
                                             else record_generalisation(directory, pools, timeout))
                except (NotInteresting, Unavailable) as e:
                    print(f"{directory}: left as it was: {e}", flush=True)
                    continue
                now = f" (now {moved[0]})" if moved and moved[0] != directory else ""
                print(f"{directory}: {'unchanged' if before == after else f'{before} -> {after}'}{now}", flush=True)
    return status
