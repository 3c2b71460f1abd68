"""A store narrower than its output's dtype is one bug however it shows (fuzzfuse.explain's
NARROW_STORE), on real NNC: its abs, round or floor of a folded integer constant is written as
float32 elements whatever the output's dtype, so an int16 output's heap is overrun (the committed
13207297 dies of it) and an int64 output keeps its second half as the allocator left it (a
README quick campaign reported that form new, flaky: 0x556b00000000 for 0)."""
import platform
import shutil
from pathlib import Path

import pytest
import torch

from fuzzfuse.corpus import Case, load_case, save_case
from fuzzfuse.explain import NARROW_STORE, stored_narrow
from fuzzfuse.heap import new_memory_poisoned
from fuzzfuse.identity import case_identity, same_bug
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.graph import Values
from fuzzfuse.job import backend_for, run_case
from fuzzfuse.minimize import minimize_files, narrow_store_when_widened
from fuzzfuse.backends.options import Options
from fuzzfuse.pool import case_pool
from fuzzfuse.verdict import Outcome, Reproduction

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "minimized" / "torchscript-nnc-hard-crash-sigabrt-13207297"
glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="M_PERTURB is glibc's")


def test_stored_narrow_reads_the_bytes_as_narrower_integers():
    right = torch.tensor([0, 0, 0], dtype=torch.int64)
    # Three int32 zeros written into 24 bytes, the rest as the poisoned heap left it.
    unwritten = torch.full((6,), 0x5A5A5A5A, dtype=torch.int32)
    unwritten[:3] = 0
    assert stored_narrow(unwritten.view(torch.int64), right)
    assert stored_narrow(torch.tensor(0x7F0200000000), torch.tensor(0))  # a campaign's 0-d int64
    # A result computed in int32 and sign-extended is another bug: the high bits are the sign's.
    assert not stored_narrow(torch.tensor([5], dtype=torch.int64), torch.tensor([2 ** 32 + 5]))
    assert not stored_narrow(torch.tensor([-1], dtype=torch.int64), torch.tensor([2 ** 32 - 1]))
    assert not stored_narrow(right, right.clone())
    assert not stored_narrow(torch.tensor([7, 9]), torch.tensor([3, 9]))  # a plain wrong value
    assert not stored_narrow(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    # NNC's round of a folded True cast to int64: eight float32 1.0s in a 64-byte buffer.
    floats = torch.tensor([0x3F800000] * 8 + [0x5A5A5A5A] * 8, dtype=torch.int32).view(torch.int64)
    assert stored_narrow(floats, torch.ones(8, dtype=torch.int64))
    int16_in_int32 = torch.tensor([0x5A5A0003, 0x5A5A5A5A], dtype=torch.int32)
    assert stored_narrow(int16_in_int32, torch.tensor([3, 0], dtype=torch.int32))


@glibc
def test_a_poisoned_heap_fills_new_memory_with_the_pattern():
    with new_memory_poisoned():
        fresh = torch.empty(4096, dtype=torch.uint8)
    assert bool((fresh == 0x5A).all())


def _sub_then(op: str, dtype: str, shape: tuple):
    b = GraphBuilder()
    x = b.tensor(shape, dtype, values=Values(dist="ones"))
    return b.build([b.add(op, b.add("sub", x, x))])


def test_the_store_is_named_before_the_fold_that_made_its_value():
    """int64 abs of x - x was once named by 12d7b27e's fold rule (its graph with x - (a copy of x)
    is right): the fold is needed, but what NNC computes wrong from it is the store, which the
    bytes show exactly (tests/test_explain.py keeps the folds that compare wrong)."""
    b = GraphBuilder()
    x = b.tensor((2, 9), "int64", values=Values(dist="zeros"))
    graph = b.build([b.add("abs", b.add("sub", x, x))])
    with new_memory_poisoned():
        result = run_case(graph, backend_for("torchscript:nnc"))
    assert result.outcome is Outcome.MISMATCH and result.signature.message == NARROW_STORE, result.detail


@glibc
@pytest.mark.slow
def test_the_int64_form_fails_on_every_run_and_lands_in_the_committed_crashs_directory(tmp_path):
    graph = _sub_then("round", "int64", ())
    results = []
    for _ in range(3):
        with new_memory_poisoned():
            results.append(run_case(graph, backend_for("torchscript:nnc")))
    assert all(r.outcome is Outcome.MISMATCH and r.signature.message == NARROW_STORE for r in results), \
        [r.signature for r in results]
    found = tmp_path / "found"
    found.mkdir()
    path = save_case(found, Case(graph, "torchscript:nnc", 1, Outcome.MISMATCH, results[0].signature,
                                 results[0].detail))
    minimized = tmp_path / "minimized"
    shutil.copytree(COMMITTED, minimized / COMMITTED.name)
    before = len(load_case(minimized / COMMITTED.name / "case.json").also_seen_as)
    ((_, home),) = list(minimize_files([path], minimized, workers=1))
    assert home == minimized / COMMITTED.name, home
    assert len(load_case(home / "case.json").also_seen_as) == before + 1
    # With that directory gone, the form makes exactly one, whose repro fails on every run.
    alone = tmp_path / "alone"
    ((_, made),) = list(minimize_files([path], alone, workers=1))
    assert [p.name for p in alone.iterdir()] == [made.name]
    case = load_case(made / "case.json")
    assert same_bug(case_identity(case), case_identity(load_case(COMMITTED / "case.json")))
    assert case.verification.status is Reproduction.REPRODUCES, case.verification
    assert "mallopt(-6, 0xA5)" in (made / "repro.py").read_text()


@glibc
@pytest.mark.slow
def test_a_crash_is_named_by_the_narrow_store_its_int64_form_shows_and_only_then():
    """13207297's int16 sub -> abs shows the store on int64; 0b3fcc1e's neg -> add -> mul of an
    int32 folded zero dies by SIGSEGV on int64 too: another bug, which keeps its graph's key."""
    segfault = load_case(ROOT / "minimized" / "torchscript-nnc-hard-crash-sigsegv-0b3fcc1e" / "case.json")
    committed = load_case(COMMITTED / "case.json")
    # A 300-s campaign's eq(x, x) -> cast(int16) -> round of an int32: the cast names the narrow
    # dtype, so the probe widens the cast too.
    b = GraphBuilder()
    x = b.tensor((2, 4), "int32", values=Values(dist="zeros"))
    cast = b.build([b.add("round", b.add("cast", b.add("eq", x, x), dtype="int16"))])
    with case_pool("torchscript:nnc", 1, 60.0) as pool:
        ids = iter(range(100))
        assert narrow_store_when_widened(pool, "torchscript:nnc", committed.graph, Options(), committed.signature,
                                         60.0, False, ids) == NARROW_STORE
        assert narrow_store_when_widened(pool, "torchscript:nnc", cast, Options(), committed.signature,
                                         60.0, False, ids) == NARROW_STORE
        assert narrow_store_when_widened(pool, "torchscript:nnc", segfault.graph, Options(), segfault.signature,
                                         60.0, False, ids) == ""
    assert committed.generalisation.widened == NARROW_STORE
    assert case_identity(committed).where == NARROW_STORE
    assert case_identity(segfault).where != NARROW_STORE


def test_an_int32_output_holding_the_floats_bits_is_the_same_store():
    """NNC's sub(x, x) -> add 1 -> round of an int32 returns 1065353216, the bits of 1.0f (a 2-worker
    NNC campaign reported it new): the float32 elements fill an int32 where they leave an int64's
    upper half unwritten. One fault, the committed 13207297."""
    assert stored_narrow(torch.tensor([0x3F800000, 0x40000000], dtype=torch.int32),
                         torch.tensor([1, 2], dtype=torch.int32))
    assert not stored_narrow(torch.tensor([5, 2], dtype=torch.int32), torch.tensor([3, 2], dtype=torch.int32))
    b = GraphBuilder()
    x = b.tensor((), "int32", values=Values(dist="ones"))
    graph = b.build([b.add("round", b.add("add", b.add("sub", x, x), 1))])
    result = run_case(graph, backend_for("torchscript:nnc"))
    assert result.outcome is Outcome.MISMATCH and result.signature.message == NARROW_STORE, result.signature
    case = Case(graph, "torchscript:nnc", 1, Outcome.MISMATCH, result.signature, result.detail)
    assert same_bug(case_identity(case), case_identity(load_case(COMMITTED / "case.json")))
