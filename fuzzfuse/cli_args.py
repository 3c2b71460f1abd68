"""What every command's arguments share: the exit status and exception of bad input, and the
argparse types of bounded numbers (fuzzfuse.cli and fuzzfuse.cli_corpus both parse with them)."""
from __future__ import annotations

import argparse

EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """One line for the user; exit code 2."""


def _number(kind: type, low: float, high: float | None = None, low_open: bool = False):
    """An argparse type: a `kind` number from `low` (excluded when low_open) to `high`."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
        if value != value or value < low or (low_open and value == low) or (high is not None and value > high):
            bound = f"> {low}" if low_open else f">= {low}"
            raise argparse.ArgumentTypeError(f"{text} must be {bound}" + (f" and <= {high}" if high is not None else ""))
        return value
    return parse


POSITIVE_SECONDS = _number(float, 0.0, low_open=True)
# Below a second a case cannot even start its compile: every case would turn into a fake "hang".
CASE_TIMEOUT = _number(float, 1.0)
AT_LEAST_ONE = _number(int, 1)
FRACTION = _number(float, 0.0, 1.0)
