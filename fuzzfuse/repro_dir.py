"""A minimized/<name>/ directory: named, written from a case (repro, regression file, README), and its
repro re-run in fresh processes before it is trusted; how fuzzfuse.minimize, fold and refresh
write one."""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from .backends import get_backend
from .bugreport import (REGRESSION, SHORT_FORMS, case_device, readme, run_repro as run_repro_here, with_repro_detail,
                        write_repro)
from .corpus import VERSIONS_FILE, Case, load_case, umask_mode, write_json
from .export import judge as judge_run, judged_script, run_repro
from .oracle import Signature
from .repro import INPUTS_FILE, repro_files
from .short_repro import Symptom
from .verdict import Reproduction, Verification

VERIFY_RUNS = 3


class Verified(NamedTuple):
    """A repro's verification and what a report may quote of its runs: `output` and `errors` are
    the stdout and stderr of the first run that reproduced (else of the first run), its printed
    lines cut where the reproducing runs began to differ (`varies`), its verdict line kept."""

    verification: Verification
    output: str
    errors: str
    varies: bool = False


def agreed_output(outputs: list[str]) -> tuple[str, bool]:
    """The first of `outputs` (stdouts of runs that failed alike) up to the first line the runs
    printed differently, with its verdict line; whether one did. A report quotes only what every
    run prints: nvFuser's bfs.h:261 message lists the visited ID groups in a different order on
    each run, so a README quoting one run's list was not in the next run's output."""
    split = [[ln for ln in out.splitlines() if not ln.startswith("fuzzfuse-verdict: ")] for out in outputs]
    same = 0
    while all(same < len(lines) and lines[same] == split[0][same] for lines in split):
        same += 1
    verdict = [ln for ln in outputs[0].splitlines() if ln.startswith("fuzzfuse-verdict: ")]
    return "\n".join(split[0][:same] + verdict) + "\n", any(lines != split[0] for lines in split)


def verify_repro(directory: Path, signature: Signature, runs: int = VERIFY_RUNS,
                 timeout: float = 600.0) -> Verified:
    """Run repro.py `runs` times, each in a fresh process in a clean directory holding only the
    repro's own files, and judge each run as the regression corpus does: it reproduces when its
    verdict line names the case's signature (outcome, kind, location), not merely when it exits 1.
    The runs go concurrently: on a GPU box each one is mostly a torch import, and a campaign
    verifies every signature it reduces."""
    def run_once(_) -> tuple[int | None, str, str, str]:
        with tempfile.TemporaryDirectory() as clean:
            shutil.copy(judged_script(directory), Path(clean) / "repro.py")
            if (directory / INPUTS_FILE).exists():
                shutil.copy(directory / INPUTS_FILE, clean)
            # PYTHONPATH only matters to custom backends' repros, which import their backend.
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
            code, out, err = run_repro(clean, timeout, env)
            return code, out, err, judge_run(signature.outcome, signature.kind, signature.location, code, out, err)

    with ThreadPoolExecutor(runs) as threads:
        results = list(threads.map(run_once, range(runs)))
    verdicts = [v for *_, v in results]
    same = [v == "as recorded" for v in verdicts]
    if all(v.startswith("skipped: ") for v in verdicts):
        status = Reproduction.SKIPPED
    else:
        status = Reproduction.REPRODUCES if all(same) else Reproduction.FLAKY if any(same) else \
            Reproduction.DOES_NOT_REPRODUCE
    verification = Verification(status, tuple(r[0] if r[0] is not None else "timeout" for r in results),
                                tuple(verdicts), runs)
    alike = [r for r in results if r[-1] == "as recorded"] or results[:1]
    output, varies = agreed_output([out for _, out, _, _ in alike])
    return Verified(verification, output, alike[0][2], varies)


def repro_slug(signature: Signature, root_cause: str | None) -> str:
    """A repro directory's name: the signature's readable words and a hash of the root cause, so
    that two causes found under one coarse signature get two directories."""
    if not root_cause:
        return signature.slug()
    return f"{slug_words(signature)}-{hashlib.sha1(root_cause.encode()).hexdigest()[:8]}"


def slug_words(signature: Signature) -> str:
    """The readable words of a signature's slug, without its hash."""
    return signature.slug().rsplit("-", 1)[0]


# ATen's x86 CPU capabilities (ATEN_CPU_CAPABILITY), lowest first.
CPU_CAPABILITIES = ("default", "avx2", "avx512")


def pin_candidates(case: Case) -> list[Case]:
    """The case pinned to each CPU capability below the recorded one, lowest first, then as
    recorded: a bug found on an AVX-512 machine usually fails under `default` too, and a repro
    pinned to avx512 can only skip on an AVX2 one. Just the case where nothing is pinned."""
    recorded = case.versions.get("cpu_capability")
    if recorded not in CPU_CAPABILITIES:
        return [case]
    return [replace(case, versions={**case.versions, "cpu_capability": level})
            for level in CPU_CAPABILITIES[:CPU_CAPABILITIES.index(recorded)]] + [case]


def write_minimized(directory: Path, case: Case, verify_runs: int = VERIFY_RUNS, timeout: float = 60.0) -> Case:
    """Write `case` (already minimized) as directory/{case.json, repro.py, README.md}, the repro
    verified in fresh processes; the case with its verification. A CPU case is pinned to the lowest
    capability it fails under: each candidate (`pin_candidates`) is verified in turn and the first
    that reproduces is written (the case as recorded at the latest), so a bug that fails under
    `default` costs no more runs than an unpinned one. A crash that kept no raw error text (a form
    fold splits out) records its repro's output as its detail."""
    fuser = get_backend(case.backend).for_case(case.options)  # the repro runs the case's choices
    directory.parent.mkdir(parents=True, exist_ok=True)
    for candidate in pin_candidates(case):
        # A hang repro gives up (exit 1) after the case timeout; verification allows for start-up too.
        files = repro_files(candidate.graph, fuser, candidate.signature, candidate.versions, timeout=timeout)
        # Staged in a hidden folder and moved in whole: a stop mid-way leaves no half repro behind.
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
        staging.chmod(umask_mode(directory=True))
        try:
            (staging / REGRESSION).write_text(files["repro.py"])
            if INPUTS_FILE in files:
                (staging / INPUTS_FILE).write_bytes(files[INPUTS_FILE])
            verified = verify_repro(staging, candidate.signature, verify_runs, timeout=timeout + 120)
            verification = verified.verification
            if verification.status is Reproduction.REPRODUCES or candidate is case:
                break
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        shutil.rmtree(staging, ignore_errors=True)
    try:
        symptom = Symptom.parse(verified.output) if candidate.signature.outcome == "mismatch" else None
        case = replace(candidate, verification=verification, symptom=symptom)
        # The reduced repro's error text, not the unreduced case's (a form kept none at all).
        case = with_repro_detail(case, verified.errors)
        write_json(staging / "case.json", case.to_json())
        if case.signature.outcome == "mismatch" and symptom is None:  # nothing to pin: the full repro is the repro
            source = files["repro.py"]
            (staging / "repro.py").write_text(source)
        else:
            source = write_repro(staging, case, hang_seconds=timeout)
        short = case.backend in SHORT_FORMS
        run = run_repro_here(staging, timeout + 120, keep_path=not short) if case_device(case) == fuser.device else None
        previous = (directory / "README.md").read_text() if (directory / "README.md").exists() else ""
        (staging / "README.md").write_text(readme(case, source, run, previous))
        for kept in ("FIXED", VERSIONS_FILE):  # what a person added beside the repro stays, and its history
            if (directory / kept).exists():
                shutil.copy(directory / kept, staging / kept)
        shutil.rmtree(directory, ignore_errors=True)
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return case


def refresh(directory: Path, verify_runs: int = VERIFY_RUNS, timeout: float = 60.0) -> Case:
    """Rewrite a minimized directory's repro.py and README.md from its case.json in today's form,
    and re-verify the repro: how committed repros follow a change of the repro or report format
    (`fuzzfuse corpus refresh DIR...`)."""
    return write_minimized(Path(directory), load_case(Path(directory) / "case.json"), verify_runs, timeout)
