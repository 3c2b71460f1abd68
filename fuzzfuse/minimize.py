"""From a failing case to `minimized/<signature-slug>/`: reduce it with the same-signature test
(queries run in isolated workers, so hard crashes and hangs reduce too), then write it where its bug
lives (fuzzfuse.repro_dir writes the directory and re-runs its repro in fresh processes)."""
from __future__ import annotations

import itertools
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from .backends import Unavailable, backend_for_file, get_backend
from .backends.registry import device_routes
from .backends.options import Options
from .explain import NARROW_STORE, shows_on_a_poisoned_heap
from .corpus import Case, CorpusError, ReductionFigures, iter_cases, load_case, write_json
from .ir import Graph
from .oracle import Signature
from .reduce import NotInteresting, ReductionStats, cost, reduce, reduce_options
from .reduce.generalise import Generalisation, conversion_alone, generalise, widened_to_int64
from .identity import identify, root_cause_key, same_bug
from .known import known_repros, variant_entry
from .pool import answered_once, case_pool, graph_job, run_jobs
from .repro_dir import VERIFY_RUNS, repro_slug, write_minimized
from .rootcause import operand_fault, signature_today
from .bugreport import with_variants
from .verdict import EAGER_FAULT, HarnessError, Outcome, judge
from .worker import WorkerPool

# Raised whenever reduce_case may name a committed bug otherwise; `rekey.CHANGES` says which cases
# each raise concerns, and `corpus fold` reduces those again.
REDUCER_REVISION = 8
# Cases of one signature that minimize_files tries, smallest first, until one still fails as recorded.
RETRIES_PER_SIGNATURE = 3


@dataclass
class CaseReduction:
    """A case reduced (`reduce_case`): the smallest graph that still fails as recorded, the
    reducer's counters (their seconds, once the caller sets them, the whole reduction's), the
    signature kept (today's wording of the case's: save_minimized records that one), the case's
    options with every choice the failure does not need dropped, and the graph's generalisation
    (None where its root-cause key does not read the graph, or where none was asked for)."""

    graph: Graph
    stats: ReductionStats
    signature: Signature
    options: Options
    generalisation: Generalisation | None = None


def reduce_case(case: Case, backend: str, *, workers: int = 2, timeout: float = 60.0,
                progress: Callable[[ReductionStats], None] | None = None, pool: WorkerPool | None = None,
                max_queries: int | None = None, checkpoint: Path | None = None,
                generalise: bool = True) -> CaseReduction:
    """`case` reduced on `backend` with the same-signature test, its options too, and generalised
    where its root-cause key is its graph's form. checkpoint: a file that always holds the smallest
    failing graph found so far (as a case); when it exists, the reduction resumes from it."""
    # Replaying on another backend than the one that found it: that backend's name in the key.
    stored = replace(case.signature, backend=backend)
    target = stored.key()
    ids = itertools.count()

    # A store that leaves bytes unwritten shows on every run only with the heap poisoned.
    poison = shows_on_a_poisoned_heap(stored.message)

    def ask(candidates: list[tuple[Graph, Options]]) -> list[bool]:
        jobs = [graph_job(next(ids), backend, g, timeout, options, bool(case.check_strides), poison)
                for g, options in candidates]
        return [_key(reply) == target for reply in run_jobs(active, jobs)]

    def is_interesting(candidates: list[Graph]) -> list[bool]:
        verdicts = ask([(g, case.options) for g in candidates])
        if checkpoint is not None:
            smaller = [g for g, ok in zip(candidates, verdicts) if ok and g.size < best[0]]
            if smaller:
                best[0] = min(g.size for g in smaller)
                write_json(checkpoint, replace(case, graph=min(smaller, key=lambda g: g.size)).to_json())
        return verdicts

    def interesting_with(options: Options) -> Callable[[list[Graph]], list[bool]]:
        return lambda candidates: ask([(g, options) for g in candidates])

    def _key(reply: dict) -> str | None:
        return reply_key(backend, reply)

    def replies(graphs: list[Graph], options: Options) -> list[dict]:
        return run_jobs(active, [graph_job(next(ids), backend, g, timeout, options, bool(case.check_strides), poison)
                                 for g in graphs])

    probes: dict[str, Callable[[list[Graph]], list[dict]]] = {}  # by options

    def probed(options: Options) -> Callable[[list[Graph]], list[dict]]:
        return probes.setdefault(repr(options), answered_once(lambda graphs: replies(graphs, options)))

    def first_wrong_with(options: Options) -> Callable[[list[Graph]], list[str | None]]:
        def first_wrong(candidates: list[Graph]) -> list[str | None]:
            return [first_output_wrong(backend, reply) for reply in probed(options)(candidates)]
        return first_wrong

    def exact_first_with(options: Options) -> Callable[[list[Graph]], list[bool]]:
        return lambda candidates: [first_output_exact(backend, reply) for reply in probed(options)(candidates)]

    def reduced_again(candidate: Graph, reply: dict, options: Options,
                      stats: ReductionStats) -> tuple[Signature, Graph, ReductionStats]:
        """`candidate`, a smaller graph whose run (`reply`) shows the failure's cause, reduced under
        the signature it fails with: that signature, the graph, and both reductions' counters."""
        nonlocal target
        signature = judge(backend, reply).signature
        target = signature.key()
        again = reduce(candidate, interesting_with(options), batch=max(1, workers), progress=progress,
                       max_queries=max_queries)
        return signature, again.graph, _combined(stats, again.stats)

    start = case.graph
    if checkpoint is not None and checkpoint.exists():
        start = load_case(checkpoint).graph
    best = [start.size]
    own = pool is None
    active = pool or case_pool(backend, workers, timeout)
    try:
        # A case saved by an older normalizer may name the same failure differently: the same
        # outcome, stage, kind and assert location today stands for it. So does another kind where
        # it is the same bug: nvFuser's parallel compile wrapped an IndexError in a RuntimeError of
        # its own, and a case recorded so raises the IndexError now that its workers turn that off.
        fresh = judge(backend, replies([start], case.options)[0]).signature
        kept = stored
        if fresh is not None and (fresh.outcome, fresh.stage, fresh.location) == \
                (stored.outcome, stored.stage, stored.location) and \
                (fresh.kind == stored.kind or same_bug(
                    identify(signature_today(stored, case.detail), start, case.generalisation, case.device),
                    identify(fresh, start, case.generalisation, case.device))):
            kept, target = fresh, fresh.key()
        reduction = reduce(start, is_interesting, batch=max(1, workers), progress=progress,
                           max_queries=max_queries)
        options, _ = reduce_options(case.options, get_backend(backend).simpler_options,
                                    lambda candidates: ask([(reduction.graph, o) for o in candidates]))
        graph, stats = reduction.graph, reduction.stats
        if wanted := operand_fault(kept):
            # An op refused its operand's dtype or sizes: where the fuser gave that operand a dtype
            # or a shape eager does not, the crash is one more sight of that wrong result (a cumsum
            # of a bool cast typed bool, which abs then refused, is the cumsum's wrong dtype; oneDNN
            # Graph's add of a 0-d tensor of shape (1,), which autodiff's expand to () refused, is
            # the add's wrong shape): reduced as it.
            producers = _operand_producers(graph)
            runs = replies(producers, options)
            at = next((k for k, r in enumerate(runs) if first_output_wrong(backend, r) == wanted), None)
            if at is not None:
                kept, graph, stats = reduced_again(producers[at], runs[at], options, stats)

        def generalised_now(graph: Graph, kept: Signature) -> Generalisation | None:
            return generalised(graph, kept, backend, interesting_with(options), first_wrong_with(options),
                               exact_first_with(options), batch=max(1, workers))

        def refocused(candidate: Graph, shows: Callable[[str | None], bool], stats: ReductionStats):
            """`candidate`, a smaller graph, reduced again and generalised where the kind its first
            output is wrong by `shows` the failure's cause; None where it does not."""
            (reply,) = replies([candidate], options)
            if not shows(first_output_wrong(backend, reply)):
                return None
            kept, graph, stats = reduced_again(candidate, reply, options, stats)
            return kept, graph, stats, generalised_now(graph, kept)

        general = generalised_now(graph, kept) if generalise else None
        if general is not None and general.culprit:
            # The ops after the culprit only observe its wrong value (the key ends there already):
            # where the culprit alone, as the output, fails with the kind its value showed, that
            # smaller graph is the repro, reduced again under the signature it fails with.
            at_culprit = replace(graph, outputs=(graph.nodes[general.culprit[0]].name,)).without_dead_code()
            wanted = general.culprit[1]
            found = refocused(at_culprit, lambda kind: kind == wanted, stats)
            if found is not None:
                kept, graph, stats, general = found
        converted = conversion_alone(graph, general.first_wrong_op(graph)) \
            if general is not None and kept.outcome == "mismatch" else None
        if converted is not None:
            # The op that computes a float from an integer is wrong where the conversion alone is
            # (Inductor's C++ int64 -> float32 under unsafe math is 0, so exp(1) is 1 and
            # atan2(1, 1) is 0): the ops after it only read its wrong value. The cast is the repro.
            found = refocused(converted, lambda kind: kind is not None, stats)
            if found is not None:
                kept, graph, stats, general = found
        if general is not None:
            general = probed_further(general, active, backend, graph, options, kept, timeout,
                                     bool(case.check_strides), ids)
        return CaseReduction(graph, stats, kept, options, general)
    finally:
        if own:
            active.close()


def _operand_producers(graph: Graph) -> list[Graph]:
    """For each op whose value another op reads, in graph order, the graph that ends at it."""
    live = graph.without_dead_code()
    read = {r for n in live.nodes for r in n.refs()}
    return [replace(live, outputs=(n.name,)).without_dead_code() for n in live.nodes if n.name in read]


def _combined(first: ReductionStats, then: ReductionStats) -> ReductionStats:
    """Two reductions of one case, one after the other, as one: the first's start, the second's
    end, both's queries."""
    return replace(then, queries=first.queries + then.queries + 1, cache_hits=first.cache_hits + then.cache_hits,
                   successes=first.successes + then.successes + 1, rounds=first.rounds + then.rounds,
                   ops_before=first.ops_before, inputs_before=first.inputs_before, cost_before=first.cost_before)


# Seconds the other device's run may take when its first try timed out (a cold compile).
OTHER_DEVICE_TIMEOUT = 300.0


def devices_failing_alike(pool, backend: str, graph: Graph, options: Options, signature: Signature,
                          timeout: float, check_strides: bool, ids) -> tuple[str, ...]:
    """The devices a reduced wrong value fails alike on (the same outcome, stage, kind and class),
    its own among them, where its fuser runs one lowering on several (`Backend.device_routes`)
    and another of them runs here: its own alone where it fails on its own device only (a bug a
    failure of every device is never matched to: fuzzfuse.known), () where no other runs here. A
    fault of eager's (verdict.EAGER_FAULT) is asked of eager's routes: its scalar loop judged
    against eager on the other device fails alike where eager's kernel there is wrong too. The
    other device runs with the fuser's defaults (a configuration drawn for one device may not
    exist on another): failing alike there, the bug needs neither the configuration nor the
    device. (Skipping every case with a drawn configuration left a CUDA logical_xor whose output
    strides were wrong with disable_ftz set, which nothing about strides reads, keyed apart from
    the committed CPU bug that the same graph shows on CPU.)"""
    # A fault of eager's kernel, which a fuser's right value showed, is asked of eager's own routes.
    routes = device_routes(EAGER_FAULT if signature.backend == EAGER_FAULT else backend)
    if signature.outcome != "mismatch" or not routes:
        return ()
    own = get_backend(backend).device
    alike, probed = [own], False
    for device, route in sorted(routes.items()):
        if device == own:
            continue
        try:
            get_backend(route)
        except Unavailable:
            continue
        probed = True
        theirs = None
        for attempt in range(2):
            # A worker's first graph on another device compiles cold (Inductor's C++ on a GPU
            # machine whose cores are busy with the campaign): a timeout there is asked once more,
            # with the longer of the two limits, before the device counts as not failing alike.
            limit = timeout if attempt == 0 else max(timeout, OTHER_DEVICE_TIMEOUT)
            reply = run_jobs(pool, [graph_job(next(ids), route, graph, limit, Options(), check_strides)])[0]
            try:
                theirs = judge(route, reply).signature
            except HarnessError as e:
                theirs = e
            if not (isinstance(theirs, Signature) and theirs.outcome == "hang"):
                break
        if isinstance(theirs, Signature) and replace(theirs, backend=signature.backend) == signature:
            alike.append(device)
        else:  # said, so that a campaign's log shows why a shared lowering's bug kept its device
            said = theirs.key() if isinstance(theirs, Signature) else f"harness error: {theirs}" if theirs else "a pass"
            print(f"device check: {route} does not fail alike ({said[:160]})", file=sys.stderr)
    return tuple(sorted(alike)) if probed else ()


def probed_further(general: Generalisation, pool, backend: str, graph: Graph, options: Options,
                   signature: Signature, timeout: float, check_strides: bool, ids) -> Generalisation:
    """A reduced graph's generalisation with what its runs elsewhere show: the devices a wrong value
    fails alike on, and the narrow store a crash's int64 form shows."""
    return replace(general, devices=devices_failing_alike(pool, backend, graph, options, signature, timeout,
                                                          check_strides, ids),
                   widened=narrow_store_when_widened(pool, backend, graph, options, signature, timeout,
                                                     check_strides, ids))


def narrow_store_when_widened(pool, backend: str, graph: Graph, options: Options, signature: Signature,
                              timeout: float, check_strides: bool, ids) -> str:
    """NARROW_STORE where a crash that killed the process shows it in its reduced graph with the
    integer inputs widened to int64, run on a poisoned heap (fuzzfuse.explain, fuzzfuse.heap): the
    crash is that store overrunning a narrower output (NNC's abs of a folded int16 zero corrupts
    the heap; of an int64 zero, it leaves half the output unwritten). "" where it shows
    nothing, or where there is no such crash or integer input."""
    widened = widened_to_int64(graph) if signature.outcome == "hard-crash" else None
    if widened is None:
        return ""
    reply = run_jobs(pool, [graph_job(next(ids), backend, widened, timeout, options, check_strides, True)])[0]
    try:
        shown = judge(backend, reply).signature
    except HarnessError:
        return ""
    return NARROW_STORE if shown is not None and shown.outcome == "mismatch" and shown.message == NARROW_STORE else ""


def reply_key(backend: str, reply: dict) -> str | None:
    try:
        return judge(backend, reply).key
    except HarnessError:  # a harness error on a candidate: not the bug we are after
        return None


def first_output_exact(backend: str, reply: dict) -> bool:
    """Whether a run's first output was eager's bit for bit."""
    try:
        return judge(backend, reply).first_output_exact is True
    except HarnessError:
        return False


def first_output_wrong(backend: str, reply: dict) -> str | None:
    """The kind of mismatch a run's first output shows in the forward ("values", "nan-inf"...),
    None when it is right (another output may be wrong) or the run did not get that far."""
    try:
        result = judge(backend, reply)
    except HarnessError:
        return None
    if result.outcome is Outcome.MISMATCH and result.wrong_output == 0 and result.signature.stage == "run":
        return result.signature.kind
    return None


def generalised(graph: Graph, signature: Signature, backend: str,
                is_interesting: Callable[[list[Graph]], list[bool]],
                first_wrong: Callable[[list[Graph]], list[str | None]] | None = None,
                exact_first: Callable[[list[Graph]], list[bool]] | None = None,
                batch: int = 1) -> Generalisation | None:
    """The fillers, free dtypes and culprit of a reduced graph (fuzzfuse.reduce.generalise), among
    the ops `backend` draws. An anchored crash's identity does not read the graph, but steering
    does (its trigger drops the fillers: fuzzfuse.steering), so its ops are generalised too; no
    dtype (an identity names a dtype's class, never the dtype); a culprit only for a wrong forward
    value. batch: the workers the queries run on (reduce_case's). Where the fuser writes vectorized
    loops with a scalar tail on its device (`Backend.vector_loops_on`), its culprit is asked on
    operands long enough for the vectorized loop too."""
    fuser = get_backend(backend)
    wrong_value = signature.outcome == "mismatch" and signature.stage == "run"
    return generalise(graph, is_interesting, fuser.features.ops,
                      first_wrong=first_wrong if wrong_value else None,
                      exact_first=exact_first if wrong_value else None, batch=batch,
                      by_signal=signature.outcome == "hard-crash",
                      vector_loops=fuser.device in fuser.vector_loops_on)


def save_minimized(root: Path, case: Case, result: CaseReduction, backend: str, verify_runs: int = VERIFY_RUNS,
                   timeout: float = 60.0, slug: str | None = None) -> Path:
    """Write minimized/<slug>/{case.json, repro.py, README.md} for `case` reduced (slug: the
    signature's, unless the campaign names the root cause's), with the signature and options the
    reduction kept and the reduced graph's generalisation. A bug that a directory under `root`
    holds already (`identity.same_bug`) lands there, whatever its slug: the smaller repro stays,
    the other is listed as a form of it (`also_seen_as`), and the hit is counted."""
    case = replace(case, signature=result.signature, options=result.options)
    reduced = result.graph.renamed()
    key = root_cause_key(result.signature, reduced, result.generalisation, case.device)
    home = known_repros([root]).find(key) if key and Path(root).is_dir() else None
    directory = Path(home) if home else Path(root) / (slug or result.signature.slug())
    if not home and key and (directory / "case.json").exists():
        # The name is taken by another bug (a directory named after a key it no longer has: NNC's
        # folded sub -> reciprocal, once keyed as a sub bug, held the name a later int8 sub bug
        # was given): this bug gets a directory of its own, never a place among the other's forms.
        directory = next(d for k in itertools.count(2) if not (d := directory.with_name(f"{directory.name}-{k}")).exists())
    stats = result.stats
    # A case made elsewhere (by hand, by another tool) names no versions: those it failed under are
    # this machine's, and a report without them says nothing of where it fails.
    versions = case.versions or get_backend(backend).versions()
    minimized = replace(case, graph=reduced, backend=backend, hits=1, generalisation=result.generalisation,
                        versions=versions,
                        reduction=ReductionFigures(case.graph.size, reduced.size, stats.queries, stats.cache_hits,
                                                   stats.seconds, REDUCER_REVISION))
    if not (directory / "case.json").exists():
        write_minimized(directory, minimized, verify_runs, timeout)
        return directory
    existing = load_case(directory / "case.json")
    if cost(existing.graph) <= cost(reduced):
        form = variant_entry(f"{directory.name}+{reduced.digest()[:8]}", minimized)
        known = {(v.key, v.graph.digest() if v.graph else None) for v in existing.also_seen_as}
        seen = existing.also_seen_as + ([form] if (form.key, reduced.digest()) not in known else [])
        kept = replace(existing, hits=existing.hits + 1, also_seen_as=seen)
        write_json(directory / "case.json", kept.to_json())
        if (directory / "README.md").is_file():
            (directory / "README.md").write_text(with_variants((directory / "README.md").read_text(), kept))
        return directory
    former = variant_entry(f"{directory.name}@{existing.graph.digest()[:8]}", existing)
    write_minimized(directory, replace(minimized, hits=existing.hits + 1,
                                       also_seen_as=existing.also_seen_as + [former]), verify_runs, timeout)
    return directory


def minimize_files(paths: list[Path], out: Path, backend: str | None = None, workers: int = 2,
                   timeout: float = 60.0, max_queries: int | None = None, progress=None):
    """Minimize the failing cases under `paths`, sharing one worker pool per backend: reduce, then
    dedup. A signature that names its root cause (a crash's assert) is reduced once (its smallest
    case that still fails as recorded: up to RETRIES_PER_SIGNATURE of them are tried, smallest
    first); one whose root cause is its reduced graph's form (a mismatch, a crash with no location)
    is reduced case by case, and each lands in the directory of its reduced root cause, so that two
    bugs under one coarse signature get two repros and one bug found twice keeps the smaller.
    Yields (case path, minimized dir or the error that stopped that case: CorpusError, ValueError,
    or NotInteresting for a case that no longer fails), so a batch of a campaign's leftovers goes
    on past a bad file."""
    chosen: dict[tuple[str, str], list[tuple[Path, Case]]] = {}
    for path, case in iter_cases(paths):
        if isinstance(case, CorpusError):
            yield path, case
            continue
        if not case.signature:
            yield path, ValueError(f"{path}: the case records no failure signature to preserve")
            continue
        try:
            name = backend_for_file(case.backend, backend, str(path))
        except Unavailable as e:  # a file naming code to import: bad input, like a corrupt one
            yield path, e
            continue
        case = as_run_on(case, name)
        signature = replace(case.signature, backend=name)
        key = (name, root_cause_key(signature) or f"{signature.key()}|{path}")
        chosen.setdefault(key, []).append((path, case))
    # A repro is written and verified (fresh processes, mostly imports) while the next case reduces.
    with ThreadPoolExecutor(1) as saver:
        pending = None
        for name in sorted({n for n, _ in chosen}):
            with case_pool(name, workers, timeout) as pool:
                for key in sorted(k for k in chosen if k[0] == name):
                    skipped, found = _reduce_smallest_failing(chosen[key], name, pool, workers, timeout, progress,
                                                              max_queries)
                    yield from skipped
                    if found is None:
                        continue
                    if pending:
                        yield pending[0], pending[1].result()
                    path, case, result = found
                    slug = repro_slug(result.signature, root_cause_key(result.signature, result.graph,
                                                                       result.generalisation, case.device))
                    pending = (path, saver.submit(save_minimized, Path(out), case, result, name, timeout=timeout,
                                                  slug=slug))
        if pending:
            yield pending[0], pending[1].result()


def as_run_on(case: Case, backend: str) -> Case:
    """The case as `backend` reduces it. Where --backend moves it to another device than it failed
    on (a CUDA Inductor find reduced by inductor:cpu on a machine with no GPU), the device and the
    versions it records become the backend's: its identity, its repro and its report name the
    device it was reduced and verified on, never the one it was found on."""
    runs_on = get_backend(backend)
    if not case.device or case.device == runs_on.device:
        return case
    config = dict(case.config or {})
    if isinstance(config.get("features"), dict):
        config["features"] = {**config["features"], "device": runs_on.device}
    return replace(case, config=config, versions=runs_on.versions())


def _reduce_smallest_failing(cases: list[tuple[Path, Case]], backend: str, pool: WorkerPool, workers: int,
                             timeout: float, progress, max_queries: int | None):
    """Reduce the smallest of one signature's cases that still fails as recorded (up to
    RETRIES_PER_SIGNATURE tried): ([(path, NotInteresting)] for those that did not,
    (path, case, CaseReduction) or None)."""
    skipped = []
    for path, case in sorted(cases, key=lambda pc: pc[1].graph.size)[:RETRIES_PER_SIGNATURE]:
        start = time.time()
        try:
            result = reduce_case(case, backend, workers=workers, timeout=timeout, progress=progress, pool=pool,
                                 max_queries=max_queries)
        except NotInteresting as e:
            skipped.append((path, NotInteresting(f"{path}: {e}")))
            continue
        result.stats.seconds = round(time.time() - start, 2)
        return skipped, (path, case, result)
    return skipped, None

