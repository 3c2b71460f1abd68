"""Detection power: how soon a campaign finds a bug whose trigger is narrow, and how small its
reduced repro gets.

    PYTHONPATH=$PWD python benchmarks/detection.py [--set seeded|real] [--source scratch|seeds|mixed]
        [--seeds 3] [--budget 60] [--bugs dtype_op,op_pair]

Each bug of a set (a torch.compile backend wrong on one narrow trigger) is fuzzed by a campaign on
2 workers, once per campaign seed, until the first case that fails on the buggy backend and passes
on the same capture without the bug, or until the budget runs out. Two sets: "seeded"
(benchmarks/seeded_bugs.py, written beside the generator; dynamo's graph run as traced plus the
bug, clean reference `dynamo:eager`) and "real" (benchmarks/real_bugs.py, triggers of upstream
reports; AOT autograd's aten graph plus the bug, clean reference `dynamo:aot_eager`). --source says
where the campaign's cases come from (strategies.SOURCES: generated, mutated seeds, or both). Per bug it
prints the median seconds and cases (graphs) to that first detection, the input sets run by then
(a compiled graph may run on several), and the ops of the reduced repro of the first seed's
detection against the fewest ops the trigger needs. Seconds depend on the machine's load: compare
cases too, and runs made at the same time.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks.seeded_bugs, for the workers too

from benchmarks import real_bugs, seeded_bugs  # noqa: E402
from fuzzfuse.backends import get_backend  # noqa: E402
from fuzzfuse.campaign import Campaign  # noqa: E402
from fuzzfuse.corpus import load_case  # noqa: E402
from fuzzfuse.job import run_case  # noqa: E402
from fuzzfuse.minimize import reduce_case  # noqa: E402
from fuzzfuse.reduce import NotInteresting  # noqa: E402
from fuzzfuse.strategies import SOURCES  # noqa: E402

# set -> (module the backends live in, the clean reference, bug -> fewest ops of its trigger)
SETS = {"seeded": ("benchmarks.seeded_bugs", "dynamo:eager", seeded_bugs.MINIMAL_OPS),
        "real": ("benchmarks.real_bugs", "dynamo:aot_eager", real_bugs.MINIMAL_OPS)}


@dataclass
class Detection:
    seconds: float
    cases: int
    input_sets: int
    case_file: Path


class FirstDetection(Campaign):
    """A campaign that stops submitting at the first case that is the seeded bug's (fails here,
    passes on the clean backend); cases already in flight finish."""

    def __init__(self, *args, clean: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.detection: Detection | None = None
        self._clean = get_backend(clean)
        self._judged: set[str] = set()

    def _record(self, job, reply, pool) -> None:
        super()._record(job, reply, pool)
        if self.detection is not None:
            return
        for key, entry in self.stats.signatures.items():
            if key in self._judged or entry.case is None:
                continue
            self._judged.add(key)
            case = load_case(self.out / entry.case)
            clean = run_case(case.graph, self._clean, check_strides=bool(case.check_strides))
            if not clean.outcome.is_failure:
                self.detection = Detection(self.stats.seconds, self.stats.cases,
                                           self.stats.input_sets, self.out / entry.case)
                return

    def _done_submitting(self) -> bool:
        return self.detection is not None or super()._done_submitting()


def measure(bug_set: str, bug: str, seed: int, budget: float, workers: int, out: Path,
            source: str = "scratch") -> tuple[Detection | None, int]:
    """The first detection (None: not within the budget), and the cases the campaign ran."""
    module, clean, _ = SETS[bug_set]
    backend = f"dynamo:{module}:{bug}"
    features = dataclasses.replace(get_backend(backend).features, source=source)
    campaign = FirstDetection(backend, out, seed=seed, workers=workers, time_limit=budget, reduce=False,
                              clean=clean, features=features)
    campaign.run()
    return campaign.detection, campaign.stats.cases


def root_causes(bug_set: str, bug: str, seed: int, budget: float, workers: int, out: Path,
                source: str = "scratch") -> tuple[int, int]:
    """(root causes of the seeded bug, root causes in all) that one campaign of `budget` seconds
    reduces and writes to its minimized/: a reduced case that passes on the clean reference is the
    seeded bug's (one seeded bug should be one root cause, whatever layouts and observers its
    hits came with)."""
    module, clean, _ = SETS[bug_set]
    backend = f"dynamo:{module}:{bug}"
    features = dataclasses.replace(get_backend(backend).features, source=source)
    Campaign(backend, out, seed=seed, workers=workers, time_limit=budget, features=features).run()
    cases = [load_case(path) for path in sorted((out / "minimized").glob("*/case.json"))]
    reference = get_backend(clean)
    ours = [c for c in cases
            if not run_case(c.graph, reference, check_strides=bool(c.check_strides)).outcome.is_failure]
    return len(ours), len(cases)


def reduced_size(bug_set: str, bug: str, case_file: Path, workers: int, max_queries: int) -> int | None:
    try:
        result = reduce_case(load_case(case_file), f"dynamo:{SETS[bug_set][0]}:{bug}", workers=workers,
                             max_queries=max_queries)
    except NotInteresting:
        return None
    return result.graph.size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", choices=SETS, default="seeded", help="which bugs: seeded (default) or real")
    p.add_argument("--bugs", help="comma-separated bugs of the set; default: all of them")
    p.add_argument("--source", choices=SOURCES, default="scratch", help="where the campaigns' cases come from")
    p.add_argument("--seeds", type=int, default=3, help="campaign seeds per bug")
    p.add_argument("--budget", type=float, default=60.0, help="seconds per campaign")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--reduce-queries", type=int, default=150,
                   help="reducer budget for the first detection (0: do not reduce)")
    p.add_argument("--root-causes", action="store_true",
                   help="instead: run each campaign for the whole budget with its reductions and count the "
                        "root causes it reduces the seeded bug to (one bug, one root cause)")
    p.add_argument("--keep", type=Path, help="with --root-causes: keep each campaign's directory here "
                                            "(its minimized/ holds the root causes counted)")
    args = p.parse_args()
    minimal_ops = SETS[args.set][2]
    bugs = args.bugs.split(",") if args.bugs else list(minimal_ops)
    unknown = [b for b in bugs if b not in minimal_ops]
    if unknown:
        p.error(f"unknown bugs {unknown}; known: {', '.join(minimal_ops)}")
    if args.root_causes:
        with tempfile.TemporaryDirectory() as tmp:
            where = args.keep or Path(tmp)
            for bug in bugs:
                for seed in range(args.seeds):
                    ours, total = root_causes(args.set, bug, seed, args.budget, args.workers,
                                              where / f"{bug}-{seed}", args.source)
                    print(f"{bug} seed {seed}: {ours} root cause(s) of the seeded bug, {total} in all "
                          f"({args.budget:.0f}s, source {args.source})", flush=True)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for bug in bugs:
            found: list[Detection] = []
            for seed in range(args.seeds):
                d, ran = measure(args.set, bug, seed, args.budget, args.workers, Path(tmp) / f"{bug}-{seed}",
                                 args.source)
                print(f"{bug} seed {seed}: " + (f"{d.seconds:.1f}s, {d.cases} cases, {d.input_sets} input sets"
                                                if d else f"not found in {args.budget:.0f}s ({ran} cases)"),
                      file=sys.stderr, flush=True)
                if d:
                    found.append(d)
            size = reduced_size(args.set, bug, found[0].case_file, args.workers, args.reduce_queries) \
                if found and args.reduce_queries else None
            rows.append((bug, found, size))
    print(f"\n{'bug':28} {'found':>7} {'median s':>9} {'median cases':>12} {'median sets':>11} "
          f"{'reduced ops':>11} {'minimal':>7}")
    for bug, found, size in rows:
        med = (lambda xs: statistics.median(xs)) if found else (lambda xs: float("nan"))
        print(f"{bug:28} {len(found):>3}/{args.seeds:<3} {med([d.seconds for d in found]):9.1f} "
              f"{med([d.cases for d in found]):12.0f} {med([d.input_sets for d in found]):11.0f} "
              f"{size if size is not None else '-':>11} {minimal_ops[bug]:>7}")
    total = sum(len(found) for _, found, _ in rows)
    print(f"\ndetected within {args.budget:.0f}s: {total} of {len(rows) * args.seeds} campaigns; "
          f"bugs found at least once: {sum(bool(found) for _, found, _ in rows)} of {len(rows)} "
          f"(set {args.set}, source {args.source}, {time.strftime('%Y-%m-%d %H:%M')})")


if __name__ == "__main__":
    main()
