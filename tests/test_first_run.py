"""A new user's first run: the package installed into a fresh virtualenv (only what pyproject.toml
declares, nothing borrowed from the system's site-packages) runs the README Quickstart's campaign
to completion. A dependency the project uses but forgot to declare fails here first.

Building the virtualenv takes about a minute (torch's CPU wheel). `.ci/run` has built one already
and says so in FUZZFUSE_CI_VENV: the test then reuses it (the project is installed there, editable,
from this checkout); otherwise the test builds its own in a temporary directory."""
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def _fresh_venv(where: Path) -> Path:
    if os.environ.get("FUZZFUSE_CI_VENV"):
        return Path(os.environ["FUZZFUSE_CI_VENV"])
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    python = where / "bin" / "python"
    # The CPU build first, as the README says, so that pip keeps it rather than pulling CUDA.
    subprocess.run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0"], check=True, timeout=900)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(ROOT)], check=True, timeout=600)
    return where


def _quickstart_fuzz_command() -> list[str]:
    """The Quickstart's campaign command, as the README writes it (after its install steps)."""
    readme = (ROOT / "README.md").read_text()
    line = next(l for l in readme.splitlines() if "fuzzfuse fuzz" in l and "pip install" in l)
    return shlex.split(line[line.index("fuzzfuse fuzz"):])


@pytest.mark.slow
def test_quickstart_campaign_runs_to_completion_in_a_fresh_virtualenv(tmp_path):
    venv = _fresh_venv(tmp_path / "venv")
    command = _quickstart_fuzz_command()
    assert command[:2] == ["fuzzfuse", "fuzz"] and "--time" in command
    # Shorter than the README's minute, on 2 workers, into a directory of its own; the rest as written.
    command[command.index("--time") + 1] = "15"
    command[command.index("--out") + 1] = str(tmp_path / "quick")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run([*command, "--workers", "2"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "quick" / "summary.json").exists()
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


def test_ci_runs_the_readmes_full_test_command_in_a_fresh_virtualenv():
    readme = (ROOT / "README.md").read_text()
    full = next(l for l in readme.splitlines() if l.startswith("python3 -m pytest") and "--fuzzfuse-corpus minimized" in l)
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'python3 -m venv "$VENV"' in ci and 'rm -rf "$VENV"' in ci
    assert '"$VENV/bin/python" -m pip install -q torch==2.13.0' in ci
    assert f'"$VENV/bin/python"{full.removeprefix("python3")}' in ci.splitlines()
