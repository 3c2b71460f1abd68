"""Where a campaign's time went, from its summary.json (issue 34's figures).

    python benchmarks/reduce_campaign_figures.py OUT/summary.json [--wall SECONDS]

Prints the wall time by phase (start-up, fuzzing, reducing, waiting) and whether the phases add up
to the summary's total; the fuzzing share of the wall; the workers' busy share and their time by
use, while fuzzing and after; the hits left pending; the root causes and the known bugs it learned
a trigger of. `--wall`: the wall time measured outside (the process's, start to exit), to compare
with the summary's total (which starts when the Campaign is made, after Python and torch import).
"""
from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("summary")
    parser.add_argument("--wall", type=float, help="the wall time measured outside, in seconds")
    args = parser.parse_args()
    s = json.load(open(args.summary))
    wall = s["wall_seconds"]
    phases = {k: v for k, v in wall.items() if k != "total"}
    added = sum(phases.values())
    print(f"{s['backend']} on {s['workers']} workers: {s['cases']} cases, {s['cases_per_second']:.1f}/s of fuzzing")
    print(f"  wall {wall['total']:.1f}s = " + " + ".join(f"{k} {v:.1f}s" for k, v in phases.items())
          + f" (sum {added:.1f}s, off by {added - wall['total']:+.2f}s)")
    if args.wall is not None:
        print(f"  measured outside: {args.wall:.1f}s (the summary's total starts after Python and torch import: "
              f"{args.wall - wall['total']:+.1f}s)")
    print(f"  fuzzing share of the wall {phases['fuzzing'] / wall['total']:.3f}; workers busy {s['busy_share']:.3f} "
          f"of workers x wall")
    print(f"  worker seconds by use {s['worker_seconds_by_use']}")
    for phase, uses in s.get("worker_seconds_by_phase", {}).items():
        print(f"    {phase}: {uses}")
    print(f"  root causes: {s['root_causes_new']} new, {s['root_causes_known']} known; pending hits "
          f"{s['pending_hits']} {s['pending']}; learned {s.get('learned', {})}; worker restarts {s['worker_restarts']}")


if __name__ == "__main__":
    main()
