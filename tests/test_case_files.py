"""Case files and campaign state through their one codec each: every committed file loads and
dumps back to itself, and a hostile one (a field no type declares, a value of the wrong type or
outside what a case may choose) is refused on load with one line naming the file."""
import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzfuse.backends.options import Options
from fuzzfuse.checkpoint import CampaignState, load_state
from fuzzfuse.corpus import CorpusError, Variant, load_case
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.pool import Job, graph_job
from fuzzfuse.strategies import GenConfig
from fuzzfuse.verdict import Reproduction

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"


def _folded() -> Path:
    """A committed folded repro whose variants all kept their graphs and generalisations, its own
    graph generalised (the first such: folds change which directories there are)."""
    for path in sorted((ROOT / "minimized").glob("*/case.json")):
        raw = json.loads(path.read_text())
        variants = raw.get("also_seen_as") or []
        if raw.get("generalisation") and "check_strides" in raw.get("options", {}) and variants and \
                all(v.get("graph") and v.get("generalisation") for v in variants):
            return path
    raise AssertionError("no committed repro is folded with its variants' graphs")


FOLDED = _folded()


def committed_case_files() -> list[Path]:
    return sorted((ROOT / "minimized").glob("*/case.json")) + sorted((ROOT / "corpus").rglob("*.json"))


def test_every_committed_case_loads_and_dumps_back_to_the_json_it_was_read_from():
    files = committed_case_files()
    assert {"minimized", "corpus"} <= {f.relative_to(ROOT).parts[0] for f in files}
    changed = [str(f.relative_to(ROOT)) for f in files
               if json.loads(json.dumps(load_case(f).to_json())) != json.loads(f.read_text())]
    assert not changed, changed


def test_the_typed_fields_of_a_folded_repro_are_what_its_file_says():
    raw = json.loads(FOLDED.read_text())
    case = load_case(FOLDED)
    assert case.signature.key() == "|".join(raw["signature"][k] for k in
                                            ("outcome", "backend", "stage", "kind", "location", "message"))
    assert case.verification.status is Reproduction(raw["verification"]["status"])
    assert case.reduction.ops_after == raw["reduction"]["ops_after"] == case.graph.size
    assert case.check_strides is raw["options"]["check_strides"]
    assert all(isinstance(v, Variant) and v.graph is not None for v in case.also_seen_as)
    assert [v.signature.key() for v in case.also_seen_as] == [v["key"] for v in raw["also_seen_as"]]


def _set(d: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    for key in parents:
        d = d[int(key)] if isinstance(d, list) else d[key]
    d[last] = value


HOSTILE = [
    ("surprise", 1),  # a field no type declares, at every level
    ("options.surprise", 1),
    ("signature.surprise", 1),
    ("verification.surprise", 1),
    ("reduction.surprise", 1),
    ("also_seen_as.0.surprise", 1),
    ("options.inductor_config", {"flags": {}, "surprise": 1}),
    ("hits", "2"),  # values of the wrong type
    ("hits", True),
    ("seed", "7"),
    ("found", [1.0]),
    ("outcome", "bogus"),
    ("config", 5),
    ("versions", {"torch": 2}),
    ("signature.kind", 3),
    ("options.check_strides", "yes"),
    ("options.style", 3),
    ("verification.status", "maybe"),
    ("verification.exit_codes", [1.5]),
    ("reduction.queries", "many"),
    ("also_seen_as", [5]),
    ("also_seen_as.0.key", "crash|nvfuser"),
    ("also_seen_as.0.ops", "add"),
    ("also_seen_as.0.graph", {"schema": 1}),
    ("options.inductor_config", {"flags": []}),
    ("options.inductor_config", {"dynamic": "yes"}),
    ("options.inductor_config", {"flags": {"cpp.simdlen": True}}),  # true is not the width 1
    ("options.style", "sideways"),  # values a case may not choose
    ("options.disable", ["kernel_reuse"]),
    ("options.inductor_config", {"flags": {"cpp.cxx": "/tmp/evil"}}),
]


@pytest.mark.parametrize("path, value", HOSTILE, ids=[f"{p}={v!r}"[:60] for p, v in HOSTILE])
def test_a_hostile_case_file_is_refused_on_load_with_one_line_naming_it(tmp_path, path, value):
    case = json.loads(FOLDED.read_text())
    _set(case, path, value)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(case))
    with pytest.raises(CorpusError) as refused:
        load_case(bad)
    message = str(refused.value)
    assert message.startswith(f"{bad}: invalid case: ") and "\n" not in message, message


def test_a_hostile_case_is_one_line_and_exit_2_through_the_cli(tmp_path):
    case = json.loads(FOLDED.read_text())
    case["options"]["inductor_config"] = {"flags": {"cpp.cxx": "/tmp/evil"}}
    (tmp_path / "bad.json").write_text(json.dumps(case))
    done = subprocess.run([sys.executable, "-m", "fuzzfuse", "replay", str(tmp_path / "bad.json")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert [line for line in done.stderr.splitlines() if "cpp.cxx" in line] == [done.stderr.splitlines()[0]]


def test_a_jobs_json_is_the_job_again_on_the_worker_side():
    b = GraphBuilder()
    graph = b.build([b.add("exp", b.tensor((2, 3)))])
    options = Options(style="upcast", disable=("matmul_expr_eval",))
    drawn = Job(3, "nvfuser", 60.0, seed=11, config=GenConfig(max_ops=4), options=options, check_strides=True,
                extra_runs=True)
    recheck = Job("recheck-0-k", "torchscript:nnc", 8.0, graph=graph, recheck_of="k")
    for job in (drawn, recheck, graph_job(0, "eager", graph, 5.0)):
        assert Job.from_json(json.loads(json.dumps(job.to_json()))) == job


def test_a_campaign_state_round_trips_and_a_hostile_one_is_refused_with_one_line(tmp_path):
    shutil.copy(DATA / "state-before-verdict.json", tmp_path / "state.json")
    state = load_state(tmp_path)
    assert state.args.backend == "custom:tests.buggy_backends:CrashOnSumSigmoid" and state.next_index == 25
    assert state.args.extra_runs is True  # absent from that state: Campaign's own default
    again = CampaignState.from_json(json.loads(json.dumps(state.to_json())))
    assert again.args == state.args and again.stats.signatures == state.stats.signatures
    assert (again.next_index, again.in_flight, again.saved_per_signature) == (25, [], state.saved_per_signature)
    # Fuzzing seconds go on counting from the load: all else of the stats is as it was.
    assert {k: v for k, v in again.stats.to_json().items() if k != "elapsed"} == \
        {k: v for k, v in state.stats.to_json().items() if k != "elapsed"}
    raw = json.loads((DATA / "state-before-verdict.json").read_text())
    for path, value in [("args.workers", "2"), ("args.surprise", 1), ("next_index", "x"), ("args.known", [1])]:
        hostile = copy.deepcopy(raw)
        _set(hostile, path, value)
        (tmp_path / "state.json").write_text(json.dumps(hostile))
        with pytest.raises(CorpusError) as refused:
            load_state(tmp_path)
        assert "invalid campaign state" in str(refused.value) and "\n" not in str(refused.value)


def test_no_committed_mismatch_is_undefined_behaviour_by_todays_oracle():
    """A committed wrong value whose output today's oracle taints (a float -> int cast out of
    range, a signed overflow of any width) is no bug: a change of policy must drop it (015293fd,
    nvFuser's neg of INT32_MIN, went when signed overflow of every width became undefined), and a
    change of the taint rule must not forgive a real bug (3d730db3, NNC's add of a 0-d int64
    INT64_MAX and an int32, whose conversion to int32 was read as an overflow)."""
    from fuzzfuse.ir import make_inputs
    from fuzzfuse.ir.interp import interpret

    checked, tainted_outputs = 0, {}
    for path in sorted((ROOT / "minimized").glob("*/case.json")):
        case = load_case(path)
        if case.signature is None or case.signature.outcome != "mismatch":
            continue
        _, tainted = interpret(case.graph, make_inputs(case.graph))
        checked += 1
        if any(o in tainted for o in case.graph.outputs):
            tainted_outputs[path.parent.name] = {o: tainted[o] for o in case.graph.outputs if o in tainted}
    assert checked > 50 and not tainted_outputs, tainted_outputs
