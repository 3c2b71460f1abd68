"""The seed corpus: the graphs from the discussion this project grew from, in float32, float16 and
bfloat16, contiguous and channels_last. `python -m fuzzfuse.seeds corpus/` rewrites them."""
from __future__ import annotations

import sys
from pathlib import Path

from .corpus import Case, save_case
from .ir import Graph, Values
from .ir.builder import GraphBuilder, layer_norm, squeeze_excite

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


SEEDS = {"layernorm_channels": layer_norm_over_channels, "efficientnet_se": efficientnet_block}


def seed_cases() -> dict[str, Case]:
    return {f"{name}-{dtype}-{layout}": Case(make(dtype, layout), outcome="seed", detail=make.__doc__ or "")
            for name, make in SEEDS.items() for dtype in DTYPES for layout in LAYOUTS}


def write(directory: Path) -> list[Path]:
    paths = []
    for name, case in seed_cases().items():
        path = save_case(directory, case)
        target = path.with_name(f"seed-{name}.json")
        path.replace(target)
        paths.append(target)
    return paths


if __name__ == "__main__":
    for p in write(Path(sys.argv[1] if len(sys.argv) > 1 else "corpus")):
        print(p)
