"""Where an error was raised, read from its text: the one rule for the campaign's oracle (an
exception in a worker) and for a repro's run (the traceback it printed on stderr).

Standard library only, and each function self-contained: `fuzzfuse export` copies them verbatim
into the test files it writes, which must not need fuzzfuse. A repro therefore prints its error
and names only the exception type in its verdict line; whoever reads the run locates the error,
so a repro carries no copy of these rules.
"""
from __future__ import annotations

import re


# What nvFuser's parallel-compile wrapper says; its workers now compile segments one by one
# (NvFuserBackend.env), so only errors recorded before say it.
PARALLEL_COMPILE_WRAPPER = "compiling fusion segments in parallel"


def innermost_error(text):
    """The error nvFuser's parallel-compile wrapper reports, unwrapped: the wrapper's assert names
    where errors are collected, not the bug (one wrapper location held five different inner
    asserts), and a case reduced to one segment compiles serially, without the wrapper. With
    several failing segments, the lowest-numbered one, whatever order the threads finished in.
    A run's own "Error from segmentation group N:" prefix stays: nvFuser puts it on every run
    error, one segment or many."""
    while PARALLEL_COMPILE_WRAPPER in text:
        marks = list(re.finditer(r"Error from segmentation group (\d+):", text))
        if not marks:
            return text
        first = min(marks, key=lambda m: int(m.group(1)))
        after = [m.start() for m in marks if m.start() > first.start()]
        tail = re.compile(r"\n\s*Use NVFUSER_DISABLE=parallel_compile").search(text, first.end())
        ends = after + ([tail.start()] if tail else [])
        text = text[first.end():min(ends) if ends else len(text)]
    return text


def cpp_location(text):
    """The first C++ source location of the innermost error in a text, from `csrc/` on (paths
    differ by build)."""
    m = re.search(r"(?:at|from \w+ at) [\"']?([^\s\"']+?\.(?:cpp|cc|h|hpp|cu|cuh))[\"']?:(\d+)", innermost_error(text))
    if not m:
        return ""
    path = m.group(1)
    for anchor in ("csrc/", "aten/", "torch/", "c10/"):
        if anchor in path:
            path = path[path.index(anchor):]
            break
    else:
        path = "/".join(path.split("/")[-2:])
    return f"{path}:{m.group(2)}"


def python_location(tb):
    """The innermost frame of the torch package in a Python traceback, as file:function (line
    numbers churn), the path from the package on. A path is read from its last site-packages (or
    dist-packages) on, so that a virtualenv in a folder named torch (/opt/torch/.venv/...) does not
    make sympy or triton frames look like torch's, and keys do not depend on the install path."""
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', tb)
    for path, func in reversed(frames):
        installed = re.search(r"(?:site|dist)-packages/(.*)$", path)
        if installed:
            path = installed.group(1)
        elif "/torch/" in path:  # a source checkout
            path = path[path.rindex("/torch/") + 1:]
        if path.startswith("torch/"):
            return f"{path}:{func}"
    return ""


def printed_error(err):
    """(message, traceback) of the exception a process printed last on stderr, as
    traceback.print_exception writes it: the traceback from the first "Traceback" header of that
    print on (earlier warnings left out; a chained exception's causes kept, as
    traceback.format_exception keeps them), the message after the last frame of the last header.
    ("", "") when nothing was printed."""
    header = "Traceback (most recent call last):"
    last = err.rfind(header)
    if last < 0:
        return "", ""
    first = last
    links = ("The above exception was the direct cause of the following exception:",
             "During handling of the above exception, another exception occurred:")
    while True:  # back over the causes, each block joined to the next by one of the links
        joined = [k for k in (err.rfind(link, 0, first) for link in links)
                  if k >= 0 and not err[k:first].split(":", 1)[1].strip()]
        if not joined or err.rfind(header, 0, joined[0]) < 0:
            break
        first = err.rfind(header, 0, joined[0])
    lines = err[last:].splitlines()[1:]
    start = next((k for k, line in enumerate(lines) if line and not line[0].isspace()), len(lines))
    return "\n".join(lines[start:]).strip(), err[first:]


def error_location(message, tb):
    """Where an error was raised: the C++ assert of its (innermost) message, else of its
    traceback, else the innermost torch frame."""
    return cpp_location(message) or cpp_location(tb) or python_location(tb)
