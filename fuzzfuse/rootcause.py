"""Folding a failure's words into what names its bug: a crash's native assert, a specific message
with op names, dtypes and numbers folded out (beside the component its backend's route reaches,
which the backend declares: `Backend.component`, read by name with backends.registry.component).

A signature's coarse key (`Signature.key()`) keeps every word of the normalized message, so that a
reduction never slips to another failure. That makes it a surface, not a bug: one missing evaluator
op is a dozen keys (one per op name), one oneDNN rewrite a dozen more. These rules fold what does
not tell bugs apart; fuzzfuse.identity builds a bug's identity from them.

- A crash anchored at a native assert (a C++ location of the fuser, not an ATen argument check) is
  named by its component, location and message with op names, dtypes, identifiers and numbers
  folded out. Route (nvfuser / aot:nvfuser), stage (compile / run) and outcome (raised / aborted)
  are folded too: one assert is one bug whichever way it was reached.
- A crash with no native location whose message is specific (NNC's "Invalid integral op_type",
  oneDNN's "IValue is not a Scalar") is named by that message, folded the same way. A message is
  not specific when it says nothing (an empty error, "(in aten.OP)"), when it names an op or a
  dtype (an op rejecting its operands, downstream of the cause), or when it is one a fuser raises
  for any failure of a stage or a library check (GENERIC_MESSAGES). An Inductor C++ compile error
  that could not combine two of ATen's vector templates is named by the compiler's error with the
  generated code's types folded out (`fold_cpp_compile`).
"""
from __future__ import annotations

import re
from dataclasses import replace

from .ir import OPS
from .oracle import (EMPTY_ERROR, FAILING_CONTEXT, Signature, cpp_compile_error, cpp_location, normalize, nvrtc_error,
                     triton_compile_error)

_NATIVE = re.compile(r"\.(?:cpp|cc|cu|cuh|h|hpp):\d+$")
# ATen's and c10's own argument checks: they fire for whatever caller passed a bad size, so their
# location names the symptom; the fuser that computed the size is the bug.
_LIBRARY_CHECKS = ("aten/", "c10/")


# Messages that name no cause, compared (from their start) after `fold`: a crash that says only
# this keeps its reduced graph's key. A fuser raises some for whatever failed in a stage; the others
# are a library's checks, which fire for whatever caller passed a bad value (a symptom, as an ATen
# location is).
# ATen's argument checks: they fire for whatever caller passed a bad value, downstream of its cause.
# Those of an operand's sizes: raised where an op meets a value of a shape it cannot take, which the
# op before it may have made so (oneDNN Graph's add of a 0-d tensor gives one of shape (1,), which
# TorchScript autodiff's expand back to () then rejects).
_SIZE_CHECKS = re.compile(r"The expanded size of the tensor|shape 'S' is invalid|The size of tensor a"
                          r"|.*the number of sizes provided")
ATEN_CHECKS = re.compile(
    _SIZE_CHECKS.pattern + r"|expected scalar type|Expected tensor for argument|Boolean value of Tensor"
    r"|Cannot access data pointer|.*not implemented for")
GENERIC_MESSAGES = re.compile("|".join((
    r"partition compile failed$", r"could not OP op to the graph$",  # oneDNN Graph: any failure of a stage
    r"The following operation failed in the TorchScript interpreter",  # wraps any error
    r"C\+\+ compile error$",  # Inductor: any bad generated code
    r"CUDA error:",  # a kernel fault: any bad index or size
    r"(?:unordered_map::at|bad optional access|vector::_M_range_check)$",  # the C++ standard library
    ATEN_CHECKS.pattern,
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
    if construct := fold_cpp_compile(signature.message):
        return construct
    # NNC's IR dump is the case's expression: a `double(...)` cast in it names no operand.
    said = _FAILED_AT.sub(" ", _own_words(signature.message))
    text = fold(signature.message)
    if len(_WORD.findall(said)) < 2 or GENERIC_MESSAGES.match(text) or names_an_operand(said):
        return ""
    return text


# ATen's checks that an op makes of its operands' dtypes: the op that raises them only rejected a
# value made before it.
_DTYPE_REJECTIONS = re.compile(r".*not implemented for|expected scalar type|Boolean value of Tensor")


def downstream(message: str) -> bool:
    """Whether a crash's message says only where a bad value surfaced: an op rejecting its operands
    (`rejects_operand`) or one of ATen's argument checks."""
    return rejects_operand(message) or bool(ATEN_CHECKS.match(fold(message)))


def rejects_operand(message: str) -> bool:
    """Whether a crash's message is an op refusing the dtype of its operand, in words of its own
    (`names_an_operand`: "Boolean inputs not supported for relu") or ATen's: the op that raised it
    is not the bug, what made its operand is. (A size check is not: a backward formula that
    broadcasts wrongly raises one for its own op.)"""
    if fold_cpp_compile(message):
        return False  # the generated code's types, not an operand's: the construct is the bug
    return names_an_operand(_own_words(message)) or bool(_DTYPE_REJECTIONS.match(fold(message)))


def operand_fault(signature: Signature) -> str:
    """The wrong output (an `oracle.MISMATCH_KINDS` kind) that a crash may only have surfaced: "dtype"
    where an op refused its operand's dtype (`rejects_operand`), "shape" where one of ATen's size
    checks rejected its operand's sizes; "" for any other failure. The reducer reduces such a crash
    on to the op that gave the operand that wrong dtype or shape, where one did (its own bug)."""
    if signature.outcome != "crash":
        return ""
    if _SIZE_CHECKS.match(fold(signature.message)):  # it quotes the operand's type too: sizes first
        return "shape"
    return "dtype" if rejects_operand(signature.message) else ""


def names_an_operand(message: str) -> bool:
    """Whether a message names an op or a dtype: an op's check of its operands ("Boolean inputs
    not supported for relu"), which fires downstream of whatever produced the bad value (oneDNN's
    rewrite of `x + 0` leaves a bool tensor that relu, neg or abs then rejects in words of its own)."""
    return any(p.search(message) for p in (_OP_WORDS, _ATEN_OP, _DTYPE_WORDS))


def anchored(signature: Signature) -> bool:
    """Whether a crash names its root cause without a reduction: a native assert or a specific
    message."""
    return native_assert(signature) or bool(specific_message(signature))


# ---- folding a message ------------------------------------------------------------------------
_WRAPPER_PREFIX = re.compile(r"^(?:\s*(?:\w+(?:Error|Exception):|Error from segmentation group N:))+\s*")
_OPERATOR = re.compile(r"(operator type):?\s+\w+")
_ATEN_OP = re.compile(r"\b(aten|prim)(::|\.)\w+")
_DTYPE_WORDS = re.compile(
    r"(?:\bnvf::)?\b__(?:half|bfloat|e4m3|e5m2|e8m0|e2m1)\b"
    r"|\b(?:torch\.)?float8_e(?:4m3fn|5m2|4m3fnuz|5m2fnuz|8m0fnu)\b"
    r"|\b(?:torch\.)?(?:float|double|half|bfloat16|float16|float32|float64|int8|int16|int32|int64|uint8|bool|long|int"
    r"|int64_t|int32_t)\b"
    r"|\b(?:torch\.(?:cuda\.)?)?(?:CPU|CUDA)?(?:Float|Double|Half|BFloat16|Long|Int|Bool|Byte)(?:Type|Tensor)?\b")
_OP_WORDS = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, OPS), key=len, reverse=True)) + r")\b")
_NUMBERED_NAME = re.compile(r"\b[A-Za-z_]\w*?\d+\b")
# NNC's "MALFORMED INPUT: <what> - <the IR expression>": the expression is the case's, not the bug's.
_IR_DUMP = re.compile(r"^(.*MALFORMED INPUT: [^-]*?) - .*$", re.S)
# TorchScript's "Schema not found for node. File a bug report. Node: = prim::Return(...)": the node
# it prints is the case's graph, not an op that rejected its operand.
_JIT_NODE_DUMP = re.compile(r"^(.*?)\s*\bNode:\s.*$", re.S)


def _own_words(message: str) -> str:
    """A crash's message without its wrapper prefixes and the case's IR or node it quotes."""
    return _JIT_NODE_DUMP.sub(r"\1", _IR_DUMP.sub(r"\1", _WRAPPER_PREFIX.sub("", message)))
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


# An Inductor C++ compile error as oracle.cpp_compile_error words it, where what its generated code
# could not combine are two of ATen's vector templates (operator< of VecMask<BFloat16, 1> and
# VecMask<float, 1>; '?:' of VecMask<int, 1> and VecMask<float, 1>). A vector template holds any
# element type, and combining two needs a conversion that only the consumer's code can insert:
# the construct is the bug, which ops made the masks and of what types is how it was reached. The
# key keeps the error, the function, the operator aside, and the templates' names, with every type
# and count folded. Two scalar types that do not go together (max_propagate_nan(short int&, int&))
# are not folded so: a small int op whose C++ result is promoted to int is that op's own fix
# upstream (neg and mul became `decltype(x)(...)` after pytorch#93380), and identity keys it by it.
_VECTOR_TEMPLATES = re.compile(r"\b(?:VecMask|Vectorized|VectorizedN)<")
_CPP_KEY = re.compile(r"^C\+\+ compile error: (.+)$", re.S)
_CPP_NAMESPACE = re.compile(r"\b(?:[A-Za-z_]\w*::)+")
_CPP_OPERATOR = re.compile(r"\boperator\s*[^\s\w(]+")
_CPP_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
_CPP_TYPE = re.compile(r"\b(?:(?:unsigned|signed)\s+)?(?:char|short(?:\s+int)?|long(?:\s+long)?(?:\s+int)?|int|u?int\d+_t"
                       r"|bool|float|double|half|Half|BFloat16|Float8_\w+)\b")


def fold_cpp_compile(message: str) -> str:
    """A C++ compile error's key (see above); "" for any other message. The normalizer may have cut
    a long message inside its last type: an unclosed template is dropped and the brackets closed
    again, so the cut and the whole message fold alike."""
    m = _CPP_KEY.match(message)
    if not m or not _VECTOR_TEMPLATES.search(m.group(1)):
        return ""
    error = _CPP_OPERATOR.sub("operator OP", _CPP_NAMESPACE.sub("", m.group(1)))
    while _CPP_TEMPLATE_ARGS.search(error):
        error = _CPP_TEMPLATE_ARGS.sub("", error)
    error = re.sub(r"<[^>]*$", "", error)
    error = _CPP_TYPE.sub("T", error).replace("&", "")
    error = re.sub(r"[0-9]+", "N", error).rstrip(") ")
    return f"C++ compile error: {error}{')' * (error.count('(') - error.count(')'))}"


def fold(message: str) -> str:
    """A normalized message with what varies between reports of one bug folded out: wrapper
    prefixes, op names ("Unexpected operator type silu" -> "... OP"), dtypes and numbered names.
    The detail keeps them; the key must not. An NVRTC error folds by its own rule (fold_nvrtc)."""
    if compiled := fold_nvrtc(message) or fold_cpp_compile(message):
        return compiled
    text = _own_words(message)
    text = _OPERATOR.sub(r"\1 OP", text)
    text = _ATEN_OP.sub(r"\1\2OP", text)
    text = _DTYPE_WORDS.sub("DTYPE", text)
    text = _OP_WORDS.sub("OP", text)
    # The cut keeps one bug's messages alike where the normalizer cut them at different places.
    return _NUMBERED_NAME.sub("ID", text).strip()[:FOLDED_LENGTH]


# ---- the corpus ---------------------------------------------------------------------------------
def signature_today(signature: Signature, detail: str) -> Signature:
    """A recorded crash signature as today's oracle computes it from the recorded error text: a
    repro keyed before the parallel-compile wrapper was unwrapped, or before NVRTC failures were
    named by their compiler error, gets its innermost location and message; an Inductor C++ (or
    Triton) compile error recorded before it was named by its compiler's error gets that message, and
    one recorded by an empty-looking first line ("TypeError:") the paragraph below it."""
    error = detail.split(FAILING_CONTEXT)[0]
    if signature.outcome == "crash" and (cpp_compile_error(error) or triton_compile_error(error)) \
            and not cpp_location(error):
        return replace(signature, message=normalize(error))
    if signature.outcome == "crash" and EMPTY_ERROR.match(signature.message) and "<--- HERE" not in error:
        # A detail recorded without the type's own line (TorchScript's "RuntimeError:" above "Schema
        # not found for node") gets it back: today's oracle reads the paragraph below it.
        typed = error if error.lstrip().startswith(signature.message) else f"{signature.message}\n{error.lstrip()}"
        if normalize(typed).startswith(f"{signature.message} "):
            return replace(signature, message=normalize(typed))
    location = cpp_location(error)
    if signature.outcome != "crash" or not location or (location == signature.location and not nvrtc_error(error)):
        return signature
    return replace(signature, location=location, message=normalize(error))
