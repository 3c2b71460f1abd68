"""A campaign's time and its user's attention: --time bounds the whole run, reductions included,
also when every case hangs (what is left waits for --resume, and the output says so); the first
Ctrl-C stops at once, starts no reduction and says how to resume; a fresh seed by default, printed."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzzfuse.campaign import Campaign
from fuzzfuse.strategies import Features

ROOT = Path(__file__).parent.parent
BUGGY = "custom:tests.buggy_backends:"
SMALL = Features(ops=("add", "mul", "neg", "exp", "tanh", "cos", "sum", "sigmoid"), patterns=())


def _fuzz_cli(*args, **kwargs):
    """The CLI as a terminal starts it: with Ctrl-C's SIGINT at its default. A test run started in
    the background of a script inherits SIGINT ignored (the shell's rule for background jobs), and
    Python then never raises KeyboardInterrupt."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "fuzzfuse", "fuzz", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)


@pytest.mark.slow
def test_time_bounds_the_reductions_and_what_is_left_is_finished_on_resume(tmp_path):
    from fuzzfuse.campaign import STOP_GRACE

    # Few ops, so that a sum feeds a sigmoid within the first cases even where a loaded machine runs
    # only a few dozen in the 10 s (CI's did: the run found nothing to reduce).
    campaign = Campaign(BUGGY + "SlowCrashOnSumSigmoid", tmp_path, seed=1, workers=2, time_limit=10.0,
                        features=Features(ops=("add", "neg", "sum", "sigmoid"), patterns=()), swarm=False,
                        max_ops=12, timeout=30.0)
    start = time.time()
    summary = campaign.run()
    assert summary["outcomes"].get("crash")
    # At the deadline the cases and queries in flight are abandoned; a repro being verified gets
    # STOP_GRACE to finish; then worker shutdown and exit.
    assert time.time() - start < 10.0 + STOP_GRACE + 8.0
    wall = summary["wall_seconds"]
    assert wall["fuzzing"] + wall["start-up"] > 9.5  # it fuzzed up to its deadline: reductions ran beside it
    in_flight = json.loads((tmp_path / "state.json").read_text())["in_flight"]
    resumed = Campaign.resume(tmp_path, backend=BUGGY + "SlowCrashOnSumSigmoid")
    resumed.run()
    assert not resumed.reducer_queue() and list((tmp_path / "minimized").iterdir())
    # Its fuzzing budget was spent: the resumed run only ran the cases abandoned at the deadline.
    assert resumed.stats.cases == campaign.stats.cases + len(in_flight)


@pytest.mark.slow
def test_time_bounds_a_run_whose_every_case_hangs(tmp_path):
    """A fuser stuck on every case must not hold a campaign past its --time: the cases in flight at
    the deadline are abandoned (they run again on --resume) and the run ends within its --time plus
    one per-case timeout plus 30 s, the reductions of the hang it found stopped where they were."""
    out, timeout = tmp_path / "run", 10
    start = time.time()
    proc = _fuzz_cli("--backend", "custom:tests.hanging_backends:HangAlways", "--time", "60", "--workers", "2",
                     "--timeout", str(timeout), "--out", str(out), "--seed", "1", "--max-ops", "4")
    _, stderr = proc.communicate(timeout=60 + timeout + 60)
    wall = time.time() - start
    assert proc.returncode == 0, stderr[-2000:]
    assert wall < 60 + timeout + 30, wall
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outcomes"].get("hang", 0) >= 2 and not summary["outcomes"].get("pass")
    assert json.loads((out / "state.json").read_text())["in_flight"]  # abandoned, for --resume
    assert abs(sum(v for k, v in summary["wall_seconds"].items() if k != "total")
               - summary["wall_seconds"]["total"]) < 0.5


@pytest.mark.slow
def test_first_ctrl_c_stops_fuzzing_reduces_nothing_and_says_how_to_resume(tmp_path):
    out = tmp_path / "run"
    # --reduce-share 0: no reduction while fuzzing, so that what the interrupt holds back shows.
    proc = _fuzz_cli("--backend", BUGGY + "WrongOnExp", "--time", "300", "--workers", "2", "--out", str(out),
                     "--max-ops", "6", "--seed", "1", "--reduce-share", "0", start_new_session=True)
    deadline = time.time() + 120
    while not list((out / "corpus").glob("*.json")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert list((out / "corpus").glob("*.json")), "the buggy backend's mismatch was never found"
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == f"interrupted: resume with fuzzfuse fuzz --resume {out}"
    assert (out / "state.json").exists() and not (out / "minimized").exists()
    resumed = subprocess.run([sys.executable, "-m", "fuzzfuse", "fuzz", "--resume", str(out), "--max-cases", "1",
                              "--backend", BUGGY + "WrongOnExp"], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert list((out / "minimized").iterdir())  # the reduction the interrupt held back ran on resume


@pytest.mark.slow
def test_a_default_seed_is_fresh_printed_and_recorded(tmp_path):
    seeds = []
    for run in ("a", "b"):
        proc = _fuzz_cli("--backend", "eager", "--max-cases", "2", "--workers", "1", "--no-reduce",
                         "--out", str(tmp_path / run))
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        seed = int(stderr.splitlines()[0].split()[1])
        assert stderr.splitlines()[0] == f"seed {seed} (rerun with --seed {seed})"
        assert json.loads((tmp_path / run / "summary.json").read_text())["seed"] == seed
        seeds.append(seed)
    assert seeds[0] != seeds[1]
