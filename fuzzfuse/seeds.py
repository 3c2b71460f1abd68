"""The seed corpus: the graphs from the discussion this project grew from, in float32, float16 and
bfloat16, contiguous and channels_last, and the same blocks in training mode (backward cases: the
activations and the weights require grad). `fuzzfuse corpus seeds corpus/` rewrites them."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .corpus import Case, save_case
from .ir import Graph, Values
from .ir.builder import GraphBuilder, batch_norm, layer_norm, squeeze_excite

DTYPES = ("float32", "float16", "bfloat16")
LAYOUTS = ("contiguous", "channels_last")


def layer_norm_over_channels(dtype: str, layout: str) -> Graph:
    """u = x.mean(1, keepdim=True); s = ((x*x).mean(1, keepdim=True) - u*u).clamp(0);
    y = (x - u) * torch.rsqrt(s + eps); y = y * w[:, None, None] + b[:, None, None]"""
    b = GraphBuilder()
    x = b.tensor((2, 8, 5, 7), dtype, layout, Values(seed=1))
    w = b.tensor((8,), dtype, values=Values(seed=2))
    bias = b.tensor((8,), dtype, values=Values(seed=3))
    y = layer_norm(b, x, 1, variance="moments", eps=1e-6)
    y = b.add("mul", y, b.add("index_none", w, spec=[":", "None", "None"]))
    y = b.add("add", y, b.add("index_none", bias, spec=[":", "None", "None"]))
    return b.build([y])


def efficientnet_block(dtype: str, layout: str) -> Graph:
    """The channels_last tail of an EfficientNet MBConv block: SiLU, squeeze-excite (mean over H
    and W, sigmoid gate), residual add."""
    b = GraphBuilder()
    x = b.tensor((2, 16, 7, 7), dtype, layout, Values(seed=4))
    residual = b.tensor((2, 16, 7, 7), dtype, layout, Values(seed=5))
    return b.build([squeeze_excite(b, x, residual)])


def efficientnet_train_block(dtype: str, layout: str) -> Graph:
    """An EfficientNet MBConv tail as trained: batch norm (batch statistics, affine weight and
    bias), SiLU, squeeze-excite, residual add."""
    b = GraphBuilder()
    x = b.tensor((2, 16, 5, 5), dtype, layout, Values(seed=6))
    residual = b.tensor((2, 16, 5, 5), dtype, layout, Values(seed=7))
    w = b.tensor((16,), dtype, values=Values(seed=8))
    bias = b.tensor((16,), dtype, values=Values(seed=9))
    return b.build([squeeze_excite(b, batch_norm(b, x, w, bias), residual)])


def training(make):
    """The graph `make` builds, as a backward case: every input (activations and weights) requires
    grad, with a fixed upstream-gradient seed."""
    def build(dtype: str, layout: str) -> Graph:
        graph = make(dtype, layout)
        return replace(graph, inputs=tuple(replace(i, requires_grad=True) for i in graph.inputs), grad_seed=11)
    build.__doc__ = f"Training mode (inputs and weights require grad): {make.__doc__}"
    return build


SEEDS = {"layernorm_channels": layer_norm_over_channels, "efficientnet_se": efficientnet_block}
# Backward cases in the dtypes training uses.
TRAINING_SEEDS = {"layernorm_channels_train": training(layer_norm_over_channels),
                  "efficientnet_bn_se_train": training(efficientnet_train_block)}
TRAINING_DTYPES = ("float32", "bfloat16")


def _seed(graph, make) -> Case:
    """found=0: a seed is written, not found, so rewriting the corpus changes no byte."""
    return Case(graph, detail=make.__doc__ or "", found=0.0)


def seed_cases() -> dict[str, Case]:
    return {f"{name}-{dtype}-{layout}": _seed(make(dtype, layout), make)
            for name, make in SEEDS.items() for dtype in DTYPES for layout in LAYOUTS}


def training_seed_cases() -> dict[str, Case]:
    return {f"{name}-{dtype}-{layout}": _seed(make(dtype, layout), make)
            for name, make in TRAINING_SEEDS.items() for dtype in TRAINING_DTYPES for layout in LAYOUTS}


def write(directory: Path) -> list[Path]:
    paths = []
    for name, case in {**seed_cases(), **training_seed_cases()}.items():
        path = save_case(directory, case)
        target = path.with_name(f"seed-{name}.json")
        path.replace(target)
        paths.append(target)
    return paths

