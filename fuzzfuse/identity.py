"""One bug, one identity: what every part of fuzzfuse compares to say that two failures are one bug.

A failure's signature (`oracle.Signature`) is a surface: the reducer keeps it while it shrinks, so
that a reduction never slips to another failure, but one bug shows through many surfaces. Its
identity (`BugIdentity`) is what a maintainer would call the bug, and `same_bug` is the one
function that compares two of them; the campaign's known-matching, reduce, fold, replay, export,
triage and the pytest plugin all ask it (or its index key, `BugIdentity.key`).

- A crash anchored at a native assert is that assert: component, innermost location and folded
  message. Two locations are never one bug; a wrapper is unwrapped (oracle), never merged.
- A crash with no native location whose message is specific is that message, folded.
- A wrong result that a known wrong rule computes exactly (fuzzfuse.explain: a float scalar
  converted to the integer tensor's dtype) is that rule, through whichever op showed it. A process
  killed by a narrow store's overrun is that store's rule too, where its graph on int64 inputs
  shows the store (`Generalisation.widened`): NNC's abs of a folded zero kills an int16 process
  and leaves half of an int64 one unwritten.
- A wrong result (a mismatch) is its **culprit**: the op that first computes something eager does
  not, with the class of dtype it computes in (none for an op that only moves data), the symptom (wrong numbers, a wrong dtype, shape or
  strides), the phase (forward or backward) and the device. Ops after the culprit (sign, eq,
  reciprocal, a cast, div_trunc(v, v)) only make its wrong value visible: they are observers, not
  the bug, and so are the special value, the constant, the shape and the route that exposed it.
  Where the fuser's code for the culprit is a call of eager's own kernel (Inductor's C++ fmod is
  ATen's at::vec fmod: `Backend.eager_kernels`), the bug is eager's, the one eager shows itself
  where its vectorized loop runs (fuzzfuse.job's scalar arbiter): its identity names eager.
  Where the fuser's one lowering runs on several devices (Inductor's C++ and Triton code) and the
  reduced graph fails alike on each that was run (`Generalisation.devices`), the bug is the
  lowering's: its identity names no device.
  The culprit is found where the failure was reduced (fuzzfuse.reduce.generalise probes each op's
  own value); where that found none, it is the first op of the reduced graph that is no filler:
  the reducer replaces every op it can by an input holding eager's value of it, so an op that is
  still there computes something eager does not. An op computed from another (std from var in
  every fuser, and var_mean's var output from var: `Op.computed_by`; elu from expm1 in Inductor:
  `Backend.computes_from`) is named by that op. A pair the fuser rewrites as one pattern
  (`Backend.rewrites_pairs`: Inductor's softmax(x * c)), neither op wrong alone, is the pattern.
- A wrong result that needs the fusion's several outputs, with no op to blame (none wrong as the
  first output, or one any op of its kind stands in for), is the outputs' rule
  (`wrong_among_outputs`), named with the layouts of the inputs it reads: nvFuser wrote one
  output's values into another where a contiguous input met a permuted one, whichever ops made them.
- A crash known only by a Python frame and an unspecific message is the ops its reduced graph
  needs (fillers left out, and, where an op refused its operand's dtype, the ops that only
  consumed the bad value: rootcause.rejects_operand), with their dtype classes, and its folded
  message unless that message only says where the bad value surfaced (an op refusing its
  operand, one of ATen's argument checks: rootcause.downstream).
- A fallback (`unfused`) is the type guard that sent it there, where that was found: the property
  it rejected and what made the value (fuzzfuse.backends.guards), known before any reduction; else
  the ops it declined and the layouts of the inputs that made it decline.
- A hang is its reduced graph's canonical form (fuzzfuse.graphform).

An unreduced hit has no identity (None): it is pending, never known.
"""
from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, replace

from .backends.findings import FailedGuard
from .backends.registry import (component, computes_from, device_routes, eager_kernels, per_device_code,
                                rewrites_pairs)
from .corpus import Case, Variant
from .explain import names_a_rule, sign_lost_by
from .graphform import graph_form
from .ir import OPS, Graph, TensorInput
from .ir.interp import ELEMENTWISE
from .ir.ops import MOVES_DATA
from .ir.types import category
from .ir.untrusted import record, take
from .oracle import Signature
from .reduce.generalise import Generalisation
from .verdict import EAGER_FAULT
from .rootcause import downstream, fold, native_assert, rejects_operand, signature_today, specific_message

# The outcomes that are failures (a pass, an invalid case or a documented difference has no identity).
FAILURES = ("crash", "hard-crash", "hang", "mismatch", "unfused", "flaky")
CATEGORY_NAMES = ("bool", "int", "float")
OPS_REACHING = "/"  # between the ops that reach a crash at one position (`needed_ops`)
FOLDED = "folded-constant"  # a crash's constant region, however it was made (`needed_ops`)


class Anchor(str, enum.Enum):
    """What names a bug: its assert, its message, its culprit op, or its whole reduced graph."""

    ASSERT = "assert"
    MESSAGE = "message"
    CULPRIT = "culprit"
    GRAPH = "graph"


class Symptom(str, enum.Enum):
    """How a bug shows. A crash is one symptom whether it raised or aborted the process; wrong
    numbers are one whether they are finite or not (one lowering gives -inf for one operand and a
    wrong finite value for the next)."""

    CRASH = "crash"
    HANG = "hang"
    WRONG_VALUE = "wrong-value"
    WRONG_DTYPE = "wrong-dtype"
    WRONG_SHAPE = "wrong-shape"
    WRONG_STRIDES = "wrong-strides"
    UNFUSED = "unfused"
    FLAKY = "flaky"


_MISMATCH_SYMPTOMS = {"values": Symptom.WRONG_VALUE, "nan-inf": Symptom.WRONG_VALUE, "dtype": Symptom.WRONG_DTYPE,
                      "shape": Symptom.WRONG_SHAPE, "strides": Symptom.WRONG_STRIDES}


def symptom_of(signature: Signature) -> Symptom:
    if signature.outcome == "mismatch":
        return _MISMATCH_SYMPTOMS.get(signature.kind, Symptom.WRONG_VALUE)
    if signature.outcome in ("crash", "hard-crash"):
        return Symptom.CRASH
    return Symptom(signature.outcome)


# A rule a reduced graph shows by its shapes alone (`broadcasts_a_made_extent_one`), named as a
# culprit is.
MADE_EXTENT_ONE_BROADCAST = "an extent of 1 an op made is broadcast against a larger one"
# A wrong output that no op computes wrong: a fusion's several outputs, whichever ops make them
# (`wrong_among_outputs`).
WRONG_AMONG_OUTPUTS = "an output of a fusion of several is wrong, whichever op computes it"


@dataclass(frozen=True)
class BugIdentity:
    """A bug as a maintainer names it (see the module's docstring). `where`: the assert location,
    the folded message, the culprit op or the graph's form; `detail`: the assert's folded message,
    the culprit's dtype class, or a crash's folded message beside its graph; `phase`: forward or
    backward, for a wrong result; `device`: where the fused code ran ("" where unrecorded, and for
    anchored crashes: an assert is one bug on every device); `own_device_only`: its graph was run on the
    other devices of its lowering and failed on `device` only, so a failure of every device is
    never this bug (an unprobed one may be either)."""

    component: str
    anchor: Anchor
    symptom: Symptom
    where: str
    detail: str = ""
    phase: str = ""
    device: str = ""
    own_device_only: bool = False

    def key(self) -> str:
        """The index form of the identity: equal keys are the same bug (`same_bug` also matches an
        identity whose device is unrecorded, and so may the index: `known.KnownBugs`). `own_device_only` is
        no part of it: a failure on one device is its own device's whether or not it was probed."""
        return "|".join((self.anchor.value, self.component, self.device, self.symptom.value, self.phase,
                         self.where, self.detail))

    def describe(self) -> str:
        """One line a person reads: "inductor (cuda): remainder on float computes wrong values"."""
        on = f" ({self.device})" if self.device else ""
        if self.anchor is Anchor.ASSERT:
            return f"{self.component}{on}: assert at {self.where}: {self.detail}"
        if self.anchor is Anchor.MESSAGE:
            return f"{self.component}{on}: {self.where}"
        if self.anchor is Anchor.CULPRIT:
            phase = " (backward)" if self.phase == "backward" else ""
            on_class = f" on {self.detail}" if self.detail else ""
            return f"{self.component}{on}: {self.where}{on_class}{phase}: {self.symptom.value}"
        return f"{self.component}{on}: {self.symptom.value} of {self.where}"

    def to_json(self) -> dict:
        return {**asdict(self), "anchor": self.anchor.value, "symptom": self.symptom.value}

    @staticmethod
    def from_json(d: dict) -> "BugIdentity":
        """Validated: a case file is untrusted input."""
        d = record(d, "identity", BugIdentity.__dataclass_fields__)
        fields = {k: take(d, k, str, "identity", "") for k in BugIdentity.__dataclass_fields__ if k != "own_device_only"}
        try:
            return BugIdentity(**{**fields, "anchor": Anchor(fields["anchor"]), "symptom": Symptom(fields["symptom"]),
                                  "own_device_only": take(d, "own_device_only", bool, "identity", False)})
        except ValueError as e:
            from .ir.graph import GraphError

            raise GraphError(f"identity: {e}") from None


def same_bug(a: BugIdentity | None, b: BugIdentity | None) -> bool:
    """Whether two failures are one bug: the one answer to that question in fuzzfuse. A pending
    failure (None) is the same bug as nothing. An identity whose device is unrecorded (a repro
    saved before devices were) matches its twin on any device, except one probed to fail on its
    device alone: a failure of every device is not it. A culprit that is a kind (`*binary`: any
    op of it fails) matches each op of that kind."""
    if a is None or b is None:
        return False
    if a.device and b.device and a.device != b.device:
        return False
    if (a.own_device_only and not b.device) or (b.own_device_only and not a.device):
        return False
    a, b = replace(a, device="", own_device_only=False), replace(b, device="", own_device_only=False)
    if (a.anchor is Anchor.CULPRIT and b.anchor is Anchor.CULPRIT and
            (one_of_kind(a.where, b.where) or conversion_of_kind(a, b))) or \
            (crash_of_graph(a) and crash_of_graph(b) and ops_reaching_alike(a.where, b.where, bool(a.detail))):
        return replace(a, where="") == replace(b, where="")
    return a == b


def identify(signature: Signature | None, graph: Graph | None = None,
             generalisation: Generalisation | None = None, device: str = "") -> BugIdentity | None:
    """The identity of the bug behind `signature`; None when the outcome is no failure, or when it
    needs a reduced graph and none is given (pending). `graph`: the reduced graph;
    `generalisation`: its fillers, free dtypes and probed culprit (fuzzfuse.reduce.generalise),
    used where it was found on this graph; `device`: where the fused code ran."""
    identity = _identify(signature, graph, generalisation, device)
    if identity is not None and identity.device and generalisation is not None and graph is not None \
            and generalisation.devices == (identity.device,) and generalisation.applies_to(graph):
        return replace(identity, own_device_only=True)
    return identity


def _identify(signature: Signature | None, graph: Graph | None, generalisation: Generalisation | None,
              device: str) -> BugIdentity | None:
    """`identify`, short of whether its graph was probed to fail on its own device alone."""
    if signature is None or signature.outcome not in FAILURES:
        return None
    comp = component(signature.backend)
    if native_assert(signature):
        return BugIdentity(comp, Anchor.ASSERT, Symptom.CRASH, signature.location, fold(signature.message))
    if specific_message(signature):
        return BugIdentity(comp, Anchor.MESSAGE, Symptom.CRASH, specific_message(signature))
    if signature.outcome == "unfused" and FailedGuard.parse(signature.message):
        # No phase: the guard and what made its value are the bug, in a forward graph or in the
        # backward that runs on the values the forward saved (aot_autograd's backward guards a
        # value NNC's forward kernel made contiguous as the forward's next group does).
        return BugIdentity(comp, Anchor.MESSAGE, Symptom.UNFUSED, signature.message)
    if graph is None:
        return None
    general = generalisation if generalisation is not None and generalisation.applies_to(graph) else None
    found_on = device
    if general is not None and len(general.devices) > 1:
        device = ""  # the same wrong value on each device its one lowering runs on: one bug on all
    symptom = symptom_of(signature)
    judged = signature.outcome in ("mismatch", "unfused")
    phase = ("backward" if signature.stage.startswith("backward") else "forward") if judged else ""
    lost_by = sign_lost_by(signature.message) if signature.outcome == "mismatch" else ""
    if lost_by and any(n.op == lost_by for n in graph.nodes):
        # A zero of the other sign is one more wrong value of the op that loses it (NNC's elu,
        # computed as alpha * (exp(x) - 1), is +0.0 for -0.0 and imprecise near 0): its culprit.
        position = next(k for k, n in enumerate(graph.nodes) if n.op == lost_by)
        at_fault, culprit = culprit_op(signature.backend, lost_by, device, graph.nodes[position].attrs)
        return BugIdentity(at_fault, Anchor.CULPRIT, symptom, culprit,
                           dtype_class(graph, position, generalisation=general), phase,
                           culprit_device(signature.backend, culprit, device, found_on))
    if signature.outcome == "hard-crash" and general is not None and general.widened:
        # The process died of a narrow store's overrun, which on int64 inputs shows as the rule's
        # wrong values (Generalisation.widened): one bug, named by the rule as those values are.
        return BugIdentity(comp, Anchor.CULPRIT, Symptom.WRONG_VALUE, general.widened, "", "forward", device)
    if signature.outcome == "mismatch" and names_a_rule(signature.message):
        # A wrong rule that computes the fused values exactly (fuzzfuse.explain) is one bug through
        # every op that shows it. Pending until reduced, as every wrong value: a new one is then
        # reduced once into its repro, a known one counted.
        return BugIdentity(comp, Anchor.CULPRIT, symptom, signature.message, "", phase, device)
    if signature.outcome == "mismatch" and symptom in (Symptom.WRONG_VALUE, Symptom.WRONG_SHAPE) \
            and broadcasts_a_made_extent_one(graph):
        # An extent of 1 that an op made (a slice of one row, an index_select of one index), which
        # the elementwise op after it broadcasts against a larger extent, is one rule of the fuser
        # whichever op made it and whatever its readers show: nvFuser came back with the slice's
        # shape (eq of a slice and its source), read the source unsliced (the same eq under a
        # sum), and read the wrong element of an index_select (where).
        return BugIdentity(comp, Anchor.CULPRIT, Symptom.WRONG_SHAPE, MADE_EXTENT_ONE_BROADCAST, "", phase, device)
    if signature.outcome == "mismatch" and symptom is Symptom.WRONG_VALUE and wrong_among_outputs(graph, general):
        # The fusion's outputs are wrong, not an op: named by the layouts of the inputs it read.
        return BugIdentity(comp, Anchor.CULPRIT, symptom, WRONG_AMONG_OUTPUTS,
                           input_layouts(graph, channels_last_permuted=True), phase, device)
    if signature.outcome == "mismatch":
        position = culprit_position(graph, general)
        wildcard = filler_culprit(graph, general) if position is None else None
        if position is not None or wildcard is not None:
            position = position if position is not None else wildcard[0]
            node = graph.nodes[position]
            # A shape or a stride rule reads no dtype: a wrong shape is one bug whatever it holds.
            structural = symptom in (Symptom.WRONG_SHAPE, Symptom.WRONG_STRIDES)
            # A wrong dtype is a wrong result class: the class of what the op computed on is the
            # bug's (add of a bool tensor and a scalar typed int64 where eager keeps bool, and bool
            # where eager gives int64, is one type rule).
            # An op that only moves data (index_select, pad, cat, a view) computes nothing: the
            # dtype it moves is a form of its bug (one index_select over broadcast dims returned
            # stale elements for bool and for float32), unless the dtype itself is what is wrong.
            moves = node.op in OPS and OPS[node.op].kind in MOVES_DATA and symptom is not Symptom.WRONG_DTYPE
            detail = "" if structural or moves else dtype_class(graph, position,
                                                                 result=symptom is not Symptom.WRONG_DTYPE,
                                                                 generalisation=general)
            if structural and node.op in OPS:
                # A fuser's shape or layout rule is its kind's (every reduction's kept dims), and
                # every elementwise op's is one (Inductor's pointwise output layout: a clamp with
                # a permuted operand came back contiguous as a div_floor did): which op carried it
                # is a form. Shapes and layouts are its lowering's, which each device's code only
                # follows (`Backend.device_routes`): one bug on every device, though eager's own
                # layout may make it show on one only (an add of a permuted float32 and an
                # expanded int32 is laid out alike by eager CPU and Inductor, not by eager CUDA).
                kind = OPS[node.op].kind
                culprit = "*elementwise" if kind in ELEMENTWISE else f"*{kind}"
                device = "" if device_routes(signature.backend) else device
            elif wildcard:  # any op of its kind stands in for it: the bug is the kind's
                culprit = f"*{wildcard[1]}"
            elif pattern := rewritten_pair(signature.backend, graph, general):
                # The pattern computes in its second op's dtype (softmax(x * c) of an int32 x is
                # computed on float32 as of a float32 x): its class is the pair's. It rewrites the
                # graph before any device's code is written: one bug on each device.
                culprit = pattern[1]
                device = "" if device_routes(signature.backend) else device
                detail = dtype_class(graph, pattern[0], generalisation=general)
            else:
                comp, culprit = culprit_op(signature.backend, node.op, device, node.attrs)
            return BugIdentity(comp, Anchor.CULPRIT, symptom, culprit, detail, phase,
                               culprit_device(signature.backend, culprit, device, found_on))
    if signature.outcome in ("crash", "hard-crash"):
        # Its inputs' layouts, special values and constants, and the op that rejected the bad
        # value, are how it was reached (the module's docstring).
        # A process killed by a signal is named by it: a segfault is not an exception's bug.
        said = (signature.kind if signature.outcome == "hard-crash"
                else "" if downstream(signature.message) else fold(signature.message))
        return BugIdentity(comp, Anchor.GRAPH, symptom,
                           needed_ops(graph, general, producers_only=rejects_operand(signature.message),
                                      by_fold=signature.outcome == "hard-crash"), said,
                           phase, device)
    if signature.outcome == "unfused":
        # A fallback is named by the ops it declined and the layouts of the inputs that made it
        # decline (a sliced or expanded operand): its constants and values are not read.
        return BugIdentity(comp, Anchor.GRAPH, symptom, needed_ops(graph, general), input_layouts(graph), phase, device)
    form = graph_form(graph, _dtype_policy(signature), focus=not judged, generalisation=general)
    return BugIdentity(comp, Anchor.GRAPH, symptom, form, "", phase, device)


def wrong_among_outputs(graph: Graph, generalisation: Generalisation | None) -> bool:
    """Whether a reduced graph's wrong value is no op's but its several outputs': the failure needs
    them all (the reducer drops every output it can), and the probe of each op's own value
    (fuzzfuse.reduce.generalise) found none wrong as the first output, or found one that any op of
    its kind stands in for (a filler). nvFuser's fusions of a contiguous and a permuted input wrote
    one output's values into another: add beside log came back holding log's -inf, neg beside a
    where held the where's values, and div beside eq was right when put first; keyed by their ops
    (*binary, *unary, the graph), each was a new bug, and neg's matched an abs bug."""
    if generalisation is None or not generalisation.probed or len(graph.outputs) < 2:
        return False
    culprit = generalisation.culprit
    return culprit is None or culprit[0] in {k for k, _ in generalisation.ops}


def input_layouts(graph: Graph, channels_last_permuted: bool = False) -> str:
    """The layouts of the tensors a graph reads, sorted ("contiguous/permuted"); with
    `channels_last_permuted`, a channels_last tensor is named a permuted one (the outputs rule
    reads memory order only; a fallback's guard may reject channels_last alone)."""
    kinds = {"permuted" if channels_last_permuted and i.layout.kind == "channels_last" else i.layout.kind
             for i in graph.without_dead_code().inputs if isinstance(i, TensorInput)}
    return "/".join(sorted(kinds))


def crash_of_graph(identity: BugIdentity) -> bool:
    """Whether an identity is a crash named by the ops its graph needs (`needed_ops`)."""
    return identity.anchor is Anchor.GRAPH and identity.symptom is Symptom.CRASH


def ops_reaching_alike(a: str, b: str, named: bool = False) -> bool:
    """Whether two `needed_ops` forms name one crash: position by position, the same dtype class
    (any, for an op that only moves data: a slice of int32 crashes as a slice of float32 does) and
    an op both reach it with (an op kind, `*binary`, only itself). `named`: the crash is named by a
    signal or a message of its own; where both forms begin with an op that only moves data, the
    crash is in that op's indexing, and the ops it needs after it are observers that made it a
    kernel (nvFuser's neg -> gather killed the process with a logical_not, a gelu or an expand
    after it; a slice of int32 then two casts raised its unordered_map::at as a slice of float32
    then neg had). Not so for an op that computes: oneDNN Graph's add -> add segfault came with
    torch 2.11, its elu -> add one is in every build."""
    left, right = a.split(" "), b.split(" ")
    if named and all(":" in x for x in left + right) and _moves_data(left[0]) and _moves_data(right[0]):
        left, right = left[:1], right[:1]
    if len(left) != len(right):
        return False
    return all(_reach_alike(x, y) for x, y in zip(left, right))


def _moves_data(form: str) -> bool:
    """Whether every op of a `needed_ops` position ("slice:int", "amax/amin:float") only moves data."""
    return all(op in OPS and OPS[op].kind in MOVES_DATA for op in form.rpartition(":")[0].split(OPS_REACHING))


def _reach_alike(x: str, y: str) -> bool:
    (x_ops, _, x_class), (y_ops, _, y_class) = x.rpartition(":"), y.rpartition(":")
    if x == y:
        return True
    if not x_ops or not y_ops or not set(x_ops.split(OPS_REACHING)) & set(y_ops.split(OPS_REACHING)):
        return False
    return x_class == y_class or (_moves_data(x) and _moves_data(y))


def culprit_device(backend: str, culprit: str, shared: str, found_on: str) -> str:
    """The device a culprit's identity names: `shared` ("" where it failed alike on each device
    its lowering runs on), unless each device writes that op's code for itself
    (`Backend.per_device_code`): then the device it was found on."""
    return found_on if culprit in per_device_code(backend) else shared


def culprit_op(backend: str, op: str, device: str, attrs: dict | None = None) -> tuple[str, str]:
    """(the component at fault, the op named) for a wrong value of `op` (with `attrs`) on
    `backend`: an op computed from another (std from var in every fuser, var_mean's var output
    too; Inductor's elu from expm1) is that op's bug, and an op the fuser computes with eager's
    own kernel on `device` (Inductor's C++ fmod) is eager's."""
    culprit = computes_from(backend, device).get(op) or (OPS[op].computed_by(attrs or {}) if op in OPS else None) or op
    at_fault = component(EAGER_FAULT) if culprit in eager_kernels(backend, device) else component(backend)
    return at_fault, culprit


def live_positions(graph: Graph) -> list[int]:
    """The positions of the ops some output reads, in graph order."""
    live = {n.name for n in graph.without_dead_code().nodes}
    return [k for k, n in enumerate(graph.nodes) if n.name in live]


def culprit_position(graph: Graph, generalisation: Generalisation | None) -> int | None:
    """Where a wrong result starts. Where the reducer probed each op's own value
    (fuzzfuse.reduce.generalise): the first op found wrong; else the last op, where it fails alone
    on the operands eager computes for it (the ops before only made a special operand); else the
    first op that is no filler (the module's docstring says why). Where nothing was probed: the
    graph's one op that is no filler. None where that cannot be told: every op is a filler, or
    several ops remain and nothing says which matters (NNC and oneDNN Graph fuse two ops or more,
    so a reduced graph of theirs keeps one beside the op that matters)."""
    fillers = {k for k, _ in generalisation.ops} if generalisation is not None else set()
    candidates = [k for k in live_positions(graph) if k not in fillers]
    if generalisation is None or not generalisation.probed:
        return candidates[0] if len(candidates) == 1 else None
    if generalisation.culprit and generalisation.culprit[0] in candidates:
        return generalisation.culprit[0]
    last = generalisation.first_wrong_op(graph)
    if generalisation.alone and last in candidates:
        return last
    if len(graph.outputs) > 1:
        # Nothing says which output is wrong, nor whether the op that is no filler feeds it: an
        # nvFuser fusion whose add output came back holding its other output's log values was
        # keyed as a log bug, which any wrong log would have matched.
        return None
    # The first that is no identity: a cast to the dtype it already has hands its values on as
    # they are. NNC's log_softmax of one element is -1.2e-38, within the tolerance alone, nan
    # through pow(v, v): cast(float32 -> float32) -> log_softmax -> pow was keyed by the cast, a
    # new bug beside the committed log_softmax -> eq one. (An op that moves data is no identity:
    # a strided slice's indexing, a reshape's shape rule are where such bugs are.)
    # An op whose fused value was eager's bit for bit (`Generalisation.exact`) did not start it
    # where an op after it, before the last, gave another value: NNC's floor of -6.4e-40 is -1 as
    # eager's, and its remainder's -0.0, which the tolerance forgave, made pow inf. Where only the
    # last op is left, the pair is the bug and its first op names it (oneDNN's log is exact as an
    # output; log then add, fused, is wrong), unless the fuser rewrites the pair as one pattern
    # (`rewritten_pair`).
    inexact = [k for k in candidates if k not in generalisation.exact and k != last]
    if inexact and candidates and candidates[0] in generalisation.exact:
        return inexact[0]
    types = graph.infer_types()
    computing = [k for k in candidates if not _identity_cast(graph.nodes[k], types)]
    return (computing or candidates)[0] if candidates else None


def rewritten_pair(backend: str, graph: Graph, generalisation: Generalisation | None) -> tuple[int, str] | None:
    """(the position of the pair's second op, the pattern's name) where a reduced graph's wrong value
    is a pattern the fuser rewrites a pair of ops as (`Backend.rewrites_pairs`): two ops left that
    are no fillers, the probe found neither wrong on eager's operands, and the second is the first
    wrong. Inductor's scaled softmax rewrite computes softmax(x * c) as (x - max(x)) * c: its mul is
    right, its softmax right alone, and named by the mul the pair was matched to two other mul bugs
    (a folded mul by zero; mul -> sub contracted to a fused multiply-add). A pair no fuser declares
    is its first op's (`culprit_position`): oneDNN's log is right as an output, wrong as add's
    operand in one fusion, and any op that reads it there shows it."""
    if generalisation is None or not generalisation.probed or generalisation.alone or len(graph.outputs) > 1:
        return None
    fillers = {k for k, _ in generalisation.ops}
    candidates = [k for k in live_positions(graph) if k not in fillers]
    if len(candidates) != 2 or (generalisation.culprit and generalisation.culprit[0] in candidates):
        return None
    first, second = candidates
    if second != generalisation.first_wrong_op(graph) or graph.nodes[first].name not in graph.nodes[second].refs():
        return None
    ops = (graph.nodes[first].op, graph.nodes[second].op)
    return next(((second, name) for name, (firsts, seconds) in rewrites_pairs(backend).items()
                 if ops[0] in firsts and ops[1] in seconds), None)


def broadcasts_a_made_extent_one(graph: Graph) -> bool:
    """Whether an op that only moves data makes a dim of extent 1 out of a larger one, and an
    elementwise op broadcasts that dim against an operand's larger extent: reading it directly, or
    through elementwise ops that keep the dim at 1 (Inductor with dynamic shapes: a slice of one
    element, then ge against a scalar, then an add of a two-element tensor, as a slice read by
    addcmul beside its own source)."""
    types = graph.infer_types()
    for node in graph.nodes:
        refs = node.refs()
        if node.op not in OPS or OPS[node.op].kind not in MOVES_DATA or not refs:
            continue
        source, made = types[refs[0]].shape, types[node.name].shape
        if source is None or made is None or len(source) != len(made):
            continue
        # counted from the last dim, as broadcasting aligns shapes
        ones = [d - len(made) for d in range(len(made)) if made[d] == 1 and source[d] > 1]
        if ones and _broadcast_later(graph, types, node.name, ones):
            return True
    return False


def _broadcast_later(graph: Graph, types: dict, name: str, dims: list[int]) -> bool:
    """Whether an elementwise op reads `name`, or a value elementwise ops made of it with `dims`
    (counted from the last) still of extent 1, beside an operand wider than 1 at one of them."""
    def extent(ref: str, d: int) -> int:
        shape = types[ref].shape or ()
        return shape[d] if -len(shape) <= d else 1
    carriers = {name}
    for reader in graph.nodes:
        refs = reader.refs()
        if not carriers.intersection(refs) or reader.op not in OPS or OPS[reader.op].kind not in ELEMENTWISE:
            continue
        if any(extent(other, d) > 1 for other in refs if other not in carriers for d in dims):
            return True
        carriers.add(reader.name)
    return False


def _identity_cast(node, types) -> bool:
    """A cast to its operand's own dtype."""
    return node.op in OPS and OPS[node.op].kind == "cast" and types[node.refs()[0]].dtype == types[node.name].dtype


def filler_culprit(graph: Graph, generalisation: Generalisation | None) -> tuple[int, str] | None:
    """Where every live op of a reduced graph is a filler, the culprit the generalisation still
    names: (position, op kind) of the one live op, or of the probed culprit; None elsewhere. Any
    op of that kind fails there the same way (oneDNN Graph's binary ops with a 0-d operand all
    return the wrong dtype; any reduction over an expanded dim, the wrong shape): the bug is the
    kind's (`*binary`), which `same_bug` matches with each op of the kind."""
    if generalisation is None:
        return None
    positions = live_positions(graph)
    kinds = dict(generalisation.ops)
    if not positions or any(k not in kinds for k in positions):
        return None
    if generalisation.culprit and generalisation.culprit[0] in positions:
        return generalisation.culprit[0], kinds[generalisation.culprit[0]]
    return (positions[0], kinds[positions[0]]) if len(positions) == 1 else None


def one_of_kind(a: str, b: str) -> bool:
    """Whether two culprits are one: equal, or one is a kind (`*reduction`) the other op is of."""
    if a == b:
        return True
    wild, op = (a, b) if a.startswith("*") else (b, a)
    return wild.startswith("*") and op in OPS and OPS[op].kind == wild[1:]


def conversion_of_kind(a: BugIdentity, b: BugIdentity) -> bool:
    """Whether one culprit is a kind every op of which is wrong across a dtype conversion (`*unary`
    on int->float: exp, sin, ... of an int64 that each promotes to float32) and the other is a
    cast alone: what all those ops share is the conversion, so a cast that is wrong across it is
    the same fault (Inductor CPU's unsafe-math int64 -> float32 gives 0 for exp's input and for a
    plain .to(torch.float32)). same_bug still asks for the same conversion (the dtype class)."""
    wild, other = (a, b) if a.where.startswith("*") else (b, a)
    return wild.where.startswith("*") and other.where == "cast" and "->" in wild.detail


def needed_ops(graph: Graph, generalisation: Generalisation | None, producers_only: bool = False,
               by_fold: bool = False) -> str:
    """The ops a reduced graph needs, each with its dtype class, in graph order (a position where
    other ops too kept the failure, too few for a filler, is named by all of them: "amax/amin:float",
    which `same_bug` matches with either); where every op is
    a filler, the set of their kinds ("*binary *reduction"): a crash with no location (an illegal
    memory access) that any op of each kind reaches is still that graph's, not every such crash's;
    but the order and count of interchangeable ops are how it was reached (oneDNN Graph's
    "partition compile failed" on a 0-d float32 came as relu -> add, add -> abs and
    log -> div_floor -> div_floor, keyed as three bugs).
    producers_only: where some op feeds another, the ops that feed none (they only consumed a
    value) are left out too. by_fold: a constant region the failure needs (`Generalisation.folded`)
    is named once, however it was made; only for a process killed by a signal, where a fold that
    reaches code generation is the likely fault: an exception's message names its own (TorchScript's
    add(x, True) of a bool is typed Long, which where rejects: given as a bool input, the add is
    gone and so is the error, with no fold involved)."""
    fillers = dict(generalisation.ops) if generalisation is not None else {}
    live = graph.without_dead_code()
    read = {r for n in live.nodes for r in n.refs()}
    names = {n.name for n in live.nodes}
    if producers_only and names & read:
        names &= read
    kept = {}
    for k, op in (generalisation.kept if generalisation is not None else ()):
        kept.setdefault(k, set()).add(op)
    # A constant the fuser had to fold (`Generalisation.folded`) is one value however it was made:
    # named once, where its region ends, by the class of that value.
    region = set(generalisation.folded) if generalisation is not None and by_fold else set()
    folded = _constant_makers(graph, region)
    last_folded = max(region, default=None)
    ops = []
    for k, n in enumerate(graph.nodes):
        if k in fillers:
            continue
        if k == last_folded:
            ops.append(f"{FOLDED}:{dtype_class(graph, k)}")
        elif n.name in names and k not in folded:
            ops.append(f"{OPS_REACHING.join(sorted({n.op} | kept.get(k, set())))}:{dtype_class(graph, k)}")
    kinds = sorted({f"*{fillers[k]}" for k, n in enumerate(graph.nodes) if n.name in names and k in fillers})
    return " ".join(ops or kinds) or "*"


def _constant_makers(graph: Graph, folded: set[int]) -> set[int]:
    """The positions of a folded constant (`Generalisation.folded`) and of every op that only
    feeds it (neg(x) of add(x, neg(x))): how the constant was made, all of it."""
    if not folded:
        return set()
    names = [n.name for n in graph.nodes]
    readers: dict[str, set[int]] = {}
    for k, node in enumerate(graph.nodes):
        for r in node.refs():
            readers.setdefault(r, set()).add(k)
    made = set(folded)
    for k in reversed(range(len(graph.nodes))):
        if k not in made and names[k] not in graph.outputs and readers.get(names[k]) and readers[names[k]] <= made:
            made.add(k)
    return made


def dtype_class(graph: Graph, position: int, result: bool = True,
                generalisation: Generalisation | None = None) -> str:
    """The class of dtype an op computes in: the category of its widest tensor operand ("float",
    "int", "bool"), and of its result where that differs ("int->float" for a cast; a comparison is
    "float->bool"); without `result`, the operand's alone. The exact dtype is a form: one lowering
    is wrong for float32 and float64 alike. An integer input the failure survives as float32
    (`generalisation.as_float`) counts as float: the op's float path is at fault, not the integer."""
    node = graph.nodes[position]
    types = graph.infer_types()
    floats = {graph.inputs[k].name for k in generalisation.as_float} if generalisation is not None else set()
    operands = [2 if r in floats else category(types[r].dtype) for r in node.refs() if r in types and types[r].dtype]
    result_dtype = types[node.name].dtype if node.name in types else ""
    if not operands:
        return CATEGORY_NAMES[category(result_dtype)] if result_dtype else ""
    widest = max(operands)
    out = category(result_dtype) if result_dtype and result else widest
    return CATEGORY_NAMES[widest] if out == widest else f"{CATEGORY_NAMES[widest]}->{CATEGORY_NAMES[out]}"


def _dtype_policy(signature: Signature) -> str:
    """How much of the dtypes a graph-keyed identity keeps: a wrong shape reads none, anything
    else the category (the same fallback for float16 and float32 inputs is one bug)."""
    if signature.outcome == "mismatch" and signature.kind in ("shape", "strides"):
        return "none"
    return "category"


def root_cause_key(signature: Signature | None, graph: Graph | None = None,
                   generalisation: Generalisation | None = None, device: str = "") -> str | None:
    """The index key of `identify`'s identity (None where it has none): what a dict of known bugs
    is keyed by."""
    identity = identify(signature, graph, generalisation, device)
    return identity.key() if identity is not None else None


def variant_identity(variant: Variant, device: str = "") -> BugIdentity | None:
    """A folded variant's identity (`also_seen_as[]`), from its recorded signature and, where it
    kept them, its graph and that graph's generalisation; `device`: its directory's."""
    return identify(variant.signature, variant.graph, variant.generalisation, device)


def case_identity(case: Case) -> BugIdentity | None:
    """A saved case's identity as today's oracle names it (its recorded error re-read by
    `signature_today`), on its reduced graph."""
    if case.signature is None:
        return None
    return identify(signature_today(case.signature, case.detail), case.graph, case.generalisation, case.device)
