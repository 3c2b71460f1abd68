"""Root-cause keys: what triage, dedup and "known" compare, one key a bug.

A signature's coarse key (`Signature.key()`) is what the reducer preserves while it shrinks: it
keeps every word of the normalized message, so that a reduction never slips to another failure.
That makes it a surface, not a bug: one missing evaluator op is a dozen keys (one per op name), one
oneDNN rewrite a dozen more (one per downstream error text), and every float mismatch of a backend
is one key. The root-cause key folds what does not tell bugs apart:

- A crash anchored at a native assert (a C++ location of the fuser, not an ATen argument check)
  is keyed by its component, location and message with op names, dtypes, identifiers and numbers
  folded out. Route (nvfuser / aot:nvfuser), stage (compile / run) and outcome (raised / aborted)
  are folded too: one assert is one bug whichever way it was reached.
- A crash with no native location whose message is specific (NNC's "Invalid integral op_type",
  oneDNN's "IValue is not a Scalar") is keyed by that message, folded the same way: the fuser
  raised it, and one message is one bug whatever op or route reached it. A message is not
  specific when it says nothing (an empty error, "(in aten.OP)"), when it names an op or a dtype
  (an op rejecting its operands, downstream of the cause), or when it is one a fuser raises for
  any failure of a stage or a library check (GENERIC_MESSAGES: oneDNN's "partition compile
  failed", TorchScript's interpreter wrapper, ATen's size checks).
- Any other failure (a mismatch, a crash known only by a Python frame and an unspecific message, a
  hang) has no anchor. Its key is the canonical form of its *reduced* graph (fuzzfuse.graphform),
  so it is pending (None) until a reduced graph is given: an unreduced hit is never "known".

`python -m fuzzfuse.rootcause minimized/` prints the root-cause groups of a directory of repros.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from .corpus import CorpusError, Variant, iter_cases
from .graphform import VALUE_KINDS, culprit_form, graph_form
from .ir import OPS, Graph
from .oracle import Signature, cpp_location, normalize, nvrtc_error
from .reduce.generalise import Generalisation

# Routes to one fuser are one component: the same assert reached through aot_autograd is the same bug.
COMPONENTS = {
    "nvfuser": "nvfuser", "aot:nvfuser": "nvfuser", "torchscript:nvfuser": "nvfuser",
    "torchscript:nnc": "nnc", "aot:nnc": "nnc",
    "torchscript:onednn": "onednn", "aot:onednn": "onednn",
    "inductor": "inductor", "dynamo:inductor": "inductor",
}
_NATIVE = re.compile(r"\.(?:cpp|cc|cu|cuh|h|hpp):\d+$")
# ATen's and c10's own argument checks: they fire for whatever caller passed a bad size, so their
# location names the symptom; the fuser that computed the size is the bug.
_LIBRARY_CHECKS = ("aten/", "c10/")


def component(backend_name: str) -> str:
    return COMPONENTS.get(backend_name, backend_name)


# Messages that name no cause, compared (from their start) after `fold`: a crash that says only
# this keeps its reduced graph's key. A fuser raises some for whatever failed in a stage; the others
# are a library's checks, which fire for whatever caller passed a bad value (a symptom, as an ATen
# location is).
GENERIC_MESSAGES = re.compile("|".join((
    r"partition compile failed$", r"could not OP op to the graph$",  # oneDNN Graph: any failure of a stage
    r"The following operation failed in the TorchScript interpreter",  # wraps any error
    r"C\+\+ compile error$",  # Inductor: any bad generated code
    r"CUDA error:",  # a kernel fault: any bad index or size
    r"(?:unordered_map::at|bad optional access|vector::_M_range_check)$",  # the C++ standard library
    # ATen's argument checks
    r"The expanded size of the tensor|shape 'S' is invalid|The size of tensor a|.*the number of sizes provided"
    r"|expected scalar type|Expected tensor for argument|Boolean value of Tensor|Cannot access data pointer"
    r"|.*not implemented for",
)))
# What `headline` appends to an empty error: the op TorchScript's traceback points at.
_FAILED_AT = re.compile(r"\(in [\w.:]+\)")
_WORD = re.compile(r"[A-Za-z_]{2,}")


def native_assert(signature: Signature) -> bool:
    """Whether a crash names a native assert of the fuser, which is then its root cause."""
    return (signature.outcome in ("crash", "hard-crash") and bool(_NATIVE.search(signature.location))
            and not signature.location.startswith(_LIBRARY_CHECKS))


def specific_message(signature: Signature) -> str:
    """A crash's folded message when it names its cause by itself (see the module's docstring),
    else "": it says something (two words, beyond its exception type and the op an empty error
    was raised at) and is no GENERIC_MESSAGES."""
    if signature.outcome != "crash":
        return ""
    said = _FAILED_AT.sub(" ", _WRAPPER_PREFIX.sub("", signature.message))
    text = fold(signature.message)
    if len(_WORD.findall(said)) < 2 or GENERIC_MESSAGES.match(text) or _names_an_operand(said):
        return ""
    return text


def _names_an_operand(message: str) -> bool:
    """Whether a message names an op or a dtype: an op's check of its operands ("Boolean inputs
    not supported for relu"), which fires downstream of whatever produced the bad value (oneDNN's
    rewrite of `x + 0` leaves a bool tensor that relu, neg or abs then rejects in words of its own)."""
    return any(p.search(message) for p in (_OP_WORDS, _ATEN_OP, _DTYPE_WORDS))


def anchored(signature: Signature) -> bool:
    """Whether a crash names its root cause without a reduction: a native assert or a specific
    message."""
    return native_assert(signature) or bool(specific_message(signature))


def keyed_by_graph(signature: Signature) -> bool:
    """Whether a failure's root-cause key is its reduced graph's form (then worth generalising)."""
    return not anchored(signature) and signature.outcome in ("crash", "hard-crash", "hang", "mismatch", "unfused",
                                                             "flaky")


def keeps_dtypes(signature: Signature) -> bool:
    """Whether a failure's key names each input's exact dtype (a wrong value depends on it), so
    that a dtype the failure does not need is worth generalising to its category."""
    return _dtype_policy(signature) == "exact"


def root_cause_key(signature: Signature, graph: Graph | None = None,
                   generalisation: Generalisation | None = None) -> str | None:
    """The key of the bug behind `signature`; None when it needs a reduced graph and none is given
    (pending, never known), or when the outcome is no failure. `generalisation`: the fillers and
    free dtypes found on `graph` (fuzzfuse.reduce.generalise), written as wildcards."""
    if native_assert(signature):
        return "|".join(("assert", component(signature.backend), signature.location, fold(signature.message)))
    if specific_message(signature):
        return "|".join(("message", component(signature.backend), specific_message(signature)))
    if not keyed_by_graph(signature) or graph is None:
        return None
    judged = signature.outcome in ("mismatch", "unfused")
    culprit = None
    if signature.outcome == "mismatch" and generalisation is not None and generalisation.applies_to(graph):
        if generalisation.culprit:
            # Keyed where the fuser first computes a wrong value, by what that value shows (graph_form
            # stops there): the ops after it only observe it.
            signature = replace(signature, kind=generalisation.culprit[1])
        culprit = generalisation.first_wrong_op(graph)
    what = f"{signature.outcome}:{signature.kind}" if judged else signature.outcome
    # A wrong gradient is not the same bug as a wrong output; a crash's stage is folded.
    phase = ("backward" if signature.stage.startswith("backward") else "forward") if judged else ""
    form = None
    if culprit is not None and generalisation.alone and signature.kind in VALUE_KINDS and signature.stage == "run":
        form = culprit_form(graph, culprit, _dtype_policy(signature), generalisation)
    # A mismatch's or fallback's ops are all evidence; a crash surfaces downstream of its cause.
    form = form or graph_form(graph, _dtype_policy(signature), focus=not judged, generalisation=generalisation)
    if not judged and "=*" in form:
        # A wildcard holds under the signature it was tried with: a crash's message (a mismatch's
        # kind is in `what`). Without it, "any unary op, then a consumer" says next to nothing.
        what = f"{what}:{fold(signature.message)}"
    return "|".join((what, component(signature.backend), phase, form))


def _dtype_policy(signature: Signature) -> str:
    """How much of the dtypes a failure's key keeps. Numbers depend on the exact dtype; a wrong
    shape never does (shape rules read no dtype), and structural failures (crashes, wrong output
    dtypes) depend on its category: the same crash for float16 and float32 inputs is one bug."""
    if signature.outcome == "mismatch" and signature.kind in ("values", "nan-inf"):
        return "exact"
    if signature.outcome == "mismatch" and signature.kind in ("shape", "strides"):
        return "none"
    return "category"


# ---- folding a message ------------------------------------------------------------------------
_WRAPPER_PREFIX = re.compile(r"^(?:\s*(?:\w+(?:Error|Exception):|Error from segmentation group N:))+\s*")
_OPERATOR = re.compile(r"(operator type):?\s+\w+")
_ATEN_OP = re.compile(r"\b(aten|prim)(::|\.)\w+")
_DTYPE_WORDS = re.compile(
    r"(?:\bnvf::)?\b__(?:half|bfloat)\b"
    r"|\b(?:torch\.)?(?:float|double|half|bfloat16|float16|float32|float64|int8|int16|int32|int64|uint8|bool|long|int"
    r"|int64_t|int32_t)\b"
    r"|\b(?:CPU)?(?:Float|Double|Half|BFloat16|Long|Int|Bool|Byte)(?:Type|Tensor)?\b")
_OP_WORDS = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, OPS), key=len, reverse=True)) + r")\b")
_NUMBERED_NAME = re.compile(r"\b[A-Za-z_]\w*?\d+\b")
# NNC's "MALFORMED INPUT: <what> - <the IR expression>": the expression is the case's, not the bug's.
_IR_DUMP = re.compile(r"^(.*MALFORMED INPUT: [^-]*?) - .*$", re.S)
FOLDED_LENGTH = 100


# An NVRTC error as oracle.nvrtc_error words it: the error, then the types of an overload's call.
_NVRTC_KEY = re.compile(r"^(CUDA NVRTC compile error: )(.*?)(?: \[(.*)\])?$", re.S)
_NVRTC_NAMED = re.compile(r"\b(function|operator) (?!from\b)\S+")
_NVRTC_CONVERSION = re.compile(r"\bfrom (\S+) to (\S+)")
_NVRTC_TYPE_SEPARATORS = re.compile(r",|\s+[^\w\s:]+\s+")
# The classes of the generated kernel's C++ types, first match wins: 16-bit floats (nvFuser's
# __half and __bfloat lack the same overloads), other floats, bool, integers.
_TYPE_CLASSES = ((re.compile(r"__half|__bfloat|\bhalf\b"), "f16"), (re.compile(r"\b(?:float|double)\b"), "float"),
                 (re.compile(r"\bbool\b"), "bool"), (re.compile(r"int|long|short|char|size_t"), "int"))


def type_class(cpp_type: str) -> str:
    return next((name for pattern, name in _TYPE_CLASSES if pattern.search(cpp_type)), cpp_type.strip())


def fold_nvrtc(message: str) -> str:
    """An NVRTC compile error's key: its kind of error, with the function or operator it names
    folded out (the missing __half overloads of ceil, silu, min and fmax are one gap; the name
    stays in the detail) and the classes of the types it was called with kept (a warp shuffle of
    (unsigned int, __half, int, int) is another gap than ceil of (__half)); "" for any other message,
    and for an overload error recorded without its call's types (fold() then keeps the name)."""
    m = _NVRTC_KEY.match(message)
    if not m:
        return ""
    prefix, error, called = m.groups()
    if called is None and not _NVRTC_CONVERSION.search(error):
        return ""  # recorded before the call's types were: its function's name is all that tells it apart
    error = _NVRTC_NAMED.sub(r"\1 F", error)
    error = _NVRTC_CONVERSION.sub(lambda c: f"from {type_class(c[1])} to {type_class(c[2])}", error)
    classes = sorted({type_class(t) for t in _NVRTC_TYPE_SEPARATORS.split(called) if t.strip()}) if called else []
    return f"{prefix}{error.rstrip(':')}{' [' + ', '.join(classes) + ']' if classes else ''}"


def fold(message: str) -> str:
    """A normalized message with what varies between reports of one bug folded out: wrapper
    prefixes, op names ("Unexpected operator type silu" -> "... OP"), dtypes and numbered names.
    The detail keeps them; the key must not. An NVRTC error folds by its own rule (fold_nvrtc)."""
    if fold_nvrtc(message):
        return fold_nvrtc(message)
    text = _IR_DUMP.sub(r"\1", _WRAPPER_PREFIX.sub("", message))
    text = _OPERATOR.sub(r"\1 OP", text)
    text = _ATEN_OP.sub(r"\1\2OP", text)
    text = _DTYPE_WORDS.sub("DTYPE", text)
    text = _OP_WORDS.sub("OP", text)
    # The cut keeps one bug's messages alike where the normalizer cut them at different places.
    return _NUMBERED_NAME.sub("ID", text).strip()[:FOLDED_LENGTH]


# ---- the corpus ---------------------------------------------------------------------------------
# The context a backend appends to a crash's detail (aot:nvfuser's FusionDefinition) is no part of
# the error.
_CONTEXT = "\n\nThe failing "


def signature_today(signature: Signature, detail: str) -> Signature:
    """A recorded crash signature as today's oracle computes it from the recorded error text: a
    repro keyed before the parallel-compile wrapper was unwrapped, or before NVRTC failures were
    named by their compiler error, gets its innermost location and message."""
    error = detail.split(_CONTEXT)[0]
    location = cpp_location(error)
    if signature.outcome != "crash" or not location or (location == signature.location and not nvrtc_error(error)):
        return signature
    return replace(signature, location=location, message=normalize(error))


def variant_root_cause(variant: Variant) -> str | None:
    """A folded variant's root-cause key (`also_seen_as[]`) as today's rules give it from its coarse
    key alone (an anchored crash's), or from its graph and that graph's generalisation, so that a
    variant folded before a rule anchored it, or before generalisation, still counts."""
    return root_cause_key(variant.signature, variant.graph, variant.generalisation)


def groups(paths: list[str], variants: bool = False) -> tuple[dict[str, list[tuple[str, str, str]]], list[str], list[str]]:
    """root-cause key -> [(directory, backend, coarse key)], the directories whose recorded
    signature today's oracle re-keys, and the files that could not be read. variants: each folded
    variant of a repro is a member too, named `directory<-former directory`: whether the keys
    group what a maintainer folded by hand."""
    found: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    rekeyed, bad = [], []
    for path, case in iter_cases(paths):
        if isinstance(case, CorpusError):
            bad.append(str(case))
            continue
        if path.name != "case.json" or not case.signature:
            continue
        recorded = case.signature
        signature = signature_today(recorded, case.detail)
        if signature != recorded:
            rekeyed.append(f"{path.parent.name}: {recorded.location} -> {signature.location}: {signature.message}")
        key = root_cause_key(signature, case.graph, case.generalisation) or f"pending|{signature.key()}"
        found[key].append((path.parent.name, case.backend, signature.key()))
        for variant in case.also_seen_as if variants else ():
            key = variant_root_cause(variant) or variant.root_cause or variant.key
            found[key].append((f"{path.parent.name}<-{variant.directory}", variant.backend, variant.key))
    return found, rekeyed, bad


def report(paths: list[str], variants: bool = False) -> str:
    found, rekeyed, bad = groups(paths, variants)
    members = [m for ms in found.values() for m in ms]
    lines = [f"{len(members)} {'repros and variants' if variants else 'repros'}: {len({m[2] for m in members})} "
             f"coarse keys -> {len(found)} root causes"]
    if variants:
        families = defaultdict(set)
        for key, ms in found.items():
            for m in ms:
                families[m[0].split("<-")[0]].add(key)
        split = sorted(f for f, keys in families.items() if len(keys) > 1)
        lines.append(f"  {len(families)} directories (one root cause each, as folded): {len(split)} of them "
                     f"key apart, in {sum(len(families[f]) for f in split)} keys")
    for comp in sorted({component(m[1]) for m in members}):
        mine = [m for m in members if component(m[1]) == comp]
        roots = sum(1 for ms in found.values() if component(ms[0][1]) == comp)
        per_backend = ", ".join(f"{b} {c}" for b, c in sorted(Counter(m[1] for m in mine).items()))
        lines.append(f"  {comp}: {len(mine)} repros ({per_backend}), {len({m[2] for m in mine})} coarse keys, "
                     f"{roots} root causes")
    for backend in sorted({m[1] for m in members}):
        mine = [m for m in members if m[1] == backend]
        roots = sum(1 for ms in found.values() if any(m[1] == backend for m in ms))
        lines.append(f"    {backend}: {len(mine)} repros, {len({m[2] for m in mine})} coarse keys, "
                     f"in {roots} root causes")
    if rekeyed:
        lines += ["", f"re-keyed by today's oracle ({len(rekeyed)}):"] + [f"  {r}" for r in rekeyed]
    lines += ["", "groups, largest first:"]
    for key, ms in sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        backends = ", ".join(f"{b} {c}" for b, c in sorted(Counter(m[1] for m in ms).items()))
        lines.append(f"[{len(ms)}] {key}")
        lines.append(f"    {backends}; {len({m[2] for m in ms})} coarse keys")
        lines += [f"    {m[0]}" for m in sorted(ms)]
    if bad:
        lines += ["", "unreadable:"] + [f"  {b}" for b in bad]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzzfuse.rootcause",
                                     description="The root-cause groups of directories of minimized repros.")
    parser.add_argument("paths", nargs="+", help="directories of repros (each <slug>/case.json)")
    parser.add_argument("--variants", action="store_true",
                        help="count each folded variant (also_seen_as) as a member of its own")
    args = parser.parse_args(argv)
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"error: no such path: {missing[0]}", file=sys.stderr)
        return 2
    print(report(args.paths, args.variants))
    return 0


if __name__ == "__main__":
    sys.exit(main())
