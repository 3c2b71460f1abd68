"""The committed seed corpus is what fuzzfuse.seeds builds, and it runs."""
from pathlib import Path

from fuzzfuse.corpus import load_case
from fuzzfuse.ir import make_inputs, run_eager
from fuzzfuse.seeds import seed_cases, write

CORPUS = Path(__file__).parent.parent / "corpus"


def test_committed_seeds_match_the_generator(tmp_path):
    """Byte for byte: `fuzzfuse corpus seeds corpus/` on an up-to-date corpus changes nothing."""
    assert len(seed_cases()) == 12
    written = write(tmp_path)
    assert len(written) == 20
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
