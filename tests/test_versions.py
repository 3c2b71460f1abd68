"""`fuzzfuse versions`: each repro run in each build's own environment, judged against what its
case.json recorded, cached per (directory, build, repro digest), and drawn as a table in
versions.json and the README. The fast tests run repros for real in this interpreter (the build
named `installed`); the slow ones make real virtualenvs of real torch releases, and skip with the
reason when a release cannot be installed here (offline)."""
import json
import shutil
import sys
from pathlib import Path

import pytest

from fuzzfuse.buildenv import Build, BuildError, Package, ensure
from fuzzfuse.cli import main
from fuzzfuse.export import Recorded
from fuzzfuse.versions import (BEGIN, END, VERSIONS_FILE, Presence, ResultCache, RunResult, Trend,
                               judged_script, repro_digest, run_repro, same_crash, summarize, summary_of, table_for, with_section,
                               write_table)
from fuzzfuse.versionsrun import CACHE

REPO = Path(__file__).resolve().parent.parent
# A crash recorded at proxy_tensor.py:1738 on torch 2.13.0; torch 2.14.1 raises it at :1910.
PROXY = REPO / "minimized" / "aot-frontend-crash-runtimeerror-torch-fx-experimental-proxy-05d6e33a"
# An Inductor-CPU NaN/Inf mismatch in div_floor of inf, present in 2.13.0 and fixed in 2.14.1.
DIV_FLOOR = REPO / "minimized" / "inductor-mismatch-nan-inf-float-62c90d20"


def copy(directory: Path, to: Path) -> Path:
    """A repro directory without the table a corpus run committed there."""
    shutil.copytree(directory, to / directory.name, ignore=shutil.ignore_patterns(VERSIONS_FILE))
    return to / directory.name


def row(version: str, presence: Presence) -> RunResult:
    return RunResult("d", Build(Package.TORCH, version), version, "0", presence, "", 1, "", 1.0)


def test_a_crash_raised_at_another_python_line_or_with_another_type_there_is_the_same_bug():
    recorded = Recorded.read(PROXY)
    moved = dict(outcome="crash", kind="RuntimeError",
                 location="torch/fx/experimental/proxy_tensor.py:1910 in wrapped:forward")
    assert same_crash(recorded, "RuntimeError:", moved)
    assert same_crash(recorded, "RuntimeError:", dict(moved, kind="BackendCompilerFailed"))
    assert not same_crash(recorded, "RuntimeError:", dict(moved, location="torch/_ops.py:__call__"))


def test_a_python_error_raised_from_another_file_is_the_same_bug_when_its_message_names_the_cause():
    """Inductor's bool minimum: torch 2.13 raises it in torch/utils/_sympy, torch 2.6 in sympy itself
    (its innermost torch frame is then index_propagation.py), as ValueError, not InductorError."""
    recorded = Recorded("inductor", "crash", "InductorError", "torch/utils/_sympy/functions.py:_new_args_filter",
                        "", "")
    seen = dict(outcome="crash", kind="ValueError", location="torch/_inductor/index_propagation.py:minimum",
                message="The argument 'False' is not comparable.")
    assert same_crash(recorded, "ValueError: The argument 'S' is not comparable.", seen)
    assert not same_crash(recorded, "ValueError: The argument 'S' is not comparable.",
                          dict(seen, message="bad optional access"))


def test_a_crash_without_a_place_under_a_renamed_exception_is_the_same_bug_when_its_message_names_the_cause():
    """TorchScript's bool relu: RuntimeError in torch 2.13, NotImplementedError (wrapping it) in 2.14.1."""
    recorded = Recorded("torchscript:frontend", "crash", "RuntimeError", "", "", "")
    message = "RuntimeError: Boolean inputs not supported for relu"
    seen = dict(outcome="crash", kind="NotImplementedError", location="",
                message="The following operation failed in the TorchScript interpreter.\n" + message)
    assert same_crash(recorded, message, seen)
    assert not same_crash(recorded, "RuntimeError: IValue is not a Scalar", seen)


def test_a_native_assert_at_another_line_is_the_same_bug_only_with_the_same_message_class():
    recorded = Recorded("torchscript:nnc", "crash", "RuntimeError", "csrc/jit/tensorexpr/expr.cpp:381", "", "")
    message = "dims.size() == 2 || dims.size() == 3 INTERNAL ASSERT FAILED at /x/csrc/jit/tensorexpr/expr.cpp:381"
    seen = dict(outcome="crash", kind="RuntimeError", location="csrc/jit/tensorexpr/expr.cpp:399")
    assert same_crash(recorded, message, dict(seen, message=message.replace("381", "399")))
    assert not same_crash(recorded, message, dict(seen, message="index out of range INTERNAL ASSERT FAILED"))


def test_the_trend_skips_builds_that_cannot_run_the_repro_and_names_where_it_changed():
    P, A, N, D = Presence.PRESENT, Presence.ABSENT, Presence.NOT_APPLICABLE, Presence.DIFFERENT
    trend = lambda *states: summarize("torch", [row(f"2.{i}.0", s) for i, s in enumerate(states)])  # noqa: E731
    assert trend(N, P, P) == summarize("torch", [row("2.1.0", P)]) and trend(N, P, P).trend == Trend.ALWAYS
    assert (trend(A, A, P, P).trend, trend(A, A, P, P).build) == (Trend.REGRESSION, "2.2.0")
    assert (trend(P, A, P, A, A).trend, trend(P, A, P, A, A).build) == (Trend.FIXED, "2.3.0")
    assert trend(P, A, P, A, A).text == "fixed in torch 2.3.0 (present in 2.2.0)"
    assert trend(A, N, A).trend == Trend.NEVER
    assert (trend(P, D).trend, trend(P, D).build) == (Trend.CHANGED, "2.1.0")
    assert trend(N, N).trend == Trend.UNTESTED


def test_a_build_that_lacks_what_the_repro_calls_does_not_apply_rather_than_being_absent(tmp_path):
    """A real run in this interpreter of a repro that calls an API this build does not have (what
    an older release does to a repro written for a newer one)."""
    repro = copy(REPO / "minimized" / "aot-nnc-mismatch-values-float-d3a22038", tmp_path)
    script = judged_script(repro)
    source = (repro / script).read_text()
    assert "torch._C._jit_set_profiling_executor(True)" in source
    (repro / script).write_text(source.replace("torch._C._jit_set_profiling_executor(True)",
                                               "torch._C._jit_set_some_future_api(True)"))
    environment = ensure(Build(Package.TORCH, "installed"), tmp_path / "envs")
    result = run_repro(environment, repro, timeout=120)
    assert result.presence == Presence.NOT_APPLICABLE, result
    assert "_jit_set_some_future_api" in result.why


def test_a_run_that_fails_as_recorded_is_present_and_its_table_lands_in_versions_json_and_the_readme(tmp_path):
    repro = copy(PROXY, tmp_path)
    assert main(["versions", str(tmp_path), "--torch", "installed", "--results", str(tmp_path / "results")]) == 0
    record = json.loads((repro / VERSIONS_FILE).read_text())
    assert [r["presence"] for r in record["results"]] == ["present"]
    assert record["summary"][0]["text"] == Trend.ALWAYS.value == summary_of(repro)
    readme = (repro / "README.md").read_text()
    import torch

    assert readme.count(BEGIN) == readme.count(END) == 1 and f"| torch {torch.__version__} |" in readme


@pytest.mark.slow  # 5-7 s: runs repros in a build (over the fast budget, issue 36)
def test_from_cache_redraws_the_tables_without_running_and_a_second_run_resumes(tmp_path, capsys):
    repro = copy(PROXY, tmp_path / "corpus")
    cache = tmp_path / "results"
    assert main(["versions", str(tmp_path / "corpus"), "--torch", "installed", "--results", str(cache)]) == 0
    drawn = (repro / "README.md").read_text(), (repro / VERSIONS_FILE).read_text()
    results = sorted(cache.rglob("*.json"))
    (repro / "README.md").write_text(with_section(drawn[0], f"{BEGIN}\nedited by hand\n{END}\n"))
    (repro / VERSIONS_FILE).unlink()
    capsys.readouterr()
    assert main(["versions", str(tmp_path / "corpus"), "--from-cache", "--results", str(cache)]) == 0
    assert ((repro / "README.md").read_text(), (repro / VERSIONS_FILE).read_text()) == drawn
    assert sorted(cache.rglob("*.json")) == results
    assert main(["versions", str(tmp_path / "corpus"), "--torch", "installed", "--results", str(cache)]) == 0
    assert "0 run(s) to do" in capsys.readouterr().out


def test_a_changed_repro_is_run_again_and_its_earlier_result_is_marked_stale(tmp_path):
    repro = copy(PROXY, tmp_path)
    cache = ResultCache(tmp_path / "cache")
    earlier = RunResult(repro.name, Build(Package.TORCH, "2.9.1"), "2.9.1+cu128", "0123456789abcdef",
                        Presence.ABSENT, "passes", 0, "", 1.0)
    cache.put(earlier)
    assert cache.get(repro, earlier.build) is None
    [shown] = cache.rows(repro)
    assert shown.stale and shown.presence == Presence.ABSENT
    write_table(table_for(repro, cache))
    assert "absent (an earlier repro.py)" in (repro / "README.md").read_text()


def test_the_readme_section_is_replaced_in_place_or_appended():
    section = f"{BEGIN}\nnew\n{END}\n"
    assert with_section("# t\n\nbody\n", section) == f"# t\n\nbody\n\n{section}"
    assert with_section(f"# t\n{BEGIN}\nold\n{END}\ntail\n", section) == f"# t\n{BEGIN}\nnew\n{END}\ntail\n"


@pytest.mark.parametrize("argv", [["versions", "minimized"], ["versions", "minimized", "--torch", "2.9 1"],
                                  ["versions", "no-such-dir", "--torch", "2.14.1"]])
def test_bad_input_is_one_line_and_exit_code_2(argv, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(argv) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_triage_shows_each_repros_versions_summary(tmp_path, capsys):
    from rich.console import Console

    from fuzzfuse.triage import load, print_table

    repro = copy(PROXY, tmp_path)
    cache = ResultCache(tmp_path / "cache")
    cache.put(RunResult(repro.name, Build(Package.TORCH, "2.14.1"), "2.14.1+cu130", "0", Presence.ABSENT,
                        "passes", 0, "", 1.0))
    cache.put(RunResult(repro.name, Build(Package.TORCH, "2.9.1"), "2.9.1+cu128", "0", Presence.PRESENT,
                        "fails as recorded", 1, "", 1.0))
    write_table(table_for(repro, cache))
    print_table(load(tmp_path), Console(width=400, file=sys.stdout))
    assert "fixed in torch 2.14.1+cu130" in capsys.readouterr().out


# ---- real releases ------------------------------------------------------------------------------
def environment_or_skip(version: str, envs: Path):
    try:
        return ensure(Build(Package.TORCH, version), envs, log=lambda _: None)
    except BuildError as e:
        pytest.skip(f"torch {version} cannot be installed here: {e}")


@pytest.mark.slow
def test_an_environment_is_made_once_from_the_registry_and_then_reused(tmp_path):
    """torch 2.13.0 (a CPU build of about 1 GB) into a fresh folder: made, then found again."""
    first = environment_or_skip("2.13.0", tmp_path / "envs")
    ready = first.python.parent.parent / "ready.json"
    made = ready.stat().st_mtime_ns
    again = environment_or_skip("2.13.0", tmp_path / "envs")
    assert again == first and ready.stat().st_mtime_ns == made
    assert first.record.installed.startswith("2.13.0") and first.python != Path(sys.executable)


@pytest.mark.slow
def test_the_table_across_real_releases_names_the_fix_and_keeps_a_moved_crash_the_same_bug(tmp_path):
    """torch 2.13.0 and 2.14.1, each in the shared cache's virtualenv (made there if absent)."""
    for version in ("2.13.0", "2.14.1"):
        environment_or_skip(version, CACHE / "envs")
    corpus = tmp_path / "corpus"
    proxy, div_floor = copy(PROXY, corpus), copy(DIV_FLOOR, corpus)
    assert main(["versions", str(corpus), "--torch", "2.13.0,2.14.1", "--results", str(tmp_path / "results"),
                 "--envs", str(CACHE / "envs"), "--jobs", "2"]) == 0
    tables = {d.name: json.loads((d / VERSIONS_FILE).read_text()) for d in (proxy, div_floor)}
    moved = tables[proxy.name]["results"]
    assert [r["presence"] for r in moved] == ["present", "present"]
    assert [r["summary"][0]["text"] for r in [tables[proxy.name]]] == [Trend.ALWAYS.value]
    fixed = tables[div_floor.name]
    assert [r["presence"] for r in fixed["results"]] == ["present", "absent"]
    assert fixed["summary"][0]["text"].startswith("fixed in torch 2.14.1")
    assert "Evidence that torch 2.14.1" in (div_floor / "README.md").read_text()


def test_another_machines_results_are_folded_into_the_tables_without_running(tmp_path):
    """What benchmarks/nvfuser_versions.sh brings back from the GPU machine: a results folder."""
    repro = copy(PROXY, tmp_path / "corpus")
    gpu = ResultCache(tmp_path / "gpu-results")
    gpu.put(RunResult(repro.name, Build(Package.NVFUSER, "0.2.36.dev20260301"), "0.2.36.dev20260301",
                      repro_digest(repro), Presence.PRESENT, "fails as recorded", 1, "", 2.0))
    assert main(["versions", str(tmp_path / "corpus"), "--from-cache", "--results", str(tmp_path / "results"),
                 "--fold", str(tmp_path / "gpu-results")]) == 0
    [result] = json.loads((repro / VERSIONS_FILE).read_text())["results"]
    assert (result["package"], result["presence"]) == ("nvfuser-cu130-torch210", "present")
    assert len(list((tmp_path / "results").rglob("*.json"))) == 1
