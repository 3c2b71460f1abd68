"""The fuzz loop: seeded cases fanned out to isolated workers, outcomes counted, each new failure
re-run to rule out flakiness, every failing case saved, stats checkpointed to summary.json and
state.json (so `fuzz --resume` continues after any stop, SIGKILL included: see checkpoint.py).
Reductions run beside the fuzzing on a share of the same workers (fuzzfuse.reductions); the summary
says where the run's wall time and its workers' time went (checkpoint.WallClock)."""
from __future__ import annotations

import collections
import dataclasses
import enum
import hashlib
import random
import sys
import time
from pathlib import Path

from .backends import backend_for_file, get_backend
from .backends.options import Options
from .checkpoint import (CampaignArgs, CampaignState, DirectoryClaim, Phase, Stats, WallClock, load_state,
                         save_state, shard_dir)
from .corpus import Case, known_graphs, load_case, save_case, write_json
from .ir import Graph
from .known import known_repros
from .pool import Job, SharedPool, case_pool, graph_job
from .reductions import REDUCE_SHARE, CampaignReductions, Interrupted, OutOfTime, Reducing
from .steering import Steering
from .strategies import Features, GenConfig, batch_features, config_to_json, generate, steer, swarm_max_ops
from .explain import shows_on_a_poisoned_heap
from .verdict import CaseResult, HarnessError, Outcome, SignatureRecord, judge
from .worker import WorkerPool

BATCH = 50  # cases per swarm feature set
RECHECKS = 2  # re-runs of a new signature's first case before it counts as reproducible
MAX_SAVED_PER_SIGNATURE = 20
FOCUS_TRIALS = 4  # focused batches a coverage recipe gets to reach its scheduler once
# --time bounds a whole run, reductions included: while a signature may still need reducing, in the
# run's last (1 - FUZZ_SHARE) the reductions may take every worker, and fuzzing only those they leave.
FUZZ_SHARE = 0.75
# Seconds a run that stops at its --time (or on Ctrl-C) waits for the reductions under way to file
# what they did: a repro being verified may finish; a query in flight is abandoned.
STOP_GRACE = 10.0
STEER_SHARE = 0.25  # swarm batches aimed at one (op, dtype, layout) triple (strategies.steer)
# Cases drawn outside the space a backend declares it fuses (Backend.outside_features): few, since
# most of them test no fused code, but enough that a fuser fusing more than declared is noticed.
OUTSIDE_SHARE = 0.05
FOLD_SHARE = 0.25  # swarm batches that draw algebraic-fold pairs adjacent (Features.fold_bait)
STEERING_SAMPLE = 150  # graphs a trigger's breadth is measured on


class Stop(enum.Enum):
    """Why a campaign's loop ends (Campaign._turn)."""

    DONE = "done"  # fuzzing and the reductions it may run are over
    OUT_OF_TIME = "out of time"  # --time ran out: what is in flight is abandoned


def case_seed(campaign_seed: int | str, index: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{campaign_seed}:{index}".encode()).digest()[:6], "big")


class Campaign:
    def __init__(self, backend: str, out: Path, seed: int = 0, workers: int = 2,
                 time_limit: float | None = None, max_cases: int | None = None, timeout: float = 60.0,
                 check_strides: bool | None = None, max_ops: int = 12, features: Features | None = None,
                 swarm: bool = True, display=None, reduce: bool = True, reduce_budget: int = 400,
                 backward: bool = False, devices: list[str] | None = None, shard: str | None = None,
                 known: list[str] | None = None, focus_share: float = 0.25,
                 reduce_share: float = REDUCE_SHARE, extra_runs: bool = True):
        self.backend_name = backend
        self.backend = get_backend(backend)
        self.root, self.shard = Path(out), shard
        self.out = shard_dir(self.root, shard)
        self.seed, self.workers = seed, workers
        # Each shard draws its own seed stream, so hosts sharing OUT never repeat each other.
        self.stream: int | str = seed if not shard else f"{seed}/{shard}"
        self.time_limit, self.max_cases, self.timeout = time_limit, max_cases, timeout
        # Seconds this run may take in all, fuzzing and reducing (None: no bound); `resume` sets
        # it to the --time asked for, and the deadline is set when the run starts.
        self.run_seconds, self.deadline = time_limit, None
        self.interrupted = False  # stopped by Ctrl-C: no reduction started, state checkpointed
        self.max_ops = max_ops
        # Detection power (issue 17): strides checked where the backend promises eager's, and each
        # compiled graph judged on extra input sets (fuzzfuse.job.extra_input_sets).
        self.check_strides = self.backend.promises_strides if check_strides is None else check_strides
        self.extra_runs = extra_runs
        self.features = features or self.backend.features
        self.swarm, self.backward = swarm, backward
        # The share of worker time that batches aimed at the least-covered scheduler may take (0:
        # none): a budget of time, not of batches, since those batches cost more (persistent and
        # segmented fusions compile several kernels: one recipe's cases cost 3 swarm cases).
        if not 0 <= focus_share <= 1:
            raise ValueError(f"--focus-share must be a fraction of worker time from 0 (never) to 1, not {focus_share}")
        self.focus_share = focus_share
        self.devices = devices
        self.reduce, self.reduce_budget = reduce, reduce_budget
        # Directories of minimized repros (the regression corpus): their root causes are counted
        # but not reduced again, which on a GPU lease saves the device time they would take.
        self.known = [str(k) for k in known or []]
        self.stats = Stats()
        self.clock = WallClock()  # start-up from here: loading --known repros, steering's sample
        self.reductions = CampaignReductions(self, known_repros(self.known), reduce_share)
        # Generation steers away from the triggers of the root causes it knows (fuzzfuse.steering):
        # the --known repros' of its routes now, the reductions' as they come.
        self.steering = Steering(known_graphs(self.known, self.routes(), backward), self.steering_sample)
        self._avoid: dict[int, tuple] = {}  # batch -> the triggers known when it started
        self.versions = self.backend.versions()
        self.display = display
        self._next_index = 0
        self._jobs: dict[int | str, Job] = {}
        self._rechecks: dict[str, list] = {}  # signature key -> outcomes of its re-runs
        self._saved_per_sig: collections.Counter = collections.Counter()
        self._focus: dict[int, str | None] = {}  # batch -> the scheduler it aims at (None: a swarm batch)
        self._resubmit: list[int] = []  # indices that were in flight when a resumed run stopped

    # ---- job stream ------------------------------------------------------------------------
    def is_outside(self, index: int) -> bool:
        """Whether case `index` is drawn outside the backend's declared fusible space: a pure
        function of the campaign's seed stream, like every other draw."""
        return self.backend.outside_features is not None and \
            random.Random(f"{self.stream}:{index}:outside").random() < OUTSIDE_SHARE

    def _batch_features(self, batch: int, base: Features, stream: str | None = None) -> Features:
        """A swarm batch's features; no integer-only batches in training, whose cases need floats."""
        return batch_features(self.stream if stream is None else stream, batch, base,
                              integer_batches=not self.backward)

    def config_for(self, index: int) -> GenConfig:
        batch = index // BATCH
        if self.swarm and self.is_outside(index):
            features = self._batch_features(batch, self.backend.outside_features)
            return GenConfig(features=features, shapes=self.backend.outside_shapes or self.backend.shapes,
                             max_ops=self.max_ops, backward=self.backward,
                             avoid=self._avoid.setdefault(batch, self.steering.current()))
        focus = self.focus_for(batch)
        shapes = self.backend.shapes
        if focus:
            # A recipe names Features fields, and ShapeConfig fields under "shapes".
            recipe = dict(self.backend.coverage_focus[focus])
            shapes = dataclasses.replace(shapes, **recipe.pop("shapes", {}))
            features = dataclasses.replace(self.features, **recipe)
        else:
            features = self._batch_features(batch, self.features) if self.swarm else self.features
        # Narrow triggers (issue 17): graph sizes swarmed, a share of batches aimed at one triple each.
        rng = random.Random(f"{self.stream}:{batch}:narrow")
        max_ops = swarm_max_ops(rng, self.max_ops) if self.swarm else self.max_ops
        if self.swarm and not focus and batch and rng.random() < STEER_SHARE:  # batch 0: the plain swarm
            features = steer(self.features, rng)
        if self.swarm and not focus and random.Random(f"{self.stream}:{batch}:fold").random() < FOLD_SHARE:
            features = dataclasses.replace(features, fold_bait=True)
        avoid = self._avoid.setdefault(batch, self.steering.current())
        return GenConfig(features=features, shapes=shapes, max_ops=max_ops, backward=self.backward, avoid=avoid)

    def steering_sample(self) -> list[Graph]:
        """Graphs drawn as this campaign's swarm batches draw them, unsteered (a pure function of
        its seed): what a trigger's breadth is measured on (fuzzfuse.steering.Steering)."""
        stream = f"{self.stream}:breadth"
        sample = []
        for k in range(STEERING_SAMPLE):
            features = self._batch_features(k, self.features, stream) if self.swarm else self.features
            max_ops = swarm_max_ops(random.Random(f"{stream}:{k}"), self.max_ops) if self.swarm else self.max_ops
            sample.append(generate(f"{stream}:{k}", GenConfig(features=features, shapes=self.backend.shapes,
                                                               max_ops=max_ops, backward=self.backward)))
        return sample

    def routes(self) -> set[str]:
        """The backend and the reference routes beneath it (fuzzfuse.attribution): a bug of any of
        them fails this campaign's cases."""
        routes, route = {self.backend_name}, self.backend.reference_route
        while route and route not in routes:
            routes.add(route)
            route = get_backend(route).reference_route
        return routes

    def _new_job(self) -> Job:
        if self._resubmit:
            i = self._resubmit.pop(0)
        else:
            i = self._next_index
            self._next_index += 1
        job = Job(i, self.backend_name, self.timeout, seed=case_seed(self.stream, i), config=self.config_for(i),
                  options=self.options_for(i), check_strides=self.check_strides, extra_runs=self.extra_runs)
        self._jobs[i] = job
        return job

    def focus_for(self, batch: int) -> str | None:
        """For a backend that reports schedulers, a batch aims at the least-covered one it knows how
        to reach while the focused batches so far took less than `focus_share` of the workers' time
        (decided once, when the batch starts; the first batch never: nothing is covered yet). A
        recipe whose first FOCUS_TRIALS batches never reached its scheduler is dropped: it would
        otherwise stay the least covered and take every focused batch of the campaign."""
        recipes = self.backend.coverage_focus
        if not recipes or not self.focus_share:
            return None
        if batch not in self._focus:
            coverage, tried, hits = self.stats.coverage, self.stats.focus_batches, self.stats.focus_hits
            reachable = [s for s in recipes if hits.get(s, 0) or tried.get(s, 0) < FOCUS_TRIALS]
            spent = sum(self.stats.focus_seconds.values())
            if not reachable or spent >= self.focus_share * self.stats.worker_seconds:
                self._focus[batch] = None
                return None
            self._focus[batch] = min(reachable, key=lambda s: coverage.get(s, 0))
            self.stats.focus_batches[self._focus[batch]] += 1
        return self._focus[batch]

    def options_for(self, index: int) -> Options:
        """Per-case backend choices, drawn from the seed (`Backend.draw_options`): nvFuser's
        lowering style, Inductor's configuration; a bug can hide behind one of them."""
        options = self.backend.draw_options(case_seed(self.stream, index))
        focus = self._focus.get(index // BATCH)  # decided by config_for, which comes first
        return self.backend.focus_options(focus, options) if focus else options

    def _done_submitting(self) -> bool:
        if self._resubmit:
            return False
        if self.max_cases is not None and self._next_index >= self.max_cases:
            return True
        return self.time_limit is not None and self.stats.seconds >= self.time_limit

    def _reserve(self) -> bool:
        """Whether the run is in its last (1 - FUZZ_SHARE) with a failure that may still need
        reducing: the reductions come first there."""
        return (self.deadline is not None and time.time() >= self.deadline - (1 - FUZZ_SHARE) * self.run_seconds
                and self._may_reduce())

    # ---- results ---------------------------------------------------------------------------
    def _graph_of(self, job: Job, result: CaseResult | None) -> Graph:
        if result is not None and result.graph is not None:
            return result.graph
        if job.graph is not None:
            return job.graph
        # The worker died before it could say: regenerate deterministically from the seed.
        return generate(job.seed, job.config)

    def _case(self, job: Job, graph: Graph, outcome: Outcome, result: CaseResult | None, detail: str) -> Case:
        """The case file of a job's graph: how it was drawn and under which choices."""
        return Case(graph, self.backend_name, job.seed, outcome, result.signature if result else None, detail[:20000],
                    self.versions, config_to_json(job.config) if job.config is not None else None, job.options,
                    self.check_strides)

    def _record(self, job: Job, reply: dict, pool: WorkerPool) -> None:
        recheck_of = job.recheck_of
        try:
            result = judge(self.backend_name, reply)
        except HarnessError as e:  # a fuzzfuse defect on this case: keep the case, say so, go on
            self._harness_error(job, str(e))
            return
        outcome, sig = result.outcome, result.signature
        if recheck_of is not None:
            self._rechecks[recheck_of].append(result.key or "pass")
            self._settle_recheck(recheck_of)
            return
        self.stats.cases += 1
        self.stats.fused_cases += bool(result.fused)
        if isinstance(job.id, int) and self.swarm and self.is_outside(job.id):
            self.stats.outside_cases += 1
            self.stats.outside_fused_cases += bool(result.fused)
        self.stats.steered_draws += result.steered
        self.stats.steered_cases += bool(result.steered)
        self.stats.count_inputs(result.input_sets, result.triples, result.reshaped_sets)
        self.stats.add_sample(self.stats.finished, time.time())
        if result.compile_seconds:
            self.stats.add_compile(result.compile_seconds, result.evidence.kernels)
        phases = {**result.timings, **{name: seconds for name, seconds in
                                       (("worker", result.worker_seconds), ("cpu", result.cpu_seconds))
                                       if seconds is not None}}
        for phase, seconds in phases.items():
            self.stats.add_sample(self.stats.phase_seconds[phase], seconds)
        schedulers = result.evidence.schedulers
        self.stats.coverage.update(schedulers)
        focus = self._focus.get(job.id // BATCH)
        seconds = result.worker_seconds or 0.0
        self.stats.worker_seconds += seconds
        if focus:
            self.stats.focus_seconds[focus] += seconds
        if focus in schedulers:
            self.stats.focus_hits[focus] += 1
        self.stats.choices.update(self.backend.describe_options(job.options))
        if not outcome.is_failure or sig is None:
            self.stats.outcomes[outcome] += 1
            if outcome == Outcome.DOCUMENTED and sig is not None:
                self.stats.differences[sig.kind] += 1
            return
        key = sig.key()
        graph = self._graph_of(job, result)
        entry = self.stats.signatures.get(key)
        if entry is None:
            entry = self.stats.signatures[key] = SignatureRecord.first(result, time.time(), graph.size)
            self._submit_rechecks(key, graph, job.options, self.check_strides, pool)
        entry.count += 1
        entry.last_seen = time.time()
        self.stats.outcomes[Outcome.FLAKY if entry.confirmed is False else outcome] += 1
        saved = None
        if self._saved_per_sig[key] < MAX_SAVED_PER_SIGNATURE:
            self._saved_per_sig[key] += 1
            path = save_case(self.out / "corpus", self._case(job, graph, outcome, result,
                                                             result.detail or result.stderr_tail), overwrite=False)
            saved = str(path.relative_to(self.out))
            if entry.case is None or graph.size <= entry.smallest_size:
                entry.smallest_size, entry.case = graph.size, saved
        self.reductions.offer(entry, graph, saved)

    def _harness_error(self, job: Job, message: str) -> None:
        """A days-long campaign must not die of one fuzzfuse defect (an emitter bug, say): the case
        goes to OUT/harness-errors/ for the fuzzfuse developers, and the count shows in the stats."""
        if job.recheck_of is None:
            self.stats.cases += 1
        self.stats.outcomes[Outcome.HARNESS_ERROR] += 1
        graph = self._graph_of(job, None)
        save_case(self.out / "harness-errors", self._case(job, graph, Outcome.HARNESS_ERROR, None, message))
        if self.stats.outcomes[Outcome.HARNESS_ERROR] == 1:
            print(f"fuzzfuse harness error (case kept in {self.out / 'harness-errors'}):\n{message[:2000]}",
                  file=sys.stderr)

    def _submit_rechecks(self, key: str, graph: Graph, options: Options, check_strides: bool,
                         pool: WorkerPool) -> None:
        self._rechecks[key] = []
        # A store that leaves bytes unwritten is re-run on a poisoned heap, where it shows every time.
        unwritten = shows_on_a_poisoned_heap(self.stats.signatures[key].signature.message)
        for k in range(RECHECKS):
            recheck = dataclasses.replace(graph_job(f"recheck-{k}-{key}", self.backend_name, graph, self.timeout,
                                                    options, check_strides, unwritten), recheck_of=key)
            self._jobs[recheck.id] = recheck
            pool.submit({**recheck.to_json(), "account": "fuzz"})

    def _settle_recheck(self, key: str) -> None:
        """A signature is reproducible when every re-run of its first case fails the same way;
        otherwise its cases count as flaky from then on."""
        runs = self._rechecks[key]
        if len(runs) < RECHECKS:
            return
        entry = self.stats.signatures[key]
        if entry.settle(runs):
            self.stats.outcomes[entry.signature.outcome] -= 1
            self.stats.outcomes[Outcome.FLAKY] += 1
        self.reductions.settled(key)

    # ---- main loop ----------------------------------------------------------------------------
    def run(self) -> dict:
        with DirectoryClaim(self.out), case_pool(self.backend_name, self.workers, self.timeout, self.devices) as pool, \
                SharedPool(pool) as shared:
            self.stats.start = time.time()
            if self.stats.first_start is None:
                self.stats.first_start = self.stats.origin
            if self.run_seconds is not None:
                self.deadline = self.stats.start + self.run_seconds
            for key, entry in self.stats.signatures.items():  # rechecks a stopped run left unsettled
                if entry.confirmed is None and entry.case:
                    case = load_case(self.out / entry.case)
                    self._submit_rechecks(key, case.graph, case.options, bool(case.check_strides), pool)
            last_checkpoint = time.time()
            stopped: Stop | None = None
            try:
                while stopped is None:
                    stopped = self._turn(pool, shared)
                    if self.display:
                        self.display(self, pool)
                    if time.time() - last_checkpoint > 10:
                        self.checkpoint(pool)
                        last_checkpoint = time.time()
            except KeyboardInterrupt:  # the cases in flight run again on --resume
                self.interrupted = True
            self.clock.enter(Phase.WAITING, pool.time_by_use)
            if self.stats.stop is None:
                self.stats.stop = time.time()
            if stopped is not Stop.DONE:
                # What is in flight is abandoned: those cases run again on --resume, and the
                # reductions' progress stays in OUT/reducing/.
                pool.abandon(list(self._jobs))
                why = Interrupted("interrupted") if self.interrupted else OutOfTime("--time ran out")
                self.reductions.stop(shared, why, STOP_GRACE)
            return self.checkpoint(pool)

    def _turn(self, pool: WorkerPool, shared: SharedPool) -> Stop | None:
        """One turn of the loop: keep the workers fed with cases and the reductions' queries, and
        file what came back; why to stop, or None to go on."""
        fuzzing = not self._done_submitting()
        reserve = self._reserve()
        share = self.reductions.workers(fuzzing and not reserve)
        self.reductions.step(shared, fuzzing, share)
        shared.dispatch(share)
        # The queue holds a case for each worker beyond those running, so that none waits for the
        # loop; in the reserve, fuzzing takes only the workers the reductions leave.
        room = 2 * self.workers if not reserve else max(0, self.workers - shared.wanted())
        while len(self._jobs) < room and not self._done_submitting():
            pool.submit({**self._new_job().to_json(), "account": "fuzz"})
        if self.deadline is not None and time.time() >= self.deadline:
            return Stop.OUT_OF_TIME
        if not fuzzing and not self._jobs and self.stats.stop is None:
            self.stats.stop = time.time()  # rates exclude the reductions that follow
        if not fuzzing and not self._jobs and not self.reductions.busy():
            return Stop.DONE
        self.clock.enter(Phase.START_UP if not pool.ready() and not self.stats.cases else
                         Phase.FUZZING if fuzzing or self._jobs else
                         Phase.REDUCING if self.reductions.busy() else Phase.WAITING, pool.time_by_use)
        for reply in shared.poll(0.5):
            self._record(self._jobs.pop(reply["id"]), reply, pool)
        return None

    def _may_reduce(self) -> bool:
        """Whether a failure found so far may still need reducing (one being re-checked counts)."""
        return self.reduce and (bool(self.reducer_queue()) or any(
            e.confirmed is None and e.known is None and e.signature.kind != "no-fusion"
            for e in self.stats.signatures.values()))

    def reducer_queue(self) -> list[str]:
        """What waits for a reduction: the coarse keys of anchored crashes whose root cause has no
        repro, and of the pending hits worth reducing once fuzzing stops (see reductions.py)."""
        if not self.reduce:
            return []
        pending = self.reductions.next_pending(novel_only=True)
        return self.reductions.anchored_queue() + ([pending.coarse_key] if pending else [])

    def phase(self) -> str:
        """What the run does now, for the live display: fuzzing and reducing beside it (and until
        when fuzzing has every worker, where --time keeps the rest for reductions), or reducing."""
        running = [t.view for t in self.reductions.tasks]
        verifying = sum(v.verifying for v in running)
        share = f" on {self.reductions.share:.0%} of the workers" if self.stats.stop is None and not self._reserve() else ""
        beside = f"; {len(running)} reduction(s){share}" if running else ""
        if verifying:
            beside += f" ({verifying} verifying a repro in fresh processes)"
        if self.stats.stop is not None:
            return f"fuzzing done; reducing what it found{beside}"
        if self._reserve():
            return f"fuzzing on what the reductions leave, in the last {(1 - FUZZ_SHARE):.0%} of the run{beside}"
        if self.deadline is not None and self._may_reduce():
            left = (1 - FUZZ_SHARE) * self.run_seconds
            return f"fuzzing; the reductions take every worker they need once {left:.0f}s are left{beside}"
        return f"fuzzing{beside}"

    @property
    def reducing(self) -> list[Reducing]:
        """The reductions under way: what each reduces and the reducer's counters."""
        return [t.view for t in self.reductions.tasks]

    def checkpoint(self, pool: WorkerPool | None = None, **extra) -> dict:
        """summary.json for people and tools, state.json for --resume; both atomic."""
        # Wall-clock seconds since the first start, the clock of first-seen times (fuzzing seconds
        # would leave out reductions and the stops between runs, and put samples before their time).
        point = [round(time.time() - self.stats.origin, 1), self.stats.cases, len(self.stats.signatures)]
        if not self.stats.timeline or self.stats.timeline[-1][1:] != point[1:]:
            self.stats.timeline.append(point)
        summary = self.stats.summary(self.backend_name, self.versions, {**extra,
            "seed": self.seed, "shard": self.shard, "workers": self.workers, "fused_cases": self.stats.fused_cases,
            "worker_restarts": pool.restarts if pool else 0, **self.reductions.summary(),
            **self.clock.summary(pool.time_by_use() if pool else {}, self.workers)})
        write_json(self.out / "summary.json", summary)
        in_flight = sorted(j.id for j in self._jobs.values() if isinstance(j.id, int))
        save_state(self.out, CampaignState(self.args(), self._next_index, in_flight, self.stats,
                                           dict(self._saved_per_sig), dict(self._focus), self.reductions.book,
                                           dict(self.reductions.learned)))
        return summary

    def args(self) -> CampaignArgs:
        """The constructor arguments that define the campaign (what --resume restores)."""
        return CampaignArgs(
            backend=self.backend_name, seed=self.seed, shard=self.shard, workers=self.workers,
            time_limit=self.time_limit, max_cases=self.max_cases, timeout=self.timeout, check_strides=self.check_strides,
            max_ops=self.max_ops, swarm=self.swarm, reduce=self.reduce, reduce_budget=self.reduce_budget,
            backward=self.backward, devices=self.devices, known=self.known, features=self.features,
            focus_share=self.focus_share, reduce_share=self.reductions.share, extra_runs=self.extra_runs)

    @classmethod
    def resume(cls, out: Path, more_seconds: float | None = None, more_cases: int | None = None,
               backend: str | None = None, **overrides) -> "Campaign":
        """The campaign stopped in `out` (a campaign dir, or a shard dir), ready to continue its
        seed stream with its stats, known signatures, unsettled rechecks and unfinished reductions.
        Without more_seconds/more_cases it finishes its original budget; with them it runs that
        much more. `overrides` may change how it runs (workers, devices), not what it generates.
        `backend`, when given, must be the campaign's own: naming it is how a user lets a campaign
        of a custom backend (which imports code) load it again (see backends.backend_for_file)."""
        def admit(recorded: str) -> None:
            if backend and backend != recorded:
                raise ValueError(f"{out} is a campaign on {recorded}, not {backend}: resume it without "
                                 "--backend, or start another campaign with --out")
            backend_for_file(recorded, backend, str(Path(out) / "state.json"))

        state = load_state(out, admit)
        args = dataclasses.replace(state.args, **{k: v for k, v in overrides.items() if v is not None})
        root = Path(out).parent.parent if args.shard else Path(out)
        keywords = {f.name: getattr(args, f.name) for f in dataclasses.fields(args) if f.name != "backend"}
        campaign = cls(args.backend, root, **keywords)
        campaign.stats = state.stats
        campaign._next_index = state.next_index
        campaign._resubmit = list(state.in_flight)
        campaign._saved_per_sig.update(state.saved_per_signature)
        campaign._focus = dict(state.focus)
        campaign.reductions.restore(state.root_causes, state.learned)
        campaign.run_seconds = more_seconds  # without --time: the original budget, then every reduction
        if more_seconds is not None or more_cases is not None:
            campaign.time_limit = campaign.stats.seconds + more_seconds if more_seconds is not None else None
            campaign.max_cases = campaign._next_index + more_cases if more_cases is not None else None
        return campaign
