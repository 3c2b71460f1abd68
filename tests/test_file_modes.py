"""Files a campaign or a reduction writes follow the user's umask, as any other program's would: a
campaign directory shared over NFS by a group stays readable (and writable, with umask 002)."""
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzfuse.corpus import Case, save_case
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.job import backend_for, run_case
from fuzzfuse.verdict import Outcome

ROOT = Path(__file__).parent.parent
CRASH = "custom:tests.buggy_backends:CrashOnSumSigmoid"


def _as_group_writable(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    code = f"import os, sys; os.umask(0o002); from fuzzfuse.cli import main; sys.exit(main({list(argv)!r}))"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=600)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_campaigns_files_follow_the_umask(tmp_path):
    done = _as_group_writable("fuzz", "--backend", "eager", "--max-cases", "3", "--workers", "1", "--no-reduce",
                              "--out", str(tmp_path / "run"), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    for name in ("summary.json", "state.json"):
        assert _mode(tmp_path / "run" / name) == 0o664, name
    assert _mode(tmp_path / "run") == 0o775


@pytest.mark.slow
def test_a_minimized_repro_folder_follows_the_umask(tmp_path):
    b = GraphBuilder()
    x = b.tensor((3, 4), "float32")
    graph = b.build([b.add("sigmoid", b.add("sum", b.add("exp", x), dims=[1], keepdim=True))])
    found = run_case(graph, backend_for(CRASH))
    path = save_case(tmp_path / "cases", Case(graph, CRASH, outcome=Outcome.CRASH, signature=found.signature))
    done = _as_group_writable("reduce", str(path), "--backend", CRASH, "--workers", "1", "--budget", "20",
                              "--out", str(tmp_path / "minimized"), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    (repro,) = (tmp_path / "minimized").iterdir()
    assert _mode(repro) == 0o775
    assert {f.name: _mode(f) for f in repro.iterdir()} == {f.name: 0o664 for f in repro.iterdir()}
    assert json.loads((repro / "case.json").read_text())["backend"] == CRASH
