"""Job handlers for tests/test_worker.py; they run inside fuzzfuse worker processes."""
import ctypes
import os
import subprocess
import sys
import time

INIT_CALLS = 0


def init():
    """Init hook: counts its calls, so a test can check it runs once per worker."""
    global INIT_CALLS
    INIT_CALLS += 1


def init_fails():
    raise RuntimeError("init exploded")


def echo(job):
    time.sleep(job.get("seconds", 0))
    return {"payload": job.get("payload"), "pid": os.getpid(), "init_calls": INIT_CALLS,
            "env": os.environ.get(job.get("env_var", ""), None)}


def dispatch(job):
    """One handler for a mixed batch: job["kind"] names the function below."""
    return globals()[job["kind"]](job)


def sleep(job):
    time.sleep(job["seconds"])
    return {"pid": os.getpid()}


def segfault(job):
    ctypes.string_at(0)


def abort(job):
    os.abort()


def exit_(job):
    os._exit(3)


def hang(job):
    time.sleep(1000)


def hang_with_child(job):
    """Spawn a grandchild that would outlive the worker unless the whole group is killed."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"])
    with open(job["pid_file"], "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    time.sleep(1000)


def raise_error(job):
    raise ValueError("harness bug")


def not_a_dict(job):
    return 42


def print_to_stdout_and_stderr(job):
    os.write(1, b"noise on stdout\n{\"id\": \"fake\"}\n")
    os.write(2, b"noise on stderr\n")
    print("python-level print")
    return {"printed": True}


def big(job):
    return {"blob": "x" * job["size"]}


def noisy_crash(job):
    os.write(2, b"last words before the crash\n" + b"frame #n: somewhere\n" * job.get("frames", 0))
    os.abort()


def restart_me(job):
    return {"pid": os.getpid(), "restart_worker": True}


def crash_leaving_forked_child(job):
    """The forked child keeps the result pipe open, so only the pidfd can tell of the crash."""
    pid = os.fork()
    if pid == 0:
        time.sleep(1000)
        os._exit(0)
    with open(job["pid_file"], "w") as f:
        f.write(str(pid))
    os.abort()


def cpu_capability(job):
    """The ATen CPU capability the worker's torch dispatches to."""
    import torch

    return {"capability": torch.backends.cpu.get_cpu_capability().lower()}
