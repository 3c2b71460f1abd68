"""Run a graph eagerly (the reference), in float64 (the arbiter), and emit it as Python/TorchScript
source (what TorchScript scripts, what dynamo traces, and what a repro prints)."""
from __future__ import annotations

import functools
import math
from dataclasses import replace

import torch

from .graph import Graph, Node, ScalarInput, TensorInput
from .ops import MOVES_DATA, OPS, lit, reduced_dims
from .types import DTYPES, FLOAT_DTYPES, is_float


def _upcast_attrs(node: Node) -> dict:
    attrs = dict(node.attrs)
    if node.op == "cast" and is_float(attrs["dtype"]):
        attrs["dtype"] = "float64"
    return attrs


def _holds_every_value(wide: torch.dtype, narrow: torch.dtype) -> bool:
    """Whether every value of float dtype `narrow` is one of `wide` (float16 in float32; not
    bfloat16 in float16, whose range it lacks)."""
    w, n = torch.finfo(wide), torch.finfo(narrow)
    return n.max <= w.max and n.eps >= w.eps and n.smallest_normal * n.eps >= w.smallest_normal * w.eps


def cast_rounds(node: Node, types: dict) -> bool:
    """Whether a cast to a float dtype (below float64) asks for a rounding: its operand is an
    integer or a float of a dtype it does not hold. The arbiter honours that rounding, as eager
    does: the program asked for it (x.half().float() emulates a half-precision store), so a fuser
    that drops it is wrong, however near float64 its value (pytorch#185337). A widening cast
    rounds nothing and stays in float64."""
    if node.op != "cast" or not is_float(node.attrs["dtype"]) or node.attrs["dtype"] == "float64":
        return False
    source = types[node.args[0]].dtype
    return not is_float(source) or not _holds_every_value(DTYPES[node.attrs["dtype"]], DTYPES[source])


def _casts_out_of_range(node: Node, x: torch.Tensor) -> bool:
    """Float -> integer casts of NaN, inf or out-of-range values are undefined behaviour in C++:
    fusers may legally produce anything there, so values derived from them are not compared."""
    if node.op != "cast" or not x.is_floating_point() or is_float(node.attrs["dtype"]) or node.attrs["dtype"] == "bool":
        return False
    info = torch.iinfo(DTYPES[node.attrs["dtype"]])
    xd = x.double()
    return bool((~torch.isfinite(xd) | (xd < info.min) | (xd > info.max)).any())


def _overflows_signed(node: Node, args: list, attrs: dict, out) -> bool:
    """A signed integer result that wrapped, of any width. Signed overflow (neg or abs of INT32_MIN,
    a sum past 2^31 or 2^63, a shift into the sign bit) is undefined behaviour in C++, and a fuser
    that keeps an int8 or int16 value in a wider register between fused ops never narrows it
    (NNC's sub(x, -1) -> lt of an int8 127 compares 128, eager's -128): a fuser may compute it
    wider, or assume it never happens. int8, int16 and int32: the op on the same operands widened
    to int64 gives another value; int64 (nothing wider): the op in float64 leaves int64's range (a
    result within float64's rounding of 2^63 counts as leaving it). Unsigned wraparound is defined."""
    if not isinstance(out, torch.Tensor) or out.dtype not in (torch.int8, torch.int16, torch.int32, torch.int64):
        return False
    narrow = (torch.int8, torch.int16, torch.int32)
    wider = torch.int64 if out.dtype in narrow else torch.float64
    # An operand of a wider integer dtype (a 0-d int64 beside an int32 tensor) is first converted
    # to the result's dtype, as eager's type promotion converts it: that wrap is a conversion, no
    # overflow of the op (NNC's add of a 0-d int64 INT64_MAX and an int32 computes in int64: a bug).
    wide = [a.to(out.dtype).to(wider) if isinstance(a, torch.Tensor) and a.dtype in narrow + (torch.int64,) else a
            for a in args]
    try:
        exact = OPS[node.op].eager(*wide, **attrs)
    except (RuntimeError, TypeError, ValueError):
        return False
    if not isinstance(exact, torch.Tensor) or exact.shape != out.shape:
        return False
    if out.dtype in narrow:
        return not torch.equal(exact, out.long())
    return bool(exact.is_floating_point() and ((exact >= 2.0 ** 63) | (exact < -2.0 ** 63)).any())


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """What eager and the fusers accumulate a reduction in: float32 for the 16-bit floats."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _order_dependent(node: Node, x) -> bool:
    """Whether a reduction's floating result depends on the order its terms are combined in, so far
    that any order (eager's, a fuser's, float64's) is as right as another: a sum whose terms'
    magnitudes add up past the accumulator's largest finite value (a partial sum overflows in some
    orders: inf, or nan against an inf, where eager gets a finite value) or cancel so deeply that
    rounding in some order exceeds the result itself (values near the dtype's limits); a product
    whose partial products overflow or underflow in some order; a sum of zeros one of which is
    -0, whose sign depends on the accumulator's identity and the order (-0 + +0 is +0, -0 + -0 is
    -0: eager's CUDA sum of [-0.] is +0 and nvFuser's -0, which rsqrt turns into inf and -inf); a
    running mean (var_mean's) over an infinite term, which depends on where the mean is updated:
    Welford's m += (x - m) / n turns -inf followed by a finite term into nan (eager's var_mean of
    [2.2, -inf, 0.8] has mean nan, float64 too), a two-pass mean keeps -inf (nvFuser's; torch.mean's).
    Reductions over ordinary values are never order-dependent by this rule: their differences are
    rounding, which the oracle's float64 arbitration judges."""
    how = OPS[node.op].accumulates
    if how is None or not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
        return False
    acc = torch.finfo(_accumulation_dtype(x.dtype))
    dims = reduced_dims(node.attrs, x.dim()) if x.dim() else []
    xd = x.detach().double()
    xd = xd.where(torch.isfinite(xd), torch.zeros_like(xd))  # an inf or nan term: its own class in any order
    magnitude = xd.abs()
    if how == "product":
        big = magnitude.clamp(min=1).log2().sum(dims)
        small = magnitude.where((magnitude > 0) & (magnitude < 1), torch.ones_like(magnitude)).log2().sum(dims)
        return bool(((big > math.log2(acc.max)) | (small < math.log2(acc.tiny))).any())
    if how == "running-mean" and not bool(torch.isfinite(x).all()):
        return True
    raw = x.detach()
    zero, negative_zero = raw == 0, (raw == 0) & torch.signbit(raw)
    if (zero.all(dim=tuple(dims)) & negative_zero.any(dim=tuple(dims)) if dims else
            zero.all() & negative_zero.any()).any():
        return True
    terms = [xd]
    if x.dim() and node.attrs.get("correction") is not None:  # var, std: the squared deviations too
        terms.append((xd - xd.mean(dims, keepdim=True)) ** 2)
    for t in terms:
        total, spread = t.sum(dims).abs(), t.abs().sum(dims)
        if ((spread > acc.max) | (spread * acc.eps > 16 * (total + acc.eps))).any():
            return True
    return False


# The dtypes computed in float32's exponent range (bf16 shares it): their subnormals are float32
# subnormals, which an FTZ/DAZ flush reads as zero.
FP32_RANGE = (torch.float32, torch.bfloat16)


def flush_denormals(t: torch.Tensor, doubles: bool = False) -> torch.Tensor:
    """An fp32 or bf16 tensor with its denormals read as zeros of their sign (what FTZ/DAZ
    hardware does to an operand: a bf16 value is computed in fp32, whose exponent range it shares,
    so its denormals are fp32 denormals there), and with `doubles` a float64 one too (x86's DAZ,
    which -funsafe-math-optimizations sets on CPU, reads double denormals as zero as well; Triton
    flushes fp32 only); any other tensor as it is (fp16 denormals are normal numbers in fp32)."""
    if not isinstance(t, torch.Tensor) or t.dtype not in FP32_RANGE + (torch.float64,) * doubles:
        return t
    return _zeroed_below(t, torch.finfo(t.dtype).tiny)


def _zeroed_below(t: torch.Tensor, tiny: float) -> torch.Tensor:
    """`t` with every value of magnitude below `tiny` a zero of its sign."""
    return torch.where(t.abs() < tiny, torch.copysign(torch.zeros_like(t), t), t)


# Why a value is tainted (the values of fuzzfuse.verdict.Difference that name them).
UNDEFINED_BEHAVIOUR, REDUCTION_ORDER = "undefined-behaviour", "reduction-order"


def _round_faithfully(value: torch.Tensor, dtype: str, generator: torch.Generator) -> torch.Tensor:
    """A float64 result rounded to its op's float32, float16 or bfloat16 dtype up or down, at random
    per element, where it is not representable there (a faithful rounding, as another libm or
    another order of a reduction's terms rounds): an exact result stays exact."""
    low = DTYPES[dtype]
    if low not in (torch.float32, torch.float16, torch.bfloat16) or not value.is_floating_point():
        return value
    near = value.to(low)
    other = torch.nextafter(near, torch.where(near.double() < value, math.inf, -math.inf).to(low))
    coin = (torch.rand(value.shape, generator=generator) < 0.5).to(value.device)
    return torch.where(coin & (near.double() != value), other, near).double()


def _either(other: torch.Tensor, value: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Per element at random, `other` (broadcast to `value`'s shape) or `value`: two ways a fuser
    may compute one op, both right."""
    coin = (torch.rand(value.shape, generator=generator) < 0.5).to(value.device)
    return torch.where(coin, other.broadcast_to(value.shape), value)


def _as_an_fma_reads(node: Node, args: list, unrounded: dict[str, torch.Tensor],
                     generator: torch.Generator) -> list:
    """An add's or sub's operands as a fused multiply-add may read them: per element at random,
    one operand that is a product (`unrounded`: its float64 value by name) unrounded, or none. Per
    read, not per product: x * c - x * c is fma(x, c, -(x * c)) in Triton, the product's rounding
    error, where one value read twice would always give 0."""
    products = [i for i, ref in enumerate(node.args) if isinstance(ref, str) and ref in unrounded]
    if not products:
        return args
    shape = torch.broadcast_shapes(*[a.shape for a in args if isinstance(a, torch.Tensor)])
    taken = torch.zeros(shape, dtype=torch.bool)
    out = list(args)
    for i in products:
        coin = (torch.rand(shape, generator=generator) < 0.5) & ~taken
        taken |= coin
        exact = unrounded[node.args[i]].broadcast_to(shape)
        out[i] = torch.where(coin.to(exact.device), exact, args[i].broadcast_to(shape))
    return out


def _another_libms(value: torch.Tensor, exact: torch.Tensor, dtype: torch.dtype,
                   generator: torch.Generator) -> torch.Tensor:
    """A result of an op no standard rounds correctly (`Op.libm_rounded`: exp, sin, pow), `value`
    (in float64, already rounded to its `dtype`) moved by an ulp of `dtype` up or down, or kept,
    at random per element: what another math library may return. No wider arbiter tells which is
    nearer; an ill-conditioned op after it (sin of exp(31), 2.9e13, whose ulp is 0.004) turns NNC's
    exp, an ulp above eager's, into a visible difference, and pow(x, 10000) turns Triton's float32
    pow(1.19e-7, 1.19e-7), an ulp below the nearest float32 (eager CUDA's), into 0.98052 where
    eager gives 0.98111; both stay within CUDA's documented bounds (powf: 4 ulps). Below float64,
    only where `exact` (its float64 value) is not a value of `dtype`: a math library returns
    sin(0), exp(0) and pow(1.5, 2) exactly, and a zero keeps its sign."""
    own = value.to(dtype)
    step = torch.randint(-1, 2, value.shape, generator=generator).to(value.device)
    if dtype != torch.float64:
        step = torch.where(exact.to(dtype).double() != exact, step, torch.zeros_like(step))
    up = torch.nextafter(own, torch.full_like(own, math.inf))
    down = torch.nextafter(own, torch.full_like(own, -math.inf))
    return torch.where(step > 0, up, torch.where(step < 0, down, own)).double()


def _one_rounding_or_several(op, args: list, attrs: dict, exact: torch.Tensor, dtype: torch.dtype,
                             generator: torch.Generator) -> torch.Tensor:
    """A rounding run's value of an op that names several operations (`Op.stepwise`): per element
    at random, its float64 value (rounded once, after) or the operations each rounded in `dtype`
    (a fuser that does not contract them, where eager's AVX2 kernel does, or the reverse). NNC's
    addcmul(x, t, x, value=-2) of x = -5.05e-4, t = 1.5 is x - 3x with its product rounded first,
    an ulp from eager's, which reciprocal and sin then show."""
    if not exact.is_floating_point() or dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return exact
    own = [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    return _either(op.stepwise(*own, **attrs).double(), exact, generator)


def _reordered(node: Node, x: torch.Tensor, dtype: str, generator: torch.Generator) -> torch.Tensor:
    """A reduction's operand (float64 values of `dtype`) back in its dtype, its terms shuffled along
    each reduced dim: the reduction then rounds as eager's in another order of its terms (a fuser's
    split or vectorized order), which one faithful rounding of the exact result does not cover: a
    sum's rounding errors add up over its terms."""
    x = x.to(DTYPES[dtype])
    for dim in reduced_dims(node.attrs, x.dim()) if x.dim() else []:
        x = x.index_select(dim, torch.randperm(x.shape[dim], generator=generator).to(x.device))
    return x


# How many terms a rounding run adds one at a time at most; more are added in 16 lanes (a vector
# loop's accumulators), each one at a time, then the lanes one after another.
SERIAL_TERMS = 512


def _accumulated(node: Node, terms: torch.Tensor, from_running_sum, generator: torch.Generator) -> torch.Tensor:
    """A sum-like reduction of `terms` (in their dtype) accumulated as a loop does: in 1, 8 or 16
    lanes as `generator` draws (a scalar loop, an AVX2 or an AVX-512 vector), each lane adding its
    terms one at a time and rounding after each, then the lanes added in turn; the op's result from
    that sum (`Op.from_running_sum`)."""
    dims = reduced_dims(node.attrs, terms.dim()) if terms.dim() else []
    kept = [d for d in range(terms.dim()) if d not in dims]
    flat = terms.permute(kept + dims).reshape([terms.shape[d] for d in kept] + [-1])
    count = flat.shape[-1]
    lanes = (1, 8, 16)[int(torch.randint(3, (1,), generator=generator))] if count <= SERIAL_TERMS else 16
    flat = torch.nn.functional.pad(flat, (0, -count % lanes)).unflatten(-1, (-1, lanes))
    total = flat[..., 0, :]
    for step in range(1, flat.shape[-2]):
        total = total + flat[..., step, :]
    lane_sum = total[..., 0]
    for lane in range(1, lanes):
        lane_sum = lane_sum + total[..., lane]
    out = from_running_sum(lane_sum, count)
    if node.attrs.get("keepdim"):
        for d in sorted(dims):
            out = out.unsqueeze(d)
    return out


def _made_float(node: Node, args: list, made: str) -> list:
    """For the arbiter: the integer or bool operands of a pointwise op that makes a float of them
    (sqrt of an int32, remainder of one by 3.0), converted as eager's type promotion converts them
    (to the float dtype it makes: int32 2147483647 is float32 2^31), then to float64, where the op
    then computes. In the default float32 the op would round as eager does and side with it
    against a fuser that rounds better (eager's sqrt of 594 is not the nearest float32, NNC's is);
    the conversion itself is the op's meaning, and stays."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if OPS[node.op].kind not in ("unary", "binary") or not is_float(made) or not tensors \
            or any(a.is_floating_point() for a in tensors):
        return args
    return [a.to(DTYPES[made]).double() if isinstance(a, torch.Tensor) else a for a in args]


def _scalars_as_eager_reads_them(node: Node, args: list, types: dict) -> list:
    """For the arbiter: the Python float operands of an op that computes in float32, float16 or
    bfloat16 (no float64 operand), rounded to float32 (or, for the ops that declare
    `number_in_dtype_on_cpu`, to the fp16/bf16 operand's dtype on CPU), as eager reads them
    (TensorIterator converts a wrapped number to the op's compute type: x / 0.001 divides by
    0.0010000000475 in float32, so 1 / 0.001 truncates to 999). In float64 the arbiter would
    divide by 0.001 itself and side with whichever run happens to round the quotient up (CUDA
    eager's 1000) against a fuser computing the float32 program exactly (nvFuser's and CPU eager's
    999)."""
    if not any(isinstance(a, float) for a in args):
        return args
    dtypes = {types[r].dtype for r in node.refs() if r in types}
    if "float64" in dtypes:
        return args
    # CPU eager rounds fmod's divisor or a comparison's threshold to the fp16/bf16 operand's dtype
    # (Op.number_in_dtype_on_cpu): fmod(x, 0.1) divides by 0.0999755859375 in float16.
    on_cpu = all(a.device.type == "cpu" for a in args if isinstance(a, torch.Tensor))
    reads_in = DTYPES[next(iter(dtypes))] if OPS[node.op].number_in_dtype_on_cpu and on_cpu and \
        dtypes in ({"float16"}, {"bfloat16"}) else torch.float32
    return [float(torch.tensor(a, dtype=reads_in)) if isinstance(a, float) else a for a in args]


def interpret(graph: Graph, inputs: list, *, upcast: bool = False, flush_as_triton: bool = False,
              flush_math_calls: bool = False, rounding: torch.Generator | None = None,
              unshortcut: bool = False) -> tuple[dict, dict[str, str]]:
    """All values of the graph by name, and the names tainted by undefined behaviour (a float->int
    cast out of range, a signed int32 or int64 overflow) or by an order-dependent reduction
    (`_order_dependent`), with why: values only their type is defined of.

    upcast=True runs every floating computation in float64: the arbiter that tells a fuser's error
    from the rounding eager itself shows. It reports no taint: what is undefined or order-dependent
    is decided on eager's own values, at eager's precision.

    flush_as_triton=True, under the CPU's FTZ/DAZ (torch.set_flush_denormal(True)), flushes as
    Triton does: what its arithmetic reads and writes, not what its comparisons read. The ops that
    compare (`Op.compares`) run with FTZ/DAZ off, and the results of the ops that compute (every
    kind but those that move data, MOVES_DATA) are flushed besides: FTZ leaves some alone (ATen's
    tan of a denormal returns it), and Triton's tan gives 0.

    flush_math_calls=True flushes float32 (and bfloat16) denormals only where an op Triton computes
    by a math-library call (`Op.math_call`) reads or writes them, at eager's precision or, with
    upcast, in float64 (a float64 value below float32's smallest normal, where the graph's type is
    float32 or bfloat16): Triton's plain arithmetic reads a denormal as it is, libdevice's does not.

    rounding (with upcast=True): every op's float64 result is rounded to the op's own 32- or 16-bit
    float dtype, up or down as `rounding` draws (`_round_faithfully`), before the next op reads it,
    and a sum or product reduces its terms in its own dtype in an order `rounding` shuffles
    (`_reordered`): a run of the graph at eager's precision with other roundings than eager's
    (values in float64 tensors). Where such runs land far from float64, so may eager's and a
    fuser's, both right. An op whose result its dtype defines (`Op.exact_in_dtype`) computes in
    that dtype.

    unshortcut=True computes each op that ATen shortcuts for particular number operands without
    the shortcut (`Op.unshortcut`): the scalar arbiter's way not to share eager's fault.
    """
    env: dict = {}
    for spec, value in zip(graph.inputs, inputs):
        if upcast and isinstance(value, torch.Tensor) and value.is_floating_point():
            value = value.double()
        env[spec.name] = value
    tainted: dict[str, str] = {}
    types = graph.infer_types() if rounding is not None or upcast or flush_math_calls else {}
    fma_addends = {r for n in graph.nodes if OPS[n.op].fma_role == "addend" for r in n.refs()}
    unrounded: dict[str, torch.Tensor] = {}  # a product's float64 value, where an fma may read it
    for node in graph.nodes:
        args = [env[a] if isinstance(a, str) else a for a in node.args]
        if unrounded and OPS[node.op].fma_role == "addend":
            args = _as_an_fma_reads(node, args, unrounded, rounding)
        if upcast and node.name in types:
            args = _made_float(node, args, types[node.name].dtype)
            args = _scalars_as_eager_reads_them(node, args, types)
        attrs = _upcast_attrs(node) if upcast else node.attrs
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}
        op = OPS[node.op]
        flushes = flush_math_calls and op.math_call
        if flushes:
            args = [_flushed_as_fp32(a, types[ref].dtype) if isinstance(ref, str) else a for a, ref in zip(args, node.args)]
        reorders = (rounding is not None and op.kind == "reduction" and op.accumulates in ("sum", "product")
                    and isinstance(args[0], torch.Tensor) and args[0].is_floating_point())
        if upcast and cast_rounds(node, types):
            # rounded to nearest, in a rounding run too: the cast's rounding is defined; only its
            # operand may differ by where the ops before it rounded
            out = args[0].to(DTYPES[node.attrs["dtype"]])
        elif reorders:
            terms = _reordered(node, args[0], types[node.args[0]].dtype, rounding)
            out = (_accumulated(node, terms, op.from_running_sum, rounding)
                   if op.from_running_sum is not None and terms.numel() and torch.rand(1, generator=rounding).item() < 0.5
                   else op.eager(terms, *args[1:], **attrs))
        elif rounding is not None and op.exact_in_dtype:
            # no rounding of a float64 result is the op's (nextafter of inf in bfloat16 is its
            # largest finite value, never a rounding of float64's)
            own = DTYPES[types[node.name].dtype]
            out = op.eager(*[a.to(own) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args],
                           **attrs)
        elif upcast and rounding is None and op.arbiter is not None and node.name in types \
                and DTYPES[types[node.name].dtype] in (torch.float32, torch.float16, torch.bfloat16):
            out = op.arbiter(*args, **attrs)
        elif unshortcut and op.unshortcut is not None:
            out = op.unshortcut(*args, **attrs)
        elif flush_as_triton and op.compares:
            torch.set_flush_denormal(False)
            try:
                out = op.eager(*args, **attrs)
            finally:
                torch.set_flush_denormal(True)
        else:
            out = op.eager(*args, **attrs)
            if rounding is not None and op.stepwise is not None and node.name in types:
                out = _one_rounding_or_several(op, args, attrs, out, DTYPES[types[node.name].dtype], rounding)
        if flush_as_triton and op.kind not in MOVES_DATA:
            out = flush_denormals(out)
        if flushes:
            out = _flushed_as_fp32(out, types[node.name].dtype)
        upstream = [tainted[a] for a in node.refs() if a in tainted]
        if upstream:
            tainted[node.name] = upstream[0]
        elif not upcast and (_casts_out_of_range(node, args[0]) or _overflows_signed(node, args, attrs, out)):
            tainted[node.name] = UNDEFINED_BEHAVIOUR
        elif not upcast and _order_dependent(node, args[0]):
            tainted[node.name] = REDUCTION_ORDER
        if upcast and out.is_floating_point():
            out = out.double()  # an op that names the float dtype it makes
        if rounding is not None:
            exact_result = out
            rounded = _round_faithfully(out, types[node.name].dtype, rounding)
            if op.fma_product is not None and node.name in fma_addends and out.is_floating_point():
                # a fused multiply-add reads the product unrounded (CUDA's, Triton's and gcc's
                # default contraction with the add or sub that takes it): that read, not the others
                product = op.fma_product(DTYPES[types[node.name].dtype], *args, **attrs)
                if product is not None:
                    unrounded[node.name] = product.double()
            out = rounded
            if op.libm_rounded and out.is_floating_point() and types[node.name].dtype in FLOAT_DTYPES:
                out = _another_libms(out, exact_result, DTYPES[types[node.name].dtype], rounding)
        env[node.name] = out
    return env, tainted


def _flushed_as_fp32(value, dtype: str):
    """`value` (of graph type `dtype`, at eager's precision or in float64) with what is a float32
    denormal read as a zero of its sign, where `dtype` is float32 or bfloat16 (computed in float32);
    anything else as it is."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() \
            or DTYPES[dtype] not in FP32_RANGE:
        return value
    return _zeroed_below(value, torch.finfo(torch.float32).tiny)


def _finite64(value):
    """A float operand in float64 with its NaNs and infinities read as 0 (such a term is its own
    class in any order), for the evaluation-order checks; anything else as it is."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        v = value.detach().double()
        return v.where(torch.isfinite(v), torch.zeros_like(v))
    if isinstance(value, float) and not math.isfinite(value):
        return 0.0
    return value


# The kinds whose every result position is computed from the operands' same (broadcast) positions:
# an order-dependent position stays one in what such an op makes of it.
ELEMENTWISE = frozenset({"unary", "binary", "ternary", "cast"})


def _own_order_positions(node: Node, args: list, env: dict, producers: dict):
    """The positions of one op's result that depend on an evaluation order (see
    order_dependent_positions), as a mask broadcastable to it; None where there are none."""
    op = OPS[node.op]
    floats = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if not floats:
        return None
    masks = []
    if op.overflows_in_some_order is not None:
        limit = torch.finfo(_accumulation_dtype(max(floats, key=lambda a: a.element_size()).dtype)).max
        masks.append(op.overflows_in_some_order(limit, *[_finite64(a) for a in args], **node.attrs))
    for ref in node.refs() if op.fma_role == "addend" else []:
        product = producers.get(ref)
        if product is not None and OPS[product.op].fma_role == "product" and env[ref].is_floating_point():
            x, y = (_finite64(env[a] if isinstance(a, str) else a) for a in product.args)
            masks.append(torch.as_tensor(x * y).abs() > torch.finfo(env[ref].dtype).max)
    if op.zero_sum_sign is not None:
        masks.append(op.zero_sum_sign(*[a.detach().double() if isinstance(a, torch.Tensor) else a for a in args],
                                      **node.attrs))
    masks = [m for m in masks if bool(m.any())]
    return functools.reduce(torch.logical_or, torch.broadcast_tensors(*masks)) if masks else None


def _moved_positions(node: Node, env: dict, masks: dict):
    """Where an op that only moves data (cat, a view, index_select) puts its operands' masked
    positions: the op run on the masks in place of the data operands (index operands stay).
    None where it cannot run on bool masks."""
    op = OPS[node.op]
    args = []
    for k, a in enumerate(node.args):
        value = env[a] if isinstance(a, str) else a
        if isinstance(a, str) and k not in op.index_operands and isinstance(value, torch.Tensor):
            mask = masks.get(a)
            args.append(torch.broadcast_to(mask, value.shape).clone() if mask is not None
                        else torch.zeros(value.shape, dtype=torch.bool, device=value.device))
        else:
            args.append(value)
    attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in node.attrs.items()}
    try:
        moved = op.eager(*args, **attrs)
    except (RuntimeError, TypeError, ValueError):
        return None
    out = env[node.name]
    return moved if moved.dtype == torch.bool and moved.shape == out.shape else None


# Op kinds whose every result position is a sum over operand positions (a matmul's row by column, a
# scan's prefix): a position reads an order-dependent one if that one is among its terms.
SUMS_OVER_POSITIONS = frozenset({"matmul", "scan"})


def _summed_positions(node: Node, env: dict, masks: dict):
    """The result positions of a matmul or a scan with a masked position among their terms: for
    each masked operand, the op run on its mask (the others all ones) against the op run on zeros
    in its place. None where the op cannot run so."""
    op, out = OPS[node.op], env[node.name]
    values = [env[a] if isinstance(a, str) else a for a in node.args]
    attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in node.attrs.items()}
    found = []
    for k, a in enumerate(node.args):
        if not (isinstance(a, str) and a in masks):
            continue

        def run(operand):
            args = [operand if i == k else torch.ones(v.shape, dtype=torch.float64, device=v.device)
                    if isinstance(v, torch.Tensor) else v for i, v in enumerate(values)]
            return op.eager(*args, **attrs)
        mask = torch.broadcast_to(masks[a], values[k].shape).to(torch.float64)
        try:
            reads = run(mask) != run(torch.zeros_like(mask))
        except (RuntimeError, TypeError, ValueError):
            return None
        if reads.shape != out.shape:
            return None
        found.append(reads)
    return functools.reduce(torch.logical_or, found) if found else None


def order_dependent_positions(graph: Graph, inputs: list) -> dict[str, torch.Tensor]:
    """For each value of eager's run with positions whose result depends on an evaluation order
    that the op's definition, or C's default floating-point contraction, leaves open: a bool mask
    of its shape. A position is one where a value computed along the way passes its dtype's
    largest value in some order (`Op.overflows_in_some_order`: addcmul's value * t2 before t1
    multiplies it, lerp's (end - start) * (1 - w), a matmul's terms), or where an add or sub reads
    a product that overflowed in eager and a fused multiply-add (`Op.fma_role`: CUDA's, Triton's
    and gcc's default) does not round it (eager's x1 - x0 * x0 of float64 3.6e307 and inf is nan,
    nvFuser's fma inf), or a matmul's or a cumsum's sum of zero terms with a -0 among them (the
    sign is the accumulator's identity's: Op.zero_sum_sign), or a position that an elementwise op,
    a reduction, a matmul or a scan computes from one, or where an op that only moves data puts
    one. Eager's order and a fuser's may both be right there, and float64 can round the same way
    as eager; a wrong value anywhere else is still judged (the oracle compares positions, not whole
    outputs)."""
    env, _ = interpret(graph, inputs)
    producers = {n.name: n for n in graph.nodes}
    masks: dict[str, torch.Tensor] = {}
    for node in graph.nodes:
        out = env[node.name]
        if not isinstance(out, torch.Tensor):
            continue
        args = [env[a] if isinstance(a, str) else a for a in node.args]
        found = [_own_order_positions(node, args, env, producers)]
        if OPS[node.op].kind in ELEMENTWISE:
            found += [masks.get(r) for r in node.refs()]
        elif OPS[node.op].kind in MOVES_DATA and any(r in masks for r in node.refs()):
            found.append(_moved_positions(node, env, masks))
        elif OPS[node.op].kind in SUMS_OVER_POSITIONS and any(r in masks for r in node.refs()):
            found.append(_summed_positions(node, env, masks))
        elif OPS[node.op].kind == "reduction" and node.args and node.args[0] in masks:
            # a position reduced from one that depends on the order (amax of a -0 or +0 read by rsqrt)
            operand = torch.broadcast_to(masks[node.args[0]], env[node.args[0]].shape)
            dims = reduced_dims(node.attrs, operand.dim()) if operand.dim() else []
            reduced = operand.any(dim=tuple(dims), keepdim=True) if dims else operand
            found.append(reduced.reshape(out.shape) if reduced.numel() == out.numel() else None)
        found = [m for m in found if m is not None]
        if found:
            masks[node.name] = functools.reduce(torch.logical_or, [torch.broadcast_to(m, out.shape) for m in found])
    return masks


LOW_PRECISION = (torch.float16, torch.bfloat16)


def run_fp32_compute(graph: Graph, inputs: list, dtypes: list[torch.dtype],
                     casts_round: bool = True) -> list[torch.Tensor]:
    """The outputs as a fuser that keeps fp16/bf16 intermediates in float32 computes them: every
    fp16/bf16 input and result read as float32 (explicit casts to them still round, unless not
    `casts_round`: Inductor's elided pairs, on CPU and CUDA, from a float or an integer), each output rounded once to its
    eager dtype (`dtypes`). Inductor does this unless emulate_precision_casts. An op whose result
    its dtype defines (`Op.exact_in_dtype`) still computes in its own dtype, and a matmul's result
    is written in its dtype: the fuser calls a library for it (Inductor's mm and addmm are aten's),
    outside the kernel that keeps the ops after it in float32."""
    env: dict = {}
    for spec, value in zip(graph.inputs, inputs):
        low = isinstance(value, torch.Tensor) and value.dtype in LOW_PRECISION
        env[spec.name] = value.float() if low else value
    types = graph.infer_types()
    for node in graph.nodes:
        args = [env[a] if isinstance(a, str) else a for a in node.args]
        if OPS[node.op].exact_in_dtype:
            own = DTYPES[types[node.name].dtype]
            args = [a.to(own) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in node.attrs.items()}
        # An integer's cast is elided too: Inductor's lowering gives a cast to fp16/bf16 the compute
        # type float32 whatever its source (the H100's int32 -2500 -> bfloat16 -> int32 is -2500).
        elided = not casts_round and node.op == "cast" and DTYPES[attrs["dtype"]] in LOW_PRECISION and \
            isinstance(args[0], torch.Tensor)
        out = args[0].float() if elided else OPS[node.op].eager(*args, **attrs)
        if OPS[node.op].kind == "matmul" and out.is_floating_point():
            out = out.to(DTYPES[types[node.name].dtype])
        env[node.name] = out.float() if out.dtype in LOW_PRECISION else out
    return [env[o].to(dtype) for o, dtype in zip(graph.outputs, dtypes)]


def run_eager(graph: Graph, inputs: list, *, upcast: bool = False, flush_as_triton: bool = False,
              flush_math_calls: bool = False,
              rounding: torch.Generator | None = None) -> tuple[list[torch.Tensor], dict[str, str]]:
    """The outputs, and those of them tainted (`interpret`), with why."""
    env, tainted = interpret(graph, inputs, upcast=upcast, flush_as_triton=flush_as_triton,
                             flush_math_calls=flush_math_calls, rounding=rounding)
    return [env[o] for o in graph.outputs], {o: tainted[o] for o in graph.outputs if o in tainted}


# ---- autograd: backward cases ---------------------------------------------------------------------
def with_leaves(graph: Graph, inputs: list) -> list:
    """The inputs, each requires_grad one as a fresh leaf (same values and strides) that wants its
    gradient."""
    return [v.detach().requires_grad_(True) if isinstance(s, TensorInput) and s.requires_grad else v
            for s, v in zip(graph.inputs, inputs)]


def grad_inputs(graph: Graph, inputs: list) -> list[torch.Tensor]:
    """The values of the requires_grad inputs, in input order: what gradients are taken of."""
    return [v for s, v in zip(graph.inputs, inputs) if isinstance(s, TensorInput) and s.requires_grad]


def upstream_gradients(graph: Graph, outputs: list) -> list[torch.Tensor | None]:
    """A random upstream gradient for each output autograd can differentiate (None for the others:
    bool and int outputs, outputs behind a cast to int), drawn from `graph.grad_seed`."""
    gen = torch.Generator().manual_seed(graph.grad_seed)
    return [torch.randn(tuple(o.shape), generator=gen, dtype=torch.float64).to(device=o.device, dtype=o.dtype)
            if o.requires_grad else None for o in outputs]


def input_gradients(graph: Graph, inputs: list, outputs: list, grad_outputs: list) -> list[torch.Tensor]:
    """d(sum of outputs * upstream gradients) / d(each requires_grad input); zeros for an input no
    differentiable output depends on. `inputs` are the leaves the outputs were computed from."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if g is not None and o.requires_grad]
    wrt = grad_inputs(graph, inputs)
    # A fuser's output of the wrong shape has no gradient to judge (autograd would raise): the
    # forward comparison reports the shape, as a forward bug rather than a backward crash.
    if not pairs or not wrt or any(o.shape != g.shape for o, g in pairs):
        return []
    return list(torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True,
                                    materialize_grads=True))


def run_autograd(graph: Graph, inputs: list, grad_outputs: list | None = None, *, upcast: bool = False):
    """Forward and backward in eager: (outputs, names tainted by undefined behaviour, the upstream
    gradients, the requires_grad inputs' gradients). Upstream gradients are drawn when not given;
    upcast=True runs both passes in float64 (the arbiter), from float64 leaves."""
    if upcast:
        inputs = [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs]
        if grad_outputs is not None:
            grad_outputs = [None if g is None else g.double() for g in grad_outputs]
    inputs = with_leaves(graph, inputs)
    with torch.enable_grad():
        env, tainted = interpret(graph, inputs, upcast=upcast)
    outputs = [env[o] for o in graph.outputs]
    if grad_outputs is None:
        grad_outputs = upstream_gradients(graph, outputs)
    grads = input_gradients(graph, inputs, outputs, grad_outputs)
    return [o.detach() for o in outputs], tainted, grad_outputs, [g.detach() for g in grads]


def _annotation(spec) -> str:
    return "torch.Tensor" if isinstance(spec, TensorInput) else spec.dtype


def node_source(node: Node) -> str:
    return OPS[node.op].source([a if isinstance(a, str) else lit(a) for a in node.args], dict(node.attrs))


def to_source(graph: Graph, name: str = "fn") -> str:
    """The graph as one Python function that TorchScript can script and dynamo can trace."""
    params = ", ".join(f"{i.name}: {_annotation(i)}" for i in graph.inputs)
    lines = [f"def {name}({params}):"]
    lines += [f"    {n.name} = {node_source(n)}" for n in graph.nodes]
    lines.append(f"    return ({', '.join(graph.outputs)},)")
    return "\n".join(lines) + "\n"


def compile_source(graph: Graph, name: str = "fn"):
    """A Python function from the graph's source. The source is built from registry templates and
    validated attributes only, never from text read out of a file."""
    namespace: dict = {"torch": torch}
    exec(compile(to_source(graph, name), f"<fuzzfuse:{graph.digest()}>", "exec"), namespace)
    return namespace[name]


__all__ = ["interpret", "run_eager", "to_source", "compile_source", "node_source", "ScalarInput", "with_leaves",
           "grad_inputs", "upstream_gradients", "input_gradients", "run_autograd"]


# ---- the scalar arbiter ---------------------------------------------------------------------------
# Op kinds whose every output element reads only the input elements at its own position.
ELEMENTWISE_KINDS = ("unary", "binary", "ternary", "cast")


def _one_elementwise_output(graph: Graph, inputs: list, output: int) -> tuple[Graph | None, list]:
    """The graph of output `output` alone (what it does not read dropped) and the inputs it reads;
    (None, []) where an op of it is not elementwise (a reduction or a view reads other positions)."""
    graph = replace(graph, outputs=(graph.outputs[output],))
    kept = graph.without_dead_code()
    if any(OPS[n.op].kind not in ELEMENTWISE_KINDS for n in kept.nodes):
        return None, []
    read = {i.name for i in kept.inputs}
    return kept, [v for s, v in zip(graph.inputs, inputs) if s.name in read]


def scalar_reference(graph: Graph, inputs: list, output: int, positions: list[int]) -> list[torch.Tensor] | None:
    """The float64 values of output `output` at the flat `positions`, each computed from 0-d
    inputs: ATen runs a one-element tensor through its scalar loop, not its at::vec kernels, so
    this reference shares no vectorized fault with eager and the float64 run (AVX2's fmod of a huge
    by a tiny value is nan in both), nor a shortcut ATen takes for a number operand
    (`Op.unshortcut`: pow(-0.0, -0.5) as rsqrt is -inf). None where the graph is not elementwise
    (a reduction or a view reads other positions)."""
    kept, inputs = _one_elementwise_output(graph, inputs, output)
    if kept is None:
        return None
    inputs = [v.cpu() if isinstance(v, torch.Tensor) else v for v in inputs]
    try:
        shape = tuple(interpret(kept, inputs)[0][kept.outputs[0]].shape)
        values = []
        for flat in positions:
            index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape)) if shape else ()
            at = [v.broadcast_to(shape)[index].clone() if isinstance(v, torch.Tensor) else v for v in inputs]
            values.append(interpret(kept, at, upcast=True, unshortcut=True)[0][kept.outputs[0]])
    except (RuntimeError, ValueError, IndexError):  # an output that reads no input at its own position
        return None
    return values


def ops_faithful_at(graph: Graph, inputs: list, output: int, positions: list[int]) -> bool:
    """Whether every op of eager's own run (where its inputs are) is, at output `output`'s flat
    `positions`, within an ulp of the op computed in float64 from one-element operands holding
    eager's own operand values there: where each is, a difference between eager and
    `scalar_reference` is the graph amplifying last-bit roundings, no op's fault (atan2(v, v) of
    eager's correctly rounded 0 is 0, of libm's smallest denormal pi/4). False where an op is
    farther, or the graph is not elementwise."""
    kept, inputs = _one_elementwise_output(graph, inputs, output)
    if kept is None:
        return False
    env, _ = interpret(kept, inputs)
    shape = tuple(env[kept.outputs[0]].shape)
    one = lambda v, index: (v.broadcast_to(shape)[index].detach().cpu()  # noqa: E731
                            if isinstance(v, torch.Tensor) else v)
    for flat in positions:
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape)) if shape else ()
        for node in kept.nodes:
            args = [one(env[a], index) if isinstance(a, str) else a for a in node.args]
            wide = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
            attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in node.attrs.items()}
            got = one(env[node.name], index)
            try:
                want = (OPS[node.op].unshortcut or OPS[node.op].eager)(*wide, **attrs)
            except (RuntimeError, ValueError, TypeError):
                return False
            if not _within_an_ulp(got, want):
                return False
    return True


def _within_an_ulp(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Whether eager's one-element `got` is `want` (its op in float64) to an ulp of got's dtype
    (the smallest denormal near zero); integers and bools exactly."""
    if not got.is_floating_point():
        return bool((got == want.to(got.dtype)).all())
    g, w = got.double(), want.double()
    if bool((g.isnan() & w.isnan()).all()) or bool((g == w).all()):
        return True
    if not bool((g.isfinite() & w.isfinite()).all()):  # an infinity is no ulp from the other one
        return False
    info = torch.finfo(got.dtype)
    return bool(((g - w).abs() <= info.eps * w.abs() + info.smallest_normal * info.eps).all())
