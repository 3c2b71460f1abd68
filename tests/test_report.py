"""The triage report after a resumed campaign: its timeline starts at the campaign's first start
and follows the samples, first-seen times never come before the recorded start, the legend names the
campaign, count axes tick at whole numbers, the failing-hits tile leaves coverage (unfused) out, and
a mismatch bucket shows the fused and eager values."""
import json
import re
import shutil
import time
from html import unescape
from pathlib import Path

import pytest

from fuzzfuse.campaign import Campaign
from fuzzfuse.report import _ticks, render
from fuzzfuse.triage import load

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """A real NNC campaign stopped, left idle for a while, then resumed."""
    out = tmp_path_factory.mktemp("campaign") / "nightly"
    Campaign("torchscript:nnc", out, seed=4, workers=1, max_cases=30, reduce=False).run()
    first = json.loads((out / "summary.json").read_text())
    time.sleep(2.0)
    Campaign.resume(out, more_cases=30).run()
    return out, first, json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_a_resumed_campaign_keeps_its_first_start_and_nothing_is_seen_before_it(resumed):
    out, first, summary = resumed
    assert summary["start"] == pytest.approx(first["start"])
    assert all(s["first_seen"] >= summary["start"] for s in summary["signatures"])
    # The timeline is on the clock of first-seen times: the idle gap between the runs shows.
    gap = [b[0] - a[0] for a, b in zip(summary["timeline"], summary["timeline"][1:])]
    assert max(gap) >= 2.0 and summary["timeline"][-1][1] == summary["cases"] == 60


def _legend(html: str) -> list[str]:
    return [unescape(x) for x in re.findall(r'<span><i style="background:[^"]*"></i>([^<]*)</span>', html)]


@pytest.mark.slow
def test_the_report_of_a_resumed_campaign_draws_it_from_its_start_with_its_name(resumed):
    out, _, summary = resumed
    triage = load(out)
    html = render(triage)
    assert "." not in _legend(html) and "nightly" in _legend(html)
    (chart,) = re.findall(r'<h3>Cases over time</h3><svg.*?</svg>', html, re.S)
    line = re.search(r'<polyline class="series" points="([^"]*)"', chart).group(1).split()
    # The line starts at the left edge (the campaign's start is the page's time origin), at 0 cases.
    x0, y0 = map(float, line[0].split(","))
    assert x0 == pytest.approx(48.0, abs=0.1)
    ticks = re.findall(r'<text class="tick" x="42" y="[^"]*" text-anchor="end">([^<]*)</text>', chart)
    assert ticks and all(float(t).is_integer() for t in ticks)
    hits = int(re.search(r"<b>(\d+)</b><span>failing hits</span>", html).group(1))
    failing = sum(s["count"] for s in summary["signatures"] if s["outcome"] != "unfused")
    assert any(s["outcome"] == "unfused" for s in summary["signatures"])
    assert hits == failing


@pytest.mark.parametrize("top", [0.7, 3.2, 8.4, 10.5, 26.0, 1234.0])
def test_count_ticks_are_whole_numbers(top):
    ticks = _ticks(top, integer=True)
    assert all(float(t).is_integer() for t in ticks) and ticks[-1] >= top and len(ticks) <= 7


def test_a_mismatch_bucket_shows_the_fused_and_eager_values(tmp_path):
    source = next((ROOT / "minimized").glob("torchscript-nnc-mismatch-*/"))
    shutil.copytree(source, tmp_path / "minimized" / source.name)
    detail = json.loads((source / "case.json").read_text())["detail"]
    fused, eager = re.findall(r"fused ([^\s;]+);? eager ([^\s;]+)", detail.splitlines()[0])[-1]  # the worst element
    html = render(load(tmp_path / "minimized"))
    facts = re.search(r"<dt>fused vs eager</dt><dd>([^<]*)</dd>", html)
    assert facts and f"fused {fused}, eager {eager}" in unescape(facts.group(1))
