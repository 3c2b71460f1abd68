"""Long campaigns: a SIGKILL at any moment loses nothing and `fuzz --resume` goes on from there;
hosts sharing one directory write their own shards and never clobber each other. Real NNC
campaigns in real subprocesses, killed for real."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzzfuse.campaign import Campaign
from fuzzfuse.checkpoint import DirectoryClaim, DirectoryInUse, load_state
from fuzzfuse.corpus import Case, load_case
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.minimize import reduce_case
from fuzzfuse.verdict import Outcome

BUGGY = "custom:tests.buggy_backends:"


def _fuzz(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fuzzfuse", "fuzz", "--backend", "torchscript:nnc",
                             "--workers", "1", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _corpus(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((directory / "corpus").glob("*.json"))}


def _wait_for(predicate, timeout: float) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, "timed out"
        time.sleep(0.2)


def _cases_so_far(directory: Path) -> int:
    try:
        return json.loads((directory / "state.json").read_text())["stats"]["cases"]
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.slow
def test_sigkilled_campaign_resumes_and_loses_nothing(tmp_path):
    out = tmp_path / "run"
    proc = _fuzz("--max-cases", "500", "--seed", "5", "--out", str(out), "--no-reduce")
    _wait_for(lambda: _cases_so_far(out) >= 120 and len(_corpus(out)) >= 3, timeout=300)
    os.killpg(proc.pid, signal.SIGKILL)  # the campaign and its workers, mid-flight
    proc.wait()
    before_corpus = _corpus(out)
    before = load_state(out)
    assert 0 < before.stats.cases < 500
    assert (out / ".campaign.lock").exists()  # left behind by the killed process

    resumed = subprocess.run([sys.executable, "-m", "fuzzfuse", "fuzz", "--resume", str(out)],
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    after_corpus = _corpus(out)
    after = load_state(out)
    summary = json.loads((out / "summary.json").read_text())
    # Nothing lost: every case file from before the kill is still there, unchanged.
    assert set(before_corpus) <= set(after_corpus)
    assert all(after_corpus[name] == text for name, text in before_corpus.items())
    # The seed stream went on to the original budget; stats and signatures carried over.
    assert after.next_index == 500 and after.in_flight == []
    assert summary["cases"] >= 500 and summary["cases"] > before.stats.cases
    assert set(before.stats.signatures) <= {s["key"] for s in summary["signatures"]}
    assert summary["seconds"] > before.stats.elapsed_before
    assert not (out / ".campaign.lock").exists()
    for name in after_corpus:
        load_case(out / "corpus" / name)  # every file parses: no torn writes


@pytest.mark.slow
def test_resume_with_more_cases_continues_the_seed_stream(tmp_path):
    # Extra input sets are as many as each worker's measured costs pay for: off, to compare seed streams.
    first = Campaign("torchscript:nnc", tmp_path, seed=2, workers=1, max_cases=30, reduce=False, extra_runs=False)
    first.run()
    again = Campaign.resume(tmp_path, more_cases=20)
    summary = again.run()
    assert summary["cases"] == 50 and load_state(tmp_path).next_index == 50
    # The same cases as one campaign of 50: the seed stream is a function of (seed, index).
    fresh = Campaign("torchscript:nnc", tmp_path / "fresh", seed=2, workers=1, max_cases=50, reduce=False,
                     extra_runs=False)
    fresh_summary = fresh.run()
    assert set(_corpus(tmp_path)) == set(_corpus(tmp_path / "fresh"))
    assert {s["key"] for s in summary["signatures"]} == {s["key"] for s in fresh_summary["signatures"]}


@pytest.mark.slow
def test_two_hosts_share_a_directory_through_shards(tmp_path):
    """Two processes stand in for two hosts: same --out, own --shard; a third process that
    forgets --shard while one runs is refused with exit code 2, and nothing is clobbered."""
    hosts = [_fuzz("--max-cases", "150", "--seed", "1", "--out", str(tmp_path), "--shard", name, "--no-reduce")
             for name in ("host-a", "host-b")]
    _wait_for(lambda: (tmp_path / "shards" / "host-a" / ".campaign.lock").exists(), timeout=120)
    intruder = subprocess.run([sys.executable, "-m", "fuzzfuse", "fuzz", "--backend", "torchscript:nnc",
                               "--max-cases", "5", "--out", str(tmp_path), "--shard", "host-a"],
                              capture_output=True, text=True, timeout=300)
    for proc in hosts:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    # Refused either way: "in use" while host-a runs, "already holds a campaign" once it has finished
    # (a loaded machine can start the intruder that late).
    assert intruder.returncode == 2 and ("in use" in intruder.stderr or "already holds a campaign" in intruder.stderr), \
        intruder.stderr
    summaries = [json.loads((tmp_path / "shards" / n / "summary.json").read_text()) for n in ("host-a", "host-b")]
    assert all(s["cases"] == 150 for s in summaries)
    a, b = (set(_corpus(tmp_path / "shards" / n)) for n in ("host-a", "host-b"))
    assert a and b and a != b  # each shard draws its own seeds
    for path in tmp_path.rglob("*.json"):
        json.loads(path.read_text())
    assert not list(tmp_path.rglob("*.tmp"))


def test_directory_claim_refuses_a_live_holder_and_takes_over_a_dead_one(tmp_path):
    with DirectoryClaim(tmp_path):
        with pytest.raises(DirectoryInUse, match="in use"):
            with DirectoryClaim(tmp_path):
                pass
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / ".campaign.lock").write_text(f"{os.uname().nodename} {dead.stdout.strip()}\n")
    with DirectoryClaim(tmp_path) as claim:
        assert claim.owner in (tmp_path / ".campaign.lock").read_text()


def test_reduction_resumes_from_its_checkpoint(tmp_path):
    b = GraphBuilder()
    x = b.tensor((3, 4), "float32")
    y = b.add("sigmoid", b.add("sum", b.add("mul", b.add("exp", x), 2.0), dims=[1], keepdim=True))
    graph = b.build([b.add("add", b.add("neg", x), y)])
    backend = BUGGY + "CrashOnSumSigmoid"
    from fuzzfuse.job import backend_for, run_case
    found = run_case(graph, backend_for(backend))
    case = Case(graph, backend, outcome=Outcome.CRASH, signature=found.signature)
    checkpoint = tmp_path / "reducing" / "case.json"
    first = reduce_case(case, backend, workers=1, checkpoint=checkpoint)
    saved = load_case(checkpoint)
    assert saved.graph.size == first.graph.size < graph.size
    # A resumed reduction starts from the checkpoint: it only has to confirm the fixpoint.
    again = reduce_case(case, backend, workers=1, checkpoint=checkpoint)
    assert again.graph.size == first.graph.size and again.stats.queries < first.stats.queries


def test_resume_checks_devices_like_a_new_campaign(tmp_path):
    Campaign("torchscript:nnc", tmp_path, seed=1, workers=1, max_cases=5, reduce=False).run()
    r = subprocess.run([sys.executable, "-m", "fuzzfuse", "fuzz", "--resume", str(tmp_path), "--devices", "0",
                        "--max-cases", "5"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "does not run on a GPU" in r.stderr
    assert load_state(tmp_path).next_index == 5  # refused before anything ran


def test_compile_seconds_by_kernel_count_survive_a_resume():
    """The compile tail by kernels per case (nvFuser reports kernels): summed across a resume, with
    each count's share of all compile seconds."""
    from fuzzfuse.checkpoint import Stats
    stats = Stats()
    for seconds, kernels in ((0.2, 1), (0.4, 1), (1.2, 3), (0.5, None)):
        stats.add_compile(seconds, kernels)
    resumed = Stats.from_json(json.loads(json.dumps(stats.to_json())))
    resumed.add_compile(0.6, 3)
    summary = resumed.summary("nvfuser", {}, {})
    by_kernels = summary["compile_by_kernels"]
    assert list(by_kernels) == ["1", "3"]
    assert by_kernels["1"] == {"cases": 2, "mean": 0.3, "share": 0.25}
    assert by_kernels["3"] == {"cases": 2, "mean": 0.9, "share": 0.75}
    assert len(resumed.compile_seconds) == 5
    # Compile times are skewed: the mean (every case, counted kernels or not) beside the median.
    assert summary["median_compile_seconds"] == 0.5 and summary["mean_compile_seconds"] == 0.58
