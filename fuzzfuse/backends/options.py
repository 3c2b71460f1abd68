"""A case's per-case backend choices (`Options`): what a campaign draws for each case beside its
graph (`Backend.draw_options`), records in the case file's "options", runs the case under again
(rechecks, replays, reduction queries, the repro), and the reducer drops where the failure does not
need them (`Backend.simpler_options`).

Every field any backend draws is declared here, with what a case file may set it to, so that a case
validates on load without importing any backend: a case file is data and never chooses code to run
(a free Inductor config name could point it at another C++ compiler). A backend says which fields
its `run` takes as keywords (`Backend.option_fields`) and reads the others it uses by name.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.untrusted import record, strings, take
from .inductor_config import InductorConfig
from .nvfuser_emit import STYLES

# nvFuser switches a case may turn off for its own fusion (`fd.execute(..., _disable_options=...)`,
# as nvFuser's own tests do). matmul_expr_eval: a matmul/linear segment is otherwise handed to ATen
# (the expr_eval scheduler comes first in the segmenter's order), so the matmul scheduler is reached
# only with it off. Without it, a matmul the matmul scheduler refuses (fp32, a matrix-vector
# product) has no scheduler at all: that is the switch's contract, reported as unsupported.
DISABLE_CHOICES = ("matmul_expr_eval",)
# What a switch turned off needs turned on, per fusion too (`_enable_options`): the matmul scheduler
# takes a MatmulOp/LinearOp only with fuse_matmul (csrc/scheduler/matmul_utils.cpp), so without it a
# matmul with matmul_expr_eval off has no scheduler at all. nvFuser's own test of the switch
# (tests/python/direct/test_python_direct.py) passes both; the process-wide NVFUSER_ENABLE is read
# once per process, and a test or a user's script may have imported nvFuser without it.
ENABLE_WITH = {"matmul_expr_eval": ("fuse_matmul",)}


def execute_switches(disable) -> dict[str, list[str]]:
    """fd.execute's keyword arguments for a case's switches: those turned off, and what they need
    turned on ({} for none)."""
    if not disable:
        return {}
    enable = [name for off in disable for name in ENABLE_WITH.get(off, ())]
    return {**({"_enable_options": enable} if enable else {}), "_disable_options": list(disable)}


def checked_disable(names) -> tuple[str, ...]:
    """A case's nvFuser switches to turn off: only those of DISABLE_CHOICES (a case file is data)."""
    names = tuple(names or ())
    unknown = [n for n in names if n not in DISABLE_CHOICES]
    if unknown:
        raise ValueError(f"unknown nvFuser disable option {unknown[0]!r}; one of {DISABLE_CHOICES}")
    return names


@dataclass(frozen=True)
class Options:
    """The choices one case runs under; None: not drawn (the backend's default). `style`: nvFuser's
    lowering (nvfuser_emit.STYLES); `disable`: nvFuser switches turned off (DISABLE_CHOICES);
    `inductor_config`: Inductor's configuration (inductor_config.InductorConfig)."""

    style: str | None = None
    disable: tuple[str, ...] | None = None
    inductor_config: InductorConfig | None = None

    def __post_init__(self) -> None:
        if self.style is not None and self.style not in STYLES:
            raise ValueError(f"unknown nvFuser emission style {self.style!r}; one of {STYLES}")
        if self.disable is not None:
            checked_disable(self.disable)

    def keywords(self, fields: tuple[str, ...]) -> dict:
        """Those of `fields` that are set, as the keywords of a backend's `run`."""
        return {name: getattr(self, name) for name in fields if getattr(self, name) is not None}

    def to_json(self) -> dict:
        """Only the fields drawn: a case of a backend without choices records none."""
        out: dict = {}
        if self.style is not None:
            out["style"] = self.style
        if self.disable is not None:
            out["disable"] = list(self.disable)
        if self.inductor_config is not None:
            out["inductor_config"] = self.inductor_config.to_json()
        return out

    @staticmethod
    def from_json(d: dict) -> "Options":
        """Validated: a case file is untrusted input."""
        d = record(d, "options", ("style", "disable", "inductor_config"))
        config = take(d, "inductor_config", dict, "options", None)
        return Options(take(d, "style", str, "options", None), strings(d, "disable", "options", None),
                       InductorConfig.from_json(config) if config is not None else None)
