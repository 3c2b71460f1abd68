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



def test_an_integer_input_the_failure_survives_as_float_names_the_float_ops_bug(tmp_path):
    """Inductor CPU's div_floor(int32 -1, 1e-05) gives -100000 (eager -100001): its float32
    floor(a / b), the lowering of the committed div_floor(inf, 1.0) -> inf. A campaign (seed
    3115734797) reduced it with the int32 input kept and reported it new (an int->float class);
    the failure survives -1 as float32, so the bug is the float op's."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from fuzzfuse.corpus import load_case
    from fuzzfuse.identity import case_identity, same_bug

    root = Path(__file__).resolve().parent.parent
    folder = tmp_path / "found"
    folder.mkdir()
    shutil.copy(root / "tests" / "data" / "inductor_div_floor_int_case.json", folder / "case.json")
    committed = load_case(root / "minimized" / "inductor-mismatch-nan-inf-float-62c90d20" / "case.json")
    assert not same_bug(case_identity(load_case(folder / "case.json")), case_identity(committed))
    done = subprocess.run([sys.executable, "-m", "fuzzfuse", "corpus", "refresh", "--generalise", str(folder)],
                          capture_output=True, text=True, cwd=root, timeout=600)
    assert done.returncode == 0 and "div_floor|float" in done.stdout, done.stdout + done.stderr
    found = load_case(folder / "case.json")
    assert found.generalisation.as_float == (0,)
    assert same_bug(case_identity(found), case_identity(committed))


def test_an_op_whose_value_is_eagers_bit_for_bit_is_not_the_culprit(tmp_path):
    """A 300-s NNC campaign (seed 2943217282) reported floor -> remainder -> pow of -6.4e-40 (inf,
    eager nan) new, keyed by floor. NNC's floor is -1, as eager's; its remainder is -0.0 for
    -6.4e-40, within the oracle's tolerance, and pow makes inf of it: 4d04286f's remainder."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from fuzzfuse.corpus import load_case
    from fuzzfuse.identity import case_identity, same_bug

    root = Path(__file__).resolve().parent.parent
    folder = tmp_path / "found"
    folder.mkdir()
    shutil.copy(root / "tests" / "data" / "nnc_floor_remainder_pow_case.json", folder / "case.json")
    committed = load_case(root / "minimized" / "torchscript-nnc-mismatch-nan-inf-float-4d04286f" / "case.json")
    assert case_identity(load_case(folder / "case.json")).where == "floor"
    done = subprocess.run([sys.executable, "-m", "fuzzfuse", "corpus", "refresh", "--generalise", str(folder)],
                          capture_output=True, text=True, cwd=root, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    found = load_case(folder / "case.json")
    assert found.generalisation.exact == (0,)  # the floor
    assert same_bug(case_identity(found), case_identity(committed))


def test_a_form_that_passes_now_is_recorded_so_and_the_fold_drops_it(tmp_path):
    """Replaying every CPU form of the corpus found NNC's lerp -> log_softmax -> tan, listed under
    the lerp bug 1c11d7f0, passing on every run here. `corpus refresh --generalise` records such a
    form as not reproducing (it is no evidence of its bug now) and `corpus fold` drops it; a form
    of the same directory that still fails (lerp -> neg) stays as it was."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from fuzzfuse.corpus import load_case
    from fuzzfuse.verdict import Reproduction

    root = Path(__file__).resolve().parent.parent
    name = "torchscript-nnc-mismatch-nan-inf-float-1c11d7f0"
    corpus = tmp_path / "minimized"
    shutil.copytree(root / "tests" / "data" / "form_passing_now" / name, corpus / name)
    done = subprocess.run([sys.executable, "-m", "fuzzfuse", "corpus", "refresh", "--generalise", str(corpus / name)],
                          capture_output=True, text=True, cwd=root, timeout=600)
    assert done.returncode == 0 and "d566a9c5 passed on each of 3 runs" in done.stderr, done.stdout + done.stderr
    marked = {v.directory.rsplit("-", 1)[1]: v.verification for v in load_case(corpus / name / "case.json").also_seen_as}
    assert marked["d566a9c5"] is Reproduction.DOES_NOT_REPRODUCE
    assert marked["9d3351e1"] is not Reproduction.DOES_NOT_REPRODUCE
    done = subprocess.run([sys.executable, "-m", "fuzzfuse", "corpus", "fold", str(corpus)],
                          capture_output=True, text=True, cwd=root, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    left = [v.directory for v in load_case(corpus / name / "case.json").also_seen_as]
    assert left == ["torchscript-nnc-mismatch-nan-inf-float-9d3351e1"]


def test_replaying_forms_says_each_and_records_one_passing_now(tmp_path):
    """`corpus refresh --forms` replays each listed form of a directory on its own backend: the
    lerp bug's lerp -> neg still fails as that bug, its lerp -> log_softmax -> tan passes on every
    run and is recorded as not reproducing (exit 1, a form no longer shows its bug), and so is a
    form that today's oracle documents (the H100's replay found one, an ill-conditioned nvFuser
    log_softmax); the repro's own graph and generalisation are left as they were."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from fuzzfuse.corpus import load_case
    from fuzzfuse.verdict import Reproduction

    from dataclasses import replace

    from fuzzfuse.corpus import Variant, write_json

    root = Path(__file__).resolve().parent.parent
    name = "torchscript-nnc-mismatch-nan-inf-float-1c11d7f0"
    shutil.copytree(root / "tests" / "data" / "form_passing_now" / name, tmp_path / name)
    # and a form today's oracle documents: Inductor's bfloat16 sin(expm1(19)) in float32 intermediates
    b = GraphBuilder()
    x = b.tensor([1], "bfloat16", values=Values(exact=encode_exact(torch.tensor([19.0], dtype=torch.bfloat16))))
    documented = Variant("mismatch|inductor|run|values|float|", "graph|inductor", "inductor", ("expm1", "sin"),
                         "inductor-mismatch-values-float-00000000", graph=b.build([b.add("sin", b.add("expm1", x))]))
    before = load_case(tmp_path / name / "case.json")
    write_json(tmp_path / name / "case.json", replace(before, also_seen_as=before.also_seen_as + [documented]).to_json())
    done = subprocess.run([sys.executable, "-m", "fuzzfuse", "corpus", "refresh", "--forms", str(tmp_path / name)],
                          capture_output=True, text=True, cwd=root, timeout=600)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert any(line.endswith("9d3351e1: same bug") for line in lines), lines
    assert any("d566a9c5: passes on each of 3 runs (it passes)" in line for line in lines), lines
    assert any("00000000: passes on each of 3 runs (it gives documented-difference|inductor|run|fp32-intermediates"
               in line for line in lines), lines
    after = load_case(tmp_path / name / "case.json")
    marked = {v.directory.rsplit("-", 1)[1]: v.verification for v in after.also_seen_as}
    assert marked["d566a9c5"] is Reproduction.DOES_NOT_REPRODUCE
    assert marked["9d3351e1"] is not Reproduction.DOES_NOT_REPRODUCE
    assert marked["00000000"] is Reproduction.DOES_NOT_REPRODUCE
    assert (after.graph, after.generalisation) == (before.graph, before.generalisation)
