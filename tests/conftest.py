"""The test tiers and their budget.

Two tiers (the markers are registered in pyproject.toml's [tool.pytest.ini_options], the one
place they are declared):

- fast: every test not marked `slow`. `python3 -m pytest -q -m "not slow" -n auto` runs them
  before every commit. A fast test's call must finish within FAST_BUDGET seconds; one that takes
  longer is listed at the end of the run ("fast tests over the budget"), and with
  `--fast-budget-strict` the run fails. Mark it `slow` (or make it cheaper).
- slow: `@pytest.mark.slow`, anything over the budget (real campaigns, reductions, fresh
  interpreters per case). CI runs both tiers, plus every committed repro through the fuzzfuse
  plugin (`--fuzzfuse-corpus minimized`); the repros are a tier of their own and are not held to
  the budget (this conftest's hooks do not reach items outside tests/).

Every test, slow or not, is capped by pytest-timeout (`timeout` in pyproject.toml): a stuck test
fails instead of holding CI.

`upstream_bug(slug)`: a test that needs the bug of the committed repro minimized/<slug>/ still to be
present in torch (it uses the real fuser's bug as its fixture) skips once that directory holds a
FIXED file, with the file's text as the reason. The day torch fixes the bug, the plugin fails the
repro as XPASS(strict) ("move it to the fixed set"); once FIXED is written there, these tests skip
instead of failing on a bug that is gone.
"""
from __future__ import annotations

from pathlib import Path

import pytest

# Seconds one fast test's call may take. Measured on the 2-core machine (issue 36), one file at a
# time with `-m "not slow" --durations`: the nine calls over it took 6.6-26 s (a reduction through
# the CLI, a cold Inductor compile, a fresh repro process) and are marked slow; of the rest, a
# small real campaign takes 3.5-4.4 s (test_fused_share, test_backward, test_campaign), everything
# else under 3.7 s, most under 0.1 s. The fast tier's calls add up to about 185 s. 5 s sits above
# the small campaigns, with some room for a loaded machine, and below anything that needs a fresh
# interpreter per case or a reduction.
FAST_BUDGET = 5.0

MINIMIZED = Path(__file__).parent.parent / "minimized"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fuzzfuse-tiers", "fuzzfuse test tiers")
    group.addoption("--fast-budget", type=float, default=FAST_BUDGET, metavar="SECONDS",
                    help=f"seconds a test not marked slow may take (default {FAST_BUDGET:g})")
    group.addoption("--fast-budget-strict", action="store_true",
                    help="fail the run when a test not marked slow takes longer than --fast-budget")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    for item in items:
        for mark in item.iter_markers("upstream_bug"):
            fixed = MINIMIZED / mark.args[0] / "FIXED"
            if not (MINIMIZED / mark.args[0] / "case.json").is_file():
                raise pytest.UsageError(f"{item.nodeid}: upstream_bug({mark.args[0]!r}) names no committed repro")
            if fixed.exists():
                said = fixed.read_text().strip()
                item.add_marker(pytest.mark.skip(
                    reason=f"needs the bug of minimized/{mark.args[0]}, fixed upstream" + (f" ({said})" if said else "")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    # Marked here, in the process that ran the test: the mark travels to xdist's controller with the report.
    if report.when == "call" and item.get_closest_marker("slow") is None and \
            report.duration > item.config.getoption("fast_budget"):
        report.user_properties.append(("over_fast_budget", report.duration))


_over: list[tuple[str, float]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, seconds in report.user_properties:
        if name == "over_fast_budget":
            _over.append((report.nodeid, seconds))


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if not _over or hasattr(config, "workerinput"):
        return
    budget = config.getoption("fast_budget")
    terminalreporter.section(f"fast tests over the budget ({budget:g} s): mark them slow or make them cheaper")
    for nodeid, seconds in sorted(_over, key=lambda o: -o[1]):
        terminalreporter.write_line(f"{seconds:7.2f}s {nodeid}")
    if config.getoption("fast_budget_strict"):
        terminalreporter.write_line("--fast-budget-strict: the run fails", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    if _over and session.config.getoption("fast_budget_strict") and not hasattr(session.config, "workerinput") \
            and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
