"""The verdict layer's types: one JSON codec for the worker pipe and the files, and files written
before the types existed still load."""
from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

from fuzzfuse.campaign import Campaign
from fuzzfuse.checkpoint import load_state
from fuzzfuse.ir import Values
from fuzzfuse.ir.builder import GraphBuilder
from fuzzfuse.job import backend_for, run_case
from fuzzfuse.oracle import Signature
from fuzzfuse.verdict import CaseResult, MinimizedRepro, Outcome, SignatureRecord, Stage, judge

DATA = Path(__file__).parent / "data"


def _nnc_crash() -> CaseResult:
    """NNC's integer round() crash (a real fuser bug on this CPU), with its graph attached as a
    worker attaches a failing case's."""
    b = GraphBuilder()
    x = b.tensor((3, 4), "int32", values=Values(seed=1))
    graph = b.build([b.add("mul", b.add("round", b.add("add", x, 1)), 2), b.add("neg", x)])
    result = run_case(graph, backend_for("torchscript:nnc"))
    result.graph, result.size, result.digest = graph, graph.size, graph.digest()
    return result


def test_a_case_result_crosses_the_worker_pipe_unchanged():
    result = _nnc_crash()
    assert result.outcome is Outcome.CRASH and result.signature.stage == Stage.COMPILE
    assert result.traceback and result.timings["backend"] > 0
    reply = {**json.loads(json.dumps(result.to_json())), "worker_seconds": 0.5, "cpu_seconds": 0.4, "id": 7}
    back = judge("torchscript:nnc", reply)
    assert back == CaseResult(**{**result.__dict__, "worker_seconds": 0.5, "cpu_seconds": 0.4})
    assert type(back.outcome) is Outcome and type(back.signature) is Signature and back.graph == result.graph


def test_a_dead_worker_is_judged_a_hard_crash_or_a_hang_with_its_log():
    died = judge("nvfuser", {"status": "hard-crash", "signal": "SIGSEGV", "exitcode": -11, "stderr_tail": "boom"})
    hung = judge("nvfuser", {"status": "hang", "timeout": 3, "stderr_tail": "stuck"})
    assert (died.outcome, died.key, died.stderr_tail) == (Outcome.HARD_CRASH, "hard-crash|nvfuser|run|SIGSEGV||", "boom")
    assert (hung.outcome, hung.key, hung.stderr_tail) == (Outcome.HANG, "hang|nvfuser|run|timeout||", "stuck")


def test_a_signature_record_round_trips_and_writes_no_key_it_does_not_have():
    record = SignatureRecord.first(_nnc_crash(), 100.0, 3)
    fresh = record.to_json()
    assert not {"known", "case", "minimized", "unreduced", "recheck_outcomes", "last_seen"} & fresh.keys()
    assert SignatureRecord.from_json(json.loads(json.dumps(fresh))) == record
    record.count, record.last_seen, record.case = 4, 101.0, "corpus/x.json"
    record.minimized = MinimizedRepro("minimized/x", 9, 2, 22, 0.5)
    assert not record.awaits_reduction and not record.flaky
    assert record.settle(["pass", record.key]) and record.outcome is Outcome.FLAKY and record.flaky
    again = SignatureRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record and again.recheck_outcomes == ["pass", record.key]


def test_an_outcome_and_its_string_are_one_counter_key_and_one_json_value():
    counts = collections.Counter({"crash": 2})
    counts[Outcome.CRASH] += 1
    assert counts == {"crash": 3} and json.dumps({Outcome.CRASH: [Stage.BACKWARD_RUN]}) == '{"crash": ["backward-run"]}'
    assert {o.value for o in Outcome} == {"pass", "crash", "hard-crash", "hang", "mismatch", "unfused", "flaky",
                                          "invalid", "unsupported", "harness-error", "out-of-memory",
                                          "documented-difference"}


def test_a_state_json_written_before_the_verdict_layer_still_resumes(tmp_path):
    """tests/data/state-before-verdict.json: a CrashOnSumSigmoid campaign (25 cases, its crash
    reduced) stopped by the code before the verdict layer; resumed, it goes on counting."""
    shutil.copy(DATA / "state-before-verdict.json", tmp_path / "state.json")
    old = json.loads((tmp_path / "state.json").read_text())["stats"]["signatures"]  # as the old code wrote them
    campaign = Campaign.resume(tmp_path, more_cases=15, backend="custom:tests.buggy_backends:CrashOnSumSigmoid")
    (key, record), = campaign.stats.signatures.items()
    assert record.minimized.ops_after == 2 and record.confirmed is True and record.outcome is Outcome.CRASH
    summary = campaign.run()
    assert summary["cases"] == 40 and campaign.reducer_queue() == []
    new = load_state(tmp_path).stats.signatures[key].to_json()
    assert new.keys() == old[key].keys() and new["minimized"] == old[key]["minimized"]
    assert new["count"] >= old[key]["count"] and new["first_seen"] == old[key]["first_seen"]


def test_a_worker_killed_inside_eagers_own_run_is_eagers_hard_crash_not_the_fusers():
    """Eager traps on INT_MIN / -1 in int64 trunc division (torch 2.13; pytorch#138425): a case
    holding it killed its worker in fuzzfuse's eager run, and was recorded as a hard crash of the
    backend it ran on (NNC here). Its dying stack says where it died; a backend that dies in its
    own code stays the one at fault."""
    from fuzzfuse.ir import Graph
    from fuzzfuse.pool import case_pool, graph_job, run_jobs
    from fuzzfuse.verdict import EAGER_FAULT

    trap = Graph.from_json({"schema": 1, "outputs": ["v1"], "inputs": [
        {"kind": "tensor", "name": "x0", "shape": [2], "dtype": "int64", "layout": {"kind": "contiguous"},
         "values": {"exact": "AAAAAAAAAIAFAAAAAAAAAA=="}}],  # INT64_MIN, 5
        "nodes": [{"name": "v0", "op": "div_trunc", "args": ["x0", -1], "attrs": {}},
                  {"name": "v1", "op": "neg", "args": ["v0"], "attrs": {}}]})
    b = GraphBuilder()
    tanh = b.build([b.add("tanh", b.tensor((4,), values=Values(seed=1)))])
    segfaults = "custom:tests.buggy_backends:SegfaultOnTanh"
    with case_pool("torchscript:nnc", 1, 120.0) as pool:
        reply = run_jobs(pool, [graph_job(0, "torchscript:nnc", trap, 120.0)])[0]
    with case_pool(segfaults, 1, 120.0) as pool:
        theirs = run_jobs(pool, [graph_job(0, segfaults, tanh, 120.0)])[0]
    mine = judge("torchscript:nnc", reply)
    assert mine.outcome is Outcome.HARD_CRASH and mine.signature.kind == "SIGFPE", reply
    assert mine.signature.backend == EAGER_FAULT, reply.get("stderr_tail")
    fusers = judge(segfaults, theirs)
    assert fusers.outcome is Outcome.HARD_CRASH and fusers.signature.backend == segfaults


def test_a_full_device_is_the_machines_limit_and_a_fresh_worker_not_a_crash():
    """A CUDA campaign pair on one H100 counted 38 "CUDA out of memory" hits of 2 MiB or 14 MiB
    requests (workers holding 14-17 GiB each) as a new crash. A full device is counted apart, and
    the worker is replaced; a request larger than the whole device is a size the fuser computed."""
    b = GraphBuilder()
    graph = b.build([b.add("exp", b.tensor((4,), values=Values(seed=1)))])
    result = run_case(graph, backend_for("custom:tests.buggy_backends:OutOfMemoryOnExp"))
    assert result.outcome is Outcome.OUT_OF_MEMORY and not result.outcome.is_failure and result.restart_worker
    assert judge("custom:tests.buggy_backends:OutOfMemoryOnExp", result.to_json()).outcome is Outcome.OUT_OF_MEMORY
    from fuzzfuse.verdict import crashed
    huge = RuntimeError("CUDA out of memory. Tried to allocate 1024.00 GiB. GPU 0 has a total capacity of 79.18 GiB "
                        "of which 70.00 GiB is free.")
    assert crashed("inductor", "run", huge, "").outcome is Outcome.CRASH
    assert crashed("inductor", "run", RuntimeError("CUDA error: out of memory"), "").outcome is Outcome.OUT_OF_MEMORY


def test_a_kernel_the_machine_lacks_headers_for_is_unsupported_here_and_other_nvrtc_errors_stay_crashes():
    """nvFuser's scan kernel includes CUB's headers from /usr/local/cuda/include; on the H100
    machine, which has no CUDA toolkit headers there, NVRTC could not open one (the text nvFuser
    raised, its kernel elided). That is the machine's limit: no bug to reduce or file. Another
    NVRTC error of the same assert (a generated call no overload matches) is nvFuser's."""
    from fuzzfuse.verdict import crashed

    text = (DATA / "nvfuser-nvrtc-missing-header.txt").read_text()
    result = crashed("nvfuser", Stage.COMPILE, RuntimeError(text), "")
    assert result.outcome is Outcome.UNSUPPORTED
    assert "lacks cuda/std/type_traits" in result.signature.message
    own = text.replace('catastrophic error: could not open source file "cuda/std/type_traits" (no directories in '
                       'search list)', "error: no instance of overloaded function \"max\" matches the argument list")
    assert crashed("nvfuser", Stage.COMPILE, RuntimeError(own), "").outcome is Outcome.CRASH
