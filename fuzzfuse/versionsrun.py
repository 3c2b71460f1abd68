"""`fuzzfuse versions`: run every repro under some directories in every build asked for, in
parallel and resumably, then redraw each directory's table and print the corpus's summary.

Kept apart from fuzzfuse.versions (what a run means, the cache, the tables) because this is the
part that starts processes and builds environments.
"""
from __future__ import annotations

import collections
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from .buildenv import INSTALLED, Build, Environment, ensure, installed
from .export import Recorded, repro_dirs
from .versions import ResultCache, Table, Trend, applies, repro_backend, run_repro, table_for, write_table

CACHE = Path(os.environ.get("FUZZFUSE_CACHE", "~/.cache/fuzzfuse")).expanduser()


@dataclass(frozen=True)
class Plan:
    """What one `fuzzfuse versions` call does."""

    roots: list[Path]
    builds: list[Build]
    results: Path = CACHE / "results"
    envs: Path = CACHE / "envs"
    wheels: Path | None = None
    jobs: int = 1
    timeout: float = 300.0
    from_cache: bool = False
    fold: tuple[Path, ...] = ()
    device: str = ""  # only the repros of this DEVICE ("cpu", "cuda"); "" for all that can run here


def directories(plan: Plan, gpu: bool, log=print) -> list[Path]:
    """The repro directories under the roots that this machine can run (a CUDA repro needs a GPU)."""
    found = [d for root in plan.roots for d in repro_dirs(root)]
    chosen = [d for d in dict.fromkeys(found) if not plan.device or repro_backend(d)[1] == plan.device]
    runnable = [d for d in chosen if gpu or repro_backend(d)[1] != "cuda"]
    if len(runnable) < len(chosen) and not plan.from_cache:
        log(f"{len(chosen) - len(runnable)} CUDA repro(s) left out: this machine has no GPU")
    return chosen if plan.from_cache else runnable


def execute(plan: Plan, log=print) -> list[Table]:
    """Run what the cache lacks (unless from_cache), write every table; the tables."""
    cache = ResultCache(plan.results)
    for other in plan.fold:
        log(f"folded {cache.fold(other)} result(s) from {other}")
    gpu = False
    if not plan.from_cache:
        import torch

        gpu = torch.cuda.is_available()
    dirs = directories(plan, gpu, log)
    if not plan.from_cache:
        envs: dict[Build, Environment] = {}
        for b in plan.builds:  # this interpreter's build is known by what it imports
            if b.version == INSTALLED:
                here = installed(b)
                envs[here.build] = here
        builds = [b for b in plan.builds if b.version != INSTALLED] + list(envs)
        todo = [(d, b) for b in builds for d in dirs if applies(b, d) and cache.get(d, b) is None]
        cost = expected_seconds(cache, dirs)
        todo.sort(key=lambda task: cost.get(repro_backend(task[0])[0], 0.0))
        for b in dict.fromkeys(b for _, b in todo):
            envs.setdefault(b, ensure(b, plan.envs, plan.wheels, log))
        log(f"{len(todo)} run(s) to do, {len(dirs) * len(plan.builds) - len(todo)} cached or not applicable; "
            f"{plan.jobs} at a time")
        with ThreadPoolExecutor(plan.jobs) as pool:
            futures = {pool.submit(run_repro, envs[b], d, plan.timeout): (d, b) for d, b in todo}
            for n, future in enumerate(as_completed(futures), 1):
                d, b = futures[future]
                result = future.result()
                if result.exit_status is not None or Recorded.read(d).outcome == "hang":
                    cache.put(result)  # a timeout of a bug that is no hang is the machine's load: run it again
                log(f"[{n}/{len(todo)}] {b.label:18} {result.presence.value:17} {d.name} ({result.seconds:g} s)")
    tables = [table_for(d, cache) for d in dirs]
    for t in tables:
        write_table(t)
    return [t for t in tables if t.rows]


def expected_seconds(cache: ResultCache, dirs: list[Path]) -> dict[str, float]:
    """The mean seconds of the cached runs of each backend's repros. Runs go cheapest backend first
    (a backend not run yet counts as free), so that a run cut short leaves the most tables complete:
    under load, one CPU Inductor repro (a C++ compile in a fresh process) costs as much as ten others."""
    seconds = collections.defaultdict(list)
    for d in dirs:
        seconds[repro_backend(d)[0]] += cache.seconds(d)
    return {backend: sum(s) / len(s) for backend, s in seconds.items() if s}


def corpus_summary(tables: list[Table]) -> list[str]:
    """Lines over the corpus: how many directories are in each trend, and which were fixed or
    regressed where."""
    counts = collections.Counter((s.package, s.trend) for t in tables for s in t.summaries)
    lines = [f"{len(tables)} directories with a table"]
    for (package, trend), n in sorted(counts.items(), key=lambda kv: (kv[0][0], list(Trend).index(kv[0][1]))):
        lines.append(f"  {package}: {trend.value}: {n}")
    for t in tables:
        for s in t.summaries:
            if s.trend in (Trend.FIXED, Trend.REGRESSION, Trend.CHANGED):
                lines.append(f"  {t.directory.name}: {s.text}")
    return lines
