"""Command line front end. Bad input (unknown backend, corrupt case file, missing GPU) gets one
line on stderr and exit code 2; nothing else is lost."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .backends import BACKENDS, Unavailable, availability, default_backend, get_backend

EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """One line for the user; exit code 2."""


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


def cmd_fuzz(args: argparse.Namespace) -> int:
    from .campaign import Campaign
    from .checkpoint import DirectoryInUse
    from .corpus import CorpusError
    from .progress import campaign_display

    try:
        if args.resume:
            campaign = Campaign.resume(Path(args.resume), more_seconds=args.time, more_cases=args.max_cases,
                                       workers=args.workers)
            backend = _backend_name(campaign.backend_name, campaign.backward)
            if args.devices:  # checked like a new campaign's, once the backend is known
                campaign.devices = _devices(args.devices, backend)
        else:
            backend = _backend_name(args.backend, args.backward)
            limit = args.time if args.time is not None or args.max_cases is not None else 60.0
            campaign = Campaign(backend, Path(args.out), seed=args.seed, workers=args.workers or os.cpu_count() or 1,
                                time_limit=limit, max_cases=args.max_cases, timeout=args.timeout,
                                check_strides=args.check_strides, extra_runs=args.extra_runs, max_ops=args.max_ops,
                                reduce=not args.no_reduce,
                                backward=args.backward, devices=_devices(args.devices, backend), shard=args.shard,
                                reduce_budget=args.reduce_budget, known=args.known, focus_share=args.focus_share)
        with campaign_display() as display:
            campaign.display = display
            summary = campaign.run()
    except (CorpusError, DirectoryInUse, ValueError) as e:
        raise BadInput(str(e)) from e
    print(f"{summary['cases']} cases in {summary['seconds']:.0f}s ({summary['cases_per_second']:.1f}/s) on "
          f"{backend}: {summary['outcomes']}")
    for s in campaign.stats.signatures.values():
        print(f"  {s.count:5}x {s.outcome:10} {s.key}")
    print(f"summary: {campaign.out / 'summary.json'}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from .replay import replay

    return replay(args.paths, backend=args.backend, workers=args.workers, timeout=args.timeout)


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


def cmd_reduce(args: argparse.Namespace) -> int:
    from .corpus import load_case
    from .minimize import minimize_files
    from .reduce import NotInteresting

    last = [0.0]

    def progress(stats: dict) -> None:
        if time.time() - last[0] > 2:
            last[0] = time.time()
            print(f"  queries {stats.get('queries')} cache hits {stats.get('cache_hits')} "
                  f"ops {stats.get('size')} (pass {stats.get('pass')})", file=sys.stderr, flush=True)

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
            red = case.reduction or {}
            print(f"{path}: {red.get('ops_before')} -> {red.get('ops_after')} ops in {red.get('queries')} queries, "
                  f"{red.get('seconds')}s; repro {case.verification['status']}: {done}", flush=True)
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fuzzfuse", description="Find and minimize bugs in tensor fusing compilers.")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("backends", help="list backends and whether they run here").set_defaults(func=cmd_backends)

    f = sub.add_parser("fuzz", help="run a fuzz campaign")
    f.add_argument("--backend", help="default: the best available (nvfuser, inductor, torchscript:nnc, ...)")
    f.add_argument("--time", type=float, help="seconds to run (default 60 unless --max-cases is given)")
    f.add_argument("--max-cases", type=int)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--workers", type=int, help="default: one per CPU core (compiling is CPU-bound)")
    f.add_argument("--devices", help="GPUs to spread the workers over, e.g. 0,1,2,3 (default: the first)")
    f.add_argument("--resume", metavar="DIR",
                   help="continue the campaign stopped in DIR (its seed stream, stats, signatures and "
                        "reductions); --time/--max-cases then mean that much more")
    f.add_argument("--shard", help="this host's (or process's) name when several campaigns share --out: "
                                   "it writes OUT/shards/SHARD/ and draws its own seeds")
    f.add_argument("--out", default=".", help="output directory (corpus/, summary.json)")
    f.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    f.add_argument("--max-ops", type=int, default=12)
    f.add_argument("--check-strides", action=argparse.BooleanOptionalAction, default=None,
                   help="compare output strides (default: where the backend promises eager's strides)")
    f.add_argument("--no-extra-runs", dest="extra_runs", action="store_false",
                   help="judge each compiled graph on its own inputs only, not on extra input sets")
    f.add_argument("--backward", action="store_true",
                   help="training mode: also compare the gradients of requires_grad inputs")
    f.add_argument("--reduce-budget", type=int, default=400, help="most reducer queries per signature")
    f.add_argument("--no-reduce", action="store_true", help="do not minimize new signatures into OUT/minimized/")
    f.add_argument("--known", action="append", metavar="DIR",
                   help="minimized repros (e.g. minimized/): their signatures are counted, not reduced again")
    f.add_argument("--focus-share", type=float, default=0.25, metavar="FRACTION",
                   help="share of worker time for batches aimed at the least-covered scheduler (nvFuser; 0: never). "
                        "Those batches compile more kernels a case: a higher share trades cases/s for coverage")
    f.set_defaults(func=cmd_fuzz)

    m = sub.add_parser("reduce", help="minimize failing cases into OUT/<signature-slug>/, one per signature")
    m.add_argument("cases", nargs="+", help="case JSON files or directories of them (a campaign's corpus/)")
    m.add_argument("--budget", type=int, help="most reducer queries per signature (default: to a fixpoint)")
    m.add_argument("--backend", help="default: the case's own backend")
    m.add_argument("--out", default="minimized")
    m.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    m.add_argument("--timeout", type=float, default=60.0)
    m.set_defaults(func=cmd_reduce)

    r = sub.add_parser("replay", help="re-run saved cases; report which still fail")
    r.add_argument("paths", nargs="+", help="case files or directories of them")
    r.add_argument("--backend", help="default: each case's own backend")
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--timeout", type=float, default=120.0)
    r.set_defaults(func=cmd_replay)

    t = sub.add_parser("triage", help="bucket the failures under DIR (every shard's summary.json, or saved "
                                      "cases) by signature, most distinct first; write DIR/report.html")
    t.add_argument("dir", help="a campaign --out directory, a directory of shards, minimized/ or a corpus")
    t.add_argument("--report", help="where to write the HTML report (default DIR/report.html)")
    t.set_defaults(func=cmd_triage)

    e = sub.add_parser("export", help="write the minimized repros under DIR as one self-contained pytest file")
    e.add_argument("dir", help="minimized/ or any directory holding <repro>/case.json + repro.py")
    e.add_argument("--pytest", required=True, metavar="OUT.py", help="the test file to write (no fuzzfuse import)")
    e.add_argument("--backend", help="only the repros of this backend")
    e.set_defaults(func=cmd_export)
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
