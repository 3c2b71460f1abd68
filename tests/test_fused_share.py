"""Cases drawn for a TorchScript fuser exercise fused code: the generator draws what the fuser
fuses (the registry's `fusers` field, the backend's features), so few cases are declined
wholesale. Measured on the real fusers, by a campaign."""
from __future__ import annotations

import pytest

from fuzzfuse.backends import get_backend
from fuzzfuse.campaign import Campaign
from fuzzfuse.ir import OPS

CASES = 60


@pytest.mark.parametrize("name, most_declined", [("torchscript:nnc", 0.15), ("torchscript:onednn", 0.25)])
def test_few_cases_of_a_torchscript_fuser_campaign_are_declined_wholesale(name, most_declined, tmp_path):
    """Before the fusers' features, 44% of NNC's cases and 64% of oneDNN's were declined. The
    campaign's workers isolate the process from oneDNN's known segfaults."""
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
    assert get_backend("torchscript:onednn").features.chains  # it fuses an op into its producer's one use
    assert "float16" not in get_backend("torchscript:nnc").features.dtypes  # NNC declines it on CPU
