"""Which type guard sent a scripted graph to its `fallback_function`, and what made the value it
rejected.

The profiling executor specializes a graph on the types (dtype, sizes, strides) its profiling runs
saw and guards each fusion group with them (`prim::TypeCheck` for NNC, `prim::oneDNNFusionGuard`
for oneDNN Graph). A fallback although everything fused means one guard saw another type than the
profile: most often a fused kernel's output whose strides differ from eager's (eager's identity cast
returns its sliced input, and `empty_like` keeps a size-1 dimension's stride; NNC allocates its
outputs contiguous), which the next group's guard compares even where a dimension has one
element. Which graph split the groups apart (a mean NNC leaves out, a remainder of an int32) is
incidental: the bug is the guard's property and what made the rejected value, so that is what
names it (`FailedGuard.message`, read back by fuzzfuse.identity).

The guard is found by running the specialized graph once more in the TorchScript interpreter with
every guarded value added to its outputs, and comparing each against the type its guard holds.
"""
from __future__ import annotations

import re
import torch

from .findings import AN_INPUT, FUSED_OUTPUT, FailedGuard

GUARD_KINDS = ("prim::TypeCheck", "prim::oneDNNFusionGuard")
GROUP_KINDS = ("prim::TensorExprGroup", "prim::oneDNNFusionGroup")


def failed_guard(inputs: list, input_makers: list[str] | None = None) -> FailedGuard | None:
    """The first guard of the graph TorchScript last ran that rejects its value on `inputs` (the
    call that ran `fallback_function`); None where no guard rejects one (the fallback came from
    elsewhere: autodiff's). `input_makers`: what made each of `inputs`, where another graph did
    (a backward's saved values, made by its forward: `output_makers`); else each is "an input"."""
    graph = torch.jit.last_executed_optimized_graph()
    if graph is None:
        return None
    graph = graph.copy()
    # aot_autograd's scripted forward takes its module first (unused once scripted), then the
    # tensors alone.
    for param in reversed(list(graph.inputs())):
        if param.type().kind() == "ClassType" and not param.uses():
            graph.eraseInput(param.offset())
    if len(list(graph.inputs())) != len(inputs):
        input_makers = None
        inputs = [x for x in inputs if isinstance(x, torch.Tensor)]
        if len(list(graph.inputs())) != len(inputs):
            return None
    checked = [(value, expected) for kind in GUARD_KINDS for node in graph.findAllNodes(kind, True)
               if "types" in node.attributeNames() for value, expected in zip(node.inputs(), node.tys("types"))]
    if not checked or any(v.node().owningBlock() != graph.block() and v.node().kind() != "prim::Param"
                          for v, _ in checked):
        return None  # a guard inside a block: its value need not exist on the path that ran
    for value, _ in checked:
        graph.registerOutput(value)
    try:
        outs = torch._C._jit_interpret_graph(graph, tuple(inputs))
    except Exception:  # the graph's own failure is the case's, reported where it ran
        return None
    outs = outs if isinstance(outs, tuple) else (outs,)
    for (value, expected), got in zip(checked, outs[len(outs) - len(checked):]):
        if not isinstance(got, torch.Tensor):
            continue
        prop = _differing(expected, got)
        if prop:
            return FailedGuard(prop, _made_by(value, input_makers))
    return None


def _differing(expected, got: torch.Tensor) -> str:
    if expected.dtype() is not None and expected.dtype() != got.dtype:
        return "dtype"
    sizes = expected.sizes()
    if sizes is not None and list(sizes) != list(got.shape):
        return "sizes"
    strides = expected.strides()
    if strides is not None and list(strides) != list(got.stride()):
        return "strides"
    return ""


def output_makers(graph) -> list[str]:
    """What made each output of a specialized graph (the values of the tuple or list it returns),
    as `failed_guard` names a guarded value's maker: how a backward's guard on a value its forward
    saved names the forward's kernel that made it."""
    returned = list(graph.outputs())
    if len(returned) == 1 and returned[0].node().kind() in ("prim::TupleConstruct", "prim::ListConstruct"):
        returned = list(returned[0].node().inputs())
    return [_made_by(value) for value in returned]


def _made_by(value, input_makers: list[str] | None = None) -> str:
    """What made a guarded value: a fusion group's output, also seen through views the interpreter
    ran after it (an unsqueeze keeps its strides); else the op that made it, or an input (what
    `input_makers` says made it, where given). A group's output reaches the guard through the
    `prim::If` that chose between the group and its fallback."""
    made_by = value.node().kind()
    while True:
        node = value.node()
        if node.kind() == "prim::Param":
            if made_by != "prim::Param":
                return made_by
            return input_makers[value.offset()] if input_makers else AN_INPUT
        if node.kind() == "prim::If":
            inner = list(next(node.blocks()).outputs())[value.offset()]
            if inner.node().kind().startswith(GROUP_KINDS):
                return FUSED_OUTPUT
            return inner.node().kind()
        if not _is_view(node):
            return made_by
        value = next(node.inputs())


def _is_view(node) -> bool:
    """Whether an op's output is always a view of its first input (its schema says it aliases it,
    and it is no conversion, which aliases only where it converts nothing)."""
    try:
        schema = node.schema()
    except RuntimeError:
        return False
    return node.kind() != "aten::to" and bool(_ALIASED_RESULT.search(schema))


_ALIASED_RESULT = re.compile(r"^[\w:.]+\(Tensor\(a\) self.*\) -> Tensor\(a\)$")
