"""The life of a bug after it is filed: the upstream issue a minimized repro was filed as or found
in, and that issue's state, recorded in the repro's case.json (`upstream`) by a person who looked.

Only what was found is recorded, each with its link. A repro whose bug is already reported
upstream is reported as such (`fuzzfuse report` says "known upstream" instead of asking for a new
issue); a close relative (the same op and symptom through another route) is recorded as related,
and the report still asks for an issue, citing it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from .ir.untrusted import record, take

# The trackers a link may point into: the upstreams fuzzfuse reports to.
TRACKERS = ("pytorch/pytorch", "NVIDIA/Fuser")
_LINK = re.compile(r"https://github\.com/(pytorch/pytorch|NVIDIA/Fuser)/(issues|pull)/(\d+)")


class State(Enum):
    """An upstream issue's state when it was last looked at."""

    OPEN = "open"
    FIXED = "fixed"  # closed by a fix (fixed_in names the release or PR where known)
    DUPLICATE = "duplicate"  # closed as a duplicate of duplicate_of
    CLOSED = "closed"  # closed without a fix (TorchScript's deprecation closed many)


class Relation(Enum):
    """How the upstream issue relates to the repro's bug."""

    SAME = "same"  # the same bug: filed as, or already reported
    RELATED = "related"  # a close relative: same op or symptom, another route or dtype


@dataclass(frozen=True)
class UpstreamIssue:
    """One upstream issue (or pull request) about a repro's bug, as a person found it."""

    url: str
    state: State
    relation: Relation
    title: str
    checked: str  # the date it was looked at, YYYY-MM-DD
    fixed_in: str = ""
    duplicate_of: str = ""

    @property
    def reference(self) -> str:
        """"pytorch/pytorch#191308"."""
        repo, _, number = _LINK.fullmatch(self.url).groups()
        return f"{repo}#{number}"

    def status(self) -> str:
        """"open", "fixed in 2.14", "duplicate of pytorch/pytorch#1"."""
        if self.state is State.FIXED and self.fixed_in:
            return f"fixed in {self.fixed_in}"
        if self.state is State.DUPLICATE and self.duplicate_of:
            return f"duplicate of {self.duplicate_of}"
        return self.state.value

    def line(self) -> str:
        """One Markdown line for a README or a report."""
        how = "reported upstream as" if self.relation is Relation.SAME else "related upstream issue:"
        return f"{how} [{self.reference}]({self.url}) ({self.status()}; checked {self.checked}): {self.title}"

    def to_json(self) -> dict:
        out = {"url": self.url, "state": self.state.value, "relation": self.relation.value, "title": self.title,
               "checked": self.checked}
        out.update({k: v for k, v in (("fixed_in", self.fixed_in), ("duplicate_of", self.duplicate_of)) if v})
        return out

    @staticmethod
    def from_json(d: dict) -> "UpstreamIssue":
        """Validated: a case file is untrusted input; a link must point into an upstream tracker."""
        what = "upstream"
        d = record(d, what, UpstreamIssue.__dataclass_fields__)
        url = take(d, "url", str, what)
        if not _LINK.fullmatch(url):
            raise ValueError(f"upstream: {url[:80]!r} is not an issue or pull request of {' or '.join(TRACKERS)}")
        checked = take(d, "checked", str, what)
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", checked):
            raise ValueError(f"upstream: checked {checked[:20]!r} is not a date (YYYY-MM-DD)")
        try:
            state, relation = State(take(d, "state", str, what)), Relation(take(d, "relation", str, what))
        except ValueError as e:
            raise ValueError(f"upstream: {e}") from None
        return UpstreamIssue(url, state, relation, take(d, "title", str, what), checked,
                             take(d, "fixed_in", str, what, ""), take(d, "duplicate_of", str, what, ""))


def known(issues: list[UpstreamIssue]) -> UpstreamIssue | None:
    """The issue that already reports this bug and stands for it upstream (open first, then fixed or
    a duplicate), None when none does. One closed without a fix does not: the bug still fails, and
    its report asks for an issue that cites the closed one (oneDNN Graph's mixed-dtype cat was a pull
    request closed unmerged)."""
    same = [i for i in issues if i.relation is Relation.SAME and i.state is not State.CLOSED]
    return next((i for i in same if i.state is State.OPEN), same[0] if same else None)
