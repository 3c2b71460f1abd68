"""Cases drawn for a TorchScript fuser exercise fused code: the generator draws what the fuser
fuses (the registry's `fusers` field, the backend's features), so few cases are declined
wholesale. Measured on the real fusers, on the campaign's own case stream."""
from __future__ import annotations

import collections

import pytest

from fuzzfuse.backends import get_backend
from fuzzfuse.campaign import Campaign, case_seed
from fuzzfuse.ir import OPS
from fuzzfuse.runner import run_case
from fuzzfuse.strategies import generate

CASES = 60


def _outcomes(name: str, tmp_path) -> collections.Counter:
    campaign = Campaign(name, tmp_path, seed=3, workers=1, max_cases=CASES)
    backend = get_backend(name)
    counts: collections.Counter = collections.Counter()
    for i in range(CASES):
        result = run_case(generate(case_seed(3, i), campaign.config_for(i)), backend)
        declined = result["outcome"] == "unfused" and result["signature"]["kind"] == "no-fusion"
        counts["declined" if declined else "engaged"] += 1
        counts["fused"] += bool(result["fused"])
    return counts


@pytest.mark.parametrize("name, most_declined", [("torchscript:nnc", 0.15), ("torchscript:onednn", 0.3)])
def test_few_cases_drawn_for_a_torchscript_fuser_are_declined_wholesale(name, most_declined, tmp_path):
    """Before the fusers' features, 44% of NNC's cases and 64% of oneDNN's were declined."""
    counts = _outcomes(name, tmp_path)
    assert counts["declined"] / CASES <= most_declined, counts


def test_a_fusers_features_are_the_ops_the_registry_says_it_fuses():
    for name, fuser in [("torchscript:nnc", "nnc"), ("torchscript:onednn", "onednn")]:
        features = get_backend(name).features
        assert features.ops and all(fuser in OPS[op].fusers for op in features.ops)
        assert features.min_ops == 2  # neither fuses a lone op
    assert "float16" not in get_backend("torchscript:nnc").features.dtypes  # NNC declines it on CPU
