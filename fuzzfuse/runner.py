"""Run one case differentially: eager reference, float64 arbiter, the fuser; classify the outcome.

This is the job handler of the worker processes (`fuzzfuse.worker`), so it keeps the backend and
torch alive across the many cases a worker runs. Everything it returns is JSON.
"""
from __future__ import annotations

import os
import re
import time
import traceback
import warnings

import torch

from .attribution import attribute
from .backends import BackendError, Unsupported, get_backend, has_backward
from .ir import Graph, make_inputs, run_autograd, run_eager
from .oracle import (Signature, compare_output, cpp_location, exception_signature, gradient_reduction_sizes,
                     normalize, reduction_sizes)
from .strategies import GenConfig, config_from_json, generate

_backends: dict = {}
MAX_MESSAGE = 20000


def init_worker() -> None:
    """Once per worker: quiet PyTorch's advisory warnings and use one thread per worker (workers
    already run in parallel, one per core)."""
    warnings.filterwarnings("ignore")
    torch.set_num_threads(int(os.environ.get("FUZZFUSE_THREADS", "1")))


def backend_for(name: str):
    if name not in _backends:
        _backends[name] = get_backend(name)
    return _backends[name]


def run_job(job: dict) -> dict:
    """Worker handler: a job names a backend and either a seed (generate here, in parallel) or a
    graph (replay, reduction queries)."""
    t0 = time.perf_counter()
    backend = backend_for(job["backend"])
    if "graph" in job:
        graph = Graph.from_json(job["graph"])
    else:
        graph = generate(job["seed"], config_from_json(job.get("config")) if job.get("config") else GenConfig())
    gen_seconds = time.perf_counter() - t0
    result = run_case(graph, backend, check_strides=job.get("check_strides", False), options=job.get("options"))
    result["timings"]["generate"] = gen_seconds
    if result["outcome"] != "pass" or job.get("return_graph"):
        result["graph"] = graph.to_json()
    result["size"] = graph.size
    result["digest"] = graph.digest()
    return result


def _error_text(e: BaseException) -> str:
    return f"{e}"[:MAX_MESSAGE]


def run_case(graph: Graph, backend, check_strides: bool = False, options: dict | None = None) -> dict:
    """options: backend-specific per-case choices recorded in the case (nvFuser's emission style).
    A graph with requires_grad inputs is a backward case: the gradients of those inputs, for the
    graph's seeded upstream gradients, are judged too (stage "backward-run"). A failure is then
    attributed: re-run on the backend's reference route (fuzzfuse.attribution)."""
    result = _judge(graph, backend, check_strides, options)
    return attribute(backend, result, lambda route: run_case(graph, route, check_strides))


def _judge(graph: Graph, backend, check_strides: bool = False, options: dict | None = None) -> dict:
    timings: dict[str, float] = {}
    out = {"outcome": "pass", "signature": None, "detail": "", "timings": timings, "fused": None}
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
        sig = exception_signature(backend.name, "eager", type(e).__name__, str(e), traceback.format_exc(),
                                  outcome="invalid")
        return {**out, "outcome": "invalid", "signature": sig.to_json(), "detail": _error_text(e)}
    timings["eager"] = time.perf_counter() - t

    t = time.perf_counter()
    kwargs = dict(options or {})
    if grad_outputs is not None:
        if not has_backward(backend):
            sig = Signature("unsupported", backend.name, "backward-compile", "Unsupported", "", "no backward")
            return {**out, "outcome": "unsupported", "signature": sig.to_json(),
                    "detail": f"{backend.name} has no backward support"}
        kwargs["grad_outputs"] = grad_outputs
    try:
        result = backend.run(graph, inputs, **kwargs)
    except Unsupported as e:
        sig = Signature("unsupported", backend.name, e.stage, "Unsupported", "", normalize(str(e)))
        return {**out, "outcome": "unsupported", "signature": sig.to_json(), "detail": _error_text(e)}
    except BackendError as e:
        cause = e.cause
        tb = "".join(traceback.format_exception(cause))
        sig = exception_signature(backend.name, e.stage, type(cause).__name__, str(cause), tb)
        timings["backend"] = time.perf_counter() - t
        # A CUDA error can leave the context unusable (sticky): that worker must be replaced.
        return {**out, "outcome": "crash", "signature": sig.to_json(), "detail": _error_text(cause) + e.context,
                "traceback": tb[-MAX_MESSAGE:], "restart_worker": bool(getattr(e, "sticky", False))}
    timings["backend"] = time.perf_counter() - t
    out.update(fused=result.fused, evidence=result.evidence, compile_seconds=result.compile_seconds)
    # Fusion evidence before outputs: where the fuser declined the whole graph, a wrong output is
    # its frontend's unless the reference route (fuzzfuse.attribution) shows otherwise; without one,
    # the case is unfused.
    if result.fused is False and not result.evidence.get("fallback") and backend.reference_route is None:
        return _unfused(out, backend, "run", result.evidence)

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
            timings["compare"] = time.perf_counter() - t
            return {**out, "outcome": "mismatch", "signature": mismatch.signature(backend.name).to_json(),
                    "detail": f"output {i} ({name}): {mismatch.kind}: {mismatch.detail}" + result.context}
    backward_evidence = result.evidence.get("backward", {})
    if (grad_outputs is not None and result.backward_fused is False and not backward_evidence.get("fallback")
            and backend.reference_route is None):
        return _unfused(out, backend, "backward-run", backward_evidence)
    # Gradients are not judged downstream of undefined behaviour (a where on a NaN cast's result).
    if grad_outputs is not None and not tainted_all:
        mismatch = _compare_grads(graph, types, result.grads or [], eager_grads, ref_grads)
        if mismatch:
            timings["compare"] = time.perf_counter() - t
            name = [i.name for i in graph.inputs if getattr(i, "requires_grad", False)][mismatch.output]
            return {**out, "outcome": "mismatch",
                    "signature": mismatch.signature(backend.name, "backward-run").to_json(),
                    "detail": f"gradient of input {name}: {mismatch.kind}: {mismatch.detail}" + result.context}
    timings["compare"] = time.perf_counter() - t
    if result.fused is False or (grad_outputs is not None and result.backward_fused is False):
        # A fallback that ran although something fused is a finding; a fuser that declined the
        # whole graph is coverage data. The backward is judged apart: it is a graph of its own.
        stage = "run" if result.fused is False else "backward-run"
        return _unfused(out, backend, stage, result.evidence if stage == "run" else backward_evidence)
    return out


def _unfused(out: dict, backend, stage: str, evidence: dict) -> dict:
    """A fallback that ran although something fused is a finding (kind "fallback"); a fuser that
    declined the whole graph is coverage data (kind "no-fusion")."""
    kind = "fallback" if evidence.get("fallback") else "no-fusion"
    sig = Signature("unfused", backend.name, stage, kind)
    return {**out, "outcome": "unfused", "signature": sig.to_json(),
            "detail": f"nothing fused ({'backward' if stage != 'run' else 'forward'}): {evidence}"}


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


def worker_env(backend_name: str) -> dict[str, str]:
    """Environment a fuser reads at import time, set before the worker imports torch."""
    return {"FUZZFUSE_BACKEND": backend_name, **getattr(get_backend(backend_name), "env", {})}


def case_pool(backend_name: str, workers: int, timeout: float, devices: list[str] | None = None):
    """Isolated workers that run cases on one backend (run_job), its environment set, spread over
    `devices` (GPU indices) when given."""
    from .worker import WorkerPool

    return WorkerPool(workers, "fuzzfuse.runner:run_job", timeout=timeout, env=worker_env(backend_name),
                      init="fuzzfuse.runner:init_worker", devices=devices)


def graph_job(job_id, backend: str, graph: Graph, timeout: float, case_options: dict | None = None) -> dict:
    """A worker job that runs `graph` with the per-case options a saved case records (check_strides,
    nvFuser's style...)."""
    options = dict(case_options or {})
    check_strides = bool(options.pop("check_strides", False))
    return {"id": job_id, "backend": backend, "graph": graph.to_json(), "timeout": timeout,
            "check_strides": check_strides, "options": options}


_WHAT = re.compile(r"terminate called after throwing an instance of .*?\n\s*what\(\):(.*?)(?=\nframe #|\nException raised|"
                   r"\n\n|\nFatal Python error|\Z)", re.S)


def abort_message(log: str) -> str:
    """The what() of the C++ exception that terminated a worker (std::terminate prints it before
    the abort), so that two different aborts are two signatures; "" when the log has none."""
    m = _WHAT.search(log)
    return m.group(1).strip() if m else ""


def classify(backend: str, result: dict) -> tuple[str, Signature | None]:
    """Outcome and signature of a worker pool result, including the deaths the worker could not
    report itself (hard-crash: by signal or exit code; hang: the pool's timeout)."""
    status = result.get("status")
    if status == "hard-crash":
        kind = result.get("signal") or f"exit {result.get('exitcode')}"
        what = abort_message(result.get("stderr_tail") or "")
        return "hard-crash", Signature("hard-crash", backend, "run", kind, cpp_location(what),
                                       normalize(what) if what else "")
    if status == "hang":
        return "hang", Signature("hang", backend, "run", "timeout")
    if status == "worker-error":
        # A fuzzfuse bug, not a fuser bug: surface it loudly rather than count it.
        raise RuntimeError(f"fuzzfuse harness error: {result.get('error_type')}: {result.get('error')}\n"
                           f"{result.get('traceback', '')}")
    sig = Signature.from_json(result["signature"]) if result.get("signature") else None
    return result["outcome"], sig
