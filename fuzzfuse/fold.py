"""Fold a directory of minimized repros into one directory per bug, and split what was folded wrongly.

A repro directory holds one bug: its own case and the forms of it found since (`also_seen_as`:
each form's signature, ops, former directory and reduced graph). Which failures are one bug is
`fuzzfuse.identity.same_bug`'s answer alone, so folding needs no hand:

- every member of every directory (its case, each listed form) is identified anew by today's rules;
- the members of one bug gather in one directory: the one whose own repro reproduced and is
  smallest stays, the others become its listed forms (their directories go; version control keeps
  them);
- a listed form of another bug leaves: it joins the directory of its bug, or, where no directory
  holds that bug, gets one of its own, written and verified from its graph (`write_minimized`: the
  backend must run here; elsewhere it is reported and stays where it is);
- a listed form recorded as not reproducing, a duplicate entry, and an entry naming its own
  directory are dropped; so is a form that kept no reduced graph where its identity cannot be told
  or is a bug no directory holds, and so is a form for which no repro can be written where its
  backend runs (an aot:nvfuser form keeps no fusion script): it could be neither verified nor given
  a directory.

A form folded before forms kept their graphs takes its graph back from version control: the last
commit that still held its former directory's case.json, where that case is the form (the same
signature).

`fuzzfuse corpus fold DIR` runs it (`--dry-run`: only say what would change).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from .backends import Unavailable
from .corpus import Case, Variant, load_case, write_json
from .identity import BugIdentity, case_identity, root_cause_key, same_bug, variant_identity
from .known import variant_entry
from .bugreport import case_device, with_variants
from .minimize import reduce_case
from .repro_dir import repro_slug, slug_words, write_minimized
from .ir import Graph
from .oracle import Signature
from .reduce import NotInteresting, cost
from .reduce.generalise import Generalisation
from .rekey import Pools, rereduce, stale
from .rootcause import signature_today
from .verdict import Reproduction


@dataclass
class Repro:
    """A directory of the corpus: its case and identity, and its listed forms with theirs."""

    directory: Path
    case: Case
    identity: BugIdentity | None
    forms: list[tuple[Variant, BugIdentity | None]]

    def reproduces(self) -> bool:
        return self.case.verification is not None and self.case.verification.status is Reproduction.REPRODUCES


@dataclass
class Bug:
    """The members of one bug found over the corpus: the directories whose own case it is (kept one
    first) and the forms listed anywhere."""

    identity: BugIdentity
    repros: list[Repro] = field(default_factory=list)
    forms: list[Variant] = field(default_factory=list)


@dataclass
class FoldReport:
    """What `fold` did (or, dry, would do), in a maintainer's words, line by line."""

    folded: list[tuple[str, list[str]]] = field(default_factory=list)  # kept directory, directories folded in
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # form, from directory, to directory
    split: list[tuple[str, str]] = field(default_factory=list)  # new directory, from directory
    not_split: list[tuple[str, str, str]] = field(default_factory=list)  # form, directory, why
    dropped: list[tuple[str, str, str]] = field(default_factory=list)  # form, directory, why
    reduced_again: list[tuple[str, str]] = field(default_factory=list)  # directory, what became of it
    # A directory split out, by the directory its form was found in: folded back into a bug's
    # directory by the next round, it is listed under the name a campaign gave it, never under a
    # directory that lived for one fold.
    found_in: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"reduced again {directory}: {what}" for directory, what in self.reduced_again]
        out += [f"{kept} <- {len(names)}: {' '.join(names)}" for kept, names in self.folded]
        out += [f"moved {form}: {src} -> {dst}" for form, src, dst in self.moved]
        out += [f"split {src} -> {new}" for new, src in self.split]
        out += [f"not split {form} out of {src}: {why}" for form, src, why in self.not_split]
        out += [f"dropped {form} from {src}: {why}" for form, src, why in self.dropped]
        out.append(f"{sum(len(f) for _, f in self.folded)} repro(s) folded into {len(self.folded)}, "
                   f"{len(self.moved)} form(s) moved, {len(self.split)} split out, {len(self.dropped)} dropped")
        return out


NO_GRAPH = ("no reduced graph, here or in version control, to write its repro with (found again, it is reduced "
            "anew)")


def read_corpus(root: Path) -> list[Repro]:
    repros = []
    for directory in sorted(p for p in Path(root).iterdir() if (p / "case.json").is_file()):
        case = load_case(directory / "case.json")
        if case.signature:
            forms = [with_graph_from_history(root, v) for v in case.also_seen_as]
            repros.append(Repro(directory, case, case_identity(case), [(v, variant_identity(v, case.device))
                                                                       for v in forms]))
    return repros


def with_graph_from_history(root: Path, form: Variant) -> Variant:
    """`form`, with its reduced graph and generalisation taken from the last commit that held its
    former directory's case.json, where it kept none and that case is the form (its signature, read
    by today's rules, is the form's key but for the backend, which attribution may have named
    since); else `form` as it is. Outside a git work tree, as it is."""
    if form.graph is not None:
        return form
    path = Path(root) / form.directory / "case.json"
    git = ["git", "-C", str(Path(root).resolve())]
    try:
        gone = subprocess.run(git + ["rev-list", "-n", "1", "HEAD", "--", str(path.resolve())],
                              capture_output=True, text=True, check=True).stdout.strip()
        if not gone:
            return form
        old = json.loads(subprocess.run(git + ["show", f"{gone}~1:./{form.directory}/case.json"],
                                        capture_output=True, text=True, check=True).stdout)
        # Only what names the form is read: the rest of an old record may predate today's schema.
        signature, detail = Signature.from_json(old["signature"]), old.get("detail", "")
        graph = Graph.from_json(old["graph"])
        general = Generalisation.from_json(old["generalisation"]) if old.get("generalisation") else None
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError, TypeError):
        return form

    def surface(key: str) -> tuple[str, ...]:  # the key less its backend, which attribution may have moved
        outcome, _, rest = key.split("|", 2)
        return outcome, rest
    if surface(form.key) not in {surface(signature.key()), surface(signature_today(signature, detail).key())}:
        return form
    return replace(form, graph=graph, generalisation=general)


def plan(repros: list[Repro], report: FoldReport) -> tuple[dict[str, Bug], dict[str, list[Variant]]]:
    """The bugs over the corpus by identity key, and the forms that stay where they are (their
    identity cannot be told) by directory name. Forms recorded as not reproducing, duplicates and
    self-entries are dropped into `report`."""
    bugs: dict[str, Bug] = {}
    staying: dict[str, list[Variant]] = {}

    def bug_of(identity: BugIdentity) -> Bug:
        """The bug `identity` is, by same_bug: one of another key too (a culprit that is a kind and
        an op of that kind), else a new one."""
        key = identity.key()
        if key not in bugs:
            same = next((k for k, b in bugs.items() if same_bug(identity, b.identity)), None)
            bugs[key] = bugs[same] if same is not None else Bug(identity)
        return bugs[key]

    for repro in repros:
        if repro.identity is None:
            continue
        bug_of(repro.identity).repros.append(repro)
    for repro in repros:
        seen = set()
        name = repro.directory.name
        for form, identity in repro.forms:
            if form.directory == name or (form.key, form.directory) in seen:
                report.dropped.append((form.directory, name, "listed twice" if form.directory != name
                                       else "its own directory"))
                continue
            seen.add((form.key, form.directory))
            if form.verification is not None and form.verification is not Reproduction.REPRODUCES:
                report.dropped.append((form.directory, name, f"recorded as {form.verification.value}"))
                continue
            if identity is None and form.graph is None:
                report.dropped.append((form.directory, name, NO_GRAPH))
                continue
            if identity is None:
                staying.setdefault(name, []).append(form)
                continue
            bug_of(identity).forms.append(form)
    # One Bug under each of its keys: each is kept under the first.
    unique = {}
    for key, bug in bugs.items():
        unique.setdefault(id(bug), (key, bug))
    bugs = dict(unique.values())
    for bug in bugs.values():
        # A forward repro stays before a backward one, however small: a bug both phases show (a
        # guard named fallback) is read most directly where no autograd runs. Of two repros alike,
        # the one whose directory is named by its own failure stays: a crash's directory
        # re-reduced into a wrong dtype keeps its name, which no longer says what it holds.
        bug.repros.sort(key=lambda r: (not r.reproduces(), r.case.signature.stage.startswith("backward"),
                                       cost(r.case.graph), not _named_by_its_failure(r)))
    return bugs, staying


def _named_by_its_failure(repro: Repro) -> bool:
    """Whether a directory's name begins as its case's signature names it (the slug's words)."""
    return repro.directory.name.startswith(slug_words(repro.case.signature))


def fold(root: Path, dry_run: bool = False, verify_runs: int = 3, timeout: float = 60.0, split_on: str = "",
         jobs: int = 1, found_in: dict[str, str] | None = None) -> FoldReport:
    """Fold `root` into one directory per bug (the module's docstring says how). split_on: only
    forms found on this device ("cpu", "cuda") are split out here, the others stay where they are
    (a GPU's forms are split on a GPU machine); jobs: how many are written and verified at once.
    A form split out is run anew, and what its run says may make it a form of a bug a directory
    holds (a form recorded before its compile error was named): the corpus is folded again then,
    until nothing is split (`found_in`: the round before's `FoldReport.found_in`)."""
    report = FoldReport(found_in=dict(found_in or {}))
    devices = {split_on} if split_on else _devices_here()
    repros = read_corpus(root)
    if _reduce_stale(repros, devices, dry_run, timeout, report):
        repros = read_corpus(root)
    home = {r.directory.name: r for r in repros}
    bugs, staying = plan(repros, report)
    writes: dict[Path, Case] = {}
    # First the bugs only listed forms hold: each gets a directory, or its forms stay where they are.
    source = {id(v): r for r in repros for v, _ in r.forms}
    homeless = []
    for key, bug in sorted(bugs.items()):
        if bug.repros:
            continue
        # A form no directory's bug is and that kept no graph can be neither split nor kept: it
        # would stay listed as a bug its directory does not hold.
        report.dropped += [(f.directory, source[id(f)].directory.name, f"another bug than its directory's; {NO_GRAPH}")
                           for f in _unique(bug.forms) if f.graph is None]
        if forms := [f for f in _unique(bug.forms) if f.graph is not None]:
            homeless.append((key, forms))
    here = [(key, forms) for key, forms in homeless if (source[id(forms[0])].case.device or "cpu") in devices]
    for key, forms in homeless:
        device = source[id(forms[0])].case.device or "cpu"
        if device not in devices:
            report.not_split += [(f.directory, source[id(f)].directory.name,
                                  f"found on {device}: fold with `fuzzfuse corpus fold --split-on {device}` "
                                  f"where {device} runs")
                                 for f in forms]
    gone: set[int] = set()
    if dry_run:
        report.split += [(f"(new) {key[:100]}", forms[0].directory) for key, forms in here]
        made = [None] * len(here)
    else:
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            made = list(pool.map(lambda kf: _split_out(root, kf[1], source, verify_runs, timeout, report, gone), here))
    done = {key: m for (key, _), m in zip(here, made)}
    for key, forms in homeless:
        if done.get(key) is None:
            for form in forms:
                if id(form) not in gone:
                    staying.setdefault(source[id(form)].directory.name, []).append(form)
            continue
        directory, case, rest = done[key]
        writes[directory] = replace(case, also_seen_as=rest)
    for key, bug in sorted(bugs.items()):
        if not bug.repros:
            continue
        forms = _unique(bug.forms)
        keep, *others = bug.repros
        names = [report.found_in.get(r.directory.name, r.directory.name) for r in others]
        folded_in = [variant_entry(name, r.case) for name, r in zip(names, others)]
        if others:
            report.folded.append((keep.directory.name, names))
        own = {(v.key, v.directory) for v, i in keep.forms if same_bug(i, bug.identity)}
        for form in forms:
            if (form.key, form.directory) not in own:
                lister = source[id(form)].directory.name
                if lister != keep.directory.name:
                    report.moved.append((form.directory, lister, keep.directory.name))
        kept_where = [staying.get(r.directory.name, []) for r in bug.repros]
        listed = _unique(folded_in + forms + [v for stay in kept_where for v in stay])
        listed = [v for v in listed if v.directory != keep.directory.name]
        hits = keep.case.hits + sum(r.case.hits for r in others)
        # What a person found upstream about any of them is this bug's (the kept one need not be
        # the one they searched for).
        upstream = []
        for r in bug.repros:
            upstream += [u for u in r.case.upstream if u.url not in {v.url for v in upstream}]
        writes[keep.directory] = replace(keep.case, also_seen_as=listed, hits=hits, upstream=upstream)
        for r in others:
            writes.setdefault(r.directory, None)  # removed below, unless it keeps another bug
    for repro in repros:  # a directory whose case is pending keeps what it had, less what left
        if repro.identity is None:
            writes[repro.directory] = replace(repro.case, also_seen_as=staying.get(repro.directory.name, []))
    if dry_run:
        return report
    for directory, case in writes.items():
        if case is None:
            shutil.rmtree(directory)
            continue
        before = home.get(directory.name)
        if before is None or (case.also_seen_as, case.hits, case.upstream) != \
                (before.case.also_seen_as, before.case.hits, before.case.upstream):
            write_json(directory / "case.json", case.to_json())
            if (directory / "README.md").is_file():
                (directory / "README.md").write_text(with_variants((directory / "README.md").read_text(), case))
    if report.split:
        again = fold(root, verify_runs=verify_runs, timeout=timeout, split_on=split_on, jobs=jobs,
                     found_in=report.found_in)
        for name in ("folded", "moved", "split", "not_split", "dropped"):
            getattr(report, name).extend(x for x in getattr(again, name) if x not in getattr(report, name))
    return report


def _reduce_stale(repros: list[Repro], devices: set[str], dry_run: bool, timeout: float,
                  report: FoldReport) -> bool:
    """Reduce again, first, each directory an earlier reducer reduced and today's may name otherwise
    (`rekey.stale`: a crash where an op refused its operand's dtype is now the op that gave the wrong
    dtype), on a device here: what it becomes is folded with the rest, so that no one has to pick
    the directories to `corpus refresh --rereduce` by hand. Whether any directory was written."""
    todo = [(r.directory, why) for r in repros if (why := stale(r.case)) and case_device(r.case) in devices]
    if dry_run:
        report.reduced_again += [(d.name, f"would be: {why}") for d, why in todo]
        return False
    with Pools(2, timeout) as pools:
        for directory, _ in todo:
            try:
                before, after, now = rereduce(directory, pools, timeout=timeout)
            except (NotInteresting, Unavailable) as e:
                report.reduced_again.append((directory.name, f"left as it was: {str(e).splitlines()[0]}"))
                continue
            moved = f", now {now.name}" if now != directory else ""
            if now != directory:
                report.found_in[now.name] = directory.name
            report.reduced_again.append((directory.name, "unchanged" if before == after else f"{after}{moved}"))
    return bool(todo)


def _devices_here() -> set[str]:
    """The devices whose forms can be verified here: a CUDA form written as a repro on a CPU
    machine would run on the CPU."""
    import torch

    return {"cpu", "cuda"} if torch.cuda.is_available() else {"cpu"}


def _unique(forms: list[Variant]) -> list[Variant]:
    seen, out = set(), []
    for v in forms:
        if (v.key, v.directory) not in seen:
            seen.add((v.key, v.directory))
            out.append(v)
    return out


def _split_out(root: Path, forms: list[Variant], source: dict[int, Repro], verify_runs: int, timeout: float,
               report: FoldReport, gone: set[int]) -> tuple[Path, Case, list[Variant]] | None:
    """A directory of its own for a bug only listed forms hold: the smallest form with a graph is
    written and verified as a repro (with the options and config of the directory it was listed
    in); None where none can be (no graph kept, the backend does not run here, or none reproduces).
    A form whose repro does not fail as recorded, or for which none can be written where its backend
    runs, is dropped (its id added to `gone`)."""
    for form in sorted((f for f in forms if f.graph is not None), key=lambda f: cost(f.graph)):
        lister = source[id(form)]
        # A form keeps no raw error text: its normalized message (a fixed point of the
        # normalizer) stands for it, so that the signature today's oracle reads back is its own.
        case = replace(lister.case, graph=form.graph, backend=form.backend, signature=form.signature,
                       detail=form.signature.message,
                       generalisation=form.generalisation, also_seen_as=[], hits=1, verification=None)
        directory = None  # known once the form is reduced as today's reducer would
        try:
            case = _reduced_as_today(case, timeout)
            directory = _free(root, _slug(case), case)
            written = write_minimized(directory, case, verify_runs, timeout)
        except Unavailable as e:  # its backend does not run here: it stays, for a machine where it does
            report.not_split.append((form.directory, lister.directory.name, str(e).split("\n")[0]))
            return None
        except ValueError as e:
            # No repro can be written for it (an aot:nvfuser form keeps no fusion script) where its
            # backend runs: it can be neither verified nor split, so it leaves, as a form that kept
            # no graph does. A campaign that finds its bug again reduces it anew.
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
            report.dropped.append((form.directory, lister.directory.name,
                                   f"no repro can be written for it: {str(e).split(chr(10))[0]}"))
            gone.add(id(form))
            continue
        if written.verification is None or written.verification.status is not Reproduction.REPRODUCES:
            # Run where it was found, it fails otherwise or not at all: no longer a member.
            shutil.rmtree(directory, ignore_errors=True)
            status = written.verification.status.value if written.verification else "not verified"
            report.dropped.append((form.directory, lister.directory.name,
                                   f"its repro, written and run here, {status.replace('-', ' ')}"))
            gone.add(id(form))
            continue
        report.split.append((directory.name, lister.directory.name))
        report.found_in[directory.name] = report.found_in.get(form.directory, form.directory)
        return directory, written, [f for f in forms if f is not form]
    return None


def _free(root: Path, slug: str, case: Case) -> Path:
    """Where a split-out form's repro goes: its slug, unless a directory holds that name already,
    named by an identity its own bug has lost since (oneDNN's "Schema not found for node", keyed by
    its ops until its message was read, had the name its expand form's ops now give): then the slug
    with its graph's digest, never over another bug's repro."""
    directory = root / slug
    return directory if not directory.exists() else root / f"{slug}-{case.graph.renamed().digest()[:8]}"


def _slug(case: Case) -> str:
    return repro_slug(case.signature, root_cause_key(case.signature, case.graph, case.generalisation, case.device))


def _reduced_as_today(case: Case, timeout: float) -> Case:
    """A form that a change of the reducer concerns (`rekey.CHANGES`: a crash where an op refused
    its operand's dtype or sizes, a fallback recorded before its guard was named), reduced again: a
    form records no reducer revision of its own, so every change that concerns it applies. Today's
    reduction names the op that gave the operand a wrong dtype or shape, or the guard that sent a
    fallback there, and the next round folds it into that bug's directory. Any other form as it
    was recorded."""
    if not stale(replace(case, reduction=None)):
        return case
    try:
        reduced = reduce_case(case, case.backend, timeout=timeout)
    except NotInteresting:
        return case
    return replace(case, graph=reduced.graph.renamed(), signature=reduced.signature, options=reduced.options,
                   detail=reduced.signature.message, generalisation=reduced.generalisation)

