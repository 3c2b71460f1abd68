"""The committed seed corpus is what fuzzfuse.seeds builds, and it runs; a mutated seed is a seed
with one thing changed at a time, and `fuzz --source seeds` draws its cases so."""
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzfuse.checkpoint import STATE_FILE
from fuzzfuse.ir import make_inputs, run_eager
from fuzzfuse.seedgraphs import CONSTANTS, _constant, _dtype, _layout, _op, mutated_seed, seed_graphs
from fuzzfuse.seeds import seed_cases, write
from fuzzfuse.strategies import Features, GenConfig, generate

CORPUS = Path(__file__).parent.parent / "corpus"


def test_committed_seeds_match_the_generator(tmp_path):
    """Byte for byte: `fuzzfuse corpus seeds corpus/` on an up-to-date corpus changes nothing."""
    assert len(seed_cases()) == 30
    written = write(tmp_path)
    assert len(written) == 38
    for path in written:
        assert path.read_text() == (CORPUS / path.name).read_text(), path.name


def test_seed_graphs_have_the_reported_shapes():
    cases = seed_cases()
    ln = cases["layernorm_channels-bfloat16-channels_last"].graph
    assert ln.inputs[0].layout.kind == "channels_last" and ln.inputs[0].dtype == "bfloat16"
    assert [n.op for n in ln.nodes].count("mean") == 2 and any(n.op == "rsqrt" for n in ln.nodes)
    se = cases["efficientnet_se-float16-channels_last"].graph
    assert {n.op for n in se.nodes} >= {"silu", "mean", "sigmoid", "mul", "add"}
    for case in cases.values():
        outs, _ = run_eager(case.graph, make_inputs(case.graph))
        assert outs[0].isfinite().all()


def _differences(a, b) -> list[str]:
    """What differs between two graphs of the same inputs and nodes, by name."""
    diffs = [f"input {x.name}" for x, y in zip(a.inputs, b.inputs) if x != y]
    return diffs + [f"node {x.name}" for x, y in zip(a.nodes, b.nodes) if x != y]


def test_each_mutation_changes_one_thing_of_a_seed_and_the_graph_still_runs():
    features = Features()
    changed = {"op": 0, "dtype": 0, "layout": 0, "constant": 0}
    for k in range(40):
        seed = seed_graphs()[k % len(seed_graphs())]
        for name, mutate in (("op", _op), ("dtype", _dtype), ("layout", _layout), ("constant", _constant)):
            graph = mutate(seed, random.Random(k), features)
            if graph is None:
                continue
            assert len(_differences(seed, graph)) == 1, (name, _differences(seed, graph))
            changed[name] += 1
    assert all(count >= 10 for count in changed.values()), changed
    layer_norm = seed_cases()["layernorm_channels-float32-contiguous"].graph
    assert any(a in CONSTANTS for n in _constant(layer_norm, random.Random(1), features).nodes for a in n.args)


def test_mutated_seeds_are_deterministic_valid_and_mostly_changed():
    graphs = [mutated_seed(random.Random(k), Features()) for k in range(60)]
    assert graphs == [mutated_seed(random.Random(k), Features()) for k in range(60)]
    for graph in graphs:
        run_eager(graph, make_inputs(graph))
    assert sum(g not in seed_graphs() for g in graphs) >= 45


def test_the_seeds_source_draws_every_case_from_a_mutated_seed_and_mixed_about_half():
    seeds = GenConfig(features=Features(source="seeds"))
    assert [generate(k, seeds) for k in range(10)] == \
        [mutated_seed(random.Random(f"{k}:source"), seeds.features) for k in range(10)]
    scratch = [generate(k, GenConfig()) for k in range(40)]
    mixed = [generate(k, GenConfig(features=Features(source="mixed"))) for k in range(40)]
    assert 10 <= sum(m != s for m, s in zip(mixed, scratch)) <= 30


@pytest.mark.slow  # a fresh interpreter and a real NNC campaign: 7 s on the 2-core machine
def test_fuzz_takes_the_source_switch_and_keeps_it_in_the_campaign_state(tmp_path):
    """A real campaign (NNC) of mutated seeds; --resume reads the source back from the state."""
    root = Path(__file__).parent.parent
    run = subprocess.run([sys.executable, "-m", "fuzzfuse", "fuzz", "--backend", "torchscript:nnc", "--source", "seeds",
                          "--max-cases", "6", "--workers", "1", "--no-reduce", "--seed", "3", "--out", str(tmp_path)],
                         cwd=root, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert '"source": "seeds"' in (tmp_path / STATE_FILE).read_text()
    bad = subprocess.run([sys.executable, "-m", "fuzzfuse", "fuzz", "--source", "models", "--out", str(tmp_path / "x")],
                         cwd=root, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
