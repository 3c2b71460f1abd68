"""The real-report benchmark (benchmarks/real_bugs.py, issue 32): each re-created bug fails on the
trigger its report gives, built in fuzzfuse's IR, and the same graph passes on the clean capture
(`dynamo:aot_eager`). Real dynamo and AOT autograd; the rewrites are the bugs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.real_bugs import BUGS, MINIMAL_OPS, NEARER_FLOAT64, SOURCES
from fuzzfuse.backends import get_backend
from fuzzfuse.corpus import Case
from fuzzfuse.identity import case_identity, same_bug
from fuzzfuse.ir import Graph, Layout, make_inputs, run_eager
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.values import with_exact_values
from fuzzfuse.job import run_case
from fuzzfuse.verdict import Outcome
from fuzzfuse.minimize import reduce_case

REAL = "dynamo:benchmarks.real_bugs:"
CLEAN = "dynamo:aot_eager"
ROOT = Path(__file__).parent.parent
NAN, INF = float("nan"), float("inf")


def _pinned(b: GraphBuilder, outputs: list[str], **values: torch.Tensor) -> Graph:
    """The graph with the named inputs' values pinned exactly (their layouts kept)."""
    graph = b.build(outputs)
    inputs = tuple(with_exact_values(i, values[i.name]) if i.name in values else i for i in graph.inputs)
    return Graph(inputs, graph.nodes, graph.outputs)


def _unary(op_chain: list[tuple], value: torch.Tensor, layout: Layout | str = "contiguous") -> Graph:
    """x -> op_chain[0] -> op_chain[1] ...; each entry (op, *scalar args, {attrs})."""
    b = GraphBuilder()
    out = b.tensor(list(value.shape), str(value.dtype).removeprefix("torch."), layout)
    for op, *rest in op_chain:
        attrs = rest.pop() if rest and isinstance(rest[-1], dict) else {}
        out = b.add(op, out, *rest, **attrs)
    return _pinned(b, [out], x0=value)


def _binary(op: str, a: torch.Tensor, other: torch.Tensor, then: list[str] = ()) -> Graph:
    b = GraphBuilder()
    x = b.tensor(list(a.shape), str(a.dtype).removeprefix("torch."))
    y = b.tensor(list(other.shape), str(other.dtype).removeprefix("torch."))
    out = b.add(op, x, y)
    for follow in then:
        out = b.add(follow, out)
    return _pinned(b, [out], x0=a, x1=other)


def _triggers() -> dict[str, Graph]:
    """Each bug's trigger as its report gives it."""
    f16 = torch.float16
    t = {
        "clamp_scalar_nan": _unary([("clamp", -0.5, 0.5)], torch.tensor([1.0, NAN, -2.0, 0.25])),
        "maximum_first_nan": _binary("maximum", torch.tensor([NAN, 1.0]), torch.tensor([0.0, 2.0])),
        "argmax_nan": _unary([("argmax", {"dim": 1, "keepdim": False})], torch.tensor([[1.0, NAN, 3.0]])),
        "add_zero_folded": _unary([("add", 0.0), ("reciprocal",)], torch.tensor([-0.0, 1.0])),
        "var_zero_dof": _unary([("var", {"dims": [1], "keepdim": False, "correction": 1})], torch.randn(3, 1)),
        "var_size1_dims_crash": _unary([("var", {"dims": [1, 2], "keepdim": False, "correction": 0})],
                                       torch.randn(3, 1, 4)),
        "consecutive_reduction_crash": _unary([("sum", {"dims": [1], "keepdim": False}),
                                               ("sum", {"dims": [0, 2], "keepdim": False})], torch.randn(2, 3, 4, 5)),
        "softmax_sum_folded": _unary([("softmax", {"dim": 1}), ("sum", {"dims": [1], "keepdim": False}), ("floor",)],
                                     torch.tensor([[-1.3985954523086548, 0.40334683656692505, 0.8380263447761536,
                                                    -0.7192575931549072, -0.40334352850914]])),
        "softmax_scale_fold": _unary([("mul", -2.0), ("softmax", {"dim": 1})], torch.tensor([[0.0, 100.0]])),
        "cumsum_bool_dtype": _unary([("cast", {"dtype": "bool"}), ("cumsum", {"dim": 0})],
                                    torch.tensor([1.0, 0.0, 2.0])),
        "floor_div_rounded": _binary("div_floor", torch.tensor([1.0]), torch.tensor([0.1])),
        "trunc_div_reciprocal": _binary("div_trunc", torch.tensor([14.999999, 26.999999]), torch.tensor([3.0, 3.0])),
        "remainder_vectorized": _binary("remainder", torch.arange(16.0), torch.full((16,), INF)),
        "fmod_lowp_scalar": _unary([("fmod", 2.3)], torch.tensor([4.9805, 6.6445, 5.6836, 6.1055], dtype=f16)),
        "round_half_away": _unary([("round",)], torch.tensor([-8.5, 2.5, 0.5])),
        "cast_round_trip_elided": _unary([("cast", {"dtype": "float16"}), ("cast", {"dtype": "float32"})],
                                         torch.arange(20.0) / 7.0),
        "int_pow_promoted": _unary([("pow", 3), ("cos",)], torch.tensor([7], dtype=torch.uint8)),
        "lowp_eps_rsqrt": _unary([("add", 1e-9), ("rsqrt",)], torch.zeros(4, dtype=f16)),
        "trig_then_round": _unary([("cos",), ("floor",)], torch.tensor([0.0, 1.0])),
    }
    b = GraphBuilder()
    x = b.tensor([2, 3], "float32", Layout("expanded", dims=(0, 1)))
    t["expanded_sum_shape"] = b.build([b.add("sum", x, dims=[0], keepdim=False)])
    b = GraphBuilder()
    x, y = b.tensor([1], "uint8"), b.tensor([1], "float32")
    t["neg_uint8_signed"] = _pinned(b, [b.add("add", b.add("neg", x), y)], x0=torch.tensor([7], dtype=torch.uint8),
                                    x1=torch.tensor([1.5]))
    b = GraphBuilder()
    x, y, m = b.tensor([1], "bfloat16"), b.tensor([1], "bfloat16"), b.tensor([1], "bfloat16")
    bf = torch.bfloat16
    t["lowp_div_compare"] = _pinned(b, [b.add("eq", b.add("div", x, y), m)], x0=torch.tensor([1.0], dtype=bf),
                                    x1=torch.tensor([3.0], dtype=bf), x2=torch.tensor([1.0], dtype=bf) / 3)
    b = GraphBuilder()
    x, y = b.tensor([2, 3, 4, 5], "float32", "channels_last"), b.tensor([2, 3, 4, 5], "float32")
    t["cat_mixed_layout"] = b.build([b.add("cat", x, y, dim=1)])
    return t


TRIGGERS = _triggers()
IN_PROCESS = [bug for bug in BUGS if bug != "int_min_floor_div"]  # that one kills its process


def test_every_bug_cites_its_source_and_has_a_trigger_of_its_minimal_size():
    assert len(BUGS) >= 20 and set(SOURCES) == set(BUGS) == set(MINIMAL_OPS)
    assert all(url.startswith("https://github.com/") for url, _ in SOURCES.values())
    assert set(TRIGGERS) == set(IN_PROCESS)
    for bug, graph in TRIGGERS.items():
        assert graph.size == MINIMAL_OPS[bug], bug


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride() and \
        bool(torch.equal(torch.nan_to_num(a.double(), 7.0), torch.nan_to_num(b.double(), 7.0)))


@pytest.mark.parametrize("bug", IN_PROCESS)
def test_each_real_bug_changes_the_result_of_its_reported_trigger_and_the_clean_capture_does_not(bug):
    graph = TRIGGERS[bug]
    inputs = make_inputs(graph)
    expected = run_eager(graph, inputs)[0]
    clean = get_backend(CLEAN).run(graph, inputs).outputs  # a clone would lose an expanded layout
    assert all(_same(c, e) for c, e in zip(clean, expected))
    try:
        fused = get_backend(REAL + bug).run(graph, inputs).outputs
    except Exception as e:  # a crash bug
        assert "INTERNAL ASSERT" in str(e), (bug, e)
        return
    assert not all(_same(f, e) for f, e in zip(fused, expected)), bug


@pytest.mark.parametrize("bug", IN_PROCESS)
def test_the_oracle_reports_each_real_bug_except_those_nearer_float64_than_eager(bug):
    """A re-created bug whose wrong result is nearer the float64 truth than eager's (an
    intermediate kept in fp32, an unrounded scalar, a sum folded to 1) is what the oracle's float64
    arbitration forgives by policy: such a case is no failure. The rest are mismatches or crashes."""
    found = run_case(TRIGGERS[bug], get_backend(REAL + bug), check_strides=True)
    if bug in NEARER_FLOAT64:
        assert not found.outcome.is_failure, (bug, found.detail[:400])
    else:
        assert found.outcome.value in ("mismatch", "crash"), (bug, found.outcome, found.detail[:400])
    assert run_case(TRIGGERS[bug], get_backend(CLEAN), check_strides=True).outcome.value == "pass"


@pytest.mark.parametrize("bug", ["trig_then_round", "round_half_away", "cat_mixed_layout", "lowp_eps_rsqrt"])
def test_a_real_bug_stays_silent_off_its_condition(bug):
    """Each is narrow: the same ops on values (or layouts) outside the report's condition pass."""
    graph = {"trig_then_round": _unary([("cos",), ("floor",)], torch.tensor([0.5, 2.0])),
             "round_half_away": _unary([("round",)], torch.tensor([-8.4, 2.6, 0.25])),
             "lowp_eps_rsqrt": _unary([("add", 1e-3), ("rsqrt",)], torch.ones(4, dtype=torch.float16)),
             "cat_mixed_layout": None}[bug]
    if graph is None:
        b = GraphBuilder()
        x, y = b.tensor([2, 3, 4, 5], "float32", "channels_last"), b.tensor([2, 3, 4, 5], "float32", "channels_last")
        graph = b.build([b.add("cat", x, y, dim=1)])
    assert run_case(graph, get_backend(REAL + bug), check_strides=True).outcome.value == "pass"


def test_int_min_floor_division_kills_the_process_as_a_hardware_trap_does():
    code = ("import torch\nfrom benchmarks.real_bugs import int_min_floor_div\n"
            "f = torch.compile(lambda a, b: torch.div(a, b, rounding_mode='floor'), backend=int_min_floor_div)\n"
            "print(f(torch.tensor([5], dtype=torch.int32), torch.tensor([-1], dtype=torch.int32)))\n"
            "f(torch.tensor([-2**31], dtype=torch.int32), torch.tensor([-1], dtype=torch.int32))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "tensor([-5]" in run.stdout and run.returncode == -8, (run.returncode, run.stderr[-800:])


@pytest.mark.slow
def test_a_crash_on_a_wrong_dtype_reduces_to_that_wrong_dtype():
    """cumsum of a bool cast typed bool: abs then refuses the bool ("not implemented for 'Bool'"),
    a crash with no location of its own. Its reduction finds the operand the fuser typed wrongly
    and reduces that wrong dtype instead, so the crash and the wrong dtype are one bug (they were
    two root causes of one campaign)."""
    backend = REAL + "cumsum_bool_dtype"
    b = GraphBuilder()
    x = b.tensor([3], "float32")
    crashing = b.build([b.add("abs", b.add("cumsum", b.add("cast", x, dtype="bool"), dim=0)), b.add("exp", x)])

    def reduced(graph: Graph) -> Case:
        found = run_case(graph, get_backend(backend))
        done = reduce_case(Case(graph, backend, outcome=found.outcome, signature=found.signature), backend)
        return Case(done.graph, backend, outcome=Outcome.MISMATCH, signature=done.signature,
                    generalisation=done.generalisation)

    assert run_case(crashing, get_backend(backend)).outcome.value == "crash"
    from_crash, from_dtype = reduced(crashing), reduced(TRIGGERS["cumsum_bool_dtype"])
    assert (from_crash.signature.outcome, from_crash.signature.kind) == ("mismatch", "dtype")
    assert [n.op for n in from_crash.graph.nodes] == ["cast", "cumsum"]
    assert same_bug(case_identity(from_crash), case_identity(from_dtype))
