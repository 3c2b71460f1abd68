"""Cases drawn for a TorchScript fuser exercise fused code: the generator draws what the fuser
fuses (the registry's `fusers` and `anchors_for` fields, the backend's features: connected graphs,
oneDNN Graph's anchors), so few cases are declined wholesale. Measured on the real fusers; and a
share of cases is still drawn outside that space, so that a fuser fusing more is noticed."""
from __future__ import annotations

import dataclasses
import random

import pytest

from fuzzfuse.backends import get_backend
from fuzzfuse.campaign import OUTSIDE_SHARE, Campaign, case_seed
from fuzzfuse.ir import OPS, TensorInput
from fuzzfuse.pool import case_pool, graph_job, run_jobs
from fuzzfuse.strategies import GenConfig, generate, swarm
from fuzzfuse.verdict import Outcome, judge

CASES = 60
DRAWS = 150
CRASHES = (Outcome.CRASH, Outcome.HARD_CRASH, Outcome.HANG)


@pytest.mark.parametrize("name, most_declined", [("torchscript:nnc", 0.05), ("torchscript:onednn", 0.1)])
def test_few_cases_of_a_torchscript_fuser_campaign_are_declined_wholesale(name, most_declined, tmp_path):
    """Before the fusers' features, 44% of NNC's cases and 64% of oneDNN's were declined; before
    connected graphs and oneDNN's anchors, 17% and 45%. The campaign's workers isolate the process
    from oneDNN's known segfaults."""
    summary = Campaign(name, tmp_path, seed=3, workers=1, max_cases=CASES, reduce=False).run()
    declined = sum(s["count"] for s in summary["signatures"]
                   if s["outcome"] == "unfused" and s["signature"]["kind"] == "no-fusion")
    assert summary["cases"] == CASES
    assert declined / CASES <= most_declined, summary["outcomes"]


def test_a_fusers_features_are_the_ops_the_registry_says_it_fuses():
    for name, fuser in [("torchscript:nnc", "nnc"), ("torchscript:onednn", "onednn")]:
        features = get_backend(name).features
        assert features.ops and all(fuser in OPS[op].fusers for op in features.ops)
        assert features.min_ops == 2  # neither fuses a lone op
        assert features.connected  # each merges a producer into its consumer
        assert all(fuser in OPS[op].anchors_for for op in features.anchors)
    assert get_backend("torchscript:onednn").features.chains  # it fuses an op into its producer's one use
    # bf16 only where oneDNN has bf16 kernels (AVX-512): on an AVX2 machine it declines every bf16 graph
    import torch
    assert ("bfloat16" in get_backend("torchscript:onednn").features.dtypes) == \
        torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert get_backend("torchscript:onednn").features.anchors and not get_backend("torchscript:nnc").features.anchors
    assert "float16" not in get_backend("torchscript:nnc").features.dtypes  # NNC declines it on CPU


def _campaign_draws(name: str, tmp_path, count: int, patterns: bool = True):
    """(config, graph) of a campaign's first `count` cases, those drawn outside left out; without
    `patterns`, with no pattern (layer norm...) among their ops."""
    campaign = Campaign(name, tmp_path, seed=5, workers=1, reduce=False)
    configs = [campaign.config_for(i) for i in range(count) if not campaign.is_outside(i)]
    if not patterns:
        configs = [dataclasses.replace(c, features=dataclasses.replace(c.features, patterns=())) for c in configs]
    return [(c, generate(seed, c)) for seed, c in enumerate(configs)]


@pytest.mark.parametrize("name", ["torchscript:nnc", "torchscript:onednn"])
def test_a_fusers_graphs_are_connected_and_chain_no_two_ops_outside_its_anchors(name, tmp_path):
    chained = 0
    for config, graph in _campaign_draws(name, tmp_path, 200, patterns=False):
        producer = {n.name: n.op for n in graph.nodes}
        for node in graph.nodes[1:]:
            first = node.args[0]
            assert first in producer, graph.to_json()  # connected: each op extends the graph
            anchors = config.features.anchors
            if anchors and node.op not in anchors:
                assert producer[first] in anchors, graph.to_json()
            chained += 1
    assert chained > 200


def test_onednn_draws_no_0d_input_outside_its_outside_share(tmp_path):
    """Every oneDNN Graph partition with a 0-d tensor fails to compile (a known root cause): its
    declared space has none, the cases drawn outside it still do."""
    inputs = [i for _, graph in _campaign_draws("torchscript:onednn", tmp_path, 200) for i in graph.inputs
              if isinstance(i, TensorInput)]
    assert inputs and all(len(i.shape) >= 1 for i in inputs)
    backend = get_backend("torchscript:onednn")
    outside = GenConfig(features=backend.outside_features, shapes=backend.outside_shapes)
    assert any(len(i.shape) == 0 for seed in range(100) for i in generate(seed, outside).inputs
               if isinstance(i, TensorInput))


@pytest.mark.parametrize("name", ["torchscript:nnc", "torchscript:onednn"])
def test_a_share_of_a_campaigns_cases_is_drawn_outside_the_declared_space(name, tmp_path):
    campaign = Campaign(name, tmp_path, seed=7, workers=1, reduce=False)
    outside = [i for i in range(4000) if campaign.is_outside(i)]
    assert 0.5 * OUTSIDE_SHARE < len(outside) / 4000 < 2 * OUTSIDE_SHARE
    declared = set(campaign.features.ops)
    drawn = {n.op for i in outside[:60] for n in generate(case_seed(campaign.stream, i), campaign.config_for(i)).nodes}
    assert drawn - declared  # ops the fuser is not declared to fuse
    assert not Campaign("inductor", tmp_path / "inductor", seed=7, workers=1, reduce=False).is_outside(outside[0])


@pytest.mark.slow
@pytest.mark.parametrize("name, least_fused", [("torchscript:nnc", 0.9), ("torchscript:onednn", 0.9)])
def test_the_declared_fusible_space_really_fuses_on_the_real_fuser(name, least_fused):
    """Graphs drawn from the backend's declared features and shapes (swarmed as a campaign does),
    run on the real fuser in isolated workers (oneDNN Graph has known segfaults): of those the
    fuser ran, nearly all ran fused code. A crash is a finding, not a declined case, so it is left
    out of the share, and there must be few enough for the share to mean something."""
    backend = get_backend(name)
    rng = random.Random(11)
    jobs = []
    for seed in range(DRAWS):
        config = GenConfig(features=swarm(rng, backend.features), shapes=backend.shapes, max_ops=rng.choice((2, 3, 12)))
        jobs.append(graph_job(seed, name, generate(seed, config), 60))
    with case_pool(name, 2, 60) as pool:
        results = [judge(name, reply) for reply in run_jobs(pool, jobs)]
    ran = [r for r in results if r.outcome not in CRASHES]
    assert len(ran) >= DRAWS // 2
    fused = sum(bool(r.fused) for r in ran)
    assert fused / len(ran) >= least_fused, (fused, len(ran))
