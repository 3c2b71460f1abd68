"""`fuzzfuse corpus ...`: fold, bugs, refresh and seeds under the one command surface (the
`python -m fuzzfuse.fold|identity|minimize|seeds` entry points are gone). Real runs on committed
repros: `bugs` on two directories of minimized/, `fold --dry-run` on a copy of two directories of
tests/data/identity_corpus (one bug, found twice)."""
import importlib
import inspect
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fuzzfuse.cli import main
from fuzzfuse.corpus import load_case

ROOT = Path(__file__).parent.parent
MINIMIZED = ROOT / "minimized"
CORPUS = Path(__file__).parent / "data" / "identity_corpus"
ELU_SMALL = "torchscript-nnc-mismatch-values-float-c8e27f28"
ELU_LARGE = "torchscript-nnc-mismatch-values-float-6b7dcdc4"
FRAC = "aot-nnc-mismatch-values-float-d3a22038"  # NNC's frac on float, through AOT
SEGMENTER = "aot-nvfuser-crash-runtimeerror-csrc-fusion-segmenter-cpp-342-d98061c1"  # an nvFuser assert


def run(argv: list[str]) -> int:
    """The CLI's exit code, whether the command returned it or argparse exited with it."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def test_corpus_help_lists_its_commands():
    done = subprocess.run([sys.executable, "-m", "fuzzfuse", "corpus", "--help"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: fuzzfuse corpus ")
    for command in ("fold", "bugs", "refresh", "seeds"):
        assert f"\n    {command} " in done.stdout, command


@pytest.mark.parametrize("module", ["fold", "identity", "minimize", "seeds"])
def test_the_old_python_m_entry_points_are_gone(module):
    """No `python -m fuzzfuse.<module>`: no main(), no __main__ block, no argparse of its own."""
    mod = importlib.import_module(f"fuzzfuse.{module}")
    source = inspect.getsource(mod)
    assert not hasattr(mod, "main")
    assert "__main__" not in source and "argparse" not in source


# {dir}: an empty directory, {file}: a plain file, {missing}: nothing.
BAD_INPUTS = ["corpus", "corpus frob",
              "corpus fold {missing}", "corpus fold {dir} --jobs 0", "corpus fold {dir} --split-on tpu",
              "corpus bugs", "corpus bugs {missing}", "corpus bugs {dir} --against {missing}",
              "corpus refresh {missing}", "corpus refresh {missing} --generalise", "corpus refresh {missing} --rereduce",
              "corpus refresh {dir} --rereduce --generalise", "corpus refresh {dir} --timeout 0",
              "corpus seeds", "corpus seeds {file}"]


@pytest.mark.parametrize("command", BAD_INPUTS)
def test_bad_input_to_each_corpus_command_is_one_line_and_exit_2(tmp_path, capsys, command):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    argv = [word.format(**{k: str(tmp_path / k) for k in ("dir", "file", "missing")}) for word in command.split()]
    assert run(argv) == 2, argv
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1 and err.startswith("fuzzfuse"), (argv, err)
    assert ": error: " in err and "Traceback" not in err


def test_bugs_groups_committed_repros_by_bug(capsys):
    assert run(["corpus", "bugs", str(MINIMIZED / FRAC), str(MINIMIZED / SEGMENTER)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 repros: 2 coarse keys -> 2 bugs\n")
    assert f"culprit|nnc|cpu|wrong-value|forward|frac|float\n    {FRAC}\n" in out
    assert f"assert|nvfuser||crash||csrc/fusion_segmenter.cpp:3420|INTERNAL ASSERT FAILED\n    {SEGMENTER}\n" in out
    # --variants: every form folded into the directory is a member of its own, all one bug.
    assert run(["corpus", "bugs", str(MINIMIZED / FRAC), "--variants"]) == 0
    assert "  1 directories: 0 of them hold more than one bug\n" in capsys.readouterr().out


def test_bugs_against_a_corpus_says_which_are_known(capsys):
    assert run(["corpus", "bugs", str(CORPUS / ELU_LARGE), "--against", str(CORPUS)]) == 0
    assert capsys.readouterr().out == f"known    {ELU_LARGE}: {ELU_LARGE}\n"
    assert run(["corpus", "bugs", str(MINIMIZED / FRAC), "--against", str(CORPUS)]) == 0
    assert capsys.readouterr().out.startswith(f"new      {FRAC}: nnc (cpu): frac on float: wrong-value; nearest ")


def test_fold_dry_run_says_what_it_would_do_and_changes_nothing(tmp_path, capsys):
    root = tmp_path / "minimized"
    for name in (ELU_SMALL, ELU_LARGE):
        shutil.copytree(CORPUS / name, root / name)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert run(["corpus", "fold", str(root), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{ELU_SMALL} <- 1: {ELU_LARGE}"
    assert lines[-1].startswith("1 repro(s) folded into 1, ")
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


@pytest.mark.slow  # nvFuser compiles and three fresh processes per split form
@pytest.mark.skipif(not torch.cuda.is_available(), reason="its forms are nvFuser's: a fold splits them on a CUDA GPU")
def test_fold_drops_a_form_no_repro_can_be_written_for_where_its_backend_runs(tmp_path, capsys):
    """fa9994a4 (as committed on 2026-12-03) listed an aot:nvfuser crash whose fusion script was
    never recorded: on the GPU it could be neither verified nor split, so it stayed listed as a bug
    its directory does not hold. The fold drops it; the nvFuser crash listed beside it is split."""
    pytest.importorskip("nvfuser_direct")
    holder, unwritable = "nvfuser-mismatch-shape-float-fa9994a4", "aot-nvfuser-crash-runtimeerror-torch-ops-py-call-d4046641"
    root = tmp_path / "minimized"
    shutil.copytree(Path(__file__).parent / "data" / "unwritable_form_corpus" / holder, root / holder)
    assert run(["corpus", "fold", str(root), "--split-on", "cuda"]) == 0
    out = capsys.readouterr().out
    assert f"dropped {unwritable} from {holder}: no repro can be written for it" in out, out
    assert unwritable not in {v.directory for v in load_case(root / holder / "case.json").also_seen_as}
    assert "not split" not in out, out


def test_seeds_rewrites_the_committed_seed_corpus_byte_for_byte(tmp_path, capsys):
    assert run(["corpus", "seeds", str(tmp_path)]) == 0
    written = [Path(line) for line in capsys.readouterr().out.splitlines()]
    assert len(written) == 38 and all(p.parent == tmp_path for p in written)  # 30 forward, 8 training
    for path in written:
        assert path.read_text() == (ROOT / "corpus" / path.name).read_text(), path.name


def test_the_nearest_committed_bug_among_equals_shares_the_most_ops():
    """Inductor CUDA's neg -> pad, keyed by its outputs, was named nearest an argmax bug because
    the directory name broke the tie; the committed form with neg -> pad is the one to read."""
    from fuzzfuse.identity import WRONG_AMONG_OUTPUTS, Anchor, BugIdentity, Symptom
    from fuzzfuse.known import nearest

    def culprit(where, detail=""):
        return BugIdentity("inductor", Anchor.CULPRIT, Symptom.WRONG_VALUE, where, detail, "forward", "cuda")

    found = culprit(WRONG_AMONG_OUTPUTS, "contiguous")
    committed = [(culprit("argmax", "int"), "inductor-mismatch-values-int-363df106", frozenset({"argmax"})),
                 (culprit("pad"), "inductor-mismatch-values-bool-fa9ada42", frozenset({"neg", "pad"}))]
    assert nearest(found, committed, frozenset({"neg", "pad"}))[0] == "inductor-mismatch-values-bool-fa9ada42"
    assert nearest(found, committed, frozenset({"argmax"}))[0] == "inductor-mismatch-values-int-363df106"
    # A nearer identity still comes first, whatever ops it shares.
    closer = (culprit(WRONG_AMONG_OUTPUTS, "contiguous/permuted"), "nvfuser-like", frozenset({"add"}))
    assert nearest(found, committed + [closer], frozenset({"neg", "pad"}))[0] == "nvfuser-like"
