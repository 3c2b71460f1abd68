"""`fuzzfuse corpus ...`: the commands that maintain a corpus of minimized repros (and the seed
corpus), under the one command surface: fold, bugs, refresh, seeds. Bad input gets one line and
exit code 2, as everywhere in the CLI (fuzzfuse.cli)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cli_args import AT_LEAST_ONE, CASE_TIMEOUT, EXIT_BAD_INPUT, BadInput


def cmd_fold(args: argparse.Namespace) -> int:
    from .corpus import CorpusError
    from .fold import fold

    if not Path(args.directory).is_dir():
        raise BadInput(f"no such directory: {args.directory}")
    try:
        report = fold(Path(args.directory), args.dry_run, split_on=args.split_on or "", jobs=args.jobs)
    except CorpusError as e:
        raise BadInput(str(e)) from e
    print("\n".join(report.lines()))
    return 0


def cmd_bugs(args: argparse.Namespace) -> int:
    from .known import compare_corpora, report

    missing = [p for p in args.paths + args.against if not Path(p).exists()]
    if missing:
        raise BadInput(f"no such path: {missing[0]}")
    print("\n".join(compare_corpora(args.paths, args.against)) if args.against else report(args.paths, args.variants))
    return 0


def cmd_refresh(args: argparse.Namespace) -> int:
    """One line a directory; exit 1 when a repro no longer reproduces, 2 when a directory has no
    readable case.json (the others are still done)."""
    from .corpus import CorpusError
    from .repro_dir import refresh
    from .verdict import Reproduction

    directories = [Path(d) for d in args.dirs]
    if args.forms:
        from .rekey import replay_all_forms

        return replay_all_forms(directories, args.timeout, args.workers)
    if args.rereduce or args.generalise:
        from .rekey import rekey_all

        return rekey_all(directories, args.timeout, reduce_again=args.rereduce)
    status = 0
    for directory in directories:
        try:
            case = refresh(directory, timeout=args.timeout)
        except (CorpusError, OSError, ValueError) as e:
            said = (str(e).splitlines() or [repr(e)])[0]  # one line, naming the directory once
            print(f"fuzzfuse: error: {said if str(directory) in said else f'{directory}: {said}'}", file=sys.stderr)
            status = EXIT_BAD_INPUT
            continue
        verified = case.verification.status if case.verification else None
        print(f"{directory}: {verified}", flush=True)
        if verified != Reproduction.REPRODUCES:
            status = max(status, 1)
    return status


def cmd_seeds(args: argparse.Namespace) -> int:
    from .seeds import write

    try:
        written = write(Path(args.directory))
    except OSError as e:
        raise BadInput(f"cannot write the seed corpus to {args.directory}: {e}") from e
    for path in written:
        print(path)
    return 0


def add_corpus_commands(sub: argparse._SubParsersAction) -> None:
    """`fuzzfuse corpus` and its subcommands, on the CLI's subparsers `sub`."""
    c = sub.add_parser("corpus", help="maintain a corpus of minimized repros: fold it by bug, list its bugs, "
                                      "refresh its repros; rewrite the seed corpus",
                       description="Maintain a corpus of minimized repros (minimized/) and the seed corpus (corpus/).")
    commands = c.add_subparsers(dest="corpus_command", required=True, metavar="COMMAND")

    f = commands.add_parser("fold", help="fold a directory of minimized repros into one directory per bug, and "
                                         "split out what was folded wrongly",
                            description="Fold a directory of minimized repros into one directory per bug, and split "
                                        "what was folded wrongly (fuzzfuse.fold says how).")
    f.add_argument("directory", metavar="DIR", help="a directory of minimized repros (each <name>/case.json)")
    f.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    f.add_argument("--split-on", choices=("cpu", "cuda"),
                   help="split out only forms found on this device; default: every device this machine has")
    f.add_argument("--jobs", type=AT_LEAST_ONE, default=1, help="forms written and verified at once")
    f.set_defaults(func=cmd_fold)

    b = commands.add_parser("bugs", help="the bugs of directories of minimized repros, one line each (or, "
                                         "--against, which are known)",
                            description="The bugs of directories of minimized repros, one line each.")
    b.add_argument("paths", nargs="+", metavar="DIR", help="directories of repros (each <slug>/case.json)")
    b.add_argument("--variants", action="store_true",
                   help="count each folded variant (also_seen_as) as a member of its own")
    b.add_argument("--against", metavar="DIR", action="append", default=[],
                   help="say of each bug whether a repro under DIR (the committed corpus) holds it, and for a new "
                        "one the nearest committed bug and what differs (repeatable)")
    b.set_defaults(func=cmd_bugs)

    r = commands.add_parser("refresh", help="rewrite each repro and report from its case.json and re-verify it "
                                            "(or reduce it again, or record its generalisation)",
                            description="Rewrite each directory's repro and report from its case.json in today's "
                                        "form and re-verify it: one line per directory, exit 1 when any no longer "
                                        "reproduces, 2 on a directory without a readable case.json. --rereduce "
                                        "reduces each graph again first; --generalise only records what each "
                                        "graph does not need, leaving the repro as it was verified. --forms "
                                        "replays each form a directory lists instead: one line a form, exit 1 "
                                        "when any no longer fails as its bug.")
    r.add_argument("dirs", nargs="+", metavar="DIR", help="minimized/<dir> directories")
    how = r.add_mutually_exclusive_group()
    how.add_argument("--rereduce", action="store_true",
                     help="reduce each repro's graph again with today's reducer, then refresh it")
    how.add_argument("--generalise", action="store_true",
                     help="record the generalisation of each repro's graph (and its variants') in its case.json")
    how.add_argument("--forms", action="store_true",
                     help="replay each form the directory lists (also_seen_as) on its own backend and say whether "
                          "it still fails as the directory's bug; one passing on each of three runs is recorded as "
                          "not reproducing")
    r.add_argument("--timeout", type=CASE_TIMEOUT, default=60.0, help="seconds a repro may run (plus start-up)")
    r.add_argument("--workers", type=AT_LEAST_ONE, default=2, help="worker processes for --forms (default: 2)")
    r.set_defaults(func=cmd_refresh)

    s = commands.add_parser("seeds", help="rewrite the seed corpus (corpus/) into DIR",
                            description="Write the seed corpus (the graphs this project grew from, forward and "
                                        "training) into DIR, one seed-<name>.json each.")
    s.add_argument("directory", metavar="DIR", help="where the seed cases go (the committed one: corpus/)")
    s.set_defaults(func=cmd_seeds)
