"""The reducer's own cost per query on a graph with megabytes of pinned input values.

    python benchmarks/reduce_overhead.py [--numel 5000000]

Reducing a failure that happens after a big intermediate (cut_prefix pins it as an exact input)
spends its time in the parent, weighing and resizing candidates, before any query runs: campaign
reductions on the GPU ran out of their budget there. The oracle here is free (a shape test, no
fuser), so the figure is the reducer's overhead alone. One run, one figure: compare against the
same script on another commit.
"""
from __future__ import annotations

import argparse
import time

import torch

from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.reduce import reduce
from fuzzfuse.reduce.passes import pinned


def big_pinned_graph(numel: int):
    """Layer norm backward's shape: a mean over a 1023-long dim of a product with a pinned input."""
    rows = max(1, numel // (1023 * 5))
    b = GraphBuilder()
    x = b.tensor((1023, rows, 5), "float16")
    w = b.tensor((1023, 1, 1), "float16")
    nans = pinned("x2", torch.full((1023, rows, 5), float("nan"), dtype=torch.float16))
    y = b.tensor(nans.shape, "float16", values=nans.values)
    v = b.add("mul", b.add("mul", x, w), y)
    m = b.add("mean", v, dims=[0], keepdim=True)
    return b.build([b.add("mul", b.add("sub", v, m), x)])


def needs_a_long_mean(graphs: list) -> list[bool]:
    out = []
    for g in graphs:
        types = g.infer_types()
        out.append(any(n.op == "mean" and types[n.args[0]].shape[n.attrs["dims"][0]] >= 1000 for n in g.nodes))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--numel", type=int, default=5_000_000)
    args = p.parse_args()
    torch.set_num_threads(1)
    graph = big_pinned_graph(args.numel)
    start = time.perf_counter()
    result = reduce(graph, needs_a_long_mean, max_queries=400)
    seconds = time.perf_counter() - start
    queries = result.stats.queries
    print(f"pinned input of {args.numel:,} fp16 values: {graph.size} -> {result.graph.size} ops, "
          f"{queries} queries in {seconds:.1f}s ({seconds / queries:.3f}s of reducer overhead per query)")


if __name__ == "__main__":
    main()
