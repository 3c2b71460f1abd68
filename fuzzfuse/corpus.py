"""Cases on disk: one JSON file per failing case, written atomically, loaded without executing
anything. A corrupt file is reported with one line and skipped; it never stops a replay."""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .ir import Graph, GraphError
from .reduce.generalise import Generalisation

CASE_SCHEMA = 1


class CorpusError(ValueError):
    """A case file that cannot be used; the message is one line naming the file."""


@dataclass
class Case:
    """A graph plus where it came from and how it failed."""

    graph: Graph
    backend: str = ""
    seed: int | None = None
    outcome: str = ""
    signature: dict | None = None
    detail: str = ""
    versions: dict = field(default_factory=dict)
    config: dict | None = None
    options: dict = field(default_factory=dict)
    found: float = field(default_factory=time.time)
    # Minimized repros only: how the reduction went, how often the signature was hit, and the
    # fresh-process re-runs of repro.py.
    reduction: dict | None = None
    hits: int = 1
    verification: dict | None = None
    # A repro folded from several (one root cause found as several signatures): each variant's
    # signature key, root-cause key, ops and former directory. --known counts them as this repro's.
    also_seen_as: list[dict] = field(default_factory=list)
    # Reduced cases only: the fillers and free dtypes of the graph (fuzzfuse.reduce.generalise),
    # which its root-cause key writes as wildcards. None: not generalised (keyed by its names).
    generalisation: Generalisation | None = None

    def to_json(self) -> dict:
        return {"schema": CASE_SCHEMA, "kind": "fuzzfuse-case", "graph": self.graph.to_json(),
                "backend": self.backend, "seed": self.seed, "outcome": self.outcome,
                "signature": self.signature, "detail": self.detail, "versions": self.versions,
                "config": self.config, "options": self.options, "found": self.found,
                "reduction": self.reduction, "hits": self.hits, "verification": self.verification,
                **({"also_seen_as": self.also_seen_as} if self.also_seen_as else {}),
                **({"generalisation": self.generalisation.to_json()} if self.generalisation else {})}

    @staticmethod
    def from_json(d: dict) -> "Case":
        if not isinstance(d, dict) or d.get("kind") != "fuzzfuse-case":
            raise GraphError("not a fuzzfuse case (missing kind: fuzzfuse-case)")
        if d.get("schema") != CASE_SCHEMA:
            raise GraphError(f"unsupported case schema {d.get('schema')!r}")
        if not isinstance(d.get("backend", ""), str):
            raise GraphError(f"backend must be a name, not {d['backend']!r}")
        return Case(Graph.from_json(d["graph"]), str(d.get("backend", "")), d.get("seed"),
                    str(d.get("outcome", "")), d.get("signature"), str(d.get("detail", "")),
                    dict(d.get("versions") or {}), d.get("config"), dict(d.get("options") or {}),
                    float(d.get("found", 0.0)), d.get("reduction"), int(d.get("hits", 1)), d.get("verification"),
                    [dict(v) for v in d.get("also_seen_as") or [] if isinstance(v, dict)],
                    Generalisation.from_json(d["generalisation"]) if d.get("generalisation") else None)


def _read_umask() -> int:
    """The process's umask. Setting it is the only way to read it, and it is process-wide, so it is
    read once, at import, before any thread starts."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _read_umask()


def umask_mode(directory: bool = False) -> int:
    """The mode open() or mkdir() would give: temp files and folders (0600/0700) are set to it before
    they are renamed into place, so that a campaign directory shared over NFS stays readable by
    whom the user's umask allows."""
    return (0o777 if directory else 0o666) & ~UMASK


def atomic_write(path: Path, text: str) -> None:
    """Write-then-rename: a reader (or a SIGKILL) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, umask_mode())
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_json(path: Path, data: dict) -> None:
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def save_case(directory: Path, case: Case, overwrite: bool = True) -> Path:
    """Files are named by graph digest; with overwrite=False the first file for a graph stays as
    it was (a campaign re-running a case it had saved before a SIGKILL must not rewrite it)."""
    path = Path(directory) / f"{case.graph.digest()}.json"
    if overwrite or not path.exists():
        write_json(path, case.to_json())
    return path


def read_json(path: Path, what: str):
    """The JSON in a file a user may have shared, or CorpusError naming the file in one line. Every
    way such a file fails to parse is caught here, nesting too deep for the parser included: a
    file of a million `[` raises RecursionError, not a JSONDecodeError."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CorpusError(f"{path}: cannot read {what}: {e}") from None


def load_case(path: Path) -> Case:
    data = read_json(path, "case")
    try:
        return Case.from_json(data)
    except (GraphError, KeyError, TypeError, ValueError) as e:
        raise CorpusError(f"{path}: invalid case: {e}") from e


def case_files(paths: list[str | Path]) -> list[Path]:
    """Expand directories into the case files under them (sorted, for a stable replay order).
    Hidden files and folders are skipped: a repro still being written is staged in one."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob("*.json")
                            if not any(part.startswith(".") for part in f.relative_to(p).parts))
        else:
            files.append(p)
    return files


def iter_cases(paths: list[str | Path]) -> Iterator[tuple[Path, Case | CorpusError]]:
    """Every case under `paths`; unreadable ones come back as CorpusError, so callers can report
    them and go on with the rest."""
    for f in case_files(paths):
        try:
            yield f, load_case(f)
        except CorpusError as e:
            yield f, e
