"""Repros that a maintainer pastes unchanged: their compact oracle and crash location give the
campaign's verdicts, their last line is the verdict the regression corpus reads, verification
demands the recorded signature, the report's Actual block is the repro's own output, and a case
pinned to a CPU capability the machine lacks skips with the reason. Real NNC runs, on this CPU."""
import json
import math
import shutil
import subprocess
import sys
import traceback
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fuzzfuse.backends import get_backend
from fuzzfuse.corpus import load_case
from fuzzfuse.export import judge, read_verdict
from fuzzfuse.ir import Values, interpret
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.repro_dir import agreed_output, refresh, verify_repro
from fuzzfuse.oracle import Signature, compare_output, exception_signature
from fuzzfuse.tracebacks import error_location, printed_error
from fuzzfuse.bugreport import quoted_output, run_repro, title
from fuzzfuse.repro import repro_files

from .test_plugin import CRASH, MISMATCH


def _exp_graph():
    """exp(x + x): right on NNC, which fuses it (one op alone it leaves unfused)."""
    b = GraphBuilder()
    x = b.tensor((2, 3), values=Values(seed=3))
    return b.build([b.add("exp", b.add("add", x, x))])


def _script_namespace(graph, versions=None) -> dict:
    """The functions of a generated repro (its main not run)."""
    source = repro_files(graph, get_backend("torchscript:nnc"), Signature("mismatch", ""), versions or {})["repro.py"]
    namespace = {"__name__": "repro"}
    exec(compile(source, "repro.py", "exec"), namespace)
    return namespace


def test_a_crash_is_located_from_the_printed_traceback_by_the_oracles_rule():
    """A repro's crash verdict names the exception type only; where it was raised is read from the
    traceback it prints, and that gives what the oracle gives in-process, warnings printed before
    and chained causes included."""
    errors = json.loads((Path(__file__).parent / "data" / "nvfuser_errors.json").read_text())
    messages = ["INTERNAL ASSERT FAILED at \"/opt/pytorch/torch/csrc/jit/tensorexpr/kernel.cpp\":443, please report",
                "RuntimeError: from fn at /some/where/deep/file.cu:12", "no location here"]
    for message in messages + [e["text"] for e in errors.values()]:
        def fuser():
            try:
                raise ValueError("a cause at /x/aten/src/ATen/cause.cpp:3")
            except ValueError as cause:
                raise RuntimeError(message) from cause
        try:
            fuser()
        except RuntimeError as e:
            tb = "".join(traceback.format_exception(e))
            printed = "[W warn.cpp:1] Warning: (Triggered internally at /x/aten/src/ATen/w.cpp:7.)\n" + tb
            assert error_location(*printed_error(printed)) == exception_signature("b", "run", "RuntimeError",
                                                                                     str(e), tb).location
    assert error_location(*printed_error(messages[0])) == ""  # no traceback printed: nothing to locate


def _verdict(graph, actual, expected, fp64_ref, capsys) -> str | None:
    """The kind a generated repro's check() gives (None when it passes the output)."""
    check = _script_namespace(graph)["check"]
    try:
        check("output 0", actual, expected, fp64_ref, 1.3e-6, 1e-5)
    except AssertionError:
        return read_verdict(capsys.readouterr().out)["kind"]
    return None


@pytest.mark.parametrize("fused, eager, ref", [
    ([1.0, math.nan], [1.0, 2.0], [1.0, 2.0]),  # NaN where eager and float64 agree: nan-inf
    ([1.0, math.inf], [1.0, math.nan], [1.0, math.nan]),  # NaN/inf where both have NaN: nan-inf
    ([1.0, math.nan], [1.0, math.inf], [1.0, 5.0]),  # eager itself is off from float64: not judged
    ([1.0, 2.5], [1.0, 2.0], [1.0, 2.0]),  # values
    ([1.0, 2.000001], [1.0, 2.0], [1.0, 2.0000005]),  # rounding: passes
    ([1.0, 2.1], [1.0, 2.2], [1.0, 2.1]),  # nearer float64 than eager: passes
])
def test_a_repros_check_gives_the_campaigns_verdict_on_floats(fused, eager, ref, capsys):
    tensors = [torch.tensor(v, dtype=torch.float32) for v in (fused, eager)] + [torch.tensor(ref, dtype=torch.float64)]
    theirs = compare_output(0, *tensors)
    assert _verdict(_exp_graph(), *tensors, capsys) == (theirs.kind if theirs else None)


@pytest.mark.parametrize("fused, eager, ref", [
    ([1, 2, 3], [1, 2, 4], [1, 2, 4]),  # a wrong integer
    ([1, 2, 3], [1, 2, 4], [1, 2, 3]),  # eager disagrees with float64 there: not judged
    ([[1, 2]], [1, 2], [1, 2]),  # shape
])
def test_a_repros_check_gives_the_campaigns_verdict_on_integers_and_shapes(fused, eager, ref, capsys):
    tensors = [torch.tensor(v, dtype=torch.int32) for v in (fused, eager)] + [torch.tensor(ref, dtype=torch.float64)]
    theirs = compare_output(0, *tensors)
    assert _verdict(_exp_graph(), *tensors, capsys) == (theirs.kind if theirs else None)
    assert _verdict(_exp_graph(), tensors[1].to(torch.int64), tensors[1], tensors[2], capsys) == "dtype"


@pytest.mark.parametrize("fused, eager, ref", [
    ([-math.inf, 1.0], [math.inf, 1.0], [math.inf, 1.0]),  # the wrong infinity
    ([-math.inf, 1.0], [-math.inf, 1.0], [-math.inf, 1.0]),  # right: passes
])
def test_a_repros_check_judges_fp8_outputs(fused, eager, ref, capsys):
    """fp8 has no isposinf on CPU: the H200 campaign's cast of -inf to float8_e5m2 wrote a repro
    whose check() raised instead of judging, so it printed no verdict and could not be verified."""
    tensors = [torch.tensor(v).to(torch.float8_e5m2) for v in (fused, eager)] + [torch.tensor(ref, dtype=torch.float64)]
    theirs = compare_output(0, *tensors)
    assert _verdict(_exp_graph(), *tensors, capsys) == (theirs.kind if theirs else None)


def test_verification_needs_the_recorded_signature_not_just_a_failing_exit(tmp_path):
    """The NNC mismatch repro exits 1 either way; recorded as another kind it does not reproduce."""
    directory = tmp_path / "mismatch"
    shutil.copytree(MISMATCH, directory)
    signature = load_case(directory / "case.json").signature
    verification, output, _, varies = verify_repro(directory, signature, runs=1)
    assert verification.status == "reproduces" and read_verdict(output)["kind"] == signature.kind and not varies
    other = "values" if signature.kind == "nan-inf" else "nan-inf"
    verification, *_ = verify_repro(directory, replace(signature, kind=other), runs=1)
    assert verification.status == "does not reproduce"
    assert verification.verdicts == (f"mismatch {signature.kind} {signature.location}",)


@pytest.mark.slow  # 10 s: verifies and runs two repros (over the fast budget, issue 36)
def test_a_refreshed_report_quotes_its_short_repros_own_run_and_names_the_ops(tmp_path):
    """refresh writes the short repro.py beside regression.py (which still prints the verdict line),
    and the README quotes the short repro's own run in a fresh process."""
    directory = tmp_path / "crash"
    shutil.copytree(CRASH, directory)
    case = refresh(directory, verify_runs=1)
    assert case.verification.status == "reproduces"
    readme = (directory / "README.md").read_text()
    run = run_repro(directory)
    quoted = readme.split("**Output** of `python repro.py`", 1)[1].split("```\n", 1)[1].split("\n```", 1)[0]
    assert run.status == 1 and quoted == quoted_output(run.output)
    heading = readme.splitlines()[0]
    assert heading == "# " + title(case) and heading.startswith("# NNC (CPU")
    assert all(n.op in heading for n in case.graph.nodes)
    full = run_repro(directory, script="regression.py")
    assert full.output.splitlines()[-1].startswith("fuzzfuse-verdict: ")


@pytest.mark.slow  # 11 s: a fresh CPU Inductor repro run (over the fast budget, issue 36)
def test_a_repros_float64_reference_widens_the_floats_an_op_makes_from_integers(tmp_path):
    """exp2 of int8 is float32, and the float64 reference met float64 weights with it: linear
    refused the pair, so the H200's repro of exp2(int8) -> linear printed no verdict and was
    recorded as not reproducing. Its reference is now the oracle's (`interpret`, upcast=True);
    real CPU Inductor judges it."""
    b = GraphBuilder()
    x, w, bias = b.tensor((1, 4), "int8", values=Values(seed=1)), b.tensor((3, 4), values=Values(seed=2)), b.tensor((3,))
    graph = b.build([b.add("linear", b.add("exp2", x), w, bias)])
    (tmp_path / "repro.py").write_text(repro_files(graph, get_backend("inductor"), Signature("mismatch", "values"),
                                                   {})["repro.py"])
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert read_verdict(run.stdout) == {"outcome": "pass"}, run.stderr[-2000:]


@pytest.mark.parametrize("source, via, value", [
    ("float32", "bfloat16", -0.35619449615478516),  # the H100's Inductor kept -0.356194, eager -0.355469
    ("float64", "float32", -1.7976931348623157e+308),  # float32's -inf; the H100's Inductor kept the double
    ("int32", "float16", 2049),  # float16's 2048
    ("float16", "float32", 0.1),  # a widening: rounds nothing
])
def test_a_repros_float64_reference_rounds_where_the_oracles_does(source, via, value, capsys):
    """The oracle's float64 arbiter keeps the rounding an explicit cast asks for; the repro's
    reference made every floating cast a float64 one, so two Inductor CUDA cast bugs the campaign
    judged wrong were judged right by their own repros and counted unconfirmed, campaign after
    campaign. The repro's reference now gives the oracle's values, and its check fails a fuser
    that dropped the rounding."""
    b = GraphBuilder()
    x = b.tensor((3,), source)
    back = "float32" if source.startswith("int") else source
    graph = b.build([b.add("cast", b.add("cast", x, dtype=via), dtype=back)])
    inputs = [torch.tensor([value] * 3, dtype=getattr(torch, source))]
    oracle = interpret(graph, inputs, upcast=True)[0][graph.outputs[0]]
    repro = _script_namespace(graph)
    reference = repro.get("fn_float64", repro["fn"])(*[x.double() if x.is_floating_point() else x for x in inputs])[0]
    assert torch.equal(reference.double(), oracle.double())
    eager = repro["fn"](*inputs)[0]
    dropped = inputs[0].to(eager.dtype)  # the cast to `via` left out
    if torch.equal(dropped, eager):
        repro["check"]("output 0", dropped, eager, reference, 1e-7, 1e-7)  # nothing to drop: right
    else:
        with pytest.raises(AssertionError):
            repro["check"]("output 0", dropped, eager, reference, 1e-7, 1e-7)
        assert '"outcome": "mismatch"' in capsys.readouterr().out


# Two runs of the committed bfs.h:261 repro on the H200: nvFuser lists the visited ID groups of its
# failed traversal in another order on each run.
_BFS = ("expected: nvfuser compiles and runs fn\n"
        "actual: RuntimeError:  INTERNAL ASSERT FAILED at /workspace/Fuser/csrc/bfs.h:261, please report a bug\n"
        "BFS traversal could not visit some nodes:  idg{54 58} (from:  idg{29 31 36 38 43 45}), visited: ( VISITED)\n"
        "Exception raised from traverse at /workspace/Fuser/csrc/bfs.h:261 (most recent call first):\n"
        'fuzzfuse-verdict: {"outcome": "crash", "kind": "RuntimeError"}\n')


def test_a_report_quotes_only_the_lines_every_verifying_run_printed():
    """The README of the bfs.h:261 repro quoted one run's order, and the verbatim check failed on
    the GPU: what the runs print alike is quoted, up to the first line that differs, and the verdict
    line stays for the title."""
    runs = [_BFS.replace("VISITED", "idg{55 56 57 59} idg{2 7 12 24} idg{30 37 44}"),
            _BFS.replace("VISITED", "idg{55 56 57 59} idg{30 37 44} idg{2 7 12 24}")]
    output, varies = agreed_output(runs)
    assert varies and output.splitlines() == runs[0].splitlines()[:2] + runs[0].splitlines()[-1:]
    assert read_verdict(output) == read_verdict(runs[1])
    assert agreed_output(runs[:1] * 3) == (runs[0], False)


@pytest.mark.parametrize("capability", ["zvector", "avx512"])
def test_a_repro_pinned_to_a_capability_this_machine_lacks_skips_with_the_reason(tmp_path, capability):
    """Exit 125 (git bisect run's skip) and a skip verdict; pinned repros also turn Inductor's
    caches off, which do not key on the capability. The CPU itself is asked: with
    ATEN_CPU_CAPABILITY=avx512 set, torch reports AVX512 on an AVX2 machine, and such repros ran
    AVX-512 kernels there and died by SIGILL."""
    if capability == "avx512" and torch.cpu._is_avx512_supported():
        pytest.skip("this machine's CPU has AVX-512: an avx512 repro runs here")
    files = repro_files(_exp_graph(), get_backend("torchscript:nnc"), Signature("mismatch", ""),
                        {"cpu_capability": capability})
    source = files["repro.py"]
    assert source.index('os.environ["ATEN_CPU_CAPABILITY"] = CPU_CAPABILITY') < source.index("import torch")
    assert 'os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"' in source
    (tmp_path / "repro.py").write_text(source)
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 125, run.stdout + run.stderr
    verdict = judge("mismatch", "values", "float", run.returncode, run.stdout, run.stderr)
    best = "avx512" if torch.cpu._is_avx512_supported() else "avx2" if torch.cpu._is_avx2_supported() else "default"
    assert verdict == f"skipped: the bug needs CPU capability {capability}; this machine's CPU has {best}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the repro would run")
def test_a_gpu_repro_on_a_machine_without_one_skips_with_the_reason(tmp_path):
    """Exit 125 and a skip verdict, so that the corpus skips it on CI instead of failing on torch's
    "not compiled with CUDA" traceback."""
    from fuzzfuse.backends.inductor import InductorBackend

    source = repro_files(_exp_graph(), InductorBackend("cuda"), Signature("mismatch", ""), {})["repro.py"]
    (tmp_path / "repro.py").write_text(source)
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 125
    verdict = judge("mismatch", "values", "float", run.returncode, run.stdout, run.stderr)
    assert verdict == "skipped: the bug needs a CUDA GPU; this machine has none"


def test_a_repro_whose_bug_is_gone_passes_with_a_pass_verdict(tmp_path):
    """exp(x + x) on NNC is right: exit 0, and the verdict says pass."""
    (tmp_path / "repro.py").write_text(repro_files(_exp_graph(), get_backend("torchscript:nnc"),
                                                   Signature("mismatch", ""), {})["repro.py"])
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and read_verdict(run.stdout)["outcome"] == "pass"


STRIDE_CASES = {
    "transposed": (lambda x: x.t().contiguous().t(), lambda x: x),
    "channels_last": (lambda x: x.contiguous(), lambda x: x.contiguous(memory_format=torch.channels_last)),
    "same": (lambda x: x.clone(), lambda x: x),
    "expanded eager": (lambda x: x.clone(), lambda x: x[:, :1].expand(x.shape)),
    "empty": (lambda x: x[:0].t().contiguous().t(), lambda x: x[:0]),
    "size-1 dims": (lambda x: x[:1].t().contiguous().t(), lambda x: x[:1]),
}


@pytest.mark.parametrize("name", sorted(STRIDE_CASES))
def test_a_strides_repros_check_agrees_with_the_oracle(name):
    """A strides mismatch's repro checks strides as oracle.compare_output does (before, a repro
    had no stride check, so every strides reduction ended as 'does not reproduce')."""
    b = GraphBuilder()
    graph = b.build([b.add("neg", b.tensor([4, 6, 2, 3] if name == "channels_last" else [4, 6]))])
    source = repro_files(graph, get_backend("torchscript:nnc"),
                         Signature("mismatch", "torchscript:nnc", "run", "strides", "float"), {})["repro.py"]
    assert 'check_strides(f"output {i}", a, e)' in source
    namespace = {}
    exec(compile(source, "repro.py", "exec"), namespace)  # defines the functions; __name__ is not __main__
    fused_of, eager_of = STRIDE_CASES[name]
    x = torch.randn([4, 6, 2, 3] if name == "channels_last" else [4, 6])
    fused, eager = fused_of(x), eager_of(x)
    oracle = compare_output(0, fused, eager, eager.double(), check_strides=True)
    try:
        namespace["check_strides"]("output 0", fused, eager)
        raised = False
    except AssertionError:
        raised = True
    assert raised == (oracle is not None and oracle.kind == "strides")
    assert raised == (name in ("transposed", "channels_last"))


@pytest.mark.parametrize("name", ["nvfuser", "aot:nvfuser"])
def test_an_nvfuser_repro_is_a_standalone_script_that_compiles_here(name):
    """No GPU needed to write one: the nvFuser repro defines its fusion with nvfuser_direct's
    FusionDefinition and executes it on the exact inputs; aot:nvfuser's prints the fusions it ran.
    Either exits at once on a crash, before a fusion's destructor can abort the process."""
    from fuzzfuse.backends.aot_nvfuser import AotNvFuserBackend
    from fuzzfuse.backends.nvfuser import NvFuserBackend

    backend = {"nvfuser": NvFuserBackend, "aot:nvfuser": AotNvFuserBackend}[name]()
    source = repro_files(_exp_graph(), backend, Signature("crash", "", kind="RuntimeError"), {"gpu": "H200"})["repro.py"]
    compile(source, "repro.py", "exec")
    assert "os._exit(verdict(\"crash\"" in source and "DEVICE = 'cuda'" in source
    if name == "nvfuser":
        assert "with FusionDefinition() as fd:" in source and "fd.execute(" in source and "fd.add_output(" in source
    else:
        assert "print(result.context.strip())" in source


def test_a_crash_prints_the_message_without_cpp_frames(tmp_path):
    """nvFuser's errors end in C++ frames whose addresses change every run: the Actual line a
    report quotes stops before them (the traceback on stderr keeps them)."""
    (tmp_path / "repro.py").write_text(repro_files(_exp_graph(), get_backend("torchscript:nnc"),
                                                   Signature("crash", "", kind="RuntimeError"), {})["repro.py"])
    error = ("INTERNAL ASSERT FAILED at csrc/ops/arith.cpp:2601\nException raised from scan at csrc/ops/arith.cpp:2601 "
             "(most recent call first):\nframe #0: nvfuser::nvfCheckFail + 0xc2 (0x7f4c5512d4a6 in libnvfuser_codegen.so)")
    run = subprocess.run([sys.executable, "-c", "import runpy; runpy.run_path('repro.py', run_name='repro')['crashed']"
                          f"(RuntimeError({error!r}))"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1
    actual = run.stdout[run.stdout.index("actual:"):run.stdout.index("fuzzfuse-verdict:")]
    assert actual.rstrip().endswith("Exception raised from scan at csrc/ops/arith.cpp:2601 (most recent call first):")
    assert "frame #0" not in actual and "frame #0" in run.stderr
