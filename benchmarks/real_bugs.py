"""Bugs nobody here wrote: triggers of fixed (or confirmed) upstream fuser bugs, re-created as
torch.compile backends, loaded as `dynamo:benchmarks.real_bugs:<bug>` (issue 32).

Each backend is AOT autograd's aten graph with one FX rewrite: the op at the aten level as the
report names it, wrong only under the report's exact condition (a dtype, a layout, a size, a
constant, an op pattern) and computed as the report says the fuser computed it. Every other graph
runs as traced, so a failure is the re-created bug's, and `dynamo:aot_eager` (the same capture
without the rewrite) is the clean reference. `SOURCES` names the report each came from (its
status when read, 2026-12); `MINIMAL_OPS` how small its trigger is, in fuzzfuse ops.

The set was written from the reports before the generator was changed for it (issue 32), so
what a campaign finds here measures the generator, not the bugs it was tuned beside.
"""
from __future__ import annotations

import signal

import torch
from torch._dynamo.backends.common import aot_autograd

aten = torch.ops.aten
LOW_PRECISION = (torch.float16, torch.bfloat16)
TRIG = (aten.sin.default, aten.cos.default, aten.tan.default)
ROUNDING = (aten.floor.default, aten.ceil.default, aten.round.default, aten.trunc.default)
COMPARISONS = tuple(getattr(aten, op).Tensor for op in ("eq", "ne", "lt", "le", "gt", "ge")) + \
    tuple(getattr(aten, op).Scalar for op in ("eq", "ne", "lt", "le", "gt", "ge"))
REDUCTIONS = (aten.sum.dim_IntList, aten.mean.dim, aten.amax.default, aten.amin.default, aten.var.correction,
              aten.std.correction, aten.prod.dim_int)


def aten_backend(rewrite):
    """A torch.compile backend: AOT autograd's aten graph after `rewrite(graph)`, run as traced."""
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        rewrite(gm.graph)
        gm.graph.eliminate_dead_code()
        gm.recompile()
        return gm.forward
    return aot_autograd(fw_compiler=compile_graph)


def _calls(graph: torch.fx.Graph, *targets) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if n.op == "call_function" and n.target in targets]


def _retarget(graph: torch.fx.Graph, targets, replacement) -> None:
    """Every call of one of `targets` now calls `replacement` (same arguments)."""
    for node in _calls(graph, *targets):
        node.target = replacement


def _val(node) -> torch.Tensor | None:
    """The fake tensor AOT autograd recorded for a node's result (None: not a tensor node)."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _feed(graph: torch.fx.Graph, consumer: torch.fx.Node, producer: torch.fx.Node, fn, *args) -> None:
    """`consumer` reads `fn(*args)` where it read `producer`."""
    with graph.inserting_before(consumer):
        replaced = graph.call_function(fn, args)
    consumer.replace_input_with(producer, replaced)


def _replace(graph: torch.fx.Graph, node: torch.fx.Node, fn, *args) -> None:
    """Every reader of `node` reads `fn(*args)` instead."""
    with graph.inserting_before(node):
        replaced = graph.call_function(fn, args)
    node.replace_all_uses_with(replaced)


def _reduced_count(x: torch.Tensor, dims) -> int:
    dims = range(x.dim()) if dims is None or len(dims) == 0 else dims
    count = 1
    for d in dims:
        count *= x.size(d) if x.dim() else 1
    return count


# ---- NaN and special values --------------------------------------------------------------------
def _clamp_fmax(x, lo=None, hi=None):
    if not x.is_floating_point():
        return aten.clamp.default(x, lo, hi)
    out = x
    if lo is not None:
        out = torch.fmax(out, torch.tensor(lo, dtype=x.dtype))
    if hi is not None:
        out = torch.fmin(out, torch.tensor(hi, dtype=x.dtype))
    return out


clamp_scalar_nan = aten_backend(lambda g: _retarget(g, [aten.clamp.default], _clamp_fmax))
clamp_scalar_nan.__doc__ = "clamp with number bounds lowered to fmax/fmin: a NaN of the input is dropped."


def _maximum_second_nan(a, b):
    out = torch.maximum(a, b)
    return torch.where(torch.isnan(a) & ~torch.isnan(b), b.to(out.dtype), out) if out.is_floating_point() else out


maximum_first_nan = aten_backend(lambda g: _retarget(g, [aten.maximum.default], _maximum_second_nan))
maximum_first_nan.__doc__ = "maximum propagates a NaN from its second operand only."


def _argmax_skip_nan(x, dim=None, keepdim=False):
    if x.is_floating_point():
        x = torch.where(torch.isnan(x), torch.tensor(float("-inf"), dtype=x.dtype), x)
    return aten.argmax.default(x, dim, keepdim)


def _argmin_skip_nan(x, dim=None, keepdim=False):
    if x.is_floating_point():
        x = torch.where(torch.isnan(x), torch.tensor(float("inf"), dtype=x.dtype), x)
    return aten.argmin.default(x, dim, keepdim)


def _argmax_argmin(graph):
    _retarget(graph, [aten.argmax.default], _argmax_skip_nan)
    _retarget(graph, [aten.argmin.default], _argmin_skip_nan)


argmax_nan = aten_backend(_argmax_argmin)
argmax_nan.__doc__ = "argmax/argmin skip NaN (eager returns the NaN's index): the C++ kernel's compare."


def _add_zero(graph):
    """add(x, 0) and add(x, zeros_like) become x: -0.0 + 0.0 is +0.0 in IEEE, x keeps -0.0."""
    for node in _calls(graph, aten.add.Tensor):
        x, other = node.args[0], node.args[1]
        zero = (isinstance(other, (int, float)) and other == 0) or \
            (isinstance(other, torch.fx.Node) and other.target in (aten.zeros_like.default,))
        out, xv = _val(node), _val(x)
        if zero and not node.kwargs.get("alpha") and out is not None and xv is not None and xv.dtype == out.dtype \
                and xv.shape == out.shape:
            _replace(graph, node, torch.clone, x)


add_zero_folded = aten_backend(_add_zero)
add_zero_folded.__doc__ = "x + 0 is folded to x, which keeps a -0.0 the addition would make +0.0."


# ---- reductions --------------------------------------------------------------------------------
def _var_zero_dof(x, dim=None, *, correction=None, keepdim=False):
    out = aten.var.correction(x, dim, correction=correction, keepdim=keepdim)
    dof = _reduced_count(x, dim) - (1 if correction is None else correction)
    return torch.zeros_like(out) if dof <= 0 and out.is_floating_point() else out


def _var_mean_zero_dof(x, dim=None, *, correction=None, keepdim=False):
    var, mean = aten.var_mean.correction(x, dim, correction=correction, keepdim=keepdim)
    dof = _reduced_count(x, dim) - (1 if correction is None else correction)
    return (torch.zeros_like(var) if dof <= 0 else var), mean


def _std_zero_dof(x, dim=None, *, correction=None, keepdim=False):
    out = aten.std.correction(x, dim, correction=correction, keepdim=keepdim)
    dof = _reduced_count(x, dim) - (1 if correction is None else correction)
    return torch.zeros_like(out) if dof <= 0 else out


def _zero_dof(graph):
    _retarget(graph, [aten.var.correction], _var_zero_dof)
    _retarget(graph, [aten.var_mean.correction], _var_mean_zero_dof)
    _retarget(graph, [aten.std.correction], _std_zero_dof)


var_zero_dof = aten_backend(_zero_dof)
var_zero_dof.__doc__ = "var/std/var_mean with no degrees of freedom (correction >= count) are 0, not NaN."


def _sum_fully_expanded(x, dims, keepdim=False, *, dtype=None):
    out = aten.sum.dim_IntList(x, dims, keepdim, dtype=dtype)
    if x.numel() > 1 and all(st == 0 for s, st in zip(x.shape, x.stride()) if s > 1):
        return out.reshape(-1)[:1]
    return out


expanded_sum_shape = aten_backend(lambda g: _retarget(g, [aten.sum.dim_IntList], _sum_fully_expanded))
expanded_sum_shape.__doc__ = "sum of an input broadcast along every dim (all strides 0) comes back of shape [1]."


def _var_multi_dim(x, dim=None, *, correction=None, keepdim=False):
    if dim is not None and len(dim) >= 2 and any(x.size(d) == 1 for d in dim):
        raise RuntimeError("INTERNAL ASSERT FAILED at \"csrc/ops/normalization.cpp\":78, please report a bug to "
                           "nvFuser. Invalid reduction axis: a broadcast axis of size 1 among the reduced axes of var")
    return aten.var.correction(x, dim, correction=correction, keepdim=keepdim)


var_size1_dims_crash = aten_backend(lambda g: _retarget(g, [aten.var.correction], _var_multi_dim))
var_size1_dims_crash.__doc__ = "var over several dims, one of them of size 1, fails an internal assert."


def _outer_and_inner(graph):
    """A reduction fed by another reduction, over the first and the last dim of a rank-3 or higher
    value with a dim kept between them, fails to compile."""
    for node in _calls(graph, *REDUCTIONS):
        source, out = node.args[0], _val(node.args[0])
        if not (isinstance(source, torch.fx.Node) and source.target in REDUCTIONS and out is not None):
            continue
        dims = node.args[1] if len(node.args) > 1 else None
        rank = out.dim()
        wanted = {d % rank for d in (dims if isinstance(dims, (list, tuple)) else [dims])} if dims is not None and \
            rank else set()
        if rank >= 3 and 0 in wanted and rank - 1 in wanted and len(wanted) < rank:
            node.target = _allocation_assert


def _allocation_assert(*args, **kwargs):
    raise RuntimeError("INTERNAL ASSERT FAILED at \"csrc/executor.cpp\":404, please report a bug with repro "
                       "script to NVFuser. Allocations must be based on constant integers for local memory.")


consecutive_reduction_crash = aten_backend(_outer_and_inner)
consecutive_reduction_crash.__doc__ = _outer_and_inner.__doc__


def _softmax_folded_sum(graph):
    """sum over a softmax's own dim is folded to exactly 1."""
    for node in _calls(graph, aten.sum.dim_IntList):
        source, dims = node.args[0], node.args[1]
        if isinstance(source, torch.fx.Node) and source.target is aten._softmax.default and dims is not None:
            rank = _val(source).dim()
            if {d % rank for d in dims} == {source.args[1] % rank}:
                node.target = _ones_of_sum


def _ones_of_sum(x, dims, keepdim=False, *, dtype=None):
    return torch.ones_like(aten.sum.dim_IntList(x, dims, keepdim, dtype=dtype))


softmax_sum_folded = aten_backend(_softmax_folded_sum)
softmax_sum_folded.__doc__ = _softmax_folded_sum.__doc__


def _scaled_softmax(graph):
    """softmax(x * c) for a number c is computed as exp(c * (x - max(x))) / sum: right for c > 0,
    an overflow to inf/inf = NaN for c < 0 once c * (x - max(x)) passes the dtype's exp range."""
    for node in _calls(graph, aten._softmax.default):
        mul = node.args[0]
        if isinstance(mul, torch.fx.Node) and mul.target is aten.mul.Tensor and isinstance(mul.args[1], (int, float)):
            node.args = (mul.args[0], mul.args[1], node.args[1], node.args[2])
            node.target = _softmax_of_scaled


def _softmax_of_scaled(x, scale, dim, half_to_float):
    wide = x.float() if x.dtype in LOW_PRECISION else x
    e = torch.exp(scale * (wide - wide.amax(dim, keepdim=True)))
    out = e / e.sum(dim, keepdim=True)
    return out if half_to_float else out.to(x.dtype)


softmax_scale_fold = aten_backend(_scaled_softmax)
softmax_scale_fold.__doc__ = _scaled_softmax.__doc__


def _cumsum_of_bool_cast(graph):
    """cumsum of a value cast to bool inside the graph returns bool (eager: int64)."""
    for node in _calls(graph, aten.cumsum.default):
        source = node.args[0]
        if isinstance(source, torch.fx.Node) and source.target is aten._to_copy.default and \
                source.kwargs.get("dtype") is torch.bool:
            node.target = _cumsum_as_bool


def _cumsum_as_bool(x, dim, *, dtype=None):
    return torch.cumsum(x, dim).to(torch.bool)


cumsum_bool_dtype = aten_backend(_cumsum_of_bool_cast)
cumsum_bool_dtype.__doc__ = _cumsum_of_bool_cast.__doc__


# ---- arithmetic lowerings ----------------------------------------------------------------------
def _div_mode(a, b, *, rounding_mode=None):
    out = aten.div.Tensor_mode(a, b, rounding_mode=rounding_mode)
    if not out.is_floating_point() or rounding_mode is None:
        return out
    wide = torch.float32 if out.dtype in LOW_PRECISION else out.dtype
    a_, b_ = (t.to(wide) if isinstance(t, torch.Tensor) else t for t in (a, b))
    if rounding_mode == "floor":  # floor(div_rn(a, b)): off by one where the quotient rounds up to an integer
        return torch.floor(a_ / b_).to(out.dtype)
    return torch.trunc(a_ * torch.reciprocal(torch.as_tensor(b_, dtype=wide))).to(out.dtype)


def _rounding_mode(mode: str):
    """A rewrite: divisions with this rounding mode go through _div_mode."""
    def rewrite(graph):
        for node in _calls(graph, aten.div.Tensor_mode):
            if node.kwargs.get("rounding_mode") == mode:
                node.target = _div_mode
    return rewrite


floor_div_rounded = aten_backend(_rounding_mode("floor"))
floor_div_rounded.__doc__ = "float floor division as floor(a / b): one too high where a / b rounds up to an integer."
trunc_div_reciprocal = aten_backend(_rounding_mode("trunc"))
trunc_div_reciprocal.__doc__ = "float trunc division as trunc(a * (1 / b)): off by one near integer quotients."


def _int_min_div(a, b, *, rounding_mode=None):
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype in (torch.int32, torch.int64) \
            and rounding_mode == "floor":
        if bool(((a == torch.iinfo(a.dtype).min) & (b == -1)).any()):
            signal.raise_signal(signal.SIGFPE)  # the hardware trap of INT_MIN / -1
    return aten.div.Tensor_mode(a, b, rounding_mode=rounding_mode)


int_min_floor_div = aten_backend(lambda g: _retarget(g, [aten.div.Tensor_mode], _int_min_div))
int_min_floor_div.__doc__ = "integer floor division of INT_MIN by -1 traps (SIGFPE kills the process)."


def _remainder_vectorized(a, b):
    out = torch.remainder(a, b)
    if not out.is_floating_point() or out.numel() == 0:
        return out
    lanes = 8 if out.dtype == torch.float64 else 16  # one AVX-512 vector
    body = out.numel() // lanes * lanes
    naive = a - torch.floor(a / b) * b
    in_body = torch.arange(out.numel()).reshape(out.shape) < body
    fixed = out.clone()
    fixed.copy_(torch.where(in_body, naive.to(out.dtype), out))
    return fixed


remainder_vectorized = aten_backend(lambda g: _retarget(g, [aten.remainder.Tensor, aten.remainder.Scalar],
                                                        _remainder_vectorized))
remainder_vectorized.__doc__ = ("float remainder in whole vectors (the elements before the scalar tail) as "
                                "a - floor(a / b) * b: NaN for an infinite divisor, wrong for large quotients.")


def _fmod_unrounded_scalar(x, other):
    if x.dtype in LOW_PRECISION and isinstance(other, float):
        return torch.fmod(x.float(), other).to(x.dtype)
    return aten.fmod.Scalar(x, other)


fmod_lowp_scalar = aten_backend(lambda g: _retarget(g, [aten.fmod.Scalar], _fmod_unrounded_scalar))
fmod_lowp_scalar.__doc__ = "fmod of fp16/bf16 by a float number uses the number unrounded (eager rounds it)."


def _round_half_away(x):
    if not x.is_floating_point():
        return torch.round(x)
    away = torch.sign(x) * torch.floor(x.abs() + 0.5)
    return torch.where((x - torch.trunc(x)).abs() == 0.5, away, torch.round(x))


round_half_away = aten_backend(lambda g: _retarget(g, [aten.round.default], _round_half_away))
round_half_away.__doc__ = "round sends halves away from zero (-8.5 -> -9), not to even."


# ---- dtypes ------------------------------------------------------------------------------------
def _cast_pair(graph):
    """A cast to fp16/bf16 and straight back to the wider dtype it came from is removed."""
    for node in _calls(graph, aten._to_copy.default):
        inner = node.args[0]
        if not (isinstance(inner, torch.fx.Node) and inner.target is aten._to_copy.default):
            continue
        source, mid, out = _val(inner.args[0]), _val(inner), _val(node)
        if None not in (source, mid, out) and mid.dtype in LOW_PRECISION and source.dtype == out.dtype \
                and out.dtype in (torch.float32, torch.float64):
            _replace(graph, node, torch.clone, inner.args[0])


cast_round_trip_elided = aten_backend(_cast_pair)
cast_round_trip_elided.__doc__ = _cast_pair.__doc__


def _signed_neg_users(graph):
    """neg of a uint8 value, read by an op whose result is not uint8, is read as a signed value."""
    for node in _calls(graph, aten.neg.default):
        if _val(node) is None or _val(node).dtype != torch.uint8:
            continue
        for user in list(node.users):
            if user.op == "call_function" and _val(user) is not None and _val(user).dtype != torch.uint8:
                _feed(graph, user, node, _signed_neg, node.args[0])


def _signed_neg(x):
    return torch.neg(x.to(torch.int32))


neg_uint8_signed = aten_backend(_signed_neg_users)
neg_uint8_signed.__doc__ = _signed_neg_users.__doc__


def _lowp_division_compared(graph):
    """A comparison reads a bf16/fp16 quotient before its rounding to the dtype (kept in fp32)."""
    for node in _calls(graph, *COMPARISONS):
        for arg in node.args:
            if isinstance(arg, torch.fx.Node) and arg.target is aten.div.Tensor and _val(arg) is not None \
                    and _val(arg).dtype in LOW_PRECISION:
                _feed(graph, node, arg, _div_fp32, *arg.args)


def _div_fp32(a, b):
    return torch.div(a.float() if isinstance(a, torch.Tensor) else a, b.float() if isinstance(b, torch.Tensor) else b)


lowp_div_compare = aten_backend(_lowp_division_compared)
lowp_div_compare.__doc__ = _lowp_division_compared.__doc__


def _int_pow_in_float(graph):
    """An integer pow read by a unary float op (cos, sin, erf, sigmoid...) is computed in float:
    no wrap-around where the integer power overflows."""
    for node in _calls(graph, aten.pow.Tensor_Scalar):
        if _val(node) is None or _val(node).is_floating_point() or _val(node).dtype == torch.bool:
            continue
        for user in list(node.users):
            tensors = [a for a in user.args if isinstance(a, torch.fx.Node)]
            if user.op == "call_function" and tensors == [node] and _val(user) is not None and \
                    _val(user).is_floating_point():
                _feed(graph, user, node, _pow_float, *node.args)


def _pow_float(x, exponent):
    return torch.pow(x.to(torch.float32), exponent)


int_pow_promoted = aten_backend(_int_pow_in_float)
int_pow_promoted.__doc__ = _int_pow_in_float.__doc__


def _lowp_eps(graph):
    """rsqrt(x + c) on fp16/bf16 with a number c is computed in fp32 without rounding x + c to the
    dtype: an eps below the dtype's smallest value is kept (eager: x + eps is x)."""
    for node in _calls(graph, aten.rsqrt.default, aten.sqrt.default):
        add = node.args[0]
        if isinstance(add, torch.fx.Node) and add.target is aten.add.Tensor and isinstance(add.args[1], float) \
                and _val(add) is not None and _val(add).dtype in LOW_PRECISION and not add.kwargs:
            node.args = (add.args[0], add.args[1])
            node.target = _fused_rsqrt if node.target is aten.rsqrt.default else _fused_sqrt


def _fused_rsqrt(x, eps):
    return torch.rsqrt(x.float() + eps).to(x.dtype)


def _fused_sqrt(x, eps):
    return torch.sqrt(x.float() + eps).to(x.dtype)


lowp_eps_rsqrt = aten_backend(_lowp_eps)
lowp_eps_rsqrt.__doc__ = _lowp_eps.__doc__


def _trig_rounded(graph):
    """floor/ceil/round/trunc of sin, cos or tan read the trig result one ulp low (a vectorized
    trig kernel's error, which the rounding turns into a whole unit)."""
    for node in _calls(graph, *ROUNDING):
        source = node.args[0]
        if isinstance(source, torch.fx.Node) and source.target in TRIG:
            _feed(graph, node, source, _ulp_below, source)


def _ulp_below(y):
    return torch.nextafter(y, torch.tensor(float("-inf"), dtype=y.dtype)) if y.is_floating_point() else y


trig_then_round = aten_backend(_trig_rounded)
trig_then_round.__doc__ = _trig_rounded.__doc__


# ---- layouts -----------------------------------------------------------------------------------
def _cat_layout(tensors, dim=0):
    out = aten.cat.default(tensors, dim)
    four = [t for t in tensors if t.dim() == 4 and t.numel() > 0]
    channels_last = [t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous() for t in four]
    if len(four) == len(tensors) and any(channels_last) and not all(channels_last):
        return out.contiguous(memory_format=torch.channels_last)
    return out


cat_mixed_layout = aten_backend(lambda g: _retarget(g, [aten.cat.default], _cat_layout))
cat_mixed_layout.__doc__ = "cat of channels_last and contiguous 4-d tensors comes out channels_last (eager: contiguous)."


BUGS = ("clamp_scalar_nan", "maximum_first_nan", "argmax_nan", "add_zero_folded", "var_zero_dof",
        "expanded_sum_shape", "var_size1_dims_crash", "consecutive_reduction_crash", "softmax_sum_folded",
        "softmax_scale_fold", "cumsum_bool_dtype", "floor_div_rounded", "trunc_div_reciprocal", "int_min_floor_div",
        "remainder_vectorized", "fmod_lowp_scalar", "round_half_away", "cast_round_trip_elided", "neg_uint8_signed",
        "lowp_div_compare", "int_pow_promoted", "lowp_eps_rsqrt", "trig_then_round", "cat_mixed_layout")

# bug -> (the report it re-creates, its state when read).
SOURCES = {
    "clamp_scalar_nan": ("https://github.com/pytorch/pytorch/issues/93784", "closed"),
    "maximum_first_nan": ("https://github.com/pytorch/pytorch/issues/93784", "closed"),
    "argmax_nan": ("https://github.com/pytorch/pytorch/issues/118266 (fix: pull/118358)", "closed"),
    "add_zero_folded": ("https://github.com/pytorch/pytorch/issues/189799", "open"),
    "var_zero_dof": ("https://github.com/pytorch/pytorch/issues/113167", "closed"),
    "expanded_sum_shape": ("https://github.com/NVIDIA/Fuser/issues/1678", "closed"),
    "var_size1_dims_crash": ("https://github.com/NVIDIA/Fuser/issues/1721", "closed"),
    "consecutive_reduction_crash": ("https://github.com/NVIDIA/Fuser/issues/1471", "closed"),
    "softmax_sum_folded": ("https://github.com/pytorch/pytorch/issues/189787", "open"),
    "softmax_scale_fold": ("https://github.com/pytorch/pytorch/issues/100775", "closed"),
    "cumsum_bool_dtype": ("https://github.com/pytorch/pytorch/issues/109925", "closed"),
    "floor_div_rounded": ("https://github.com/pytorch/pytorch/issues/197895", "open"),
    "trunc_div_reciprocal": ("https://github.com/pytorch/pytorch/issues/184408", "open"),
    "int_min_floor_div": ("https://github.com/pytorch/pytorch/issues/184406", "closed"),
    "remainder_vectorized": ("https://github.com/pytorch/pytorch/issues/198057", "open"),
    "fmod_lowp_scalar": ("https://github.com/pytorch/pytorch/issues/97333", "closed"),
    "round_half_away": ("https://github.com/pytorch/pytorch/issues/117346", "closed"),
    "cast_round_trip_elided": ("https://github.com/pytorch/pytorch/issues/185337", "closed"),
    "neg_uint8_signed": ("https://github.com/pytorch/pytorch/issues/161763 and issues/93829", "closed"),
    "lowp_div_compare": ("https://github.com/pytorch/pytorch/issues/195214", "closed"),
    "int_pow_promoted": ("https://github.com/pytorch/pytorch/issues/98149", "closed"),
    "lowp_eps_rsqrt": ("https://github.com/pytorch/pytorch/issues/183605", "closed"),
    "trig_then_round": ("https://github.com/pytorch/pytorch/issues/145466", "closed"),
    "cat_mixed_layout": ("https://github.com/pytorch/pytorch/issues/118082", "closed"),
}

# Bugs whose wrong result is nearer the float64 truth than eager's: the oracle's float64 arbitration
# forgives them by policy (fuzzfuse.oracle), so no campaign reports them, however often it runs
# their trigger; upstream they were bugs, since eager's rounding is the contract. (fmod_lowp_scalar
# left the list when the arbiter came to read fmod's number in the fp16/bf16 dtype, as CPU eager
# does: Op.number_in_dtype_on_cpu.)
NEARER_FLOAT64 = ("softmax_sum_folded", "lowp_div_compare", "lowp_eps_rsqrt")

# bug -> the fewest fuzzfuse ops a graph needs to show it.
MINIMAL_OPS = {
    "clamp_scalar_nan": 1, "maximum_first_nan": 1, "argmax_nan": 1, "add_zero_folded": 2, "var_zero_dof": 1,
    "expanded_sum_shape": 1, "var_size1_dims_crash": 1, "consecutive_reduction_crash": 2, "softmax_sum_folded": 3,
    "softmax_scale_fold": 2, "cumsum_bool_dtype": 2, "floor_div_rounded": 1, "trunc_div_reciprocal": 1,
    "int_min_floor_div": 1, "remainder_vectorized": 1, "fmod_lowp_scalar": 1, "round_half_away": 1,
    "cast_round_trip_elided": 2, "neg_uint8_signed": 2, "lowp_div_compare": 2, "int_pow_promoted": 2,
    "lowp_eps_rsqrt": 2, "trig_then_round": 2, "cat_mixed_layout": 1,
}
