"""Campaigns survive backends that segfault or hang, save what fails, and the CLI turns bad input
into one line and exit code 2."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzfuse.backends import get_backend
from fuzzfuse.campaign import Campaign
from fuzzfuse.corpus import iter_cases, load_case
from fuzzfuse.job import run_case
from fuzzfuse.oracle import normalize
from fuzzfuse.pool import Job
from fuzzfuse.strategies import FOCUS_PATTERNS, PATTERNS, Features

BUGGY = "custom:tests.buggy_backends:"
# A seed whose stream (of SMALL, unswarmed) reaches a sum feeding a sigmoid within 25 cases.
SUM_SIGMOID_SEED = 5
ROOT = Path(__file__).parent.parent
SMALL = Features(ops=("add", "mul", "neg", "exp", "tanh", "cos", "sum", "sigmoid"), patterns=())


def _fuzz(tmp_path, backend, cases, timeout=8.0, seed=1):
    # Reduction has its own tests (test_minimize.py); these are about fuzzing and classifying.
    return Campaign(BUGGY + backend, tmp_path, seed=seed, workers=2, max_cases=cases, timeout=timeout,
                    features=SMALL, swarm=False, reduce=False).run()


@pytest.mark.slow
def test_campaign_survives_segfaults_and_saves_them(tmp_path):
    summary = _fuzz(tmp_path, "SegfaultOnTanh", 24)
    assert summary["cases"] == 24
    assert summary["outcomes"].get("hard-crash", 0) >= 1 and summary["outcomes"].get("pass", 0) >= 1
    keys = [s["key"] for s in summary["signatures"]]
    assert keys == [f"hard-crash|{BUGGY}SegfaultOnTanh|run|SIGSEGV||"]
    assert summary["signatures"][0]["confirmed"] is True
    saved = [load_case(p) for p in (tmp_path / "corpus").glob("*.json")]
    assert saved and all(any(n.op == "tanh" for n in c.graph.nodes) for c in saved)
    assert set(json.loads((tmp_path / "summary.json").read_text())) >= {
        "cases", "outcomes", "signatures", "seconds", "cases_per_second", "backend", "versions"}


@pytest.mark.slow
def test_campaign_survives_hangs(tmp_path):
    summary = _fuzz(tmp_path, "HangOnCos", 12, timeout=3.0)
    assert summary["outcomes"].get("hang", 0) >= 1 and summary["outcomes"].get("pass", 0) >= 1
    assert all(s["key"].startswith("hang|") for s in summary["signatures"])


@pytest.mark.slow
def test_crash_and_wrong_values_are_classified(tmp_path):
    crash = _fuzz(tmp_path / "c", "CrashOnSumSigmoid", 40, seed=SUM_SIGMOID_SEED)
    sig = crash["signatures"][0]["signature"]
    assert (sig["outcome"], sig["stage"], sig["location"]) == ("crash", "compile", "csrc/reduction_sched.cpp:77")
    wrong = _fuzz(tmp_path / "w", "WrongOnExp", 40)
    assert any(s["signature"]["outcome"] == "mismatch" and s["signature"]["location"] == "float"
               for s in wrong["signatures"])


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fuzzfuse", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@pytest.mark.slow
def test_bad_input_gives_one_line_and_exit_2(tmp_path):
    r = _cli("fuzz", "--backend", "no-such-fuser", "--max-cases", "1")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "unknown backend" in r.stderr
    r = _cli("fuzz", "--backend", "nvfuser", "--max-cases", "1")  # no GPU here
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    r = _cli("fuzz", "--backend", "custom:tests.buggy_backends:CrashOnSumSigmoid", "--backward", "--max-cases", "1")
    assert r.returncode == 2 and r.stderr.strip().endswith("has no backward"), r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = _cli("replay", str(bad))
    assert r.returncode == 2 and "bad.json" in r.stderr


@pytest.mark.slow
def test_replay_skips_corrupt_files_in_a_directory_and_replays_the_rest(tmp_path):
    _fuzz(tmp_path, "CrashOnSumSigmoid", 40, seed=SUM_SIGMOID_SEED)
    corpus = tmp_path / "corpus"
    good = sorted(corpus.glob("*.json"))
    assert good
    (corpus / "zz-corrupt.json").write_text('{"kind": "fuzzfuse-case", "schema": 1, "graph": {"schema": 1}}')
    r = _cli("replay", str(corpus), "--workers", "2", "--backend", BUGGY + "CrashOnSumSigmoid")
    assert "zz-corrupt.json" in r.stderr and "invalid case" in r.stderr
    assert f"{len(good)} replayed: {len(good)} still failing" in r.stdout
    assert r.returncode == 1  # the bugs are still there; the corrupt file did not stop the replay
    r = _cli("replay", str(good[0]), "--backend", "eager")
    assert "fixed" in r.stdout and r.returncode == 0


@pytest.mark.slow
def test_replay_skips_cases_whose_backend_cannot_run_here():
    """nvFuser cases in the shared corpus are reported and skipped on a CPU machine; the rest run
    (seed cases name no backend and run on the default one)."""
    n = len(list((ROOT / "corpus" / "nvfuser").glob("*.json")))
    r = _cli("replay", "corpus/nvfuser", "corpus/seed-efficientnet_se-float32-contiguous.json", cwd=ROOT)
    assert f"skipped {n} case(s) for nvfuser" in r.stderr and "1 replayed" in r.stdout, r.stdout + r.stderr
    assert r.returncode in (0, 1)


@pytest.mark.slow
def test_live_display_shows_rate_outcomes_signatures_reducer_and_workers(tmp_path):
    """The rich panel a long campaign shows, drawn from a real NNC campaign mid-run."""
    import io

    from rich.console import Console

    from fuzzfuse.progress import campaign_display

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=200)
    campaign = Campaign("torchscript:nnc", tmp_path, seed=4, workers=1, max_cases=60, reduce_budget=30)
    with campaign_display(console, every=0.0) as display:
        campaign.display = display
        summary = campaign.run()
    text = screen.getvalue()
    for label in ("cases", "outcomes", "signatures", "reducer", "workers"):
        assert label in text
    assert "/s" in text and "waiting" in text and "minimized" in text
    if any(s["confirmed"] for s in summary["signatures"]):
        assert "reducing" in text  # the display kept drawing while the reducer ran


@pytest.mark.slow
def test_live_display_says_how_much_of_the_time_is_left_and_what_it_goes_to(tmp_path):
    """--time bounds the whole run: the panel counts it down and says whether it fuzzes, reduces or
    verifies a repro (issue 16 item 5)."""
    import io

    from rich.console import Console

    from fuzzfuse.progress import campaign_display

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=250)
    campaign = Campaign("torchscript:nnc", tmp_path, seed=4, workers=1, time_limit=20, reduce_budget=30)
    with campaign_display(console, every=0.0) as display:
        campaign.display = display
        summary = campaign.run()
    text = screen.getvalue()
    assert "s of 20s left: fuzzing" in text
    if summary["root_causes"]:  # something was reduced within the 20 s, beside the fuzzing
        assert "reduction(s) on 25% of the workers" in text and "reducing " in text
    if any(c["minimized"] for c in summary["root_causes"]):
        assert "verifying a repro in fresh processes" in text


def _case(campaign, index: int, seconds: float, schedulers=()) -> None:
    """Record a passing case of `index` that took its worker `seconds`."""
    campaign._record(Job(index, campaign.backend_name, 60.0), {"outcome": "pass", "worker_seconds": seconds,
                                                               "evidence": {"schedulers": list(schedulers)}}, None)


def test_batches_aim_at_the_least_covered_scheduler_within_their_share_of_worker_time(tmp_path):
    """A focused batch costs more than a swarm batch (nvFuser's persistent and segmented fusions
    compile several kernels): the focus gets a share of the workers' time, not of the batches."""
    from fuzzfuse.campaign import BATCH

    campaign = Campaign("torchscript:nnc", tmp_path, seed=1, workers=1, max_cases=1, focus_share=0.25)
    campaign.backend.coverage_focus = {"reduction": {"ops": ("sum", "add")}, "transpose": {"ops": ("permute", "neg")}}
    campaign.stats.coverage.update({"reduction": 5, "transpose": 1})
    assert campaign.focus_for(0) is None  # the first batch: no time spent, nothing covered yet
    _case(campaign, 0, 3.0)
    assert campaign.focus_for(1) == "transpose"
    assert set(campaign.config_for(BATCH).features.ops) == {"permute", "neg"}
    _case(campaign, BATCH, 1.0, ["transpose"])  # focused: 1 s of 4 is the share already
    assert campaign.focus_for(2) is None and campaign.focus_for(1) == "transpose"  # decided once, at its start
    _case(campaign, 0, 1.0)  # 1 s of 5: under a quarter again
    campaign.stats.coverage.update({"transpose": 10})
    assert campaign.focus_for(3) == "reduction"
    assert campaign.stats.focus_batches == {"transpose": 1, "reduction": 1}
    assert campaign.stats.focus_seconds == {"transpose": 1.0} and campaign.stats.worker_seconds == 5.0
    campaign.backend.coverage_focus["transpose"]["shapes"] = {"max_dim": 2}
    assert campaign.config_for(BATCH).shapes.max_dim == 2  # a recipe may change the shapes too
    assert campaign.config_for(0).shapes == campaign.backend.shapes


@pytest.mark.slow
def test_focus_share_survives_a_resume_and_zero_never_focuses(tmp_path):
    """--focus-share: the trade between coverage and cases/s; --resume keeps it, with the time
    spent so far and the batches already decided."""
    recipes = {"reduction": {"ops": ("sum", "add")}}
    campaign = Campaign("torchscript:nnc", tmp_path / "a", seed=1, workers=1, max_cases=1, focus_share=0.5)
    campaign.backend.coverage_focus = recipes
    assert campaign.focus_for(0) is None
    _case(campaign, 0, 2.0)
    assert campaign.focus_for(1) == "reduction"
    _case(campaign, 50, 1.0, ["reduction"])
    campaign.checkpoint(None)
    resumed = Campaign.resume(tmp_path / "a")
    resumed.backend.coverage_focus = recipes
    assert resumed.focus_share == 0.5 and resumed.focus_for(1) == "reduction" and resumed.focus_for(0) is None
    assert resumed.stats.focus_seconds == {"reduction": 1.0} and resumed.stats.worker_seconds == 3.0
    assert resumed.focus_for(2) == "reduction"  # 1 s of 3: under half
    never = Campaign("torchscript:nnc", tmp_path / "b", seed=1, workers=1, max_cases=1, focus_share=0)
    never.backend.coverage_focus = recipes
    _case(never, 0, 5.0)
    assert not any(never.focus_for(b) for b in range(12))
    for share in ("-0.1", "1.5"):
        bad = subprocess.run([sys.executable, "-m", "fuzzfuse", "fuzz", "--backend", "torchscript:nnc", "--max-cases",
                              "1", "--focus-share", share, "--out", str(tmp_path / "c")], capture_output=True, text=True)
        assert bad.returncode == 2 and "--focus-share" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_focus_recipe_that_never_reaches_its_scheduler_is_dropped(tmp_path):
    """Else the least-covered scheduler keeps every focused batch for good. A hit inside a focused
    batch keeps its recipe in play; hits outside one do not count."""
    from fuzzfuse.campaign import BATCH, FOCUS_TRIALS

    campaign = Campaign("torchscript:nnc", tmp_path, seed=1, workers=1, max_cases=1, focus_share=1.0)
    campaign.backend.coverage_focus = {"reduction": {"ops": ("sum", "add")}, "transpose": {"ops": ("permute", "neg")}}
    campaign.stats.coverage.update({"reduction": 500, "transpose": 3})
    _case(campaign, 0, 1.0)
    batches = range(1, FOCUS_TRIALS + 3)
    assert [campaign.focus_for(b) for b in batches[:FOCUS_TRIALS]] == ["transpose"] * FOCUS_TRIALS
    assert campaign.focus_for(batches[FOCUS_TRIALS]) == "reduction"
    # A transpose case of a focused batch: the recipe works after all, and comes back.
    _case(campaign, batches[0] * BATCH, 1.0, ["transpose"])
    _case(campaign, 0, 1.0, ["transpose"])  # outside a focused batch: not a hit
    assert campaign.stats.focus_hits == {"transpose": 1}
    assert campaign.focus_for(batches[FOCUS_TRIALS + 1]) == "transpose"


def test_nvfuser_focus_recipes_draw_what_their_scheduler_needs():
    import dataclasses

    from fuzzfuse.backends.nvfuser import NvFuserBackend
    from fuzzfuse.ir import OPS
    from fuzzfuse.strategies import GenConfig, generate

    def kinds(features, shapes=NvFuserBackend.shapes) -> list[str]:
        graphs = [generate(seed, GenConfig(features=features, shapes=shapes)) for seed in range(40)]
        return [OPS[n.op].kind for g in graphs for n in g.nodes]

    base = kinds(Features())
    for scheduler, recipe in NvFuserBackend.coverage_focus.items():
        recipe = dict(recipe)
        shapes = dataclasses.replace(NvFuserBackend.shapes, **recipe.pop("shapes", {}))
        assert set(recipe.get("ops", ())) <= set(OPS), scheduler
        assert set(recipe.get("patterns", ())) <= set(PATTERNS + FOCUS_PATTERNS), scheduler
        focused = kinds(dataclasses.replace(Features(), **recipe), shapes)
        wanted = {"transpose": "view", "resize": "resize", "matmul": "matmul"}.get(scheduler, "reduction")
        assert focused.count(wanted) / len(focused) > 2 * base.count(wanted) / len(base), scheduler


def test_nvfuser_matmul_focus_draws_dense_layers_of_graph_inputs_with_matmul_expr_eval_off():
    """What nvFuser's Hopper matmul scheduler takes: an fp16/bf16 matmul or linear whose operands
    are fusion inputs (a prologue op beyond set/broadcast/squeeze is refused), and matmul_expr_eval
    off in every case of the batch (else ATen takes the matmul first)."""
    import dataclasses

    from fuzzfuse.backends.nvfuser import NvFuserBackend
    from fuzzfuse.backends.options import DISABLE_CHOICES, Options
    from fuzzfuse.strategies import GenConfig, generate

    recipe = dict(NvFuserBackend.coverage_focus["matmul"])
    shapes = dataclasses.replace(NvFuserBackend.shapes, **recipe.pop("shapes", {}))
    features = dataclasses.replace(NvFuserBackend.features, **recipe)
    layers = 0
    for seed in range(40):
        graph = generate(seed, GenConfig(features=features, shapes=shapes))
        inputs = {i.name: i for i in graph.inputs}
        for node in graph.nodes:
            if node.op in ("matmul", "linear"):
                operands = [inputs.get(a) for a in node.args[:2]]
                assert all(o is not None and o.dtype in ("float16", "bfloat16") for o in operands), graph
                layers += 1
    assert layers >= 20
    backend = NvFuserBackend()
    drawn = [backend.draw_options(seed) for seed in range(8)]
    assert any(o.disable is None for o in drawn)
    assert all(backend.focus_options("matmul", o).disable == DISABLE_CHOICES for o in drawn)
    assert backend.focus_options("reduction", Options(style="direct")) == Options(style="direct")


def test_backward_campaigns_pick_a_backend_with_a_backward():
    from fuzzfuse.backends import default_backend
    from fuzzfuse.backends.aot_nvfuser import AotNvFuserBackend
    from fuzzfuse.backends.nvfuser import NvFuserBackend
    assert not NvFuserBackend.supports_backward and AotNvFuserBackend.supports_backward
    assert default_backend(backward=True) == "torchscript:nnc"  # no GPU here: aot:nvfuser is unavailable


@pytest.mark.slow
def test_known_root_causes_are_counted_not_reduced_again(tmp_path):
    """A campaign told where the regression corpus is (--known minimized/) spends no reduction on
    the root causes it already holds, and says which repro holds each (the crash names a C++
    assert: its root cause is known at once)."""
    kwargs = dict(seed=SUM_SIGMOID_SEED, workers=2, max_cases=25, timeout=8.0, features=SMALL, swarm=False,
                  reduce_budget=40)
    first = Campaign(BUGGY + "CrashOnSumSigmoid", tmp_path / "first", **kwargs).run()
    (crash,) = [s for s in first["signatures"] if s["outcome"] == "crash"]
    repro = tmp_path / "first" / crash["minimized"]["path"]
    (cause,) = first["root_causes"]
    assert cause["minimized"] == crash["minimized"]["path"] and cause["known"] is None
    # Generation steers away from a known trigger but for one case in ten (fuzzfuse.steering):
    # the second campaign draws more cases to meet it.
    again = Campaign(BUGGY + "CrashOnSumSigmoid", tmp_path / "again", known=[str(tmp_path / "first" / "minimized")],
                     **{**kwargs, "max_cases": 200}).run()
    assert again["steered_draws"] > 0
    (seen,) = [s for s in again["signatures"] if s["key"] == crash["key"]]
    assert seen["count"] > 0 and seen["known"] == str(repro) and "minimized" not in seen
    (known,) = again["root_causes"]
    assert known["known"] == str(repro) and known["key"] == cause["key"] and known["minimized"] is None
    assert not (tmp_path / "again" / "minimized").exists()


@pytest.mark.slow
def test_one_coarse_bucket_with_two_bugs_is_reduced_into_two_root_causes_and_known_only_once_reduced(tmp_path):
    """Every float mismatch of a backend shares one coarse signature. Its hits are reduced while
    the campaign fuzzes, and the reduced graphs tell the two bugs apart: two repros. A second
    campaign told about them counts its hits as known only after reducing them."""
    kwargs = dict(seed=2, workers=2, max_cases=120, timeout=8.0, features=SMALL, swarm=False, reduce_budget=60,
                  reduce_share=0.5)
    first = Campaign(BUGGY + "WrongOnExpAndOnCos", tmp_path / "first", **kwargs)
    summary = first.run()
    assert summary["worker_seconds_by_phase"]["fuzzing"]["reduce"] > 0  # reductions ran beside the fuzzing
    # The value mismatches share one coarse signature. (exp's bug also shows as a nan-inf mismatch
    # where a huge sum times 1.01 overflows: a coarse signature of its own; with so few ops, exp's
    # trigger is too broad to steer around, so such forms keep coming.)
    (mismatch,) = [s for s in summary["signatures"] if s["outcome"] == "mismatch"
                   and s["signature"]["kind"] == "values"]
    causes = {tuple(c["trigger"]): c for c in summary["root_causes"]}
    assert {("exp",), ("cos",)} <= set(causes), causes.keys()
    for trigger in (("exp",), ("cos",)):
        # exp's nan-inf form is the same bug (one culprit, wrong numbers finite or not): its coarse
        # key may join exp's; cos shows through the values one only.
        assert mismatch["key"] in causes[trigger]["coarse_keys"] and causes[trigger]["minimized"]
    assert causes[("cos",)]["coarse_keys"] == [mismatch["key"]]
    for cause in summary["root_causes"]:  # each reduced case fails as it records: `fuzzfuse reduce` takes it
        reduced = load_case(tmp_path / "first" / cause["reduced_case"])
        found = run_case(reduced.graph, get_backend(BUGGY + "WrongOnExpAndOnCos").for_case(reduced.options))
        assert found.signature.key() == reduced.signature.key(), cause
    repros = {c["minimized"] for c in causes.values()}
    assert len(repros) == len(causes) and all((tmp_path / "first" / r / "repro.py").exists() for r in repros)
    again = Campaign(BUGGY + "WrongOnExpAndOnCos", tmp_path / "again", known=[str(tmp_path / "first" / "minimized")],
                     **kwargs).run()
    # Known exactly when the first campaign reduced that root cause: exp's nan-inf form (above) is
    # drawn or not as steering learns mid-run, which the machine's load decides, and where the
    # second campaign reduces it first, it is new there and gets its repro.
    reduced_first = {c["key"] for c in summary["root_causes"] if c["minimized"]}
    again_causes = {tuple(c["trigger"]): c for c in again["root_causes"]}
    assert all(again_causes[trigger]["known"] for trigger in (("exp",), ("cos",))), again_causes.keys()
    for cause in again["root_causes"]:
        assert bool(cause["known"]) == (cause["key"] in reduced_first) != bool(cause["minimized"]), cause


def test_a_confirmed_signature_that_no_longer_fails_is_left_unreduced_and_the_campaign_ends_well(
        tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZFUSE_TEST_FIXED", str(tmp_path / "fixed"))
    backend = BUGGY + "CrashOnSumSigmoidUntilFixed"
    campaign = Campaign(backend, tmp_path / "run", seed=SUM_SIGMOID_SEED, workers=2, max_cases=25, timeout=8.0,
                        features=SMALL, swarm=False, reduce=False)
    campaign.run()
    (key,) = [k for k, e in campaign.stats.signatures.items() if e.outcome == "crash" and e.confirmed is True]
    (tmp_path / "fixed").touch()
    campaign.reduce = True
    campaign.run()  # its cases are spent: it only reduces
    entry = campaign.stats.signatures[key]
    assert "not interesting" in entry.unreduced and entry.minimized is None
    assert campaign.reducer_queue() == [] and not (tmp_path / "run" / "minimized").exists()


def test_a_reducer_defect_ends_that_reduction_not_the_campaign(tmp_path, monkeypatch, capfd):
    """A fuzzfuse bug inside a reduction pass (an H200 nvFuser campaign ended at 61 s of 565 on a
    RuntimeError from type promotion) stops that reduction, with its traceback printed for a
    fuzzfuse issue, and the campaign finishes; the signature says why it has no repro."""
    import fuzzfuse.reductions

    def broken_pass(*args, **kwargs):
        raise RuntimeError("a pass fuzzfuse got wrong")
    monkeypatch.setattr(fuzzfuse.reductions, "reduce_case", broken_pass)
    campaign = Campaign(BUGGY + "CrashOnSumSigmoid", tmp_path / "run", seed=SUM_SIGMOID_SEED, workers=2,
                        max_cases=25, timeout=8.0, features=SMALL, swarm=False, reduce_budget=20)
    summary = campaign.run()
    assert summary["cases"] == 25
    (crash,) = [e for e in campaign.stats.signatures.values() if e.outcome == "crash"]
    assert "a fuzzfuse bug" in crash.unreduced and crash.minimized is None
    assert "RuntimeError: a pass fuzzfuse got wrong" in capfd.readouterr().err


@pytest.mark.slow
def test_known_root_causes_of_the_committed_corpus_on_real_nnc(tmp_path):
    """The same against a real fuser: an NNC campaign told about minimized/ finds failures the
    regression corpus already holds, points at those repros and makes none of them again."""
    from fuzzfuse.known import known_repros
    corpus = str(ROOT / "minimized")
    known = known_repros([corpus])
    summary = Campaign("torchscript:nnc", tmp_path, seed=3, workers=1, max_cases=150, known=[corpus],
                       reduce_budget=30).run()
    held = [c for c in summary["root_causes"] if c["known"]]
    assert held, [c["key"] for c in summary["root_causes"]]
    for c in held:
        assert c["known"] == known.find(c["key"]) and c["minimized"] is None


def committed_cases(*directories: str) -> list:
    """(path, case) of every committed case under `directories` that records a failure signature."""
    return [(path, case) for path, case in iter_cases([str(ROOT / d) for d in directories]) if case.signature]


def test_committed_nvfuser_crashes_are_keyed_as_campaigns_key_them_today():
    """--known matches repros by signature key. A committed case keyed before a normalizer rule
    existed is never matched: the 10-minute GPU campaign re-found alias.cpp:333 and
    internal_nodes.cpp:1658 that way. An nvFuser case's detail is nvFuser's raw error text, so
    the key a campaign computes today can be checked here without a GPU."""
    crashes = [(path, case) for path, case in committed_cases("minimized", "corpus/nvfuser")
               if case.backend == "nvfuser" and case.signature.outcome == "crash"]
    assert len(crashes) >= 20
    stale = [f"{path}: {case.signature.message!r} != {normalize(case.detail)!r}" for path, case in crashes
             if normalize(case.detail) != case.signature.message]
    assert not stale, "\n".join(stale)


def test_no_committed_signature_predates_a_normalizer_rule():
    """Every backend's committed cases: a message that today's normalizer would still rewrite was
    keyed before one of its rules existed (size lists `[N, N]` -> `[N...]`, say), and `--known`
    would never match it. A normalized message is a fixed point of the normalizer."""
    messages = [(path, case.signature.message) for path, case in committed_cases("minimized", "corpus")]
    assert len(messages) >= 150
    stale = [f"{path}: {m!r}" for path, m in messages if normalize(m).strip() != m.strip()]
    assert not stale, "\n".join(stale)


def test_committed_hard_crashes_are_keyed_as_campaigns_key_them_today():
    """A hard crash's key carries the what() of the C++ exception that aborted the worker, when the
    crash log has one: a campaign's SIGABRTs are not all one bug."""
    from fuzzfuse.verdict import judge
    crashes = [(path, case) for path, case in committed_cases("minimized", "corpus")
               if case.signature.outcome == "hard-crash"]
    assert len(crashes) >= 3
    stale = []
    for path, case in crashes:
        result = {"status": "hard-crash", "signal": case.signature.kind, "stderr_tail": case.detail}
        key = judge(case.backend, result).key
        if key != case.signature.key():
            stale.append(f"{path}: {key}")
    assert not stale, "\n".join(stale)


def test_two_different_aborts_are_two_signatures_and_a_crash_without_a_message_keeps_its_plain_key():
    from fuzzfuse.verdict import judge
    abort = ("terminate called after throwing an instance of 'nvfuser::nvfError'\n"
             "  what():   INTERNAL ASSERT FAILED at /workspace/Fuser/csrc/{at}, please report a bug.\n"
             "Expected _result == CUDA_SUCCESS . CUDA error: misaligned address\n"
             "Exception raised from ~CudaExecutable at /workspace/Fuser/csrc/{at} (most recent call first):\n"
             "frame #0: nvfuser::nvfCheckFail(char const*) + 0xc2 (0x7f2101b2d4a6 in libnvfuser_codegen.so)\n\n"
             "Fatal Python error: Aborted\n")
    keys = [judge("nvfuser", {"status": "hard-crash", "signal": "SIGABRT", "stderr_tail": abort.format(at=at)}).key
            for at in ("runtime/executor_utils.cpp:559", "runtime/executor_utils.cpp:559", "fusion_segmenter.cpp:4015")]
    assert keys[0] == keys[1] == "hard-crash|nvfuser|run|SIGABRT|csrc/runtime/executor_utils.cpp:559|INTERNAL ASSERT FAILED"
    assert keys[2] == "hard-crash|nvfuser|run|SIGABRT|csrc/fusion_segmenter.cpp:4015|INTERNAL ASSERT FAILED"
    plain = {"status": "hard-crash", "signal": "SIGSEGV", "stderr_tail": "Fatal Python error: Segmentation fault\n"}
    assert judge("torchscript:onednn", plain).key == "hard-crash|torchscript:onednn|run|SIGSEGV||"


def test_the_summary_says_where_the_wall_time_and_the_workers_time_went(tmp_path):
    """summary.json's wall_seconds split the run into start-up, fuzzing, reducing and waiting,
    each moment in one of them, so they add up to its total, which is the run's wall time from the
    Campaign's construction; the workers' time by use adds up to the workers' lifetimes, and the
    busy share is their time at work over workers x wall. The run stops at --max-cases exactly."""
    import time

    start = time.time()
    campaign = Campaign(BUGGY + "WrongOnExp", tmp_path, seed=1, workers=2, max_cases=40, timeout=8.0,
                        features=SMALL, swarm=False, reduce=False)
    summary = campaign.run()
    wall = time.time() - start
    phases, total = summary["wall_seconds"], summary["wall_seconds"]["total"]
    assert set(phases) == {"start-up", "fuzzing", "reducing", "waiting", "total"}
    assert abs(sum(v for k, v in phases.items() if k != "total") - total) < 0.05
    assert 0 < wall - total < 2.0 and phases["start-up"] > 0 and phases["fuzzing"] > 0
    uses = summary["worker_seconds_by_use"]
    # each use is rounded to 0.1 s: the sum may pass two workers' time by 0.05 s a use
    assert {"fuzz", "starting"} <= set(uses) and 1.5 * total < sum(uses.values()) <= 2 * total + 0.05 * len(uses)
    assert summary["busy_share"] == pytest.approx(
        sum(uses.get(k, 0.0) for k in ("fuzz", "reduce", "learn")) / (2 * total), abs=0.01)  # uses are rounded
    assert summary["cases"] == 40


@pytest.mark.slow
def test_a_crash_its_rechecks_never_show_again_is_unconfirmed_not_new(tmp_path):
    """A crash keyed by its own message is a root cause when it is seen; when none of its first
    case's re-runs fails again (a full device, a race) it is unconfirmed, as a repro that fails in
    no fresh process is (an Inductor campaign counted a one-off illegal memory access new)."""
    summary = Campaign(BUGGY + "CrashOnceOnSumSigmoid", tmp_path, seed=SUM_SIGMOID_SEED, workers=1, max_cases=40,
                       features=SMALL, swarm=False, reduce=False).run()
    (cause,) = summary["root_causes"]
    assert cause["key"].startswith("message|") and cause["unconfirmed"] is True
    assert (summary["root_causes_new"], summary["root_causes_unconfirmed"]) == (0, 1)
    assert summary["outcomes"]["flaky"] >= 1
    steady = Campaign(BUGGY + "CrashOnSumSigmoid", tmp_path / "steady", seed=SUM_SIGMOID_SEED, workers=1,
                      max_cases=40, features=SMALL, swarm=False, reduce=False).run()
    assert (steady["root_causes_new"], steady["root_causes_unconfirmed"]) == (1, 0)


@pytest.mark.slow
def test_a_replay_pool_runs_torch_under_the_capability_a_case_was_recorded_with():
    """A case recorded (pinned) under `default` replays with ATen's default kernels on any host, as
    its repro does; a pool without a recorded capability runs the host's."""
    from fuzzfuse.pool import worker_env
    from fuzzfuse.worker import WorkerPool

    host = json.loads(subprocess.run([sys.executable, "-c", "import torch; print(repr(torch.backends.cpu."
                                      "get_cpu_capability().lower()).replace(\"'\", '\"'))"],
                                     capture_output=True, text=True, check=True).stdout)
    for recorded, expected in (("default", "default"), (None, host)):
        with WorkerPool(1, "tests.worker_jobs:cpu_capability", timeout=120,
                        env=worker_env("torchscript:nnc", recorded)) as pool:
            assert pool.run_all([{"id": 0, "timeout": 120}])[0]["capability"] == expected


def test_replay_skips_a_case_recorded_under_a_capability_this_cpu_lacks(tmp_path, monkeypatch, capsys):
    from fuzzfuse import replay

    case = next(c for p, c in iter_cases([str(ROOT / "minimized")])
                if c.backend == "torchscript:nnc" and c.versions.get("cpu_capability"))
    case.versions["cpu_capability"] = "avx512"
    monkeypatch.setattr(replay, "host_isa", lambda: "avx2")
    assert replay.replay_results([("x/case.json", case)], None, 1, 60.0) == []
    assert "recorded under CPU capability avx512, which this machine's CPU lacks" in capsys.readouterr().err
