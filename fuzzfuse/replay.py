"""Re-run saved cases against the current build: which still fail, and do they fail the same way."""
from __future__ import annotations

import collections
import sys
from dataclasses import dataclass

from .backends import Unavailable, backend_for_file, default_backend, get_backend
from .corpus import CorpusError, case_files, iter_cases
from .hostcpu import host_isa
from .pool import case_pool, graph_job, run_jobs
from .identity import identify, same_bug
from .oracle import Signature
from .repro_dir import CPU_CAPABILITIES
from .rootcause import signature_today
from .verdict import judge


class ReplayError(Exception):
    """Nothing to replay, or no backend to replay it on: one line for the user (the CLI's bad input)."""


def replay_results(cases: list, backend: str | None, workers: int, timeout: float) -> list["Replayed"]:
    """Run (path, Case) pairs, grouped by backend and the CPU capability each was recorded with,
    each group in its own isolated pool with that capability pinned (as its repro pins it: an
    AVX-512 host replays a case recorded under `default` with default kernels). Cases whose own
    backend, or capability, this machine lacks (nvFuser cases on a CPU machine) are reported and
    skipped."""
    groups: dict[tuple[str, str | None], list] = collections.defaultdict(list)
    fallback = None
    for path, case in cases:  # every case's backend is settled before any runs
        name = backend_for_file(case.backend, backend, str(path))
        if not name and fallback is None:
            fallback = default_backend()  # seed cases name no backend: the best one here
        groups[(name or fallback, case.versions.get("cpu_capability"))].append((path, case))
    rows = []
    for (name, capability), members in groups.items():
        try:
            fuser = get_backend(name)
        except Unavailable as e:
            if backend:  # asked for by name: bad input
                raise
            print(f"skipped {len(members)} case(s) for {name}: {e}", file=sys.stderr)
            continue
        pinned = capability if fuser.device == "cpu" else None
        if pinned and not _host_has(pinned):
            print(f"skipped {len(members)} case(s) for {name}: recorded under CPU capability {pinned}, "
                  f"which this machine's CPU lacks", file=sys.stderr)
            continue
        jobs = [graph_job(i, name, c.graph, timeout, c.options, bool(c.check_strides))
                for i, (_, c) in enumerate(members)]
        with case_pool(name, min(workers, len(jobs)), timeout, cpu_capability=pinned) as pool:
            results = run_jobs(pool, jobs)
        for (path, case), reply in zip(members, results):
            rows.append(_compare(str(path), case, judge(name, reply).signature))
    return rows


def _host_has(capability: str) -> bool:
    """Whether this machine's CPU runs ATen's kernels of `capability` (pinning one it lacks would
    run them anyway and die of SIGILL); an ISA that cannot be read is not held against a case."""
    isa = host_isa()
    return not isa or capability not in CPU_CAPABILITIES or \
        CPU_CAPABILITIES.index(capability) <= CPU_CAPABILITIES.index(isa)


@dataclass
class Replayed:
    """One replayed case: its signature key then (`was`) and now (None: it passes), and whether
    the failure now is the same bug as then (`identity.same_bug`: an assert or a Python line that
    moved, a renamed exception of the same failure, another symptom class of one culprit's wrong
    value are one bug)."""

    path: str
    was: str | None
    now: str | None
    same_bug: bool = False

    @property
    def verdict(self) -> str:
        if self.now is None:
            return "fixed" if self.was else "passes"
        if self.now == self.was or self.same_bug:
            return "still fails"
        return "fails" if self.was is None else "fails differently"


def _compare(path: str, case, now: Signature | None) -> Replayed:
    was = case.signature
    same = was is not None and now is not None and same_bug(
        identify(signature_today(was, case.detail), case.graph, case.generalisation, case.device),
        identify(now, case.graph, case.generalisation, case.device))
    return Replayed(path, was.key() if was else None, now.key() if now else None, same)


def replay(paths: list[str], backend: str | None = None, workers: int = 1, timeout: float = 120.0) -> int:
    """Print one line per case. Exit 0 when every case passes, 1 when any still fails, 2 when a
    file named on the command line could not be read (files found in directories are skipped)."""
    loaded, unreadable_named = [], False
    named = {str(p) for p in paths}
    for path, case in iter_cases(paths):
        if isinstance(case, CorpusError):
            print(f"skipped: {case}", file=sys.stderr)
            unreadable_named |= str(path) in named
        else:
            loaded.append((path, case))
    if not loaded and not case_files(paths):
        raise ReplayError(f"no case files under {' '.join(paths)}")
    try:
        rows = replay_results(loaded, backend, workers, timeout)
    except Unavailable as e:
        raise ReplayError(str(e)) from e
    if loaded and not rows:
        raise ReplayError("no case could run here: every case's backend is unavailable")
    for row in rows:
        print(f"{row.verdict:17} {row.path}  {row.now or ''}")
    failing = sum(r.now is not None for r in rows)
    print(f"{len(rows)} replayed: {failing} still failing, {len(rows) - failing} passing")
    if unreadable_named:
        return 2
    return 1 if failing else 0
