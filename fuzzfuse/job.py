"""The worker side: run one case differentially (eager reference, float64 arbiter, the fuser) and
report what happened as a CaseResult (`fuzzfuse.verdict` names it).

This is the job handler of the worker processes (`fuzzfuse.worker`), so it keeps the backend and
torch alive across the many cases a worker runs. The parent side is `fuzzfuse.pool`.
"""
from __future__ import annotations

import os
import time
import traceback
import warnings

import torch

from . import verdict
from .attribution import attribute
from .backends import Backend, BackendError, get_backend
from .ir import Graph, make_inputs, run_autograd, run_eager
from .oracle import compare_output, gradient_reduction_sizes, reduction_sizes
from .strategies import GenConfig, config_from_json, generate
from .verdict import CaseResult, Outcome, Stage, Unsupported

_backends: dict[str, Backend] = {}


def init_worker() -> None:
    """Once per worker: quiet PyTorch's advisory warnings and use one thread per worker (workers
    already run in parallel, one per core)."""
    warnings.filterwarnings("ignore")
    torch.set_num_threads(int(os.environ.get("FUZZFUSE_THREADS", "1")))


def backend_for(name: str) -> Backend:
    if name not in _backends:
        _backends[name] = get_backend(name)
    return _backends[name]


def run_job(job: dict) -> dict:
    """Worker handler: a job names a backend and either a seed (generate here, in parallel) or a
    graph (replay, reduction queries). The reply is a CaseResult's JSON."""
    t0 = time.perf_counter()
    backend = backend_for(job["backend"])
    if "graph" in job:
        graph = Graph.from_json(job["graph"])
    else:
        graph = generate(job["seed"], config_from_json(job.get("config")) if job.get("config") else GenConfig())
    gen_seconds = time.perf_counter() - t0
    result = run_case(graph, backend, check_strides=job.get("check_strides", False), options=job.get("options"))
    result.timings["generate"] = gen_seconds
    if result.outcome != Outcome.PASS or job.get("return_graph"):
        result.graph = graph
    result.size = graph.size
    result.digest = graph.digest()
    return result.to_json()


def run_case(graph: Graph, backend: Backend, check_strides: bool = False, options: dict | None = None) -> CaseResult:
    """options: backend-specific per-case choices recorded in the case (nvFuser's emission style).
    A graph with requires_grad inputs is a backward case: the gradients of those inputs, for the
    graph's seeded upstream gradients, are judged too (stage "backward-run"). A failure is then
    attributed: re-run on the backend's reference route (fuzzfuse.attribution)."""
    result = _judge(graph, backend, check_strides, options)
    return attribute(backend, result, lambda route: run_case(graph, route, check_strides))


def _judge(graph: Graph, backend: Backend, check_strides: bool, options: dict | None) -> CaseResult:

    timings: dict[str, float] = {}
    t = time.perf_counter()
    try:
        inputs = make_inputs(graph, backend.device)
        grad_outputs = None
        if graph.requires_grad:
            eager, tainted_all, grad_outputs, eager_grads = run_autograd(graph, inputs)
            ref64, _, _, ref_grads = run_autograd(graph, inputs, grad_outputs, upcast=True)
            tainted = {o for o in graph.outputs if o in tainted_all}
            if all(g is None for g in grad_outputs):  # no differentiable output: forward only
                grad_outputs = None
        else:
            eager, tainted = run_eager(graph, inputs)
            ref64, _ = run_eager(graph, inputs, upcast=True)
    except Exception as e:  # eager itself failed: a generator defect, never a fuser bug
        return verdict.invalid(backend.name, e, traceback.format_exc())
    timings["eager"] = time.perf_counter() - t

    t = time.perf_counter()
    kwargs = dict(options or {})
    if grad_outputs is not None:
        if not backend.supports_backward:
            return _timed(verdict.no_backward(backend.name), timings)
        kwargs["grad_outputs"] = grad_outputs
    try:
        result = backend.run(graph, inputs, **kwargs)
    except Unsupported as e:
        return _timed(verdict.unsupported(backend.name, e), timings)
    except BackendError as e:
        timings["backend"] = time.perf_counter() - t
        return _timed(verdict.crashed(backend.name, e.stage, e.cause, "".join(traceback.format_exception(e.cause)),
                                      context=e.context, sticky=e.sticky), timings)
    timings["backend"] = time.perf_counter() - t
    ran = CaseResult(timings=timings, fused=result.fused, evidence=result.evidence,
                     compile_seconds=result.compile_seconds)

    def judged(failure: CaseResult) -> CaseResult:
        timings["compare"] = time.perf_counter() - t
        failure.timings, failure.fused, failure.evidence = timings, ran.fused, ran.evidence
        failure.compile_seconds = ran.compile_seconds
        return failure

    t = time.perf_counter()
    types = graph.infer_types()
    reduced = reduction_sizes(graph, types)
    for i, name in enumerate(graph.outputs):
        fused = result.outputs[i] if i < len(result.outputs) else None
        if (name in tainted and isinstance(fused, torch.Tensor) and fused.dtype == eager[i].dtype
                and fused.shape == eager[i].shape):
            continue  # undefined behaviour upstream (float->int of NaN/inf): only type is defined
        mismatch = compare_output(i, fused, eager[i], ref64[i], reduced[name], check_strides)
        if mismatch:
            return judged(verdict.mismatched(backend.name, mismatch, f"output {i} ({name})", result.context))
    # Gradients are not judged downstream of undefined behaviour (a where on a NaN cast's result).
    if grad_outputs is not None and not tainted_all:
        mismatch = _compare_grads(graph, types, result.grads or [], eager_grads, ref_grads)
        if mismatch:
            name = [i.name for i in graph.inputs if getattr(i, "requires_grad", False)][mismatch.output]
            return judged(verdict.mismatched(backend.name, mismatch, f"gradient of input {name}", result.context,
                                             Stage.BACKWARD_RUN))
    if result.fused is False or (grad_outputs is not None and result.backward_fused is False):
        # The backward is judged apart: it is a graph of its own.
        stage = Stage.RUN if result.fused is False else Stage.BACKWARD_RUN
        evidence = result.evidence if stage == Stage.RUN else result.evidence.get("backward", {})
        return judged(verdict.not_fused(backend.name, stage, evidence))
    timings["compare"] = time.perf_counter() - t
    return ran


def _timed(result: CaseResult, timings: dict[str, float]) -> CaseResult:
    result.timings = timings
    return result


def _compare_grads(graph: Graph, types: dict, fused: list, eager: list, ref64: list):
    """The first gradient that is wrong (a Mismatch whose `output` indexes the requires_grad
    inputs), with the same float64 arbitration as outputs."""
    wanted = [i.name for i in graph.inputs if getattr(i, "requires_grad", False)]
    reduced = gradient_reduction_sizes(graph, types)
    for j, name in enumerate(wanted):
        got = fused[j] if j < len(fused) else None
        mismatch = compare_output(j, got, eager[j], ref64[j], reduced[name])
        if mismatch:
            return mismatch
    return None
