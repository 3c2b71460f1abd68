"""Wall time of `fuzzfuse reduce` with each repro verified while the next case reduces (as it does)
against verified before the next case starts (as it did), on the same failing cases.

    python benchmarks/reduce_pipeline.py CASE.json|DIR... [--signatures 6] [--rounds 2] [--workers 2]

Takes the smallest case of up to --signatures crash/mismatch signatures under the paths (a
campaign's corpus/), and reduces them all once per mode per round, alternating the modes. The
overlap pays where reduction leaves cores idle (a GPU box: ddmin batches smaller than the pool,
waits on the device); on a box whose cores the reducer's workers saturate it cannot. Compare the
modes' figures of one run: machines are noisy.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import fuzzfuse.minimize as minimize
from fuzzfuse.corpus import iter_cases


class VerifyInline(ThreadPoolExecutor):
    """minimize_files's saver, but a repro is written and verified at once (the serial mode)."""

    def submit(self, fn, *args, **kwargs):
        if fn is not minimize.save_minimized:
            return super().submit(fn, *args, **kwargs)
        future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def pick(paths: list[str], signatures: int) -> list[Path]:
    smallest: dict[str, tuple[int, Path]] = {}
    for path, case in iter_cases([Path(p) for p in paths]):
        if isinstance(case, Exception) or not case.signature or case.signature.outcome not in ("crash", "mismatch"):
            continue
        key = case.signature.key()
        if key not in smallest or case.graph.size < smallest[key][0]:
            smallest[key] = (case.graph.size, path)
    return [p for _, p in sorted(smallest.values())[:signatures]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--signatures", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budget", type=int, default=30, help="reducer queries per signature")
    args = parser.parse_args()
    cases = pick(args.paths, args.signatures)
    if not cases:
        raise SystemExit("no crash or mismatch cases under the paths")
    modes = {"verified inline": VerifyInline, "verified while the next reduces": ThreadPoolExecutor}
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(args.rounds):
        for mode, executor in modes.items():
            minimize.ThreadPoolExecutor = executor
            with tempfile.TemporaryDirectory() as out:
                start = time.perf_counter()
                done = [d for _, d in minimize.minimize_files(cases, Path(out), workers=args.workers,
                                                               max_queries=args.budget)]
                times[mode].append(time.perf_counter() - start)
            assert all(not isinstance(d, Exception) for d in done), done
    minimize.ThreadPoolExecutor = ThreadPoolExecutor
    print(f"{len(cases)} signatures, {args.rounds} rounds, {args.workers} workers, {args.budget} queries each")
    for mode, seconds in times.items():
        rounds = ", ".join(f"{s:.1f}" for s in seconds)
        print(f"  {mode:32} median {statistics.median(seconds):6.1f} s  (rounds: {rounds})")


if __name__ == "__main__":
    main()
