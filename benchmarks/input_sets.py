"""Compile once, run many: input sets judged per second against cases per second with the extra
runs off, one backend at a time, in one run against the same build.

    PYTHONPATH=$PWD python benchmarks/input_sets.py [--seconds 60] [--backends torchscript:nnc,inductor]

Each backend runs two campaigns of the same seed and length on 2 workers: extra runs off (each
compiled graph judged on its own inputs), then on (fuzzfuse.job.extra_input_sets). The figure is
input sets/s with extra runs against cases/s without (the issue's target: at least 2x on NNC and
Inductor, 5x on nvFuser), with the cases/s the extra runs cost and the distinct signatures each
found. Machines are noisy: compare the two rows of one backend, measured back to back.
"""
from __future__ import annotations

import argparse
import tempfile

from fuzzfuse.backends import availability
from fuzzfuse.campaign import Campaign


def measure(backend: str, seconds: float, workers: int, extra_runs: bool) -> dict:
    """One campaign. No batches aimed at a scheduler (nvFuser's coverage focus): a focused batch of
    persistent fusions can take minutes of a worker's time, outlast the campaign and swamp the
    difference measured (in a 10-minute H200 campaign, 4 focused batches took 594 worker-seconds)."""
    with tempfile.TemporaryDirectory() as out:
        campaign = Campaign(backend, out, seed=1, workers=workers, time_limit=seconds, reduce=False,
                            extra_runs=extra_runs, focus_share=0)
        summary = campaign.run()
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--backends", default="torchscript:nnc,inductor")
    args = p.parse_args()
    status = availability()
    print(f"{'backend':18} {'extra runs':>10} {'cases':>6} {'cases/s':>8} {'sets':>6} {'sets/s':>8} "
          f"{'signatures':>10}  sets/s over cases/s without extra runs")
    for backend in args.backends.split(","):
        if status.get(backend) is not None:
            print(f"{backend:18} unavailable: {status[backend]}")
            continue
        off = measure(backend, args.seconds, args.workers, extra_runs=False)
        on = measure(backend, args.seconds, args.workers, extra_runs=True)
        for label, s in (("off", off), ("on", on)):
            print(f"{backend:18} {label:>10} {s['cases']:6} {s['cases_per_second']:8.2f} {s['input_sets']:6} "
                  f"{s['input_sets_per_second']:8.2f} {len(s['signatures']):10}", flush=True)
        base = off["cases_per_second"]
        print(f"{'':18} {'':>10} input sets/s {on['input_sets_per_second']:.2f} = "
              f"{on['input_sets_per_second'] / base if base else float('nan'):.2f}x cases/s without extra runs "
              f"({base:.2f}); cases/s kept: {on['cases_per_second'] / base if base else float('nan'):.0%}", flush=True)


if __name__ == "__main__":
    main()
