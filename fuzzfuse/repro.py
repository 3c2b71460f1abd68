"""regression.py: a minimized case judged by fuzzfuse's full oracle, for the regression corpus.

The script imports torch only (plus the fuser's own package, e.g. nvfuser_direct): the graph as a
plain function, its exact inputs (inline, or read from the raw bytes of a sibling `inputs.bin`), the
backend's own way of running it with fallback disabled, fuzzfuse's oracle in a dozen lines, and a
float64 baseline. It prints the expected and the actual values, then one verdict line for machines
(`fuzzfuse-verdict: {json}`), and exits 1 while the bug is present, 0 once it is fixed, 125 where
it cannot run as the bug needs (git bisect run's skip). The pytest plugin, `fuzzfuse export` and
verification run it; the repro.py beside it, which a maintainer reads, is fuzzfuse.short_repro's.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace

import torch

from .ir import Graph, TensorInput, make_inputs, to_source
from .ir.graph import Layout, Node
from .ir.interp import cast_rounds
from .ir.types import DTYPES, is_float
from .ir.values import INLINE_LIMIT, logical_bytes
from .explain import shows_on_a_poisoned_heap
from .heap import REPRO_LINES
from .oracle import headline, innermost_error, nvrtc_error

# Where a repro's inputs too large to inline are: their bytes, little-endian, one after another in
# input order. Raw bytes, not a pickle: a repro directory is shared, and its data never runs code.
INPUTS_FILE = "inputs.bin"
from .oracle import ATOL, RMSE_MULTIPLIER, RTOL, Signature, gradient_reduction_sizes, reduction_factor, reduction_sizes


# The judging every repro ends with: `wrong` is fuzzfuse's oracle (oracle.compare_output) in a
# dozen lines (a repro judged by another rule than the campaign's would stop reproducing; tests pin
# the agreement). A crash's verdict names the exception type only: fuzzfuse reads where it was
# raised from the traceback the repro prints (tracebacks.error_location), as the oracle does.
_JUDGE = """

TOLERANCE = {tolerance}  # (rtol, atol) of each output: fuzzfuse's, times sqrt(terms a reduction sums)


def check(what, actual, expected, fp64_ref, rtol, atol, stage="run"):
    \"\"\"Assert that `actual` is as good as eager: no further from float64 than eager is (as
    torch._dynamo.utils.same takes fp64_ref). Before failing, print its first wrong element beside
    eager's and float64's, and the verdict.\"\"\"
    a, e, r = (t.detach().cpu() if isinstance(t, torch.Tensor) else t for t in (actual, expected, fp64_ref))
    if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
        kind, bad = ("shape" if isinstance(a, torch.Tensor) and a.shape != e.shape else "dtype"), None
    elif not e.is_floating_point():  # exact, except where eager itself is off from float64
        kind, bad = "values", (a != e) & (e == r.to(e.dtype)) & (a != r.to(e.dtype))
    else:
        special = lambda t: (lambda d: d.isnan() + 2 * d.isposinf() + 3 * d.isneginf())(t.double())  # noqa: E731 (fp8 has no isposinf)
        kind, bad = "nan-inf", (special(a) != special(e)) & (special(e) == special(r)) & (special(a) != special(r))
        finite = (special(a) == 0) & (special(e) == 0) & (special(r) == 0)
        rmse = lambda t: (t.double()[finite] - r.double()[finite]).pow(2).mean().sqrt().item()  # noqa: E731
        if not bad.any() and rmse(a) > {multiplier} * rmse(e) + atol:
            kind, bad = "values", ~torch.isclose(a.double(), e.double(), rtol=rtol, atol=atol) & finite
    if bad is not None and not bad.any():
        return
    at = None if bad is None else tuple(bad.nonzero()[0].tolist())

    def show(t):  # its dtype and shape, or its element at `at`
        if at is None:
            return f"{{t.dtype}} {{tuple(t.shape)}}" if isinstance(t, torch.Tensor) else type(t).__name__
        return (lambda v: f"{{v:.8g}}" if isinstance(v, float) else repr(v))(t[at].item())
    where = what + (f"[{{', '.join(map(str, at))}}]" if at else "")
    count = f", wrong at {{int(bad.sum())}} of {{bad.numel()}} positions" if bad is not None and bad.numel() > 1 else ""
    print(f"expected {{where}}: {{show(e)}} (eager" + ("" if at is None else f"; float64 gives {{show(r)}}") + ")")
    print(f"actual {{where}}: {{show(a)}} ({{BACKEND}}{{count}})")
    cls = "bool" if e.dtype == torch.bool else "float" if e.is_floating_point() else "int"
    verdict("mismatch", kind=kind, location=cls, stage=stage, expected=show(e), actual=show(a), at=list(at or ()))
    raise AssertionError(f"{{where}}: {{BACKEND}} gives {{show(a)}}, eager {{show(e)}}")


def crashed(error):
    \"\"\"The fuser raised: print it and the verdict, then exit at once, before a fuser object that a
    kernel fault left behind can abort in its destructor.\"\"\"
    if type(error).__name__ == "BackendCompilerFailed":  # torch.compile's wrapper around the fuser's error
        error = error.inner_exception
    traceback.print_exception(error)
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep  # TorchScript quotes this file: same text anywhere
    print(f"expected: {{BACKEND}} compiles and runs fn")
    message = str(error).split("\\nframe #0:")[0]  # C++ frames (nvFuser's): their addresses change every run
    print(f"actual: {{type(error).__name__}}: {{message}}".replace(here, "").rstrip())
    sys.stderr.flush()
    os._exit(verdict("crash", kind=type(error).__name__))


def verdict(outcome, **detail):
    \"\"\"Print the line fuzzfuse's regression corpus reads, last; the exit status: 1 while the bug
    is present, 0 once it is fixed, 125 where it cannot run as the bug needs (git bisect's skip).\"\"\"
    print("fuzzfuse-verdict: " + json.dumps(dict(outcome=outcome, **detail)), flush=True)
    return {{"pass": 0, "skip": 125}}.get(outcome, 1)
"""

# A strides mismatch's check, after the values' (oracle.strides_defined and _stride_mismatch).
_STRIDES = """

def check_strides(what, actual, expected):
    \"\"\"Assert that `actual` has eager's strides where eager's are a layout (a dense,
    non-overlapping, non-empty tensor), in its dims of size above 1.\"\"\"
    dims = sorted((expected.stride(d), expected.shape[d]) for d in range(expected.dim()) if expected.shape[d] > 1)
    if expected.numel() == 0 or dims != [(math.prod(s for _, s in dims[:k]), size) for k, (_, size) in enumerate(dims)]:
        return
    significant = [d for d in range(expected.dim()) if expected.shape[d] > 1]
    if [actual.stride(d) for d in significant] == [expected.stride(d) for d in significant]:
        return
    print(f"expected {what} strides: {expected.stride()} (eager)")
    print(f"actual {what} strides: {actual.stride()} ({BACKEND})")
    cls = "bool" if expected.dtype == torch.bool else "float" if expected.is_floating_point() else "int"
    verdict("mismatch", kind="strides", location=cls, stage="run", expected=str(expected.stride()),
            actual=str(actual.stride()))
    raise AssertionError(f"{what}: {BACKEND} gives strides {actual.stride()}, eager {expected.stride()}")
"""

_UPCAST = "[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]"

_MAIN = """

def main():
{setup}    inputs = make_inputs()
    expected = fn(*inputs)
    fp64_ref = {fn64}(*{upcast})
{hang}    try:
        actual, fused = run_fused(inputs)
    except Exception as e:
        crashed(e)
    for i, (a, e, r) in enumerate(zip(actual, expected, fp64_ref)):
        check(f"output {{i}}", a, e, r, *TOLERANCE[i])
{strides}    return fused
"""

# After main: a mismatch has raised AssertionError and a crash has exited; what is left is whether
# the fuser fused.
_ENTRY = """

if __name__ == "__main__":
    if not main():
        print(f"expected: {BACKEND} runs fused code")
        print("actual: nothing was fused (the fallback path ran)")
        sys.exit(verdict("unfused"))
    print(f"{BACKEND} ran fused code and matches eager")
    sys.exit(verdict("pass"))
"""

_AUTOGRAD = """

REQUIRES_GRAD = {requires_grad}
GRAD_SEED = {grad_seed}
GRAD_TOLERANCE = {grad_tolerance}  # (rtol, atol) of each gradient, as TOLERANCE


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
        return []  # a fused output of the wrong shape: the forward check reports it
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
    outs = {fn64}(*xs)
    fp64_ref = [o.detach() for o in outs]
    fp64_grads = gradients(outs, xs, [None if g is None else g.double() for g in grad_outputs])
{hang}    try:
        actual, grads, fused = run_fused(inputs, grad_outputs)
    except Exception as e:
        crashed(e)
    for i, (a, e, r) in enumerate(zip(actual, expected, fp64_ref)):
        check(f"output {{i}}", a, e, r, *TOLERANCE[i])
    for j, (e, r) in enumerate(zip(expected_grads, fp64_grads)):
        check(f"gradient {{j}}", grads[j] if j < len(grads) else None, e, r, *GRAD_TOLERANCE[j], "backward-run")
    return fused
"""

# Ran past the case's timeout: the traceback of every thread, then the verdict, then out. A daemon
# timer, started just before the fused run: a repro whose bug is gone exits without waiting for
# it, and a slow import or eager run on a busy machine is not counted as the fuser's hang (nor
# quoted as where it hung).
_HANG = """    def hung():
        faulthandler.dump_traceback()
        print(f"expected: {{BACKEND}} finishes within {timeout:g} s")
        print(f"actual: still running after {timeout:g} s")
        # Where: the main thread's innermost frames (a report line; the stacks above are on stderr).
        frame = sys._current_frames().get(threading.main_thread().ident)
        packages = "-packages" + os.sep  # in site- or dist-packages: the path from the package on
        short = lambda path: path.split(packages)[-1] if packages in path else os.path.basename(path)  # noqa: E731
        print("still in: " + " <- ".join(f"{{f.name}} ({{short(f.filename)}}:{{f.lineno}})"
                                         for f in reversed(traceback.extract_stack(frame)[-3:] if frame else [])))
        os._exit(verdict("hang", kind="timeout"))

    timer = threading.Timer({timeout}, hung)
    timer.daemon = True
    timer.start()
"""

# A GPU repro on a machine without one: a skip verdict, not torch's "not compiled with CUDA" traceback.
_NEEDS_CUDA = """    if not torch.cuda.is_available():
        sys.exit(verdict("skip", reason="the bug needs a CUDA GPU; this machine has none"))
"""

# What the CPU has, asked of the CPU itself: torch.backends.cpu.get_cpu_capability() reports what
# ATEN_CPU_CAPABILITY asked for, so on an AVX2 machine a repro pinned to avx512 ran AVX-512 kernels
# and died by SIGILL instead of skipping.
_PINNED = """    has = {"default": True, "avx2": torch.cpu._is_avx2_supported(), "avx512": torch.cpu._is_avx512_supported()}
    if not has.get(CPU_CAPABILITY, False):
        sys.exit(verdict("skip", reason=f"the bug needs CPU capability {CPU_CAPABILITY}; this machine's CPU "
                                        f"has {[c for c in has if has[c]][-1]}"))
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
    """make_inputs(): exact values (constant fills spelled out; external ones read from
    INPUTS_FILE at the offsets `external_bytes` wrote them), then the recorded memory layout."""
    lines = ["def make_inputs():"]
    if external:
        lines.append(f'    raw = Path(__file__).with_name("{INPUTS_FILE}").read_bytes()')
    offset = 0
    for spec, value in zip(graph.inputs, values):
        if not isinstance(spec, TensorInput):
            lines.append(f"    {spec.name} = {value!r}")
            continue
        logical = value.contiguous()
        if fill := _fill(spec):
            lines.append(f"    {spec.name} = torch.{fill}({list(spec.shape)}, dtype=torch.{spec.dtype}, device=DEVICE)")
        elif external:
            size = logical.numel() * logical.element_size()
            lines.append(f"    {spec.name} = torch.frombuffer(bytearray(raw[{offset}:{offset + size}]), dtype=torch.uint8)"
                         f".view(torch.{spec.dtype}).reshape({list(spec.shape)}).to(DEVICE)")
            offset += size
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


def external_bytes(graph: Graph, values: list) -> bytes:
    """INPUTS_FILE's content: each tensor input's logical values that `inputs_source` does not
    spell out (no constant fill), as little-endian bytes, in input order."""
    return b"".join(logical_bytes(value) for spec, value in zip(graph.inputs, values)
                    if isinstance(spec, TensorInput) and not _fill(spec))


def float64_graph(graph: Graph) -> Graph:
    """The arbiter as the oracle computes it (`ir.interp.interpret`, upcast=True): the same graph
    in float64, where a floating cast is a float64 cast except one that asks for a rounding
    (`ir.interp.cast_rounds`: x.to(bfloat16) of a float32), which rounds as asked and is then
    widened; and every float an op makes out of integers or bools (exp2 of an int8 tensor is
    float32) widened to float64. Without the widening, the repro of exp2(int8) -> linear with
    float32 weights failed in its own reference (linear refuses float32 with float64) and printed
    no verdict. Without the roundings, the repro of a cast Inductor dropped judged it right
    against a reference that dropped it too, where the oracle had judged it wrong."""
    types = graph.infer_types()
    nodes: list[Node] = []
    widened: dict[str, str] = {}
    for node in graph.nodes:
        n = replace(node, args=tuple(widened.get(a, a) if isinstance(a, str) else a for a in node.args))
        rounds = cast_rounds(node, types)
        if n.op == "cast" and is_float(n.attrs["dtype"]) and not rounds:
            n = replace(n, attrs={**n.attrs, "dtype": "float64"})
        nodes.append(n)
        made = types[n.name].dtype
        if rounds or (n.op != "cast" and made is not None and is_float(made) and made != "float64"
                      and not any(types[a].dtype is not None and is_float(types[a].dtype) for a in node.refs())):
            widened[n.name] = f"{n.name}_float64"
            nodes.append(Node(widened[n.name], "cast", (n.name,), {"dtype": "float64"}))
    return replace(graph, nodes=tuple(nodes), outputs=tuple(widened.get(o, o) for o in graph.outputs))


# The exit status of a repro that cannot run as its bug needs here (git bisect run's "skip").
SKIP_STATUS = 125


def pin_prelude(versions: dict[str, str]) -> str:
    """Source that pins the CPU capability the case ran with, before torch is imported: ATen's
    kernels and Inductor's C++ codegen (cpu_vec_isa.pick_vec_isa) both read ATEN_CPU_CAPABILITY.
    Inductor's caches do not key on it (a kernel compiled for AVX-512 is reused under avx2), so
    they are off. A machine with less than the pinned capability cannot pin it: main skips."""
    capability = versions.get("cpu_capability")
    if not capability:
        return ""
    return (f"CPU_CAPABILITY = {capability!r}  # the lowest it fails under; ATen and Inductor's C++ codegen read it at import\n"
            'os.environ["ATEN_CPU_CAPABILITY"] = CPU_CAPABILITY\n'
            'os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"  # Inductor\'s caches ignore the capability\n')


def describe_graph(graph: Graph) -> str:
    """The ops of a (reduced) graph and its input dtypes, for titles: "var(dims=[2]) → logical_not
    on float32"; an op with scalar operands shows all of them, "pow(x0, 0.5)"."""
    def op(n) -> str:
        attrs = [f"{k}={v}" for k, v in sorted(n.attrs.items())]
        args = [a if isinstance(a, str) else repr(a) for a in n.args] if any(not isinstance(a, str) for a in n.args) else []
        return f"{n.op}({', '.join(args + attrs)})" if args or attrs else n.op
    ops = [op(n) for n in graph.nodes]
    chain = " → ".join(ops if len(ops) <= 4 else ops[:3] + [f"… ({len(ops)} ops)"])
    dtypes = sorted({i.dtype for i in graph.inputs if isinstance(i, TensorInput)})
    return f"{chain or 'no op'} on {', '.join(dtypes) or 'scalars'}"


# torch's logging prefix ("E1203 11:15:46.046000 6345 torch/_subclasses/fake_tensor.py:2908] [0/0] "):
# a time, a process id and a log site, none of them the error's.
_LOG_PREFIX = re.compile(r"^[EWIC]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+\] (?:\[[^\]]*\] )?", re.M)


def _raised(verdict: dict) -> str:
    """A crash as a title says it: the exception and the failing condition or message, without
    the assert's boilerplate, and where (`raises RuntimeError: dims.size() == 4 (got size:2) at
    csrc/jit/tensorexpr/expr.cpp:381`)."""
    kind, message = verdict.get("kind", ""), _LOG_PREFIX.sub("", verdict.get("message", ""))
    text = re.sub(r"Error from segmentation group \d+:\s*", "", innermost_error(message)).strip()
    if nvrtc_error(text):  # named by its first compiler error
        line = nvrtc_error(text)
    elif assertion := re.search(r"INTERNAL ASSERT FAILED at \S+?:\d+\S*", text):
        condition = " ".join(text[:assertion.start()].strip().splitlines()[-1:])
        rest = re.sub(r"^[,\s]*please report a bug.*?(?:issues|PyTorch)\.", "", text[assertion.end():], flags=re.S)
        said = next((ln.strip() for ln in rest.splitlines() if ln.strip()
                     and not ln.strip().startswith(("Exception raised from", "frame #"))), "")
        line = " ".join(["internal assert", condition, "failed"]).replace("  ", " ") + (f": {said}" if said else "")
    else:
        line = re.sub(r"\s*Exception raised from .*", "", headline(text)).removeprefix(f"{kind}:").strip()
    if len(line) > 100:
        line = line[:100].rsplit(" ", 1)[0] + " …"
    where = verdict.get("location", "")
    return f"raises {kind}" + (f": {line}" if line else "") + (f" at {where}" if where else "")


def tolerances(dtypes: list[str], reduced: list[int]) -> list[tuple[float, float]]:
    """The oracle's (rtol, atol) for values of these dtypes, each scaled by the terms a reduction
    sums into one of its elements; (0, 0) for integers and bools, which compare exactly."""
    return [(RTOL[DTYPES[d]] * reduction_factor(k), ATOL[DTYPES[d]] * reduction_factor(k)) if is_float(d)
            else (0.0, 0.0) for d, k in zip(dtypes, reduced)]


def repro_files(graph: Graph, backend, signature: Signature, versions: dict[str, str],
                timeout: float = 300.0) -> dict[str, object]:
    """{"repro.py": source, and INPUTS_FILE: bytes, when the inputs are too big to inline}."""
    values = make_inputs(graph)
    numel = sum(v.numel() for v, spec in zip(values, graph.inputs) if isinstance(v, torch.Tensor) and not _fill(spec))
    external = numel > INLINE_LIMIT
    types = graph.infer_types()
    reduced = reduction_sizes(graph, types)
    key = signature.key()
    pinned = backend.device == "cpu" and bool(versions.get("cpu_capability"))
    hang = signature.outcome == "hang"
    shown = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
    header = (f'#!/usr/bin/env python3\n"""{backend.display_name or backend.name}: '
              f'{describe_graph(graph)}: {signature.outcome} {signature.kind}'.rstrip() + "\n\n"
              f"Found by fuzzfuse (signature {key}) with {shown}.\n"
              "Prints what eager gives (float64 arbitrating) and what the fuser gives, then its verdict line;\n"
              "exits 1 while the bug is present, 0 once it is fixed.\n\"\"\"\n")
    float64 = float64_graph(graph)
    imports = ["json", "math", "sys", "traceback"] + (["faulthandler", "threading"] if hang else [])
    prelude = backend.repro_prelude()
    imports = sorted(imports + ([] if pinned or "import os\n" in prelude else ["os"]))
    # Bytes a kernel never writes read the same on every run (fuzzfuse.heap), as in the workers.
    unwritten = "".join(ln + "\n" for ln in REPRO_LINES) if shows_on_a_poisoned_heap(signature.message) else ""
    parts = [
        header,
        unwritten,
        "import os\n" if pinned else "",
        pin_prelude(versions) if pinned else "",
        prelude.replace("import os\n", "") if pinned else prelude,
        "".join(f"import {m}\n" for m in imports) + ("from pathlib import Path\n" if external else "") + "\nimport torch\n\n",
        f"nan, inf = math.nan, math.inf\nDEVICE = {backend.device!r}\nBACKEND = {backend.name!r}\n",
        _SLICED_HELPER if any(isinstance(i, TensorInput) and i.layout.kind == "sliced" for i in graph.inputs) else "",
        "\n\n" + to_source(graph, "fn"),
        ("\n\n" + to_source(float64, "fn_float64")) if float64 != graph else "",
        "\n\n" + inputs_source(graph, values, external) + "\n",
        "\n\n" + backend.repro_code(graph).strip() + "\n",
        _JUDGE.format(tolerance=tolerances([types[o].dtype for o in graph.outputs], [reduced[o] for o in graph.outputs]),
                      multiplier=RMSE_MULTIPLIER),
    ]
    if graph.requires_grad:
        grad_reduced = gradient_reduction_sizes(graph, types)
        wanted = [i for i in graph.inputs if i.name in grad_reduced]
        parts.append(_AUTOGRAD.format(
            requires_grad=[isinstance(i, TensorInput) and i.requires_grad for i in graph.inputs],
            grad_seed=graph.grad_seed,
            grad_tolerance=tolerances([i.dtype for i in wanted], [grad_reduced[i.name] for i in wanted])))
    setup = (_PINNED if pinned else "") + (_NEEDS_CUDA if backend.device == "cuda" else "")
    main = _MAIN_BACKWARD if graph.requires_grad else _MAIN
    strides = signature.outcome == "mismatch" and signature.kind == "strides"
    if strides:
        parts.append(_STRIDES)
    parts.append(main.format(setup=setup, hang=_HANG.format(timeout=timeout) if hang else "", upcast=_UPCAST, fn64="fn_float64" if float64 != graph else "fn",
                             strides='        check_strides(f"output {i}", a, e)\n' if strides else "") + _ENTRY)
    files: dict[str, object] = {"repro.py": "".join(parts)}
    if external:
        files[INPUTS_FILE] = external_bytes(graph, values)
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

