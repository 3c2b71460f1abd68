"""Does a case's verdict depend on what its process compiled before? A worker that judged a case
wrong where three fresh repros judged it right looks like state one case leaves for the next.

    python benchmarks/verdict_after_other_compiles.py CASE.json ...            (Inductor cases)
    python benchmarks/verdict_after_other_compiles.py --in-order CASE.json ... (one process)

The first form runs, for each case and each configuration a campaign may draw on the case's
device (every flag value, each mode, dynamic=True, and the defaults), a fresh process that judges
the case under that configuration, then under the defaults, then under it again: a line a
process. The second judges the cases one after another in one process, as a worker does (a case
that was never reduced with its extra input sets), in the order they were found.

On the H100 (2026-12-07) every process judged both Inductor CUDA cast finds wrong under the
defaults, whatever it compiled first: no state leaked; their repros' own float64 reference was
what differed (docs/oracle.md).
"""
import concurrent.futures
import dataclasses
import json
import subprocess
import sys
from pathlib import Path


def judged(case, config) -> str:
    """outcome:kind of the case under `config`."""
    from fuzzfuse.job import backend_for, run_case

    options = dataclasses.replace(case.options, inductor_config=config)
    result = run_case(case.graph, backend_for(case.backend), bool(case.check_strides), options)
    return f"{result.outcome.value}:{result.signature.kind if result.signature is not None else ''}"


def configuration(name: str):
    from fuzzfuse.backends.inductor_config import InductorConfig

    if name == "default":
        return InductorConfig()
    if name == "dynamic":
        return InductorConfig(dynamic=True)
    if name.startswith("mode="):
        return InductorConfig(mode=name[len("mode="):])
    flag, value = name.split("=", 1)
    return InductorConfig(flags=((flag, json.loads(value)),))


def one_process(first: str, path: str) -> None:
    from fuzzfuse.corpus import load_case
    from fuzzfuse.job import init_worker

    init_worker()
    case = load_case(Path(path))
    runs = [("first", configuration(first)), ("then-default", configuration("default")),
            ("again-first", configuration(first))]
    print(f"{Path(path).parent.name} {first:45} " + " ".join(f"{label}={judged(case, c)}" for label, c in runs),
          flush=True)


def each_configuration_first(paths: list[str]) -> None:
    from fuzzfuse.backends.inductor_config import FLAGS, MODES
    from fuzzfuse.corpus import load_case

    def names(device: str) -> list[str]:
        return (["default"] + [f"{n}={json.dumps(v)}" for n, f in FLAGS.items() if device in f.devices for v in f.values]
                + [f"mode={m}" for m, devices in MODES.items() if m and device in devices] + ["dynamic"])

    jobs = [(name, path) for path in paths for name in names(load_case(Path(path)).device or "cpu")]

    def run(job: tuple[str, str]) -> str:
        done = subprocess.run([sys.executable, __file__, "--one", *job], capture_output=True, text=True, timeout=600)
        return done.stdout.strip() or f"{job}: exit {done.returncode}: {done.stderr[-300:]}"

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        for line in pool.map(run, jobs):
            print(line, flush=True)


def in_order(paths: list[str]) -> None:
    from fuzzfuse.corpus import load_case
    from fuzzfuse.job import backend_for, init_worker, run_case

    init_worker()
    cases = sorted(((load_case(Path(p)), p) for p in paths), key=lambda cp: (cp[0].reduction is not None, cp[0].found))
    for case, path in cases:
        result = run_case(case.graph, backend_for(case.backend), bool(case.check_strides), case.options,
                          extra_sets=case.reduction is None)
        kind = result.signature.kind if result.signature is not None else ""
        print(f"{Path(path).name:24} {result.outcome.value}:{kind} {(result.detail or '')[:160]!r}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        one_process(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["--in-order"]:
        in_order(sys.argv[2:])
    else:
        each_configuration_first(sys.argv[1:])
