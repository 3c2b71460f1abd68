"""Still a bug, and since when: every minimized repro against every build (`fuzzfuse versions`).

A maintainer's first two questions about a report are "is it still there on the newest build?"
and "since when?" (a regression is fixed first). Each repro is run in a fresh process of each
build's own environment (fuzzfuse.buildenv) and its run is judged against what case.json recorded:

- present: it fails as recorded. The same bug may fail at another line or raise a renamed
  exception in another release (proxy_tensor.py:1738 became :1910 in torch 2.14.1, TorchScript's
  RuntimeError a NotImplementedError; torch 2.6 raised Inductor's sympy error bare, not yet as an
  InductorError), so a crash is compared by the file of its native assert or innermost torch frame
  and by its message class (rootcause.fold), never by a Python line number (same_crash);
- absent: the repro passes (twice: a hard crash can hide under load for one run);
- does not apply: the build cannot run the repro as the bug needs (exit 125, an API or op it lacks,
  an import that fails, a backend it does not have): saying "absent" there would claim a fix;
- fails differently: it fails as another bug would.

Results are cached per (directory, build, repro digest) in the results folder (--results), so a run
resumes where it stopped and `--from-cache` redraws every table without running anything. Each
directory's table goes to its versions.json and to its README between `<!-- versions -->` and
`<!-- /versions -->`; its summary ("regression since X", "present in all tested", "fixed in X")
is what triage shows.
"""
from __future__ import annotations

import enum
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .buildenv import Build, Environment, Package
from .corpus import VERSIONS_FILE
from .export import KERNEL_CACHES, Recorded, judge, read_verdict
from .repro import INPUTS_FILE
from .tracebacks import printed_error

SCHEMA = 1
BEGIN, END = "<!-- versions -->", "<!-- /versions -->"
# Error types a repro raises itself when the build lacks what it calls (an API, an op, a module).
MISSING_API = ("AttributeError", "ImportError", "ModuleNotFoundError", "NameError")
EVIDENCE_LINES = 6
# Folded messages shorter than this ("RuntimeError:", "bad optional access") name no cause.
SPECIFIC_MESSAGE = 24
# Characters of a run's stdout and of its stderr kept in the cache: an Inductor compile error carries
# the compiler's whole log, and a run whose output was cut keeps the verdict it got when it ran.
KEPT_OUTPUT = 30000


class Presence(str, enum.Enum):
    """What one build does with one repro. The values are the strings in versions.json."""

    PRESENT = "present"
    ABSENT = "absent"
    NOT_APPLICABLE = "does not apply"
    DIFFERENT = "fails differently"


class Trend(str, enum.Enum):
    """A directory's bug over the builds tested, oldest to newest."""

    ALWAYS = "present in all tested"
    REGRESSION = "regression since"
    FIXED = "fixed in"
    CHANGED = "fails differently since"
    NEVER = "absent in all tested"
    UNTESTED = "no build runs it"


@dataclass(frozen=True)
class RunResult:
    """One repro run in one build's environment: the cache's unit and a table's row."""

    directory: str
    build: Build
    installed: str  # the version pip chose (2.13.0+cpu), which orders the rows
    digest: str  # of repro.py and its inputs file: a changed repro is run again
    presence: Presence
    why: str
    exit_status: int | None  # None: killed at the timeout
    evidence: str  # the end of its output
    seconds: float
    stale: bool = False  # read from an earlier repro.py than the one in the directory now
    # The run's own output (the cache keeps it, versions.json does not): a cached run is judged
    # again whenever a table is drawn, so that a change in what counts as the same bug needs no rerun.
    stdout: str = ""
    stderr: str = ""

    def to_json(self, output: bool = False) -> dict:
        data = asdict(self)
        data.update(package=self.build.package.value, version=self.build.version, presence=self.presence.value)
        del data["build"], data["stale"]
        if not output:
            del data["stdout"], data["stderr"]
        return data

    @property
    def output_cut(self) -> bool:
        """Whether the cache kept only part of its output (a compiler's log of warnings)."""
        return max(len(self.stdout), len(self.stderr)) >= KEPT_OUTPUT

    def judged(self, directory: Path) -> "RunResult":
        """This run judged against the directory's case.json as it is now; unchanged without its
        whole output, which a traceback needs."""
        if not (self.stdout or self.stderr) or self.output_cut:
            return self
        presence, why = classify(Recorded.read(directory), _recorded_message(directory), self.exit_status,
                                 self.stdout, self.stderr)
        return replace(self, presence=presence, why=why, evidence=evidence(self.stdout, self.stderr))

    @staticmethod
    def from_json(data: dict) -> "RunResult":
        """ValueError for a record that is not one (a hand-edited or foreign file)."""
        try:
            build = Build(Package(data["package"]), str(data["version"]))
            status = data["exit_status"]
            return RunResult(str(data["directory"]), build, str(data["installed"]), str(data["digest"]),
                             Presence(data["presence"]), str(data["why"]), None if status is None else int(status),
                             str(data["evidence"]), float(data["seconds"]), False,
                             str(data.get("stdout", "")), str(data.get("stderr", "")))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a versions result: {e!r}") from None


def order_key(result: RunResult) -> tuple:
    """Builds of a package oldest first, by the numbers of the version installed (2.14.1+cu130 is
    2, 14, 1; a nightly's date counts: 0.2.36.dev20260313 is 0, 2, 36, 20260313)."""
    numbers = tuple(int(n) for n in re.findall(r"\d+", result.installed.split("+")[0]))
    return (result.build.package.value, numbers, result.installed)


@dataclass(frozen=True)
class Summary:
    """A directory's trend for one package: Trend, the build it names (since X, fixed in X) and the
    build tested just before that one, with what it did there: the change lies between the two
    (a build not tested between them may hold it)."""

    package: str
    trend: Trend
    build: str = ""
    before: str = ""  # "present in 2.13.0+cpu"

    @property
    def text(self) -> str:
        if not self.build:
            return self.trend.value
        return f"{self.trend.value} {self.package} {self.build}" + (f" ({self.before})" if self.before else "")


@dataclass
class Table:
    """One directory's rows, oldest build first, and what they say."""

    directory: Path
    recorded: Recorded
    found_with: str  # the torch the bug was found with (case.json)
    rows: list[RunResult] = field(default_factory=list)

    @property
    def summaries(self) -> list[Summary]:
        packages = dict.fromkeys(r.build.package.value for r in self.rows)
        return [summarize(p, [r for r in self.rows if r.build.package.value == p]) for p in packages]

    @property
    def summary(self) -> str:
        return "; ".join(s.text for s in self.summaries) or "not run"

    def to_json(self) -> str:
        data = dict(schema=SCHEMA, directory=self.directory.name, found_with=self.found_with,
                    recorded=dict(outcome=self.recorded.outcome, kind=self.recorded.kind,
                                  location=self.recorded.location),
                    summary=[dict(package=s.package, trend=s.trend.name.lower(), build=s.build, before=s.before,
                                  text=s.text) for s in self.summaries],
                    results=[dict(r.to_json(), stale=r.stale) for r in self.rows])
        return json.dumps(data, indent=1, sort_keys=True) + "\n"


def summarize(package: str, rows: list[RunResult]) -> Summary:
    """The trend over rows of one package, oldest first. A build that cannot run the repro is left
    out: the oldest that can is where "since" starts."""
    seen = [r for r in rows if r.presence != Presence.NOT_APPLICABLE]
    if not seen:
        return Summary(package, Trend.UNTESTED)
    states = [r.presence for r in seen]
    newest = states[-1]
    if set(states) == {newest} and newest != Presence.DIFFERENT:
        return Summary(package, Trend.ALWAYS if newest == Presence.PRESENT else Trend.NEVER)
    # The oldest build of the newest run of builds that all did what the newest did.
    since = len(states) - next((i for i, s in enumerate(reversed(states)) if s != newest), len(states))
    before = f"{seen[since - 1].presence.value} in {seen[since - 1].installed}" if since else ""
    trend = {Presence.ABSENT: Trend.FIXED, Presence.DIFFERENT: Trend.CHANGED}.get(newest, Trend.REGRESSION)
    return Summary(package, trend, seen[since].installed, before)


# ---- judging one run -------------------------------------------------------------------------
def place(location: str) -> str:
    """The source file of a location, without line or function: `torch/fx/experimental/proxy_tensor.py`
    for `torch/fx/experimental/proxy_tensor.py:1738 in wrapped:forward` and `...proxy_tensor.py:wrapped`."""
    m = re.match(r"\s*(\S+?\.(?:py|cpp|cc|c|h|hpp|cu|cuh))(?::|\s|$)", location)
    return m.group(1) if m else ""


def message_class(message: str) -> str:
    """A message with what varies between builds and reports of one bug folded out."""
    from .oracle import normalize
    from .rootcause import fold

    return fold(normalize(message)) if message else ""


def same_crash(recorded: Recorded, recorded_message: str, seen: dict) -> bool:
    """A crash seen in another build is the recorded one when it stops in the same source file
    (native assert or innermost torch frame; a native assert at another line needs the same
    message class too), whatever its exception type: a wrapper renamed between releases. Python
    code also moves between files across releases (a sympy check that torch wrapped later), so
    Python frames in different files are the same bug when the message class is the same and names
    a cause, and so is a crash without a place whose type changed (TorchScript's RuntimeError came
    out as NotImplementedError in torch 2.14). Different native asserts are never one bug."""
    then, now = place(recorded.location), place(str(seen.get("location", "")))
    message = message_class(str(seen.get("message", "")))
    same_message = message == message_class(recorded_message)
    native = any(p and not p.endswith(".py") for p in (then, now))
    if then and then == now:
        lines_differ = recorded.location.split(":")[1:2] != str(seen.get("location", "")).split(":")[1:2]
        return not (native and lines_differ) or same_message
    if native:
        return False
    specific = same_message and len(message) >= SPECIFIC_MESSAGE
    if then or now:
        return specific
    return specific or (same_message and str(seen.get("kind", "")) == recorded.kind)


def missing_api(err: str) -> str:
    """The error line when the repro's own code raised one of MISSING_API (the build lacks what it
    calls), else ""."""
    message, tb = printed_error(err)
    frames = re.findall(r'File "([^"]+)", line \d+', tb)
    if frames and frames[-1].endswith(("repro.py", "regression.py")) and message.split(":")[0].split(".")[-1] in MISSING_API:
        return message.splitlines()[0]
    return ""


def classify(recorded: Recorded, recorded_message: str, code: int | None, out: str, err: str) -> tuple[Presence, str]:
    """(presence, why) of one run of a repro."""
    verdict = judge(recorded.outcome, recorded.kind, recorded.location, code, out, err)
    what = f"{recorded.outcome} {recorded.kind} {recorded.location}".strip()
    if verdict == "as recorded":
        return Presence.PRESENT, f"fails as recorded: {what}"
    if verdict == "passes":
        return Presence.ABSENT, "passes: " + (last_line(out) or "exit status 0")
    if verdict.startswith("skipped: "):
        return Presence.NOT_APPLICABLE, verdict.removeprefix("skipped: ")
    seen = read_verdict(out, err) if code else None
    if code and seen is None:  # the repro broke before its fused run: eager, or an import
        message = printed_error(err)[0]
        return Presence.NOT_APPLICABLE, "the repro cannot run here: " + (
            message.splitlines()[0] if message else f"exit status {code} without a verdict")
    if seen is not None and seen.get("outcome") == "crash" and missing_api(err):
        return Presence.NOT_APPLICABLE, "the build lacks what the repro calls: " + missing_api(err)
    if seen is not None and seen.get("outcome") == recorded.outcome == "crash" and same_crash(
            recorded, recorded_message, seen):
        return Presence.PRESENT, f"the same bug, reported as {verdict}"
    return Presence.DIFFERENT, f"recorded {what}; got {verdict}"


def last_line(out: str) -> str:
    lines = [ln for ln in out.strip().splitlines() if ln and not ln.startswith("fuzzfuse-verdict: ")]
    return lines[-1] if lines else ""


# ---- running -----------------------------------------------------------------------------------
def judged_script(directory: Path) -> str:
    """The script a build runs: regression.py, the full oracle with its verdict line, where the
    directory has one (the short repro.py pins eager's value and prints no verdict), else repro.py."""
    return "regression.py" if (directory / "regression.py").is_file() else "repro.py"


def repro_digest(directory: Path) -> str:
    h = hashlib.sha256()
    for name in (judged_script(directory), INPUTS_FILE):
        if (directory / name).is_file():
            h.update(name.encode() + b"\0" + (directory / name).read_bytes())
    return h.hexdigest()[:16]


def repro_backend(directory: Path) -> tuple[str, str]:
    """(BACKEND, DEVICE) as the repro script sets them."""
    text = (directory / judged_script(directory)).read_text()
    found = [re.search(rf"^{name} = '([^']*)'", text, re.M) for name in ("BACKEND", "DEVICE")]
    return tuple(m.group(1) if m else "" for m in found)  # type: ignore[return-value]


def applies(build: Build, directory: Path) -> bool:
    """An nvFuser build only bears on nvFuser's repros; a torch build on all of them."""
    return build.package == Package.TORCH or repro_backend(directory)[0] in ("nvfuser", "aot:nvfuser")


def run_once(python: Path, directory: Path, timeout: float, env: dict) -> tuple[int | None, str, str]:
    """The judged script (and its inputs file) copied to a fresh folder, run by `python` with kernel
    caches of its own."""
    script = judged_script(directory)
    with tempfile.TemporaryDirectory(prefix="fuzzfuse-versions-") as work:
        for name in (script, INPUTS_FILE):
            if (directory / name).is_file():
                shutil.copy(directory / name, work)
        caches = {name: os.path.join(work, "kernel-cache", name.lower()) for name in KERNEL_CACHES}
        try:
            run = subprocess.run([str(python), script], cwd=work, capture_output=True, text=True,
                                 timeout=timeout, env={**env, **caches})
        except subprocess.TimeoutExpired as e:
            text = [s.decode(errors="replace") if isinstance(s, bytes) else s or "" for s in (e.stdout, e.stderr)]
            return None, text[0], text[1]
        return run.returncode, run.stdout, run.stderr


def run_repro(environment: Environment, directory: Path, timeout: float, runs: int = 2) -> RunResult:
    """Judge one repro in one environment; a pass counts once `runs` runs in a row passed."""
    recorded = Recorded.read(directory)
    message = _recorded_message(directory)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    # Inductor's pool of compile processes, each importing torch, costs more than it saves for one
    # small graph on a shared machine; it changes how kernels are compiled, not what is generated.
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if environment.build.package == Package.NVFUSER:
        # The GPU's nvFuser lives on PYTHONPATH (an unpacked wheel), and aot:nvfuser repros import fuzzfuse.
        here = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), here) if p)
    start = time.monotonic()
    for _ in range(runs):
        code, out, err = run_once(environment.python, directory, timeout, env)
        presence, why = classify(recorded, message, code, out, err)
        if presence != Presence.ABSENT:
            break
    return RunResult(directory.name, environment.build, environment.record.installed, repro_digest(directory),
                     presence, why, code, evidence(out, err), round(time.monotonic() - start, 1), False,
                     out[-KEPT_OUTPUT:], err[-KEPT_OUTPUT:])


def evidence(out: str, err: str) -> str:
    """The end of what the repro printed for people (its expected/actual lines, its pass line), or
    of its stderr when it printed nothing (a death by signal): warnings on stderr say nothing."""
    lines = out.strip().splitlines() or err.strip().splitlines()
    return "\n".join(lines[-EVIDENCE_LINES:])


def _recorded_message(directory: Path) -> str:
    sig = json.loads((directory / "case.json").read_text()).get("signature") or {}
    return str(sig.get("message", "")) if isinstance(sig, dict) else ""


# ---- the cache -----------------------------------------------------------------------------------
class ResultCache:
    """One JSON file per (directory, build, repro digest) under `root`: a run resumes from it and
    `--from-cache` draws tables from it. A directory's committed versions.json counts as cached too,
    so that tables survive on a machine whose cache is empty."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, directory: str, build: Build, digest: str) -> Path:
        return self.root / directory / f"{build.key}-{digest}.json"

    def get(self, directory: Path, build: Build) -> RunResult | None:
        path = self.path(directory.name, build, repro_digest(directory))
        if not path.is_file():
            return None
        try:
            return RunResult.from_json(json.loads(path.read_text()))
        except ValueError:
            return None

    def put(self, result: RunResult) -> None:
        path = self.path(result.directory, result.build, result.digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result.to_json(output=True), indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)

    def seconds(self, directory: Path) -> list[float]:
        """How long each cached run of the directory's repro took (read without judging it)."""
        found = []
        for path in (self.root / directory.name).glob("*.json"):
            try:
                found.append(float(json.loads(path.read_text())["seconds"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return found

    def fold(self, other: Path) -> int:
        """Copy another cache's results (the GPU machine's) into this one; how many."""
        count = 0
        for path in sorted(Path(other).rglob("*.json")):
            try:
                result = RunResult.from_json(json.loads(path.read_text()))
            except (ValueError, OSError):
                continue
            self.put(result)
            count += 1
        return count

    def rows(self, directory: Path) -> list[RunResult]:
        """The newest result of each build for a directory: for the repro as it is now when there
        is one, else (marked stale) an earlier repro's, from the cache or from versions.json."""
        digest = repro_digest(directory)
        found: dict[Build, RunResult] = {}
        candidates = []
        for path in sorted((self.root / directory.name).glob("*.json")):
            try:
                candidates.append((path.stat().st_mtime, RunResult.from_json(json.loads(path.read_text()))))
            except (ValueError, OSError):
                continue
        candidates += [(0.0, r) for r in committed(directory)]
        for _, r in sorted(candidates, key=lambda c: (c[1].digest == digest, c[0])):
            found[r.build] = replace(r.judged(directory), stale=r.digest != digest)
        return sorted(found.values(), key=order_key)


def committed(directory: Path) -> list[RunResult]:
    """The results a directory's versions.json holds (none when it has none or it is unreadable)."""
    try:
        data = json.loads((directory / VERSIONS_FILE).read_text())
        return [RunResult.from_json(r) for r in data.get("results", [])]
    except (OSError, ValueError, AttributeError):
        return []


# ---- rendering ---------------------------------------------------------------------------------
def table_for(directory: Path, cache: ResultCache) -> Table:
    case = json.loads((directory / "case.json").read_text())
    found = (case.get("versions") or {}).get("torch", "") if isinstance(case.get("versions"), dict) else ""
    return Table(directory, Recorded.read(directory), str(found), cache.rows(directory))


def markdown(table: Table) -> str:
    """The README section: the summary, the evidence of a fix, one row per build."""
    lines = [BEGIN, "## Versions", "",
             f"**{table.summary}** (found with torch {table.found_with or 'unknown'}; every build runs the repro "
             "in a fresh process of its own environment: `fuzzfuse versions`).", ""]
    for s in table.summaries:
        if s.trend == Trend.FIXED:
            row = next(r for r in table.rows if r.installed == s.build and r.build.package.value == s.package)
            lines += [f"Evidence that {s.package} {s.build} fixed it (the end of its run):", "", "```",
                      row.evidence, "```", ""]
    lines += ["| build | installed | result | why |", "|---|---|---|---|"]
    for r in table.rows:
        why = r.why.replace("|", "\\|").replace("\n", " ")
        stale = " (an earlier repro.py)" if r.stale else ""
        lines.append(f"| {r.build.label} | {r.installed} | {r.presence.value}{stale} | {why} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def with_section(readme: str, section: str) -> str:
    """The README with its versions section replaced, or appended when it has none."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start >= 0 and end > start:
        return readme[:start] + section.rstrip("\n") + readme[end + len(END):]
    return readme.rstrip("\n") + "\n\n" + section


def write_table(table: Table) -> None:
    """versions.json and the README section, each written only when it changes."""
    if not table.rows:
        return
    _write_if_changed(table.directory / VERSIONS_FILE, table.to_json())
    readme = table.directory / "README.md"
    if readme.is_file():
        _write_if_changed(readme, with_section(readme.read_text(), markdown(table)))


def _write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)


def summary_of(directory: Path) -> str | None:
    """A directory's summary as its versions.json says (for triage), or None."""
    try:
        data = json.loads((directory / VERSIONS_FILE).read_text())
        return "; ".join(str(s["text"]) for s in data["summary"]) or None
    except (OSError, ValueError, KeyError, TypeError):
        return None
