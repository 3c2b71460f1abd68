"""Minimized repros as regression tests: how a repro run is judged (shared with the pytest plugin)
and `fuzzfuse export DIR --pytest OUT.py`, which writes ONE self-contained pytest file for an
upstream test suite.

The exported file needs pytest and torch (plus the fuser's own package), never fuzzfuse. Each repro's
source sits in it as a readable string above its test; the test writes it to a temporary directory
as repro.py (with its inputs file, embedded as base64, for repros whose inputs were too large to inline)
and runs it in a fresh interpreter: fusers keep global state, and a hard crash must kill only that
process. The functions `run_repro`, `judged_run`, `read_verdict`, `judge` and `settle` below, and
fuzzfuse.tracebacks' rules, are copied into the exported file verbatim, so the plugin and the
export can never disagree about what a run means.

Verdicts, the same in both places:
- an open bug is xfail(strict=True): XFAIL while its repro fails as recorded (the signal it died by,
  or its verdict line's outcome, kind and location: exception type and C++ assert location, or
  mismatch kind and dtype class); three passes in a row are XPASS(strict),
  which fails the run: "fixed? move it to the fixed set";
- a fixed bug (its repro directory holds a file named FIXED) must pass: a failure is a regression;
- a repro that fails differently than recorded fails (a stale entry or a new bug), never xfails.
"""
from __future__ import annotations

import ast
import base64
import inspect
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .hostcpu import host_isa
from .repro import INPUTS_FILE
from .tracebacks import (PARALLEL_COMPILE_WRAPPER, cpp_location, error_location, innermost_error, printed_error,
                         python_location)

# A repro directory holding a file of this name records a fixed bug (its text, if any, says where
# it was fixed); without it the bug is open.
FIXED = "FIXED"
TIMEOUT = 600.0
# The variables naming the on-disk kernel caches torch.compile keeps across processes (Inductor's,
# and Triton's inside it). A run points them at directories of its own: a kernel that another
# process compiled (an earlier campaign, a repro left to finish a minutes-long compile) must not
# answer for this run, or a compile that hangs no longer does, once it has finished anywhere.
KERNEL_CACHES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
# The script a run judges: fuzzfuse's full oracle, beside the short repro.py a maintainer reads
# (fuzzfuse.bugreport); a directory of the form before holds repro.py only.
REGRESSION = "regression.py"
OPEN_REASON = "open fuser bug: XFAIL while it fails as recorded; XPASS means fixed? move it to the fixed set ({how})"


def repro_dirs(root: Path) -> list[Path]:
    """Every minimized repro under `root` (a directory holding case.json and repro.py), at any
    depth, so that a campaign directory with shards/*/minimized/ works as well as minimized/."""
    return sorted(p.parent for p in Path(root).rglob("case.json") if (p.parent / "repro.py").is_file())


def judged_script(directory: Path) -> Path:
    """The script of a repro directory that prints the verdict line: regression.py, else repro.py."""
    return directory / REGRESSION if (directory / REGRESSION).is_file() else directory / "repro.py"


@dataclass(frozen=True)
class Recorded:
    """What a repro's case.json says about its bug: its backend, the outcome, kind and location a
    run is judged by, its signature key, and its verification status ("" when it has none).

    Read from the JSON itself, not through the case codec (fuzzfuse.corpus): the plugin loads this
    module in every pytest session, and the codec imports torch; and a repro is standalone, so it is
    judged even where today's fuzzfuse no longer reads its graph (an op renamed since). Nothing in
    the file is executed either way."""

    backend: str
    outcome: str
    kind: str
    location: str
    key: str
    status: str
    host_isa: str = ""  # the recording host's own ISA (fuzzfuse.hostcpu), "" where unrecorded

    @staticmethod
    def read(directory: Path) -> "Recorded":
        """ValueError (one line) for a case.json that is not a case's object of strings."""
        try:
            case = json.loads((directory / "case.json").read_text())
        except RecursionError:  # nested past the parser's depth: hostile or corrupt, one line
            raise ValueError("nested too deep to be a case") from None
        if not isinstance(case, dict):
            raise ValueError("not a JSON object")
        sig = case.get("signature") or {}
        verification = case.get("verification") or {}
        versions = case.get("versions") or {}
        if not isinstance(sig, dict) or not isinstance(verification, dict) or not isinstance(versions, dict):
            raise ValueError("its signature, verification and versions must be JSON objects")
        isa = versions.get("host_isa", "")
        if not isinstance(isa, str):
            raise ValueError("its versions' host_isa must be a string")
        fields = [sig.get(k, "") for k in ("outcome", "backend", "stage", "kind", "location", "message")]
        text = [case.get("backend", ""), case.get("outcome", ""), verification.get("status", ""), *fields]
        if not all(isinstance(t, str) for t in text):
            raise ValueError("its backend, outcome, signature and verification status must be strings")
        return Recorded(text[0], fields[0] or text[1], fields[3], fields[4], "|".join(fields), text[2], isa)


def skip_reason(case: Recorded) -> str | None:
    """Repros whose recorded re-runs disagreed cannot give a verdict, nor a CPU repro recorded on a
    host of another ISA: its fault may be in code that ISA chose (fuzzfuse.hostcpu)."""
    if case.status in ("flaky", "does not reproduce"):
        return f"recorded as {case.status} when it was minimized"
    here = host_isa()
    if case.host_isa and here and case.host_isa != here:
        return (f"recorded on an {case.host_isa.upper()} host and this one is {here.upper()}: its fault may be "
                f"in code the host's ISA chooses (libm, oneDNN, -march=native), which ATEN_CPU_CAPABILITY does not pin")
    return None


# ---- copied verbatim into exported files: stdlib and pytest only -----------------------------
class StillFails(Exception):
    """The repro fails as recorded: the bug is still there (the only exception an xfail accepts)."""


def run_repro(workdir, timeout, env=None):
    """Run workdir/repro.py in a fresh interpreter: (exit status or None on timeout, stdout, stderr).
    Fresh means its kernel caches too (KERNEL_CACHES, made inside workdir, a temporary directory)."""
    caches = {name: os.path.join(workdir, "kernel-cache", name.lower()) for name in KERNEL_CACHES}
    try:
        run = subprocess.run([sys.executable, "repro.py"], cwd=workdir, capture_output=True, text=True,
                             timeout=timeout, env={**(os.environ if env is None else env), **caches})
    except subprocess.TimeoutExpired as e:
        text = [s.decode(errors="replace") if isinstance(s, bytes) else s or "" for s in (e.stdout, e.stderr)]
        return None, text[0], text[1]
    return run.returncode, run.stdout, run.stderr


def judged_run(workdir, timeout, outcome, kind, location, fixed, env=None, runs=3):
    """Run the repro and judge it: (verdict, stdout, stderr). An open bug counts as fixed only when
    its repro passes `runs` times in a row: a hard crash can hide under load for one run (a repro
    verified as reproducing may still be intermittent), and one failure as recorded means the
    bug is still there."""
    for _ in range(runs):
        code, out, err = run_repro(workdir, timeout, env)
        verdict = judge(outcome, kind, location, code, out, err)
        if verdict != "passes" or fixed:
            break
    return verdict, out, err


def read_verdict(out, err=""):
    """The verdict a repro printed last (`fuzzfuse-verdict: {...}`, one JSON object), or None. A
    crash's verdict names the exception type only: its message and where it was raised are read
    from the traceback the repro printed on stderr (the oracle's rule, error_location)."""
    for line in reversed(out.splitlines()):
        if line.startswith("fuzzfuse-verdict: "):
            try:
                verdict = json.loads(line.removeprefix("fuzzfuse-verdict: "))
            except ValueError:
                return None
            if isinstance(verdict, dict) and verdict.get("outcome") == "crash" and "location" not in verdict:
                message, tb = printed_error(err)
                kind = re.escape(str(verdict.get("kind", "")))
                message = re.sub(rf"^(?:[\w.]+\.)?{kind}: ?", "", message, count=1) if kind else message
                verdict.update(location=error_location(message, tb), message=message)
            return verdict if isinstance(verdict, dict) else None
    return None


def judge(outcome, kind, location, code, out, err):
    """'as recorded' when the run fails the way case.json says, 'passes' on exit 0, 'skipped: why'
    when the repro cannot run here, else what it did instead. A process killed by a signal or at the
    timeout is judged by that; any other run by its verdict line alone (outcome, kind, location)."""
    if code == 0:
        return "passes"
    if code is None:
        return "as recorded" if outcome == "hang" else "hang (killed at the timeout)"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        return "as recorded" if outcome == "hard-crash" and name == kind else f"hard-crash (died by {name})"
    verdict = read_verdict(out, err)
    if verdict is None:
        return f"exit status {code} without a verdict line (the repro itself broke?)"
    if verdict.get("outcome") == "skip":
        return "skipped: " + str(verdict.get("reason", "the repro cannot run here"))
    seen = [str(verdict.get(k, "")) for k in ("outcome", "kind", "location")]
    # An unfused repro cannot tell a fallback from a graph left unfused: its kind is empty.
    same = seen == [outcome, kind, location] or (seen == [outcome, "", location] and outcome == "unfused")
    return "as recorded" if same else " ".join(seen).strip()


def settle(verdict, fixed, recorded, output):
    """Turn a verdict into the test's outcome: raise StillFails (an open bug's xfail), fail, or
    return (a pass; for an open bug the strict xfail marker makes it XPASS(strict))."""
    import pytest

    if verdict.startswith("skipped: "):
        pytest.skip(verdict.removeprefix("skipped: "))
    if verdict == "as recorded" and not fixed:
        raise StillFails(f"still fails as recorded: {recorded}")
    if verdict == "as recorded":
        pytest.fail(f"regression: bug came back (it was marked fixed): fails as recorded: {recorded}\n{output}",
                    pytrace=False)
    if verdict != "passes":
        pytest.fail(f"fails differently than recorded (a stale repro or a new bug): recorded {recorded}, "
                    f"got {verdict}\n{output}", pytrace=False)


def tail(out, err, lines=30):
    """The end of a run's output, for failure messages."""
    text = (out.rstrip() + "\n" + err).strip().splitlines()
    return "\n".join(text[-lines:])
# ---- end of the verbatim part -------------------------------------------------------------


_HEADER = '''"""Regression tests for {count} tensor-fuser bug(s) found by fuzzfuse (exported from {source}).

Self-contained: needs pytest and torch (plus the fuser's own package), not fuzzfuse. Each test writes
one minimized repro (the string above it) to a temporary directory as repro.py, with its inputs file when
the inputs were too large to inline, and runs it in a fresh Python process: the repro exits 1 while
the bug is present and 0 once it is fixed.

- An open bug is xfail(strict=True): XFAIL while it fails as recorded; when it passes, XPASS(strict)
  fails the run: the bug is fixed, so drop its xfail marker (it is then a regression test).
- A test without the marker is a fixed bug: if its repro fails again, the bug came back.
- A repro that fails differently than recorded (exit status, signal, exception type, C++ assert
  location, mismatch kind) fails: the entry is stale or a new bug showed up.
"""
import base64
import json
import os
import re
import signal
import subprocess
import sys

import pytest

TIMEOUT = {timeout}
KERNEL_CACHES = {caches!r}
INPUTS_FILE = {inputs_file!r}


'''

_CHECK = '''

def check(tmp_path, source, outcome, kind, location, fixed, inputs=None):
    (tmp_path / "repro.py").write_text(source)
    if inputs:
        (tmp_path / INPUTS_FILE).write_bytes(base64.b64decode(inputs))
    verdict, out, err = judged_run(tmp_path, TIMEOUT, outcome, kind, location, fixed)
    settle(verdict, fixed, f"{outcome} {kind} {location}".strip(), tail(out, err))
'''


def string_literal(text: str) -> str:
    """A raw triple-quoted literal when one round-trips (readable), else repr()."""
    for quote in ("'''", '"""'):
        candidate = f"r{quote}{text}{quote}"
        if quote not in text:
            try:
                if ast.literal_eval(candidate) == text:
                    return candidate
            except (SyntaxError, ValueError):
                pass
    return repr(text)


def _identifier(name: str, taken: set[str]) -> str:
    base = "test_" + re.sub(r"\W+", "_", name).strip("_").lower()
    ident, n = base, 2
    while ident in taken:
        ident, n = f"{base}_{n}", n + 1
    taken.add(ident)
    return ident


def export_pytest(root: Path, out: Path, backend: str | None = None, timeout: float = TIMEOUT) -> int:
    """Write the repros under `root` (optionally only `backend`'s) as one pytest file; the count.
    Raises ValueError when there are none."""
    root = Path(root)
    dirs = [d for d in repro_dirs(root) if backend is None or Recorded.read(d).backend == backend]
    if not dirs:
        raise ValueError(f"{root}: no minimized repros (*/case.json with repro.py)"
                         + (f" for backend {backend}" if backend else ""))
    parts = [_HEADER.format(count=len(dirs), source=root.name or root, timeout=timeout, caches=KERNEL_CACHES,
                           inputs_file=INPUTS_FILE)]
    parts.append(f"PARALLEL_COMPILE_WRAPPER = {PARALLEL_COMPILE_WRAPPER!r}\n\n\n")  # innermost_error reads it
    parts += [inspect.getsource(f) + "\n\n" for f in (StillFails, run_repro, judged_run, read_verdict, judge, settle,
                                                       tail, printed_error, error_location, cpp_location,
                                                       innermost_error, python_location)]
    parts.append(f"OPEN = {OPEN_REASON.format(how='drop its xfail marker')!r}\n")
    cuda = any(re.search(r"^DEVICE = 'cuda'", judged_script(d).read_text(), re.M) for d in dirs)
    if cuda:
        parts.append("CUDA = __import__('torch').cuda.is_available()\n")
    parts.append(_CHECK)
    taken: set[str] = set()
    for d in dirs:
        case, source = Recorded.read(d), judged_script(d).read_text()
        name = _identifier(d.relative_to(root).as_posix(), taken)
        const = name.removeprefix("test_").upper()
        fixed = (d / FIXED).exists()
        parts.append(f"\n\n# {d.relative_to(root).as_posix()}\n{const} = {string_literal(source)}\n")
        inputs = "None"
        if (d / INPUTS_FILE).exists():
            blob = base64.b64encode((d / INPUTS_FILE).read_bytes()).decode()
            parts.append(f"{const}_INPUTS = (\n" + "".join(f"    {blob[i:i + 96]!r}\n" for i in range(0, len(blob), 96))
                         + ")\n")
            inputs = f"{const}_INPUTS"
        parts.append("\n\n")
        if skip_reason(case):
            parts.append(f"@pytest.mark.skip(reason={skip_reason(case)!r})\n")
        if re.search(r"^DEVICE = 'cuda'", source, re.M):
            parts.append('@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")\n')
        if not fixed:
            parts.append("@pytest.mark.xfail(strict=True, raises=StillFails, reason=OPEN)\n")
        parts.append(f"def {name}(tmp_path):\n    {string_literal(case.key)}\n"
                     f"    check(tmp_path, {const}, {case.outcome!r}, {case.kind!r}, {case.location!r}, "
                     f"fixed={fixed}, inputs={inputs})\n")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text("".join(parts))
    return len(dirs)
