"""Input that cannot hurt: a case or campaign file is data. A backend name in it that would import
code (custom:..., dynamo:package.module:function) is refused with one line and exit code 2, and
nothing of it runs, unless the user names that backend on the command line."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzfuse.backends import BACKENDS, nameable_in_a_file

ROOT = Path(__file__).parent.parent
MARKER = "imported.txt"
HOSTILE = ["custom:sys:exit", "custom:os:abort", "dynamo:planted:compile_fn", "custom:planted:Backend"]


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "fuzzfuse", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def _hostile_case(tmp_path: Path, backend: str) -> Path:
    """A valid failing case (a committed repro's) whose backend field names code, beside a module
    that leaves a marker file when anything imports it (the CLI puts the working directory on
    sys.path, as `python -m` does)."""
    (tmp_path / "planted.py").write_text(
        f"open({str(tmp_path / MARKER)!r}, 'w').write('imported')\n"
        "def compile_fn(gm, example_inputs):\n    return gm\n"
        "class Backend:\n    pass\n")
    source = next((ROOT / "minimized").glob("*nnc*mismatch*/case.json"))
    case = json.loads(source.read_text())
    case["backend"] = backend
    (tmp_path / "cases").mkdir()
    path = tmp_path / "cases" / "case.json"
    path.write_text(json.dumps(case))
    return path


@pytest.mark.parametrize("backend", HOSTILE)
@pytest.mark.parametrize("command", ["replay", pytest.param("reduce", marks=pytest.mark.slow)])
def test_a_case_file_that_names_code_runs_nothing_and_exits_2_with_one_line(tmp_path, backend, command):
    path = _hostile_case(tmp_path, backend)
    extra = ["--out", str(tmp_path / "minimized")] if command == "reduce" else []
    done = _cli(command, str(path), *extra, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and backend in lines[0] and "--backend" in lines[0], done.stderr
    assert not (tmp_path / MARKER).exists()
    assert not (tmp_path / "minimized").exists()


@pytest.mark.slow
def test_a_directory_of_cases_is_refused_whole_when_one_names_code(tmp_path):
    path = _hostile_case(tmp_path, "dynamo:planted:compile_fn")
    good = json.loads(path.read_text())
    good["backend"] = "torchscript:nnc"
    (path.parent / "good.json").write_text(json.dumps(good))
    done = _cli("replay", str(path.parent), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "replayed" not in done.stdout and not (tmp_path / MARKER).exists()


def test_a_campaign_state_that_names_code_is_not_resumed_without_backend(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (tmp_path / "planted.py").write_text(f"open({str(tmp_path / MARKER)!r}, 'w').write('imported')\n")
    state = {"schema": 1, "kind": "fuzzfuse-campaign-state", "args": {"backend": "custom:planted:Backend"}}
    (out / "state.json").write_text(json.dumps(state))
    done = _cli("fuzz", "--resume", str(out), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "custom:planted:Backend" in done.stderr and not (tmp_path / MARKER).exists()


def test_resume_refuses_another_backend_than_the_campaigns(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    state = {"schema": 1, "kind": "fuzzfuse-campaign-state", "args": {"backend": "torchscript:nnc"}}
    (out / "state.json").write_text(json.dumps(state))
    done = _cli("fuzz", "--resume", str(out), "--backend", "eager", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "torchscript:nnc" in done.stderr


def test_built_in_and_registered_dynamo_names_may_come_from_a_file_and_nothing_that_imports_may():
    assert all(nameable_in_a_file(name) for name in BACKENDS)
    assert nameable_in_a_file("dynamo:aot_eager")
    assert not any(nameable_in_a_file(name) for name in HOSTILE)


@pytest.mark.slow
def test_a_custom_backend_named_on_the_command_line_still_replays_its_cases(tmp_path):
    """The opt-in: the user names the backend, so its module is imported (here, the project's own
    deliberately buggy test backend, which crashes on sum followed by sigmoid)."""
    path = _hostile_case(tmp_path, "custom:tests.buggy_backends:CrashOnSumSigmoid")
    done = _cli("replay", str(path), "--backend", "custom:tests.buggy_backends:CrashOnSumSigmoid", cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr
    assert "replayed" in done.stdout


@pytest.mark.slow
def test_a_new_campaign_into_a_finished_ones_directory_is_refused_and_the_first_survives(tmp_path):
    out = tmp_path / "run"
    first = _cli("fuzz", "--backend", "eager", "--max-cases", "4", "--workers", "1", "--no-reduce", "--seed", "3",
                 "--out", str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    summary, state = (out / "summary.json").read_text(), (out / "state.json").read_text()
    again = _cli("fuzz", "--backend", "eager", "--max-cases", "2", "--workers", "1", "--out", str(out), cwd=tmp_path)
    assert again.returncode == 2
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--resume {out}" in lines[0] and "--out" in lines[0], again.stderr
    assert (out / "summary.json").read_text() == summary and (out / "state.json").read_text() == state


BAD_OPTIONS = [
    ("fuzz", "--time", "-5"), ("fuzz", "--time", "0"), ("fuzz", "--time", "nan"), ("fuzz", "--workers", "0"),
    ("fuzz", "--workers", "-1"), ("fuzz", "--timeout", "0"), ("fuzz", "--timeout", "0.2"),
    ("fuzz", "--max-cases", "0"), ("fuzz", "--max-ops", "0"), ("fuzz", "--reduce-budget", "0"),
    ("fuzz", "--focus-share", "1.5"), ("fuzz", "--focus-share", "-0.1"), ("fuzz", "--max-cases", "many"),
    ("reduce", "--workers", "0"), ("reduce", "--timeout", "0"), ("reduce", "--budget", "0"),
    ("replay", "--workers", "0"), ("replay", "--timeout", "-1"),
]


@pytest.mark.parametrize("command,option,value", BAD_OPTIONS)
def test_a_bad_option_is_refused_with_one_line_and_exit_2(command, option, value, capsys, tmp_path):
    from fuzzfuse.cli import main

    positional = [] if command == "fuzz" else [str(tmp_path)]
    with pytest.raises(SystemExit) as exit_:
        main([command, *positional, option, value])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_case_of_a_trillion_elements_is_refused_on_load_with_one_line(tmp_path):
    source = next((ROOT / "minimized").glob("*nnc*mismatch*/case.json"))
    case = json.loads(source.read_text())
    case["backend"] = "torchscript:nnc"
    case["graph"] = {"schema": 1, "outputs": ["v0"],
                     "inputs": [{"kind": "tensor", "name": "x0", "dtype": "float32", "shape": [10**6, 10**6],
                                 "layout": {"kind": "contiguous"}, "values": {"dist": "zeros", "seed": 0}}],
                     "nodes": [{"name": "v0", "op": "neg", "args": ["x0"], "attrs": {}}]}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(case))
    done = _cli("replay", str(path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert any("1,000,000,000,000 elements" in line for line in done.stderr.splitlines()), done.stderr
    assert "0 replayed" in done.stdout


def _committed_case() -> dict:
    return json.loads(next((ROOT / "minimized").glob("*nnc*mismatch*/case.json")).read_text())


def _with(case: dict, where: str, value) -> dict:
    """`case` with the field at dotted path `where` (into its graph's first input) set to `value`."""
    target = case["graph"]["inputs"][0] if where.startswith("input.") else case
    *path, last = where.removeprefix("input.").split(".")
    for key in path:
        target = target[key]
    target[last] = value
    return case


@pytest.mark.parametrize("name, text, says", [
    ("deep", "[" * 100_000 + "]" * 100_000, "maximum recursion depth"),
    ("values-file", json.dumps(_with(_committed_case(), "input.values", {"file": "/etc/passwd"})),
     "unknown field 'file'"),
    ("layout-extra", json.dumps(_with(_committed_case(), "input.layout.strides", [1, 1])), "unknown field 'strides'"),
    ("input-extra", json.dumps(_with(_committed_case(), "input.device", "cuda")), "unknown field 'device'"),
    ("backend-list", json.dumps(_with(_committed_case(), "backend", ["torchscript:nnc"])), "field 'backend' must be str"),
], ids=lambda value: value if isinstance(value, str) and len(value) < 20 else "")  # not 200,000 brackets:
# a test id travels in PYTEST_CURRENT_TEST, and one environment string may not pass 128 KiB (E2BIG)
def test_a_malformed_case_file_is_skipped_with_one_line_and_exit_2(tmp_path, name, text, says):
    """A file the schema does not describe is refused, never half-read: a field it does not know
    (a values spec naming a file, a layout with strides) would otherwise be ignored and the replay
    run something other than what the file says; JSON nested past the parser's depth is a
    RecursionError, which used to escape as a traceback with exit 1."""
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    done = _cli("replay", str(path), cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    problem = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("skipped:")]
    assert len(problem) == 1 and says in problem[0], done.stdout + done.stderr


@pytest.mark.parametrize("command, file", [("triage", "summary.json"), ("fuzz", "state.json")])
def test_a_campaign_file_nested_past_the_parsers_depth_gives_one_line_and_exit_2(tmp_path, command, file):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / file).write_text("[" * 100_000 + "]" * 100_000)
    args = ["triage", "run"] if command == "triage" else ["fuzz", "--resume", "run"]
    done = _cli(*args, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and file in lines[0] and "recursion" in lines[0], done.stderr
