"""The parent side of running cases: a pool of isolated workers that run `fuzzfuse.job`, the
jobs it takes (`Job`, sent over the worker pipe in its JSON form), and `SharedPool`, through which a
campaign's reductions borrow its workers while it fuzzes on. Replies become CaseResults through
`fuzzfuse.verdict.judge`."""
from __future__ import annotations

import collections
import itertools
import os
import queue
import threading
from dataclasses import dataclass
from typing import Callable, Iterable

from .backends import get_backend
from .backends.options import Options
from .export import KERNEL_CACHES
from .ir import Graph
from .strategies import GenConfig, config_from_json, config_to_json
from .worker import WorkerPool


@dataclass(frozen=True)
class Job:
    """One case for a worker (`fuzzfuse.job.run_job`): a seed to draw its graph from under `config`
    (a campaign's new case, drawn in the worker, in parallel), or a `graph` (a recheck, a replay, a
    reduction query), run on `backend` under the case's `options`. `recheck_of`: the signature key
    whose first case this re-runs (read by the campaign, never by the worker). `poison_heap`: run
    it with new memory filled with a pattern (fuzzfuse.heap), where a store that leaves bytes
    unwritten is looked for or judged."""

    id: int | str
    backend: str
    timeout: float
    seed: int | None = None
    config: GenConfig | None = None
    graph: Graph | None = None
    options: Options = Options()
    check_strides: bool = False
    extra_runs: bool = False
    recheck_of: str | None = None
    poison_heap: bool = False

    def to_json(self) -> dict:
        """The worker pool's form: "id" and "timeout" are its own, the rest the worker's."""
        config = config_to_json(self.config) if self.config is not None else None
        drawn = {"seed": self.seed, "config": config} if self.graph is None else {"graph": self.graph.to_json()}
        return {"id": self.id, "backend": self.backend, "timeout": self.timeout, **drawn,
                "options": self.options.to_json(), "check_strides": self.check_strides, "extra_runs": self.extra_runs,
                **({"recheck_of": self.recheck_of} if self.recheck_of is not None else {}),
                **({"poison_heap": True} if self.poison_heap else {})}

    @staticmethod
    def from_json(d: dict) -> "Job":
        graph = Graph.from_json(d["graph"]) if "graph" in d else None
        return Job(d["id"], d["backend"], float(d["timeout"]), d.get("seed"),
                   config_from_json(d["config"]) if d.get("config") else None, graph, Options.from_json(d["options"]),
                   bool(d["check_strides"]), bool(d["extra_runs"]), d.get("recheck_of"), d.get("poison_heap") is True)


def worker_env(backend_name: str, cpu_capability: str | None = None) -> dict[str, str]:
    """Environment a fuser reads at import time, set before the worker imports torch; with
    `cpu_capability`, the ATen CPU capability a saved case was recorded with, pinned as its repro
    pins it (fuzzfuse.repro.pin_prelude)."""
    pinned = {"ATEN_CPU_CAPABILITY": cpu_capability, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"} if cpu_capability else {}
    return {"FUZZFUSE_BACKEND": backend_name, **get_backend(backend_name).env, **pinned}


def case_pool(backend_name: str, workers: int, timeout: float, devices: list[str] | None = None,
              cpu_capability: str | None = None) -> WorkerPool:
    """Isolated workers that run cases on one backend (job.run_job), its environment set (and the
    CPU capability pinned, where given), spread over `devices` (GPU indices) when given. Their
    kernel caches are the pool's own (export.KERNEL_CACHES): what they reuse was compiled in this
    run."""
    return WorkerPool(workers, "fuzzfuse.job:run_job", timeout=timeout, env=worker_env(backend_name, cpu_capability),
                      init="fuzzfuse.job:init_worker", devices=devices, private_dirs=KERNEL_CACHES)


def run_jobs(pool: WorkerPool, jobs: list[Job]) -> list[dict]:
    """Run `jobs` on a case pool; the workers' replies in their order, for `verdict.judge`."""
    return pool.run_all(job.to_json() for job in jobs)


def graph_job(job_id, backend: str, graph: Graph, timeout: float, options: Options = Options(),
              check_strides: bool = False, poison_heap: bool = False) -> Job:
    """A worker job that runs `graph` under a saved case's choices."""
    return Job(job_id, backend, timeout, graph=graph, options=options, check_strides=check_strides,
               poison_heap=poison_heap)


def answered_once(run: Callable[[list[Graph]], list[dict]]) -> Callable[[list[Graph]], list[dict]]:
    """`run`, each graph run once: the culprit probe's runs, which two questions read (the kind of
    wrong value its first output shows, and whether that output is exact)."""
    answered: dict[str, dict] = {}

    def runs(graphs: list[Graph]) -> list[dict]:
        todo = {g.digest(): g for g in graphs if g.digest() not in answered}
        answered.update(zip(todo, run(list(todo.values())) if todo else []))
        return [answered[g.digest()] for g in graphs]
    return runs


class PoolClosed(Exception):
    """The campaign stopped lending its workers (its --time ran out, or it was interrupted): the
    reduction that asked stops where it is."""


class _Request:
    """A reduction thread's batch of jobs and, once the owner has them all, their replies."""

    def __init__(self, jobs: list[dict]) -> None:
        self.jobs, self.replies = jobs, [None] * len(jobs)
        self.missing = len(jobs)
        self.error: BaseException | None = None
        self.done = threading.Event()


class SharedPool:
    """A campaign's WorkerPool lent to its reductions, which run in threads of their own while the
    campaign's thread fuzzes: no worker waits for the others to drain before a reduction starts.

    A reduction thread sees a pool (`run_all`, what `minimize.reduce_case` calls) that blocks until
    its jobs are answered. The campaign's thread owns the WorkerPool (which is not thread-safe):
    `dispatch(limit)` puts the reductions' jobs into it ahead of the queued cases, at most `limit`
    at a time (the reductions' share of the workers), and `take(reply)` hands a reply back to the
    reduction that asked. `close(error)` answers every request, waiting or later, with `error`.
    `wake()` (any thread) ends the owner's wait in `poll`: a request, or a reduction that is done,
    is then seen at once rather than at the loop's next turn. Use it as a context manager."""

    def __init__(self, pool: WorkerPool, account: str = "reduce") -> None:
        self.pool, self.account = pool, account
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._requests: queue.SimpleQueue[tuple[_Request, str]] = queue.SimpleQueue()
        self._waiting: collections.deque[tuple[_Request, int, str]] = collections.deque()
        self._running: dict[str, tuple[_Request, int]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._closed: BaseException | None = None

    # ---- a reduction thread's side ------------------------------------------------------------
    def lease(self, account: str | None = None) -> "PoolLease":
        """What one reduction runs its queries on; `account` names its workers' time
        (WorkerPool.worker_time), this pool's own by default."""
        return PoolLease(self, account or self.account)

    def _ask(self, jobs: Iterable[dict], account: str) -> list[dict]:
        request = _Request(list(jobs))
        with self._lock:
            if self._closed is not None:
                raise self._closed
            if request.jobs:
                self._requests.put((request, account))
        if request.jobs:
            self.wake()
            request.done.wait()
        if request.error is not None:
            raise request.error
        return request.replies

    def wake(self) -> None:
        with self._lock:  # not while __exit__ closes the pipe: its number may be reused at once
            if self._wake_w < 0:
                return
            try:
                os.write(self._wake_w, b"!")
            except BlockingIOError:  # already awake: the pipe is full
                pass

    # ---- the campaign thread's side -----------------------------------------------------------
    def poll(self, max_wait: float) -> list[dict]:
        """The pool's replies within about `max_wait` seconds, the reductions' handed back to them:
        the others, for the campaign. Returns early when a thread calls wake()."""
        replies = self.pool.poll(max_wait, self._wake_r)
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        return [reply for reply in replies if not self.take(reply)]

    def __enter__(self) -> "SharedPool":
        return self

    def __exit__(self, *exc_info) -> None:
        with self._lock:
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
            self._wake_r = self._wake_w = -1

    def dispatch(self, limit: int) -> None:
        """Queue the reductions' jobs on the workers, ahead of fuzzing's, up to `limit` in the pool."""
        while True:
            try:
                request, account = self._requests.get_nowait()
            except queue.Empty:
                break
            self._waiting.extend((request, k, account) for k in range(len(request.jobs)))
        while self._waiting and len(self._running) < limit:
            request, k, account = self._waiting.popleft()
            if request.error is not None:
                continue
            pool_id = f"shared-{next(self._ids)}"
            self._running[pool_id] = (request, k)
            self.pool.submit({**request.jobs[k], "id": pool_id, "account": account}, first=True)

    def take(self, reply: dict) -> bool:
        """Hand a reply to the reduction that asked for it; False when it answers none of theirs."""
        asked = self._running.pop(reply.get("id"), None)
        if asked is None:
            return False
        request, k = asked
        request.replies[k] = {**reply, "id": request.jobs[k].get("id")}
        request.missing -= 1
        if request.missing == 0:
            request.done.set()
        return True

    def wanted(self) -> int:
        """Jobs the reductions have asked for and not had answered (queued, running or not yet
        dispatched)."""
        return len(self._running) + len(self._waiting) + self._requests.qsize()

    def in_pool(self) -> int:
        return len(self._running)

    def close(self, error: BaseException) -> None:
        """Answer every request with `error`, now and from now on; drop their jobs from the pool."""
        with self._lock:
            self._closed = error
        self.dispatch(0)
        self.pool.abandon(list(self._running))
        for request, _ in list(self._running.values()) + [(r, k) for r, k, _ in self._waiting]:
            request.error = error
            request.done.set()
        self._running.clear()
        self._waiting.clear()


@dataclass(frozen=True)
class PoolLease:
    """A SharedPool as one reduction sees it: `run_all`, as on a WorkerPool, for `run_jobs`."""

    shared: SharedPool
    account: str

    def run_all(self, jobs: Iterable[dict]) -> list[dict]:
        return self.shared._ask(jobs, self.account)
