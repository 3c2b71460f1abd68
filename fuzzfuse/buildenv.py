"""One environment per fuser build, made once and cached: what `fuzzfuse versions` runs repros in.

A torch release gets a virtualenv of its own (`python -m venv`, then pip installs `torch==V` and
numpy from whatever index pip is configured with), never the user's environment: a repro is then
run by that virtualenv's interpreter. An nvFuser build gets a virtualenv that sees the system's
site-packages (the GPU's own torch, which nvFuser's wheels are built against) with only
`nvfuser-cu130==V` installed over it, from a folder of wheels when the machine has no network.
The build named `installed` is the interpreter running fuzzfuse itself: the build in use.

An environment is ready once its `ready.json` (an `EnvironmentRecord`) exists; it is written last,
so a build killed halfway is built again from scratch. A lock file keeps two processes from
building the same environment at once.
"""
from __future__ import annotations

import enum
import fcntl
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

READY = "ready.json"
INSTALLED = "installed"
# A CUDA build of torch with its libraries is several GB: pip's own cache would keep a second copy.
PIP_FLAGS = ("--no-cache-dir", "--disable-pip-version-check", "-q")


class Package(str, enum.Enum):
    """What a build is a build of: the value is the name pip installs it by."""

    TORCH = "torch"
    # PyPI's `nvfuser-cu130` is a source stub that refuses to build; the wheels for CUDA 13 are
    # published per torch minor version, and the GPU machine's nvFuser is this one.
    NVFUSER = "nvfuser-cu130-torch210"

    @property
    def module(self) -> str:
        return {"torch": "torch", "nvfuser-cu130-torch210": "nvfuser_direct"}[self.value]

    @property
    def option(self) -> str:
        return {"torch": "--torch", "nvfuser-cu130-torch210": "--nvfuser"}[self.value]


class BuildError(RuntimeError):
    """An environment could not be made (pip failed, the wheel is not there); one line."""


@dataclass(frozen=True)
class Build:
    """A package at one version, or `installed`: whatever this interpreter imports."""

    package: Package
    version: str

    @property
    def key(self) -> str:
        """Its directory and file-name form: `torch-2.14.1`."""
        return f"{self.package.value}-{self.version}"

    @property
    def label(self) -> str:
        return f"{self.package.value} {self.version}"

    @staticmethod
    def parse_list(package: Package, text: str) -> list["Build"]:
        """`2.9.1,2.14.1` -> builds; ValueError (one line) for an empty or malformed list."""
        versions = [v.strip() for v in text.split(",") if v.strip()]
        bad = [v for v in versions if v != INSTALLED and not all(c.isalnum() or c in ".+-_" for c in v)]
        if not versions or bad:
            raise ValueError(f"{package.option} {text!r}: expected versions such as 2.9.1,2.14.1"
                             f" (or {INSTALLED})")
        return [Build(package, v) for v in dict.fromkeys(versions)]


@dataclass(frozen=True)
class EnvironmentRecord:
    """What an environment holds, read back from it once it was made: the versions pip chose
    (2.13.0 may be 2.13.0+cpu) and its Python."""

    package: str
    requested: str
    installed: str
    torch: str
    python: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, indent=1) + "\n"

    @staticmethod
    def from_json(text: str) -> "EnvironmentRecord":
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        fields = {k: data.get(k, "") for k in ("package", "requested", "installed", "torch", "python")}
        if not all(isinstance(v, str) for v in fields.values()):
            raise ValueError("its fields must be strings")
        return EnvironmentRecord(**fields)


@dataclass(frozen=True)
class Environment:
    """A ready environment: the interpreter that runs a build's repros."""

    build: Build
    python: Path
    record: EnvironmentRecord


_PROBE = """import importlib, importlib.metadata as m, json, sys
def version(name, module):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        pass
    try:
        return str(getattr(importlib.import_module(module), "__version__", ""))
    except ImportError:
        return ""
import torch
print(json.dumps(dict(torch=torch.__version__, installed=version(*sys.argv[1:]) or torch.__version__,
                      python=sys.version.split()[0])))
"""


def probe(python: Path | str, build: Build) -> EnvironmentRecord:
    """Ask an interpreter what it imports; BuildError when torch does not import there."""
    run = subprocess.run([str(python), "-c", _PROBE, build.package.value, build.package.module],
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"{build.label}: its environment does not import torch: {last}")
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    installed = seen["installed"] if build.package == Package.NVFUSER else seen["torch"]
    return EnvironmentRecord(build.package.value, build.version, installed, seen["torch"], seen["python"])


def ensure(build: Build, envs: Path, wheels: Path | None = None, log=print) -> Environment:
    """The build's environment under `envs`, made first if it is not there yet."""
    if build.version == INSTALLED:
        return installed(build)
    home = envs / build.key
    envs.mkdir(parents=True, exist_ok=True)
    with open(envs / f"{build.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / READY).is_file():
            _make(build, home, wheels, log)
        record = EnvironmentRecord.from_json((home / READY).read_text())
    return Environment(build, home / "bin" / "python", record)


def installed(build: Build) -> Environment:
    """The environment of this interpreter, its build named by the version it imports (so that
    the results of two builds put in use one after the other are kept apart)."""
    record = probe(sys.executable, build)
    return Environment(Build(build.package, record.installed), Path(sys.executable), record)


def _make(build: Build, home: Path, wheels: Path | None, log) -> None:
    log(f"making the environment for {build.label} in {home} (once; a CUDA torch is several GB)")
    shutil.rmtree(home, ignore_errors=True)
    venv = [sys.executable, "-m", "venv"] + (["--system-site-packages"] if build.package == Package.NVFUSER else [])
    _call(venv + [str(home)], build)
    pip = [str(home / "bin" / "python"), "-m", "pip", "install", *PIP_FLAGS]
    if wheels is not None:
        pip += ["--no-index", "--find-links", str(wheels)]
    if build.package == Package.TORCH:
        pip += [f"torch=={build.version}", "numpy"]
    else:  # over the system's torch: a wheel's torch pin would pull in a second, CPU-only torch
        pip += ["--no-deps", f"{build.package.value}=={build.version}"]
    _call(pip, build)
    record = probe(home / "bin" / "python", build)
    (home / (READY + ".tmp")).write_text(record.to_json())
    os.replace(home / (READY + ".tmp"), home / READY)


def _call(command: list[str], build: Build) -> None:
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        lines = [ln for ln in (run.stderr + run.stdout).strip().splitlines() if not ln.startswith("WARNING")]
        raise BuildError(f"{build.label}: {' '.join(command[2:4])} failed: {(lines or ['no output'])[-1]}")
