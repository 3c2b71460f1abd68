"""Command line front end. Bad input (unknown backend, corrupt case file, missing GPU) gets one
line on stderr and exit code 2; nothing else is lost."""
from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import sys
import time
from pathlib import Path

from .cli_args import AT_LEAST_ONE, CASE_TIMEOUT, EXIT_BAD_INPUT, FRACTION, POSITIVE_SECONDS, BadInput
from .backends import BACKENDS, Unavailable, availability, default_backend, get_backend
from .reductions import REDUCE_SHARE
from .strategies import SOURCES
from .dedup import RootCauseBook, tally
from .verdict import SignatureRecord

def cmd_backends(args: argparse.Namespace) -> int:
    for name, reason in availability().items():
        print(f"{name:22} {'available' if reason is None else 'unavailable: ' + reason}")
    return 0


def _backend_name(requested: str | None, backward: bool = False) -> str:
    name = requested or default_backend(backward)
    try:
        backend = get_backend(name)
    except Unavailable as e:
        raise BadInput(str(e)) from e
    if backward and not backend.supports_backward:
        route = f"aot:{name}" if f"aot:{name}" in BACKENDS else None
        raise BadInput(f"backend {name} has no backward" + (f": use --backend {route} for training cases"
                                                             if route else ""))
    return name


def _devices(spec: str | None, backend: str) -> list[str] | None:
    """`--devices 0,1`: GPU indices that exist here, for a backend that runs on a GPU."""
    if not spec:
        return None
    import torch

    devices = [d.strip() for d in spec.split(",") if d.strip()]
    if get_backend(backend).device != "cuda":
        raise BadInput(f"--devices: backend {backend} does not run on a GPU")
    count = torch.cuda.device_count()
    bad = [d for d in devices if not d.isdigit() or int(d) >= count]
    if bad or not devices:
        raise BadInput(f"--devices {spec}: no such GPU {', '.join(bad)} (this machine has {count})")
    return devices


def _refuse_finished_campaign(out: Path) -> None:
    """A new campaign never writes over another's summary.json and state.json: that one could no
    longer be resumed, and its counts would be lost. One still running there is named as such."""
    from .checkpoint import STATE_FILE, DirectoryClaim

    if any((out / name).exists() for name in (STATE_FILE, "summary.json")):
        with DirectoryClaim(out):  # DirectoryInUse when that campaign is alive
            pass
        raise BadInput(f"{out} already holds a campaign: continue it with --resume {out}, or choose another --out")


def cmd_fuzz(args: argparse.Namespace) -> int:
    from .campaign import Campaign
    from .checkpoint import DirectoryInUse, shard_dir
    from .corpus import CorpusError
    from .progress import campaign_display

    try:
        if args.resume:
            campaign = Campaign.resume(Path(args.resume), more_seconds=args.time, more_cases=args.max_cases,
                                       backend=args.backend, workers=args.workers)
            backend = _backend_name(campaign.backend_name, campaign.backward)
            if args.devices:  # checked like a new campaign's, once the backend is known
                campaign.devices = _devices(args.devices, backend)
        else:
            _refuse_finished_campaign(shard_dir(Path(args.out), args.shard))
            backend = _backend_name(args.backend, args.backward)
            limit = args.time if args.time is not None or args.max_cases is not None else 60.0
            # A fresh seed by default, so that runs explore new graphs; printed so one can be repeated.
            seed = secrets.randbits(32) if args.seed is None else args.seed
            print(f"seed {seed} (rerun with --seed {seed})", file=sys.stderr, flush=True)
            campaign = Campaign(backend, Path(args.out), seed=seed, workers=args.workers or os.cpu_count() or 1,
                                time_limit=limit, max_cases=args.max_cases, timeout=args.timeout,
                                check_strides=args.check_strides, extra_runs=args.extra_runs, max_ops=args.max_ops,
                                reduce=not args.no_reduce,
                                backward=args.backward, devices=_devices(args.devices, backend), shard=args.shard,
                                reduce_budget=args.reduce_budget, known=args.known, focus_share=args.focus_share,
                                reduce_share=args.reduce_share,
                                features=dataclasses.replace(get_backend(backend).features, source=args.source))
        with campaign_display() as display:
            campaign.display = display
            summary = campaign.run()
    except (CorpusError, DirectoryInUse, Unavailable, ValueError) as e:
        raise BadInput(str(e)) from e
    if campaign.interrupted:
        print(f"interrupted: resume with fuzzfuse fuzz --resume {campaign.out}", file=sys.stderr)
        return 130
    print(f"{summary['cases']} cases in {summary['seconds']:.0f}s ({summary['cases_per_second']:.1f}/s) on "
          f"{backend}: {summary['outcomes']}")
    book = campaign.reductions.book
    for s in campaign.stats.signatures.values():
        print(f"  {s.count:5}x {s.outcome:10} {s.key}\n{'':19}{_news(s, campaign.out, book)}")
    print(f"summary: {campaign.out / 'summary.json'}")
    causes = campaign.reductions.causes()
    if causes or book.pending:
        print(f"root causes: {tally(causes)}; {len(book.pending)} hit(s) pending a reduction")
        for c in causes:
            print(f"  {c.hits:5}x {c.whereabouts(campaign.out)}  [{c.key[:110]}]")
    left = campaign.reducer_queue()
    if left:
        print(f"{len(left)} reduction(s) left when --time ran out: finish them with fuzzfuse fuzz --resume "
              f"{campaign.out}")
    return 0


def _news(entry: SignatureRecord, out: Path, book: RootCauseBook) -> str:
    """Whether a signature is new, and where its repro is (or why it has none): a bucket whose
    hits were reduced is what its root causes are."""
    if entry.known is not None:
        return f"known: {entry.known}"
    if entry.minimized is not None:
        return f"new: {out / entry.minimized.path}"
    if entry.signature.kind == "no-fusion":
        return "coverage, not a bug: the fuser declined the graph (not reduced)"
    by_root_cause = book.bucket_news(entry.key)
    if by_root_cause is not None:
        return by_root_cause
    if entry.confirmed is False or entry.unreduced is not None:
        return f"new, flaky: {out / entry.case}" if entry.case else "new, flaky"
    return f"new, not reduced: {out / entry.case}" if entry.case else "new"


def cmd_replay(args: argparse.Namespace) -> int:
    from .replay import ReplayError, replay

    try:
        return replay(args.paths, backend=args.backend, workers=args.workers, timeout=args.timeout)
    except ReplayError as e:
        raise BadInput(str(e)) from e


def cmd_triage(args: argparse.Namespace) -> int:
    from .report import write_report
    from .triage import TriageError, load, print_table

    try:
        triage = load(Path(args.dir))
    except TriageError as e:
        raise BadInput(str(e)) from e
    print_table(triage)
    try:
        print(f"report: {write_report(triage, Path(args.report) if args.report else None)}")
    except OSError as e:
        raise BadInput(f"cannot write the report: {e}") from e
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .bugreport import report_command
    from .corpus import CorpusError

    try:
        return report_command([Path(d) for d in args.dirs], args.regenerate, [Path(f) for f in args.outputs],
                              args.timeout)
    except (CorpusError, ValueError) as e:
        raise BadInput(str(e).splitlines()[0]) from None


def cmd_reduce(args: argparse.Namespace) -> int:
    from .corpus import load_case
    from .minimize import minimize_files
    from .reduce import NotInteresting, ReductionStats

    last = [0.0]

    def progress(stats: ReductionStats) -> None:
        if time.time() - last[0] > 2:
            last[0] = time.time()
            print(f"  queries {stats.queries} cache hits {stats.cache_hits} "
                  f"ops {stats.size} (pass {stats.current_pass})", file=sys.stderr, flush=True)

    if args.backend:
        _backend_name(args.backend)
    bad = 0
    try:
        for path, done in minimize_files([Path(p) for p in args.cases], Path(args.out), args.backend,
                                         args.workers, args.timeout, args.budget, progress):
            if isinstance(done, NotInteresting):  # flaky or bound to its campaign's environment
                print(f"fuzzfuse: skipped: {done}", file=sys.stderr)
                continue
            if isinstance(done, Exception):  # one bad file: say so, reduce the rest
                print(f"fuzzfuse: error: {done}", file=sys.stderr)
                bad += 1
                continue
            case = load_case(done / "case.json")
            red = case.reduction
            print(f"{path}: {red.ops_before} -> {red.ops_after} ops in {red.queries} queries, "
                  f"{red.seconds}s; repro {case.verification.status}: {done}", flush=True)
    except Unavailable as e:
        raise BadInput(str(e)) from e
    return EXIT_BAD_INPUT if bad else 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import export_pytest

    try:
        count = export_pytest(Path(args.dir), Path(args.pytest), backend=args.backend)
    except (OSError, ValueError) as e:
        raise BadInput(str(e)) from e
    print(f"{count} repro(s) -> {args.pytest}")
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    from .buildenv import Build, BuildError, Package
    from .versionsrun import Plan, corpus_summary, execute

    try:
        builds = [b for option, package in ((args.torch, Package.TORCH), (args.nvfuser, Package.NVFUSER)) if option
                  for b in Build.parse_list(package, option)]
    except ValueError as e:
        raise BadInput(str(e)) from e
    if not builds and not args.from_cache:
        raise BadInput("name the builds to run: --torch 2.9.1,2.14.1 and/or --nvfuser installed,... "
                       "(or --from-cache to redraw the tables)")
    missing = [d for d in [*args.dirs, *(args.fold or []), *([args.wheels] if args.wheels else [])]
               if not Path(d).is_dir()]
    if missing:
        raise BadInput(f"{missing[0]}: not a directory")
    plan = Plan([Path(d) for d in args.dirs], builds, Path(args.results).expanduser(), Path(args.envs).expanduser(),
                Path(args.wheels) if args.wheels else None, args.jobs, args.timeout, args.from_cache,
                tuple(Path(d) for d in args.fold or ()), args.device or "")
    try:
        tables = execute(plan)
    except BuildError as e:
        raise BadInput(str(e)) from e
    print("\n".join(corpus_summary(tables)))
    return 0


class DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in --help; an option without a value by default says in its own
    words what happens then ("default: one per CPU core"), and flags need none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False:
            return action.help or ""
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """Bad options get one line and exit code 2, like every other bad input (argparse's own error
    prints the whole usage first); `--help` shows every option's default."""

    def __init__(self, **kwargs) -> None:
        super().__init__(formatter_class=DefaultsShown, **kwargs)

    def error(self, message: str):
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)




def versions_cache() -> Path:
    from .versionsrun import CACHE

    return CACHE


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="fuzzfuse", description="Find and minimize bugs in tensor fusing compilers.")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("backends", help="list backends and whether they run here").set_defaults(func=cmd_backends)

    f = sub.add_parser("fuzz", help="run a fuzz campaign")
    f.add_argument("--backend", help="the fuser to fuzz (`fuzzfuse backends` lists them); default: the best available "
                                     "here (nvfuser, torchscript:nnc, inductor, ...)")
    f.add_argument("--time", type=POSITIVE_SECONDS,
                   help="seconds for the whole run, reductions included; default: 60 unless --max-cases is given")
    f.add_argument("--max-cases", type=AT_LEAST_ONE, help="stop fuzzing after this many cases; default: no limit (--time bounds the run)")
    f.add_argument("--seed", type=int, help="the campaign's seed stream; default: a fresh one, printed and recorded")
    f.add_argument("--workers", type=AT_LEAST_ONE,
                   help="worker processes; default: one per CPU core (compiling is CPU-bound)")
    f.add_argument("--devices", help="GPUs to spread the workers over, e.g. 0,1,2,3; default: the first")
    f.add_argument("--resume", metavar="DIR",
                   help="continue the campaign stopped in DIR (its seed stream, stats, signatures and "
                        "reductions); --time/--max-cases then mean that much more")
    f.add_argument("--shard", help="this host's (or process's) name when several campaigns share --out: "
                                   "it writes OUT/shards/SHARD/ and draws its own seeds")
    f.add_argument("--out", default=".", help="output directory (corpus/, summary.json, minimized/); it must "
                                              "not hold another campaign")
    f.add_argument("--timeout", type=CASE_TIMEOUT, default=60.0,
                   help="seconds per case (at least 1) before it counts as a hang")
    f.add_argument("--max-ops", type=AT_LEAST_ONE, default=12, help="most ops in a generated graph")
    f.add_argument("--check-strides", action=argparse.BooleanOptionalAction, default=None,
                   help="compare output strides (default: where the backend promises eager's strides)")
    f.add_argument("--extra-runs", action=argparse.BooleanOptionalAction, default=True,
                   help="judge each compiled graph on extra input sets too (fresh values, new sizes and "
                        "strides where the backend reruns them); --no-extra-runs: on its own inputs only")
    f.add_argument("--backward", action="store_true",
                   help="training mode: also compare the gradients of requires_grad inputs")
    f.add_argument("--reduce-budget", type=AT_LEAST_ONE, default=400, help="most reducer queries per signature")
    f.add_argument("--no-reduce", action="store_true", help="do not minimize new signatures into OUT/minimized/")
    f.add_argument("--known", action="append", metavar="DIR",
                   help="minimized repros (e.g. minimized/): their signatures are counted and named, not reduced "
                        "again (repeatable)")
    f.add_argument("--reduce-share", type=FRACTION, default=REDUCE_SHARE, metavar="FRACTION",
                   help="share of the workers that reductions may take while it fuzzes, beside it: a mismatch or "
                        "a crash without a C++ assert is counted under a root cause only once reduced (0: reduce "
                        "only after fuzzing)")
    f.add_argument("--focus-share", type=FRACTION, default=0.25, metavar="FRACTION",
                   help="share of worker time for batches aimed at the least-covered scheduler (nvFuser; 0: never). "
                        "Those batches compile more kernels a case: a higher share trades cases/s for coverage")
    f.add_argument("--source", choices=SOURCES, default="scratch",
                   help="where cases come from: generated from scratch (default), mutated from the seed corpus "
                        "(real model subgraphs with one op, dtype, layout, shape or constant changed at a time), "
                        "or mixed (each case one or the other)")
    f.set_defaults(func=cmd_fuzz)

    m = sub.add_parser("reduce", help="minimize failing cases into OUT/<slug>/, one per reduced root cause")
    m.add_argument("cases", nargs="+", help="case JSON files or directories of them (a campaign's corpus/)")
    m.add_argument("--budget", type=AT_LEAST_ONE, help="most reducer queries per signature; default: to a fixpoint")
    m.add_argument("--backend", help="default: the case's own backend (a built-in one; a case file cannot choose "
                                     "custom: or dynamo:module:function backends, name those here)")
    m.add_argument("--out", default="minimized", help="where the minimized repros go")
    m.add_argument("--workers", type=AT_LEAST_ONE, default=os.cpu_count() or 1, help="worker processes")
    m.add_argument("--timeout", type=CASE_TIMEOUT, default=60.0,
                   help="seconds per reducer query (at least 1) before it counts as a hang")
    m.set_defaults(func=cmd_reduce)

    r = sub.add_parser("replay", help="re-run saved cases; report which still fail")
    r.add_argument("paths", nargs="+", help="case files or directories of them")
    r.add_argument("--backend", help="default: each case's own backend (a built-in one; a case file cannot choose "
                                     "custom: or dynamo:module:function backends, name those here)")
    r.add_argument("--workers", type=AT_LEAST_ONE, default=1, help="worker processes")
    r.add_argument("--timeout", type=CASE_TIMEOUT, default=120.0,
                   help="seconds per case (at least 1) before it counts as a hang")
    r.set_defaults(func=cmd_replay)

    t = sub.add_parser("triage", help="bucket the failures under DIR (every shard's summary.json, or saved "
                                      "cases) by signature, most distinct first; write DIR/report.html")
    t.add_argument("dir", help="a campaign --out directory, a directory of shards, minimized/ or a corpus")
    t.add_argument("--report", help="where to write the HTML report; default: DIR/report.html")
    t.set_defaults(func=cmd_triage)

    b = sub.add_parser("report", help="print the issue body of each minimized DIR in its upstream's form, "
                                      "ready to paste; --regenerate rewrites its repro.py and README.md")
    b.add_argument("dirs", nargs="+", help="minimized/<dir> directories, or minimized/ for all of them")
    b.add_argument("--regenerate", action="store_true",
                   help="rewrite repro.py, regression.py and README.md from case.json; CPU repros re-run here")
    b.add_argument("--outputs", metavar="FILE.json", action="append", default=[],
                   help="GPU repros' runs recorded elsewhere (benchmarks/gpu_repro_outputs.py), quoted in their "
                        "READMEs (repeatable)")
    b.add_argument("--timeout", type=CASE_TIMEOUT, default=900.0, help="seconds one repro may run")
    b.set_defaults(func=cmd_report)

    e = sub.add_parser("export", help="write the minimized repros under DIR as one self-contained pytest file")
    e.add_argument("dir", help="minimized/ or any directory holding <repro>/case.json + repro.py")
    e.add_argument("--pytest", required=True, metavar="OUT.py", help="the test file to write (no fuzzfuse import)")
    e.add_argument("--backend", help="only the repros of this backend; default: all")
    e.set_defaults(func=cmd_export)

    v = sub.add_parser("versions", help="run every minimized repro under DIR in each torch (or nvFuser) build; "
                                        "write each directory's versions table")
    v.add_argument("dirs", nargs="+", metavar="DIR", help="minimized/ or repro directories")
    v.add_argument("--torch", metavar="V1,V2,...", help="torch releases, each in a virtualenv of its own")
    v.add_argument("--nvfuser", metavar="V1,V2,...",
                   help="nvfuser-cu130 builds over this machine's torch (installed: the one in use); GPU repros only")
    v.add_argument("--results", default=str(versions_cache() / "results"),
                   help="where each run's result is kept (the resume point and what --from-cache draws)")
    v.add_argument("--envs", default=str(versions_cache() / "envs"),
                   help="where each build's environment is made, once (a CUDA torch takes about 5 GB)")
    v.add_argument("--wheels", metavar="DIR", help="install from this folder of wheels only (a machine offline)")
    v.add_argument("--jobs", type=AT_LEAST_ONE, default=1, help="repros run at a time")
    v.add_argument("--timeout", type=CASE_TIMEOUT, default=300.0, help="seconds one repro run may take (a hang)")
    v.add_argument("--device", choices=("cpu", "cuda"),
                   help="only the repros of this device; default: all that run here")
    v.add_argument("--from-cache", action="store_true", help="run nothing: redraw the tables from the cached results")
    v.add_argument("--fold", action="append", metavar="DIR",
                   help="first copy the results under DIR (another machine's --results) into --results")
    v.set_defaults(func=cmd_versions)

    from .cli_corpus import add_corpus_commands

    add_corpus_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Backends named by module (custom:, dynamo:module:function) import from the current directory
    # as under `python -m`, also from the `fuzzfuse` script; last, so it shadows nothing installed.
    # Workers and repro checks inherit sys.path as PYTHONPATH.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return args.func(args)
    except BadInput as e:
        print(f"fuzzfuse: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
