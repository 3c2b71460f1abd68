"""Which registry ops the TorchScript fusers (NNC, oneDNN Graph) put into a fusion group on this CPU:
the measurement behind `fusers=` in the registry (TORCHSCRIPT_FUSIBLE in ir/ops.py, the tags in
ir/ops_shape.py).

Each op runs in two-op chains (contiguous inputs: oneDNN crashes on some expanded bfloat16 ones
whatever the op), after and before an anchor (add, mul, relu, exp), on graphs the
generator draws with that op; it counts as fused when a fused kernel ran and the op's aten call is
not among those the interpreter ran itself. Run: `python benchmarks/torchscript_fusible.py [op ...]`
(default: the ops of ir/ops_shape.py).
"""
from __future__ import annotations

import dataclasses
import sys
import warnings

from fuzzfuse.backends.torchscript import NNCBackend, OneDNNBackend
from fuzzfuse.ir import make_inputs
from fuzzfuse.strategies import Features, GenConfig, ShapeConfig, generate

NEW_OPS = ("slice pad cat cat3 index_select gather scatter matmul bmm linear argmax argmin cumsum "
           "var_mean").split()
ANCHORS = ("add", "mul", "relu", "exp")
SEEDS = 40


def fused_share(backend, op: str, dtypes: tuple[str, ...]) -> tuple[int, int]:
    """(graphs where `op` ran inside a fused kernel, graphs with `op` that ran)."""
    config = GenConfig(features=dataclasses.replace(Features(), ops=(op,) + ANCHORS, dtypes=dtypes, patterns=(), layouts=("contiguous",),
                                                    min_ops=2, chains=True),
                       shapes=ShapeConfig(max_rank=3, max_dim=5, max_numel=256), max_ops=3)
    inside = ran = 0
    for seed in range(SEEDS):
        graph = generate(seed, config)
        if not any(n.op == op for n in graph.nodes):
            continue
        try:
            result = backend.run(graph, make_inputs(graph))
        except Exception:  # noqa: BLE001 - a crash says nothing about fusibility here
            continue
        ran += 1
        unfused = {name.removeprefix("aten::") for name in result.evidence["unfused_ops"]}
        if result.fused and not unfused & _ATEN_NAMES.get(op, {op}):
            inside += 1
    return inside, ran


# The aten calls each op becomes in TorchScript (a slice written x[1:3] is aten::slice).
_ATEN_NAMES = {"slice": {"slice"}, "pad": {"pad", "constant_pad_nd"}, "cat": {"cat"}, "cat3": {"cat"},
               "var_mean": {"var_mean"}, "linear": {"linear", "addmm", "matmul"}, "matmul": {"matmul", "mm", "bmm"}}


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    ops = argv or NEW_OPS
    backends = [(NNCBackend("cpu"), ("float32", "float64", "int32", "int64", "bool")),
                (OneDNNBackend(), ("float32", "bfloat16"))]
    print(f"{'op':14s} " + " ".join(f"{b.name:>22s}" for b, _ in backends))
    for op in ops:
        cells = []
        for backend, dtypes in backends:
            inside, ran = fused_share(backend, op, dtypes)
            cells.append(f"{inside:>3d} of {ran:>3d} fused".rjust(22))
        print(f"{op:14s} " + " ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
