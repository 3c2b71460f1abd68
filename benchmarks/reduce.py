"""fuzzfuse's reducer against `torch._functorch.fx_minifier.minifier`, on the same real failures.

    python benchmarks/reduce.py [--cases 8] [--backend torchscript:nnc] [--seed 0] [--out DIR]

1. Failing graphs: seeded graphs of up to 40 ops (the backend's shape policy and feature set, swarm
   subsets per seed) run in-process; crashes and mismatches of 15-40 ops are kept, a mix of
   signatures picked round-robin, and each is re-run once in a worker (where both reducers query)
   to drop any that do not fail the same way there.
2. One oracle for both: "this graph, run under the backend in an isolated worker, fails with exactly
   the original signature key", through one shared WorkerPool (the jobs `reduce_case` sends).
   A query is one candidate evaluated; fuzzfuse's cache hits are not queries. fx_minifier has no
   cache: every `module_fails` call runs a job and counts, including the re-check it makes of each
   candidate it has just accepted (its distinct candidates are reported too).
3. fx_minifier sees each IR node as ONE `call_function` node to the leaf `ff_op(op, attrs_json,
   *args)`, so its removals map 1:1 onto IR ops; its candidates are converted back to IR graphs
   (placeholders become inputs pinned to the concrete tensors it passes).

Both reducers run one query at a time by default (`--workers 1`), as fx_minifier does: queries are
then an algorithmic count. With `--workers W` fuzzfuse asks W candidates at once (faster in wall time,
but prefetched answers it ends up not needing still count as queries).

Prints one row per case, the medians and two PASS/FAIL target lines: fuzzfuse's final size is no
larger than fx_minifier's on every case, and fuzzfuse needs fewer queries in the median. `q@size` is
how many queries fuzzfuse had spent when it first reached its final op count (the rest go to
shrinking shapes, dtypes, values and attributes, which fx_minifier does not attempt).
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import io
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

# Benchmark the reducer of this checkout, not an installed fuzzfuse (workers inherit sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.fx as fx  # noqa: E402
from torch._functorch.fx_minifier import minifier  # noqa: E402

from fuzzfuse.campaign import case_seed  # noqa: E402
from fuzzfuse.corpus import Case  # noqa: E402
from fuzzfuse.ir import (OPS, Graph, GraphError, Node, ScalarInput, TensorInput, make_inputs,  # noqa: E402
                         to_source)
from fuzzfuse.ir.types import scalar_kind  # noqa: E402
from fuzzfuse.ir.values import with_exact_values  # noqa: E402
from fuzzfuse.minimize import reduce_case  # noqa: E402
from fuzzfuse.oracle import Signature  # noqa: E402
from fuzzfuse.reduce.passes import pinned  # noqa: E402
from fuzzfuse.job import backend_for, init_worker, run_case  # noqa: E402
from fuzzfuse.pool import case_pool, graph_job, run_jobs, worker_env  # noqa: E402
from fuzzfuse.strategies import GenConfig, batch_features, generate  # noqa: E402
from fuzzfuse.verdict import HarnessError, judge  # noqa: E402
from fuzzfuse.worker import WorkerPool  # noqa: E402

MIN_OPS, MAX_OPS = 15, 40


# ---- the oracle both reducers share ----------------------------------------------------------------
class Oracle:
    """Same-signature test through the shared pool: the jobs and the verdict of `reduce_case`."""

    def __init__(self, pool: WorkerPool, backend: str, timeout: float):
        self.pool, self.backend, self.timeout = pool, backend, timeout
        self.ids = itertools.count()

    def signatures(self, graphs: list[Graph]) -> list[str | None]:
        jobs = [graph_job(f"bench-{next(self.ids)}", self.backend, g, self.timeout) for g in graphs]
        keys = []
        for reply in run_jobs(self.pool, jobs):
            try:
                keys.append(judge(self.backend, reply).key)
            except HarnessError:  # a harness error on a candidate: not the bug we are after
                keys.append(None)
        return keys


# ---- failing graphs ---------------------------------------------------------------------------------
@contextlib.contextmanager
def quiet_fd2():
    """Silence C++ chatter on fd 2 (the profiler's start/stop lines) during in-process runs."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def find_failures(backend_name: str, n: int, seed: int, budget: int, oracle: Oracle) -> list[dict]:
    """`n` crash/mismatch cases of 15-40 ops, round-robin over signatures in order of discovery, each
    confirmed once in a worker. The search stops at `n` signatures, or after `budget` graphs of
    15-40 ops once `n` failures are in hand (4 * budget at most): a graph count, not a time, so that
    a seed picks the same cases on any machine."""
    backend = backend_for(backend_name)
    base = backend.features
    by_sig: dict[str, list[dict]] = collections.OrderedDict()
    start, tried = time.time(), 0
    for i in itertools.count():
        found = sum(map(len, by_sig.values()))
        if len(by_sig) >= n or (found >= n and tried >= budget) or tried >= 4 * budget:
            break
        config = GenConfig(max_ops=MAX_OPS, shapes=backend.shapes, features=batch_features(seed, i // 10, base))
        try:
            graph = generate(case_seed(seed, i), config)
        except GraphError:
            continue
        if not MIN_OPS <= graph.size <= MAX_OPS:
            continue
        tried += 1
        with quiet_fd2():
            result = run_case(graph, backend)
        if result.outcome not in ("crash", "mismatch"):
            continue
        key = result.key
        if len(by_sig.get(key, ())) < n:
            by_sig.setdefault(key, []).append({"graph": graph, "signature": result.signature, "key": key,
                                               "outcome": result.outcome, "seed": case_seed(seed, i)})
    print(f"search: {tried} graphs of {MIN_OPS}-{MAX_OPS} ops in {time.time() - start:.0f}s, "
          f"{sum(map(len, by_sig.values()))} failures, {len(by_sig)} signatures", file=sys.stderr)
    order = [c for rank in itertools.zip_longest(*by_sig.values()) for c in rank if c is not None]
    picked: list[dict] = []
    while order and len(picked) < n:
        batch, order = order[:n - len(picked)], order[n - len(picked):]
        for case, key in zip(batch, oracle.signatures([c["graph"] for c in batch])):
            if key == case["key"]:
                picked.append(case)
            else:
                print(f"search: dropped seed {case['seed']}: in a worker it gives {key}", file=sys.stderr)
    return picked


# ---- fuzzfuse's reducer -----------------------------------------------------------------------------
def run_fuzzfuse(case: dict, backend: str, oracle: Oracle, workers: int) -> dict:
    timeline: list[tuple[int, int]] = []  # (queries, size) after each call to is_interesting
    start = time.time()
    result = reduce_case(Case(case["graph"], backend, signature=case["signature"], outcome=case["outcome"]),
                         backend, workers=workers, timeout=oracle.timeout, pool=oracle.pool,
                         progress=lambda s: timeline.append((s.queries, s.size)))
    seconds = time.time() - start
    final = result.graph.size
    # The engine records a new size after the call that found it: the call before the first
    # snapshot showing the final size is where it was reached.
    reached = result.stats.queries
    for k, (_, size) in enumerate(timeline):
        if size == final:
            reached = timeline[k - 1][0] if k else timeline[0][0]
            break
    return {"graph": result.graph, "size": final, "queries": result.stats.queries, "seconds": seconds,
            "at_size": reached, "stats": result.stats}


# ---- fx_minifier on the same graphs ----------------------------------------------------------------
def ff_op(op_name: str, attrs_json: str, *args):
    """One IR node as one FX call: the leaf fx_minifier removes or replaces as a unit."""
    return OPS[op_name].eager(*args, **json.loads(attrs_json))


def _attrs_json(attrs: dict) -> str:
    return json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}, sort_keys=True)


def to_fx(graph: Graph) -> tuple[fx.GraphModule, list]:
    g = fx.Graph()
    env: dict[str, fx.Node] = {}
    for spec in graph.inputs:
        env[spec.name] = g.placeholder(spec.name)
    for n in graph.nodes:
        args = tuple(env[a] if isinstance(a, str) else a for a in n.args)
        env[n.name] = g.create_node("call_function", ff_op, (n.op, _attrs_json(n.attrs)) + args, name=n.name)
    g.output(tuple(env[o] for o in graph.outputs))
    gm = fx.GraphModule(torch.nn.Module(), g)
    for spec, node in zip(graph.inputs, g.nodes):
        assert node.name == spec.name, (node.name, spec.name)
    return gm, make_inputs(graph)


def from_fx(gm: fx.GraphModule, inps, originals: dict[str, tuple]) -> Graph:
    """The IR graph of an fx_minifier candidate: original inputs keep their spec (or their layout,
    when fx_minifier passes other values); new placeholders are pinned to the concrete tensor with
    its strides where a Layout can say so; each ff_op call is one Node."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs = []
    for node, value in zip(placeholders, inps, strict=True):
        orig = originals.get(node.name)
        if not isinstance(value, torch.Tensor):
            inputs.append(ScalarInput(node.name, scalar_kind(value), value))
        elif orig is not None and orig[1] is value:
            inputs.append(orig[0])
        elif orig is not None and isinstance(orig[0], TensorInput) and tuple(value.shape) == orig[0].shape:
            inputs.append(with_exact_values(orig[0], value))
        else:
            inputs.append(pinned(node.name, value))
    nodes, outputs = [], ()
    for n in gm.graph.nodes:
        if n.op == "call_function":
            assert n.target is ff_op, n.target
            op, attrs = n.args[0], json.loads(n.args[1])
            attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
            nodes.append(Node(n.name, op, tuple(a.name if isinstance(a, fx.Node) else a for a in n.args[2:]), attrs))
        elif n.op == "output":
            out = n.args[0]
            outputs = tuple(o.name for o in (out if isinstance(out, (tuple, list)) else (out,)))
    return Graph(tuple(inputs), tuple(nodes), outputs).validate()


def run_fx_minifier(case: dict, oracle: Oracle) -> dict:
    graph = case["graph"]
    gm, inps = to_fx(graph)
    originals = {spec.name: (spec, value) for spec, value in zip(graph.inputs, inps)}
    counts = {"queries": 0, "invalid": 0}
    distinct: set[str] = set()

    def module_fails(fx_gm: fx.GraphModule, candidate_inps) -> bool:
        counts["queries"] += 1
        try:
            ir = from_fx(fx_gm, candidate_inps, originals)
        except GraphError:
            counts["invalid"] += 1
            return False
        distinct.add(ir.digest())
        return oracle.signatures([ir])[0] == case["key"]

    start = time.time()
    with contextlib.redirect_stderr(io.StringIO()):
        final_gm, final_inps = minifier(gm, inps, module_fails, dump_state=lambda *a: None)
    seconds = time.time() - start
    size = sum(1 for n in final_gm.graph.nodes if n.op == "call_function")
    return {"graph": from_fx(final_gm, final_inps, originals), "size": size, "queries": counts["queries"],
            "distinct": len(distinct), "invalid": counts["invalid"], "seconds": seconds}


# ---- report -----------------------------------------------------------------------------------------
def short_signature(s: Signature) -> str:
    text = "/".join(x for x in (s.outcome, s.stage, s.kind, s.location, s.message) if x)
    return text if len(text) <= 46 else text[:45] + "~"


def dump(out: Path, index: int, case: dict, ff: dict | None, fxm: dict | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    record = {"seed": case["seed"], "signature": case["signature"].to_json(), "original": case["graph"].to_json()}
    for name, res in (("fuzzfuse", ff), ("fx_minifier", fxm)):
        if res is not None:
            record[name] = {k: v for k, v in res.items() if k not in ("graph", "stats")}
            record[name]["graph"] = res["graph"].to_json()
            (out / f"case{index}-{name}.py").write_text(to_source(res["graph"]))
    if ff is not None:
        record["fuzzfuse"]["passes"] = ff["stats"].to_json()["passes"]
    (out / f"case{index}-original.py").write_text(to_source(case["graph"]))
    (out / f"case{index}.json").write_text(json.dumps(record, indent=1, default=str))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=8)
    p.add_argument("--backend", default="torchscript:nnc")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds one query may run")
    p.add_argument("--search-graphs", type=int, default=100,
                   help="graphs of 15-40 ops to try before settling for fewer signatures than --cases")
    p.add_argument("--out", type=Path, help="write each case's original and both reduced graphs here")
    args = p.parse_args()
    # In-process runs (the search) set the fuser state the workers get from their environment.
    os.environ.update(worker_env(args.backend))
    init_worker()

    rows = []
    with case_pool(args.backend, args.workers, args.timeout) as pool:
        oracle = Oracle(pool, args.backend, args.timeout)
        cases = find_failures(args.backend, args.cases, args.seed, args.search_graphs, oracle)
        for k, case in enumerate(cases):
            print(f"case {k}: seed {case['seed']}, {case['graph'].size} ops, {case['key']}", file=sys.stderr)
            ff = fxm = None
            try:
                ff = run_fuzzfuse(case, args.backend, oracle, args.workers)
                print(f"  fuzzfuse: {ff['size']} ops, {ff['queries']} queries, {ff['seconds']:.1f}s", file=sys.stderr)
            except Exception as e:  # report the case, go on with the others
                print(f"  fuzzfuse failed: {type(e).__name__}: {e}", file=sys.stderr)
            try:
                fxm = run_fx_minifier(case, oracle)
                print(f"  fx_minifier: {fxm['size']} ops, {fxm['queries']} queries ({fxm['distinct']} distinct), "
                      f"{fxm['seconds']:.1f}s", file=sys.stderr)
            except Exception as e:
                print(f"  fx_minifier failed: {type(e).__name__}: {e}", file=sys.stderr)
            if args.out:
                dump(args.out, k, case, ff, fxm)
            rows.append((k, case, ff, fxm))

    def cell(res, *keys, fmt="{}"):
        return "-" if res is None else fmt.format(*(res[key] for key in keys))

    print(f"backend {args.backend}, torch {torch.__version__}, {len(rows)} cases, seed {args.seed}, "
          f"{args.workers} workers")
    header = (f"{'case':>4} | {'signature':46} | {'ops':>4} | {'fuzzfuse: ops':>13} {'queries':>7} {'q@size':>6} "
              f"{'secs':>6} | {'fx_minifier: ops':>16} {'queries':>7} {'distinct':>8} {'secs':>6}")
    print(header)
    print("-" * len(header))
    for k, case, ff, fxm in rows:
        print(f"{k:>4} | {short_signature(case['signature']):46} | {case['graph'].size:>4} | "
              f"{cell(ff, 'size'):>13} {cell(ff, 'queries'):>7} {cell(ff, 'at_size'):>6} "
              f"{cell(ff, 'seconds', fmt='{:.1f}'):>6} | {cell(fxm, 'size'):>16} {cell(fxm, 'queries'):>7} "
              f"{cell(fxm, 'distinct'):>8} {cell(fxm, 'seconds', fmt='{:.1f}'):>6}")
    both = [(case, ff, fxm) for _, case, ff, fxm in rows if ff is not None and fxm is not None]
    if not both:
        print("no case completed under both reducers")
        sys.exit(1)

    def med(side: int, key: str) -> float:
        return statistics.median(r[side][key] for r in both)

    print("-" * len(header))
    print(f"{'med':>4} | {'':46} | {statistics.median(c['graph'].size for c, _, _ in both):>4g} | "
          f"{med(1, 'size'):>13g} {med(1, 'queries'):>7g} {med(1, 'at_size'):>6g} {med(1, 'seconds'):>6.1f} | "
          f"{med(2, 'size'):>16g} {med(2, 'queries'):>7g} {med(2, 'distinct'):>8g} {med(2, 'seconds'):>6.1f}")
    larger = [k for k, case, ff, fxm in rows if ff is not None and fxm is not None and ff["size"] > fxm["size"]]
    missing = len(rows) - len(both)
    size_ok = not larger and not missing
    print(f"{'PASS' if size_ok else 'FAIL'}: fuzzfuse final size <= fx_minifier's on every case"
          + (f" (larger on cases {larger})" if larger else "")
          + (f" ({missing} cases did not complete under both)" if missing else ""))
    q_ok = med(1, "queries") < med(2, "queries")
    print(f"{'PASS' if q_ok else 'FAIL'}: fuzzfuse median queries {med(1, 'queries'):g} < fx_minifier's "
          f"{med(2, 'queries'):g}")


if __name__ == "__main__":
    main()
