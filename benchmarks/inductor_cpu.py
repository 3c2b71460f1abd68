"""CPU Inductor throughput beside its compile-bound limit, and where a case's seconds go.

    python benchmarks/inductor_cpu.py [--seconds 300] [--workers 2]

Runs one `fuzzfuse fuzz --backend inductor --no-reduce` campaign and reads its summary.json: cases/s
and the compile-bound limit (workers / mean compile seconds: what the workers would reach doing
nothing but compile), then the mean seconds of one case split into Inductor's compile, the run
(the compiled code on the case's and the extra input sets), the oracle (eager, float64, compare),
generating the graph, and the rest (the worker's pipe, the pool, judging in the parent).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "fuzzfuse", "fuzz", "--backend", "inductor", "--no-reduce",
                        "--workers", str(args.workers), "--time", str(args.seconds), "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        summary = json.loads((Path(out) / "summary.json").read_text())
    phases = summary["mean_phase_seconds"]
    compile_ = summary["mean_compile_seconds"] or 0.0
    backend = phases.get("backend", 0.0)
    parts = {"inductor compile": compile_, "run (all input sets)": max(backend - compile_, 0.0),
             "oracle (eager, float64, compare)": phases.get("eager", 0.0) + phases.get("compare", 0.0),
             "generate the graph": phases.get("generate", 0.0)}
    parts["overhead (pipe, pool, parent)"] = max(phases.get("worker", 0.0) - sum(parts.values()), 0.0)
    total = sum(parts.values()) or 1.0
    print(f"CPU Inductor, {args.workers} workers, {summary['seconds']:.0f}s: {summary['cases']} cases, "
          f"{summary['cases_per_second']:.2f} cases/s; compile-bound limit "
          f"{summary['compile_bound_cases_per_second']:.2f}/s "
          f"({summary['cases_per_second'] / summary['compile_bound_cases_per_second']:.0%} of it); "
          f"{summary['input_sets_per_second']:.1f} input sets/s")
    print(f"outcomes {summary['outcomes']}; documented differences {summary.get('differences', {})}")
    print("where one case's seconds go (worker means):")
    for name, seconds in parts.items():
        print(f"  {name:34s} {seconds:7.3f}s  {seconds / total:5.1%}")


if __name__ == "__main__":
    main()
