"""Any torch.compile backend: registered ones (dynamo:eager, dynamo:aot_eager) run real graphs and
match eager; a user's backend that is wrong on a pattern is found by a real campaign, reduced to
that pattern, and saved as a repro that imports the backend by its spec; crashes are staged where
the user's code raised; unknown backends are bad input."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzfuse.backends import Unavailable, availability, get_backend
from fuzzfuse.campaign import Campaign
from fuzzfuse.corpus import load_case
from fuzzfuse.export import read_verdict
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.job import run_case
from fuzzfuse.strategies import Features, GenConfig, generate

ROOT = Path(__file__).parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # a fresh process that imports the backends' modules
BUGGY = "dynamo:tests.buggy_dynamo_backends:"
SMALL = Features(ops=("add", "neg", "exp", "sum", "sigmoid"), patterns=())


def _graph(*ops):
    """x -> ops[0] -> ops[1] ...: sum reduces the last dim."""
    b = GraphBuilder()
    v = b.tensor([3, 4])
    for op in ops:
        v = b.add(op, v, dims=[1], keepdim=False) if op == "sum" else b.add(op, v)
    return b.build([v])


@pytest.mark.parametrize("name", ["dynamo:eager", "dynamo:aot_eager", "dynamo:examples.dynamo_backend:my_backend"])
def test_correct_backends_pass_on_real_graphs_with_evidence(name):
    backend = get_backend(name)
    for seed in range(4):
        graph = generate(seed, GenConfig(shapes=backend.shapes))
        result = run_case(graph, backend)
        assert result.outcome == "pass", (seed, result)
        assert result.fused is True and result.evidence.details["graphs"] == 1 and result.evidence.details["calls"] == 1


def test_a_graph_dynamo_need_not_compile_is_unfused():
    b = GraphBuilder()
    x = b.tensor([3, 4])
    graph = b.build([x])  # the output is the input: dynamo hands the backend nothing
    result = run_case(graph, get_backend("dynamo:aot_eager"))
    assert result.outcome == "unfused" and result.evidence.details["graphs"] == 0


def test_user_backend_crashes_are_staged_where_they_were_raised():
    backend = get_backend(BUGGY + "crash_backend")
    compile_crash = run_case(_graph("exp"), backend).signature
    assert (compile_crash.outcome, compile_crash.stage, compile_crash.kind, compile_crash.message) == (
        "crash", "compile", "NotImplementedError", "exp is not lowered yet")
    run_crash = run_case(_graph("tanh"), backend).signature
    assert (run_crash.stage, run_crash.kind) == ("run", "RuntimeError")
    assert "illegal memory access" in run_crash.message
    assert run_case(_graph("cos"), backend).outcome == "pass"


def test_a_cuda_fault_from_any_backend_replaces_its_worker_and_is_not_rerun_there():
    """A kernel fault poisons the process's CUDA context: whichever backend reports it, the worker
    is replaced (else every later case of that worker fails in eager, as "invalid"), and the
    reference route is not run in the poisoned process. A crash of another kind keeps its worker."""
    backend = get_backend(BUGGY + "crash_backend")
    fault = run_case(_graph("tanh"), backend)
    assert fault.outcome == "crash" and fault.restart_worker is True
    assert backend.reference_route == "dynamo:aot_eager"
    assert fault.attribution.outcome is None and "CUDA fault" in fault.attribution.detail
    other = run_case(_graph("exp"), backend)
    assert other.outcome == "crash" and other.restart_worker is False


@pytest.mark.slow
def test_unknown_backends_are_unavailable_and_bad_input():
    with pytest.raises(Unavailable, match="has no attribute 'nope'"):
        get_backend("dynamo:examples.dynamo_backend:nope")
    for name, reason in [("dynamo:nope", "unknown torch.compile backend 'nope'"),
                         ("dynamo:no.such.module:fn", "No module named 'no'")]:
        with pytest.raises(Unavailable, match=reason):
            get_backend(name)
        r = subprocess.run([sys.executable, "-m", "fuzzfuse", "fuzz", "--backend", name, "--max-cases", "1"],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and reason in r.stderr


def test_fuzzfuse_lists_registered_torch_compile_backends():
    status = availability()
    assert status["dynamo:eager"] is None and status["dynamo:aot_eager"] is None
    assert status["inductor"] is None  # the dedicated Inductor backend is still there


@pytest.mark.slow
def test_wrong_user_backend_is_found_minimized_and_its_repro_imports_it(tmp_path):
    summary = Campaign(BUGGY + "wrong_backend", tmp_path, seed=3, workers=2, max_cases=40, timeout=60,
                       features=SMALL, swarm=False, reduce_budget=150).run()
    assert summary["outcomes"].get("pass", 0) >= 1
    sigs = [s for s in summary["signatures"] if s["signature"]["outcome"] == "mismatch"]
    assert sigs, summary["signatures"]
    minimized = sigs[0]["minimized"]
    assert minimized["ops_after"] == 2 < minimized["ops_before"]
    directory = tmp_path / minimized["path"]
    case = load_case(directory / "case.json")
    assert sorted(n.op for n in case.graph.nodes) == ["sigmoid", "sum"]
    assert case.verification.status == "reproduces"
    # The repro is standalone: it imports the user's backend by its spec, in a fresh process.
    repro = (directory / "repro.py").read_text()
    assert "import_module('tests.buggy_dynamo_backends'), 'wrong_backend')" in repro
    assert "from fuzzfuse" not in repro and "import fuzzfuse" not in repro
    run = subprocess.run([sys.executable, str(directory / "repro.py")], cwd=tmp_path, env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and (read_verdict(run.stdout) or {}).get("outcome") == "mismatch", \
        run.stdout + run.stderr
    # Pointed at a correct backend, the same repro passes: it tests the backend, not a fixed answer.
    fixed = tmp_path / "fixed.py"
    fixed.write_text(repro.replace("'tests.buggy_dynamo_backends'), 'wrong_backend'",
                                   "'examples.dynamo_backend'), 'my_backend'"))
    run = subprocess.run([sys.executable, str(fixed)], cwd=tmp_path, env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and (read_verdict(run.stdout) or {}).get("outcome") == "pass", run.stdout + run.stderr


@pytest.mark.slow
def test_cli_imports_a_user_backend_from_the_current_directory(tmp_path):
    """As from the installed `fuzzfuse` script, whose sys.path lacks the current directory: the
    parent and its workers both import the user's module from there."""
    (tmp_path / "my_compiler.py").write_text((ROOT / "examples" / "dynamo_backend.py").read_text())
    script = "import sys; sys.path.remove(''); from fuzzfuse.cli import main; sys.exit(main())"
    r = subprocess.run([sys.executable, "-c", script, "fuzz", "--backend", "dynamo:my_compiler:my_backend",
                        "--max-cases", "4", "--workers", "1", "--no-reduce", "--out", "out"],
                       cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 cases" in r.stdout and "'pass': 4" in r.stdout, r.stdout
