"""Run every GPU repro of a minimized/ corpus here, each in a fresh process, and record what it
printed and how it exited, for `fuzzfuse report --regenerate minimized/ --outputs FILE.json` on a
machine without a GPU (the READMEs quote a repro's own output verbatim).

    python benchmarks/gpu_repro_outputs.py minimized/ --out gpu_outputs.json

Run it after the regeneration that wrote the repro.py files, then regenerate again with --outputs.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# fuzzfuse from this checkout where it is not installed (the GPU machine); the repros it runs are
# given a PYTHONPATH without it (bugreport.run_repro)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzzfuse.bugreport import REPRO_TIMEOUT, case_device, report_dirs, run_repro  # noqa: E402
from fuzzfuse.corpus import load_case  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", type=Path, help="minimized/ or some of its directories")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--timeout", type=float, default=REPRO_TIMEOUT, help="seconds one repro may run")
    parser.add_argument("--jobs", type=int, default=1, help="repros run at once (default 1)")
    args = parser.parse_args()
    runs = {}
    todo = [d for d in report_dirs(args.dirs) if case_device(load_case(d / "case.json")) == "cuda"]

    lock = threading.Lock()

    def run(directory: Path) -> None:
        done = run_repro(directory, args.timeout)
        with lock:  # written after every run: a lease that ends early keeps what ran
            runs[directory.name] = done.to_json()
            args.out.write_text(json.dumps({"kind": "fuzzfuse-repro-outputs", "runs": runs}, indent=1,
                                           sort_keys=True) + "\n")
        print(f"{directory.name}: {done.outcome()}", flush=True)
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(run, todo))


if __name__ == "__main__":
    main()
