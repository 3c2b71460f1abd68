"""Parallel reduction: one fixed set of saved failing cases reduced with few workers and with many.

    python benchmarks/reduce_parallel.py CASES... [--per-backend 5] [--workers 1 2] [--timeout 60]
        [--max-queries 400] [--max-seconds S] [--with-hangs]
        [--backend custom:tests.buggy_backends:WrongOnExp] [--json OUT.json]

CASES are case files or directories of them (a campaign's corpus/, minimized/). Per backend, the
largest cases first (then by path), each still failing as recorded (one query), up to
--per-backend are kept: the fixed set. Each is then reduced as a campaign reduces it
(`minimize.reduce_case`: the graph, the options, the generalisation) once per worker count, the
counts taking turns case by case so that a change in the machine's load weighs on each alike.
Each worker count has its own pool, started before the clock runs (the start-up a campaign pays
once); the kernel caches are each pool's own.

The reducer asks as many candidates at once as it has workers and takes the first in the pass's
order that still fails, so the result does not depend on the worker count (the prefetched answers
it does not need are the price). Prints one row per case and the totals: the wall ratio of the
largest worker count to the smallest, and whether every repro is the same or smaller (by the
reducer's cost order) with more workers.

Hangs are left out unless --with-hangs: each of their failing queries costs the whole per-case
timeout, so they measure the timeout more than the reducer. --max-seconds: no case starts after
that many seconds (the totals are over the cases done).

`--backend NAME` admits cases of a `custom:`/`dynamo:` backend (which imports code), as
`fuzzfuse reduce --backend` does.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

# Benchmark the reducer of this checkout, not an installed fuzzfuse (workers inherit sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzzfuse.backends import Unavailable, backend_for_file, get_backend  # noqa: E402
from fuzzfuse.corpus import Case, CorpusError, iter_cases  # noqa: E402
from fuzzfuse.minimize import reduce_case, reply_key  # noqa: E402
from fuzzfuse.pool import case_pool, graph_job, run_jobs  # noqa: E402
from fuzzfuse.reduce import NotInteresting, cost  # noqa: E402
from fuzzfuse.worker import WorkerPool  # noqa: E402


def still_fails(case: Case, backend: str, pool: WorkerPool, timeout: float) -> bool:
    """Whether the case fails as recorded here, now (a saved case may be flaky or fixed)."""
    (reply,) = run_jobs(pool, [graph_job("check", backend, case.graph, timeout, case.options,
                                         bool(case.check_strides))])
    return reply_key(backend, reply) == replace(case.signature, backend=backend).key()


def fixed_set(paths: list[str], admitted: list[str], per_backend: int, timeout: float,
              pools: dict[str, WorkerPool], hangs: bool) -> list[tuple[str, str, Case]]:
    """(path, backend, case): per backend, the largest still-failing cases, up to per_backend."""
    by_backend: dict[str, list[tuple[str, Case]]] = {}
    unavailable: dict[str, str] = {}
    for path, case in iter_cases(paths):
        if isinstance(case, CorpusError) or not case.signature or (case.signature.outcome == "hang" and not hangs):
            continue
        try:
            backend = backend_for_file(case.backend, case.backend if case.backend in admitted else None, str(path))
            if backend not in by_backend and backend not in unavailable:
                get_backend(backend)
        except Unavailable as e:  # a backend this machine cannot run, or one not admitted
            unavailable[case.backend] = str(e)
            continue
        if backend not in unavailable:
            by_backend.setdefault(backend, []).append((str(path), case))
    for backend, why in unavailable.items():
        print(f"skipped the cases of {backend}: {why}", file=sys.stderr)
    chosen = []
    for backend in sorted(by_backend):
        kept = 0
        for path, case in sorted(by_backend[backend], key=lambda pc: (-pc[1].graph.size, pc[0])):
            if kept == per_backend:
                break
            if backend not in pools:
                pools[backend] = case_pool(backend, 1, timeout)
            if still_fails(case, backend, pools[backend], timeout):
                chosen.append((path, backend, case))
                kept += 1
            else:
                print(f"skipped {path}: does not fail as recorded here", file=sys.stderr)
    return chosen


def reduce_once(case: Case, backend: str, pool: WorkerPool, workers: int, timeout: float,
                max_queries: int) -> dict:
    start = time.perf_counter()
    try:
        result = reduce_case(case, backend, workers=workers, timeout=timeout, pool=pool, max_queries=max_queries)
    except NotInteresting as e:
        return {"seconds": round(time.perf_counter() - start, 2), "error": str(e)}
    # reduce_seconds: the reducer's passes alone; the rest of `seconds` went to the options and the
    # generalisation, which ask their own queries.
    return {"seconds": round(time.perf_counter() - start, 2), "reduce_seconds": round(result.stats.seconds, 2),
            "ops": result.graph.size, "cost": list(cost(result.graph)), "queries": result.stats.queries,
            "stopped": result.stats.stopped, "key": result.signature.key()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--per-backend", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--max-queries", type=int, default=400, help="per reduction, as a campaign's --reduce-budget")
    parser.add_argument("--max-seconds", type=float, default=float("inf"), help="start no case after this")
    parser.add_argument("--with-hangs", action="store_true", help="keep hangs in the set")
    parser.add_argument("--backend", action="append", default=[], help="admit cases of this custom backend")
    parser.add_argument("--json", type=Path, help="write the rows and totals here")
    args = parser.parse_args()
    counts = sorted(set(args.workers))
    checkers: dict[str, WorkerPool] = {}
    try:
        chosen = fixed_set(args.cases, args.backend, args.per_backend, args.timeout, checkers, args.with_hangs)
    finally:
        for pool in checkers.values():
            pool.close()
    if not chosen:
        sys.exit("no saved case fails as recorded here")
    rows, start = [], time.time()
    for backend in sorted({b for _, b, _ in chosen}):
        pools = {w: case_pool(backend, w, args.timeout) for w in counts}
        first = next(case for _, b, case in chosen if b == backend)
        try:
            for w in counts:  # started and warmed before the clock runs: a campaign pays this once
                run_jobs(pools[w], [graph_job(f"warm-{k}", backend, first.graph, args.timeout, first.options)
                                    for k in range(w)])
            for path, b, case in chosen:
                if b != backend or time.time() - start > args.max_seconds:
                    continue
                row = {"case": path, "backend": backend, "ops_before": case.graph.size}
                for w in counts:
                    row[w] = reduce_once(case, backend, pools[w], w, args.timeout, args.max_queries)
                rows.append(row)
                print(f"{Path(path).name:22} {backend[:28]:28} {case.graph.size:3} ops -> " + "  ".join(
                    f"w{w}: {row[w].get('ops', '-')} ops {row[w]['seconds']:6.1f}s (passes "
                    f"{row[w].get('reduce_seconds', 0):5.1f}s) {row[w].get('queries', 0):4}q" for w in counts), flush=True)
        finally:
            for pool in pools.values():
                pool.close()
    low, high = counts[0], counts[-1]
    done = [r for r in rows if "ops" in r[low] and "ops" in r[high]]
    seconds = {w: sum(r[w]["seconds"] for r in done) for w in counts}
    no_larger = all(r[high]["cost"] <= r[low]["cost"] for r in done)
    same = sum(r[high]["cost"] == r[low]["cost"] for r in done)
    totals = {"cases": len(done), "seconds": seconds, "wall_ratio": round(seconds[high] / seconds[low], 3),
              "same_repro": same, "no_larger": no_larger,
              "ops": {w: sum(r[w]["ops"] for r in done) for w in counts}}
    print(f"{len(done)} cases: {low} worker(s) {seconds[low]:.1f}s, {high} workers {seconds[high]:.1f}s, "
          f"wall ratio {totals['wall_ratio']:.3f}; repros with {high} workers the same as with {low}: {same} "
          f"of {len(done)}, none larger: {no_larger}; ops in all {totals['ops']}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "totals": totals}, indent=1, default=str))


if __name__ == "__main__":
    main()
