"""Reduction end to end, through isolated workers: each deliberately buggy backend's failure is
reduced to its known minimal trigger without slipping to another signature, and saved as a repro
that fails on its own. Real-fuser reductions are in test_real_fusers.py."""
import re
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from fuzzfuse.identity import root_cause_key
from fuzzfuse.corpus import Case, load_case, write_json
from fuzzfuse.ir import Layout, Values, make_inputs
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.job import backend_for, run_case
from fuzzfuse.minimize import reduce_case, save_minimized
from fuzzfuse.oracle import Signature
from fuzzfuse.verdict import Outcome

BUGGY = "custom:tests.buggy_backends:"


def busy_graph(trigger):
    """A dozen ops of noise around `trigger(builder, x)`."""
    b = GraphBuilder()
    x = b.tensor((3, 4, 5), "float16", values=Values(seed=1, specials=0.1))
    y = b.tensor((4, 5), "float32", values=Values(seed=2))
    a = b.add("add", x, y)
    c = b.add("mul", b.add("relu", a), 2.0)
    d = b.add("amax", b.add("abs", c), dims=[0], keepdim=False)
    hit = trigger(b, b.add("sub", c, d))
    e = b.add("where", b.add("gt", hit, 0.5), hit, b.add("neg", hit))
    f = b.add("mean", b.add("sqrt", b.add("abs", e)), dims=[1, 2], keepdim=True)
    return b.build([b.add("add", f, 1.0), d])


def failing_case(backend, graph):
    result = run_case(graph, backend_for(BUGGY + backend))
    assert result.outcome != "pass", result
    return Case(graph, BUGGY + backend, outcome=result.outcome, signature=result.signature,
                detail=result.detail)


def reduce_with(backend, graph, timeout=30.0, case=None):
    case = case or failing_case(backend, graph)
    return case, reduce_case(case, BUGGY + backend, workers=2, timeout=timeout)


def ops(graph):
    return sorted(n.op for n in graph.nodes)


@pytest.mark.slow
def test_crash_reduces_to_sum_into_sigmoid_and_saves_a_repro(tmp_path):
    graph = busy_graph(lambda b, v: b.add("sigmoid", b.add("sum", v, dims=[1], keepdim=True)))
    case, result = reduce_with("CrashOnSumSigmoid", graph)
    assert graph.size >= 12 and ops(result.graph) == ["sigmoid", "sum"]
    assert result.stats.queries < 120 and result.stats.cache_hits > 0
    directory = save_minimized(tmp_path, case, result, BUGGY + "CrashOnSumSigmoid")
    saved = load_case(directory / "case.json")
    assert saved.verification.status == "reproduces"
    assert saved.reduction.ops_before == graph.size and saved.reduction.ops_after == 2
    assert saved.reduction.queries == result.stats.queries
    assert "sum" in (directory / "README.md").read_text()
    # The case named no versions (made here, not by a campaign): the report names this machine's.
    assert not case.versions and saved.versions["torch"] == torch.__version__
    assert "**Found with:** " in (directory / "README.md").read_text() and torch.__version__ in \
        (directory / "README.md").read_text()
    again = save_minimized(tmp_path, case, replace(result, graph=graph), BUGGY + "CrashOnSumSigmoid")
    assert again == directory and load_case(directory / "case.json").hits == 2  # the smaller repro stays
    assert load_case(directory / "case.json").graph.size == 2


@pytest.mark.slow
def test_a_case_keyed_by_an_older_normalizer_is_saved_under_todays_signature(tmp_path):
    """Same outcome, stage, kind and location, older wording: the reducer keeps today's wording,
    and so does the saved repro (else `fuzz --known` never matches it: the GPU campaign's
    InferSize.h:99 repro came back keyed with its old message)."""
    graph = busy_graph(lambda b, v: b.add("sigmoid", b.add("sum", v, dims=[1], keepdim=True)))
    fresh = failing_case("CrashOnSumSigmoid", graph)
    stale = replace(fresh, signature=replace(fresh.signature, message="frame #N: c10::Error::Error(...)"))
    _, result = reduce_with("CrashOnSumSigmoid", graph, case=stale)
    assert result.signature == fresh.signature
    directory = save_minimized(tmp_path, stale, result, BUGGY + "CrashOnSumSigmoid", verify_runs=1)
    assert load_case(directory / "case.json").signature == fresh.signature
    assert [p.name for p in tmp_path.iterdir()] == [directory.name]  # nothing staged is left behind


def test_wrong_values_reduce_to_one_exp():
    graph = busy_graph(lambda b, v: b.add("exp", v))
    case, result = reduce_with("WrongOnExp", graph)
    assert ops(result.graph) == ["exp"]
    assert case.signature.outcome == "mismatch"


@pytest.mark.slow
def test_a_wrong_value_seen_through_a_comparison_is_reduced_to_its_culprit():
    """The user backend's sigmoid(sum(x)) is 10% too large; gt(.., 0.5) shows it as a wrong bool,
    a mismatch of another kind, which the same-signature test alone could never drop. The culprit
    (sigmoid, a wrong float) alone fails as a float mismatch: the repro is the two ops."""
    import torch

    from fuzzfuse.ir.values import encode_exact

    backend = "dynamo:tests.buggy_dynamo_backends:wrong_backend"
    b = GraphBuilder()
    x = b.tensor((1, 4), values=Values(exact=encode_exact(torch.tensor([[-0.1, 0.0, 0.0, 0.0]]))))
    graph = b.build([b.add("gt", b.add("sigmoid", b.add("sum", x, dims=[1], keepdim=True)), 0.5)])
    result = run_case(graph, backend_for(backend))
    assert (result.outcome, result.signature.kind, result.signature.location) == ("mismatch", "values", "bool")
    case = Case(graph, backend, outcome=result.outcome, signature=result.signature, detail=result.detail)
    reduced = reduce_case(case, backend, workers=2)
    assert ops(reduced.graph) == ["sigmoid", "sum"]
    assert (reduced.signature.kind, reduced.signature.location) == ("values", "float")
    assert reduced.generalisation.culprit is None  # the culprit is the output itself now
    # sigmoid alone on the sum's value is right (the rewrite needs the pair), so the identity is
    # the pair's first op that is no filler (identity.culprit_position): sum, on float.
    assert root_cause_key(reduced.signature, reduced.graph, reduced.generalisation).endswith(
        "|wrong-value|forward|sum|float")


@pytest.mark.slow
def test_hard_crash_reduces_to_one_tanh():
    graph = busy_graph(lambda b, v: b.add("tanh", v))
    case, result = reduce_with("SegfaultOnTanh", graph, case=Case(
        graph, BUGGY + "SegfaultOnTanh", outcome=Outcome.HARD_CRASH,
        signature=Signature("hard-crash", BUGGY + "SegfaultOnTanh", "run", "SIGSEGV")))
    assert ops(result.graph) == ["tanh"]


@pytest.mark.slow
def test_hang_reduces_to_one_cos(tmp_path):
    b = GraphBuilder()
    x = b.tensor((3, 4))
    v = b.add("cos", b.add("mul", b.add("exp", x), 2.0))
    graph = b.build([b.add("add", v, b.add("neg", x))])
    case = Case(graph, BUGGY + "HangOnCos", outcome=Outcome.HANG,
                signature=Signature("hang", BUGGY + "HangOnCos", "run", "timeout"))
    _, result = reduce_with("HangOnCos", graph, timeout=3.0, case=case)
    assert ops(result.graph) == ["cos"]
    # The repro's own timeout is longer than the reduction's: its fused run imports fuzzfuse (a
    # custom backend), which on a machine busy with the whole suite can outlast 3 s, and the stack
    # quoted must be the sleep's in both runs.
    directory = save_minimized(tmp_path, case, result, BUGGY + "HangOnCos", verify_runs=2, timeout=10.0)
    assert load_case(directory / "case.json").verification.status == "reproduces"  # gives up, exit 1
    # The report says where the fuser was (its sleep, in the backend's misbehave), in the same
    # words in every run (a line the runs print differently is not quoted).
    where = r"^still in: misbehave \(buggy_backends\.py:\d+\) <- .* <- run_fused \(repro\.py:\d+\)$"
    assert re.search(where, (directory / "README.md").read_text(), re.M)


def test_no_slippage_between_two_bugs():
    """A graph with both bugs, whose signature is the cast crash: a reduction must not wander into
    the (cheaper to reach) sum->sigmoid crash, and the other way round."""
    b = GraphBuilder()
    x = b.tensor((3, 4))
    s = b.add("sum", x, dims=[1], keepdim=True)
    hit = b.add("sigmoid", b.add("exp", s))
    cast = b.add("cast", b.add("relu", x), dtype="int32")
    graph = b.build([hit, cast])
    case, result = reduce_with("CrashOnCast", graph)
    assert case.signature.location == "csrc/cast.cpp:12"
    assert "cast" in ops(result.graph) and "sigmoid" not in ops(result.graph)
    final = run_case(result.graph, backend_for(BUGGY + "CrashOnCast"))
    assert final.signature == case.signature

    b = GraphBuilder()
    x = b.tensor((3, 4))
    hit = b.add("sigmoid", b.add("sum", x, dims=[1], keepdim=True))
    graph = b.build([hit, b.add("cast", b.add("exp", hit), dtype="int32")])
    case, result = reduce_with("CrashOnCast", graph)
    assert case.signature.location == "csrc/reduction_sched.cpp:77"
    assert ops(result.graph) == ["sigmoid", "sum"]


@pytest.mark.slow  # 17 s: reduces through the CLI (over the fast budget, issue 36)
def test_reduce_cli_writes_minimized_dir(tmp_path):
    graph = busy_graph(lambda b, v: b.add("sigmoid", b.add("sum", v, dims=[1], keepdim=True)))
    from fuzzfuse.corpus import save_case
    path = save_case(tmp_path / "corpus", failing_case("CrashOnSumSigmoid", graph))
    r = subprocess.run([sys.executable, "-m", "fuzzfuse", "reduce", str(path), "--out", str(tmp_path / "min"),
                        "--workers", "2", "--backend", BUGGY + "CrashOnSumSigmoid"],  # a file cannot choose it
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"{graph.size} -> 2 ops" in r.stdout and "reproduces" in r.stdout
    (slug,) = list((tmp_path / "min").iterdir())
    assert (slug / "repro.py").exists() and (slug / "README.md").exists()


@pytest.mark.slow  # 26 s: reduces through the CLI (over the fast budget, issue 36)
def test_reduce_cli_takes_a_corpus_reduces_once_per_signature_and_reports_bad_files(tmp_path):
    from fuzzfuse.corpus import save_case
    small = busy_graph(lambda b, v: b.add("sigmoid", b.add("sum", v, dims=[1], keepdim=True)))
    big = busy_graph(lambda b, v: b.add("sigmoid", b.add("sum", b.add("exp", v), dims=[1], keepdim=True)))
    for graph in (small, big):
        save_case(tmp_path / "corpus", failing_case("CrashOnSumSigmoid", graph))
    cast = busy_graph(lambda b, v: b.add("cast", v, dtype="int32"))
    save_case(tmp_path / "corpus", failing_case("CrashOnCast", cast))  # a second signature
    b = GraphBuilder()
    gone = b.build([b.add("sigmoid", b.tensor((3, 4)))])  # recorded with the crash, passes today: skipped
    save_case(tmp_path / "corpus", replace(failing_case("CrashOnSumSigmoid", small), graph=gone))
    (tmp_path / "corpus" / "torn.json").write_text('{"graph": ')
    r = subprocess.run([sys.executable, "-m", "fuzzfuse", "reduce", str(tmp_path / "corpus"), "--out",
                        str(tmp_path / "min"), "--workers", "2", "--budget", "40",
                        # named here, since a case file cannot choose a custom backend; it has both bugs
                        "--backend", BUGGY + "CrashOnCast"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "torn.json: cannot read case" in r.stderr
    assert f"skipped: {tmp_path / 'corpus' / gone.digest()}.json: the original graph is not interesting" in r.stderr
    lines = [ln for ln in r.stdout.splitlines() if " ops in " in ln]  # one reduction per signature
    assert len(lines) == 2 and all("reproduces" in ln for ln in lines)
    assert {ln.split(":", 1)[0] for ln in lines} == {str(tmp_path / "corpus" / g.digest()) + ".json"
                                                     for g in (small, cast)}
    assert sorted(p.name for p in (tmp_path / "min").iterdir()) == sorted(ln.rsplit("/", 1)[1] for ln in lines)


def test_a_constant_input_is_spelled_out_in_the_repro_however_large(tmp_path):
    """A zeros input above the inline limit is one torch.zeros line, not a part of the inputs file
    (a committed nvFuser repro saved 4 MB of zeros); a large seeded input beside it still goes to
    inputs.bin, as raw bytes (no pickle: a repro directory is shared). The script runs for real on
    NNC (its interpreter: small shapes) and passes."""
    import torch
    from fuzzfuse.backends import get_backend
    from fuzzfuse.repro import repro_files
    b = GraphBuilder()
    zeros = b.tensor((2, 64, 72), values=Values("zeros"))
    seeded = b.tensor((1, 64, 72), values=Values("normal", seed=5))
    small = b.tensor((2, 1, 1), values=Values("ones"), layout=Layout("expanded", dims=(0,)))
    graph = b.build([b.add("add", b.add("add", zeros, b.add("sum", seeded, dims=[2], keepdim=True)), small)])
    signature = Signature("crash", "torchscript:nnc", "run", "RuntimeError", "", "example")
    files = repro_files(graph, get_backend("torchscript:nnc"), signature, {})
    source = files["repro.py"]
    assert "x0 = torch.zeros([2, 64, 72], dtype=torch.float32, device=DEVICE)" in source
    assert "x2 = torch.ones([2, 1, 1], dtype=torch.float32, device=DEVICE)" in source
    assert "x1 = torch.frombuffer(bytearray(raw[0:18432]), dtype=torch.uint8).view(torch.float32)" in source
    assert files["inputs.bin"] == make_inputs(graph)[1].numpy().tobytes() and "torch.load" not in source
    (tmp_path / "repro.py").write_text(source)
    (tmp_path / "inputs.bin").write_bytes(files["inputs.bin"])
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "matches eager" in run.stdout, run.stdout + run.stderr


@pytest.mark.slow  # 12 s: a fresh repro run per capability (over the fast budget, issue 36)
def test_a_cpu_repro_is_pinned_to_the_lowest_capability_it_fails_under(tmp_path):
    """NNC's elu bug (elu -> div) fails under ATEN_CPU_CAPABILITY=default: recorded with avx2 (as a
    campaign on an AVX2 machine records it), its repro is written pinned to default, so that it
    runs on any x86 machine; a case pinned to default already, or not pinned (a GPU case), has no
    other candidate."""
    import json
    from pathlib import Path

    from fuzzfuse.repro_dir import pin_candidates, write_minimized
    committed = Path(__file__).parent.parent / "minimized" / "torchscript-nnc-mismatch-values-float-c8e27f28"
    case = load_case(committed / "case.json")
    assert case.versions["cpu_capability"] == "default"
    found_with_avx2 = replace(case, versions={**case.versions, "cpu_capability": "avx2"})
    assert [c.versions["cpu_capability"] for c in pin_candidates(found_with_avx2)] == ["default", "avx2"]
    written = write_minimized(tmp_path / "repro", found_with_avx2)
    assert written.versions["cpu_capability"] == "default" and written.verification.status.value == "reproduces"
    assert json.loads((tmp_path / "repro" / "case.json").read_text())["versions"]["cpu_capability"] == "default"
    assert "CPU_CAPABILITY = 'default'" in (tmp_path / "repro" / "regression.py").read_text()
    assert 'os.environ["ATEN_CPU_CAPABILITY"] = \'default\'' in (tmp_path / "repro" / "repro.py").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["repro"]  # no staging folder left behind
    assert pin_candidates(case) == [case]
    unpinned = replace(case, versions={k: v for k, v in case.versions.items() if k != "cpu_capability"})
    assert pin_candidates(unpinned) == [unpinned]


@pytest.mark.slow
def test_a_directory_name_taken_by_another_bug_is_never_where_a_new_bug_lands(tmp_path):
    """A committed directory keeps the name its first key gave it; a later, different bug whose key
    hashes to that name got listed among the other's forms. It gets a directory of its own."""
    graph = busy_graph(lambda b, v: b.add("sigmoid", b.add("sum", v, dims=[1], keepdim=True)))
    case, result = reduce_with("CrashOnSumSigmoid", graph)
    directory = save_minimized(tmp_path, case, result, BUGGY + "CrashOnSumSigmoid", verify_runs=1)
    other = load_case(directory / "case.json")
    other = replace(other, signature=replace(other.signature, outcome="mismatch", stage="run", kind="values",
                                             location="float", message=""))
    write_json(directory / "case.json", other.to_json())  # the name now holds another bug
    again = save_minimized(tmp_path, case, result, BUGGY + "CrashOnSumSigmoid", verify_runs=1)
    assert again == directory.with_name(directory.name + "-2")
    assert load_case(directory / "case.json").also_seen_as == other.also_seen_as


@pytest.mark.slow  # NNC through isolated workers
def test_a_case_recorded_with_another_exception_kind_is_reduced_where_it_is_the_same_bug():
    """nvFuser's parallel compile wrapped an IndexError in a RuntimeError of its own; its workers
    now turn that off, so a case recorded wrapped raises the IndexError. The reducer takes today's
    signature where the kind differs but the bug is the same (`identity.same_bug`), and refuses a
    case whose record names another bug. Real NNC, a committed assert's case with its kind
    rewritten as the wrapper would have recorded another."""
    from pathlib import Path

    from fuzzfuse.reduce import NotInteresting

    committed = load_case(Path(__file__).resolve().parent.parent / "minimized" /
                          "torchscript-nnc-crash-runtimeerror-csrc-jit-tensorexpr-expr-7afc6800" / "case.json")
    wrapped = replace(committed, signature=replace(committed.signature, kind="IndexError"))
    result = reduce_case(wrapped, committed.backend, workers=1, timeout=60.0, generalise=False)
    assert result.signature == committed.signature
    other = replace(wrapped, signature=replace(wrapped.signature, message="unordered_map::at"), detail="unordered_map::at")
    with pytest.raises(NotInteresting):
        reduce_case(other, committed.backend, workers=1, timeout=60.0, generalise=False)
