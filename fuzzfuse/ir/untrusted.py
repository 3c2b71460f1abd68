"""Reading JSON that anyone may have written (case files, campaign state, summaries): every record
type's `from_json` takes its fields through these, so that a field of the wrong type, a missing one
or one no type declares is a one-line GraphError naming it, raised where the file is read, never a
traceback later, deep in the code that trips over the value.

An unknown field is refused, not dropped or kept: dropping it would lose it at the next write, and
keeping it would make it a field that no type names (it is a typo, or a newer fuzzfuse's file).
"""
from __future__ import annotations

from typing import Iterable

_REQUIRED = object()


class GraphError(ValueError):
    """A graph or case file that does not describe a valid graph: what every reader below raises,
    with one line naming the field."""


def record(d: object, what: str, known: Iterable[str]) -> dict:
    """`d` as the JSON object of a `what` whose fields are all among `known`."""
    if not isinstance(d, dict):
        raise GraphError(f"{what}: expected a JSON object, not {type(d).__name__}")
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise GraphError(f"{what}: unknown field {unknown[0]!r}")
    return d


def take(d: dict, key: str, kinds: type | tuple[type, ...], what: str, default=_REQUIRED):
    """d[key] when it is one of `kinds` (None among them as type(None)); `default` when the field
    is absent and a default is given. A bool is not an int here (JSON's true is no count), and an
    int is a float."""
    if key not in d:
        if default is _REQUIRED:
            raise GraphError(f"{what}: missing field {key!r}")
        return default
    value = d[key]
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    ok = isinstance(value, kinds) and (not isinstance(value, bool) or bool in kinds)
    if not ok and float in kinds and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise GraphError(f"{what}: field {key!r} must be {names}, not {type(value).__name__}")
    return value


def strings(d: dict, key: str, what: str, default=_REQUIRED) -> tuple[str, ...]:
    """d[key] as a tuple of strings (a JSON array of them)."""
    if key not in d and default is not _REQUIRED:
        return default
    value = take(d, key, list, what)
    if not all(isinstance(v, str) for v in value):
        raise GraphError(f"{what}: field {key!r} must be a list of strings")
    return tuple(value)


def text_map(d: dict, key: str, what: str, default=_REQUIRED) -> dict[str, str]:
    """d[key] as a table of strings by name (a JSON object of strings): package versions."""
    if key not in d and default is not _REQUIRED:
        return default
    value = take(d, key, dict, what)
    if not all(isinstance(v, str) for v in value.values()):
        raise GraphError(f"{what}: field {key!r} must map names to strings")
    return dict(value)
