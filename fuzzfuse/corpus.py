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

from .backends.options import Options
from .backends.registry import component
from .ir import Graph, GraphError
from .oracle import Signature
from .reduce.generalise import Generalisation
from .rootcause import anchored
from .short_repro import Symptom
from .upstream import UpstreamIssue
from .ir.untrusted import record, strings, take, text_map
from .verdict import Outcome, Reproduction, Verification

CASE_SCHEMA = 1
# A seed case's outcome on disk: it is a graph to start from, and nothing failed.
SEED = "seed"


class CorpusError(ValueError):
    """A case file that cannot be used; the message is one line naming the file."""


# The table of versions a directory's bug was looked for in (fuzzfuse.versions): history a
# rewrite of the directory's repro keeps, as it keeps a person's FIXED.
VERSIONS_FILE = "versions.json"


@dataclass(frozen=True)
class ReductionFigures:
    """How a minimized case's reduction went: its ops before and after, the queries it asked, how
    many of them the cache answered, its seconds, and the reducer's revision
    (`minimize.REDUCER_REVISION`: a later reducer may name its bug otherwise). None: not recorded (a
    case reduced before a figure was kept)."""

    ops_before: int | None = None
    ops_after: int | None = None
    queries: int | None = None
    cache_hits: int | None = None
    seconds: float | None = None
    reducer: int | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @staticmethod
    def from_json(d: dict) -> "ReductionFigures":
        d = record(d, "reduction", ReductionFigures.__dataclass_fields__)
        counts = {k: take(d, k, int, "reduction", None)
                  for k in ("ops_before", "ops_after", "queries", "cache_hits", "reducer")}
        return ReductionFigures(**counts, seconds=take(d, "seconds", float, "reduction", None))


@dataclass(frozen=True)
class Variant:
    """A repro folded into another one (one root cause found as several signatures: fuzzfuse.fold):
    what the kept repro's `also_seen_as` keeps of it. Its coarse and root-cause keys, backend, ops,
    former directory and verification status; its reduced graph and that graph's generalisation
    where it kept them (folded before they were recorded: None). --known counts it as the kept
    repro's own, and a campaign steers away from its graph too (fuzzfuse.steering)."""

    key: str
    root_cause: str
    backend: str
    ops: tuple[str, ...]
    directory: str
    verification: Reproduction | None = None
    graph: Graph | None = None
    generalisation: Generalisation | None = None

    @property
    def signature(self) -> Signature:
        """Its signature, read back from its key."""
        return Signature(*self.key.split("|", 5))

    def to_json(self) -> dict:
        out = {"key": self.key, "root_cause": self.root_cause, "backend": self.backend, "ops": list(self.ops),
               "directory": self.directory, "verification": self.verification.value if self.verification else None}
        if self.graph is not None:
            out["graph"] = self.graph.to_json()
        if self.generalisation is not None:
            out["generalisation"] = self.generalisation.to_json()
        return out

    @staticmethod
    def from_json(d: dict) -> "Variant":
        what = "also_seen_as"
        d = record(d, what, Variant.__dataclass_fields__)
        key = take(d, "key", str, what)
        if key.count("|") < 5:
            raise GraphError(f"{what}: {key[:80]!r} is not a signature key "
                             "(outcome|backend|stage|kind|location|message)")
        status, graph = take(d, "verification", (str, type(None)), what, None), take(d, "graph", dict, what, None)
        general = take(d, "generalisation", dict, what, None)
        return Variant(key, take(d, "root_cause", str, what), take(d, "backend", str, what), strings(d, "ops", what),
                       take(d, "directory", str, what), Reproduction(status) if status is not None else None,
                       Graph.from_json(graph) if graph is not None else None,
                       Generalisation.from_json(general) if general is not None else None)


_CASE_FIELDS = ("schema", "kind", "graph", "backend", "seed", "outcome", "signature", "detail", "versions", "config",
                "options", "found", "reduction", "hits", "verification", "also_seen_as", "generalisation", "symptom",
                "upstream")


@dataclass
class Case:
    """A graph plus where it came from and how it failed. On disk (`to_json`) every field keeps the
    form case files have always had; a field no type declares is refused on load (ir.untrusted.record)."""

    graph: Graph
    backend: str = ""
    seed: int | None = None
    outcome: Outcome | None = None  # None: a seed case (SEED on disk), nothing failed
    signature: Signature | None = None
    detail: str = ""
    versions: dict[str, str] = field(default_factory=dict)  # package or machine -> version (Backend.versions)
    # The generation config the seed was drawn with, as the fuzzfuse that drew it wrote it
    # (strategies.config_to_json), for people: nothing reads it back, and decoding it would fill the
    # fields GenConfig gained since with today's defaults, so it is kept verbatim.
    config: dict | None = None
    options: Options = Options()
    # Whether output strides were compared, recorded beside the backend's options in the file's
    # "options" (None: not recorded, as in the seed corpus; compared off).
    check_strides: bool | None = None
    found: float = field(default_factory=time.time)
    # Minimized repros only: how the reduction went, how often the signature was hit, and the
    # fresh-process re-runs of repro.py.
    reduction: ReductionFigures | None = None
    hits: int = 1
    verification: Verification | None = None
    # A repro folded from several (one root cause found as several signatures). --known counts
    # them as this repro's.
    also_seen_as: list[Variant] = field(default_factory=list)
    # Reduced cases only: the fillers and free dtypes of the graph (fuzzfuse.reduce.generalise),
    # which its root-cause key writes as wildcards. None: not generalised (keyed by its names).
    generalisation: Generalisation | None = None
    # Minimized repros only: the wrong element fuzzfuse's full oracle printed (regression.py), which
    # the short repro.py pins; None for other outcomes or where it was not recorded.
    symptom: Symptom | None = None
    # The upstream issues a person found this bug in (fuzzfuse.upstream); empty: none found yet.
    upstream: list[UpstreamIssue] = field(default_factory=list)

    @property
    def device(self) -> str:
        """The device its fused code ran on: as its generation config recorded it, else as the
        versions it recorded say (a GPU's name: cuda; a CPU capability: cpu), else "" (a wrong
        value's identity names it: fuzzfuse.identity)."""
        features = (self.config or {}).get("features")
        device = features.get("device") if isinstance(features, dict) else None
        if isinstance(device, str) and device:
            return device
        if "gpu" in self.versions or "cuda" in self.versions:
            return "cuda"
        return "cpu" if "cpu_capability" in self.versions else ""

    def to_json(self) -> dict:
        strides = {"check_strides": self.check_strides} if self.check_strides is not None else {}
        return {"schema": CASE_SCHEMA, "kind": "fuzzfuse-case", "graph": self.graph.to_json(),
                "backend": self.backend, "seed": self.seed, "outcome": self.outcome.value if self.outcome else SEED,
                "signature": self.signature.to_json() if self.signature else None, "detail": self.detail,
                "versions": self.versions, "config": self.config, "options": {**strides, **self.options.to_json()},
                "found": self.found, "reduction": self.reduction.to_json() if self.reduction else None,
                "hits": self.hits, "verification": self.verification.to_json() if self.verification else None,
                **({"also_seen_as": [v.to_json() for v in self.also_seen_as]} if self.also_seen_as else {}),
                **({"generalisation": self.generalisation.to_json()} if self.generalisation else {}),
                **({"symptom": self.symptom.to_json()} if self.symptom else {}),
                **({"upstream": [u.to_json() for u in self.upstream]} if self.upstream else {})}

    @staticmethod
    def from_json(d: dict) -> "Case":
        """Validated: a case file is untrusted input. An absent field takes its default (files
        written before it existed)."""
        if not isinstance(d, dict) or d.get("kind") != "fuzzfuse-case":
            raise GraphError("not a fuzzfuse case (missing kind: fuzzfuse-case)")
        if d.get("schema") != CASE_SCHEMA:
            raise GraphError(f"unsupported case schema {d.get('schema')!r}")
        d = record(d, "case", _CASE_FIELDS)
        options = dict(take(d, "options", dict, "case", {}))
        check_strides = take(options, "check_strides", bool, "options", None)
        options.pop("check_strides", None)
        outcome, sig = take(d, "outcome", str, "case", SEED), take(d, "signature", (dict, type(None)), "case", None)
        reduction = take(d, "reduction", (dict, type(None)), "case", None)
        verification = take(d, "verification", (dict, type(None)), "case", None)
        general = take(d, "generalisation", (dict, type(None)), "case", None)
        symptom = take(d, "symptom", (dict, type(None)), "case", None)
        return Case(Graph.from_json(take(d, "graph", dict, "case")), take(d, "backend", str, "case", ""),
                    take(d, "seed", (int, type(None)), "case", None), Outcome(outcome) if outcome != SEED else None,
                    Signature.from_json(sig) if sig is not None else None, take(d, "detail", str, "case", ""),
                    text_map(d, "versions", "case", {}), take(d, "config", (dict, type(None)), "case", None),
                    Options.from_json(options), check_strides, take(d, "found", float, "case", 0.0),
                    ReductionFigures.from_json(reduction) if reduction is not None else None,
                    take(d, "hits", int, "case", 1),
                    Verification.from_json(verification) if verification is not None else None,
                    [Variant.from_json(v) for v in take(d, "also_seen_as", list, "case", [])],
                    Generalisation.from_json(general) if general else None,
                    Symptom.from_json(symptom) if symptom else None,
                    [UpstreamIssue.from_json(u) for u in take(d, "upstream", list, "case", [])])


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
    Hidden files and folders are skipped: a repro still being written is staged in one. In a
    minimized repro's directory only case.json is a case (its versions.json is a table)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob("*.json")
                            if not any(part.startswith(".") for part in f.relative_to(p).parts)
                            and (f.name == "case.json" or not (f.parent / "case.json").is_file()))
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


def known_graphs(directories: list[str], routes: set[str],
                 backward: bool) -> list[tuple[Graph, Generalisation | None]]:
    """The reduced graphs (with their generalisations) of the reproducing repros under `directories`
    (and of the variants a folded repro lists) that a campaign on `routes` (its backend and the
    reference routes beneath it, which its cases also run through) would hit: a mismatch found on another route may be that
    route's own, an anchored crash is its fuser's on every route, and a gradient's bug never fails
    a forward-only campaign's cases."""
    found, components = [], {component(r) for r in routes}
    for _, case in iter_cases(directories):
        if isinstance(case, CorpusError) or not case.signature:
            continue
        # An anchored crash is one bug on every route of its fuser (its key folds the route).
        anywhere = anchored(case.signature)
        for backend, status, stage, graph, generalisation in _forms(case):
            if (backend in routes or anywhere and component(backend) in components) and \
                    status == Reproduction.REPRODUCES and (backward or not stage.startswith("backward")):
                found.append((graph, generalisation))
    return found


def _forms(case) -> Iterator[tuple[str, object, str, Graph, Generalisation | None]]:
    """(backend, verification status, stage, reduced graph, its generalisation) of a repro and of
    each variant folded into it that kept its graph."""
    yield (case.backend, case.verification.status if case.verification else None, case.signature.stage, case.graph,
           case.generalisation)
    for variant in case.also_seen_as:
        if variant.graph is not None:
            yield variant.backend, variant.verification, variant.signature.stage, variant.graph, variant.generalisation
