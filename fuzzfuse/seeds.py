"""The seed corpus: the graphs of fuzzfuse.seedgraphs (the blocks from the discussion this project
grew from, and blocks real models are built of: RMSNorm, attention scores, a bias-GELU epilogue) as
cases, in float32, float16 and bfloat16, contiguous and channels_last, and the same blocks in
training mode (backward cases: the activations and the weights require grad). `fuzzfuse corpus
seeds corpus/` rewrites them. Their mutation (seedgraphs.mutated_seed) is the generator's second
source."""
from __future__ import annotations

from pathlib import Path

from .corpus import Case, save_case
from .seedgraphs import DTYPES, LAYOUTS, SEEDS, TRAINING_DTYPES, TRAINING_SEEDS


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

