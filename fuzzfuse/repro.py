"""Standalone repros and the titles of their bug reports.

A repro imports torch only (plus the fuser's own package, e.g. nvfuser_direct): the graph as a
plain function, its exact inputs (inline, or a sibling `inputs.pt` loaded with weights_only), the
backend's own way of running it with fallback disabled, fuzzfuse's oracle in a dozen lines, and a
float64 baseline. It prints the expected and the actual values for people, then one verdict line
for machines (`fuzzfuse-verdict: {json}`), and exits 1 while the bug is present, 0 once it is
fixed, 125 where it cannot run as the bug needs (git bisect run's skip): it drops into a bisect or
a CI job as is.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from .ir import Graph, TensorInput, make_inputs, to_source
from .ir.graph import Layout
from .ir.types import is_float
from .ir.values import INLINE_LIMIT
from .oracle import ATOL, RMSE_MULTIPLIER, RTOL, Signature, gradient_reduction_sizes, reduction_sizes


# The compact oracle and the verdict every repro ends with. `compare` is fuzzfuse's oracle
# (oracle.compare_output) in a dozen lines, `location` oracle.cpp_location / python_location: a repro
# judged by another rule than the campaign's would stop reproducing (tests pin the agreement).
_JUDGE = """

TOLERANCE = {tolerance}  # (rtol, atol) by dtype, scaled by sqrt(reduction size)


def compare(actual, expected, fp64_ref, reduced=1):
    \"\"\"As torch._dynamo.utils.same(expected, actual, fp64_ref) takes it: wrong only where further
    from float64 than eager is. None, or (mismatch kind, the wrong positions or None).\"\"\"
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape or actual.dtype != expected.dtype:
        return ("shape" if isinstance(actual, torch.Tensor) and actual.shape != expected.shape else "dtype"), None
    actual, expected, fp64_ref = (t.detach().cpu() for t in (actual, expected, fp64_ref))
    if not expected.is_floating_point():  # exact, except where eager itself disagrees with float64
        ref = fp64_ref.to(expected.dtype)
        bad = (actual != expected) & (expected == ref) & (actual != ref)
        return ("values", bad) if bad.any() else None
    a, e, r = actual.double(), expected.double(), fp64_ref.double()
    special = lambda t: torch.isnan(t) + 2 * (t == inf) + 3 * (t == -inf)
    bad = (special(a) != special(e)) & (special(e) == special(r)) & (special(a) != special(r))
    if bad.any():
        return "nan-inf", bad
    finite = (special(a) == 0) & (special(e) == 0) & (special(r) == 0)
    rtol, atol = (tol * max(1.0, math.sqrt(reduced)) for tol in TOLERANCE[expected.dtype])
    close = torch.isclose(a, e, rtol=rtol, atol=atol) | ~finite
    rmse = lambda x: (x[finite] - r[finite]).pow(2).mean().sqrt().item()
    return None if close.all() or rmse(a) <= {multiplier} * rmse(e) + atol else ("values", ~close)


def innermost(text):
    \"\"\"nvFuser's parallel-compile wrapper unwrapped: the lowest-numbered failing segment's own error.\"\"\"
    while "compiling fusion segments in parallel" in text:
        marks = sorted(re.finditer(r"Error from segmentation group (\\d+):", text), key=lambda m: int(m[1]))
        if not marks:
            break
        ends = [m.start() for m in re.finditer(r"Error from segmentation group \\d+:|\\n\\s*Use NVFUSER_DISABLE=parallel_compile",
                                               text) if m.start() > marks[0].start()]
        text = text[marks[0].end():min(ends, default=len(text))]
    return text


def location(message, tb):
    \"\"\"Where it failed: the first C++ file:line of the (innermost) message, else of the traceback,
    from csrc/ (aten/, torch/, c10/) on; else the innermost torch frame as file:function.\"\"\"
    for text in (innermost(message), tb):
        m = re.search(r\"\"\"{cpp_location}\"\"\", text)
        if m:
            path = m[1]
            anchor = next((a for a in ("csrc/", "aten/", "torch/", "c10/") if a in path), None)
            return (path[path.index(anchor):] if anchor else "/".join(path.split("/")[-2:])) + ":" + m[2]
    frames = re.findall(r'File "([^"]+)", line \\d+, in (\\S+)', tb)
    torch_frames = [f"{{p[p.rindex('/torch/') + 1:]}}:{{f}}" for p, f in frames if "/torch/" in p]
    return torch_frames[-1] if torch_frames else ""


def verdict(outcome, kind="", location="", stage="", **detail):
    \"\"\"The last line printed, for machines (fuzzfuse's pytest plugin and export read it, nothing
    else); the exit status: 1 while the bug is present, 0 once fixed, 125 when it cannot run here.\"\"\"
    print("fuzzfuse-verdict: " + json.dumps(dict(outcome=outcome, kind=kind, location=location, stage=stage,
                                                 **detail)), flush=True)
    return {{"pass": 0, "skip": 125}}.get(outcome, 1)


def crashed(error):
    \"\"\"The fuser raised: its exception (dynamo's BackendCompilerFailed unwrapped) and where.\"\"\"
    if type(error).__name__ == "BackendCompilerFailed":
        error = error.inner_exception
    tb = "".join(traceback.format_exception(error))
    print(tb, file=sys.stderr)
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep  # TorchScript names this file: same text anywhere
    lines = f"{{type(error).__name__}}: {{error}}".replace(here, "").strip().splitlines()
    print(f"expected: {{BACKEND}} compiles and runs fn, and its outputs match eager's")
    print("actual: " + "\\n".join(lines[:30]) + (f"\\n[... {{len(lines) - 30}} more lines]" if len(lines) > 30 else ""))
    headline = next((ln.strip() for keys in (("INTERNAL ASSERT FAILED", "Expected"), ("error:", "Error:"))
                     for ln in str(error).splitlines() if any(k in ln for k in keys)), lines[0])
    return verdict("crash", type(error).__name__, location(str(error), tb), message=headline)


def judged(problems, fused, stage="run"):
    \"\"\"Print what was expected and what came out, then the verdict (of the first problem).\"\"\"
    shown = [show(*p) for p in problems]
    for expected, _, _ in shown:
        print(expected)
    for _, actual, _ in shown:
        print(actual)
    if problems:
        what, (kind, _), _, expected, _ = problems[0]
        dtype_class = "bool" if expected.dtype == torch.bool else "float" if expected.is_floating_point() else "int"
        return verdict("mismatch", kind, dtype_class, "backward-run" if what.startswith("grad") else stage,
                       **shown[0][2])
    if not fused:
        print(f"expected: {{BACKEND}} runs fused code")
        print("actual: nothing was fused (the fallback path ran)")
        return verdict("unfused", stage=stage)
    print(f"{{BACKEND}} ran fused code and matches eager")
    return verdict("pass")


def show(what, problem, actual, expected, fp64_ref):
    \"\"\"(expected line, actual line, the first wrong element for the verdict) of one problem.\"\"\"
    kind, bad = problem
    if bad is None:
        got = f"{{actual.dtype}} {{tuple(actual.shape)}}" if isinstance(actual, torch.Tensor) else type(actual).__name__
        return f"expected {{what}}: {{expected.dtype}} {{tuple(expected.shape)}}", f"actual {{what}}: {{got}}", {{}}
    at = tuple(bad.nonzero()[0].tolist())
    value = lambda t: (lambda v: f"{{v:.8g}}" if isinstance(v, float) else repr(v))(t.detach().cpu()[at].item())
    where = what + (f"[{{', '.join(map(str, at))}}]" if at else "")
    count = f", wrong at {{int(bad.sum())}} of {{bad.numel()}} positions" if bad.numel() > 1 else ""
    return (f"expected {{where}}: {{value(expected)}} (eager; float64 gives {{value(fp64_ref)}})",
            f"actual {{where}}: {{value(actual)}} ({{BACKEND}}{{count}})",
            {{"expected": value(expected), "actual": value(actual)}})
"""

_UPCAST = "[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]"

_MAIN = """

def main():
{setup}    inputs = make_inputs()
    expected = fn(*inputs)
    fp64_ref = fn_float64(*{upcast})
    try:
        actual, fused = run_fused(inputs)
    except Exception as e:
        return crashed(e)
    return judged([(f"output {{i}}", p, a, e, r) for i, (a, e, r) in enumerate(zip(actual, expected, fp64_ref))
                   if (p := compare(a, e, r, REDUCED[i]))], fused)


if __name__ == "__main__":
    status = main()
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(status)  # no destructors: a fuser object left by a kernel fault may abort in its own
"""

_AUTOGRAD = """

REQUIRES_GRAD = {requires_grad}
GRAD_SEED = {grad_seed}
GRAD_REDUCED = {grad_reduced}


def leaves(inputs):
    \"\"\"The inputs, each requires_grad one a fresh leaf that wants its gradient.\"\"\"
    return [x.detach().requires_grad_(True) if rg else x for x, rg in zip(inputs, REQUIRES_GRAD)]


def upstream(outputs):
    \"\"\"The case's seeded upstream gradient for each differentiable output (None for the others).\"\"\"
    gen = torch.Generator().manual_seed(GRAD_SEED)
    return [torch.randn(tuple(o.shape), generator=gen, dtype=torch.float64).to(device=o.device, dtype=o.dtype)
            if o.requires_grad else None for o in outputs]


def gradients(outputs, xs, grad_outputs):
    \"\"\"torch.autograd.grad of the outputs, weighted by grad_outputs, w.r.t. the requires_grad inputs.\"\"\"
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if g is not None and o.requires_grad]
    wrt = [x for x, rg in zip(xs, REQUIRES_GRAD) if rg]
    if not pairs or any(o.shape != g.shape for o, g in pairs):
        return []  # a fused output of the wrong shape: the forward comparison reports it
    return [g.detach() for g in torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                                    allow_unused=True, materialize_grads=True)]
"""

_MAIN_BACKWARD = """

def main():
{setup}    inputs = make_inputs()
    xs = leaves(inputs)
    outs = fn(*xs)
    grad_outputs = upstream(outs)
    expected, expected_grads = [o.detach() for o in outs], gradients(outs, xs, grad_outputs)
    xs = leaves({upcast})
    outs = fn_float64(*xs)
    fp64_ref = [o.detach() for o in outs]
    fp64_grads = gradients(outs, xs, [None if g is None else g.double() for g in grad_outputs])
    try:
        actual, grads, fused = run_fused(inputs, grad_outputs)
    except Exception as e:
        return crashed(e)
    problems = [(f"output {{i}}", p, a, e, r) for i, (a, e, r) in enumerate(zip(actual, expected, fp64_ref))
                if (p := compare(a, e, r, REDUCED[i]))]
    problems += [(f"gradient {{j}}", p, grads[j] if j < len(grads) else None, e, r)
                 for j, (e, r) in enumerate(zip(expected_grads, fp64_grads))
                 if (p := compare(grads[j] if j < len(grads) else None, e, r, GRAD_REDUCED[j]))]
    return judged(problems, fused)


if __name__ == "__main__":
    status = main()
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(status)  # no destructors: a fuser object left by a kernel fault may abort in its own
"""

# Ran past the case's timeout: the traceback of every thread, then the verdict, then out.
_HANG = """    def hung():
        faulthandler.dump_traceback()
        print(f"expected: {{BACKEND}} finishes within {timeout:g} s")
        print(f"actual: still running after {timeout:g} s")
        verdict("hang", "timeout")
        os._exit(1)

    threading.Timer({timeout}, hung).start()
"""

_PINNED = """    if torch.backends.cpu.get_cpu_capability().lower() != CPU_CAPABILITY:
        return verdict("skip", reason=f"the bug needs CPU capability {CPU_CAPABILITY}; this machine has "
                                      f"{torch.backends.cpu.get_cpu_capability().lower()}")
"""


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
# The rule of oracle.cpp_location, as the repro's own `location` applies it (a test pins the two).
CPP_LOCATION = r"""(?:at|from \w+ at) [\"']?([^\s\"']+?\.(?:cpp|cc|h|hpp|cu|cuh))[\"']?:(\d+)"""
BACKEND_NAMES = {"torchscript:nnc": "NNC", "torchscript:onednn": "oneDNN Graph", "torchscript:nvfuser": "nvFuser (TorchScript)",
                 "aot:nnc": "NNC (aot_autograd)", "aot:onednn": "oneDNN Graph (aot_autograd)",
                 "aot:nvfuser": "nvFuser (aot_autograd)", "nvfuser": "nvFuser", "inductor": "Inductor"}


def pin_prelude(versions: dict) -> str:
    """Source that pins the CPU capability the case ran with, before torch is imported: ATen's
    kernels and Inductor's C++ codegen (cpu_vec_isa.pick_vec_isa) both read ATEN_CPU_CAPABILITY.
    Inductor's caches do not key on it (a kernel compiled for AVX-512 is reused under avx2), so
    they are off. A machine with less than the pinned capability cannot pin it: main skips."""
    capability = versions.get("cpu_capability")
    if not capability:
        return ""
    return (f"CPU_CAPABILITY = {capability!r}  # found with it; ATen and Inductor's C++ codegen read it at import\n"
            'os.environ["ATEN_CPU_CAPABILITY"] = CPU_CAPABILITY\n'
            'os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"  # Inductor\'s caches ignore the capability\n')


def describe_graph(graph: Graph) -> str:
    """The ops of a (reduced) graph and its input dtypes, for titles: "var(dims=[2]) → logical_not on float32"."""
    def op(n) -> str:
        attrs = ", ".join(f"{k}={v}" for k, v in sorted(n.attrs.items()))
        scalars = [repr(a) for a in n.args if not isinstance(a, str)]
        inside = ", ".join(scalars + ([attrs] if attrs else []))
        return f"{n.op}({inside})" if inside else n.op
    ops = [op(n) for n in graph.nodes]
    chain = " → ".join(ops if len(ops) <= 4 else ops[:3] + [f"… ({len(ops)} ops)"])
    dtypes = sorted({i.dtype for i in graph.inputs if isinstance(i, TensorInput)})
    return f"{chain or 'no op'} on {', '.join(dtypes) or 'scalars'}"


def title(graph: Graph, backend: str, verdict: dict) -> str:
    """A report's title from the reduced graph and what its repro printed: the op(s) and the symptom,
    "Inductor: var(dims=[2]) → logical_not on float32 returns 0 (eager: nan)"."""
    outcome, kind = verdict.get("outcome"), verdict.get("kind", "")
    if outcome == "mismatch" and "actual" in verdict:
        symptom = f"returns {verdict['actual']} (eager: {verdict['expected']})"
    elif outcome == "mismatch":
        symptom = f"returns the wrong {kind}"
    elif outcome == "crash":
        message = verdict.get("message", kind)
        symptom = f"raises {message[:100]}" + (f" at {verdict['location']}" if verdict.get("location") else "")
    else:
        symptom = {"hard-crash": f"kills the process ({kind})", "hang": "hangs",
                   "unfused": "runs the unfused fallback"}.get(outcome, str(outcome))
    backward = "the backward of " if str(verdict.get("stage", "")).startswith("backward") else ""
    return f"{BACKEND_NAMES.get(backend, backend)}: {backward}{describe_graph(graph)} {symptom}"


def repro_files(graph: Graph, backend, signature: dict, versions: dict, timeout: float = 300.0) -> dict[str, object]:
    """{"repro.py": source, and "inputs.pt": tensors when the inputs are too big to inline}."""
    values = make_inputs(graph)
    numel = sum(v.numel() for v, spec in zip(values, graph.inputs) if isinstance(v, torch.Tensor) and not _fill(spec))
    external = numel > INLINE_LIMIT
    types = graph.infer_types()
    reduced = reduction_sizes(graph, types)
    key = Signature.from_json(signature).key()
    pinned = backend.device == "cpu" and bool(versions.get("cpu_capability"))
    hang = signature.get("outcome") == "hang"
    shown = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
    header = (f'#!/usr/bin/env python3\n"""{BACKEND_NAMES.get(backend.name, backend.name)}: '
              f'{describe_graph(graph)}: {signature.get("outcome")}\n\n'
              f"fuzzfuse signature: {key}\nfound with: {shown}\n\n"
              "Exits 1 while the bug is present, 0 once it is fixed; the last line it prints is its verdict.\n\"\"\"\n")
    float64 = float64_graph(graph)
    floats = sorted({types[o].dtype for o in graph.outputs} | {types[i.name].dtype for i in graph.inputs
                                                               if getattr(i, "requires_grad", False)})
    tolerance = "{" + ", ".join(f"torch.{d}: ({RTOL[getattr(torch, d)]}, {ATOL[getattr(torch, d)]})"
                                for d in floats if is_float(d)) + "}"
    imports = ["json", "math", "re", "sys", "traceback"] + (["faulthandler", "threading"] if hang else [])
    prelude = backend.repro_prelude()
    imports = sorted(imports + ([] if pinned or "import os\n" in prelude else ["os"]))
    parts = [
        header,
        "import os\n" if pinned else "",
        pin_prelude(versions) if pinned else "",
        prelude.replace("import os\n", "") if pinned else prelude,
        "".join(f"import {m}\n" for m in imports) + ("from pathlib import Path\n" if external else "") + "\nimport torch\n\n",
        f"nan, inf = math.nan, math.inf\nDEVICE = {backend.device!r}\nBACKEND = {backend.name!r}\n",
        _SLICED_HELPER if any(isinstance(i, TensorInput) and i.layout.kind == "sliced" for i in graph.inputs) else "",
        "\n\n" + to_source(graph, "fn"),
        ("\n\n" + to_source(float64, "fn_float64")) if float64 != graph else "\n\nfn_float64 = fn  # no cast to undo\n",
        "\n\n" + inputs_source(graph, values, external) + "\n",
        "\n\n" + backend.repro_code(graph).strip() + "\n",
        f"\n\nREDUCED = {[max(reduced[o], 1) for o in graph.outputs]}  # terms a reduction folds into an element\n",
        _JUDGE.format(tolerance=tolerance, multiplier=RMSE_MULTIPLIER, cpp_location=CPP_LOCATION),
    ]
    if graph.requires_grad:
        grad_reduced = gradient_reduction_sizes(graph, types)
        parts.append(_AUTOGRAD.format(
            requires_grad=[isinstance(i, TensorInput) and i.requires_grad for i in graph.inputs],
            grad_seed=graph.grad_seed,
            grad_reduced=[max(grad_reduced[i.name], 1) for i in graph.inputs if i.name in grad_reduced]))
    setup = (_PINNED if pinned else "") + (_HANG.format(timeout=timeout) if hang else "")
    main = _MAIN_BACKWARD if graph.requires_grad else _MAIN
    parts.append(main.format(setup=setup, upcast=_UPCAST))
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

