"""The worker side: run one case differentially (eager reference, float64 arbiter, the fuser) and
report what happened as a CaseResult (`fuzzfuse.verdict` names it).

This is the job handler of the worker processes (`fuzzfuse.worker`), so it keeps the backend and
torch alive across the many cases a worker runs. The parent side is `fuzzfuse.pool`.
"""
from __future__ import annotations

import functools
import gc
import os
import time
import traceback
import warnings
from dataclasses import dataclass

import torch

from . import verdict
from .attribution import attribute
from .backends import Backend, BackendError, Compiled, get_backend
from .backends.base import is_cuda_fault
from .backends.findings import FlushStyle
from .backends.options import Options
from .ir import Graph, TensorInput, flush_denormals, interpret, make_inputs, run_autograd, run_eager, run_fp32_compute
from .ir.interp import FP32_RANGE, ops_faithful_at, order_dependent_positions, scalar_reference
from .ir.values import as_bits, input_set
from .explain import explaining_rule
from .heap import new_memory_poisoned
from .oracle import (APPROXIMATE_RTOL, ATOL, RTOL, compare_output, nearer_references, nearest_run, gradient_reduction_sizes, reduction_sizes,
                     signed_zero_difference)
from .pool import Job
from .strategies import GenConfig, generate_steered, graph_triples
from .verdict import EAGER_FAULT, CaseResult, Difference, Evidence, Outcome, Stage, Unsupported

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


def run_job(message: dict) -> dict:
    """Worker handler: a Job's JSON, which names a backend and either a seed (generate here, in
    parallel) or a graph (replay, reduction queries). The reply is a CaseResult's JSON."""
    t0 = time.perf_counter()
    job = Job.from_json(message)
    backend = backend_for(job.backend)
    graph, steered = (job.graph, 0) if job.graph is not None else generate_steered(job.seed, job.config or GenConfig())
    gen_seconds = time.perf_counter() - t0
    with new_memory_poisoned(job.poison_heap):
        result = run_case(graph, backend, check_strides=job.check_strides, options=job.options,
                          extra_sets=job.extra_runs, generate_seconds=gen_seconds)
    result.steered = steered
    result.restart_worker |= _keeps_device_memory()
    result.timings["generate"] = gen_seconds
    result.triples = graph_triples(graph)
    if result.graph is None and result.outcome != Outcome.PASS:
        result.graph = graph
    # A failure on an extra input set carries that set's graph: the one that replays.
    result.size = (result.graph or graph).size
    result.digest = (result.graph or graph).digest()
    return result.to_json()


# What a worker may keep cached on its device between cases: the workers of a campaign (and of a
# second campaign beside it) share one GPU, and a worker that keeps the peak of its largest case
# leaves the others too little, whose cases then fail as out of memory.
KEPT_DEVICE_BYTES = 2 << 30


def _keeps_device_memory() -> bool:
    """Hand the device memory cached beyond KEPT_DEVICE_BYTES back after a case; True when it stays
    held (tensors still alive, a CUDA graph's pool): then only a fresh worker frees it."""
    if not torch.cuda.is_initialized() or torch.cuda.memory_reserved() <= KEPT_DEVICE_BYTES:
        return False
    gc.collect()
    torch.cuda.empty_cache()
    return torch.cuda.memory_reserved() > KEPT_DEVICE_BYTES


def run_case(graph: Graph, backend: Backend, check_strides: bool = False, options: Options = Options(),
             extra_sets: bool = False, generate_seconds: float = 0.0) -> CaseResult:
    """options: the backend's per-case choices recorded in the case (nvFuser's emission style).
    A graph with requires_grad inputs is a backward case: the gradients of those inputs, for the
    graph's seeded upstream gradients, are judged too (stage "backward-run"). extra_sets: a
    forward case that passes is then run, compiled once, on more input sets (`extra_input_sets`;
    generate_seconds: what drawing the graph cost, part of what a new case costs). A failure is
    then attributed: re-run on the backend's reference route (fuzzfuse.attribution)."""
    result = _judge(graph, backend, check_strides, options, extra_sets, generate_seconds)
    # A failure on an extra input set carries that set's graph: the one the route must run.
    return attribute(backend, result, backend_for, lambda route: run_case(result.graph or graph, route, check_strides))


def _judge(graph: Graph, backend: Backend, check_strides: bool, options: Options, extra_sets: bool,
           generate_seconds: float) -> CaseResult:
    timings: dict[str, float] = {}
    t = time.perf_counter()
    # A kernel built with -funsafe-math-optimizations sets FTZ/DAZ for the whole thread when it is
    # loaded (gcc < 13 links crtfastmath): eager must never inherit it from an earlier case.
    torch.set_flush_denormal(False)
    try:
        inputs = make_inputs(graph, backend.device)
        grad_outputs = None
        if graph.requires_grad:
            eager, tainted_all, grad_outputs, eager_grads = run_autograd(graph, inputs)
            ref64, _, _, ref_grads = run_autograd(graph, inputs, grad_outputs, upcast=True)
            tainted = {o: tainted_all[o] for o in graph.outputs if o in tainted_all}
            if all(g is None for g in grad_outputs):  # no differentiable output: forward only
                grad_outputs = None
        else:
            eager, tainted = run_eager(graph, inputs)
            ref64, _ = run_eager(graph, inputs, upcast=True)
    except Exception as e:  # eager itself failed: a generator defect, never a fuser bug
        return verdict.invalid(backend.name, e, traceback.format_exc(), sticky=is_cuda_fault(e))
    timings["eager"] = time.perf_counter() - t

    t = time.perf_counter()
    if grad_outputs is not None and not backend.supports_backward:
        return _timed(verdict.no_backward(backend.name), timings)
    compiled = backend.compile(graph, options)
    try:
        result = compiled.run(inputs, grad_outputs)
    except Unsupported as e:
        return _timed(verdict.unsupported(backend.name, e), timings)
    except BackendError as e:
        torch.set_flush_denormal(False)
        timings["backend"] = time.perf_counter() - t
        return _timed(verdict.crashed(backend.name, e.stage, e.cause, "".join(traceback.format_exception(e.cause)),
                                      context=e.context, sticky=e.sticky), timings)
    torch.set_flush_denormal(False)
    timings["backend"] = time.perf_counter() - t
    ran = CaseResult(timings=timings, fused=result.fused, evidence=result.evidence,
                     compile_seconds=result.compile_seconds,
                     first_output_exact=bitwise_equal(result.outputs[0], eager[0]) if result.outputs and eager else None)

    def judged(failure: CaseResult) -> CaseResult:
        timings["compare"] = time.perf_counter() - t
        failure.timings, failure.fused, failure.evidence = timings, ran.fused, ran.evidence
        failure.compile_seconds, failure.first_output_exact = ran.compile_seconds, ran.first_output_exact
        return failure

    t = time.perf_counter()
    types = graph.infer_types()
    failure = _judge_outputs(graph, types, backend, result, eager, ref64, tainted, check_strides,
                             *design_references(backend, options, graph, inputs, eager),
                             rounded=_once(lambda: rounding_runs(graph, inputs, eager)),
                             ordered=_once(lambda: order_dependent_positions(graph, inputs)),
                             **wrong_value_checks(backend, options, graph, inputs))
    if failure:
        return judged(failure)
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
        evidence = result.evidence if stage == Stage.RUN else (result.evidence.backward or Evidence())
        return judged(verdict.not_fused(backend.name, stage, evidence))
    timings["compare"] = time.perf_counter() - t
    if extra_sets and grad_outputs is None:
        return extra_input_sets(graph, backend, compiled, ran, check_strides, generate_seconds)
    return ran


def bitwise_equal(fused, expected) -> bool:
    """Whether a fused output is eager's bit for bit: its dtype, shape and every value, a -0.0 and
    a NaN as themselves."""
    if not (isinstance(fused, torch.Tensor) and isinstance(expected, torch.Tensor)) or fused.dtype != expected.dtype \
            or fused.shape != expected.shape:
        return False
    # Compared where eager ran, as the oracle compares.
    return torch.equal(as_bits(fused.detach().to(expected.device).contiguous()), as_bits(expected.detach().contiguous()))


def wrong_value_checks(backend: Backend, options: Options, graph: Graph, inputs: list) -> dict:
    """The checks a wrong value of this graph on these inputs is judged by, each computed only when
    asked (`_judge_outputs`: `unflushed`, `scalar`, `faithful`, `rule`). Every input set of a case is judged by
    the same checks, so that a re-check of a failure found on an extra set keys it the same way."""
    def rule(values: list, output: int, fused, reduced: int) -> str:
        return explaining_rule(graph, values, output, fused, reduced,
                               lambda g, x: fused_outputs(backend, options, g, x), backend.unary_keeps_integral_dtype)

    def flushed_rule(output: int, fused, reduced: int) -> str:
        """A known wrong rule on the inputs as the fuser reads them, where it flushes denormals by
        design: Triton's ceil of a bfloat16 subnormal is 0, and its neg of that 0 is +0.0, which
        rsqrt shows; on eager's unflushed values ceil is 1, and no zero's sign explains it."""
        if Difference.DENORMAL_FLUSH not in backend.documented_differences(options):
            return ""
        flushed = [flush_denormals(x) for x in inputs]
        if all(not isinstance(x, torch.Tensor) or torch.equal(x, f) for x, f in zip(inputs, flushed)):
            return ""
        return rule(flushed, output, fused, reduced)

    return {"unflushed": _once(lambda: unflushed_outputs(backend, graph, options, inputs)),
            "scalar": lambda output, positions: scalar_reference(graph, inputs, output, positions),
            "faithful": lambda output, positions: ops_faithful_at(graph, inputs, output, positions),
            "rule": lambda output, fused, reduced: rule(inputs, output, fused, reduced)
            or flushed_rule(output, fused, reduced)}


def fused_outputs(backend: Backend, options: Options, graph: Graph, inputs: list) -> list | None:
    """The backend's outputs on another graph, where it runs that graph fused; None where it
    declines it, falls back, or fails on it (a rule tested that way then explains nothing)."""
    try:
        result = backend.compile(graph, options).run(inputs, None)
    except Exception:
        return None
    return list(result.outputs) if result.fused is not False else None


def design_references(backend: Backend, options: Options, graph: Graph, inputs: list, eager: list) -> tuple:
    """(flushed, widened, invalid, approximate): for each semantic the backend changes by design under these
    options, a function computing what decides it (None where the backend does not declare it),
    run only at a mismatch: eager and float64 on inputs flushed as the backend declares it flushes
    on its device (`flushed_references`, `Backend.flush_style`), the outputs with fp16/bf16
    intermediates in float32 (`run_fp32_compute`), whether eager's run holds a NaN or an
    infinity (`holds_nonfinite`), and the tolerance of approximate transcendental functions."""
    declared = backend.documented_differences(options)
    style = backend.flush_style.get(backend.device, FlushStyle.NONE)
    flushed = _once(lambda: flushed_references(graph, inputs, style)) if Difference.DENORMAL_FLUSH in declared else None
    widened = (_once(lambda: run_fp32_compute(graph, inputs, [e.dtype for e in eager],
                                              casts_round=Difference.LOWP_CASTS_ELIDED not in declared))
               if Difference.FP32_INTERMEDIATES in declared else None)
    invalid = _once(lambda: holds_nonfinite(graph, inputs)) if Difference.UNSAFE_MATH in declared else None
    approximate = (lambda: APPROXIMATE_RTOL) if Difference.APPROXIMATE_MATH in declared else None
    return flushed, widened, invalid, approximate


# How many runs that round other ways than eager judge whether an output is ill-conditioned.
ROUNDING_RUNS = 32


def rounding_runs(graph: Graph, inputs: list, eager: list) -> list[list]:
    """The outputs of ROUNDING_RUNS runs of the graph at eager's precision, each op's result rounded
    up or down at random where it is inexact (fuzzfuse.ir.interp, rounding), in eager's dtypes:
    what float32 arithmetic that rounds other ways than eager's may give, right as much as eager."""
    generator = torch.Generator().manual_seed(0)
    runs = [run_eager(graph, inputs, upcast=True, rounding=generator)[0] for _ in range(ROUNDING_RUNS)]
    return [[o.to(e.dtype) if isinstance(e, torch.Tensor) else o for o, e in zip(outputs, eager)] for outputs in runs]


def _once(reference):
    """`reference` computed at its first call and kept (several outputs of a graph may need it),
    [] where eager fails on it (undefined there)."""
    @functools.cache
    def computed():
        try:
            return reference()
        except Exception:
            return []
    return computed


def _eager_holds(graph: Graph, inputs: list, holds) -> bool:
    """Whether an input or a value eager computes is a tensor that `holds` (a predicate) is true of:
    what a backend's documented semantics depend on is often an intermediate, not an output."""
    return any(isinstance(v, torch.Tensor) and holds(v) for v in interpret(graph, inputs)[0].values())


def holds_nonfinite(graph: Graph, inputs: list) -> bool:
    """Whether an input or a value eager computes is a float NaN or infinity."""
    return _eager_holds(graph, inputs, lambda v: v.is_floating_point() and not bool(torch.isfinite(v).all()))


def _judge_outputs(graph: Graph, types: dict, backend: Backend, result, eager: list, ref64: list, tainted: dict,
                   check_strides: bool, flushed=None, widened=None, invalid=None, approximate=None, rounded=None,
                   scalar=None, faithful=None, rule=None, unflushed=None, ordered=None) -> CaseResult | None:
    """The mismatch verdict of the first wrong output; else a documented difference (a zero of
    the other sign, or, where the backend declares the semantic (`design_references`, each
    computed at its first call), an output that is right once denormals are flushed (`flushed`)
    or right as float32 intermediates make it (`widened`), or any output of a run that holds a
    NaN or an infinity under unsafe math (`invalid`); for any backend, wrong values as near
    float64 as runs that round other ways than eager (`rounded`, `rounding_runs`): ill-conditioned;
    wrong values only at positions that depend on an evaluation order the graph leaves open
    (`ordered`: ir.interp.order_dependent_positions): evaluation order);
    None when every output is right. Where eager on flushed inputs does not explain a wrong value
    of a fuser that flushes, the fuser run again with its flush turned off (`unflushed`:
    `unflushed_outputs`) may: Triton's flushed sin(x) / x of a subnormal x is 0, eager's on a
    flushed x is nan, and the unflushed kernel's is eager's 1. A wrong value that eager computes
    and the fused output does not, by the scalar arbiter (`scalar`: ir.interp.scalar_reference), is eager's own bug: the
    mismatch is eager's (`eager_fault`), unless each of eager's ops is within an ulp of float64 on
    its own operands there (`faithful`: ir.interp.ops_faithful_at): ill-conditioned. A wrong value that a known wrong rule computes exactly
    (`rule`: explain.explaining_rule: a float scalar converted to the integer tensor's dtype, a
    0-d integer tensor that widens the op) is that rule's bug, whichever op showed it."""
    reduced = reduction_sizes(graph, types)
    documented = None
    for i, name in enumerate(graph.outputs):
        fused = result.outputs[i] if i < len(result.outputs) else None
        what = f"output {i} ({name})"
        mismatch = compare_output(i, fused, eager[i], ref64[i], reduced[name], check_strides)
        if (mismatch and name in tainted and isinstance(fused, torch.Tensor) and fused.dtype == eager[i].dtype
                and fused.shape == eager[i].shape):
            # Undefined behaviour upstream (float->int of NaN/inf) or a reduction whose result its
            # order decides: only the type is defined.
            documented = documented or verdict.documented(backend.name, Difference(tainted[name]), what,
                                                          mismatch.detail)
            continue
        if mismatch and flushed is not None:
            references = flushed()
            if references and not compare_output(i, fused, *nearer_references(
                    fused, eager[i], ref64[i], [(run[0][i], run[1][i]) for run in references]), reduced[name]):
                documented = documented or verdict.documented(backend.name, Difference.DENORMAL_FLUSH, what,
                                                              f"{mismatch.detail}; right once fp32 denormals flush")
                continue
            plain = unflushed() if unflushed is not None else []
            if plain and not compare_output(i, plain[i], eager[i], ref64[i], reduced[name]):
                documented = documented or verdict.documented(
                    backend.name, Difference.DENORMAL_FLUSH, what,
                    f"{mismatch.detail}; the fuser's own result is right where it does not flush")
                continue
        if mismatch and widened is not None and mismatch.kind in ("values", "nan-inf"):
            wide = widened()
            if wide and not compare_output(i, fused, wide[i], ref64[i], reduced[name]):
                documented = documented or verdict.documented(backend.name, Difference.FP32_INTERMEDIATES, what,
                                                              f"{mismatch.detail}; right with float32 intermediates")
                continue
        if mismatch and invalid is not None and mismatch.kind in ("values", "nan-inf"):
            if invalid():
                documented = documented or verdict.documented(
                    backend.name, Difference.UNSAFE_MATH, what, f"{mismatch.detail}; eager's run holds a NaN or an infinity")
                continue
        if mismatch and approximate is not None and mismatch.kind == "values" and _near(fused, ref64[i], approximate()):
            documented = documented or verdict.documented(
                backend.name, Difference.APPROXIMATE_MATH, what,
                f"{mismatch.detail}; within {approximate():g} of float64, as approximate math gives")
            continue
        if mismatch and ordered is not None and mismatch.kind in ("values", "nan-inf") \
                and only_where(fused, eager[i], ordered().get(name), judged=lambda patched: compare_output(
                    i, patched, eager[i], ref64[i], reduced[name]) is None):
            documented = documented or verdict.documented(
                backend.name, Difference.EVALUATION_ORDER, what,
                f"{mismatch.detail}; only where a value overflows in some order of evaluation")
            continue
        if mismatch and rounded is not None and mismatch.kind in ("values", "nan-inf"):
            runs = rounded()
            if runs and not compare_output(i, fused, nearest_run(fused, [eager[i], *(r[i] for r in runs)]), ref64[i],
                                           reduced[name]):
                documented = documented or verdict.documented(
                    backend.name, Difference.ILL_CONDITIONED, what,
                    f"{mismatch.detail}; as near float64 as a run that rounds other ways than eager")
                continue
        if mismatch:
            # A known wrong rule that computes the fused value exactly is the fuser's, before any
            # blame of eager: the scalar arbiter ranks a 0-d int32 beside an int8 tensor like a
            # dimensioned one, so it sided with NNC's lt of int32 INT_MAX and int8 0.
            named = rule(i, fused, reduced[name]) if rule is not None and mismatch.kind in ("values", "nan-inf") else ""
            if not named and scalar is not None and mismatch.kind in ("values", "nan-inf") \
                    and eager_fault(fused, eager[i], lambda positions: scalar(i, positions)):
                if faithful is not None and faithful(i, differing(fused, eager[i])):
                    # No op of eager is off by more than an ulp on its own operands: the graph
                    # amplifies a last-bit rounding (eager's atan2 underflowing to 0, libm's to the
                    # smallest denormal, then atan2(v, v)): neither is wrong.
                    documented = documented or verdict.documented(
                        backend.name, Difference.ILL_CONDITIONED, what,
                        f"{mismatch.detail}; each of eager's ops is within an ulp of float64 on its own operands")
                    continue
                return verdict.mismatched(EAGER_FAULT, mismatch, what, f"{result.context}\n\n{EAGER_FAULT_NOTE}",
                                          output=i)
            return verdict.mismatched(backend.name, mismatch, what, result.context, output=i, rule=named)
        sign = documented is None and signed_zero_difference(fused, eager[i], ref64[i])
        if sign:
            documented = verdict.documented(backend.name, Difference.SIGNED_ZERO, what, sign)
    return documented


def only_where(fused, eager: torch.Tensor, positions, judged=None) -> bool:
    """Whether `fused` differs from eager (beyond the oracle's tolerance, NaNs equal; exactly, for
    integers and bools: a comparison reads an order-dependent value) only at `positions` (a bool
    mask of eager's shape; None: nowhere). With `judged` (the oracle's own test of an output), a
    difference elsewhere counts only where `fused` with eager's values put at `positions` still
    fails it: where eager's value is the wrong one there (a linear's denormal sum that eager's
    cuBLAS call flushes and float64 keeps, beside terms that overflow in some order), that
    position needs no order to explain it."""
    if positions is None or not (isinstance(fused, torch.Tensor) and fused.shape == eager.shape
                                 and fused.dtype == eager.dtype):
        return False
    if eager.is_floating_point():
        a, e = fused.detach().cpu().double(), eager.detach().cpu().double()
        differ = ~torch.isclose(a, e, rtol=RTOL[eager.dtype], atol=ATOL[eager.dtype], equal_nan=True)
    else:
        differ = fused.detach().cpu() != eager.detach().cpu()
    mask = torch.broadcast_to(positions.cpu(), differ.shape)
    if not bool((differ & mask).any()):
        return False
    if not bool((differ & ~mask).any()):
        return True
    if judged is None:
        return False
    patched = fused.detach().clone()
    patched[mask.to(patched.device)] = eager.detach()[mask.to(eager.device)].to(patched.device)
    return judged(patched)


# Where the scalar arbiter finds eager's value wrong and the fused one right, the mismatch is
# eager's (verdict.EAGER_FAULT): a bug of ATen's vectorized kernels, or of a shortcut it takes for a
# number operand, reported to PyTorch, never to the fuser.
EAGER_FAULT_NOTE = ("attributed to eager: computed from one-element inputs (ATen's scalar loop, without its "
                    "shortcuts for number operands), float64 agrees with the fused output and not with eager's, "
                    "whose kernel is wrong here")
# How many wrong elements the scalar arbiter recomputes.
SCALAR_CHECKS = 8


def differing(fused: torch.Tensor, eager: torch.Tensor) -> list[int]:
    """The flat positions (the first SCALAR_CHECKS) where a floating fused output differs from
    eager's beyond the oracle's tolerance."""
    a, e = fused.detach().cpu().double().flatten(), eager.detach().cpu().double().flatten()
    differ = (~torch.isclose(a, e, rtol=RTOL[eager.dtype], atol=ATOL[eager.dtype], equal_nan=True)).nonzero().flatten()
    return differ[:SCALAR_CHECKS].tolist()


def eager_fault(fused, eager: torch.Tensor, scalar) -> bool:
    """Whether eager, not the fuser, is wrong: at the elements where they differ (the first
    SCALAR_CHECKS), the scalar arbiter (`scalar(positions)`, None where it cannot judge) agrees
    with the fused value and not with eager's."""
    if not (isinstance(fused, torch.Tensor) and fused.shape == eager.shape and fused.dtype == eager.dtype
            and eager.is_floating_point()):
        return False
    a, e = fused.detach().cpu().double().flatten(), eager.detach().cpu().double().flatten()
    positions = differing(fused, eager)
    references = scalar(positions) if positions else None
    if not references:
        return False
    r = torch.stack([t.double().reshape(()) for t in references])
    close = lambda x: torch.isclose(x[positions], r, rtol=RTOL[eager.dtype], atol=ATOL[eager.dtype],  # noqa: E731
                                    equal_nan=True)
    return bool(close(a).all() and not close(e).any())


def _near(fused, ref64, rtol: float) -> bool:
    """Whether a floating output is within `rtol` of float64 everywhere (NaNs and infinities where
    float64 has them, as the output's dtype holds float64's value: exp(89) is an infinity in
    float32, 4.5e38 in float64)."""
    if not (isinstance(fused, torch.Tensor) and isinstance(ref64, torch.Tensor) and fused.is_floating_point()
            and fused.shape == ref64.shape):
        return False
    reference = ref64.to(fused.device).to(fused.dtype).double()
    return bool(torch.isclose(fused.double(), reference, rtol=rtol, atol=0.0, equal_nan=True).all())


def unflushed_outputs(backend: Backend, graph: Graph, options: Options, inputs: list) -> list:
    """The fuser's outputs with its documented flush of denormals turned off
    (`Backend.options_without_flush`), where eager's run holds an fp32 denormal for it to flush: a
    float32 value, or a bfloat16 one, which a fuser computes in float32, whose exponent range it
    shares (Triton's atan2(x, x) of a bf16 subnormal x is atan2(0, 0)); [] where it does not, or
    no setting turns the flush off."""
    other = backend.options_without_flush(options)
    tiny = torch.finfo(torch.float32).tiny
    if other is None or not _eager_holds(graph, inputs, lambda v: v.dtype in FP32_RANGE
                                         and bool(((v != 0) & (v.abs() < tiny)).any())):
        return []
    return list(backend.compile(graph, other).run(inputs, None).outputs)


def _holds_double_denormal(graph: Graph, inputs: list) -> bool:
    """Whether an input or a value eager computes is a float64 tensor holding a denormal."""
    tiny = torch.finfo(torch.float64).tiny
    return _eager_holds(graph, inputs, lambda v: v.dtype == torch.float64 and bool(((v != 0) & (v.abs() < tiny)).any()))


def flushed_references(graph: Graph, inputs: list, style: FlushStyle) -> list[tuple[list, list]] | None:
    """(eager, float64) runs on the inputs with their fp32 denormals flushed as a fuser of this
    `style` may flush by design, one per way it may: what it must match, element by element
    (`oracle.nearer_references`). Eager runs on CPU under FTZ/DAZ, so that its intermediates
    flush as a fuser's do, the results brought back to the inputs' device. DAZ_FTZ: x86's DAZ
    reads float64 denormals as zero too. TRITON_FP32: as Triton flushes (`flushed_run`,
    as_triton): eager's CUDA kernels do not flush (Triton's exp2 -> logical_and of a denormal
    result is False, and eager CUDA on flushed inputs said True). A graph whose eager run holds a
    float64 denormal (Triton flushes fp32 only, and x86's FTZ/DAZ both), or one CPU eager fails
    on, runs where its inputs are, on flushed inputs. Beside it, for TRITON_FP32, the run that
    flushes only where a math-library call reads or writes (`math_call_run`). None when eager
    fails, or for FlushStyle.NONE (a fuser that does not flush)."""
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    on_cpu = [x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs]
    if style == FlushStyle.DAZ_FTZ:
        routes = [(on_cpu, True, False)]  # (inputs, FTZ/DAZ, as Triton flushes)
    elif style == FlushStyle.TRITON_FP32:
        routes = [] if _holds_double_denormal(graph, inputs) else [(on_cpu, True, True)]
        routes.append((inputs, False, False))
    else:
        return None
    back = lambda outs: [o.to(device) if isinstance(o, torch.Tensor) else o for o in outs]  # noqa: E731
    for where, daz, as_triton in routes:
        try:
            eager, ref64 = flushed_run(graph, where, daz=daz, as_triton=as_triton)
        except Exception:
            continue
        runs = [(back(eager), back(ref64))]
        if style == FlushStyle.TRITON_FP32:
            try:
                runs.append(math_call_run(graph, inputs))
            except Exception:
                pass
        return runs
    return None


def math_call_run(graph: Graph, inputs: list) -> tuple[list, list]:
    """Eager and float64 with fp32 denormals flushed only where an op Triton computes by a
    math-library call reads or writes them (`Op.math_call`): on the H200, x * rsqrt(x) of a bf16
    denormal x is inf (rsqrt flushes x, the product reads it as it is), which neither the run
    that flushes every arithmetic read (nan) nor the plain run (1e-19) gives."""
    eager, _ = run_eager(graph, inputs, flush_math_calls=True)
    ref64, _ = run_eager(graph, inputs, upcast=True, flush_math_calls=True)
    return eager, ref64


def flushed_run(graph: Graph, inputs: list, *, daz: bool, as_triton: bool = False) -> tuple[list, list]:
    """Eager on `inputs` with their denormals flushed, under the CPU's FTZ/DAZ where `daz` (so that
    intermediates flush too), and float64 on the flushed inputs. as_triton: the flush Triton does,
    the inputs as they are, flushed where arithmetic reads them (DAZ) and not where comparisons
    do (fuzzfuse.ir.interp.interpret, flush_as_triton): tan(x) == x is False for a denormal x on
    the H200, which flushing x itself would make True."""
    flushed = [flush_denormals(x, doubles=daz) for x in inputs]
    try:
        torch.set_flush_denormal(daz)
        eager, _ = run_eager(graph, inputs if as_triton else flushed, flush_as_triton=as_triton)
    finally:
        torch.set_flush_denormal(False)
    ref64, _ = run_eager(graph, flushed, upcast=True)
    return eager, ref64


@dataclass
class RunCosts:
    """What one worker has measured of a backend, as moving averages: the seconds of a new case
    (drawing the graph, the eager and float64 references, compiling, running, comparing) and of
    one more input set of a graph already compiled (fresh inputs, eager, the run, the comparison)."""

    new_case: float = 0.0
    per_set: float = 0.0

    def extra_sets(self, reuses_compiled: bool) -> int:
        """As many extra sets as take about EXTRA_SHARE of a new case's seconds: many where
        compiling dominates (Inductor, nvFuser), a few where drawing and checking a graph cost
        several runs (NNC), none where a run compiles again. A backend that declares reusable code
        gets at least one, so that its per-set cost is measured."""
        ratio = EXTRA_SHARE * self.new_case / self.per_set if self.per_set > 0 else 0.0
        return max(int(reuses_compiled), min(MAX_EXTRA_SETS, int(ratio)))


# Extra input sets take about this share of a new case's seconds, at most MAX_EXTRA_SETS a graph.
EXTRA_SHARE = 1.0
MAX_EXTRA_SETS = 16
SMOOTHING = 0.3
_costs: dict[str, RunCosts] = {}


def extra_input_sets(graph: Graph, backend: Backend, compiled: Compiled, first: CaseResult,
                     check_strides: bool, generate_seconds: float = 0.0) -> CaseResult:
    """Compile once, run many: the graph that passed on its own inputs runs, compiled, on extra
    input sets (fresh values, special values elsewhere, the narrow-trigger distributions; new sizes
    of the same rank where the backend reruns them), each judged like a case. The first failing
    set is the case's result, carrying its own graph (its inputs' seeds), so that it replays; sets
    whose eager run fails (undefined on those values) are skipped. first.input_sets counts them.

    A set is judged first with eager as its own arbiter, which is stricter than the float64 one
    (every difference from eager counts): a pass there is a pass, and the float64 run is made only
    for a set that fails it."""
    costs = _costs.setdefault(backend.name, RunCosts())
    timings = first.timings
    costs.new_case = _smoothed(costs.new_case, generate_seconds + sum(timings.values()))
    if not costs.per_set:  # until an extra set is measured: the first run's own share
        reran = timings.get("backend", 0.0) - (first.compile_seconds if backend.reuses_compiled else 0.0)
        costs.per_set = timings.get("eager", 0.0) / 2 + timings.get("compare", 0.0) + max(reran, 0.0)
    for k in range(1, costs.extra_sets(backend.reuses_compiled) + 1):
        start = time.perf_counter()
        try:
            variant, inputs = _input_set(graph, k, backend, compiled)
            eager, tainted = run_eager(variant, inputs)
        except Exception:  # eager is undefined here (an integer division by zero): not a case
            continue
        try:
            result = compiled.run(inputs)
        except Unsupported:
            break
        except BackendError as e:
            failure = verdict.crashed(backend.name, e.stage, e.cause, "".join(traceback.format_exception(e.cause)),
                                      context=e.context, sticky=e.sticky)
            return _extra_failure(failure, first, variant, k, not _same_specs(graph, variant))
        types = variant.infer_types()
        if _judge_outputs(variant, types, backend, result, eager, eager, tainted, check_strides):
            try:
                ref64, _ = run_eager(variant, inputs, upcast=True)
            except Exception:
                continue
            failure = _judge_outputs(variant, types, backend, result, eager, ref64, tainted, check_strides,
                                     *design_references(backend, compiled.options, variant, inputs, eager),
                                     rounded=_once(lambda: rounding_runs(variant, inputs, eager)),
                                     ordered=_once(lambda: order_dependent_positions(variant, inputs)),
                                     **wrong_value_checks(backend, compiled.options, variant, inputs))
            if failure:
                return _extra_failure(failure, first, variant, k, not _same_specs(graph, variant))
        first.input_sets += 1
        first.reshaped_sets += not _same_specs(graph, variant)
        costs.per_set = _smoothed(costs.per_set, time.perf_counter() - start)
    return first


def _smoothed(average: float, seconds: float) -> float:
    return seconds if not average else average + SMOOTHING * (seconds - average)


def _input_set(graph: Graph, k: int, backend: Backend, compiled: Compiled) -> tuple[Graph, list]:
    """Extra set k and its inputs: every other set on new sizes and every third on new strides,
    where the backend reruns those and its compiled code accepts the variant; else new values
    only (the same sizes and strides always run)."""
    resized, restrided = backend.reruns_new_sizes and k % 2 == 0, backend.reruns_new_strides and k % 3 == 0
    for variant in (input_set(graph, k, resized=resized, restrided=restrided), input_set(graph, k)):
        inputs = make_inputs(variant, backend.device)
        if _same_specs(graph, variant) or compiled.accepts(variant, inputs):
            return variant, inputs
    raise AssertionError("input_set(graph, k) keeps every size and stride")


def _same_specs(a: Graph, b: Graph) -> bool:
    """The same sizes and layouts (values aside)."""
    def specs(g: Graph) -> list:
        return [(i.shape, i.layout) if isinstance(i, TensorInput) else None for i in g.inputs]
    return specs(a) == specs(b)


def _extra_failure(failure: CaseResult, first: CaseResult, variant: Graph, k: int, reshaped: bool) -> CaseResult:
    failure.timings, failure.fused, failure.evidence = first.timings, first.fused, first.evidence
    failure.compile_seconds, failure.graph, failure.input_sets = first.compile_seconds, variant, first.input_sets + 1
    failure.reshaped_sets = first.reshaped_sets + reshaped
    failure.detail = f"{failure.detail}\n(extra input set {k} of a graph that passed on its own inputs)"
    return failure


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
