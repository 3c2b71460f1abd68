"""Reports a maintainer pastes unchanged, checked on the whole committed corpus: every title names
its trigger, every repro is short and standalone, every directory renders an issue body in its
upstream's form, hard crashes quote their signal and stderr, and a bug known upstream says so.
The repros that run here (real NNC, oneDNN Graph, CPU Inductor) exit 1 while their bug is present,
and their READMEs quote their own output verbatim."""
import json
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fuzzfuse.bugreport import (README, REGRESSION, REPRO, VERSIONS_SECTION, ReproRun, case_device,
                                issue_body, load_outputs, portable_output, regenerate, run_repro, title,
                                write_repro)
from fuzzfuse.backends.inductor import InductorBackend
from fuzzfuse.cli import main
from fuzzfuse.corpus import CorpusError, load_case
from fuzzfuse.hostcpu import host_isa
from fuzzfuse.ir import TensorInput
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.graph import Values
from fuzzfuse.ir.values import encode_exact
from fuzzfuse.short_repro import Symptom, kills_the_process
from fuzzfuse.upstream import Relation, State, UpstreamIssue, known

from .test_plugin import MISMATCH

ROOT = Path(__file__).resolve().parent.parent

MINIMIZED = Path(__file__).parent.parent / "minimized"
DIRS = sorted(p.parent for p in MINIMIZED.glob("[!.]*/case.json"))


def _regenerated(directory: Path) -> bool:
    """A directory in the form these tests check (its short repro beside regression.py)."""
    return (directory / REGRESSION).is_file()


@pytest.mark.parametrize("directory", DIRS, ids=lambda d: d.name)
def test_every_title_names_its_trigger(directory):
    """The README's title is today's title of its case, and it names the fuser and device, every op
    (or the count past four), each input dtype, every non-contiguous layout, the CPU capability
    above default, the non-default config, a compile error's first error line, a hard crash's
    signal."""
    case = load_case(directory / "case.json")
    heading = title(case)
    assert f"({case_device(case).upper()}" in heading or f", {case_device(case).upper()}" in heading
    ops = [n.op for n in case.graph.nodes]
    assert all(op in heading for op in ops[:3]) and (len(ops) <= 4 or f"({len(ops)} ops)" in heading)
    for spec in case.graph.inputs:
        if isinstance(spec, TensorInput):
            assert spec.dtype in heading
            kind = spec.layout.kind
            assert kind == "contiguous" or {"sliced": "strided"}.get(kind, kind) in heading
    capability = case.versions.get("cpu_capability", "default")
    assert capability == "default" or case_device(case) == "cuda" or capability.upper() in heading
    config = case.options.inductor_config
    if case.backend.split(":")[0] == "inductor" and config is not None:  # inductor:cpu and :cuda too
        for name, value in dict(config.flags).items():
            assert f"{name}={value!r}" in heading
        assert ("dynamic=True" in heading) is bool(config.dynamic)
        assert not config.mode or f"mode={config.mode!r}" in heading
        assert not config.mark_dynamic or f"mark_dynamic={config.mark_dynamic}" in heading
    assert "C++ compile error" not in heading
    if case.signature.outcome == "hard-crash":
        assert case.signature.kind in heading
    if _regenerated(directory):
        assert (directory / README).read_text().splitlines()[0] == "# " + heading


def test_a_title_names_an_unsigned_value_with_its_top_bit_set():
    """Inductor CPU's softmax of div(uint8 [254, 1], 1.0) reads 254 as -2 (b72fb31a, now a form of
    388d5a11): 254 is no extreme of uint8, but it is the trigger."""
    case = load_case(Path(__file__).parent / "data" / "inductor_div_softmax_uint8_case.json")
    assert "uint8 holding 254" in title(case)
    b = GraphBuilder()
    x = b.tensor((2,), "uint8", values=Values(exact=encode_exact(torch.tensor([127, 3], dtype=torch.uint8))))
    assert "holding" not in title(replace(case, graph=b.build([b.add("neg", x)])))


def test_a_title_names_the_segment_its_key_names_and_a_value_that_varies_as_such():
    """nvFuser's parallel compile lists each failing segment's error; the title took the first
    NVRTC error anywhere in the text ("no operator != ...") while the key named segment 1's
    indexing assert. And a wrong value that differs between the repro's runs was titled "?"."""
    case = load_case(MINIMIZED / "nvfuser-crash-runtimeerror-csrc-id-model-indexing-traversal-a8206664" / "case.json")
    assert "compiling fusion segments in parallel" in case.detail and "no operator" in case.detail
    heading = title(case)
    assert "indexing_traversal.cpp:232" in heading and "no operator" not in heading, heading
    mixed = load_case(MINIMIZED / "nvfuser-mismatch-nan-inf-float-858480df" / "case.json")
    assert mixed.symptom.fused == "?"
    assert title(mixed).endswith("returns a wrong value that differs from run to run (eager: 0)"), title(mixed)


@pytest.mark.parametrize("directory", [d for d in DIRS if _regenerated(d)], ids=lambda d: d.name)
def test_every_repro_is_short_standalone_and_quoted(directory):
    """At most 30 lines for a bug of at most 3 ops, never over 60, counted as `wc -l` counts them
    (comments and an nvFuser fusion's lowering included); no fuzzfuse import and no inputs file; a
    CPU repro pins its CPU capability; the README quotes the repro and a CPU repro's own run, a
    hard crash its signal. An nvFuser repro's ops are its fusion's: nvfuser_direct has no argmin,
    so one argmin is seven fd.ops lines (min, broadcast, eq, iota, broadcast, where, min)."""
    case = load_case(directory / "case.json")
    source = (directory / REPRO).read_text()
    lines = source.count("\n")
    ops = max(len(case.graph.nodes), source.count("= fd.ops."))
    limit = 30 if ops <= 3 else 60
    assert lines <= limit, f"{lines} lines"
    assert "fuzzfuse" not in source.replace("fuzzfuse report", "") and "inputs.bin" not in source and "inputs.pt" not in source
    readme = (directory / README).read_text()
    assert f"```python\n{source.rstrip()}\n```" in readme
    if case_device(case) == "cpu":
        assert f'os.environ["ATEN_CPU_CAPABILITY"] = {case.versions["cpu_capability"]!r}' in source
        assert "**Output** of `python repro.py`" in readme
    # the Repro line says how the quoted run ended: exit status 1, or the signal it died by
    contract = re.search(r"\*\*Repro\*\* \(`python repro.py`: (.*)\):\n", readme).group(1)
    ended = re.search(r"\*\*Output\*\* of `python repro.py` \(.*; (exit status 1|died by (SIG\w+))\):", readme)
    if ended:
        assert (ended.group(2) or "exit status 1") in contract, (contract, ended.group(1))
    if case.signature.outcome == "hard-crash":
        # the fused call runs in a child process, which died by the signal; the repro exits 1 and
        # says so, and faulthandler names the signal from before torch loads
        assert re.search(r"\*\*Output\*\* of `python repro.py` \(.*; exit status 1\):", readme)
        assert f"the child process running fn died by {case.signature.kind}\n" in readme
        assert source.index("faulthandler.enable(") < source.index("import torch")
        assert source.index("subprocess.run(") < source.index("import torch")
        assert ("Exits 1 while the bug is present (the fused call, run in a child process, dies by "
                f"{case.signature.kind}), 0 once it is fixed.") in source
    if case.signature.outcome == "hard-crash" or case.signature.kind == "AcceleratorError":
        assert "REPRO_CHILD" in source


@pytest.mark.parametrize("directory", DIRS, ids=lambda d: d.name)
def test_every_quoted_run_reached_its_fuser(directory):
    """A README quotes a run of its repro that got as far as the fuser: a run that could not import
    it (nvfuser_direct is found through PYTHONPATH on the GPU machine, and a run without it said
    only ModuleNotFoundError) shows nothing of the bug."""
    assert "No module named" not in (directory / README).read_text()


@pytest.mark.parametrize("directory", DIRS, ids=lambda d: d.name)
def test_every_directory_renders_an_issue_body_in_its_upstreams_form(directory):
    case = load_case(directory / "case.json")
    body = issue_body(directory)
    assert body.startswith("# " + title(case) + "\n")
    assert f"```python\n{(directory / REPRO).read_text().rstrip()}\n```" in body
    form = ("## Bug", "## Repro", "## Output", "## Versions") if "nvfuser" in case.backend else \
        ("### 🐛 Describe the bug", "### Error logs", "### Versions")
    assert all(section in body for section in form)
    assert all(f"{k}: {v}" in body for k, v in case.versions.items())
    assert ("Already reported upstream" in body) == bool(known(case.upstream))
    for issue in case.upstream:
        assert issue.url in body


def test_a_report_of_a_bug_known_upstream_says_so_instead_of_asking_for_an_issue(tmp_path):
    directory = tmp_path / MISMATCH.name
    shutil.copytree(MISMATCH, directory)
    case = load_case(directory / "case.json")
    issue = UpstreamIssue("https://github.com/pytorch/pytorch/issues/1", State.OPEN, Relation.SAME, "a title",
                          "2026-12-03")
    (directory / "case.json").write_text(json.dumps({**case.to_json(), "upstream": [issue.to_json()]}))
    body = issue_body(directory)
    assert "Already reported upstream: reported upstream as [pytorch/pytorch#1]" in body
    assert "Do not file a new issue" in body and "(open; checked 2026-12-03)" in body


def test_a_report_of_a_bug_whose_issue_closed_without_a_fix_asks_for_one_citing_it(tmp_path):
    directory = tmp_path / MISMATCH.name
    shutil.copytree(MISMATCH, directory)
    case = load_case(directory / "case.json")
    issue = UpstreamIssue("https://github.com/pytorch/pytorch/pull/2", State.CLOSED, Relation.SAME, "a title",
                          "2026-12-04")
    (directory / "case.json").write_text(json.dumps({**case.to_json(), "upstream": [issue.to_json()]}))
    body = issue_body(directory)
    assert "Do not file a new issue" not in body and "Already reported upstream" not in body
    assert "Reported before as https://github.com/pytorch/pytorch/pull/2 (closed); it still fails." in body


@pytest.mark.parametrize("bad,message", [
    ({"url": "https://example.com/issues/1"}, "is not an issue or pull request"),
    ({"state": "wontfix"}, "'wontfix' is not a valid State"),
    ({"checked": "yesterday"}, "is not a date"),
    ({"extra": 1}, "extra"),
])
def test_an_upstream_record_is_validated_as_untrusted_input(bad, message):
    good = UpstreamIssue("https://github.com/NVIDIA/Fuser/issues/5", State.FIXED, Relation.RELATED, "t",
                         "2026-12-03", fixed_in="0.2.37").to_json()
    assert UpstreamIssue.from_json(good).status() == "fixed in 0.2.37"
    with pytest.raises(ValueError, match=message):
        UpstreamIssue.from_json({**good, **bad})


def test_a_symptom_is_read_from_the_full_repros_lines_and_round_trips():
    printed = ("expected output 1[3, 0]: -1.5 (eager; float64 gives -1.5000001)\n"
               "actual output 1[3, 0]: nan (torchscript:nnc, wrong at 2 of 8 positions)\n")
    symptom = Symptom.parse(printed)
    assert symptom == Symptom("output 1", (3, 0), "-1.5", "nan", "-1.5000001")
    assert Symptom.from_json(symptom.to_json()) == symptom
    assert Symptom.parse("expected: torchscript:nnc compiles and runs fn\n") is None
    with pytest.raises(ValueError):
        Symptom.from_json({**symptom.to_json(), "what": "__import__('os')"})


def test_report_refuses_what_is_not_a_minimized_directory_in_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    (tmp_path / "outputs.json").write_text('{"kind": "fuzzfuse-repro-outputs", "runs": {"x": {"status": "1"}}}')
    with pytest.raises(CorpusError, match="a run is an object"):
        load_outputs(tmp_path / "outputs.json")
    assert main(["report", str(MISMATCH), "--outputs", str(tmp_path / "outputs.json")]) == 2


@pytest.mark.slow
def test_regenerating_runs_the_short_repro_quotes_it_verbatim_keeps_versions_and_is_idempotent(tmp_path):
    """A real NNC bug: its short repro exits 1 in a fresh process, the README quotes that run's
    output verbatim, a versions section another tool wrote survives, and a second regeneration
    writes the same files."""
    directory = tmp_path / MISMATCH.name
    shutil.copytree(MISMATCH, directory)
    regenerate(directory)
    readme = VERSIONS_SECTION.sub("", (directory / README).read_text())  # the committed table, if any
    section = "<!-- versions -->\n| torch | 2.13 |\n<!-- /versions -->\n"
    (directory / README).write_text(readme.replace("**Repro**", section + "\n**Repro**", 1))
    first = {name: (directory / name).read_text() for name in (REPRO, REGRESSION, "case.json")}
    line, ok = regenerate(directory)
    assert ok and line.endswith("exit status 1")
    assert {name: (directory / name).read_text() for name in first} == first
    again = (directory / README).read_text()
    assert section in again
    run = run_repro(directory)
    assert run.status == 1
    quoted = again.split("**Output** of `python repro.py`", 1)[1].split("```\n", 1)[1].split("\n```", 1)[0]
    assert quoted == run.output.rstrip("\n")
    assert re.search(r"^output \d+.*: expected .*, got ", run.output, re.M)


@pytest.mark.parametrize("route", sorted(InductorBackend.device_routes.values()))
def test_a_campaign_on_one_device_route_writes_the_short_repro(route, tmp_path):
    """`fuzz --backend inductor:cuda` records that route as the case's backend: its repro is the
    short torch.compile one too (an H200 campaign wrote 136-line oracle copies before)."""
    case = load_case(MINIMIZED / "inductor-mismatch-nan-inf-float-62c90d20" / "case.json")
    source = write_repro(tmp_path, replace(case, backend=route))
    assert "torch.compile(fn" in source and "fuzzfuse" not in source and source.count("\n") <= 30


@pytest.mark.slow
def test_a_short_repro_exits_0_once_its_fuser_gives_the_pinned_value(tmp_path):
    """The check is a plain comparison with the pinned eager value: pinned to what NNC computes
    (as a fixed fuser would), the same repro exits 0."""
    directory = tmp_path / MISMATCH.name
    shutil.copytree(MISMATCH, directory)
    regenerate(directory)
    case = load_case(directory / "case.json")
    fixed = replace(case, symptom=replace(case.symptom, eager=case.symptom.fused))
    (directory / "case.json").write_text(json.dumps(fixed.to_json()))
    line, ok = regenerate(directory)
    assert not ok and "exit status 0" in line


# NNC's heap corruption aborts at a different point in each run (glibc's message, the stack, or
# not before the repro's last line): no run's output is every run's.
OUTPUT_VARIES = {"torchscript-nnc-hard-crash-sigabrt-13207297": "heap corruption: each run aborts elsewhere",
                 # 3 of 3 at verification and 6 of 6 alone here; one CI run under xdist's load ran to the end
                 "aot-onednn-hard-crash-sigsegv-81bab612": "a segfault from corrupted memory: a run may not reach it"}


def _quoted_sample() -> list[Path]:
    """The CPU directories whose short repro is run to check its README's quote: one per fuser and
    outcome (its fewest-ops directory), 21 of 132 when written. Whether each committed repro still
    fails as recorded is the plugin's check (`--fuzzfuse-corpus minimized` runs every
    regression.py), so running all 132 short repros again here, a fresh interpreter each, cost CI
    the quote alone for the other 111: 387 s of CPU measured on a quiet 2-core machine (an Inductor
    one 14-18 s, 225 s for its 16), more under CI's load. FUZZFUSE_TEST_EVERY_QUOTE=1 checks every
    CPU directory's quote, as after a torch upgrade or a corpus-wide regeneration."""
    cpu = [d for d in DIRS if _regenerated(d) and case_device(load_case(d / "case.json")) == "cpu"]
    if os.environ.get("FUZZFUSE_TEST_EVERY_QUOTE") == "1":
        return cpu
    first = {}
    for d in cpu:
        if (d / "FIXED").exists():
            continue  # its quote is of the run before the fix: another of its group stands for it
        case = load_case(d / "case.json")
        if not all(_capability_here(case.versions.get(k, "default")) for k in ("cpu_capability", "host_isa")):
            # An AVX-512 bug passes on an AVX2 machine (oneDNN picks its kernels by the host, not
            # by ATen's pinned capability): another of its group stands for it.
            continue
        group, rank = (case.backend, case.signature.outcome), (len(case.graph.nodes), d.name)
        if group not in first or rank < first[group][0]:
            first[group] = (rank, d)
    return sorted(d for _, d in first.values())


def _capability_here(pinned: str) -> bool:
    """Whether this machine has the CPU capability a repro is pinned to (an unreadable host: yes)."""
    levels = ("default", "avx2", "avx512")
    here = host_isa()
    return not here or pinned not in levels or levels.index(pinned) <= levels.index(here)


@pytest.mark.slow
@pytest.mark.parametrize("directory", [
    pytest.param(d, marks=pytest.mark.xfail(strict=False, reason=OUTPUT_VARIES[d.name])) if d.name in OUTPUT_VARIES
    else d for d in _quoted_sample()], ids=lambda d: d.name)
def test_a_committed_cpu_repros_readme_quotes_its_run(directory):
    """The short repro (what a maintainer pastes upstream) exits 1 in a fresh process and prints
    what its README quotes. A directory holding FIXED records a bug gone from torch: its repro
    passes now (the plugin checks that), and the README's quote of the failing run stays history."""
    if (directory / "FIXED").exists():
        pytest.skip("fixed upstream: its README quotes the run from before the fix")
    case = load_case(directory / "case.json")
    run = run_repro(directory)
    assert run.status == 1
    quoted = (directory / README).read_text().split("**Output** of `python repro.py`", 1)[1]
    quoted = quoted.split("```\n", 1)[1].split("\n```", 1)[0]
    if kills_the_process(case.signature):
        # the parent's last line says how the child ended; the child, killed by the signal, may
        # have died part-way through printing its stack (even mid-line), here or in the run quoted
        ended = quoted.strip().splitlines()[-1]
        assert ended.startswith("the child process running fn") and run.output.rstrip().endswith(ended)
        child_quoted, child_run = quoted.strip()[:-len(ended)].strip(), run.output.rstrip()[:-len(ended)].strip()
        shorter = min(len(child_quoted), len(child_run))
        assert child_run[:shorter] == child_quoted[:shorter], (child_run, child_quoted)
        return
    for line in quoted.splitlines():
        assert line == f"[... {line[5:]}" or line in run.output or line == "(nothing printed)"


def test_faulthandlers_module_list_is_left_out_but_not_the_parents_line_after_it():
    """A child killed mid-list leaves its line open, and the parent's line lands on it."""
    stack = 'Fatal Python error: Segmentation fault\n\n  File "repro.py", line 25 in <module>\n\n'
    whole = stack + "Extension modules: torch._C, numpy._core._multiarray_umath (total: 2)\n"
    assert portable_output(whole + "the child process running fn died by SIGSEGV\n") == (
        stack + "the child process running fn died by SIGSEGV\n")
    cut = stack + "Extension modules: torch._C, num"
    assert portable_output(cut + "the child process running fn died by SIGSEGV\n") == (
        stack + "the child process running fn died by SIGSEGV\n")
    assert portable_output(stack + "Extension modules: torch._C, num\nafter\n") == stack + "after\n"


def test_a_gpu_run_recorded_elsewhere_is_quoted_as_recorded(tmp_path):
    run = ReproRun(-6, "double free or corruption (out)\n", "NVIDIA H200, torch 2.11.0+cu130")
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"kind": "fuzzfuse-repro-outputs", "runs": {"d": run.to_json()}}))
    assert load_outputs(path) == {"d": run}
    assert run.outcome() == "died by SIGABRT"


def test_a_gpu_run_that_never_reached_its_fuser_is_not_quoted(tmp_path, capsys):
    """A GPU machine's run whose PYTHONPATH lost nvfuser_direct (103 of 119 runs on the H200 once)
    exits 1 like a bug: it is named for what it is and left out of the READMEs, with a warning."""
    lost = ReproRun(1, "Traceback (most recent call last):\n  File \"repro.py\", line 8, in <module>\n"
                       "ModuleNotFoundError: No module named 'nvfuser_direct'\n", "NVIDIA H200, torch 2.11.0+cu130")
    ran = ReproRun(1, "output 0: expected 128 (eager), got -128\n", "NVIDIA H200, torch 2.11.0+cu130")
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"kind": "fuzzfuse-repro-outputs", "runs": {"lost": lost.to_json(), "ran": ran.to_json()}}))
    assert load_outputs(path) == {"ran": ran}
    assert "not quoting 1 run(s) that never reached their fuser" in capsys.readouterr().err
    assert lost.outcome() == "could not import nvfuser_direct (it never reached its fuser)"
    assert ran.outcome() == "exit status 1" and ran.missing_module() is None


def _inputs_of(lines: list[str]) -> dict:
    import hashlib

    import torch
    scope = {"torch": torch, "hashlib": hashlib}
    for line in lines:
        exec(line, scope)  # the repro's own input lines: assert lines check the seeded bytes
    return scope


def test_a_large_input_that_is_mostly_one_value_or_a_seeded_draw_is_written_short_and_exact():
    """An H200 campaign's repro inlined 8,188 float32 values (1.0 but for about 150 zeros and two
    large values): a large input is now the common value everywhere, or its seeded draw, with the
    others written at their indices. The bytes are the recorded ones, -0.0 and NaN included."""
    import torch

    from fuzzfuse.ir.graph import Graph, Node, Values
    from fuzzfuse.ir.values import encode_exact, make_inputs
    from fuzzfuse.short_repro import input_lines
    mostly = torch.ones(4, 300)
    mostly[0, :5] = torch.tensor([-0.0, 0.0, float("nan"), 14254.0, float("-inf")])
    drawn = Values(dist="normal", seed=7, specials=0.05)
    graph = Graph((TensorInput("x0", (4, 300), "float32", values=Values(exact=encode_exact(mostly))),
                   TensorInput("x1", (16, 64), "float32", values=drawn)),
                  (Node("v", "add", ("x0", "x0")), Node("w", "mul", ("x1", "x1"))), ("v", "w"))
    lines, hashed = input_lines(graph, "cpu")
    assert hashed and sum(map(len, lines)) < 2000, lines
    assert lines[0].startswith("x0 = torch.full([1200], 1.0") and "manual_seed(7)" in lines[1]
    scope, recorded = _inputs_of(lines), make_inputs(graph)
    for name, want in zip(("x0", "x1"), recorded):
        got = scope[name]
        assert got.shape == want.shape and [repr(v) for v in got.flatten().tolist()] == \
            [repr(v) for v in want.flatten().tolist()]


def test_a_large_input_holding_one_special_value_is_its_seeded_draw_with_the_value_written_in():
    """An H200 campaign's nvFuser repro of a [2, 3, 127, 255] float32 input holding one NaN was
    4 MB of literals (the lone-special draw had no short form): it is now the seeded normal draw,
    the NaN written at its index, and a check of the bytes."""
    import torch

    from fuzzfuse.ir.graph import Graph, Layout, Node, Values
    from fuzzfuse.ir.values import make_inputs
    from fuzzfuse.short_repro import input_lines
    graph = Graph((TensorInput("x0", (2, 3, 127, 255), "float32", layout=Layout("channels_last"),
                               values=Values(dist="lone_special", seed=1537801805)),),
                  (Node("v", "neg", ("x0",)),), ("v",))
    lines, hashed = input_lines(graph, "cpu")
    assert hashed and sum(map(len, lines)) < 1000, [line[:200] for line in lines]
    got, want = _inputs_of(lines)["x0"], make_inputs(graph)[0]
    assert got.stride() == want.stride() and torch.equal(got.isnan(), want.isnan()) and int(want.isnan().sum()) <= 1
    assert torch.equal(got.nan_to_num(), want.nan_to_num())


def test_a_crash_title_quotes_its_reduced_repros_error_and_a_retitle_keeps_the_gpu_run(tmp_path):
    """A campaign records the error text of the case it found, before reduction: 492d2868's title
    read "the tensor (7) must match the existing size (2) at non-singleton dimension 1" where its
    two-op repro raises "(3) ... (2) at ... dimension 0" (the GPU run its README quotes).
    Regenerating takes the repro's own error, and since only the docstring changes, the GPU run
    quoted before still stands for it."""
    from fuzzfuse.bugreport import recorded_run, regenerate, same_code, title, with_repro_detail

    directory = tmp_path / "d"
    shutil.copytree(ROOT / "minimized" / "nvfuser-crash-runtimeerror-492d2868", directory)
    case = load_case(directory / "case.json")
    unreduced = replace(case, detail="The expanded size of the tensor (7) must match the existing size (2) at "
                                     "non-singleton dimension 1.  Target sizes: [7, 7].  Tensor sizes: [7, 2]")
    (directory / "case.json").write_text(json.dumps(unreduced.to_json()))
    quoted = recorded_run((directory / "README.md").read_text())
    assert quoted.status == 1 and quoted.machine.startswith("NVIDIA H") and "(3) must match" in quoted.output
    line, ok = regenerate(directory)
    assert ok and "exit status 1" in line, line
    fixed = load_case(directory / "case.json")
    assert "tensor (3) must match the existing size (2) at non-singleton dimension 0" in title(fixed)
    assert recorded_run((directory / "README.md").read_text()) == quoted
    # another error than the recorded one, or another headline of the same, changes nothing
    assert with_repro_detail(unreduced, "RuntimeError: something else\n") == unreduced
    assert with_repro_detail(fixed, quoted.output) == fixed
    assert same_code('"""a"""\nx = 1\n', '"""b"""\nx = 1\n') and not same_code('"""a"""\nx = 1\n', '"""a\nb"""\nx = 1\n')


def test_an_nvrtc_overload_errors_title_keeps_the_argument_types_its_raw_log_prints_apart():
    """NVRTC prints an overload error's argument types on the line after it ("operand types are:
    nvf::__half != nvf::__half"); a repro's raw error, once its detail, must not lose them from the
    title: they are what the kernel got wrong."""
    case = load_case(ROOT / "minimized" / "nvfuser-crash-runtimeerror-csrc-runtime-compiled-kernel-cpp-23f11b4d"
                     / "case.json")
    assert 'error: no operator "!=" matches these operands' in case.detail
    assert "operand types are: nvf::__half != nvf::__half" in case.detail
    assert title(case).endswith("no operator != matches these operands [nvf::__half != nvf::__half]")


def test_a_report_of_a_rule_names_the_rule_and_the_other_graphs_that_show_it():
    """oneDNN Graph's unrounded quotient: the repro is one graph (div_trunc -> sigmoid); the
    maintainer reads the fault and the other graphs that showed it. A repro with no rule says
    neither."""
    body = issue_body(ROOT / "minimized" / "torchscript-onednn-mismatch-values-float-d6194ba9")
    assert "exactly what eager computes when a rounding division computes its quotient unrounded" in body
    assert "other reduced graph(s) fail the same way (their ops: " in body and "div_floor, tanh" in body
    plain = issue_body(MISMATCH)
    assert "exactly what eager computes" not in plain
