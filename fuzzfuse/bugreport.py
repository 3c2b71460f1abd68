"""A minimized directory as a maintainer receives it: its title (the trigger named), its README,
and `fuzzfuse report DIR...`, the issue body in the upstream's own form, ready to paste.

A directory holds case.json (the record), repro.py (the short repro in the upstream's idiom:
fuzzfuse.short_repro), regression.py (fuzzfuse's full oracle, which the regression corpus runs:
fuzzfuse.repro) and README.md. `fuzzfuse report --regenerate DIR...` rewrites repro.py,
regression.py and README.md from case.json; a CPU repro is re-run in a fresh process and its output
quoted verbatim; a GPU repro's output comes from `--outputs FILE.json`, which
benchmarks/gpu_repro_outputs.py writes on a GPU machine.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from .backends.registry import _factory, declared, display_name
from .corpus import Case, CorpusError, ReductionFigures, load_case, read_json, write_json
from .explain import names_a_rule
from .export import FIXED, KERNEL_CACHES
from .ir import Graph, TensorInput
from .ir.types import DTYPES, is_float
from .ir.values import logical_values
from .oracle import FAILING_CONTEXT, gradient_reduction_sizes, innermost_error, normalize, nvrtc_error, reduction_sizes
from .repro import INPUTS_FILE, _raised, repro_files, tolerances
from .short_repro import (CHILD_ENDED, HANG_SECONDS, MAX_LINES, Symptom, exit_contract, in_a_child, kills_the_process,
                          short_repro)
from .upstream import Relation, known
from .verdict import EAGER_FAULT, Reproduction

REPRO, REGRESSION, README = "repro.py", "regression.py", "README.md"
# What another tool keeps in a README (fuzzfuse.versions' section): carried over as it is.
VERSIONS_SECTION = re.compile(r"<!-- versions -->.*?<!-- /versions -->\n?", re.S)
# Lines of a run's output a README quotes whole; a longer one keeps its head and its tail.
OUTPUT_HEAD, OUTPUT_TAIL = 15, 30
REPRO_TIMEOUT = 900.0


def case_device(case: Case) -> str:
    """Where the case ran: "cuda" for a backend whose class runs there (nvFuser's routes) and for a
    case recorded with a GPU, else "cpu"."""
    if declared(case.backend, "device") == "cuda" or "gpu" in case.versions or "cuda" in case.versions:
        return "cuda"
    return "cpu"


# ---- titles ----------------------------------------------------------------------------------
def _value_text(x: float) -> str:
    """3.4028235e+38 -> "3.4e38"; integers as they are."""
    if float(x).is_integer() and abs(x) < 1e6:
        return str(int(x))
    mantissa, _, exponent = f"{x:.2g}".partition("e")
    return mantissa + (f"e{int(exponent)}" if exponent else "")


def trigger_values(spec: TensorInput) -> list[str]:
    """The values in an input that fusers get wrong (NaN, infinities, -0, the dtype's extremes,
    subnormals, an unsigned value with its top bit set), as a title says them; at most three."""
    values = logical_values(spec)
    if values.numel() == 0 or spec.dtype == "bool":
        return []
    found: list[str] = []
    if is_float(spec.dtype):
        x = values.double()
        info = torch.finfo(DTYPES[spec.dtype])
        found += ["nan"] * bool(x.isnan().any()) + ["inf"] * bool(x.isposinf().any()) + \
            ["-inf"] * bool(x.isneginf().any())
        big = x[x.isfinite() & (x.abs() >= info.max / 4)]
        found += sorted({_value_text(v) for v in big.tolist()})
        found += ["-0.0"] * bool(((x == 0) & x.signbit()).any())
        found += ["subnormals"] * bool(((x != 0) & (x.abs() < info.tiny)).any())
    else:
        info = torch.iinfo(DTYPES[spec.dtype])
        held = set(values.reshape(-1).tolist())
        found += [str(v) for v in sorted({info.min, info.max} & held)]
        if info.min == 0:
            # An unsigned value with its top bit set reads negative where a fuser loads it as
            # signed (Inductor CPU's softmax of a uint8 254 over 1.0 computed with -2).
            high = sorted(v for v in held if info.max // 2 < v < info.max)
            found += [str(high[-1])] if high else []
    return found[:3]


def _layout_text(spec: TensorInput) -> str:
    k = spec.layout.kind
    if k == "sliced":
        return f"strided: step {spec.layout.step} along dim {spec.layout.dim}"
    if k == "permuted":
        return f"permuted {list(spec.layout.perm)}"
    return "" if k == "contiguous" else k


def describe_inputs(graph: Graph) -> str:
    """"float32 (expanded) holding -inf, int8 [256]": each tensor input's dtype, its size when
    large, its layout when not contiguous, and its trigger values."""
    parts = []
    for spec in graph.inputs:
        if not isinstance(spec, TensorInput):
            continue
        text = spec.dtype + (f" {list(spec.shape)}" if math.prod(spec.shape) > 64 else "")
        text += f" ({_layout_text(spec)})" if _layout_text(spec) else ""
        values = trigger_values(spec)
        parts.append(text + (f" holding {', '.join(values)}" if values else ""))
    unique = list(dict.fromkeys(parts))
    return ", ".join(unique) or "scalars"


def op_chain(graph: Graph) -> str:
    """"neg → clamp(v0, 0.0, -1.5)": the ops in order, scalar operands and attributes shown."""
    def op(n) -> str:
        attrs = [f"{k}={v}" for k, v in sorted(n.attrs.items())]
        args = [a if isinstance(a, str) else repr(a) for a in n.args] if any(not isinstance(a, str) for a in n.args) else []
        return f"{n.op}({', '.join(args + attrs)})" if args or attrs else n.op
    ops = [op(n) for n in graph.nodes]
    return " → ".join(ops if len(ops) <= 4 else ops[:3] + [f"… ({len(ops)} ops)"]) or "no op"


def config_text(case: Case) -> str:
    """What the case ran with that is not the fuser's default: Inductor's flags, mode and dynamic
    shapes; nvFuser's switches turned off; "" for none."""
    if case.backend.split(":")[0] == "inductor":  # inductor:cpu and inductor:cuda run the same config
        choices = _factory("inductor")().for_case(case.options).config.choices()
        return "" if choices == ["defaults"] else ", ".join(choices)
    if case.options.disable:
        return ", ".join(f"{name} disabled" for name in case.options.disable)
    return ""


def compiler_error(detail: str) -> str:
    """The first error line of a C++ or NVRTC compile error, without its file and position."""
    line = re.search(r"^[^\n]*?\berror: (.+)$", detail, re.M)
    return line.group(1).rsplit("error: ", 1)[-1].strip() if line else ""


def raised_text(errors: str, kind: str) -> str:
    """What a run's stderr says after its last `Kind: ` line start: the exception's own text, as a
    case's detail records it (the traceback above it is the repro's, not the fuser's)."""
    starts = list(re.finditer(rf"^{re.escape(kind)}: ", errors, re.M))
    return errors[starts[-1].end():] if starts else errors


def with_repro_detail(case: Case, output: str) -> Case:
    """A crash case whose detail is its reduced repro's error text where a run of that repro
    (`output`) raised the recorded error: the title quotes it. A campaign records the error of
    the case it found, before reduction: 492d2868's title read "the tensor (7) must match ... (2)"
    where its two-op repro raises "(3) must match ... (2)". A form that kept no raw error text
    (only its signature's message) takes the run's."""
    if case.signature.outcome != "crash" or f"{case.signature.kind}: " not in output:
        return case
    raised = raised_text(output, case.signature.kind).strip()
    if case.detail == case.signature.message:  # a form kept no raw error text: its repro's run is one
        return replace(case, detail=raised)

    def headline(text: str) -> str:  # what a title quotes
        return innermost_error(text).strip().split("\n", 1)[0]
    if normalize(raised) != case.signature.message or headline(raised) == headline(case.detail or ""):
        return case
    context = case.detail.find(FAILING_CONTEXT) if case.detail else -1  # what the campaign added: kept
    return replace(case, detail=raised + (case.detail[context:] if context >= 0 else ""))


def hard_crash_text(detail: str) -> str:
    """What a process that died printed before Python's own fatal-error lines (glibc's "double
    free or corruption (out)"), "" when nothing."""
    lines = []
    for ln in detail.splitlines():
        if ln.startswith(("Fatal Python error", "Current thread", "Thread 0x")):
            break
        if ln.strip() and not re.search(r"[/\"]", ln):  # glibc's words, not a traceback's frames
            lines.append(ln.strip())
    return " ".join(lines[:2])


def symptom_text(case: Case, symptom: Symptom | None) -> str:
    sig = case.signature
    if sig.outcome == "mismatch" and symptom is not None:
        shown = {k: v.replace("torch.", "") for k, v in (("fused", symptom.fused), ("eager", symptom.eager))}
        if sig.kind == "dtype":  # "int64 (1, 2)": the dtype is the symptom
            shown = {k: v.split()[0] for k, v in shown.items()}
        if sig.kind == "shape":
            shown = {k: v.partition(" ")[2] or v for k, v in shown.items()}
        noun = {"shape": "shape ", "strides": "strides "}.get(sig.kind, "")
        if sig.backend == EAGER_FAULT:
            return f"returns {shown['eager']} ({SCALAR_LOOP}: {shown['fused']})"
        if shown["fused"] == "?":  # the repro's runs printed different wrong values
            return f"returns a wrong {noun or 'value '}that differs from run to run (eager: {shown['eager']})"
        return f"returns {noun}{shown['fused']} (eager: {shown['eager']})"
    if sig.outcome == "mismatch":
        return f"returns the wrong {sig.kind}"
    if sig.outcome == "crash":
        # A signature keeps the compiler's first error line ("C++ compile error: no matching
        # function ..."); the exception's name is in the detail.
        # nvFuser's parallel compile lists every failing segment's error: the title names the one
        # the signature is keyed by (a slice's indexing assert was titled by another segment's
        # NVRTC error).
        detail = innermost_error(case.detail or "")
        compiled = "CompileError" in sig.message or "CompileError" in detail
        # An NVRTC overload error names its argument types on the line after it: they say what the
        # kernel got wrong (nvf::__half != nvf::__half), so the title keeps them.
        nvrtc = nvrtc_error(detail)
        error = nvrtc.split(":", 1)[1].strip() if nvrtc else compiler_error(detail) if compiled else ""
        if error:
            return f"fails to compile its kernel ({sig.kind}): {error[:140]}"
        return _raised({**sig.to_json(), "message": case.detail or sig.message})
    if sig.outcome == "hard-crash":
        said = hard_crash_text(case.detail)
        return f"kills the process ({sig.kind}{': ' + said if said else ''})"
    if sig.outcome == "unfused" and sig.message:  # the guard that sent it there (backends.guards)
        return f"runs the unfused fallback: {sig.message}"
    return {"hang": "hangs", "unfused": "runs the unfused fallback"}.get(sig.outcome, sig.outcome)


def reported_backend(case: Case) -> str:
    """What the bug is reported against: the case's backend, or eager where the mismatch is eager's
    own (its vectorized kernel wrong, its scalar loop and the fuser right: fuzzfuse.job)."""
    return EAGER_FAULT if case.signature.backend == EAGER_FAULT else case.backend


def title(case: Case, symptom: Symptom | None = None) -> str:
    """"NNC (CPU): neg → clamp(v0, 0.0, -1.5) on int32 returns -1 (eager: -1.5)": the fuser and
    device, the CPU capability when above default, the op chain, the inputs with their trigger
    values and layouts, any non-default config, and the symptom."""
    device = case_device(case).upper()
    capability = case.versions.get("cpu_capability", "default") if device == "CPU" else "default"
    where = device + (f", {capability.upper()}" if capability != "default" else "")
    config = config_text(case)
    symptom = symptom or case.symptom
    backward = "the backward of " if (symptom and symptom.what.startswith("gradient")) or \
        case.signature.stage.startswith("backward") else ""
    name = display_name(reported_backend(case))
    fuser = f"{name[:-1]}, {where})" if name.endswith(")") else f"{name} ({where})"
    return (f"{fuser}: {backward}{op_chain(case.graph)} on "
            f"{describe_inputs(case.graph)}{f' with {config}' if config else ''} {symptom_text(case, symptom)}")


# ---- running a repro -------------------------------------------------------------------------
_MISSING_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([^']+)'", re.M)


@dataclass(frozen=True)
class ReproRun:
    """One fresh run of repro.py: its exit status (negative: killed by that signal; None: killed at
    the timeout), what it printed (stdout and stderr interleaved, as a terminal shows them, the
    run's directory written as "."), and the machine it ran on."""

    status: int | None
    output: str
    machine: str

    def missing_module(self) -> str | None:
        """The module the run could not import (nvfuser_direct off PYTHONPATH, say): such a run never
        reached its fuser and shows nothing of the bug."""
        found = _MISSING_MODULE.search(self.output)
        return found.group(1) if found else None

    def outcome(self) -> str:
        if self.missing_module():
            return f"could not import {self.missing_module()} (it never reached its fuser)"
        if self.status is None:
            return "was killed at the timeout"
        if self.status < 0:
            name = signal.Signals(-self.status).name if -self.status in signal.valid_signals() else str(-self.status)
            return f"died by {name}"
        return f"exit status {self.status}"

    def to_json(self) -> dict:
        return {"status": self.status, "output": self.output, "machine": self.machine}

    @staticmethod
    def from_json(d: object, what: str) -> "ReproRun":
        if not isinstance(d, dict) or set(d) != {"status", "output", "machine"}:
            raise CorpusError(f"{what}: a run is an object of status, output and machine")
        if not (d["status"] is None or type(d["status"]) is int) or not isinstance(d["output"], str) \
                or not isinstance(d["machine"], str):
            raise CorpusError(f"{what}: status must be an integer or null, output and machine strings")
        return ReproRun(d["status"], d["output"], d["machine"])


def load_outputs(path: Path) -> dict[str, ReproRun]:
    """The runs a GPU machine recorded (benchmarks/gpu_repro_outputs.py): directory name -> run."""
    data = read_json(path, "repro outputs")
    if not isinstance(data, dict) or data.get("kind") != "fuzzfuse-repro-outputs" or not isinstance(data.get("runs"), dict):
        raise CorpusError(f"{path}: not a fuzzfuse-repro-outputs file")
    runs = {name: ReproRun.from_json(run, f"{path}: {name}") for name, run in data["runs"].items()}
    unreached = sorted(name for name, run in runs.items() if run.missing_module())
    if unreached:
        print(f"{path}: not quoting {len(unreached)} run(s) that never reached their fuser "
              f"({runs[unreached[0]].outcome()}): {', '.join(unreached[:3])}{' …' * (len(unreached) > 3)}",
              file=sys.stderr)
    return {name: run for name, run in runs.items() if name not in unreached}


def machine() -> str:
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
    return f"CPU ({torch.backends.cpu.get_cpu_capability()}), torch {torch.__version__}"


def run_repro(directory: Path, timeout: float = REPRO_TIMEOUT, script: str = REPRO, keep_path: bool = False) -> ReproRun:
    """Run `script` of a directory in a fresh interpreter in a clean directory holding only it (and
    its inputs file), its kernel caches its own; Python unbuffered, so stdout and stderr interleave as on
    a terminal. PYTHONPATH without the entries that provide fuzzfuse (a repro needs torch and its
    fuser only: on the GPU machine nvfuser_direct is found through PYTHONPATH), unless keep_path (a
    custom backend's repro imports its module)."""
    with tempfile.TemporaryDirectory(prefix="fuzzfuse-run-") as clean:
        shutil.copy(Path(directory) / script, Path(clean) / REPRO)
        if (Path(directory) / INPUTS_FILE).exists():
            shutil.copy(Path(directory) / INPUTS_FILE, clean)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
               **{name: os.path.join(clean, "kernel-cache", name.lower()) for name in KERNEL_CACHES}}
        if keep_path:  # the custom backend's module is found as this process finds it (verify_repro's way)
            env["PYTHONPATH"] = os.pathsep.join(sys.path)
        else:
            env["PYTHONPATH"] = _without_fuzzfuse(env.get("PYTHONPATH", ""))
        try:
            run = subprocess.run([sys.executable, REPRO], cwd=clean, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 timeout=timeout, env=env)
            status, output = run.returncode, run.stdout
        except subprocess.TimeoutExpired as e:
            status, output = None, e.stdout or b""
        text = output.decode(errors="replace").replace(os.path.realpath(clean) + os.sep, "").replace(clean + os.sep, "")
        return ReproRun(status, portable_output(text), machine())


def _without_fuzzfuse(path: str) -> str:
    return os.pathsep.join(p for p in path.split(os.pathsep) if p and not (Path(p) / "fuzzfuse" / "__init__.py").exists())


_PYTHON_LIB = re.compile(r'(?<![\w.])/[^\s"\':]*/lib/(python3\.\d+)/')
# Inductor's kernel files are named by a hash of their source and compile command, which holds
# the install's paths: kernel-cache/torchinductor_cache_dir/7j/c7jj4dqd…wvz.main.cpp.
_KERNEL_HASH = re.compile(r"(?:\b[a-z0-9]{2}/)?\b[a-z0-9]{40,}\b")
_COMPILE_COMMAND = re.compile(r"^(g\+\+|c\+\+|clang\+\+) \S+ .*$", re.M)
# faulthandler's module list, through its "(total: N)" or, where the dying child was cut off
# mid-list, up to the parent's line that then shares the list's line
_EXTENSION_MODULES = re.compile(rf"^Extension modules: .*?(?: \(total: \d+\)\n?|(?={re.escape(CHILD_ENDED)})|\n|$)", re.M)


def portable_output(text: str) -> str:
    """Output as any install prints it: Python's own paths (a virtualenv's, pyenv's, the system's)
    shortened to `.../lib/python3.X/`, kernel file hashes as <hash>, a compiler's command line (its
    include paths and -march=native are the machine's) as its first word, and faulthandler's list
    of loaded extension modules, which some runs of the same crash print and others do not, left
    out."""
    text = _PYTHON_LIB.sub(r".../lib/\1/", text)
    text = _COMPILE_COMMAND.sub(r"\1 <hash>.main.cpp [this machine's flags and paths]", _KERNEL_HASH.sub("<hash>", text))
    return _EXTENSION_MODULES.sub("", text)


# ---- the README ------------------------------------------------------------------------------
def quoted_output(output: str) -> str:
    """A run's output for a README: whole when short, else its head and tail around a marker."""
    lines = portable_output(output).rstrip("\n").splitlines()
    if len(lines) <= OUTPUT_HEAD + OUTPUT_TAIL + 5:
        return "\n".join(lines) or "(nothing printed)"
    cut = len(lines) - OUTPUT_HEAD - OUTPUT_TAIL
    return "\n".join(lines[:OUTPUT_HEAD] + [f"[... {cut} lines ...]"] + lines[-OUTPUT_TAIL:])


def upstream_text(case: Case) -> str:
    """The upstream status lines; a bug already reported says so first."""
    if not case.upstream:
        return ""
    lines = []
    if same := known(case.upstream):
        lines.append(f"**Known upstream:** {same.line()}. Follow or comment on that issue rather than filing "
                     "a new one.")
    lines += [f"- {u.line()}" for u in case.upstream if u is not same]
    return "\n".join(lines) + "\n\n"


def run_text(case: Case, run: ReproRun | None) -> str:
    """The Output section: the repro's own output, verbatim; a GPU repro not yet run says how to
    get it (and a hard crash quotes what its process printed when found)."""
    if run is not None:
        return (f"**Output** of `python repro.py` ({run.machine}; {run.outcome()}):\n\n"
                f"```\n{quoted_output(run.output)}\n```\n")
    text = ("**Output:** not captured yet: this repro needs a GPU. Run `python benchmarks/gpu_repro_outputs.py "
            "minimized/ --out outputs.json` there, then `python -m fuzzfuse report --regenerate minimized/ "
            "--outputs outputs.json`.\n")
    if case.signature.outcome == "hard-crash":
        text += (f"\nWhen found, fuzzfuse's worker died by {case.signature.kind}; what it printed as it died (its "
                 f"stderr's first lines: the C library's message, then Python's fatal error and stack):\n\n"
                 f"```\n{quoted_output(chr(10).join(case.detail.splitlines()[:12]))}\n```\n")
    return text


def _variants(case: Case) -> str:
    """The other signatures this root cause was found as (a folded repro's `also_seen_as`)."""
    if not case.also_seen_as:
        return ""
    rows = [f"- `{v.key}` ({v.backend}; ops: {', '.join(v.ops) or '-'}; was `{v.directory}`)"
            for v in case.also_seen_as]
    return "\n**Also seen as** (the same root cause, found through other ops, dtypes or routes):\n\n" + \
        "\n".join(rows) + "\n"


# How the provenance says a verification status that is not "reproduces".
_IS = {Reproduction.FLAKY: "is flaky", Reproduction.DOES_NOT_REPRODUCE: "does not reproduce",
       Reproduction.SKIPPED: "was skipped here"}


def _provenance(case: Case) -> str:
    """Where the repro came from, in a maintainer's words: the seed and fuzzfuse's signature, the
    reduction, how many fresh processes failed as recorded, how often campaigns hit it."""
    red, ver = case.reduction or ReductionFigures(), case.verification
    figure = lambda n: "?" if n is None else n  # noqa: E731
    if ver is None:
        checked = "The repro was not re-run."
    else:
        same = sum(v == "as recorded" for v in ver.verdicts)
        checked = (f"The repro fails this way in {same} of {ver.runs} fresh processes." if ver.status is
                   Reproduction.REPRODUCES else f"The repro {_IS[ver.status]} ({same} of {ver.runs} fresh processes "
                   f"failed as recorded; the others: {', '.join(sorted(set(ver.verdicts) - {'as recorded'}))}).")
    return (f"Found by fuzzfuse (seed {case.seed}; signature `{case.signature.key()}`), reduced from "
            f"{figure(red.ops_before)} ops to {figure(red.ops_after)} in {figure(red.queries)} queries. {checked} "
            f"Seen {case.hits} time{'s' if case.hits != 1 else ''}.\n")


# From the provenance paragraph (today's, or the wording before it: "seen N time(s).") to the end of
# the report's head: what with_variants rewrites.
_PROVENANCE = re.compile(r"^Found by fuzzfuse \(seed .*\Z", re.S | re.M)


def with_variants(report: str, case: Case) -> str:
    """`report` (a repro's README) with its upstream status, provenance (hit count, verification)
    and "Also seen as" list brought up to date with `case`, as folding changes them: the rest is
    the repro's own output, which folding does not change, so the repro need not run again (a GPU
    repro folded on a CPU machine)."""
    head, found, rest = report.partition("\n## Repro")
    if not found or not _PROVENANCE.search(head):
        return report
    head = _PROVENANCE.sub(lambda _: _provenance(case) + _variants(case), head)
    head = _UPSTREAM.sub(lambda m: m.group(1) + upstream_text(case) + m.group(2), head, count=1)
    return head + found + rest


# From the title to "**Found with:**": the upstream status lines, which folding brings together.
_UPSTREAM = re.compile(r"\A(# [^\n]*\n\n).*?(\*\*Found with:\*\*)", re.S)


def _readme_contract(case: Case) -> str:
    """The repro's exit contract as the README's Repro line words it."""
    contract = exit_contract(case.signature)
    if contract.startswith("Exits 1 while"):  # the wording every such README has had
        return "exit status 1" + contract.removeprefix("Exits 1").rstrip(".")
    return contract[:1].lower() + contract[1:].rstrip(".")


def readme(case: Case, repro: str, run: ReproRun | None, previous: str = "") -> str:
    """README.md: title, upstream status, versions, the repro and its output, provenance; the
    versions section another tool keeps in `previous` is carried over."""
    kept = VERSIONS_SECTION.search(previous)
    versions = ", ".join(f"{k} {v}" for k, v in sorted(case.versions.items()))
    return f"""# {title(case)}

{upstream_text(case)}**Found with:** {versions}

{kept.group(0).rstrip() + chr(10) + chr(10) if kept else ""}**Repro** (`python repro.py`: {_readme_contract(case)}):

```python
{repro.rstrip()}
```

{run_text(case, run)}
{_provenance(case)}{_variants(case)}
## Reproducing with fuzzfuse's oracle

`regression.py` is the same case judged by fuzzfuse's full oracle (eager, float64 arbitrating); the
regression corpus runs it: `pytest --fuzzfuse-corpus minimized`.
"""


# ---- writing a directory ---------------------------------------------------------------------
def _tolerance(case: Case, symptom: Symptom | None) -> tuple[float, float]:
    """The oracle's (rtol, atol) for the symptom's output or gradient."""
    if symptom is None:
        return (0.0, 0.0)
    graph, types = case.graph, case.graph.infer_types()
    which, k = symptom.what.split()
    if which == "output":
        name = graph.outputs[int(k)]
        return tolerances([types[name].dtype], [reduction_sizes(graph, types)[name]])[0]
    sizes = gradient_reduction_sizes(graph, types)
    wanted = [i for i in graph.inputs if i.name in sizes]
    return tolerances([wanted[int(k)].dtype], [sizes[wanted[int(k)].name]])[0]


def write_regression(directory: Path, case: Case) -> None:
    """Write regression.py, fuzzfuse's full oracle (and its inputs file where it needs one; a
    pickled inputs.pt of the form before is removed)."""
    directory = Path(directory)
    fuser = _factory(case.backend)().for_case(case.options)
    if case_device(case) != fuser.device:  # Inductor recorded on a GPU: a CPU instance was made
        fuser = type(fuser)(case_device(case)).for_case(case.options)
    files = repro_files(case.graph, fuser, case.signature, case.versions)
    (directory / REGRESSION).write_text(files[REPRO])
    (directory / "inputs.pt").unlink(missing_ok=True)
    if INPUTS_FILE in files:
        (directory / INPUTS_FILE).write_bytes(files[INPUTS_FILE])
    else:
        (directory / INPUTS_FILE).unlink(missing_ok=True)


# What the right value of a mismatch that is eager's own (verdict.EAGER_FAULT) is computed by.
SCALAR_LOOP = "one element at a time"

# The backends whose repro has an upstream idiom (fuzzfuse.short_repro); any other (custom:,
# dynamo:) runs through fuzzfuse, so its repro.py is the full one.
SHORT_FORMS = ("nvfuser", "aot:nvfuser", "inductor", "inductor:cpu", "inductor:cuda", "torchscript:nnc", "torchscript:onednn", "torchscript:frontend",
               "aot:nnc", "aot:onednn", "aot:frontend", "aot:eager")


def write_repro(directory: Path, case: Case, hang_seconds: float = HANG_SECONDS) -> str:
    """Write repro.py, the short one where the backend has an upstream idiom (else a copy of
    regression.py, which must be written already); its source."""
    if case.backend not in SHORT_FORMS:
        source = (Path(directory) / REGRESSION).read_text()
    elif case.backend == "aot:nvfuser":
        source = aot_nvfuser_repro(directory, case)
    else:
        source = short_repro(case.graph, reported_backend(case), case.options, case.signature, case.versions,
                             title(case), case.symptom, _tolerance(case, case.symptom), case_device(case), hang_seconds)
    (Path(directory) / REPRO).write_text(source)
    return source


def _fusion_script(directory: Path, case: Case) -> tuple[str, str]:
    """The nvfuser_direct script of the fusion aot:nvfuser handed nvFuser, and where it comes from:
    the minimized fusion the full repro printed on the GPU (quoted by a README of the form before),
    the script a short repro written before holds, else the failing fusion of the case as found
    (its detail; before reduction)."""
    previous = (directory / README).read_text() if (directory / README).exists() else ""
    printed = re.search(r"^The fusions? it runs \(minimized\), printed by the repro:\n\n(.*?)\n\*\*Expected", previous,
                        re.S | re.M)
    if printed:
        return re.findall(r"```python\n(.*?)```", printed.group(1), re.S)[-1], "minimized"
    written = (directory / REPRO).read_text() if (directory / REPRO).exists() else ""
    if "with FusionDefinition() as fd:" in written and "fuzzfuse" not in written:
        return written.split('"""\n', 2)[-1], re.search(r"# fusion: (\w+)", written).group(1)
    found = re.search(r"```python\n(.*?)```", case.detail, re.S)
    if not found:
        raise ValueError(f"{directory}: no nvfuser_direct script recorded for this aot:nvfuser case")
    return found.group(1), "as found, before reduction"


def aot_nvfuser_repro(directory: Path, case: Case) -> str:
    """aot:nvfuser's repro: the fusion nvFuser was handed (`_fusion_script`), its definition
    inlined, run on inputs of the real shapes and strides."""
    script, origin = _fusion_script(Path(directory), case)
    script = re.sub(r"\ndef nvfuser_fusion\(fd: FusionDefinition\) -> None:\n(.*?)\n\n\nwith FusionDefinition\(\) as fd:\n"
                    r"    nvfuser_fusion\(fd\)\n",
                    lambda m: "\nwith FusionDefinition() as fd:\n" + "\n".join(
                        ln for ln in m.group(1).splitlines() if not ln.strip().startswith("#")) + "\n", script, flags=re.S)
    script = script.replace("for o in outputs:\n    print(o.dtype, tuple(o.shape))\n",
                            "torch.cuda.synchronize()\nprint(\"nvFuser ran the fusion without error\")\n")
    script = re.sub(r"^# fusion: .*\n", "", script.lstrip(), flags=re.M)
    source = (f'"""{title(case)}\n\n{exit_contract(case.signature)}"""\n'
              f"# fusion: {origin.split(',')[0].replace(' ', '_')} (the fusion aot_autograd's graph became)\n" + script)
    return in_a_child(source) if kills_the_process(case.signature) else source


def fails_as_recorded(case: Case, run: ReproRun) -> bool:
    """Whether a run of the short repro shows the bug: exit status 1 (or killed at the timeout, for
    a hang); where the bug kills the process, its child's end said too (the signal a hard crash
    died by; a CUDA error's exception)."""
    if case.signature.outcome == "hard-crash":
        return run.status == 1 and f"the child process running fn died by {case.signature.kind}" in run.output
    if kills_the_process(case.signature):
        return run.status == 1 and re.search(rf"^\S*\b{re.escape(case.signature.kind)}: ", run.output, re.M) is not None
    return run.status == 1 or (run.status is None and case.signature.outcome == "hang")


# ATen's x86 CPU capabilities (ATEN_CPU_CAPABILITY), lowest first: a CPU case recorded without one
# is pinned to the lowest it fails under.
CPU_CAPABILITIES = ("default", "avx2", "avx512")


def regenerate(directory: Path, outputs: dict[str, ReproRun] | None = None,
               timeout: float = REPRO_TIMEOUT) -> tuple[str, bool]:
    """Rewrite one directory's repro.py, regression.py and README.md from its case.json; re-run a
    CPU repro here (a GPU one's run comes from `outputs`). The symptom the short repro pins is
    read once from what the full repro printed (the README of the form before, or a run of
    regression.py) and kept in case.json, as is the CPU capability a CPU case recorded without one
    fails under. One line on how it went, and whether the repro failed as recorded (True where it
    was not run)."""
    directory = Path(directory)
    case = load_case(directory / "case.json")
    recorded = case
    previous = (directory / README).read_text() if (directory / README).exists() else ""
    if case.signature.outcome == "mismatch" and case.symptom is None:
        symptom = Symptom.parse(previous)
        if symptom is None and case_device(case) == "cpu":
            write_regression(directory, case)
            symptom = Symptom.parse(run_repro(directory, timeout, REGRESSION).output)
        if symptom is None:
            raise ValueError(f"{directory}: no symptom recorded and none printed: run regression.py where it runs")
        case = replace(case, symptom=symptom)
    run = (outputs or {}).get(directory.name)
    before = (directory / REPRO).read_text() if (directory / REPRO).exists() else ""
    pins = [None] if case_device(case) == "cuda" or case.versions.get("cpu_capability") else CPU_CAPABILITIES
    for capability in pins:
        if capability:
            case = replace(case, versions={**recorded.versions, "cpu_capability": capability})
        write_regression(directory, case)
        source = write_repro(directory, case)
        if case_device(case) == "cpu":
            run = run_repro(directory, timeout, keep_path=case.backend not in SHORT_FORMS)
            if fails_as_recorded(case, run):
                break
    if run is None and same_code(before, source):
        run = recorded_run(previous)  # the run quoted before is this code's run
    detailed = with_repro_detail(case, run.output if run is not None else "")
    if detailed.detail != case.detail:  # a new title: the repro's docstring, the run still its run
        case, source = detailed, write_repro(directory, detailed)
    if case != recorded:
        write_json(directory / "case.json", case.to_json())
    (directory / README).write_text(readme(case, source, run, previous))
    lines = len(source.splitlines())
    ok = run is None or fails_as_recorded(case, run)
    status = "not run here" if run is None else run.outcome() + ("" if ok else " (NOT as recorded)")
    return f"{directory.name}: {lines} lines, {status}" + (f" (over {MAX_LINES} lines)" if lines > MAX_LINES else ""), ok


# ---- the issue body --------------------------------------------------------------------------
# How many other reduced graphs of the bug an issue body names.
FORMS_SHOWN = 6


def issue_body(directory: Path) -> str:
    """The issue to paste upstream for one directory: PyTorch's bug forms (torch.compile's for
    Inductor) or NVIDIA/Fuser's; a bug already reported upstream gets a note for that issue
    instead."""
    directory = Path(directory)
    case = load_case(directory / "case.json")
    repro = (directory / REPRO).read_text()
    output = _recorded_output(directory)
    versions = "\n".join(f"{k}: {v}" for k, v in sorted(case.versions.items()))
    head = f"# {title(case)}\n\n"
    if same := known(case.upstream):
        head += (f"> Already reported upstream: {same.line()}.\n> Do not file a new issue; if it adds anything, "
                 f"comment on {same.url} with the repro below.\n\n")
    related = [u for u in case.upstream if u.relation is Relation.RELATED]
    reported_before = [u for u in case.upstream if u.relation is Relation.SAME and u is not same]
    see_also = "".join(f"\nReported before as {u.url} ({u.status()}); it still fails." for u in reported_before) + \
        "".join(f"\nRelated: {u.url} ({u.status()})." for u in related)
    fixed = "(this corpus marks it fixed: FIXED)\n" if (directory / FIXED).exists() else ""
    found = (f"Found by differential fuzzing (fuzzfuse) against eager, with a float64 reference as arbiter; "
             f"reduced to {len(case.graph.nodes)} op(s).{_rule_and_forms(case)}{see_also}\n{fixed}")
    code = f"```python\n{repro.rstrip()}\n```\n"
    shown = f"```\n{quoted_output(output)}\n```\n" if output else "(run `python repro.py` to see it)\n"
    if case.backend in ("nvfuser", "aot:nvfuser"):
        return head + (f"## Bug\n\n{title(case)}. {found}\n## Repro\n\n{code}\n## Output\n\n{shown}\n"
                       f"## Versions\n\n```\n{versions}\n```\n")
    what = "### 🐛 Describe the bug" + ("  (torch.compile bug report)" if case.backend == "inductor" else "")
    return head + (f"{what}\n\n{title(case)}. {found}\n{code}\n### Error logs\n\n{shown}\n"
                   f"### Versions\n\nRecorded when found (`python -m torch.utils.collect_env` gives the full "
                   f"list):\n\n```\n{versions}\n```\n")


def _rule_and_forms(case: Case) -> str:
    """Where a known wrong rule computes the fused values exactly (fuzzfuse.explain), that rule,
    and the other reduced graphs that showed the bug: what a maintainer reads first, the fault
    rather than the one graph the repro happens to use."""
    rule = case.signature.message if case.signature and names_a_rule(case.signature.message) else ""
    said = f" The fused values are exactly what eager computes when {rule}." if rule else ""
    forms = [", ".join(v.ops) for v in case.also_seen_as if v.verification is not Reproduction.DOES_NOT_REPRODUCE]
    if forms:
        shown = "; ".join(forms[:FORMS_SHOWN]) + ("; ..." if len(forms) > FORMS_SHOWN else "")
        said += f" {len(forms)} other reduced graph(s) fail the same way (their ops: {shown})."
    return said


def same_code(a: str, b: str) -> bool:
    """Whether two repros differ at most in their docstring's words, line for line: a run of one
    is a run of the other (its traceback's line numbers too)."""
    def code(text: str) -> list[str]:
        return re.sub(r'^""".*?"""', lambda m: "\n" * m.group(0).count("\n"), text, count=1, flags=re.S).splitlines()
    return bool(a) and code(a) == code(b)


_RUN_HEADER = re.compile(r"^\*\*Output\*\* of `python repro\.py` \((?P<machine>.*); (?P<outcome>[^;]*)\):\n\n```\n"
                         r"(?P<output>.*?)\n```", re.S | re.M)


def recorded_run(readme_text: str) -> ReproRun | None:
    """The run a README quotes (a GPU run made elsewhere), None where it quotes none."""
    found = _RUN_HEADER.search(readme_text)
    if not found:
        return None
    said = found.group("outcome")
    if said.startswith("exit status "):
        status = int(said.removeprefix("exit status "))
    elif said.startswith("died by ") and said.removeprefix("died by ") in signal.Signals.__members__:
        status = -signal.Signals[said.removeprefix("died by ")].value
    elif said == "was killed at the timeout":
        status = None
    else:
        return None
    return ReproRun(status, found.group("output"), found.group("machine"))


def _recorded_output(directory: Path) -> str:
    """The output the README quotes (the repro's last recorded run), "" when none."""
    text = (directory / README).read_text() if (directory / README).exists() else ""
    found = re.search(r"^\*\*Output\*\* of `python repro\.py`[^\n]*\n\n```\n(.*?)\n```", text, re.S | re.M)
    return found.group(1) if found else ""



def report_dirs(paths: list[Path]) -> list[Path]:
    """The minimized directories named: each path a directory holding case.json, or one holding
    such directories (minimized/). ValueError naming a path that is neither."""
    found: list[Path] = []
    for path in map(Path, paths):
        if (path / "case.json").is_file():
            found.append(path)
        elif path.is_dir() and (inside := sorted(p.parent for p in path.glob("*/case.json"))):
            found += inside
        else:
            raise ValueError(f"{path}: not a minimized directory (no case.json) nor a directory of them")
    return found


def report_command(paths: list[Path], regenerate_them: bool, outputs: list[Path], timeout: float) -> int:
    """`fuzzfuse report DIR...`: print each directory's issue body, or with regenerate rewrite its
    files (one line each). Exit 1 when a CPU repro no longer exits as recorded (1, or its signal)."""
    dirs = report_dirs(paths)
    runs = {name: run for path in outputs for name, run in load_outputs(path).items()}
    status = 0
    for n, directory in enumerate(dirs):
        if not regenerate_them:
            print(("\n" + "-" * 72 + "\n\n") * bool(n) + issue_body(directory), end="")
            continue
        line, ok = regenerate(directory, runs, timeout)
        print(line, flush=True)
        status = max(status, int(not ok))
    return status
