"""The committed corpus's bugs, by identity: whether a failure is one of them (known matching, the
campaign's `--known`), the nearest one to a new bug and what differs (a campaign note's "why new"),
and the corpus listed one bug a line (`fuzzfuse corpus bugs`). Every comparison is
`identity.same_bug`; this module only indexes and reports."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

from .backends.registry import component
from .corpus import Case, CorpusError, Variant, iter_cases
from .identity import (Anchor, BugIdentity, Symptom, case_identity, identify, root_cause_key, same_bug,
                       variant_identity)
from .ir import Graph
from .rootcause import signature_today
from .verdict import Reproduction


class KnownBugs:
    """Repro directories by the identity of the bug each holds (and by the coarse keys their
    signatures had), looked up by `same_bug`'s rule: an identity names a device or none, and a bug
    recorded without one (a repro saved before devices were) is every device's, unless it was
    probed to fail on its own device alone (`BugIdentity.own_device_only`): a failure keyed with no device
    (one that fails alike on every device) is never such a bug."""

    def __init__(self, entries: dict[str, str] | None = None):
        self._keys: dict[str, str] = {}
        self._any_device: dict[str, str] = {}
        # Identities `same_bug` matches beyond equal keys: a culprit that is a kind or of one, and a
        # crash named by the ops that reach it.
        self._loose: list[tuple[BugIdentity, str]] = []
        for key, directory in (entries or {}).items():
            self.add(key, directory)

    def add(self, bug: str | BugIdentity, directory: str) -> None:
        """Record `bug` (an identity, or a key: an identity's or a coarse signature's) as held by
        `directory`; the first directory recorded for a key keeps it."""
        key = bug.key() if isinstance(bug, BugIdentity) else bug
        alone = isinstance(bug, BugIdentity) and bug.own_device_only
        if key not in self._keys and (loose := loose_identity_of_key(key)) is not None:
            self._loose.append((replace(loose, own_device_only=alone), directory))
        self._keys.setdefault(key, directory)
        if not alone:  # same_bug: a device-less failure may be this bug
            self._any_device.setdefault(_without_device(key), directory)

    def find(self, key: str | None) -> str | None:
        """The directory that holds the bug of `key`, or None."""
        if key is None:
            return None
        if key in self._keys:
            return self._keys[key]
        blank = _without_device(key)
        found = self._any_device.get(key) if blank == key else self._keys.get(blank)
        if found is None and (loose := loose_identity_of_key(key)) is not None:
            found = next((d for known, d in self._loose if same_bug(loose, known)), None)
        return found

    def items(self):
        return self._keys.items()

    def __len__(self) -> int:
        return len(self._keys)


def known_repros(directories: list[str]) -> KnownBugs:
    """The bugs of the minimized repros under `directories`, by identity and coarse key (a bad file
    there is bad input: CorpusError). A repro's graph is reduced, so its identity is known; the
    variants a folded repro lists count as its own."""
    keys = KnownBugs()
    for path, case in iter_cases(directories):
        if isinstance(case, CorpusError):
            raise case
        if not case.signature:
            continue
        recorded = case.signature
        sig = signature_today(recorded, case.detail)
        directory = str(path.parent)
        keys.add(recorded.key(), directory)
        keys.add(sig.key(), directory)
        # Its own graph's identity, generalised where the case records how, and without: a
        # campaign that reduced the bug without generalising it (--reduce-budget spent) still finds it.
        # The probe's finding (`BugIdentity.own_device_only`) is its graph's, however that graph is named.
        probed = identify(sig, case.graph, case.generalisation, case.device)
        for identity in (probed, identify(sig, case.graph, None, case.device)):
            if identity is not None:
                alone = probed is not None and probed.own_device_only and identity.device == probed.device
                keys.add(replace(identity, own_device_only=alone), directory)
        for variant in case.also_seen_as:
            keys.add(variant.key, directory)
            if (identity := variant_identity(variant, case.device)) is not None:
                keys.add(identity, directory)
    return keys


def loose_identity_of_key(key: str) -> BugIdentity | None:
    """The identity an index key names where `same_bug` matches it beyond an equal key (a culprit;
    a crash named by the ops that reach it), or None for any other key."""
    parts = key.split("|", 6)
    if len(parts) != 7 or parts[3] not in {s.value for s in Symptom}:
        return None
    if parts[0] == Anchor.CULPRIT.value and "|" not in parts[6]:
        return BugIdentity(parts[1], Anchor.CULPRIT, Symptom(parts[3]), parts[5], parts[6], parts[4], parts[2])
    if parts[0] == Anchor.GRAPH.value and parts[3] == Symptom.CRASH.value:
        return BugIdentity(parts[1], Anchor.GRAPH, Symptom.CRASH, parts[5], parts[6], parts[4], parts[2])
    return None


def _without_device(key: str) -> str:
    """An identity key with its device left blank (any other key as it is)."""
    parts = key.split("|", 3)
    if len(parts) == 4 and parts[0] in {a.value for a in Anchor}:
        return "|".join((parts[0], parts[1], "", parts[3]))
    return key


# What tells two identities of one component apart, most telling first, and the words a note uses.
_FIELDS = (("where", 8, "another op or location"), ("anchor", 4, "another kind of anchor"),
           ("symptom", 2, "another symptom"), ("detail", 2, "another dtype class or message"),
           ("phase", 1, "another phase"), ("device", 1, "another device"))


def nearest(identity: BugIdentity, known: list[tuple[BugIdentity, str, frozenset[str]]],
            ops: frozenset[str] = frozenset()) -> tuple[str, list[str]] | None:
    """The known bug (identity, its directory, its reduced graph's ops) of the same component
    nearest `identity`, and what differs, in words: how a campaign's note says why a "new" bug is
    new. Among equally near identities, the one whose graph shares most of `ops` (the new bug's
    graph's): Inductor CUDA's neg -> pad was named nearest an argmax bug, by directory name, beside
    the committed neg -> pad form. None where no known bug is of its component."""
    mine = [entry for entry in known if entry[0].component == identity.component]
    if not mine:
        return None

    def score(other: BugIdentity) -> int:
        return sum(weight for name, weight, _ in _FIELDS if getattr(other, name) == getattr(identity, name))

    def shared(theirs: frozenset[str]) -> float:
        return len(ops & theirs) / len(ops | theirs) if ops | theirs else 0.0

    other, directory, _ = max(mine, key=lambda entry: (score(entry[0]), shared(entry[2]), entry[1]))
    return directory, [words for name, _, words in _FIELDS if getattr(other, name) != getattr(identity, name)]


def _ops(graph: Graph | None) -> frozenset[str]:
    """The ops of a reduced graph (none where it is not kept)."""
    return frozenset(n.op for n in graph.nodes) if graph is not None else frozenset()


def compare_corpora(found: list[str], committed: list[str]) -> list[str]:
    """For each bug the repros under `found` hold: known (the committed directory holding it, by
    same_bug) or new, with the nearest committed bug and what differs."""
    known = KnownBugs()
    index: list[tuple[BugIdentity, str, frozenset[str]]] = []
    for path, case in iter_cases(committed):
        if isinstance(case, CorpusError) or path.name != "case.json":
            continue
        for identity, graph in [(case_identity(case), case.graph)] + \
                [(variant_identity(v, case.device), v.graph) for v in case.also_seen_as]:
            if identity is not None:
                known.add(identity.key(), path.parent.name)
                index.append((identity, path.parent.name, _ops(graph)))
    lines = []
    for path, case in iter_cases(found):
        if isinstance(case, CorpusError) or path.name != "case.json":
            continue
        identity = case_identity(case)
        if identity is None:
            lines.append(f"pending  {path.parent.name}")
            continue
        holder = known.find(identity.key())
        if holder:
            lines.append(f"known    {path.parent.name}: {holder}")
            continue
        near = nearest(identity, index, _ops(case.graph))
        why = f"; nearest {near[0]} ({', '.join(near[1])})" if near else "; no committed bug of its component"
        # A repro that failed in none of its fresh processes shows nothing a maintainer can run yet.
        unshown = case.verification is not None and case.verification.status is Reproduction.DOES_NOT_REPRODUCE
        lines.append(f"{'unconfirmed' if unshown else 'new     '} {path.parent.name}: {identity.describe()}{why}")
    return lines


def variant_entry(name: str, case: Case) -> Variant:
    """What a repro folded into another keeps of itself in the other's `also_seen_as`: its coarse
    and root-cause keys (today's), ops, former directory, verification, reduced graph and the
    graph's generalisation."""
    sig = signature_today(case.signature, case.detail)
    key = root_cause_key(sig, case.graph, case.generalisation, case.device) or sig.key()
    return Variant(sig.key(), key, case.backend, tuple(sorted({n.op for n in case.graph.nodes})), name,
                   case.verification.status if case.verification else None, case.graph, case.generalisation)


# ---- the corpus, grouped ------------------------------------------------------------------------

def groups(paths: list[str], variants: bool = False) -> tuple[dict[str, list[tuple[str, str, str]]], list[str]]:
    """identity key -> [(directory, backend, coarse key)], and the files that could not be read;
    identities that are one bug by same_bug share the first one's key.
    variants: each folded variant of a repro is a member too, named `directory<-former directory`:
    a directory whose members key apart holds more than one bug."""
    found: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    seen: list[BugIdentity] = []
    bad = []

    def key_of(identity: BugIdentity | None, coarse: str) -> str:
        """The key of the first bug recorded that `identity` is (same_bug: a blank device and a
        device, a kind and its op, are one), else its own."""
        if identity is None:
            return f"pending|{coarse}"
        same = next((other for other in seen if same_bug(identity, other)), None)
        if same is None:
            seen.append(identity)
        return (same or identity).key()

    for path, case in iter_cases(paths):
        if isinstance(case, CorpusError):
            bad.append(str(case))
            continue
        if path.name != "case.json" or not case.signature:
            continue
        found[key_of(case_identity(case), case.signature.key())].append(
            (path.parent.name, case.backend, case.signature.key()))
        for variant in case.also_seen_as if variants else ():
            found[key_of(variant_identity(variant, case.device), variant.key)].append(
                (f"{path.parent.name}<-{variant.directory}", variant.backend, variant.key))
    return found, bad


def report(paths: list[str], variants: bool = False) -> str:
    """`fuzzfuse corpus bugs DIR...`: the repros under `paths` grouped by bug, largest first."""
    found, bad = groups(paths, variants)
    members = [m for ms in found.values() for m in ms]
    lines = [f"{len(members)} {'repros and variants' if variants else 'repros'}: {len({m[2] for m in members})} "
             f"coarse keys -> {len(found)} bugs"]
    if variants:
        families = defaultdict(set)
        for key, ms in found.items():
            for m in ms:
                families[m[0].split("<-")[0]].add(key)
        split = sorted(f for f, keys in families.items() if len(keys) > 1)
        lines.append(f"  {len(families)} directories: {len(split)} of them hold more than one bug")
    for comp in sorted({component(m[1]) for m in members}):
        mine = [m for m in members if component(m[1]) == comp]
        bugs = sum(1 for ms in found.values() if component(ms[0][1]) == comp)
        per_backend = ", ".join(f"{b} {c}" for b, c in sorted(Counter(m[1] for m in mine).items()))
        lines.append(f"  {comp}: {len(mine)} repros ({per_backend}), {bugs} bugs")
    lines += ["", "bugs, largest first:"]
    for key, ms in sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"[{len(ms)}] {key}")
        lines += [f"    {m[0]}" for m in sorted(ms)]
    if bad:
        lines += ["", "unreadable:"] + [f"  {b}" for b in bad]
    return "\n".join(lines)

