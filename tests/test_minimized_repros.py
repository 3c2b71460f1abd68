"""Every committed repro under minimized/ runs on its own, in a clean directory, and fails as
recorded (exit code 1); repros for a backend this machine lacks skip with the reason."""
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzfuse.backends import availability

MINIMIZED = Path(__file__).parent.parent / "minimized"
REPROS = sorted(p.parent for p in MINIMIZED.glob("*/repro.py"))
AVAILABLE = availability()


def test_minimized_holds_real_repros():
    assert REPROS, "minimized/ should hold the repros of real failures found by campaigns"


@pytest.mark.parametrize("directory", REPROS, ids=[p.name for p in REPROS])
def test_repro_fails_as_recorded_in_a_clean_directory(directory, tmp_path):
    case = json.loads((directory / "case.json").read_text())
    reason = AVAILABLE.get(case["backend"], f"unknown backend {case['backend']}")
    if reason is not None:
        pytest.skip(f"{case['backend']}: {reason}")
    for name in ("repro.py", "inputs.pt"):
        if (directory / name).exists():
            shutil.copy(directory / name, tmp_path)
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    if case["verification"]["status"] == "flaky":
        pytest.skip("recorded as flaky")
    outcome = case["signature"]["outcome"]
    if outcome == "hard-crash":  # the process dies by the recorded signal
        assert run.returncode < 0 and signal.Signals(-run.returncode).name == case["signature"]["kind"], run.stderr
        return
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAIL" in run.stdout
    if outcome == "crash":
        assert case["signature"]["kind"] in run.stdout + run.stderr
    if outcome == "unfused":
        assert "nothing was fused" in run.stdout
