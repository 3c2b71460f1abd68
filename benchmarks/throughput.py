"""Cases per second per backend, and how close each gets to its compile-bound limit.

    python benchmarks/throughput.py [--seconds 60] [--workers 1,2] [--backends torchscript:nnc,inductor]

The compile-bound limit is workers / median compile time: what a campaign would reach if compiling
were the only cost. Scaling is the steady rate against linear scaling from the first worker count
(100%: N workers do N times the first row's per-worker rate). Rates are measured in steady state (each worker's start-up and first case, which
pays the fuser's one-time warm-up, excluded). Compare ratios measured in one run: machines are noisy.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile

from fuzzfuse.backends import availability
from fuzzfuse.campaign import Campaign


def measure(backend: str, seconds: float, workers: int, max_ops: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        campaign = Campaign(backend, out, seed=1, workers=workers, time_limit=seconds, max_ops=max_ops, reduce=False)
        summary = campaign.run()
    stats = campaign.stats
    steady = stats.steady_rate(skip=workers)
    median_compile = statistics.median(stats.compile_seconds) if stats.compile_seconds else 0.0
    limit = workers / median_compile if median_compile else float("inf")
    mean_compile = summary["mean_compile_seconds"] or 0.0
    return {"backend": backend, "workers": workers, "cases": summary["cases"], "overall": summary["cases_per_second"],
            "steady": steady, "median_compile": median_compile, "limit": limit,
            "of_limit": steady / limit if limit != float("inf") else float("nan"), "outcomes": summary["outcomes"],
            "mean_compile": mean_compile, "of_mean_limit": steady * mean_compile / workers,
            "phases": summary["median_phase_seconds"], "mean_phases": summary["mean_phase_seconds"], "coverage": summary["coverage"],
            "compile_by_kernels": summary["compile_by_kernels"]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--workers", default="2", help="comma-separated worker counts to compare scaling")
    p.add_argument("--backends", default="torchscript:nnc,torchscript:onednn,inductor")
    p.add_argument("--max-ops", type=int, default=12)
    args = p.parse_args()
    status = availability()
    print(f"{'backend':20} {'workers':>7} {'cases':>6} {'overall/s':>9} {'steady/s':>9} {'scaling':>7} "
          f"{'med compile':>11} {'limit/s':>8} {'of limit':>8}  outcomes")
    for backend in args.backends.split(","):
        if status.get(backend) is not None:
            print(f"{backend:20} unavailable: {status[backend]}")
            continue
        base = None
        for workers in map(int, args.workers.split(",")):
            r = measure(backend, args.seconds, workers, args.max_ops)
            base = base or r["steady"] / workers  # scaling: against linear from the first row
            scaling = r["steady"] / (base * workers) if base else float("nan")
            print(f"{backend:20} {workers:7} {r['cases']:6} {r['overall']:9.2f} {r['steady']:9.2f} {scaling:7.0%} "
                  f"{r['median_compile']:10.3f}s {r['limit']:8.1f} {r['of_limit']:8.0%}  {r['outcomes']}", flush=True)
            print(f"{'':28} mean compile {r['mean_compile']:.3f}s: {r['of_mean_limit']:.0%} of workers / mean compile "
                  "(compile times are skewed: the median-based limit assumes every case costs the median)", flush=True)
            print(f"{'':28} seconds per case by phase, median: {r['phases']}", flush=True)
            print(f"{'':28} seconds per case by phase, mean:   {r['mean_phases']}", flush=True)
            if r["coverage"]:
                print(f"{'':28} scheduler coverage: {r['coverage']}", flush=True)
            if r["compile_by_kernels"]:
                print(f"{'':28} compile by kernels per case: {r['compile_by_kernels']}", flush=True)


if __name__ == "__main__":
    main()
