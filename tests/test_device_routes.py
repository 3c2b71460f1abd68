"""One lowering on two devices (fuzzfuse.minimize.devices_failing_alike): Inductor's C++ and Triton
code share their lowering, so a reduced wrong value that fails alike on CPU and CUDA is one bug,
named by no device, and a CUDA form of a committed CPU bug is known. The probe runs where both
devices do (the GPU machine); here it must leave a bug on its own device."""
import itertools
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fuzzfuse.backends.options import Options
from fuzzfuse.corpus import iter_cases, load_case, write_json
from fuzzfuse.identity import identify, same_bug
from fuzzfuse.known import KnownBugs, groups, known_repros
from fuzzfuse.minimize import as_run_on, devices_failing_alike, minimize_files
from fuzzfuse.pool import case_pool
from fuzzfuse.reduce.generalise import Generalisation

ROOT = Path(__file__).resolve().parent.parent
# Copies of two committed case files as found (minimized/ folds them into one since this rule).
TWINS = ROOT / "tests" / "data" / "device_twins"
CPU_TWIN = TWINS / "inductor-mismatch-nan-inf-float-62c90d20"  # div_floor(inf, 1.0) on CPU
CUDA_TWIN = TWINS / "inductor-mismatch-nan-inf-float-c4e70044"  # div_floor(-inf, 1.0) on CUDA


def test_a_wrong_value_alike_on_both_devices_names_no_device_and_is_the_cpu_bugs_twin():
    cpu, cuda = (load_case(d / "case.json") for d in (CPU_TWIN, CUDA_TWIN))
    on_cpu = identify(cpu.signature, cpu.graph, cpu.generalisation, "cpu")
    alone = identify(cuda.signature, cuda.graph, cuda.generalisation, "cuda")
    assert on_cpu.where == alone.where == "div_floor" and not same_bug(on_cpu, alone)
    shared = Generalisation(cuda.graph.renamed().digest(), devices=("cpu", "cuda"))
    both = identify(cuda.signature, cuda.graph, shared, "cuda")
    assert both.device == "" and same_bug(both, on_cpu)
    known = KnownBugs({on_cpu.key(): CPU_TWIN.name})
    assert known.find(both.key()) == CPU_TWIN.name and known.find(alone.key()) is None
    assert Generalisation.from_json(shared.to_json()) == shared


@pytest.mark.slow  # loading Inductor takes seconds
def test_where_the_other_device_cannot_run_the_bug_stays_on_its_own():
    case = load_case(CPU_TWIN / "case.json")
    if torch.cuda.is_available():
        pytest.skip("CUDA runs here: the probe would run")
    # Nothing runs (no pool is given): the only other route is unavailable here.
    assert devices_failing_alike(None, "inductor", case.graph, Options(), case.signature, 120.0, False,
                                 itertools.count()) == ()


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the probe runs both devices")
def test_on_a_gpu_the_cuda_twin_fails_alike_on_cpu(tmp_path):
    """Real Inductor on both devices: div_floor of an infinity by 1.0 is wrong in the shared
    lowering (floor(a / b)), so the CUDA repro fails alike on CPU (passed on the H200, 2026-12-03,
    in 66 s)."""
    case = load_case(CUDA_TWIN / "case.json")
    with case_pool("inductor", 2, 300.0) as pool:
        devices = devices_failing_alike(pool, "inductor", case.graph, Options(), case.signature, 300.0, False,
                                        itertools.count())
    assert devices == ("cpu", "cuda")


STRIDES_TWIN = TWINS / "inductor-mismatch-strides-bool-68195e00"  # CUDA logical_xor, disable_ftz drawn


@pytest.mark.slow  # Inductor's C++ compiles
def test_the_cuda_stride_bug_fails_alike_on_the_cpu_route_with_defaults():
    """What the probe asks the CPU route, asked here: the CUDA case (disable_ftz drawn) run on
    Inductor's C++ with the defaults fails with the signature it had on CUDA. The probe used to
    skip any case with a drawn configuration, so the GPU campaign keyed it apart from the
    committed CPU bug 0b94dc6a."""
    from dataclasses import replace as with_
    from fuzzfuse.backends import get_backend
    from fuzzfuse.job import run_case

    case = load_case(STRIDES_TWIN / "case.json")
    assert case.options.inductor_config is not None and dict(case.options.inductor_config.flags)
    result = run_case(case.graph, get_backend("inductor:cpu"), check_strides=True)
    assert with_(result.signature, backend=case.signature.backend) == case.signature, result.detail


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the probe runs both devices")
def test_on_a_gpu_a_wrong_stride_under_a_drawn_configuration_is_the_shared_lowerings():
    """The same logical_xor of a permuted and an expanded input returns strides (2, 4, 1) on CPU
    too (eager (1, 4, 2); checked here on torch 2.13 CPU): one lowering's layout rule, the
    committed CPU bug 0b94dc6a's."""
    case = load_case(STRIDES_TWIN / "case.json")
    with case_pool("inductor", 2, 300.0) as pool:
        devices = devices_failing_alike(pool, "inductor", case.graph, case.options, case.signature, 300.0, True,
                                        itertools.count())
    assert devices == ("cpu", "cuda")


def test_a_corpus_listing_counts_the_twins_as_one_bug(tmp_path):
    """`fuzzfuse corpus bugs`: the CUDA twin keyed with no device and its CPU twin are one bug,
    listed under one key."""
    for twin in (CPU_TWIN, CUDA_TWIN):
        case = load_case(twin / "case.json")
        if twin == CUDA_TWIN:
            case = replace(case, generalisation=Generalisation(case.graph.renamed().digest(), devices=("cpu", "cuda")))
        (tmp_path / twin.name).mkdir()
        write_json(tmp_path / twin.name / "case.json", case.to_json())
    found, bad = groups([str(tmp_path)])
    assert not bad and [sorted(m[0] for m in members) for members in found.values()] == \
        [sorted([CPU_TWIN.name, CUDA_TWIN.name])]


# ---- eager's own faults: its scalar loop on each device ---------------------------------------------

EAGER_CUDA = TWINS / "eager-mismatch-nan-inf-float-e80a524e"  # pow(-inf, 0.5) is nan on CUDA, found by nvFuser
EAGER_CPU = ROOT / "minimized" / "eager-mismatch-nan-inf-float-81c08634"  # pow(-0.0, -0.5) is -inf on CPU
EAGER_CUDA_ONLY = ROOT / "minimized" / "eager-mismatch-values-float-0d18227e"  # CUDA's div_trunc(-3.5, 1e-05)


@pytest.mark.parametrize("directory, alike", [(EAGER_CUDA, True), (EAGER_CPU, True), (EAGER_CUDA_ONLY, False)])
def test_eagers_scalar_loop_on_the_cpu_fails_as_eager_where_eagers_cpu_kernel_is_wrong(directory, alike):
    """What the probe asks eager's CPU route, asked here on real ATen kernels: pow(x, 0.5) is sqrt
    on the CPU as on CUDA (pow(-inf, 0.5) nan, IEEE's inf), so the CUDA case fails on the CPU with
    the signature the fuser's right value gave it; CUDA's div_trunc rounding is CUDA's alone, and
    the CPU's eager computes it right."""
    from fuzzfuse.backends import get_backend
    from fuzzfuse.job import run_case

    case = load_case(directory / "case.json")
    result = run_case(case.graph, get_backend("scalar:cpu"))
    if alike:
        assert result.signature == case.signature, result.detail
    else:
        assert result.outcome.value == "pass", result.detail


def test_an_eager_fault_alike_on_both_devices_names_no_device_and_is_the_committed_cpu_bug():
    cuda, cpu = (load_case(d / "case.json") for d in (EAGER_CUDA, EAGER_CPU))
    on_cpu = identify(cpu.signature, cpu.graph, cpu.generalisation, "cpu")
    alone = identify(cuda.signature, cuda.graph, cuda.generalisation, "cuda")
    assert on_cpu.component == alone.component == "eager" and on_cpu.where == alone.where == "pow"
    assert not same_bug(on_cpu, alone)  # as the campaign keyed it: another device
    shared = replace(cuda.generalisation, devices=("cpu", "cuda"))
    both = identify(cuda.signature, cuda.graph, shared, "cuda")
    assert both.device == "" and same_bug(both, on_cpu)
    assert KnownBugs({on_cpu.key(): EAGER_CPU.name}).find(both.key()) == EAGER_CPU.name


@pytest.mark.slow  # loading Inductor takes seconds
def test_an_eager_fault_found_on_the_cpu_stays_there_where_cuda_cannot_run():
    case = load_case(EAGER_CPU / "case.json")
    if torch.cuda.is_available():
        pytest.skip("CUDA runs here: the probe would run")
    assert devices_failing_alike(None, case.backend, case.graph, Options(), case.signature, 120.0, False,
                                 itertools.count()) == ()


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the probe runs eager on both devices")
@pytest.mark.parametrize("directory, devices", [(EAGER_CUDA, ("cpu", "cuda")), (EAGER_CUDA_ONLY, ("cuda",))])
def test_on_a_gpu_an_eager_fault_is_both_devices_only_where_the_cpus_eager_shares_it(directory, devices):
    case = load_case(directory / "case.json")
    with case_pool("eager", 2, 300.0) as pool:
        assert devices_failing_alike(pool, case.backend, case.graph, case.options, case.signature, 300.0, False,
                                     itertools.count()) == devices


def test_a_case_reduced_on_another_device_records_that_device_and_its_versions():
    """`fuzzfuse reduce --backend inductor:cpu` of a CUDA find wrote a repro for CUDA, keyed on
    CUDA, with the H100's versions, though every query and all three verifying runs were CPU ones."""
    cuda = load_case(CUDA_TWIN / "case.json")
    assert cuda.device == "cuda"
    moved = as_run_on(cuda, "inductor:cpu")
    assert moved.device == "cpu" and "gpu" not in moved.versions and moved.versions.get("cpu_capability")
    assert moved.graph == cuda.graph and moved.signature == cuda.signature
    cpu = load_case(CPU_TWIN / "case.json")
    assert as_run_on(cpu, "inductor:cpu") is cpu


@pytest.mark.slow  # an Inductor CPU reduction: about a minute and a half here
def test_a_cuda_find_reduced_here_on_cpu_is_the_committed_cpu_bug_it_fails_as(tmp_path):
    """A 10-minute H100 campaign left nextafter(inf, 0) of float16 (Triton: inf, eager 65504)
    pending when its time ran out. Reduced here on CPU Inductor it fails alike, and it is the
    committed CPU bug of bfloat16's nextafter (3994f8c3): it lands among that bug's forms, with a
    CPU repro, instead of in a directory of its own keyed to a device it never ran on."""
    committed = "inductor-mismatch-nan-inf-float-3994f8c3"
    shutil.copytree(ROOT / "minimized" / committed, tmp_path / committed)
    found = ROOT / "tests" / "data" / "inductor_cuda_nextafter_f16_case.json"
    ((path, where),) = list(minimize_files([found], tmp_path, backend="inductor:cpu", timeout=300.0))
    assert where == tmp_path / committed, where
    (form,) = load_case(tmp_path / committed / "case.json").also_seen_as
    assert form.graph.nodes[0].op == "nextafter" and "float16" in {i.dtype for i in form.graph.inputs}
    assert sorted(p.name for p in tmp_path.iterdir()) == [committed]


def test_a_failure_of_every_device_is_never_a_bug_probed_to_be_one_devices_alone():
    """A 10-minute H100 campaign's var of a one-element [-inf] (0 on CPU, 316.2 on CUDA, eager nan)
    failed alike on both devices, so it was keyed with no device, and the index named the first
    var directory of either device: 44e5d875, var of a constant not exactly 0 on CUDA, which
    passes on CPU. A bug probed on the other device and seen to fail on its own alone is that
    device's only: the find is the CPU bug daed7bbd (std of inf is 0), as yet unprobed on CUDA."""
    cpu_bug = "inductor-mismatch-nan-inf-float-daed7bbd"
    cuda_bug = "inductor-mismatch-nan-inf-float-44e5d875"
    known = known_repros([str(ROOT / "minimized")])
    cuda_only = load_case(ROOT / "minimized" / cuda_bug / "case.json")
    assert cuda_only.generalisation.devices == ("cuda",)
    on_cuda = identify(cuda_only.signature, cuda_only.graph, cuda_only.generalisation, "cuda")
    assert on_cuda.where == "var" and on_cuda.device == "cuda" and on_cuda.own_device_only
    assert Path(known.find(on_cuda.key())).name == cuda_bug
    everywhere = replace(on_cuda, device="", own_device_only=False)
    assert Path(known.find(everywhere.key())).name == cpu_bug
    # The one rule, asked of `same_bug` and of the index alike.
    unprobed = replace(on_cuda, own_device_only=False)
    assert not same_bug(on_cuda, everywhere) and not same_bug(everywhere, on_cuda)
    assert same_bug(unprobed, everywhere) and same_bug(on_cuda, unprobed)
    alone = KnownBugs()
    alone.add(on_cuda, cuda_bug)
    assert alone.find(everywhere.key()) is None and alone.find(on_cuda.key()) == cuda_bug
    assert KnownBugs({unprobed.key(): cuda_bug}).find(everywhere.key()) == cuda_bug


def test_a_failure_of_every_device_finds_one_committed_home_at_most():
    """The index's other half: where no committed bug is keyed with no device, a device-less key
    could be the bug of any directory whose device was never probed; of those the committed corpus
    has at most one for each key (where one is keyed with no device, the key finds it)."""
    everywhere, homes = set(), {}
    for path, case in iter_cases([str(ROOT / "minimized")]):
        general = case.generalisation
        applies = general is not None and general.applies_to(case.graph)
        ident = identify(case.signature, case.graph, general if applies else None, case.device)
        if ident is None or ident.anchor.value != "culprit":
            continue
        if not ident.device:
            everywhere.add(ident.key())
        elif not (applies and general.devices):  # probed: its device's alone, or per-device code
            homes.setdefault(replace(ident, device="").key(), set()).add(path.parent.name)
    shared = {key: dirs for key, dirs in homes.items() if len(dirs) > 1 and key not in everywhere}
    assert not shared, shared
