"""A form of a known bug lands in that bug's directory by itself (identity.same_bug), on a real
fuser: NNC rounds a float32 half away from zero (round(0.5) is 1, eager 0), whatever op then
observes the wrong value."""
import pytest
import torch

from fuzzfuse.corpus import Case, save_case
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.ir.values import Values, encode_exact
from fuzzfuse.job import backend_for, run_case
from fuzzfuse.minimize import minimize_files
from fuzzfuse.verdict import Outcome

pytestmark = pytest.mark.slow
HALVES = torch.tensor([0.5, 2.5, -1.5, 4.5], dtype=torch.float32)


def _round_then(observer: str, tmp_path, name: str):
    """A saved failing NNC case: round of halves, then `observer` of the rounded value."""
    b = GraphBuilder()
    x = b.tensor((4,), "float32", values=Values(exact=encode_exact(HALVES)))
    rounded = b.add("round", x)
    graph = b.build([b.add(observer, rounded) if observer != "remainder" else b.add("remainder", x, rounded)])
    result = run_case(graph, backend_for("torchscript:nnc"))
    assert result.outcome is Outcome.MISMATCH, result.detail
    case = Case(graph, "torchscript:nnc", 1, result.outcome, result.signature, result.detail)
    folder = tmp_path / name
    folder.mkdir()
    return save_case(folder, case)


def _reduce(path, out):
    done = list(minimize_files([path], out, workers=1))
    assert all(not isinstance(r, Exception) for _, r in done), done
    return [r for _, r in done]


def test_a_form_with_another_observer_lands_in_the_bugs_directory_and_alone_makes_one(tmp_path):
    out = tmp_path / "minimized"
    first = _round_then("neg", tmp_path, "a")
    second = _round_then("remainder", tmp_path, "b")
    (home,) = _reduce(first, out)
    (again,) = _reduce(second, out)
    assert again == home and [p.name for p in out.iterdir()] == [home.name]
    # The same form where no directory holds the bug: exactly one new directory.
    alone = tmp_path / "alone"
    (made,) = _reduce(second, alone)
    assert [p.name for p in alone.iterdir()] == [made.name]
