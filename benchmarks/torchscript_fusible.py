"""Which registry ops the TorchScript fusers (NNC, oneDNN Graph) put into a fusion group on this CPU:
the measurement behind `fusers=` in the registry (TORCHSCRIPT_FUSIBLE in ir/ops.py, the tags in
ir/ops_shape.py).

Each op runs in two-op chains (contiguous inputs: oneDNN crashes on some expanded bfloat16 ones
whatever the op), after and before an anchor (add, mul, relu, exp), on graphs the
generator draws with that op; it counts as fused when a fused kernel ran and the op's aten call is
not among those the interpreter ran itself. Run: `python benchmarks/torchscript_fusible.py [op ...]`
(default: the ops of ir/ops_shape.py).

`python benchmarks/torchscript_fusible.py --pairs` prints, per fuser, which two-op chains
`second(first(x, y), y)` of its fused ops run fused code (float32, contiguous 2x3 tensors; `F`
fused, `.` declined, `x` raised): the measurement behind the registry's `anchors_for` (oneDNN
Graph fuses a pair only when one op is an anchor; NNC fuses any pair).
"""
from __future__ import annotations

import dataclasses
import sys
import warnings

from fuzzfuse.backends.torchscript import NNCBackend, OneDNNBackend
from fuzzfuse.ir import OPS, make_inputs
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.ops import fused_by
from fuzzfuse.strategies import Features, GenConfig, ShapeConfig, generate

NEW_OPS = ("slice pad cat cat3 index_select gather scatter matmul bmm linear argmax argmin cumsum "
           "var_mean").split()
ANCHORS = ("add", "mul", "relu", "exp")
SEEDS = 40


def fused_share(backend, op: str, dtypes: tuple[str, ...]) -> tuple[int, int]:
    """(graphs where `op` ran inside a fused kernel, graphs with `op` that ran)."""
    config = GenConfig(features=dataclasses.replace(Features(), ops=(op,) + ANCHORS, dtypes=dtypes, patterns=(), layouts=("contiguous",),
                                                    min_ops=2, chains=True, connected=True),
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
        unfused = {name.removeprefix("aten::") for name in result.evidence.details["unfused_ops"]}
        if result.fused and not unfused & _ATEN_NAMES.get(op, {op}):
            inside += 1
    return inside, ran


# The aten calls each op becomes in TorchScript (a slice written x[1:3] is aten::slice).
_ATEN_NAMES = {"slice": {"slice"}, "pad": {"pad", "constant_pad_nd"}, "cat": {"cat"}, "cat3": {"cat"},
               "var_mean": {"var_mean"}, "linear": {"linear", "addmm", "matmul"}, "matmul": {"matmul", "mm", "bmm"}}


def pair_fuses(backend, first: str, second: str) -> str:
    """`F` when second(first(x, y), y) runs fused code, `.` when declined, `x` when it raises."""
    b = GraphBuilder()
    x, y = b.tensor([2, 3]), b.tensor([2, 3])

    def add(name: str, operand: str) -> str:
        op = OPS[name]
        args = [operand] + [y] * (op.arity - 1)
        types = [b.types[a] for a in args]
        attrs = op.draw_attrs(lambda strategy: strategy.example(), types) if op.draw_attrs else {}
        return b.add(name, *args, **attrs)
    graph = b.build([add(second, add(first, x))])
    try:
        return "F" if backend.run(graph, make_inputs(graph)).fused else "."
    except Exception:  # noqa: BLE001 - eager rejects the pair, or the fuser crashes: neither says it fuses
        return "x"


def pairs(backend, fuser: str) -> None:
    ops = [o for o in fused_by(fuser) if OPS[o].kind in ("unary", "binary", "ternary", "normalization")]
    print(f"{backend.name}: rows first, columns second ({' '.join(ops)})")
    for first in ops:
        print(f"  {first:14s} " + "".join(pair_fuses(backend, first, second) for second in ops), flush=True)


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    if argv == ["--pairs"]:
        pairs(NNCBackend("cpu"), "nnc")
        pairs(OneDNNBackend(), "onednn")
        return 0
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
