"""Where an nvFuser case's seconds go: per phase, per generation recipe and per kernels a case
compiles.

    python benchmarks/nvfuser_cost.py [--cases 40] [--procs 16] [--seconds 150] [--out DIR]

Campaigns reach half of the compile-bound limit (workers / median compile) where the mean case
costs two medians: this says which cases and which phases make up the difference. It runs the
campaign's own cases (swarm batches, and as many of each coverage-focus recipe) in `--procs`
processes at once, each phase timed apart (the GPU synchronized after each). A process that dies (a
fuser abort) is restarted after the case that killed it. Needs nvfuser_direct and a GPU.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("generate", "inputs", "eager", "ref64", "define", "execute", "evidence")


def tasks(cases: int) -> list[dict]:
    """`cases` campaign cases of each coverage-focus recipe and as many of swarm batches, in the
    campaign's proportions, interleaved so that a cut-short run still samples each recipe."""
    from fuzzfuse.campaign import BATCH, Campaign, case_seed
    from fuzzfuse.strategies import config_to_json

    with tempfile.TemporaryDirectory() as out:
        campaign = Campaign("nvfuser", Path(out), seed=7, workers=1)
    focus = list(campaign.backend.coverage_focus)
    per_batch = []
    for r, recipe in enumerate(focus):
        # As many swarm cases as focused ones, whatever share campaigns give each.
        campaign._focus.update({2 * r: None, 2 * r + 1: recipe})  # pinned (campaigns decide as they go)
        for batch in (2 * r, 2 * r + 1):
            per_batch.append([{"recipe": recipe if batch % 2 else "swarm", "seed": case_seed(campaign.stream, i),
                               "config": config_to_json(campaign.config_for(i)),
                               "options": campaign.options_for(i).to_json()}
                              for i in range(batch * BATCH, batch * BATCH + cases)])
    return [t for group in zip(*per_batch) for t in group]


def run_tasks(task_file: str, start: int, out_file: str, deadline: float) -> None:
    import torch

    from fuzzfuse.backends import get_backend
    from fuzzfuse.backends.nvfuser import execute, first_run_evidence
    from fuzzfuse.backends.options import Options
    from fuzzfuse.ir import make_inputs, run_eager
    from fuzzfuse.job import init_worker
    from fuzzfuse.strategies import config_from_json, generate

    init_worker()
    backend = get_backend("nvfuser")
    backend.check_available()
    todo = json.loads(Path(task_file).read_text())
    with open(out_file, "a") as out:
        for pos in range(start, len(todo)):
            if time.time() > deadline:
                break
            task = todo[pos]
            rec = {"pos": pos, "recipe": task["recipe"], "seed": task["seed"]}
            out.write(json.dumps({"pos": pos, "started": True}) + "\n")
            out.flush()
            t = time.perf_counter()

            def lap(name: str) -> None:
                nonlocal t
                torch.cuda.synchronize()
                now = time.perf_counter()
                rec[name], t = now - t, now

            try:
                graph = generate(task["seed"], config_from_json(task["config"]))
                lap("generate")
                rec["ops"] = len(graph.nodes)
                inputs = make_inputs(graph, "cuda")
                rec["numel"] = sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))
                lap("inputs")
                run_eager(graph, inputs)
                lap("eager")
                run_eager(graph, inputs, upcast=True)
                lap("ref64")
                emission = backend.emit(graph, inputs, Options.from_json(task["options"]).style)
                fd = backend.define(emission.source, graph)
                lap("define")
                outputs = execute(fd, list(inputs))
                lap("execute")
                evidence, _ = first_run_evidence(fd, graph, list(inputs), outputs)  # as campaigns read it
                lap("evidence")
                rec.update(kernels=evidence.kernels, segments=len(evidence.schedulers),
                           schedulers=list(evidence.schedulers))
                rec["outcome"] = "pass"
            except Exception as e:  # noqa: BLE001  (a fuser failure is a data point here)
                rec["outcome"] = f"{type(e).__name__}: {str(e)[:200]}"
                lap("failed")
            out.write(json.dumps(rec) + "\n")
            out.flush()


def drive(args) -> Path:
    out = Path(args.out or tempfile.mkdtemp(prefix="nvfuser_cost-"))
    out.mkdir(parents=True, exist_ok=True)
    todo = tasks(args.cases)
    deadline = time.time() + args.seconds
    starts, started_at = {}, {}  # process -> the task position to start (or restart) at
    for p in range(args.procs):
        (out / f"tasks-{p}.json").write_text(json.dumps(todo[p::args.procs]))
        starts[p] = 0
    env = {**os.environ, "NVFUSER_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}  # as workers run
    running: dict[int, subprocess.Popen] = {}
    while starts or running:
        for p in list(starts):
            started_at[p] = starts[p]
            running[p] = subprocess.Popen(
                [sys.executable, __file__, "--worker", str(out / f"tasks-{p}.json"), str(starts.pop(p)),
                 str(out / f"cases-{p}.jsonl"), str(deadline)], env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        for p, proc in list(running.items()):
            if time.time() > deadline + 60:  # a hanging case: its record is lost, the rest kept
                proc.kill()
            if proc.poll() is None:
                continue
            del running[p]
            lines = [json.loads(x) for x in (out / f"cases-{p}.jsonl").read_text().splitlines()]
            last = max((x["pos"] for x in lines), default=-1)
            # Died in case `last`: go on after it (unless it died before any case: nvFuser is missing).
            if proc.returncode != 0 and time.time() < deadline and last >= started_at[p]:
                starts[p] = last + 1
    return out


def _mean(rs: list[dict], key) -> float:
    return statistics.mean(key(r) for r in rs)


def report(out: Path) -> None:
    started, records = {}, []
    for f in sorted(out.glob("cases-*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            key = (f.name, rec["pos"])
            if rec.get("started"):
                started[key] = True
            else:
                started.pop(key, None)
                records.append(rec)
    rs = [r for r in records if r["outcome"] == "pass"]
    print(f"{len(records)} cases ({len(rs)} passed, {len(started)} killed their process)")
    if not rs:
        return
    total = lambda r: sum(r[p] for p in PHASES)  # noqa: E731
    compile_ = [r["define"] + r["execute"] for r in rs]
    print(f"median compile {statistics.median(compile_):.3f}s, mean compile {statistics.mean(compile_):.3f}s, "
          f"mean case {_mean(rs, total):.3f}s: median compile / mean case {statistics.median(compile_) / _mean(rs, total):.0%}")
    print("mean s by phase:   " + "  ".join(f"{p} {_mean(rs, lambda r: r[p]):.4f}" for p in PHASES))
    print("median s by phase: " + "  ".join(f"{p} {statistics.median(r[p] for r in rs):.4f}" for p in PHASES))
    by_kernels = collections.defaultdict(list)
    for r in rs:
        by_kernels[min(r["kernels"], 5)].append(r)
    for k, group in sorted(by_kernels.items()):
        print(f"  {k}{'+' if k == 5 else ' '} kernels: {len(group):4} cases, execute mean {_mean(group, lambda r: r['execute']):.3f}s "
              f"median {statistics.median(r['execute'] for r in group):.3f}s, ops mean {_mean(group, lambda r: r['ops']):.1f}")
    by_recipe = collections.defaultdict(list)
    for r in rs:
        by_recipe[r["recipe"]].append(r)
    for recipe, group in sorted(by_recipe.items()):
        print(f"  {recipe:24} {len(group):4} cases, case mean {_mean(group, total):.3f}s median "
              f"{statistics.median(map(total, group)):.3f}s, execute mean {_mean(group, lambda r: r['execute']):.3f}s, "
              f"kernels mean {_mean(group, lambda r: r['kernels']):.2f}, inputs+eager+ref64 mean "
              f"{_mean(group, lambda r: r['inputs'] + r['eager'] + r['ref64']):.3f}s, reached "
              f"{sum(recipe in r['schedulers'] for r in group) / len(group):.0%}")


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        task_file, start, out_file, deadline = sys.argv[2:6]
        run_tasks(task_file, int(start), out_file, float(deadline))
        return
    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=40, help="cases per recipe")
    p.add_argument("--procs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--seconds", type=float, default=150)
    p.add_argument("--out", help="directory for the per-case records (kept); a temporary one by default")
    p.add_argument("--report", help="only print the report of an earlier run's directory")
    args = p.parse_args()
    report(Path(args.report) if args.report else drive(args))


if __name__ == "__main__":
    main()
