"""Seeded bugs for the detection benchmark, loaded as `dynamo:benchmarks.seeded_bugs:<fn>`.

Each backend is a real FX pass over the graph dynamo traced, built the way
tests/buggy_dynamo_backends.py is, and each is wrong on one narrow trigger only: one op on one
dtype, one reduction over one kind of layout, one special value in one op, one op pair, one
three-reduction pattern, one output layout. Every other graph runs as traced, so a failure is the
seeded bug's. `MINIMAL_OPS` says how small the reduced repro of each can get (the benchmark's
"reduced to its minimal trigger" target).
"""
import torch

# Off by 2^-7 relative: exactly representable in every float dtype, far beyond any rounding.
SCALE = 1.0078125


def _rewrite(gm: torch.fx.GraphModule, target, replacement) -> torch.fx.GraphModule:
    """Every call of `target` now calls `replacement` (same arguments)."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is target:
            node.target = replacement
    gm.recompile()
    return gm


def _rsqrt_half(x):
    out = torch.rsqrt(x)
    return out * SCALE if x.dtype == torch.float16 else out


def dtype_op(gm: torch.fx.GraphModule, example_inputs: list):
    """rsqrt on float16 is off by 2^-7 (a half-precision kernel with a bad constant)."""
    return _rewrite(gm, torch.rsqrt, _rsqrt_half).forward


def _strided_sum(x, dims, keepdim=False):
    """Sums over the innermost dim skip its last element when that dim is not unit-stride (a
    vectorized tail loop that assumes contiguity)."""
    last = x.dim() - 1
    wanted = {d % x.dim() for d in dims} if x.dim() else set()
    if last in wanted and x.stride(last) != 1 and x.size(last) > 1:
        return torch.sum(x.narrow(last, 0, x.size(last) - 1), dims, keepdim=keepdim)
    return torch.sum(x, dims, keepdim=keepdim)


def layout_reduction(gm: torch.fx.GraphModule, example_inputs: list):
    """sum over the innermost dim of a tensor that is not contiguous along it drops one element."""
    return _rewrite(gm, torch.sum, _strided_sum).forward


def special_op(gm: torch.fx.GraphModule, example_inputs: list):
    """maximum lowered to fmax: a NaN in one operand is dropped instead of propagated."""
    return _rewrite(gm, torch.maximum, torch.fmax).forward


def op_pair(gm: torch.fx.GraphModule, example_inputs: list):
    """An algebraic "simplification" exp(log(x)) -> x, wrong wherever log is NaN (x < 0)."""
    for node in list(gm.graph.nodes):
        if (node.op == "call_function" and node.target is torch.exp and isinstance(node.args[0], torch.fx.Node)
                and node.args[0].op == "call_function" and node.args[0].target is torch.log):
            node.replace_all_uses_with(node.args[0].args[0])
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm.forward


REDUCTIONS = (torch.sum, torch.mean, torch.amax, torch.amin, torch.var, torch.std, torch.prod)


def _off(x):
    if x.dtype == torch.bool:
        return x
    return x * SCALE + 1 if x.is_floating_point() else x + 1


def three_reductions(gm: torch.fx.GraphModule, example_inputs: list):
    """A reduction that consumes (through any path) the results of two other reductions comes out
    wrong: a scheduler that fuses three reductions into one kernel mis-indexes the last."""
    upstream: dict = {}  # node -> the reductions it depends on
    for node in list(gm.graph.nodes):
        deps = set().union(*(upstream.get(a, set()) for a in node.all_input_nodes)) if node.all_input_nodes else set()
        if node.op == "call_function" and node.target in REDUCTIONS:
            if len(deps) >= 2:
                with gm.graph.inserting_after(node):
                    wrong = gm.graph.call_function(_off, (node,))
                node.replace_all_uses_with(wrong, delete_user_cb=lambda user: user is not wrong)
            deps = deps | {node}
        upstream[node] = deps
    gm.recompile()
    return gm.forward


def _dense(x):
    return x.contiguous() if isinstance(x, torch.Tensor) else x


def output_stride(gm: torch.fx.GraphModule, example_inputs: list):
    """Outputs computed by add come back contiguous whatever layout eager gives them (a kernel
    that allocates its output without propagating the inputs' strides)."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    for producer in [a for a in output.all_input_nodes if a.op == "call_function" and a.target is torch.add]:
        with gm.graph.inserting_before(output):
            dense = gm.graph.call_function(_dense, (producer,))
        output.replace_input_with(producer, dense)
    gm.recompile()
    return gm.forward


# bug -> the fewest ops a graph needs to show it.
MINIMAL_OPS = {"dtype_op": 1, "layout_reduction": 1, "special_op": 1, "op_pair": 2, "three_reductions": 3,
               "output_stride": 1}
