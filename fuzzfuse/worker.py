"""Isolated, long-lived worker processes that run fuzz jobs.

Fuser bugs often take the whole process down (segfault, abort from a C++ assert, sticky
CUDA error) or hang it.  Each job therefore runs in a worker subprocess: when a worker dies
or hangs, only the job it was running is lost (reported as "hard-crash" or "hang"), the
worker is replaced and the pool goes on.  Workers are long-lived because importing torch
and warming up a fuser costs seconds; that is paid once per worker, not once per job.

Design, and why:
- Workers are fresh interpreters (``python -c``), not multiprocessing children: nothing of
  the parent (signal handlers, CUDA state, ``__main__``) is inherited.  Each starts in its
  own session, so Ctrl-C in the terminal reaches only the parent, whose ``close()`` kills
  the workers, and a hung job is killed together with everything it spawned (inductor
  compile subprocesses) by killing the process group.
- Jobs and results travel as JSON lines over two dedicated pipes, never stdout: C++
  libraries write to fds 1 and 2 at will.  Both go to a per-worker log file, truncated at
  each job, whose tail is reported when the job crashes or hangs.
- One parent thread multiplexes all workers with ``multiprocessing.connection.wait`` on
  the result pipes and on pidfds.  A pidfd becomes readable when the worker dies even if
  its children still hold the pipes open, and it keeps the pid from being reused until we
  reap it, so killing the process group never hits a stranger.
"""
import collections
import faulthandler
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterable, Iterator
from multiprocessing.connection import wait

TAIL_CHARS = 2000
_SIGNALS = {s.value: s.name for s in signal.Signals}
_BOOT = "import sys, fuzzfuse.worker as w; w._serve(sys.argv[1])"


def _load(spec: str):
    """Resolve "package.module:function" to the function."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write only part of a large message to a pipe."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _serve(config_json: str) -> None:
    """Worker main loop: run init, say ready, then run each job from the job pipe.

    The first line sent is the ready message; each later line answers the job just read.
    Handler exceptions are reported, not raised: they are harness bugs, not worker deaths.
    """
    config = json.loads(config_json)
    faulthandler.enable()  # Python stack in the log on SIGSEGV/SIGABRT, for stderr_tail
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the parent asks on a hang
    if config["init"]:
        _load(config["init"])()
    handler = _load(config["handler"])
    out = config["result_fd"]
    _write_all(out, b"{}\n")
    for line in os.fdopen(config["job_fd"], "rb"):
        job = json.loads(line)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            # cpu_seconds counts every thread of the worker: above worker_seconds, the job ran
            # threads of its own (a fuser's compile pool) that compete with the other workers.
            reply = {**handler(job), "worker_seconds": time.perf_counter() - start,
                     "cpu_seconds": time.process_time() - cpu}
            data = json.dumps(reply)
        except Exception as exc:  # reported to the parent, which goes on
            data = json.dumps({"status": "worker-error", "error_type": type(exc).__name__,
                               "error": str(exc), "traceback": traceback.format_exc(),
                               "worker_seconds": time.perf_counter() - start})
        _write_all(out, data.encode() + b"\n")


class _Worker:
    """Parent-side handle of one worker process and the job it runs (``job``)."""

    def __init__(self, pool: "WorkerPool", index: int, state: str):
        self.index, self.state, self.job, self.buffer = index, state, None, b""
        self.entered = time.monotonic()  # when it entered its state: the pool's time accounts
        self.restart = False  # the last job asked for a fresh worker
        self.log_path = os.path.join(pool._tmpdir, f"worker{index}.log")
        job_r, self.job_w = os.pipe()
        self.result_r, result_w = os.pipe()
        config = json.dumps({"handler": pool.handler, "init": pool.init,
                             "job_fd": job_r, "result_fd": result_w})
        with open(self.log_path, "ab") as log:  # O_APPEND, so truncating it later is safe
            log.truncate(0)
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, config], stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, pass_fds=(job_r, result_w),
                start_new_session=True, env=pool.env_of(index))
        os.close(job_r)
        os.close(result_w)
        os.set_blocking(self.result_r, False)
        self.pidfd = os.pidfd_open(self.proc.pid)
        self.since = time.monotonic()
        self.timeout = pool.start_timeout
        self.deadline = self.since + self.timeout

    def start(self, job: dict, timeout: float) -> None:
        """Send a job.  If the worker just died, its pidfd will say so: ignore EPIPE."""
        os.truncate(self.log_path, 0)
        self.job, self.state, self.timeout = job, "busy", timeout
        self.since = time.monotonic()
        self.deadline = self.since + timeout
        try:
            _write_all(self.job_w, json.dumps(job).encode() + b"\n")
        except BrokenPipeError:
            pass

    def drain(self) -> tuple[list[dict], bool]:
        """Read what the worker sent without blocking: (complete messages, pipe still open)."""
        pipe_open = True
        while pipe_open:
            try:
                chunk = os.read(self.result_r, 1 << 16)
            except BlockingIOError:
                break
            self.buffer += chunk
            pipe_open = chunk != b""
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines], pipe_open

    def dump_stacks(self) -> None:
        """Ask the worker's faulthandler for all Python stacks, so a hang shows where."""
        os.kill(self.proc.pid, signal.SIGUSR1)
        time.sleep(0.1)

    def kill(self) -> int:
        """SIGKILL the worker's process group, reap it, free its fds; return the exit code."""
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            for fd in (self.job_w, self.result_r, self.pidfd):
                os.close(fd)
        return self.proc.returncode

    def tail(self) -> str:
        """The worker's stdout+stderr since its current job (or start) began: its start and its end
        when it is long. A C++ abort prints the exception's what() first, then a backtrace, then
        faulthandler's Python stack: the message and the stack are both worth keeping."""
        with open(self.log_path, "rb") as log:
            size = os.fstat(log.fileno()).st_size
            if size <= 2 * TAIL_CHARS:
                return log.read().decode(errors="replace")
            head = log.read(TAIL_CHARS)
            log.seek(size - TAIL_CHARS)
            return (head.decode(errors="replace") + f"\n[... {size - 2 * TAIL_CHARS} bytes ...]\n"
                    + log.read().decode(errors="replace"))


class WorkerPool:
    """N isolated workers running ``handler(job) -> dict`` jobs; see the module docstring.

    handler, init: "package.module:function", imported in the worker; init() runs once per
    worker before its first job.  env: extra variables set in the worker before any import.
    devices: GPUs to spread the workers over, round robin (worker i sees only devices[i % n], as its
    cuda:0; a restarted worker keeps its device).  private_dirs: variables set to directories of
    the pool's own, shared by its workers and removed with it (a fuser's on-disk caches).
    timeout: seconds a job may run unless it carries its own "timeout".  start_timeout: the limit
    for a worker to start.  A worker that cannot start raises RuntimeError (a setup bug).
    Not thread-safe: use it from one thread, preferably as a context manager.
    """

    def __init__(self, workers: int, handler: str, timeout: float = 60.0,
                 env: dict[str, str] | None = None, init: str | None = None, start_timeout: float = 180.0,
                 devices: list[str] | None = None, private_dirs: Iterable[str] = ()):
        self.handler, self.init, self.timeout = handler, init, timeout
        self.devices = list(devices or [])
        # Starting means importing torch and warming a fuser: slow on a loaded machine, and
        # unrelated to how long one job may take.
        self.start_timeout = start_timeout
        self.restarts = 0
        # Worker-seconds by use: "starting" (restarts included), "idle", and for busy workers the
        # "account" their jobs name ("jobs" when none): what a campaign reports as busy share.
        self.worker_time: collections.Counter = collections.Counter()
        self._tmpdir = tempfile.mkdtemp(prefix="fuzzfuse-workers-")
        self._env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONUNBUFFERED": "1",
                     **(env or {}), **{name: os.path.join(self._tmpdir, name.lower()) for name in private_dirs}}
        self._queue: collections.deque[dict] = collections.deque()
        self._done: collections.deque[dict] = collections.deque()
        self._workers: list[_Worker] = []
        try:
            for i in range(workers):
                self._workers.append(_Worker(self, i, "starting"))
        except BaseException:
            self.close()
            raise

    def env_of(self, index: int) -> dict[str, str]:
        if not self.devices:
            return self._env
        return {**self._env, "CUDA_VISIBLE_DEVICES": self.devices[index % len(self.devices)]}

    def submit(self, job: dict, first: bool = False) -> None:
        """Queue a JSON-able job; it carries its own "id", copied into its result. first: ahead
        of every queued job (a reduction's query, which a campaign's fuzzing should not delay)."""
        if first:
            self._queue.appendleft(job)
        else:
            self._queue.append(job)

    def abandon(self, ids: Iterable) -> None:
        """Drop the jobs of `ids`: unqueue those queued, and kill and replace the workers running
        the others, which report nothing (a campaign at its deadline: what hangs must not keep it)."""
        ids = set(ids)
        self._queue = collections.deque(job for job in self._queue if job.get("id") not in ids)
        for w in list(self._workers):
            if w.job is not None and w.job.get("id") in ids:
                self._account(w)
                w.job = None
                self._replace(w, hung=False)

    def ready(self) -> bool:
        """Whether a worker has started (the others may still be starting)."""
        return any(w.state not in ("starting", "restarting") for w in self._workers)

    def time_by_use(self) -> dict[str, float]:
        """worker_time with every worker's current state counted up to now."""
        now = time.monotonic()
        spent = collections.Counter(self.worker_time)
        for w in self._workers:
            spent[self._use(w)] += now - w.entered
        return dict(spent)

    @staticmethod
    def _use(w: _Worker) -> str:
        if w.state in ("starting", "restarting"):
            return "starting"
        return w.job.get("account", "jobs") if w.state == "busy" and w.job is not None else "idle"

    def _account(self, w: _Worker) -> None:
        """Add the time w spent in its state to worker_time: call before w's state changes."""
        now = time.monotonic()
        self.worker_time[self._use(w)] += now - w.entered
        w.entered = now

    def results(self) -> Iterator[dict]:
        """Yield one result per submitted job as they complete; stop when none is pending."""
        while True:
            while self._done:
                yield self._done.popleft()
            if not self._queue and all(w.job is None for w in self._workers):
                return
            self._step()

    def poll(self, max_wait: float, wake: int | None = None) -> list[dict]:
        """Results completed within about `max_wait` seconds (maybe none): lets a campaign loop
        redraw its live display and keep the queue full while workers are busy. wake: a file
        descriptor that ends the wait when it becomes readable (the caller reads it), also when no
        job is pending: another thread has work for the loop."""
        if self.pending() or wake is not None:
            self._step(max_wait, wake)
        done = list(self._done)
        self._done.clear()
        return done

    def pending(self) -> int:
        """Jobs queued or running."""
        return len(self._queue) + sum(w.job is not None for w in self._workers)

    def run_all(self, jobs: Iterable[dict]) -> list[dict]:
        """Run jobs (unique ids, nothing else pending) and return results in their order."""
        jobs = list(jobs)
        for job in jobs:
            self.submit(job)
        by_id = {result["id"]: result for result in self.results()}
        return [by_id[job["id"]] for job in jobs]

    def states(self) -> list[str]:
        """One line per worker for a live display: starting, restarting, idle, busy 1.2s."""
        now = time.monotonic()
        return [f"busy {now - w.since:.1f}s" if w.state == "busy" else w.state
                for w in self._workers]

    def close(self) -> None:
        """Kill all workers (and whatever they spawned).  Safe to call twice."""
        for w in self._workers:
            self._account(w)
            w.kill()
        self._workers = []
        shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _step(self, max_wait: float | None = None, wake: int | None = None) -> None:
        """Hand queued jobs to idle workers, then wait for a message, a death or a deadline."""
        for w in self._workers:
            if w.state == "idle" and self._queue:
                job = self._queue.popleft()
                self._account(w)
                w.start(job, job.get("timeout", self.timeout))
        deadlines = [w.deadline for w in self._workers if w.state != "idle"]
        timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        if max_wait is not None:
            timeout = max_wait if timeout is None else min(timeout, max_wait)
        fds = [fd for w in self._workers for fd in (w.result_r, w.pidfd)] + ([wake] if wake is not None else [])
        ready = set(wait(fds, timeout))
        for w in list(self._workers):
            if w.result_r in ready or w.pidfd in ready:
                messages, pipe_open = w.drain()
                for message in messages:
                    self._receive(w, message)
                if not pipe_open or w.pidfd in ready or w.restart:
                    self._replace(w, hung=False)
            elif w.state != "idle" and time.monotonic() >= w.deadline:
                self._replace(w, hung=True)

    def _receive(self, w: _Worker, message: dict) -> None:
        """The first message says the worker is ready; later ones answer its job."""
        if w.state in ("starting", "restarting"):
            self._account(w)
            w.state = "idle"
        elif w.job is not None:
            self._account(w)
            self._done.append({**message, "id": w.job.get("id")})
            w.job, w.state, w.restart = None, "idle", bool(message.get("restart_worker"))

    def _replace(self, w: _Worker, hung: bool) -> None:
        """Kill worker w, report the job it was running, and start a fresh one in its place."""
        if hung and w.state == "busy":
            w.dump_stacks()
        self._account(w)
        code = w.kill()
        if w.state in ("starting", "restarting"):
            why = f"did not start within {w.timeout}s" if hung else f"exited with {code}"
            raise RuntimeError(f"fuzzfuse worker {w.index} {why}:\n{w.tail()}")
        if w.job is not None and hung:
            self._done.append({"id": w.job.get("id"), "status": "hang",
                               "timeout": w.timeout, "stderr_tail": w.tail()})
        elif w.job is not None:
            self._done.append({"id": w.job.get("id"), "status": "hard-crash",
                               "signal": _SIGNALS.get(-code, str(-code)) if code < 0 else None,
                               "exitcode": code, "stderr_tail": w.tail()})
        self.restarts += 1
        self._workers[w.index] = _Worker(self, w.index, "restarting")
