"""Standalone repro scripts and paste-ready bug reports for minimized failures.

A repro imports torch only (plus the fuser's own package, e.g. nvfuser_direct): the graph as a
plain function, its exact inputs (inline, or a sibling `inputs.pt` loaded with weights_only), the
backend's own way of running it with fallback disabled, and a compact copy of the oracle. It exits
1 while the bug is present and 0 once it is fixed, so it drops into a bisect or a CI job as is.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from .ir import Graph, TensorInput, make_inputs, to_source
from .ir.graph import Layout
from .ir.types import is_float
from .ir.values import INLINE_LIMIT
from .oracle import (ATOL, RMSE_MULTIPLIER, RTOL, Signature, gradient_reduction_sizes, reduction_factor,
                     reduction_sizes)


_ORACLE = '''
RTOL = {rtol}
ATOL = {atol}


def differs(i, fused, expected, ref, k=None, what="output"):
    """fuzzfuse's oracle, compactly: beyond dtype tolerances AND further from float64 than eager."""
    if not isinstance(fused, torch.Tensor) or fused.shape != expected.shape or fused.dtype != expected.dtype:
        return f"{{what}} {{i}}: got {{getattr(fused, 'dtype', type(fused))}} {{tuple(getattr(fused, 'shape', ()))}}, " \\
               f"expected {{expected.dtype}} {{tuple(expected.shape)}}"
    f, e, r = (t.detach().cpu().double() for t in (fused, expected, ref))
    if not expected.is_floating_point():
        bad = (f != e) & (e == r) & (f != r)
        return f"{{what}} {{i}}: {{int(bad.sum())}} elements differ" if bad.any() else None
    cls = lambda t: torch.isnan(t) * 1 + (t == math.inf) * 2 + (t == -math.inf) * 3
    bad = (cls(f) != cls(e)) & (cls(e) == cls(r)) & (cls(f) != cls(r))
    if bad.any():
        return f"{{what}} {{i}}: NaN/Inf at {{int(bad.sum())}} positions where eager and float64 agree"
    ok = (cls(f) == 0) & (cls(e) == 0) & (cls(r) == 0)
    f, e, r = f[ok], e[ok], r[ok]
    k = REDUCED[i] if k is None else k
    if f.numel() == 0 or torch.allclose(f, e, rtol=RTOL[expected.dtype] * k, atol=ATOL[expected.dtype] * k):
        return None
    rmse = lambda a, b: math.sqrt(torch.mean((a - b) ** 2).item())
    if rmse(f, r) <= {multiplier} * rmse(e, r) + ATOL[expected.dtype] * k:
        return None
    return f"{{what}} {{i}}: rmse vs float64 {{rmse(f, r):.3g}} (eager {{rmse(e, r):.3g}}); max |fused - eager| " \\
           f"{{(f - e).abs().max().item():.3g}}"
'''

# How both mains end: every problem, then whether fused code ran. ({ran} is filled in here, not by
# format: the templates' own {fields} are formatted later.)
_VERDICT = '''    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    if not fused:
        print("FAIL: nothing was fused (the fallback path ran)")
        return 1
    print("OK: {ran} and matches eager")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

_MAIN = '''

def main():
    {timeout}inputs = make_inputs()
    expected = fn(*inputs)
    ref = fn_float64(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs])
    try:
        actual, fused = run_fused(inputs)
    except Exception:
        traceback.print_exc()
        print("FAIL: the fuser raised ({outcome} expected)")
        return 1
    problems = [p for i, (a, e, r) in enumerate(zip(actual, expected, ref)) if (p := differs(i, a, e, r))]
''' + _VERDICT.replace("{ran}", "fused code ran")


_AUTOGRAD = '''

REQUIRES_GRAD = {requires_grad}
GRAD_SEED = {grad_seed}
GRAD_REDUCED = {grad_reduced}


def leaves(inputs):
    """The inputs, each requires_grad one a fresh leaf that wants its gradient."""
    return [x.detach().requires_grad_(True) if rg else x for x, rg in zip(inputs, REQUIRES_GRAD)]


def upstream(outputs):
    """The case's seeded upstream gradient for each differentiable output (None for the others)."""
    gen = torch.Generator().manual_seed(GRAD_SEED)
    return [torch.randn(tuple(o.shape), generator=gen, dtype=torch.float64).to(device=o.device, dtype=o.dtype)
            if o.requires_grad else None for o in outputs]


def gradients(outputs, xs, grad_outputs):
    """torch.autograd.grad of the outputs, weighted by grad_outputs, w.r.t. the requires_grad inputs."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if g is not None and o.requires_grad]
    wrt = [x for x, rg in zip(xs, REQUIRES_GRAD) if rg]
    if not pairs or any(o.shape != g.shape for o, g in pairs):
        return []  # a fused output of the wrong shape: the forward comparison reports it
    return [g.detach() for g in torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                                    allow_unused=True, materialize_grads=True)]
'''

_MAIN_BACKWARD = '''

def main():
    {timeout}inputs = make_inputs()
    xs = leaves(inputs)
    outs = fn(*xs)
    grad_outputs = upstream(outs)
    expected, expected_grads = [o.detach() for o in outs], gradients(outs, xs, grad_outputs)
    xs = leaves([t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs])
    outs = fn_float64(*xs)
    ref = [o.detach() for o in outs]
    ref_grads = gradients(outs, xs, [None if g is None else g.double() for g in grad_outputs])
    try:
        actual, grads, fused = run_fused(inputs, grad_outputs)
    except Exception:
        traceback.print_exc()
        print("FAIL: the fuser raised ({outcome} expected)")
        return 1
    problems = [p for i, (a, e, r) in enumerate(zip(actual, expected, ref)) if (p := differs(i, a, e, r))]
    problems += [p for j, (e, r) in enumerate(zip(expected_grads, ref_grads))
                 if (p := differs(j, grads[j] if j < len(grads) else None, e, r, GRAD_REDUCED[j], "gradient"))]
''' + _VERDICT.replace("{ran}", "fused code ran forward and backward")


def _literal(values: list) -> str:
    """A Python literal for nested lists holding nan/inf (defined as names in the script)."""
    if isinstance(values, list):
        return "[" + ", ".join(_literal(v) for v in values) + "]"
    if isinstance(values, float):
        if math.isnan(values):
            return "nan"
        if math.isinf(values):
            return "inf" if values > 0 else "-inf"
    return repr(values)


def layout_source(var: str, layout: Layout) -> str:
    """The expression that gives `var` the layout's strides (mirrors values.apply_layout; expanded
    inputs are handled by inputs_source, which knows the rank)."""
    k = layout.kind
    if k == "channels_last":
        return f"{var}.contiguous(memory_format=torch.channels_last)"
    if k == "channels_last_3d":
        return f"{var}.contiguous(memory_format=torch.channels_last_3d)"
    if k == "permuted":
        inverse = sorted(range(len(layout.perm)), key=lambda i: layout.perm[i])
        return f"{var}.permute({list(layout.perm)}).contiguous().permute({inverse})"
    if k == "sliced":
        index = ", ".join([":"] * layout.dim + [f"::{layout.step}"])
        return f"sliced({var}, {layout.dim}, {layout.step})[{index}]"
    return var


def _expanded_index(layout: Layout, rank: int) -> str:
    return ", ".join("0:1" if i in layout.dims else ":" for i in range(rank))


def _fill(spec) -> str | None:
    """"zeros" or "ones" for an input that is that constant throughout: its repro line says so,
    whatever its size, instead of listing or saving the values."""
    if not isinstance(spec, TensorInput):
        return None
    v = spec.values
    if v.exact is None and v.specials == 0 and v.dist in ("zeros", "ones"):
        return v.dist
    return None


def inputs_source(graph: Graph, values: list, external: bool) -> str:
    """make_inputs(): exact values (constant fills spelled out), then the recorded memory layout."""
    lines = ["def make_inputs():"]
    if external:
        lines.append('    saved = torch.load(Path(__file__).with_name("inputs.pt"), weights_only=True)')
    for k, (spec, value) in enumerate(zip(graph.inputs, values)):
        if not isinstance(spec, TensorInput):
            lines.append(f"    {spec.name} = {value!r}")
            continue
        logical = value.contiguous()
        if fill := _fill(spec):
            lines.append(f"    {spec.name} = torch.{fill}({list(spec.shape)}, dtype=torch.{spec.dtype}, device=DEVICE)")
        elif external:
            lines.append(f"    {spec.name} = saved[{k}].to(DEVICE)")
        else:
            lines.append(f"    {spec.name} = torch.tensor({_literal(logical.tolist())}, dtype=torch.{spec.dtype}, device=DEVICE)"
                         + (f".reshape({list(spec.shape)})" if logical.dim() == 0 else ""))
        if spec.layout.kind == "expanded":
            lines.append(f"    {spec.name} = {spec.name}[{_expanded_index(spec.layout, len(spec.shape))}]"
                         f".expand({list(spec.shape)})")
        elif spec.layout.kind != "contiguous":
            lines.append(f"    {spec.name} = {layout_source(spec.name, spec.layout)}")
    lines.append(f"    return [{', '.join(i.name for i in graph.inputs)}]")
    return "\n".join(lines)


def float64_graph(graph: Graph) -> Graph:
    """The arbiter: the same graph with every floating cast made a float64 cast."""
    nodes = tuple(replace(n, attrs={**n.attrs, "dtype": "float64"}) if n.op == "cast" and is_float(n.attrs["dtype"])
                  else n for n in graph.nodes)
    return replace(graph, nodes=nodes)


# The exit status of a repro that cannot run as its bug needs here (git bisect run's "skip").
SKIP_STATUS = 125


def pin_prelude(versions: dict) -> str:
    """Source that pins the CPU capability the case ran with, before torch is imported: ATen's
    kernels and Inductor's C++ codegen (cpu_vec_isa.pick_vec_isa) both read ATEN_CPU_CAPABILITY.
    Inductor's caches do not key on it (a kernel compiled for AVX-512 is reused under avx2), so
    they are off. A machine with less than the pinned capability cannot pin it: postlude skips."""
    capability = versions.get("cpu_capability")
    if not capability:
        return ""
    return ("import os\n"
            f"CPU_CAPABILITY = {capability!r}  # found with it; ATen and Inductor's C++ codegen read it at import\n"
            'os.environ["ATEN_CPU_CAPABILITY"] = CPU_CAPABILITY\n'
            'os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"  # Inductor\'s caches ignore the capability\n')


def pin_postlude(versions: dict) -> str:
    """After torch is imported: skip (exit SKIP_STATUS) where the pinned capability did not take."""
    if not versions.get("cpu_capability"):
        return ""
    return ("if torch.backends.cpu.get_cpu_capability().lower() != CPU_CAPABILITY:\n"
            '    print(f"skip: the bug needs CPU capability {CPU_CAPABILITY}; this machine has "\n'
            '          f"{torch.backends.cpu.get_cpu_capability().lower()}")\n'
            f"    sys.exit({SKIP_STATUS})\n")


def repro_files(graph: Graph, backend, signature: dict, versions: dict, timeout: float = 300.0) -> dict[str, object]:
    """{"repro.py": source, and "inputs.pt": tensors when the inputs are too big to inline}."""
    values = make_inputs(graph)
    numel = sum(v.numel() for v, spec in zip(values, graph.inputs) if isinstance(v, torch.Tensor) and not _fill(spec))
    external = numel > INLINE_LIMIT
    types = graph.infer_types()
    reduced = reduction_sizes(graph, types)
    key = Signature.from_json(signature).key()
    header = (f'#!/usr/bin/env python3\n"""fuzzfuse repro: {signature.get("outcome")} on {backend.name}\n\n'
              f"signature: {key}\nversions: {versions}\n\n"
              "Exits 1 while the bug is present, 0 once it is fixed.\n\"\"\"\n")
    dtypes = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
    parts = [
        header,
        backend.repro_prelude() if hasattr(backend, "repro_prelude") else "",
        pin_prelude(versions) if backend.device == "cpu" else "",
        "import math\nimport sys\nimport traceback\nfrom pathlib import Path\n\nimport torch\n\n",
        pin_postlude(versions) if backend.device == "cpu" else "",
        f"nan, inf = math.nan, math.inf\nDEVICE = {backend.device!r}\n",
        _SLICED_HELPER if any(isinstance(i, TensorInput) and i.layout.kind == "sliced" for i in graph.inputs) else "",
        "\n" + to_source(graph, "fn"),
        "\n" + to_source(float64_graph(graph), "fn_float64"),
        "\n" + inputs_source(graph, values, external) + "\n",
        "\n" + backend.repro_code(graph).strip() + "\n",
        f"\nREDUCED = {[reduction_factor(reduced[o]) for o in graph.outputs]}",
        _ORACLE.format(rtol="{" + ", ".join(f"torch.{str(d).split('.')[1]}: {RTOL[d]}" for d in dtypes) + "}",
                       atol="{" + ", ".join(f"torch.{str(d).split('.')[1]}: {ATOL[d]}" for d in dtypes) + "}",
                       multiplier=RMSE_MULTIPLIER),
    ]
    if graph.requires_grad:
        grad_reduced = gradient_reduction_sizes(graph, types)
        parts.append(_AUTOGRAD.format(
            requires_grad=[isinstance(i, TensorInput) and i.requires_grad for i in graph.inputs],
            grad_seed=graph.grad_seed,
            grad_reduced=[reduction_factor(grad_reduced[i.name]) for i in graph.inputs if i.name in grad_reduced]))
    hang = (f"import faulthandler\n    faulthandler.dump_traceback_later({timeout}, exit=True)\n    "
            if signature.get("outcome") == "hang" else "")
    main = _MAIN_BACKWARD if graph.requires_grad else _MAIN
    parts.append(main.format(outcome=signature.get("outcome"), timeout=hang))
    files: dict[str, object] = {"repro.py": "".join(parts)}
    if external:
        files["inputs.pt"] = [None if _fill(spec) else v.contiguous() if isinstance(v, torch.Tensor) else v
                              for v, spec in zip(values, graph.inputs)]
    return files


_SLICED_HELPER = '''

def sliced(t, dim, step):
    """A zero base `step` times longer along `dim` holding `t` at every step-th index."""
    big = list(t.shape)
    big[dim] *= step
    base = torch.zeros(big, dtype=t.dtype, device=t.device)
    base[(slice(None),) * dim + (slice(None, None, step),)] = t
    return base
'''

