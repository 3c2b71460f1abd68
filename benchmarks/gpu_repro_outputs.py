"""Run every GPU repro of a minimized/ corpus here, each in a fresh process, and record what it
printed and how it exited, for `fuzzfuse report --regenerate minimized/ --outputs FILE.json` on a
machine without a GPU (the READMEs quote a repro's own output verbatim).

    python benchmarks/gpu_repro_outputs.py minimized/ --out gpu_outputs.json

Run it after the regeneration that wrote the repro.py files, then regenerate again with --outputs.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from fuzzfuse.bugreport import REPRO_TIMEOUT, case_device, report_dirs, run_repro
from fuzzfuse.corpus import load_case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", type=Path, help="minimized/ or some of its directories")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--timeout", type=float, default=REPRO_TIMEOUT, help="seconds one repro may run")
    args = parser.parse_args()
    runs = {}
    for directory in report_dirs(args.dirs):
        if case_device(load_case(directory / "case.json")) != "cuda":
            continue
        run = run_repro(directory, args.timeout)
        runs[directory.name] = run.to_json()
        print(f"{directory.name}: {run.outcome()}", flush=True)
    args.out.write_text(json.dumps({"kind": "fuzzfuse-repro-outputs", "runs": runs}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
