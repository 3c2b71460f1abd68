"""The regression-corpus pytest plugin and `fuzzfuse export`, on corpora built from the repo's real
NNC/oneDNN repros: open bugs xfail strictly, fixed ones must pass, a repro failing differently than
recorded fails, and an exported file keeps those verdicts without fuzzfuse."""
import ast
import json
import re
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch

import fuzzfuse.repro
from fuzzfuse.backends import availability, get_backend
from fuzzfuse.cli import main
from fuzzfuse.corpus import load_case
from fuzzfuse.backends.base import machine_versions
from fuzzfuse.export import Recorded, judged_script, skip_reason
from fuzzfuse.hostcpu import host_isa

pytest_plugins = ["pytester"]

MINIMIZED = Path(__file__).parent.parent / "minimized"


def committed(backend: str, outcome: str, exact_inputs: bool = False) -> Path:
    """The smallest committed forward repro of `backend` that failed with `outcome` and reproduces,
    with an input of exact values if asked (which a repro may save to inputs.bin; directories are
    named by root cause, so the tests pick theirs by what it records). The tests here use its real
    bug as their fixture, so a repro whose directory holds FIXED (its bug gone from torch) is never
    picked: once the plugin's strict XPASS has moved a bug to the fixed set, the next one serves."""
    found = []
    for path in MINIMIZED.glob("[!.]*/case.json"):
        if (path.parent / "FIXED").exists():
            continue
        case = json.loads(path.read_text())
        forward = not any(i.get("requires_grad") for i in case["graph"]["inputs"])
        exact = any("exact" in (i.get("values") or {}) for i in case["graph"]["inputs"])
        if case["backend"] == backend and case["outcome"] == outcome and forward and (exact or not exact_inputs) and \
                case["verification"]["status"] == "reproduces" and not (path.parent / "inputs.bin").exists():
            found.append((len(case["graph"]["nodes"]), path.parent.name, path.parent))
    if not found:
        raise LookupError(f"no committed {backend} {outcome} repro")
    return min(found)[2]


CRASH = committed("torchscript:nnc", "crash")
MISMATCH = committed("torchscript:nnc", "mismatch", exact_inputs=True)
SEGV = committed("torchscript:onednn", "hard-crash")


EAGER = "list(fn(*inputs)), True"
# Passes the first time it runs in a directory, fails as it always did after that.
INTERMITTENT = "run_fused(inputs) if os.path.exists('ran') else (open('ran', 'w').close(), list(fn(*inputs)), True)[1:]"


def entry(corpus: Path, name: str, source: Path, *, passes=False, fixed=None, **recorded) -> Path:
    """A copy of a real repro directory. passes: its fused run replaced by eager (the bug "fixed"),
    or by another expression; fixed: the text of a FIXED file; recorded: case.json signature fields
    or a verification status."""
    d = corpus / name
    shutil.copytree(source, d)
    if passes:
        script = judged_script(d)  # the full oracle the plugin runs
        text = script.read_text()
        assert "actual, fused = run_fused(inputs)" in text
        fused_run = EAGER if passes is True else passes
        script.write_text("import os\n" + text.replace("actual, fused = run_fused(inputs)", f"actual, fused = {fused_run}"))
    if fixed is not None:
        (d / "FIXED").write_text(fixed)
    case = json.loads((d / "case.json").read_text())
    for key, value in recorded.items():
        if key == "status":
            case["verification"]["status"] = value
        elif key == "backend":
            case["backend"] = value
        else:
            case["signature"][key] = value
    (d / "case.json").write_text(json.dumps(case))
    return d


def external_inputs(corpus: Path, name: str, source: Path, monkeypatch) -> Path:
    """A real repro regenerated with its inputs in its inputs file (as large inputs are saved)."""
    case = load_case(source / "case.json")
    monkeypatch.setattr(fuzzfuse.repro, "INLINE_LIMIT", 0)
    files = fuzzfuse.repro.repro_files(case.graph, get_backend(case.backend), case.signature, case.versions)
    assert "inputs.bin" in files and "torch.frombuffer(" in files["repro.py"] and "torch.load(" not in files["repro.py"]
    d = entry(corpus, name, source)
    (d / "repro.py").write_text(files["repro.py"])
    (d / "inputs.bin").write_bytes(files["inputs.bin"])
    return d


def expect(result, *patterns):
    """Each pattern matches some line of the run's output, in any order."""
    for pattern in patterns:
        result.stdout.fnmatch_lines([pattern])


def test_minimized_holds_real_repros():
    assert sorted(MINIMIZED.glob("*/repro.py")), "minimized/ should hold the repros of real failures found by campaigns"


def test_a_cpu_repro_recorded_on_a_host_of_another_isa_skips_and_one_of_this_isa_runs(tmp_path):
    """Four CPU repros recorded on an AVX-512 host, pinned to ATEN_CPU_CAPABILITY=default, passed on
    an AVX2 one (libm's exp, oneDNN's bf16 linear): the pin does not cover the host's own ISA, so
    the case records it and the plugin skips it on a host of another ISA, with the reason."""
    here = host_isa()
    if not here:
        pytest.skip("this host's ISA cannot be read (no /proc/cpuinfo)")
    other = "avx2" if here == "avx512" else "avx512"
    committed = json.loads((MINIMIZED / "torchscript-onednn-mismatch-values-float-1a32e122" / "case.json").read_text())
    assert committed["versions"]["host_isa"] == "avx512"
    for isa, skipped in ((other, True), (here, False), ("", False)):
        case = {**committed, "versions": {**committed["versions"], "host_isa": isa}}
        (tmp_path / "case.json").write_text(json.dumps(case))
        reason = skip_reason(Recorded.read(tmp_path))
        assert bool(reason) == skipped and (not skipped or f"recorded on an {isa.upper()} host" in reason), reason
    assert machine_versions("cpu").get("host_isa") == here


def test_the_plugin_is_registered_through_the_pytest11_entry_point():
    assert [e.value for e in entry_points(group="pytest11") if e.name == "fuzzfuse"] == ["fuzzfuse.pytest_plugin"]


@pytest.mark.slow
def test_open_bugs_xfail_while_they_fail_and_a_pass_fails_as_strict_xpass(pytester, monkeypatch):
    corpus = pytester.mkdir("corpus")
    entry(corpus, "crash", CRASH)
    external_inputs(corpus, "mismatch-inputs-file", MISMATCH, monkeypatch)
    entry(corpus, "now-passes", CRASH, passes=True)
    result = pytester.runpytest("--fuzzfuse-corpus", str(corpus), "-rA")
    result.assert_outcomes(xfailed=2, failed=1)
    expect(result, "XFAIL corpus::crash *", "XFAIL corpus::mismatch-inputs-file *",
                                 "FAILED corpus::now-passes*")
    assert "[XPASS(strict)]" in result.stdout.str() and "fixed? move it to the fixed set" in result.stdout.str()


@pytest.mark.slow
def test_an_open_bug_that_passes_once_and_then_fails_as_recorded_is_still_open(pytester):
    corpus = pytester.mkdir("corpus")
    entry(corpus, "intermittent", CRASH, passes=INTERMITTENT)
    result = pytester.runpytest("--fuzzfuse-corpus", str(corpus), "-rA")
    result.assert_outcomes(xfailed=1)
    expect(result, "XFAIL corpus::intermittent *")


@pytest.mark.slow
def test_fixed_bugs_must_pass_and_a_comeback_is_a_regression(pytester):
    corpus = pytester.mkdir("corpus")
    entry(corpus, "fixed", CRASH, passes=True, fixed="")
    entry(corpus, "came-back", CRASH, fixed="torch 9.9 (pytorch#1)")
    result = pytester.runpytest("--fuzzfuse-corpus", str(corpus), "-rA")
    result.assert_outcomes(passed=1, failed=1)
    expect(result, "PASSED corpus::fixed", "*regression: bug came back*FIXED says: torch 9.9*")


def test_a_repro_failing_differently_than_recorded_fails_instead_of_xfailing(pytester):
    corpus = pytester.mkdir("corpus")
    entry(corpus, "other-exception", CRASH, kind="ValueError")
    result = pytester.runpytest("--fuzzfuse-corpus", str(corpus), "-rA")
    result.assert_outcomes(failed=1)
    expect(result, "*fails differently than recorded*recorded crash ValueError*got crash RuntimeError*")


@pytest.mark.skipif(availability()["torchscript:onednn"] is not None, reason="needs oneDNN Graph")
def test_hard_crashes_are_matched_by_their_signal(pytester):
    corpus = pytester.mkdir("corpus")
    entry(corpus, "segv", SEGV)
    entry(corpus, "recorded-abort", SEGV, kind="SIGABRT")
    result = pytester.runpytest("--fuzzfuse-corpus", str(corpus), "-rA")
    result.assert_outcomes(xfailed=1, failed=1)
    expect(result, "XFAIL corpus::segv *", "*recorded hard-crash SIGABRT*got hard-crash (died by SIGSEGV)*")


def test_unavailable_backends_and_flaky_repros_skip_and_a_corrupt_entry_fails(pytester):
    corpus = pytester.mkdir("corpus")
    entry(corpus, "elsewhere", CRASH, backend="custom:no_such_fuser.module:Backend")
    entry(corpus, "flaky", CRASH, status="flaky")
    broken = entry(corpus, "broken", CRASH)
    (broken / "case.json").write_text("{ not json")
    result = pytester.runpytest("--fuzzfuse-corpus", str(corpus), "-rA")
    result.assert_outcomes(skipped=2, failed=1)
    expect(result, "*custom:no_such_fuser.module:Backend: backend * cannot be loaded*",
                                 "*recorded as flaky*", "*broken*cannot read the repro's case.json*")


def test_a_missing_corpus_directory_is_a_usage_error(pytester):
    result = pytester.runpytest("--fuzzfuse-corpus", "nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fuzzfuse-corpus nowhere: not a directory*"])


@pytest.mark.slow
def test_export_writes_one_self_contained_file_with_the_same_verdicts(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus"
    entry(corpus, "crash", CRASH)
    external_inputs(corpus, "mismatch-inputs-file", MISMATCH, monkeypatch)
    entry(corpus, "fixed", CRASH, passes=True, fixed="torch 9.9")
    entry(corpus, "now-passes", CRASH, passes=True)
    out = tmp_path / "upstream" / "test_fuser_regressions.py"
    assert main(["export", str(corpus), "--pytest", str(out)]) == 0
    source = out.read_text()
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(source))
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert "fuzzfuse" not in imported and "from fuzzfuse" not in source
    assert "def run_fused(inputs):" in source  # the repros are readable in the file
    # fuzzfuse made unimportable: a poisoned package first on the path, plugin autoload off.
    poison = tmp_path / "poison" / "fuzzfuse"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('an exported file must not need fuzzfuse')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(poison.parent), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    assert subprocess.run([sys.executable, "-c", "import fuzzfuse"], env=env, cwd=out.parent).returncode != 0
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", out.name],
                         env=env, cwd=out.parent, capture_output=True, text=True, timeout=600)
    counts = dict((k, int(n)) for n, k in re.findall(r"(\d+) (passed|failed|xfailed|skipped|error)", run.stdout))
    assert counts == {"passed": 1, "failed": 1, "xfailed": 2}, run.stdout + run.stderr
    assert re.search(r"FAILED test_fuser_regressions.py::test_now_passes.*XPASS\(strict\)", run.stdout), run.stdout
    assert "PASSED test_fuser_regressions.py::test_fixed" in run.stdout


def test_export_of_a_directory_without_repros_is_bad_input(tmp_path, capsys):
    assert main(["export", str(tmp_path), "--pytest", str(tmp_path / "out.py")]) == 2
    assert "no minimized repros" in capsys.readouterr().err
    assert not (tmp_path / "out.py").exists()
