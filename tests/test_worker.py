"""Tests for fuzzfuse.worker: crashes, hangs and noise in a job must not stop the pool."""
import os
import signal
import time

import pytest

from fuzzfuse.worker import WorkerPool

JOBS = "tests.worker_jobs"


def _gone(pid: int) -> bool:
    """True if pid is dead; a zombie counts as dead (PID 1 in a container may not reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pid: int, seconds: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return _gone(pid)


def test_echo_results_in_order_with_id_and_time():
    with WorkerPool(2, f"{JOBS}:echo") as pool:
        results = pool.run_all({"id": i, "payload": [i, "x"]} for i in range(10))
    assert [r["id"] for r in results] == list(range(10))
    assert [r["payload"] for r in results] == [[i, "x"] for i in range(10)]
    assert all(r["worker_seconds"] >= 0 for r in results)
    assert pool.restarts == 0


@pytest.mark.parametrize("kind, signal_name, exitcode", [
    ("segfault", "SIGSEGV", -11), ("abort", "SIGABRT", -6), ("exit_", None, 3)])
def test_hard_crash_is_reported_and_pool_goes_on(kind, signal_name, exitcode):
    jobs = [{"id": "before", "kind": "sleep", "seconds": 0},
            {"id": "crash", "kind": kind},
            *({"id": f"after{i}", "kind": "sleep", "seconds": 0} for i in range(3))]
    with WorkerPool(1, f"{JOBS}:dispatch") as pool:
        before, crash, *after = pool.run_all(jobs)
    assert crash["status"] == "hard-crash"
    assert crash["signal"] == signal_name and crash["exitcode"] == exitcode
    assert "pid" in before and all("pid" in r for r in after)
    assert after[0]["pid"] != before["pid"]
    assert pool.restarts == 1


def test_crash_reports_stderr_tail_with_python_stack():
    with WorkerPool(1, f"{JOBS}:dispatch") as pool:
        short, long = pool.run_all([{"id": 1, "kind": "noisy_crash"}, {"id": 2, "kind": "noisy_crash", "frames": 2000}])
    assert short["signal"] == long["signal"] == "SIGABRT"
    for result in (short, long):
        assert result["stderr_tail"].startswith("last words before the crash")  # a C++ what() comes first
        assert "noisy_crash" in result["stderr_tail"]  # faulthandler's traceback, last
    assert "bytes ...]" not in short["stderr_tail"]
    assert "bytes ...]" in long["stderr_tail"] and len(long["stderr_tail"]) <= 4100


def test_crash_detected_while_forked_child_holds_pipes(tmp_path):
    pid_file = tmp_path / "child.pid"
    jobs = [{"id": 1, "kind": "crash_leaving_forked_child", "pid_file": str(pid_file)},
            {"id": 2, "kind": "sleep", "seconds": 0}]
    with WorkerPool(1, f"{JOBS}:dispatch", timeout=30) as pool:
        start = time.monotonic()
        crash, after = pool.run_all(jobs)
        assert time.monotonic() - start < 5  # not left to the timeout
    assert crash["status"] == "hard-crash" and crash["signal"] == "SIGABRT"
    assert "pid" in after
    assert _wait_gone(int(pid_file.read_text()))  # killed with the worker's group


def test_hang_is_killed_with_its_children_and_pool_goes_on(tmp_path):
    pid_file = tmp_path / "child.pid"
    jobs = [{"id": "hang", "kind": "hang_with_child", "pid_file": str(pid_file), "timeout": 0.5},
            {"id": "after", "kind": "sleep", "seconds": 0}]
    with WorkerPool(1, f"{JOBS}:dispatch", timeout=30) as pool:
        start = time.monotonic()
        hang, after = pool.run_all(jobs)
        elapsed = time.monotonic() - start
    assert hang == {"id": "hang", "status": "hang", "timeout": 0.5,
                    "stderr_tail": hang["stderr_tail"]}
    assert "hang_with_child" in hang["stderr_tail"]  # where it hung, from faulthandler
    assert "pid" in after
    assert elapsed < 5
    assert all(_wait_gone(int(pid)) for pid in pid_file.read_text().split())
    assert pool.restarts == 1


def test_pool_timeout_applies_when_job_has_none():
    with WorkerPool(1, f"{JOBS}:hang", timeout=0.3) as pool:
        [result] = pool.run_all([{"id": 7}])
    assert result["status"] == "hang" and result["timeout"] == 0.3


def test_handler_exception_is_worker_error_and_worker_survives():
    jobs = [{"id": 1, "kind": "raise_error"}, {"id": 2, "kind": "not_a_dict"},
            {"id": 3, "kind": "sleep", "seconds": 0}]
    with WorkerPool(1, f"{JOBS}:dispatch") as pool:
        error, not_dict, ok = pool.run_all(jobs)
    assert error["status"] == "worker-error" and error["error_type"] == "ValueError"
    assert error["error"] == "harness bug" and "raise_error" in error["traceback"]
    assert not_dict["status"] == "worker-error" and not_dict["error_type"] == "TypeError"
    assert "pid" in ok
    assert pool.restarts == 0


def test_output_on_fds_1_and_2_does_not_break_protocol():
    with WorkerPool(1, f"{JOBS}:dispatch") as pool:
        results = pool.run_all([{"id": i, "kind": "print_to_stdout_and_stderr"} for i in range(3)])
    assert [r["printed"] for r in results] == [True] * 3
    assert pool.restarts == 0


def test_large_result_crosses_pipe_buffer():
    with WorkerPool(1, f"{JOBS}:dispatch") as pool:
        [result] = pool.run_all([{"id": 1, "kind": "big", "size": 1_000_000}])
    assert len(result["blob"]) == 1_000_000


def test_two_workers_run_concurrently():
    with WorkerPool(2, f"{JOBS}:sleep") as pool:
        pool.run_all([{"id": "warm", "seconds": 0}])  # workers are up
        start = time.monotonic()
        results = pool.run_all([{"id": 1, "seconds": 1}, {"id": 2, "seconds": 1}])
        elapsed = time.monotonic() - start
    assert elapsed < 1.8
    assert results[0]["pid"] != results[1]["pid"]


def test_results_stream_in_completion_order_and_states():
    with WorkerPool(2, f"{JOBS}:dispatch") as pool:
        assert set(pool.states()) <= {"starting", "idle"}
        pool.submit({"id": "slow", "kind": "sleep", "seconds": 0.5})
        pool.submit({"id": "fast", "kind": "sleep", "seconds": 0})
        stream = pool.results()
        assert next(stream)["id"] == "fast"
        assert sorted(s.split()[0] for s in pool.states()) == ["busy", "idle"]
        assert next(stream)["id"] == "slow"
        assert list(stream) == []
        assert pool.states() == ["idle", "idle"]


def test_init_runs_once_per_worker_and_env_reaches_worker():
    env = {"FUZZFUSE_TEST_VAR": "hello", "PYTORCH_TENSOREXPR_FALLBACK": "0"}
    with WorkerPool(2, f"{JOBS}:echo", env=env, init=f"{JOBS}:init") as pool:
        results = pool.run_all({"id": i, "env_var": "FUZZFUSE_TEST_VAR"} for i in range(8))
    assert {r["init_calls"] for r in results} == {1}
    assert {r["env"] for r in results} == {"hello"}
    assert os.environ.get("FUZZFUSE_TEST_VAR") is None


def test_restart_worker_request_is_honoured():
    with WorkerPool(1, f"{JOBS}:dispatch") as pool:
        first, second = pool.run_all([{"id": 1, "kind": "restart_me"},
                                      {"id": 2, "kind": "sleep", "seconds": 0}])
    assert first["restart_worker"] is True
    assert first["pid"] != second["pid"]
    assert pool.restarts == 1


def test_worker_that_cannot_start_raises():
    with WorkerPool(1, f"{JOBS}:echo", init=f"{JOBS}:init_fails") as pool:
        with pytest.raises(RuntimeError, match="init exploded"):
            pool.run_all([{"id": 1}])
    with WorkerPool(1, f"{JOBS}:no_such_function") as pool:
        with pytest.raises(RuntimeError, match="no_such_function"):
            pool.run_all([{"id": 1}])


def test_ctrl_c_in_parent_kills_workers_and_their_children(tmp_path):
    """SIGALRM stands in for Ctrl-C: KeyboardInterrupt lands while results() waits."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            with WorkerPool(2, f"{JOBS}:hang_with_child") as pool:
                pool.run_all({"id": i, "pid_file": str(tmp_path / f"{i}.pid")} for i in range(2))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    pids = [int(pid) for i in range(2) for pid in (tmp_path / f"{i}.pid").read_text().split()]
    assert len(pids) == 4
    assert all(_wait_gone(pid) for pid in pids)


def test_devices_are_spread_round_robin_and_kept_across_restarts():
    """--devices: worker i sees only devices[i % n]; a worker restarted after a crash keeps its GPU."""
    with WorkerPool(3, f"{JOBS}:dispatch", devices=["0", "1"]) as pool:
        seen = pool.run_all({"id": i, "kind": "echo", "env_var": "CUDA_VISIBLE_DEVICES", "seconds": 0.2} for i in range(9))
        by_pid = {r["pid"]: r["env"] for r in seen}
        assert sorted(by_pid.values()) == ["0", "0", "1"]
        pool.run_all([{"id": "crash", "kind": "segfault"}])
        again = pool.run_all({"id": f"a{i}", "kind": "echo", "env_var": "CUDA_VISIBLE_DEVICES", "seconds": 0.2}
                            for i in range(9))
        assert sorted({r["pid"]: r["env"] for r in again}.values()) == ["0", "0", "1"]
        assert pool.restarts == 1



def test_a_job_queued_first_runs_before_the_queue_and_worker_time_is_accounted_by_use():
    """A reduction's query goes ahead of the queued cases; the pool counts its workers' seconds by
    what they did (the job's "account"), and the counts add up to the workers' lifetimes."""
    with WorkerPool(1, f"{JOBS}:dispatch") as pool:
        start = time.monotonic()
        for i in range(3):
            pool.submit({"id": f"case{i}", "kind": "sleep", "seconds": 0.3, "account": "fuzz"})
        pool.submit({"id": "query", "kind": "sleep", "seconds": 0.3, "account": "reduce"}, first=True)
        order = [r["id"] for r in pool.results()]
        spent, lifetime = pool.time_by_use(), time.monotonic() - start
    assert order == ["query", "case0", "case1", "case2"]
    assert 0.3 <= spent["reduce"] < 0.6 and 0.9 <= spent["fuzz"] < 1.5
    assert spent["starting"] > 0 and abs(sum(spent.values()) - lifetime) < 0.05


def test_abandoned_jobs_report_nothing_and_their_workers_are_replaced():
    """At a campaign's deadline, what hangs is abandoned: no reply, a fresh worker in its place."""
    with WorkerPool(1, f"{JOBS}:dispatch", timeout=60) as pool:
        pool.submit({"id": "hang", "kind": "sleep", "seconds": 60})
        pool.submit({"id": "queued", "kind": "sleep", "seconds": 60})
        pool.submit({"id": "quick", "kind": "sleep", "seconds": 0})
        while "busy" not in " ".join(pool.states()):
            pool.poll(0.1)
        pool.abandon(["hang", "queued"])
        started = time.monotonic()
        replies = [r["id"] for r in pool.results()]
        assert replies == ["quick"] and time.monotonic() - started < 30
        assert pool.restarts == 1 and pool.pending() == 0
        (again,) = pool.run_all([{"id": "after", "kind": "sleep", "seconds": 0}])
    assert "pid" in again


@pytest.mark.slow  # 10 s: its queries sleep 2 s each (over the fast budget, issue 36)
def test_a_reduction_borrows_up_to_its_share_of_the_workers_and_the_rest_go_on():
    """SharedPool: a reduction thread's queries (here 3 of 2 s, as a hang's reduction asks) run on
    at most `limit` workers at once, ahead of the queued cases, while the campaign's thread keeps
    the other worker busy with its own jobs; the thread gets its replies in its own order."""
    import threading

    from fuzzfuse.pool import SharedPool

    with WorkerPool(2, f"{JOBS}:dispatch") as pool, SharedPool(pool) as shared:
        asked = [{"id": f"q{k}", "kind": "sleep", "seconds": 2.0} for k in range(3)]
        replies: list = []
        thread = threading.Thread(target=lambda: replies.extend(shared.lease().run_all(asked)))
        thread.start()
        cases, most_borrowed, n = [], 0, 0
        while thread.is_alive():
            shared.dispatch(limit=1)
            most_borrowed = max(most_borrowed, shared.in_pool())
            while pool.pending() - shared.in_pool() < 2:
                pool.submit({"id": n, "kind": "sleep", "seconds": 0.05, "account": "fuzz"})
                n += 1
            cases += shared.poll(0.2)
        thread.join()
        spent = pool.time_by_use()
    assert [r["id"] for r in replies] == ["q0", "q1", "q2"] and all("pid" in r for r in replies)
    assert most_borrowed == 1
    assert len(cases) > 20 and all(isinstance(r["id"], int) for r in cases)  # fuzzing went on beside
    assert spent["reduce"] >= 6.0 and spent["fuzz"] > 1.0


def test_a_closed_shared_pool_stops_the_reductions_waiting_on_it():
    """At a campaign's deadline the reductions' queries in flight are abandoned, and the threads
    waiting on them, and any that ask later, get the error at once."""
    import threading

    from fuzzfuse.pool import PoolClosed, SharedPool

    with WorkerPool(1, f"{JOBS}:dispatch") as pool, SharedPool(pool) as shared:
        errors: list = []

        def reduce() -> None:
            try:
                shared.lease().run_all([{"id": "hang", "kind": "sleep", "seconds": 60}])
            except PoolClosed as e:
                errors.append(e)
        thread = threading.Thread(target=reduce)
        thread.start()
        while not shared.in_pool() or "busy" not in " ".join(pool.states()):
            shared.dispatch(limit=1)
            shared.poll(0.1)
        started = time.monotonic()
        shared.close(PoolClosed("deadline"))
        thread.join(5)
        assert not thread.is_alive() and time.monotonic() - started < 5 and len(errors) == 1
        with pytest.raises(PoolClosed):
            shared.lease().run_all([{"id": "later", "kind": "sleep", "seconds": 0}])
        assert pool.restarts == 1 and not pool.poll(0.1)
