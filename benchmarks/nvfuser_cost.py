"""Where an nvFuser case's seconds go: per phase, per generation recipe and per kernels a case
compiles, with nvFuser's segmenter log on and off.

    python benchmarks/nvfuser_cost.py [--cases 40] [--procs 16] [--seconds 150] [--out DIR]

Campaigns reach a third of the compile-bound limit (workers / median compile) where the mean case
costs three medians: this says which cases and which phases make up the difference. Every recipe
(the campaign's swarm batches, and each coverage-focus recipe) draws the same cases for both
settings; half the processes run with the log and half without, at the same time, so both see the
same load. A process that dies (a fuser abort) is restarted after the case that killed it. Needs
nvfuser_direct and a GPU.
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

PHASES = ("generate", "inputs", "eager", "ref64", "define", "execute", "evidence", "scheduled_ir")


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
                               "config": config_to_json(campaign.config_for(i)), "options": campaign.options_for(i)}
                              for i in range(batch * BATCH, batch * BATCH + cases)])
    return [t for group in zip(*per_batch) for t in group]


def run_tasks(task_file: str, start: int, out_file: str, setting: str, deadline: float) -> None:
    import torch

    from fuzzfuse.backends import get_backend
    from fuzzfuse.backends.nvfuser import capture_stdout_fd, execute, first_run_evidence
    from fuzzfuse.ir import make_inputs, run_eager
    from fuzzfuse.runner import init_worker
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
            rec = {"pos": pos, "recipe": task["recipe"], "seed": task["seed"], "setting": setting}
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
                emission = backend.emit(graph, inputs, task["options"].get("style"))
                fd = backend.define(emission.source, graph)
                lap("define")
                with capture_stdout_fd() as log:
                    outputs = execute(fd, list(inputs))
                lap("execute")
                rec["log_bytes"] = len(log["text"])
                evidence, _ = first_run_evidence(fd, graph, list(inputs), outputs, log["text"])
                rec.update(kernels=evidence["kernels"], segments=evidence["segments"],
                           schedulers=evidence["schedulers"])
                lap("evidence")
                ir = fd.fec.get_most_recent_scheduled_ir() or ""
                lap("scheduled_ir")
                if "Segmented_Fusion" in ir and pos % 10 == 0:
                    rec["segments_dump"] = ir[ir.find("Segmented_Fusion Dump: -- fusion segments"):][:3000]
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
    shards = max(1, args.procs // 2)
    deadline = time.time() + args.seconds
    procs, started_at = {}, {}  # (shard, setting) -> the task position to start (or restart) at
    for s in range(shards):
        (out / f"tasks-{s}.json").write_text(json.dumps(todo[s::shards]))
        for setting in ("log_on", "log_off"):
            procs[(s, setting)] = 0
    running: dict[tuple, subprocess.Popen] = {}
    while procs or running:
        for key in list(procs):
            s, setting = key
            started_at[key] = procs[key]
            # NVFUSER_DUMP is this process's (loading the backend set it): each worker sets its own.
            env = {**{k: v for k, v in os.environ.items() if k != "NVFUSER_DUMP"},
                   "FUZZFUSE_NVFUSER_SEGMENTER_LOG": "1" if setting == "log_on" else "0",
                   "NVFUSER_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
            running[key] = subprocess.Popen(
                [sys.executable, __file__, "--worker", str(out / f"tasks-{s}.json"), str(procs.pop(key)),
                 str(out / f"{setting}-{s}.jsonl"), setting, str(deadline)], env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        for key, proc in list(running.items()):
            if time.time() > deadline + 60:  # a hanging case: its record is lost, the rest kept
                proc.kill()
            if proc.poll() is None:
                continue
            del running[key]
            lines = [json.loads(x) for x in (out / f"{key[1]}-{key[0]}.jsonl").read_text().splitlines()]
            last = max((x["pos"] for x in lines), default=-1)
            # Died in case `last`: go on after it (unless it died before any case: nvFuser is missing).
            if proc.returncode != 0 and time.time() < deadline and last >= started_at[key]:
                procs[key] = last + 1
    return out


def report(out: Path) -> None:
    started, records = {}, []
    for f in sorted(out.glob("log_*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            key = (f.name, rec["pos"])
            if rec.get("started"):
                started[key] = True
            else:
                started.pop(key, None)
                records.append(rec)
    ok = [r for r in records if r["outcome"] == "pass"]
    print(f"{len(records)} cases ({len(ok)} passed, {len(started)} killed their process)")
    for setting in ("log_on", "log_off"):
        rs = [r for r in ok if r["setting"] == setting]
        if not rs:
            continue
        total = [sum(r[p] for p in PHASES if p != "scheduled_ir") for r in rs]
        compile_ = [r["define"] + r["execute"] for r in rs]
        print(f"\n{setting}: {len(rs)} cases; median compile {statistics.median(compile_):.3f}s, mean case "
              f"{statistics.mean(total):.3f}s: compile-bound share {statistics.median(compile_) / statistics.mean(total):.0%}")
        print("  mean s by phase:  " + "  ".join(f"{p} {statistics.mean(r[p] for r in rs):.4f}" for p in PHASES))
        print("  median s by phase:" + "  ".join(f"{p} {statistics.median(r[p] for r in rs):.4f}" for p in PHASES))
        print(f"  mean segmenter log: {statistics.mean(r['log_bytes'] for r in rs) / 1e3:.0f} kB")
        by_k = collections.defaultdict(list)
        for r in rs:
            by_k[min(r["kernels"], 5)].append(r)
        for k, group in sorted(by_k.items()):
            print(f"  {k}{'+' if k == 5 else ' '} kernels: {len(group):4} cases, execute mean {statistics.mean(r['execute'] for r in group):.3f}s "
                  f"median {statistics.median(r['execute'] for r in group):.3f}s, ops mean {statistics.mean(r['ops'] for r in group):.1f}")
        by_recipe = collections.defaultdict(list)
        for r in rs:
            by_recipe[r["recipe"]].append(r)
        for recipe, group in sorted(by_recipe.items()):
            tot = [sum(r[p] for p in PHASES if p != "scheduled_ir") for r in group]
            print(f"  {recipe:24} {len(group):4} cases, case mean {statistics.mean(tot):.3f}s median {statistics.median(tot):.3f}s, "
                  f"execute mean {statistics.mean(r['execute'] for r in group):.3f}s, kernels mean "
                  f"{statistics.mean(r['kernels'] for r in group):.2f}, inputs+eager+ref64 mean "
                  f"{statistics.mean(r['inputs'] + r['eager'] + r['ref64'] for r in group):.3f}s, reached "
                  f"{sum(recipe in r['schedulers'] for r in group) / len(group):.0%}")
    on = {(r["recipe"], r["seed"]): r for r in ok if r["setting"] == "log_on"}
    pairs = [(on[k], r) for r in ok if r["setting"] == "log_off" and (k := (r["recipe"], r["seed"])) in on]
    if pairs:
        print(f"\npaired cases: {len(pairs)}; execute with the log / without: "
              f"{sum(a['execute'] for a, _ in pairs) / sum(b['execute'] for _, b in pairs):.2f}")
        for k in sorted({min(a["kernels"], 5) for a, _ in pairs}):
            ps = [(a, b) for a, b in pairs if min(a["kernels"], 5) == k]
            print(f"  {k} kernels: {len(ps)} pairs, {sum(a['execute'] for a, _ in ps) / sum(b['execute'] for _, b in ps):.2f}")
    dumps = [r["segments_dump"] for r in ok if r.get("segments_dump")]
    if dumps:
        print("\nA segmented fusion's dump, from get_most_recent_scheduled_ir():\n" + dumps[0])


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        task_file, start, out_file, setting, deadline = sys.argv[2:7]
        run_tasks(task_file, int(start), out_file, setting, float(deadline))
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
