"""Attribute a failure to the component that owns it before blaming the fuser.

A fuser sits behind a frontend: TorchScript's scripting, peephole passes, profiling executor and
autodiff for NNC and oneDNN Graph; aot_autograd's decompositions for the aot routes; dynamo and
aot_autograd for Inductor. A case that fails the same way with the fuser taken out is the frontend's
bug, and filing it under the fuser would send a maintainer to the wrong code.

A backend declares its `reference_route`: the built-in backend that runs the same frontend, with
the same warm-up, without the fuser (torchscript:nnc -> torchscript:frontend; aot:nnc ->
aot:frontend -> aot:eager; inductor -> dynamo:aot_eager -> dynamo:eager). A failing case is re-run
there, in the same worker; when it fails the same way (the same signature but for the backend),
the signature is relabelled with the route's name, so the campaign counts it apart from the fuser.
Routes chain: the route's own result has been attributed already, so the deepest route that still
fails the same way names the component. Only failures pay for the re-run.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .backends import Backend, Unavailable
from .oracle import Signature
from .verdict import Attribution, CaseResult, Outcome

# The outcomes a reference route can explain: the worker's own verdicts that blame the fuser.
ATTRIBUTED = (Outcome.CRASH, Outcome.MISMATCH)


def _same_failure(ours: Signature | None, theirs: Signature | None) -> bool:
    """The same signature but for the backend that produced it."""
    return ours is not None and theirs is not None and replace(theirs, backend=ours.backend) == ours


def attribute(backend: Backend, result: CaseResult, load: Callable[[str], Backend],
              rerun: Callable[[Backend], CaseResult]) -> CaseResult:
    """`result` (a run_case result on `backend`), relabelled to the backend's reference route when
    `rerun(route)` fails the same way there (`load`: a backend by name, the worker's own cache).
    The result's `attribution` says what the route did."""
    if result.outcome not in ATTRIBUTED or backend.reference_route is None:
        return result
    if result.restart_worker:  # a CUDA fault left this process unusable: the route cannot run here
        return replace(result, attribution=Attribution(backend.reference_route, None,
                                                       "not re-run: a CUDA fault left the worker's context unusable"))
    try:
        route = load(backend.reference_route)
    except Unavailable as e:
        return replace(result, attribution=Attribution(backend.reference_route, None, str(e)))
    theirs = rerun(route)
    same = _same_failure(result.signature, theirs.signature)
    record = Attribution(route.name, theirs.outcome, theirs.detail[:500], same, theirs.signature, theirs.attribution)
    if not same:
        return replace(result, attribution=record)
    # The route's signature already carries the deepest route that fails the same way.
    note = (f"\n\nattributed to {theirs.signature.backend}: {route.name} (the same frontend without "
            f"{backend.name}'s fuser) fails the same way")
    return replace(result, signature=theirs.signature, detail=result.detail + note, attribution=record)
