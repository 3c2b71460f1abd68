"""Bug identities (fuzzfuse.identity): same_bug, where a wrong value's culprit is, the index of
known bugs, the identity's JSON codec, and folding a corpus by identity (fuzzfuse.fold) on real
committed repros. The crash texts are nvFuser's own (tests/data/nvfuser_errors.json); the fold
corpus is real case files of minimized/ (tests/data/identity_corpus: copies, since minimized/ is
itself refolded as identities change), copied again into tmp_path before each fold."""
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from fuzzfuse.backends import Unavailable, get_backend
from fuzzfuse.corpus import load_case
from fuzzfuse.fold import fold, with_graph_from_history
from fuzzfuse.identity import (Anchor, BugIdentity, Symptom, case_identity, culprit_position, dtype_class, identify,
                               root_cause_key, same_bug, variant_identity)
from fuzzfuse.known import KnownBugs, variant_entry
from fuzzfuse.ir import Graph
from fuzzfuse.ir.graph import GraphError
from fuzzfuse.oracle import Signature, exception_signature
from fuzzfuse.reduce.generalise import Generalisation
from fuzzfuse.rekey import stale
from fuzzfuse.rootcause import signature_today
from fuzzfuse.verdict import Reproduction

DATA = Path(__file__).parent / "data"
ERRORS = json.loads((DATA / "nvfuser_errors.json").read_text())
CORPUS = DATA / "identity_corpus"
ELU_SMALL = "torchscript-nnc-mismatch-values-float-c8e27f28"  # NNC's elu on float, reduced to 2 ops...
ELU_LARGE = "torchscript-nnc-mismatch-values-float-6b7dcdc4"  # ...and again, larger: one bug, two directories
NVFUSER = "nvfuser-crash-runtimeerror-csrc-ir-internal-nodes-cpp-716-9e9c970d"  # lists an assert of codegen.cpp:910
NEG = "torchscript-nnc-mismatch-nan-inf-float-860d91da"  # NNC's neg; lists a wrong reciprocal, a bug of its own

WRONG = Signature("mismatch", "torchscript:nnc", "run", "values", "float")


def crash(name: str) -> Signature:
    e = ERRORS[name]
    return exception_signature(e["backend"], e["stage"], "RuntimeError", e["text"])


def chain(*ops: str, dtype: str = "float32", dead: str = "") -> Graph:
    """x0 -> op -> op ... as a chain ("cast" casts to float32); `dead`: an op on x0 that feeds no
    output."""
    nodes, prev = [], "x0"
    for k, op in enumerate(ops):
        nodes.append({"name": f"v{k}", "op": op, "args": [prev], "attrs": {"dtype": "float32"} if op == "cast" else {}})
        prev = f"v{k}"
    if dead:
        nodes.insert(0, {"name": "d0", "op": dead, "args": ["x0"], "attrs": {}})
    return Graph.from_json({"schema": 1, "outputs": [prev], "nodes": nodes, "inputs": [
        {"kind": "tensor", "name": "x0", "shape": [4], "dtype": dtype, "layout": {"kind": "contiguous"},
         "values": {"dist": "normal", "seed": 1}}]})


def general(graph: Graph, **fields) -> Generalisation:
    return Generalisation(graph.renamed().digest(), **fields)


# ---- same_bug -------------------------------------------------------------------------------------

def test_a_blank_device_is_every_devices_but_two_devices_are_two_bugs():
    on = {device: identify(WRONG, chain("frac"), device=device) for device in ("", "cpu", "cuda")}
    assert on["cpu"].key() == "culprit|nnc|cpu|wrong-value|forward|frac|float"
    assert same_bug(on[""], on["cpu"]) and same_bug(on["cuda"], on[""]) and same_bug(on["cpu"], on["cpu"])
    assert not same_bug(on["cpu"], on["cuda"])
    assert not same_bug(on["cpu"], identify(WRONG, chain("exp"), device="cpu"))
    # Pending (no identity yet) is nobody's bug, not even another pending one's.
    assert identify(WRONG) is None and not same_bug(None, None) and not same_bug(on["cpu"], None)


def test_an_assert_is_one_bug_on_every_device_and_two_locations_are_never_one():
    silu, isnan = crash("unary_evaluate_silu"), crash("unary_evaluate_isnan")
    assert silu.location == isnan.location and silu.key() != isnan.key()
    assert same_bug(identify(silu, device="cuda"), identify(isnan))  # the op in the message is folded out
    assert identify(silu, device="cuda").device == ""
    elsewhere = replace(silu, location=silu.location.rsplit(":", 1)[0] + ":699")
    assert identify(elsewhere).detail == identify(silu).detail
    assert not same_bug(identify(silu), identify(elsewhere))
    # The same message and line in another component (one assert of TorchScript's, hit via two
    # fusers) is two bugs too.
    run = crash("alias_analysis_run")
    assert not same_bug(identify(run), identify(replace(run, backend="torchscript:nnc")))


def test_an_assert_wrapper_is_unwrapped_to_the_same_bug():
    """nvFuser's parallel compile wraps a segment's error in its own assert (fusion_kernel_runtime
    .cpp:476): the wrapped and the bare error are one bug, and a repro recorded before the wrapper
    was unwrapped (keyed at 476, its error text kept) is that bug as today's oracle reads it."""
    text = ERRORS["parallel_nvrtc_shfl_xor_half"]["text"]
    wrapped, bare = crash("parallel_nvrtc_shfl_xor_half"), crash("nvrtc_shfl_xor_half")
    assert wrapped.backend != bare.backend and "fusion_kernel_runtime.cpp:476" in text
    assert same_bug(identify(wrapped), identify(bare))
    assert identify(bare).where == "csrc/runtime/compiled_kernel.cpp:187"
    recorded = replace(wrapped, location="csrc/runtime/fusion_kernel_runtime.cpp:476",
                       message="Error from segmentation group N")
    assert not same_bug(identify(recorded), identify(bare))  # as recorded: the wrapper's own assert
    today = signature_today(recorded, text)
    assert same_bug(identify(today), identify(bare))


# ---- where a wrong value starts --------------------------------------------------------------------

def test_a_probed_culprit_is_the_culprit():
    g = chain("neg", "exp", "log")
    assert culprit_position(g, general(g, culprit=(1, "values"), probed=True)) == 1
    assert identify(WRONG, g, general(g, culprit=(1, "nan-inf"), probed=True)).key() == \
        "culprit|nnc||wrong-value|forward|exp|float"
    # A culprit that generalisation also found a filler is no culprit: the first op that is none is.
    assert culprit_position(g, general(g, ops=((1, "unary"),), culprit=(1, "values"), probed=True)) == 0


def test_the_last_op_is_the_culprit_where_it_fails_alone_on_its_operands():
    g = chain("neg", "exp", "log")
    assert culprit_position(g, general(g, probed=True, alone=True)) == 2
    assert culprit_position(g, general(g, ops=((0, "unary"),), probed=True, alone=True)) == 2


def test_else_the_first_op_that_is_no_filler_is_the_culprit():
    """A fused pair whose last op is right on its own operands (not `alone`): the bug needs the
    ops before, and the first the failure needs names it."""
    g = chain("neg", "exp", "log")
    assert culprit_position(g, general(g, probed=True)) == 0
    assert culprit_position(g, general(g, ops=((0, "unary"),), probed=True)) == 1
    assert culprit_position(g, general(g, ops=((0, "unary"), (1, "unary"), (2, "unary")), probed=True)) is None
    # An op whose fused value was eager's bit for bit is passed over for an inexact one before the
    # last; where only the last is left (or every op was exact), the first names the pair.
    assert culprit_position(g, general(g, probed=True, exact=(0,))) == 1
    assert culprit_position(g, general(g, probed=True, exact=(0, 1))) == 0
    pair = chain("neg", "exp")
    assert culprit_position(pair, general(pair, probed=True, exact=(0,))) == 0
    # Not probed (a crash's generalisation, say): the one op that is no filler, if there is one.
    assert culprit_position(g, general(g, ops=((0, "unary"), (2, "unary")))) == 1
    assert culprit_position(g, general(g, ops=((0, "unary"),))) is None


def test_without_generalisation_only_a_graph_of_one_live_op_has_a_culprit():
    assert culprit_position(chain("frac"), None) == 0
    assert culprit_position(chain("frac", dead="exp"), None) == 1  # the dead op is no candidate
    two = chain("frac", "neg")
    assert culprit_position(two, None) is None
    assert identify(WRONG, two).anchor is Anchor.GRAPH
    # A generalisation found on another graph is not read.
    assert identify(WRONG, two, general(chain("frac", "abs"), ops=((1, "unary"),))).anchor is Anchor.GRAPH
    assert identify(WRONG, two, general(two, ops=((1, "unary"),))).anchor is Anchor.CULPRIT


def test_a_culprit_names_the_class_of_dtype_it_computes_in():
    assert dtype_class(chain("frac", dtype="float64"), 0) == dtype_class(chain("frac", dtype="float16"), 0) == "float"
    assert dtype_class(chain("cast", dtype="int32"), 0) == "int->float"
    assert dtype_class(chain("isnan"), 0) == "float->bool"
    assert root_cause_key(WRONG, chain("neg", dtype="int64")) == "culprit|nnc||wrong-value|forward|neg|int"


# ---- the index of known bugs -----------------------------------------------------------------------

def test_known_bugs_find_a_bug_by_its_key_on_its_device_or_on_any():
    culprit = identify(WRONG, chain("frac"))
    blank, cpu, cuda = (replace(culprit, device=d).key() for d in ("", "cpu", "cuda"))
    known = KnownBugs({blank: "minimized/frac-anywhere"})
    assert known.find(cpu) == known.find(cuda) == known.find(blank) == "minimized/frac-anywhere"
    known = KnownBugs({cpu: "minimized/frac-cpu"})
    assert known.find(cpu) == "minimized/frac-cpu"
    assert known.find(blank) == "minimized/frac-cpu"  # a key naming no device: a bug seen on any is it
    assert known.find(cuda) is None  # another device: another bug
    assert known.find(replace(culprit, where="exp", device="cpu").key()) is None and known.find(None) is None
    # The first directory recorded for a key keeps it; coarse signature keys are looked up as they are.
    known.add(cpu, "minimized/later")
    known.add(WRONG.key(), "minimized/frac-cpu")
    assert known.find(cpu) == "minimized/frac-cpu" and known.find(WRONG.key()) == "minimized/frac-cpu"
    assert known.find(replace(WRONG, backend="aot:nnc").key()) is None
    assert len(known) == 2 and dict(known.items()) == {cpu: "minimized/frac-cpu", WRONG.key(): "minimized/frac-cpu"}


# ---- the identity's JSON ---------------------------------------------------------------------------

def test_an_identity_round_trips_through_json_and_bad_json_is_refused():
    identities = [identify(crash("unary_evaluate_silu")), identify(WRONG, chain("frac"), device="cpu"),
                  identify(Signature("hang", "inductor", "run", "timeout"), chain("exp", "neg")),
                  identify(Signature("crash", "aot:onednn", "compile", "RuntimeError", "", "IValue is not a Scalar"))]
    assert [i.anchor for i in identities] == [Anchor.ASSERT, Anchor.CULPRIT, Anchor.GRAPH, Anchor.MESSAGE]
    for identity in identities:
        again = BugIdentity.from_json(json.loads(json.dumps(identity.to_json())))
        assert again == identity and again.key() == identity.key() and isinstance(again.symptom, Symptom)
    good = identities[1].to_json()
    assert good == {"component": "nnc", "anchor": "culprit", "symptom": "wrong-value", "where": "frac",
                    "detail": "float", "phase": "forward", "device": "cpu", "own_device_only": False}
    probed = replace(identities[1], own_device_only=True)
    assert BugIdentity.from_json(json.loads(json.dumps(probed.to_json()))) == probed
    for bad in ({**good, "anchor": "hunch"}, {**good, "symptom": "sad"}, {**good, "where": 3}, {**good, "own_device_only": "yes"},
                {**good, "exec": "os.system"}, {k: v for k, v in good.items() if k != "anchor"}, ["culprit"], None):
        with pytest.raises(GraphError):
            BugIdentity.from_json(bad)


# ---- folding a corpus by identity ------------------------------------------------------------------

def corpus(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / "minimized"
    for name in names:
        shutil.copytree(CORPUS / name, root / name)
    return root


def listed(directory: Path) -> list[str]:
    return [v.directory for v in load_case(directory / "case.json").also_seen_as]


def test_two_directories_of_one_bug_fold_into_the_smaller_which_lists_the_other(tmp_path):
    root = corpus(tmp_path, ELU_SMALL, ELU_LARGE)
    small, large = (load_case(root / n / "case.json") for n in (ELU_SMALL, ELU_LARGE))
    assert same_bug(case_identity(small), case_identity(large)) and case_identity(small).where == "elu"
    assert small.graph.size <= large.graph.size
    report = fold(root)
    assert report.folded == [(ELU_SMALL, [ELU_LARGE])] and not (report.split or report.not_split)
    assert {form for form, _, _ in report.moved} == set(listed(CORPUS / ELU_LARGE))
    assert all((src, dst) == (ELU_LARGE, ELU_SMALL) for _, src, dst in report.moved)
    assert [p.name for p in root.iterdir()] == [ELU_SMALL]
    kept = load_case(root / ELU_SMALL / "case.json")
    assert sorted(v.directory for v in kept.also_seen_as) == \
        sorted([ELU_LARGE, *listed(CORPUS / ELU_SMALL), *listed(CORPUS / ELU_LARGE)])
    assert all(same_bug(variant_identity(v, kept.device), case_identity(kept)) for v in kept.also_seen_as)
    assert kept.hits == small.hits + large.hits and kept.graph == small.graph
    folded_in = next(v for v in kept.also_seen_as if v.directory == ELU_LARGE)
    assert folded_in.graph == large.graph and folded_in.verification is Reproduction.REPRODUCES
    # Folded once, a corpus folds to itself.
    again = fold(root)
    assert not (again.folded or again.moved or again.split or again.dropped)
    assert load_case(root / ELU_SMALL / "case.json") == kept


def test_a_dry_run_says_what_a_fold_would_do_and_changes_nothing(tmp_path):
    root = corpus(tmp_path, ELU_SMALL, ELU_LARGE)
    before = {p.name: (p / "case.json").read_text() for p in root.iterdir()}
    report = fold(root, dry_run=True)
    assert report.folded == [(ELU_SMALL, [ELU_LARGE])]
    assert report.lines()[0] == f"{ELU_SMALL} <- 1: {ELU_LARGE}"
    assert {p.name: (p / "case.json").read_text() for p in root.iterdir()} == before


def test_a_form_of_another_bug_with_no_home_stays_where_its_backend_does_not_run(tmp_path):
    """An nvFuser assert (internal_nodes.cpp:716) lists one of codegen.cpp:910, a bug no directory
    holds: it needs a directory of its own, written and verified on the GPU it was found on, which
    this machine lacks, so it stays listed where it is, and the fold says why."""
    try:
        get_backend("nvfuser")
        pytest.skip("nvFuser runs here: the form would be split out")
    except Unavailable:
        pass
    root = corpus(tmp_path, NVFUSER)
    case = load_case(root / NVFUSER / "case.json")
    (form,) = case.also_seen_as
    assert form.graph is not None and not same_bug(variant_identity(form, case.device), case_identity(case))
    assert variant_identity(form).where == "csrc/codegen.cpp:910"
    before = (root / NVFUSER / "case.json").read_text()
    report = fold(root, verify_runs=1)
    assert [(f, src) for f, src, _ in report.not_split] == [(form.directory, NVFUSER)]
    assert "--split-on cuda" in report.not_split[0][2]
    assert not (report.split or report.folded or report.moved or report.dropped)
    assert [p.name for p in root.iterdir()] == [NVFUSER] and (root / NVFUSER / "case.json").read_text() == before


def test_a_form_of_another_bug_that_kept_no_graph_is_dropped_on_any_machine(tmp_path):
    """The same form without its reduced graph (and no version control to take it from) can be
    neither split nor verified: it would stay listed as a bug its directory does not hold, so the
    fold drops it, says why, and the directory keeps only its own bug."""
    root = corpus(tmp_path, NVFUSER)
    record = json.loads((root / NVFUSER / "case.json").read_text())
    (form,) = record["also_seen_as"]
    del form["graph"], form["generalisation"]
    (root / NVFUSER / "case.json").write_text(json.dumps(record))
    report = fold(root)
    assert [(f, src) for f, src, _ in report.dropped] == [(form["directory"], NVFUSER)]
    assert "no reduced graph" in report.dropped[0][2] and not (report.split or report.not_split)
    assert not load_case(root / NVFUSER / "case.json").also_seen_as


@pytest.mark.slow
def test_a_form_of_another_bug_with_no_home_is_split_into_a_verified_directory_of_its_own(tmp_path):
    """NNC's wrong neg lists a wrong reciprocal (another culprit, no directory of its own): on NNC,
    which runs here, the fold writes the form as a repro, verifies it in a fresh process, and
    takes it off the neg's list; the neg keeps its own form."""
    root = corpus(tmp_path, NEG)
    case = load_case(root / NEG / "case.json")
    mine = [v for v in case.also_seen_as if same_bug(variant_identity(v, case.device), case_identity(case))]
    (other,) = [v for v in case.also_seen_as if v not in mine]
    assert variant_identity(other, case.device).where == "reciprocal" and other.backend == "torchscript:nnc"
    report = fold(root, verify_runs=1)
    assert not report.not_split and not report.dropped, report.lines()
    ((new, source),) = report.split
    assert source == NEG and sorted(p.name for p in root.iterdir()) == sorted([NEG, new])
    split = load_case(root / new / "case.json")
    assert split.graph == other.graph and split.verification.status is Reproduction.REPRODUCES
    assert same_bug(case_identity(split), variant_identity(other, case.device))
    assert (root / new / "repro.py").is_file() and (root / new / "README.md").is_file()
    assert listed(root / NEG) == [v.directory for v in mine]
    # Split once, the corpus folds to itself.
    again = fold(root, verify_runs=1)
    assert not (again.folded or again.moved or again.split or again.dropped)


# ---- compile errors and forms kept without their graph ----------------------------------------------

SIGN = "inductor-crash-inductorerror-torch-inductor-cpp-builder-py-r-08db5315"  # Inductor CPU's sign on int8


def test_an_inductor_compile_error_is_named_by_the_compilers_first_error_and_its_producer():
    """Inductor CPU's sign on a small int type computes C++ int: argmax_combine rejects it after an
    int8 sign, max_propagate_nan after an int16 one. The first compiler error names the call that
    rejected its operands' types, downstream of the cause: one bug, keyed by the op that made the
    value (sign), not by the op that refused it."""
    case = load_case(CORPUS / SIGN / "case.json")
    today = signature_today(case.signature, case.detail)
    assert today.message.startswith("C++ compile error: no matching function for call to argmax_combine(")
    (form,) = case.also_seen_as
    assert "max_propagate_nan(int&, short int&)" in form.key and {"sign", "clamp"} == set(form.ops)
    ours, theirs = case_identity(case), variant_identity(form, case.device)
    assert ours.where == "sign:int" and same_bug(ours, theirs)
    other = replace(today, message="C++ compile error: ID was not declared in this scope")
    assert identify(other, case.graph, None, "cpu").anchor is Anchor.MESSAGE


LT_MASKS = "inductor-crash-inductorerror-torch-inductor-cpp-builder-py-r-4211f951"  # logical_not -> lt, VecMask


def test_two_vector_masks_the_generated_code_cannot_combine_are_one_bug_whatever_made_them():
    """Two bool values held as VecMasks of different element types cannot be compared: logical_not
    -> lt of bfloat16 and eq -> le of int8 are one bug (the comparison's code must convert one
    mask), keyed by the compiler's error, not by the op that made the masks. The '?:' of two such
    masks is another construct, another bug."""
    masks = load_case(CORPUS / LT_MASKS / "case.json")
    lt = signature_today(masks.signature, masks.detail)
    assert "VecMask<c10::BFloat16, N>" in lt.message and case_identity(masks).anchor is Anchor.MESSAGE
    vec = "at::vec::CPU_CAPABILITY::VecMask"
    le_of_int8 = replace(lt, message=f"C++ compile error: no match for operator<= (operand types are {vec}<signed "
                                     f"char, N> and {vec}<float, N>)")
    eq_then_le = Graph.from_json({**masks.graph.to_json(), "nodes": [
        {**masks.graph.to_json()["nodes"][0], "op": "eq", "args": ["x0", "x0"]},
        {**masks.graph.to_json()["nodes"][1], "op": "le"}]})
    assert same_bug(case_identity(masks), identify(le_of_int8, eq_then_le, None, "cpu"))
    ternary = replace(lt, message=f"C++ compile error: operands to ?: have different types {vec}<int, N> and "
                                  f"{vec}<float, N>")
    assert not same_bug(case_identity(masks), identify(ternary, masks.graph, None, "cpu"))


@pytest.mark.slow
def test_a_form_recorded_before_its_compile_error_was_named_is_split_run_and_folded_back(tmp_path):
    """The form as fuzzfuse recorded it before compile errors were named ("C++ compile error" and
    nothing more) keys apart from its bug. fold writes it as a repro, runs it under real Inductor,
    reads the compiler's error from that run, and folds it back into its bug's directory: one
    call, no hand."""
    root = corpus(tmp_path, SIGN)
    case = load_case(root / SIGN / "case.json")
    (form,) = case.also_seen_as
    generic = "crash|inductor|compile|InductorError|torch/_inductor/cpp_builder.py:_run_compile_cmd|" \
              "CppCompileError: C++ compile error"
    old = replace(form, key=generic, root_cause="graph|inductor|cpu|crash||sign:int clamp:int|C++ compile error")
    (root / SIGN / "case.json").write_text(json.dumps(replace(case, also_seen_as=[old]).to_json()))
    assert not same_bug(variant_identity(old, case.device), case_identity(case))
    report = fold(root, verify_runs=1)
    assert len(report.split) == 1 and report.folded == [(SIGN, [report.split[0][0]])], report.lines()
    assert [p.name for p in root.iterdir()] == [SIGN]
    (back,) = load_case(root / SIGN / "case.json").also_seen_as
    assert "max_propagate_nan" in back.key and back.graph == form.graph
    assert same_bug(variant_identity(back, case.device), case_identity(case))


def test_a_form_kept_without_its_graph_takes_it_from_version_control(tmp_path):
    """A form folded before forms kept their graphs has only its signature; the directory it was
    folded from is in the history, and its graph there names the form's bug."""
    root = corpus(tmp_path, ELU_SMALL, ELU_LARGE)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "two"], check=True)
    large = load_case(root / ELU_LARGE / "case.json")
    entry = variant_entry(ELU_LARGE, large)
    bare = replace(entry, graph=None, generalisation=None)
    assert entry.graph is not None and variant_identity(bare) is None
    small = load_case(root / ELU_SMALL / "case.json")
    (root / ELU_SMALL / "case.json").write_text(json.dumps(replace(small, also_seen_as=[bare]).to_json()))
    shutil.rmtree(root / ELU_LARGE)
    subprocess.run(git + ["commit", "-qam", "folded"], check=True)
    restored = with_graph_from_history(root, bare)
    assert restored.graph == large.graph and same_bug(variant_identity(restored, small.device), case_identity(small))
    # A form whose former directory never was in the history, or was another failure there, stays as it is.
    assert with_graph_from_history(root, replace(bare, directory="never-committed")) == replace(
        bare, directory="never-committed")
    assert with_graph_from_history(root, replace(bare, key=bare.key.replace("values", "shape"))).graph is None


def test_a_wrong_std_is_the_bug_of_the_var_it_is_computed_from():
    """nvFuser's var over an expanded dim is wrong, and std is sqrt(var) in every fuser here: a
    std found wrong the same way is a form of the var bug, not a bug of its own; an op no other
    is computed from (sqrt) keeps its own name."""
    def one(op: str) -> Graph:
        return Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [
            {"kind": "tensor", "name": "x0", "shape": [2], "dtype": "float32", "layout": {"kind": "expanded", "dims": [0]},
             "values": {"dist": "normal", "seed": 1}}], "nodes": [
            {"name": "v0", "op": op, "args": ["x0"],
             "attrs": {"dims": [0], "keepdim": False, "correction": 1} if op != "sqrt" else {}}]})
    wrong = Signature("mismatch", "nvfuser", "run", "values", "float")
    var, std, sqrt = (identify(wrong, one(op), None, "cuda") for op in ("var", "std", "sqrt"))
    assert var.where == std.where == "var" and same_bug(var, std)
    assert sqrt.where == "sqrt" and not same_bug(sqrt, var)


def test_var_means_var_output_is_the_bug_of_var():
    """An H200 campaign reported var_mean's var over an expanded [2, 3] (1.33, eager 0.67) as new
    beside the committed var over an expanded dim (5aac8374): one Welford reduction computes
    both. Its mean output is its own op."""
    def var_mean(output: str) -> Graph:
        return Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [
            {"kind": "tensor", "name": "x0", "shape": [2, 3], "dtype": "float32",
             "layout": {"kind": "expanded", "dims": [0]}, "values": {"dist": "normal", "seed": 1}}], "nodes": [
            {"name": "v0", "op": "var_mean", "args": ["x0"],
             "attrs": {"dims": [0, 1], "keepdim": False, "correction": 0, "output": output}}]})
    wrong = Signature("mismatch", "nvfuser", "run", "values", "float")
    committed = Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [
        {"kind": "tensor", "name": "x0", "shape": [2], "dtype": "float32", "layout": {"kind": "expanded", "dims": [0]},
         "values": {"dist": "normal", "seed": 1}}], "nodes": [
        {"name": "v0", "op": "var", "args": ["x0"], "attrs": {"dims": [0], "keepdim": False, "correction": 0}}]})
    var = identify(wrong, committed, None, "cuda")
    assert same_bug(identify(wrong, var_mean("var"), None, "cuda"), var)
    mean = identify(wrong, var_mean("mean"), None, "cuda")
    assert mean.where == "var_mean" and not same_bug(mean, var)


def test_an_op_a_fuser_computes_from_another_is_that_ops_bug_on_that_fuser_only():
    """Inductor decomposes elu through expm1, whose vectorized CPU form is exp() - 1: its elu on a
    subnormal is the expm1 bug. NNC computes elu from exp: there an elu is its own bug."""
    from fuzzfuse.backends.registry import computes_from

    def elu() -> Graph:
        return Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [
            {"kind": "tensor", "name": "x0", "shape": [4], "dtype": "float32", "layout": {"kind": "contiguous"},
             "values": {"dist": "normal", "seed": 1}}], "nodes": [
            {"name": "v0", "op": "elu", "args": ["x0"], "attrs": {"alpha": 1.0}}]})
    assert computes_from("inductor")["elu"] == "expm1" and computes_from("dynamo:inductor")["elu"] == "expm1"
    inductor = Signature("mismatch", "inductor", "run", "values", "float")
    assert identify(inductor, elu(), None, "cpu").where == "expm1"
    assert identify(inductor, chain("expm1"), None, "cpu").where == "expm1"
    assert identify(WRONG, elu(), None, "cpu").where == "elu" and not computes_from("torchscript:nnc")


def test_an_op_computed_from_another_on_one_device_is_that_ops_bug_there_only():
    """An H100 campaign (2026-12-06) reported clamp_min -> relu -> reciprocal of -0.0 on Inductor
    CUDA (-inf, eager inf) as new, its sign lost by relu: Triton's relu is ops.maximum(0, x), whose
    helper keeps the wrong zero (the committed b325c4b9). The C++ relu is std::max or
    at::vec::clamp_min: a wrong relu there is relu's. maximum's code is each device's own
    (Backend.per_device_code): b325c4b9 is CUDA's even where its graph failed on CPU too, and the
    CPU maximum's sign (3bc8752d, through hardtanh) is another bug."""
    from fuzzfuse.explain import ZERO_SIGN
    relu = Graph.from_json({"schema": 1, "outputs": ["v1"], "inputs": [
        {"kind": "tensor", "name": "x0", "shape": [4], "dtype": "float32", "layout": {"kind": "contiguous"},
         "values": {"dist": "zeros"}}], "nodes": [
        {"name": "v0", "op": "relu", "args": ["x0"], "attrs": {}},
        {"name": "v1", "op": "reciprocal", "args": ["v0"], "attrs": {}}]})
    lost = Signature("mismatch", "inductor", "run", "nan-inf", "float", f"{ZERO_SIGN}: relu")
    on_cuda, on_cpu = identify(lost, relu, None, "cuda"), identify(lost, relu, None, "cpu")
    assert (on_cuda.where, on_cpu.where) == ("maximum", "relu")
    corpus = DATA.parent.parent / "minimized"
    committed = {name: case_identity(load_case(corpus / f"inductor-mismatch-nan-inf-float-{name}" / "case.json"))
                 for name in ("b325c4b9", "3bc8752d")}
    assert same_bug(on_cuda, committed["b325c4b9"]) and not same_bug(on_cpu, committed["3bc8752d"])
    assert committed["3bc8752d"].where == "maximum" and not same_bug(committed["b325c4b9"], committed["3bc8752d"])


def test_inductors_min_and_max_ops_are_one_code_and_one_bug():
    """An H200 campaign reported argmin and argmax over int8 (index 128 comes back as -128) as two
    new bugs, and minimum and maximum returning the other zero as two more: Inductor emits each
    pair from one helper with the comparison turned round. Other fusers keep them apart."""
    def one(op: str, dtype: str) -> Graph:
        attrs = {"dim": 0, "keepdim": False} if op.startswith("arg") else {}
        args = ["x0"] if op.startswith("arg") else ["x0", "x1"]
        return Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [
            {"kind": "tensor", "name": n, "shape": [129], "dtype": dtype, "layout": {"kind": "contiguous"},
             "values": {"dist": "normal", "seed": 1}} for n in ("x0", "x1")], "nodes": [
            {"name": "v0", "op": op, "args": args, "attrs": attrs}]})
    inductor = Signature("mismatch", "inductor", "run", "values", "int")
    argmin, argmax = (identify(inductor, one(op, "int8"), None, "cuda") for op in ("argmin", "argmax"))
    assert argmin.where == argmax.where == "argmax" and same_bug(argmin, argmax)
    floats = Signature("mismatch", "inductor", "run", "nan-inf", "float")
    minimum, maximum = (identify(floats, one(op, "float32"), None, "cuda") for op in ("minimum", "maximum"))
    assert same_bug(minimum, maximum) and not same_bug(minimum, argmax)
    nnc = Signature("mismatch", "torchscript:nnc", "run", "nan-inf", "float")
    assert not same_bug(*(identify(nnc, one(op, "float32"), None, "cpu") for op in ("minimum", "maximum")))


def test_a_culprit_any_op_of_its_kind_stands_in_for_is_that_kind_and_matches_each_op_of_it():
    """oneDNN Graph types a bf16 tensor plus a 0-d float32 one as float32: generalisation finds any
    binary op fails so (the position is a filler), so the bug is `*binary`, and a later form seen
    through add, or mul, is it; a unary op, or another symptom, is not."""
    def binary(op: str) -> Graph:
        return Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [
            {"kind": "tensor", "name": "x0", "shape": [], "dtype": "float32", "layout": {"kind": "contiguous"},
             "values": {"dist": "normal", "seed": 1}}], "nodes": [{"name": "v0", "op": op, "args": ["x0", "x0"],
                                                                  "attrs": {}}]})
    dtype = Signature("mismatch", "torchscript:onednn", "run", "dtype", "float")
    graph = binary("sub")
    wild = identify(dtype, graph, general(graph, ops=((0, "binary"),)), "cpu")
    assert wild.anchor is Anchor.CULPRIT and wild.where == "*binary"
    add, mul = (identify(dtype, binary(op), None, "cpu") for op in ("add", "mul"))
    assert add.where == "add" and same_bug(wild, add) and same_bug(mul, wild) and not same_bug(add, mul)
    exp = identify(dtype, chain("exp"), None, "cpu")
    assert exp.where == "exp" and not same_bug(wild, exp)
    values = identify(Signature("mismatch", "torchscript:onednn", "run", "values", "float"), graph,
                      general(graph, ops=((0, "binary"),)), "cpu")
    assert not same_bug(wild, values)
    known = KnownBugs({wild.key(): "onednn-0d-dtype"})
    assert known.find(add.key()) == "onednn-0d-dtype" and known.find(exp.key()) is None
    assert KnownBugs({add.key(): "add-dir"}).find(wild.key()) == "add-dir"


def test_a_wrong_dtype_is_named_by_the_class_the_op_computed_on_not_the_result_eager_expected():
    """oneDNN Graph keeps bool for add(bool, 0) where eager gives int64, and for add(bool, 0.0)
    where eager gives float32: one type rule, whatever eager's result class; a wrong value keeps
    the result class (a cast int->float is not an int op)."""
    def add(scalar) -> Graph:
        return Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [
            {"kind": "tensor", "name": "x0", "shape": [2], "dtype": "bool", "layout": {"kind": "contiguous"},
             "values": {"dist": "normal", "seed": 1}}], "nodes": [{"name": "v0", "op": "add", "args": ["x0", scalar],
                                                                  "attrs": {}}]})
    dtype = Signature("mismatch", "torchscript:onednn", "run", "dtype", "bool")
    to_int, to_float = (identify(dtype, add(s), None, "cpu") for s in (0, 0.0))
    assert to_int.detail == to_float.detail == "bool" and same_bug(to_int, to_float)
    values = Signature("mismatch", "torchscript:onednn", "run", "values", "float")
    assert identify(values, add(0.0), None, "cpu").detail == "bool->float"


def test_a_wrong_shape_or_stride_is_its_op_kinds_rule_and_every_elementwise_op_shares_one():
    """Inductor's output strides for pointwise ops on mixed layouts came out wrong through
    div_floor, through logical_or, and (a campaign here, after 0b94dc6a was committed) through a
    clamp with an expanded and a permuted operand: one pointwise layout rule, whatever the op's
    arity, so those are one bug; a reduction's kept dims are its kind's own rule; a wrong value of
    either op stays the op's own."""
    def binary(op: str) -> Graph:
        return Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [
            {"kind": "tensor", "name": f"x{k}", "shape": [2, 3], "dtype": "float32", "layout": {"kind": "contiguous"},
             "values": {"dist": "normal", "seed": k}} for k in range(2)], "nodes": [
            {"name": "v0", "op": op, "args": ["x0", "x1"], "attrs": {}}]})
    strides = Signature("mismatch", "inductor", "run", "strides", "float")
    a, b = (identify(strides, binary(op), None, "cpu") for op in ("div_floor", "logical_or"))
    assert a.where == b.where == "*elementwise" and same_bug(a, b)
    clamp = Graph.from_json({**binary("add").to_json(), "nodes": [
        {"name": "v0", "op": "clamp", "args": ["x0", "x0", "x1"], "attrs": {}}]})
    assert same_bug(identify(strides, clamp, None, "cpu"), a)
    assert same_bug(identify(strides, chain("exp"), None, "cpu"), a)
    summed = Graph.from_json({**binary("add").to_json(), "nodes": [
        {"name": "v0", "op": "sum", "args": ["x0"], "attrs": {"dims": [0], "keepdim": True}}]})
    assert identify(strides, summed, None, "cpu").where == "*reduction"
    assert not same_bug(identify(strides, summed, None, "cpu"), a)
    values = Signature("mismatch", "inductor", "run", "values", "float")
    assert identify(values, binary("div_floor"), None, "cpu").where == "div_floor"


def test_an_op_that_only_moves_data_is_one_bug_whatever_dtype_it_moves():
    """An H200 nvFuser campaign reported index_select (one index, its result broadcast against the
    input) returning stale elements for float32 as new beside the committed bool form: an op that
    computes nothing is not a different bug for another dtype. An op that computes stays split."""
    def one(op: str, dtype: str) -> Graph:
        index = {"kind": "tensor", "name": "i", "shape": [1], "dtype": "int64", "layout": {"kind": "contiguous"},
                 "values": {"dist": "zeros", "seed": 1}}
        x = {"kind": "tensor", "name": "x0", "shape": [2, 4], "dtype": dtype, "layout": {"kind": "contiguous"},
             "values": {"dist": "normal", "seed": 1}}
        node = ({"name": "v0", "op": op, "args": ["x0", "i"], "attrs": {"dim": 1}} if op == "index_select"
                else {"name": "v0", "op": op, "args": ["x0", "x0"], "attrs": {}})
        return Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [x, index] if op == "index_select" else [x],
                                "nodes": [node]})
    wrong = Signature("mismatch", "nvfuser", "run", "values", "float")
    moved = [identify(wrong, one("index_select", dtype), None, "cuda") for dtype in ("bool", "float32", "int32")]
    assert moved[0].where == "index_select" and moved[0].detail == ""
    assert same_bug(moved[0], moved[1]) and same_bug(moved[1], moved[2])
    computed = [identify(wrong, one("add", dtype), None, "cuda") for dtype in ("int32", "float32")]
    assert computed[0].where == "add" and not same_bug(*computed)
    wrong_dtype = Signature("mismatch", "nvfuser", "run", "dtype", "float")
    assert identify(wrong_dtype, one("index_select", "float32"), None, "cuda").detail != ""


def test_cat_of_three_is_cats_bug():
    """Every fuser lowers cat3 as cat (nvFuser's fd.ops.cat of a list): a wrong value of one is the
    other's bug (an H200 campaign reported cat3 losing a zero's sign beside cat's)."""
    def one(op: str) -> Graph:
        names = ("x0", "x1") if op == "cat" else ("x0", "x1", "x2")
        return Graph.from_json({"schema": 1, "outputs": ["v0"], "inputs": [
            {"kind": "tensor", "name": n, "shape": [2], "dtype": "float32", "layout": {"kind": "contiguous"},
             "values": {"dist": "normal", "seed": 1}} for n in names], "nodes": [
            {"name": "v0", "op": op, "args": list(names), "attrs": {"dim": 0}}]})
    wrong = Signature("mismatch", "nvfuser", "run", "values", "float")
    cat, cat3 = (identify(wrong, one(op), None, "cuda") for op in ("cat", "cat3"))
    assert cat3.where == "cat" and same_bug(cat, cat3)


def test_a_crash_without_a_location_keeps_the_kinds_of_its_fillers():
    """nvFuser's illegal memory access names no assert. On the H200 the generalisation of
    1053f320 (add -> sum -> eq) found every op a filler; the key had become "*", which every
    illegal memory access of any graph would have matched. The set of kinds stays: a graph of
    other kinds is another bug, and the same kinds through other ops, in another order or count,
    are forms of it."""
    ima = Signature("crash", "nvfuser", "run", "AcceleratorError", "",
                    "CUDA error: an illegal memory access was encountered")
    graph = chain("exp", "cast", "neg")
    every_op = general(graph, ops=((0, "unary"), (1, "cast"), (2, "unary")))
    key = identify(ima, graph, every_op, device="cuda").key()
    assert "|*cast *unary|" in key
    forms = chain("log", "cast", "abs")
    assert identify(ima, forms, general(forms, ops=((0, "unary"), (1, "cast"), (2, "unary"))),
                    device="cuda").key() == key
    reordered = chain("cast", "abs")
    assert identify(ima, reordered, general(reordered, ops=((0, "cast"), (1, "unary"))), device="cuda").key() == key
    other = chain("exp", "neg")
    assert identify(ima, other, general(other, ops=((0, "unary"), (1, "unary"))), device="cuda").key() != key


def test_an_integer_operand_the_failure_survives_as_float_computes_in_float():
    from fuzzfuse.identity import dtype_class
    from fuzzfuse.ir.builder import GraphBuilder
    from fuzzfuse.reduce.generalise import Generalisation

    b = GraphBuilder()
    graph = b.build([b.add("div_floor", b.tensor((2,), "int32"), 1e-05)])
    general = Generalisation(graph.renamed().digest(), as_float=(0,))
    assert dtype_class(graph, 0) == "int->float"
    assert dtype_class(graph, 0, generalisation=general) == "float"
    assert Generalisation.from_json(general.to_json()) == general
    with pytest.raises(GraphError):
        Generalisation.from_json({**general.to_json(), "as_float": ["x0"]})


def test_a_graph_of_several_outputs_with_no_wrong_op_found_is_the_outputs_bug():
    """nvFuser's fusion of add(x0, x1) (x1 channels_last) and log(x0), both outputs, returned
    log's values in add's output. The add is a filler (any binary op does it), and the first op
    that is no filler, log, once became the culprit: any wrong log of nvFuser would have been this
    bug. With several outputs and no op to blame, the fusion's outputs are (`wrong_among_outputs`),
    with the layouts of its inputs; never log's bug."""
    from fuzzfuse.identity import WRONG_AMONG_OUTPUTS
    from fuzzfuse.ir.builder import GraphBuilder
    from fuzzfuse.ir.graph import Layout
    from fuzzfuse.reduce.generalise import Generalisation

    b = GraphBuilder()
    x0 = b.tensor((1, 4, 1, 3), "float32")
    x1 = b.tensor((3, 4, 1, 3), "float32", layout=Layout("channels_last"))
    graph = b.build([b.add("add", x0, x1), b.add("log", x0)])
    general = Generalisation(graph.renamed().digest(), ((0, "binary"),), probed=True)
    wrong = Signature("mismatch", "nvfuser", "run", "nan-inf", "float")
    both = identify(wrong, graph, general, "cuda")
    assert both.where == WRONG_AMONG_OUTPUTS and both.detail == "contiguous/permuted", both
    alone = identify(wrong, chain("log"), Generalisation(chain("log").renamed().digest(), probed=True), "cuda")
    assert alone.where == "log" and not same_bug(both, alone)


def test_a_crash_reached_by_another_op_that_also_reaches_the_known_one_is_known():
    """An H200 campaign's nvFuser amin -> expand of an expanded input raised the same size check
    as the committed amax -> expand (b088a55f), and was reported new: amax kept the crash in its
    generalisation, but sum, mean and var did not, so amin was no filler and the key named amin.
    The ops that kept the crash at a position are now part of its key, and `same_bug` matches a
    known crash reached by any of them; sum -> expand is still another bug."""
    from fuzzfuse.ir.builder import GraphBuilder
    from fuzzfuse.ir.graph import Layout, Values
    from fuzzfuse.reduce.generalise import generalise

    def reduced_then_expanded(op: str) -> Graph:
        b = GraphBuilder()
        x = b.tensor((2,), "float32", layout=Layout("expanded", dims=(0,)), values=Values("zeros"))
        return b.build([b.add("expand", b.add(op, x, dims=[0], keepdim=False), sizes=[3])]).renamed()

    def crashes(graphs: list[Graph]) -> list[bool]:  # the model: amax and amin over a broadcast crash
        return [any(n.op in ("amax", "amin") for n in g.nodes) for g in graphs]

    size_check = exception_signature(
        "nvfuser", "compile", "RuntimeError", "The expanded size of the tensor (3) must match the existing size (2) "
        "at non-singleton dimension 0.  Target sizes: [3].  Tensor sizes: [2]")
    known_graph = reduced_then_expanded("amax")
    known = identify(size_check, known_graph, Generalisation(known_graph.digest()), "cuda")  # recorded before `kept`
    index = KnownBugs({known.key(): "minimized/amax-expand"})
    found = reduced_then_expanded("amin")
    general = generalise(found, crashes, ("sum", "amax", "amin", "mean", "var", "expand"))
    assert (0, "amax") in general.kept and not general.ops, general
    assert Generalisation.from_json(general.to_json()) == general
    new = identify(size_check, found, general, "cuda")
    assert new.where == "amax/amin:float expand:float", new
    assert same_bug(new, known) and index.find(new.key()) == "minimized/amax-expand"
    summed = identify(size_check, reduced_then_expanded("sum"), None, "cuda")
    assert not same_bug(summed, known) and index.find(summed.key()) is None


def test_a_fold_keeps_what_was_found_upstream_about_the_directory_it_folds_in(tmp_path):
    """This session's fold kept a campaign's smaller pad repro and folded the committed one
    (7f6ed329) into it, and the upstream issue recorded for the committed one (pytorch#144462)
    was lost. The kept directory now carries the upstream issues of every directory folded into
    it, in its case and its README."""
    from fuzzfuse.bugreport import readme
    from fuzzfuse.corpus import write_json
    from fuzzfuse.upstream import UpstreamIssue

    root = corpus(tmp_path, ELU_SMALL, ELU_LARGE)
    issue = UpstreamIssue.from_json({"url": "https://github.com/pytorch/pytorch/issues/189801", "state": "open",
                                     "relation": "same", "title": "elu near 0", "checked": "2026-12-04"})
    large = load_case(root / ELU_LARGE / "case.json")
    write_json(root / ELU_LARGE / "case.json", replace(large, upstream=[issue]).to_json())
    small = load_case(root / ELU_SMALL / "case.json")
    assert not small.upstream
    (root / ELU_SMALL / "README.md").write_text(readme(small, "print('elu')", None))
    assert "189801" not in (root / ELU_SMALL / "README.md").read_text()
    fold(root)
    assert load_case(root / ELU_SMALL / "case.json").upstream == [issue]
    assert "pytorch/pytorch#189801" in (root / ELU_SMALL / "README.md").read_text()


def test_every_committed_form_is_the_bug_of_the_directory_that_lists_it():
    """The committed corpus as it stands: each form in a directory's also_seen_as is, by
    `same_bug`, the directory's own bug (another assert location or another culprit would be a
    hidden bug), listed once, never the directory itself, and never under the name of a directory
    that lived for one fold (a split-out's `<slug>-<digest>`)."""
    root = Path(__file__).parent.parent / "minimized"
    forms = 0
    for path in sorted(root.glob("*/case.json")):
        case = load_case(path)
        names = [v.directory for v in case.also_seen_as]
        assert len(names) == len(set(names)) and path.parent.name not in names, path.parent.name
        assert not [n for n in names if re.search(r"-[0-9a-f]{8}-[0-9a-f]{8}$", n)], path.parent.name
        own = case_identity(case)
        for form in case.also_seen_as:
            forms += 1
            assert same_bug(variant_identity(form, case.device), own), (path.parent.name, form.directory)
    assert forms > 100  # the corpus holds folded forms: the check ran on them


def test_no_two_committed_directories_hold_one_bug():
    """The committed corpus as it stands: no directory's bug is another's (a missed fold)."""
    root = Path(__file__).parent.parent / "minimized"
    cases = [(p.parent.name, case_identity(load_case(p))) for p in sorted(root.glob("*/case.json"))]
    assert len(cases) > 200
    twins = [(a, b) for k, (a, x) in enumerate(cases) for b, y in cases[k + 1:] if same_bug(x, y)]
    assert not twins


@pytest.mark.slow
def test_a_crash_form_that_is_a_wrong_dtype_seen_downstream_folds_back_by_itself(tmp_path):
    """oneDNN Graph keeps add(bool, 0.0) bool (eager: float32), and neg then refuses the bool. A
    form recorded as that crash, before such crashes were reduced as their operand's wrong dtype,
    keyed apart from the directory's bug: fold reduces it again, finds the add's wrong dtype, and
    folds it back into the directory. One call, no hand, one directory."""
    from fuzzfuse.corpus import Case
    from fuzzfuse.ir.builder import GraphBuilder
    from fuzzfuse.job import run_case

    home = "aot-onednn-mismatch-dtype-float-f2f41e81"
    root = tmp_path / "minimized"
    shutil.copytree(Path(__file__).parent.parent / "minimized" / home, root / home)
    b = GraphBuilder()
    crashing = b.build([b.add("neg", b.add("add", b.tensor([4], "bool"), 0.0))])
    found = run_case(crashing, get_backend("torchscript:onednn"))
    assert found.outcome.value == "crash" and "bool" in found.signature.message
    crash = Case(crashing, "torchscript:onednn", outcome=found.outcome, signature=found.signature, detail=found.detail)
    case = load_case(root / home / "case.json")
    form = variant_entry("an-old-crash-form", crash)
    assert not same_bug(variant_identity(form, case.device), case_identity(case))
    (root / home / "case.json").write_text(json.dumps(replace(case, also_seen_as=[form]).to_json()))
    report = fold(root, verify_runs=1)
    assert [p.name for p in root.iterdir()] == [home], report.lines()
    (back,) = load_case(root / home / "case.json").also_seen_as
    assert back.signature.outcome == "mismatch" and same_bug(variant_identity(back, case.device), case_identity(case))


def test_a_triton_compile_error_is_named_by_the_error_its_kernel_raised():
    """Inductor's Triton CompilationError says "at LINE:COL:" and quotes the kernel; the error the
    kernel raised is on its last line. A looped log_softmax (fa2f3384) and a looped cumsum of a
    cumsum (an H200 campaign) both store through a block pointer they never defined: one bug,
    whatever the kernel and its position; a kernel raising another error is another."""
    home = "inductor-crash-inductorerror-torch-inductor-runtime-triton-h-fa2f3384"
    case = load_case(Path(__file__).parent.parent / "minimized" / home / "case.json")
    assert signature_today(case.signature, case.detail).message == \
        "Triton compile error: NameError: block_ptr4 is not defined"
    cumsum = ("CompilationError: at 46:17:\n        tmp26 = tl.where(roffset > 0, tmp25, tmp22)\n"
              "        tl.store(block_ptr1, tl.broadcast_to(tmp26, [XBLOCK, R0_BLOCK]).to(tl.int64))\n"
              "                 ^\nNameError('block_ptr1 is not defined')\n\nSet TORCHDYNAMO_VERBOSE=1 for ...")
    other = cumsum.replace("NameError('block_ptr1 is not defined')", "TypeError('unsupported operand')")
    ours = case_identity(case)

    def identity_of(text):
        message = exception_signature("inductor", "compile", "InductorError", text).message
        found = replace(case.signature, message=message)
        return identify(signature_today(found, text), case.graph, None, "cuda")
    assert ours.anchor is Anchor.MESSAGE and same_bug(identity_of(cumsum), ours)
    assert not same_bug(identity_of(other), ours)


def _old_onednn_crash_directory(root: Path) -> Path:
    """A directory as the reducer before revision 2 left oneDNN Graph's add(bool, 0.0) -> neg: the
    crash of neg refusing the bool that add kept (eager: float32), keyed by its graph."""
    from fuzzfuse.corpus import Case
    from fuzzfuse.ir.builder import GraphBuilder
    from fuzzfuse.job import run_case
    from fuzzfuse.repro_dir import write_minimized

    b = GraphBuilder()
    crashing = b.build([b.add("neg", b.add("add", b.tensor([4], "bool"), 0.0))])
    found = run_case(crashing, get_backend("torchscript:onednn"))
    assert found.outcome.value == "crash" and "bool" in found.signature.message
    crash = Case(crashing, "torchscript:onednn", outcome=found.outcome, signature=found.signature, detail=found.detail)
    written = write_minimized(root / "torchscript-onednn-crash-runtimeerror-old", crash, verify_runs=1)
    assert written.reduction is None and stale(written)
    return root / "torchscript-onednn-crash-runtimeerror-old"


def test_a_case_reduced_before_a_reducer_change_that_concerns_it_is_stale():
    from fuzzfuse.corpus import ReductionFigures
    from fuzzfuse.minimize import REDUCER_REVISION

    case = load_case(Path(__file__).parent.parent / "minimized" / "torchscript-frontend-crash-runtimeerror-d209182c"
                     / "case.json")
    assert "Boolean inputs not supported" in case.signature.message
    assert stale(replace(case, reduction=None)) and stale(replace(case, reduction=ReductionFigures(reducer=1)))
    assert stale(replace(case, reduction=ReductionFigures(reducer=REDUCER_REVISION))) is None
    mismatch = load_case(Path(__file__).parent.parent / "minimized" / "aot-onednn-mismatch-dtype-float-f2f41e81"
                         / "case.json")
    assert stale(replace(mismatch, reduction=None)) is None


def test_an_nvfuser_crash_recorded_through_the_parallel_compile_wrapper_is_reduced_again():
    """The committed argmax -> slice (c70fc859) and scatter -> scatter beside a neg (dc074e9a) were
    reduced while nvFuser's parallel compile wrapped their IndexError, which kept ops that only made
    a second segment. Reduced again on an H200 (revision 5), c70fc859 became a slice of a float32
    raising the IndexError, 63f94492's crash, and fold put both in one directory; dc074e9a raises
    its IndexError with two ops. Neither is stale now; as recorded before, each would be."""
    from fuzzfuse.corpus import ReductionFigures

    committed = Path(__file__).parent.parent / "minimized"
    slice_crash = load_case(committed / "nvfuser-crash-indexerror-a11a2f41" / "case.json")
    assert [n.op for n in slice_crash.graph.nodes][0] == "slice" and slice_crash.signature.kind == "IndexError"
    assert "nvfuser-crash-runtimeerror-63f94492" in {v.directory for v in slice_crash.also_seen_as}
    assert not (committed / "nvfuser-crash-runtimeerror-c70fc859").exists()
    scatters = load_case(committed / "nvfuser-crash-runtimeerror-dc074e9a" / "case.json")
    assert scatters.graph.size == 2 and scatters.signature.kind == "IndexError"
    for case in (slice_crash, scatters):
        assert stale(case) is None
        assert "segments one by one" in stale(replace(case, reduction=ReductionFigures(reducer=4)))
    serial = load_case(committed / "nvfuser-crash-runtimeerror-csrc-ops-arith-cpp-1637-3688efc5" / "case.json")
    assert "compiling fusion segments in parallel" not in serial.detail and stale(serial) is None


def test_the_reducer_records_the_revision_of_its_last_change():
    """A case reduced today records REDUCER_REVISION; a change listed beyond it would make every
    case it concerns stale again after each reduction, and fold would reduce them forever."""
    from fuzzfuse.minimize import REDUCER_REVISION
    from fuzzfuse.rekey import CHANGES
    assert REDUCER_REVISION == max(since for since, _, _ in CHANGES)


@pytest.mark.slow
def test_fold_reduces_a_stale_crash_directory_again_and_folds_it_into_its_bug(tmp_path):
    """The directory-level twin of the form test above: a whole directory left by the older reducer
    as a crash downstream of a wrong dtype. fold reduces it again by itself (no directory picked by
    hand), finds the add's wrong dtype and folds it into the directory of that bug, which lists it,
    and the fold logs it, under the name it was committed with, not the one it was moved to for the
    fold."""
    home = "aot-onednn-mismatch-dtype-float-f2f41e81"
    root = tmp_path / "minimized"
    shutil.copytree(Path(__file__).parent.parent / "minimized" / home, root / home)
    before = {v.directory for v in load_case(root / home / "case.json").also_seen_as}
    old = _old_onednn_crash_directory(root)
    report = fold(root, verify_runs=1)
    assert [p.name for p in root.iterdir()] == [home], report.lines()
    ((name, became),) = report.reduced_again
    assert name == old.name and "wrong-dtype" in became and not report.split, report.lines()
    moved = became.rpartition(", now ")[2]
    assert moved and moved != old.name, became
    assert report.folded[0][1] == [old.name], report.lines()
    listed = {v.directory for v in load_case(root / home / "case.json").also_seen_as}
    assert listed - before == {old.name} and moved not in listed


@pytest.mark.slow
def test_a_stale_crash_directory_alone_becomes_one_directory_named_by_its_wrong_dtype(tmp_path):
    """With the bug's directory gone, the same stale crash makes exactly one directory: the add's
    wrong dtype, named so, listing no crash form (fold would reduce it into this bug again); reduced
    once, it is not stale again."""
    root = tmp_path / "minimized"
    old = _old_onednn_crash_directory(root)
    fold(root, verify_runs=1)
    (now,) = list(root.iterdir())
    case = load_case(now / "case.json")
    assert now.name.startswith("torchscript-onednn-mismatch-dtype") and case.signature.kind == "dtype"
    assert not old.exists() and case.also_seen_as == [] and stale(case) is None
    assert fold(root, dry_run=True).reduced_again == []


def test_a_cast_wrong_across_the_conversion_every_unary_op_is_wrong_across_is_that_bug():
    """75ef745d: under Inductor CPU's unsafe math every unary op of an int64 (promoted to float32)
    is wrong, exp(1) gives 1: the int64 -> float32 conversion gives 0. A campaign's later
    x.to(torch.float32) of the same int64 ones, giving 0, is that fault with no op around it: one
    bug, and known. Another conversion, or a kind not wrong across a conversion, stays apart."""
    case = load_case(Path(__file__).parent.parent / "minimized" / "inductor-mismatch-values-float-75ef745d"
                     / "case.json")
    cast = case_identity(case)  # re-reduced since to the conversion alone (tests/test_conversion.py)
    assert cast.where == "cast" and cast.detail == "int->float"
    every_unary = replace(cast, where="*unary")  # its key before: any unary op of the int64
    assert same_bug(cast, every_unary) and same_bug(every_unary, cast)
    known = KnownBugs({every_unary.key(): "75ef745d"})
    assert known.find(cast.key()) == "75ef745d"
    assert not same_bug(replace(cast, detail="int->half"), every_unary)
    assert not same_bug(replace(cast, detail="float"), replace(every_unary, detail="float"))
    assert not same_bug(replace(every_unary, where="exp"), cast)


@pytest.mark.slow
def test_a_crash_reworded_since_it_was_recorded_is_refreshed_under_todays_words(tmp_path):
    """A compiler spells a type otherwise from one version to the next (NVRTC's [nvf::int32_t],
    now [int]; g++'s 'short' or 'short int'). The bug is the same (same_bug), so `corpus refresh
    --generalise` re-keys the repro by today's message instead of calling it gone. Real Inductor
    CPU: c089fa5c's div_trunc(int16, 1) -> clamp_min compile error, recorded in older words."""
    from fuzzfuse.rekey import Pools, record_generalisation

    name = "inductor-crash-inductorerror-torch-inductor-cpp-builder-py-r-c089fa5c"
    directory = tmp_path / name
    shutil.copytree(Path(__file__).parent.parent / "minimized" / name, directory)
    case = load_case(directory / "case.json")
    today = case.signature.message
    assert today.endswith("max_propagate_nan(int&, short int&)")
    older = replace(case.signature, message=today.replace("short int&", "short&"))
    older_text = case.detail.replace("short int&", "short&")
    assert older_text != case.detail and signature_today(older, older_text).message == older.message
    (directory / "case.json").write_text(json.dumps(replace(case, signature=older, detail=older_text).to_json()))
    with Pools(1, 120.0) as pools:
        before, after = record_generalisation(directory, pools, 120.0)
    assert before == after == case_identity(case).key()
    refreshed = load_case(directory / "case.json")
    assert refreshed.signature.message == today
    # its error text is today's run's too: a case's detail says what its message says (an H100's
    # NVRTC re-keyed 24d96eed by [int] and left the H200's [nvf::int32_t] text beside it)
    assert "short&" not in refreshed.detail and signature_today(refreshed.signature, refreshed.detail).message == today


def test_an_extent_of_one_an_op_made_broadcast_against_a_larger_one_is_one_bug():
    """nvFuser's binary ops take the operands' extents without checking that they match
    (ops/utils.cpp promoteSize keeps a constant extent over a symbolic one): a slice of one row
    compared with its source came back with the slice's shape (d197eac6), the same under a sum read
    the source unsliced (an H100 campaign's slice -> eq -> sum -> eq, tests/data), and an
    index_select of one index under where read the wrong element (formerly 835d7ddf). One bug,
    whichever op made the extent and whatever its readers show; a slice that nothing broadcasts
    keeps an identity of its own."""
    from fuzzfuse.identity import MADE_EXTENT_ONE_BROADCAST
    home = load_case(Path(__file__).parent.parent / "minimized" / "nvfuser-mismatch-shape-bool-d197eac6" / "case.json")
    summed = load_case(DATA / "nvfuser_slice_eq_sum_extent_one_case.json")
    indexed = next(v for v in home.also_seen_as if v.directory == "nvfuser-mismatch-values-int-835d7ddf")
    found = [identify(home.signature, home.graph, home.generalisation, "cuda"),
             identify(summed.signature, summed.graph, summed.generalisation, "cuda"),
             variant_identity(indexed, "cuda")]
    assert all(i.where == MADE_EXTENT_ONE_BROADCAST and i.symptom is Symptom.WRONG_SHAPE for i in found)
    assert same_bug(found[0], found[1]) and same_bug(found[0], found[2])
    alone = Graph.from_json({"schema": 1, "outputs": ["v1"], "inputs": [
        {"kind": "tensor", "name": "x0", "shape": [4, 3], "dtype": "float32", "layout": {"kind": "contiguous"},
         "values": {"dist": "normal", "seed": 1}}], "nodes": [
        {"name": "v0", "op": "slice", "args": ["x0"], "attrs": {"dim": 0, "start": 1, "end": 2, "step": 1}},
        {"name": "v1", "op": "exp", "args": ["v0"], "attrs": {}}]})
    values = Signature("mismatch", "nvfuser", "run", "values", "float")
    own = identify(values, alone, None, "cuda")
    assert own.where != MADE_EXTENT_ONE_BROADCAST and own.symptom is Symptom.WRONG_VALUE


def test_eagers_remainder_is_its_vectorized_fmods_bug():
    """A 300-s NNC campaign's "new" eager remainder -> neg: eager's AVX2 remainder of -1.8e308 is
    nan (its scalar loop, -0.13), because ATen's CPU remainder vectorizes through at::vec fmod,
    whose nan 0772db8d holds."""
    found = load_case(DATA / "eager_remainder_huge_dividend_case.json")
    committed = load_case(DATA.parent.parent / "minimized" / "inductor-mismatch-nan-inf-float-0772db8d" / "case.json")
    assert same_bug(case_identity(found), case_identity(committed))


@pytest.mark.slow
def test_eagers_avx2_remainder_is_nan_where_its_fmod_is():
    """What the declaration above rests on, measured: AVX2's fmod and remainder of -1.8e308 by -0.7
    are nan, the scalar loop's remainder is not."""
    from fuzzfuse.hostcpu import host_isa

    if host_isa() not in ("avx2", "avx512"):
        pytest.skip("the host has no AVX2")
    probe = ("import torch; a = torch.full((64,), -1.7976931348623157e+308, dtype=torch.float64); "
             "b = torch.full((64,), -0.7, dtype=torch.float64); "
             "print(torch.fmod(a, b)[0].item(), torch.remainder(a, b)[0].item(), torch.remainder(a[:1], b[:1]).item())")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2"})
    vector_fmod, vector_remainder, scalar_remainder = done.stdout.split()
    assert vector_fmod == vector_remainder == "nan" and scalar_remainder != "nan", done.stdout + done.stderr



def test_a_named_crash_that_begins_in_an_op_moving_data_is_that_ops_whatever_observes_it():
    """An H100 campaign (2026-12-06) reported slice(start=-1, step=3) of int32 -> cast -> cast
    raising nvFuser's unordered_map::at, and neg -> gather -> add -> neg -> expand killing the
    process, as new: the committed 63f94492 (neg -> slice of the same step -> neg of float32) and
    90a89cfa / ea163c38 (neg -> gather -> logical_not, -> gelu -> sum), the crash keyed by every
    op it needed. A crash that begins in an op that only moves data is that op's; an op that
    computes keeps the ops after it: oneDNN Graph's add -> add segfault came with torch 2.11, its
    elu -> add (add alone needed) is in every build."""
    def named(where: str, detail: str, component: str = "nvfuser") -> BugIdentity:
        return BugIdentity(component, Anchor.GRAPH, Symptom.CRASH, where, detail, "", "cuda")

    committed = named("slice:float", "unordered_map::at")
    assert same_bug(named("slice:int cast:float cast:int->float", "unordered_map::at"), committed)
    assert not same_bug(named("slice:int cast:float", "another message"), committed)
    assert not same_bug(named("argmax/argmin:float->int slice:int", "unordered_map::at"), committed)
    assert same_bug(named("gather:float expand:float", "SIGSEGV"), named("gather:float gelu:float", "SIGSEGV"))
    assert not same_bug(named("gather:float expand:float", "SIGSEGV"), named("scatter:float", "SIGSEGV"))
    assert not same_bug(named("add:float add:float", "SIGSEGV", "onednn"), named("add:float", "SIGSEGV", "onednn"))
    # unnamed (a downstream rejection's message is not the crash's own): every op it needs counts
    assert not same_bug(named("slice:int cast:float", ""), named("slice:float", ""))


# Found by the H100 campaigns of 2026-12-06 and reported new there; each is a committed bug's form.
KNOWN_FORMS = {
    # eq, right on eager's operands, shows Inductor CPU's expm1 of a subnormal (0, within the
    # tolerance as an output): the culprit is the inexact op it reads (fuzzfuse.reduce.generalise)
    "inductor-mismatch-values-bool-44c8823d": "inductor-mismatch-values-float-e69a2bcf",
    # Inductor's C++ amin and amax are one vectorized loop (pytorch#191499): int8 amin of ones is 0
    "inductor-mismatch-values-int-2b765109": "inductor-mismatch-values-int-d361009a",
    # Triton's relu of uint8 computes in int32: fmod rejects the signedness (95beb5f6), a dynamic
    # amax's loop-carried accumulator changes type (reduced again once `_tmp11` was normalized)
    "inductor-crash-inductorerror-triton-loop-carried-1adb3a26":
        "inductor-crash-inductorerror-torch-inductor-runtime-triton-h-95beb5f6",
    # Triton's relu is ops.maximum(0, x): maximum's signed zero on CUDA (b325c4b9)
    "inductor-mismatch-nan-inf-float-782e7b58": "inductor-mismatch-nan-inf-float-b325c4b9",
    # the pointwise output layout is the lowering's, on either device
    "inductor-mismatch-strides-float-68195e00": "inductor-mismatch-strides-float-0b94dc6a",
    # nvFuser's fmin is its fmax turned round; clamp_min is emitted as maximum
    "nvfuser-mismatch-nan-inf-float-40a9d09f": "nvfuser-mismatch-nan-inf-float-8a249ae4",
    # a crash that begins in an op moving data (above)
    "nvfuser-crash-runtimeerror-a069ecef": "nvfuser-crash-indexerror-a11a2f41",
    "nvfuser-hard-crash-sigsegv-08213de7": "nvfuser-hard-crash-sigsegv-ea163c38",
    # Inductor with dynamic shapes: a slice of one element broadcast against two, read by addcmul
    # beside the slice's source, as dedeffbf's ge of such a slice then added to two elements
    "inductor-mismatch-values-float-ce96e23e": "inductor-mismatch-values-int-dedeffbf",
    # nvFuser's fusions of a contiguous and a permuted input write one output's values into
    # another (858480df: add beside log came back holding log's -inf): div beside eq, right when
    # put first (H100, 2026-12-07: reported new); neg, where's values in it (d74fe877, then
    # reported new); neg beside three more outputs, which matched abs's -0 (20fbf176) as *unary
    "nvfuser-mismatch-nan-inf-float-c6a7ffc2": "nvfuser-mismatch-nan-inf-float-858480df",
    "nvfuser-mismatch-values-float-d74fe877": "nvfuser-mismatch-nan-inf-float-858480df",
    "nvfuser-mismatch-values-float-7c6c440d": "nvfuser-mismatch-nan-inf-float-858480df",
    # Inductor CPU's remainder of bfloat16 pow(0, 0) -> neg by 2.9e-39: the remainder of the
    # float32 -1 its kernel holds overflows its quotient (a 300-s campaign's, keyed as pow's)
    "inductor-mismatch-nan-inf-float-58783996": "inductor-mismatch-nan-inf-float-c6f475f2",
}


@pytest.mark.parametrize("found", sorted(KNOWN_FORMS))
def test_a_form_a_campaign_reported_new_is_its_committed_bug_and_no_other(found):
    corpus = DATA.parent.parent / "minimized"
    identity = case_identity(load_case(DATA / "known_forms" / found / "case.json"))
    holders = [p.parent.name for p in sorted(corpus.glob("*/case.json"))
               if same_bug(identity, case_identity(load_case(p)))]
    assert holders == [KNOWN_FORMS[found]], (identity, holders)


def test_an_op_found_wrong_among_several_outputs_stays_that_ops_bug():
    """The rule of several outputs (`wrong_among_outputs`) holds only where no op is to blame: the
    same div beside eq, had the probe found div's own value wrong and div no filler, is div's bug;
    with one output there is no rule either."""
    from fuzzfuse.identity import WRONG_AMONG_OUTPUTS
    case = load_case(DATA / "known_forms" / "nvfuser-mismatch-nan-inf-float-c6a7ffc2" / "case.json")
    assert case_identity(case).where == WRONG_AMONG_OUTPUTS and case_identity(case).detail == "contiguous/permuted"
    div_wrong = replace(case.generalisation, culprit=(0, "nan-inf"))
    assert identify(case.signature, case.graph, div_wrong, "cuda").where == "div"
    alone = replace(case.graph, outputs=case.graph.outputs[1:]).without_dead_code()
    one = identify(case.signature, alone, replace(div_wrong, graph=alone.renamed().digest()), "cuda")
    assert one.where != WRONG_AMONG_OUTPUTS


ONEDNN_SCHEMA = "torchscript-onednn-crash-runtimeerror-9839416e"  # "Schema not found for node", lists expand's
ONEDNN_ZERO_DIM = "aot-onednn-mismatch-shape-float-72748c1e"  # oneDNN Graph's add of a 0-d tensor is of shape (1,)


@pytest.mark.slow  # writes and verifies a repro in a fresh process
def test_a_split_form_whose_name_a_directory_holds_gets_a_directory_of_its_own(tmp_path):
    """A directory is named by its bug's identity when it is written; one re-keyed since (9839416e,
    oneDNN Graph's "Schema not found for node", keyed by its ops until its message was read) may
    hold the name a form split out of it now gets. The split wrote its repro over the directory's
    own. Real oneDNN Graph, the directory under the name its expand form's bug gets: the form is
    written beside it, verified, and the directory keeps its repro."""
    taken = "torchscript-onednn-mismatch-shape-float-589504e1"
    root = tmp_path / "minimized"
    shutil.copytree(CORPUS / ONEDNN_SCHEMA, root / taken)  # as committed until 2026-12-06, with its forms
    before = load_case(root / taken / "case.json").graph
    report = fold(root, verify_runs=1)
    assert report.split[0][1] == taken and report.split[0][0].startswith(f"{taken}-"), report.lines()
    # nothing written over it (its data copy has no repro.py), its own case kept, its forms gone
    assert not (root / taken / "repro.py").exists() and listed(root / taken) == []
    assert load_case(root / taken / "case.json").graph == before
    split = load_case(root / report.split[0][0] / "case.json")
    assert split.verification.status is Reproduction.REPRODUCES and split.signature.kind == "shape"


@pytest.mark.slow  # reduces and verifies repros in fresh processes
def test_a_size_check_that_a_wrong_shape_made_fails_is_that_shapes_bug(tmp_path):
    """oneDNN Graph gives add of a 0-d tensor the shape (1,) (72748c1e), which TorchScript
    autodiff's expand back to () then rejects: "the number of sizes provided (0) must be greater or
    equal to the number of dimensions in the tensor (1)". 3b6642bb (add -> expand, committed until
    2026-12-06, tests/data) and two forms of 9839416e were that crash, each keyed by the ops before
    it. A crash where one of ATen's size checks rejects its operand is reduced on to the op that
    gave the operand a wrong shape, where one did, as one where an op refuses its operand's dtype
    is. Real oneDNN Graph: the fold reduces it again and moves it into the shape bug's directory."""
    crash = "torchscript-onednn-crash-runtimeerror-3b6642bb"
    root = corpus(tmp_path, crash)
    shutil.copytree(Path(__file__).resolve().parent.parent / "minimized" / ONEDNN_ZERO_DIM, root / ONEDNN_ZERO_DIM)
    zero_dim = case_identity(load_case(root / ONEDNN_ZERO_DIM / "case.json"))
    assert not same_bug(case_identity(load_case(root / crash / "case.json")), zero_dim)
    fold(root, verify_runs=1)
    assert not (root / crash).exists()
    moved = [v for v in load_case(root / ONEDNN_ZERO_DIM / "case.json").also_seen_as if v.signature.kind == "shape"
             and v.ops == ("add",) and v.graph.inputs[0].shape == ()]
    assert moved and all(same_bug(variant_identity(v, "cpu"), zero_dim) for v in moved)


def test_a_pair_the_fuser_rewrites_as_one_pattern_is_that_patterns_bug():
    """The H100 campaign of 2026-12-07 reduced two Inductor finds to mul(x, c) -> softmax: the mul
    right, the softmax right alone on eager's operands. Inductor's scaled softmax rewrite
    (`rewrites_pairs`) computes softmax(x * c) as (x - max(x)) * c: -inf * 0 is nan. Named by the
    mul alone, one was matched to the folded mul by zero (1bb7e084) and the other to a mul -> sub
    contracted to a fused multiply-add (b71af8d6): two wrong merges. Named by the pattern, both are
    the committed mul -> softmax of an int32 (388d5a11, on either device) and the div -> softmax of
    a uint8 (b72fb31a, CPU; `corpus fold` made it a form of 388d5a11), and neither mul bug."""
    committed = Path(__file__).parent.parent / "minimized"
    def committed_identity(digest):
        return case_identity(load_case(next(committed.glob(f"*-{digest}")) / "case.json"))
    others = [committed_identity(d) for d in ("1bb7e084", "b71af8d6")]
    pattern = [committed_identity("388d5a11"), case_identity(load_case(DATA / "inductor_div_softmax_uint8_case.json"))]
    assert all(p.where == "scaled softmax rewrite" and p.detail == "float" for p in pattern), pattern
    for name in ("mul_softmax_both.json", "mul_softmax_cuda.json"):
        case = load_case(DATA / "fused_pair" / name)
        found = case_identity(case)
        assert (found.where, found.device) == ("scaled softmax rewrite", ""), found
        assert not any(same_bug(found, other) for other in others)
        assert all(same_bug(found, p) for p in pattern)
        # A pair no fuser declares is its first op's: the same graph on another fuser.
        assert identify(replace(case.signature, backend="dynamo:eager"), case.graph, case.generalisation).where == "mul"
