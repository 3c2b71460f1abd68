"""The parent side of running cases: a pool of isolated workers that run `fuzzfuse.job`, and the
jobs it takes (`Job`, sent over the worker pipe in its JSON form). Its replies become CaseResults
through `fuzzfuse.verdict.judge`."""
from __future__ import annotations

from dataclasses import dataclass

from .backends import get_backend
from .backends.options import Options
from .export import KERNEL_CACHES
from .ir import Graph
from .strategies import GenConfig, config_from_json, config_to_json
from .worker import WorkerPool


@dataclass(frozen=True)
class Job:
    """One case for a worker (`fuzzfuse.job.run_job`): a seed to draw its graph from under `config`
    (a campaign's new case, drawn in the worker, in parallel), or a `graph` (a recheck, a replay, a
    reduction query), run on `backend` under the case's `options`. `recheck_of`: the signature key
    whose first case this re-runs (read by the campaign, never by the worker)."""

    id: int | str
    backend: str
    timeout: float
    seed: int | None = None
    config: GenConfig | None = None
    graph: Graph | None = None
    options: Options = Options()
    check_strides: bool = False
    extra_runs: bool = False
    recheck_of: str | None = None

    def to_json(self) -> dict:
        """The worker pool's form: "id" and "timeout" are its own, the rest the worker's."""
        config = config_to_json(self.config) if self.config is not None else None
        drawn = {"seed": self.seed, "config": config} if self.graph is None else {"graph": self.graph.to_json()}
        return {"id": self.id, "backend": self.backend, "timeout": self.timeout, **drawn,
                "options": self.options.to_json(), "check_strides": self.check_strides, "extra_runs": self.extra_runs,
                **({"recheck_of": self.recheck_of} if self.recheck_of is not None else {})}

    @staticmethod
    def from_json(d: dict) -> "Job":
        graph = Graph.from_json(d["graph"]) if "graph" in d else None
        return Job(d["id"], d["backend"], float(d["timeout"]), d.get("seed"),
                   config_from_json(d["config"]) if d.get("config") else None, graph, Options.from_json(d["options"]),
                   bool(d["check_strides"]), bool(d["extra_runs"]), d.get("recheck_of"))


def worker_env(backend_name: str) -> dict[str, str]:
    """Environment a fuser reads at import time, set before the worker imports torch."""
    return {"FUZZFUSE_BACKEND": backend_name, **get_backend(backend_name).env}


def case_pool(backend_name: str, workers: int, timeout: float, devices: list[str] | None = None) -> WorkerPool:
    """Isolated workers that run cases on one backend (job.run_job), its environment set, spread
    over `devices` (GPU indices) when given. Their kernel caches are the pool's own (export.
    KERNEL_CACHES): what they reuse was compiled in this run."""
    return WorkerPool(workers, "fuzzfuse.job:run_job", timeout=timeout, env=worker_env(backend_name),
                      init="fuzzfuse.job:init_worker", devices=devices, private_dirs=KERNEL_CACHES)


def run_jobs(pool: WorkerPool, jobs: list[Job]) -> list[dict]:
    """Run `jobs` on a case pool; the workers' replies in their order, for `verdict.judge`."""
    return pool.run_all(job.to_json() for job in jobs)


def graph_job(job_id, backend: str, graph: Graph, timeout: float, options: Options = Options(),
              check_strides: bool = False) -> Job:
    """A worker job that runs `graph` under a saved case's choices."""
    return Job(job_id, backend, timeout, graph=graph, options=options, check_strides=check_strides)
