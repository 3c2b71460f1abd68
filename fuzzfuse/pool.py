"""The parent side of running cases: a pool of isolated workers that run `fuzzfuse.job`, and the
jobs it takes. Its replies become CaseResults through `fuzzfuse.verdict.judge`."""
from __future__ import annotations

from .backends import get_backend
from .ir import Graph
from .worker import WorkerPool


def worker_env(backend_name: str) -> dict[str, str]:
    """Environment a fuser reads at import time, set before the worker imports torch."""
    return {"FUZZFUSE_BACKEND": backend_name, **get_backend(backend_name).env}


def case_pool(backend_name: str, workers: int, timeout: float, devices: list[str] | None = None) -> WorkerPool:
    """Isolated workers that run cases on one backend (job.run_job), its environment set, spread
    over `devices` (GPU indices) when given."""
    return WorkerPool(workers, "fuzzfuse.job:run_job", timeout=timeout, env=worker_env(backend_name),
                      init="fuzzfuse.job:init_worker", devices=devices)


def graph_job(job_id, backend: str, graph: Graph, timeout: float, case_options: dict | None = None) -> dict:
    """A worker job that runs `graph` with the per-case options a saved case records (check_strides,
    nvFuser's style...)."""
    options = dict(case_options or {})
    check_strides = bool(options.pop("check_strides", False))
    return {"id": job_id, "backend": backend, "graph": graph.to_json(), "timeout": timeout,
            "check_strides": check_strides, "options": options}
