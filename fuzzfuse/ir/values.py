"""Materialize a graph's inputs: seeded values with special values mixed in, laid out in memory
exactly as the input's Layout says (channels_last, permuted, sliced, expanded)."""
from __future__ import annotations

import base64
import dataclasses
import functools

import torch

from .graph import Graph, GraphError, Layout, ScalarInput, TensorInput, Values
from .ops import OPS
from .types import DTYPES, FP8_DTYPES, ValueType, is_float, scalar_kind

# Elements. Inputs up to this size are small: a repro spells their values out (larger ones go to
# inputs.bin), and the reducer's first passes leave them be (a query costs the same at any size).
INLINE_LIMIT = 4096


def special_values(dtype: str) -> list[float]:
    """Values that break fusers: signed zeros, infinities, NaN, denormals, the extremes of the
    dtype, and exact halves (round-half-to-even)."""
    if dtype == "bool":
        return [0.0, 1.0]
    if not is_float(dtype):
        info = torch.iinfo(DTYPES[dtype])
        return [info.min, info.max, info.min + 1, 0, -1 if info.min < 0 else info.max - 1, 1]
    fi = torch.finfo(DTYPES[dtype])
    return [0.0, -0.0, float("inf"), float("-inf"), float("nan"), fi.smallest_normal / 4,
            -fi.smallest_normal / 2, fi.smallest_normal, fi.max, -fi.max, fi.max / 2, fi.eps,
            0.5, -0.5, 1.5, 2.5, -2.5, 1e4]


def _base_values(shape: tuple[int, ...], dtype: str, v: Values) -> torch.Tensor:
    gen = torch.Generator().manual_seed(v.seed)
    n = 1
    for s in shape:
        n *= s
    if v.dist == "normal":
        x = torch.randn(n, generator=gen, dtype=torch.float64) * v.scale
    elif v.dist == "uniform":
        x = (torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1) * v.scale
    elif v.dist == "ones":
        x = torch.ones(n, dtype=torch.float64)
    elif v.dist == "zeros":
        x = torch.zeros(n, dtype=torch.float64)
    elif v.dist == "halves":  # ties of round-half-to-even: -3.5 ... 3.5
        x = (torch.randint(-4, 4, (n,), generator=gen, dtype=torch.float64) + 0.5) * v.scale
    elif v.dist == "denormals":
        x = _denormals(n, dtype, gen)
    elif v.dist in ("specials", "lone_special"):
        x = torch.randn(n, generator=gen, dtype=torch.float64) * v.scale
    else:  # arange
        x = torch.arange(n, dtype=torch.float64)
    if dtype == "bool":
        out = x > 0 if v.dist in ("normal", "uniform") else x.remainder(2) > 0
    elif is_float(dtype):
        out = x.to(DTYPES[dtype])
    else:
        # Through int64: a float out of the dtype's range converts to an integer type as C++ says
        # nothing about, and uint8 takes negative values modulo 256 (255, 254...: edge values too).
        out = (x * (4 if v.dist == "normal" else 1)).round().to(torch.int64).to(DTYPES[dtype])
    final = out.dtype
    if dtype in FP8_DTYPES:  # eager has no indexed writes on fp8: place specials in float32
        out = out.float()
    if v.dist == "specials" and n:  # every element one of the special values
        out = torch.tensor(special_values(dtype), dtype=out.dtype)[torch.randint(len(special_values(dtype)), (n,),
                                                                                   generator=gen)]
    elif v.dist == "lone_special" and n:  # one special value at a seeded position
        specials = special_values(dtype)
        out[torch.randint(n, (1,), generator=gen)] = torch.tensor(
            specials[int(torch.randint(len(specials), (1,), generator=gen))], dtype=out.dtype)
    if v.specials > 0 and n:
        specials = special_values(dtype)
        mask = torch.rand(n, generator=gen) < v.specials
        pick = torch.randint(len(specials), (n,), generator=gen)
        # One indexed write, not one masked pass per special value (7x faster on 4M elements).
        out[mask] = torch.tensor(specials, dtype=out.dtype)[pick[mask]]
    return out.to(final).reshape(shape)


def _denormals(n: int, dtype: str, gen: torch.Generator) -> torch.Tensor:
    """Subnormal values of `dtype`, both signs (integers: small values around zero)."""
    if not is_float(dtype):
        return torch.randint(-2, 3, (n,), generator=gen, dtype=torch.float64)
    tiny = torch.finfo(DTYPES[dtype]).smallest_normal
    return (torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1) * tiny * 0.99


_SAME_SIZE_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def as_bits(t: torch.Tensor) -> torch.Tensor:
    """Values to compare by their bits, so that -0.0 and a NaN are values of their own."""
    return t.view(_SAME_SIZE_INT[t.element_size()]) if t.is_floating_point() else t


def logical_bytes(t: torch.Tensor) -> bytes:
    """The little-endian bytes of `t`'s logical values, in row-major order: what a case's exact
    values, a repro's inputs file and its byte checks hold."""
    # clone, not contiguous(): a size-1 tensor with a stride-0 last dim counts as contiguous but
    # cannot be viewed as bytes.
    return t.detach().cpu().clone(memory_format=torch.contiguous_format).reshape(-1).view(torch.uint8).numpy().tobytes()


def encode_exact(t: torch.Tensor) -> str:
    return base64.b64encode(logical_bytes(t)).decode()


def decode_exact(text: str, shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    """A fresh tensor each call (callers may write to it); the decoding is cached, as the reducer
    reads the same pinned megabytes for every candidate it weighs."""
    return _decoded(text, tuple(shape), dtype).clone()


@functools.lru_cache(maxsize=4)  # bounded: a pinned input can be tens of MB
def _decoded(text: str, shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    raw = bytearray(base64.b64decode(text, validate=True))
    dt = DTYPES[dtype]
    n = 1
    for s in shape:
        n *= s
    if len(raw) != n * dt.itemsize:
        raise GraphError(f"exact values hold {len(raw)} bytes, shape {shape} {dtype} needs {n * dt.itemsize}")
    if not raw:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(raw, dtype=torch.uint8).view(dt).reshape(shape).clone()


def logical_values(spec: TensorInput) -> torch.Tensor:
    """The input's values as a contiguous tensor; an expanded input repeats along its stride-0 dims."""
    if spec.values.exact is not None:
        return decode_exact(spec.values.exact, spec.shape, spec.dtype)
    shape = spec.shape
    if spec.layout.kind == "expanded":
        shape = tuple(1 if i in spec.layout.dims else s for i, s in enumerate(shape))
    return _base_values(shape, spec.dtype, spec.values).expand(spec.shape).contiguous()


def apply_layout(t: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Same logical values, with the strides the layout describes."""
    k = layout.kind
    if k == "channels_last":
        return t.contiguous(memory_format=torch.channels_last)
    if k == "channels_last_3d":
        return t.contiguous(memory_format=torch.channels_last_3d)
    if k == "permuted":
        inverse = sorted(range(len(layout.perm)), key=lambda i: layout.perm[i])
        return t.permute(layout.perm).contiguous().permute(inverse)
    if k == "sliced":
        big = list(t.shape)
        big[layout.dim] *= layout.step
        base = torch.zeros(big, dtype=t.dtype, device=t.device)
        index = (slice(None),) * layout.dim + (slice(None, None, layout.step),)
        base[index] = t
        return base[index]
    if k == "expanded":
        index = tuple(slice(0, 1) if i in layout.dims else slice(None) for i in range(t.dim()))
        return t[index].expand(t.shape)
    return t.clone()


def make_input(spec: TensorInput, device: str = "cpu", index_bound: int | None = None) -> torch.Tensor:
    """The input's tensor; an index input (`index_bounds`) wrapped into [0, index_bound), which
    leaves values already in range as they are."""
    values = logical_values(spec)
    if index_bound:
        values = values.remainder(index_bound)
    return apply_layout(values.to(device), spec.layout)


def index_bounds(graph: Graph) -> dict[str, int]:
    """Input name -> the exclusive bound its values must respect, for every input an op reads in an
    index role (`Op.index_operands`; the smallest bound where several read it)."""
    types = graph.infer_types()
    inputs = {i.name for i in graph.inputs}
    bounds: dict[str, int] = {}
    for n in graph.nodes:
        op = OPS[n.op]
        for pos in op.index_operands:
            name = n.args[pos]
            if isinstance(name, str) and name in inputs:
                arg_types = [types[a] if isinstance(a, str) else ValueType(None, scalar_kind(a)) for a in n.args]
                bound = op.index_bound(arg_types, n.attrs)
                bounds[name] = min(bound, bounds.get(name, bound))
    return bounds


def make_inputs(graph: Graph, device: str = "cpu") -> list:
    bounds = index_bounds(graph)
    return [make_input(i, device, bounds.get(i.name)) if isinstance(i, TensorInput) else i.value
            for i in graph.inputs]


# The value profiles of extra input sets, in turn: the input's own distribution with a fresh seed
# (its special values elsewhere), then the narrow-trigger distributions.
INPUT_SET_PROFILES = (None, "lone_special", None, "specials", "halves", "denormals")


def input_set(graph: Graph, k: int, resized: bool = False, restrided: bool = False) -> Graph:
    """The graph with input set k (k >= 1) instead of its own: every seeded input gets a fresh
    seed and the k-th value profile; resized: every dim above 1 is one larger (the same for equal
    dims, so broadcasts still line up); restrided: every tensor input (pinned ones too) takes
    `restrided_layout`, other strides of the same memory order and dense dims. Pinned (exact) values
    stay. A Graph, so that the set is recorded in the case and replays."""
    profile = INPUT_SET_PROFILES[(k - 1) % len(INPUT_SET_PROFILES)]
    inputs = []
    for spec in graph.inputs:
        if isinstance(spec, TensorInput) and spec.values.exact is None:
            v = spec.values
            seed = (v.seed * 1_000_003 + k) % 2**31
            values = Values(profile or v.dist, v.specials if profile is None else 0.0, seed, v.scale)
            shape = tuple(s + 1 if s > 1 else s for s in spec.shape) if resized else spec.shape
            spec = dataclasses.replace(spec, values=values, shape=shape)
        if isinstance(spec, TensorInput) and restrided:
            spec = dataclasses.replace(spec, layout=restrided_layout(spec.layout))
        inputs.append(spec)
    variant = dataclasses.replace(graph, inputs=tuple(inputs))
    if resized:
        try:
            variant.infer_types()
        except (GraphError, ValueError, KeyError, IndexError):  # a size in the attributes: values only
            return input_set(graph, k, restrided=restrided)
    return variant


def restrided_layout(layout: Layout) -> Layout:
    """A layout of the same logical tensor with other strides where the memory order and which
    dims are dense stay the same (what a compiled kernel that declared them may accept): a slice
    takes the other step (2 <-> 3). Any other layout stays: a dense tensor's strides follow from
    its sizes. (A size-1 dim's stride is free too, but apply_layout's permuted form keeps it, as
    torch's contiguous() does, and changing that would move the strides of committed cases.)"""
    if layout.kind == "sliced":
        return dataclasses.replace(layout, step=5 - layout.step if layout.step in (2, 3) else 2)
    return layout


def with_exact_values(spec: TensorInput | ScalarInput, value: torch.Tensor) -> TensorInput:
    """A copy of an input whose values are pinned to exactly `value` (the reducer's cut-prefix)."""
    return TensorInput(spec.name, tuple(value.shape), str(value.dtype).removeprefix("torch."),
                       getattr(spec, "layout", Layout()), Values(exact=encode_exact(value)))
