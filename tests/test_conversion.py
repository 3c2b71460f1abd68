"""A wrong float computed from an integer is the conversion's bug where the conversion alone is
wrong (minimize.reduce_case): on the real Inductor CPU, whose int64 -> float32 under unsafe math
is 0, so that exp(1) is 1 and atan2(1, 1) is 0."""
from dataclasses import replace
from pathlib import Path

import pytest

from fuzzfuse.corpus import load_case
from fuzzfuse.hostcpu import host_isa
from fuzzfuse.identity import case_identity, same_bug
from fuzzfuse.minimize import reduce_case
from fuzzfuse.rekey import stale

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "minimized" / "inductor-mismatch-values-float-75ef745d"


@pytest.mark.slow
def test_a_wrong_float_of_an_integer_whose_conversion_alone_is_wrong_is_the_conversions_bug():
    """A CPU campaign reported atan2(x, x) of int64 ones under unsafe math (0, eager 0.785) as new
    beside the committed exp of int64 (1, eager e): two ops, one conversion. Reduced today, atan2's
    case is the cast alone, and the committed directory (re-reduced by `corpus fold`, since it was
    reduced before this change: rekey.stale) holds that very bug."""
    case = load_case(ROOT / "tests" / "data" / "inductor_unsafe_math_atan2_int64_case.json")
    if host_isa() != case.versions["host_isa"]:
        # -march=native: on an AVX-512 host the same C++ converts int64 ones right (2026-12-06)
        pytest.skip(f"the conversion fails in code compiled for an {case.versions['host_isa'].upper()} host; "
                    f"this one is {host_isa().upper()}")
    assert [n.op for n in case.graph.nodes] == ["atan2"]
    reduction = reduce_case(case, case.backend, workers=2, timeout=120)
    assert [n.op for n in reduction.graph.nodes] == ["cast"]
    reduced = replace(case, graph=reduction.graph, signature=reduction.signature, options=reduction.options,
                      generalisation=reduction.generalisation)
    committed = load_case(COMMITTED / "case.json")
    assert [n.op for n in committed.graph.nodes] == ["cast"]
    assert same_bug(case_identity(reduced), case_identity(committed))
    assert case_identity(reduced).key() != case_identity(case).key()


def test_a_case_reduced_before_the_conversion_probe_is_stale_where_it_computes_a_float_of_an_integer():
    """Only a wrong value whose first wrong op computes a float from an integer is concerned."""
    case = load_case(ROOT / "tests" / "data" / "inductor_unsafe_math_atan2_int64_case.json")
    assert case.reduction.reducer == 2 and "conversion" in stale(case)
    assert stale(replace(case, reduction=replace(case.reduction, reducer=3))) is None  # today's reducer
    float_only = load_case(ROOT / "minimized" / "inductor-mismatch-values-float-b71af8d6" / "case.json")
    assert stale(replace(float_only, reduction=replace(float_only.reduction, reducer=2))) is None


def test_a_rewrite_of_a_directory_keeps_its_versions_table(tmp_path):
    """write_minimized (refresh, fold's re-reductions) rebuilt the directory from case.json and
    dropped versions.json, the record of the builds its bug was looked for in."""
    import shutil

    from fuzzfuse.corpus import VERSIONS_FILE
    from fuzzfuse.repro_dir import refresh

    source = ROOT / "minimized" / "torchscript-nnc-mismatch-values-float-5404acd0"
    assert (source / VERSIONS_FILE).exists()
    directory = tmp_path / source.name
    shutil.copytree(source, directory)
    refresh(directory, verify_runs=1)
    assert (directory / VERSIONS_FILE).read_text() == (source / VERSIONS_FILE).read_text()
