"""pytest plugin (registered as `fuzzfuse` through the pytest11 entry point): a directory of
minimized repros as a regression suite.

`pytest --fuzzfuse-corpus minimized` (repeatable) adds one test item per repro under the directory
(any `<dir>/case.json` beside a `repro.py`, at any depth; the item's id is the repro directory's
path below the corpus, which for `minimized/<slug>/` is the slug). An item copies the repro's full-oracle
script (regression.py, or repro.py in a directory of the form before; and its inputs file) to a temporary directory and runs it in a fresh interpreter, so a hard crash kills only
the repro. Verdicts:

- an open bug (the default) is xfail(strict=True): XFAIL while the repro fails as recorded in
  case.json (the signal it died by, or the outcome, kind and location of the verdict line it
  prints last: `fuzzfuse-verdict: {...}`); if it passes three runs in a row, XPASS(strict) fails the run: "fixed? move it to the
  fixed set" (one pass can be an intermittent crash hiding under load);
- the fixed set: a repro directory holding a file named FIXED (its text may say where it was fixed,
  e.g. `echo "torch 2.14, pytorch#1234" > minimized/<slug>/FIXED`) must pass; if the repro fails
  again it FAILS as a regression ("bug came back");
- a repro that fails differently than recorded FAILS (a stale entry or a new bug), never xfails;
- a repro whose backend cannot run here is SKIPPED with the reason, and so is one whose recorded
  re-runs were flaky (or did not reproduce), and one pinned to a CPU capability this machine
  lacks (its verdict says skip; exit status 125).

The plugin only adds items when the option is given, so `pytest tests/test_x.py` stays fast; CI
passes `--fuzzfuse-corpus minimized`. The judging code is shared with `fuzzfuse export`.
"""
from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from .export import (FIXED, OPEN_REASON, TIMEOUT, Recorded, StillFails, judged_run, judged_script, repro_dirs, settle,
                     skip_reason, tail)
from .repro import INPUTS_FILE


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fuzzfuse", "fuzzfuse regression corpus")
    group.addoption("--fuzzfuse-corpus", action="append", default=[], metavar="DIR",
                    help="run every minimized repro under DIR as a test (repeatable)")
    group.addoption("--fuzzfuse-timeout", type=float, default=TIMEOUT, metavar="SECONDS",
                    help=f"seconds one repro may run before it counts as a hang (default {TIMEOUT:g})")


def pytest_configure(config: pytest.Config) -> None:
    for d in config.getoption("fuzzfuse_corpus"):
        if not (config.invocation_params.dir / d).is_dir():
            raise pytest.UsageError(f"--fuzzfuse-corpus {d}: not a directory")


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect and --lf, so they apply to repros too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    for d in config.getoption("fuzzfuse_corpus"):
        items.extend(session.genitems(Corpus.from_parent(session, path=config.invocation_params.dir / d)))


class Corpus(pytest.Directory):
    """A directory of minimized repros."""

    def collect(self):
        for directory in repro_dirs(self.path):
            yield ReproItem.from_parent(self, name=directory.relative_to(self.path).as_posix(), directory=directory)


@functools.cache
def unavailable(backend: str) -> str | None:
    """Why `backend` cannot run here (None when it can). A backend that imports code of its name's
    choosing (custom:..., dynamo:module:function) is not loaded here because case.json named it:
    only its top-level package is looked for (finders run no module code); the repro script, code
    the user chose to run, imports it in its own process."""
    import importlib.util

    from .backends import Unavailable, availability, get_backend, nameable_in_a_file

    known = availability()
    if backend in known:
        return known[backend]
    if not nameable_in_a_file(backend):
        package = backend.split(":")[1].split(".")[0]
        found = package.isidentifier() and importlib.util.find_spec(package) is not None
        return None if found else f"backend {backend!r} cannot be loaded: no package {package!r} here"
    try:
        get_backend(backend)
    except Unavailable as e:
        return str(e)
    return None


class ReproItem(pytest.Item):
    def __init__(self, *, directory: Path, **kwargs) -> None:
        super().__init__(**kwargs)
        self.directory = directory
        self.fixed = (directory / FIXED).exists()
        if not self.fixed:
            where = directory / FIXED
            if where.is_relative_to(self.config.invocation_params.dir):
                where = where.relative_to(self.config.invocation_params.dir)
            self.add_marker(pytest.mark.xfail(strict=True, raises=StillFails, reason=OPEN_REASON.format(how=f"create {where}")))

    def runtest(self) -> None:
        case = Recorded.read(self.directory)
        reason = unavailable(case.backend) or skip_reason(case)
        if reason:
            pytest.skip(f"{case.backend}: {reason}")
        with tempfile.TemporaryDirectory(prefix="fuzzfuse-repro-") as work:
            shutil.copy(judged_script(self.directory), Path(work) / "repro.py")  # fuzzfuse's full oracle
            if (self.directory / INPUTS_FILE).exists():
                shutil.copy(self.directory / INPUTS_FILE, work)
            # PYTHONPATH only matters to custom backends' repros, which import their backend.
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
            verdict, out, err = judged_run(work, self.config.getoption("fuzzfuse_timeout"), case.outcome,
                                           case.kind, case.location, self.fixed, env)
        what = f"{case.outcome} {case.kind} {case.location}".strip()
        if self.fixed and (self.directory / FIXED).read_text().strip():
            what += f"; {FIXED} says: {(self.directory / FIXED).read_text().strip()}"
        settle(verdict, self.fixed, what, tail(out, err))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (OSError, ValueError)):  # an unreadable case.json
            return f"{self.directory}: cannot read the repro's case.json: {excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.directory, None, f"fuzzfuse repro {self.name}"
