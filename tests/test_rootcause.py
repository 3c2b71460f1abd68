"""Root-cause keys (fuzzfuse.identity's BugIdentity keys, anchor|component|device|symptom|phase|
where|detail): one bug, one key. The error texts are nvFuser's and TorchScript's own, from
committed repros (tests/data/nvfuser_errors.json names the case each came from; stack frames and
generated kernel code are cut); the oneDNN ones come from running the fuser here."""
import json
from dataclasses import replace
import math
import re
from pathlib import Path

import pytest
import torch

from fuzzfuse.ir import Graph
from fuzzfuse.ir.values import encode_exact
from fuzzfuse.corpus import load_case
from fuzzfuse.oracle import Signature, cpp_location, exception_signature, innermost_error, normalize
from fuzzfuse.verdict import Outcome
from fuzzfuse.graphform import graph_form, special_classes
from fuzzfuse.cli import main
from fuzzfuse.identity import root_cause_key, variant_identity
from fuzzfuse.reduce.generalise import Generalisation
from fuzzfuse.backends.registry import component
from fuzzfuse.rootcause import fold, fold_cpp_compile, signature_today

ERRORS = json.loads((Path(__file__).parent / "data" / "nvfuser_errors.json").read_text())


def crash(name: str, backend: str | None = None, stage: str | None = None) -> Signature:
    """The signature a worker gives the recorded error (its Python frames are not recorded)."""
    e = ERRORS[name]
    return exception_signature(backend or e["backend"], stage or e["stage"], "RuntimeError", e["text"])


def test_the_parallel_compile_wrapper_unwraps_to_the_inner_assert():
    for name, inner in [("parallel_predicate_elimination", "csrc/device_lower/analysis/predicate_elimination.cpp:1056"),
                        ("parallel_rfactor", "csrc/transform_rfactor.cpp:399"),
                        ("parallel_nvrtc_shfl_xor_half", "csrc/runtime/compiled_kernel.cpp:187")]:
        assert "fusion_kernel_runtime.cpp:476" in ERRORS[name]["text"]
        assert cpp_location(ERRORS[name]["text"]) == inner
        sig = crash(name)
        assert sig.location == inner and "476" not in sig.key()
    assert crash("parallel_rfactor").message.startswith("Expected found_non_rfactor_reduction")


def test_a_case_reduced_to_one_segment_keeps_its_coarse_key():
    """With one segment nvFuser compiles serially and raises the inner error bare: the reducer must
    see the same key as for the wrapped error, or it could not shrink a wrapped case that far."""
    for name in ("parallel_predicate_elimination", "parallel_rfactor", "parallel_nvrtc_shfl_xor_half"):
        text = ERRORS[name]["text"]
        bare = text[text.index(":", text.index("Error from segmentation group")) + 1:
                    text.index("Use NVFUSER_DISABLE=parallel_compile")]
        wrapped = crash(name, "nvfuser", "compile")
        assert exception_signature("nvfuser", "compile", "RuntimeError", bare).key() == wrapped.key()


def test_the_lowest_numbered_failing_segment_names_the_crash_whatever_order_threads_finished_in():
    head, _, rest = ERRORS["parallel_predicate_elimination"]["text"].partition("\n\nError from segmentation group 1:")
    other = innermost_error(ERRORS["parallel_rfactor"]["text"])
    block = rest[:rest.index("Use NVFUSER_DISABLE")]
    tail = rest[rest.index("Use NVFUSER_DISABLE"):]
    first = f"{head}\n\nError from segmentation group 1:{block}\nError from segmentation group 4:{other}\n{tail}"
    second = f"{head}\n\nError from segmentation group 4:{other}\nError from segmentation group 1:{block}\n{tail}"
    assert cpp_location(first) == cpp_location(second) == "csrc/device_lower/analysis/predicate_elimination.cpp:1056"


def test_unexpected_operator_type_is_one_root_cause_per_location_whatever_the_op():
    unary = [crash(n) for n in ("unary_evaluate_silu", "unary_evaluate_isnan", "unary_evaluate_nearbyint")]
    binary = [crash(n) for n in ("binary_evaluate_atan2", "binary_evaluate_remainder")]
    dynamic = [crash("dynamic_type_nvfuser"), crash("dynamic_type_aot")]
    # The reducer keeps the op: its coarse keys differ.
    assert len({s.key() for s in unary}) == 3 and len({s.key() for s in binary}) == 2
    keys = [{root_cause_key(s) for s in group} for group in (unary, binary, dynamic)]
    assert all(len(k) == 1 for k in keys) and len(set.union(*keys)) == 3
    assert root_cause_key(unary[0]) == \
        "assert|nvfuser||crash||csrc/ir/internal_nodes.cpp:698|Expected false . Unexpected operator type OP in T"
    assert "silu" in unary[0].message


def test_two_different_nvrtc_first_errors_are_two_bugs_and_one_error_for_two_dtypes_is_one():
    shfl_half, shfl_bfloat = crash("nvrtc_shfl_xor_half"), crash("nvrtc_shfl_xor_bfloat")
    conversion = crash("nvrtc_no_conversion_bfloat")
    assert shfl_half.message == ("CUDA NVRTC compile error: no instance of overloaded function __shfl_xor_sync "
                                 "matches the argument list [unsigned int, nvf::__half, int, int]")
    assert conversion.message == ("CUDA NVRTC compile error: no suitable conversion function from nvf::__bfloat "
                                  "to float exists")
    assert shfl_half.key() != conversion.key()
    assert root_cause_key(shfl_half) == root_cause_key(shfl_bfloat) != root_cause_key(conversion)


def test_a_cpp_compile_error_of_two_vector_templates_folds_their_types_and_keeps_its_construct():
    """g++'s first error of Inductor's C++, as oracle.cpp_compile_error words it."""
    prefix = "C++ compile error: "
    # two scalar types: a small int op's promoted result, keyed by that op (fuzzfuse.identity)
    assert fold_cpp_compile(prefix + "no matching function for call to max_propagate_nan(short int&, int&)") == ""
    masks = prefix + "no match for operator{} (operand types are at::vec::CPU_CAPABILITY::VecMask<{}, N> and " \
                     "at::vec::CPU_CAPABILITY::VecMask<float, N>)"
    lt_bf16 = fold_cpp_compile(masks.format("<", "c10::BFloat16"))
    assert lt_bf16 == prefix + "no match for operator OP (operand types are VecMask and VecMask)"
    assert lt_bf16 == fold_cpp_compile(masks.format("<=", "signed char")) == fold(masks.format("==", "int"))
    # the normalizer cuts a message at 160 characters, here inside its last type
    assert lt_bf16 == fold_cpp_compile(masks.format("<", "c10::Float8_e4m3fn")[:160])
    assert fold_cpp_compile("CUDA NVRTC compile error: no operator != matches these operands") == ""


def test_route_stage_and_outcome_fold_for_a_native_assert_but_the_component_does_not():
    assert root_cause_key(crash("parallel_nvrtc_shfl_xor_half")) == root_cause_key(crash("nvrtc_shfl_xor_half"))
    assert crash("parallel_nvrtc_shfl_xor_half").backend == "aot:nvfuser"
    run, compiled = crash("alias_analysis_run"), crash("alias_analysis_compile")
    assert (run.stage, compiled.stage) == ("run", "compile") and run.message != compiled.message
    assert root_cause_key(run) == root_cause_key(compiled)
    via_aot = crash("alias_analysis_run", backend="aot:onednn", stage="backward-compile")
    assert root_cause_key(via_aot) == root_cause_key(run)
    assert root_cause_key(crash("alias_analysis_run", backend="torchscript:nnc")) != root_cause_key(run)
    aborted = Signature("hard-crash", "nvfuser", "run", "SIGABRT", crash("unary_evaluate_silu").location,
                        crash("unary_evaluate_silu").message)
    assert root_cause_key(aborted) == root_cause_key(crash("unary_evaluate_silu"))
    assert component("aot:onednn") == component("torchscript:onednn") != component("aot:nnc")


def graph(*nodes, inputs=None, outputs=None) -> Graph:
    inputs = inputs or [tensor("x0", [2, 3, 4])]
    return Graph.from_json({"schema": 1, "inputs": inputs,
                            "nodes": [{"name": n, "op": op, "args": list(args), "attrs": attrs}
                                      for n, op, args, attrs in nodes],
                            "outputs": outputs or [nodes[-1][0]]})


def tensor(name, shape, dtype="float32", layout=None, values=None, grad=False):
    d = {"kind": "tensor", "name": name, "shape": shape, "dtype": dtype, "layout": layout or {"kind": "contiguous"},
         "values": values or {"dist": "zeros"}}
    return {**d, "requires_grad": True} if grad else d


MISMATCH = Signature("mismatch", "nvfuser", "run", "values", "float")


def test_a_mismatch_or_a_crash_without_native_anchor_is_pending_until_its_reduced_graph_is_given():
    g = graph(("v0", "exp", ["x0"], {}))
    python_frame = Signature("crash", "aot:onednn", "compile", "RuntimeError", "torch/nn/modules/module.py:_call_impl",
                             "RuntimeError: partition compile failed")
    empty = Signature("crash", "torchscript:nnc", "compile", "RuntimeError", "", "RuntimeError:")
    aten_check = Signature("crash", "nvfuser", "run", "RuntimeError", "aten/src/ATen/ExpandUtils.cpp:95",
                           "Error from segmentation group N: The expanded size of the tensor (N) must match")
    for sig in (MISMATCH, python_frame, empty, aten_check, Signature("hang", "nvfuser", "run", "timeout")):
        assert root_cause_key(sig) is None
        assert root_cause_key(sig, g) is not None
    assert root_cause_key(Signature("pass", "nvfuser"), g) is None


def test_a_permuted_input_and_a_contiguous_one_are_one_wrong_value_of_their_culprit():
    """A wrong value is its culprit op (name, dtype class, symptom, phase, device): the layout of
    the input that exposed it is how it was reached, not the bug, so a permuted and a contiguous
    input to one wrong mean are one bug (they were two root causes before identities). A hang has
    no culprit: its key is the reduced graph's form, which keeps the layout."""
    mean = ("v0", "mean", ["x0"], {"dims": [0, 1, 2], "keepdim": False})
    contiguous = graph(mean)
    permuted = graph(mean, inputs=[tensor("x0", [2, 3, 4], layout={"kind": "permuted", "perm": [2, 0, 1]})])
    assert root_cause_key(MISMATCH, contiguous) == root_cause_key(MISMATCH, permuted) == \
        "culprit|nvfuser||wrong-value|forward|mean|float"
    hang = Signature("hang", "nvfuser", "run", "timeout")
    assert root_cause_key(hang, contiguous) != root_cause_key(hang, permuted)
    assert "permuted" in root_cause_key(hang, permuted)


def test_the_same_reduced_graph_via_nvfuser_and_aot_nvfuser_is_one_root_cause():
    g = graph(("v0", "pow", ["x0", 0.5], {}))
    via_aot = Signature("mismatch", "aot:nvfuser", "run", "values", "float")
    assert root_cause_key(MISMATCH, g) == root_cause_key(via_aot, g)
    assert root_cause_key(Signature("mismatch", "inductor", "run", "values", "float"), g) != root_cause_key(MISMATCH, g)
    assert root_cause_key(Signature("mismatch", "nvfuser", "backward-run", "values", "float"), g) != \
        root_cause_key(MISMATCH, g)


def test_a_graph_key_keeps_reduction_dims_keepdim_and_the_ops_not_the_value_names():
    """A failure keyed by its reduced graph (a hang) keeps a reduction's dims and keepdim, not the
    names of its values. A wrong value is keyed by its culprit op alone: its attributes are how it
    was reached, so every amax is one bug there, and amin another."""
    hang = Signature("hang", "nvfuser", "run", "timeout")

    def reduced(dims, keepdim, name="v0", op="amax"):
        return graph((name, op, ["x0"], {"dims": dims, "keepdim": keepdim}))
    variants = [([2], True), ([2], False), ([1], True)]
    assert root_cause_key(hang, reduced([-1], True)) == root_cause_key(hang, reduced([2], True, "t9"))
    assert root_cause_key(hang, reduced([2], True)).startswith("graph|nvfuser||hang||")
    assert len({root_cause_key(hang, reduced(d, k)) for d, k in variants}) == 3
    assert root_cause_key(hang, reduced([2], True, op="amin")) != root_cause_key(hang, reduced([2], True))
    assert {root_cause_key(MISMATCH, reduced(d, k)) for d, k in variants} == \
        {"culprit|nvfuser||wrong-value|forward|amax|float"}
    assert root_cause_key(MISMATCH, reduced([2], True, op="amin")) == "culprit|nvfuser||wrong-value|forward|amin|float"


def test_amax_keepdim_is_one_shape_bug_whatever_the_dtype_layout_and_width():
    """A wrong shape is its culprit's kind (a shape rule is the kind's: issue 31), and a shape rule
    reads no dtype: amax of bool, of int and of float (float16, float32, float64), over an expanded
    or a contiguous input, is one bug (three committed nvFuser repros were). A wrong shape is
    another symptom than a wrong value of the same op, and a wrong value keeps its op and dtype
    class."""
    def amax(dtype, layout):
        return graph(("v0", "amax", ["x0"], {"dims": [0], "keepdim": True}),
                     inputs=[tensor("x0", [2], dtype, layout)])
    expanded = {"kind": "expanded", "dims": [0]}
    keys = {root_cause_key(Signature("mismatch", "nvfuser", "run", "shape", cls), amax(dtype, layout))
            for dtype, cls in [("bool", "bool"), ("float32", "float"), ("int32", "int"), ("float16", "float"),
                               ("float64", "float")] for layout in (expanded, {"kind": "contiguous"})}
    assert keys == {"culprit|nvfuser||wrong-shape|forward|*reduction|"}
    values = Signature("mismatch", "nvfuser", "run", "values", "float")
    shape = Signature("mismatch", "nvfuser", "run", "shape", "float")
    assert root_cause_key(values, amax("float32", expanded)) == root_cause_key(values, amax("float16", expanded)) \
        != root_cause_key(shape, amax("float32", expanded))
    assert root_cause_key(values, amax("float32", expanded)) != root_cause_key(values, amax("int32", expanded))


def test_special_value_classes_come_from_the_input_values():
    t = torch.tensor([float("nan"), math.inf, -math.inf, -0.0, 1e-40, 2.5, 3e4, 1.0])
    assert special_classes(t) == ("nan", "+inf", "-inf", "-0", "denormal", "half", "huge")
    assert special_classes(torch.tensor([0.0, 1.0, 0.25])) == ()
    assert special_classes(torch.tensor([2 ** 40, 3], dtype=torch.int64)) == ("huge",)
    assert special_classes(torch.tensor([True, False])) == ()
    pinned = tensor("x0", [3], values={"exact": encode_exact(torch.tensor([-math.inf, 1.0, 2.0]))})
    zeros = tensor("x0", [3])
    seeded = tensor("x0", [4096], values={"dist": "normal", "specials": 0.5, "seed": 3})
    forms = [graph_form(graph(("v0", "sqrt", ["x0"], {}), inputs=[i])) for i in (pinned, zeros, seeded)]
    assert "/-inf" in forms[0] and "inf" not in forms[1] and "nan" in forms[2]
    assert len(set(forms)) == 3


def test_a_crash_downstream_of_its_cause_is_keyed_by_the_ops_that_made_the_bad_value():
    """A crash without an anchor is the ops it needs, each with its dtype class, less the fillers
    its generalisation found and, where an op refused its operand's dtype, the ops that only
    consumed the bad value; its folded message unless that only says where the bad value surfaced. The
    oneDNN rewrite of `x + 0` keeps a bool tensor bool; relu, neg and abs after it then reject it
    in words of their own: one bug, the add. The constants of the ops are not read."""
    def crash(message):
        return Signature("crash", "torchscript:onednn", "compile", "RuntimeError", "", f"RuntimeError: {message}")
    b = [tensor("x0", [], "bool")]

    def rejected(op, constant=0.0):
        return graph(("v0", "add", ["x0", constant], {}), ("v1", op, ["v0"], {}), inputs=b)
    words = {"relu": "Boolean inputs not supported for relu",
             "neg": "Negation, the `-` operator, on a bool tensor is not supported.",
             "abs": "abs(): not implemented for 'Bool'"}
    assert {root_cause_key(crash(words[op]), rejected(op)) for op in words} == {"graph|onednn||crash||add:bool->float|"}
    assert root_cause_key(crash(words["relu"]), rejected("relu", 0.0)) == \
        root_cause_key(crash(words["relu"]), rejected("relu", 3.0))
    # A message that names no operand is kept: it may tell two failures of one graph apart.
    generic = crash("partition compile failed")
    # Nor did relu refuse its operand: it stays among the ops the crash needs.
    assert root_cause_key(generic, rejected("relu")) == \
        "graph|onednn||crash||add:bool->float relu:float|partition compile failed"
    clamp = graph(("v0", "add", ["x0", "x0"], {}), ("v1", "clamp", ["v0", 1, 0.0], {}))
    sub = graph(("v0", "sub", ["x0", "x0"], {}), ("v1", "clamp", ["v0", 1, 0.0], {}))
    assert root_cause_key(generic, clamp) != root_cause_key(generic, sub)
    # A mismatch of two ops with no probed culprit keeps every op: its consumer computed the wrong
    # value it shows.
    assert len({root_cause_key(MISMATCH, rejected(op)) for op in words}) == 3


@pytest.mark.parametrize("backend", ["torchscript:onednn", "aot:onednn"])
def test_real_onednn_crashes_of_the_identity_rewrite_are_one_bug_the_add(backend):
    """On the real fuser the three rejecting ops raise three messages, each naming an op or a
    dtype: none is specific, so each crash is pending until reduced. Reduced, each is the add that
    made the bad value: the rejecting op only consumed it, and its message says where it
    surfaced. One bug, whether or not generalisation found the consumer a filler."""
    from fuzzfuse.backends import Unavailable, get_backend
    from fuzzfuse.job import run_case

    try:
        fuser = get_backend(backend)
    except Unavailable as e:
        pytest.skip(str(e))
    graphs = [graph(("v0", "add", ["x0", 0.0], {}), ("v1", op, ["v0"], {}), inputs=[tensor("x0", [], "bool")])
              for op in ("relu", "neg", "abs")]
    signatures = [run_case(g, fuser).signature for g in graphs]
    assert all(s.outcome == "crash" for s in signatures)
    assert len({s.key() for s in signatures}) == 3
    assert all(root_cause_key(s) is None for s in signatures)
    keys = {root_cause_key(s, g, Generalisation(g.renamed().digest(), ((1, "unary"),)))
            for s, g in zip(signatures, graphs)} | {root_cause_key(s, g) for s, g in zip(signatures, graphs)}
    assert keys == {"graph|onednn||crash||add:bool->float|"}


def test_corpus_bugs_groups_a_directory_by_bug_and_refuses_a_missing_one(tmp_path, capsys):
    """`fuzzfuse corpus bugs DIR` (formerly `python -m fuzzfuse.identity`): two nvFuser evaluator
    asserts that differ only by the op in their message are one bug; a oneDNN crash is another."""
    from fuzzfuse.corpus import Case, write_json

    relu = graph(("v0", "add", ["x0", 0.0], {}), ("v1", "relu", ["v0"], {}), inputs=[tensor("x0", [], "bool")])
    onednn = Signature("crash", "torchscript:onednn", "compile", "RuntimeError", "",
                       "RuntimeError: Boolean inputs not supported for relu")
    for name, g, sig in [("silu", graph(("v0", "silu", ["x0"], {})), crash("unary_evaluate_silu")),
                         ("isnan", graph(("v0", "isnan", ["x0"], {})), crash("unary_evaluate_isnan")),
                         ("relu", relu, onednn)]:
        write_json(tmp_path / name / "case.json", Case(g, sig.backend, outcome=Outcome.CRASH, signature=sig).to_json())
    assert main(["corpus", "bugs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3 repros: 3 coarse keys -> 2 bugs\n")
    assert f"[2] {root_cause_key(crash('unary_evaluate_silu'))}\n    isnan\n    silu\n" in out
    assert "[1] graph|onednn||crash||add:bool->float|\n    relu\n" in out
    assert main(["corpus", "bugs", str(tmp_path / "missing")]) == 2


def test_real_nnc_crashes_with_one_specific_message_are_one_root_cause_before_any_reduction():
    """NNC rejects floor, ceil and round of an integer tensor with one message of its own ("Invalid
    integral op_type: N"): one bug whatever op reached it, keyed at once (no reduction pending)."""
    from fuzzfuse.backends import Unavailable, get_backend
    from fuzzfuse.job import run_case

    try:
        fuser = get_backend("torchscript:nnc")
    except Unavailable as e:
        pytest.skip(str(e))
    graphs = [graph(("v0", op, ["x0"], {}), ("v1", "add", ["v0", "x0"], {}), inputs=[tensor("x0", [2, 3], "int32")])
              for op in ("floor", "ceil", "round")]
    signatures = [run_case(g, fuser).signature for g in graphs]
    assert all(s.outcome == "crash" and "Invalid integral op_type" in s.message for s in signatures)
    keys = {root_cause_key(s) for s in signatures}
    assert keys == {"message|nnc||crash||Invalid integral op_type: N|"}


def test_a_message_that_names_no_cause_keeps_the_reduced_graph_key():
    """Catch-all messages (oneDNN's partition compile), an op's check of its operands and empty
    errors name no cause: such a crash is pending until reduced, then keyed by the ops its reduced
    graph needs (and its folded message)."""
    g = graph(("v0", "exp", ["x0"], {}))
    for message in ("RuntimeError: partition compile failed", "RuntimeError: Boolean inputs not supported for relu",
                    "RuntimeError: (in aten.floor)", "RuntimeError: CUDA error: misaligned address"):
        sig = Signature("crash", "torchscript:onednn", "run", "RuntimeError", "", message)
        assert root_cause_key(sig) is None and root_cause_key(sig, g).startswith("graph|onednn||crash||exp:float|")
    specific = Signature("crash", "aot:onednn", "compile", "RuntimeError", "torch/nn/modules/module.py:_call_impl",
                         "IValue is not a Scalar")
    assert root_cause_key(specific) == "message|onednn||crash||IValue is not a Scalar|"


def test_the_faithful_styles_missing_overloads_are_one_root_cause_whatever_the_function_and_half_dtype():
    """nvFuser's runtime has no __half/__bfloat overload of several functions (what
    nvfuser_dtypes.NO_HALF works around, and the faithful style exposes). Their NVRTC first
    errors differ only by the function, which the key folds out (the coarse key keeps it, so the
    reducer never slips from one to another): relu, ceil, fmax and nvf::silu on either half dtype
    are one key. The kind of error and the classes of the call's types stay: a warp shuffle of
    (unsigned int, __half, int, int) keys apart."""
    template = ERRORS["nvrtc_shfl_xor_half"]["text"]

    def nvrtc(function: str, types: str) -> Signature:
        text = template.replace('"__shfl_xor_sync"', f'"{function}"', 1).replace(
            "(unsigned int, nvf::__half, int, int)", types, 1)
        return exception_signature("nvfuser", "compile", "RuntimeError", text)

    assert "(unsigned int, nvf::__half, int, int)" in template
    keys = {root_cause_key(nvrtc(f, t)) for f in ("relu", "ceil", "fmax", "nvf::silu")
            for t in ("(nvf::__half)", "(nvf::__bfloat)", "(nvf::__half, nvf::__half)")}
    assert keys == {"assert|nvfuser||crash||csrc/runtime/compiled_kernel.cpp:187|CUDA NVRTC compile error: "
                    "no instance of overloaded function F matches the argument list [f16]"}
    assert len({nvrtc(f, "(nvf::__half)").key() for f in ("relu", "ceil")}) == 2  # the reducer keeps the function
    assert "relu" in nvrtc("relu", "(nvf::__half)").message
    assert root_cause_key(nvrtc("__shfl_xor_sync", "(unsigned int, nvf::__half, int, int)")) not in keys


# The NVRTC errors of the committed nvFuser repros: the first compiler error and its call's types.
NVRTC_REPROS = {
    "nvfuser-crash-runtimeerror-csrc-runtime-compiled-kernel-cpp-f9dc2494":
        "no instance of overloaded function F matches the argument list [f16]",
    "nvfuser-crash-runtimeerror-csrc-runtime-compiled-kernel-cpp-24d96eed":
        "more than one instance of overloaded function F matches the argument list [int]",
}


def test_the_committed_nvrtc_errors_key_on_their_kind_and_type_classes_with_the_function_in_the_message():
    minimized = Path(__file__).parent.parent / "minimized"
    for name, folded in NVRTC_REPROS.items():
        case = load_case(minimized / name / "case.json")
        sig = signature_today(case.signature, case.detail)
        assert root_cause_key(sig) == \
            f"assert|nvfuser||crash||csrc/runtime/compiled_kernel.cpp:187|CUDA NVRTC compile error: {folded}"
        function = re.search(r'function "([^"]+)"', case.detail)[1]
        assert function in sig.message and normalize(sig.message) == sig.message
    # A folded variant kept a coarse key only, without the call's types: the name is all that tells
    # a warp shuffle from a missing ceil there, so it stays (" F " would merge them). (Six NVRTC
    # errors listed without a graph, a conversion from f16 to float among them, were other bugs
    # that could be neither verified nor split: the fold dropped them; and on the H200, on
    # 2026-12-03, it dropped f9dc2494's last such variant, aot:nvfuser's warp shuffle, for which
    # no repro could be written.)
    entries = [v for name in NVRTC_REPROS for v in load_case(minimized / name / "case.json").also_seen_as]
    assert not any(" F " in fold(v.signature.message) for v in entries if not v.signature.message.endswith("]"))
    coarse = fold("CUDA NVRTC compile error: no instance of overloaded function __shfl_xor_sync matches the list")
    assert "__shfl_xor_sync" in coarse and " F " not in coarse
    # The warp shuffle of a float16 reduction was folded by hand into the missing-__half-overload
    # repro (f9dc2494); its call's types ([f16, int]) make it another bug, and the fold split it
    # out into a directory of its own, keyed so.
    shuffle = next(load_case(p) for p in minimized.glob("*/case.json")
                   if "__shfl_xor_sync" in load_case(p).signature.message)
    assert "[unsigned int, nvf::__half, int, int]" in shuffle.signature.key()
    assert root_cause_key(shuffle.signature) == (
        "assert|nvfuser||crash||csrc/runtime/compiled_kernel.cpp:187|CUDA NVRTC compile error: "
        "no instance of overloaded function F matches the argument list [f16, int]")
    assert not any(v.directory.endswith("compiled-kernel-cpp-f53da662") for v in entries)
    assert fold("CUDA NVRTC compile error: no operator + matches these operands [nvf::__half + nvf::__half]") == \
        "CUDA NVRTC compile error: no operator F matches these operands [f16]"


def test_an_nvfuser_cast_it_has_no_rule_for_is_one_bug_whatever_the_dtypes():
    """nvFuser's cast table at arith.cpp:34 names its fp8 types as __e4m3 and __e5m2: an H200
    campaign (2026-12-03) reported bool of float8_e4m3fn as new beside the committed float8_e5m2
    of int32 (504b173f), the fp8 name read as an identifier and the other as a dtype."""
    said = "Expected false . Illegal Cast value from  DataType: {} to DataType: {}"
    assert fold(said.format("__e4m3", "bool")) == fold(said.format("int", "__e5m2")) == \
        "Expected false . Illegal Cast value from  DataType: DTYPE to DataType: DTYPE"
    assert fold("Could not convert to torch.float8_e4m3fn") == fold("Could not convert to float32") == \
        "Could not convert to DTYPE"


def test_a_tensor_type_in_a_message_folds_whatever_its_spelling():
    """ATen's expand check names the tensor's type as torch.FloatTensor in one run and
    CPUBFloat16Type in another (both recorded in the committed oneDNN corpus): one bug, whose
    identity keeps the folded message. `torch.` was once left behind, splitting it in two."""
    g = graph(("v0", "exp", ["x0"], {}))
    said = "RuntimeError: expand({}{{[N...]}}, size=[]): the number of sizes provided (N) must be greater or equal to " \
           "the number of dimensions in the tensor (N)"
    spellings = ("torch.FloatTensor", "CPUBFloat16Type", "torch.cuda.HalfTensor", "CUDAFloatType")
    folded = {fold(said.format(t)) for t in spellings}
    assert folded == {"OP(DTYPE{[N...]}, size=[]): the number of sizes provided (N) must be greater or equal to the "
                      "number of dimensions in the tensor (N)"[:100]}
    sigs = [Signature("crash", "torchscript:onednn", "run", "RuntimeError", "", said.format(t)) for t in spellings]
    assert len({s.key() for s in sigs}) == 4 and all(root_cause_key(s) is None for s in sigs)
    assert len({root_cause_key(s, g) for s in sigs}) == 1


def test_nnc_ir_dump_naming_a_double_cast_keeps_its_message_identity():
    """NNC's "MALFORMED INPUT: bad dtype in CompareSelect - <expression>": a campaign's isnan ->
    where -> cos -> ne printed `double(tx3_1[0ll])` in the expression, which read as naming a
    dtype, so the crash was keyed by its graph and reported new beside the committed 381d3fcb."""
    committed = load_case(Path(__file__).resolve().parent.parent / "minimized" /
                          "torchscript-nnc-crash-runtimeerror-381d3fcb" / "case.json")
    found = Signature("crash", "torchscript:nnc", "compile", "RuntimeError", "",
                      "RuntimeError: MALFORMED INPUT: bad dtype in CompareSelect - "
                      "N.5403022766113281f!=double(tx3_1[0ll]) ? N : N")
    key = root_cause_key(found)
    assert key == root_cause_key(committed.signature, committed.graph, committed.generalisation, committed.device)
    assert key.startswith("message|nnc||crash||MALFORMED INPUT: bad dtype in CompareSelect")


def test_torchscripts_schema_lookup_failure_is_named_by_its_message_not_by_the_node_it_quotes():
    """oneDNN Graph's pass breaks TorchScript autodiff's forward graph: "RuntimeError: Schema not
    found for node. File a bug report. Node: = prim::Return(...)". The node it prints is the case's
    graph; read as an op that rejected its operand, it keyed the crash by the op that fed it (*unary)
    and merged it with another crash of those ops. The committed 9839416e recorded its detail
    without the "RuntimeError:" line above the message; read again today, it is this message too.
    Real oneDNN Graph on the committed case's graph."""
    from fuzzfuse.identity import Anchor, case_identity, identify, same_bug
    from fuzzfuse.job import backend_for, run_case

    committed = load_case(Path(__file__).resolve().parent.parent / "minimized" /
                          "torchscript-onednn-crash-runtimeerror-9839416e" / "case.json")
    assert committed.signature.message == "RuntimeError:"  # as recorded
    result = run_case(committed.graph, backend_for("torchscript:onednn"))
    assert "prim::Return" in result.signature.message, result.signature
    found = identify(result.signature, committed.graph, committed.generalisation, "cpu")
    assert found.anchor is Anchor.MESSAGE and found.where == "Schema not found for node. File a bug report."
    assert same_bug(found, case_identity(committed))
    expand = replace(result.signature, message="RuntimeError: expand(CPUFloatType{[N]}, size=[]): the number of "
                     "sizes provided (N) must be greater or equal to the number of dimensions in the tensor (N)")
    assert not same_bug(found, identify(expand, committed.graph, committed.generalisation, "cpu"))
