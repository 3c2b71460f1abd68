"""Fold a directory of minimized repros into one directory per root cause.

A repro directory is named by the signature that found it, and one bug is found under many
signatures (one per op name in the message, per dtype pair, per route). `fold` groups the repros by
root-cause key (fuzzfuse.rootcause, with each recorded signature re-keyed as today's oracle keys it,
and each graph's fillers written as wildcards where its case records a generalisation),
keeps the smallest repro of each group that reproduced, and lists the others in its case.json
(`also_seen_as`: their signature, root-cause key, ops, former directory and reduced graph), which
`--known` counts as the kept repro's own (and a campaign steers away from: fuzzfuse.steering). The folded directories are removed; their history is in version control.

Groups a maintainer merges by reading (one gap of nvFuser's expression evaluator seen at three
asserts, say) are given as `merges`: lists of directory names folded into one, whatever their keys.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from .corpus import Case, CorpusError, Variant, load_case, write_json
from .minimize import with_variants
from .rekey import variant_entry
from .reduce import cost
from .verdict import Reproduction


def _rank(case: Case) -> tuple:
    """Which repro of a group stays: one that reproduced, then the smallest."""
    return (case.verification is None or case.verification.status != Reproduction.REPRODUCES, cost(case.graph))


def plan(root: Path, merges: list[list[str]] | None = None) -> list[list[tuple[Path, Case, Variant]]]:
    """The groups of repros under `root` that share a root cause (or a maintainer's merge), each
    with its kept repro first."""
    repros: dict[str, tuple[Path, Case, Variant]] = {}
    for directory in sorted(p for p in Path(root).iterdir() if (p / "case.json").is_file()):
        case = load_case(directory / "case.json")
        if case.signature:
            repros[directory.name] = (directory, case, variant_entry(directory.name, case))
    group_of: dict[str, str] = {name: entry.root_cause for name, (_, _, entry) in repros.items()}
    for merge in merges or []:
        missing = [name for name in merge if name not in repros]
        if missing:
            raise CorpusError(f"fold: no repro {missing[0]} under {root}")
        for name in merge:
            old = group_of[name]
            for other, group in list(group_of.items()):
                if group == old:
                    group_of[other] = "merge:" + merge[0]
    groups: dict[str, list[tuple[Path, Case, Variant]]] = {}
    for name, member in repros.items():
        groups.setdefault(group_of[name], []).append(member)
    return [sorted(members, key=lambda m: _rank(m[1])) for members in groups.values()]


def fold(root: Path, merges: list[list[str]] | None = None, dry_run: bool = False) -> list[tuple[str, list[str]]]:
    """Fold every group of more than one repro into its kept one; (kept, folded names) per group."""
    done = []
    for keep, *others in plan(root, merges):
        if not others:
            continue
        directory, case, _ = keep
        done.append((directory.name, [d.name for d, _, _ in others]))
        if dry_run:
            continue
        seen = list(case.also_seen_as)
        for _, other, entry in others:
            seen += [entry] + list(other.also_seen_as)
        hits = case.hits + sum(other.hits for _, other, _ in others)
        kept = replace(case, also_seen_as=seen, hits=hits)
        write_json(directory / "case.json", kept.to_json())
        if (directory / "README.md").is_file():
            (directory / "README.md").write_text(with_variants((directory / "README.md").read_text(), kept))
        for other_dir, _, _ in others:
            shutil.rmtree(other_dir)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzzfuse.fold", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="a directory of minimized repros (each <name>/case.json)")
    parser.add_argument("--merge", action="append", nargs="+", metavar="NAME", default=[],
                        help="repro directories that are one bug whatever their keys (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="print the groups, change nothing")
    args = parser.parse_args(argv)
    if not Path(args.directory).is_dir():
        print(f"fuzzfuse: error: no such directory: {args.directory}", file=sys.stderr)
        return 2
    try:
        done = fold(Path(args.directory), args.merge, args.dry_run)
    except CorpusError as e:
        print(f"fuzzfuse: error: {e}", file=sys.stderr)
        return 2
    for kept, folded in done:
        print(f"{kept} <- {len(folded)}: {' '.join(folded)}")
    print(f"{sum(len(f) for _, f in done)} repro(s) folded into {len(done)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
